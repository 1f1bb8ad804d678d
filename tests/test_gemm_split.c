/* The GEMM module's entry point (src/gemm_entry.inc, src/gemm.h) beyond the choice of a
 * backend: the row split over threads gives one call's bits (every transposition, inside
 * a parallel region too, where libxsmm's AVX-512 kernels order a partial last vector
 * differently), the caller's work buffer, products with a bias and an epilogue, and
 * libxsmm's products taken in slices of K. The backends themselves and the rule:
 * tests/test_gemm.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mha_internal.h"
#include "test_util.h"

/* The entry point splits rows over threads: results equal one thread's bit for bit, for
 * products above the split threshold, every transposition; inside a parallel region
 * (threads = 0) the same product gives the same bits too. K = 0 gives beta·C. */
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

/* One batch case: n products of M×N×K (ta; B not transposed) into separate C's or one
 * shared C (shared_c, beta[0] then 1s), with one B for all (shared_b) or one each, run by
 * `batch` and by n calls of `one` on `threads`: every element equal. Precision by `p`:
 * 's' float, 'd' double, 'b' bfloat16 products. */
static void batch_case(char p, int threads, int ta, size_t n, size_t M, size_t N, size_t K,
                       int shared_b, int shared_c, double beta0, uint64_t seed)
{
    const size_t lda = ta ? M : K, sz = p == 'd' ? sizeof(double) : sizeof(float);
    unsigned char *A = malloc(n * M * K * sz), *B = malloc(n * K * N * sz);
    unsigned char *C1 = malloc(n * M * N * sz), *C2 = malloc(n * M * N * sz);
    assert_true(A && B && C1 && C2);
    if (p == 'd') {
        fill_uniform((double *)A, n * M * K, -1, 1, seed);
        fill_uniform((double *)B, n * K * N, -1, 1, seed + 1);
        fill_uniform((double *)C1, n * M * N, -1, 1, seed + 2);
    } else {
        fill_uniform_f((float *)A, n * M * K, -1, 1, seed);
        fill_uniform_f((float *)B, n * K * N, -1, 1, seed + 1);
        fill_uniform_f((float *)C1, n * M * N, -1, 1, seed + 2);
    }
    memcpy(C2, C1, n * M * N * sz);
    const void *a[4], *b[4];
    void *c1[4], *c2[4];
    double beta[4];
    for (size_t l = 0; l < n; l++) {
        a[l] = A + l * M * K * sz; /* lda: rows of M (ta) or K; a block of M·K each */
        b[l] = B + (shared_b ? 0 : l) * K * N * sz;
        c1[l] = C1 + (shared_c ? 0 : l) * M * N * sz;
        c2[l] = C2 + (shared_c ? 0 : l) * M * N * sz;
        beta[l] = l == 0 ? beta0 : 1;
    }
    if (p == 'd') {
        mha__dgemm_batch(threads, n, ta, M, N, K, 1, (const double *const *)a, lda,
                         (const double *const *)b, N, beta, (double *const *)c1, N);
        for (size_t l = 0; l < n; l++)
            mha__dgemm(threads, ta, 0, M, N, K, 1, a[l], lda, b[l], N, beta[l], c2[l], N, NULL);
    } else {
        float bf[4];
        for (size_t l = 0; l < n; l++)
            bf[l] = (float)beta[l];
        if (p == 's')
            mha__sgemm_batch(threads, n, ta, M, N, K, 1, (const float *const *)a, lda,
                             (const float *const *)b, N, bf, (float *const *)c1, N);
        else
            mha__bgemm_batch(threads, n, ta, M, N, K, 1, (const float *const *)a, lda,
                             (const float *const *)b, N, bf, (float *const *)c1, N);
        for (size_t l = 0; l < n; l++)
            if (p == 's')
                mha__sgemm(threads, ta, 0, M, N, K, 1, a[l], lda, b[l], N, bf[l], c2[l], N, NULL);
            else
                mha__bgemm(threads, ta, 0, M, N, K, 1, a[l], lda, b[l], N, bf[l], c2[l], N);
    }
    assert_memory_equal(C1, C2, n * M * N * sz);
    free(A);
    free(B);
    free(C1);
    free(C2);
}

/* mha__?gemm_batch and mha__bgemm_batch give the bits of their products called one by one
 * in order: the attention's weight gradients (TN, X shared, separate C's) and its dX (NN,
 * one C: the first product written or added to, the others added), split over 2 and 3
 * threads with an odd row count, below the split threshold (the calls one by one), and a
 * batch of one (the attention's output and query projections). */
static void gemm_batch_is_the_calls(void **state)
{
    (void)state;
    const char prec[] = {'s', 'd', 'b'};
    for (size_t q = 0; q < 3; q++) {
        if (prec[q] == 'b' && !mha_precision_available(MHA_PRECISION_BF16)) {
            print_message("[  SKIP    ] this CPU has no %s (or MHA_DISABLE_BF16 is set): "
                          "the bf16 batch not tested here\n",
                          mha_precision_cpu_feature(MHA_PRECISION_BF16));
            continue;
        }
        for (int threads = 1; threads <= 3; threads++) {
            const char p = prec[q];
            batch_case(p, threads, 1, 3, 96, 96, 640, 1, 0, 1, 61); /* dW_l += dY_lᵀ·X */
            batch_case(p, threads, 0, 3, 640, 96, 96, 0, 1, 0, 62); /* dX = Σ dY_l·W_l */
            batch_case(p, threads, 0, 3, 640, 96, 96, 0, 1, 1, 63); /* dX += Σ ... */
            batch_case(p, threads, 0, 2, 45, 96, 70, 1, 0, 0.5, 64); /* odd rows, K odd */
            batch_case(p, threads, 1, 4, 45, 72, 100, 0, 0, 1, 65);
            batch_case(p, threads, 0, 3, 8, 8, 8, 1, 1, 0, 66); /* below the split */
            batch_case(p, threads, 1, 1, 96, 96, 640, 1, 0, 1, 67); /* one product */
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_batch_is_the_calls),
        cmocka_unit_test(gemm_entry_threads),
        cmocka_unit_test(gemm_entry_work),
        cmocka_unit_test(gemm_epi_is_fill_add_then_rows),
        cmocka_unit_test(gemm_split_partial_vector_bits),
        cmocka_unit_test(gemm_xsmm_k_slices),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "gemm_epi_*": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("gemm_split", tests, NULL, NULL);
}
