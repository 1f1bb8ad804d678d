/*
 * The encoder–decoder Transformer (the "original Transformer", pre-LayerNorm) composed
 * from the attention module (mha.h), the layers (mha_layers.h) and the GPT's block
 * (mha_gpt.h): forward, hand-written backward, and decoding with key/value caches
 * (greedy and beam search), in float32 (mha_) and float64 (mhad_).
 *
 * Encoder block: the GPT block (mha_block) with causal = 0, its self-attention told each
 * source's length (mha_block_forward_lengths): keys at padding positions are masked
 * (the seed's masked_fill(mask == 0, −1e9)).
 * Decoder block (mha_decoder_block, pre-LayerNorm):
 *   x₁ = x  + drop(SelfAttn(LN1(x), causal))
 *   x₂ = x₁ + drop(CrossAttn(query LN2(x₁), keys/values mem, source padding masked))
 *   y  = x₂ + drop(MLP(LN3(x₂)))
 * Model:
 *   E1 xs₀ = drop(src_emb[src] + src_pos[s])                 [B,S,C]
 *   E2 xs_{l+1} = enc_block_l(xs_l, src_len)                 l = 0 .. Le−1
 *   E3 mem = enc_ln(xs_Le)                                   [B,S,C]
 *   D1 xt₀ = drop(tgt_emb[tgt_in] + tgt_pos[t])              [B,T,C]
 *   D2 xt_{l+1} = dec_block_l(xt_l, mem, src_len)            l = 0 .. Ld−1
 *   D3 logits = dec_ln(xt_Ld)·Wᵀ   W = tgt_emb (tied, default) or out.weight   [B,T,Vt]
 *   D4 loss = mean over scored positions of the label-smoothed cross-entropy
 *      (mha_xent_smooth_forward; ε = 0 is plain cross-entropy)
 * Batches hold sources of different lengths, right-padded (src_len[b] <= S), and targets
 * of different lengths, right-padded (target −1 = not scored; causal attention keeps
 * padding after a target from reaching it).
 *
 * Letters: B batch, S source length (<= src_context), T target length (<= tgt_context),
 * C dim, H heads, F mlp_dim, Vs, Vt vocabularies, Le, Ld layers, K beam width.
 * Contract as the rest of the library: status codes, nothing written on error, backward
 * accumulates (+=), borrowed pointers valid until destroy, one thread at a time per
 * object, no printing. tools/s2s_torch.py defines the same model in PyTorch.
 *
 * Parameter names (PyTorch state_dict keys), in tensor order: src_emb.weight [Vs,C],
 * src_pos.weight [src_context,C], encoder.<l>.<the 16 block names of mha_gpt.h>,
 * enc_ln.weight/bias, tgt_emb.weight [Vt,C], tgt_pos.weight [tgt_context,C],
 * decoder.<l>.<the 26 names of MHA_NAME(decoder_block_tensor)>, dec_ln.weight/bias, and
 * out.weight [Vt,C] only when the read-out is untied.
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_S2S_H
#define MHA_S2S_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"
#include "mha_gpt.h"
#include "mha_layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PCG32 streams of the encoder–decoder's own draws (besides the GPT's 3–6). */
enum mha_s2s_stream {
    MHA_PCG32_STREAM_RESID_CROSS = 7, /* dropout after a decoder block's cross-attention */
    MHA_PCG32_STREAM_EMBED_TGT = 8    /* dropout after the target embeddings (model seed) */
};

/* Tensors of one decoder block (order: MHA_NAME(decoder_block_tensor)). */
enum { MHA_DEC_BLOCK_NUM_TENSORS = 26 };

typedef struct mha_s2s_config {
    size_t src_vocab;       /* Vs > 0 (<= INT32_MAX)                                    */
    size_t tgt_vocab;       /* Vt > 0 (<= INT32_MAX)                                    */
    size_t src_context;     /* rows of src_pos: the longest source                      */
    size_t tgt_context;     /* rows of tgt_pos: the longest target (decoder input)      */
    size_t enc_layers;      /* Le, 1 .. 1024                                             */
    size_t dec_layers;      /* Ld, 1 .. 1024                                             */
    size_t heads;           /* H                                                         */
    size_t dim;             /* C, C % H == 0                                             */
    size_t mlp_dim;         /* F; 0 means 4·C                                           */
    double attn_dropout;    /* p on every attention's weights, [0, 1]                   */
    double resid_dropout;   /* p on the embeddings and every residual branch, [0, 1)     */
    double label_smoothing; /* ε of the loss, [0, 1)                                    */
    double ln_eps;          /* 0 means 1e-5                                             */
    int untied;             /* 0: logits = …·tgt_embᵀ (default); 1: an own out.weight    */
    uint64_t seed;          /* initial weights and every dropout stream                  */
    int threads;            /* 0 = all cores                                             */
    mha_attn_mode attn_mode;
    mha_precision precision; /* of the blocks' products and the read-out (mha.h)         */
    int no_init;            /* 1: the parameters are not drawn from seed (their values are
                               unspecified) — for a caller that loads every one of them
                               next (mha_s2s_load, a file of mha-g2p): it skips the cost of
                               the draws, most of the time it takes to open a small model */
} mha_s2s_config;

/* Seed of encoder block l (mha_gpt_block_seed(seed, l)) and of decoder block l
 * (mha_gpt_block_seed(seed, enc_layers + l)): no two blocks share a stream. */
MHA_API uint64_t mha_s2s_block_seed(uint64_t seed, size_t enc_layers, int decoder, size_t l);

/* One decoded hypothesis (MHA_NAME(s2s_beam)): its tokens are in the caller's buffer. */
typedef struct mha_s2s_hyp {
    size_t len;      /* tokens before the end token (the end token is not stored)    */
    double logprob;  /* Σ of the log-probabilities of the len tokens and of the end
                        token (when finished): log P(hypothesis | source)            */
    double score;    /* logprob / (len + 1)^alpha: what the n-best list is ranked by   */
    int finished;    /* 1 if it ended with the end token, 0 if cut at max_len          */
} mha_s2s_hyp;

#define MHA_REAL float
#define MHA_NAME(n) mha_##n
#include "mha_s2s_api.h"
#undef MHA_REAL
#undef MHA_NAME

#define MHA_REAL double
#define MHA_NAME(n) mhad_##n
#include "mha_s2s_api.h"
#undef MHA_REAL
#undef MHA_NAME

/* ---- Saving and loading the parameters (float32 models; the mhad_ models have none) ----
 * As mha_gpt_save / mha_gpt_load (mha_gpt.h), with the encoder–decoder's tensors (the
 * names above, in mha_s2s_tensor order): a file PyTorch's load_state_dict(strict=True)
 * takes for tools/s2s_torch.py's Seq2Seq. A tied model (untied = 0) has no out.weight, so
 * loading an untied model's file into it is refused (a tensor it does not have), and the
 * other way round (out.weight missing). */
MHA_API int mha_s2s_save(const mha_s2s *m, const char *path, mha_st_dtype dtype,
                         const char *const *meta_keys, const char *const *meta_values,
                         size_t n_meta, char *err, size_t errlen);
MHA_API int mha_s2s_load(mha_s2s *m, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* MHA_S2S_H */
