/*
 * The layers of include/mha_layers.h, written once for both precisions and compiled twice
 * (float; double with -DMHA_DOUBLE: src/real.h gives REAL, X(name) and PRIV(name)).
 *
 * Letters (as in include/mha_layers.h): N rows, C features, F hidden features,
 * V vocabulary, B batch, T sequence length. Every tensor is dense and row-major.
 *
 * Every function validates all of its arguments before it writes anything. Loops run
 * on the library's threads (src/pool.h), as many as the caller's OpenMP setting
 * (omp_get_max_threads()), and only above PAR_MIN elements of work. Row-wise loops give
 * each row to one thread; column reductions (dw, db, dE, dP) give each block of columns
 * to one thread, which walks the rows in order — so no result depends on the thread
 * count, nor on which thread took which part. Products go through the GEMM
 * module (src/gemm.h) on the caller's thread count (one thread when called inside a
 * parallel region), with every dimension <= INT_MAX (checked: MHA_EOVERFLOW).
 */
#include "real.h" /* REAL, X, PRIV: float, or double with -DMHA_DOUBLE */

#include <stdint.h>

#ifdef MHA_DOUBLE
#define GELU_TANH(u) tanh(u)
#else
/* tanh for float, written so that loops over it vectorise (no call, no branch):
 *   tanh u = 1 − 2 / (e^{2u} + 1),   e^{2u} = 2^a,  a = 2u·log2(e) clamped to ±126,
 *   2^a = 2^k · 2^f with k = round(a) (the 1.5·2^23 trick: exact, no rint call),
 *   f ∈ [−½, ½], 2^f by its degree-7 Taylor polynomial (truncation < 2e-9).
 * Absolute error below 2.5e-7 over the whole range (tests/test_layers.c checks it
 * against libm's double tanh); ±1 exactly beyond |u| ≈ 9; NaN gives NaN. The first clamp
 * is written so that a NaN fails its test and becomes −126 (converting a NaN k to an integer
 * below is undefined), and the NaN is given back at the end (a select, which vectorises). */
static inline float mha__tanhf(float u)
{
    float a = 2.8853900817779268f * u; /* 2·log2(e)·u */
    a = a > -126.0f ? a : -126.0f;     /* NaN → −126 */
    a = a > 126.0f ? 126.0f : a;
    const float k = (a + 12582912.0f) - 12582912.0f; /* round to nearest, |a| < 2^22 */
    const float f = a - k;                             /* exact, in [−½, ½] */
    float p = 1.5252733804059841e-05f;
    p = p * f + 1.5403530393381606e-04f;
    p = p * f + 1.3333558146428443e-03f;
    p = p * f + 9.6181291076284772e-03f;
    p = p * f + 5.5504108664821580e-02f;
    p = p * f + 2.4022650695910071e-01f;
    p = p * f + 6.9314718055994531e-01f;
    p = p * f + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)k + 127) << 23}; /* 2^k, k ∈ [−126, 126]: a normal float */
    const float e = p * scale.f;
    const float t = 1.0f - 2.0f / (e + 1.0f);
    return u == u ? t : u; /* NaN in, NaN out */
}
#define GELU_TANH(u) mha__tanhf(u)
#endif

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "pool.h"

#include "mha_internal.h"
#include "mha_layers.h"

/* Elements of work (N·C, n, ...) before a loop starts threads. */
#define PAR_MIN 16384

/* The threads of a loop with `work` elements: the caller's setting above PAR_MIN. */
static int par_threads(size_t work)
{
    return work >= PAR_MIN ? mha__pool_threads() : 1;
}
/* Columns per task of a column reduction (each summed in a double accumulator). */
#define COL_BLOCK 64
/* Dropout elements per generator jump: a multiple of 64, so a chunk owns whole words. */
#define DROP_CHUNK 4096
/* Fixed row blocks of the cross-entropy sum: the partition depends on N only. */
#define XENT_BLOCKS 64

/* Element loops are compiled for several instruction sets (MHA_CLONES, mha_internal.h). */
/* Dropout's masks drawn on AVX-512 where the CPU has it (layers_dropout.inc). */
#if defined(__x86_64__) && defined(__GNUC__)
#define DROP_AVX512 1
#include <immintrin.h>
#else
#define DROP_AVX512 0
#endif

/* GELU (tanh form) constants: u = GELU_K·(x + GELU_A·x³). */
#define GELU_K 0.7978845608028654 /* √(2/π) */
#define GELU_A 0.044715

/* *n = a·b, or MHA_EOVERFLOW when a·b elements of REAL overflow size_t (bytes). */
static int elems2(size_t a, size_t b, size_t *n)
{
    const size_t max = SIZE_MAX / sizeof(REAL);
    if (a != 0 && b > max / a)
        return MHA_EOVERFLOW;
    *n = a * b;
    return MHA_OK;
}

/* *n = a·b·c elements of REAL, overflow checked as elems2. */
static int elems3(size_t a, size_t b, size_t c, size_t *n)
{
    size_t ab;
    if (elems2(a, b, &ab) != MHA_OK)
        return MHA_EOVERFLOW;
    return elems2(ab, c, n);
}

/* Dimensions handed to BLAS and libxsmm must fit their int. */
static int blas_ok(size_t a, size_t b, size_t c)
{
    return a <= INT_MAX && b <= INT_MAX && c <= INT_MAX;
}

/* out[c] += Σ_r A[r, c]   A [N, C], out [C]
 * Each column summed in double over r = 0..N−1 in order, then added once. */
/* Columns c0 .. c0+COL_BLOCK−1 of colsum_add. */
MHA_CLONES static void X(colsum_block_)(size_t N, size_t C, size_t c0, const REAL *A, REAL *out)
{
    const size_t w = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
    double acc[COL_BLOCK] = {0};
    for (size_t r = 0; r < N; r++) {
        const REAL *a = A + r * C + c0; /* A[r, c0 .. c0+w) */
        for (size_t j = 0; j < w; j++)
            acc[j] += (double)a[j];
    }
    for (size_t j = 0; j < w; j++)
        out[c0 + j] += (REAL)acc[j];
}

typedef struct colsum_job {
    size_t N, C;
    const REAL *A;
    REAL *out;
} colsum_job;

static void colsum_task(void *ctx, size_t k, int slot)
{
    const colsum_job *j = ctx;
    (void)slot;
    X(colsum_block_)(j->N, j->C, k * COL_BLOCK, j->A, j->out);
}

static void colsum_add(size_t N, size_t C, const REAL *A, REAL *out)
{
    colsum_job j = {N, C, A, out};
    mha__pool_for(par_threads(N * C), (C + COL_BLOCK - 1) / COL_BLOCK, colsum_task, &j);
}

#include "layers_norm.inc" /* LayerNorm; the residual add + LayerNorm; the parallel sum */

/* ===========================================================================
 * GELU (tanh approximation)
 *
 * Computed in the layer's own precision with GELU_TANH, which the instantiation
 * defines: libm's tanh for double (the gradient checks' exact reference), and for
 * float an inline tanh (mha__tanhf above, within 2e-7 of the double one)
 * that the element loops below can vectorise — libm's tanh, called per element,
 * was nearly half of a GPT training step. The loops are compiled for x86-64, -v3 and
 * -v4 (MHA_CLONES); multiply-adds are never fused (ISO C), so every clone
 * computes the same bits.
 * ========================================================================= */

/* t = tanh u,  u = K·(x + A·x³): what both below start from */
static inline REAL gelu_tanh_of(REAL x)
{
    return GELU_TANH((REAL)GELU_K * (x + (REAL)GELU_A * x * x * x));
}

/* y = ½·x·(1 + tanh u) */
static inline REAL gelu_from(REAL x, REAL t) { return (REAL)0.5 * x * ((REAL)1 + t); }

/* d gelu / dx = ½(1 + tanh u) + ½·x·(1 − tanh² u)·K·(1 + 3A·x²).
 * When 1 − tanh² u is exactly 0 (|u| large) the second term is 0; computing it would
 * give 0·∞ = NaN once x² overflows. */
static inline REAL gelu_grad_from(REAL x, REAL t)
{
    const REAL sech2 = (REAL)1 - t * t;
    const REAL second = (REAL)0.5 * x * sech2 * (REAL)GELU_K * ((REAL)1 + (REAL)(3.0 * GELU_A) * x * x);
    return (REAL)0.5 * ((REAL)1 + t) + (sech2 != 0 ? second : (REAL)0);
}

static inline REAL gelu_of(REAL x) { return gelu_from(x, gelu_tanh_of(x)); }
static inline REAL gelu_grad_of(REAL x) { return gelu_grad_from(x, gelu_tanh_of(x)); }

/* The element loops, on spans of GELU_SPAN elements (a task takes whole spans). */
#define GELU_SPAN 4096
MHA_CLONES static void X(gelu_span_fwd_)(size_t n, const REAL *x, REAL *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = gelu_of(x[i]);
}
/* y = gelu(x), and x := gelu'(x) in place (the bits gelu_of and gelu_grad_of give), from
 * one tanh: for a backward that then only multiplies (mode 2 below) */
MHA_CLONES static void X(gelu_span_fwd_keep_)(size_t n, REAL *x, REAL *y)
{
    for (size_t i = 0; i < n; i++) {
        const REAL h = x[i], t = gelu_tanh_of(h);
        y[i] = gelu_from(h, t);
        x[i] = gelu_grad_from(h, t);
    }
}
/* mode 0: dx += dy ⊙ gelu'(x);  mode 1: dx = dx ⊙ gelu'(x) (in place, dy unused);
 * mode 2: dx = dx ⊙ x, x holding gelu' already (the forward's keep) */
MHA_CLONES static void X(gelu_span_bwd_)(size_t n, const REAL *x, const REAL *dy, REAL *dx,
                                            int in_place)
{
    if (in_place == 2)
        for (size_t i = 0; i < n; i++)
            dx[i] = dx[i] * x[i];
    else if (in_place)
        for (size_t i = 0; i < n; i++)
            dx[i] = dx[i] * gelu_grad_of(x[i]);
    else
        for (size_t i = 0; i < n; i++)
            dx[i] += dy[i] * gelu_grad_of(x[i]);
}

typedef struct gelu_job {
    size_t n;
    const REAL *x, *dy;
    REAL *y;
    REAL *keep; /* forward: x itself, to take gelu'(x) (X(gelu_span_fwd_keep_)); or NULL */
    int in_place;
} gelu_job;

/* Spans c0 .. c1−1 (GELU_SPAN elements each) of the forward, or of the backward (y = dx) */
static void gelu_fwd_task(void *ctx, size_t c0, size_t c1, int slot)
{
    const gelu_job *j = ctx;
    (void)slot;
    for (size_t c = c0; c < c1; c++) {
        const size_t i0 = c * GELU_SPAN, m = j->n - i0 < GELU_SPAN ? j->n - i0 : GELU_SPAN;
        if (j->keep != NULL)
            X(gelu_span_fwd_keep_)(m, j->keep + i0, j->y + i0);
        else
            X(gelu_span_fwd_)(m, j->x + i0, j->y + i0);
    }
}

static void gelu_bwd_task(void *ctx, size_t c0, size_t c1, int slot)
{
    const gelu_job *j = ctx;
    (void)slot;
    for (size_t c = c0; c < c1; c++) {
        const size_t i0 = c * GELU_SPAN, m = j->n - i0 < GELU_SPAN ? j->n - i0 : GELU_SPAN;
        X(gelu_span_bwd_)(m, j->x + i0, j->in_place ? NULL : j->dy + i0, j->y + i0,
                          j->in_place);
    }
}

/* y = gelu(x), span by span */
static void gelu_fwd_all(size_t n, const REAL *x, REAL *y)
{
    gelu_job j = {.n = n, .x = x, .y = y};
    mha__pool_range(par_threads(n), (n + GELU_SPAN - 1) / GELU_SPAN, 1, gelu_fwd_task, &j);
}

/* y = gelu(x) and x := gelu'(x), span by span */
static void gelu_fwd_keep_all(size_t n, REAL *x, REAL *y)
{
    gelu_job j = {.n = n, .x = x, .y = y, .keep = x};
    mha__pool_range(par_threads(n), (n + GELU_SPAN - 1) / GELU_SPAN, 1, gelu_fwd_task, &j);
}

int mha_gelu_forward(size_t n, const REAL *x, REAL *y)
{
    if (!x || !y || n == 0)
        return MHA_EINVAL;
    if (n > SIZE_MAX / sizeof(REAL))
        return MHA_EOVERFLOW;
    gelu_fwd_all(n, x, y);
    return MHA_OK;
}

/* dx += dy ⊙ gelu'(x) (in_place 0), dx ⊙= gelu'(x) (in_place 1) or dx ⊙= x (in_place 2: x
 * holds gelu'), span by span. */
static void gelu_bwd_all(size_t n, const REAL *x, const REAL *dy, REAL *dx, int in_place)
{
    gelu_job j = {.n = n, .x = x, .dy = dy, .y = dx, .in_place = in_place};
    mha__pool_range(par_threads(n), (n + GELU_SPAN - 1) / GELU_SPAN, 1, gelu_bwd_task, &j);
}

int mha_gelu_backward(size_t n, const REAL *x, const REAL *dy, REAL *dx)
{
    if (!x || !dy || !dx || n == 0)
        return MHA_EINVAL;
    if (n > SIZE_MAX / sizeof(REAL))
        return MHA_EOVERFLOW;
    gelu_bwd_all(n, x, dy, dx, 0);
    return MHA_OK;
}

/* ===========================================================================
 * Token + position embedding
 * ========================================================================= */

/* Shared checks; ids are all in [0, V). */
static int embedding_check(size_t B, size_t T, size_t C, const int32_t *ids, size_t V)
{
    size_t n;
    if (B == 0 || T == 0 || C == 0 || V == 0)
        return MHA_EINVAL;
    if (elems3(B, T, C, &n) != MHA_OK || elems2(V, C, &n) != MHA_OK)
        return MHA_EOVERFLOW;
    for (size_t i = 0; i < B * T; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= V)
            return MHA_EINVAL;
    return MHA_OK;
}

typedef struct emb_job {
    size_t B, T, C;
    const int32_t *ids;
    const REAL *E, *P, *dy;
    REAL *y, *dE, *dP;
} emb_job;

/* Rows r0 .. r1−1 of the forward */
static void emb_fwd_task(void *ctx, size_t r0, size_t r1, int slot)
{
    const emb_job *j = ctx;
    const size_t C = j->C;
    (void)slot;
    for (size_t r = r0; r < r1; r++) {
        const REAL *e = j->E + (size_t)j->ids[r] * C; /* E[ids[b,t], :] [C] */
        REAL *yr = j->y + r * C;                      /* y[b,t, :]       [C] */
        if (j->P != NULL) {
            const REAL *pt = j->P + (r % j->T) * C; /* P[t, :] [C] */
            for (size_t c = 0; c < C; c++)
                yr[c] = e[c] + pt[c];
        } else {
            memcpy(yr, e, C * sizeof *yr);
        }
    }
}

/* Column block k of dE: every row r in order */
static void emb_de_task(void *ctx, size_t k, int slot)
{
    const emb_job *j = ctx;
    const size_t C = j->C, c0 = k * COL_BLOCK, wd = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
    (void)slot;
    for (size_t r = 0; r < j->B * j->T; r++) {
        REAL *de = j->dE + (size_t)j->ids[r] * C + c0;
        const REAL *g = j->dy + r * C + c0;
        for (size_t i = 0; i < wd; i++)
            de[i] += g[i];
    }
}

/* Rows t0 .. t1−1 of dP: b in order */
static void emb_dp_task(void *ctx, size_t t0, size_t t1, int slot)
{
    const emb_job *j = ctx;
    const size_t C = j->C;
    (void)slot;
    for (size_t t = t0; t < t1; t++) {
        REAL *dp = j->dP + t * C;
        for (size_t bb = 0; bb < j->B; bb++) {
            const REAL *g = j->dy + (bb * j->T + t) * C;
            for (size_t c = 0; c < C; c++)
                dp[c] += g[c];
        }
    }
}

int mha_embedding_forward(size_t B, size_t T, size_t C, const int32_t *ids, size_t V,
                         const REAL *E, const REAL *P, REAL *y)
{
    if (!ids || !E || !y)
        return MHA_EINVAL;
    int st = embedding_check(B, T, C, ids, V);
    if (st != MHA_OK)
        return st;
    const size_t rows = B * T;
    emb_job j = {.B = B, .T = T, .C = C, .ids = ids, .E = E, .P = P, .y = y};
    mha__pool_range(par_threads(rows * C), rows, 1, emb_fwd_task, &j);
    return MHA_OK;
}

int mha_embedding_backward(size_t B, size_t T, size_t C, const int32_t *ids, size_t V,
                          const REAL *dy, REAL *dE, REAL *dP)
{
    if (!ids || !dy)
        return MHA_EINVAL;
    int st = embedding_check(B, T, C, ids, V);
    if (st != MHA_OK)
        return st;
    emb_job j = {.B = B, .T = T, .C = C, .ids = ids, .dy = dy, .dE = dE, .dP = dP};
    const int threads = par_threads(B * T * C);
    /* dE[ids[r], :] += dy[r, :]: column blocks, each walking r = 0..BT−1 in order, so
     * repeated ids add up in the same order for any thread count. */
    if (dE != NULL)
        mha__pool_for(threads, (C + COL_BLOCK - 1) / COL_BLOCK, emb_de_task, &j);
    /* dP[t, :] += Σ_b dy[b,t, :]: one row of dP per task, b in order */
    if (dP != NULL)
        mha__pool_range(threads, T, 1, emb_dp_task, &j);
    return MHA_OK;
}

#include "layers_xent.inc" /* softmax cross-entropy, with label smoothing */

#include "layers_dropout.inc" /* dropout on activations: masks, forward, backward */

#include "layers_exp.inc" /* the attention softmax's exponentials and their sum */

#include "layers_linear.inc" /* Linear and the MLP: the layers that are products */
