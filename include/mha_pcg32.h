/*
 * PCG32 (PCG-XSH-RR 64/32), written from the published algorithm
 * (M. E. O'Neill, "PCG: A Family of Simple Fast Space-Efficient Statistically Good
 * Algorithms for Random Number Generation", 2014) and tested against the PCG
 * authors' published outputs (tests/test_pcg32.c).
 *
 * A generator is a plain value (two 64-bit words); copy it to fork or save it.
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_PCG32_H
#define MHA_PCG32_H

#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mha_pcg32 {
    uint64_t state; /* current state                     */
    uint64_t inc;   /* stream increment, always odd      */
} mha_pcg32;

/* The streams (initseq values) the library draws from, so that weights and
 * dropout never share a sequence. */
enum mha_pcg32_stream {
    MHA_PCG32_STREAM_INIT = 1,    /* parameter initialisation (reset_parameters) */
    MHA_PCG32_STREAM_DROPOUT = 2  /* attention dropout keep-masks                */
};

/* Seed as pcg32_srandom_r: state = 0, inc = (initseq << 1) | 1, step,
 * state += initstate, step. */
MHA_API void mha_pcg32_seed(mha_pcg32 *rng, uint64_t initstate, uint64_t initseq);

/* Next 32-bit output (XSH-RR of the old state), then state = state·a + inc. */
MHA_API uint32_t mha_pcg32_next(mha_pcg32 *rng);

/* Unbiased draw in [0, bound) into *out, by rejection: threshold =
 * (2^32 − bound) mod bound, draw until r >= threshold, *out = r mod bound.
 * Returns 0, or −1 (MHA_EINVAL) for bound == 0 or a NULL rng/out, drawing nothing. */
MHA_API int mha_pcg32_bounded(mha_pcg32 *rng, uint32_t bound, uint32_t *out);

/* Jump ahead by delta steps in O(log delta) (Brown 1994); delta is taken mod 2^64,
 * so (uint64_t)-k goes back k steps. */
MHA_API void mha_pcg32_advance(mha_pcg32 *rng, uint64_t delta);

/* Float in [0, 1) from one output: (r >> 8) · 2^-24. Never 1.0f. */
MHA_API float mha_pcg32_float(mha_pcg32 *rng);

/* Double in [0, 1) with 53 random bits from two outputs a then b:
 * ((a >> 5) · 2^26 + (b >> 6)) · 2^-53. Never 1.0. */
MHA_API double mha_pcg32_double(mha_pcg32 *rng);

#ifdef __cplusplus
}
#endif

#endif /* MHA_PCG32_H */
