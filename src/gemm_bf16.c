/*
 * The bfloat16 GEMM (src/gemm.h, "mha__bgemm"): float operands rounded to bfloat16, products
 * and sums in float32, on the AVX512_BF16 dot product.
 *
 *     C = alpha·bf16(op(A))·bf16(op(B)) + beta·C      op(A) [M,K], op(B) [K,N], C [M,N] float
 *
 * bf16(x) is x rounded to the nearest bfloat16 (ties to even; NaN stays NaN; subnormals
 * become zero of the same sign), which is what VCVTNEPS2BF16 computes. VDPBF16PS takes two
 * vectors of 32 bfloat16 — pairs (a₂ᵢ, a₂ᵢ₊₁) and (b₂ᵢ, b₂ᵢ₊₁) — and adds a₂ᵢ·b₂ᵢ + a₂ᵢ₊₁·b₂ᵢ₊₁
 * to float lane i: the product of two bfloat16 is exact in float, so every product is exact
 * and only the sums round (to nearest, subnormal results flushed to zero). The operands are
 * therefore packed in pairs along K:
 *
 *   A as pairs  Ap(i, kk) = (op(A)[i, 2kk], op(A)[i, 2kk+1])     at Ap[i·ars + kk·acs]
 *       ta = 0: A stored [M,K]: each row converted in place order,  ars = Kh, acs = 1
 *       ta = 1: A stored [K,M]: rows 2kk and 2kk+1 interleaved,     ars = 1,  acs = M
 *   B as pairs  Bp[kk, n]  = (op(B)[2kk, n], op(B)[2kk+1, n])     [Kh, Np]  ("VNNI" layout)
 *       tb = 0: B stored [K,N]: rows 2kk and 2kk+1 interleaved
 *       tb = 1: B stored [N,K]: row n converted, its pairs written down column n
 *   Kh = ⌈K/2⌉ (an odd K gets a zero partner), Np = N rounded up to 16 (zero columns).
 *
 * The kernel keeps a block of R ≤ 6 rows × NV ≤ 4 vectors (16 floats each) of C in 24
 * registers for the whole K:
 *     acc[r][v] += Ap(i+r, kk) ⊙pair Bp[kk, j+16v .. j+16v+15]     kk = 0 .. Kh−1
 * then stores alpha·acc (+ bias) (+ beta·C) once, masked in the last partial vector. A thread
 * takes its rows 48 at a time (a panel): it packs the panel's rows of A, then for each column
 * block of 64 (its Bp panel, Kh × 64 pairs, stays in cache) every row block of the panel.
 *
 * Threads: the rows of C are split as mha__sgemm splits them (each element computed exactly
 * as in one call: results do not depend on the thread count); the packing of B is shared
 * out over the same threads by pairs of rows, then a barrier.
 * On a CPU without AVX512_BF16, and when no scratch can be had, the reference loop computes
 * the same rounding of the operands (sums in another order). The library's objects refuse
 * the bf16 precision there (MHA_ECPU), so that path only keeps this function total.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "pool.h"

#include "mha_internal.h"

/* Minimum multiply-adds before the rows are split over threads (as src/gemm_core.c). */
#define SPLIT_MIN_WORK 262144

/* The threads a product's rows are split over: `threads` (at most M) when it is worth it */
static int split_threads(int threads, size_t M, size_t N, size_t K)
{
    if (threads < 2 || M < 2 || (double)M * N * K < SPLIT_MIN_WORK)
        return 1;
    return (size_t)threads < M ? threads : (int)M;
}

/* bf16(x) as a float */
static float bf16_round(float x) { return mha__bf16_to_float(mha__bf16_from_float(x)); }

/* ---------------------------------------------------------------------------
 * The CPU
 * ------------------------------------------------------------------------- */

static int bf16_cpu = -1; /* -1 not asked yet; threads that race store the same value */

int mha__bf16_cpu(void)
{
    int v = __atomic_load_n(&bf16_cpu, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
        __atomic_store_n(&bf16_cpu, v, __ATOMIC_RELAXED);
    }
    return v;
}

int mha__bf16_available(void)
{
    const char *off = getenv("MHA_DISABLE_BF16"); /* read at every call: objects are made rarely */
    return mha__bf16_cpu() && (off == NULL || off[0] == '\0' || strcmp(off, "0") == 0);
}

/* ---------------------------------------------------------------------------
 * REF: C = alpha·Σ_p bf16(op(A)[i,p])·bf16(op(B)[p,j]) + beta·C, summed in float in
 * order of p
 * ------------------------------------------------------------------------- */

void mha__bgemm_ref(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A,
                    size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float s = 0;
            for (size_t p = 0; p < K; p++) {
                const float a = bf16_round(ta ? A[p * lda + i] : A[i * lda + p]);
                const float b = bf16_round(tb ? B[j * ldb + p] : B[p * ldb + j]);
                s += a * b;
            }
            C[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C[i * ldc + j]);
        }
}

/* ---------------------------------------------------------------------------
 * Packing (AVX512_BF16): float → pairs of bfloat16 in uint32
 * ------------------------------------------------------------------------- */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* the first min(n, 16) lanes */
static inline __mmask16 mask16(size_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* Loads and stores of 16 lanes under a mask, plain when the mask is full (a masked 512-bit
 * store can be slower than a plain one on some cores; on the AMD EPYC measured here the
 * packing, being memory-bound, took the same time either way). */
static inline BF16_TARGET __m512 load16(__mmask16 m, const float *p)
{
    return m == (__mmask16)0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
static inline BF16_TARGET void store16(__mmask16 m, float *p, __m512 v)
{
    if (m == (__mmask16)0xffff)
        _mm512_storeu_ps(p, v);
    else
        _mm512_mask_storeu_ps(p, m, v);
}
static inline BF16_TARGET void store16i(__mmask16 m, uint32_t *p, __m512i v)
{
    if (m == (__mmask16)0xffff)
        _mm512_storeu_si512((void *)p, v);
    else
        _mm512_mask_storeu_epi32(p, m, v);
}

/* dst[r, 0 .. Kh) = pairs of src row r: dst[r·ldd + kk] = (src[r, 2kk], src[r, 2kk+1]),
 * a missing last partner 0.  src [rows, K] with row stride lds; rows r0 .. r1−1. */
BF16_TARGET static void pack_rows(size_t r0, size_t r1, size_t K, const float *src, size_t lds,
                                  uint32_t *dst, size_t ldd)
{
    for (size_t r = r0; r < r1; r++) {
        const float *s = src + r * lds;
        uint32_t *d = dst + r * ldd;
        for (size_t c = 0; c < K; c += 32) { /* 32 floats → 16 pairs */
            const size_t n = K - c;
            const __m512 lo = load16(mask16(n), s + c);
            const __m512 hi = load16(n > 16 ? mask16(n - 16) : 0, s + c + 16);
            const __m512i p = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* lo's 16, then hi's */
            store16i(mask16((n + 1) / 2), d + c / 2, p);
        }
    }
}

/* dst[kk·ldd + c] = (src[2kk, c], src[2kk+1, c]) for columns c0 <= c < c1, zero for
 * c1 <= c < cp (cp >= c1, cp − c0 a multiple of 16 when cp > c1); src [K, ·] with row stride
 * lds; kk = k0 .. k1−1. */
BF16_TARGET static void pack_pairs(size_t k0, size_t k1, size_t K, size_t c0, size_t c1,
                                   size_t cp, const float *src, size_t lds, uint32_t *dst,
                                   size_t ldd)
{
    /* after the conversion: the 16 of row 2kk in 0..15, those of row 2kk+1 in 16..31 */
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25,
                                           9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2,
                                           17, 1, 16, 0);
    const size_t end = cp > c1 ? cp : c1;
    for (size_t kk = k0; kk < k1; kk++) {
        const float *s0 = src + 2 * kk * lds;
        const float *s1 = 2 * kk + 1 < K ? s0 + lds : NULL;
        uint32_t *d = dst + kk * ldd;
        for (size_t c = c0; c < end; c += 16) {
            const __mmask16 m = c < c1 ? mask16(c1 - c) : 0;          /* columns read */
            const __mmask16 w = c1 < cp ? (__mmask16)0xffff : m;      /* columns written */
            const __m512 v0 = load16(m, s0 + c);
            const __m512 v1 = s1 != NULL ? load16(m, s1 + c) : _mm512_setzero_ps();
            const __m512i p = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
            store16i(w, d + c, _mm512_permutexvar_epi16(inter, p));
        }
    }
}

/* Bp[kk·ldd + n] = (src[n, 2kk], src[n, 2kk+1]) for kk = k0 .. k1−1 and n < N, zero for
 * N <= n < Np; src [N, K] with row stride lds (op(B) = srcᵀ). Rows are converted 16 at a
 * time into `tmp` [16, k1 − k0] and written down their columns. */
BF16_TARGET static void pack_cols(size_t k0, size_t k1, size_t K, size_t N, size_t Np,
                                  const float *src, size_t lds, uint32_t *dst, size_t ldd,
                                  uint32_t *tmp)
{
    const size_t w = k1 - k0;
    if (w == 0)
        return;
    for (size_t n0 = 0; n0 < Np; n0 += 16) {
        const size_t nr = n0 < N ? (N - n0 < 16 ? N - n0 : 16) : 0;
        if (nr > 0) /* elements 2·k0 .. 2·k1 − 1 of each row (fewer at the end of K) */
            pack_rows(0, nr, K - 2 * k0 < 2 * w ? K - 2 * k0 : 2 * w, src + n0 * lds + 2 * k0,
                      lds, tmp, w);
        memset(tmp + nr * w, 0, (16 - nr) * w * sizeof *tmp);
        for (size_t kk = 0; kk < w; kk++) {
            uint32_t *d = dst + (k0 + kk) * ldd + n0;
            for (size_t r = 0; r < 16; r++)
                d[r] = tmp[r * w + kk];
        }
    }
}

/* ---------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------- */
enum { KR = 6, KNV = 4, KNB = 16 * KNV }; /* rows, vectors and columns of a block */

/* C[0..R, 0..16·NV) (the last vector masked by `last`) = alpha·Σ_kk Ap(r, kk)·Bp[kk, ·]
 * + bias + beta·C;  Ap(r, kk) = Ap[r·ars + kk·acs], Bp row stride ldb; bias[0..16·NV) added
 * to every row (NULL: none): the bias and the product rounded once, the bits beta = 1 over
 * a C filled with the bias gives. */
static inline __attribute__((always_inline)) BF16_TARGET void
bkernel(const int R, const int NV, size_t Kh, const uint32_t *Ap, size_t ars, size_t acs,
        const uint32_t *Bp, size_t ldb, float alpha, const float *bias, float beta, float *C,
        size_t ldc, __mmask16 last)
{
    __m512 acc[KR][KNV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < Kh; kk++) {
        __m512bh b[KNV];
        for (int v = 0; v < NV; v++)
            b[v] = (__m512bh)_mm512_loadu_si512((const void *)(Bp + kk * ldb + 16 * (size_t)v));
        for (int r = 0; r < R; r++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32((int)Ap[(size_t)r * ars + kk * acs]);
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 bv[KNV];
    for (int v = 0; v < NV; v++)
        bv[v] = bias != NULL ? load16(v == NV - 1 ? last : (__mmask16)0xffff, bias + 16 * (size_t)v)
                             : _mm512_setzero_ps();
    for (int r = 0; r < R; r++)
        for (int v = 0; v < NV; v++) {
            float *c = C + (size_t)r * ldc + 16 * (size_t)v;
            const __mmask16 m = v == NV - 1 ? last : (__mmask16)0xffff;
            __m512 out = _mm512_mul_ps(va, acc[r][v]);
            if (bias != NULL) /* fl(bias + out): what fmadd(1, C = bias, out) gives */
                out = _mm512_add_ps(bv[v], out);
            if (beta != 0)
                out = _mm512_fmadd_ps(vb, load16(m, c), out);
            store16(m, c, out);
        }
}

/* One block of R rows: the switch makes R and NV compile-time constants. */
#define BK_NV(R)                                                                                \
    switch (nv) {                                                                                \
    case 1: bkernel(R, 1, Kh, Ap, ars, acs, Bp, ldb, alpha, bias, beta, C, ldc, last); break;          \
    case 2: bkernel(R, 2, Kh, Ap, ars, acs, Bp, ldb, alpha, bias, beta, C, ldc, last); break;          \
    case 3: bkernel(R, 3, Kh, Ap, ars, acs, Bp, ldb, alpha, bias, beta, C, ldc, last); break;          \
    default: bkernel(R, 4, Kh, Ap, ars, acs, Bp, ldb, alpha, bias, beta, C, ldc, last); break;         \
    }
BF16_TARGET static void bblock(int R, int nv, size_t Kh, const uint32_t *Ap, size_t ars,
                               size_t acs, const uint32_t *Bp, size_t ldb, float alpha,
                               const float *bias, float beta, float *C, size_t ldc,
                               __mmask16 last)
{
    switch (R) {
    case 1: BK_NV(1) break;
    case 2: BK_NV(2) break;
    case 3: BK_NV(3) break;
    case 4: BK_NV(4) break;
    case 5: BK_NV(5) break;
    default: BK_NV(6) break;
    }
}
#undef BK_NV

/* Rows i0 .. i1−1 of C, all N columns, from packed Ap and Bp [Kh, ldb] (+ bias[N] on every
 * row when not NULL). */
BF16_TARGET static void bgemm_rows(size_t i0, size_t i1, size_t N, size_t Kh, const uint32_t *Ap,
                                   size_t ars, size_t acs, const uint32_t *Bp, size_t ldb,
                                   float alpha, const float *bias, float beta, float *C,
                                   size_t ldc)
{
    for (size_t j = 0; j < N; j += KNB) {
        const size_t w = N - j < KNB ? N - j : KNB;
        const int nv = (int)((w + 15) / 16);
        const __mmask16 last = mask16(w - 16 * (size_t)(nv - 1));
        for (size_t i = i0; i < i1; i += KR) {
            const int R = i1 - i < KR ? (int)(i1 - i) : KR;
            bblock(R, nv, Kh, Ap + i * ars, ars, acs, Bp + j, ldb, alpha,
                   bias != NULL ? bias + j : NULL, beta, C + i * ldc + j, ldc, last);
        }
    }
}

/* ---------------------------------------------------------------------------
 * The entry point
 * ------------------------------------------------------------------------- */

/* The work of thread t of nt: pack its share of Bp (pairs of rows kk), [barrier], pack its
 * rows of Ap, multiply its rows. tmp: its [16·Kh] scratch for pack_cols (tb = 1). */
typedef struct bgemm_job {
    int ta, tb;
    size_t M, N, K, Kh, Np;
    float alpha, beta;
    const float *A, *B, *bias; /* bias [N] added to every row, or NULL */
    size_t lda, ldb, ldc;
    float *C;
    uint32_t *Ap, *Bp, *tmp; /* [M·Kh], [Kh·Np], [nt·16·Kh] */
    mha__gemm_epi epi;       /* run on each panel's rows once they are final, or NULL */
    void *ctx;
} bgemm_job;

/* Part t of nt of Bp (pairs of rows kk), with the scratch of `slot` */
BF16_TARGET static void job_pack_b(const bgemm_job *j, size_t t, size_t nt, int slot)
{
    const size_t k0 = j->Kh * t / nt, k1 = j->Kh * (t + 1) / nt;
    if (j->tb)
        pack_cols(k0, k1, j->K, j->N, j->Np, j->B, j->ldb, j->Bp, j->Np,
                  j->tmp + (size_t)slot * 16 * j->Kh);
    else
        pack_pairs(k0, k1, j->K, 0, j->N, j->Np, j->B, j->ldb, j->Bp, j->Np);
}

/* Rows of C a thread packs and multiplies at a time: a panel of packed A that stays in the
 * core's own cache (48 rows × K/2 pairs: 120 KiB at K = 1280) while every column block passes
 * over it, instead of all its rows packed first and read back from the shared cache. Each
 * element is computed as before (the same sum in the same order). Measured on the AMD EPYC
 * (Zen 4), the nine products of a G2P step's linear layers (rows 1280, widths 192 and 640)
 * at 2 threads, median µs summed: 6,672–6,806 with no panels; panels of 12, 24, 36, 48, 96
 * and 192 rows: 6,506–6,544, 6,494–6,503, 6,480–6,565, 6,348–6,441, 6,521–6,584,
 * 6,578–6,624. */
#define PANEL_ROWS (8 * KR)

/* Rows i0 .. i1−1 of C, a panel at a time */
BF16_TARGET static void job_rows(const bgemm_job *j, size_t i0, size_t i1)
{
    for (size_t p0 = i0; p0 < i1; p0 += PANEL_ROWS) {
        const size_t p1 = i1 - p0 < PANEL_ROWS ? i1 : p0 + PANEL_ROWS;
        if (j->ta) { /* A stored [K, M]: its columns p0 .. p1−1 in pairs of rows, Ap[kk·M + i] */
            pack_pairs(0, j->Kh, j->K, p0, p1, p1, j->A, j->lda, j->Ap, j->M);
            bgemm_rows(p0, p1, j->N, j->Kh, j->Ap, 1, j->M, j->Bp, j->Np, j->alpha, j->bias,
                       j->beta, j->C, j->ldc);
        } else {
            pack_rows(p0, p1, j->K, j->A, j->lda, j->Ap, j->Kh);
            bgemm_rows(p0, p1, j->N, j->Kh, j->Ap, j->Kh, 1, j->Bp, j->Np, j->alpha, j->bias,
                       j->beta, j->C, j->ldc);
        }
        if (j->epi != NULL)
            j->epi(j->ctx, p0, p1);
    }
}

/* The two passes of a threaded product on the library's threads: Bp packed in nt parts,
 * then C in nt blocks of rows, each a panel at a time (as the OpenMP region with a barrier
 * between the passes did; smaller blocks, which a free thread could take from a late one,
 * made the baby GPT's bf16 step 5% slower on the quiet AMD EPYC). */
typedef struct bgemm_par {
    const bgemm_job *job;
    size_t nt;
} bgemm_par;

static void pack_b_task(void *ctx, size_t t, int slot)
{
    const bgemm_par *p = ctx;
    job_pack_b(p->job, t, p->nt, slot);
}

static void panels_task(void *ctx, size_t t, int slot)
{
    const bgemm_par *p = ctx;
    const bgemm_job *j = p->job;
    (void)slot;
    job_rows(j, j->M * t / p->nt, j->M * (t + 1) / p->nt);
}

/* C[i, :] = bias for every row */
static void fill_rows(size_t M, size_t N, const float *bias, float *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        memcpy(C + i * ldc, bias, N * sizeof *C);
}

/* mha__bgemm, and with bias or epi (alpha = 1, beta = 0) mha__bgemm_epi */
static void bgemm_run(int threads, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                      const float *A, size_t lda, const float *B, size_t ldb, const float *bias,
                      float beta, float *C, size_t ldc, mha__gemm_epi epi, void *ctx)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0) { /* op(A)·op(B) is the zero matrix */
        if (bias != NULL)
            fill_rows(M, N, bias, C, ldc);
        else
            mha__sgemm_scale(M, N, beta, C, ldc);
        if (epi != NULL)
            epi(ctx, 0, M);
        return;
    }
    const size_t Kh = (K + 1) / 2, Np = (N + 15) / 16 * 16;
    const int nt = split_threads(threads, M, N, K);
    /* sizes: every dimension <= INT_MAX (src/gemm.h), so these products fit size_t */
    const size_t words = M * Kh + Kh * Np + (tb ? (size_t)nt * 16 * Kh : 0);
    uint32_t *s = mha__bf16_cpu() ? mha__gemm_scratch(words * sizeof *s) : NULL;
    if (s == NULL) {
        if (bias != NULL) { /* the bias first, then added to: rounded as the kernel rounds */
            fill_rows(M, N, bias, C, ldc);
            beta = 1;
        }
        mha__bgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (epi != NULL)
            epi(ctx, 0, M);
        return;
    }
    const bgemm_job job = {ta, tb, M, N, K, Kh, Np, alpha, beta, A, B, bias, lda, ldb, ldc, C,
                           s, s + M * Kh, s + M * Kh + Kh * Np, epi, ctx};
    if (nt == 1) {
        job_pack_b(&job, 0, 1, 0);
        job_rows(&job, 0, M);
        return;
    }
    bgemm_par par = {&job, (size_t)nt};
    mha__pool_for(nt, (size_t)nt, pack_b_task, &par);
    mha__pool_for(nt, (size_t)nt, panels_task, &par);
}

void mha__bgemm(int threads, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                size_t ldc)
{
    bgemm_run(threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, NULL, beta, C, ldc, NULL, NULL);
}

/* mha__bgemm_batch (gemm.h): B packed once when every product has the same, then each
 * thread's rows take the products in order. */
#define BATCH_MAX 4 /* as src/gemm_entry.inc's */

typedef struct bgemm_batch {
    size_t n, nb, nt; /* products, packed Bs (1 when shared), threads */
    const bgemm_job *jobs;
} bgemm_batch;

static void batch_pack_task(void *ctx, size_t t, int slot)
{
    const bgemm_batch *b = ctx;
    for (size_t l = 0; l < b->nb; l++)
        job_pack_b(&b->jobs[l], t, b->nt, slot);
}

static void batch_rows_task(void *ctx, size_t t, int slot)
{
    const bgemm_batch *b = ctx;
    const size_t M = b->jobs[0].M;
    (void)slot;
    for (size_t l = 0; l < b->n; l++)
        job_rows(&b->jobs[l], M * t / b->nt, M * (t + 1) / b->nt);
}

void mha__bgemm_batch(int threads, size_t n, int ta, size_t M, size_t N, size_t K, float alpha,
                      const float *const *A, size_t lda, const float *const *B, size_t ldb,
                      const float *beta, float *const *C, size_t ldc)
{
    if (M == 0 || N == 0 || n == 0)
        return;
    const size_t Kh = (K + 1) / 2, Np = (N + 15) / 16 * 16;
    size_t nb = 1;
    for (size_t l = 1; l < n; l++)
        if (B[l] != B[0])
            nb = n;
    /* sizes: every dimension <= INT_MAX (src/gemm.h), so these products fit size_t */
    uint32_t *s = K > 0 && n <= BATCH_MAX && mha__bf16_cpu()
                      ? mha__gemm_scratch((M * Kh + nb * Kh * Np) * sizeof *s)
                      : NULL;
    if (s == NULL) { /* the calls one by one (which also take K = 0 and no scratch) */
        for (size_t l = 0; l < n; l++)
            mha__bgemm(threads, ta, 0, M, N, K, alpha, A[l], lda, B[l], ldb, beta[l], C[l], ldc);
        return;
    }
    const int nt = split_threads(threads, M, N, K);
    bgemm_job jobs[BATCH_MAX];
    for (size_t l = 0; l < n; l++)
        jobs[l] = (bgemm_job){ta, 0, M, N, K, Kh, Np, alpha, beta[l], A[l], B[l], NULL, lda,
                              ldb, ldc, C[l], s, s + M * Kh + (nb == 1 ? 0 : l * Kh * Np), NULL,
                              NULL, NULL};
    bgemm_batch b = {n, nb, (size_t)nt, jobs};
    if (nt == 1) {
        batch_pack_task(&b, 0, 0);
        batch_rows_task(&b, 0, 0);
        return;
    }
    mha__pool_for(nt, (size_t)nt, batch_pack_task, &b);
    mha__pool_for(nt, (size_t)nt, batch_rows_task, &b);
}
#undef BATCH_MAX

void mha__bgemm_epi(int threads, int tb, size_t M, size_t N, size_t K, const float *A,
                    size_t lda, const float *B, size_t ldb, const float *bias, float *C,
                    size_t ldc, mha__gemm_epi epi, void *ctx)
{
    bgemm_run(threads, 0, tb, M, N, K, 1, A, lda, B, ldb, bias, 0, C, ldc, epi, ctx);
}
