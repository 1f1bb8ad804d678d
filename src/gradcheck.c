/*
 * Finite-difference gradient checker (include/mha_gradcheck.h): float64
 * (mha_gradcheck) and float32 (mha_gradcheck_f) run ONE algorithm.
 *
 * For one tensor x [n] with analytic gradient g [n] and loss L:
 *   element mode (directions == 0), for k = 0..n−1:
 *       n_k = (L(x + h·e_k) − L(x − h·e_k)) / 2h        a_k = g_k
 *   direction mode (directions == m > 0), for d = 0..m−1, v ∈ {−1, +1}^n from PCG32:
 *       n_d = (L(x + h·v) − L(x − h·v)) / 2h            a_d = vᵀ·g
 *   each pair (a, n) is compared by |a − n| <= atol + rtol·|n|.
 * Only one tensor is perturbed at a time; the others keep their values.
 *
 * The precisions differ only in how an element is reached (gc_elem: read element i
 * as a double, store a double rounded to the element type), in the defaults, and in
 * one rule: float32 divides by the perturbation actually stored. x ± h rounded to
 * float is not x ± h (for x near 1, fl(x + h) − x is h ± 6e-8, a relative error of
 * 1.2e-5 in the default step 5e-3), so with x⁺ = fl(x + h·v), x⁻ = fl(x − h·v) and
 * δ = x⁺ − x⁻ (exact in double):
 *   element mode:    n_k = (L(x⁺) − L(x⁻)) / δ_k        a_k = g_k
 *   direction mode:  n_d = (L(x⁺) − L(x⁻)) / 2h         a_d = Σ_i g_i·δ_i / 2h
 * — the formulas above when δ = 2h·v. float64 keeps 2h and vᵀ·g, so its results
 * are bit for bit those of the checker before the float32 version existed.
 *
 * Exact restore: x ± h then ∓ h is not x in floating point, so the saved bytes are
 * copied back — one element in element mode, a copy of the tensor (n elements,
 * freed before returning) in direction mode — on success and on callback failure.
 *
 * Direction signs (both precisions): one PCG32 generator, seeded (opt->seed,
 * MHA_GC_STREAM) once per call, supplies all directions of all tensors in order.
 * Element i of a direction takes bit (i mod 32) of the direction's (i div 32)-th
 * output: 1 → +1, 0 → −1. A copy of the generator replays the same direction for
 * the x − h·v evaluation. The same seed, tensor sizes and order therefore give the
 * same directions in mha_gradcheck and mha_gradcheck_f.
 */
#include "mha.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defaults for options left at 0 (documented in mha_gradcheck.h).
 * float64: h = 1e-5, atol 1e-7, rtol 1e-6.
 * float32: h = 5e-3 ≈ ∛ε (ε = FLT_EPSILON, ∛ε = 4.9e-3), the step that balances
 * truncation h²·|L‴|/6 against loss rounding ~ε·Σ|terms|/h; atol 1e-3, rtol 1e-2
 * (mha_gradcheck_f in the header says what they do and do not catch). */
#define MHA_GC_DEFAULT_STEP 1e-5
#define MHA_GC_DEFAULT_ATOL 1e-7
#define MHA_GC_DEFAULT_RTOL 1e-6
#define MHA_GC_DEFAULT_STEP_F 5e-3
#define MHA_GC_DEFAULT_ATOL_F 1e-3
#define MHA_GC_DEFAULT_RTOL_F 1e-2

/* PCG32 stream of the random directions: distinct from the library's streams
 * (MHA_PCG32_STREAM_INIT = 1, MHA_PCG32_STREAM_DROPOUT = 2) and from the tests'
 * fill_uniform stream 99. */
#define MHA_GC_STREAM 0x6763u /* "gc" */

/* One tensor of either precision: value [n], grad [n] of gc_elem.size-byte elements. */
typedef struct gc_tensor {
    void *value;
    const void *grad;
    size_t n;
} gc_tensor;

/* How the algorithm reaches the elements of one precision: the only code that
 * differs between mha_gradcheck and mha_gradcheck_f. */
typedef struct gc_elem {
    size_t size;                              /* bytes per element                      */
    double (*get)(const void *a, size_t i);   /* a[i] as double (exact)                 */
    void (*set)(void *a, size_t i, double v); /* a[i] = v rounded to the element type   */
    double (*round)(double v);                /* v rounded to the element type          */
    gc_tensor (*tensor)(const void *tensors, size_t t); /* the public tensors[t]       */
    int realized; /* 1: quotients use the stored perturbation δ (float32, see top)     */
    double step, atol, rtol; /* defaults for options left at 0                          */
} gc_elem;

static double get_f64(const void *a, size_t i)
{
    return ((const double *)a)[i];
}
static void set_f64(void *a, size_t i, double v)
{
    ((double *)a)[i] = v;
}
static double round_f64(double v)
{
    return v;
}
static gc_tensor tensor_f64(const void *tensors, size_t t)
{
    const mha_gc_tensor *p = (const mha_gc_tensor *)tensors + t;
    return (gc_tensor){p->value, p->grad, p->n};
}
static double get_f32(const void *a, size_t i)
{
    return (double)((const float *)a)[i];
}
static void set_f32(void *a, size_t i, double v)
{
    ((float *)a)[i] = (float)v;
}
static double round_f32(double v)
{
    return (double)(float)v;
}
static gc_tensor tensor_f32(const void *tensors, size_t t)
{
    const mha_gc_tensor_f *p = (const mha_gc_tensor_f *)tensors + t;
    return (gc_tensor){p->value, p->grad, p->n};
}

static const gc_elem GC_F64 = {sizeof(double),      get_f64,    set_f64,
                               round_f64,           tensor_f64, 0,
                               MHA_GC_DEFAULT_STEP, MHA_GC_DEFAULT_ATOL, MHA_GC_DEFAULT_RTOL};
static const gc_elem GC_F32 = {sizeof(float),         get_f32,    set_f32,
                               round_f32,             tensor_f32, 1,
                               MHA_GC_DEFAULT_STEP_F, MHA_GC_DEFAULT_ATOL_F,
                               MHA_GC_DEFAULT_RTOL_F};

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

static int resolve_options(const mha_gc_options *opt, const gc_elem *e, gc_opts *o)
{
    o->h = e->step;
    o->atol = e->atol;
    o->rtol = e->rtol;
    o->directions = 0;
    o->seed = 0;
    if (opt == NULL)
        return MHA_OK;
    int rc;
    if ((rc = resolve_option(opt->step, e->step, &o->h)) != MHA_OK ||
        (rc = resolve_option(opt->atol, e->atol, &o->atol)) != MHA_OK ||
        (rc = resolve_option(opt->rtol, e->rtol, &o->rtol)) != MHA_OK)
        return rc;
    o->directions = opt->directions;
    o->seed = opt->seed;
    return MHA_OK;
}

/* With realized steps every element must move: fl(x + h) > fl(x − h). False for a
 * NaN or infinite value and for |x| so large that ±h rounds away (float32: about
 * |x| >= 2^24·h). Element mode would divide by δ = 0; direction mode would compare a
 * silent 0 with a 0. */
static int gc_every_element_moves(const gc_elem *e, const gc_tensor *t, double h)
{
    for (size_t i = 0; i < t->n; i++) {
        const double s = e->get(t->value, i);
        if (!(e->round(s + h) - e->round(s - h) > 0.0))
            return 0;
    }
    return 1;
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

/* Element mode on one tensor: 2·n loss calls. Element k's bytes are copied back
 * after each pair and before returning a callback failure. */
static int gc_check_elements(mha_gc_loss_fn loss, void *ctx, const gc_elem *e,
                             const gc_tensor *t, const gc_opts *o, mha_gc_result *r)
{
    unsigned char saved_bytes[sizeof(double)]; /* one element, e->size <= 8 bytes */
    for (size_t k = 0; k < t->n; k++) {
        unsigned char *xk = (unsigned char *)t->value + k * e->size; /* &x[k] */
        memcpy(saved_bytes, xk, e->size);
        const double saved = e->get(t->value, k);
        double lp = 0.0, lm = 0.0;
        int rc;
        e->set(t->value, k, saved + o->h);
        rc = loss(ctx, &lp);
        if (rc == 0) {
            e->set(t->value, k, saved - o->h);
            rc = loss(ctx, &lm);
        }
        memcpy(xk, saved_bytes, e->size);
        if (rc != 0)
            return rc;
        /* float64: 2h; float32: δ_k = fl(x_k + h) − fl(x_k − h) > 0 (checked up front) */
        const double step =
            e->realized ? e->round(saved + o->h) - e->round(saved - o->h) : 2.0 * o->h;
        gc_accumulate(r, o, k, e->get(t->grad, k), (lp - lm) / step);
    }
    return MHA_OK;
}

/* x[i] = fl(saved[i] + sign·h·v_i) for i < n, v from *dir (advanced by ⌈n/32⌉
 * outputs). Returns, when g is not NULL, vᵀ·g (float64) or Σ g_i·δ_i with
 * δ_i = fl(saved_i + h·v_i) − fl(saved_i − h·v_i) (realized, float32); else 0. */
static double gc_apply_direction(const gc_elem *e, void *x, const void *saved, const void *g,
                                 size_t n, double signed_h, mha_pcg32 *dir)
{
    double dot = 0.0;
    uint32_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 32u == 0)
            bits = mha_pcg32_next(dir);
        double v = ((bits >> (i % 32u)) & 1u) ? 1.0 : -1.0;
        const double s = e->get(saved, i);
        const double up = s + signed_h * v;
        e->set(x, i, up);
        if (g != NULL) {
            if (e->realized)
                dot += e->get(g, i) * (e->round(up) - e->round(s - signed_h * v));
            else
                dot += v * e->get(g, i);
        }
    }
    return dot;
}

/* Direction mode on one tensor: 2·m loss calls, rng advanced past the m
 * directions. Needs a saved copy of x (allocated here, freed before returning). */
static int gc_check_directions(mha_gc_loss_fn loss, void *ctx, const gc_elem *e,
                               const gc_tensor *t, const gc_opts *o, mha_pcg32 *rng,
                               mha_gc_result *r)
{
    const size_t n = t->n;
    void *x = t->value; /* [n] */
    if (n > SIZE_MAX / e->size)
        return MHA_EOVERFLOW;
    const size_t bytes = n * e->size;
    void *saved = malloc(bytes + (n == 0)); /* [n] */
    if (saved == NULL)
        return MHA_ENOMEM;
    memcpy(saved, x, bytes);

    int rc = MHA_OK;
    for (size_t d = 0; d < o->directions; d++) {
        mha_pcg32 replay = *rng; /* the same v for x − h·v */
        double lp = 0.0, lm = 0.0;
        double a = gc_apply_direction(e, x, saved, t->grad, n, o->h, rng);
        if (e->realized)
            a /= 2.0 * o->h;
        rc = loss(ctx, &lp);
        if (rc == 0) {
            (void)gc_apply_direction(e, x, saved, NULL, n, -o->h, &replay);
            rc = loss(ctx, &lm);
        }
        memcpy(x, saved, bytes);
        if (rc != 0)
            break;
        gc_accumulate(r, o, d, a, (lp - lm) / (2.0 * o->h));
    }
    free(saved);
    return rc;
}

/* Both public checkers. tensors [count] of e's public tensor type, results [count];
 * opt may be NULL. Everything is validated before the first loss call: on
 * MHA_EINVAL no value, result or callback is touched. results[t] is written when
 * tensor t is done, so when the callback fails (its code is returned) or memory
 * runs out (MHA_ENOMEM, direction mode only), results of earlier tensors are filled
 * and the rest are left as they were; every tensor's values are back to their saved
 * bits. */
static int gc_run(const gc_elem *e, mha_gc_loss_fn loss, void *ctx, const void *tensors,
                  size_t count, const mha_gc_options *opt, mha_gc_result *results)
{
    if (loss == NULL || tensors == NULL || results == NULL)
        return MHA_EINVAL;
    for (size_t t = 0; t < count; t++) {
        const gc_tensor x = e->tensor(tensors, t);
        if (x.n > 0 && (x.value == NULL || x.grad == NULL))
            return MHA_EINVAL;
    }
    gc_opts o;
    int rc = resolve_options(opt, e, &o);
    if (rc != MHA_OK)
        return rc;
    if (e->realized)
        for (size_t t = 0; t < count; t++) {
            const gc_tensor x = e->tensor(tensors, t);
            if (!gc_every_element_moves(e, &x, o.h))
                return MHA_EINVAL;
        }

    mha_pcg32 rng;
    mha_pcg32_seed(&rng, o.seed, MHA_GC_STREAM);
    for (size_t t = 0; t < count; t++) {
        const gc_tensor x = e->tensor(tensors, t);
        mha_gc_result r;
        memset(&r, 0, sizeof r);
        if (o.directions == 0)
            rc = gc_check_elements(loss, ctx, e, &x, &o, &r);
        else
            rc = gc_check_directions(loss, ctx, e, &x, &o, &rng, &r);
        if (rc != 0)
            return rc;
        results[t] = r;
    }
    return MHA_OK;
}

int mha_gradcheck(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor *tensors,
                  size_t count, const mha_gc_options *opt, mha_gc_result *results)
{
    return gc_run(&GC_F64, loss, ctx, tensors, count, opt, results);
}

int mha_gradcheck_f(mha_gc_loss_fn loss, void *ctx, const mha_gc_tensor_f *tensors,
                    size_t count, const mha_gc_options *opt, mha_gc_result *results)
{
    return gc_run(&GC_F32, loss, ctx, tensors, count, opt, results);
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
