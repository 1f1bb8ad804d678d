/* float64 instantiation of src/gpt_core.inc (mhad_block_*, mhad_gpt_*), for gradient
 * checks and parity. */
#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name /* internal names (src/mha_internal.h) */
#include "gpt_core.inc"
#include "s2s_core.inc" /* the encoder–decoder (mha_s2s_*, mha_decoder_block_*) */
