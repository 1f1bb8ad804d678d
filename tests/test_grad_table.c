/*
 * One table of gradient cases, one runner (as ggml's test-backend-ops): the attention
 * module (self- and cross-attention, every mask rule, dropout, both attention modes), the
 * block (causal, or bidirectional with the encoder's key lengths), the decoder block
 * (causal self-attention, cross-attention over a padded source), the GPT and the
 * encoder–decoder model. A row is a kind and its sizes, dropout, attention mode, masks,
 * lengths and seed; the runner checks every row five ways:
 *   1. finite differences: every element of every tensor — the parameters, and the inputs
 *      (the module's x_query and x_context, a block's x and mem) — against central
 *      differences in float64, |a − n| <= 1e-7 + 1e-6·|n| (100× tighter than
 *      torch.autograd.gradcheck), every element compared (random ±1 directions for the
 *      module's larger shapes; under CI's valgrind pass three per tensor in the other
 *      rows: fd_directions); dropout masks replayed by rewinding the call counter before
 *      each evaluation. The loss is Σ R ⊙ y for the module and a block (R fixed and random:
 *      Σ y through a softmax would hide bugs), the model's own mean (label-smoothed)
 *      cross-entropy for a model, with unscored target positions (s2s_distill: with a
 *      distillation term towards random teacher distributions);
 *   2. accumulation: a second forward + backward without zeroing gives twice every
 *      gradient, the inputs' too (1e-15 + 1e-12 relative); zero_grad clears every
 *      parameter gradient;
 *   3. the thread count: the row made with 1 thread gives the 2-thread row's loss (1e-13
 *      relative: the dropout masks are the same) and gradients (relative L2 1e-12 per
 *      tensor; w_k.bias, whose exact gradient is 0 by softmax's shift invariance, on the
 *      scale of its w_k.weight);
 *   4. what a kind adds: a block's backward does not read the caller's lengths again (they
 *      are overwritten between forward and backward: a RECOMPUTE backward must use its
 *      copy), the decoder's dmem is exactly 0 at padded source rows, a model has the
 *      documented number of tensors, a positive finite loss and counts its scored targets;
 *   5. float32 against float64: the float object of the same configuration, on the same
 *      parameters and inputs rounded to float, gives the output within 1e-5 in relative L2
 *      (a model: the loss within 1e-5 relative) and every gradient within 1e-4 in relative
 *      L2 (w_k.bias on the scale of w_k.weight); the module's w_k.bias gradient is ~0 in
 *      both precisions.
 * The parameters of blocks and models are uniform in ±0.5 (LayerNorm weights in [0.5, 1.5]:
 * fill_param), not the GPT-2 init, whose LayerNorm weights of 1 and zero biases would hide
 * transposition bugs; the module keeps its own (PyTorch's) initialisation, whose biases are
 * not zero. The rows keep the sizes, seeds and call indices of the checks they replaced in
 * tests/test_mha_grad.c (now gone; module_odd_dropout was its float32 comparison),
 * tests/test_gpt.c and tests/test_s2s.c: every element those compared is compared here,
 * with the same tolerances; gpt_three_rows, s2s_four_pairs_dropout and
 * s2s_untied are the configurations of those files' thread-count and accumulation tests,
 * now with random parameters and checked every way (their thread bounds were 1e-13 / 1e-12
 * for the GPT and 1e-12 / 1e-10 for the encoder–decoder; every row now has the tighter).
 * Tests are named grad_<row>.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "test_util.h"

#define GC_ATOL 1e-7
#define GC_RTOL 1e-6
#define ACC_ATOL 1e-15
#define ACC_RTOL 1e-12
#define THREADS_LOSS_RTOL 1e-13
#define THREADS_GRAD_RTOL 1e-12

typedef enum kind { MODULE, BLOCK, DECODER, GPT, S2S } kind;
/* The attention module's context and mask (MODULE rows). */
enum { CTX_SELF, CTX_CROSS, CTX_SAME_BUF }; /* x_context NULL; its own; the x_query buffer */
enum { MASK_NONE, MASK_BROADCAST, MASK_PER_HEAD }; /* [B,1,Sq,Sk] with a fully masked row;
                                                       [1,H,Sq,Sk]                       */

/* A row of the table. The module: B sequences of T queries over S keys (cross-attention;
 * self-attention: S = T) of width C, H heads, dropout p_attn, its context and mask, key
 * lengths (klen: the first S, then shorter, the last 0), finite differences on `dirs` random
 * directions (0: every element). Blocks: B·T rows of width C (H heads, MLP F; 0: 4C), made
 * with capacities above the sizes used (strides must follow the forward's sizes). Models:
 * cfg (threads set by the runner), B pairs of S source and T target positions. */
typedef struct gcase {
    const char *name;
    kind k;
    size_t B, T, S;
    size_t C, H, F;
    double p_attn, p_resid;
    int causal;
    mha_attn_mode mode;
    const size_t *len;    /* [B]: key lengths (BLOCK), source lengths (DECODER, S2S); or NULL */
    uint64_t seed, call0; /* parameters and inputs; the call index every forward starts at */
    const mha_gpt_config *gpt;
    const mha_s2s_config *s2s;
    int ctx, mask, klen;  /* MODULE */
    size_t dirs;
    int no_fd; /* sizes for the parallel paths: finite differences are the small rows' */
    double distill; /* S2S: weight of a distillation term (s2s_forward_distill) towards
                       random teacher distributions; 0: s2s_forward                    */
} gcase;

/* The GPT of the checks: V 7, context 6, 2 layers, H 2, C 8. */
#define GPT_SMALL(pa, pr, sd)                                                                \
    (&(const mha_gpt_config){.vocab = 7, .context = 6, .layers = 2, .heads = 2, .dim = 8,     \
                             .attn_dropout = (pa), .resid_dropout = (pr), .seed = (sd)})
/* The encoder–decoder of the checks: Vs 7, Vt 9, contexts 6, 2 + 2 layers, H 2, C 8, F 12;
 * label smoothing ls, untied read-out un, attention mode md. */
#define S2S_SMALL(pa, pr, ls, un, md, sd)                                                    \
    (&(const mha_s2s_config){.src_vocab = 7, .tgt_vocab = 9, .src_context = 6,                \
                             .tgt_context = 6, .enc_layers = 2, .dec_layers = 2, .heads = 2,  \
                             .dim = 8, .mlp_dim = 12, .attn_dropout = (pa),                   \
                             .resid_dropout = (pr), .label_smoothing = (ls), .untied = (un),  \
                             .attn_mode = (md), .seed = (sd)})
#define LENS(...) ((const size_t[]){__VA_ARGS__})
#define STORED MHA_ATTN_STORED
#define RECOMP MHA_ATTN_RECOMPUTE

/* A module case in both attention modes; its seed from its sizes. */
#define MODULE_ROWS(nm, b, sq, d, ...)                                                       \
    {.name = "module_" nm, .k = MODULE, .B = (b), .T = (sq), .C = (d), .mode = STORED,       \
     .seed = 1000 + (b) * 7 + (sq) * 11 + (d), .call0 = 5, __VA_ARGS__},                     \
    {.name = "module_" nm "_recompute", .k = MODULE, .B = (b), .T = (sq), .C = (d),          \
     .mode = RECOMP, .seed = 1000 + (b) * 7 + (sq) * 11 + (d), .call0 = 5, __VA_ARGS__}

static const gcase CASES[] = {
    /* the attention module: self-attention as the seed's mha(x, None); cross-attention
     * Sq != Sk; causal; a broadcast mask with a fully masked row; a per-head mask; key
     * lengths with a 0; dropout 0.3, and 0.5 with cross-attention and causal; H = 1; H = D;
     * odd sizes with every mask rule at once; x_context the same buffer as x_query (dL/dx
     * sums both paths); random directions at larger shapes: heads large enough (48·48·16
     * multiply-adds a product) for BLAS where OpenBLAS is the OpenMP build, several row and
     * key blocks of the memory-efficient mode (Sq 40 > 32, Sk 300 > 2·128), long causal
     * self-attention with key lengths (300, 298, 0) */
    MODULE_ROWS("self", 2, 4, 8, .H = 2),
    MODULE_ROWS("cross", 2, 3, 8, .H = 2, .S = 5, .ctx = CTX_CROSS),
    MODULE_ROWS("causal", 2, 5, 8, .H = 2, .causal = 1),
    MODULE_ROWS("broadcast_mask", 2, 4, 8, .H = 2, .S = 6, .ctx = CTX_CROSS,
                .mask = MASK_BROADCAST),
    MODULE_ROWS("per_head_mask", 2, 4, 9, .H = 3, .mask = MASK_PER_HEAD),
    MODULE_ROWS("key_lengths", 3, 3, 8, .H = 2, .S = 6, .ctx = CTX_CROSS, .klen = 1),
    MODULE_ROWS("dropout", 2, 5, 8, .H = 2, .p_attn = 0.3),
    MODULE_ROWS("dropout_cross_causal", 2, 4, 6, .H = 3, .S = 6, .ctx = CTX_CROSS, .causal = 1,
                .p_attn = 0.5),
    MODULE_ROWS("one_head", 2, 4, 6, .H = 1, .causal = 1),
    MODULE_ROWS("heads_eq_dim", 2, 4, 6, .H = 6),
    MODULE_ROWS("odd_sizes", 3, 5, 12, .H = 3, .S = 7, .ctx = CTX_CROSS, .mask = MASK_BROADCAST,
                .causal = 1, .klen = 1),
    MODULE_ROWS("context_same_buffer", 2, 4, 8, .H = 2, .ctx = CTX_SAME_BUF, .p_attn = 0.2),
    MODULE_ROWS("large_directions", 2, 24, 32, .H = 4, .S = 40, .ctx = CTX_CROSS,
                .mask = MASK_BROADCAST, .p_attn = 0.1, .dirs = 8),
    MODULE_ROWS("blas_heads", 2, 48, 32, .H = 2, .S = 48, .ctx = CTX_CROSS, .causal = 1,
                .p_attn = 0.2, .dirs = 4),
    MODULE_ROWS("multi_block_masks", 2, 40, 8, .H = 2, .S = 300, .ctx = CTX_CROSS,
                .mask = MASK_BROADCAST, .klen = 1, .p_attn = 0.3, .dirs = 4),
    MODULE_ROWS("multi_block_causal", 3, 300, 8, .H = 2, .causal = 1, .klen = 1, .p_attn = 0.25,
                .dirs = 4),
    /* every mask rule but key lengths, with dropout 0.3 (the float32 comparison's case) */
    {.name = "module_odd_dropout", .k = MODULE, .B = 3, .T = 5, .S = 7, .C = 12, .H = 3,
     .ctx = CTX_CROSS, .mask = MASK_BROADCAST, .causal = 1, .p_attn = 0.3, .mode = STORED,
     .seed = 4242, .call0 = 5},
    /* the GPT block: causal; dropout; odd sizes, one head, bidirectional, RECOMPUTE */
    {.name = "block_causal", .k = BLOCK, .B = 2, .T = 5, .C = 8, .H = 2, .causal = 1, .seed = 11,
     .call0 = 3},
    {.name = "block_causal_dropout", .k = BLOCK, .B = 2, .T = 5, .C = 8, .H = 2, .p_attn = 0.2,
     .p_resid = 0.25, .causal = 1, .seed = 12, .call0 = 3},
    {.name = "block_odd_recompute", .k = BLOCK, .B = 3, .T = 3, .C = 6, .H = 1, .p_attn = 0.1,
     .p_resid = 0.3, .mode = RECOMP, .seed = 13, .call0 = 3},
    /* sizes at which the block's loops run on both threads (LayerNorm rows, the products'
     * row split, the attention heads), so that the thread check sees the parallel paths;
     * no finite differences here (a ±1 direction over 16,384 inputs is too coarse a step
     * for 1e-6: the small rows check the arithmetic) */
    {.name = "block_parallel", .k = BLOCK, .B = 4, .T = 64, .C = 64, .H = 2, .p_attn = 0.1,
     .p_resid = 0.1, .causal = 1, .seed = 14, .call0 = 3, .no_fd = 1},
    /* the encoder block: bidirectional, key lengths {5,2,1}; both modes, with and without
     * dropout (attention 0.2 / residual 0.25, 0.15 / 0.2) */
    {.name = "encoder_block", .k = BLOCK, .B = 3, .T = 5, .C = 8, .H = 2, .F = 12,
     .len = LENS(5, 2, 1), .seed = 201, .call0 = 4},
    {.name = "encoder_block_dropout", .k = BLOCK, .B = 3, .T = 5, .C = 8, .H = 2, .F = 12,
     .p_attn = 0.2, .p_resid = 0.25, .len = LENS(5, 2, 1), .seed = 202, .call0 = 4},
    {.name = "encoder_block_recompute", .k = BLOCK, .B = 3, .T = 5, .C = 8, .H = 2, .F = 12,
     .mode = RECOMP, .len = LENS(5, 2, 1), .seed = 203, .call0 = 4},
    {.name = "encoder_block_recompute_dropout", .k = BLOCK, .B = 3, .T = 5, .C = 8, .H = 2,
     .F = 12, .p_attn = 0.15, .p_resid = 0.2, .mode = RECOMP, .len = LENS(5, 2, 1), .seed = 204,
     .call0 = 4},
    /* the decoder block: S > T and S < T, padded sources, both modes, dropout; src_len NULL */
    {.name = "decoder_block_long_source", .k = DECODER, .B = 3, .T = 4, .S = 6, .C = 8, .H = 2,
     .F = 12, .len = LENS(6, 3, 1), .seed = 301, .call0 = 6},
    {.name = "decoder_block_long_source_dropout_recompute", .k = DECODER, .B = 3, .T = 4, .S = 6,
     .C = 8, .H = 2, .F = 12, .p_attn = 0.2, .p_resid = 0.25, .mode = RECOMP,
     .len = LENS(6, 3, 1), .seed = 302, .call0 = 6},
    {.name = "decoder_block_short_source_dropout", .k = DECODER, .B = 3, .T = 5, .S = 3, .C = 8,
     .H = 2, .F = 12, .p_attn = 0.15, .p_resid = 0.2, .len = LENS(2, 1, 3),
     .seed = 303, .call0 = 6},
    {.name = "decoder_block_short_source_recompute", .k = DECODER, .B = 2, .T = 5, .S = 3, .C = 8,
     .H = 2, .F = 12, .mode = RECOMP, .len = LENS(1, 3), .seed = 304, .call0 = 6},
    {.name = "decoder_block_no_lengths", .k = DECODER, .B = 2, .T = 3, .S = 4, .C = 8, .H = 2,
     .F = 12, .seed = 305, .call0 = 6},
    {.name = "decoder_block_parallel", .k = DECODER, .B = 4, .T = 64, .S = 48, .C = 64, .H = 2,
     .p_attn = 0.1, .p_resid = 0.1, .mode = RECOMP, .len = LENS(48, 30, 1, 17), .seed = 306,
     .call0 = 6, .no_fd = 1},
    /* the GPT: embeddings, tied read-out, 2 blocks, ln_f; T < context; every dropout on */
    {.name = "gpt", .k = GPT, .B = 2, .T = 5, .seed = 21, .call0 = 5,
     .gpt = GPT_SMALL(0.0, 0.0, 21)},
    {.name = "gpt_dropout", .k = GPT, .B = 2, .T = 6, .seed = 22, .call0 = 5,
     .gpt = GPT_SMALL(0.15, 0.2, 22)},
    {.name = "gpt_three_rows", .k = GPT, .B = 3, .T = 6, .seed = 71, .call0 = 5,
     .gpt = GPT_SMALL(0.2, 0.2, 71)},
    /* the encoder–decoder: S > T, a length-1 source, label smoothing, tied; S < T, untied,
     * dropout; S = T, RECOMPUTE; odd sizes (below); four pairs with every dropout on;
     * untied without dropout */
    {.name = "s2s_long_source_smoothed", .k = S2S, .B = 3, .T = 4, .S = 6, .len = LENS(6, 3, 1),
     .seed = 401, .call0 = 5, .s2s = S2S_SMALL(0.0, 0.0, 0.1, 0, STORED, 401)},
    {.name = "s2s_short_source_untied_dropout", .k = S2S, .B = 3, .T = 4, .S = 3,
     .len = LENS(3, 1, 2), .seed = 402, .call0 = 5,
     .s2s = S2S_SMALL(0.1, 0.1, 0.0, 1, STORED, 402)},
    {.name = "s2s_recompute_dropout_smoothed", .k = S2S, .B = 3, .T = 4, .S = 4,
     .len = LENS(2, 4, 1), .seed = 403, .call0 = 5,
     .s2s = S2S_SMALL(0.1, 0.1, 0.1, 0, RECOMP, 403)},
    /* odd sizes, Le != Ld: 1 + 2 layers, C 6 with H 3 (head size 2), F 4·C, Vs 5, Vt 4;
     * untied, label smoothing 0.2, dropout 0.1, S > T */
    {.name = "s2s_odd_sizes", .k = S2S, .B = 3, .T = 3, .S = 4, .len = LENS(4, 1, 2), .seed = 404,
     .call0 = 5,
     .s2s = &(const mha_s2s_config){.src_vocab = 5, .tgt_vocab = 4, .src_context = 5,
                                    .tgt_context = 4, .enc_layers = 1, .dec_layers = 2,
                                    .heads = 3, .dim = 6, .attn_dropout = 0.1,
                                    .resid_dropout = 0.1, .label_smoothing = 0.2, .untied = 1,
                                    .seed = 404}},
    {.name = "s2s_four_pairs_dropout", .k = S2S, .B = 4, .T = 6, .S = 6, .len = LENS(6, 3, 1, 5),
     .seed = 854, .call0 = 5, .s2s = S2S_SMALL(0.2, 0.2, 0.1, 0, STORED, 854)},
    {.name = "s2s_untied", .k = S2S, .B = 2, .T = 4, .S = 5, .len = LENS(5, 2), .seed = 841,
     .call0 = 5, .s2s = S2S_SMALL(0.0, 0.0, 0.1, 1, STORED, 841)},
    /* the loss with a distillation term: label smoothing, dropout, weight 0.4 */
    {.name = "s2s_distill", .k = S2S, .B = 3, .T = 4, .S = 5, .len = LENS(5, 2, 4), .seed = 405,
     .call0 = 5, .s2s = S2S_SMALL(0.1, 0.1, 0.1, 0, STORED, 405), .distill = 0.4},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

/* ---- a row made: the object, its inputs and the gradients of those ---------------------- */

typedef struct run {
    const gcase *c;
    int training;
    mhad_module *mod;
    mhad_cache *cache;
    size_t Sk;                 /* the module's keys                                      */
    uint8_t *mask_data;
    size_t *klens;
    mha_mask mask;
    const mha_mask *mask_arg;  /* &mask, or NULL when the row has no mask rule           */
    mhad_block *blk;
    mhad_decoder_block *dec;
    mhad_gpt *g;
    mhad_s2s *m;
    size_t n, nm;              /* module, blocks: elements of x (and y, r, dx), of mem   */
    double *x, *mem, *y, *r, *dx, *dmem; /* (dmem; the module: x_context, dx_context)    */
    size_t lens[8];            /* the lengths the forward is given (c->len, copied)      */
    int32_t *src, *tgt, *targets; /* models (the GPT: tokens tgt, targets)              */
    double *soft;              /* S2S with distill: teacher distributions [B·T, Vt]      */
    size_t scored;
} run;

static mha_block_config block_config(const gcase *c, int threads)
{
    return (mha_block_config){.dim = c->C, .heads = c->H, .mlp_dim = c->F,
                              .attn_dropout = c->p_attn, .resid_dropout = c->p_resid,
                              .causal = c->causal, .init_layers = 2, .seed = c->seed,
                              .threads = threads, .attn_mode = c->mode};
}

/* The module's masks, drawn from PCG32(seed + 4, 7) as the row asks. */
static void module_masks(run *r)
{
    const gcase *c = r->c;
    const size_t B = c->B, Sq = c->T, Sk = r->Sk, H = c->H;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, c->seed + 4, 7);
    if (c->mask == MASK_BROADCAST) {
        r->mask_data = xmalloc(B * Sq * Sk);
        for (size_t e = 0; e < B * Sq * Sk; e++)
            r->mask_data[e] = mha_pcg32_next(&rng) % 4 != 0; /* ~25% masked */
        memset(r->mask_data + (1 * Sq + 0) * Sk, 0, Sk);     /* batch 1 row 0: all masked */
        r->mask.mask = r->mask_data;
        r->mask.mask_batch = B;
        r->mask.mask_heads = 1;
    } else if (c->mask == MASK_PER_HEAD) {
        r->mask_data = xmalloc(H * Sq * Sk);
        for (size_t e = 0; e < H * Sq * Sk; e++)
            r->mask_data[e] = mha_pcg32_next(&rng) % 3 != 0;
        r->mask.mask = r->mask_data;
        r->mask.mask_batch = 1;
        r->mask.mask_heads = H;
    }
    r->mask.causal = c->causal;
    if (c->klen) {
        r->klens = xmalloc(B * sizeof *r->klens);
        for (size_t b = 0; b < B; b++) /* Sk, then shorter, the last batch 0 */
            r->klens[b] = b + 1 == B ? 0 : Sk - (b * 2 < Sk ? b * 2 : Sk - 1);
        r->mask.key_lengths = r->klens;
    }
    r->mask_arg = (c->mask != MASK_NONE || c->causal || c->klen) ? &r->mask : NULL;
}

/* The inputs x [n] (seed s) and loss weights R (seed s + 1), uniform in ±1; y; dx = 0. */
static void make_inputs(run *r, size_t n, uint64_t s)
{
    r->n = n;
    r->x = xmalloc(n * sizeof(double));
    r->r = xmalloc(n * sizeof(double));
    r->y = xmalloc(n * sizeof(double));
    r->dx = xcalloc(n, sizeof(double));
    fill_uniform(r->x, n, -1.0, 1.0, s);
    fill_uniform(r->r, n, -1.0, 1.0, s + 1);
}

/* The second input mem [nm] (the module's x_context), uniform in ±1 (seed s); dmem = 0. */
static void make_mem(run *r, size_t nm, uint64_t s)
{
    r->nm = nm;
    r->mem = xmalloc(nm * sizeof(double));
    r->dmem = xcalloc(nm, sizeof(double));
    fill_uniform(r->mem, nm, -1.0, 1.0, s);
}

static void make_attention(run *r, const gcase *c, int threads)
{
    r->Sk = c->ctx == CTX_CROSS ? c->S : c->T;
    const mha_config cfg = {.model_dim = c->C, .num_heads = c->H, .dropout_p = c->p_attn,
                            .seed = c->seed, .threads = threads};
    assert_int_equal(mhad_create(&r->mod, &cfg), MHA_OK);
    assert_int_equal(mhad_cache_create_mode(&r->cache, r->mod, c->B, c->T, r->Sk, c->mode),
                     MHA_OK);
    make_inputs(r, c->B * c->T * c->C, c->seed + 1);
    if (c->ctx == CTX_CROSS)
        make_mem(r, c->B * r->Sk * c->C, c->seed + 3);
    module_masks(r);
}

/* The module's x_context and dx_context (the x_query buffers for CTX_SAME_BUF). */
static const double *module_ctx(const run *r)
{
    return r->c->ctx == CTX_CROSS ? r->mem : r->c->ctx == CTX_SAME_BUF ? r->x : NULL;
}
static double *module_dctx(const run *r)
{
    return r->c->ctx == CTX_CROSS ? r->dmem : r->c->ctx == CTX_SAME_BUF ? r->dx : NULL;
}

static void make(run *r, const gcase *c, int threads)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->training = c->p_attn > 0 || c->p_resid > 0;
    if (c->k == MODULE) {
        make_attention(r, c, threads);
        return;
    }
    if (c->k == BLOCK || c->k == DECODER) {
        const mha_block_config cfg = block_config(c, threads);
        if (c->k == BLOCK) {
            assert_int_equal(mhad_block_create(&r->blk, &cfg, c->B + 1, c->T + 2), MHA_OK);
            randomize_block(r->blk, c->seed);
        } else {
            assert_int_equal(mhad_decoder_block_create(&r->dec, &cfg, c->B + 1, c->T + 1,
                                                       c->S + 2), MHA_OK);
            randomize_dec(r->dec, c->seed);
            make_mem(r, c->B * c->S * c->C, c->seed + 102);
        }
        make_inputs(r, c->B * c->T * c->C, c->seed + 100);
        return;
    }
    const size_t nt = c->B * c->T;
    r->tgt = xmalloc(nt * sizeof(int32_t));
    r->targets = xmalloc(nt * sizeof(int32_t));
    if (c->k == GPT) {
        mha_gpt_config cfg = *c->gpt;
        cfg.threads = threads;
        r->training = cfg.attn_dropout > 0 || cfg.resid_dropout > 0;
        assert_int_equal(mhad_gpt_create(&r->g, &cfg, c->B), MHA_OK);
        randomize_gpt(r->g, c->seed);
        fill_ids(r->tgt, nt, 0, (int32_t)cfg.vocab, c->seed + 1);
        fill_ids(r->targets, nt, 0, (int32_t)cfg.vocab, c->seed + 2);
        r->targets[1] = -1; /* a position without a target */
        return;
    }
    mha_s2s_config cfg = *c->s2s;
    cfg.threads = threads;
    r->training = cfg.attn_dropout > 0 || cfg.resid_dropout > 0;
    assert_int_equal(mhad_s2s_create(&r->m, &cfg, c->B), MHA_OK);
    randomize_s2s(r->m, c->seed);
    r->src = xmalloc(c->B * c->S * sizeof(int32_t));
    fill_ids(r->src, c->B * c->S, 0, (int32_t)cfg.src_vocab, c->seed + 1);
    fill_ids(r->tgt, nt, 0, (int32_t)cfg.tgt_vocab, c->seed + 2);
    fill_ids(r->targets, nt, 0, (int32_t)cfg.tgt_vocab, c->seed + 3);
    /* unscored positions: one inside a row, the tail of another */
    r->targets[1] = -1;
    r->targets[2 * c->T - 1] = -1;
    if (c->T > 2)
        r->targets[2 * c->T - 2] = -1;
    for (size_t i = 0; i < nt; i++)
        r->scored += r->targets[i] >= 0;
    if (c->distill > 0) { /* each row a distribution, none of its elements 0 */
        const size_t V = cfg.tgt_vocab;
        r->soft = xmalloc(nt * V * sizeof *r->soft);
        fill_uniform(r->soft, nt * V, 0.05, 1.0, c->seed + 6);
        for (size_t i = 0; i < nt; i++) {
            double sum = 0;
            for (size_t v = 0; v < V; v++)
                sum += r->soft[i * V + v];
            for (size_t v = 0; v < V; v++)
                r->soft[i * V + v] /= sum;
        }
    }
}

static void destroy(run *r)
{
    mhad_cache_destroy(r->cache);
    mhad_destroy(r->mod);
    free(r->mask_data);
    free(r->klens);
    mhad_block_destroy(r->blk);
    mhad_decoder_block_destroy(r->dec);
    mhad_gpt_destroy(r->g);
    mhad_s2s_destroy(r->m);
    void *own[] = {r->x,   r->mem, r->y,   r->r,       r->dx,
                   r->dmem, r->src, r->tgt, r->targets, r->soft};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        free(own[i]);
}

/* The lengths the forward reads: a copy of the row's, NULL without. */
static const size_t *lengths(run *r)
{
    if (!r->c->len)
        return NULL;
    assert_true(r->c->B <= sizeof r->lens / sizeof r->lens[0]);
    memcpy(r->lens, r->c->len, r->c->B * sizeof *r->lens);
    return r->lens;
}

/* The loss (mha_gc_loss_fn): the forward at the row's call index, so every evaluation
 * sees the same dropout masks. */
static int loss_fn(void *ctx, double *loss)
{
    run *r = ctx;
    const gcase *c = r->c;
    int st;
    switch (c->k) {
    case MODULE:
        st = mhad_set_call_index(r->mod, c->call0);
        if (st == MHA_OK)
            st = mhad_forward(r->mod, r->cache, r->training, c->B, c->T, r->x, r->Sk,
                              module_ctx(r), r->mask_arg, r->y);
        break;
    case BLOCK:
        st = mhad_block_set_call_index(r->blk, c->call0);
        if (st == MHA_OK && c->len)
            st = mhad_block_forward_lengths(r->blk, r->training, c->B, c->T, r->x, lengths(r),
                                            r->y);
        else if (st == MHA_OK)
            st = mhad_block_forward(r->blk, r->training, c->B, c->T, r->x, r->y);
        break;
    case DECODER:
        st = mhad_decoder_block_set_call_index(r->dec, c->call0);
        if (st == MHA_OK)
            st = mhad_decoder_block_forward(r->dec, r->training, c->B, c->T, r->x, c->S, r->mem,
                                            lengths(r), r->y);
        break;
    case GPT:
        st = mhad_gpt_set_call_index(r->g, c->call0);
        return st == MHA_OK ? mhad_gpt_forward(r->g, r->training, c->B, c->T, r->tgt,
                                               r->targets, loss)
                            : st;
    default:
        st = mhad_s2s_set_call_index(r->m, c->call0);
        if (st == MHA_OK && c->distill > 0)
            return mhad_s2s_forward_distill(r->m, r->training, c->B, c->S, r->src, c->len, c->T,
                                            r->tgt, r->targets, r->soft, c->distill, loss);
        return st == MHA_OK ? mhad_s2s_forward(r->m, r->training, c->B, c->S, r->src, c->len,
                                               c->T, r->tgt, r->targets, loss)
                            : st;
    }
    if (st != MHA_OK)
        return st;
    double s = 0.0;
    for (size_t i = 0; i < r->n; i++)
        s += r->r[i] * r->y[i];
    *loss = s;
    return MHA_OK;
}

/* Backward of the last forward (dy = R for a block), adding into every gradient. The
 * lengths the forward read are overwritten first: backward must use its own copy. */
static void backward(run *r)
{
    for (size_t b = 0; b < sizeof r->lens / sizeof r->lens[0]; b++)
        r->lens[b] = r->c->k == BLOCK ? r->c->T : r->c->S;
    switch (r->c->k) {
    case MODULE:
        assert_int_equal(mhad_backward(r->mod, r->cache, r->x, module_ctx(r), r->r, r->dx,
                                       module_dctx(r)), MHA_OK);
        break;
    case BLOCK:
        assert_int_equal(mhad_block_backward(r->blk, r->x, r->r, r->dx), MHA_OK);
        break;
    case DECODER:
        assert_int_equal(mhad_decoder_block_backward(r->dec, r->x, r->mem, r->r, r->dx, r->dmem),
                         MHA_OK);
        break;
    case GPT: assert_int_equal(mhad_gpt_backward(r->g), MHA_OK); break;
    default: assert_int_equal(mhad_s2s_backward(r->m), MHA_OK); break;
    }
}

static void zero_grad(run *r)
{
    switch (r->c->k) {
    case MODULE: assert_int_equal(mhad_zero_grad(r->mod), MHA_OK); break;
    case BLOCK: assert_int_equal(mhad_block_zero_grad(r->blk), MHA_OK); break;
    case DECODER: assert_int_equal(mhad_decoder_block_zero_grad(r->dec), MHA_OK); break;
    case GPT: assert_int_equal(mhad_gpt_zero_grad(r->g), MHA_OK); break;
    default: assert_int_equal(mhad_s2s_zero_grad(r->m), MHA_OK); break;
    }
}

/* The module's parameter tensor i: its name, values and gradients. */
static void module_tensor(run *r, size_t i, mha_gc_tensor *t)
{
    mha_tensor_info info;
    assert_int_equal(mha_tensor_info_at(r->c->C, i, &info), MHA_OK);
    *t = (mha_gc_tensor){.name = info.name, .value = mhad_params(r->mod, NULL) + info.offset,
                         .grad = mhad_grads(r->mod, NULL) + info.offset, .n = info.numel};
}

/* The row's tensors (parameters in tensor order, then the inputs: x and mem; the module's
 * x_query and, for cross-attention, x_context — with x_context the x_query buffer, one
 * tensor checks both paths) into t (NULL: only counted); returns how many, and in
 * *n_params how many are parameters. */
static size_t tensors(run *r, mha_gc_tensor *t, size_t *n_params)
{
    const kind k = r->c->k;
    const size_t np = k == MODULE    ? MHA_NUM_TENSORS
                      : k == BLOCK   ? MHA_BLOCK_NUM_TENSORS
                      : k == DECODER ? MHA_DEC_BLOCK_NUM_TENSORS
                      : k == GPT     ? mhad_gpt_num_tensors(r->g)
                                     : mhad_s2s_num_tensors(r->m);
    *n_params = np;
    const size_t n = np + (r->x != NULL) + (r->mem != NULL);
    if (!t)
        return n;
    for (size_t i = 0; i < np; i++) {
        if (k == MODULE) {
            module_tensor(r, i, &t[i]);
            continue;
        }
        mha_param_info in;
        double *p, *g;
        const int st = k == BLOCK     ? mhad_block_tensor(r->blk, i, &in, &p, &g)
                       : k == DECODER ? mhad_decoder_block_tensor(r->dec, i, &in, &p, &g)
                       : k == GPT     ? mhad_gpt_tensor(r->g, i, &in, &p, &g)
                                      : mhad_s2s_tensor(r->m, i, &in, &p, &g);
        assert_int_equal(st, MHA_OK);
        t[i] = (mha_gc_tensor){.name = in.name, .value = p, .grad = g, .n = in.numel};
    }
    if (r->x)
        t[np] = (mha_gc_tensor){.name = k == MODULE ? "x_query" : "x", .value = r->x,
                                .grad = r->dx, .n = r->n};
    if (r->mem)
        t[np + 1] = (mha_gc_tensor){.name = k == MODULE ? "x_context" : "mem", .value = r->mem,
                                    .grad = r->dmem, .n = r->nm};
    return n;
}

/* The row made with `threads` threads, and its tensors (*n of them, *np parameters;
 * owned). */
static mha_gc_tensor *make_listed(run *r, const gcase *c, int threads, size_t *n, size_t *np)
{
    make(r, c, threads);
    *n = tensors(r, NULL, np);
    mha_gc_tensor *t = xcalloc(*n, sizeof *t);
    tensors(r, t, np);
    return t;
}

/* Every gradient of t[n], one after the other (owned). */
static double *snapshot(const mha_gc_tensor *t, size_t n, size_t *total)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += t[i].n;
    double *out = xmalloc(sum * sizeof(double));
    for (size_t i = 0, off = 0; i < n; off += t[i].n, i++)
        memcpy(out + off, t[i].grad, t[i].n * sizeof(double));
    *total = sum;
    return out;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- the runner ------------------------------------------------------------------------- */

/* Under CI's valgrind pass (MHA_TEST_UNDER_VALGRIND set), rows that compare every element
 * compare this many random directions per tensor instead: the same forward and backward
 * code runs, under memcheck, on a tenth of the evaluations or fewer (this table took five
 * minutes there); the passes without valgrind compare every element. */
#define VALGRIND_DIRECTIONS 3

static size_t fd_directions(const gcase *c)
{
    return c->dirs == 0 && getenv("MHA_TEST_UNDER_VALGRIND") != NULL ? VALGRIND_DIRECTIONS
                                                                      : c->dirs;
}

/* 1: every element of every tensor against finite differences. */
static void check_fd(run *r, mha_gc_tensor *t, size_t n)
{
    mha_gc_result *res = xcalloc(n, sizeof *res);
    const size_t dirs = fd_directions(r->c);
    const mha_gc_options opt = {.atol = GC_ATOL, .rtol = GC_RTOL, .directions = dirs,
                                .seed = 77};
    assert_int_equal(mha_gradcheck(loss_fn, r, t, n, &opt, res), MHA_OK);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const int all = dirs ? res[i].compared > 0 : res[i].compared == t[i].n;
        if (res[i].worst_ratio <= 1.0 && all)
            continue;
        char line[400];
        mha_gc_format(&res[i], t[i].name, line, sizeof line);
        print_error("%s: %s (compared %zu of %zu)\n", r->c->name, line, res[i].compared,
                    t[i].n);
        bad = 1;
    }
    free(res);
    assert_false(bad);
}

/* 2: a second forward + backward without zeroing doubles every gradient; zero_grad clears
 * the parameters' gradients. */
static void check_accumulates(run *r, mha_gc_tensor *t, size_t n, size_t n_params,
                              const double *once)
{
    double l;
    assert_int_equal(loss_fn(r, &l), MHA_OK);
    backward(r);
    for (size_t i = 0, off = 0; i < n; off += t[i].n, i++)
        for (size_t e = 0; e < t[i].n; e++)
            assert_close(t[i].grad[e], 2 * once[off + e], ACC_ATOL, ACC_RTOL);
    zero_grad(r);
    for (size_t i = 0; i < n_params; i++)
        assert_true(all_equal_to(t[i].grad, t[i].n, 0.0));
}

/* 1 if gradient `got` of tensor i is within rtol of `want` in relative L2, on the scale
 * of want's norm — w_k.bias's on the scale of its w_k.weight's (ref[i − 1]: its own is ~0
 * by softmax's shift invariance); else says how far, `what` ("in float32"), and gives 0.
 * ref: the reference run's tensors (names and the weight's gradient). */
static int grad_close(const gcase *c, const mha_gc_tensor *ref, size_t i, const double *got,
                      const double *want, double rtol, const char *what)
{
    double num = 0, den = 0;
    for (size_t e = 0; e < ref[i].n; e++) {
        num += (got[e] - want[e]) * (got[e] - want[e]);
        den += want[e] * want[e];
    }
    if (ends_with(ref[i].name, "w_k.bias")) {
        assert_true(i > 0 && ends_with(ref[i - 1].name, "w_k.weight"));
        den = 0;
        for (size_t e = 0; e < ref[i - 1].n; e++)
            den += ref[i - 1].grad[e] * ref[i - 1].grad[e];
    }
    if (sqrt(num) <= rtol * sqrt(den))
        return 1;
    print_error("%s: %s differs %s by %.3g (norm %.3g)\n", c->name, ref[i].name, what,
                sqrt(num), sqrt(den));
    return 0;
}

/* 3: the row made with 1 thread gives the loss and gradients of the 2-thread row. */
static void check_threads(const gcase *c, double loss2, const mha_gc_tensor *t2,
                          const double *g2)
{
    run r;
    size_t n, np, total;
    mha_gc_tensor *t = make_listed(&r, c, 1, &n, &np);
    double loss1;
    zero_grad(&r);
    assert_int_equal(loss_fn(&r, &loss1), MHA_OK);
    backward(&r);
    assert_close(loss1, loss2, 0, THREADS_LOSS_RTOL);
    double *g1 = snapshot(t, n, &total);
    int bad = 0;
    for (size_t i = 0, off = 0; i < n; off += t[i].n, i++)
        bad |= !grad_close(c, t2, i, g1 + off, g2 + off, THREADS_GRAD_RTOL, "on 1 and 2 threads");
    assert_false(bad);
    free(g1);
    free(t);
    destroy(&r);
}

/* The float32 twin of a run: the same kind and configuration, the run's parameters and
 * inputs rounded to float (and the run's set to those roundings). */
typedef struct frun {
    mha_module *mod;
    mha_cache *cache;
    mha_block *blk;
    mha_decoder_block *dec;
    mha_gpt *g;
    mha_s2s *m;
    float *x, *mem, *y, *r, *dx, *dmem;
    float *soft; /* the run's soft, rounded */
    size_t C; /* the module's width */
} frun;

/* Float tensor i of the twin (the parameters in tensor order, then x and mem). */
static void ftensor(frun *f, kind k, size_t np, size_t i, float **p, float **g)
{
    int st = MHA_OK;
    if (i == np) {
        *p = f->x;
        *g = f->dx;
    } else if (i == np + 1) {
        *p = f->mem;
        *g = f->dmem;
    } else if (k == MODULE) {
        mha_tensor_info info;
        st = mha_tensor_info_at(f->C, i, &info);
        *p = mha_params(f->mod, NULL) + info.offset;
        *g = mha_grads(f->mod, NULL) + info.offset;
    } else {
        st = k == BLOCK     ? mha_block_tensor(f->blk, i, NULL, p, g)
             : k == DECODER ? mha_decoder_block_tensor(f->dec, i, NULL, p, g)
             : k == GPT     ? mha_gpt_tensor(f->g, i, NULL, p, g)
                            : mha_s2s_tensor(f->m, i, NULL, p, g);
    }
    assert_int_equal(st, MHA_OK);
}

/* Round v[n] to float into f[n] (allocated when *f is NULL) and set v to the roundings. */
static void round_into(double *v, size_t n, float **f)
{
    if (!*f)
        *f = xcalloc(n, sizeof **f);
    for (size_t e = 0; e < n; e++) {
        (*f)[e] = (float)v[e];
        v[e] = (double)(*f)[e];
    }
}

/* The twin's forward at the row's call index and backward: its loss (a block's Σ R ⊙ y
 * summed in double). */
static double f_step(frun *f, const run *r)
{
    const gcase *c = r->c;
    double loss = 0;
    const float *fctx = c->ctx == CTX_CROSS ? f->mem : c->ctx == CTX_SAME_BUF ? f->x : NULL;
    float *fdctx = c->ctx == CTX_CROSS ? f->dmem : c->ctx == CTX_SAME_BUF ? f->dx : NULL;
    switch (c->k) {
    case MODULE:
        assert_int_equal(mha_set_call_index(f->mod, c->call0), MHA_OK);
        assert_int_equal(mha_forward(f->mod, f->cache, r->training, c->B, c->T, f->x, r->Sk, fctx,
                                     r->mask_arg, f->y), MHA_OK);
        assert_int_equal(mha_backward(f->mod, f->cache, f->x, fctx, f->r, f->dx, fdctx), MHA_OK);
        break;
    case BLOCK:
        assert_int_equal(mha_block_set_call_index(f->blk, c->call0), MHA_OK);
        assert_int_equal(c->len ? mha_block_forward_lengths(f->blk, r->training, c->B, c->T,
                                                            f->x, c->len, f->y)
                                : mha_block_forward(f->blk, r->training, c->B, c->T, f->x,
                                                    f->y),
                         MHA_OK);
        assert_int_equal(mha_block_backward(f->blk, f->x, f->r, f->dx), MHA_OK);
        break;
    case DECODER:
        assert_int_equal(mha_decoder_block_set_call_index(f->dec, c->call0), MHA_OK);
        assert_int_equal(mha_decoder_block_forward(f->dec, r->training, c->B, c->T, f->x, c->S,
                                                   f->mem, c->len, f->y),
                         MHA_OK);
        assert_int_equal(mha_decoder_block_backward(f->dec, f->x, f->mem, f->r, f->dx, f->dmem),
                         MHA_OK);
        break;
    case GPT:
        assert_int_equal(mha_gpt_set_call_index(f->g, c->call0), MHA_OK);
        assert_int_equal(mha_gpt_forward(f->g, r->training, c->B, c->T, r->tgt, r->targets,
                                         &loss), MHA_OK);
        assert_int_equal(mha_gpt_backward(f->g), MHA_OK);
        return loss;
    default:
        assert_int_equal(mha_s2s_set_call_index(f->m, c->call0), MHA_OK);
        assert_int_equal(mha_s2s_forward_distill(f->m, r->training, c->B, c->S, r->src, c->len,
                                                 c->T, r->tgt, r->targets, f->soft, c->distill,
                                                 &loss),
                         MHA_OK);
        assert_int_equal(mha_s2s_backward(f->m), MHA_OK);
        return loss;
    }
    for (size_t i = 0; i < r->n; i++)
        loss += (double)f->r[i] * (double)f->y[i];
    return loss;
}

/* What the float32 comparison adds for the module: w_k.bias's gradient ~0 in both
 * precisions on the scale of w_k.weight's (a bias on the keys shifts every score of a row
 * alike, and softmax ignores such shifts: its gradient is 0 in exact arithmetic) — within
 * 1e-12 of it in float64, 1e-5 in float32. */
static void check_f32_module(const run *r, frun *f, const mha_gc_tensor *t)
{
    mha_tensor_info wk, bk;
    assert_int_equal(mha_tensor_info_find(r->c->C, "w_k.weight", &wk), MHA_OK);
    assert_int_equal(mha_tensor_info_find(r->c->C, "w_k.bias", &bk), MHA_OK);
    double scale = 0.0, worst64 = 0.0, worst32 = 0.0;
    for (size_t i = 0; i < wk.numel; i++)
        scale = fmax(scale, fabs(t[2].grad[i]));
    float *p, *g32;
    ftensor(f, MODULE, MHA_NUM_TENSORS, 3, &p, &g32);
    for (size_t i = 0; i < bk.numel; i++) {
        worst64 = fmax(worst64, fabs(t[3].grad[i]));
        worst32 = fmax(worst32, fabs((double)g32[i]));
    }
    assert_string_equal(t[2].name, "w_k.weight");
    assert_string_equal(t[3].name, "w_k.bias");
    assert_true(worst64 <= 1e-12 * scale);
    assert_true(worst32 <= 1e-5 * scale);
}

/* 5: float32 against float64 on the same (rounded) parameters and inputs: the loss within
 * 1e-5 relative, every gradient within 1e-4 in relative L2 (w_k.bias on the scale of its
 * w_k.weight). Last: the run's values become their roundings. */
static void check_f32(run *r, mha_gc_tensor *t, size_t n, size_t np)
{
    const gcase *c = r->c;
    frun f = {.C = c->C};
    const mha_block_config bc = block_config(c, 2);
    if (c->k == MODULE) {
        const mha_config mc = {.model_dim = c->C, .num_heads = c->H, .dropout_p = c->p_attn,
                               .seed = c->seed, .threads = 2};
        assert_int_equal(mha_create(&f.mod, &mc), MHA_OK);
        assert_int_equal(mha_cache_create_mode(&f.cache, f.mod, c->B, c->T, r->Sk, c->mode),
                         MHA_OK);
    } else if (c->k == BLOCK)
        assert_int_equal(mha_block_create(&f.blk, &bc, c->B + 1, c->T + 2), MHA_OK);
    else if (c->k == DECODER)
        assert_int_equal(mha_decoder_block_create(&f.dec, &bc, c->B + 1, c->T + 1, c->S + 2),
                         MHA_OK);
    else if (c->k == GPT) {
        mha_gpt_config cfg = *c->gpt;
        cfg.threads = 2;
        assert_int_equal(mha_gpt_create(&f.g, &cfg, c->B), MHA_OK);
    } else {
        mha_s2s_config cfg = *c->s2s;
        cfg.threads = 2;
        assert_int_equal(mha_s2s_create(&f.m, &cfg, c->B), MHA_OK);
    }
    for (size_t i = 0; i < np; i++) { /* the parameters, rounded, in both */
        float *p, *g;
        ftensor(&f, c->k, np, i, &p, &g);
        round_into(t[i].value, t[i].n, &p);
    }
    if (r->x) {
        round_into(r->x, r->n, &f.x);
        round_into(r->r, r->n, &f.r);
        f.y = xcalloc(r->n, sizeof *f.y);
        f.dx = xcalloc(r->n, sizeof *f.dx);
    }
    if (r->mem) {
        round_into(r->mem, r->nm, &f.mem);
        f.dmem = xcalloc(r->nm, sizeof *f.dmem);
    }
    if (r->soft)
        round_into(r->soft, c->B * c->T * c->s2s->tgt_vocab, &f.soft);
    double ld;
    zero_grad(r);
    if (r->dx)
        memset(r->dx, 0, r->n * sizeof *r->dx);
    if (r->dmem)
        memset(r->dmem, 0, r->nm * sizeof *r->dmem);
    assert_int_equal(loss_fn(r, &ld), MHA_OK);
    backward(r);
    const double lf = f_step(&f, r);
    if (r->y) { /* Σ R ⊙ y may be small: the outputs themselves */
        double *y32 = xmalloc(r->n * sizeof *y32);
        for (size_t i = 0; i < r->n; i++)
            y32[i] = f.y[i];
        assert_true(rel_l2_diff(y32, r->y, r->n) <= 1e-5);
        free(y32);
    } else {
        assert_close(lf, ld, 0.0, 1e-5);
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float *p, *g32;
        ftensor(&f, c->k, np, i, &p, &g32);
        double *g = xmalloc(t[i].n * sizeof *g);
        for (size_t e = 0; e < t[i].n; e++)
            g[e] = g32[e];
        bad |= !grad_close(c, t, i, g, t[i].grad, 1e-4, "in float32");
        free(g);
    }
    assert_false(bad);
    if (c->k == MODULE)
        check_f32_module(r, &f, t);
    mha_cache_destroy(f.cache);
    mha_destroy(f.mod);
    mha_block_destroy(f.blk);
    mha_decoder_block_destroy(f.dec);
    mha_gpt_destroy(f.g);
    mha_s2s_destroy(f.m);
    void *own[] = {f.x, f.mem, f.y, f.r, f.dx, f.dmem, f.soft};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        free(own[i]);
}

static void run_case(const gcase *c)
{
    run r;
    size_t n, np, total;
    mha_gc_tensor *t = make_listed(&r, c, 2, &n, &np);
    /* 4: what the kind promises */
    if (c->k == GPT)
        assert_int_equal(np, 2 + MHA_BLOCK_NUM_TENSORS * c->gpt->layers + 2);
    if (c->k == S2S)
        assert_int_equal(np, 2 + MHA_BLOCK_NUM_TENSORS * c->s2s->enc_layers + 4 +
                                 MHA_DEC_BLOCK_NUM_TENSORS * c->s2s->dec_layers + 2 +
                                 (size_t)c->s2s->untied);
    double loss;
    zero_grad(&r);
    assert_int_equal(loss_fn(&r, &loss), MHA_OK);
    if (c->k == GPT || c->k == S2S)
        assert_true(loss > 0.0 && isfinite(loss));
    if (c->k == S2S)
        assert_int_equal(mhad_s2s_scored(r.m), r.scored);
    backward(&r);
    if (c->k == DECODER && c->len) /* padded source rows get exactly no gradient */
        for (size_t b = 0; b < c->B; b++)
            for (size_t s = c->len[b]; s < c->S; s++)
                assert_true(all_equal_to(r.dmem + (b * c->S + s) * c->C, c->C, 0.0));
    double *once = snapshot(t, n, &total);
    if (!c->no_fd)
        check_fd(&r, t, n);
    check_threads(c, loss, t, once);
    check_accumulates(&r, t, n, np, once);
    check_f32(&r, t, n, np);
    free(once);
    free(t);
    destroy(&r);
}

/* One cmocka test per row: grad_<row>. */
static void grad_row(void **state) { run_case(*state); }

int main(void)
{
    struct CMUnitTest tests[N_CASES];
    static char names[N_CASES][80];
    for (size_t i = 0; i < N_CASES; i++) {
        snprintf(names[i], sizeof names[i], "grad_%s", CASES[i].name);
        tests[i] = (struct CMUnitTest){.name = names[i], .test_func = grad_row,
                                       .initial_state = (void *)&CASES[i]};
    }
    if (getenv("MHA_TEST_UNDER_VALGRIND") != NULL)
        print_message("[  REDUCED ] under valgrind: finite differences on %d random directions "
                      "per tensor where a row compares every element\n", VALGRIND_DIRECTIONS);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
