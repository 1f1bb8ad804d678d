/* The library's one GEMM interface (private, never installed). Internal names carry the
 * prefix mha__; s = float, d = double.
 *
 * Every product is row-major:
 *     C = alpha·op(A)·op(B) + beta·C      op(A) [M, K], op(B) [K, N], C [M, N]
 *   ta = 0: op(A) = A, stored [M, K];  ta = 1: op(A) = Aᵀ, A stored [K, M]
 *   tb = 0: op(B) = B, stored [K, N];  tb = 1: op(B) = Bᵀ, B stored [N, K]
 *   lda, ldb, ldc: row strides (>= the stored row length; elements beyond are not touched).
 *   beta = 0: C is only written — its old contents (NaN included) are never read.
 *   Every dimension and stride must be <= INT_MAX (BLAS and libxsmm take int; the callers
 *   check when they validate their arguments). M, N or K may be 0.
 *
 * mha__sgemm / mha__dgemm — the entry point every product of the library goes through.
 *   threads >= 1: called outside any parallel loop; the product may use up to `threads`
 *                 threads (rows of C split over the library's threads, src/pool.h, or BLAS's).
 *   threads == 0: called from inside a parallel loop of ours (a task of the library's
 *                 threads, or an OpenMP parallel region): runs in the calling
 *                 thread; BLAS only when it is safe there (OpenMP OpenBLAS, or the pthreads
 *                 build set to one thread — never the sequential build, which may lack locks).
 *   work: optional scratch of K·N elements for op(B) = Bᵀ (used when tb = 1), or NULL: then
 *   a per-thread buffer of the GEMM module is used (allocated once, grown when needed, freed
 *   at thread exit); should that allocation fail, a backend that needs no scratch is used.
 *   The backend depends only on (ta, tb, M, N, K, alpha, beta, threads == 0) — never on the
 *   thread count — and a row split gives every element of C the same arithmetic as one call
 *   (its blocks start on multiples of 6 rows, libxsmm's register block: split_row in
 *   src/gemm_entry.inc), so results do not depend on the thread count (beyond BLAS's own
 *   summation order).
 *
 * Backends (mha__gemm_backend):
 *   OWN   own register-blocked kernel (src/gemm_core.c), always available.
 *   BLAS  CBLAS (OpenBLAS).
 *   XSMM  libxsmm 1.17 JIT kernel (built with MHA_WITH_LIBXSMM): column-major, so the
 *         row-major product is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ; libxsmm 1.17's JIT takes a
 *         transposed second operand (our op(A) = Aᵀ) but no transposed first one (our
 *         op(B) = Bᵀ), which is transposed into scratch first; alpha must be 1 and beta
 *         0 or 1 in the kernel, so alpha ≠ 1 is applied after a beta = 0 product and
 *         beta ∉ {0, 1} before an alpha = 1 product (alpha ≠ 1 with beta ≠ 0: refused).
 *   REF   the naive triple loop the tests compare against.
 * The rule AUTO applies (which backend for which shape) is a table measured by
 * tools/gemm_calib.c; it is written out above gemm_choose in src/gemm_core.c.
 *
 * mha__?gemm_epi — C = A·op(B) + bias (A not transposed; bias [N] added to every row, or
 *   NULL: C = A·op(B)), C only written: the bits of filling C's rows with the bias and
 *   calling mha__?gemm with alpha = beta = 1 (without a bias: beta = 0). Then, unless epi is
 *   NULL, epi(ctx, r0, r1) for blocks of rows that cover 0 .. M−1 once, each as soon as its
 *   rows are final — on the thread that computed them, inside a task of the library's
 *   threads when the product is split (where the library's loops run in the calling
 *   thread), so an epilogue reads its rows while they are in that core's cache. The
 *   blocks depend on the thread count: an epilogue must compute each row alike whatever
 *   block holds it. (A bias on libxsmm is added to each block after its kernel instead of
 *   filling C first: one pass over C and no scratch for the product.)
 * mha__?gemm_with — the same product on a given backend, in the calling thread (tests,
 * calibration). Returns 0, or -1 without touching C when that backend is not built in or
 * refuses the product (libxsmm: dispatch failed, or alpha ≠ 1 with beta ≠ 0); AUTO never
 * refuses.
 * mha__?gemm_choice — the backend the entry point takes for a product (threads == 0 for
 * a call inside a parallel region).
 *
 * The three older names stay for existing callers (train/toy/toy_model_impl.inc, tests):
 *   mha__?gemm_blas   = the BLAS backend, one call.
 *   mha__?gemm_small  = the OWN backend; work: [K·N] scratch when tb = 1 (NULL allowed when
 *                       tb = 0).
 *   mha__?gemm_ref    = the REF backend.
 *
 * mha__?transpose(rows, cols, in, ldi, out, ldo) — out [cols, rows] = inᵀ, in [rows, cols]:
 *   out[c·ldo + r] = in[r·ldi + c]; row strides ldi >= cols, ldo >= rows; no overlap. The
 *   copy the entry point makes of op(B) = Bᵀ for OWN and XSMM (a tile at a time through
 *   vector registers); callers that keep a transposed operand use it too.
 *
 * mha__?gemm_batch(threads, n, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) — the n
 *   products C[l] = alpha·op(A[l])·B[l] + beta[l]·C[l], l = 0 .. n−1, of one shape (B not
 *   transposed), with the bits of n calls of mha__?gemm in that order on `threads`: in one
 *   parallel loop whose blocks of rows (those of one call) each take the n products in
 *   order, so the C[l] may be one matrix that they add to in turn (the attention's
 *   dX = Σ dY_l·W_l). One loop instead of n when every product is split on the same
 *   backend other than BLAS (and n <= 4); otherwise the n calls. mha__bgemm_batch likewise
 *   (bfloat16 products as mha__bgemm), B packed once when every B[l] is the same pointer
 *   (the attention's dW_l = dY_lᵀ·X share X).
 * mha__?gemm_scale(M, N, s, C, ldc) — C[M, N] *= s, row stride ldc; s = 0 writes zeros
 *   whatever C held (NaN included): the pass that applies alpha or beta where a kernel
 *   cannot. */
#ifndef MHA_GEMM_H
#define MHA_GEMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum mha__gemm_backend {
    MHA__GEMM_AUTO = 0, /* the measured per-shape rule */
    MHA__GEMM_OWN = 1,
    MHA__GEMM_BLAS = 2,
    MHA__GEMM_XSMM = 3,
    MHA__GEMM_REF = 4
} mha__gemm_backend;

/* An epilogue of mha__?gemm_epi: called for rows r0 .. r1−1 of C once they are final. */
typedef void (*mha__gemm_epi)(void *ctx, size_t r0, size_t r1);

#define MHA__DECLARE_GEMM(R, p)                                                              \
    void mha__##p##gemm(int threads, int ta, int tb, size_t M, size_t N, size_t K, R alpha,  \
                        const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,         \
                        size_t ldc, R *work);                                                 \
    void mha__##p##gemm_epi(int threads, int tb, size_t M, size_t N, size_t K, const R *A,   \
                            size_t lda, const R *B, size_t ldb, const R *bias, R *C,          \
                            size_t ldc, mha__gemm_epi epi, void *ctx);                        \
    int mha__##p##gemm_with(mha__gemm_backend be, int ta, int tb, size_t M, size_t N,         \
                            size_t K, R alpha, const R *A, size_t lda, const R *B,            \
                            size_t ldb, R beta, R *C, size_t ldc);                            \
    mha__gemm_backend mha__##p##gemm_choice(int threads, int ta, int tb, size_t M, size_t N,  \
                                            size_t K, R alpha, R beta);                       \
    void mha__##p##gemm_blas(int ta, int tb, size_t M, size_t N, size_t K, R alpha,          \
                             const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,    \
                             size_t ldc);                                                     \
    void mha__##p##gemm_small(int ta, int tb, size_t M, size_t N, size_t K, R alpha,         \
                              const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,   \
                              size_t ldc, R *work);                                           \
    void mha__##p##gemm_ref(int ta, int tb, size_t M, size_t N, size_t K, R alpha,           \
                            const R *A, size_t lda, const R *B, size_t ldb, R beta, R *C,     \
                            size_t ldc);                                                      \
    void mha__##p##transpose(size_t rows, size_t cols, const R *in, size_t ldi, R *out,      \
                             size_t ldo);                                                     \
    void mha__##p##gemm_scale(size_t M, size_t N, R s, R *C, size_t ldc);                    \
    void mha__##p##gemm_batch(int threads, size_t n, int ta, size_t M, size_t N, size_t K,    \
                              R alpha, const R *const *A, size_t lda, const R *const *B,     \
                              size_t ldb, const R *beta, R *const *C, size_t ldc);
MHA__DECLARE_GEMM(float, s)
MHA__DECLARE_GEMM(double, d)
#undef MHA__DECLARE_GEMM

/* ---- bfloat16 products (src/gemm_bf16.c) ----
 * mha__bgemm — C = alpha·bf16(op(A))·bf16(op(B)) + beta·C with float operands rounded to
 *   bfloat16 (nearest, ties to even; subnormals to signed zero), every product exact and
 *   the sums in float32 (the AVX512_BF16 dot product). Same arguments, threading contract
 *   and thread-count independence as mha__sgemm (no `work`: its scratch is the per-thread
 *   buffer). Fast only where mha__bf16_cpu(); elsewhere (and without scratch memory) it
 *   computes mha__bgemm_ref.
 * mha__bgemm_epi — C = bf16(A)·bf16(op(B)) + bias (A not transposed, bias [N] added to
 *   every row, or NULL; C only written): the bits of filling C's rows with bias and calling
 *   mha__bgemm with alpha = beta = 1, without that pass over C (the bias is added as the
 *   kernel stores a block); then epi as mha__sgemm_epi's, on each panel of rows a thread
 *   packs and multiplies at a time (PANEL_ROWS, src/gemm_bf16.c).
 * mha__bgemm_ref — the naive loop on the rounded operands, summed in float in order of K.
 * mha__bf16_cpu — 1 when the CPU has AVX512_BF16 (with AVX512F/BW/VL); asked once.
 * mha__bf16_available — mha__bf16_cpu(), and the environment variable MHA_DISABLE_BF16
 *   unset, empty or "0" (read at every call: what objects check when they are made).
 * mha__bf16_from_float / mha__bf16_to_float — one value, rounded as above / widened.
 * mha__bf16_round — one value rounded as torch's .to(torch.bfloat16) (the safetensors
 *   conversion, src/st_convert.c): as mha__bf16_from_float but float subnormals round to
 *   bfloat16 subnormals instead of zero (mha__bf16_from_float is this after the flush). */
void mha__bgemm(int threads, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                size_t ldc);
void mha__bgemm_epi(int threads, int tb, size_t M, size_t N, size_t K, const float *A,
                    size_t lda, const float *B, size_t ldb, const float *bias, float *C,
                    size_t ldc, mha__gemm_epi epi, void *ctx);
void mha__bgemm_batch(int threads, size_t n, int ta, size_t M, size_t N, size_t K, float alpha,
                      const float *const *A, size_t lda, const float *const *B, size_t ldb,
                      const float *beta, float *const *C, size_t ldc);
void mha__bgemm_ref(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A,
                    size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);
int mha__bf16_cpu(void);
int mha__bf16_available(void);
uint16_t mha__bf16_from_float(float x);
uint16_t mha__bf16_round(float x);
float mha__bf16_to_float(uint16_t h);

/* ---- shared by both precisions (src/gemm.c) ---- */

/* 1 when the library was built with libxsmm (MHA_WITH_LIBXSMM) and it initialised. */
int mha__gemm_have_xsmm(void);

/* After a libxsmm kernel: vzeroupper when libxsmm targets AVX or wider (src/gemm.c). */
void mha__xsmm_after_kernel(void);

/* The calling thread's scratch of at least `bytes` bytes (64-byte aligned), or NULL when
 * it cannot be allocated. Valid until the next call in this thread. */
void *mha__gemm_scratch(size_t bytes);

/* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP (asked once). */
int mha__blas_kind(void);

#endif /* MHA_GEMM_H */
