/*
 * The attention module's dropout: its addressing and replay (call index, shapes in between,
 * evaluation mode, p = 1), and every decision against the documented stream (README,
 * "Dropout stream"), in both attention modes and both ways of drawing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "mha_internal.h" /* mha__dropout_simd */
#include "test_util.h"

/* Dropout: training with p = 1 leaves only the output bias; the same call index
 * replays the same mask; another call index draws another; evaluation mode is
 * the identity (equal to a p = 0 module with the same weights) and does not
 * advance the counter; a call's mask does not depend on earlier calls' shapes. */
static void api_dropout_replay(void **state)
{
    (void)state;
    const size_t B = 2, S = 6, D = 8, H = 2, n = B * S * D;
    mhad_module *m = make_module(D, H, 0.5, 1, 11), *m0 = make_module(D, H, 0.0, 1, 11);
    mhad_module *m1 = make_module(D, H, 1.0, 1, 11);
    mhad_cache *c = NULL, *c0 = NULL, *c1 = NULL;
    assert_int_equal(mhad_cache_create(&c, m, B, S, S), MHA_OK);
    assert_int_equal(mhad_cache_create(&c0, m0, B, S, S), MHA_OK);
    assert_int_equal(mhad_cache_create(&c1, m1, B, S, S), MHA_OK);
    double *x = make_input(n, 5), *a = filled(n, 0), *b = filled(n, 0), *e = filled(n, 0);
    uint64_t call;

    assert_int_equal(mhad_set_call_index(m, 7), MHA_OK);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, NULL, a), MHA_OK);
    assert_int_equal(mhad_get_call_index(m, &call), MHA_OK);
    assert_int_equal(call, 8);
    /* other shapes in between must not shift the stream */
    assert_int_equal(mhad_forward(m, c, 1, 1, 2, x, 0, NULL, NULL, b), MHA_OK);
    assert_int_equal(mhad_set_call_index(m, 7), MHA_OK);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, NULL, b), MHA_OK);
    assert_memory_equal(a, b, n * sizeof *a);
    assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, NULL, b), MHA_OK); /* call 8 */
    assert_true(max_abs_diff(a, b, n) > 1e-3);

    assert_int_equal(mhad_forward(m, c, 0, B, S, x, 0, NULL, NULL, a), MHA_OK);
    assert_int_equal(mhad_get_call_index(m, &call), MHA_OK);
    assert_int_equal(call, 9); /* evaluation did not advance it */
    assert_int_equal(mhad_forward(m0, c0, 1, B, S, x, 0, NULL, NULL, e), MHA_OK);
    assert_true(max_abs_diff(a, e, n) == 0.0);

    assert_int_equal(mhad_forward(m1, c1, 1, B, S, x, 0, NULL, NULL, a), MHA_OK);
    mha_tensor_info bo;
    assert_int_equal(mha_tensor_info_find(D, "w_o.bias", &bo), MHA_OK);
    const double *bias = mhad_params(m1, NULL) + bo.offset;
    for (size_t r = 0; r < B * S; r++)
        for (size_t j = 0; j < D; j++)
            assert_true(a[r * D + j] == bias[j]);

    mhad_cache_destroy(c);
    mhad_cache_destroy(c0);
    mhad_cache_destroy(c1);
    mhad_destroy(m);
    mhad_destroy(m0);
    mhad_destroy(m1);
    free(x);
    free(a);
    free(b);
    free(e);
}

/* The attention's dropout keeps exactly the weights the documented stream keeps (README,
 * "Dropout stream"): weight (b, h, i, j) of call n is kept iff output n·2^40 + ((b·H + h)·Sq +
 * i)·Sk + j of PCG32(seed, MHA_PCG32_STREAM_DROPOUT) is >= floor(p·2^32), and then scaled by
 * 1/(1 − p). With W_v = W_o = I, zero biases and one-hot keys (key j of head h is the unit
 * vector h·hd + j), the output row i of head h is P'ᵢ itself: P'_ij = 2·P_ij or 0 exactly.
 * Sq = Sk = 70: each head's 4,900 weights are 76 words of 64 and a partial one, each row of
 * the memory-efficient mode one word and 6 more; both modes, the masks drawn eight lanes at
 * a time on AVX-512 and by the portable loop. */
static void api_dropout_mask_is_the_stream(void **state)
{
    (void)state;
    const size_t B = 2, S = 70, H = 2, hd = S, D = H * hd, n = B * S * D;
    const uint64_t seed = 77, call = 5;
    const double p = 0.5;
    mhad_module *m = make_module(D, H, p, 2, seed);
    double *w = mhad_params(m, NULL);
    const char *ident[] = {"w_v", "w_o"};
    for (int t = 0; t < 2; t++) {
        char name[32];
        mha_tensor_info wi, bi;
        snprintf(name, sizeof name, "%s.weight", ident[t]);
        assert_int_equal(mha_tensor_info_find(D, name, &wi), MHA_OK);
        snprintf(name, sizeof name, "%s.bias", ident[t]);
        assert_int_equal(mha_tensor_info_find(D, name, &bi), MHA_OK);
        for (size_t r = 0; r < D; r++)
            for (size_t c = 0; c < D; c++)
                w[wi.offset + r * D + c] = r == c;
        memset(w + bi.offset, 0, D * sizeof *w);
    }
    double *x = filled(n, 0.0), *out = filled(n, 0.0);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < S; j++)
            for (size_t h = 0; h < H; h++)
                x[(b * S + j) * D + h * hd + j] = 1.0;
    mha_pcg32 rng0;
    mha_pcg32_seed(&rng0, seed, MHA_PCG32_STREAM_DROPOUT);
    const uint64_t T = (uint64_t)(p * 4294967296.0);
    const int simd_here = mha__dropout_simd(1);
    for (int mode = 0; mode < 2; mode++)
        for (int simd = 0; simd <= simd_here; simd++) {
            mha__dropout_simd(simd);
            mhad_cache *c = NULL;
            assert_int_equal(mhad_cache_create_mode(&c, m, B, S, S,
                                                    mode ? MHA_ATTN_RECOMPUTE : MHA_ATTN_STORED),
                             MHA_OK);
            assert_int_equal(mhad_set_call_index(m, call), MHA_OK);
            assert_int_equal(mhad_forward(m, c, 1, B, S, x, 0, NULL, NULL, out), MHA_OK);
            const double *P = NULL;
            size_t shape[4];
            if (mode == 0)
                assert_int_equal(mhad_cache_attention(c, &P, shape), MHA_OK);
            size_t kept = 0;
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H; h++)
                    for (size_t i = 0; i < S; i++)
                        for (size_t j = 0; j < S; j++) {
                            mha_pcg32 r = rng0;
                            mha_pcg32_advance(&r, (call << 40) + ((b * H + h) * S + i) * S + j);
                            const int keep = (uint64_t)mha_pcg32_next(&r) >= T;
                            const double got = out[(b * S + i) * D + h * hd + j];
                            kept += (size_t)keep;
                            if (mode == 0) {
                                const double want = keep ? 2.0 * P[((b * H + h) * S + i) * S + j] : 0.0;
                                if (got != want)
                                    print_error("stored, simd %d: (%zu,%zu,%zu,%zu) %.17g, "
                                                "want %.17g\n", simd, b, h, i, j, got, want);
                                assert_true(got == want);
                            } else {
                                if ((got != 0.0) != keep)
                                    print_error("recompute, simd %d: (%zu,%zu,%zu,%zu) %.17g, "
                                                "kept %d\n", simd, b, h, i, j, got, keep);
                                assert_true((got != 0.0) == keep);
                            }
                        }
            /* about half kept (19,600 draws: 9,800 ± 4σ of 70) */
            assert_true(kept > 9520 && kept < 10080);
            mhad_cache_destroy(c);
        }
    mha__dropout_simd(1); /* the default again */
    mhad_destroy(m);
    free(x);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(api_dropout_replay),
        cmocka_unit_test(api_dropout_mask_is_the_stream),
    };
    return cmocka_run_group_tests_name("mha_dropout", tests, NULL, NULL);
}
