/* mha-gemm-calib: time every GEMM backend of src/gemm.h (own kernel, OpenBLAS, libxsmm)
 * at the products the library computes, one thread, and print GFLOP/s per backend, the
 * fastest, and what the entry point's rule picks. The rule in src/gemm_core.c
 * (gemm_choose) was written from this table.
 *
 *   build-X/mha-gemm-calib [--double] [--ms N]
 *
 * Each time is the best of 3 runs of repeated calls lasting at least --ms milliseconds
 * (default 20). Inputs are in cache (the library's products mostly are). For op(B) = Bᵀ
 * the own kernel and libxsmm include the transpose into scratch, as in the library.
 * In float, on a CPU with AVX512_BF16, a last column times the bf16 product (mha__bgemm:
 * operands rounded and packed in pairs inside the call, float sums), which the
 * MHA_PRECISION_BF16 objects use for every product of training. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "mha_internal.h"

/* A product C = op(A)·op(B) as the library computes it (M, N, K, ta, tb, beta). */
typedef struct shape {
    size_t M, N, K;
    int ta, tb, beta;
    const char *what;
} shape;

static const shape shapes[] = {
    /* projections y = x·Wᵀ (+ bias: beta 1) and their backward (seed, mha-train, baby GPT) */
    {20, 64, 64, 0, 1, 1, "seed proj y = x·Wᵀ"},
    {64, 64, 20, 1, 0, 1, "seed proj dW += dyᵀ·x"},
    {20, 64, 64, 0, 0, 1, "seed proj dx += dy·W"},
    {1024, 64, 64, 0, 1, 1, "train proj y = x·Wᵀ"},
    {64, 64, 1024, 1, 0, 1, "train proj dW += dyᵀ·x"},
    {1024, 64, 64, 0, 0, 1, "train proj dx += dy·W"},
    {768, 128, 128, 0, 1, 1, "gpt proj y = x·Wᵀ"},
    {128, 128, 768, 1, 0, 1, "gpt proj dW += dyᵀ·x"},
    {768, 128, 128, 0, 0, 1, "gpt proj dx += dy·W"},
    {768, 512, 128, 0, 1, 1, "gpt mlp fc y = x·W1ᵀ"},
    {768, 128, 512, 0, 1, 1, "gpt mlp proj y = a·W2ᵀ"},
    {512, 128, 768, 1, 0, 1, "gpt mlp dW1 += dhᵀ·x"},
    {768, 512, 128, 0, 0, 0, "gpt mlp da = dy·W2"},
    {768, 128, 512, 0, 0, 1, "gpt mlp dx += dh·W1"},
    {768, 65, 128, 0, 1, 0, "gpt logits = x·Eᵀ"},
    /* mha-g2p's default model (C 192, MLP 640, 1280 tokens a batch): a 2-thread step gives
     * each thread 640 rows of the row-split backends; BLAS gets the whole product */
    {640, 192, 192, 0, 1, 1, "g2p proj y = x·Wᵀ"},
    {192, 192, 1280, 1, 0, 1, "g2p proj dW += dyᵀ·x"},
    {640, 192, 192, 0, 0, 1, "g2p proj dx += dy·W"},
    {640, 640, 192, 0, 1, 1, "g2p mlp fc y = x·W1ᵀ"},
    {640, 192, 640, 0, 1, 1, "g2p mlp proj y = a·W2ᵀ"},
    {640, 192, 1280, 1, 0, 1, "g2p mlp dW1 += dhᵀ·x"},
    {192, 640, 1280, 1, 0, 1, "g2p mlp dW2 += dyᵀ·a"},
    {640, 640, 192, 0, 0, 0, "g2p mlp da = dy·W2"},
    {640, 192, 640, 0, 0, 1, "g2p mlp dx += dh·W1"},
    {640, 72, 192, 0, 1, 1, "g2p logits = x·Wᵀ"},
    /* per-head products: S = Q·Kᵀ (NT), C = P·V (NN), dV += Pᵀ·dC (TN), dP = dC·Vᵀ (NT),
     * dK += dSᵀ·Q (TN), dQ = dS·K (NN) */
    {10, 10, 8, 0, 1, 0, "seed S = Q·Kᵀ"},
    {10, 8, 10, 0, 0, 0, "seed C = P·V"},
    {10, 8, 10, 1, 0, 1, "seed dV += Pᵀ·dC"},
    {64, 64, 8, 0, 1, 0, "head S = Q·Kᵀ hd 8"},
    {64, 8, 64, 0, 0, 0, "head C = P·V hd 8"},
    {64, 8, 64, 1, 0, 1, "head dV += Pᵀ·dC hd 8"},
    {64, 64, 32, 0, 1, 0, "head S = Q·Kᵀ hd 32"},
    {64, 64, 32, 0, 0, 0, "64×64×32 NN"},
    {64, 32, 64, 0, 0, 0, "head C = P·V hd 32"},
    {64, 32, 64, 1, 0, 1, "head dK += dSᵀ·Q hd 32"},
    {64, 256, 32, 0, 1, 0, "head S rows 64, 256 keys"},
    {64, 32, 256, 0, 0, 0, "head C rows 64, 256 keys"},
    {256, 32, 64, 1, 0, 1, "head dV 256 keys"},
    {256, 256, 32, 0, 1, 0, "256×256×32 NT"},
    {256, 256, 32, 0, 0, 0, "256×256×32 NN"},
    {64, 2048, 64, 0, 1, 0, "head S rows 64, 2048 keys"},
    {64, 64, 2048, 0, 0, 0, "head C rows 64, 2048 keys"},
    {2048, 64, 64, 1, 0, 1, "head dV 2048 keys"},
    {32, 128, 64, 0, 1, 0, "recompute S block 32×128"},
    {32, 64, 128, 0, 0, 1, "recompute O += P·V"},
    {128, 64, 32, 1, 0, 1, "recompute dV += Pᵀ·dC"},
    {2048, 2048, 64, 0, 1, 0, "2048×2048×64 NT"},
    {2048, 2048, 64, 0, 0, 0, "2048×2048×64 NN"},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *name(mha__gemm_backend be)
{
    switch (be) {
    case MHA__GEMM_OWN: return "own";
    case MHA__GEMM_BLAS: return "blas";
    case MHA__GEMM_XSMM: return "xsmm";
    case MHA__GEMM_REF: return "ref";
    default: return "auto";
    }
}

/* be of time_one: the bf16 product instead of a float backend */
#define CALIB_BF16 ((mha__gemm_backend)99)

/* GFLOP/s of one backend on one shape (0 when refused); dbl: double precision. */
static double time_one(mha__gemm_backend be, const shape *s, int dbl, double min_s, void *A,
                       void *B, void *C)
{
    const size_t lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N, ldc = s->N;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        long n = 0;
        double t0 = now(), t;
        do {
            for (int i = 0; i < 8; i++) {
                if (be == CALIB_BF16) {
                    mha__bgemm(1, s->ta, s->tb, s->M, s->N, s->K, 1, A, lda, B, ldb,
                               (float)s->beta, C, ldc);
                    continue;
                }
                int st = dbl ? mha__dgemm_with(be, s->ta, s->tb, s->M, s->N, s->K, 1, A, lda, B,
                                               ldb, s->beta, C, ldc)
                             : mha__sgemm_with(be, s->ta, s->tb, s->M, s->N, s->K, 1, A, lda, B,
                                               ldb, (float)s->beta, C, ldc);
                if (st != 0)
                    return 0;
            }
            n += 8;
            t = now() - t0;
        } while (t < min_s);
        double gf = 2.0 * (double)s->M * (double)s->N * (double)s->K * (double)n / t * 1e-9;
        best = gf > best ? gf : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int dbl = 0;
    double ms = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--double") == 0)
            dbl = 1;
        else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc)
            ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--double] [--ms N]   (N: milliseconds per timing, "
                            "default 20)\n", argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    printf("# %s, one thread, GFLOP/s (best of 3); libxsmm %s; OpenBLAS %s\n",
           dbl ? "double" : "float", mha__gemm_have_xsmm() ? "on" : "off", openblas_get_config());
    const int bf16 = !dbl && mha__bf16_cpu();
    printf("%-28s %5s %5s %5s %2s %4s %8s %8s %8s  %-5s %-5s%s\n", "product", "M", "N", "K", "t",
           "beta", "own", "blas", "xsmm", "best", "rule", bf16 ? "     bf16" : "");
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        void *A = calloc(s->M * s->K, es), *B = calloc(s->K * s->N, es);
        void *C = calloc(s->M * s->N, es);
        if (!A || !B || !C)
            return 1;
        /* small values: no overflow over many accumulating calls */
        for (size_t j = 0; j < s->M * s->K; j++) {
            if (dbl)
                ((double *)A)[j] = 1e-3 * (double)(j % 7);
            else
                ((float *)A)[j] = 1e-3f * (float)(j % 7);
        }
        for (size_t j = 0; j < s->K * s->N; j++) {
            if (dbl)
                ((double *)B)[j] = 1e-3 * (double)(j % 5);
            else
                ((float *)B)[j] = 1e-3f * (float)(j % 5);
        }
        const mha__gemm_backend bes[3] = {MHA__GEMM_OWN, MHA__GEMM_BLAS, MHA__GEMM_XSMM};
        double gf[3];
        int best = 0;
        for (int b = 0; b < 3; b++) {
            gf[b] = time_one(bes[b], s, dbl, ms * 1e-3, A, B, C);
            best = gf[b] > gf[best] ? b : best;
        }
        const mha__gemm_backend rule =
            dbl ? mha__dgemm_choice(1, s->ta, s->tb, s->M, s->N, s->K, 1, s->beta)
                : mha__sgemm_choice(1, s->ta, s->tb, s->M, s->N, s->K, 1, (float)s->beta);
        printf("%-28s %5zu %5zu %5zu %c%c %4d %8.1f %8.1f %8.1f  %-5s %-5s", s->what, s->M, s->N,
               s->K, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->beta, gf[0], gf[1], gf[2],
               name(bes[best]), name(rule));
        if (bf16)
            printf(" %8.1f", time_one(CALIB_BF16, s, 0, ms * 1e-3, A, B, C));
        printf("\n");
        fflush(stdout);
        free(A);
        free(B);
        free(C);
    }
    return 0;
}
