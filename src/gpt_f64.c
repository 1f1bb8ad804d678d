/* float64 instantiation of src/gpt_core.inc (mhad_block_*, mhad_gpt_*), for gradient
 * checks and parity. */
#define REAL double
#define X(name) mhad_##name
#include "gpt_core.inc"
