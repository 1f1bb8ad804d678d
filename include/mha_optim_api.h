/*
 * Typed half of mha_optim.h, included twice (no include guard on purpose):
 *   MHA_REAL = float,  MHA_NAME(x) = mha_##x    (mha_optimizer, mha_optim_step, ...)
 *   MHA_REAL = double, MHA_NAME(x) = mhad_##x   (mhad_optimizer, mhad_optim_step, ...)
 * "MHA_REAL" below is the precision's element type: params, grads and moments are
 * MHA_REAL arrays; every element update and the gradient norm are computed in double
 * (mha_optim.h). Do not include this file directly; include <mha_optim.h> or <mha.h>.
 */
#if !defined(MHA_REAL) || !defined(MHA_NAME)
#error "include <mha_optim.h>, not mha_optim_api.h"
#endif

/* Opaque; owns its moment buffers and copies of the group names, borrows the
 * parameter and gradient arrays. */
typedef struct MHA_NAME(optimizer) MHA_NAME(optimizer);

/* Create an optimizer with no groups and step count 0; *out is owned, free it with
 * MHA_NAME(optim_destroy). The config is copied. MHA_EINVAL (out or cfg NULL, unknown
 * kind, a used field out of range), MHA_ENOMEM; on error *out is not written. */
MHA_API int MHA_NAME(optim_create)(MHA_NAME(optimizer) **out, const mha_optim_config *cfg);

/* Free the optimizer, its moment buffers and names (not the borrowed parameter and
 * gradient arrays). NULL is a no-op. */
MHA_API void MHA_NAME(optim_destroy)(MHA_NAME(optimizer) *o);

/* Register a parameter group: params[n] and grads[n] are borrowed (they must outlive
 * the optimizer, and no two parameter or gradient arrays of any groups may overlap);
 * the optimizer allocates the group's moment buffers [n] MHA_REAL, zeroed: m for SGD
 * with momentum ≠ 0, m and v for Adam/AdamW, none for plain SGD. name (non-empty,
 * unique within the optimizer) is copied; it identifies the group in checkpoints.
 * Groups are numbered 0, 1, … in the order added. Groups must be added before the
 * first step (the step count is shared by all groups, so a late group would get the
 * wrong bias correction).
 * MHA_EINVAL (NULL pointer, n == 0, empty or duplicate name), MHA_EOVERFLOW
 * (n·sizeof(MHA_REAL) overflows size_t), MHA_ENOMEM, MHA_ESTATE (step count ≠ 0);
 * on error the optimizer is unchanged. */
MHA_API int MHA_NAME(optim_add)(MHA_NAME(optimizer) *o, const char *name, MHA_REAL *params,
                                MHA_REAL *grads, size_t n);

/* The same with this group's own weight decay (torch's per-param-group weight_decay),
 * used instead of cfg.weight_decay for its elements — e.g. AdamW's decay on matmul
 * weights only, 0 for biases, norms and embeddings. Same errors as MHA_NAME(optim_add),
 * plus MHA_EINVAL for weight_decay negative, infinite or NaN. */
MHA_API int MHA_NAME(optim_add_decay)(MHA_NAME(optimizer) *o, const char *name,
                                      MHA_REAL *params, MHA_REAL *grads, size_t n,
                                      double weight_decay);

/* One group for a model's whole parameter arena: params[n] and grads[n] (borrowed, as in
 * MHA_NAME(optim_add)) made of nseg consecutive tensors, tensor k being elements
 * end[k−1] .. end[k]−1 (end[−1] = 0, so end[nseg−1] = n) with its own weight decay
 * weight_decay[k] (e.g. 0.1 on the matrices, 0 on biases, norms and embeddings). One
 * moment buffer [n] each (MHA_NAME(optim_group) gives it; tensor k's moments are at its
 * offset end[k−1]). The work of every loop is cut at the tensors' boundaries as if each
 * tensor were a group of its own, so the results are bit for bit those of nseg groups added
 * one by one with MHA_NAME(optim_add_decay), at any thread count. end and weight_decay are
 * read during the call only.
 * Same errors as MHA_NAME(optim_add_decay), plus MHA_EINVAL for nseg == 0, end or
 * weight_decay NULL, end not increasing or end[nseg−1] ≠ n, and a weight decay negative,
 * infinite or NaN; on error the optimizer is unchanged. */
MHA_API int MHA_NAME(optim_add_segments)(MHA_NAME(optimizer) *o, const char *name,
                                         MHA_REAL *params, MHA_REAL *grads, size_t n,
                                         size_t nseg, const size_t *end,
                                         const double *weight_decay);

/* Global gradient-norm clipping, torch.nn.utils.clip_grad_norm_ (L2, over all groups):
 *   norm = √(Σ_groups Σ_i grads[i]²)        (accumulated in double)
 *   coef = max_norm / (norm + 1e-6)
 *   if max_norm > 0 and coef < 1:  grads[i] ← grads[i]·coef   for every group
 * (coef < 1 is torch's clamp(coef, max = 1): it holds for norm > max_norm − 1e-6, so a
 * norm exactly equal to max_norm is scaled by max_norm / (max_norm + 1e-6).)
 * Writes the norm BEFORE clipping to *norm unless norm == NULL. max_norm == 0 only
 * measures; max_norm = +∞ never clips. No groups: norm 0.
 * MHA_EINVAL (o NULL, max_norm negative or NaN); MHA_ENONFINITE if the norm is not
 * finite: some gradient is NaN or ±∞ or — float64 only, for gradients beyond ~1e154 —
 * Σ grads[i]² overflows double (float32 gradients cannot overflow it); on error nothing
 * is written, *norm included. */
MHA_API int MHA_NAME(optim_clip_grad_norm)(MHA_NAME(optimizer) *o, double max_norm,
                                           double *norm);

/* One update of every group with learning rate lr (formulas in mha_optim.h), then
 * t ← t + 1 (the update uses the new t; the first step has t = 1). Reads grads, writes
 * params and the moment buffers; does not zero the gradients. Allocates nothing.
 * With no groups it only increments t. Results are not checked: finite inputs can
 * still overflow MHA_REAL for absurd lr.
 * MHA_EINVAL (o NULL, lr negative, NaN or infinite); MHA_ENONFINITE if any gradient of
 * any group is NaN or ±∞ (checked before anything is written); MHA_EOVERFLOW if
 * t == UINT64_MAX. On error params, moments and t are unchanged. */
MHA_API int MHA_NAME(optim_step)(MHA_NAME(optimizer) *o, double lr);

/* Number of registered groups (0 for o == NULL). */
MHA_API size_t MHA_NAME(optim_num_groups)(const MHA_NAME(optimizer) *o);

/* Checkpoint access to group `index` (0 .. num_groups−1): its name (borrowed, owned by
 * the optimizer), its element count n and its moment buffers, borrowed and writable so
 * a checkpoint can be loaded into them, each [n] MHA_REAL, valid until
 * MHA_NAME(optim_destroy):
 *   SGD, momentum ≠ 0:  *m = momentum buffer, *v = NULL
 *   SGD, momentum = 0:  *m = NULL,            *v = NULL   (plain SGD keeps no state)
 *   Adam, AdamW:        *m = first moment,    *v = second moment (must stay >= 0)
 * Any output pointer may be NULL to skip it.
 * MHA_EINVAL (o NULL, index out of range); on error nothing is written. */
MHA_API int MHA_NAME(optim_group)(MHA_NAME(optimizer) *o, size_t index, const char **name,
                                  size_t *n, MHA_REAL **m, MHA_REAL **v);

/* Step count t: the number of completed MHA_NAME(optim_step) calls (or the value set).
 * get: MHA_EINVAL for NULL. set: any value; the next step uses t + 1 in the Adam bias
 * correction (MHA_EINVAL for o NULL). Together with the moment buffers this is the
 * whole optimizer state. */
MHA_API int MHA_NAME(optim_get_step)(const MHA_NAME(optimizer) *o, uint64_t *t);
MHA_API int MHA_NAME(optim_set_step)(MHA_NAME(optimizer) *o, uint64_t t);
