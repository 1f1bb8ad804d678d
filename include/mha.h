/*
 * mha — multi-head attention with a hand-written backward pass.
 *
 * The layer is the PyTorch `MultiHeadAttention` module of the seed walk-through
 * (four nn.Linear layers w_q, w_k, w_v, w_o; head split by view + transpose;
 * scores Q·Kᵀ/√head_dim; mask fill −1e9 where mask == 0; softmax; dropout on
 * the weights; weighted sum with V; heads merged; output projection).
 *
 * Dimension letters used in every shape comment of this library:
 *   B  batch size            Sq  query sequence length     Sk  key/context length
 *   D  model_dim             H   num_heads                 hd  head_dim = D / H
 * All tensors are dense, row-major, batch-first: x_query is [B, Sq, D].
 *
 * Two precisions from one source (see mha_api.h): every typed function exists as
 *   mha_NAME   for float  (the default, for speed)
 *   mhad_NAME  for double (for tight gradient checks)
 * e.g. mha_forward / mhad_forward, mha_module / mhad_module.
 *
 * Conventions, once for all functions:
 *   - Every function that can fail returns an int status: MHA_OK (0) or one of the
 *     negative codes of MHA_STATUS_MAP below. mha_strerror() names it.
 *   - On error nothing is written: outputs, gradients and caches are left as they were.
 *   - Backward ACCUMULATES (+=) into parameter gradients and input gradients;
 *     zeroing is the separate, explicit mha_zero_grad().
 *   - Pointers returned by the library are borrowed (valid until the owning object
 *     is destroyed; do not free) unless the comment says "owned".
 *   - The library never prints, exits or aborts.
 *   - A module and its caches are used by one thread at a time; the library
 *     parallelises internally (config.threads).
 */
#ifndef MHA_H
#define MHA_H

#include <stddef.h>
#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes: the one table (name, value, message) ------------------ */
#define MHA_STATUS_MAP(X)                                                                      \
    X(OK, 0, "success")                                                                        \
    X(EINVAL, -1, "invalid argument (NULL pointer, zero or out-of-range value, NaN)")         \
    X(ESHAPE, -2, "shape does not fit the module or the cache")                               \
    X(ENOMEM, -3, "out of memory")                                                             \
    X(EOVERFLOW, -4, "size too large: an element or byte count overflows")                    \
    X(ENOTFOUND, -5, "no tensor with that name")                                               \
    X(ESTATE, -6, "call out of order (backward without a forward, optimizer group after a step)") \
    X(EMISMATCH, -7, "the cache belongs to another module")                                   \
    X(ENONFINITE, -8, "non-finite value (NaN or infinity)")                                   \
    X(EIO, -9, "input/output error")                                                           \
    X(EFORMAT, -10, "malformed or mismatched file")                                           \
    X(EUNSUPPORTED, -11, "not available for this cache's attention mode")                     \
    X(ECPU, -12, "this CPU lacks the instructions the precision needs (bf16: AVX512_BF16)")

typedef enum mha_status {
#define MHA_STATUS_ENUM_(name, value, msg) MHA_##name = value,
    MHA_STATUS_MAP(MHA_STATUS_ENUM_)
#undef MHA_STATUS_ENUM_
} mha_status;

/* Message for a status code; "unknown status" for any other value. Never NULL. */
MHA_API const char *mha_strerror(int status);
/* Symbolic name ("MHA_EINVAL") for a status code; "MHA_UNKNOWN" otherwise. */
MHA_API const char *mha_status_name(int status);

/* ---- Precision of the matrix products ------------------------------------ */
/* MHA_PRECISION_FP32 (the default, 0): every product in the API's own type (float for
 *   mha_, double for mhad_).
 * MHA_PRECISION_BF16 (float API only): mixed precision as GPU training does it. The
 *   operands of the matrix products — the attention module's four projections and its
 *   per-head Q·Kᵀ and P·V (forward and backward), the MLP's two Linear layers, the
 *   read-out — are rounded to bfloat16 (8 significant bits, float's range; nearest, ties
 *   to even) and multiplied exactly, with the sums in float32 (the AVX512_BF16 dot
 *   product). Everything else stays float32: the parameters and their gradients, softmax,
 *   LayerNorm, GELU, dropout, the loss, and the optimizer. Generation with a key/value
 *   cache (forward_cached, the gpt_infer and s2s_infer decoders' new rows) computes in
 *   float32. The bfloat16 copies of the weights are made from the float
 *   weights at every call, so the weights may be changed between calls as in float32.
 *   Needs a CPU with AVX512_BF16 (and AVX512F/BW/VL): objects created with it elsewhere
 *   are refused with MHA_ECPU; mhad_ objects refuse it with MHA_EINVAL. Setting the
 *   environment variable MHA_DISABLE_BF16=1 makes the library behave as on such a CPU. */
typedef enum mha_precision {
    MHA_PRECISION_FP32 = 0,
    MHA_PRECISION_BF16 = 1
} mha_precision;

/* 1 if precision p can be used on this CPU (FP32: always), 0 otherwise (or unknown p). */
MHA_API int mha_precision_available(mha_precision p);
/* "fp32", "bf16"; NULL for an unknown value. */
MHA_API const char *mha_precision_name(mha_precision p);
/* The CPU feature precision p needs, as /proc/cpuinfo names it ("avx512_bf16" for BF16),
 * or NULL when it needs none (FP32) or p is unknown. */
MHA_API const char *mha_precision_cpu_feature(mha_precision p);

/* ---- Module configuration ------------------------------------------------- */
typedef struct mha_config {
    size_t model_dim;  /* D > 0                                                  */
    size_t num_heads;  /* H > 0, D % H == 0                                      */
    double dropout_p;  /* probability of dropping an attention weight, in [0, 1] */
    uint64_t seed;     /* seeds the initial weights and the dropout stream        */
    int threads;       /* worker threads for the attention core; 0 = all cores   */
    mha_precision precision; /* of the products (FP32 = 0 by default; see above) */
} mha_config;

/* ---- Attention modes (chosen per cache) ----------------------------------- */
typedef enum mha_attn_mode {
    /* Saves the softmax weights P [B,H,Sq,Sk] and the bit-packed dropout mask;
     * backward reads them. Activation memory grows with Sq·Sk. */
    MHA_ATTN_STORED = 0,
    /* Memory-efficient (FlashAttention-style): forward walks blocks of keys with
     * an online softmax and saves one log-sum-exp per (b, h, row); backward
     * recomputes the weights block by block and regenerates the dropout mask
     * from the PCG32 stream. Activation memory grows linearly with Sq and Sk.
     * Same semantics and results (up to rounding) as MHA_ATTN_STORED. */
    MHA_ATTN_RECOMPUTE = 1
} mha_attn_mode;

/* ---- Masks ---------------------------------------------------------------- */
/* Which scores are masked. A score (b, h, i, j) is masked when ANY of the active
 * rules says so; a masked score is REPLACED by −1e9 before softmax (a fill, as the
 * seed's masked_fill, not an addition), so a fully masked row gets uniform weights
 * and masked scores get no gradient. Pass NULL to forward for "no mask". */
typedef struct mha_mask {
    const uint8_t *mask; /* [mask_batch, mask_heads, Sq, Sk]; 0 = masked, else kept;
                            NULL = no mask tensor. Broadcasts like the seed's mask. */
    size_t mask_batch;   /* 1 or B (ignored when mask == NULL)                      */
    size_t mask_heads;   /* 1 or H (ignored when mask == NULL)                      */
    int causal;          /* nonzero: key j > query i is masked (top-left aligned)   */
    const size_t *key_lengths; /* [B] or NULL: key j >= key_lengths[b] is masked;
                                  each length must be <= Sk (0 = fully masked)      */
} mha_mask;

/* ---- Parameter layout ----------------------------------------------------- */
/* Parameters live in one contiguous buffer, gradients in another of the same
 * layout. The 8 tensors, in PyTorch state_dict order, are:
 *   w_q.weight [D, D]  w_q.bias [D]  w_k.weight  w_k.bias
 *   w_v.weight         w_v.bias      w_o.weight  w_o.bias
 * Weights are stored as PyTorch stores them: [out, in] row-major, y = x·Wᵀ + b. */
enum { MHA_NUM_TENSORS = 8 };

typedef struct mha_tensor_info {
    const char *name; /* state_dict key, e.g. "w_q.weight"; static storage        */
    size_t offset;    /* first element within the parameter (and gradient) buffer */
    size_t numel;     /* number of elements                                       */
    size_t ndim;      /* 2 for weights, 1 for biases                              */
    size_t shape[2];  /* [D, D] or [D, (unused 0)]                                */
} mha_tensor_info;

/* Layout of tensor `index` (0..7) for a module of width model_dim. */
MHA_API int mha_tensor_info_at(size_t model_dim, size_t index, mha_tensor_info *info);
/* Layout of the tensor called `name`; MHA_ENOTFOUND if there is none. */
MHA_API int mha_tensor_info_find(size_t model_dim, const char *name, mha_tensor_info *info);
/* Total number of parameters: 4·D² + 4·D. MHA_EOVERFLOW if that overflows size_t. */
MHA_API int mha_param_count(size_t model_dim, size_t *count);

/* ---- Typed API, instantiated for float (mha_) and double (mhad_) ------------ */
#define MHA_REAL float
#define MHA_NAME(n) mha_##n
#include "mha_api.h"
#undef MHA_REAL
#undef MHA_NAME

#define MHA_REAL double
#define MHA_NAME(n) mhad_##n
#include "mha_api.h"
#undef MHA_REAL
#undef MHA_NAME

#ifdef __cplusplus
}
#endif

#include "mha_pcg32.h"
#include "mha_gradcheck.h"
#include "mha_optim.h"
#include "mha_layers.h"
#include "mha_safetensors.h"
#include "mha_gpt.h" /* which includes mha_s2s.h, the encoder–decoder built on its block */

#endif /* MHA_H */
