/* float64 instantiation of src/gpt_core.inc (mhad_block_*, mhad_gpt_*), for gradient
 * checks and parity. */
#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name /* internal names (src/mha_internal.h) */
#include "mha_internal.h" /* every header first: then the float64 names */
#include "names_f64.h"
#include "gpt_core.inc"
