/*
 * The memory-efficient attention mode (MHA_ATTN_RECOMPUTE) against the default
 * (MHA_ATTN_STORED): same outputs and gradients, dropout included (its masks are
 * regenerated from the PCG32 stream, so they must equal the stored ones bit for
 * bit), and saved activations that grow linearly with the sequence length.
 * The finite-difference suite (test_mha_grad.c) runs in both modes too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

typedef struct mode_case {
    size_t B, Sq, Sk, D, H;
    int cross;       /* separate x_context with Sk keys                     */
    int causal;
    int full_row;    /* broadcast mask [B,1,Sq,Sk] with one fully masked row */
    int per_head;    /* per-head mask [1,H,Sq,Sk]                            */
    int lengths;     /* key lengths, the last batch 0                        */
    double dropout;
} mode_case;

/* max|a − b| / max|b| over n values (inputs in double). */
static double rel_inf(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return den > 0 ? num / den : num;
}

typedef struct mask_data {
    uint8_t *bytes;
    size_t *lengths;
    mha_mask mask;
} mask_data;

static const mha_mask *build_mask(const mode_case *mc, size_t Sk, mask_data *md)
{
    memset(md, 0, sizeof *md);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 31, 5);
    if (mc->full_row || mc->per_head) {
        size_t lead = mc->full_row ? mc->B : mc->H;
        md->bytes = malloc(lead * mc->Sq * Sk);
        assert_non_null(md->bytes);
        for (size_t e = 0; e < lead * mc->Sq * Sk; e++)
            md->bytes[e] = mha_pcg32_next(&rng) % 5 != 0;
        if (mc->full_row)
            memset(md->bytes + (mc->Sq - 1) * Sk, 0, Sk); /* batch 0, last row */
        md->mask.mask = md->bytes;
        md->mask.mask_batch = mc->full_row ? mc->B : 1;
        md->mask.mask_heads = mc->per_head ? mc->H : 1;
    }
    if (mc->lengths) {
        md->lengths = malloc(mc->B * sizeof *md->lengths);
        assert_non_null(md->lengths);
        for (size_t b = 0; b < mc->B; b++)
            md->lengths[b] = b + 1 == mc->B ? 0 : Sk - 3 * b;
        md->mask.key_lengths = md->lengths;
    }
    md->mask.causal = mc->causal;
    return (mc->full_row || mc->per_head || mc->lengths || mc->causal) ? &md->mask : NULL;
}

/* One forward + backward in float64 with the given mode; returns the output,
 * the parameter gradients and the input gradients, concatenated (owned). */
static double *run_f64(const mode_case *mc, mha_attn_mode mode, size_t *n_out)
{
    const size_t Sk = mc->cross ? mc->Sk : mc->Sq, nq = mc->B * mc->Sq * mc->D,
                 nk = mc->B * Sk * mc->D;
    mha_config cfg = {.model_dim = mc->D, .num_heads = mc->H, .dropout_p = mc->dropout,
                      .seed = 99, .threads = 2};
    mhad_module *m = NULL;
    mhad_cache *c = NULL;
    assert_int_equal(mhad_create(&m, &cfg), MHA_OK);
    assert_int_equal(mhad_cache_create_mode(&c, m, mc->B, mc->Sq, Sk, mode), MHA_OK);
    size_t np;
    mhad_params(m, &np);
    const size_t total = nq + np + nq + (mc->cross ? nk : 0);
    double *res = calloc(total, sizeof *res);
    double *xq = malloc(nq * sizeof *xq), *xc = malloc(nk * sizeof *xc), *r = malloc(nq * sizeof *r);
    assert_true(res && xq && xc && r);
    fill_uniform(xq, nq, -1, 1, 1);
    fill_uniform(xc, nk, -1, 1, 2);
    fill_uniform(r, nq, -1, 1, 3);
    mask_data md;
    const mha_mask *mask = build_mask(mc, Sk, &md);
    assert_int_equal(mhad_set_call_index(m, 17), MHA_OK);
    double *out = res, *dxq = res + nq + np, *dxc = mc->cross ? dxq + nq : NULL;
    assert_int_equal(mhad_forward(m, c, mc->dropout > 0, mc->B, mc->Sq, xq, Sk,
                                  mc->cross ? xc : NULL, mask, out),
                     MHA_OK);
    assert_int_equal(mhad_backward(m, c, xq, mc->cross ? xc : NULL, r, dxq, dxc), MHA_OK);
    memcpy(res + nq, mhad_grads(m, NULL), np * sizeof *res);
    *n_out = total;
    free(xq);
    free(xc);
    free(r);
    free(md.bytes);
    free(md.lengths);
    mhad_cache_destroy(c);
    mhad_destroy(m);
    return res;
}

/* The same in float32, results widened to double. */
static double *run_f32(const mode_case *mc, mha_attn_mode mode, size_t *n_out)
{
    const size_t Sk = mc->cross ? mc->Sk : mc->Sq, nq = mc->B * mc->Sq * mc->D,
                 nk = mc->B * Sk * mc->D;
    mha_config cfg = {.model_dim = mc->D, .num_heads = mc->H, .dropout_p = mc->dropout,
                      .seed = 99, .threads = 2};
    mha_module *m = NULL;
    mha_cache *c = NULL;
    assert_int_equal(mha_create(&m, &cfg), MHA_OK);
    assert_int_equal(mha_cache_create_mode(&c, m, mc->B, mc->Sq, Sk, mode), MHA_OK);
    size_t np;
    mha_params(m, &np);
    const size_t total = nq + np + nq + (mc->cross ? nk : 0);
    float *buf = calloc(total, sizeof *buf);
    float *xq = malloc(nq * sizeof *xq), *xc = malloc(nk * sizeof *xc), *r = malloc(nq * sizeof *r);
    double *res = malloc(total * sizeof *res);
    assert_true(buf && xq && xc && r && res);
    fill_uniform_f(xq, nq, -1, 1, 1);
    fill_uniform_f(xc, nk, -1, 1, 2);
    fill_uniform_f(r, nq, -1, 1, 3);
    mask_data md;
    const mha_mask *mask = build_mask(mc, Sk, &md);
    assert_int_equal(mha_set_call_index(m, 17), MHA_OK);
    float *out = buf, *dxq = buf + nq + np, *dxc = mc->cross ? dxq + nq : NULL;
    assert_int_equal(mha_forward(m, c, mc->dropout > 0, mc->B, mc->Sq, xq, Sk,
                                 mc->cross ? xc : NULL, mask, out),
                     MHA_OK);
    assert_int_equal(mha_backward(m, c, xq, mc->cross ? xc : NULL, r, dxq, dxc), MHA_OK);
    memcpy(buf + nq, mha_grads(m, NULL), np * sizeof *buf);
    for (size_t i = 0; i < total; i++)
        res[i] = buf[i];
    *n_out = total;
    free(buf);
    free(xq);
    free(xc);
    free(r);
    free(md.bytes);
    free(md.lengths);
    mha_cache_destroy(c);
    mha_destroy(m);
    return res;
}

static const mode_case cases[] = {
    /* causal, Sq = 257: the last row block has one row, whose only block beyond
     * the first is partly kept (key 256) — the block-skip rule must not skip it */
    {.B = 1, .Sq = 257, .D = 8, .H = 2, .causal = 1, .dropout = 0.25},
    /* cross, several key blocks, fully masked row, key lengths (one 0), dropout */
    {.B = 2, .Sq = 40, .Sk = 300, .D = 12, .H = 3, .cross = 1, .full_row = 1, .lengths = 1,
     .dropout = 0.3},
    /* per-head mask, no dropout, odd sizes */
    {.B = 3, .Sq = 70, .Sk = 135, .D = 6, .H = 2, .cross = 1, .per_head = 1},
    /* p = 1: everything dropped */
    {.B = 1, .Sq = 33, .D = 4, .H = 1, .dropout = 1.0},
};

/* float64: outputs and every gradient within 1e-12 (relative to the tensor's
 * largest value), dropout included. */
static void modes_equal_f64(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t na, nb;
        double *a = run_f64(&cases[k], MHA_ATTN_RECOMPUTE, &na);
        double *b = run_f64(&cases[k], MHA_ATTN_STORED, &nb);
        assert_int_equal(na, nb);
        double rel = rel_inf(a, b, na);
        if (!(rel <= 1e-12))
            print_error("case %zu: relative difference %.3g\n", k, rel);
        assert_true(rel <= 1e-12);
        free(a);
        free(b);
    }
}

/* float32: within 1e-5. */
static void modes_equal_f32(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t na, nb;
        double *a = run_f32(&cases[k], MHA_ATTN_RECOMPUTE, &na);
        double *b = run_f32(&cases[k], MHA_ATTN_STORED, &nb);
        assert_int_equal(na, nb);
        double rel = rel_inf(a, b, na);
        if (!(rel <= 1e-5))
            print_error("case %zu: relative difference %.3g\n", k, rel);
        assert_true(rel <= 1e-5);
        free(a);
        free(b);
    }
}

/* Saved activations at S = 16384, B = 1, D = 256, H = 4 (float): at most 72 MiB
 * (Q, K, V and the context alone are 64 MiB) and linear in S; the stored mode
 * would save the 4 GiB of weights. */
static void modes_memory_linear(void **state)
{
    (void)state;
    mha_config cfg = {.model_dim = 256, .num_heads = 4, .dropout_p = 0.1, .seed = 1, .threads = 2};
    mha_module *m = NULL;
    assert_int_equal(mha_create(&m, &cfg), MHA_OK);
    size_t s16, s8, total16, stored16;
    assert_int_equal(mha_cache_size_mode(m, 1, 16384, 16384, MHA_ATTN_RECOMPUTE, &s16, &total16),
                     MHA_OK);
    assert_int_equal(mha_cache_size_mode(m, 1, 8192, 8192, MHA_ATTN_RECOMPUTE, &s8, NULL), MHA_OK);
    assert_int_equal(mha_cache_size(m, 1, 16384, 16384, &stored16, NULL), MHA_OK);
    const size_t MiB = 1024 * 1024;
    assert_true(s16 <= 72 * MiB);
    assert_true(s16 >= 64 * MiB);
    assert_int_equal(s16, 2 * s8); /* linear: Q,K,V,C, one lse and one flag per row */
    assert_true(total16 <= 96 * MiB); /* the workspace stays linear too */
    assert_true(stored16 > (size_t)4096 * MiB);
    mha_destroy(m);
}

/* A RECOMPUTE cache has no weights to show; unknown modes are refused. */
static void modes_api(void **state)
{
    (void)state;
    mha_config cfg = {.model_dim = 8, .num_heads = 2, .seed = 1, .threads = 1};
    mhad_module *m = NULL;
    mhad_cache *c = NULL;
    assert_int_equal(mhad_create(&m, &cfg), MHA_OK);
    assert_int_equal(mhad_cache_create_mode(&c, m, 1, 4, 4, (mha_attn_mode)7), MHA_EINVAL);
    assert_null(c);
    size_t saved = 3;
    assert_int_equal(mhad_cache_size_mode(m, 1, 4, 4, (mha_attn_mode)7, &saved, NULL), MHA_EINVAL);
    assert_int_equal(saved, 3);
    assert_int_equal(mhad_cache_create_mode(&c, m, 1, 4, 4, MHA_ATTN_RECOMPUTE), MHA_OK);
    double x[32], out[32];
    fill_uniform(x, 32, -1, 1, 4);
    assert_int_equal(mhad_forward(m, c, 0, 1, 4, x, 0, NULL, NULL, out), MHA_OK);
    const double *w = NULL;
    size_t shape[4];
    assert_int_equal(mhad_cache_attention(c, &w, shape), MHA_EUNSUPPORTED);
    assert_null(w);
    mhad_cache_destroy(c);
    mhad_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modes_equal_f64),
        cmocka_unit_test(modes_equal_f32),
        cmocka_unit_test(modes_memory_linear),
        cmocka_unit_test(modes_api),
    };
    return cmocka_run_group_tests_name("mha_modes", tests, NULL, NULL);
}
