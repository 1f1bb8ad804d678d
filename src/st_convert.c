/*
 * st_convert.c — float ↔ the stored float formats of safetensors files (F32, F64, BF16,
 * F16), and mha_st_get_f32, a tensor read as float whatever float format it was stored in.
 * The contract is in include/mha_safetensors.h.
 *
 * Bit layouts (sign s, exponent e, fraction f):
 *   F32   s:1 e:8 (bias 127) f:23
 *   BF16  s:1 e:8 (bias 127) f:7     = the top 16 bits of an F32
 *   F16   s:1 e:5 (bias 15)  f:10    normal: (−1)^s · 2^(e−15) · 1.f, e in 1..30;
 *                                    subnormal (e = 0): (−1)^s · 2^−24 · f; e = 31: inf, NaN
 * BF16 rounding is the library's one (mha__bf16_round, src/bf16.c); F16 rounding is
 * here.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mha_internal.h"
#include "st_internal.h"

/* ---- F16 ----------------------------------------------------------------------------- */

/* x rounded to the nearest F16, ties to even; ±inf past the largest finite (65504, which
 * takes every |x| < 65520); F16 subnormals exact; NaN → a quiet NaN of the same sign (top
 * fraction bits kept). */
static uint16_t f16_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;                       /* |x|                                       */
    if (u > 0x7f800000u)                    /* NaN                                       */
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x03ffu));
    if (u >= 0x477ff000u)                   /* |x| >= 65520 (= 65504 + half an ulp): inf  */
        return (uint16_t)(sign | 0x7c00u);
    if (u >= 0x38800000u) {                 /* |x| >= 2^−14: an F16 normal (or 65504)     */
        u -= (uint32_t)(127 - 15) << 23;    /* rebias the exponent                        */
        u += 0x0fffu + ((u >> 13) & 1u);    /* nearest, ties to even on the 13 dropped bits */
        return (uint16_t)(sign | (u >> 13)); /* a carry moves into the exponent: exact     */
    }
    if (u <= 0x33000000u)                   /* |x| <= 2^−25: half the smallest subnormal
                                               or less, rounds to ±0 (a tie goes to even 0) */
        return sign;
    /* An F16 subnormal: |x| = m · 2^(e−150) with m = 1.f as a 24-bit integer, so
     * |x| / 2^−24 = m · 2^(e−126) = m >> s with s = 126 − e in 14 .. 24; round m >> s to
     * nearest, ties to even (a result of 0x400 is the smallest normal, correctly encoded). */
    const uint32_t e = u >> 23, m = (u & 0x007fffffu) | 0x00800000u, s = 126 - e;
    uint32_t r = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

/* The F16 h as a float (exact). */
static float f16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, f = h & 0x03ffu;
    uint32_t u;
    if (e == 31) {                          /* inf, NaN (fraction kept: NaN stays NaN)    */
        u = sign | 0x7f800000u | (f << 13);
    } else if (e == 0) {                    /* ±0, subnormal f · 2^−24: exact in float    */
        const float x = (float)f * 0x1p-24f;
        memcpy(&u, &x, sizeof u);
        u |= sign;
    } else {                                /* normal: rebias 15 → 127, widen the fraction */
        u = sign | ((e + (127 - 15)) << 23) | (f << 13);
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- arrays ---------------------------------------------------------------------------- */

static int is_float_dtype(mha_st_dtype dtype)
{
    return dtype == MHA_ST_F32 || dtype == MHA_ST_F64 || dtype == MHA_ST_BF16 ||
           dtype == MHA_ST_F16;
}

/* The arguments of a conversion of n floats: MHA_EINVAL, or MHA_OK with the F32 case (a
 * copy) and n == 0 done (*done = 1). */
static int convert_args(mha_st_dtype dtype, const void *src, void *dst, size_t n, int *done)
{
    *done = 1;
    if (!is_float_dtype(dtype) || (n > 0 && (src == NULL || dst == NULL)))
        return MHA_EINVAL;
    if (n > 0 && dtype == MHA_ST_F32)
        memcpy(dst, src, n * sizeof(float));
    *done = n == 0 || dtype == MHA_ST_F32;
    return MHA_OK;
}

/* Element i of the array src of dtype (not F32) as a float. */
static float elem_to_f32(mha_st_dtype dtype, const void *src, size_t i)
{
    switch (dtype) {
    case MHA_ST_F64:
        return (float)((const double *)src)[i]; /* nearest, ties to even; ±inf past FLT_MAX */
    case MHA_ST_BF16:
        return mha__bf16_to_float(((const uint16_t *)src)[i]);
    default: /* MHA_ST_F16 */
        return f16_to_float(((const uint16_t *)src)[i]);
    }
}

/* x as element i of the array dst of dtype (not F32). */
static void elem_from_f32(mha_st_dtype dtype, float x, void *dst, size_t i)
{
    if (dtype == MHA_ST_F64)
        ((double *)dst)[i] = (double)x;
    else
        ((uint16_t *)dst)[i] = dtype == MHA_ST_BF16 ? mha__bf16_round(x) : f16_from_float(x);
}

int mha_st_to_f32(mha_st_dtype dtype, const void *src, float *dst, size_t n)
{
    int done;
    const int st = convert_args(dtype, src, dst, n, &done);
    for (size_t i = 0; !done && i < n; i++)
        dst[i] = elem_to_f32(dtype, src, i);
    return st;
}

int mha_st_from_f32(mha_st_dtype dtype, const float *src, void *dst, size_t n)
{
    int done;
    const int st = convert_args(dtype, src, dst, n, &done);
    for (size_t i = 0; !done && i < n; i++)
        elem_from_f32(dtype, src[i], dst, i);
    return st;
}

/* ---- a tensor as float ------------------------------------------------------------------ */

int mha_st_get_f32(const mha_st_file *f, const char *name, size_t ndim, const size_t *shape,
                   float *out, char *err, size_t errlen)
{
    char q[ST_QUOTE], have[ST_SHAPE], want[ST_SHAPE];
    const st_entry *e;
    const int st = mha__st_lookup(f, name, ndim, shape, "mha_st_get_f32", 0, "", err, errlen,
                                  &e);
    if (st != MHA_OK)
        return st;
    if (!mha__st_same_shape(e, ndim, shape)) {
        mha__st_set_err(err, errlen, "tensor '%s': the file has shape %s, expected %s",
                        mha__st_quote(q, name), mha__st_fmt_shape(have, e->ndim, e->shape),
                        mha__st_fmt_shape(want, ndim, shape));
        return MHA_ESHAPE;
    }
    if (!is_float_dtype(e->dtype)) {
        mha__st_set_err(err, errlen, "tensor '%s': the file has dtype %s, expected a float "
                        "(F32, F64, BF16 or F16)", mha__st_quote(q, name),
                        mha_st_dtype_name(e->dtype));
        return MHA_EFORMAT;
    }
    size_t numel = 1; /* the file's validated shape: no overflow */
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    if (numel > 0 && out == NULL) {
        mha__st_set_err(err, errlen, "mha_st_get_f32: out is NULL for tensor '%s'",
                        mha__st_quote(q, name));
        return MHA_EINVAL;
    }
    return mha_st_to_f32(e->dtype, e->data, out, numel);
}
