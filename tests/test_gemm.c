/* The internal GEMM module (src/gemm.h): every backend (own kernel, BLAS, libxsmm, and
 * the entry point's rule) against the naive reference, for every transposition, odd and
 * one-sized dimensions, row strides wider than the matrices, and alpha/beta (beta = 0
 * over NaN), in both precisions; exact accumulation; the backend choice independent of
 * the thread count; the tiled transpose. The entry point's row split, its work argument,
 * epilogues and libxsmm's slices of K: tests/test_gemm_split.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mha_internal.h"
#include "test_util.h"

/* The BLAS and reference versions, adapted to gemm_small's signature (work unused). */
typedef void (*dgemm_fn)(int, int, size_t, size_t, size_t, double, const double *, size_t,
                         const double *, size_t, double, double *, size_t, double *);
typedef void (*sgemm_fn)(int, int, size_t, size_t, size_t, float, const float *, size_t,
                         const float *, size_t, float, float *, size_t, float *);

static void dgemm_blas_w(int ta, int tb, size_t M, size_t N, size_t K, double alpha,
                         const double *A, size_t lda, const double *B, size_t ldb, double beta,
                         double *C, size_t ldc, double *work)
{
    (void)work;
    mha__dgemm_blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void sgemm_blas_w(int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                         const float *A, size_t lda, const float *B, size_t ldb, float beta,
                         float *C, size_t ldc, float *work)
{
    (void)work;
    mha__sgemm_blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Sizes with odd, prime and one-sized dimensions; stride padding of 3. */
static const size_t dims[][3] = {{1, 1, 1}, {3, 5, 7}, {8, 8, 8}, {17, 4, 33}, {2, 65, 9},
                                 {5, 16, 3}, {9, 24, 8}, {4, 40, 1}};

static void check_double(dgemm_fn f, double tol)
{
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t M = dims[d][0], N = dims[d][1], K = dims[d][2];
                size_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                size_t lda = ac + 3, ldb = bc + 3, ldc = N + 3;
                double *A = malloc(ar * lda * sizeof *A), *B = malloc(br * ldb * sizeof *B);
                double *C = malloc(M * ldc * sizeof *C), *R = malloc(M * ldc * sizeof *R);
                double *work = malloc(K * N * sizeof *work);
                assert_true(A && B && C && R && work);
                fill_uniform(A, ar * lda, -1, 1, 1 + d);
                fill_uniform(B, br * ldb, -1, 1, 2 + d);
                fill_uniform(C, M * ldc, -1, 1, 3 + d);
                memcpy(R, C, M * ldc * sizeof *C);
                f(ta, tb, M, N, K, 0.75, A, lda, B, ldb, -0.5, C, ldc, work);
                mha__dgemm_ref(ta, tb, M, N, K, 0.75, A, lda, B, ldb, -0.5, R, ldc);
                for (size_t i = 0; i < M; i++) {
                    for (size_t j = 0; j < N; j++)
                        assert_close(C[i * ldc + j], R[i * ldc + j], tol, tol);
                    for (size_t j = N; j < ldc; j++) /* padding untouched */
                        assert_true(C[i * ldc + j] == R[i * ldc + j]);
                }
                /* beta = 0 must ignore C's old contents, even NaN */
                for (size_t i = 0; i < M * ldc; i++)
                    C[i] = NAN;
                f(ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc, work);
                mha__dgemm_ref(ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, R, ldc);
                for (size_t i = 0; i < M; i++)
                    for (size_t j = 0; j < N; j++)
                        assert_close(C[i * ldc + j], R[i * ldc + j], tol, tol);
                free(A);
                free(B);
                free(C);
                free(R);
                free(work);
            }
}

static void check_float(sgemm_fn f)
{
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t M = dims[d][0], N = dims[d][1], K = dims[d][2];
                size_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                size_t lda = ac + 1, ldb = bc + 2, ldc = N + 1;
                float *A = malloc(ar * lda * sizeof *A), *B = malloc(br * ldb * sizeof *B);
                float *C = malloc(M * ldc * sizeof *C), *R = malloc(M * ldc * sizeof *R);
                float *work = malloc(K * N * sizeof *work);
                assert_true(A && B && C && R && work);
                fill_uniform_f(A, ar * lda, -1, 1, 11 + d);
                fill_uniform_f(B, br * ldb, -1, 1, 12 + d);
                fill_uniform_f(C, M * ldc, -1, 1, 13 + d);
                memcpy(R, C, M * ldc * sizeof *C);
                f(ta, tb, M, N, K, 2.0f, A, lda, B, ldb, 1.0f, C, ldc, work);
                mha__sgemm_ref(ta, tb, M, N, K, 2.0f, A, lda, B, ldb, 1.0f, R, ldc);
                for (size_t i = 0; i < M * ldc; i++)
                    assert_close(C[i], R[i], 1e-5 * (double)K, 1e-5);
                free(A);
                free(B);
                free(C);
                free(R);
                free(work);
            }
}

/* Own register-blocked kernel (all row/column remainders) equals the reference. */
static void gemm_small_double(void **state)
{
    (void)state;
    check_double(mha__dgemm_small, 1e-13);
}

/* CBLAS wrapper (row-major, size_t → blasint) equals the reference, double. */
static void gemm_blas_double(void **state)
{
    (void)state;
    check_double(dgemm_blas_w, 1e-13);
}

/* Both versions in float. */
static void gemm_small_float(void **state)
{
    (void)state;
    check_float(mha__sgemm_small);
}

static void gemm_blas_float(void **state)
{
    (void)state;
    check_float(sgemm_blas_w);
}

/* ---- every backend, forced through mha__?gemm_with -------------------------------- */

/* Shapes for the backend sweep: ones, odd/prime sizes, vector remainders, and sizes
 * past libxsmm's and the own kernel's blocking. */
static const size_t bdims[][3] = {{1, 1, 1},   {1, 7, 1},    {7, 1, 5},    {1, 1, 33},
                                  {3, 5, 7},   {17, 4, 33},  {2, 65, 9},   {9, 24, 8},
                                  {33, 17, 1}, {64, 64, 8},  {20, 64, 64}, {37, 130, 67},
                                  {128, 48, 96}};
/* (alpha, beta): plain, scaled product over beta = 0 (C holds NaN), accumulate, both */
static const double ab[][2] = {{1, 0}, {0.375, 0}, {1, 1}, {0.75, -0.5}, {-2, 1}};

static const mha__gemm_backend backends[] = {MHA__GEMM_OWN, MHA__GEMM_BLAS, MHA__GEMM_XSMM,
                                             MHA__GEMM_AUTO};

/* The backend sweep (tests/test_gemm_sweep.inc) in double, then in float. */
#define REAL double
#define P(s) mha__dgemm##s
#define FILL fill_uniform
#define TOL_EPS (16 * DBL_EPSILON)
#define PAD_A 3
#define PAD_B 2
#define PAD_C 5
#define SEED0 100
#define SWEEP sweep_double
#define TEST_NAME gemm_backends_double
#include "test_gemm_sweep.inc"
#undef REAL
#undef P
#undef FILL
#undef TOL_EPS
#undef PAD_A
#undef PAD_B
#undef PAD_C
#undef SEED0
#undef SWEEP
#undef TEST_NAME

#define REAL float
#define P(s) mha__sgemm##s
#define FILL fill_uniform_f
#define TOL_EPS (4 * FLT_EPSILON)
#define PAD_A 1
#define PAD_B 4
#define PAD_C 3
#define SEED0 300
#define SWEEP sweep_float
#define TEST_NAME gemm_backends_float
#include "test_gemm_sweep.inc"
#undef REAL
#undef P
#undef FILL
#undef TOL_EPS
#undef PAD_A
#undef PAD_B
#undef PAD_C
#undef SEED0
#undef SWEEP
#undef TEST_NAME

/* beta = 1 adds exactly the product a beta = 0 call writes (backward passes accumulate:
 * old + new, bit for bit), on every backend. */
static void gemm_accumulate_exact(void **state)
{
    (void)state;
    const size_t M = 37, N = 70, K = 45;
    for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++)
        for (int t = 0; t < 4; t++) {
            const int ta = t >> 1, tb = t & 1;
            float *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
            float *old = malloc(M * N * sizeof *old), *fresh = malloc(M * N * sizeof *fresh);
            float *acc = malloc(M * N * sizeof *acc);
            assert_true(A && B && old && fresh && acc);
            fill_uniform_f(A, M * K, -1, 1, 7 + (uint64_t)t);
            fill_uniform_f(B, K * N, -1, 1, 8 + (uint64_t)t);
            fill_uniform_f(old, M * N, -1, 1, 9 + (uint64_t)t);
            memcpy(acc, old, M * N * sizeof *acc);
            const size_t lda = ta ? M : K, ldb = tb ? K : N;
            if (mha__sgemm_with(backends[b], ta, tb, M, N, K, 1, A, lda, B, ldb, 0, fresh, N) !=
                0) {
                assert_true(backends[b] == MHA__GEMM_XSMM && !mha__gemm_have_xsmm());
            } else {
                assert_int_equal(mha__sgemm_with(backends[b], ta, tb, M, N, K, 1, A, lda, B, ldb,
                                                 1, acc, N),
                                 0);
                for (size_t i = 0; i < M * N; i++)
                    assert_true(acc[i] == old[i] + fresh[i]);
            }
            free(A);
            free(B);
            free(old);
            free(fresh);
            free(acc);
        }
}

/* Products with one row and a transposed B (generation's projections) never pay for
 * transposing B: they go to BLAS outside parallel regions. */
static void gemm_choice_few_rows(void **state)
{
    (void)state;
    for (size_t M = 1; M < 16; M += 7) {
        assert_int_equal(mha__sgemm_choice(1, 0, 1, M, 128, 128, 1, 0), MHA__GEMM_BLAS);
        assert_int_equal(mha__dgemm_choice(1, 0, 1, M, 512, 128, 1, 1), MHA__GEMM_BLAS);
    }
}

/* The backend rule as written above gemm_choose (src/gemm_core.c), outside parallel
 * loops (threads 1): with libxsmm — NN libxsmm; NT BLAS below 16 rows, libxsmm from 16;
 * TN the own kernel below 4096 multiply-adds, libxsmm from it; TT BLAS —, without it BLAS from 16384 multiply-adds and the
 * own kernel below. Never the reference (a test oracle, not a backend), in either
 * precision. Inside a parallel loop (threads 0) never the OpenMP or the sequential
 * OpenBLAS (only the pthreads build may be called there). */
static void gemm_choice_follows_the_rule(void **state)
{
    (void)state;
    const size_t shapes[][3] = {{1, 128, 128},  {8, 64, 16},    {16, 256, 64},  {64, 512, 64},
                                {128, 768, 256}, {512, 128, 768}, {2048, 64, 64}, {10, 10, 10},
                                {4, 8, 16},      {128, 128, 512}, {300, 96, 64},  {1, 1, 1},
                                {64, 1024, 64},  {64, 1025, 64},  {1024, 64, 512}, {1025, 64, 512}};
    const int xsmm = mha__gemm_have_xsmm();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t >> 1, tb = t & 1;
            const size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const double work = (double)M * N * K;
            mha__gemm_backend want;
            if (!xsmm)
                want = work >= 16384 ? MHA__GEMM_BLAS : MHA__GEMM_OWN;
            else if (!ta && !tb)
                want = MHA__GEMM_XSMM;
            else if (!ta)
                want = M >= 16 ? MHA__GEMM_XSMM : MHA__GEMM_BLAS;
            else if (!tb)
                want = work < 4096 ? MHA__GEMM_OWN : MHA__GEMM_XSMM;
            else
                want = MHA__GEMM_BLAS;
            const mha__gemm_backend fs = mha__sgemm_choice(1, ta, tb, M, N, K, 1, 0);
            const mha__gemm_backend fd = mha__dgemm_choice(1, ta, tb, M, N, K, 1, 1);
            if (fs != want || fd != want)
                fail_msg("%s%s %zux%zux%zu: float %d, double %d, the rule says %d",
                         ta ? "T" : "N", tb ? "T" : "N", M, N, K, (int)fs, (int)fd, (int)want);
            assert_true(fs != MHA__GEMM_REF && fd != MHA__GEMM_REF);
            if (mha__blas_kind() != 1) {
                assert_int_not_equal(mha__sgemm_choice(0, ta, tb, M, N, K, 1, 0), MHA__GEMM_BLAS);
                assert_int_not_equal(mha__dgemm_choice(0, ta, tb, M, N, K, 1, 1), MHA__GEMM_BLAS);
            }
        }
}

/* Shapes for the transpose: whole tiles (8×8 floats, 4×4 doubles), odd edges on either
 * side or both, one row or column, and more than one tile each way. */
static const size_t tdims[][2] = {{1, 1}, {1, 9}, {9, 1}, {3, 5}, {4, 4}, {8, 8}, {7, 13},
                                  {13, 7}, {16, 24}, {17, 33}, {40, 3}, {64, 64}, {65, 70}};

/* mha__dtranspose: out[c, r] = in[r, c] exactly, for every shape above with row strides
 * wider than the matrices; the padding of out (columns r >= rows) is not written. */
static void gemm_transpose_double(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof tdims / sizeof tdims[0]; d++) {
        const size_t rows = tdims[d][0], cols = tdims[d][1], ldi = cols + 3, ldo = rows + 5;
        double *in = malloc(rows * ldi * sizeof *in), *out = malloc(cols * ldo * sizeof *out);
        assert_true(in && out);
        fill_uniform(in, rows * ldi, -1, 1, 40 + d);
        for (size_t e = 0; e < cols * ldo; e++)
            out[e] = 7.0; /* sentinel */
        mha__dtranspose(rows, cols, in, ldi, out, ldo);
        for (size_t c = 0; c < cols; c++)
            for (size_t r = 0; r < ldo; r++)
                assert_true(out[c * ldo + r] == (r < rows ? in[r * ldi + c] : 7.0));
        free(in);
        free(out);
    }
}

/* mha__stranspose: the same in float. */
static void gemm_transpose_float(void **state)
{
    (void)state;
    for (size_t d = 0; d < sizeof tdims / sizeof tdims[0]; d++) {
        const size_t rows = tdims[d][0], cols = tdims[d][1], ldi = cols + 3, ldo = rows + 5;
        float *in = malloc(rows * ldi * sizeof *in), *out = malloc(cols * ldo * sizeof *out);
        assert_true(in && out);
        fill_uniform_f(in, rows * ldi, -1, 1, 60 + d);
        for (size_t e = 0; e < cols * ldo; e++)
            out[e] = 7.0f; /* sentinel */
        mha__stranspose(rows, cols, in, ldi, out, ldo);
        for (size_t c = 0; c < cols; c++)
            for (size_t r = 0; r < ldo; r++)
                assert_true(out[c * ldo + r] == (r < rows ? in[r * ldi + c] : 7.0f));
        free(in);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_small_double),
        cmocka_unit_test(gemm_blas_double),
        cmocka_unit_test(gemm_small_float),
        cmocka_unit_test(gemm_blas_float),
        cmocka_unit_test(gemm_backends_double),
        cmocka_unit_test(gemm_backends_float),
        cmocka_unit_test(gemm_accumulate_exact),
        cmocka_unit_test(gemm_choice_few_rows),
        cmocka_unit_test(gemm_choice_follows_the_rule),
        cmocka_unit_test(gemm_transpose_double),
        cmocka_unit_test(gemm_transpose_float),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "gemm_epi_*": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("gemm", tests, NULL, NULL);
}
