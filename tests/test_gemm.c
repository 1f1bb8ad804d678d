/* The internal GEMM wrapper: BLAS and own-loop versions against the naive
 * reference, for every transposition, odd sizes, row strides wider than the
 * matrices, and alpha/beta. The template file also has both precisions. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_small_double),
        cmocka_unit_test(gemm_blas_double),
        cmocka_unit_test(gemm_small_float),
        cmocka_unit_test(gemm_blas_float),
    };
    return cmocka_run_group_tests_name("gemm", tests, NULL, NULL);
}
