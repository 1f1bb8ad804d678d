/* float64 instantiation of src/optim_core.inc (mhad_optimizer, mhad_optim_*): the same
 * optimizers on double parameters, gradients and moments. */
#define REAL double
#define X(name) mhad_##name
#include "optim_core.inc"
