/*
 * The encoder–decoder model (include/mha_s2s.h), written once for both precisions.
 * Compiled twice (float; double with -DMHA_DOUBLE: src/real.h); it shares the GPT's block
 * (encoder blocks are GPT blocks with causal = 0), allocation table and initialisation
 * through src/gpt_shared.inc (their code is in gpt_core.c).
 *
 * Glossary (as include/mha_s2s.h): B batch, S source length, T target length,
 * Rs = B·S and Rt = B·T rows, C dim, F mlp_dim, Vs/Vt vocabularies, Ts/Tt contexts,
 * Le/Ld layers.
 *   E1  xs₀ = drop(src_emb[src] + src_pos[s])       [Rs,C]  keep_s bits (EMBED)
 *   E2  xs_{l+1} = enc_l(xs_l, src_len)             [Rs,C]
 *   E3  mem = LN_enc(xs_Le)                         [Rs,C]  saves mean_e, rstd_e
 *   D1  xt₀ = drop(tgt_emb[tgt_in] + tgt_pos[t])    [Rt,C]  keep_t bits (EMBED_TGT)
 *   D2  xt_{l+1} = dec_l(xt_l, mem, src_len)        [Rt,C]
 *   D3  nf = LN_dec(xt_Ld);  logits = nf·Wᵀ          [Rt,Vt] W = tgt_emb or out.weight
 *   D4  loss = mean label-smoothed cross-entropy over scored rows
 * Backward walks D4 … D1, then E3 … E1 with dmem, the sum over decoder blocks of their
 * cross-attentions' context gradients.
 */

#include "real.h" /* REAL, X, PRIV: float, or double with -DMHA_DOUBLE */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "mha.h"
#include "mha_internal.h"
#include "pool.h"

#include "gpt_shared.inc" /* the GPT's block and allocation table */

#define BLOCK X(block)
#define DEC X(decoder_block)
#define S2S X(s2s)
#define SINF X(s2s_infer)

#include "s2s_block.inc" /* the decoder block: mha_decoder_block_* */

/* The model's own tensors. */
enum { SOWN_SRC_EMB, SOWN_SRC_POS, SOWN_ENC_LN_W, SOWN_ENC_LN_B, SOWN_TGT_EMB, SOWN_TGT_POS,
       SOWN_DEC_LN_W, SOWN_DEC_LN_B, SOWN_OUT, SOWN_COUNT };

struct X(s2s) {
    mha_s2s_config cfg;     /* defaults resolved                                   */
    size_t C, Vs, Vt, Ts, Tt, Le, Ld, cap_b, threads;
    BLOCK **enc;            /* [Le] */
    DEC **dec;              /* [Ld] */
    void *block;            /* the one allocation of everything below              */
    REAL *params, *grads;   /* [n_params] the arenas, in tensor order: own tensors
                               at off[] (out only when untied), encoder block l's span
                               at enc_off + l·enc_n after src_pos, decoder block l's at
                               dec_off + l·dec_n after tgt_pos                        */
    size_t n_params, enc_off, enc_n, dec_off, dec_n, off[SOWN_COUNT];
    char *names;            /* tensor names, NUL-separated                           */
    const char **name_of;   /* [n_tensors] into names                                */
    size_t n_tensors, e1, d0, d1; /* encoder blocks [2, e1), decoder blocks [d0, d1)   */
    /* saved activations of the last forward */
    int32_t *src, *tgt, *targets; /* [cap_b·Ts], [cap_b·Tt] ×2 copies                 */
    size_t *src_len;        /* [cap_b]                                               */
    REAL *xs;               /* [Le+1, cap_b·Ts, C] encoder residual stream            */
    uint64_t *keep_s;       /* E1 [words(cap_b·Ts·C)]                                 */
    REAL *mem, *mean_e, *rstd_e; /* E3 */
    REAL *xt;               /* [Ld+1, cap_b·Tt, C] decoder residual stream            */
    uint64_t *keep_t;       /* D1 */
    REAL *nf, *meanf, *rstdf; /* D3 */
    REAL *logits, *dlogits; /* [cap_b·Tt, Vt] */
    REAL *soft;             /* [cap_b·Tt, Vt] the last distillation forward's targets
                               (allocated by the first, s2s_forward_distill)           */
    double soft_w;          /* its weight; 0: the loss has no distillation term        */
    REAL *ga, *gb;          /* [max(Rs,Rt), C] backward ping-pong                   */
    REAL *dmem;             /* [Rs, C] dL/dmem                                       */
    X(block_work_) work;    /* every block's backward workspace                      */
    size_t B, S, T, scored;
    int have_forward, have_targets, dropped;
    uint64_t call, b0;
    int decode_only;        /* the matrices are laid out for decoding (s2s_decode_only):
                               only decoding states may use the model                  */
};

void mha_s2s_destroy(S2S *m)
{
    if (m == NULL)
        return;
    if (m->enc)
        for (size_t l = 0; l < m->Le; l++)
            X(block_destroy)(m->enc[l]);
    if (m->dec)
        for (size_t l = 0; l < m->Ld; l++)
            X(decoder_block_destroy)(m->dec[l]);
    MHA__FREE_ALL(m->enc, m->dec, m->names, m->name_of, m->soft, m->block, m);
}

static int X(s2s_config_resolve_)(const mha_s2s_config *in, mha_s2s_config *out)
{
    if (in == NULL || in->src_vocab == 0 || in->src_vocab > INT32_MAX || in->tgt_vocab == 0 ||
        in->tgt_vocab > INT32_MAX || in->src_context == 0 || in->tgt_context == 0 ||
        in->enc_layers == 0 || in->enc_layers > 1024 || in->dec_layers == 0 ||
        in->dec_layers > 1024 || !(in->label_smoothing >= 0.0 && in->label_smoothing < 1.0) ||
        (in->untied != 0 && in->untied != 1))
        return MHA_EINVAL;
    mha_s2s_config c = *in;
    const int st = PRIV(block_dims)(&MHA__BLOCK_CONFIG_OF(in), &c.mlp_dim, &c.ln_eps);
    if (st == MHA_OK)
        *out = c;
    return st;
}

/* Own tensor of tensor index i, or −1 (an encoder block's) / −2 (a decoder block's). */
static int X(s2s_own_of_)(const S2S *m, size_t i)
{
    if (i < 2)
        return SOWN_SRC_EMB + (int)i;
    if (i < m->e1)
        return -1;
    if (i < m->d0)
        return SOWN_ENC_LN_W + (int)(i - m->e1);
    if (i < m->d1)
        return -2;
    return SOWN_DEC_LN_W + (int)(i - m->d1);
}

static int X(s2s_make_names_)(S2S *m)
{
    static const char *const own[SOWN_COUNT] = {
        "src_emb.weight", "src_pos.weight", "enc_ln.weight", "enc_ln.bias", "tgt_emb.weight",
        "tgt_pos.weight", "dec_ln.weight", "dec_ln.bias", "out.weight"};
    const size_t cap = 64 * m->n_tensors; /* "decoder.1023.cross_attn.w_q.weight" < 64 */
    size_t used = 0;
    m->names = malloc(cap);
    m->name_of = malloc(m->n_tensors * sizeof *m->name_of);
    if (m->names == NULL || m->name_of == NULL)
        return MHA_ENOMEM;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const int o = X(s2s_own_of_)(m, i);
        int n;
        if (o == -1)
            n = snprintf(m->names + used, cap - used, "encoder.%zu.%s",
                         (i - 2) / MHA_BLOCK_NUM_TENSORS,
                         PRIV(block_names)[(i - 2) % MHA_BLOCK_NUM_TENSORS]);
        else if (o == -2)
            n = snprintf(m->names + used, cap - used, "decoder.%zu.%s",
                         (i - m->d0) / MHA_DEC_BLOCK_NUM_TENSORS,
                         X(dec_names_)[(i - m->d0) % MHA_DEC_BLOCK_NUM_TENSORS]);
        else
            n = snprintf(m->names + used, cap - used, "%s", own[o]);
        if (n < 0 || (size_t)n >= cap - used)
            return MHA_EOVERFLOW;
        m->name_of[i] = m->names + used;
        used += (size_t)n + 1;
    }
    return MHA_OK;
}

/* The allocation table of a model whose sizes are set (m->C … m->cap_b, n_params). */
static int X(s2s_alloc_)(S2S *m)
{
    const size_t C = m->C, F = m->cfg.mlp_dim, Vt = m->Vt, S = sizeof(REAL);
    size_t Rs, Rt, RsC, RtC, RtV, XS, XT;
    if (__builtin_mul_overflow(m->cap_b, m->Ts, &Rs) ||
        __builtin_mul_overflow(m->cap_b, m->Tt, &Rt) || __builtin_mul_overflow(Rs, C, &RsC) ||
        __builtin_mul_overflow(Rt, C, &RtC) || __builtin_mul_overflow(Rt, Vt, &RtV) ||
        __builtin_mul_overflow(RsC, m->Le + 1, &XS) ||
        __builtin_mul_overflow(RtC, m->Ld + 1, &XT) || Vt > INT_MAX || Rt > INT_MAX ||
        Rs > INT_MAX)
        return MHA_EOVERFLOW;
    const size_t R = Rs > Rt ? Rs : Rt, drop = m->cfg.resid_dropout > 0;
    X(gpt_buf_) bufs[] = {
        {(void **)&m->params, PRIV(gpt_bytes)(m->n_params, 1, S)},
        {(void **)&m->grads, PRIV(gpt_bytes)(m->n_params, 1, S)},
        {(void **)&m->src, PRIV(gpt_bytes)(Rs, 1, sizeof(int32_t))},
        {(void **)&m->tgt, PRIV(gpt_bytes)(Rt, 1, sizeof(int32_t))},
        {(void **)&m->targets, PRIV(gpt_bytes)(Rt, 1, sizeof(int32_t))},
        {(void **)&m->src_len, PRIV(gpt_bytes)(m->cap_b, 1, sizeof(size_t))},
        {(void **)&m->xs, PRIV(gpt_bytes)(XS, 1, S)},
        {(void **)&m->keep_s, drop ? PRIV(gpt_bytes)((RsC + 63) / 64, 1, 8) : 0},
        {(void **)&m->mem, PRIV(gpt_bytes)(RsC, 1, S)},
        {(void **)&m->mean_e, PRIV(gpt_bytes)(Rs, 1, S)},
        {(void **)&m->rstd_e, PRIV(gpt_bytes)(Rs, 1, S)},
        {(void **)&m->xt, PRIV(gpt_bytes)(XT, 1, S)},
        {(void **)&m->keep_t, drop ? PRIV(gpt_bytes)((RtC + 63) / 64, 1, 8) : 0},
        {(void **)&m->nf, PRIV(gpt_bytes)(RtC, 1, S)},
        {(void **)&m->meanf, PRIV(gpt_bytes)(Rt, 1, S)},
        {(void **)&m->rstdf, PRIV(gpt_bytes)(Rt, 1, S)},
        {(void **)&m->logits, PRIV(gpt_bytes)(RtV, 1, S)},
        {(void **)&m->dlogits, PRIV(gpt_bytes)(RtV, 1, S)},
        {(void **)&m->ga, PRIV(gpt_bytes)(R, C, S)},
        {(void **)&m->gb, PRIV(gpt_bytes)(R, C, S)},
        {(void **)&m->dmem, PRIV(gpt_bytes)(RsC, 1, S)},
        {(void **)&m->work.g1, PRIV(gpt_bytes)(R, C, S)},
        {(void **)&m->work.g2, PRIV(gpt_bytes)(R, C, S)},
        {(void **)&m->work.g3, PRIV(gpt_bytes)(R, C, S)},
        {(void **)&m->work.gf, PRIV(gpt_bytes)(R, F, S)},
    };
    return PRIV(gpt_alloc)(&m->block, bufs, sizeof bufs / sizeof bufs[0]);
}

/* The blocks (names and buffers exist). */
static int X(s2s_make_blocks_)(S2S *m)
{
    const mha_s2s_config *c = &m->cfg;
    m->enc = calloc(m->Le, sizeof *m->enc);
    m->dec = calloc(m->Ld, sizeof *m->dec);
    if (m->enc == NULL || m->dec == NULL)
        return MHA_ENOMEM;
    mha_block_config bc = {.dim = m->C, .heads = c->heads, .mlp_dim = c->mlp_dim,
                           .attn_dropout = c->attn_dropout, .resid_dropout = c->resid_dropout,
                           .ln_eps = c->ln_eps, .causal = 0, .init_layers = m->Le + m->Ld,
                           .threads = c->threads, .attn_mode = c->attn_mode,
                           .precision = c->precision};
    int st;
    for (size_t l = 0; l < m->Le; l++) {
        bc.seed = mha_s2s_block_seed(c->seed, m->Le, 0, l);
        const size_t at = m->enc_off + l * m->enc_n;
        if ((st = PRIV(block_create)(&m->enc[l], &bc, m->cap_b, m->Ts, &m->work, !c->no_init,
                                     m->params + at, m->grads + at)) != MHA_OK)
            return st;
    }
    for (size_t l = 0; l < m->Ld; l++) {
        bc.seed = mha_s2s_block_seed(c->seed, m->Le, 1, l);
        const size_t at = m->dec_off + l * m->dec_n;
        if ((st = X(decoder_block_create_)(&m->dec[l], &bc, m->cap_b, m->Tt, m->Ts, &m->work,
                                           !c->no_init, m->params + at, m->grads + at)) !=
            MHA_OK)
            return st;
    }
    return MHA_OK;
}

int mha_s2s_create(S2S **out, const mha_s2s_config *cfg, size_t max_batch)
{
    mha_s2s_config c;
    int st;
    if (out == NULL || max_batch == 0)
        return MHA_EINVAL;
    if ((st = X(s2s_config_resolve_)(cfg, &c)) != MHA_OK)
        return st;
    S2S *m = calloc(1, sizeof *m);
    if (m == NULL)
        return MHA_ENOMEM;
    m->cfg = c;
    m->C = c.dim;
    m->Vs = c.src_vocab;
    m->Vt = c.tgt_vocab;
    m->Ts = c.src_context;
    m->Tt = c.tgt_context;
    m->Le = c.enc_layers;
    m->Ld = c.dec_layers;
    m->cap_b = max_batch;
    m->threads = c.threads > 0 ? (size_t)c.threads : (size_t)omp_get_num_procs();
    m->e1 = 2 + MHA_BLOCK_NUM_TENSORS * m->Le;
    m->d0 = m->e1 + 4;
    m->d1 = m->d0 + MHA_DEC_BLOCK_NUM_TENSORS * m->Ld;
    m->n_tensors = m->d1 + 2 + (size_t)c.untied;
    const size_t C = m->C;
    size_t numel[SOWN_COUNT];
    if (__builtin_mul_overflow(m->Vs, C, &numel[SOWN_SRC_EMB]) ||
        __builtin_mul_overflow(m->Ts, C, &numel[SOWN_SRC_POS]) ||
        __builtin_mul_overflow(m->Vt, C, &numel[SOWN_TGT_EMB]) ||
        __builtin_mul_overflow(m->Tt, C, &numel[SOWN_TGT_POS])) {
        free(m);
        return MHA_EOVERFLOW;
    }
    numel[SOWN_ENC_LN_W] = numel[SOWN_ENC_LN_B] = numel[SOWN_DEC_LN_W] = numel[SOWN_DEC_LN_B] = C;
    numel[SOWN_OUT] = c.untied ? numel[SOWN_TGT_EMB] : 0;
    const mha_block_config bc = {.dim = C, .mlp_dim = c.mlp_dim};
    X(arena_ins_) blocks[2] = {{.before = SOWN_ENC_LN_W, .count = m->Le},
                               {.before = SOWN_DEC_LN_W, .count = m->Ld}};
    if ((st = PRIV(block_numel)(&bc, &blocks[0].size)) != MHA_OK ||
        (st = X(dec_numel_)(&bc, &blocks[1].size)) != MHA_OK ||
        (st = PRIV(arena_layout)(numel, SOWN_COUNT, blocks, 2, m->off, &m->n_params)) !=
            MHA_OK) {
        free(m);
        return st;
    }
    m->enc_off = blocks[0].at;
    m->enc_n = blocks[0].size;
    m->dec_off = blocks[1].at;
    m->dec_n = blocks[1].size;
    if ((st = X(s2s_alloc_)(m)) != MHA_OK) {
        free(m);
        return st;
    }
    if ((st = X(s2s_make_names_)(m)) != MHA_OK || (st = X(s2s_make_blocks_)(m)) != MHA_OK) {
        X(s2s_destroy)(m);
        return st;
    }
    if (!c.no_init) /* blocks: drawn as made, with these seeds; own tensors: here */
        X(s2s_reset_parameters)(m, c.seed);
    *out = m;
    return MHA_OK;
}

int mha_s2s_get_config(const S2S *m, mha_s2s_config *cfg)
{
    if (m == NULL || cfg == NULL)
        return MHA_EINVAL;
    *cfg = m->cfg;
    return MHA_OK;
}

size_t mha_s2s_max_batch(const S2S *m) { return m ? m->cap_b : 0; }
size_t mha_s2s_num_tensors(const S2S *m) { return m ? m->n_tensors : 0; }
size_t mha_s2s_scored(const S2S *m) { return m ? m->scored : 0; }

int mha_s2s_tensor_find(const S2S *m, const char *name, size_t *index)
{
    return m == NULL ? MHA_EINVAL : mha__tensor_find(m->name_of, m->n_tensors, name, index);
}

int mha_s2s_param_count(const S2S *m, size_t *count)
{
    /* the arena holds every tensor, nothing else */
    return mha__get_size(m ? &m->n_params : NULL, count);
}

int mha_s2s_tensor(S2S *m, size_t i, mha_param_info *info, REAL **param, REAL **grad)
{
    if (m == NULL || i >= m->n_tensors)
        return MHA_EINVAL;
    if (m->decode_only && param) /* laid out for decoding (s2s_decode_only) */
        return MHA_ESTATE;
    const int own = X(s2s_own_of_)(m, i);
    int st = MHA_OK;
    if (own == -1 || own == -2) {
        if (own == -1)
            st = X(block_tensor)(m->enc[(i - 2) / MHA_BLOCK_NUM_TENSORS],
                                 (i - 2) % MHA_BLOCK_NUM_TENSORS, info, param, grad);
        else
            st = X(decoder_block_tensor)(m->dec[(i - m->d0) / MHA_DEC_BLOCK_NUM_TENSORS],
                                         (i - m->d0) % MHA_DEC_BLOCK_NUM_TENSORS, info, param,
                                         grad);
        if (st == MHA_OK && info)
            info->name = m->name_of[i];
        return st;
    }
    mha_param_info in = {.name = m->name_of[i], .ndim = 1, .shape = {m->C, 0}};
    switch (own) {
    case SOWN_SRC_EMB: in.ndim = 2; in.shape[0] = m->Vs; in.role = MHA_ROLE_EMBEDDING; break;
    case SOWN_SRC_POS: in.ndim = 2; in.shape[0] = m->Ts; in.role = MHA_ROLE_EMBEDDING; break;
    case SOWN_TGT_EMB: in.ndim = 2; in.shape[0] = m->Vt; in.role = MHA_ROLE_EMBEDDING; break;
    case SOWN_TGT_POS: in.ndim = 2; in.shape[0] = m->Tt; in.role = MHA_ROLE_EMBEDDING; break;
    case SOWN_OUT: in.ndim = 2; in.shape[0] = m->Vt; in.role = MHA_ROLE_WEIGHT; break;
    case SOWN_ENC_LN_W: case SOWN_DEC_LN_W: in.role = MHA_ROLE_NORM_WEIGHT; break;
    default: in.role = MHA_ROLE_NORM_BIAS; break;
    }
    if (in.ndim == 2)
        in.shape[1] = m->C;
    in.decay = in.role == MHA_ROLE_WEIGHT;
    return PRIV(gpt_own_tensor)(in, m->params, m->grads, m->off[own], info, param, grad);
}

int mha_s2s_reset_parameters(S2S *m, uint64_t seed)
{
    if (m == NULL)
        return MHA_EINVAL;
    if (m->decode_only)
        return MHA_ESTATE;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, MHA_PCG32_STREAM_GPT_INIT);
    for (size_t i = 0; i < m->n_tensors; i++) { /* the model's own, in tensor order */
        if (X(s2s_own_of_)(m, i) < 0)
            continue;
        mha_param_info in;
        REAL *p;
        X(s2s_tensor)(m, i, &in, &p, NULL);
        PRIV(gpt_init_tensor)(p, in.numel, in.role, m->Le + m->Ld, &rng);
    }
    for (size_t l = 0; l < m->Le; l++)
        X(block_reset_parameters)(m->enc[l], mha_s2s_block_seed(seed, m->Le, 0, l));
    for (size_t l = 0; l < m->Ld; l++)
        X(decoder_block_reset_parameters)(m->dec[l], mha_s2s_block_seed(seed, m->Le, 1, l));
    return MHA_OK;
}

int mha_s2s_zero_grad(S2S *m)
{
    return PRIV(arena_zero)(m ? m->grads : NULL, m ? m->n_params : 0);
}

/* NULL for a model laid out for decoding (s2s_decode_only) */
REAL *mha_s2s_params(S2S *m, size_t *count)
{
    return PRIV(arena_view)(m && !m->decode_only ? m->params : NULL, m ? m->n_params : 0, count);
}

REAL *mha_s2s_grads(S2S *m, size_t *count)
{
    return PRIV(arena_view)(m ? m->grads : NULL, m ? m->n_params : 0, count);
}

BLOCK *mha_s2s_encoder_block(S2S *m, size_t l) { return m && l < m->Le ? m->enc[l] : NULL; }
DEC *mha_s2s_decoder_block(S2S *m, size_t l) { return m && l < m->Ld ? m->dec[l] : NULL; }

int mha_s2s_get_call_index(const S2S *m, uint64_t *n)
{
    return mha__get_u64(m ? &m->call : NULL, n);
}

/* Block l's counter `what` (PRIV(model_set_counter)): the encoder's blocks, then the
 * decoder's. */
static void X(s2s_set_block_counter_)(void *model, size_t l, int what, uint64_t v)
{
    const S2S *m = model;
    if (l < m->Le && what == MHA__COUNTER_OFFSET)
        X(block_set_dropout_batch_offset)(m->enc[l], v);
    else if (l < m->Le)
        X(block_set_call_index)(m->enc[l], v);
    else if (what == MHA__COUNTER_OFFSET)
        X(decoder_block_set_dropout_batch_offset)(m->dec[l - m->Le], v);
    else
        X(decoder_block_set_call_index)(m->dec[l - m->Le], v);
}

int mha_s2s_set_call_index(S2S *m, uint64_t n)
{
    return PRIV(model_set_counter)(m, m ? &m->call : NULL, m ? m->Le + m->Ld : 0,
                                   X(s2s_set_block_counter_), MHA__COUNTER_CALL, n);
}

int mha_s2s_set_dropout_batch_offset(S2S *m, uint64_t first)
{
    return PRIV(model_set_counter)(m, m ? &m->b0 : NULL, m ? m->Le + m->Ld : 0,
                                   X(s2s_set_block_counter_), MHA__COUNTER_OFFSET, first);
}

#include "s2s_forward.inc" /* forward, backward and the saved activations */

#include "s2s_infer.inc"  /* decoding states: mha_s2s_infer_* */
#include "s2s_decode.inc" /* greedy, beam search, forced decoding */

#undef BLOCK
#undef DEC
#undef S2S
#undef SINF

#ifndef MHA_DOUBLE /* the untyped helper of include/mha_s2s.h, once */
uint64_t mha_s2s_block_seed(uint64_t seed, size_t enc_layers, int decoder, size_t l)
{
    return mha_gpt_block_seed(seed, decoder ? enc_layers + l : l);
}
#endif /* !MHA_DOUBLE */
