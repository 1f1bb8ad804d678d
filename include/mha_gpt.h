/*
 * A GPT-2-style transformer block and the whole model, composed from the attention
 * module (mha.h) and the layers (mha_layers.h); forward, hand-written backward, and
 * generation with a key/value cache, in float32 (mha_) and float64 (mhad_).
 *
 * Block (pre-LayerNorm, as GPT-2):
 *   x₁ = x + drop(MHA(LN1(x), causal))          LN1, MHA: the library's module
 *   y  = x₁ + drop(MLP(LN2(x₁)))                MLP = Linear(C,F) → GELU(tanh) → Linear(F,C)
 * Model:
 *   x₀ = drop(wte[tokens] + wpe[t])              [B,T,C]
 *   x_{l+1} = block_l(x_l)                       l = 0 .. L−1
 *   logits = LN_f(x_L)·wteᵀ                      [B,T,V]   (read-out tied to wte, no bias)
 *   loss = mean cross-entropy over positions with a target (nats)
 *
 * Letters: B batch, T length (<= context), C dim, H heads, F mlp_dim, V vocab, L layers.
 * Contract as the rest of the library: status codes, nothing written on error, backward
 * accumulates (+=) into gradients, borrowed pointers valid until destroy, one thread at a
 * time per object, no printing. Dropout masks come from addressable PCG32 streams (per
 * site: the attention module's own stream, and mha_dropout_forward's with the streams
 * below), so they do not depend on threads and replay when the call counter is set back.
 *
 * Parameter names are PyTorch state_dict keys (tools/gpt_torch.py defines the same
 * model): wte.weight [V,C], wpe.weight [context,C], blocks.<l>.ln1.weight/bias [C],
 * blocks.<l>.attn.w_q.weight [C,C] … blocks.<l>.attn.w_o.bias (the seed's names),
 * blocks.<l>.ln2.weight/bias, blocks.<l>.mlp.fc.weight [F,C], .mlp.fc.bias [F],
 * blocks.<l>.mlp.proj.weight [C,F], .mlp.proj.bias [C], ln_f.weight/bias [C].
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_GPT_H
#define MHA_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"
#include "mha_layers.h"
#include "mha_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PCG32 streams of the GPT's own draws (the attention module uses 1 and 2). */
enum mha_gpt_stream {
    MHA_PCG32_STREAM_RESID_ATTN = 3, /* dropout after a block's attention (block seed) */
    MHA_PCG32_STREAM_RESID_MLP = 4,  /* dropout after a block's MLP (block seed)       */
    MHA_PCG32_STREAM_EMBED = 5,      /* dropout after the embeddings (model seed)       */
    MHA_PCG32_STREAM_GPT_INIT = 6    /* normal(0, σ) initial weights (model seed)       */
};

/* What a parameter tensor is; decides its initialisation and default weight decay. */
typedef enum mha_tensor_role {
    MHA_ROLE_WEIGHT = 0,       /* matmul weight: normal(0, 0.02), decayed              */
    MHA_ROLE_RESID_WEIGHT = 1, /* output projection into the residual stream
                                  (attn.w_o, mlp.proj): normal(0, 0.02/√(2L)), decayed */
    MHA_ROLE_BIAS = 2,         /* 0, not decayed                                        */
    MHA_ROLE_NORM_WEIGHT = 3,  /* LayerNorm weight: 1, not decayed                      */
    MHA_ROLE_NORM_BIAS = 4,    /* LayerNorm bias: 0, not decayed                        */
    MHA_ROLE_EMBEDDING = 5     /* wte, wpe: normal(0, 0.02), not decayed                */
} mha_tensor_role;

/* One parameter tensor of a block or model. */
typedef struct mha_param_info {
    const char *name;   /* state_dict key; borrowed from the object (valid until destroy) */
    size_t ndim;        /* 1 or 2                                                      */
    size_t shape[2];    /* [rows, cols] or [n, 0]                                      */
    size_t numel;
    mha_tensor_role role;
    int decay;          /* 1 for matmul weights: AdamW's weight decay applies by default */
} mha_param_info;

/* Tensors of one block (order: MHA_NAME(block_tensor)). */
enum { MHA_BLOCK_NUM_TENSORS = 16 };

/* ---- Block configuration ---------------------------------------------------------- */
typedef struct mha_block_config {
    size_t dim;            /* C > 0                                                     */
    size_t heads;          /* H > 0, C % H == 0                                         */
    size_t mlp_dim;        /* F; 0 means 4·C                                            */
    double attn_dropout;   /* p on the attention weights, [0, 1]                        */
    double resid_dropout;  /* p on the attention and MLP outputs, [0, 1)                */
    double ln_eps;         /* LayerNorm eps; 0 means 1e-5 (torch's default)             */
    int causal;            /* nonzero: causal self-attention (a GPT block)               */
    size_t init_layers;    /* L of the 0.02/√(2L) rule for output projections; 0 = 1    */
    uint64_t seed;         /* initial weights and dropout streams                       */
    int threads;           /* worker threads; 0 = all cores                             */
    mha_attn_mode attn_mode; /* the attention cache's mode (STORED keeps weights for plots) */
    mha_precision precision; /* of the attention and MLP products (mha.h; FP32 by default) */
} mha_block_config;

/* ---- Model configuration ---------------------------------------------------------- */
typedef struct mha_gpt_config {
    size_t vocab;          /* V > 0 (<= INT32_MAX)                                      */
    size_t context;        /* T_max > 0: rows of wpe, the longest sequence               */
    size_t layers;         /* L, 1 .. 1024                                              */
    size_t heads;          /* H                                                          */
    size_t dim;            /* C, C % H == 0                                              */
    size_t mlp_dim;        /* F; 0 means 4·C                                            */
    double attn_dropout;   /* p on attention weights                                    */
    double resid_dropout;  /* p on embeddings and residual branches, [0, 1)              */
    double ln_eps;         /* 0 means 1e-5                                              */
    uint64_t seed;         /* initial weights and every dropout stream                   */
    int threads;           /* 0 = all cores                                              */
    mha_attn_mode attn_mode;
    mha_precision precision; /* of the blocks' products and the read-out (mha.h)          */
    int no_init;           /* 1: the parameters are not drawn from seed (their values are
                              unspecified) — for a caller that loads every one of them next
                              (mha_gpt_load): it skips the cost of the draws               */
} mha_gpt_config;

/* Gradient-ready callback of MHA_NAME(gpt_set_grad_hook): tensors [first, first + count)
 * of the model (gpt_tensor order) have their final gradients. */
typedef void (*mha_grad_ready_fn)(void *user, size_t first, size_t count);

/* Seed of block l of a model seeded with `seed`, so that blocks never share a stream:
 * the splitmix64 finaliser of seed + (l + 1)·0x9E3779B97F4A7C15 (mha-train seeds its
 * layers the same way). */
MHA_API uint64_t mha_gpt_block_seed(uint64_t seed, size_t layer);

#define MHA_REAL float
#define MHA_NAME(n) mha_##n
#include "mha_gpt_api.h"
#undef MHA_REAL
#undef MHA_NAME

#define MHA_REAL double
#define MHA_NAME(n) mhad_##n
#include "mha_gpt_api.h"
#undef MHA_REAL
#undef MHA_NAME

/* ---- Saving and loading the parameters (float32 models; the mhad_ models have none) ----
 * mha_gpt_save writes every parameter tensor of g under its state_dict name (the names
 * above, in mha_gpt_tensor order), as dtype F32, BF16 or F16 (rounded to nearest, ties to
 * even: mha_st_from_f32), and the caller's metadata pairs (as mha_st_save; may be NULL
 * when n_meta == 0), to a safetensors file at `path`, atomically (mha_st_save). A file
 * PyTorch's load_state_dict(strict=True) takes for tools/gpt_torch.py's GPT. Nothing else
 * is stored: a reader needs the configuration (heads in particular) from elsewhere, e.g.
 * the metadata. MHA_OK; MHA_EINVAL (g or path NULL, another dtype), MHA_ENOMEM, and the
 * errors of mha_st_save; err gets a one-line message.
 * mha_gpt_load reads such a file into g: every tensor of g must be in the file, stored as
 * F32, BF16, F16 (or F64), with exactly g's shape, every value finite, and the file may
 * hold no other tensor (metadata is ignored). Otherwise nothing of g is written and the
 * call returns, with the tensor named in err: MHA_ENOTFOUND (a tensor is missing),
 * MHA_ESHAPE (another shape: a model of another configuration), MHA_EFORMAT (an integer
 * dtype, a tensor g does not have, or a malformed file), MHA_ENONFINITE (a NaN or an
 * infinity); or MHA_EIO, MHA_ENOMEM, MHA_EINVAL (g or path NULL). Gradients, optimizer
 * state and the dropout counter are not touched. */
MHA_API int mha_gpt_save(const mha_gpt *g, const char *path, mha_st_dtype dtype,
                         const char *const *meta_keys, const char *const *meta_values,
                         size_t n_meta, char *err, size_t errlen);
MHA_API int mha_gpt_load(mha_gpt *g, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

/* The encoder–decoder, whose encoder blocks are this block (here, not in mha.h, so that
 * including either header alone sees the block declared first). */
#include "mha_s2s.h"

#endif /* MHA_GPT_H */
