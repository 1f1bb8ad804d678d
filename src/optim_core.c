/*
 * Optimizers and gradient clipping (include/mha_optim.h, mha_optim_api.h), written once
 * for both precisions and compiled twice (float, X(name) = mha_name; double with
 * -DMHA_DOUBLE, X(name) = mhad_name: src/real.h), so the static helpers and the types
 * below are per precision; the untyped parts at the end are compiled in the float unit.
 *
 * Arithmetic: every element is read as REAL, converted to double, updated in double and
 * converted back to REAL once when stored; the gradient norm is accumulated in double.
 * For REAL = float this is, operation for operation, the float-only optimizer it
 * replaced (same bits); for REAL = double the conversions are exact no-ops.
 * Compiled with -fno-math-errno -ffp-contract=off (CMakeLists.txt): no fused
 * multiply-adds, so every target clone below gives the same bits.
 *
 * See include/mha_optim.h for the formulas; the comments here point at them.
 * Every loop over the elements walks the span table (optim_span): pieces of the groups'
 * [n] arrays (params, grads, m, v share a group's layout), shared among the library's
 * threads (src/pool.h).
 */
#include "real.h" /* REAL, X: float, or double with -DMHA_DOUBLE */

#include "mha.h" /* status codes; includes mha_optim.h */
#include "pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct optim_group {
    char *name;   /* owned copy, NUL-terminated                            */
    REAL *params; /* [n] borrowed                                          */
    REAL *grads;  /* [n] borrowed                                          */
    REAL *m;      /* [n] owned; first moment / momentum buffer, or NULL    */
    REAL *v;      /* [n] owned; second moment (Adam/AdamW), or NULL        */
    size_t n;
} optim_group;

/* A piece of one segment of one group: elements [i0, i1) of group `group`, with the
 * segment's weight decay. The loops over every element (norm, clipping, finiteness, the
 * update) run over the table of all spans, so the threads share the work evenly however the
 * parameters are grouped, and every per-span partial result is combined in span order (the
 * same bits for any count). Spans start afresh at every segment, so a group of k segments
 * has the spans of k groups added one by one: the same sums, the same bits. */
typedef struct optim_span {
    size_t group, i0, i1;
    double wd;
} optim_span;

/* Elements per span. */
#define OPTIM_SPAN 4096

struct X(optimizer) {
    mha_optim_config cfg; /* validated copy                          */
    optim_group *groups;  /* [capacity], the first count are in use   */
    size_t count, capacity;
    optim_span *spans;    /* [spans_cap], the first nspans in use: every group, in order */
    double *partial;      /* [spans_cap] per-span partial sums (scratch)                */
    size_t nspans, spans_cap;
    uint64_t t;           /* completed steps                          */
};

/* x is a finite number in [lo, hi) (hi_open) or [lo, hi]; NaN fails every comparison. */
static int in_range(double x, double lo, double hi, int hi_open)
{
    if (!(x >= lo))
        return 0;
    return hi_open ? (x < hi) : (x <= hi);
}

static int is_adam(mha_optim_kind kind)
{
    return kind == MHA_OPTIM_ADAM || kind == MHA_OPTIM_ADAMW;
}

/* Validate only the fields the kind uses (header: mha_optim_config). */
static int config_valid(const mha_optim_config *cfg)
{
    if (!in_range(cfg->weight_decay, 0.0, INFINITY, 1))
        return 0;
    switch (cfg->kind) {
    case MHA_OPTIM_SGD:
        return in_range(cfg->momentum, 0.0, 1.0, 1);
    case MHA_OPTIM_ADAM:
    case MHA_OPTIM_ADAMW:
        return in_range(cfg->beta1, 0.0, 1.0, 1) && in_range(cfg->beta2, 0.0, 1.0, 1) &&
               cfg->eps > 0.0 && in_range(cfg->eps, 0.0, INFINITY, 1);
    default:
        return 0;
    }
}

int mha_optim_create(X(optimizer) **out, const mha_optim_config *cfg)
{
    if (out == NULL || cfg == NULL || !config_valid(cfg))
        return MHA_EINVAL;
    X(optimizer) *o = calloc(1, sizeof *o);
    if (o == NULL)
        return MHA_ENOMEM;
    o->cfg = *cfg;
    *out = o;
    return MHA_OK;
}

static void group_free(optim_group *g)
{
    free(g->name);
    free(g->m);
    free(g->v);
}

void mha_optim_destroy(X(optimizer) *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->count; i++)
        group_free(&o->groups[i]);
    MHA__FREE_ALL(o->groups, o->spans, o->partial, o);
}

int mha_optim_add(X(optimizer) *o, const char *name, REAL *params, REAL *grads, size_t n)
{
    if (o == NULL)
        return MHA_EINVAL;
    return X(optim_add_decay)(o, name, params, grads, n, o->cfg.weight_decay);
}

int mha_optim_add_decay(X(optimizer) *o, const char *name, REAL *params, REAL *grads,
                        size_t n, double weight_decay)
{
    return X(optim_add_segments)(o, name, params, grads, n, 1, &n, &weight_decay);
}

/* The number of spans of the segments ending at end[0 .. nseg) (checked: increasing, the
 * last n, n below SIZE_MAX / sizeof(REAL)): at most n, so nothing here overflows. */
static size_t count_spans(size_t nseg, const size_t *end)
{
    size_t total = 0, s0 = 0;
    for (size_t k = 0; k < nseg; s0 = end[k], k++)
        total += (end[k] - s0 + OPTIM_SPAN - 1) / OPTIM_SPAN; /* <= end[k] - s0 */
    return total;
}

/* Grow the group and span tables for one more group of new_spans spans; a larger capacity
 * with the same count is not an observable change, so a failure leaves o as it was. */
static int grow_tables(X(optimizer) *o, size_t new_spans)
{
    if (o->count == o->capacity) {
        size_t cap = o->capacity ? o->capacity : 4;
        if (o->capacity) {
            if (cap > SIZE_MAX / 2 / sizeof(optim_group))
                return MHA_EOVERFLOW;
            cap *= 2;
        }
        optim_group *grown = realloc(o->groups, cap * sizeof(optim_group));
        if (grown == NULL)
            return MHA_ENOMEM;
        o->groups = grown;
        o->capacity = cap;
    }
    if (new_spans > SIZE_MAX / 2 / sizeof(optim_span) - o->nspans)
        return MHA_EOVERFLOW;
    if (o->nspans + new_spans > o->spans_cap) {
        size_t cap = 2 * (o->nspans + new_spans);
        optim_span *sp = realloc(o->spans, cap * sizeof *sp);
        if (sp == NULL)
            return MHA_ENOMEM;
        o->spans = sp;
        double *pa = realloc(o->partial, cap * sizeof *pa);
        if (pa == NULL)
            return MHA_ENOMEM;
        o->partial = pa;
        o->spans_cap = cap;
    }
    return MHA_OK;
}

int mha_optim_add_segments(X(optimizer) *o, const char *name, REAL *params, REAL *grads,
                           size_t n, size_t nseg, const size_t *end, const double *weight_decay)
{
    if (o == NULL || name == NULL || name[0] == '\0' || params == NULL || grads == NULL ||
        n == 0 || nseg == 0 || end == NULL || weight_decay == NULL || end[nseg - 1] != n)
        return MHA_EINVAL;
    for (size_t k = 0; k < nseg; k++)
        if (end[k] <= (k ? end[k - 1] : 0) || !in_range(weight_decay[k], 0.0, INFINITY, 1))
            return MHA_EINVAL; /* an empty or backward segment, or a bad decay */
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->groups[i].name, name) == 0)
            return MHA_EINVAL; /* duplicate name: checkpoints could not tell them apart */
    if (o->t != 0)
        return MHA_ESTATE;
    if (n > SIZE_MAX / sizeof(REAL))
        return MHA_EOVERFLOW;
    const size_t new_spans = count_spans(nseg, end);
    int st = grow_tables(o, new_spans);
    if (st != MHA_OK)
        return st;

    optim_group g = {0};
    size_t len = strlen(name);
    g.name = malloc(len + 1); /* len < SIZE_MAX: name is a NUL-terminated object */
    int need_m = is_adam(o->cfg.kind) || o->cfg.momentum != 0.0;
    int need_v = is_adam(o->cfg.kind);
    if (need_m)
        g.m = calloc(n, sizeof(REAL)); /* all-zero bits are +0 (IEEE 754) */
    if (need_v)
        g.v = calloc(n, sizeof(REAL));
    if (g.name == NULL || (need_m && g.m == NULL) || (need_v && g.v == NULL)) {
        group_free(&g);
        return MHA_ENOMEM;
    }
    memcpy(g.name, name, len + 1);
    g.params = params;
    g.grads = grads;
    g.n = n;
    for (size_t k = 0, s0 = 0; k < nseg; s0 = end[k], k++)
        for (size_t i = s0; i < end[k]; i += OPTIM_SPAN)
            o->spans[o->nspans++] = (optim_span){.group = o->count, .i0 = i,
                                                 .i1 = end[k] - i > OPTIM_SPAN ? i + OPTIM_SPAN
                                                                               : end[k],
                                                 .wd = weight_decay[k]};
    o->groups[o->count++] = g;
    return MHA_OK;
}

/* The optimizer's loops run once per step over every parameter: the element-wise
 * ones are compiled for x86-64, x86-64-v3 (AVX2) and x86-64-v4 (AVX-512) and picked at
 * load time (MHA_CLONES, mha_internal.h). In ISO C mode multiply-adds are not fused, so
 * every clone computes the same bits. */

/* Σ_i g[i]² in double over 8 interleaved partial sums (added in a fixed order at the
 * end), so the loop vectorises and the result does not depend on the machine. */
typedef REAL vr8 __attribute__((vector_size(8 * sizeof(REAL)), aligned(sizeof(REAL))));
typedef double vd8 __attribute__((vector_size(64)));
MHA_CLONES static double sumsq8(const REAL *g, size_t n)
{
    double acc[8];
    vd8 va = {0}; /* lane k is acc[k]: an explicit vector, the same sums at full width */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vr8 v;
        memcpy(&v, g + i, sizeof v);
        const vd8 d = __builtin_convertvector(v, vd8);
        va += d * d;
    }
    memcpy(acc, &va, sizeof acc);
    for (; i < n; i++)
        acc[i % 8] += (double)g[i] * (double)g[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Σ_groups Σ_i grads[i]² in double. Finite float gradients cannot overflow it: each
 * term is below FLT_MAX² ≈ 1.2e77 and there are fewer than 2^64 of them, so the sum is
 * non-finite exactly when some gradient is. Finite double gradients beyond ~1e154 can
 * overflow it: the clip then refuses (header: MHA_ENONFINITE). */
/* The threads of a loop over the spans: the caller's setting from 8 spans on. */
static int span_threads(const X(optimizer) *o)
{
    return o->nspans >= 8 ? mha__pool_threads() : 1;
}

/* One pass over spans k0 .. k1−1 (job: see its user) */
typedef struct span_job {
    const X(optimizer) *o;
    double lr, coef, step_size, bc2_sqrt;
    atomic_int all_finite;
} span_job;

static void sumsq_task(void *ctx, size_t k0, size_t k1, int slot)
{
    const X(optimizer) *o = ((const span_job *)ctx)->o;
    (void)slot;
    for (size_t k = k0; k < k1; k++) {
        const optim_span *sp = &o->spans[k];
        o->partial[k] = sumsq8(o->groups[sp->group].grads + sp->i0, sp->i1 - sp->i0);
    }
}

static double grad_sumsq(const X(optimizer) *o)
{
    span_job j = {.o = o};
    mha__pool_range(span_threads(o), o->nspans, 1, sumsq_task, &j);
    double s = 0.0;
    for (size_t k = 0; k < o->nspans; k++) /* span order: independent of the threads */
        s += o->partial[k];
    return s;
}

static void scale_task(void *ctx, size_t k0, size_t k1, int slot)
{
    const span_job *j = ctx;
    (void)slot;
    for (size_t k = k0; k < k1; k++) {
        const optim_span *sp = &j->o->spans[k];
        REAL *g = j->o->groups[sp->group].grads;
        for (size_t i = sp->i0; i < sp->i1; i++)
            g[i] = (REAL)((double)g[i] * j->coef); /* g ← g·coef */
    }
}

int mha_optim_clip_grad_norm(X(optimizer) *o, double max_norm, double *norm)
{
    if (o == NULL || !(max_norm >= 0.0)) /* rejects negatives and NaN; +∞ is allowed */
        return MHA_EINVAL;
    double total = sqrt(grad_sumsq(o));
    if (!isfinite(total))
        return MHA_ENONFINITE;
    double coef = max_norm / (total + 1e-6); /* torch: clip_coef, clamped to <= 1 */
    if (max_norm > 0.0 && coef < 1.0) {
        span_job j = {.o = o, .coef = coef};
        mha__pool_range(span_threads(o), o->nspans, 1, scale_task, &j);
    }
    if (norm != NULL)
        *norm = total;
    return MHA_OK;
}

/* 0 if any g[i] is NaN or ±∞: g − g is 0 for finite g and NaN otherwise, and a NaN
 * survives the (vectorised) sum. */
typedef REAL vr16 __attribute__((vector_size(16 * sizeof(REAL)), aligned(sizeof(REAL))));
MHA_CLONES static int finite_all(const REAL *g, size_t n)
{
    vr16 acc = {0}; /* an explicit vector: GCC left the loop of eight scalars unvectorised */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vr16 v;
        memcpy(&v, g + i, sizeof v);
        acc += v - v;
    }
    REAL rest = 0;
    for (; i < n; i++)
        rest += g[i] - g[i];
    for (int k = 0; k < 16; k++)
        rest += acc[k];
    return rest == (REAL)0;
}

static void finite_task(void *ctx, size_t k0, size_t k1, int slot)
{
    span_job *j = ctx;
    (void)slot;
    for (size_t k = k0; k < k1 && atomic_load_explicit(&j->all_finite, memory_order_relaxed); k++) {
        const optim_span *sp = &j->o->spans[k];
        if (!finite_all(j->o->groups[sp->group].grads + sp->i0, sp->i1 - sp->i0))
            atomic_store_explicit(&j->all_finite, 0, memory_order_relaxed);
    }
}

static int grads_finite(const X(optimizer) *o)
{
    span_job j = {.o = o, .all_finite = 1};
    mha__pool_range(span_threads(o), o->nspans, 1, finite_task, &j);
    return atomic_load(&j.all_finite);
}

/* SGD on one group (header formulas):
 *   g ← g + wd·p;  if momentum ≠ 0: m ← momentum·m + g, g ← m;  p ← p − lr·g */
MHA_CLONES static void sgd_span(const optim_group *grp, size_t i0, size_t i1, double lr,
                                  double momentum, double wd)
{
    REAL *p = grp->params, *m = grp->m;
    const REAL *gr = grp->grads;
    for (size_t i = i0; i < i1; i++) {
        double g = (double)gr[i] + wd * (double)p[i];
        if (m != NULL) {
            double b = momentum * (double)m[i] + g;
            m[i] = (REAL)b;
            g = b;
        }
        p[i] = (REAL)((double)p[i] - lr * g);
    }
}

/* Adam / AdamW on one group (header formulas), with
 *   step_size = lr / (1 − β1^t),  bc2_sqrt = √(1 − β2^t),
 *   coupled_wd: g ← g + wd·p (Adam);  decay = 1 − lr·wd multiplies p first (AdamW; 1 for Adam)
 *   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  p ← p·decay − step_size · m / (√v/bc2_sqrt + eps) */
MHA_CLONES static void adam_span(const optim_group *grp, size_t i0, size_t i1, double b1,
                                   double b2, double eps, double coupled_wd, double decay,
                                   double step_size, double bc2_sqrt)
{
    REAL *p = grp->params, *m = grp->m, *v = grp->v;
    const REAL *gr = grp->grads;
    for (size_t i = i0; i < i1; i++) {
        double pi = (double)p[i];
        double g = (double)gr[i] + coupled_wd * pi;
        double mi = b1 * (double)m[i] + (1.0 - b1) * g;
        double vi = b2 * (double)v[i] + (1.0 - b2) * g * g;
        m[i] = (REAL)mi;
        v[i] = (REAL)vi;
        double denom = sqrt(vi) / bc2_sqrt + eps;
        p[i] = (REAL)(pi * decay - step_size * mi / denom);
    }
}

static void step_task(void *ctx, size_t k0, size_t k1, int slot)
{
    const span_job *j = ctx;
    const X(optimizer) *o = j->o;
    const mha_optim_config *c = &o->cfg;
    const int adamw = c->kind == MHA_OPTIM_ADAMW;
    (void)slot;
    for (size_t k = k0; k < k1; k++) {
        const optim_span *sp = &o->spans[k];
        const optim_group *grp = &o->groups[sp->group];
        const double wd = sp->wd;
        if (c->kind == MHA_OPTIM_SGD)
            sgd_span(grp, sp->i0, sp->i1, j->lr, c->momentum, wd);
        else
            adam_span(grp, sp->i0, sp->i1, c->beta1, c->beta2, c->eps, adamw ? 0.0 : wd,
                      adamw ? 1.0 - j->lr * wd : 1.0, j->step_size, j->bc2_sqrt);
    }
}

int mha_optim_step(X(optimizer) *o, double lr)
{
    if (o == NULL || !in_range(lr, 0.0, INFINITY, 1))
        return MHA_EINVAL;
    if (o->t == UINT64_MAX)
        return MHA_EOVERFLOW;
    if (!grads_finite(o)) /* before any write: a refused step changes nothing */
        return MHA_ENONFINITE;
    uint64_t t = o->t + 1;
    const mha_optim_config *c = &o->cfg;
    const double bc1 = 1.0 - pow(c->beta1, (double)t); /* > 0: beta1 < 1, t >= 1 */
    span_job j = {.o = o, .lr = lr, .step_size = lr / bc1,
                  .bc2_sqrt = sqrt(1.0 - pow(c->beta2, (double)t))};
    /* Every element's update is independent: the spans are shared among the caller's
     * threads (same bits for any count). */
    mha__pool_range(span_threads(o), o->nspans, 1, step_task, &j);
    o->t = t;
    return MHA_OK;
}

size_t mha_optim_num_groups(const X(optimizer) *o)
{
    return o == NULL ? 0 : o->count;
}

int mha_optim_group(X(optimizer) *o, size_t index, const char **name, size_t *n, REAL **m,
                    REAL **v)
{
    if (o == NULL || index >= o->count)
        return MHA_EINVAL;
    const optim_group *g = &o->groups[index];
    if (name != NULL)
        *name = g->name;
    if (n != NULL)
        *n = g->n;
    if (m != NULL)
        *m = g->m;
    if (v != NULL)
        *v = g->v;
    return MHA_OK;
}

int mha_optim_get_step(const X(optimizer) *o, uint64_t *t)
{
    if (o == NULL || t == NULL)
        return MHA_EINVAL;
    *t = o->t;
    return MHA_OK;
}

int mha_optim_set_step(X(optimizer) *o, uint64_t t)
{
    if (o == NULL)
        return MHA_EINVAL;
    o->t = t;
    return MHA_OK;
}

#ifndef MHA_DOUBLE /* the untyped parts of include/mha_optim.h, once: the default configs
                     and the learning-rate schedule */
int mha_optim_default_config(mha_optim_kind kind, mha_optim_config *cfg)
{
    if (cfg == NULL)
        return MHA_EINVAL;
    mha_optim_config c = {0};
    c.kind = kind;
    switch (kind) {
    case MHA_OPTIM_SGD:
        break;
    case MHA_OPTIM_ADAM:
    case MHA_OPTIM_ADAMW:
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.eps = 1e-8;
        c.weight_decay = kind == MHA_OPTIM_ADAMW ? 0.01 : 0.0;
        break;
    default:
        return MHA_EINVAL;
    }
    *cfg = c;
    return MHA_OK;
}

int mha_lr_at(const mha_lr_schedule *s, uint64_t step, double *lr)
{
    if (s == NULL || lr == NULL)
        return MHA_EINVAL;
    const double base = s->base_lr, lo = s->min_lr;
    const uint64_t W = s->warmup_steps, T = s->total_steps;
    if (!in_range(base, 0.0, INFINITY, 1) || !in_range(lo, 0.0, base, 0) || T == 0 || W >= T)
        return MHA_EINVAL;
    if (step < W) {
        *lr = base * (double)(step + 1) / (double)W; /* linear warm-up, step + 1 <= W */
    } else if (step < T - 1) {
        /* here W <= step < T − 1, so T − 1 − W >= 1 */
        const double pi = 3.14159265358979323846;
        double q = (double)(step - W) / (double)(T - 1 - W);
        *lr = lo + (base - lo) * 0.5 * (1.0 + cos(pi * q));
    } else {
        *lr = lo; /* step >= T − 1 and >= W */
    }
    return MHA_OK;
}
#endif /* !MHA_DOUBLE */
