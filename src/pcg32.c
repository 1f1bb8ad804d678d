/* PCG32 (PCG-XSH-RR 64/32). See include/mha_pcg32.h and ../shared/reference/pcg32.md. */
#include "mha_internal.h" /* mha__pcg32_step */

#include <stddef.h>

#define PCG32_MULT 6364136223846793005ULL

uint32_t mha_pcg32_next(mha_pcg32 *rng) { return mha__pcg32_step(rng); }

void mha_pcg32_seed(mha_pcg32 *rng, uint64_t initstate, uint64_t initseq)
{
    rng->state = 0u;
    rng->inc = (initseq << 1u) | 1u;
    (void)mha_pcg32_next(rng);
    rng->state += initstate;
    (void)mha_pcg32_next(rng);
}

int mha_pcg32_bounded(mha_pcg32 *rng, uint32_t bound, uint32_t *out)
{
    if (bound == 0 || out == NULL || rng == NULL)
        return -1; /* MHA_EINVAL */
    uint32_t threshold = (uint32_t)(-bound) % bound; /* (2^32 - bound) mod bound */
    for (;;) {
        uint32_t r = mha_pcg32_next(rng);
        if (r >= threshold) {
            *out = r % bound;
            return 0;
        }
    }
}

/* Brown (1994): the affine step x -> a·x + c applied delta times is
 * x -> A·x + C; build (A, C) by repeated squaring of (a, c). */
void mha_pcg32_advance(mha_pcg32 *rng, uint64_t delta)
{
    uint64_t cur_mult = PCG32_MULT, cur_plus = rng->inc;
    uint64_t acc_mult = 1u, acc_plus = 0u;
    while (delta > 0) {
        if (delta & 1u) {
            acc_mult *= cur_mult;
            acc_plus = acc_plus * cur_mult + cur_plus;
        }
        cur_plus = (cur_mult + 1u) * cur_plus;
        cur_mult *= cur_mult;
        delta >>= 1u;
    }
    rng->state = acc_mult * rng->state + acc_plus;
}

float mha_pcg32_float(mha_pcg32 *rng)
{
    return (float)(mha_pcg32_next(rng) >> 8) * 0x1.0p-24f;
}

double mha_pcg32_double(mha_pcg32 *rng)
{
    uint64_t a = mha_pcg32_next(rng) >> 5; /* 27 bits */
    uint64_t b = mha_pcg32_next(rng) >> 6; /* 26 bits */
    return (double)((a << 26) | b) * 0x1.0p-53;
}
