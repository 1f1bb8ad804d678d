/* float32 instantiation of src/gpt_core.inc (mha_block_*, mha_gpt_*) and src/s2s_core.inc
 * (mha_decoder_block_*, mha_s2s_*), and the untyped helpers of include/mha_gpt.h. */
#include "mha.h"

uint64_t mha_gpt_block_seed(uint64_t seed, size_t layer)
{
    /* splitmix64 of seed + (layer + 1)·golden-ratio increment */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * ((uint64_t)layer + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t mha_s2s_block_seed(uint64_t seed, size_t enc_layers, int decoder, size_t l)
{
    return mha_gpt_block_seed(seed, decoder ? enc_layers + l : l);
}

#define REAL float
#define X(name) mha_##name
#define PRIV(name) mha__s##name /* internal names (src/mha_internal.h) */
#include "gpt_core.inc"
#include "s2s_core.inc" /* the encoder–decoder (mha_s2s_*, mha_decoder_block_*) */
