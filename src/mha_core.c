/*
 * The attention module, written once for both precisions and compiled twice (float; double
 * with -DMHA_DOUBLE: src/real.h gives REAL, X(name) and PRIV(name)); the softmax's
 * exponentials are src/layers_exp.inc's (mha_internal.h: exp_shift_sum).
 * The GEMM backends are in src/gemm_core.c; included below: the projections
 * (src/mha_proj.inc), the caches (src/mha_cache.inc), the two attention modes
 * (src/attn_stored.inc, src/attn_recompute.inc) and generation's key/value cache
 * (src/mha_kv.inc).
 *
 * Glossary (as in include/mha.h): B batch, Sq query length, Sk key length,
 * D model_dim, H heads, hd = D/H. Head h of a [B, S, D] tensor is the column
 * block h·hd .. h·hd+hd−1: the head split is a pointer offset plus the row
 * stride, never a copy.
 *
 * Forward (numbered; backward walks the same numbers in reverse):
 *   F1  Q = Xq·W_qᵀ + b_q;  K = Xc·W_kᵀ + b_k;  V = Xc·W_vᵀ + b_v
 *       self-attention (Xc = Xq = X) with D <= QKV_FUSE_MAX_D: one product of
 *       width 3D, X read once, [Q K V] = X·[W_q; W_k; W_v]ᵀ + [b_q b_k b_v] into one
 *       [B·S, 3D] buffer (Q, K, V are its column blocks: row stride 3D)
 *   F2  per (b, h):  S = Q_bh·K_bhᵀ / √hd;  fill masked with −1e9;  P = softmax(S)
 *   F3  per (b, h):  P' = P ⊙ keep / (1 − p)   (training with dropout only)
 *   F4  per (b, h):  C_bh = P'·V_bh            (written straight into merged C)
 *   F5  out = C·W_oᵀ + b_o
 */
#include "real.h" /* REAL, X, PRIV: float, or double with -DMHA_DOUBLE */

#include <cblas.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "mha_internal.h"
#include "pool.h"
#include "vreal.inc" /* vreal, VLEN, vload, vstore: the key/value cache */

#define MODULE X(module)
#define CACHE X(cache)

/* The fill value of a masked score, as the seed's masked_fill(mask == 0, -1e9). */
#define MASK_FILL ((REAL)-1e9)

/* Minimum work (multiply-adds) before the per-head loop starts threads. */
#define PARALLEL_MIN_WORK 32768
/* MHA_ATTN_STORED row blocks: RB query rows at a time, RB_SHORT when Sq <= RB (one block of
 * RB would cover every key of a causal head and skip nothing; blocks of RB_SHORT skip a
 * quarter of the score products at Sq = 64). mha-bench (16,64,128,4), 2 threads, 12
 * alternating runs, median ms: RB 64 2.98, RB_SHORT 32 2.82, 16 2.84; at Sq = 256 a smaller
 * block lost 2.5% (32) and 8% (16) in (8,256,256,8), hence 64 beyond one block. */
#define RB 64
#define RB_SHORT 32
/* MHA_ATTN_RECOMPUTE block sizes: BR query rows × BC keys at a time. */
#define BR 32
#define BC 128
/* Rows of dC computed at a time while forming rowsum(dC ⊙ C) (RECOMPUTE). */
#define DC_CHUNK_ROWS 64

struct X(module) {
    mha_config cfg;
    size_t D, H, hd;   /* model_dim, num_heads, head_dim                    */
    size_t nparams;    /* 4·D² + 4·D                                        */
    REAL *params;      /* [nparams]: layout of mha_tensor_info_at()         */
    REAL *grads;       /* [nparams]: same layout                            */
    int borrowed;      /* params and grads are spans of the owner's arena (create_in) */
    int threads;       /* resolved worker count (>= 1)                      */
    uint64_t call;     /* dropout call counter: index of the next training forward */
    uint64_t drop_b0;  /* set_dropout_batch_offset: batch row of this batch's row 0 */
    mha_pcg32 drop0;   /* PCG32(seed, MHA_PCG32_STREAM_DROPOUT), never advanced */
    uint64_t drop_threshold; /* output < threshold: dropped                 */
    REAL drop_scale;   /* 1/(1−p) for kept weights; 0 when p = 1            */
};

enum cache_state {
    CACHE_EMPTY = 0,    /* no forward yet                                     */
    CACHE_FORWARD = 1,  /* saved activations of the last forward are intact   */
    CACHE_CONSUMED = 2  /* backward has reused Q/K/V/C for their gradients    */
};

struct X(cache) {
    const MODULE *owner;
    mha_attn_mode mode;
    size_t cap_b, cap_sq, cap_sk; /* capacity                                 */
    void *block;                  /* the one allocation; every buffer below is a view */
    /* saved activations of the last forward (shapes use that forward's B, Sq, Sk) */
    REAL *qkv;        /* [cap_b·(cap_sq + 2·cap_sk)·D] holds Q, K, V:              */
    REAL *q;          /* [B, Sq, D]  Q, row stride ld; after backward: dQ       */
    REAL *k;          /* [B, Sk, D]  K, row stride ld; after backward: dK       */
    REAL *v;          /* [B, Sk, D]  V, row stride ld; after backward: dV       */
    size_t ld;        /* fused F1: 3D, q = qkv [B·S, 3D], k = q + D, v = q + 2D;
                         otherwise: D, q, k, v one after the other in qkv        */
    REAL *ctx;        /* [B, Sq, D]  merged context C; after backward: dC      */
    REAL *p;          /* STORED: [B, H, Sq, Sk] softmax weights P (pre-dropout) */
    uint64_t *keep;   /* STORED, p > 0: [B·H][⌈Sq·Sk/64⌉] keep bits, bit i·Sk + j */
    REAL *lse;        /* RECOMPUTE: [B, H, Sq] log Σ_j exp(S_ij) of each row    */
    uint8_t *row_all_masked; /* [B, H, Sq] 1 where every key of the row was masked */
    size_t *key_len;  /* [B] the forward's key lengths (Sk without them): backward's
                         row limits must not read the caller's array          */
    /* workspace */
    REAL *delta;      /* RECOMPUTE: [B, H, Sq] rowsum(dC ⊙ C) per head, for backward */
    REAL *dc_chunk;   /* RECOMPUTE: [DC_CHUNK_ROWS, D] rows of dC = d_out·W_o     */
    REAL *wpack;      /* [3D·D] the fused F1's packed W_q, W_k, W_v (qkv_forward); NULL
                         when D > QKV_FUSE_MAX_D                                  */
    REAL *scratch;    /* [threads][scratch_per_thread] (see scratch_reals)      */
    size_t scratch_per_thread;
    /* what the last forward was */
    enum cache_state state;
    size_t b, sq, sk;
    int self_attention;  /* x_context was NULL                               */
    int fused;           /* and F1 was one product (qkv_forward)             */
    int dropout;         /* this forward applied dropout                     */
    uint64_t call;       /* its dropout call index                           */
    uint64_t drop_b0;    /* and batch offset (set_dropout_batch_offset)      */
    mha_mask mask;       /* its mask (borrowed arrays; RECOMPUTE's backward reads them) */
    int has_mask;
    const void *xq_seen, *xc_seen; /* input addresses, checked by backward   */
};

/* ---------------------------------------------------------------------------
 * Which threads do the work: one pool at a time
 *
 * cfg.threads bounds every thread of a call, ours (src/pool.h) and BLAS's, and only
 * one pool is busy at a time: two pools that spin while waiting (libgomp's or the
 * pthreads OpenBLAS's beside ours) on the same cores make 2 threads slower than 1.
 * Every product goes through the GEMM module (src/gemm.h): outside our parallel loops
 * with threads = cfg.threads, inside the per-head loop with threads = 0.
 *   OpenMP OpenBLAS (openblas_get_parallel() == 2): it uses libgomp's pool and
 *     follows omp_get_max_threads(), set to cfg.threads for the call; BLAS threads
 *     the products it gets itself, and is never called inside our head loop (the GEMM
 *     module's rule sends the products it would take to libxsmm or the own kernel).
 *   pthreads OpenBLAS (== 1): its own pool is set to one thread for the call
 *     (openblas_set_num_threads; the caller's count is restored before returning,
 *     so it is process-wide meanwhile); the GEMM module then splits the rows of a
 *     BLAS product over our threads instead, and each call runs in the
 *     calling thread (the pthreads build locks what concurrent calls share).
 *   sequential OpenBLAS (== 0): may lack locking, so the GEMM module never calls it
 *     from inside our head loop.
 * The own kernel and libxsmm never thread themselves: the GEMM module splits their
 * rows over cfg.threads outside the head loop.
 * ------------------------------------------------------------------------- */
typedef struct blas_policy {
    int kind;  /* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP */
    int saved; /* the pthreads build's thread count before the call           */
} blas_policy;

static blas_policy blas_enter(void)
{
    blas_policy bp = {mha__blas_kind(), 0};
    if (bp.kind == 1) {
        bp.saved = openblas_get_num_threads();
        if (bp.saved != 1)
            openblas_set_num_threads(1);
    }
    return bp;
}

static void blas_leave(const blas_policy *bp)
{
    if (bp->kind == 1 && bp->saved != 1)
        openblas_set_num_threads(bp->saved);
}

/* ---------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------- */

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

#include "mha_proj.inc" /* linear_forward*, weight_of, bias_of; qkv_forward, proj_backward */

/* ---------------------------------------------------------------------------
 * Module lifetime and parameters
 * ------------------------------------------------------------------------- */

static int config_valid(const mha_config *cfg)
{
    return cfg != NULL && cfg->model_dim > 0 && cfg->num_heads > 0 &&
           cfg->model_dim % cfg->num_heads == 0 && cfg->dropout_p >= 0.0 &&
           cfg->dropout_p <= 1.0 && cfg->threads >= 0;
}

/* Create; draw the initial weights from cfg->seed when draw. params and grads: spans of
 * 4·D² + 4·D of an owner's arena (zeros, borrowed), or NULL: the module's own. */
static int create_(MODULE **out, const mha_config *cfg, int draw, REAL *params, REAL *grads)
{
    if (out == NULL || !config_valid(cfg)) /* NaN fails both comparisons on dropout_p */
        return MHA_EINVAL;
    size_t n, bytes;
    int st = mha__precision_check(cfg->precision, sizeof(REAL));
    if (st != MHA_OK)
        return st;
    st = mha_param_count(cfg->model_dim, &n);
    if (st != MHA_OK)
        return st;
    if (__builtin_mul_overflow(n, sizeof(REAL), &bytes) || cfg->model_dim > INT_MAX)
        return MHA_EOVERFLOW; /* BLAS takes D as an int */
    MODULE *m = calloc(1, sizeof *m);
    if (m == NULL)
        return MHA_ENOMEM;
    m->borrowed = params != NULL;
    m->params = params ? params : calloc(n, sizeof(REAL)); /* zeros until drawn or written */
    m->grads = params ? grads : calloc(n, sizeof(REAL));
    if (m->params == NULL || m->grads == NULL) {
        X(destroy)(m);
        return MHA_ENOMEM;
    }
    m->cfg = *cfg;
    m->D = cfg->model_dim;
    m->H = cfg->num_heads;
    m->hd = m->D / m->H;
    m->nparams = n;
    m->threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    if (m->threads < 1)
        m->threads = 1;
    m->call = 0;
    mha_pcg32_seed(&m->drop0, cfg->seed, MHA_PCG32_STREAM_DROPOUT);
    m->drop_threshold = mha__dropout_threshold(cfg->dropout_p);
    m->drop_scale = cfg->dropout_p < 1.0 ? (REAL)(1.0 / (1.0 - cfg->dropout_p)) : (REAL)0;
    if (draw)
        X(reset_parameters)(m, cfg->seed);
    *out = m;
    return MHA_OK;
}

int mha_create(MODULE **out, const mha_config *cfg) { return create_(out, cfg, 1, NULL, NULL); }

int PRIV(create_in)(MODULE **out, const mha_config *cfg, REAL *params, REAL *grads)
{
    if ((params == NULL) != (grads == NULL))
        return MHA_EINVAL;
    return create_(out, cfg, 0, params, grads);
}

void mha_destroy(MODULE *m)
{
    if (m == NULL)
        return;
    if (!m->borrowed) {
        free(m->params);
        free(m->grads);
    }
    free(m);
}

int mha_get_config(const MODULE *m, mha_config *cfg)
{
    if (m == NULL || cfg == NULL)
        return MHA_EINVAL;
    *cfg = m->cfg;
    return MHA_OK;
}

int mha_reset_parameters(MODULE *m, uint64_t seed)
{
    if (m == NULL)
        return MHA_EINVAL;
    /* nn.Linear.reset_parameters: kaiming_uniform_(a=√5) gives the weight bound
     * 1/√fan_in, and the bias bound is 1/√fan_in too; fan_in = D. */
    double bound = 1.0 / sqrt((double)m->D);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, MHA_PCG32_STREAM_INIT);
    for (size_t i = 0; i < m->nparams; i++) /* state_dict order = buffer order */
        m->params[i] = (REAL)((2.0 * mha_pcg32_double(&rng) - 1.0) * bound);
    return MHA_OK;
}

REAL *mha_params(MODULE *m, size_t *count)
{
    if (m == NULL)
        return NULL;
    if (count != NULL)
        *count = m->nparams;
    return m->params;
}

REAL *mha_grads(MODULE *m, size_t *count)
{
    if (m == NULL)
        return NULL;
    if (count != NULL)
        *count = m->nparams;
    return m->grads;
}

int mha_zero_grad(MODULE *m)
{
    if (m == NULL)
        return MHA_EINVAL;
    memset(m->grads, 0, m->nparams * sizeof *m->grads);
    return MHA_OK;
}

int mha_get_call_index(const MODULE *m, uint64_t *n)
{
    return mha__get_u64(m ? &m->call : NULL, n);
}

int mha_set_call_index(MODULE *m, uint64_t n)
{
    if (m == NULL)
        return MHA_EINVAL;
    m->call = n;
    return MHA_OK;
}

int mha_set_dropout_batch_offset(MODULE *m, uint64_t first)
{
    if (m == NULL)
        return MHA_EINVAL;
    if (first > MHA_DROPOUT_MAX_ELEMS)
        return MHA_EOVERFLOW;
    m->drop_b0 = first;
    return MHA_OK;
}

#include "mha_cache.inc" /* X(cache_*): sizes, layout, create */

/* ---------------------------------------------------------------------------
 * The attention core of one (b, h): F2–F4 forward and their backward.
 * ------------------------------------------------------------------------- */

#include "attn_head.inc"      /* mask_view, head_job, head_gemm, masks, row_max, row_dot */
#include "attn_stored.inc"    /* head_forward_stored, head_backward_stored */
#include "attn_recompute.inc" /* head_forward_recompute, head_backward_recompute */

#include "attn_run.inc"       /* make_job, heads_run: every (b, h) in one loop */

/* ---------------------------------------------------------------------------
 * Forward
 * ------------------------------------------------------------------------- */

/* Forward's checks, before anything is written (m, c, the inputs and out not NULL): the
 * cache is m's and holds B × Sq queries and Sk keys; a mask's shapes and key lengths fit;
 * with dropout, the positions of one call stay below 2^40. */
static int forward_check(const MODULE *m, const CACHE *c, int dropout, size_t B, size_t Sq,
                         size_t Sk, const mha_mask *mask)
{
    if (c->owner != m)
        return MHA_EMISMATCH;
    if (B == 0 || Sq == 0 || Sk == 0)
        return MHA_EINVAL;
    if (B > c->cap_b || Sq > c->cap_sq || Sk > c->cap_sk)
        return MHA_ESHAPE;
    if (mask != NULL) {
        if (mask->mask != NULL && ((mask->mask_batch != 1 && mask->mask_batch != B) ||
                                   (mask->mask_heads != 1 && mask->mask_heads != m->H)))
            return MHA_ESHAPE;
        if (mask->key_lengths != NULL)
            for (size_t b = 0; b < B; b++)
                if (mask->key_lengths[b] > Sk)
                    return MHA_EINVAL;
    }
    const uint64_t per_row = (uint64_t)m->H * Sq * Sk; /* weights of one batch row */
    if (dropout && (per_row > MHA_DROPOUT_MAX_ELEMS ||
                    m->drop_b0 + B > MHA_DROPOUT_MAX_ELEMS / per_row))
        return MHA_EOVERFLOW;
    return MHA_OK;
}

/* F1: Q, K and V of the call into the cache: for self-attention up to QKV_FUSE_MAX_D one
 * product [Q K V] = X·[W_q; W_k; W_v]ᵀ + [b_q b_k b_v] (returns 1), else three. */
static int project_qkv(MODULE *m, CACHE *c, size_t B, size_t Sq, size_t Sk,
                       const REAL *x_query, const REAL *x_context)
{
    const size_t D = m->D;
    const mha_precision pr = m->cfg.precision; /* of the four projections */
    const int self_attention = x_context == NULL;
    if (self_attention && D <= QKV_FUSE_MAX_D) {
        c->ld = 3 * D;
        c->q = c->qkv;
        c->k = c->qkv + D;
        c->v = c->qkv + 2 * D;
        qkv_forward(pr, m->threads, B * Sq, D, x_query, m->params, c->wpack, c->qkv);
        return 1;
    }
    c->ld = D;
    c->q = c->qkv;
    c->k = c->q + B * Sq * D;
    c->v = c->k + B * Sk * D;
    linear_forward_split(pr, m->threads, B * Sq, D, x_query, weight_of(m->params, D, LAYER_Q),
                         bias_of(m->params, D, LAYER_Q), c->q);
    const REAL *xc = self_attention ? x_query : x_context;
    linear_forward_split(pr, m->threads, B * Sk, D, xc, weight_of(m->params, D, LAYER_K),
                         bias_of(m->params, D, LAYER_K), c->k);
    linear_forward_split(pr, m->threads, B * Sk, D, xc, weight_of(m->params, D, LAYER_V),
                         bias_of(m->params, D, LAYER_V), c->v);
    return 0;
}

int mha_forward(MODULE *m, CACHE *c, int training, size_t batch, size_t seq_q, const REAL *x_query,
               size_t seq_k, const REAL *x_context, const mha_mask *mask, REAL *out)
{
    /* ---- validate everything before writing anything ---- */
    if (m == NULL || c == NULL || x_query == NULL || out == NULL)
        return MHA_EINVAL;
    const int self_attention = x_context == NULL;
    const size_t B = batch, Sq = seq_q, Sk = self_attention ? seq_q : seq_k;
    const size_t D = m->D;
    const int dropout = training && m->cfg.dropout_p > 0.0;
    const int st = forward_check(m, c, dropout, B, Sq, Sk, mask);
    if (st != MHA_OK)
        return st;

    /* The thread count of this call, for our loops and BLAS (see
     * blas_policy). The caller's settings are restored before returning. */
    const int caller_threads = omp_get_max_threads();
    omp_set_num_threads(m->threads);
    const blas_policy bp = blas_enter();
    const mha_precision pr = m->cfg.precision; /* of the four projections */

    /* ---- F1: projections (rows split over our threads per blas_policy) ---- */
    const int fused = project_qkv(m, c, B, Sq, Sk, x_query, x_context);

    c->b = B;
    c->sq = Sq;
    c->sk = Sk;
    c->self_attention = self_attention;
    c->fused = fused;
    c->dropout = dropout;
    c->call = m->call;
    c->drop_b0 = m->drop_b0;
    c->has_mask = mask != NULL;
    if (mask != NULL)
        c->mask = *mask; /* RECOMPUTE's backward reads the mask tensor again */
    for (size_t b = 0; b < B; b++)
        c->key_len[b] = mask != NULL && mask->key_lengths != NULL ? mask->key_lengths[b] : Sk;
    c->xq_seen = x_query;
    c->xc_seen = x_context;

    /* ---- F2–F4 per (b, h), in parallel: heads write disjoint slices ---- */
    heads_run(m, c, 0);

    /* ---- F5: out = C·W_oᵀ + b_o ---- */
    linear_forward_split(pr, m->threads, B * Sq, D, c->ctx, weight_of(m->params, D, LAYER_O),
                         bias_of(m->params, D, LAYER_O), out);
    if (training)
        m->call++;
    c->state = CACHE_FORWARD;
    blas_leave(&bp);
    omp_set_num_threads(caller_threads);
    return MHA_OK;
}

/* ---------------------------------------------------------------------------
 * Backward: F5 … F1 in reverse
 * ------------------------------------------------------------------------- */

/* dC = d_out·W_o written over C, and (RECOMPUTE) delta[b,h,i] = dC_bh,i · C_bh,i,
 * which needs C and dC at once: DC_CHUNK_ROWS rows at a time.
 *   dC_rows = d_out_rows·W_o   (n,D) = (n,D)(D,D) */
static void context_gradient(const MODULE *m, CACHE *c, const REAL *d_out, int threads)
{
    const size_t rows = c->b * c->sq, D = m->D, H = m->H, hd = m->hd, sq = c->sq;
    const REAL *Wo = weight_of(m->params, D, LAYER_O);
    if (c->mode == MHA_ATTN_STORED) {
        PRIV(gemm_p)(m->cfg.precision, threads, 0, 0, rows, D, D, 1, d_out, D, Wo, D, 0, c->ctx,
                     D);
        return;
    }
    for (size_t r0 = 0; r0 < rows; r0 += DC_CHUNK_ROWS) {
        const size_t n = min_sz(DC_CHUNK_ROWS, rows - r0);
        PRIV(gemm_p)(m->cfg.precision, threads, 0, 0, n, D, D, 1, d_out + r0 * D, D, Wo, D, 0,
                     c->dc_chunk, D);
        for (size_t r = 0; r < n; r++) {
            const size_t row = r0 + r, b = row / sq, i = row % sq;
            const REAL *dcr = c->dc_chunk + r * D;
            REAL *cr = c->ctx + row * D;
            for (size_t h = 0; h < H; h++) {
                double s = 0.0;
                for (size_t d = h * hd; d < (h + 1) * hd; d++)
                    s += (double)dcr[d] * cr[d];
                c->delta[(b * H + h) * sq + i] = (REAL)s;
            }
            memcpy(cr, dcr, D * sizeof *cr);
        }
    }
}

/* X(backward), and with dxq_set dx_query written instead of added to */
static int backward_(MODULE *m, CACHE *c, const REAL *x_query, const REAL *x_context,
                     const REAL *d_out, REAL *dx_query, REAL *dx_context, int dxq_set)
{
    if (m == NULL || c == NULL || x_query == NULL || d_out == NULL)
        return MHA_EINVAL;
    if (c->owner != m)
        return MHA_EMISMATCH;
    if (c->state != CACHE_FORWARD)
        return MHA_ESTATE;
    if ((const void *)x_query != c->xq_seen || (const void *)x_context != c->xc_seen)
        return MHA_EINVAL; /* not the inputs of the saved forward */
    if (c->self_attention && dx_context != NULL)
        return MHA_EINVAL; /* self-attention: every path goes into dx_query */

    const size_t B = c->b, Sq = c->sq, Sk = c->sk, D = m->D;
    REAL *P = m->params, *G = m->grads;
    const int caller_threads = omp_get_max_threads(); /* as in forward */
    omp_set_num_threads(m->threads);
    const blas_policy bp = blas_enter();
    const mha_precision pr = m->cfg.precision;

    /* F5 backward (out = C·W_oᵀ + b_o):
     *   dW_o += d_outᵀ·C   (D,D) += (D,B·Sq)(B·Sq,D);   db_o += Σ_rows d_out
     *   dC    = d_out·W_o  (B·Sq,D) = (B·Sq,D)(D,D)   — written over C */
    const size_t lo = LAYER_O;
    proj_backward(pr, m->threads, B * Sq, D, 1, c->ctx, P, G, &lo, &d_out, D, NULL, 0);
    context_gradient(m, c, d_out, m->threads);

    /* F4–F2 backward per (b, h): Q, K, V slices become dQ, dK, dV */
    heads_run(m, c, 1);
    c->state = CACHE_CONSUMED;

    /* F1 backward, for each projection y = x·Wᵀ + b with dy in the cache:
     *   dW += dyᵀ·x   (D,D) += (D,rows)(rows,D);  db += Σ_rows dy;  dx += dy·W
     * fused F1: the same three, reading dQ|dK|dV with the row stride 3D (qkv_backward) */
    if (c->fused) {
        qkv_backward(pr, m->threads, B * Sq, D, x_query, P, G, c->qkv, dx_query, dxq_set);
    } else { /* Q's dx first: with dxq_set it writes dx_query, the others add */
        const size_t lq = LAYER_Q;
        const REAL *dq = c->q;
        proj_backward(pr, m->threads, B * Sq, D, 1, x_query, P, G, &lq, &dq, D, dx_query,
                      dxq_set);
        const REAL *xc = c->self_attention ? x_query : x_context;
        REAL *dxc = c->self_attention ? dx_query : dx_context;
        /* K's and V's, of one input: each kind of the two in one loop (proj_backward) */
        const size_t kv[2] = {LAYER_K, LAYER_V};
        const REAL *dkv[2] = {c->k, c->v};
        proj_backward(pr, m->threads, B * Sk, D, 2, xc, P, G, kv, dkv, D, dxc, 0);
    }
    blas_leave(&bp);
    omp_set_num_threads(caller_threads);
    return MHA_OK;
}

int mha_backward(MODULE *m, CACHE *c, const REAL *x_query, const REAL *x_context, const REAL *d_out,
                REAL *dx_query, REAL *dx_context)
{
    return backward_(m, c, x_query, x_context, d_out, dx_query, dx_context, 0);
}

int PRIV(backward_set)(MODULE *m, CACHE *c, const REAL *x_query, const REAL *x_context,
                       const REAL *d_out, REAL *dx_query, REAL *dx_context)
{
    return backward_(m, c, x_query, x_context, d_out, dx_query, dx_context, 1);
}

#include "mha_kv.inc" /* key/value cache for generation: X(kvcache_*), X(forward_cached) */

#undef MODULE
#undef CACHE
#undef MASK_FILL
#undef PARALLEL_MIN_WORK
#undef RB
#undef RB_SHORT
#undef BR
#undef BC
#undef DC_CHUNK_ROWS
#undef ROW_CLONES
#undef QKV_FUSE_MAX_D
#undef VLEN
