/* Private helpers shared between the library's source files. Never installed.
 * Internal names carry the prefix mha__ (two underscores). */
#ifndef MHA_INTERNAL_H
#define MHA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"

/* ---- Dropout stream (README, "Dropout stream") ------------------------------
 * Weight (b, h, i, j) of training call n is decided by the output at position
 *   n·2^MHA_DROPOUT_CALL_SHIFT + ((b·H + h)·Sq + i)·Sk + j
 * of PCG32(seed, MHA_PCG32_STREAM_DROPOUT): kept iff output >= threshold. */
#define MHA_DROPOUT_CALL_SHIFT 40
#define MHA_DROPOUT_MAX_ELEMS ((uint64_t)1 << MHA_DROPOUT_CALL_SHIFT)

/* floor(p · 2^32): the drop threshold for a 32-bit output. */
uint64_t mha__dropout_threshold(double p);

/* One PCG32 step (XSH-RR output of the old state, then state·a + inc), inline
 * for the per-weight dropout loops; mha_pcg32_next is this function. */
static inline uint32_t mha__pcg32_step(mha_pcg32 *rng)
{
    uint64_t old = rng->state;
    rng->state = old * 6364136223846793005ULL + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u)); /* rot = 0 is defined */
}


/* ---- GEMM, row-major: C = alpha·op(A)·op(B) + beta·C --------------------------
 *   op(A) is [M, K], op(B) is [K, N], C is [M, N]; lda/ldb/ldc are row strides.
 *   trans = 0: op(X) = X;  trans = 1: op(X) = Xᵀ (X stored [K, M] or [N, K]).
 * Three versions per precision (s = float, d = double):
 *   gemm_blas   CBLAS (OpenBLAS); dimensions must fit blasint (the caller checks);
 *               only ever called outside OpenMP regions.
 *   gemm_small  own register-blocked kernel, for the per-head products inside
 *               OpenMP regions (where a pthreads OpenBLAS must not be called)
 *               and for products too small for BLAS's call overhead. work is
 *               scratch of K·N elements when tb = 1 (op(B) = Bᵀ is transposed
 *               into it); unused (may be NULL) when tb = 0.
 *   gemm_ref    the naive triple loop tests compare the other two against. */
#define MHA__DECLARE_GEMM(R, p)                                                              \
    void mha__##p##gemm_blas(int ta, int tb, size_t M, size_t N, size_t K, R alpha,          \
                             const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,    \
                             size_t ldc);                                                     \
    void mha__##p##gemm_small(int ta, int tb, size_t M, size_t N, size_t K, R alpha,         \
                              const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,   \
                              size_t ldc, R *work);                                           \
    void mha__##p##gemm_ref(int ta, int tb, size_t M, size_t N, size_t K, R alpha,           \
                            const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,     \
                            size_t ldc);
MHA__DECLARE_GEMM(float, s)
MHA__DECLARE_GEMM(double, d)
#undef MHA__DECLARE_GEMM

#endif /* MHA_INTERNAL_H */
