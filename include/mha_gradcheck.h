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
 * Good practice (what tests/test_grad_table.c does):
 *   - float64 (mha_gradcheck) for tight checks; no -ffast-math. mha_gradcheck_f
 *     checks float32 layers as they are, but coarsely (see its comment below);
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
 * any nonzero return stops the check and is passed back by mha_gradcheck(_f).
 * The loss is a double for both checkers: accumulate it in double even when the
 * layer computes in float32. */
typedef int (*mha_gc_loss_fn)(void *ctx, double *loss);

typedef struct mha_gc_tensor {
    const char *name;   /* for messages; may be NULL                              */
    double *value;      /* [n] perturbed in place during the check, then restored */
    const double *grad; /* [n] analytic dL/dvalue at the unperturbed point        */
    size_t n;
} mha_gc_tensor;

/* The same for float32 tensors (mha_gradcheck_f). */
typedef struct mha_gc_tensor_f {
    const char *name;  /* for messages; may be NULL                              */
    float *value;      /* [n] perturbed in place during the check, then restored */
    const float *grad; /* [n] analytic dL/dvalue at the unperturbed point        */
    size_t n;
} mha_gc_tensor_f;

/* Options of both checkers; 0 selects the checker's default (float64 | float32). */
typedef struct mha_gc_options {
    double step;       /* h; 0 means 1e-5 | 5e-3                                 */
    double atol;       /* 0 means 1e-7 | 1e-3  (pass: |a − n| <= atol + rtol·|n|) */
    double rtol;       /* 0 means 1e-6 | 1e-2                                     */
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

/* The same check for float32 tensors: the same algorithm (one implementation),
 * options, results, errors and restore guarantee (the saved float bits are written
 * back, on callback failure too).
 *
 * Float32 finite differences are coarse. For a tight check, check the float64 build
 * of a layer with mha_gradcheck (1e-7 + 1e-6·|n|) and compare its float32 gradients
 * with the float64 ones. Use this for float-only code, as a test that catches wrong
 * terms, signs and factors — not subtle errors. Why: the layer's outputs carry float
 * rounding (relative ε = 6e-8 each), so the loss carries noise of about ε·Σ|terms|,
 * which the difference quotient divides by 2h; a small step (tight truncation error
 * h²·|L‴|/6) amplifies that noise, a large one blurs curvature. Hence the defaults
 * for options left at 0:
 *   step 5e-3   ≈ ∛ε (∛FLT_EPSILON = 4.9e-3), the textbook step where the two errors
 *               balance for values and loss terms of order 1: truncation ~4e-6·|L‴|,
 *               noise ~1e-5·Σ|terms|. For values of scale s pass step ≈ 5e-3·s;
 *   atol 1e-3   covers that noise up to Σ|terms| of order 100 (raise it with the
 *               size of the loss, or normalise the loss);
 *   rtol 1e-2   a 1% relative error passes; a 10% error on one element (above
 *               ~0.01 in size: below, atol hides it) or a wrong sign fails
 *               (tests/test_gradcheck.c shows both).
 * Direction mode moves all n elements at once, a step of length h·√n, so its
 * truncation error is larger (a 20-element Linear weight: worst ratio 0.2 with the
 * defaults, 0.006 element by element), and one element's error is diluted in vᵀ·g:
 * prefer element mode, or lower the step for large tensors.
 * Two float32 details. x ± h is rounded to float, so the quotients use the
 * perturbation actually stored, δ = fl(x + h·v) − fl(x − h·v): element mode
 * n = (L⁺ − L⁻)/δ_k; direction mode a = Σ_i g_i·δ_i / 2h (vᵀ·g when δ = 2h·v), which
 * worst_analytic reports. And every element must move under the step: MHA_EINVAL
 * (before any evaluation) if fl(x + h) == fl(x − h) for some element — a NaN or
 * infinite value, or |x| >= about 2^24·h.
 * Random directions follow mha_gradcheck's rule: the same seed, tensor sizes and
 * order give the same ±1 signs. */
MHA_API int mha_gradcheck_f(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor_f *tensors,
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
