/*
 * Gradient checks of the attention module: every analytic gradient against
 * central finite differences in float64, and float32 against float64.
 *
 * How to read (and reuse) this file:
 *   1. A `grad_case` says what to check: sizes, mask kind, dropout, cross/self.
 *   2. `setup_problem` builds a float64 module, inputs, a mask and a fixed random
 *      R; the loss is L = Σ R ⊙ out (Σ out would hide softmax bugs: rows sum to 1).
 *   3. `loss_fn` is the callback mha_gradcheck perturbs parameters and inputs
 *      around: it rewinds the dropout call counter first, so that every
 *      evaluation sees the same dropout mask.
 *   4. `analytic` runs forward + backward once with d_out = R.
 *   5. mha_gradcheck compares, per tensor, and the test asserts on the numbers:
 *      |a − n| <= 1e-7 + 1e-6·|n| for every element (100× tighter than
 *      torch.autograd.gradcheck's defaults).
 * Every case runs twice: with MHA_ATTN_STORED caches and with the memory-
 * efficient MHA_ATTN_RECOMPUTE caches (blocks of 32 rows × 128 keys; the
 * larger cases cross block boundaries).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

enum mask_kind {
    MASK_NONE = 0,
    MASK_BROADCAST = 1, /* [B, 1, Sq, Sk] with one fully masked row            */
    MASK_PER_HEAD = 2   /* [1, H, Sq, Sk], each head its own random pattern    */
};

enum context_kind {
    CTX_SELF = 0,      /* x_context = NULL: K, V from x_query                  */
    CTX_CROSS = 1,     /* a separate x_context [B, Sk, D]                       */
    CTX_SAME_BUF = 2   /* x_context passed as the same buffer as x_query        */
};

typedef struct grad_case {
    size_t B, Sq, Sk, D, H;
    enum context_kind ctx;
    enum mask_kind mask;
    int causal;
    int key_lengths; /* per-batch lengths, including a 0 (fully masked batch) */
    double dropout;  /* training forward when > 0                            */
    size_t directions; /* 0: every element; else random directions          */
} grad_case;

typedef struct problem {
    grad_case gc;
    mha_attn_mode mode;
    size_t Sk;            /* effective key length                             */
    mhad_module *m;
    mhad_cache *c;
    double *xq, *xc;      /* [B,Sq,D], [B,Sk,D] (xc = xq for CTX_SAME_BUF)    */
    double *r;            /* [B,Sq,D] loss weights = d_out                    */
    double *out;          /* [B,Sq,D]                                         */
    double *dxq, *dxc;    /* gradients (dxc = dxq for CTX_SAME_BUF)           */
    uint8_t *mask_data;
    size_t *lengths;
    mha_mask mask;
    const mha_mask *mask_arg;
    int training;
    uint64_t call0;       /* dropout call index every evaluation replays     */
} problem;

static const double *ctx_arg(const problem *pb)
{
    return pb->gc.ctx == CTX_SELF ? NULL : pb->xc;
}

static int loss_fn(void *vctx, double *loss)
{
    problem *pb = vctx;
    const grad_case *g = &pb->gc;
    int st = mhad_set_call_index(pb->m, pb->call0); /* freeze the dropout mask */
    if (st != MHA_OK)
        return st;
    st = mhad_forward(pb->m, pb->c, pb->training, g->B, g->Sq, pb->xq, pb->Sk, ctx_arg(pb),
                      pb->mask_arg, pb->out);
    if (st != MHA_OK)
        return st;
    double s = 0.0;
    for (size_t i = 0; i < g->B * g->Sq * g->D; i++)
        s += pb->r[i] * pb->out[i];
    *loss = s;
    return 0;
}

static void setup_problem(problem *pb, const grad_case *g, mha_attn_mode mode, uint64_t seed)
{
    memset(pb, 0, sizeof *pb);
    pb->gc = *g;
    pb->mode = mode;
    pb->Sk = g->ctx == CTX_CROSS ? g->Sk : g->Sq;
    const size_t B = g->B, Sq = g->Sq, Sk = pb->Sk, D = g->D, H = g->H;
    mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = g->dropout, .seed = seed,
                      .threads = 2};
    assert_int_equal(mhad_create(&pb->m, &cfg), MHA_OK);
    assert_int_equal(mhad_cache_create_mode(&pb->c, pb->m, B, Sq, Sk, mode), MHA_OK);
    pb->xq = malloc(B * Sq * D * sizeof(double));
    pb->r = malloc(B * Sq * D * sizeof(double));
    pb->out = malloc(B * Sq * D * sizeof(double));
    pb->dxq = calloc(B * Sq * D, sizeof(double));
    assert_non_null(pb->xq);
    assert_non_null(pb->r);
    assert_non_null(pb->out);
    assert_non_null(pb->dxq);
    fill_uniform(pb->xq, B * Sq * D, -1.0, 1.0, seed + 1);
    fill_uniform(pb->r, B * Sq * D, -1.0, 1.0, seed + 2);
    if (g->ctx == CTX_CROSS) {
        pb->xc = malloc(B * Sk * D * sizeof(double));
        pb->dxc = calloc(B * Sk * D, sizeof(double));
        assert_non_null(pb->xc);
        assert_non_null(pb->dxc);
        fill_uniform(pb->xc, B * Sk * D, -1.0, 1.0, seed + 3);
    } else if (g->ctx == CTX_SAME_BUF) {
        pb->xc = pb->xq;
        pb->dxc = pb->dxq;
    }
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed + 4, 7);
    if (g->mask == MASK_BROADCAST) {
        pb->mask_data = malloc(B * Sq * Sk);
        assert_non_null(pb->mask_data);
        for (size_t e = 0; e < B * Sq * Sk; e++)
            pb->mask_data[e] = mha_pcg32_next(&rng) % 4 != 0; /* ~25% masked */
        memset(pb->mask_data + (1 * Sq + 0) * Sk, 0, Sk);     /* batch 1 row 0: all masked */
        pb->mask.mask = pb->mask_data;
        pb->mask.mask_batch = B;
        pb->mask.mask_heads = 1;
    } else if (g->mask == MASK_PER_HEAD) {
        pb->mask_data = malloc(H * Sq * Sk);
        assert_non_null(pb->mask_data);
        for (size_t e = 0; e < H * Sq * Sk; e++)
            pb->mask_data[e] = mha_pcg32_next(&rng) % 3 != 0;
        pb->mask.mask = pb->mask_data;
        pb->mask.mask_batch = 1;
        pb->mask.mask_heads = H;
    }
    pb->mask.causal = g->causal;
    if (g->key_lengths) {
        pb->lengths = malloc(B * sizeof(size_t));
        assert_non_null(pb->lengths);
        for (size_t b = 0; b < B; b++) /* Sk, then shorter, the last batch 0 */
            pb->lengths[b] = b + 1 == B ? 0 : Sk - (b * 2 < Sk ? b * 2 : Sk - 1);
        pb->mask.key_lengths = pb->lengths;
    }
    pb->mask_arg = (g->mask != MASK_NONE || g->causal || g->key_lengths) ? &pb->mask : NULL;
    pb->training = g->dropout > 0.0;
    pb->call0 = 5; /* not 0: exercises the call index part of the dropout stream */
}

static void teardown_problem(problem *pb)
{
    mhad_cache_destroy(pb->c);
    mhad_destroy(pb->m);
    if (pb->gc.ctx == CTX_CROSS) {
        free(pb->xc);
        free(pb->dxc);
    }
    free(pb->xq);
    free(pb->r);
    free(pb->out);
    free(pb->dxq);
    free(pb->mask_data);
    free(pb->lengths);
}

/* Forward + backward once at the unperturbed point, with d_out = R. */
static void analytic(problem *pb)
{
    double loss;
    assert_int_equal(loss_fn(pb, &loss), 0);
    assert_int_equal(mhad_zero_grad(pb->m), MHA_OK);
    assert_int_equal(mhad_backward(pb->m, pb->c, pb->xq, ctx_arg(pb), pb->r, pb->dxq,
                                   pb->gc.ctx == CTX_CROSS ? pb->dxc
                                   : pb->gc.ctx == CTX_SAME_BUF ? pb->dxq
                                                                 : NULL),
                     MHA_OK);
}

static void run_grad_case_mode(const grad_case *g, mha_attn_mode mode)
{
    problem pb;
    setup_problem(&pb, g, mode, 1000 + g->B * 7 + g->Sq * 11 + g->D);
    analytic(&pb);

    mha_gc_tensor t[MHA_NUM_TENSORS + 2];
    size_t n = 0;
    double *params = mhad_params(pb.m, NULL), *grads = mhad_grads(pb.m, NULL);
    for (size_t i = 0; i < MHA_NUM_TENSORS; i++) {
        mha_tensor_info info;
        assert_int_equal(mha_tensor_info_at(g->D, i, &info), MHA_OK);
        t[n++] = (mha_gc_tensor){info.name, params + info.offset, grads + info.offset, info.numel};
    }
    /* With CTX_SAME_BUF the buffer x feeds both paths: its gradient dxq holds
     * the sum, and perturbing x moves both — one tensor checks both. */
    t[n++] = (mha_gc_tensor){"x_query", pb.xq, pb.dxq, g->B * g->Sq * g->D};
    if (g->ctx == CTX_CROSS)
        t[n++] = (mha_gc_tensor){"x_context", pb.xc, pb.dxc, g->B * pb.Sk * g->D};

    mha_gc_options opt = {.step = 1e-5, .atol = 1e-7, .rtol = 1e-6,
                          .directions = g->directions, .seed = 77};
    mha_gc_result res[MHA_NUM_TENSORS + 2];
    assert_int_equal(mha_gradcheck(loss_fn, &pb, t, n, &opt, res), MHA_OK);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        assert_true(res[i].compared > 0);
        if (!(res[i].worst_ratio <= 1.0)) {
            char line[400];
            mha_gc_format(&res[i], t[i].name, line, sizeof line);
            print_error("%s mode: %s\n", mode == MHA_ATTN_STORED ? "stored" : "recompute", line);
            ok = 0;
        }
    }
    teardown_problem(&pb);
    assert_true(ok);
}

static void run_grad_case(const grad_case *g)
{
    run_grad_case_mode(g, MHA_ATTN_STORED);
    run_grad_case_mode(g, MHA_ATTN_RECOMPUTE);
}

/* Self-attention, no mask: the seed's mha(x, None). */
static void grad_self(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .D = 8, .H = 2});
}

/* Cross-attention with Sq != Sk: K and V from x_context, both input gradients. */
static void grad_cross(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 3, .Sk = 5, .D = 8, .H = 2, .ctx = CTX_CROSS});
}

/* Causal mask: keys j > i filled with −1e9, no gradient through them. */
static void grad_causal(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 5, .D = 8, .H = 2, .causal = 1});
}

/* Broadcast mask [B,1,Sq,Sk] with a fully masked row (uniform weights, no NaN). */
static void grad_broadcast_mask(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .Sk = 6, .D = 8, .H = 2, .ctx = CTX_CROSS,
                               .mask = MASK_BROADCAST});
}

/* Per-head mask [1,H,Sq,Sk]. */
static void grad_per_head_mask(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .D = 9, .H = 3, .mask = MASK_PER_HEAD});
}

/* Per-batch key lengths (padding), one batch with length 0 (all rows masked). */
static void grad_key_lengths(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 3, .Sq = 3, .Sk = 6, .D = 8, .H = 2, .ctx = CTX_CROSS,
                               .key_lengths = 1});
}

/* Dropout p = 0.3 in training mode, mask frozen across evaluations. */
static void grad_dropout(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 5, .D = 8, .H = 2, .dropout = 0.3});
}

/* Dropout with cross-attention and a causal mask together. */
static void grad_dropout_cross_causal(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .Sk = 6, .D = 6, .H = 3, .ctx = CTX_CROSS,
                               .causal = 1, .dropout = 0.5});
}

/* num_heads = 1: one head of width D. */
static void grad_one_head(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .D = 6, .H = 1, .causal = 1});
}

/* num_heads = model_dim: heads of width 1. */
static void grad_heads_eq_dim(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .D = 6, .H = 6});
}

/* Odd sizes B=3, Sq=5, Sk=7, D=12, H=3, with every mask rule at once. */
static void grad_odd_sizes(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 3, .Sq = 5, .Sk = 7, .D = 12, .H = 3, .ctx = CTX_CROSS,
                               .mask = MASK_BROADCAST, .causal = 1, .key_lengths = 1});
}

/* x_context given as the same buffer as x_query: dL/dx sums both paths. */
static void grad_context_same_buffer(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 4, .D = 8, .H = 2, .ctx = CTX_SAME_BUF,
                               .dropout = 0.2});
}

/* Larger shape, random directions (vᵀ·g against a directional difference). */
static void grad_large_directions(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 24, .Sk = 40, .D = 32, .H = 4, .ctx = CTX_CROSS,
                               .mask = MASK_BROADCAST, .dropout = 0.1, .directions = 8});
}

/* Heads large enough (48·48·16 multiply-adds per product) that the per-head
 * products go to BLAS when OpenBLAS is the OpenMP build; random directions. */
static void grad_blas_heads(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 48, .Sk = 48, .D = 32, .H = 2, .ctx = CTX_CROSS,
                               .causal = 1, .dropout = 0.2, .directions = 4});
}

/* Several blocks of rows and keys in RECOMPUTE mode: Sq = 40 > 32, Sk = 300 > 2·128,
 * with a broadcast mask (one fully masked row), key lengths and dropout. */
static void grad_multi_block_masks(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 2, .Sq = 40, .Sk = 300, .D = 8, .H = 2, .ctx = CTX_CROSS,
                               .mask = MASK_BROADCAST, .key_lengths = 1, .dropout = 0.3,
                               .directions = 4});
}

/* Long causal self-attention with key lengths (300, 298, 0): both modes skip the
 * keys that lie wholly past a row block's limits; dropout draws must still line
 * up, and the fully masked batch must still see every key. */
static void grad_multi_block_causal(void **state)
{
    (void)state;
    run_grad_case(&(grad_case){.B = 3, .Sq = 300, .D = 8, .H = 2, .causal = 1, .key_lengths = 1,
                               .dropout = 0.25, .directions = 4});
}

/* ---- float32 against float64 ------------------------------------------------ */

/* float32 analytic gradients within ‖g32 − g64‖/‖g64‖ <= 1e-4 of float64 ones,
 * on the same inputs and weights, dropout included (the masks depend on the
 * seed and call index only, not on the precision). */
static void grad_f32_matches_f64(void **state)
{
    (void)state;
    const grad_case g = {.B = 3, .Sq = 5, .Sk = 7, .D = 12, .H = 3, .ctx = CTX_CROSS,
                         .mask = MASK_BROADCAST, .causal = 1, .dropout = 0.3};
    problem pb;
    setup_problem(&pb, &g, MHA_ATTN_STORED, 4242);
    analytic(&pb);

    const size_t B = g.B, Sq = g.Sq, Sk = pb.Sk, D = g.D;
    mha_config cfg;
    assert_int_equal(mhad_get_config(pb.m, &cfg), MHA_OK);
    mha_module *m32 = NULL;
    mha_cache *c32 = NULL;
    assert_int_equal(mha_create(&m32, &cfg), MHA_OK);
    assert_int_equal(mha_cache_create(&c32, m32, B, Sq, Sk), MHA_OK);
    size_t np;
    float *p32 = mha_params(m32, &np);
    const double *p64 = mhad_params(pb.m, NULL);
    for (size_t i = 0; i < np; i++)
        p32[i] = (float)p64[i];
    size_t nq = B * Sq * D, nk = B * Sk * D;
    float *xq = malloc(nq * sizeof *xq), *xc = malloc(nk * sizeof *xc), *r = malloc(nq * sizeof *r);
    float *out = malloc(nq * sizeof *out), *dxq = calloc(nq, sizeof *dxq), *dxc = calloc(nk, sizeof *dxc);
    assert_true(xq && xc && r && out && dxq && dxc);
    for (size_t i = 0; i < nq; i++) {
        xq[i] = (float)pb.xq[i];
        r[i] = (float)pb.r[i];
    }
    for (size_t i = 0; i < nk; i++)
        xc[i] = (float)pb.xc[i];
    assert_int_equal(mha_set_call_index(m32, pb.call0), MHA_OK);
    assert_int_equal(mha_forward(m32, c32, 1, B, Sq, xq, Sk, xc, pb.mask_arg, out), MHA_OK);
    assert_int_equal(mha_backward(m32, c32, xq, xc, r, dxq, dxc), MHA_OK);

    /* compare every parameter tensor and both input gradients */
    const float *g32 = mha_grads(m32, NULL);
    const double *g64 = mhad_grads(pb.m, NULL);
    double *tmp = malloc((np > nk ? (np > nq ? np : nq) : (nk > nq ? nk : nq)) * sizeof *tmp);
    assert_non_null(tmp);
    for (size_t t = 0; t < MHA_NUM_TENSORS; t++) {
        mha_tensor_info info;
        assert_int_equal(mha_tensor_info_at(D, t, &info), MHA_OK);
        for (size_t i = 0; i < info.numel; i++)
            tmp[i] = g32[info.offset + i];
        double rel = rel_l2_diff(tmp, g64 + info.offset, info.numel);
        if (t == 3) {
            /* w_k.bias shifts every score of a row by the same q·b_k, and softmax
             * ignores such shifts: its gradient is 0 in exact arithmetic, so a
             * relative difference is meaningless. Both precisions must give ~0
             * on the scale of the w_k.weight gradient instead. */
            mha_tensor_info wk;
            assert_int_equal(mha_tensor_info_find(D, "w_k.weight", &wk), MHA_OK);
            double zero[16] = {0}, scale = 0.0;
            for (size_t i = 0; i < wk.numel; i++)
                scale = fmax(scale, fabs(g64[wk.offset + i]));
            assert_true(info.numel <= 16);
            assert_true(max_abs_diff(tmp, zero, info.numel) <= 1e-5 * scale);
            assert_true(max_abs_diff(g64 + info.offset, zero, info.numel) <= 1e-12 * scale);
            continue;
        }
        if (!(rel <= 1e-4))
            print_error("%s: relative difference %.3g\n", info.name, rel);
        assert_true(rel <= 1e-4);
    }
    for (size_t i = 0; i < nq; i++)
        tmp[i] = dxq[i];
    assert_true(rel_l2_diff(tmp, pb.dxq, nq) <= 1e-4);
    for (size_t i = 0; i < nk; i++)
        tmp[i] = dxc[i];
    assert_true(rel_l2_diff(tmp, pb.dxc, nk) <= 1e-4);
    for (size_t i = 0; i < nq; i++)
        tmp[i] = out[i];
    assert_true(rel_l2_diff(tmp, pb.out, nq) <= 1e-5);

    free(tmp);
    free(xq);
    free(xc);
    free(r);
    free(out);
    free(dxq);
    free(dxc);
    mha_cache_destroy(c32);
    mha_destroy(m32);
    teardown_problem(&pb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grad_self),
        cmocka_unit_test(grad_cross),
        cmocka_unit_test(grad_causal),
        cmocka_unit_test(grad_broadcast_mask),
        cmocka_unit_test(grad_per_head_mask),
        cmocka_unit_test(grad_key_lengths),
        cmocka_unit_test(grad_dropout),
        cmocka_unit_test(grad_dropout_cross_causal),
        cmocka_unit_test(grad_one_head),
        cmocka_unit_test(grad_heads_eq_dim),
        cmocka_unit_test(grad_odd_sizes),
        cmocka_unit_test(grad_context_same_buffer),
        cmocka_unit_test(grad_large_directions),
        cmocka_unit_test(grad_blas_heads),
        cmocka_unit_test(grad_multi_block_masks),
        cmocka_unit_test(grad_multi_block_causal),
        cmocka_unit_test(grad_f32_matches_f64),
    };
    return cmocka_run_group_tests_name("mha_grad", tests, NULL, NULL);
}
