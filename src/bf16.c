/*
 * One value to and from bfloat16 (src/gemm.h: mha__bf16_from_float, mha__bf16_round,
 * mha__bf16_to_float): the bf16 product's reference and its tests' oracle
 * (src/gemm_bf16.c), and the safetensors conversions (src/st_convert.c). Plain integer
 * arithmetic on the bit pattern, on its own so that code which reads and writes bf16 files
 * needs nothing of the GEMM.
 */
#include <stdint.h>
#include <string.h>

#include "gemm.h"

uint16_t mha__bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, make it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* round to nearest, ties to even, on the bit pattern: exact for normals and subnormals
     * alike, and a carry out of the fraction bumps the exponent (to inf past the largest) */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t mha__bf16_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) /* zero or subnormal: signed zero, as VCVTNEPS2BF16 */
        return (uint16_t)((u >> 16) & 0x8000u);
    return mha__bf16_round(x);
}

float mha__bf16_to_float(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
