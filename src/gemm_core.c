/*
 * The GEMM module, written once for both precisions (the interface and its contract are
 * in src/gemm.h), compiled twice (float; double with -DMHA_DOUBLE: src/real.h gives REAL
 * and PRIV(name), the internal name mha__sname / mha__dname); here
 *   CBLAS_GEMM     the matching BLAS gemm (cblas_sgemm / cblas_dgemm)
 *   XSMM_DISPATCH  libxsmm's dispatch (libxsmm_smmdispatch / libxsmm_dmmdispatch) and
 *   XSMM_FN        its kernel type, when built with libxsmm (MHA_HAVE_LIBXSMM).
 *
 * Every product is row-major: C = alpha·op(A)·op(B) + beta·C, op(A) [M,K], op(B) [K,N],
 * C [M,N]; the sections below are the backends (REF, OWN, BLAS, XSMM), the measured rule
 * that picks one (gemm_choose); the entry point with its row split, bias and epilogues is
 * src/gemm_entry.inc, included at the end.
 */
#include "real.h" /* REAL, PRIV: float, or double with -DMHA_DOUBLE */
#ifdef MHA_DOUBLE
#define CBLAS_GEMM cblas_dgemm
#define XSMM_DISPATCH libxsmm_dmmdispatch
#define XSMM_FN libxsmm_dmmfunction
#else
#define CBLAS_GEMM cblas_sgemm
#define XSMM_DISPATCH libxsmm_smmdispatch
#define XSMM_FN libxsmm_smmfunction
#endif

#include <limits.h>
#include <string.h>

#include <cblas.h>

#include "pool.h"

#include "mha_internal.h"

#ifdef MHA_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

/* ---------------------------------------------------------------------------
 * REF: the naive triple loop, C[i,j] = alpha·Σ_p op(A)[i,p]·op(B)[p,j] + beta·C[i,j]
 * ------------------------------------------------------------------------- */

void PRIV(gemm_ref)(int ta, int tb, size_t M, size_t N, size_t K, REAL alpha, const REAL *A,
                 size_t lda, const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            REAL s = 0;
            for (size_t p = 0; p < K; p++) {
                REAL a = ta ? A[p * lda + i] : A[i * lda + p];
                REAL b = tb ? B[j * ldb + p] : B[p * ldb + j];
                s += a * b;
            }
            C[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C[i * ldc + j]);
        }
}

/* ---------------------------------------------------------------------------
 * OWN: a register-blocked kernel. Each block of R = 4 rows × NV = 2 vectors of C
 * (VLEN = 32 bytes of REAL each) is accumulated in registers over the whole K, then
 * stored once:
 *     acc[r][v] += op(A)[i+r, p] · B[p, j + v·VLEN .. +VLEN]     for p = 0..K−1
 * Rows and columns that do not fill a block take the same code with R = 1 or
 * NV = 1, and a scalar loop for the last N mod VLEN columns. op(A) is read
 * through (row stride, column stride), so NN and TN share the kernel; for
 * op(B) = Bᵀ, B is first transposed into `work` [K, N].
 * Built for three instruction sets (target_clones, picked once at load time):
 * x86-64 baseline, x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512).
 * ------------------------------------------------------------------------- */
#include "vreal.inc" /* vreal, VLEN, vload, vstore */

/* C[R, NV·VLEN] = alpha·op(A)[R, K]·B[K, NV·VLEN] + beta·C; R <= 4, NV <= 2 are
 * compile-time constants after inlining, so acc lives in registers. */
static inline __attribute__((always_inline)) void gemm_block(const int R, const int NV, size_t K,
                                                             REAL alpha, const REAL *A, size_t ars,
                                                             size_t acs, const REAL *B, size_t ldb,
                                                             REAL beta, REAL *C, size_t ldc)
{
    vreal acc[4][2];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = (vreal){0};
    for (size_t p = 0; p < K; p++) {
        vreal b[2];
        for (int v = 0; v < NV; v++)
            b[v] = vload(B + p * ldb + (size_t)v * VLEN);
        for (int r = 0; r < R; r++) {
            REAL a = A[(size_t)r * ars + p * acs];
            for (int v = 0; v < NV; v++)
                acc[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++) {
            REAL *c = C + (size_t)r * ldc + (size_t)v * VLEN;
            vreal out = alpha * acc[r][v];
            if (beta != 0)
                out += beta * vload(c);
            vstore(c, out);
        }
}

/* Rows i .. i+R−1 of C, all N columns. */
static inline __attribute__((always_inline)) void gemm_rows(const int R, size_t N, size_t K,
                                                            REAL alpha, const REAL *A, size_t ars,
                                                            size_t acs, const REAL *B, size_t ldb,
                                                            REAL beta, REAL *C, size_t ldc)
{
    size_t j = 0;
    for (; j + 2 * VLEN <= N; j += 2 * VLEN)
        gemm_block(R, 2, K, alpha, A, ars, acs, B + j, ldb, beta, C + j, ldc);
    if (j + VLEN <= N) {
        gemm_block(R, 1, K, alpha, A, ars, acs, B + j, ldb, beta, C + j, ldc);
        j += VLEN;
    }
    for (; j < N; j++) /* the last N mod VLEN columns */
        for (int r = 0; r < R; r++) {
            REAL s = 0;
            for (size_t p = 0; p < K; p++)
                s += A[(size_t)r * ars + p * acs] * B[p * ldb + j];
            REAL *c = C + (size_t)r * ldc + j;
            *c = alpha * s + (beta != 0 ? beta * *c : 0);
        }
}

MHA_CLONES
void PRIV(gemm_small)(int ta, int tb, size_t M, size_t N, size_t K, REAL alpha, const REAL *A,
                      size_t lda, const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc,
                      REAL *work)
{
    if (tb) { /* work[K, N] = Bᵀ, B stored [N, K] */
        PRIV(transpose)(N, K, B, ldb, work, N);
        B = work;
        ldb = N;
    }
    const size_t ars = ta ? 1 : lda, acs = ta ? lda : 1; /* op(A)[i,p] = A[i·ars + p·acs] */
    size_t i = 0;
    for (; i + 4 <= M; i += 4)
        gemm_rows(4, N, K, alpha, A + i * ars, ars, acs, B, ldb, beta, C + i * ldc, ldc);
    for (; i < M; i++)
        gemm_rows(1, N, K, alpha, A + i * ars, ars, acs, B, ldb, beta, C + i * ldc, ldc);
}

/* ---------------------------------------------------------------------------
 * BLAS: one CBLAS call
 * ------------------------------------------------------------------------- */

void PRIV(gemm_blas)(int ta, int tb, size_t M, size_t N, size_t K, REAL alpha, const REAL *A,
                  size_t lda, const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc)
{
    /* The caller guarantees every dimension and stride is <= INT_MAX (checked
     * when the cache is made), so the blasint conversions below are exact. */
    CBLAS_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
               (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb,
               beta, C, (blasint)ldc);
}


/* ---------------------------------------------------------------------------
 * XSMM: a libxsmm 1.17 JIT kernel
 *
 * libxsmm is column-major. A row-major [r, c] matrix with row stride ld is, read
 * column-major, its transpose [c, r] with leading dimension ld, so the row-major
 *     C = op(A)·B          C [M,N], op(A) [M,K], B [K,N]
 * is the column-major
 *     Cᵀ = Bᵀ·op(A)ᵀ       (N,M) = (N,K)(K,M):  m = N, n = M, k = K,
 *     first operand  B (lda' = ldb): B [K,N] reads column-major as Bᵀ [N,K], as needed;
 *     second operand A (ldb' = lda): for ta = 0, A [M,K] reads as op(A)ᵀ [K,M], as needed;
 *       for ta = 1, A [K,M] reads as op(A) [M,K], and the kernel transposes its second
 *       operand (LIBXSMM_GEMM_FLAG_TRANS_B), which 1.17's JIT supports.
 * op(B) = Bᵀ would be a transposed first operand, which 1.17's JIT refuses: the caller
 * transposes B into scratch first (gemm_run receives tb = 0 only).
 * Kernels are dispatched through libxsmm (thread-safe, its own registry) and the handles
 * kept in a small per-thread table, so a repeated shape costs a few compares.
 * ------------------------------------------------------------------------- */
#ifdef MHA_HAVE_LIBXSMM
#define XSMM_CACHE 32 /* entries of the per-thread table (a power of two) */

typedef struct xsmm_entry {
    int used, flags;
    libxsmm_blasint m, n, k, lda, ldb, ldc;
    XSMM_FN fn; /* NULL: libxsmm refused this shape (remembered too) */
} xsmm_entry;

static _Thread_local xsmm_entry xsmm_table[XSMM_CACHE];

/* The kernel Cᵀ(m,n) = a(m,k)·op(b)(k,n) (+ Cᵀ when !(flags & BETA_0)), or NULL. */
static XSMM_FN xsmm_kernel(libxsmm_blasint m, libxsmm_blasint n, libxsmm_blasint k,
                           libxsmm_blasint lda, libxsmm_blasint ldb, libxsmm_blasint ldc,
                           int flags)
{
    const size_t h = ((size_t)m * 73856093u ^ (size_t)n * 19349663u ^ (size_t)k * 83492791u ^
                      (size_t)lda * 2654435761u ^ (size_t)ldb * 40503u ^ (size_t)ldc * 97u ^
                      (size_t)flags) & (XSMM_CACHE - 1);
    xsmm_entry *e = &xsmm_table[h];
    if (e->used && e->m == m && e->n == n && e->k == k && e->lda == lda && e->ldb == ldb &&
        e->ldc == ldc && e->flags == flags)
        return e->fn;
    const REAL alpha = 1, beta = (flags & LIBXSMM_GEMM_FLAG_BETA_0) ? 0 : 1;
    const int prefetch = LIBXSMM_PREFETCH_NONE;
    XSMM_FN fn = XSMM_DISPATCH(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
    *e = (xsmm_entry){1, flags, m, n, k, lda, ldb, ldc, fn};
    return fn;
}
#endif

/* C[i, :] += V[i·ldv + :] for rows i < M (ldv = 0: the one row V added to every row, a
 * bias). An addition only, so every clone rounds alike. */
MHA_CLONES
static void add_rows(size_t M, size_t N, const REAL *V, size_t ldv, REAL *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++) {
        const REAL *restrict v = V + i * ldv;
        REAL *restrict c = C + i * ldc;
        for (size_t j = 0; j < N; j++)
            c[j] += v[j];
    }
}

/* C[M,N] *= s  (s = 0: C = 0, whatever C held); gemm.h */
void PRIV(gemm_scale)(size_t M, size_t N, REAL s, REAL *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++) {
        REAL *c = C + i * ldc;
        if (s == 0)
            memset(c, 0, N * sizeof *c);
        else
            for (size_t j = 0; j < N; j++)
                c[j] *= s;
    }
}

/* B's panel (K × N) above which a libxsmm product takes K in slices of XSMM_KB: libxsmm's
 * kernels have no blocking over K, so each block of C's rows streams the whole of B, which
 * beyond the core's cache comes from memory again for every block. Measured (one thread,
 * best of 40, float, the two sides in one run; 2-core Xeon, model 207, 2 MB of L2 per core):
 * a weight gradient dyᵀ·x of 192×640×1280 (G2P's MLP W2: B 3.3 MB) ran at 65 GFLOP/s
 * whole and 134 in slices of 256 (128: 134, 384: 134, 512: 131), the GPT's 128×512×768
 * (B 1.5 MB) at 84 and 125; below the bound slices gained nothing or lost (192×192×1280,
 * B 0.98 MB: 174 whole, 165 sliced; 512×128×768: 136, 122). */
#define XSMM_PANEL_BYTES (1u << 20)
#define XSMM_KB 256

/* C = alpha·op(A)·B + beta·C on libxsmm (B not transposed). The kernel always has
 * alpha = 1, beta = 0 (libxsmm's JIT takes alpha = 1 and beta ∈ {0, 1} only); alpha and
 * beta are applied after, as every backend does: the product is rounded first, then
 *     C = alpha·T + beta·C,   T = op(A)·B
 * so that an accumulating call (beta = 1) adds exactly the product a beta = 0 call
 * writes. t: scratch [M, N] for T when beta ≠ 0 (unused when beta = 0: T is C itself).
 * T is written by one kernel, or, for a panel of B over XSMM_PANEL_BYTES, by one per slice
 * of XSMM_KB rows of K (the first writes T, the others add to it): slices fixed by K alone,
 * so every row block of a split product sums alike.
 * Returns 0, or -1 without touching C: not built with libxsmm, or a dispatch failed. */
static int gemm_xsmm(int ta, size_t M, size_t N, size_t K, REAL alpha, const REAL *A,
                     size_t lda, const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc,
                     REAL *t)
{
#ifdef MHA_HAVE_LIBXSMM
    if (!mha__gemm_have_xsmm())
        return -1;
    const int trans = ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
    REAL *T = beta == 0 ? C : t;
    const size_t ldt = beta == 0 ? ldc : N;
    const size_t kb = (double)K * N * sizeof(REAL) > XSMM_PANEL_BYTES ? XSMM_KB : K;
    const size_t k_last = K - (K - 1) / kb * kb; /* rows of K in the last slice */
    /* Tᵀ = Bᵀ·op(A)ᵀ   (N,M) = (N,K)(K,M), column-major (T row-major [M,N]); all kernels
     * dispatched before any runs */
#define XSMM_GET(k, fl)                                                                        \
    xsmm_kernel((libxsmm_blasint)N, (libxsmm_blasint)M, (libxsmm_blasint)(k),                 \
                (libxsmm_blasint)ldb, (libxsmm_blasint)lda, (libxsmm_blasint)ldt, trans | (fl))
    XSMM_FN first = XSMM_GET(K < kb ? K : kb, LIBXSMM_GEMM_FLAG_BETA_0);
    XSMM_FN mid = K > 2 * kb ? XSMM_GET(kb, 0) : NULL;
    XSMM_FN last = K > kb ? XSMM_GET(k_last, 0) : NULL;
#undef XSMM_GET
    if (first == NULL || (K > 2 * kb && mid == NULL) || (K > kb && last == NULL))
        return -1;
    for (size_t k0 = 0; k0 < K; k0 += kb) {
        XSMM_FN fn = k0 == 0 ? first : k0 + kb < K ? mid : last;
        fn(B + k0 * ldb, ta ? A + k0 * lda : A + k0, T);
    }
    mha__xsmm_after_kernel();
    if (beta == 0) {
        if (alpha != 1)
            PRIV(gemm_scale)(M, N, alpha, C, ldc); /* C = alpha·T */
        return 0;
    }
    if (alpha == 1 && beta == 1) { /* C = T + C: the bits of 1·T + 1·C */
        add_rows(M, N, t, N, C, ldc);
        return 0;
    }
    for (size_t i = 0; i < M; i++) { /* C = alpha·T + beta·C */
        const REAL *tr = t + i * N;
        REAL *c = C + i * ldc;
        for (size_t j = 0; j < N; j++)
            c[j] = alpha * tr[j] + beta * c[j];
    }
    return 0;
#else
    (void)ta, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb,
        (void)beta, (void)C, (void)ldc, (void)t;
    return -1;
#endif
}

/* ---------------------------------------------------------------------------
 * The transpose: out[c, r] = in[r, c], through vector registers a tile at a time
 *
 * One tile is VLEN × VLEN (8×8 floats, 4×4 doubles: one 32-byte vector per row): load
 * its rows, interleave pairs of rows, then pairs of pairs, then 128-bit halves, store
 * the columns. About 4× faster than the element-by-element copy (whose stores land
 * rows apart): 3·64² floats in 1.3 µs instead of 4.8 µs on the 2-core Xeon. Used for
 * op(B) = Bᵀ before the OWN and XSMM backends, and by callers that keep a transposed
 * copy (src/gemm.h).
 * ------------------------------------------------------------------------- */
typedef float vf8 __attribute__((vector_size(32)));
typedef double vd4 __attribute__((vector_size(32)));
/* __builtin_shufflevector: clang's, and GCC's from version 12; older GCC has only its own
 * __builtin_shuffle, with the indices as a vector */
#if defined(__clang__) || __GNUC__ >= 12
#define SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUF4(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int vmask8 __attribute__((vector_size(32)));
typedef long long vmask4 __attribute__((vector_size(32)));
#define SHUF8(a, b, ...) __builtin_shuffle(a, b, (vmask8){__VA_ARGS__})
#define SHUF4(a, b, ...) __builtin_shuffle(a, b, (vmask4){__VA_ARGS__})
#endif

/* out[p, j] = in[j, p] for one 8×8 tile of floats */
static inline __attribute__((always_inline)) void tile_transpose_f32(const float *in, size_t ldi,
                                                                     float *out, size_t ldo)
{
    vf8 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        memcpy(&r[i], in + (size_t)i * ldi, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) { /* t[i] = rows i, i+1 interleaved by element */
        t[i] = SHUF8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = SHUF8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)   /* then by pairs of elements */
        for (int k = 0; k < 2; k++) {
            u[i + 2 * k] = SHUF8(t[i + k], t[i + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * k + 1] = SHUF8(t[i + k], t[i + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int k = 0; k < 4; k++) {    /* then by 128-bit halves: u[k] holds column k */
        const vf8 lo = SHUF8(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const vf8 hi = SHUF8(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(out + (size_t)k * ldo, &lo, sizeof lo);
        memcpy(out + (size_t)(k + 4) * ldo, &hi, sizeof hi);
    }
}

/* out[p, j] = in[j, p] for one 4×4 tile of doubles */
static inline __attribute__((always_inline)) void tile_transpose_f64(const double *in, size_t ldi,
                                                                     double *out, size_t ldo)
{
    vd4 r[4], t[4];
    for (int i = 0; i < 4; i++)
        memcpy(&r[i], in + (size_t)i * ldi, sizeof r[i]);
    for (int i = 0; i < 4; i += 2) {
        t[i] = SHUF4(r[i], r[i + 1], 0, 4, 2, 6);
        t[i + 1] = SHUF4(r[i], r[i + 1], 1, 5, 3, 7);
    }
    for (int k = 0; k < 2; k++) {
        const vd4 lo = SHUF4(t[k], t[k + 2], 0, 1, 4, 5);
        const vd4 hi = SHUF4(t[k], t[k + 2], 2, 3, 6, 7);
        memcpy(out + (size_t)k * ldo, &lo, sizeof lo);
        memcpy(out + (size_t)(k + 2) * ldo, &hi, sizeof hi);
    }
}
#undef SHUF8
#undef SHUF4

/* out [cols, rows] (row stride ldo) = inᵀ, in [rows, cols] (row stride ldi): whole
 * tiles first, then the edges (columns c >= cv of every row, rows r >= rv of the
 * columns c < cv) element by element. */
MHA_CLONES
void PRIV(transpose)(size_t rows, size_t cols, const REAL *in, size_t ldi, REAL *out, size_t ldo)
{
    const size_t rv = rows - rows % VLEN, cv = cols - cols % VLEN;
    for (size_t r = 0; r < rv; r += VLEN)
        for (size_t c = 0; c < cv; c += VLEN)
            _Generic((out), float *: tile_transpose_f32, double *: tile_transpose_f64)(
                in + r * ldi + c, ldi, out + c * ldo + r, ldo);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = cv; c < cols; c++)
            out[c * ldo + r] = in[r * ldi + c];
    for (size_t c = 0; c < cv; c++)
        for (size_t r = rv; r < rows; r++)
            out[c * ldo + r] = in[r * ldi + c];
}

/* work[K, N] = Bᵀ, B stored [N, K] with row stride ldb */
static void transpose_b(size_t N, size_t K, const REAL *B, size_t ldb, REAL *work)
{
    PRIV(transpose)(N, K, B, ldb, work, N);
}

/* ---------------------------------------------------------------------------
 * The rule: which backend for which product
 *
 * Measured with tools/gemm_calib.c (`build/mha-gemm-calib`, one thread, float, GFLOP/s,
 * best of 3; 2-core Intel Xeon with AVX-512, OpenBLAS 0.3.21 SkylakeX kernels, libxsmm
 * 1.17 AVX-512 JIT; own = the OWN kernel; the own kernel and libxsmm include the
 * transpose of B into scratch for NT, and libxsmm the extra pass C = alpha·T + beta·C
 * when beta ≠ 0; the NT rows re-measured after the transpose became a tile transpose,
 * in a run where NN and TN came out about 10% above the rest of this table):
 *
 *   product                     M×N×K        t   own  blas  xsmm
 *   projection y = x·Wᵀ         20×64×64     NT   87    62   118
 *                               1024×64×64   NT  104   131   157
 *                               768×128×128  NT   97   141   159
 *   MLP fc y = x·W1ᵀ            768×512×128  NT   89   148   140
 *   MLP proj y = a·W2ᵀ          768×128×512  NT   96   135   169
 *   projection dx += dy·W       1024×64×64   NN   91   111   135
 *                               768×128×128  NN   72   135   142
 *   MLP da = dy·W2              768×512×128  NN   60   133   137
 *   projection dW += dyᵀ·x      64×64×20     TN   88   131   101
 *                               64×64×1024   TN   62    99   149
 *                               128×128×768  TN   38    87   139
 *   MLP dW1 += dhᵀ·x            512×128×768  TN   42   122    80
 *   head S = Q·Kᵀ               10×10×8      NT   11    12    30
 *                               64×64×8      NT   84    66   150
 *                               64×256×32    NT   92    93   149
 *                               64×2048×64   NT   70   105   106
 *                               2048×2048×64 NT   79   109   142
 *   head C = P·V                10×8×10      NN   34    26    28
 *                               64×8×64      NN   60    67    75
 *                               64×32×256    NN   98   143   165
 *                               2048×2048×64 NN   58   119   120
 *   head dV += Pᵀ·dC            10×8×10      TN   33    19    22
 *                               64×8×64      TN   61   116    65
 *                               256×32×64    TN   86   135   130
 *                               2048×64×64   TN   77   120   129
 *
 * So, with libxsmm:
 *   NN: libxsmm (fastest or within noise everywhere).
 *   NT: BLAS below NT_MIN_ROWS rows (the transpose of B is not amortised: generation);
 *       libxsmm otherwise. (The stored attention's Q·Kᵀ is no longer NT: K is transposed
 *       once per head.)
 *   TN: the own kernel below 4096 multiply-adds; libxsmm otherwise.
 *   Until 2026-12-07 NT went to BLAS beyond N = 1024 and TN below K = 256 or beyond
 *   M = 1024, where BLAS had been level with libxsmm or up to 16% ahead (the 2048-key heads
 *   on the AMD EPYC below; TN 64×64×20 on the Xeon above). Two measurements moved them to
 *   libxsmm. (1) With the OpenMP OpenBLAS at 2 threads a product's bits depend on its thread
 *   count (cblas_sgemm TN 64×32×K, beta = 1: most K from 129 on differ between 1 and 2
 *   threads; every transposition, every coretype tried), while the row split of libxsmm's
 *   products never changes a bit: a G2P float32 run of 40-word batches (encoder weight
 *   gradients of K < 256 tokens) left its 1-thread trajectory at step 6. (2) On a 2-core
 *   Xeon of model 207 (Emerald Rapids; AVX-512 without AVX512_BF16 in the VM) OpenBLAS
 *   0.3.21 does not know the CPU and runs its Prescott (SSE3) kernels: 20–34 GFLOP/s at
 *   every shape of `mha-gemm-calib`, libxsmm 110–190 (e.g. TN 2048×64×64: 32 vs 157,
 *   NT 64×2048×64: 31 vs 109).
 *   Until the library ran on its own threads (src/pool.h) the NT and TN bounds were
 *   N <= 256 and M <= 128, from the Xeon's table: libxsmm level with BLAS at 768×512×128
 *   NT (140 vs 148) and behind it at 512×128×768 TN (80 vs 122). Now every product that
 *   goes to the OpenMP OpenBLAS wakes libgomp's team, whose threads then spin ~300,000
 *   iterations beside the library's own: a float32 G2P step (3 + 3 blocks, batch 128,
 *   2 threads) took 1.33x as long with the old bounds, 1.00x with these, on the AMD EPYC,
 *   where libxsmm is the faster of the two at every G2P shape (the `g2p` rows of
 *   `mha-gemm-calib`: 108.8 vs 106.1 GFLOP/s at 640×640×192 NT, 112.0 vs 102.7 at
 *   640×192×1280 TN, one thread).
 *   TT: not used by the library: BLAS.
 * Without libxsmm: BLAS from 16384 multiply-adds (below it its call overhead dominates),
 * the own kernel otherwise. Where BLAS may not be called (inside our parallel region with
 * a sequential OpenBLAS), libxsmm or the own kernel takes its place.
 * Double follows the same rule (its table, `mha-gemm-calib --double`, has the same
 * winners within noise; NT with N = 256 and M <= 64, where BLAS was ahead with the
 * element-by-element transpose, now goes to libxsmm too: 64×256×32 57 vs 51).
 * Re-measured on a 2-core AMD EPYC (Zen 4, AVX-512 and AVX512_BF16; OpenBLAS 0.3.21 running
 * its Cooperlake kernels, OPENBLAS_CORETYPE unset), one thread, a second engineer's build
 * running on the other core: at the baby GPT's and mha-train's shapes the rule's pick is
 * the fastest backend or within 7% of it (the worst: MLP dW1 512×128×768 TN, BLAS 100 vs
 * libxsmm 108, where the Xeon had BLAS 122 vs libxsmm 80 — the two machines disagree, and
 * the difference is under 1% of a step, so the rule stays); it loses 8–16% at 2048-key heads
 * and at hd = 8 and the seed's 10-row products (microseconds each). So the one table holds
 * on both machines; `mha-gemm-calib` prints the rule's pick beside each backend (and the
 * bf16 product's rate where the CPU has it).
 * ------------------------------------------------------------------------- */

/* BLAS may be called here: always outside our parallel loops; inside them (threads = 0)
 * only the pthreads build, which the attention module sets to one thread and which locks
 * what concurrent calls share. Not the OpenMP build there: on the library's own threads
 * (src/pool.h) it is outside any OpenMP region, so it would start a team of its own or,
 * asked for one thread, change its process-wide thread count from several threads at once
 * (OpenBLAS 0.3.21 frees per-thread buffers when that count drops); nor the sequential
 * build, which may lack locks. The choice depends on threads = 0 only, never on whether a
 * loop ran in parallel, so a product is computed alike at every thread count. */
static int blas_allowed(int threads)
{
    return threads > 0 || mha__blas_kind() == 1;
}

/* NT products with fewer rows than this go to BLAS: libxsmm needs op(B) = Bᵀ transposed
 * into scratch first (N·K moves), which a product of M·N·K multiply-adds amortises only for
 * enough rows. Generation (one new row per step: 1×128×128 projections) ran at 3,468
 * chars/s with every NT product on libxsmm, 6,162 before libxsmm (mha-gpt-bench). */
enum { NT_MIN_ROWS = 16 };

static mha__gemm_backend gemm_choose(int threads, int ta, int tb, size_t M, size_t N, size_t K,
                                     REAL alpha, REAL beta)
{
    const double work = (double)M * N * K;
    const int blas = blas_allowed(threads);
    (void)alpha, (void)beta; /* every backend takes any alpha and beta */
    if (mha__gemm_have_xsmm()) {
        if (!ta && !tb)
            return MHA__GEMM_XSMM;
        if (!ta && tb) /* few rows (generation: M = 1) cannot pay for transposing B */
            return M >= NT_MIN_ROWS || !blas ? MHA__GEMM_XSMM : MHA__GEMM_BLAS;
        if (ta && !tb)
            return work < 4096 ? MHA__GEMM_OWN : MHA__GEMM_XSMM;
        return blas ? MHA__GEMM_BLAS : MHA__GEMM_OWN;
    }
    return blas && work >= 16384 ? MHA__GEMM_BLAS : MHA__GEMM_OWN;
}

mha__gemm_backend PRIV(gemm_choice)(int threads, int ta, int tb, size_t M, size_t N, size_t K,
                                    REAL alpha, REAL beta)
{
    return gemm_choose(threads, ta, tb, M, N, K, alpha, beta);
}

/* the entry point: PRIV(gemm), PRIV(gemm_epi), PRIV(gemm_with) and the row split */
#include "gemm_entry.inc"

#undef VLEN
#ifdef MHA_HAVE_LIBXSMM
#undef XSMM_CACHE
#endif
#undef XSMM_PANEL_BYTES
#undef XSMM_KB
