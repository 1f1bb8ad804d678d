/*
 * The key/value cache for generation (mha_kvcache_*, mha_forward_cached): feeding a
 * sequence through the cache in chunks gives the rows of one causal forward over
 * the whole sequence in evaluation mode; length and reset; argument validation
 * (nothing written, cache unchanged on error); the dropout counter is not used;
 * results independent of the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

#define SENTINEL 12345.0

static double *alloc_d(size_t n)
{
    double *x = malloc(n * sizeof *x);
    assert_non_null(x);
    return x;
}

/* out [B, S, D] = mhad_forward(training 0, causal mask) over the whole sequence. */
static void full_causal_d(mhad_module *m, size_t B, size_t S, const double *x, double *out)
{
    mhad_cache *c = NULL;
    assert_int_equal(mhad_cache_create(&c, m, B, S, S), MHA_OK);
    mha_mask mask = {.causal = 1};
    assert_int_equal(mhad_forward(m, c, 0, B, S, x, 0, NULL, &mask, out), MHA_OK);
    mhad_cache_destroy(c);
}

/* Feed x [B, S, D] through kv in chunks of chunk[0], chunk[1], ... (cycled, the
 * last one cut to what is left) into out [B, S, D]; checks the length after each. */
static void feed_d(mhad_module *m, mhad_kvcache *kv, size_t B, size_t S, size_t D,
                   const size_t *chunk, size_t nchunk, const double *x, double *out)
{
    double *xc = alloc_d(B * S * D), *oc = alloc_d(B * S * D);
    size_t t = 0, len = 99;
    for (size_t c = 0; t < S; c++) {
        size_t n = chunk[c % nchunk];
        n = n < S - t ? n : S - t;
        for (size_t b = 0; b < B; b++) /* rows t .. t+n−1 of each sequence → [B, n, D] */
            memcpy(xc + b * n * D, x + (b * S + t) * D, n * D * sizeof *x);
        assert_int_equal(mhad_forward_cached(m, kv, B, n, xc, oc), MHA_OK);
        for (size_t b = 0; b < B; b++)
            memcpy(out + (b * S + t) * D, oc + b * n * D, n * D * sizeof *out);
        t += n;
        assert_int_equal(mhad_kvcache_length(kv, &len), MHA_OK);
        assert_int_equal(len, t);
    }
    free(xc);
    free(oc);
}

/* The float32 twins of the two helpers above. */
static void full_causal_f(mha_module *m, size_t B, size_t S, const float *x, float *out)
{
    mha_cache *c = NULL;
    assert_int_equal(mha_cache_create(&c, m, B, S, S), MHA_OK);
    mha_mask mask = {.causal = 1};
    assert_int_equal(mha_forward(m, c, 0, B, S, x, 0, NULL, &mask, out), MHA_OK);
    mha_cache_destroy(c);
}

static void feed_f(mha_module *m, mha_kvcache *kv, size_t B, size_t S, size_t D,
                   const size_t *chunk, size_t nchunk, const float *x, float *out)
{
    float *xc = malloc(B * S * D * sizeof *xc), *oc = malloc(B * S * D * sizeof *oc);
    assert_true(xc != NULL && oc != NULL);
    for (size_t c = 0, t = 0; t < S; c++) {
        size_t n = chunk[c % nchunk];
        n = n < S - t ? n : S - t;
        for (size_t b = 0; b < B; b++)
            memcpy(xc + b * n * D, x + (b * S + t) * D, n * D * sizeof *x);
        assert_int_equal(mha_forward_cached(m, kv, B, n, xc, oc), MHA_OK);
        for (size_t b = 0; b < B; b++)
            memcpy(out + (b * S + t) * D, oc + b * n * D, n * D * sizeof *out);
        t += n;
    }
    free(xc);
    free(oc);
}

typedef struct kv_case {
    size_t B, cap_b, S, D, H;
} kv_case;

/* hd = 12, 5, 32 and 3 cover whole vectors, two-vector blocks and scalar tails in
 * both precisions; D = 20 and 12 are not multiples of 8; cap_b > B works too. */
static const kv_case CASES[] = {
    {1, 1, 17, 12, 1}, {3, 3, 17, 20, 4}, {1, 2, 19, 64, 2}, {3, 4, 13, 12, 4}, {2, 2, 21, 20, 1},
};
static const size_t ONES[] = {1}, PREFILL[] = {5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                               1, 1, 1, 1, 1},
                    UNEVEN[] = {3, 1, 4, 1, 5, 9, 2, 6};
static const struct {
    const size_t *chunk;
    size_t n;
} SCHEDULES[] = {{ONES, 1}, {PREFILL, sizeof PREFILL / sizeof *PREFILL},
                 {UNEVEN, sizeof UNEVEN / sizeof *UNEVEN}};
#define NCASES (sizeof CASES / sizeof *CASES)
#define NSCHED (sizeof SCHEDULES / sizeof *SCHEDULES)

/* float64: chunked cached forwards (one at a time, prefill of 5 then ones, uneven
 * chunks) equal the full causal eval forward within 1e-12 of the largest |out|. */
static void kv_matches_full_forward_f64(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCASES; ci++) {
        const kv_case *k = &CASES[ci];
        const size_t n = k->B * k->S * k->D;
        mhad_module *m = make_module(k->D, k->H, 0.0, 1, 100 + ci);
        double *x = alloc_d(n), *ref = alloc_d(n), *got = alloc_d(n);
        fill_uniform(x, n, -1.0, 1.0, 7 + ci);
        full_causal_d(m, k->B, k->S, x, ref);
        for (size_t s = 0; s < NSCHED; s++) {
            mhad_kvcache *kv = NULL;
            assert_int_equal(mhad_kvcache_create(&kv, m, k->cap_b, k->S), MHA_OK);
            feed_d(m, kv, k->B, k->S, k->D, SCHEDULES[s].chunk, SCHEDULES[s].n, x, got);
            assert_close(rel_inf(got, ref, n), 0.0, 1e-12, 0.0);
            mhad_kvcache_destroy(kv);
        }
        free(x);
        free(ref);
        free(got);
        mhad_destroy(m);
    }
}

/* float32: the same agreement within 1e-5 of the largest |out|. */
static void kv_matches_full_forward_f32(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCASES; ci++) {
        const kv_case *k = &CASES[ci];
        const size_t n = k->B * k->S * k->D;
        mha_config cfg = {.model_dim = k->D, .num_heads = k->H, .seed = 200 + ci, .threads = 1};
        mha_module *m = NULL;
        assert_int_equal(mha_create(&m, &cfg), MHA_OK);
        float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref),
              *got = malloc(n * sizeof *got);
        double *refd = alloc_d(n), *gotd = alloc_d(n);
        assert_true(x != NULL && ref != NULL && got != NULL);
        fill_uniform_f(x, n, -1.0f, 1.0f, 9 + ci);
        full_causal_f(m, k->B, k->S, x, ref);
        for (size_t i = 0; i < n; i++)
            refd[i] = ref[i];
        for (size_t s = 0; s < NSCHED; s++) {
            mha_kvcache *kv = NULL;
            assert_int_equal(mha_kvcache_create(&kv, m, k->cap_b, k->S), MHA_OK);
            feed_f(m, kv, k->B, k->S, k->D, SCHEDULES[s].chunk, SCHEDULES[s].n, x, got);
            for (size_t i = 0; i < n; i++)
                gotd[i] = got[i];
            assert_close(rel_inf(gotd, refd, n), 0.0, 1e-5, 0.0);
            mha_kvcache_destroy(kv);
        }
        free(x);
        free(ref);
        free(got);
        free(refd);
        free(gotd);
        mha_destroy(m);
    }
}

/* Length counts the cached positions, reset empties the cache (and frees B to
 * change), and the same sequence after a reset gives bit-identical outputs; out may
 * be x_new itself. */
static void kv_length_and_reset(void **state)
{
    (void)state;
    const size_t B = 2, S = 11, D = 16, n = B * S * D;
    mhad_module *m = make_module(D, 4, 0.0, 1, 5);
    mhad_kvcache *kv = NULL;
    assert_int_equal(mhad_kvcache_create(&kv, m, 3, S), MHA_OK);
    size_t len = 99;
    assert_int_equal(mhad_kvcache_length(kv, &len), MHA_OK);
    assert_int_equal(len, 0);
    double *x = alloc_d(n), *first = alloc_d(n), *again = alloc_d(n);
    fill_uniform(x, n, -1.0, 1.0, 3);
    feed_d(m, kv, B, S, D, UNEVEN, sizeof UNEVEN / sizeof *UNEVEN, x, first);
    assert_int_equal(mhad_kvcache_reset(kv), MHA_OK);
    assert_int_equal(mhad_kvcache_length(kv, &len), MHA_OK);
    assert_int_equal(len, 0);
    /* after a reset another B is allowed */
    assert_int_equal(mhad_forward_cached(m, kv, 3, 1, x, again), MHA_OK);
    assert_int_equal(mhad_kvcache_reset(kv), MHA_OK);
    feed_d(m, kv, B, S, D, UNEVEN, sizeof UNEVEN / sizeof *UNEVEN, x, again);
    assert_memory_equal(first, again, n * sizeof *first);
    /* in place: out = x_new, one row per call as a generator would, equals one row
     * per call into a separate buffer (the same chunks: BLAS's summation order may
     * depend on the number of rows) */
    assert_int_equal(mhad_kvcache_reset(kv), MHA_OK);
    feed_d(m, kv, B, S, D, ONES, 1, x, first);
    assert_int_equal(mhad_kvcache_reset(kv), MHA_OK);
    double *row = alloc_d(B * D);
    for (size_t t = 0; t < S; t++) {
        for (size_t b = 0; b < B; b++)
            memcpy(row + b * D, x + (b * S + t) * D, D * sizeof *row);
        assert_int_equal(mhad_forward_cached(m, kv, B, 1, row, row), MHA_OK);
        for (size_t b = 0; b < B; b++)
            assert_memory_equal(row + b * D, first + (b * S + t) * D, D * sizeof *row);
    }
    free(row);
    free(x);
    free(first);
    free(again);
    mhad_kvcache_destroy(kv);
    mhad_destroy(m);
}

/* Each invalid argument returns its status, leaves out untouched and the cache
 * unchanged: the length stays, and continuing afterwards gives the outputs of a
 * run without the failed calls. */
static void kv_errors(void **state)
{
    (void)state;
    const size_t B = 2, S = 8, D = 12, n = B * S * D;
    mhad_module *m = make_module(D, 3, 0.0, 1, 11), *other = make_module(D, 3, 0.0, 1, 11);
    mhad_kvcache *kv = NULL, *kv_other = NULL, *keep = (mhad_kvcache *)&kv;
    /* create */
    mhad_kvcache *out = keep;
    assert_int_equal(mhad_kvcache_create(NULL, m, 1, 4), MHA_EINVAL);
    assert_int_equal(mhad_kvcache_create(&out, NULL, 1, 4), MHA_EINVAL);
    assert_int_equal(mhad_kvcache_create(&out, m, 0, 4), MHA_EINVAL);
    assert_int_equal(mhad_kvcache_create(&out, m, 1, 0), MHA_EINVAL);
    assert_int_equal(mhad_kvcache_create(&out, m, SIZE_MAX, 2), MHA_EOVERFLOW);
    assert_int_equal(mhad_kvcache_create(&out, m, 2, SIZE_MAX), MHA_EOVERFLOW);
    assert_int_equal(mhad_kvcache_create(&out, m, (size_t)1 << 20, (size_t)1 << 12),
                     MHA_EOVERFLOW); /* 2^32 rows: more than BLAS's int */
    assert_ptr_equal(out, keep);
    assert_int_equal(mhad_kvcache_reset(NULL), MHA_EINVAL);
    size_t len = 77;
    assert_int_equal(mhad_kvcache_length(NULL, &len), MHA_EINVAL);
    assert_int_equal(len, 77);
    mhad_kvcache_destroy(NULL);

    assert_int_equal(mhad_kvcache_create(&kv, m, B, S), MHA_OK);
    assert_int_equal(mhad_kvcache_length(kv, NULL), MHA_EINVAL);
    assert_int_equal(mhad_kvcache_create(&kv_other, other, B, S), MHA_OK);
    double *x = alloc_d(n), *ref = alloc_d(n), *o = alloc_d(n);
    fill_uniform(x, n, -1.0, 1.0, 12);
    full_causal_d(m, B, S, x, ref);
    /* 3 positions of each sequence: x rows [B, 3, D] taken from x [B, S, D] */
    double *x3 = alloc_d(B * 3 * D), *o3 = alloc_d(B * 3 * D);
    for (size_t b = 0; b < B; b++)
        memcpy(x3 + b * 3 * D, x + b * S * D, 3 * D * sizeof *x);
    assert_int_equal(mhad_forward_cached(m, kv, B, 3, x3, o3), MHA_OK);

    struct {
        mhad_module *m;
        mhad_kvcache *kv;
        size_t batch, n_new;
        const double *x;
        double *out;
        int want;
    } bad[] = {
        {NULL, kv, B, 1, x, o, MHA_EINVAL},       {m, NULL, B, 1, x, o, MHA_EINVAL},
        {m, kv, B, 1, NULL, o, MHA_EINVAL},       {m, kv, B, 1, x, NULL, MHA_EINVAL},
        {m, kv, 0, 1, x, o, MHA_EINVAL},          {m, kv, B, 0, x, o, MHA_EINVAL},
        {m, kv, B, S - 3 + 1, x, o, MHA_ESHAPE},  /* L + n_new > max_len */
        {m, kv, B, SIZE_MAX, x, o, MHA_ESHAPE},   /* no wrap-around in L + n_new */
        {m, kv, B + 1, 1, x, o, MHA_ESHAPE},      /* more than the capacity */
        {m, kv, 1, 1, x, o, MHA_ESHAPE},          /* B changed mid-sequence */
        {m, kv_other, B, 1, x, o, MHA_EMISMATCH}, /* cache of another module */
        {other, kv, B, 1, x, o, MHA_EMISMATCH},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        for (size_t e = 0; e < n; e++)
            o[e] = SENTINEL;
        assert_int_equal(mhad_forward_cached(bad[i].m, bad[i].kv, bad[i].batch, bad[i].n_new,
                                             bad[i].x, bad[i].out),
                         bad[i].want);
        assert_true(all_equal_to(o, n, SENTINEL));
        assert_int_equal(mhad_kvcache_length(kv, &len), MHA_OK);
        assert_int_equal(len, 3);
        assert_int_equal(mhad_kvcache_length(kv_other, &len), MHA_OK);
        assert_int_equal(len, 0);
    }
    /* the cache is intact: the remaining S − 3 positions give the full forward's rows */
    double *xr = alloc_d(B * (S - 3) * D), *orr = alloc_d(B * (S - 3) * D);
    for (size_t b = 0; b < B; b++)
        memcpy(xr + b * (S - 3) * D, x + (b * S + 3) * D, (S - 3) * D * sizeof *x);
    assert_int_equal(mhad_forward_cached(m, kv, B, S - 3, xr, orr), MHA_OK);
    for (size_t b = 0; b < B; b++)
        assert_close(rel_inf(orr + b * (S - 3) * D, ref + (b * S + 3) * D, (S - 3) * D), 0.0,
                     1e-12, 0.0);
    /* full now: one more position is MHA_ESHAPE */
    assert_int_equal(mhad_forward_cached(m, kv, B, 1, x, o), MHA_ESHAPE);
    free(x);
    free(ref);
    free(o);
    free(x3);
    free(o3);
    free(xr);
    free(orr);
    mhad_kvcache_destroy(kv);
    mhad_kvcache_destroy(kv_other);
    mhad_destroy(m);
    mhad_destroy(other);
}

/* The cached path is evaluation mode even with dropout_p > 0: the dropout call
 * counter is unchanged and the outputs are the eval forward's. */
static void kv_no_dropout(void **state)
{
    (void)state;
    const size_t B = 2, S = 9, D = 16, n = B * S * D;
    mhad_module *m = make_module(D, 2, 0.5, 1, 21);
    assert_int_equal(mhad_set_call_index(m, 41), MHA_OK);
    double *x = alloc_d(n), *ref = alloc_d(n), *got = alloc_d(n);
    fill_uniform(x, n, -1.0, 1.0, 22);
    full_causal_d(m, B, S, x, ref);
    mhad_kvcache *kv = NULL;
    assert_int_equal(mhad_kvcache_create(&kv, m, B, S), MHA_OK);
    feed_d(m, kv, B, S, D, PREFILL, sizeof PREFILL / sizeof *PREFILL, x, got);
    uint64_t call = 0;
    assert_int_equal(mhad_get_call_index(m, &call), MHA_OK);
    assert_int_equal(call, 41);
    assert_close(rel_inf(got, ref, n), 0.0, 1e-12, 0.0);
    free(x);
    free(ref);
    free(got);
    mhad_kvcache_destroy(kv);
    mhad_destroy(m);
}

/* Identical outputs with cfg.threads 1 and 2, including chunks large enough for
 * the per-head loop to start threads (B·H·n·(L+n)·hd >= 32768). */
static void kv_threads_independent(void **state)
{
    (void)state;
    const size_t B = 3, S = 40, D = 32, H = 4, n = B * S * D;
    const size_t chunks[] = {20, 1, 1, 1, 1, 1, 1, 1, 1, 12};
    double *x = alloc_d(n), *out[2] = {alloc_d(n), alloc_d(n)};
    fill_uniform(x, n, -1.0, 1.0, 31);
    for (int t = 0; t < 2; t++) {
        mhad_module *m = make_module(D, H, 0.1, t + 1, 33);
        mhad_kvcache *kv = NULL;
        assert_int_equal(mhad_kvcache_create(&kv, m, B, S), MHA_OK);
        feed_d(m, kv, B, S, D, chunks, sizeof chunks / sizeof *chunks, x, out[t]);
        mhad_kvcache_destroy(kv);
        mhad_destroy(m);
    }
    assert_memory_equal(out[0], out[1], n * sizeof *x);
    free(x);
    free(out[0]);
    free(out[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_matches_full_forward_f64),
        cmocka_unit_test(kv_matches_full_forward_f32),
        cmocka_unit_test(kv_length_and_reset),
        cmocka_unit_test(kv_errors),
        cmocka_unit_test(kv_no_dropout),
        cmocka_unit_test(kv_threads_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
