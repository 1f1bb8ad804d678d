/*
 * Finite-difference gradient checker (include/mha_gradcheck.h).
 *
 * For one tensor x [n] with analytic gradient g [n] and loss L:
 *   element mode (directions == 0), for k = 0..n−1:
 *       n_k = (L(x + h·e_k) − L(x − h·e_k)) / 2h        a_k = g_k
 *   direction mode (directions == m > 0), for d = 0..m−1, v ∈ {−1, +1}^n from PCG32:
 *       n_d = (L(x + h·v) − L(x − h·v)) / 2h            a_d = vᵀ·g
 *   each pair (a, n) is compared by |a − n| <= atol + rtol·|n|.
 * Only one tensor is perturbed at a time; the others keep their values.
 *
 * Exact restore: x ± h then ∓ h is not x in floating point, so the saved values are
 * written back — one scalar in element mode, a copy of the tensor (n doubles, freed
 * before returning) in direction mode — on success and on callback failure alike.
 *
 * Direction signs: one PCG32 generator, seeded (opt->seed, MHA_GC_STREAM) once per
 * call, supplies all directions of all tensors in order. Element i of a direction
 * takes bit (i mod 32) of the direction's (i div 32)-th output: 1 → +1, 0 → −1. A
 * copy of the generator replays the same direction for the x − h·v evaluation.
 */
#include "mha.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defaults for options left at 0 (documented in mha_gradcheck.h). */
#define MHA_GC_DEFAULT_STEP 1e-5
#define MHA_GC_DEFAULT_ATOL 1e-7
#define MHA_GC_DEFAULT_RTOL 1e-6

/* PCG32 stream of the random directions: distinct from the library's streams
 * (MHA_PCG32_STREAM_INIT = 1, MHA_PCG32_STREAM_DROPOUT = 2) and from the tests'
 * fill_uniform stream 99. */
#define MHA_GC_STREAM 0x6763u /* "gc" */

/* Resolved options: every value finite and positive. */
typedef struct gc_opts {
    double h, atol, rtol;
    size_t directions;
    uint64_t seed;
} gc_opts;

/* An option value must be finite and >= 0; 0 selects the default. */
static int resolve_option(double v, double def, double *out)
{
    if (!(isfinite(v) && v >= 0.0))
        return MHA_EINVAL;
    *out = v == 0.0 ? def : v;
    return MHA_OK;
}

static int resolve_options(const mha_gc_options *opt, gc_opts *o)
{
    o->h = MHA_GC_DEFAULT_STEP;
    o->atol = MHA_GC_DEFAULT_ATOL;
    o->rtol = MHA_GC_DEFAULT_RTOL;
    o->directions = 0;
    o->seed = 0;
    if (opt == NULL)
        return MHA_OK;
    int rc;
    if ((rc = resolve_option(opt->step, MHA_GC_DEFAULT_STEP, &o->h)) != MHA_OK ||
        (rc = resolve_option(opt->atol, MHA_GC_DEFAULT_ATOL, &o->atol)) != MHA_OK ||
        (rc = resolve_option(opt->rtol, MHA_GC_DEFAULT_RTOL, &o->rtol)) != MHA_OK)
        return rc;
    o->directions = opt->directions;
    o->seed = opt->seed;
    return MHA_OK;
}

/* Fold one compared pair (analytic a, numeric n) of index idx into *r.
 *   err = |a − n|,  rel = err / max(|a|, |n|) (0 when both are 0),
 *   ratio = err / (atol + rtol·|n|).
 * NaN anywhere (a NaN loss or gradient) makes the ratio NaN; the first NaN ratio
 * sticks as the worst, so worst_ratio <= 1 is false and the tensor fails. */
static void gc_accumulate(mha_gc_result *r, const gc_opts *o, size_t idx, double a, double n)
{
    double err = fabs(a - n);
    double scale = fmax(fabs(a), fabs(n));
    double rel = scale > 0.0 ? err / scale : err; /* err is 0 (or NaN) when scale is 0 */
    double ratio = err / (o->atol + o->rtol * fabs(n));

    if (isnan(a) || fabs(a) > r->max_abs_analytic)
        r->max_abs_analytic = isnan(r->max_abs_analytic) ? r->max_abs_analytic : fabs(a);
    if (isnan(err) || err > r->max_abs_err)
        r->max_abs_err = isnan(r->max_abs_err) ? r->max_abs_err : err;
    if (isnan(rel) || rel > r->max_rel_err)
        r->max_rel_err = isnan(r->max_rel_err) ? r->max_rel_err : rel;
    int worse = !isnan(r->worst_ratio) && (isnan(ratio) || ratio > r->worst_ratio);
    if (worse || r->compared == 0) {
        r->worst_ratio = ratio;
        r->worst_index = idx;
        r->worst_analytic = a;
        r->worst_numeric = n;
    }
    r->compared++;
}

/* Element mode on one tensor: 2·n loss calls. x[k] is written back from its
 * saved value after each pair and before returning a callback failure. */
static int gc_check_elements(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor *t,
                             const gc_opts *o, mha_gc_result *r)
{
    double *x = t->value; /* [n] */
    for (size_t k = 0; k < t->n; k++) {
        const double saved = x[k];
        double lp = 0.0, lm = 0.0;
        int rc;
        x[k] = saved + o->h;
        rc = loss(ctx, &lp);
        if (rc == 0) {
            x[k] = saved - o->h;
            rc = loss(ctx, &lm);
        }
        x[k] = saved;
        if (rc != 0)
            return rc;
        gc_accumulate(r, o, k, t->grad[k], (lp - lm) / (2.0 * o->h));
    }
    return MHA_OK;
}

/* x[i] = saved[i] + sign·h·v_i for i < n, v from *dir (advanced by ⌈n/32⌉ outputs);
 * returns vᵀ·g when g is not NULL (else 0). */
static double gc_apply_direction(double *x, const double *saved, const double *g, size_t n,
                                 double signed_h, mha_pcg32 *dir)
{
    double dot = 0.0;
    uint32_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 32u == 0)
            bits = mha_pcg32_next(dir);
        double v = ((bits >> (i % 32u)) & 1u) ? 1.0 : -1.0;
        x[i] = saved[i] + signed_h * v;
        if (g != NULL)
            dot += v * g[i];
    }
    return dot;
}

/* Direction mode on one tensor: 2·m loss calls, rng advanced past the m
 * directions. Needs a saved copy of x (allocated here, freed before returning). */
static int gc_check_directions(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor *t,
                               const gc_opts *o, mha_pcg32 *rng, mha_gc_result *r)
{
    const size_t n = t->n;
    double *x = t->value; /* [n] */
    if (n > SIZE_MAX / sizeof(double))
        return MHA_EOVERFLOW;
    double *saved = malloc(n * sizeof(double) + (n == 0)); /* [n] */
    if (saved == NULL)
        return MHA_ENOMEM;
    memcpy(saved, x, n * sizeof(double));

    int rc = MHA_OK;
    for (size_t d = 0; d < o->directions; d++) {
        mha_pcg32 replay = *rng; /* the same v for x − h·v */
        double lp = 0.0, lm = 0.0;
        double a = gc_apply_direction(x, saved, t->grad, n, o->h, rng);
        rc = loss(ctx, &lp);
        if (rc == 0) {
            (void)gc_apply_direction(x, saved, NULL, n, -o->h, &replay);
            rc = loss(ctx, &lm);
        }
        memcpy(x, saved, n * sizeof(double));
        if (rc != 0)
            break;
        gc_accumulate(r, o, d, a, (lp - lm) / (2.0 * o->h));
    }
    free(saved);
    return rc;
}

/* See mha_gradcheck.h. tensors [count], results [count]; opt may be NULL.
 * Everything is validated before the first loss call: on MHA_EINVAL no value,
 * result or callback is touched. results[t] is written when tensor t is done, so
 * when the callback fails (its code is returned) or memory runs out (MHA_ENOMEM,
 * direction mode only), results of earlier tensors are filled and the rest are
 * left as they were; every tensor's values are back to their saved bits. */
int mha_gradcheck(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor *tensors,
                  size_t count, const mha_gc_options *opt, mha_gc_result *results)
{
    if (loss == NULL || tensors == NULL || results == NULL)
        return MHA_EINVAL;
    for (size_t t = 0; t < count; t++)
        if (tensors[t].n > 0 && (tensors[t].value == NULL || tensors[t].grad == NULL))
            return MHA_EINVAL;
    gc_opts o;
    int rc = resolve_options(opt, &o);
    if (rc != MHA_OK)
        return rc;

    mha_pcg32 rng;
    mha_pcg32_seed(&rng, o.seed, MHA_GC_STREAM);
    for (size_t t = 0; t < count; t++) {
        mha_gc_result r;
        memset(&r, 0, sizeof r);
        if (o.directions == 0)
            rc = gc_check_elements(loss, ctx, &tensors[t], &o, &r);
        else
            rc = gc_check_directions(loss, ctx, &tensors[t], &o, &rng, &r);
        if (rc != 0)
            return rc;
        results[t] = r;
    }
    return MHA_OK;
}

int mha_gc_format(const mha_gc_result *r, const char *name, char *buf, size_t size)
{
    if (r == NULL || buf == NULL || size == 0)
        return MHA_EINVAL;
    const int pass = r->worst_ratio <= 1.0; /* false for NaN */
    int w = snprintf(buf, size, "%s: %s (worst ratio %.3g %s 1)", name != NULL ? name : "tensor",
                     pass ? "pass" : "FAIL", r->worst_ratio, pass ? "<=" : ">");
    if (w >= 0 && (size_t)w < size && !pass)
        w += snprintf(buf + w, size - (size_t)w, " at %zu: analytic %.12g numeric %.12g",
                      r->worst_index, r->worst_analytic, r->worst_numeric);
    if (w >= 0 && (size_t)w < size) {
        if (r->max_abs_analytic == 0.0)
            w += snprintf(buf + w, size - (size_t)w,
                          ", max |a-n| %.3g; analytic gradient exactly 0, so rel is meaningless",
                          r->max_abs_err);
        else
            w += snprintf(buf + w, size - (size_t)w, ", max |a-n| %.3g, max rel %.3g",
                          r->max_abs_err, r->max_rel_err);
    }
    if (w >= 0 && (size_t)w < size)
        snprintf(buf + w, size - (size_t)w, ", %zu compared", r->compared);
    return MHA_OK;
}
