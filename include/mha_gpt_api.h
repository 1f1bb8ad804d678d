/*
 * Typed half of mha_gpt.h, included twice (no include guard on purpose):
 *   MHA_REAL = float,  MHA_NAME(x) = mha_##x   (mha_gpt_forward, mha_block, ...)
 *   MHA_REAL = double, MHA_NAME(x) = mhad_##x
 * Letters as in mha_gpt.h.
 */
#if !defined(MHA_REAL) || !defined(MHA_NAME)
#error "include <mha_gpt.h>, not mha_gpt_api.h"
#endif

/* ==== Block ============================================================================ */

/* One pre-LayerNorm transformer block with its parameters, gradients, attention module
 * and the saved activations of one forward. Opaque. */
typedef struct MHA_NAME(block) MHA_NAME(block);

/* Make a block for inputs [B, T, C] with B <= max_batch, T <= max_len, initialised as
 * GPT-2 (MHA_NAME(block_reset_parameters) with cfg->seed). *out is owned: free with
 * MHA_NAME(block_destroy). MHA_EINVAL (bad config), MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(block_create)(MHA_NAME(block) **out, const mha_block_config *cfg,
                                   size_t max_batch, size_t max_len);
MHA_API void MHA_NAME(block_destroy)(MHA_NAME(block) *blk);

/* The 16 parameter tensors, in this order: ln1.weight, ln1.bias, attn.w_q.weight,
 * attn.w_q.bias, … attn.w_o.bias, ln2.weight, ln2.bias, mlp.fc.weight, mlp.fc.bias,
 * mlp.proj.weight, mlp.proj.bias (MHA_BLOCK_NUM_TENSORS). */
/* Tensor i: its description, and borrowed pointers to its values and gradient (either
 * output may be NULL). MHA_EINVAL for i out of range. */
MHA_API int MHA_NAME(block_tensor)(MHA_NAME(block) *blk, size_t i, mha_param_info *info,
                                   MHA_REAL **param, MHA_REAL **grad);
/* GPT-2 initialisation from PCG32(seed, MHA_PCG32_STREAM_GPT_INIT), tensor by tensor in
 * the order above, by role (mha_tensor_role). Gradients untouched. */
MHA_API int MHA_NAME(block_reset_parameters)(MHA_NAME(block) *blk, uint64_t seed);
MHA_API int MHA_NAME(block_zero_grad)(MHA_NAME(block) *blk);
/* The block's attention module (borrowed). */
MHA_API MHA_NAME(module) *MHA_NAME(block_attention)(MHA_NAME(block) *blk);

/* y = block(x): x, y [B, T, C], not overlapping. Training applies both dropouts and
 * advances the call counter. Saves what backward reads (x is NOT copied: keep it alive
 * and unchanged until backward). MHA_EINVAL, MHA_ESHAPE (B or T beyond capacity). */
MHA_API int MHA_NAME(block_forward)(MHA_NAME(block) *blk, int training, size_t B, size_t T,
                                    const MHA_REAL *x, MHA_REAL *y);
/* Given dy [B, T, C] for the last forward: parameter gradients += , dx += dL/dx (dx may
 * be NULL). One backward per forward (MHA_ESTATE otherwise). */
MHA_API int MHA_NAME(block_backward)(MHA_NAME(block) *blk, const MHA_REAL *x,
                                     const MHA_REAL *dy, MHA_REAL *dx);
/* Dropout call counter (attention and residual dropout advance together). */
MHA_API int MHA_NAME(block_get_call_index)(const MHA_NAME(block) *blk, uint64_t *n);
MHA_API int MHA_NAME(block_set_call_index)(MHA_NAME(block) *blk, uint64_t n);
/* The batch of the next forwards is sequences [first, first + B) of a larger batch: every
 * dropout of the block (attention, both residual branches) draws the masks of those
 * sequences (MHA_NAME(set_dropout_batch_offset)). Default 0. MHA_EOVERFLOW if first > 2^40;
 * a training forward whose positions would pass 2^40 returns MHA_EOVERFLOW. */
MHA_API int MHA_NAME(block_set_dropout_batch_offset)(MHA_NAME(block) *blk, uint64_t first);

/* ==== Model ============================================================================ */

/* Embeddings, L blocks, final LayerNorm, tied read-out, and saved activations. Opaque. */
typedef struct MHA_NAME(gpt) MHA_NAME(gpt);

/* Make a model for batches B <= max_batch of T <= cfg->context tokens, initialised as
 * GPT-2 from cfg->seed. *out is owned: free with MHA_NAME(gpt_destroy).
 * MHA_EINVAL (bad config), MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(gpt_create)(MHA_NAME(gpt) **out, const mha_gpt_config *cfg,
                                 size_t max_batch);
MHA_API void MHA_NAME(gpt_destroy)(MHA_NAME(gpt) *g);
/* The configuration, with defaults resolved (mlp_dim, ln_eps). */
MHA_API int MHA_NAME(gpt_get_config)(const MHA_NAME(gpt) *g, mha_gpt_config *cfg);

/* Parameter tensors: wte.weight, wpe.weight, then each block's 16 (names prefixed
 * "blocks.<l>."), then ln_f.weight, ln_f.bias: 2 + 16·L + 2 tensors. */
MHA_API size_t MHA_NAME(gpt_num_tensors)(const MHA_NAME(gpt) *g);
MHA_API int MHA_NAME(gpt_tensor)(MHA_NAME(gpt) *g, size_t i, mha_param_info *info,
                                 MHA_REAL **param, MHA_REAL **grad);
/* Index of the tensor called name into *index; MHA_ENOTFOUND if none. */
MHA_API int MHA_NAME(gpt_tensor_find)(const MHA_NAME(gpt) *g, const char *name, size_t *index);
/* Total number of parameters. */
MHA_API int MHA_NAME(gpt_param_count)(const MHA_NAME(gpt) *g, size_t *count);
/* GPT-2 initialisation of every tensor (embeddings from the model's seed stream, each
 * block from mha_gpt_block_seed(seed, l)). */
MHA_API int MHA_NAME(gpt_reset_parameters)(MHA_NAME(gpt) *g, uint64_t seed);
/* Every gradient := 0. */
MHA_API int MHA_NAME(gpt_zero_grad)(MHA_NAME(gpt) *g);
/* The model's parameters as one array (its arena): the tensors in gpt_tensor order, each
 * right after the one before (tensor i's values start where tensor i − 1's end, the
 * first at element 0), *count (if not NULL) = gpt_param_count. gpt_tensor's pointers and
 * the blocks' and their modules' parameters (block_tensor, mha_params) are views into it.
 * Borrowed: valid until gpt_destroy. NULL only when g is NULL. */
MHA_API MHA_REAL *MHA_NAME(gpt_params)(MHA_NAME(gpt) *g, size_t *count);
/* The gradients as one array, laid out as gpt_params. */
MHA_API MHA_REAL *MHA_NAME(gpt_grads)(MHA_NAME(gpt) *g, size_t *count);
/* Block l (borrowed; NULL for l >= L). */
MHA_API MHA_NAME(block) *MHA_NAME(gpt_block)(MHA_NAME(gpt) *g, size_t l);

/* Forward of tokens [B, T] (ids in [0, V)); targets [B, T] in [0, V) or −1 (not scored),
 * or NULL (no loss). Copies tokens and targets (backward needs them). *loss (may be NULL)
 * gets the mean cross-entropy over scored positions (0 when none, or targets NULL).
 * Training mode applies dropout and advances the call counter.
 * MHA_EINVAL (NULL tokens, an id or target out of range), MHA_ESHAPE (B > max_batch,
 * T > context, B or T zero). Nothing is written on error. */
MHA_API int MHA_NAME(gpt_forward)(MHA_NAME(gpt) *g, int training, size_t B, size_t T,
                                  const int32_t *tokens, const int32_t *targets, double *loss);
/* Gradients of the mean loss of the last forward (which needs targets), accumulated
 * into every parameter's gradient. One backward per forward (MHA_ESTATE otherwise). */
MHA_API int MHA_NAME(gpt_backward)(MHA_NAME(gpt) *g);
/* Have gpt_backward call fn(user, first, count) each time the gradients of tensors
 * [first, first + count) (gpt_tensor order) are final for this backward, from the thread
 * that called gpt_backward, between its parallel regions: ln_f's two tensors first, then
 * each block's MHA_BLOCK_NUM_TENSORS from the last block to block 0, and wte, wpe last
 * (wte is the tied read-out too). Every tensor is reported exactly once per successful
 * backward, and backward neither reads nor writes a reported gradient again, so the
 * caller may start work on it, even change it in place (a data-parallel trainer starts the
 * all-reduce of a block's gradients while the blocks below run). The callback must not
 * call into g. A backward that fails stops reporting. fn NULL removes the hook.
 * MHA_EINVAL for g NULL. */
MHA_API int MHA_NAME(gpt_set_grad_hook)(MHA_NAME(gpt) *g, mha_grad_ready_fn fn, void *user);

/* Saved activations of the last forward (borrowed, valid until the next forward):
 * logits [B, T, V] (shape[] gets B, T, V) and the residual stream x_l [B, T, C] for
 * l = 0 .. L (x_0 after embedding dropout, x_L before ln_f). NULL on a bad argument or
 * before any forward. */
MHA_API const MHA_REAL *MHA_NAME(gpt_logits)(const MHA_NAME(gpt) *g, size_t shape[3]);
MHA_API const MHA_REAL *MHA_NAME(gpt_residual)(const MHA_NAME(gpt) *g, size_t l);
/* Attention weights P [B, H, T, T] of block l in the last forward (STORED mode only;
 * MHA_EUNSUPPORTED otherwise). Borrowed, as MHA_NAME(cache_attention). */
MHA_API int MHA_NAME(gpt_attention)(const MHA_NAME(gpt) *g, size_t l, const MHA_REAL **weights,
                                    size_t shape[4]);

/* Dropout call counter of the whole model (every block's and the embedding's advance
 * together, once per training forward). Setting it replays masks. */
MHA_API int MHA_NAME(gpt_get_call_index)(const MHA_NAME(gpt) *g, uint64_t *n);
MHA_API int MHA_NAME(gpt_set_call_index)(MHA_NAME(gpt) *g, uint64_t n);
/* The batch of the next forwards is sequences [first, first + B) of a larger batch: every
 * dropout of the model draws those sequences' masks, so that N data-parallel processes
 * training slices of one batch (with the same call index) draw exactly the masks of one
 * process training the whole batch. Default 0. Errors as block_set_dropout_batch_offset. */
MHA_API int MHA_NAME(gpt_set_dropout_batch_offset)(MHA_NAME(gpt) *g, uint64_t first);

/* ==== Generation with key/value caches =================================================== */

/* Per-block key/value caches and scratch for generating `batch` sequences of up to
 * max_len (<= context) positions with model g. Owned; free with
 * MHA_NAME(gpt_infer_destroy). MHA_EINVAL (NULL, a size 0), MHA_ESHAPE (max_len >
 * context), MHA_EOVERFLOW, MHA_ENOMEM. */
typedef struct MHA_NAME(gpt_infer) MHA_NAME(gpt_infer);
MHA_API int MHA_NAME(gpt_infer_create)(MHA_NAME(gpt_infer) **out, MHA_NAME(gpt) *g,
                                       size_t batch, size_t max_len);
MHA_API void MHA_NAME(gpt_infer_destroy)(MHA_NAME(gpt_infer) *s);
/* Forget every position (length 0). */
MHA_API int MHA_NAME(gpt_infer_reset)(MHA_NAME(gpt_infer) *s);
/* Positions cached so far into *len. */
MHA_API int MHA_NAME(gpt_infer_length)(const MHA_NAME(gpt_infer) *s, size_t *len);
/* Feed n_new tokens per sequence (tokens [B, n_new]) at positions L .. L+n_new−1 (L the
 * current length) and write the logits of the LAST of them to logits [B, V]: equal, up
 * to rounding, to the logits at position L+n_new−1 of MHA_NAME(gpt_forward) (evaluation
 * mode) over positions 0 .. L+n_new−1. Each new position costs one row per block.
 * MHA_ESHAPE when L + n_new > max_len (reset and feed the last positions again to slide
 * the window) or B differs from the first call's; MHA_EINVAL for a bad id. Nothing is
 * changed on error. */
MHA_API int MHA_NAME(gpt_infer_step)(MHA_NAME(gpt) *g, MHA_NAME(gpt_infer) *s, size_t B,
                                     size_t n_new, const int32_t *tokens, MHA_REAL *logits);
