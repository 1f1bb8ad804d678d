/* float64 instantiation of src/s2s_core.inc (mhad_decoder_block_*, mhad_s2s_*), for
 * gradient checks and parity. */
#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name /* internal names (src/mha_internal.h, gpt_shared.inc) */
#include "mha_internal.h" /* every header first: then the float64 names */
#include "names_f64.h"
#include "s2s_core.inc"
