/*
 * The GPT-2-style block and model (include/mha_gpt.h), written once for both
 * precisions and compiled twice (REAL float, X(n) = mha_n; with -DMHA_DOUBLE REAL double,
 * X(n) = mhad_n: src/real.h).
 *
 * Glossary (as include/mha_gpt.h): B batch, T length, R = B·T rows, C dim, H heads,
 * F mlp_dim, V vocab, L layers, Tm = context (rows of wpe).
 *
 * Block forward (numbered; backward walks them in reverse):
 *   B1  n1 = LN1(x)                          [R,C]   saves mean1, rstd1
 *   B2  a  = MHA(n1, causal)                 [R,C]   the module's cache saves its part
 *   B3  a  = drop(a);  x1 = x + a            [R,C]   keep_a bits
 *   B4  n2 = LN2(x1)                         [R,C]   saves mean2, rstd2
 *   B5  m  = MLP(n2)                         [R,C]   saves h, gelu(h) [R,F]
 *   B6  m  = drop(m);  y = x1 + m            [R,C]   keep_m bits
 * Model forward:
 *   G1  x0 = drop(wte[tok] + wpe[t])         [R,C]   keep_e bits
 *   G2  x_{l+1} = block_l(x_l)               [R,C]   l = 0 .. L−1
 *   G3  nf = LN_f(x_L)                       [R,C]
 *   G4  logits = nf·wteᵀ                     [R,V]
 *   G5  loss = mean cross-entropy over scored rows
 *
 * This file holds the allocation table and initialisation (shared with src/s2s_core.c
 * through gpt_shared.inc),
 * the model's parameters, names and settings; the block is in gpt_block.inc, the forward
 * and backward G1–G5 in gpt_forward.inc, generation in gpt_infer.inc.
 */
#include "real.h" /* REAL, X, PRIV: float, or double with -DMHA_DOUBLE */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "mha.h"
#include "mha_internal.h" /* MHA_DROPOUT_MAX_ELEMS */

#define BLOCK X(block)
#define GPT X(gpt)
#define INFER X(gpt_infer)

#include "gpt_shared.inc" /* the allocation table and the block, shared with s2s_core.c */

/* ---------------------------------------------------------------------------
 * Allocation: every object's buffers are views into one 64-byte aligned block,
 * laid out from a table of (pointer, bytes) entries (gpt_shared.inc).
 * ------------------------------------------------------------------------- */

/* a·b·c·elem bytes, or SIZE_MAX on overflow (which the allocation then refuses). */
size_t PRIV(gpt_bytes)(size_t a, size_t b, size_t elem)
{
    size_t n, bytes;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, elem, &bytes))
        return SIZE_MAX;
    return bytes;
}

/* One zeroed allocation holding every buffer of the table, each 64-byte aligned;
 * *block owns it (free(*block)). calloc, not an aligned allocation and a memset: a large
 * calloc gets fresh zero pages from the system, which take memory only when written, so a
 * model made for training but used to decode (its backward buffers never written) costs
 * what decoding touches. MHA_EOVERFLOW or MHA_ENOMEM; pointers untouched on error. */
/* The bytes gpt_alloc_ allocates for the table (each buffer rounded up to 64, and 64 for
 * the alignment). MHA_OK or MHA_EOVERFLOW. */
int PRIV(gpt_alloc_bytes)(const X(gpt_buf_) * bufs, size_t n, size_t *bytes)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = bufs[i].bytes;
        if (b == SIZE_MAX || b > SIZE_MAX - 64 - total)
            return MHA_EOVERFLOW;
        total += (b + 63) & ~(size_t)63;
    }
    if (total > SIZE_MAX - 64)
        return MHA_EOVERFLOW;
    *bytes = total + 64;
    return MHA_OK;
}

int PRIV(gpt_alloc)(void **block, X(gpt_buf_) * bufs, size_t n)
{
    size_t total;
    const int st = PRIV(gpt_alloc_bytes)(bufs, n, &total);
    if (st != MHA_OK)
        return st;
    void *p = calloc(1, total);
    if (p == NULL)
        return MHA_ENOMEM;
    char *c = (char *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
    for (size_t i = 0; i < n; i++) {
        *bufs[i].ptr = bufs[i].bytes ? (void *)c : NULL;
        c += (bufs[i].bytes + 63) & ~(size_t)63;
    }
    *block = p;
    return MHA_OK;
}

/* Normal(0, 1) from two uniform doubles (Box–Muller, cosine branch). */
static double X(gpt_normal_)(mha_pcg32 *rng)
{
    double u1 = mha_pcg32_double(rng), u2 = mha_pcg32_double(rng);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* Fill one tensor as GPT-2 initialises its role (mha_tensor_role). */
void PRIV(gpt_init_tensor)(REAL *p, size_t n, mha_tensor_role role, size_t layers, mha_pcg32 *rng)
{
    double sd = role == MHA_ROLE_RESID_WEIGHT ? 0.02 / sqrt(2.0 * (double)layers) : 0.02;
    for (size_t i = 0; i < n; i++) {
        switch (role) {
        case MHA_ROLE_WEIGHT:
        case MHA_ROLE_RESID_WEIGHT:
        case MHA_ROLE_EMBEDDING: p[i] = (REAL)(sd * X(gpt_normal_)(rng)); break;
        case MHA_ROLE_NORM_WEIGHT: p[i] = 1; break;
        default: p[i] = 0; break;
        }
    }
}

int PRIV(gpt_own_tensor)(mha_param_info in, REAL *params, REAL *grads, size_t off,
                         mha_param_info *info, REAL **param, REAL **grad)
{
    in.numel = in.ndim == 2 ? in.shape[0] * in.shape[1] : in.shape[0];
    if (info)
        *info = in;
    if (param)
        *param = params + off;
    if (grad)
        *grad = grads + off;
    return MHA_OK;
}

REAL *PRIV(arena_view)(REAL *arena, size_t n, size_t *count)
{
    if (arena != NULL && count != NULL)
        *count = n;
    return arena;
}

int PRIV(arena_zero)(REAL *grads, size_t n)
{
    if (grads == NULL)
        return MHA_EINVAL;
    PRIV(zero)(n, grads); /* a model's blocks' spans, a block's modules' */
    return MHA_OK;
}

int PRIV(model_set_counter)(void *model, uint64_t *field, size_t n_blocks,
                            void (*set)(void *model, size_t l, int what, uint64_t v), int what,
                            uint64_t v)
{
    if (model == NULL)
        return MHA_EINVAL;
    if (what == MHA__COUNTER_OFFSET && v > MHA_DROPOUT_MAX_ELEMS)
        return MHA_EOVERFLOW;
    for (size_t l = 0; l < n_blocks; l++) /* cannot fail now */
        set(model, l, what, v);
    *field = v;
    return MHA_OK;
}

int PRIV(block_dims)(const mha_block_config *bc, size_t *mlp_dim, double *ln_eps)
{
    mha_block_config r;
    const int st = PRIV(block_config_resolve)(bc, &r);
    if (st == MHA_OK) {
        *mlp_dim = r.mlp_dim;
        *ln_eps = r.ln_eps;
    }
    return st;
}

int PRIV(arena_layout)(const size_t *numel, size_t n_own, X(arena_ins_) *ins, size_t n_ins,
                       size_t *off, size_t *total)
{
    size_t n = 0, k = 0, span;
    for (size_t t = 0; t < n_own; t++) {
        for (; k < n_ins && ins[k].before == t; k++) {
            ins[k].at = n;
            if (__builtin_mul_overflow(ins[k].count, ins[k].size, &span) ||
                __builtin_add_overflow(n, span, &n))
                return MHA_EOVERFLOW;
        }
        off[t] = n;
        if (__builtin_add_overflow(n, numel[t], &n))
            return MHA_EOVERFLOW;
    }
    *total = n;
    return MHA_OK;
}

#include "gpt_block.inc" /* the block: mha_block_* */

/* ---------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------- */

enum { GOWN_WTE, GOWN_WPE, GOWN_LNF_W, GOWN_LNF_B, GOWN_COUNT };

struct X(gpt) {
    mha_gpt_config cfg;     /* defaults resolved                                  */
    size_t C, V, Tm, L, cap_b, threads;
    BLOCK **blocks;         /* [L]                                                */
    void *block;            /* the one allocation of everything below             */
    REAL *params, *grads;   /* [n_params] the arenas, in tensor order: wte [V,C],
                               wpe [Tm,C] (own tensors at off[]), block l's span
                               at blk_off + l·blk_n, ln_f w, b [C]                 */
    size_t n_params, blk_off, blk_n, off[GOWN_COUNT];
    char *names;            /* tensor names "blocks.<l>.<name>", NUL-separated    */
    const char **name_of;   /* [n_tensors] into names                             */
    size_t n_tensors;
    /* saved activations of the last forward */
    int32_t *tokens, *targets; /* [R] copies                                      */
    REAL *xs;               /* [L+1, cap_R, C] residual stream x_0 .. x_L          */
    uint64_t *keep_e;       /* G1 keep bits [words(cap_R·C)]                       */
    REAL *nf, *meanf, *rstdf; /* G3: [R,C], [R], [R]                               */
    REAL *logits;           /* G4: [R,V]                                          */
    REAL *dlogits;          /* [R,V] backward workspace                           */
    REAL *ga, *gb;          /* [R,C] backward workspace (ping-pong)               */
    X(block_work_) work;    /* the blocks' shared backward workspace               */
    size_t B, T, scored;
    int have_forward, have_targets, dropped;
    uint64_t call;
    uint64_t b0;            /* dropout batch offset (gpt_set_dropout_batch_offset)  */
    mha_grad_ready_fn hook; /* gpt_set_grad_hook: called as gradients become final  */
    void *hook_user;
};

static int X(gpt_config_resolve_)(const mha_gpt_config *in, mha_gpt_config *out)
{
    if (in == NULL || in->vocab == 0 || in->vocab > INT32_MAX || in->context == 0 ||
        in->layers == 0 || in->layers > 1024)
        return MHA_EINVAL;
    mha_block_config bc = MHA__BLOCK_CONFIG_OF(in);
    bc.causal = 1;
    bc.init_layers = in->layers;
    mha_gpt_config c = *in;
    const int st = PRIV(block_dims)(&bc, &c.mlp_dim, &c.ln_eps);
    if (st == MHA_OK)
        *out = c;
    return st;
}

void mha_gpt_destroy(GPT *g)
{
    if (g == NULL)
        return;
    if (g->blocks)
        for (size_t l = 0; l < g->L; l++)
            X(block_destroy)(g->blocks[l]);
    MHA__FREE_ALL(g->blocks, g->names, g->name_of, g->block, g);
}

/* "blocks.<l>.<name>" names for every tensor, in gpt_tensor order, NUL-separated in
 * one buffer, and a pointer to each. */
static int X(gpt_make_names_)(GPT *g)
{
    static const char *const head[2] = {"wte.weight", "wpe.weight"};
    static const char *const tail[2] = {"ln_f.weight", "ln_f.bias"};
    const size_t cap = 64 * g->n_tensors; /* "blocks.1023.attn.w_q.weight" < 64 bytes */
    size_t used = 0;
    g->names = malloc(cap);
    g->name_of = malloc(g->n_tensors * sizeof *g->name_of);
    if (g->names == NULL || g->name_of == NULL)
        return MHA_ENOMEM;
    for (size_t i = 0; i < g->n_tensors; i++) {
        int n;
        if (i < 2)
            n = snprintf(g->names + used, cap - used, "%s", head[i]);
        else if (i >= g->n_tensors - 2)
            n = snprintf(g->names + used, cap - used, "%s", tail[i - (g->n_tensors - 2)]);
        else
            n = snprintf(g->names + used, cap - used, "blocks.%zu.%s",
                         (i - 2) / MHA_BLOCK_NUM_TENSORS,
                         PRIV(block_names)[(i - 2) % MHA_BLOCK_NUM_TENSORS]);
        if (n < 0 || (size_t)n >= cap - used)
            return MHA_EOVERFLOW;
        g->name_of[i] = g->names + used; /* names is not moved after this */
        used += (size_t)n + 1;
    }
    return MHA_OK;
}

/* The model's L blocks (causal, their seeds from the model's), sharing its work buffers. */
static int X(gpt_make_blocks_)(GPT *g, size_t max_batch)
{
    const mha_gpt_config *c = &g->cfg;
    g->blocks = calloc(g->L, sizeof *g->blocks);
    if (g->blocks == NULL)
        return MHA_ENOMEM;
    for (size_t l = 0; l < g->L; l++) {
        mha_block_config bc = {.dim = g->C, .heads = c->heads, .mlp_dim = c->mlp_dim,
                               .attn_dropout = c->attn_dropout, .resid_dropout = c->resid_dropout,
                               .ln_eps = c->ln_eps, .causal = 1, .init_layers = g->L,
                               .seed = mha_gpt_block_seed(c->seed, l), .threads = c->threads,
                               .attn_mode = c->attn_mode, .precision = c->precision};
        const size_t at = g->blk_off + l * g->blk_n;
        const int st = PRIV(block_create)(&g->blocks[l], &bc, max_batch, g->Tm, &g->work,
                                          !c->no_init, g->params + at, g->grads + at);
        if (st != MHA_OK)
            return st;
    }
    return MHA_OK;
}

int mha_gpt_create(GPT **out, const mha_gpt_config *cfg, size_t max_batch)
{
    mha_gpt_config c;
    int st;
    if (out == NULL || max_batch == 0)
        return MHA_EINVAL;
    if ((st = X(gpt_config_resolve_)(cfg, &c)) != MHA_OK)
        return st;
    const size_t C = c.dim, V = c.vocab, Tm = c.context, L = c.layers;
    size_t R, RC, RV, VC, TC, XS;
    if (__builtin_mul_overflow(max_batch, Tm, &R) || __builtin_mul_overflow(R, C, &RC) ||
        __builtin_mul_overflow(R, V, &RV) || __builtin_mul_overflow(V, C, &VC) ||
        __builtin_mul_overflow(Tm, C, &TC) || __builtin_mul_overflow(RC, L + 1, &XS) ||
        V > INT_MAX || R > INT_MAX)
        return MHA_EOVERFLOW;
    GPT *g = calloc(1, sizeof *g);
    if (g == NULL)
        return MHA_ENOMEM;
    *g = (GPT){.cfg = c, .C = C, .V = V, .Tm = Tm, .L = L, .cap_b = max_batch,
               .threads = c.threads > 0 ? (size_t)c.threads : (size_t)omp_get_num_procs(),
               .n_tensors = 2 + MHA_BLOCK_NUM_TENSORS * L + 2};
    const size_t numel[GOWN_COUNT] = {VC, TC, C, C};
    const mha_block_config bc = {.dim = C, .mlp_dim = c.mlp_dim};
    X(arena_ins_) blocks = {.before = GOWN_LNF_W, .count = L};
    if ((st = PRIV(block_numel)(&bc, &blocks.size)) != MHA_OK ||
        (st = PRIV(arena_layout)(numel, GOWN_COUNT, &blocks, 1, g->off, &g->n_params)) !=
            MHA_OK) {
        free(g);
        return st;
    }
    g->blk_off = blocks.at;
    g->blk_n = blocks.size;
    const size_t S = sizeof(REAL), words = (RC + 63) / 64;
    X(gpt_buf_) bufs[] = {
        {(void **)&g->params, PRIV(gpt_bytes)(g->n_params, 1, S)},
        {(void **)&g->grads, PRIV(gpt_bytes)(g->n_params, 1, S)},
        {(void **)&g->tokens, PRIV(gpt_bytes)(R, 1, sizeof(int32_t))},
        {(void **)&g->targets, PRIV(gpt_bytes)(R, 1, sizeof(int32_t))},
        {(void **)&g->xs, PRIV(gpt_bytes)(XS, 1, S)},
        {(void **)&g->keep_e, c.resid_dropout > 0 ? PRIV(gpt_bytes)(words, 1, 8) : 0},
        {(void **)&g->nf, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->meanf, PRIV(gpt_bytes)(R, 1, S)},
        {(void **)&g->rstdf, PRIV(gpt_bytes)(R, 1, S)},
        {(void **)&g->logits, PRIV(gpt_bytes)(RV, 1, S)},
        {(void **)&g->dlogits, PRIV(gpt_bytes)(RV, 1, S)},
        {(void **)&g->ga, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->gb, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->work.g1, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->work.g2, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->work.g3, PRIV(gpt_bytes)(RC, 1, S)},
        {(void **)&g->work.gf, PRIV(gpt_bytes)(R, c.mlp_dim, S)},
    };
    if ((st = PRIV(gpt_alloc)(&g->block, bufs, sizeof bufs / sizeof bufs[0])) != MHA_OK) {
        free(g);
        return st;
    }
    if ((st = X(gpt_make_names_)(g)) != MHA_OK || (st = X(gpt_make_blocks_)(g, max_batch))) {
        X(gpt_destroy)(g);
        return st;
    }
    if (!c.no_init)
        X(gpt_reset_parameters)(g, c.seed);
    *out = g;
    return MHA_OK;
}

int mha_gpt_get_config(const GPT *g, mha_gpt_config *cfg)
{
    if (g == NULL || cfg == NULL)
        return MHA_EINVAL;
    *cfg = g->cfg;
    return MHA_OK;
}

size_t mha_gpt_num_tensors(const GPT *g) { return g ? g->n_tensors : 0; }

int mha_gpt_tensor(GPT *g, size_t i, mha_param_info *info, REAL **param, REAL **grad)
{
    if (g == NULL || i >= g->n_tensors)
        return MHA_EINVAL;
    if (i >= 2 && i < g->n_tensors - 2) {
        int st = X(block_tensor)(g->blocks[(i - 2) / MHA_BLOCK_NUM_TENSORS],
                                 (i - 2) % MHA_BLOCK_NUM_TENSORS, info, param, grad);
        if (st == MHA_OK && info)
            info->name = g->name_of[i];
        return st;
    }
    const int own = i < 2 ? (int)i : (int)(GOWN_LNF_W + (i - (g->n_tensors - 2)));
    mha_param_info in = {.name = g->name_of[i]};
    switch (own) {
    case GOWN_WTE:
        in.ndim = 2; in.shape[0] = g->V; in.shape[1] = g->C; in.role = MHA_ROLE_EMBEDDING; break;
    case GOWN_WPE:
        in.ndim = 2; in.shape[0] = g->Tm; in.shape[1] = g->C; in.role = MHA_ROLE_EMBEDDING; break;
    case GOWN_LNF_W:
        in.ndim = 1; in.shape[0] = g->C; in.role = MHA_ROLE_NORM_WEIGHT; break;
    default:
        in.ndim = 1; in.shape[0] = g->C; in.role = MHA_ROLE_NORM_BIAS; break;
    }
    in.decay = 0;
    return PRIV(gpt_own_tensor)(in, g->params, g->grads, g->off[own], info, param, grad);
}

int mha_gpt_tensor_find(const GPT *g, const char *name, size_t *index)
{
    return g == NULL ? MHA_EINVAL : mha__tensor_find(g->name_of, g->n_tensors, name, index);
}

int mha_gpt_param_count(const GPT *g, size_t *count)
{
    /* the arena holds every tensor, nothing else */
    return mha__get_size(g ? &g->n_params : NULL, count);
}

int mha_gpt_reset_parameters(GPT *g, uint64_t seed)
{
    if (g == NULL)
        return MHA_EINVAL;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, MHA_PCG32_STREAM_GPT_INIT);
    for (size_t i = 0; i < GOWN_COUNT; i++) {
        mha_param_info in;
        REAL *p;
        X(gpt_tensor)(g, i < 2 ? i : g->n_tensors - 4 + i, &in, &p, NULL);
        PRIV(gpt_init_tensor)(p, in.numel, in.role, g->L, &rng);
    }
    for (size_t l = 0; l < g->L; l++)
        X(block_reset_parameters)(g->blocks[l], mha_gpt_block_seed(seed, l));
    return MHA_OK;
}

int mha_gpt_zero_grad(GPT *g)
{
    return PRIV(arena_zero)(g ? g->grads : NULL, g ? g->n_params : 0);
}

REAL *mha_gpt_params(GPT *g, size_t *count)
{
    return PRIV(arena_view)(g ? g->params : NULL, g ? g->n_params : 0, count);
}

REAL *mha_gpt_grads(GPT *g, size_t *count)
{
    return PRIV(arena_view)(g ? g->grads : NULL, g ? g->n_params : 0, count);
}

BLOCK *mha_gpt_block(GPT *g, size_t l) { return g && l < g->L ? g->blocks[l] : NULL; }

int mha_gpt_get_call_index(const GPT *g, uint64_t *n)
{
    return mha__get_u64(g ? &g->call : NULL, n);
}

/* Block l's counter `what` (PRIV(model_set_counter)). */
static void X(gpt_set_block_counter_)(void *model, size_t l, int what, uint64_t v)
{
    BLOCK *b = ((GPT *)model)->blocks[l];
    if (what == MHA__COUNTER_OFFSET)
        X(block_set_dropout_batch_offset)(b, v);
    else
        X(block_set_call_index)(b, v);
}

int mha_gpt_set_call_index(GPT *g, uint64_t n)
{
    return PRIV(model_set_counter)(g, g ? &g->call : NULL, g ? g->L : 0,
                                   X(gpt_set_block_counter_), MHA__COUNTER_CALL, n);
}

int mha_gpt_set_dropout_batch_offset(GPT *g, uint64_t first)
{
    return PRIV(model_set_counter)(g, g ? &g->b0 : NULL, g ? g->L : 0,
                                   X(gpt_set_block_counter_), MHA__COUNTER_OFFSET, first);
}

#include "gpt_forward.inc" /* forward, backward and the saved activations */

#include "gpt_infer.inc" /* generation: mha_gpt_infer_* */

#undef BLOCK
#undef GPT
#undef INFER

#ifndef MHA_DOUBLE /* the untyped helper of include/mha_gpt.h, once */
uint64_t mha_gpt_block_seed(uint64_t seed, size_t layer)
{
    /* splitmix64 of seed + (layer + 1)·golden-ratio increment */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * ((uint64_t)layer + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
#endif /* !MHA_DOUBLE */
