/* float64 instantiation of src/optim_core.inc (mhad_optimizer, mhad_optim_*): the same
 * optimizers on double parameters, gradients and moments. */
#define REAL double
#define X(name) mhad_##name
#include "mha_internal.h" /* every header first: then the float64 names */
#include "names_f64.h"
#include "optim_core.inc"
