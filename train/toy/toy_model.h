/*
 * A tiny attention-only transformer built from the mha module, for mha-train.
 *
 *   x₀ = tok_emb[tokens] + pos_emb[position]                      [B,S,D]
 *   ctx = tok_emb[ctx_key] + val_emb[ctx_value]   (lookup only)    [B,Sk,D]
 *   x_{l+1} = x_l + MHA_l(x_l, ctx or self, mask)   l = 0..L−1      [B,S,D]
 *   logits = x_L·W_outᵀ + b_out                                     [B,S,V]
 *   loss = mean over scored positions of −log softmax(logits)[target]
 *
 * Letters (as in mha.h): B batch, S query length, Sk context length (lookup),
 * D model_dim, H heads, V vocabulary (read-out classes), L layers.
 * Token ids are int32_t in [0, vocab_in); a target of −1 means "not scored".
 *
 * Like the library, every typed function exists twice from one source
 * (toy_model_api.h, implemented in toy_model_impl.inc):
 *   tm_NAME  for float  (training)           uses the mha_  module
 *   tmd_NAME for double (gradient checks)     uses the mhad_ module
 * Functions return MHA_OK or a negative MHA_ status code and never print.
 * Backward functions ACCUMULATE (+=) into gradients, as the library's do.
 */
#ifndef TRAIN_TOY_MODEL_H
#define TRAIN_TOY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TM_MAX_LAYERS = 4, TM_NUM_OWN_TENSORS = 5 };

/* PCG32 stream of the model's own parameter init (embeddings, read-out). */
enum { TM_PCG32_STREAM_INIT = 11 };

/* Shape and hyper-parameters of a model. Plain value; no ownership. */
typedef struct tm_config {
    size_t vocab_in;  /* token ids the embeddings accept (tokens, ctx keys/values)  */
    size_t vocab_out; /* V: read-out classes (targets are in [0, V))                */
    size_t seq_len;   /* S: query positions (= rows of pos_emb)                     */
    size_t ctx_len;   /* Sk: context positions; 0 = self-attention model           */
    size_t model_dim; /* D                                                          */
    size_t num_heads; /* H, D % H == 0                                              */
    size_t layers;    /* L in 1..TM_MAX_LAYERS                                      */
    int causal;       /* nonzero: causal mask in self-attention                     */
    double dropout;   /* attention dropout p of every layer                         */
    uint64_t seed;    /* parameter init and dropout streams                         */
    int threads;      /* attention core threads (0 = all cores)                     */
    mha_attn_mode attn_mode; /* every layer's cache: STORED (default) or RECOMPUTE     */
    int pos_sinusoidal; /* nonzero: pos_emb starts as sinusoids (sin/cos of s·10000^(−2k/D))
                           instead of uniform ±1; still learned. Long sequences need it:
                           the attention maps then start from a structure shared by all
                           positions                                                  */
} tm_config;

/* The model's own tensors (besides the layers' attention parameters), in one
 * flat buffer in this order:
 *   0 tok_emb.weight [vocab_in, D]      1 pos_emb.weight [S, D]
 *   2 val_emb.weight [vocab_in, D] (numel 0 when ctx_len == 0)
 *   3 readout.weight [V, D]             4 readout.bias [V]
 * The mha_tensor_info struct is reused: name (static), offset, numel, ndim, shape. */
int tm_tensor_info_at(const tm_config *cfg, size_t index, mha_tensor_info *info);
/* Total own parameters (sum of the numels above); MHA_EOVERFLOW on overflow. */
int tm_own_param_count(const tm_config *cfg, size_t *count);
/* Validates cfg: MHA_EINVAL naming nothing (callers check fields themselves). */
int tm_config_check(const tm_config *cfg);
/* Seed of layer l's mha module (its weights and dropout stream): a splitmix64 of
 * cfg->seed and l, so layers never share a stream. */
uint64_t tm_layer_seed(uint64_t seed, size_t layer);

/* One batch of examples. Borrowed pointers; the caller keeps them alive and
 * unchanged between forward and backward. */
typedef struct tm_batch {
    size_t batch;          /* B <= the model's max_batch                     */
    const int32_t *tokens; /* [B, S]                                         */
    const int32_t *ctx;    /* [B, Sk, 2] (key, value) pairs, or NULL if Sk=0 */
    const int32_t *targets;/* [B, S], −1 = not scored                        */
} tm_batch;

/* ---- Typed API ------------------------------------------------------------ */
#define TM_REAL float
#define TM_NAME(n) tm_##n
#define TM_MHA(n) mha_##n
#include "toy_model_api.h"
#undef TM_REAL
#undef TM_NAME
#undef TM_MHA

#define TM_REAL double
#define TM_NAME(n) tmd_##n
#define TM_MHA(n) mhad_##n
#include "toy_model_api.h"
#undef TM_REAL
#undef TM_NAME
#undef TM_MHA

#ifdef __cplusplus
}
#endif

#endif /* TRAIN_TOY_MODEL_H */
