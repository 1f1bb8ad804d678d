/*
 * Optimizers (SGD with momentum, Adam, AdamW), global gradient-norm clipping and a
 * warm-up + cosine learning-rate schedule, with PyTorch semantics.
 *
 * Precision: float32. Parameters, gradients and moment buffers are float arrays,
 * because training runs the float instantiation of the module (mha_module); the
 * arithmetic of each element update is done in double and rounded once when stored,
 * and the gradient norm is accumulated in double.
 *
 * Usage, one training step (the module's flat parameter and gradient buffers are one
 * group; any layer with a float buffer can be another):
 *
 *   mha_optim_config cfg;  mha_optim_default_config(MHA_OPTIM_ADAMW, &cfg);
 *   mha_optimizer *opt;    mha_optim_create(&opt, &cfg);
 *   mha_optim_add(opt, "attn", params, grads, n);     // borrowed, not copied
 *   for (step = 0; step < total; step++) {
 *       zero the gradients; forward; backward (accumulates into grads);
 *       mha_lr_at(&sched, step, &lr);
 *       if (mha_optim_clip_grad_norm(opt, 1.0, &norm) == MHA_ENONFINITE) skip this step;
 *       mha_optim_step(opt, lr);
 *   }
 *   mha_optim_destroy(opt);
 *
 * Per element i of every group, with p = params[i], g = grads[i], t the step count
 * AFTER the increment (the first step uses t = 1), lr the step's learning rate,
 * wd = weight_decay (torch.optim.SGD / Adam / AdamW, maximize = False):
 *
 *   SGD     g ← g + wd·p
 *           if momentum ≠ 0:  m ← momentum·m + g;  g ← m     (dampening 0, no Nesterov)
 *           p ← p − lr·g
 *   Adam    g ← g + wd·p                                       (coupled L2)
 *           m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²
 *           p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + eps)
 *   AdamW   p ← p·(1 − lr·wd)                                  (decoupled decay, first)
 *           then the Adam update with the raw g (no wd term in g)
 *
 * Moment buffers start at zero, so the first momentum step gives m = g exactly as
 * torch's "buffer = clone(grad)" does. The optimizer state is exactly the moment
 * buffers plus the step count t: restoring them (mha_optim_group, mha_optim_set_step)
 * continues a run bit for bit.
 *
 * Threads: mha_optim_step shares the element updates of large groups among the calling
 * thread's OpenMP threads (omp_get_max_threads()); the result does not depend on their
 * number. An optimizer is used by one thread at a time. Part of <mha.h>; may
 * be included on its own (status codes are in <mha.h>).
 */
#ifndef MHA_OPTIM_H
#define MHA_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mha_optim_kind {
    MHA_OPTIM_SGD = 0,  /* torch.optim.SGD   */
    MHA_OPTIM_ADAM = 1, /* torch.optim.Adam  */
    MHA_OPTIM_ADAMW = 2 /* torch.optim.AdamW */
} mha_optim_kind;

/* Hyper-parameters. Only the fields the kind uses are read and validated:
 *   SGD:         momentum, weight_decay
 *   Adam, AdamW: weight_decay, beta1, beta2, eps
 * Valid ranges (anything else, NaN included, is MHA_EINVAL):
 *   0 <= momentum < 1,  0 <= weight_decay < ∞,  0 <= beta1 < 1,  0 <= beta2 < 1,
 *   0 < eps < ∞ (torch also allows eps = 0, which divides 0 by 0 for a gradient
 *   element that has been exactly zero so far; we refuse it). */
typedef struct mha_optim_config {
    mha_optim_kind kind;
    double momentum;     /* SGD: 0 = plain SGD; torch.optim.SGD semantics (dampening 0,
                            no Nesterov)                                               */
    double weight_decay; /* SGD and Adam: coupled L2 (g += wd·p), as torch.optim.SGD/Adam;
                            AdamW: decoupled p −= lr·wd·p, as torch.optim.AdamW         */
    double beta1, beta2, eps; /* Adam/AdamW; with bias correction, torch semantics     */
} mha_optim_config;

/* Opaque; owns its moment buffers and copies of the group names, borrows the
 * parameter and gradient arrays. */
typedef struct mha_optimizer mha_optimizer;

/* Fill *cfg with torch's defaults for `kind`:
 *   SGD:   momentum 0, weight_decay 0
 *   Adam:  beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0
 *   AdamW: beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01
 * (unused fields are set to 0). MHA_EINVAL for cfg == NULL or an unknown kind. */
MHA_API int mha_optim_default_config(mha_optim_kind kind, mha_optim_config *cfg);

/* Create an optimizer with no groups and step count 0; *out is owned, free it with
 * mha_optim_destroy. The config is copied. MHA_EINVAL (out or cfg NULL, unknown kind,
 * a used field out of range), MHA_ENOMEM; on error *out is not written. */
MHA_API int mha_optim_create(mha_optimizer **out, const mha_optim_config *cfg);

/* Free the optimizer, its moment buffers and names (not the borrowed parameter and
 * gradient arrays). NULL is a no-op. */
MHA_API void mha_optim_destroy(mha_optimizer *o);

/* Register a parameter group: params[n] and grads[n] are borrowed (they must outlive
 * the optimizer, and no two parameter or gradient arrays of any groups may overlap);
 * the optimizer allocates the group's moment buffers, zeroed: m[n] for SGD with
 * momentum ≠ 0, m[n] and v[n] for Adam/AdamW, none for plain SGD. name (non-empty, unique within the optimizer) is copied; it
 * identifies the group in checkpoints. Groups are numbered 0, 1, … in the order added.
 * Groups must be added before the first step (the step count is shared by all groups,
 * so a late group would get the wrong bias correction).
 * MHA_EINVAL (NULL pointer, n == 0, empty or duplicate name), MHA_EOVERFLOW
 * (n·sizeof(float) overflows size_t), MHA_ENOMEM, MHA_ESTATE (step count ≠ 0);
 * on error the optimizer is unchanged. */
MHA_API int mha_optim_add(mha_optimizer *o, const char *name, float *params, float *grads,
                          size_t n);

/* The same with this group's own weight decay (torch's per-param-group weight_decay),
 * used instead of cfg.weight_decay for its elements — e.g. AdamW's decay on matmul
 * weights only, 0 for biases, norms and embeddings. Same errors as mha_optim_add, plus
 * MHA_EINVAL for weight_decay negative, infinite or NaN. */
MHA_API int mha_optim_add_decay(mha_optimizer *o, const char *name, float *params, float *grads,
                                size_t n, double weight_decay);

/* Global gradient-norm clipping, torch.nn.utils.clip_grad_norm_ (L2, over all groups):
 *   norm = √(Σ_groups Σ_i grads[i]²)        (accumulated in double)
 *   coef = max_norm / (norm + 1e-6)
 *   if max_norm > 0 and coef < 1:  grads[i] ← grads[i]·coef   for every group
 * (coef < 1 is torch's clamp(coef, max = 1): it holds for norm > max_norm − 1e-6, so a
 * norm exactly equal to max_norm is scaled by max_norm / (max_norm + 1e-6).)
 * Writes the norm BEFORE clipping to *norm unless norm == NULL. max_norm == 0 only
 * measures; max_norm = +∞ never clips. No groups: norm 0.
 * MHA_EINVAL (o NULL, max_norm negative or NaN); MHA_ENONFINITE if any gradient is NaN
 * or ±∞ (the norm is then not finite); on error nothing is written, *norm included. */
MHA_API int mha_optim_clip_grad_norm(mha_optimizer *o, double max_norm, double *norm);

/* One update of every group with learning rate lr (formulas at the top of this file),
 * then t ← t + 1 (the update uses the new t; the first step has t = 1). Reads grads,
 * writes params and the moment buffers; does not zero the gradients. Allocates nothing.
 * With no groups it only increments t. Results are not checked: finite inputs can
 * still overflow float for absurd lr.
 * MHA_EINVAL (o NULL, lr negative, NaN or infinite); MHA_ENONFINITE if any gradient of
 * any group is NaN or ±∞ (checked before anything is written); MHA_EOVERFLOW if
 * t == UINT64_MAX. On error params, moments and t are unchanged. */
MHA_API int mha_optim_step(mha_optimizer *o, double lr);

/* Number of registered groups (0 for o == NULL). */
MHA_API size_t mha_optim_num_groups(const mha_optimizer *o);

/* Checkpoint access to group `index` (0 .. num_groups−1): its name (borrowed, owned by
 * the optimizer), its element count n and its moment buffers, borrowed and writable so
 * a checkpoint can be loaded into them, each [n] floats, valid until mha_optim_destroy:
 *   SGD, momentum ≠ 0:  *m = momentum buffer, *v = NULL
 *   SGD, momentum = 0:  *m = NULL,            *v = NULL   (plain SGD keeps no state)
 *   Adam, AdamW:        *m = first moment,    *v = second moment (must stay >= 0)
 * Any output pointer may be NULL to skip it.
 * MHA_EINVAL (o NULL, index out of range); on error nothing is written. */
MHA_API int mha_optim_group(mha_optimizer *o, size_t index, const char **name, size_t *n,
                            float **m, float **v);

/* Step count t: the number of completed mha_optim_step calls (or the value set).
 * get: MHA_EINVAL for NULL. set: any value; the next step uses t + 1 in the Adam bias
 * correction (MHA_EINVAL for o NULL). Together with the moment buffers this is the
 * whole optimizer state. */
MHA_API int mha_optim_get_step(const mha_optimizer *o, uint64_t *t);
MHA_API int mha_optim_set_step(mha_optimizer *o, uint64_t t);

/* ---- Learning-rate schedule ------------------------------------------------ */
/* Linear warm-up, then cosine decay, then constant. With W = warmup_steps,
 * T = total_steps, steps counted from 0 (step k is the k-th call of mha_optim_step,
 * i.e. the one that runs with t = k + 1):
 *
 *   step < W:                 lr = base_lr · (step + 1) / W
 *   W <= step < T − 1:        lr = min_lr + (base_lr − min_lr) · (1 + cos(π·q)) / 2,
 *                             q = (step − W) / (T − 1 − W)   ∈ [0, 1)
 *   step >= T − 1 (and >= W): lr = min_lr
 *
 * so lr rises to base_lr at step W − 1, equals base_lr at step W (q = 0), passes
 * (base_lr + min_lr)/2 halfway (q = 1/2), reaches min_lr at step T − 1 and stays there.
 * W = 0 means no warm-up. If W = T − 1 there is no cosine segment: step T − 1 = W
 * already gets min_lr. min_lr = base_lr gives warm-up then a constant. */
typedef struct mha_lr_schedule {
    double base_lr;        /* peak rate, finite, >= 0                  */
    double min_lr;         /* final rate, 0 <= min_lr <= base_lr       */
    uint64_t warmup_steps; /* W, 0 <= W < T                           */
    uint64_t total_steps;  /* T >= 1                                  */
} mha_lr_schedule;

/* The learning rate of `step` (formula above) into *lr. Any step is valid (steps past
 * the end give min_lr). MHA_EINVAL (NULL pointer, a field out of range or NaN); on error
 * *lr is not written. */
MHA_API int mha_lr_at(const mha_lr_schedule *s, uint64_t step, double *lr);

#ifdef __cplusplus
}
#endif

#endif /* MHA_OPTIM_H */
