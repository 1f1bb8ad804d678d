/*
 * Optimizers (SGD with momentum, Adam, AdamW), global gradient-norm clipping and a
 * warm-up + cosine learning-rate schedule, with PyTorch semantics.
 *
 * Two precisions from one source (src/optim_core.c; typed half in mha_optim_api.h),
 * as the rest of the library:
 *   mha_optimizer,  mha_optim_create, mha_optim_add(…, float *params, float *grads, …),
 *                   mha_optim_step, mha_optim_group(…, float **m, float **v) …  float32
 *   mhad_optimizer, mhad_optim_create, mhad_optim_add(…, double *params, double *grads, …),
 *                   mhad_optim_step, mhad_optim_group(…, double **m, double **v) … float64
 * The config, the kinds, the defaults and the learning-rate schedule are shared
 * (mha_optim_config, mha_optim_kind, mha_optim_default_config, mha_lr_schedule,
 * mha_lr_at). Both precisions compute every element update and the gradient norm in
 * double; they differ only in the storage of parameters, gradients and moments:
 *   float32 (training the float modules): each element is read as float, updated in
 *     double and rounded once to float when stored — exactly the arithmetic of the
 *     float-only optimizer this API started as (its results are unchanged, bit for bit);
 *   float64 (training the mhad_ modules, e.g. to compare with a float64 reference):
 *     the same formulas with no rounding to float anywhere, so a step agrees with the
 *     formulas below evaluated in double to the last few ulp.
 * Everything below holds for both precisions (the typed declarations, written once
 * in mha_optim_api.h with MHA_REAL for the element type, are listed there).
 *
 * Usage, one training step (the module's flat parameter and gradient buffers are one
 * group; any layer with a parameter buffer can be another; mhad_ the same with double):
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
 * Threads: mha_optim_step shares the element updates of large groups among as many of the
 * library's threads as the calling thread's OpenMP setting (omp_get_max_threads()); the
 * result does not depend on their number. An optimizer is used by one thread at a time.
 * Part of <mha.h>; may be included on its own (status codes are in <mha.h>).
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

/* Fill *cfg with torch's defaults for `kind`:
 *   SGD:   momentum 0, weight_decay 0
 *   Adam:  beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0
 *   AdamW: beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01
 * (unused fields are set to 0). MHA_EINVAL for cfg == NULL or an unknown kind. */
MHA_API int mha_optim_default_config(mha_optim_kind kind, mha_optim_config *cfg);

/* ---- Optimizer, per precision ------------------------------------------------- */
#define MHA_REAL float
#define MHA_NAME(n) mha_##n
#include "mha_optim_api.h"
#undef MHA_REAL
#undef MHA_NAME

#define MHA_REAL double
#define MHA_NAME(n) mhad_##n
#include "mha_optim_api.h"
#undef MHA_REAL
#undef MHA_NAME

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
