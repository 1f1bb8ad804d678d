/*
 * The memory-efficient attention mode (MHA_ATTN_RECOMPUTE) against the default
 * (MHA_ATTN_STORED): same outputs and gradients, dropout included (its masks are
 * regenerated from the PCG32 stream, so they must equal the stored ones bit for
 * bit), and saved activations that grow linearly with the sequence length.
 * The finite-difference rows of the module (test_grad_table.c) run in both modes too.
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

#define REAL double
#define MHA_X(n) mhad_##n
#define RUN_NAME run_f64
#define FILL fill_uniform
#include "test_mha_modes_run.inc"
#undef REAL
#undef MHA_X
#undef RUN_NAME
#undef FILL

#define REAL float
#define MHA_X(n) mha_##n
#define RUN_NAME run_f32
#define FILL fill_uniform_f
#include "test_mha_modes_run.inc"
#undef REAL
#undef MHA_X
#undef RUN_NAME
#undef FILL

static const mode_case cases[] = {
    /* causal, Sq = 257: the last row block has one row, whose only block beyond
     * the first is partly kept (key 256) — the block-skip rule must not skip it */
    {.B = 1, .Sq = 257, .D = 8, .H = 2, .causal = 1, .dropout = 0.25},
    /* cross, several key blocks, fully masked row, key lengths (one 0), dropout */
    {.B = 2, .Sq = 40, .Sk = 300, .D = 12, .H = 3, .cross = 1, .full_row = 1, .lengths = 1,
     .dropout = 0.3},
    /* per-head mask, no dropout, odd sizes */
    {.B = 3, .Sq = 70, .Sk = 135, .D = 6, .H = 2, .cross = 1, .per_head = 1},
    /* causal cross-attention with key lengths over several row blocks of both modes */
    {.B = 2, .Sq = 130, .Sk = 200, .D = 8, .H = 2, .cross = 1, .causal = 1, .lengths = 1,
     .dropout = 0.2},
    /* Sq <= 64 takes its rows 32 at a time (attn_stored.inc, row_block): causal Sq = 64,
     * two blocks, the first with half the keys, dropout */
    {.B = 2, .Sq = 64, .D = 8, .H = 2, .causal = 1, .dropout = 0.2},
    /* Sq = 45: a short second block; causal cross-attention, key lengths (one 0), the
     * second block's last row fully masked (so that block takes every key) */
    {.B = 2, .Sq = 45, .Sk = 50, .D = 8, .H = 2, .cross = 1, .causal = 1, .full_row = 1,
     .lengths = 1, .dropout = 0.1},
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
    size_t s16, s8, s4, total16, stored16;
    assert_int_equal(mha_cache_size_mode(m, 1, 16384, 16384, MHA_ATTN_RECOMPUTE, &s16, &total16),
                     MHA_OK);
    assert_int_equal(mha_cache_size_mode(m, 1, 8192, 8192, MHA_ATTN_RECOMPUTE, &s8, NULL), MHA_OK);
    assert_int_equal(mha_cache_size_mode(m, 1, 4096, 4096, MHA_ATTN_RECOMPUTE, &s4, NULL), MHA_OK);
    assert_int_equal(mha_cache_size(m, 1, 16384, 16384, &stored16, NULL), MHA_OK);
    const size_t MiB = 1024 * 1024;
    assert_true(s16 <= 72 * MiB);
    assert_true(s16 >= 64 * MiB);
    /* linear: Q,K,V,C, one lse and one flag per row, plus the B key lengths */
    assert_int_equal(s16 - s8, 2 * (s8 - s4));
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

/* Data-parallel slices: a batch of 4 run as two slices of 2 with dropout batch offsets 0
 * and 2 (the same call index) draws the full batch's masks: outputs and input gradients
 * equal the full batch's rows, and the two slices' parameter gradients add up to the full
 * batch's, in both modes (float64, 1e-12). Without the offset the second slice's output
 * differs (it would reuse the first rows' masks). Offsets past 2^40 are refused. */
static void modes_dropout_batch_offset(void **state)
{
    (void)state;
    const size_t B = 4, S = 9, D = 8, H = 2, half = 2, n = B * S * D;
    const mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = 0.3, .seed = 11,
                            .threads = 2};
    const mha_mask causal = {.causal = 1, .mask_batch = 1, .mask_heads = 1};
    double *x = malloc(n * sizeof *x), *dout = malloc(n * sizeof *dout);
    double *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx);
    double *ys = malloc(n * sizeof *ys), *dxs = malloc(n * sizeof *dxs);
    fill_uniform(x, n, -1, 1, 3);
    fill_uniform(dout, n, -1, 1, 4);
    for (int mode = 0; mode < 2; mode++) {
        mhad_module *m;
        mhad_cache *c;
        assert_int_equal(mhad_create(&m, &cfg), MHA_OK);
        assert_int_equal(mhad_cache_create_mode(&c, m, B, S, S, (mha_attn_mode)mode), MHA_OK);
        size_t np;
        double *g = mhad_grads(m, &np);
        double *g_full = malloc(np * sizeof *g_full);
        /* the whole batch, call 5 */
        assert_int_equal(mhad_set_call_index(m, 5), MHA_OK);
        assert_int_equal(mhad_zero_grad(m), MHA_OK);
        memset(dx, 0, n * sizeof *dx);
        assert_int_equal(mhad_forward(m, c, 1, B, S, x, S, NULL, &causal, y), MHA_OK);
        assert_int_equal(mhad_backward(m, c, x, NULL, dout, dx, NULL), MHA_OK);
        memcpy(g_full, g, np * sizeof *g);
        /* two slices of 2, both call 5, offsets 0 and 2; gradients accumulate */
        assert_int_equal(mhad_zero_grad(m), MHA_OK);
        memset(dxs, 0, n * sizeof *dxs);
        for (size_t k = 0; k < B / half; k++) {
            const size_t o = k * half * S * D;
            assert_int_equal(mhad_set_call_index(m, 5), MHA_OK);
            assert_int_equal(mhad_set_dropout_batch_offset(m, k * half), MHA_OK);
            assert_int_equal(mhad_forward(m, c, 1, half, S, x + o, S, NULL, &causal, ys + o),
                             MHA_OK);
            assert_int_equal(mhad_backward(m, c, x + o, NULL, dout + o, dxs + o, NULL), MHA_OK);
        }
        assert_true(rel_inf(ys, y, n) <= 1e-12);
        assert_true(rel_inf(dxs, dx, n) <= 1e-12);
        assert_true(rel_inf(g, g_full, np) <= 1e-12);
        /* the second slice without its offset draws other masks */
        assert_int_equal(mhad_set_call_index(m, 5), MHA_OK);
        assert_int_equal(mhad_set_dropout_batch_offset(m, 0), MHA_OK);
        assert_int_equal(mhad_forward(m, c, 1, half, S, x + half * S * D, S, NULL, &causal, ys),
                         MHA_OK);
        assert_true(rel_inf(ys, y + half * S * D, half * S * D) > 1e-3);
        /* limits */
        assert_int_equal(mhad_set_dropout_batch_offset(NULL, 0), MHA_EINVAL);
        assert_int_equal(mhad_set_dropout_batch_offset(m, ((uint64_t)1 << 40) + 1), MHA_EOVERFLOW);
        assert_int_equal(mhad_set_dropout_batch_offset(m, (uint64_t)1 << 40), MHA_OK);
        memcpy(ys, y, n * sizeof *y);
        assert_int_equal(mhad_forward(m, c, 1, half, S, x, S, NULL, &causal, ys), MHA_EOVERFLOW);
        assert_memory_equal(ys, y, n * sizeof *y); /* nothing written */
        assert_int_equal(mhad_forward(m, c, 0, half, S, x, S, NULL, &causal, ys), MHA_OK);
        free(g_full);
        mhad_cache_destroy(c);
        mhad_destroy(m);
    }
    free(x);
    free(dout);
    free(y);
    free(dx);
    free(ys);
    free(dxs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modes_equal_f64),
        cmocka_unit_test(modes_equal_f32),
        cmocka_unit_test(modes_memory_linear),
        cmocka_unit_test(modes_api),
        cmocka_unit_test(modes_dropout_batch_offset),
    };
    return cmocka_run_group_tests_name("mha_modes", tests, NULL, NULL);
}
