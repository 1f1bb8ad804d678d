/*
 * Self-attention's fused projections (x_context = NULL: [Q K V] = X·[W_q; W_k; W_v]ᵀ as
 * one product of width 3D, and its backward) against the unfused path (x_context = a
 * separate copy of x_query: three products, as for cross-attention): the same outputs,
 * parameter gradients and input gradients, in both attention modes and both precisions,
 * with dropout, masks, widths that are not a multiple of the vector length and the widest
 * fused width (D = 128, src/mha_core.c QKV_FUSE_MAX_D); and the same results on 1 and 2
 * threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

typedef struct fused_case {
    size_t B, S, D, H;
    int causal;
    int mask_tensor; /* broadcast mask [B,1,S,S], batch 0's last row fully masked */
    int lengths;     /* key lengths S, S−2, …                                     */
    double dropout;
} fused_case;

static const fused_case cases[] = {
    /* D = 12: whole 4×4 tiles in double, an 8×8 tile and edges in float */
    {.B = 2, .S = 13, .D = 12, .H = 3, .causal = 1, .lengths = 1, .dropout = 0.2},
    /* D = 18: edges in both precisions; a fully masked row; several row blocks */
    {.B = 1, .S = 70, .D = 18, .H = 3, .mask_tensor = 1, .dropout = 0.1},
    /* D = 64, the seed's width */
    {.B = 3, .S = 40, .D = 64, .H = 8, .causal = 1, .lengths = 1},
    /* D = 128: the widest fused width */
    {.B = 2, .S = 9, .D = 128, .H = 4, .dropout = 0.1},
};

typedef struct mask_data {
    uint8_t *bytes;
    size_t *lengths;
    mha_mask mask;
} mask_data;

static const mha_mask *build_mask(const fused_case *fc, mask_data *md)
{
    memset(md, 0, sizeof *md);
    md->mask.mask_batch = md->mask.mask_heads = 1;
    if (fc->mask_tensor) {
        mha_pcg32 rng;
        mha_pcg32_seed(&rng, 5, 1);
        const size_t n = fc->B * fc->S * fc->S;
        md->bytes = malloc(n);
        assert_non_null(md->bytes);
        for (size_t e = 0; e < n; e++)
            md->bytes[e] = mha_pcg32_next(&rng) % 4 != 0;
        memset(md->bytes + (fc->S - 1) * fc->S, 0, fc->S);
        md->mask.mask = md->bytes;
        md->mask.mask_batch = fc->B;
    }
    if (fc->lengths) {
        md->lengths = malloc(fc->B * sizeof *md->lengths);
        assert_non_null(md->lengths);
        for (size_t b = 0; b < fc->B; b++)
            md->lengths[b] = fc->S - 2 * b;
        md->mask.key_lengths = md->lengths;
    }
    md->mask.causal = fc->causal;
    return fc->mask_tensor || fc->lengths || fc->causal ? &md->mask : NULL;
}

#define REAL double
#define MHA_X(n) mhad_##n
#define RUN_NAME run_f64
#define FILL fill_uniform
#include "test_mha_fused_run.inc"
#undef REAL
#undef MHA_X
#undef RUN_NAME
#undef FILL

#define REAL float
#define MHA_X(n) mha_##n
#define RUN_NAME run_f32
#define FILL fill_uniform_f
#include "test_mha_fused_run.inc"
#undef REAL
#undef MHA_X
#undef RUN_NAME
#undef FILL

typedef double *(*run_fn)(const fused_case *, mha_attn_mode, int, int, size_t *);

/* Fails unless run(a) and run(b) agree within tol (relative to the largest value). */
static void expect_same(run_fn run, size_t k, mha_attn_mode mode, int fused_a, int threads_a,
                        int fused_b, int threads_b, double tol)
{
    size_t na, nb;
    double *a = run(&cases[k], mode, fused_a, threads_a, &na);
    double *b = run(&cases[k], mode, fused_b, threads_b, &nb);
    assert_int_equal(na, nb);
    const double rel = rel_inf(a, b, na);
    if (!(rel <= tol))
        print_error("case %zu, mode %d, fused %d/%d, threads %d/%d: relative difference %.3g\n",
                    k, (int)mode, fused_a, fused_b, threads_a, threads_b, rel);
    assert_true(rel <= tol);
    free(a);
    free(b);
}

/* float64: fused and unfused agree within 1e-12, in both modes, on 2 threads. */
static void fused_equals_unfused_f64(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int mode = 0; mode < 2; mode++)
            expect_same(run_f64, k, (mha_attn_mode)mode, 1, 2, 0, 2, 1e-12);
}

/* float32: within 1e-5. */
static void fused_equals_unfused_f32(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int mode = 0; mode < 2; mode++)
            expect_same(run_f32, k, (mha_attn_mode)mode, 1, 2, 0, 2, 1e-5);
}

/* The fused path gives the same results on 1 and 2 threads (float64 1e-12, float32 1e-6;
 * only BLAS's own summation order may differ). */
static void fused_thread_independent(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int mode = 0; mode < 2; mode++) {
            expect_same(run_f64, k, (mha_attn_mode)mode, 1, 1, 1, 2, 1e-12);
            expect_same(run_f32, k, (mha_attn_mode)mode, 1, 1, 1, 2, 1e-6);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fused_equals_unfused_f64),
        cmocka_unit_test(fused_equals_unfused_f32),
        cmocka_unit_test(fused_thread_independent),
    };
    return cmocka_run_group_tests_name("mha_fused", tests, NULL, NULL);
}
