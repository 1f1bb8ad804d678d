/*
 * A finite-difference gradient checker for any layer, not just attention.
 *
 * You give it a loss callback L(ctx) and, for each tensor to check, its values
 * (perturbed in place and always restored) and your analytic gradient dL/dvalue.
 * It returns numbers — per tensor, the largest absolute and relative error and the
 * worst element — for tests to assert on. It never prints.
 *
 * Two modes (mha_gc_options.directions):
 *   0      every element:  n_k = (L(x + h·e_k) − L(x − h·e_k)) / 2h  vs  a_k = g_k
 *   m > 0  m random directions v (entries ±1, from PCG32):
 *          n = (L(x + h·v) − L(x − h·v)) / 2h  vs  a = vᵀ·g   (cost: 2m calls)
 * Pass criterion per compared pair: |a − n| <= atol + rtol·|n|.
 *
 * Good practice (what tests/test_mha_grad.c does):
 *   - float64 only; no -ffast-math;
 *   - loss L = Σ R ⊙ out with a fixed random R: a plain Σ out through a softmax has
 *     zero gradient and hides bugs;
 *   - freeze randomness (dropout masks) so every evaluation sees the same mask.
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_GRADCHECK_H
#define MHA_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Evaluate the loss at the current values of all tensors. Return 0 on success;
 * any nonzero return stops the check and is passed back by mha_gradcheck. */
typedef int (*mha_gc_loss_fn)(void *ctx, double *loss);

typedef struct mha_gc_tensor {
    const char *name;   /* for messages; may be NULL                              */
    double *value;      /* [n] perturbed in place during the check, then restored */
    const double *grad; /* [n] analytic dL/dvalue at the unperturbed point        */
    size_t n;
} mha_gc_tensor;

typedef struct mha_gc_options {
    double step;       /* h; 0 means 1e-5                                        */
    double atol;       /* 0 means 1e-7  (pass: |a − n| <= atol + rtol·|n|)       */
    double rtol;       /* 0 means 1e-6                                            */
    size_t directions; /* 0: every element; m > 0: m random directions per tensor */
    uint64_t seed;     /* seeds the random directions                             */
} mha_gc_options;

typedef struct mha_gc_result {
    double max_abs_err;    /* max |a − n| over compared pairs                       */
    double max_rel_err;    /* max |a − n| / max(|a|, |n|)  (0 when both are 0). Not
                              a verdict: where a is exactly 0 (a parameter the loss
                              does not depend on, e.g. w_k.bias: softmax ignores a
                              per-row shift) any rounding noise in n gives 1.0. Judge
                              by worst_ratio; mha_gc_format says it in words.       */
    double worst_ratio;    /* max |a − n| / (atol + rtol·|n|); the tensor passes iff
                              worst_ratio <= 1                                       */
    size_t worst_index;    /* element (or direction number) with the largest ratio  */
    double worst_analytic; /* a at worst_index                                       */
    double worst_numeric;  /* n at worst_index                                       */
    size_t compared;       /* number of pairs compared (n, or directions)           */
    double max_abs_analytic; /* max |a|: 0 means the analytic gradient is exactly 0  */
} mha_gc_result;

/* Check `count` tensors; results[t] describes tensors[t]. opt may be NULL for the
 * defaults. Values are restored exactly (the saved value is written back) even
 * when the callback fails. Returns 0 (MHA_OK) whether or not the gradients pass —
 * read results[t].worst_ratio — or MHA_EINVAL (NULL pointers, non-finite or
 * negative options; nothing evaluated), MHA_ENOMEM / MHA_EOVERFLOW (direction
 * mode copies each tensor), or the callback's nonzero return. After a failure,
 * results[] is filled for the tensors finished before it and untouched for the
 * rest. */
MHA_API int mha_gradcheck(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor *tensors,
                          size_t count, const mha_gc_options *opt, mha_gc_result *results);

/* One line a reader can trust, for logs and test messages (the library itself never
 * prints). Written into buf[size] (NUL-terminated, truncated to fit), e.g.
 *   "w_q.weight: pass (worst ratio 0.031 <= 1), max |a-n| 2.1e-12, max rel 3.4e-09, 1024 compared"
 *   "w_k.bias: pass (worst ratio 0.0002 <= 1), max |a-n| 2.3e-14; analytic gradient exactly 0,
 *    so rel is meaningless, 64 compared"
 *   "w_o.bias: FAIL (worst ratio 31 > 1) at 7: analytic 0.5 numeric 0.25, max |a-n| 0.25, ..."
 * name may be NULL. Returns MHA_OK, or MHA_EINVAL for a NULL r or buf or size 0. */
MHA_API int mha_gc_format(const mha_gc_result *r, const char *name, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* MHA_GRADCHECK_H */
