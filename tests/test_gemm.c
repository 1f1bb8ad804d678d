/* The internal GEMM module (src/gemm.h): every backend (own kernel, BLAS, libxsmm, and
 * the entry point's rule) against the naive reference, for every transposition, odd and
 * one-sized dimensions, row strides wider than the matrices, and alpha/beta (beta = 0
 * over NaN), in both precisions; exact accumulation; row splits and the backend choice
 * independent of the thread count. */
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

/* The entry point splits rows over threads: results equal one thread's bit for bit, for
 * products above the split threshold, every transposition; inside a parallel region
 * (threads = 0) the same product gives the same bits too. K = 0 gives beta·C. */
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

static void gemm_entry_threads(void **state)
{
    (void)state;
    const size_t dims2[][3] = {{300, 96, 64}, {1024, 64, 64}, {128, 128, 768}, {5, 700, 200}};
    for (size_t d = 0; d < sizeof dims2 / sizeof dims2[0]; d++)
        for (int t = 0; t < 4; t++) {
            const int ta = t >> 1, tb = t & 1;
            const size_t M = dims2[d][0], N = dims2[d][1], K = dims2[d][2];
            const size_t lda = ta ? M : K, ldb = tb ? K : N;
            double *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
            double *C1 = malloc(M * N * sizeof *C1), *C2 = malloc(M * N * sizeof *C2);
            double *C0 = malloc(M * N * sizeof *C0), *R = malloc(M * N * sizeof *R);
            assert_true(A && B && C1 && C2 && C0 && R);
            fill_uniform(A, M * K, -1, 1, 21 + d);
            fill_uniform(B, K * N, -1, 1, 22 + d);
            fill_uniform(C1, M * N, -1, 1, 23 + d);
            memcpy(C2, C1, M * N * sizeof *C1);
            memcpy(C0, C1, M * N * sizeof *C1);
            memcpy(R, C1, M * N * sizeof *C1);
            const mha__gemm_backend be1 = mha__dgemm_choice(1, ta, tb, M, N, K, 1, 1);
            assert_int_equal(mha__dgemm_choice(2, ta, tb, M, N, K, 1, 1), be1);
            assert_int_equal(mha__dgemm_choice(7, ta, tb, M, N, K, 1, 1), be1);
            mha__dgemm(1, ta, tb, M, N, K, 1, A, lda, B, ldb, 1, C1, N, NULL);
            mha__dgemm(3, ta, tb, M, N, K, 1, A, lda, B, ldb, 1, C2, N, NULL);
            mha__dgemm_ref(ta, tb, M, N, K, 1, A, lda, B, ldb, 1, R, N);
            if (be1 != MHA__GEMM_BLAS) /* BLAS may sum in another order when threaded */
                assert_memory_equal(C1, C2, M * N * sizeof *C1);
            for (size_t i = 0; i < M * N; i++)
                assert_close(C2[i], R[i], 1e-12 * (double)K, 0);
#pragma omp parallel num_threads(2)
            {
#pragma omp single
                mha__dgemm(0, ta, tb, M, N, K, 1, A, lda, B, ldb, 1, C0, N, NULL);
            }
            for (size_t i = 0; i < M * N; i++)
                assert_close(C0[i], R[i], 1e-12 * (double)K, 0);
            free(A);
            free(B);
            free(C1);
            free(C2);
            free(C0);
            free(R);
        }
    double c[6] = {1, 2, 3, 4, 5, 6}, a = 0, b = 0;
    mha__dgemm(2, 0, 0, 2, 3, 0, 1, &a, 1, &b, 3, 0.5, c, 3, NULL); /* K = 0: C = beta·C */
    assert_true(c[0] == 0.5 && c[5] == 3);
}

/* The row split keeps the bits of one call where libxsmm computes the columns of its last
 * partial vector in another order for the rows at the end of its register block: widths
 * of 65..80 columns (the read-outs of 65 and 72 symbols), row counts whose halves or thirds
 * are not multiples of that block — float, NT (a read-out) and NN, 1, 2 and 3 threads.
 * Under CI's valgrind pass (MHA_TEST_UNDER_VALGRIND) one shape of the twelve: that pass runs
 * libxsmm's AVX2 kernels, which keep the bits however the rows are split, and their
 * multiply-adds cost about a thousand times their native time there (this test: 73 s of
 * the 2-core Xeon's valgrind pass), so it checks memory on the split path only. */
static void gemm_split_partial_vector_bits(void **state)
{
    (void)state;
    const size_t Ms[] = {1290, 1000, 1280, 777}, Ns[] = {72, 65, 75}, K = 192;
    const int vg = getenv("MHA_TEST_UNDER_VALGRIND") != NULL;
    if (vg)
        print_message("[  REDUCED ] under valgrind: 1290 x 72 x 192 alone\n");
    for (size_t a = 0; a < (vg ? 1 : sizeof Ms / sizeof Ms[0]); a++)
        for (size_t b = 0; b < (vg ? 1 : sizeof Ns / sizeof Ns[0]); b++)
            for (int tb = 0; tb < 2; tb++) {
                const size_t M = Ms[a], N = Ns[b];
                float *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B);
                float *C1 = malloc(M * N * sizeof *C1), *Ct = malloc(M * N * sizeof *Ct);
                assert_true(A && B && C1 && Ct);
                fill_uniform_f(A, M * K, -1, 1, 51 + a);
                fill_uniform_f(B, N * K, -1, 1, 52 + b);
                mha__sgemm(1, 0, tb, M, N, K, 1, A, K, B, tb ? K : N, 0, C1, N, NULL);
                for (int threads = 2; threads <= 3; threads++) {
                    mha__sgemm(threads, 0, tb, M, N, K, 1, A, K, B, tb ? K : N, 0, Ct, N, NULL);
                    if (memcmp(C1, Ct, M * N * sizeof *C1) != 0)
                        fail_msg("%s %zux%zux%zu: %d threads differ from one",
                                 tb ? "NT" : "NN", M, N, K, threads);
                }
                free(A);
                free(B);
                free(C1);
                free(Ct);
            }
}

/* libxsmm's products whose panel of B (K × N) is over 1 MiB take K in slices of 256
 * (src/gemm_core.c, XSMM_PANEL_BYTES): K of one slice and a little (420: 256 + 164), of a
 * last slice of one row (513) and of whole slices (1280) at N = 640 in float, K = 300 at
 * N = 600 in double; NN, NT and TN. Each against the float64 product within the bound of
 * any order of summation (γ_K·Σ|a||b|), beta = 1 adding exactly what beta = 0 writes, and
 * through the entry point the same bits on 1, 2 and 3 threads. Skipped, saying so, in a
 * build without libxsmm. Under CI's valgrind pass K = 513 and 300 only (first, middle and
 * last slices; first and last): the four took 60 s there. */
static void gemm_xsmm_k_slices(void **state)
{
    (void)state;
    if (!mha__gemm_have_xsmm()) {
        print_message("[  SKIP    ] no libxsmm in this build\n");
        skip();
    }
    const size_t Ks[] = {420, 513, 1280, 300}, M = 30;
    const int vg = getenv("MHA_TEST_UNDER_VALGRIND") != NULL;
    if (vg)
        print_message("[  REDUCED ] under valgrind: K = 513 (float) and 300 (double)\n");
    for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; c++)
        for (int tr = 0; tr < 3 && !(vg && (c == 0 || c == 2)); tr++) {
            const int dbl = c == 3, ta = tr == 2, tb = tr == 1;
            const size_t K = Ks[c], N = dbl ? 600 : 640, lda = ta ? M : K, ldb = tb ? K : N;
            double *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
            double *R = malloc(M * N * sizeof *R), *S = malloc(M * N * sizeof *S);
            double *C0 = malloc(M * N * sizeof *C0), *C1 = malloc(M * N * sizeof *C1);
            double *C2 = malloc(M * N * sizeof *C2);
            float *Af = malloc(M * K * sizeof *Af), *Bf = malloc(K * N * sizeof *Bf);
            float *F0 = malloc(M * N * sizeof *F0), *F1 = malloc(M * N * sizeof *F1);
            float *F2 = malloc(M * N * sizeof *F2);
            assert_true(A && B && R && S && C0 && C1 && C2 && Af && Bf && F0 && F1 && F2);
            fill_uniform(A, M * K, -1, 1, 600 + c);
            fill_uniform(B, K * N, -1, 1, 610 + c);
            for (size_t i = 0; i < M * K; i++)
                A[i] = Af[i] = (float)A[i]; /* the same values in both precisions */
            for (size_t i = 0; i < K * N; i++)
                B[i] = Bf[i] = (float)B[i];
            for (size_t i = 0; i < M; i++) /* R = op(A)·op(B) in double, S = Σ|a||b| */
                for (size_t j = 0; j < N; j++) {
                    double r = 0, a = 0;
                    for (size_t p = 0; p < K; p++) {
                        const double x = ta ? A[p * lda + i] : A[i * lda + p];
                        const double y = tb ? B[j * ldb + p] : B[p * ldb + j];
                        r += x * y;
                        a += fabs(x * y);
                    }
                    R[i * N + j] = r;
                    S[i * N + j] = a;
                }
            const double eps = dbl ? DBL_EPSILON : FLT_EPSILON, gamma = 1.01 * K * eps;
            fill_uniform(C1, M * N, -1, 1, 620 + c);
            for (size_t i = 0; i < M * N; i++)
                F1[i] = (float)C1[i];
            memcpy(C2, C1, M * N * sizeof *C1);
            memcpy(F2, F1, M * N * sizeof *F1);
            if (dbl) { /* C0 = P; C1 = old + P exactly as old + C0; C2 the entry point */
                assert_int_equal(mha__dgemm_with(MHA__GEMM_XSMM, ta, tb, M, N, K, 1, A, lda, B,
                                                 ldb, 0, C0, N), 0);
                for (size_t i = 0; i < M * N; i++)
                    C2[i] = C1[i] + C0[i];
                assert_int_equal(mha__dgemm_with(MHA__GEMM_XSMM, ta, tb, M, N, K, 1, A, lda, B,
                                                 ldb, 1, C1, N), 0);
                assert_memory_equal(C1, C2, M * N * sizeof *C1);
                for (size_t i = 0; i < M * N; i++)
                    assert_true(fabs(C0[i] - R[i]) <= gamma * S[i]);
            } else {
                assert_int_equal(mha__sgemm_with(MHA__GEMM_XSMM, ta, tb, M, N, K, 1, Af, lda,
                                                 Bf, ldb, 0, F0, N), 0);
                for (size_t i = 0; i < M * N; i++)
                    F2[i] = F1[i] + F0[i];
                assert_int_equal(mha__sgemm_with(MHA__GEMM_XSMM, ta, tb, M, N, K, 1, Af, lda,
                                                 Bf, ldb, 1, F1, N), 0);
                assert_memory_equal(F1, F2, M * N * sizeof *F1);
                for (size_t i = 0; i < M * N; i++)
                    assert_true(fabs((double)F0[i] - R[i]) <= gamma * S[i]);
            }
            for (int threads = 1; threads <= 3; threads++) { /* the rule's pick, split */
                if (dbl)
                    mha__dgemm(threads, ta, tb, M, N, K, 1, A, lda, B, ldb, 0,
                               threads == 1 ? C1 : C2, N, NULL);
                else
                    mha__sgemm(threads, ta, tb, M, N, K, 1, Af, lda, Bf, ldb, 0,
                               threads == 1 ? F1 : F2, N, NULL);
                if (threads > 1 && (dbl ? memcmp(C1, C2, M * N * sizeof *C1)
                                        : memcmp(F1, F2, M * N * sizeof *F1)) != 0)
                    fail_msg("%s %zux%zux%zu: %d threads differ from one", tr == 0 ? "NN"
                             : tr == 1 ? "NT" : "TN", M, N, K, threads);
            }
            free(A);
            free(B);
            free(R);
            free(S);
            free(C0);
            free(C1);
            free(C2);
            free(Af);
            free(Bf);
            free(F0);
            free(F1);
            free(F2);
        }
}

/* mha__sgemm_epi: C = A·op(B) + bias gives the bits of filling C's rows with the bias and
 * calling mha__sgemm with alpha = beta = 1 (without a bias, beta = 0), on every backend the
 * rule picks (libxsmm NT and NN, BLAS for few rows, the own kernel for tiny products), split
 * over 2 threads or not, B's transpose split or not; C's old contents (NaN) are never read,
 * nor its rows' tails; the epilogue sees every row exactly once, after it is final, also
 * for K = 0. mha__dgemm_epi likewise for one shape. Under CI's valgrind pass the two MLP
 * shapes (first) are left out: 300×96×64 splits its rows and 40×1100×30 its transpose too,
 * and the MLP shapes took 150 of this test's 165 s there. */
static void gemm_epi_is_fill_add_then_rows(void **state)
{
    (void)state;
    const size_t shapes[][3] = {{768, 512, 128}, {768, 128, 512}, {300, 96, 64}, {8, 64, 16},
                                {5, 9, 7},       {40, 1100, 30},  {64, 48, 0},   {1, 128, 128}};
    const int vg = getenv("MHA_TEST_UNDER_VALGRIND") != NULL;
    if (vg)
        print_message("[  REDUCED ] under valgrind: without 768x512x128 and 768x128x512\n");
    for (size_t s = vg ? 2 : 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tb = 0; tb < 2; tb++)
            for (int threads = 1; threads <= 2; threads++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    const size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    const size_t lda = K + 1, ldb = (tb ? K : N) + 1, ldc = N + 3;
                    float *A = malloc((M * lda + 1) * sizeof *A);
                    float *B = malloc(((tb ? N : K) * ldb + 1) * sizeof *B);
                    float *bias = malloc(N * sizeof *bias), *E = malloc(M * N * sizeof *E);
                    float *C = malloc(M * ldc * sizeof *C), *R = malloc(M * ldc * sizeof *R);
                    int *count = calloc(M, sizeof *count);
                    assert_true(A && B && bias && C && R && E && count);
                    fill_uniform_f(A, M * lda + 1, -2, 2, 70 + s);
                    fill_uniform_f(B, (tb ? N : K) * ldb + 1, -2, 2, 80 + s);
                    fill_uniform_f(bias, N, -3, 3, 90 + s);
                    for (size_t i = 0; i < M * ldc; i++) {
                        C[i] = i % ldc < N ? NAN : 7.0f; /* the tail of each row: untouched */
                        R[i] = i % ldc < N ? (with_bias ? bias[i % ldc] : NAN) : 7.0f;
                    }
                    epi_seen seen = {N, ldc, C, E, count};
                    mha__sgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, with_bias ? bias : NULL,
                                   C, ldc, epi_record, &seen);
                    mha__sgemm(threads, 0, tb, M, N, K, 1, A, lda, B, ldb, with_bias ? 1 : 0, R,
                               ldc, NULL);
                    assert_memory_equal(C, R, M * ldc * sizeof *C);
                    epi_check(&seen, M, R);
                    mha__sgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, with_bias ? bias : NULL,
                                   C, ldc, NULL, NULL); /* no epilogue: the same product */
                    assert_memory_equal(C, R, M * ldc * sizeof *C);
                    free(A);
                    free(B);
                    free(bias);
                    free(E);
                    free(C);
                    free(R);
                    free(count);
                }
    const size_t M = 600, N = 200, K = 96; /* split, libxsmm NT, in double */
    double *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B);
    double *bias = malloc(N * sizeof *bias);
    double *C = malloc(M * N * sizeof *C), *R = malloc(M * N * sizeof *R);
    assert_true(A && B && bias && C && R);
    fill_uniform(A, M * K, -1, 1, 41);
    fill_uniform(B, N * K, -1, 1, 42);
    fill_uniform(bias, N, -1, 1, 43);
    for (size_t i = 0; i < M * N; i++) {
        C[i] = NAN;
        R[i] = bias[i % N];
    }
    mha__dgemm_epi(2, 1, M, N, K, A, K, B, K, bias, C, N, NULL, NULL);
    mha__dgemm(2, 0, 1, M, N, K, 1, A, K, B, K, 1, R, N, NULL);
    assert_memory_equal(C, R, M * N * sizeof *C);
    free(A);
    free(B);
    free(bias);
    free(C);
    free(R);
}

/* With the work argument given, the entry point uses it for Bᵀ and gives the same bits. */
static void gemm_entry_work(void **state)
{
    (void)state;
    const size_t M = 64, N = 48, K = 32;
    float *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B);
    float *w = malloc(K * N * sizeof *w);
    float *C1 = malloc(M * N * sizeof *C1), *C2 = malloc(M * N * sizeof *C2);
    assert_true(A && B && w && C1 && C2);
    fill_uniform_f(A, M * K, -1, 1, 31);
    fill_uniform_f(B, N * K, -1, 1, 32);
    mha__sgemm(0, 0, 1, M, N, K, 0.5f, A, K, B, K, 0, C1, N, NULL);
    mha__sgemm(0, 0, 1, M, N, K, 0.5f, A, K, B, K, 0, C2, N, w);
    assert_memory_equal(C1, C2, M * N * sizeof *C1);
    free(A);
    free(B);
    free(w);
    free(C1);
    free(C2);
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
        cmocka_unit_test(gemm_entry_threads),
        cmocka_unit_test(gemm_choice_few_rows),
        cmocka_unit_test(gemm_choice_follows_the_rule),
        cmocka_unit_test(gemm_entry_work),
        cmocka_unit_test(gemm_epi_is_fill_add_then_rows),
        cmocka_unit_test(gemm_split_partial_vector_bits),
        cmocka_unit_test(gemm_xsmm_k_slices),
        cmocka_unit_test(gemm_transpose_double),
        cmocka_unit_test(gemm_transpose_float),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "gemm_epi_*": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("gemm", tests, NULL, NULL);
}
