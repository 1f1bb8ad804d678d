/* float32 instantiation of src/s2s_core.inc (mha_decoder_block_*, mha_s2s_*), and the
 * untyped helper of include/mha_s2s.h. */
#include "mha.h"

uint64_t mha_s2s_block_seed(uint64_t seed, size_t enc_layers, int decoder, size_t l)
{
    return mha_gpt_block_seed(seed, decoder ? enc_layers + l : l);
}

#define REAL float
#define X(name) mha_##name
#define PRIV(name) mha__s##name /* internal names (src/mha_internal.h, gpt_shared.inc) */
#include "s2s_core.inc"
