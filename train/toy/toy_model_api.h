/*
 * Typed half of train/toy/toy_model.h, included twice (no include guard on purpose):
 *   TM_REAL = float,  TM_NAME(x) = tm_##x,  TM_MHA(x) = mha_##x
 *   TM_REAL = double, TM_NAME(x) = tmd_##x, TM_MHA(x) = mhad_##x
 * Shapes use the letters of toy_model.h.
 */
#if !defined(TM_REAL) || !defined(TM_NAME) || !defined(TM_MHA)
#error "include \"toy_model.h\", not toy_model_api.h"
#endif

/* ---- The model --------------------------------------------------------------- */

/* Parameters, gradients, the L attention modules with their caches, and the
 * saved activations of the last forward. Opaque. */
typedef struct TM_NAME(model) TM_NAME(model);

/* Make a model for batches of up to max_batch examples; own parameters are drawn
 * from PCG32(cfg->seed, TM_PCG32_STREAM_INIT): embeddings uniform in ±1, read-out
 * as nn.Linear (uniform ±1/√D); layer l is TM_MHA(create) with seed
 * tm_layer_seed(cfg->seed, l). *out is owned: free with TM_NAME(destroy).
 * Errors: MHA_EINVAL (bad cfg), MHA_EOVERFLOW, MHA_ENOMEM, or the module's. */
int TM_NAME(create)(TM_NAME(model) **out, const tm_config *cfg, size_t max_batch);
/* Free a model, its modules and caches. NULL allowed. */
void TM_NAME(destroy)(TM_NAME(model) *m);
/* The configuration it was made with (borrowed). */
const tm_config *TM_NAME(get_config)(const TM_NAME(model) *m);

/* Own parameter / gradient buffers (layout: tm_tensor_info_at); *count gets the
 * length. Borrowed, valid until destroy. */
TM_REAL *TM_NAME(params)(TM_NAME(model) *m, size_t *count);
TM_REAL *TM_NAME(grads)(TM_NAME(model) *m, size_t *count);
/* Layer l's attention module (borrowed; NULL if l >= L). Its parameters and
 * gradients are TM_MHA(params)/TM_MHA(grads) of it. */
TM_MHA(module) *TM_NAME(layer)(TM_NAME(model) *m, size_t l);

/* All gradients (own and every layer's) := 0. */
int TM_NAME(zero_grad)(TM_NAME(model) *m);

/* Forward of a batch; *loss (may be NULL) gets the mean cross-entropy over the
 * scored positions. Training mode applies attention dropout and advances each
 * layer's call counter. Saves what backward needs (x_0..x_L, ctx, logits).
 * Errors: MHA_EINVAL (bad ids/targets, NULL), MHA_ESHAPE (B > max_batch). */
int TM_NAME(forward)(TM_NAME(model) *m, const tm_batch *b, int training, double *loss);

/* Accumulate dloss/dθ for every parameter (own and layers') for the last forward,
 * whose batch b must be passed again unchanged. MHA_ESTATE without a forward. */
int TM_NAME(backward)(TM_NAME(model) *m, const tm_batch *b);

/* Logits of the last forward [B, S, V] (borrowed). */
const TM_REAL *TM_NAME(logits)(const TM_NAME(model) *m);

/* Argmax predictions of the last forward against b->targets:
 *   *tok_correct / *tok_scored over scored positions; *seq_correct = examples
 *   whose scored positions are all right (examples with none scored count as right).
 * Ties go to the lowest class. */
int TM_NAME(accuracy)(const TM_NAME(model) *m, const tm_batch *b, size_t *tok_correct,
                      size_t *tok_scored, size_t *seq_correct);

/* Attention weights P [B, H, S, Sk or S] of layer l in the last forward (borrowed,
 * valid until the next forward); shape[] as TM_MHA(cache_attention). */
int TM_NAME(attention)(const TM_NAME(model) *m, size_t l, const TM_REAL **weights,
                       size_t shape[4]);

/* Dropout call counters of all layers: idx[L] (get copies out, set copies in). */
int TM_NAME(get_call_indices)(const TM_NAME(model) *m, uint64_t *idx);
int TM_NAME(set_call_indices)(TM_NAME(model) *m, const uint64_t *idx);

/* Saved activations of the last forward (borrowed, valid until the next forward):
 * the residual stream x_l [B, S, D] for l = 0..L (x_0 = embeddings, x_L feeds the
 * read-out; rows of example b start at b·S·D), and the embedded context [B, Sk, D]
 * (NULL for a self-attention model). NULL for l > L. */
const TM_REAL *TM_NAME(activation)(const TM_NAME(model) *m, size_t l);
const TM_REAL *TM_NAME(context)(const TM_NAME(model) *m);
