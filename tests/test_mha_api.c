/*
 * The module's contract apart from gradient values: argument validation (each
 * invalid argument returns its documented status and writes nothing), overflow
 * refusal, parameter layout and init, mask semantics, thread-count independence,
 * gradient accumulation, several caches (dropout: test_mha_dropout.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

#define SENTINEL 12345.0

/* Every status has its own name and message; unknown codes are named as such. */
static void api_status_table(void **state)
{
    (void)state;
    const int codes[] = {MHA_OK, MHA_EINVAL, MHA_ESHAPE, MHA_ENOMEM, MHA_EOVERFLOW,
                         MHA_ENOTFOUND, MHA_ESTATE, MHA_EMISMATCH};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        assert_true(codes[i] <= 0);
        assert_string_not_equal(mha_strerror(codes[i]), "unknown status");
        assert_string_not_equal(mha_status_name(codes[i]), "MHA_UNKNOWN");
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(mha_strerror(codes[i]), mha_strerror(codes[j]));
        }
    }
    assert_string_equal(mha_status_name(MHA_EINVAL), "MHA_EINVAL");
    assert_string_equal(mha_strerror(12345), "unknown status");
    assert_string_equal(mha_status_name(-12345), "MHA_UNKNOWN");
}

/* Invalid configurations are refused with MHA_EINVAL and *out is not written. */
static void api_create_invalid(void **state)
{
    (void)state;
    const mha_config good = {.model_dim = 8, .num_heads = 2, .dropout_p = 0.1, .seed = 1};
    mha_config bad[] = {good, good, good, good, good, good, good};
    bad[0].model_dim = 0;
    bad[1].num_heads = 0;
    bad[2].num_heads = 3; /* 8 % 3 != 0 */
    bad[3].dropout_p = -0.01;
    bad[4].dropout_p = 1.01;
    bad[5].dropout_p = NAN;
    bad[6].threads = -1;
    mhad_module *sentinel = (mhad_module *)&bad; /* any non-NULL address */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mhad_module *m = sentinel;
        assert_int_equal(mhad_create(&m, &bad[i]), MHA_EINVAL);
        assert_ptr_equal(m, sentinel);
        mha_module *mf = (mha_module *)sentinel;
        assert_int_equal(mha_create(&mf, &bad[i]), MHA_EINVAL);
        assert_ptr_equal(mf, (mha_module *)sentinel);
    }
    mhad_module *m = sentinel;
    assert_int_equal(mhad_create(&m, NULL), MHA_EINVAL);
    assert_int_equal(mhad_create(NULL, &good), MHA_EINVAL);
    assert_ptr_equal(m, sentinel);
    /* p = 0 and p = 1 are valid */
    mha_config edge = good;
    edge.dropout_p = 1.0;
    assert_int_equal(mhad_create(&m, &edge), MHA_OK);
    mhad_destroy(m);
    mhad_destroy(NULL); /* NULL-safe */
    mhad_cache_destroy(NULL);
}

/* Byte counts that overflow size_t are refused, never allocated or wrapped. */
static void api_overflow_refused(void **state)
{
    (void)state;
    size_t count = 7;
    assert_int_equal(mha_param_count((size_t)1 << 33, &count), MHA_EOVERFLOW);
    assert_int_equal(count, 7);
    mha_config huge = {.model_dim = (size_t)1 << 31, .num_heads = 1};
    mhad_module *m = NULL;
    assert_int_equal(mhad_create(&m, &huge), MHA_EOVERFLOW);
    assert_null(m);

    m = make_module(8, 2, 0.1, 1, 1);
    size_t saved = 1, total = 2;
    mhad_cache *c = NULL;
    const size_t big = (size_t)1 << 40;
    assert_int_equal(mhad_cache_size(m, big, big, 2, &saved, &total), MHA_EOVERFLOW);
    assert_int_equal(mhad_cache_create(&c, m, 2, big, big), MHA_EOVERFLOW);
    assert_int_equal(mhad_cache_create(&c, m, SIZE_MAX, 2, 2), MHA_EOVERFLOW);
    assert_null(c);
    assert_int_equal(saved, 1);
    assert_int_equal(total, 2);
    assert_int_equal(mhad_cache_size(m, 0, 2, 2, &saved, &total), MHA_EINVAL);
    assert_int_equal(mhad_cache_create(&c, m, 2, 0, 2), MHA_EINVAL);
    assert_null(c);
    mhad_destroy(m);
}

/* The state_dict layout: names, order, offsets, shapes; unknown names refused. */
static void api_tensor_layout(void **state)
{
    (void)state;
    const char *names[] = {"w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias",
                           "w_v.weight", "w_v.bias", "w_o.weight", "w_o.bias"};
    const size_t D = 6;
    size_t count, next = 0;
    assert_int_equal(mha_param_count(D, &count), MHA_OK);
    assert_int_equal(count, 4 * D * D + 4 * D);
    for (size_t t = 0; t < MHA_NUM_TENSORS; t++) {
        mha_tensor_info info, found;
        assert_int_equal(mha_tensor_info_at(D, t, &info), MHA_OK);
        assert_string_equal(info.name, names[t]);
        assert_int_equal(info.offset, next); /* contiguous, in state_dict order */
        assert_int_equal(info.numel, t % 2 ? D : D * D);
        assert_int_equal(info.ndim, t % 2 ? 1 : 2);
        assert_int_equal(info.shape[0], D);
        next += info.numel;
        assert_int_equal(mha_tensor_info_find(D, names[t], &found), MHA_OK);
        assert_int_equal(found.offset, info.offset);
    }
    assert_int_equal(next, count); /* the size table sums to the total */
    mha_tensor_info info = {0};
    assert_int_equal(mha_tensor_info_find(D, "w_x.weight", &info), MHA_ENOTFOUND);
    assert_int_equal(mha_tensor_info_at(D, MHA_NUM_TENSORS, &info), MHA_EINVAL);
    assert_int_equal(mha_tensor_info_at(0, 0, &info), MHA_EINVAL);
    assert_null(info.name);
}

/* Default init as nn.Linear: uniform in ±1/√D, reproducible by seed, gradients 0. */
static void api_init_like_pytorch(void **state)
{
    (void)state;
    const size_t D = 16;
    mhad_module *a = make_module(D, 4, 0, 1, 3), *b = make_module(D, 4, 0, 1, 3);
    mhad_module *c = make_module(D, 4, 0, 1, 4);
    size_t n;
    const double *pa = mhad_params(a, &n), *pb = mhad_params(b, NULL), *pc = mhad_params(c, NULL);
    double bound = 1.0 / sqrt((double)D), mean = 0.0, maxabs = 0.0;
    size_t same = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(fabs(pa[i]) < bound);
        assert_true(pa[i] == pb[i]);
        same += pa[i] == pc[i];
        mean += pa[i];
        maxabs = fmax(maxabs, fabs(pa[i]));
    }
    assert_true(same < n / 100);
    assert_true(fabs(mean / n) < 0.05 * bound);
    assert_true(maxabs > 0.95 * bound); /* the whole range is used */
    assert_true(all_equal_to(mhad_grads(a, NULL), n, 0.0));
    assert_int_equal(mhad_reset_parameters(c, 3), MHA_OK);
    assert_memory_equal(pa, pc, n * sizeof *pa);
    assert_null(mhad_params(NULL, &n));
    mhad_destroy(a);
    mhad_destroy(b);
    mhad_destroy(c);
}

/* A forward with a bad argument returns its status and writes nothing: not the
 * output, not the cache, not the dropout counter. */
static void api_forward_invalid(void **state)
{
    (void)state;
    const size_t B = 2, S = 3, D = 8, H = 2, n = B * S * D;
    mhad_module *m = make_module(D, H, 0.5, 1, 1), *other = make_module(D, H, 0.5, 1, 1);
    mhad_cache *c = NULL;
    assert_int_equal(mhad_cache_create(&c, m, B, S, S), MHA_OK);
    double *x = make_input(n, 1), *out = filled(n, SENTINEL);
    uint8_t mask[B * S * S];
    memset(mask, 1, sizeof mask);
    size_t too_long[2] = {S, S + 1};

    assert_int_equal(mhad_forward(NULL, c, 1, B, S, x, 0, NULL, NULL, out), MHA_EINVAL);
    assert_int_equal(mhad_forward(m, NULL, 1, B, S, x, 0, NULL, NULL, out), MHA_EINVAL);
    assert_int_equal(mhad_forward(m, c, 1, B, S, NULL, 0, NULL, NULL, out), MHA_EINVAL);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, NULL, NULL), MHA_EINVAL);
    assert_int_equal(mhad_forward(other, c, 1, B, S, x, 0, NULL, NULL, out), MHA_EMISMATCH);
    assert_int_equal(mhad_forward(m, c, 1, 0, S, x, 0, NULL, NULL, out), MHA_EINVAL);
    assert_int_equal(mhad_forward(m, c, 1, B + 1, S, x, 0, NULL, NULL, out), MHA_ESHAPE);
    assert_int_equal(mhad_forward(m, c, 1, B, S + 1, x, 0, NULL, NULL, out), MHA_ESHAPE);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, S + 1, x, NULL, out), MHA_ESHAPE);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, x, NULL, out), MHA_EINVAL); /* Sk = 0 */
    mha_mask bad_batch = {.mask = mask, .mask_batch = 3, .mask_heads = 1};
    mha_mask bad_heads = {.mask = mask, .mask_batch = 1, .mask_heads = 3};
    mha_mask bad_len = {.key_lengths = too_long};
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, &bad_batch, out), MHA_ESHAPE);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, &bad_heads, out), MHA_ESHAPE);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, &bad_len, out), MHA_EINVAL);

    assert_true(all_equal_to(out, n, SENTINEL));
    uint64_t call = 99;
    assert_int_equal(mhad_get_call_index(m, &call), MHA_OK);
    assert_int_equal(call, 0);
    const double *w;
    size_t shape[4];
    assert_int_equal(mhad_cache_attention(c, &w, shape), MHA_ESTATE); /* still no forward */

    mhad_cache_destroy(c);
    mhad_destroy(m);
    mhad_destroy(other);
    free(x);
    free(out);
}

/* Backward refuses: before any forward, a second time, other inputs than the
 * forward's, dx_context after self-attention; gradients stay untouched. */
static void api_backward_invalid(void **state)
{
    (void)state;
    const size_t B = 2, S = 3, D = 8, H = 2, n = B * S * D;
    mhad_module *m = make_module(D, H, 0, 1, 1);
    mhad_cache *c = NULL;
    assert_int_equal(mhad_cache_create(&c, m, B, S, S), MHA_OK);
    double *x = make_input(n, 1), *x2 = make_input(n, 1), *out = filled(n, 0);
    double *dout = make_input(n, 2), *dx = filled(n, SENTINEL);
    size_t np;
    const double *g = mhad_grads(m, &np);

    assert_int_equal(mhad_backward(m, c, x, NULL, dout, dx, NULL), MHA_ESTATE);
    assert_int_equal(mhad_forward(m, c, 0, B, S, x, 0, NULL, NULL, out), MHA_OK);
    assert_int_equal(mhad_backward(m, c, x2, NULL, dout, dx, NULL), MHA_EINVAL);
    assert_int_equal(mhad_backward(m, c, x, x, dout, dx, NULL), MHA_EINVAL);
    assert_int_equal(mhad_backward(m, c, x, NULL, dout, dx, dx), MHA_EINVAL);
    assert_int_equal(mhad_backward(m, c, x, NULL, NULL, dx, NULL), MHA_EINVAL);
    assert_true(all_equal_to(g, np, 0.0));
    assert_true(all_equal_to(dx, n, SENTINEL));
    assert_int_equal(mhad_backward(m, c, x, NULL, dout, dx, NULL), MHA_OK);
    assert_false(all_equal_to(dx, n, SENTINEL));
    assert_int_equal(mhad_backward(m, c, x, NULL, dout, dx, NULL), MHA_ESTATE); /* consumed */
    /* the attention weights survive backward */
    const double *w;
    size_t shape[4];
    assert_int_equal(mhad_cache_attention(c, &w, shape), MHA_OK);
    assert_int_equal(shape[0], B);
    assert_int_equal(shape[1], H);
    assert_int_equal(shape[2], S);
    assert_int_equal(shape[3], S);
    mhad_cache_destroy(c);
    mhad_destroy(m);
    free(x);
    free(x2);
    free(out);
    free(dout);
    free(dx);
}

/* Masks: a fully masked row gets uniform weights (never NaN), in both precisions;
 * causal rows put zero weight on later keys; key lengths zero out padding. */
static void api_mask_semantics(void **state)
{
    (void)state;
    const size_t B = 2, Sq = 3, Sk = 5, D = 4, H = 2;
    mha_config cfg = {.model_dim = D, .num_heads = H, .seed = 9, .threads = 1};
    mha_module *m = NULL;
    mha_cache *c = NULL;
    assert_int_equal(mha_create(&m, &cfg), MHA_OK);
    assert_int_equal(mha_cache_create(&c, m, B, Sq, Sk), MHA_OK);
    float xq[B * Sq * D], xc[B * Sk * D], out[B * Sq * D];
    fill_uniform_f(xq, B * Sq * D, -3, 3, 1);
    fill_uniform_f(xc, B * Sk * D, -3, 3, 2);
    uint8_t mask[B * Sq * Sk];
    memset(mask, 1, sizeof mask);
    memset(mask + (1 * Sq + 2) * Sk, 0, Sk); /* batch 1, query 2: fully masked */
    size_t lens[2] = {4, 5};
    mha_mask mk = {.mask = mask, .mask_batch = B, .mask_heads = 1, .causal = 1, .key_lengths = lens};
    assert_int_equal(mha_forward(m, c, 0, B, Sq, xq, Sk, xc, &mk, out), MHA_OK);
    const float *w;
    size_t s[4];
    assert_int_equal(mha_cache_attention(c, &w, s), MHA_OK);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Sq; i++) {
                const float *row = w + ((b * H + h) * Sq + i) * Sk;
                double sum = 0;
                for (size_t j = 0; j < Sk; j++) {
                    assert_true(isfinite(row[j]));
                    sum += row[j];
                    if (b == 1 && i == 2)
                        assert_close(row[j], 1.0 / Sk, 1e-7, 0); /* uniform */
                    else if (j > i || j >= lens[b])
                        assert_true(row[j] == 0.0f);
                    else
                        assert_true(row[j] > 0.0f);
                }
                assert_close(sum, 1.0, 1e-6, 0);
            }
    for (size_t i = 0; i < B * Sq * D; i++)
        assert_true(isfinite(out[i]));
    mha_cache_destroy(c);
    mha_destroy(m);
}

/* Results do not depend on the thread count: outputs, gradients and dropout
 * masks with 1 thread and with 3 threads agree (the per-head work is identical;
 * only BLAS may sum in another order). */
static void api_threads_independent(void **state)
{
    (void)state;
    const size_t B = 3, S = 32, D = 32, H = 4, n = B * S * D;
    double *x = make_input(n, 8), *dout = make_input(n, 9);
    double *out[2], *dx[2];
    const double *grads[2];
    mhad_module *m[2];
    mhad_cache *c[2];
    const int threads[2] = {1, 3};
    size_t np = 0;
    for (int t = 0; t < 2; t++) {
        m[t] = make_module(D, H, 0.3, threads[t], 21);
        assert_int_equal(mhad_cache_create(&c[t], m[t], B, S, S), MHA_OK);
        out[t] = filled(n, 0);
        dx[t] = filled(n, 0);
        mha_mask causal = {.causal = 1};
        assert_int_equal(mhad_forward(m[t], c[t], 1, B, S, x, 0, NULL, &causal, out[t]), MHA_OK);
        assert_int_equal(mhad_backward(m[t], c[t], x, NULL, dout, dx[t], NULL), MHA_OK);
        grads[t] = mhad_grads(m[t], &np);
    }
    assert_true(max_abs_diff(out[0], out[1], n) <= 1e-13);
    assert_true(max_abs_diff(dx[0], dx[1], n) <= 1e-13);
    assert_true(max_abs_diff(grads[0], grads[1], np) <= 1e-12);
    for (int t = 0; t < 2; t++) {
        mhad_cache_destroy(c[t]);
        mhad_destroy(m[t]);
        free(out[t]);
        free(dx[t]);
    }
    free(x);
    free(dout);
}

/* Backward accumulates into gradients and input gradients; zero_grad resets.
 * Two caches of one module stay independent (a layer applied twice), and a
 * cache larger than the call gives the same result as an exact one. */
static void api_accumulate_and_caches(void **state)
{
    (void)state;
    const size_t B = 2, Sq = 3, Sk = 5, D = 8, H = 2, nq = B * Sq * D, nk = B * Sk * D;
    mhad_module *m = make_module(D, H, 0, 2, 4);
    mhad_cache *c1 = NULL, *c2 = NULL, *big = NULL;
    assert_int_equal(mhad_cache_create(&c1, m, B, Sq, Sk), MHA_OK);
    assert_int_equal(mhad_cache_create(&c2, m, B, Sq, Sk), MHA_OK);
    assert_int_equal(mhad_cache_create(&big, m, B + 3, Sq + 4, Sk + 2), MHA_OK);
    double *xq = make_input(nq, 1), *xc = make_input(nk, 2), *xq2 = make_input(nq, 3);
    double *dout = make_input(nq, 4), *out = filled(nq, 0), *out2 = filled(nq, 0);
    double *dxq = filled(nq, 0), *dxc = filled(nk, 0), *dxq_ref = filled(nq, 0), *dxc_ref = filled(nk, 0);
    size_t np;
    double *g = mhad_grads(m, &np), *g1 = malloc(np * sizeof *g1);
    assert_non_null(g1);

    /* reference: one forward + backward */
    assert_int_equal(mhad_forward(m, c1, 0, B, Sq, xq, Sk, xc, NULL, out), MHA_OK);
    assert_int_equal(mhad_backward(m, c1, xq, xc, dout, dxq_ref, dxc_ref), MHA_OK);
    memcpy(g1, g, np * sizeof *g);
    /* twice: everything doubles */
    assert_int_equal(mhad_forward(m, c1, 0, B, Sq, xq, Sk, xc, NULL, out), MHA_OK);
    assert_int_equal(mhad_backward(m, c1, xq, xc, dout, dxq_ref, dxc_ref), MHA_OK);
    for (size_t i = 0; i < np; i++)
        assert_close(g[i], 2 * g1[i], 1e-15, 1e-13);
    assert_int_equal(mhad_zero_grad(m), MHA_OK);
    assert_true(all_equal_to(g, np, 0.0));

    /* two caches alive at once; backward in reverse order; the big cache */
    assert_int_equal(mhad_forward(m, c1, 0, B, Sq, xq, Sk, xc, NULL, out), MHA_OK);
    assert_int_equal(mhad_forward(m, c2, 0, B, Sq, xq2, Sk, xc, NULL, out2), MHA_OK);
    assert_int_equal(mhad_backward(m, c2, xq2, xc, dout, NULL, NULL), MHA_OK);
    assert_int_equal(mhad_zero_grad(m), MHA_OK);
    assert_int_equal(mhad_backward(m, c1, xq, xc, dout, dxq, dxc), MHA_OK);
    for (size_t i = 0; i < np; i++)
        assert_close(g[i], g1[i], 1e-15, 1e-13);
    for (size_t i = 0; i < nq; i++)
        assert_close(2 * dxq[i], dxq_ref[i], 1e-15, 1e-13);
    for (size_t i = 0; i < nk; i++)
        assert_close(2 * dxc[i], dxc_ref[i], 1e-15, 1e-13);
    assert_int_equal(mhad_zero_grad(m), MHA_OK);
    assert_int_equal(mhad_forward(m, big, 0, B, Sq, xq, Sk, xc, NULL, out2), MHA_OK);
    assert_true(max_abs_diff(out, out2, nq) <= 1e-15);
    assert_int_equal(mhad_backward(m, big, xq, xc, dout, NULL, NULL), MHA_OK);
    for (size_t i = 0; i < np; i++)
        assert_close(g[i], g1[i], 1e-15, 1e-13);

    mhad_cache_destroy(c1);
    mhad_cache_destroy(c2);
    mhad_cache_destroy(big);
    mhad_destroy(m);
    free(xq);
    free(xc);
    free(xq2);
    free(dout);
    free(out);
    free(out2);
    free(dxq);
    free(dxc);
    free(dxq_ref);
    free(dxc_ref);
    free(g1);
}

/* A STORED cache's backward reads neither the mask tensor nor the key lengths
 * the forward was given (the caller may reuse or free them): overwriting both
 * between forward and backward changes no gradient. */
static void api_backward_ignores_freed_mask(void **state)
{
    (void)state;
    const size_t B = 2, S = 70, D = 8, H = 2, n = B * S * D;
    double *x = make_input(n, 3), *dout = make_input(n, 4), *out = filled(n, 0);
    double *dx[2] = {filled(n, 0), filled(n, 0)};
    const double *g[2];
    mhad_module *m[2];
    mhad_cache *c[2];
    size_t np = 0;
    for (int t = 0; t < 2; t++) {
        uint8_t *mask = malloc(B * S * S);
        size_t *lens = malloc(B * sizeof *lens);
        assert_true(mask && lens);
        for (size_t e = 0; e < B * S * S; e++)
            mask[e] = (uint8_t)(e % 7 != 0);
        lens[0] = S;
        lens[1] = S - 9;
        mha_mask mk = {.mask = mask, .mask_batch = B, .mask_heads = 1, .causal = 1,
                       .key_lengths = lens};
        m[t] = make_module(D, H, 0.2, 1, 8);
        assert_int_equal(mhad_cache_create(&c[t], m[t], B, S, S), MHA_OK);
        assert_int_equal(mhad_forward(m[t], c[t], 1, B, S, x, 0, NULL, &mk, out), MHA_OK);
        if (t == 1) { /* the caller reuses its arrays, then frees them (ASan: no read) */
            memset(mask, 0, B * S * S);
            lens[0] = lens[1] = 1;
            free(mask);
            free(lens);
        }
        assert_int_equal(mhad_backward(m[t], c[t], x, NULL, dout, dx[t], NULL), MHA_OK);
        g[t] = mhad_grads(m[t], &np);
        if (t == 0) {
            free(mask);
            free(lens);
        }
    }
    assert_memory_equal(dx[0], dx[1], n * sizeof(double));
    assert_memory_equal(g[0], g[1], np * sizeof(double));
    for (int t = 0; t < 2; t++) {
        mhad_cache_destroy(c[t]);
        mhad_destroy(m[t]);
        free(dx[t]);
    }
    free(x);
    free(dout);
    free(out);
}

/* Saved bytes are exactly Q, K, V, C, P, the bit-packed keep mask (each head's
 * bits padded to 64), one flag byte per row and the B key lengths; no mask
 * without dropout. */
static void api_cache_bytes(void **state)
{
    (void)state;
    const size_t B = 2, Sq = 10, Sk = 12, D = 64, H = 8;
    mhad_module *md = make_module(D, H, 0.1, 2, 1);
    mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = 0.0, .seed = 1, .threads = 2};
    mha_module *mf = NULL;
    assert_int_equal(mha_create(&mf, &cfg), MHA_OK);
    size_t saved, total, words = (Sq * Sk + 63) / 64;
    assert_int_equal(mhad_cache_size(md, B, Sq, Sk, &saved, &total), MHA_OK);
    assert_int_equal(saved, (2 * B * Sq * D + 2 * B * Sk * D + B * H * Sq * Sk) * sizeof(double) +
                                B * H * words * 8 + B * H * Sq + B * sizeof(size_t));
    assert_true(total > saved);
    assert_int_equal(mha_cache_size(mf, B, Sq, Sk, &saved, NULL), MHA_OK);
    assert_int_equal(saved, (2 * B * Sq * D + 2 * B * Sk * D + B * H * Sq * Sk) * sizeof(float) +
                                B * H * Sq + B * sizeof(size_t));
    mhad_destroy(md);
    mha_destroy(mf);
}

/* A mask of full shape [B, H, Sq, Sk] is read at (b, h): each (b, h) slice masks a
 * different key per row (j = (b·H + h + i) mod Sk), so reading it as (h, b) moves
 * the zeros (B = H = 2: slices (0,1) and (1,0) differ). STORED weights are 0
 * exactly there and positive elsewhere; RECOMPUTE gives the same output. */
static void api_mask_full_shape(void **state)
{
    (void)state;
    const size_t B = 2, H = 2, Sq = 3, Sk = 4, D = 4;
    mha_config cfg = {.model_dim = D, .num_heads = H, .seed = 5, .threads = 1};
    mha_module *m = NULL;
    mha_cache *c = NULL, *cr = NULL;
    assert_int_equal(mha_create(&m, &cfg), MHA_OK);
    assert_int_equal(mha_cache_create_mode(&c, m, B, Sq, Sk, MHA_ATTN_STORED), MHA_OK);
    assert_int_equal(mha_cache_create_mode(&cr, m, B, Sq, Sk, MHA_ATTN_RECOMPUTE), MHA_OK);
    float xq[B * Sq * D], xc[B * Sk * D], out[B * Sq * D], outr[B * Sq * D];
    fill_uniform_f(xq, B * Sq * D, -2, 2, 21);
    fill_uniform_f(xc, B * Sk * D, -2, 2, 22);
    uint8_t mask[B * H * Sq * Sk];
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Sq; i++)
                for (size_t j = 0; j < Sk; j++)
                    mask[((b * H + h) * Sq + i) * Sk + j] = j != (b * H + h + i) % Sk;
    mha_mask mk = {.mask = mask, .mask_batch = B, .mask_heads = H};
    assert_int_equal(mha_forward(m, c, 0, B, Sq, xq, Sk, xc, &mk, out), MHA_OK);
    assert_int_equal(mha_forward(m, cr, 0, B, Sq, xq, Sk, xc, &mk, outr), MHA_OK);
    const float *w;
    size_t s[4];
    assert_int_equal(mha_cache_attention(c, &w, s), MHA_OK);
    for (size_t k = 0; k < B * H * Sq * Sk; k++) {
        if (mask[k])
            assert_true(w[k] > 0.0f);
        else
            assert_true(w[k] == 0.0f);
    }
    for (size_t k = 0; k < B * Sq * D; k++)
        assert_close(outr[k], out[k], 1e-5, 1e-5);
    mha_cache_destroy(c);
    mha_cache_destroy(cr);
    mha_destroy(m);
}

/* The seed's fill: a masked score becomes −1e9, so a masked key takes no weight even when
 * every kept score is far below zero (here ≈ −7.1e5 — below a smaller fill such as −1e4,
 * which would hand the masked key all the weight). Identity projections, one head, a query
 * (1000, 0) against keys (−1000, 1), (0, 7) [masked], (−1000, 2): the two kept keys tie,
 * so the output is their mean (−1000, 1.5), in both attention modes, float64 and float32. */
static void api_mask_fill_is_minus_1e9(void **state)
{
    (void)state;
    enum { D = 2, SK = 3 };
    const uint8_t mk[SK] = {1, 0, 1};
    const mha_mask mask = {.mask = mk, .mask_batch = 1, .mask_heads = 1};
    const double xq[D] = {1000.0, 0.0}, xc[SK * D] = {-1000.0, 1.0, 0.0, 7.0, -1000.0, 2.0};
    for (int mode = 0; mode < 2; mode++) {
        mha_config cfg = {.model_dim = D, .num_heads = 1, .seed = 1, .threads = 1};
        mhad_module *m;
        assert_int_equal(mhad_create(&m, &cfg), MHA_OK);
        size_t np;
        double *p = mhad_params(m, &np);
        memset(p, 0, np * sizeof *p);
        for (size_t w = 0; w < 4; w++) /* w_q, w_k, w_v, w_o = I; biases 0 */
            for (size_t i = 0; i < D; i++)
                p[w * (D * D + D) + i * D + i] = 1.0;
        mhad_cache *c;
        assert_int_equal(mhad_cache_create_mode(&c, m, 1, 1, SK, (mha_attn_mode)mode), MHA_OK);
        double out[D];
        assert_int_equal(mhad_forward(m, c, 0, 1, 1, xq, SK, xc, &mask, out), MHA_OK);
        assert_close(out[0], -1000.0, 1e-9, 0);
        assert_close(out[1], 1.5, 1e-9, 0);
        mhad_cache_destroy(c);
        mhad_destroy(m);
        /* float32 */
        mha_module *mf;
        assert_int_equal(mha_create(&mf, &cfg), MHA_OK);
        float *pf = mha_params(mf, &np);
        memset(pf, 0, np * sizeof *pf);
        for (size_t w = 0; w < 4; w++)
            for (size_t i = 0; i < D; i++)
                pf[w * (D * D + D) + i * D + i] = 1.0f;
        mha_cache *cf;
        assert_int_equal(mha_cache_create_mode(&cf, mf, 1, 1, SK, (mha_attn_mode)mode), MHA_OK);
        const float xqf[D] = {1000.0f, 0.0f},
                    xcf[SK * D] = {-1000.0f, 1.0f, 0.0f, 7.0f, -1000.0f, 2.0f};
        float of[D];
        assert_int_equal(mha_forward(mf, cf, 0, 1, 1, xqf, SK, xcf, &mask, of), MHA_OK);
        assert_close(of[0], -1000.0, 1e-3, 0);
        assert_close(of[1], 1.5, 1e-3, 0);
        mha_cache_destroy(cf);
        mha_destroy(mf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(api_status_table),
        cmocka_unit_test(api_mask_full_shape),
        cmocka_unit_test(api_create_invalid),
        cmocka_unit_test(api_overflow_refused),
        cmocka_unit_test(api_tensor_layout),
        cmocka_unit_test(api_init_like_pytorch),
        cmocka_unit_test(api_forward_invalid),
        cmocka_unit_test(api_backward_invalid),
        cmocka_unit_test(api_mask_semantics),
        cmocka_unit_test(api_threads_independent),
        cmocka_unit_test(api_accumulate_and_caches),
        cmocka_unit_test(api_backward_ignores_freed_mask),
        cmocka_unit_test(api_cache_bytes),
        cmocka_unit_test(api_mask_fill_is_minus_1e9),
    };
    return cmocka_run_group_tests_name("mha_api", tests, NULL, NULL);
}
