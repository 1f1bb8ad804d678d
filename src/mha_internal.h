/* Private helpers shared between the library's source files. Never installed.
 * Internal names carry the prefix mha__ (two underscores). */
#ifndef MHA_INTERNAL_H
#define MHA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mha.h"

/* ---- Functions built for several instruction sets ------------------------------
 * MHA_CLONES before a function: GCC compiles it for x86-64, x86-64-v3 (AVX2 + FMA) and
 * x86-64-v4 (AVX-512) and the loader picks one for the CPU (target_clones). Not with clang:
 * clang 14 gives a static clone's resolver a global name (two units defining one clash at
 * link time) and names an external clone's resolver `name.ifunc`, leaving calls from other
 * files unresolved; a clang build compiles these functions once, for the baseline. Each
 * use says why its clones compute the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MHA_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define MHA_CLONES
#endif

/* ---- Dropout stream (README, "Dropout stream") ------------------------------
 * Weight (b, h, i, j) of training call n is decided by the output at position
 *   n·2^MHA_DROPOUT_CALL_SHIFT + ((b·H + h)·Sq + i)·Sk + j
 * of PCG32(seed, MHA_PCG32_STREAM_DROPOUT): kept iff output >= threshold. */
#define MHA_DROPOUT_CALL_SHIFT 40
#define MHA_DROPOUT_MAX_ELEMS ((uint64_t)1 << MHA_DROPOUT_CALL_SHIFT)

/* floor(p · 2^32): the drop threshold for a 32-bit output. */
uint64_t mha__dropout_threshold(double p);

/* The index of `name` among a model's n tensor names (mha_gpt_tensor_find,
 * mha_s2s_tensor_find): MHA_OK, MHA_ENOTFOUND, or MHA_EINVAL for a NULL name or index. */
int mha__tensor_find(const char *const *names, size_t n, const char *name, size_t *index);

/* *out = *field for an object's getter (mha_get_call_index and its kin): field is NULL when
 * the object is. MHA_OK, or MHA_EINVAL for a NULL field or out. */
int mha__get_u64(const uint64_t *field, uint64_t *out);
/* The same for a size_t field (a model's parameter count). */
int mha__get_size(const size_t *field, size_t *out);

/* free() each of p[n]: MHA__FREE_ALL(a, b, c) frees a, b and c. */
void mha__free_all(void *const *p, size_t n);
#define MHA__FREE_ALL(...)                                                                   \
    mha__free_all((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) /      \
                                                    sizeof(void *))

/* PCG32's multiplier a: state' = state·a + inc. */
#define MHA__PCG32_MULT 6364136223846793005ULL

/* PCG32's XSH-RR output of a state. */
static inline uint32_t mha__pcg32_output(uint64_t old)
{
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u)); /* rot = 0 is defined */
}

/* One PCG32 step (XSH-RR output of the old state, then state·a + inc), inline
 * for the per-weight dropout loops; mha_pcg32_next is this function. */
static inline uint32_t mha__pcg32_step(mha_pcg32 *rng)
{
    uint64_t old = rng->state;
    rng->state = old * MHA__PCG32_MULT + rng->inc;
    return mha__pcg32_output(old);
}


/* ---- GEMM: the one interface every product goes through (src/gemm.h) --------
 * mha__sgemm / mha__dgemm pick a backend per product (own kernel, OpenBLAS, libxsmm)
 * and may be called inside OpenMP regions (threads = 0) as well as outside. */
#include "gemm.h"

/* ---- Precision (include/mha.h, mha_precision) ---------------------------------
 * Whether an object of the API's type (sizeof(REAL): 4 float, 8 double) may use precision
 * p: MHA_OK; MHA_EINVAL for an unknown value or BF16 in the double API; MHA_ECPU for BF16
 * on a CPU without it. */
static inline int mha__precision_check(mha_precision p, size_t real_size)
{
    if (p == MHA_PRECISION_FP32)
        return MHA_OK;
    if (p != MHA_PRECISION_BF16 || real_size != sizeof(float))
        return MHA_EINVAL;
    return mha__bf16_available() ? MHA_OK : MHA_ECPU;
}

/* The GEMM entry point with a precision (src/gemm.h): mha__bgemm for BF16, else the
 * type's own; no `work` (the per-thread scratch serves). The double one ignores p
 * (objects of the double API never hold BF16). */
static inline void mha__sgemm_p(mha_precision p, int threads, int ta, int tb, size_t M,
                                size_t N, size_t K, float alpha, const float *A, size_t lda,
                                const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    if (p == MHA_PRECISION_BF16)
        mha__bgemm(threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        mha__sgemm(threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}
static inline void mha__dgemm_p(mha_precision p, int threads, int ta, int tb, size_t M,
                                size_t N, size_t K, double alpha, const double *A, size_t lda,
                                const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    (void)p;
    mha__dgemm(threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

/* mha__?gemm_batch or mha__bgemm_batch by precision (src/gemm.h) */
static inline void mha__sgemm_batch_p(mha_precision p, int threads, size_t n, int ta, size_t M,
                                      size_t N, size_t K, float alpha, const float *const *A,
                                      size_t lda, const float *const *B, size_t ldb,
                                      const float *beta, float *const *C, size_t ldc)
{
    if (p == MHA_PRECISION_BF16)
        mha__bgemm_batch(threads, n, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        mha__sgemm_batch(threads, n, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static inline void mha__dgemm_batch_p(mha_precision p, int threads, size_t n, int ta, size_t M,
                                      size_t N, size_t K, double alpha, const double *const *A,
                                      size_t lda, const double *const *B, size_t ldb,
                                      const double *beta, double *const *C, size_t ldc)
{
    (void)p;
    mha__dgemm_batch(threads, n, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* C = A·op(B) + bias (bias [N] on every row, or NULL: C = the product), C only written,
 * then epi on blocks of rows as they are final (or NULL): mha__?gemm_epi and mha__bgemm_epi
 * (src/gemm.h) — the bits of filling C's rows with the bias and adding the product. */
static inline void mha__sgemm_epi_p(mha_precision p, int threads, int tb, size_t M, size_t N,
                                    size_t K, const float *A, size_t lda, const float *B,
                                    size_t ldb, const float *bias, float *C, size_t ldc,
                                    mha__gemm_epi epi, void *ctx)
{
    if (p == MHA_PRECISION_BF16)
        mha__bgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, epi, ctx);
    else
        mha__sgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, epi, ctx);
}
static inline void mha__dgemm_epi_p(mha_precision p, int threads, int tb, size_t M, size_t N,
                                    size_t K, const double *A, size_t lda, const double *B,
                                    size_t ldb, const double *bias, double *C, size_t ldc,
                                    mha__gemm_epi epi, void *ctx)
{
    (void)p;
    mha__dgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, epi, ctx);
}

/* ---- Key/value caches with packed weights (src/mha_kv.inc) --------------------------
 * mha__?kvcache_pack(kv): give the cache a copy of its module's four projection weights
 * transposed ([in, out]), as they are at the call; the cache's projections then multiply
 * it directly instead of transposing W into scratch at every call. The copy does not
 * follow later changes of the weights: the caller packs again after them (the decoder's
 * state packs its caches at every encode, src/s2s_infer.inc). The first call allocates
 * 4·D² elements, freed with the cache. MHA_OK, MHA_EINVAL, MHA_EOVERFLOW, MHA_ENOMEM (the
 * cache is then left as it was). */
int mha__skvcache_pack(mha_kvcache *kv);
int mha__dkvcache_pack(mhad_kvcache *kv);
/* mha__?kvcache_borrow_pack(kv, from): kv's projections read from's packed weights (from:
 * packed, of the same module, outliving kv); kv never packs again (MHA_EINVAL) and does not
 * free them. MHA_OK, MHA_EINVAL. */
int mha__skvcache_borrow_pack(mha_kvcache *kv, const mha_kvcache *from);
int mha__dkvcache_borrow_pack(mhad_kvcache *kv, const mhad_kvcache *from);
/* mha__?module_transpose_weights(m): the module's four projection weights transposed in
 * place ([out, in] → [in, out]); the module then computes wrongly except through caches
 * that view them (mha__?kvcache_view_pack). Used by mha_s2s_decode_only only.
 * mha__?kvcache_view_pack(kv): kv's projections read its module's weights as they are,
 * taken to be transposed already (no copy; kv never packs again). MHA_OK, MHA_EINVAL. */
void mha__smodule_transpose_weights(mha_module *m);
void mha__dmodule_transpose_weights(mhad_module *m);
int mha__skvcache_view_pack(mha_kvcache *kv);
int mha__dkvcache_view_pack(mhad_kvcache *kv);
/* mha__?kvcache_bytes(m, batch, max_len, packed, &bytes): what mha_kvcache_create
 * allocates for these sizes (and, when packed, what kvcache_pack adds). MHA_OK, MHA_EINVAL,
 * MHA_EOVERFLOW. */
int mha__skvcache_bytes(const mha_module *m, size_t batch, size_t max_len, int packed,
                        size_t *bytes);
int mha__dkvcache_bytes(const mhad_module *m, size_t batch, size_t max_len, int packed,
                        size_t *bytes);


/* Dropout's keep masks (mha_dropout_forward and the layers' dropout, both precisions) are
 * drawn eight PCG32 lanes per AVX-512 register where the CPU has AVX-512 F and DQ, else by
 * the portable loop: the same bits either way. mode 0 makes every later call use the
 * portable loop, 1 the AVX-512 one where the CPU has it (the default), -1 changes nothing
 * (for tests: both paths on one machine). Returns 1 if the AVX-512 path is in use. */
int mha__dropout_simd(int mode);

/* The attention module's dropout, drawn and applied as the layers' is: the next n outputs
 * of rng decide n elements (kept: output >= threshold), in order, a word of 64 at a time on
 * eight interleaved PCG32 lanes (on AVX-512 as mha__dropout_simd says; the outputs of n
 * mha__pcg32_step calls, bit for bit); keep bits into keep[0 .. ⌈n/64⌉) (NULL: not stored),
 * y = x ⊙ keep·scale (no overlap unless y == x); rng advanced past them. */
void mha__sdropout_draw(mha_pcg32 *rng, uint64_t threshold, size_t n, const float *x, float *y,
                        uint64_t *keep, float scale);
void mha__ddropout_draw(mha_pcg32 *rng, uint64_t threshold, size_t n, const double *x,
                        double *y, uint64_t *keep, double scale);

/* y[j] = x[j]·scale where bit j of bits is set, else 0, for j < len <= 64 (no overlap unless
 * y == x): a word of a keep mask applied as the layers' dropout applies it (on AVX-512 for a
 * whole word as mha__dropout_simd says; the same bits either way). */
void mha__sdropout_apply_bits(const float *x, float *y, size_t len, uint64_t bits, float scale);
void mha__ddropout_apply_bits(const double *x, double *y, size_t len, uint64_t bits,
                              double scale);

/* ---- Backward passes that write their input gradient (no zeroing pass first) -------------
 * Each is its public twin (mha_dropout_backward, mha_mlp_backward_prec (with kept = 0),
 * mha_backward; same arguments, checks and statuses) except that the input gradient — dx, and dx_query of the
 * attention module (dx_context is still added to) — is written instead of added to: the
 * result of the twin on a zeroed buffer (the same bits, but for the sign of an exact zero),
 * without the zeroing. The blocks' backward passes use them for their scratch buffers. */
int mha__sdropout_backward_set(size_t n, double p, const uint64_t *keep, const float *dy,
                               float *dx);
int mha__ddropout_backward_set(size_t n, double p, const uint64_t *keep, const double *dy,
                               double *dx);
int mha__smlp_backward_set(mha_precision prec, size_t N, size_t C, size_t F, const float *x,
                           const float *W1, const float *W2, const float *h, const float *a,
                           const float *dy, float *scratch, float *dx, float *dW1, float *db1,
                           float *dW2, float *db2, int kept);
int mha__dmlp_backward_set(mha_precision prec, size_t N, size_t C, size_t F, const double *x,
                           const double *W1, const double *W2, const double *h, const double *a,
                           const double *dy, double *scratch, double *dx, double *dW1,
                           double *db1, double *dW2, double *db2, int kept);
/* mha_mlp_forward_prec, and with keep also h := gelu'(h) — from the tanh the forward takes
 * anyway, the bits gelu' has in the backward — for a backward_set with kept = 1, whose
 * dh = da ⊙ gelu'(h) is then one multiplication (what a block's training forward does). */
int mha__smlp_forward_keep(mha_precision prec, size_t N, size_t C, size_t F, const float *x,
                           const float *W1, const float *b1, const float *W2, const float *b2,
                           float *h, float *a, float *y, int keep);
int mha__dmlp_forward_keep(mha_precision prec, size_t N, size_t C, size_t F, const double *x,
                           const double *W1, const double *b1, const double *W2,
                           const double *b2, double *h, double *a, double *y, int keep);
int mha__sbackward_set(mha_module *m, mha_cache *c, const float *x_query, const float *x_context,
                       const float *d_out, float *dx_query, float *dx_context);
int mha__dbackward_set(mhad_module *m, mhad_cache *c, const double *x_query,
                       const double *x_context, const double *d_out, double *dx_query,
                       double *dx_context);

/* ---- Residual connections (src/layers_core.c), on the library's threads ---------------
 * mha__?residual_layernorm(N, C, eps, x, sub, w, b, sum, y, mean, rstd): sum = x + sub
 * [N, C], then y = LayerNorm(sum) with mean and rstd as mha_layernorm_forward gives them
 * (the same bits), a row's sum read back while it is in cache: a block's residual add and
 * the next LayerNorm in one pass. Arguments valid (the blocks'); MHA_OK or MHA_EOVERFLOW.
 * mha__?add(n, a, b, y): y = a + b element-wise (y may be a or b). */
int mha__sresidual_layernorm(size_t N, size_t C, double eps, const float *x, const float *sub,
                             const float *w, const float *b, float *sum, float *y, float *mean,
                             float *rstd);
int mha__dresidual_layernorm(size_t N, size_t C, double eps, const double *x,
                             const double *sub, const double *w, const double *b, double *sum,
                             double *y, double *mean, double *rstd);
void mha__sadd(size_t n, const float *a, const float *b, float *y);
void mha__dadd(size_t n, const double *a, const double *b, double *y);
/* mha__?zero(n, y): y[0 .. n) = 0 on the library's threads (a model's gradients, its
 * backward's accumulators: megabytes the calling thread alone wrote while the others
 * waited). */
void mha__szero(size_t n, float *y);
void mha__dzero(size_t n, double *y);
/* mha__?layernorm_backward_from(N, C, x, w, mean, rstd, dy, base, dx, dw, db):
 * mha_layernorm_backward with dx = base + LNᵀ(dy) instead of dx += LNᵀ(dy) (the bits of
 * copying base into dx first; base may be dx; NULL: dx itself): a block's backward starts a
 * residual's gradient from its other path without a copy pass. */
int mha__slayernorm_backward_from(size_t N, size_t C, const float *x, const float *w,
                                  const float *mean, const float *rstd, const float *dy,
                                  const float *base, float *dx, float *dw, float *db);
int mha__dlayernorm_backward_from(size_t N, size_t C, const double *x, const double *w,
                                  const double *mean, const double *rstd, const double *dy,
                                  const double *base, double *dx, double *dw, double *db);

/* ---- The softmax's exponentials (src/layers_exp.inc, part of layers_core.c) ------------
 * mha__?exp_shift_sum(row, n, shift): row[j] := e^(row[j] − shift), exactly 0 where that
 * underflows (below −104 in float, −750 in double: callers' masked scores, −1e9, never reach
 * the exponential), and returns Σ row[j] in double. float: a branch-free exponential within
 * 2 ulp of expf whose row loop vectorises, summed in 8 fixed lanes (the same bits for any
 * thread count and in every clone); double, the exact oracle: libm's exp, one running sum.
 * Every softmax of the attention (stored, recompute, key/value cache) takes its
 * exponentials here, so the three paths agree to the bit where they did before. */
double mha__sexp_shift_sum(float *row, size_t n, float shift);
double mha__dexp_shift_sum(double *row, size_t n, double shift);

/* ---- Modules whose owner sets the weights (src/mha_core.c) -------------------------
 * mha__?create_in: mha_create / mhad_create without drawing the initial weights (they
 * are zeros until the caller writes them): for the blocks, which draw their modules'
 * weights from seeds of their own right after, and for models about to be loaded from a
 * file, where drawing 4·D² values per module was wasted work on the way to the first
 * word. params and grads: two zeroed spans of mha_param_count(D) elements in the owner's
 * arena, which the module uses in place and never frees (the owner keeps them alive until
 * after mha_destroy), or both NULL: the module allocates its own. Same statuses as
 * mha_create, and MHA_EINVAL for one span without the other. */
int mha__screate_in(mha_module **out, const mha_config *cfg, float *params, float *grads);
int mha__dcreate_in(mhad_module **out, const mha_config *cfg, double *params, double *grads);

#endif /* MHA_INTERNAL_H */
