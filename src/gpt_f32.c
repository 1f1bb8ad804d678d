/* float32 instantiation of src/gpt_core.inc (mha_block_*, mha_gpt_*), and the untyped
 * helper of include/mha_gpt.h. */
#include "mha.h"

uint64_t mha_gpt_block_seed(uint64_t seed, size_t layer)
{
    /* splitmix64 of seed + (layer + 1)·golden-ratio increment */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * ((uint64_t)layer + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define REAL float
#define X(name) mha_##name
#define PRIV(name) mha__s##name /* internal names (src/mha_internal.h) */
#include "gpt_core.inc"
