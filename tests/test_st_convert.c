/*
 * The 16-bit float formats of the safetensors API (include/mha_safetensors.h): the
 * conversions mha_st_from_f32 / mha_st_to_f32 bit for bit (st_convert_*), BF16 and F16
 * tensors through mha_st_save and mha_st_load, mha_st_get_f32, and a file written by an
 * independent writer (tests/fixtures/st_half.safetensors, from tools/make_st_fixture.py).
 */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "mha_safetensors.h"

#define FIXTURE_HALF MHA_SOURCE_DIR "/tests/fixtures/st_half.safetensors"

static uint16_t to16(mha_st_dtype dt, float x)
{
    uint16_t h = 0xdead;
    assert_int_equal(mha_st_from_f32(dt, &x, &h, 1), MHA_OK);
    return h;
}

static float from16(mha_st_dtype dt, uint16_t h)
{
    float x;
    assert_int_equal(mha_st_to_f32(dt, &h, &x, 1), MHA_OK);
    return x;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Known F16 bit patterns: exact values, ties to even, overflow to inf, subnormals. */
static void st_convert_f16_known_bits(void **state)
{
    (void)state;
    const struct {
        float x;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},          {-2.0f, 0xc000},         {0.0f, 0x0000},
        {-0.0f, 0x8000},         {65504.0f, 0x7bff},      {-65504.0f, 0xfbff},
        {0.333333343f, 0x3555},  /* 1/3 → 0.333251953125 */
        {1.0f + 0x1p-11f, 0x3c00},       /* tie between 0x3c00 and 0x3c01: even 0x3c00   */
        {1.0f + 3 * 0x1p-11f, 0x3c02},   /* tie between 0x3c01 and 0x3c02: even 0x3c02   */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* just above the tie: up               */
        {65519.0f, 0x7bff},      /* below 65520 = 65504 + half an ulp: 65504         */
        {65520.0f, 0x7c00},      /* the tie with 65536 (odd 0x7bff): inf             */
        {FLT_MAX, 0x7c00},       {-FLT_MAX, 0xfc00},
        {INFINITY, 0x7c00},      {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},      /* the smallest subnormal                            */
        {-0x1p-24f, 0x8001},
        {0x1p-25f, 0x0000},      /* tie between 0 and 2^-24: even 0                   */
        {0x1.000002p-25f, 0x0001}, /* just above that tie                             */
        {3 * 0x1p-25f, 0x0002},  /* tie between 1 and 2 subnormal units: even 2       */
        {0x1p-14f - 0x1p-24f, 0x03ff}, /* the largest subnormal, exact                 */
        {0x1p-14f - 0x1p-25f, 0x0400}, /* tie between 0x03ff and 0x0400: even 0x0400   */
        {0x1p-14f, 0x0400},      /* the smallest normal                               */
        {1e-10f, 0x0000},        {-1e-10f, 0x8000},
        {0x1p-149f, 0x0000},     /* a float subnormal                                 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = to16(MHA_ST_F16, cases[i].x);
        if (h != cases[i].h)
            fail_msg("F16(%a) = 0x%04x, expected 0x%04x", (double)cases[i].x, h, cases[i].h);
    }
    uint16_t n = to16(MHA_ST_F16, NAN), nn = to16(MHA_ST_F16, -NAN);
    assert_true((n & 0x7c00) == 0x7c00 && (n & 0x03ff) != 0 && !(n & 0x8000));
    assert_true((nn & 0x7c00) == 0x7c00 && (nn & 0x03ff) != 0 && (nn & 0x8000));
    assert_true(from16(MHA_ST_F16, 0x3c00) == 1.0f);
    assert_true(from16(MHA_ST_F16, 0x0001) == 0x1p-24f);
    assert_true(from16(MHA_ST_F16, 0x03ff) == 0x1p-14f - 0x1p-24f);
    assert_true(from16(MHA_ST_F16, 0x7bff) == 65504.0f);
    assert_true(from16(MHA_ST_F16, 0xfc00) == -INFINITY);
    assert_int_equal(bits(from16(MHA_ST_F16, 0x8000)), 0x80000000u);
    assert_true(isnan(from16(MHA_ST_F16, 0x7c01)) && isnan(from16(MHA_ST_F16, 0xfe00)));
}

/* Every F16 subnormal tie rounds to even, and the values beside a tie to its nearer side:
 * x = (h + 1/2)·2^-24 for every h in 0 .. 0x3ff (the last tie goes to the smallest normal
 * 0x0400), both signs. And NaNs stay quiet NaNs of their sign whatever their payload — a
 * payload only in the low bits (which a shift drops) too — in F16 and BF16. */
static void st_convert_f16_subnormal_ties_and_nans(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x400; h++)
        for (int sign = 0; sign < 2; sign++) {
            const float tie = ((float)h + 0.5f) * 0x1p-24f, s = sign ? -1.0f : 1.0f;
            const uint16_t sb = (uint16_t)(sign ? 0x8000 : 0);
            const uint16_t even = (uint16_t)((h & 1) ? h + 1 : h);
            uint16_t got = to16(MHA_ST_F16, s * tie);
            if (got != (uint16_t)(sb | even))
                fail_msg("F16(%a) = 0x%04x, expected 0x%04x", (double)(s * tie), got,
                         sb | even);
            got = to16(MHA_ST_F16, s * nextafterf(tie, 0.0f));
            assert_int_equal(got, sb | h);
            got = to16(MHA_ST_F16, s * nextafterf(tie, 1.0f));
            assert_int_equal(got, sb | (h + 1));
        }
    static const uint32_t nans[] = {0x7f800001u, 0x7f800100u, 0x7fbfffffu, 0x7fc00000u,
                                    0x7fc00001u, 0x7fffffffu, 0xff800001u, 0xffc00000u,
                                    0xff801000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float x;
        memcpy(&x, &nans[i], sizeof x);
        const int neg = (nans[i] >> 31) != 0;
        const uint16_t h = to16(MHA_ST_F16, x), b = to16(MHA_ST_BF16, x);
        if ((h & 0x7e00) != 0x7e00 || ((h >> 15) != 0) != neg)
            fail_msg("F16 of NaN 0x%08x is 0x%04x: not a quiet NaN of its sign", nans[i], h);
        if ((b & 0x7fc0) != 0x7fc0 || ((b >> 15) != 0) != neg)
            fail_msg("BF16 of NaN 0x%08x is 0x%04x: not a quiet NaN of its sign", nans[i], b);
        assert_true(isnan(from16(MHA_ST_F16, h)) && isnan(from16(MHA_ST_BF16, b)));
    }
}

/* Known BF16 bit patterns, as the library's bf16 rounding (src/gemm_bf16.c). */
static void st_convert_bf16_known_bits(void **state)
{
    (void)state;
    const struct {
        float x;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3f80},          {-3.0f, 0xc040},         {0.0f, 0x0000},
        {-0.0f, 0x8000},         {3.14159265f, 0x4049},   /* 3.140625 */
        {1.0f + 0x1p-8f, 0x3f80},        /* tie between 0x3f80 and 0x3f81: even 0x3f80   */
        {1.0f + 3 * 0x1p-8f, 0x3f82},    /* tie between 0x3f81 and 0x3f82: even 0x3f82   */
        {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81}, /* just above the tie: up                */
        {FLT_MAX, 0x7f80},       /* rounds past the largest bfloat16: inf             */
        {-FLT_MAX, 0xff80},
        {INFINITY, 0x7f80},      {-INFINITY, 0xff80},
        {0x1p-133f, 0x0001},     /* a float subnormal is a bfloat16 subnormal (as torch) */
        {0x1p-134f, 0x0000},     /* tie between 0 and 2^-133: even 0                   */
        {-0x1p-126f, 0x8080},    /* the smallest normal                                */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = to16(MHA_ST_BF16, cases[i].x);
        if (h != cases[i].h)
            fail_msg("BF16(%a) = 0x%04x, expected 0x%04x", (double)cases[i].x, h, cases[i].h);
    }
    uint16_t n = to16(MHA_ST_BF16, NAN);
    assert_true((n & 0x7f80) == 0x7f80 && (n & 0x007f) != 0);
    assert_true(from16(MHA_ST_BF16, 0x3f80) == 1.0f);
    assert_true(from16(MHA_ST_BF16, 0x0001) == 0x1p-133f);
    assert_true(from16(MHA_ST_BF16, 0xff80) == -INFINITY);
    assert_true(isnan(from16(MHA_ST_BF16, 0x7fc0)));
}

/* Every 16-bit pattern that is not a NaN converts to float and back to itself (widening
 * is exact, and an exact value rounds to itself); every NaN stays a NaN. */
static void st_convert_all_patterns_round_trip(void **state)
{
    (void)state;
    const mha_st_dtype dts[2] = {MHA_ST_F16, MHA_ST_BF16};
    uint16_t *h = malloc(65536 * sizeof *h), *back = malloc(65536 * sizeof *back);
    float *x = malloc(65536 * sizeof *x);
    assert_non_null(h);
    assert_non_null(back);
    assert_non_null(x);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int d = 0; d < 2; d++) {
        assert_int_equal(mha_st_to_f32(dts[d], h, x, 65536), MHA_OK);
        assert_int_equal(mha_st_from_f32(dts[d], x, back, 65536), MHA_OK);
        const uint16_t exp_mask = dts[d] == MHA_ST_F16 ? 0x7c00 : 0x7f80;
        for (uint32_t i = 0; i < 65536; i++) {
            const int is_nan = (i & exp_mask) == exp_mask && (i & ~exp_mask & 0x7fff) != 0;
            if (is_nan ? !isnan(x[i]) || !isnan(from16(dts[d], back[i])) : back[i] != i)
                fail_msg("%s 0x%04x -> %a -> 0x%04x", mha_st_dtype_name(dts[d]), i,
                         (double)x[i], back[i]);
        }
    }
    free(h);
    free(back);
    free(x);
}

/* F64 and F32 through the same calls; other dtypes and NULL pointers are refused. */
static void st_convert_f64_f32_and_refusals(void **state)
{
    (void)state;
    const double d[4] = {0.1, 1e300, -1e300, 1e-50};
    float f[4];
    assert_int_equal(mha_st_to_f32(MHA_ST_F64, d, f, 4), MHA_OK);
    assert_true(f[0] == 0.1f && f[1] == INFINITY && f[2] == -INFINITY && f[3] == 0.0f);
    double back[4];
    const float src[2] = {0.1f, -3.5f};
    assert_int_equal(mha_st_from_f32(MHA_ST_F64, src, back, 2), MHA_OK);
    assert_true(back[0] == (double)0.1f && back[1] == -3.5);
    float copy[2];
    assert_int_equal(mha_st_from_f32(MHA_ST_F32, src, copy, 2), MHA_OK);
    assert_memory_equal(copy, src, sizeof src);
    float keep = 7.0f;
    assert_int_equal(mha_st_to_f32(MHA_ST_I64, d, &keep, 1), MHA_EINVAL);
    assert_int_equal(mha_st_from_f32(MHA_ST_U8, src, &keep, 1), MHA_EINVAL);
    assert_int_equal(mha_st_from_f32((mha_st_dtype)99, src, &keep, 1), MHA_EINVAL);
    assert_true(keep == 7.0f);
    assert_int_equal(mha_st_to_f32(MHA_ST_F16, NULL, f, 1), MHA_EINVAL);
    assert_int_equal(mha_st_from_f32(MHA_ST_BF16, src, NULL, 1), MHA_EINVAL);
    assert_int_equal(mha_st_to_f32(MHA_ST_F16, NULL, NULL, 0), MHA_OK);
    assert_string_equal(mha_st_dtype_name(MHA_ST_BF16), "BF16");
    assert_string_equal(mha_st_dtype_name(MHA_ST_F16), "F16");
    assert_string_equal(mha_st_dtype_name(MHA_ST_I32), "I32");
    assert_int_equal(mha_st_dtype_size(MHA_ST_BF16), 2);
    assert_int_equal(mha_st_dtype_size(MHA_ST_F16), 2);
    assert_int_equal(mha_st_dtype_size(MHA_ST_I32), 4);
}

/* The bytes of the file at path into a malloc'd buffer (*len bytes). */
static unsigned char *slurp_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* BF16, F16 and I32 tensors saved beside the other dtypes come back bit for bit, laid
 * out by decreasing element size (2-byte tensors between the 4-byte ones and U8). */
static void st_convert_half_tensors_round_trip(void **state)
{
    (void)state;
    char dir[256], path[320], err[256] = "";
    assert_int_equal(make_temp_dir(dir, sizeof dir, "st_convert"), 0);
    snprintf(path, sizeof path, "%s/half.safetensors", dir);
    const uint8_t u8[3] = {1, 2, 3};
    const uint16_t f16[3] = {0x3c00, 0x7bff, 0x0001}, bf[1] = {0x4049};
    const float f32[2] = {0.5f, -1.0f};
    const double f64[1] = {2.5};
    const int32_t i32[2] = {-7, 1 << 30};
    const mha_st_tensor t[] = {
        {"u8", MHA_ST_U8, 1, {3}, u8},       {"f16", MHA_ST_F16, 1, {3}, f16},
        {"f32", MHA_ST_F32, 1, {2}, f32},    {"bf16", MHA_ST_BF16, 0, {0}, bf},
        {"i32", MHA_ST_I32, 2, {1, 2}, i32}, {"f64", MHA_ST_F64, 1, {1}, f64},
    };
    assert_int_equal(mha_st_save(path, t, 6, NULL, NULL, 0, err, sizeof err), MHA_OK);
    /* layout: f64 [0,8), then f32 [8,16) and i32 [16,24) in caller order, f16 [24,30),
     * bf16 [30,32), u8 [32,35) */
    size_t len;
    unsigned char *raw = slurp_file(path, &len);
    assert_non_null(strstr((char *)raw + 8, "\"f16\":{\"dtype\":\"F16\",\"shape\":[3],"
                                            "\"data_offsets\":[24,30]}"));
    assert_non_null(strstr((char *)raw + 8, "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[],"
                                            "\"data_offsets\":[30,32]}"));
    assert_non_null(strstr((char *)raw + 8, "\"i32\":{\"dtype\":\"I32\",\"shape\":[1,2],"
                                            "\"data_offsets\":[16,24]}"));
    assert_non_null(strstr((char *)raw + 8, "\"u8\":{\"dtype\":\"U8\",\"shape\":[3],"
                                            "\"data_offsets\":[32,35]}"));
    free(raw);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    const void *p;
    assert_int_equal(mha_st_get(f, "f16", MHA_ST_F16, 1, (const size_t[]){3}, &p, err,
                                sizeof err), MHA_OK);
    assert_memory_equal(p, f16, sizeof f16);
    assert_int_equal(mha_st_get(f, "bf16", MHA_ST_BF16, 0, NULL, &p, err, sizeof err), MHA_OK);
    assert_memory_equal(p, bf, sizeof bf);
    assert_int_equal(mha_st_get(f, "i32", MHA_ST_I32, 2, (const size_t[]){1, 2}, &p, err,
                                sizeof err), MHA_OK);
    assert_memory_equal(p, i32, sizeof i32);
    assert_int_equal(mha_st_get(f, "f16", MHA_ST_BF16, 1, (const size_t[]){3}, &p, err,
                                sizeof err), MHA_EFORMAT);
    /* mha_st_get_f32 reads every float dtype, refuses integers and other shapes */
    float v[3] = {0, 0, 0};
    assert_int_equal(mha_st_get_f32(f, "f16", 1, (const size_t[]){3}, v, err, sizeof err),
                     MHA_OK);
    assert_true(v[0] == 1.0f && v[1] == 65504.0f && v[2] == 0x1p-24f);
    assert_int_equal(mha_st_get_f32(f, "bf16", 0, NULL, v, err, sizeof err), MHA_OK);
    assert_true(v[0] == 3.140625f);
    assert_int_equal(mha_st_get_f32(f, "f64", 1, (const size_t[]){1}, v, err, sizeof err),
                     MHA_OK);
    assert_true(v[0] == 2.5f);
    v[0] = 42.0f;
    assert_int_equal(mha_st_get_f32(f, "i32", 2, (const size_t[]){1, 2}, v, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "'i32'"));
    assert_int_equal(mha_st_get_f32(f, "f16", 1, (const size_t[]){4}, v, err, sizeof err),
                     MHA_ESHAPE);
    assert_non_null(strstr(err, "[3]"));
    assert_int_equal(mha_st_get_f32(f, "nope", 0, NULL, v, err, sizeof err), MHA_ENOTFOUND);
    assert_non_null(strstr(err, "nope"));
    assert_int_equal(mha_st_get_f32(f, "f16", 1, NULL, v, err, sizeof err), MHA_EINVAL);
    assert_true(v[0] == 42.0f);
    mha_st_free(f);
    assert_int_equal(remove_tree(dir), 0);
}

/* The fixture written by tools/make_st_fixture.py (struct's 'e' format for F16, no
 * padding, a misaligned F32 tensor) reads as the values the script wrote. */
static void st_convert_reads_independent_fixture(void **state)
{
    (void)state;
    char err[256] = "";
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(FIXTURE_HALF, &f, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(f), 5);
    assert_string_equal(mha_st_meta(f, "writer"), "tools/make_st_fixture.py");
    const uint16_t want_bits[8] = {0x3c00, 0xc000, 0x7bff, 0x0001,
                                   0x0400, 0x03ff, 0x8000, 0x3555};
    const float want[8] = {1.0f, -2.0f, 65504.0f, 0x1p-24f,
                           0x1p-14f, 0x1p-14f - 0x1p-24f, -0.0f, 0.333251953125f};
    const void *p;
    assert_int_equal(mha_st_get(f, "half", MHA_ST_F16, 2, (const size_t[]){2, 4}, &p, err,
                                sizeof err), MHA_OK);
    assert_memory_equal(p, want_bits, sizeof want_bits);
    float v[8];
    assert_int_equal(mha_st_get_f32(f, "half", 2, (const size_t[]){2, 4}, v, err, sizeof err),
                     MHA_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(bits(v[i]), bits(want[i]));
    assert_int_equal(mha_st_get_f32(f, "inf", 1, (const size_t[]){2}, v, err, sizeof err),
                     MHA_OK);
    assert_true(v[0] == INFINITY && v[1] == -INFINITY);
    assert_int_equal(mha_st_get_f32(f, "bf", 1, (const size_t[]){3}, v, err, sizeof err),
                     MHA_OK);
    assert_true(v[0] == 1.0f && v[1] == -3.0f && v[2] == 3.140625f);
    assert_int_equal(mha_st_get_f32(f, "tiny", 0, NULL, v, err, sizeof err), MHA_OK);
    assert_true(v[0] == 0x1p-133f);
    assert_int_equal(mha_st_get_f32(f, "f32", 1, (const size_t[]){2}, v, err, sizeof err),
                     MHA_OK);
    assert_true(v[0] == 0.5f && v[1] == -1.25f);
    /* the values this library would write for them are the script's bytes */
    uint16_t h[8];
    assert_int_equal(mha_st_from_f32(MHA_ST_F16, want, h, 8), MHA_OK);
    assert_memory_equal(h, want_bits, sizeof h);
    mha_st_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(st_convert_f16_known_bits),
        cmocka_unit_test(st_convert_f16_subnormal_ties_and_nans),
        cmocka_unit_test(st_convert_bf16_known_bits),
        cmocka_unit_test(st_convert_all_patterns_round_trip),
        cmocka_unit_test(st_convert_f64_f32_and_refusals),
        cmocka_unit_test(st_convert_half_tensors_round_trip),
        cmocka_unit_test(st_convert_reads_independent_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
