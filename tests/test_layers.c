/*
 * The layers of include/mha_layers.h: every gradient by central differences in float64
 * (every element, |a − n| <= 1e-7 + 1e-6·|n|, loss Σ R ⊙ y with a fixed random R), a tied
 * embedding/read-out composition, float32 against float64, += accumulation, direct
 * formulas, argument validation (status and nothing written), the dropout stream
 * (p = 0 / 1, keep fraction, thread independence, replay, exact bit positions), and
 * bitwise thread-count independence of the non-BLAS loops.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "mha.h"
#include "mha_internal.h"
#include "test_util.h"

#define SENTINEL 12345.0

/* The project's tolerance: |a − n| <= 1e-7 + 1e-6·|n|, step 1e-5 (central). */
static const mha_gc_options GC_OPT = {.step = 1e-5, .atol = 1e-7, .rtol = 1e-6,
                                      .directions = 0, .seed = 7};

/* ---- helpers ---------------------------------------------------------------- */

static double *dbuf(size_t n, double lo, double hi, uint64_t seed)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    fill_uniform(x, n, lo, hi, seed);
    return x;
}

static double *dconst(size_t n, double v)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

static float *fcopy(const double *x, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

static float *fconst(size_t n, float v)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = v;
    return f;
}

static int all_equal(const double *x, size_t n, double v)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != v)
            return 0;
    return 1;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ‖f − d‖ / ‖d‖ with f in float. */
static double rel_f(const float *f, const double *d, size_t n)
{
    double *t = malloc((n ? n : 1) * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        t[i] = (double)f[i];
    double r = rel_l2_diff(t, d, n);
    free(t);
    return r;
}

static void assert_gc_pass(const mha_gc_result *r, const char *what)
{
    if (!(r->worst_ratio <= 1.0))
        fail_msg("%s: worst ratio %.3g at %zu (analytic %.12g, numeric %.12g)", what,
                 r->worst_ratio, r->worst_index, r->worst_analytic, r->worst_numeric);
    assert_true(r->compared > 0);
}

/* Run mha_gradcheck over tensors t[0..count) and assert every one passes. */
static void check_all(mha_gc_loss_fn fn, void *ctx, const mha_gc_tensor *t, size_t count)
{
    mha_gc_result res[8];
    assert_true(count <= 8);
    assert_int_equal(mha_gradcheck(fn, ctx, t, count, &GC_OPT, res), MHA_OK);
    for (size_t i = 0; i < count; i++)
        assert_gc_pass(&res[i], t[i].name);
}

/* ---- finite differences, float64 ------------------------------------------------- */

typedef struct ln_ctx {
    size_t N, C;
    double *x, *w, *b, *y, *mean, *rstd;
    const double *R;
} ln_ctx;

static int ln_loss(void *v, double *loss)
{
    ln_ctx *c = v;
    int st = mhad_layernorm_forward(c->N, c->C, 1e-5, c->x, c->w, c->b, c->y, c->mean, c->rstd);
    *loss = dot(c->R, c->y, c->N * c->C);
    return st;
}

/* LayerNorm: dx, dw, db by finite differences; odd C, rows with mean offsets up to 1000. */
static void test_layers_grad_layernorm(void **state)
{
    (void)state;
    enum { N = 4, C = 7 };
    double *x = dbuf(N * C, -1, 1, 1), *w = dbuf(C, 0.5, 1.5, 2), *b = dbuf(C, -1, 1, 3);
    double *R = dbuf(N * C, -1, 1, 4), y[N * C], mean[N], rstd[N];
    for (size_t c = 0; c < C; c++) {
        x[1 * C + c] += 1000.0; /* large positive mean */
        x[3 * C + c] -= 300.0;  /* large negative mean */
    }
    double *dx = dconst(N * C, 0), *dw = dconst(C, 0), *db = dconst(C, 0);
    ln_ctx c = {N, C, x, w, b, y, mean, rstd, R};
    double l;
    assert_int_equal(ln_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_layernorm_backward(N, C, x, w, mean, rstd, R, dx, dw, db), MHA_OK);
    mha_gc_tensor t[3] = {{"ln.x", x, dx, N * C}, {"ln.w", w, dw, C}, {"ln.b", b, db, C}};
    check_all(ln_loss, &c, t, 3);
    free(x); free(w); free(b); free(R); free(dx); free(dw); free(db);
}

typedef struct lin_ctx {
    size_t N, in, out;
    double *x, *W, *b, *y;
    const double *R;
} lin_ctx;

static int lin_loss(void *v, double *loss)
{
    lin_ctx *c = v;
    int st = mhad_linear_forward(c->N, c->in, c->out, c->x, c->W, c->b, c->y);
    *loss = dot(c->R, c->y, c->N * c->out);
    return st;
}

static void grad_linear_case(size_t N, size_t in, size_t out, int bias)
{
    double *x = dbuf(N * in, -1, 1, 10), *W = dbuf(out * in, -1, 1, 11);
    double *b = bias ? dbuf(out, -1, 1, 12) : NULL, *R = dbuf(N * out, -1, 1, 13);
    double *y = dconst(N * out, SENTINEL); /* overwritten even without a bias */
    double *dx = dconst(N * in, 0), *dW = dconst(out * in, 0), *db = dconst(out, 0);
    lin_ctx c = {N, in, out, x, W, b, y, R};
    double l;
    assert_int_equal(lin_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_linear_backward(N, in, out, x, W, R, dx, dW, bias ? db : NULL), MHA_OK);
    mha_gc_tensor t[3] = {{"lin.x", x, dx, N * in}, {"lin.W", W, dW, out * in},
                          {"lin.b", b, db, out}};
    check_all(lin_loss, &c, t, bias ? 3 : 2);
    free(x); free(W); free(b); free(R); free(y); free(dx); free(dW); free(db);
}

/* Linear: dx, dW, db by finite differences, with and without bias, in != out. */
static void test_layers_grad_linear(void **state)
{
    (void)state;
    grad_linear_case(5, 6, 4, 1);
    grad_linear_case(3, 3, 7, 0);
}

typedef struct gelu_ctx {
    size_t n;
    double *x, *y;
    const double *R;
} gelu_ctx;

static int gelu_loss(void *v, double *loss)
{
    gelu_ctx *c = v;
    int st = mhad_gelu_forward(c->n, c->x, c->y);
    *loss = dot(c->R, c->y, c->n);
    return st;
}

/* GELU: dx by finite differences over [−4, 4] plus large |x| (±6, ±12, ±40, ±1e3). */
static void test_layers_grad_gelu(void **state)
{
    (void)state;
    enum { N = 40 };
    double *x = dbuf(N, -4, 4, 20), *R = dbuf(N, -1, 1, 21), y[N];
    const double big[] = {6, -6, 12, -12, 40, -40, 1e3, -1e3};
    for (size_t i = 0; i < 8; i++)
        x[i] = big[i];
    double *dx = dconst(N, 0);
    gelu_ctx c = {N, x, y, R};
    double l;
    assert_int_equal(gelu_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_gelu_backward(N, x, R, dx), MHA_OK);
    mha_gc_tensor t[1] = {{"gelu.x", x, dx, N}};
    check_all(gelu_loss, &c, t, 1);
    free(x); free(R); free(dx);
}

typedef struct emb_ctx {
    size_t B, T, C, V;
    const int32_t *ids;
    double *E, *P, *y;
    const double *R;
} emb_ctx;

static int emb_loss(void *v, double *loss)
{
    emb_ctx *c = v;
    int st = mhad_embedding_forward(c->B, c->T, c->C, c->ids, c->V, c->E, c->P, c->y);
    *loss = dot(c->R, c->y, c->B * c->T * c->C);
    return st;
}

/* Embedding: dE, dP by finite differences; repeated ids, T < T_max, and P NULL. */
static void test_layers_grad_embedding(void **state)
{
    (void)state;
    enum { B = 2, T = 3, TMAX = 5, C = 3, V = 6 };
    const int32_t ids[B * T] = {2, 4, 2, 0, 2, 5}; /* id 2 three times; 1 and 3 unused */
    double *E = dbuf(V * C, -1, 1, 30), *P = dbuf(TMAX * C, -1, 1, 31);
    double *R = dbuf(B * T * C, -1, 1, 32), y[B * T * C];
    for (int with_p = 1; with_p >= 0; with_p--) {
        double *dE = dconst(V * C, 0), *dP = dconst(TMAX * C, 0);
        emb_ctx c = {B, T, C, V, ids, E, with_p ? P : NULL, y, R};
        double l;
        assert_int_equal(emb_loss(&c, &l), MHA_OK);
        assert_int_equal(mhad_embedding_backward(B, T, C, ids, V, R, dE, with_p ? dP : NULL),
                         MHA_OK);
        mha_gc_tensor t[2] = {{"emb.E", E, dE, V * C}, {"emb.P", P, dP, TMAX * C}};
        check_all(emb_loss, &c, t, with_p ? 2 : 1);
        for (size_t k = 0; k < C; k++) { /* unused ids and positions >= T: exactly 0 */
            assert_true(dE[1 * C + k] == 0.0 && dE[3 * C + k] == 0.0);
            assert_true(dP[3 * C + k] == 0.0 && dP[4 * C + k] == 0.0);
        }
        free(dE); free(dP);
    }
    free(E); free(P); free(R);
}

typedef struct xent_ctx {
    size_t N, V;
    double *z;
    const int32_t *tg;
    double weight;
} xent_ctx;

static int xent_loss(void *v, double *loss)
{
    xent_ctx *c = v;
    double l = 0;
    int st = mhad_xent_forward(c->N, c->V, c->z, c->tg, &l, NULL);
    *loss = c->weight * l;
    return st;
}

/* Cross-entropy: dlogits by finite differences of 0.7·loss, rows with target −1 unscored. */
static void test_layers_grad_xent(void **state)
{
    (void)state;
    enum { N = 6, V = 5 };
    const int32_t tg[N] = {1, -1, 4, 0, -1, 4};
    double *z = dbuf(N * V, -3, 3, 40), *dz = dconst(N * V, 0);
    xent_ctx c = {N, V, z, tg, 0.7};
    double l;
    size_t S = 0;
    assert_int_equal(mhad_xent_forward(N, V, z, tg, &l, &S), MHA_OK);
    assert_int_equal((int)S, 4);
    assert_int_equal(mhad_xent_backward(N, V, z, tg, 0.7 / (double)S, dz), MHA_OK);
    mha_gc_tensor t[1] = {{"xent.logits", z, dz, N * V}};
    check_all(xent_loss, &c, t, 1);
    for (size_t v = 0; v < V; v++) /* unscored rows untouched */
        assert_true(dz[1 * V + v] == 0.0 && dz[4 * V + v] == 0.0);
    free(z); free(dz);
}

/* The cross-entropy backward keeps a row's exponentials for vocabularies up to 1,024 classes
 * and computes them again beyond: on both sides of the bound (1,000 and 1,500 classes),
 * plain and label-smoothed, dlogits = scale·(softmax(z) − q) added to what was there, q =
 * (1 − eps)·onehot(t) + eps/V, against the softmax computed here in the same order. */
static void test_layers_xent_wide_vocab(void **state)
{
    (void)state;
    const size_t Vs[] = {1000, 1500}, N = 3;
    const int32_t tg[3] = {7, -1, 999};
    for (size_t k = 0; k < 2; k++)
        for (int smooth = 0; smooth < 2; smooth++) {
            const size_t V = Vs[k];
            const double eps = smooth ? 0.1 : 0.0, scale = 0.5;
            double *z = dbuf(N * V, -6, 6, 300 + k), *g = dconst(N * V, 0.25);
            if (smooth)
                assert_int_equal(mhad_xent_smooth_backward(N, V, z, tg, eps, scale, g), MHA_OK);
            else
                assert_int_equal(mhad_xent_backward(N, V, z, tg, scale, g), MHA_OK);
            for (size_t r = 0; r < N; r++) {
                const double *zr = z + r * V;
                double m;
                const double se = row_sum_exp(zr, V, &m);
                for (size_t v = 0; v < V; v++) {
                    const double q = tg[r] < 0 ? 0.0
                                               : (1.0 - eps) * ((size_t)tg[r] == v) + eps / (double)V;
                    const double want = tg[r] < 0 ? 0.25 : 0.25 + scale * (exp(zr[v] - m) / se - q);
                    assert_close(g[r * V + v], want, 1e-15, 1e-15);
                }
            }
            free(z);
            free(g);
        }
}

typedef struct drop_ctx {
    size_t n;
    double p, *x, *y;
    uint64_t *keep;
    const double *R;
} drop_ctx;

static int drop_loss(void *v, double *loss)
{
    drop_ctx *c = v; /* the same call index in every evaluation: the mask is frozen */
    int st = mhad_dropout_forward(c->n, c->p, 42, 7, 5, c->x, c->y, c->keep);
    *loss = dot(c->R, c->y, c->n);
    return st;
}

/* Dropout: dx by finite differences with the mask frozen (same call), p = 0.3. */
static void test_layers_grad_dropout(void **state)
{
    (void)state;
    enum { N = 150 };
    double *x = dbuf(N, -1, 1, 50), *R = dbuf(N, -1, 1, 51), y[N], *dx = dconst(N, 0);
    uint64_t keep[MHA_DROPOUT_WORDS(N)];
    drop_ctx c = {N, 0.3, x, y, keep, R};
    double l;
    assert_int_equal(drop_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_dropout_backward(N, 0.3, keep, R, dx), MHA_OK);
    mha_gc_tensor t[1] = {{"dropout.x", x, dx, N}};
    check_all(drop_loss, &c, t, 1);
    free(x); free(R); free(dx);
}

typedef struct mlp_ctx {
    size_t N, C, F;
    double *x, *W1, *b1, *W2, *b2, *h, *a, *y;
    const double *R;
} mlp_ctx;

static int mlp_loss(void *v, double *loss)
{
    mlp_ctx *c = v;
    int st = mhad_mlp_forward(c->N, c->C, c->F, c->x, c->W1, c->b1, c->W2, c->b2, c->h, c->a,
                              c->y);
    *loss = dot(c->R, c->y, c->N * c->C);
    return st;
}

/* MLP: dx, dW1, db1, dW2, db2 by finite differences. */
static void test_layers_grad_mlp(void **state)
{
    (void)state;
    enum { N = 3, C = 4, F = 6 };
    double *x = dbuf(N * C, -2, 2, 60), *W1 = dbuf(F * C, -1, 1, 61), *b1 = dbuf(F, -1, 1, 62);
    double *W2 = dbuf(C * F, -1, 1, 63), *b2 = dbuf(C, -1, 1, 64), *R = dbuf(N * C, -1, 1, 65);
    double h[N * F], a[N * F], y[N * C], scratch[N * F];
    double *dx = dconst(N * C, 0), *dW1 = dconst(F * C, 0), *db1 = dconst(F, 0);
    double *dW2 = dconst(C * F, 0), *db2 = dconst(C, 0);
    mlp_ctx c = {N, C, F, x, W1, b1, W2, b2, h, a, y, R};
    double l;
    assert_int_equal(mlp_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_mlp_backward(N, C, F, x, W1, W2, h, a, R, scratch, dx, dW1, db1, dW2,
                                       db2),
                     MHA_OK);
    mha_gc_tensor t[5] = {{"mlp.x", x, dx, N * C},   {"mlp.W1", W1, dW1, F * C},
                          {"mlp.b1", b1, db1, F},    {"mlp.W2", W2, dW2, C * F},
                          {"mlp.b2", b2, db2, C}};
    check_all(mlp_loss, &c, t, 5);
    free(x); free(W1); free(b1); free(W2); free(b2); free(R);
    free(dx); free(dW1); free(db1); free(dW2); free(db2);
}

/* Tied read-out: ids → embedding(E, P) → layernorm → linear(W = E, no bias) → xent. */
enum { TB = 2, TT = 3, TTMAX = 4, TC = 5, TV = 7, TN = TB * TT };
typedef struct tied_ctx {
    const int32_t *ids, *tg;
    double *E, *P, *w, *b;
    double emb[TN * TC], z[TN * TC], mean[TN], rstd[TN], logits[TN * TV];
} tied_ctx;

static int tied_loss(void *v, double *loss)
{
    tied_ctx *c = v;
    int st = mhad_embedding_forward(TB, TT, TC, c->ids, TV, c->E, c->P, c->emb);
    if (st == MHA_OK)
        st = mhad_layernorm_forward(TN, TC, 1e-5, c->emb, c->w, c->b, c->z, c->mean, c->rstd);
    if (st == MHA_OK)
        st = mhad_linear_forward(TN, TC, TV, c->z, c->E, NULL, c->logits);
    if (st == MHA_OK)
        st = mhad_xent_forward(TN, TV, c->logits, c->tg, loss, NULL);
    return st;
}

/* Tied composition: dE gathers the read-out's dW and the embedding's dE (both uses). */
static void test_layers_grad_tied(void **state)
{
    (void)state;
    const int32_t ids[TN] = {1, 3, 1, 6, 0, 3}, tg[TN] = {3, 1, -1, 6, 2, 1};
    tied_ctx c = {.ids = ids, .tg = tg};
    c.E = dbuf(TV * TC, -1, 1, 70);
    c.P = dbuf(TTMAX * TC, -1, 1, 71);
    c.w = dbuf(TC, 0.5, 1.5, 72);
    c.b = dbuf(TC, -0.5, 0.5, 73);
    double l;
    size_t S = 0;
    assert_int_equal(tied_loss(&c, &l), MHA_OK);
    assert_int_equal(mhad_xent_forward(TN, TV, c.logits, tg, &l, &S), MHA_OK);
    double *dE = dconst(TV * TC, 0), *dP = dconst(TTMAX * TC, 0), *dw = dconst(TC, 0);
    double *db = dconst(TC, 0), *dlog = dconst(TN * TV, 0), *dz = dconst(TN * TC, 0);
    double *demb = dconst(TN * TC, 0);
    assert_int_equal(mhad_xent_backward(TN, TV, c.logits, tg, 1.0 / (double)S, dlog), MHA_OK);
    /* logits = z·Eᵀ: dE += dlogitsᵀ·z (read-out use), dz += dlogits·E */
    assert_int_equal(mhad_linear_backward(TN, TC, TV, c.z, c.E, dlog, dz, dE, NULL), MHA_OK);
    assert_int_equal(mhad_layernorm_backward(TN, TC, c.emb, c.w, c.mean, c.rstd, dz, demb, dw, db),
                     MHA_OK);
    /* emb = E[ids] + P: dE += scatter(demb) (embedding use), dP += Σ_b demb */
    assert_int_equal(mhad_embedding_backward(TB, TT, TC, ids, TV, demb, dE, dP), MHA_OK);
    mha_gc_tensor t[4] = {{"tied.E", c.E, dE, TV * TC}, {"tied.P", c.P, dP, TTMAX * TC},
                          {"tied.ln_w", c.w, dw, TC}, {"tied.ln_b", c.b, db, TC}};
    check_all(tied_loss, &c, t, 4);
    free(c.E); free(c.P); free(c.w); free(c.b);
    free(dE); free(dP); free(dw); free(db); free(dlog); free(dz); free(demb);
}

/* ---- float32 against float64 ---------------------------------------------------- */

#define OUT_TOL 1e-5
#define GRAD_TOL 1e-4

static void assert_rel(const float *f, const double *d, size_t n, double tol, const char *what)
{
    double r = rel_f(f, d, n);
    if (!(r <= tol))
        fail_msg("%s: float32 vs float64 relative L2 %.3g > %.3g", what, r, tol);
}

/* float32 and float64 agree on the same inputs: outputs ≤ 1e-5, gradients ≤ 1e-4 (rel. L2). */
static void test_layers_f32_vs_f64(void **state)
{
    (void)state;
    enum { N = 8, C = 32, F = 48, V = 11, NE = 300 };
    double *x = dbuf(N * C, -2, 2, 80), *dy = dbuf(N * C, -1, 1, 81);
    float *xf = fcopy(x, N * C), *dyf = fcopy(dy, N * C);

    { /* layernorm */
        double *w = dbuf(C, 0.5, 1.5, 82), *b = dbuf(C, -1, 1, 83), y[N * C], mu[N], rs[N];
        double *dx = dconst(N * C, 0), *dw = dconst(C, 0), *db = dconst(C, 0);
        float *wf = fcopy(w, C), *bf = fcopy(b, C), yf[N * C], muf[N], rsf[N];
        float *dxf = fconst(N * C, 0), *dwf = fconst(C, 0), *dbf = fconst(C, 0);
        assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, b, y, mu, rs), MHA_OK);
        assert_int_equal(mha_layernorm_forward(N, C, 1e-5, xf, wf, bf, yf, muf, rsf), MHA_OK);
        assert_int_equal(mhad_layernorm_backward(N, C, x, w, mu, rs, dy, dx, dw, db), MHA_OK);
        assert_int_equal(mha_layernorm_backward(N, C, xf, wf, muf, rsf, dyf, dxf, dwf, dbf),
                         MHA_OK);
        assert_rel(yf, y, N * C, OUT_TOL, "layernorm y");
        assert_rel(dxf, dx, N * C, GRAD_TOL, "layernorm dx");
        assert_rel(dwf, dw, C, GRAD_TOL, "layernorm dw");
        assert_rel(dbf, db, C, GRAD_TOL, "layernorm db");
        free(w); free(b); free(dx); free(dw); free(db);
        free(wf); free(bf); free(dxf); free(dwf); free(dbf);
    }
    { /* linear C → F, and MLP C → F → C */
        double *W1 = dbuf(F * C, -0.3, 0.3, 84), *b1 = dbuf(F, -0.3, 0.3, 85);
        double *W2 = dbuf(C * F, -0.3, 0.3, 86), *b2 = dbuf(C, -0.3, 0.3, 87);
        float *W1f = fcopy(W1, F * C), *b1f = fcopy(b1, F), *W2f = fcopy(W2, C * F);
        float *b2f = fcopy(b2, C);
        double *dh = dbuf(N * F, -1, 1, 88);
        float *dhf = fcopy(dh, N * F);
        double h[N * F], a[N * F], y[N * C], s[N * F];
        float hf[N * F], af[N * F], yf[N * C], sf[N * F];
        double *dx = dconst(N * C, 0), *dW1 = dconst(F * C, 0), *db1 = dconst(F, 0);
        double *dW2 = dconst(C * F, 0), *db2 = dconst(C, 0);
        float *dxf = fconst(N * C, 0), *dW1f = fconst(F * C, 0), *db1f = fconst(F, 0);
        float *dW2f = fconst(C * F, 0), *db2f = fconst(C, 0);
        assert_int_equal(mhad_linear_forward(N, C, F, x, W1, b1, h), MHA_OK);
        assert_int_equal(mha_linear_forward(N, C, F, xf, W1f, b1f, hf), MHA_OK);
        assert_rel(hf, h, N * F, OUT_TOL, "linear y");
        assert_int_equal(mhad_linear_backward(N, C, F, x, W1, dh, dx, dW1, db1), MHA_OK);
        assert_int_equal(mha_linear_backward(N, C, F, xf, W1f, dhf, dxf, dW1f, db1f), MHA_OK);
        assert_rel(dxf, dx, N * C, GRAD_TOL, "linear dx");
        assert_rel(dW1f, dW1, F * C, GRAD_TOL, "linear dW");
        assert_rel(db1f, db1, F, GRAD_TOL, "linear db");
        /* gelu on h */
        assert_int_equal(mhad_gelu_forward(N * F, h, a), MHA_OK);
        assert_int_equal(mha_gelu_forward(N * F, hf, af), MHA_OK);
        assert_rel(af, a, N * F, OUT_TOL, "gelu y");
        double *gx = dconst(N * F, 0);
        float *gxf = fconst(N * F, 0);
        assert_int_equal(mhad_gelu_backward(N * F, h, dh, gx), MHA_OK);
        assert_int_equal(mha_gelu_backward(N * F, hf, dhf, gxf), MHA_OK);
        assert_rel(gxf, gx, N * F, GRAD_TOL, "gelu dx");
        free(gx); free(gxf);
        /* MLP */
        memset(dx, 0, N * C * sizeof *dx); memset(dW1, 0, F * C * sizeof *dW1);
        memset(db1, 0, F * sizeof *db1);
        for (size_t i = 0; i < N * C; i++) dxf[i] = 0;
        for (size_t i = 0; i < F * C; i++) dW1f[i] = 0;
        for (size_t i = 0; i < F; i++) db1f[i] = 0;
        assert_int_equal(mhad_mlp_forward(N, C, F, x, W1, b1, W2, b2, h, a, y), MHA_OK);
        assert_int_equal(mha_mlp_forward(N, C, F, xf, W1f, b1f, W2f, b2f, hf, af, yf), MHA_OK);
        assert_rel(yf, y, N * C, OUT_TOL, "mlp y");
        assert_int_equal(mhad_mlp_backward(N, C, F, x, W1, W2, h, a, dy, s, dx, dW1, db1, dW2, db2),
                         MHA_OK);
        assert_int_equal(mha_mlp_backward(N, C, F, xf, W1f, W2f, hf, af, dyf, sf, dxf, dW1f, db1f,
                                          dW2f, db2f),
                         MHA_OK);
        assert_rel(dxf, dx, N * C, GRAD_TOL, "mlp dx");
        assert_rel(dW1f, dW1, F * C, GRAD_TOL, "mlp dW1");
        assert_rel(db1f, db1, F, GRAD_TOL, "mlp db1");
        assert_rel(dW2f, dW2, C * F, GRAD_TOL, "mlp dW2");
        assert_rel(db2f, db2, C, GRAD_TOL, "mlp db2");
        free(W1); free(b1); free(W2); free(b2); free(dh); free(dx); free(dW1); free(db1);
        free(dW2); free(db2); free(W1f); free(b1f); free(W2f); free(b2f); free(dhf);
        free(dxf); free(dW1f); free(db1f); free(dW2f); free(db2f);
    }
    { /* cross-entropy */
        double *z = dbuf(N * V, -4, 4, 89), *dz = dconst(N * V, 0), l;
        float *zf = fcopy(z, N * V), *dzf = fconst(N * V, 0);
        const int32_t tg[N] = {0, 10, -1, 3, 3, 7, -1, 1};
        double lf;
        assert_int_equal(mhad_xent_forward(N, V, z, tg, &l, NULL), MHA_OK);
        assert_int_equal(mha_xent_forward(N, V, zf, tg, &lf, NULL), MHA_OK);
        assert_close(lf, l, 0, OUT_TOL);
        assert_int_equal(mhad_xent_backward(N, V, z, tg, 0.25, dz), MHA_OK);
        assert_int_equal(mha_xent_backward(N, V, zf, tg, 0.25, dzf), MHA_OK);
        assert_rel(dzf, dz, N * V, GRAD_TOL, "xent dlogits");
        free(z); free(dz); free(zf); free(dzf);
    }
    { /* embedding and dropout: the same bits, values to rounding */
        const int32_t ids[6] = {3, 1, 3, 0, 9, 3};
        double *E = dbuf(10 * 4, -1, 1, 90), *P = dbuf(3 * 4, -1, 1, 91), y[24];
        float *Ef = fcopy(E, 40), *Pf = fcopy(P, 12), yf[24];
        assert_int_equal(mhad_embedding_forward(2, 3, 4, ids, 10, E, P, y), MHA_OK);
        assert_int_equal(mha_embedding_forward(2, 3, 4, ids, 10, Ef, Pf, yf), MHA_OK);
        assert_rel(yf, y, 24, OUT_TOL, "embedding y");
        double *xd = dbuf(NE, -1, 1, 92), yd[NE];
        float *xdf = fcopy(xd, NE), ydf[NE];
        uint64_t k64[MHA_DROPOUT_WORDS(NE)], k32[MHA_DROPOUT_WORDS(NE)];
        assert_int_equal(mhad_dropout_forward(NE, 0.4, 9, 3, 2, xd, yd, k64), MHA_OK);
        assert_int_equal(mha_dropout_forward(NE, 0.4, 9, 3, 2, xdf, ydf, k32), MHA_OK);
        assert_memory_equal(k64, k32, sizeof k64);
        assert_rel(ydf, yd, NE, OUT_TOL, "dropout y");
        free(E); free(P); free(Ef); free(Pf); free(xd); free(xdf);
    }
    free(x); free(dy); free(xf); free(dyf);
}

/* ---- accumulation ----------------------------------------------------------------- */

/* b == a + n exactly, elementwise. */
static void assert_sum(const double *b, const double *a, const double *n, size_t len,
                       const char *what)
{
    for (size_t i = 0; i < len; i++)
        if (!(b[i] == a[i] + n[i]))
            fail_msg("%s[%zu]: %.17g != %.17g + %.17g", what, i, b[i], a[i], n[i]);
}

/* Every backward adds: gradients starting at `old` end at exactly old + (gradient from 0). */
/* a[i] == b[i] for all i (so +0 and −0 agree; NaN never does) */
static void assert_same_values(const double *a, const double *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i]))
            fail_msg("%s[%zu]: %.17g != %.17g", what, i, a[i], b[i]);
}

/* One attention backward, public (dx_query added to a zeroed buffer) against the internal
 * one that writes it (into NaN); dx_context (cross-attention) and the parameter gradients
 * accumulate in both. D > 128 takes the unfused projections of self-attention. */
static void backward_set_case(size_t D, int cross)
{
    enum { B = 2, S = 3, T = 4 };
    const size_t Sk = cross ? T : S;
    mha_config cfg = {D, 2, 0.0, 7, 1, MHA_PRECISION_FP32};
    mhad_module *m[2];
    mhad_cache *c[2];
    double *xq = dbuf(B * S * D, -1, 1, 300), *xc = dbuf(B * Sk * D, -1, 1, 301);
    double *dout = dbuf(B * S * D, -1, 1, 302), *out = dconst(B * S * D, 0);
    double *dxq[2] = {dconst(B * S * D, 0), dconst(B * S * D, NAN)};
    double *dxc[2] = {dbuf(B * Sk * D, -1, 1, 303), dbuf(B * Sk * D, -1, 1, 303)};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(mhad_create(&m[k], &cfg), MHA_OK);
        assert_int_equal(mhad_cache_create(&c[k], m[k], B, S, Sk), MHA_OK);
        assert_int_equal(mhad_forward(m[k], c[k], 1, B, S, xq, Sk, cross ? xc : NULL, NULL, out),
                         MHA_OK);
    }
    assert_int_equal(mhad_backward(m[0], c[0], xq, cross ? xc : NULL, dout, dxq[0],
                                   cross ? dxc[0] : NULL), MHA_OK);
    assert_int_equal(mha__dbackward_set(m[1], c[1], xq, cross ? xc : NULL, dout, dxq[1],
                                        cross ? dxc[1] : NULL), MHA_OK);
    assert_same_values(dxq[0], dxq[1], B * S * D, "dx_query");
    assert_same_values(dxc[0], dxc[1], B * Sk * D, "dx_context");
    size_t n0, n1;
    const double *g0 = mhad_grads(m[0], &n0), *g1 = mhad_grads(m[1], &n1);
    assert_int_equal(n0, n1);
    assert_same_values(g0, g1, n0, "grads");
    for (int k = 0; k < 2; k++) {
        mhad_cache_destroy(c[k]);
        mhad_destroy(m[k]);
        free(dxq[k]);
        free(dxc[k]);
    }
    free(xq);
    free(xc);
    free(dout);
    free(out);
}

/* The internal backward passes that write their input gradient (src/mha_internal.h) give
 * what their public twins add to a zeroed buffer, into a buffer holding NaN; the parameter
 * gradients accumulate the same. */
static void test_layers_backward_set(void **state)
{
    (void)state;
    enum { N = 7, C = 8, F = 12 };
    /* dropout, and p = 1 */
    const double ps[] = {0.3, 1.0};
    for (size_t k = 0; k < 2; k++) {
        double *x = dbuf(N * C, -1, 1, 310), *y = dconst(N * C, 0), *dy = dbuf(N * C, -1, 1, 311);
        double *a = dconst(N * C, 0), *b = dconst(N * C, NAN);
        uint64_t keep[MHA_DROPOUT_WORDS(N * C)];
        assert_int_equal(mhad_dropout_forward(N * C, ps[k], 5, 6, 0, x, y, keep), MHA_OK);
        assert_int_equal(mhad_dropout_backward(N * C, ps[k], keep, dy, a), MHA_OK);
        assert_int_equal(mha__ddropout_backward_set(N * C, ps[k], keep, dy, b), MHA_OK);
        assert_same_values(a, b, N * C, "dropout dx");
        assert_int_equal(mha__ddropout_backward_set(N * C, ps[k], NULL, dy, b), MHA_EINVAL);
        free(x), free(y), free(dy), free(a), free(b);
    }
    /* the MLP */
    double *x = dbuf(N * C, -1, 1, 320), *W1 = dbuf(F * C, -0.5, 0.5, 321);
    double *b1 = dbuf(F, -0.1, 0.1, 322), *W2 = dbuf(C * F, -0.5, 0.5, 323);
    double *b2 = dbuf(C, -0.1, 0.1, 324), *dy = dbuf(N * C, -1, 1, 325);
    double *h = dconst(N * F, 0), *act = dconst(N * F, 0), *y = dconst(N * C, 0);
    double *scr = dconst(N * F, 0), *dx[2] = {dconst(N * C, 0), dconst(N * C, NAN)};
    double *g[2][4];
    const size_t gn[4] = {F * C, F, C * F, C};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 4; t++)
            g[k][t] = dbuf(gn[t], -1, 1, 330 + (uint64_t)t); /* the same start in both */
    assert_int_equal(mhad_mlp_forward(N, C, F, x, W1, b1, W2, b2, h, act, y), MHA_OK);
    assert_int_equal(mhad_mlp_backward(N, C, F, x, W1, W2, h, act, dy, scr, dx[0], g[0][0],
                                       g[0][1], g[0][2], g[0][3]), MHA_OK);
    assert_int_equal(mha__dmlp_backward_set(MHA_PRECISION_FP32, N, C, F, x, W1, W2, h, act, dy,
                                            scr, dx[1], g[1][0], g[1][1], g[1][2], g[1][3], 0),
                     MHA_OK);
    assert_same_values(dx[0], dx[1], N * C, "mlp dx");
    for (int t = 0; t < 4; t++)
        assert_same_values(g[0][t], g[1][t], gn[t], "mlp grads");
    for (int k = 0; k < 2; k++) {
        free(dx[k]);
        for (int t = 0; t < 4; t++)
            free(g[k][t]);
    }
    free(x), free(W1), free(b1), free(W2), free(b2), free(dy), free(h), free(act), free(y);
    free(scr);
    /* the attention module: fused and unfused self-attention, cross-attention */
    backward_set_case(8, 0);
    backward_set_case(136, 0);
    backward_set_case(8, 1);
}

static void test_layers_accumulate(void **state)
{
    (void)state;
    enum { N = 5, C = 6, F = 9, V = 4 };
    double *x = dbuf(N * C, -1, 1, 100), *dy = dbuf(N * C, -1, 1, 101);
    double *w = dbuf(C, 0.5, 1.5, 102), *bb = dbuf(C, -1, 1, 103);
    double y[N * C], mu[N], rs[N];
    /* three gradient sets of the biggest size: zero-start (new), old, old-start (sum) */
    enum { G = F * C };
    double *n0 = dconst(G, 0), *n1 = dconst(G, 0), *n2 = dconst(G, 0);
    double *o0 = dbuf(G, -1, 1, 104), *o1 = dbuf(G, -1, 1, 105), *o2 = dbuf(G, -1, 1, 106);
    double *s0 = malloc(G * sizeof *s0), *s1 = malloc(G * sizeof *s1), *s2 = malloc(G * sizeof *s2);
    double *n3 = dconst(G, 0), *n4 = dconst(G, 0);
    double *o3 = dbuf(G, -1, 1, 107), *o4 = dbuf(G, -1, 1, 108);
    double *s3 = malloc(G * sizeof *s3), *s4 = malloc(G * sizeof *s4);
#define RESET_SUMS()                                                                             \
    do {                                                                                         \
        memcpy(s0, o0, G * sizeof *s0); memcpy(s1, o1, G * sizeof *s1);                         \
        memcpy(s2, o2, G * sizeof *s2); memcpy(s3, o3, G * sizeof *s3);                         \
        memcpy(s4, o4, G * sizeof *s4);                                                         \
        memset(n0, 0, G * sizeof *n0); memset(n1, 0, G * sizeof *n1);                           \
        memset(n2, 0, G * sizeof *n2); memset(n3, 0, G * sizeof *n3);                           \
        memset(n4, 0, G * sizeof *n4);                                                          \
    } while (0)

    /* layernorm */
    RESET_SUMS();
    assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, bb, y, mu, rs), MHA_OK);
    assert_int_equal(mhad_layernorm_backward(N, C, x, w, mu, rs, dy, n0, n1, n2), MHA_OK);
    assert_int_equal(mhad_layernorm_backward(N, C, x, w, mu, rs, dy, s0, s1, s2), MHA_OK);
    assert_sum(s0, o0, n0, N * C, "layernorm dx");
    assert_sum(s1, o1, n1, C, "layernorm dw");
    assert_sum(s2, o2, n2, C, "layernorm db");
    /* linear C → F */
    RESET_SUMS();
    double *dyl = dbuf(N * F, -1, 1, 109);
    assert_int_equal(mhad_linear_backward(N, C, F, x, o4, dyl, n0, n1, n2), MHA_OK);
    assert_int_equal(mhad_linear_backward(N, C, F, x, o4, dyl, s0, s1, s2), MHA_OK);
    assert_sum(s0, o0, n0, N * C, "linear dx");
    assert_sum(s1, o1, n1, F * C, "linear dW");
    assert_sum(s2, o2, n2, F, "linear db");
    /* gelu */
    RESET_SUMS();
    assert_int_equal(mhad_gelu_backward(N * C, x, dy, n0), MHA_OK);
    assert_int_equal(mhad_gelu_backward(N * C, x, dy, s0), MHA_OK);
    assert_sum(s0, o0, n0, N * C, "gelu dx");
    /* embedding: B = 1, T = N, ids with repeats */
    RESET_SUMS();
    const int32_t ids[N] = {1, 3, 1, 1, 0};
    assert_int_equal(mhad_embedding_backward(1, N, C, ids, V, dy, n0, n1), MHA_OK);
    assert_int_equal(mhad_embedding_backward(1, N, C, ids, V, dy, s0, s1), MHA_OK);
    /* repeated ids add in sequence: compare against old + dy in that order */
    for (size_t k = 0; k < V * C; k++) {
        double e = o0[k];
        for (size_t r = 0; r < N; r++)
            if ((size_t)ids[r] == k / C)
                e += dy[r * C + k % C];
        if (!(s0[k] == e))
            fail_msg("embedding dE[%zu]: %.17g != %.17g", k, s0[k], e);
    }
    assert_sum(s1, o1, n1, N * C, "embedding dP");
    /* xent */
    RESET_SUMS();
    const int32_t tg[N] = {0, -1, 3, 2, 2};
    assert_int_equal(mhad_xent_backward(N, V, x, tg, 0.3, n0), MHA_OK);
    assert_int_equal(mhad_xent_backward(N, V, x, tg, 0.3, s0), MHA_OK);
    assert_sum(s0, o0, n0, N * V, "xent dlogits");
    /* dropout, and its in-place form dx = dy */
    RESET_SUMS();
    uint64_t keep[MHA_DROPOUT_WORDS(N * C)];
    assert_int_equal(mhad_dropout_forward(N * C, 0.5, 1, 2, 3, x, y, keep), MHA_OK);
    assert_int_equal(mhad_dropout_backward(N * C, 0.5, keep, dy, n0), MHA_OK);
    assert_int_equal(mhad_dropout_backward(N * C, 0.5, keep, dy, s0), MHA_OK);
    assert_sum(s0, o0, n0, N * C, "dropout dx");
    assert_int_equal(mhad_dropout_backward(N * C, 0.5, keep, s1, s1), MHA_OK); /* in place */
    for (size_t i = 0; i < N * C; i++)
        assert_true(s1[i] == ((keep[i / 64] >> (i % 64)) & 1 ? o1[i] * 2.0 : 0.0));
    /* MLP C → F → C, weights from o3 (W1 [F, C]) and o4 (W2 [C, F]) */
    RESET_SUMS();
    double h[N * F], a[N * F], ym[N * C], sc[N * F];
    const double *W1 = o3, *W2 = o4; /* [F, C] and [C, F]; biases o2 [F], o1 [C] */
    assert_int_equal(mhad_mlp_forward(N, C, F, x, W1, o2, W2, o1, h, a, ym), MHA_OK);
    assert_int_equal(mhad_mlp_backward(N, C, F, x, W1, W2, h, a, dy, sc, n0, n1, n2, n3, n4),
                     MHA_OK);
    assert_int_equal(mhad_mlp_backward(N, C, F, x, W1, W2, h, a, dy, sc, s0, s1, s2, s3, s4),
                     MHA_OK);
    assert_sum(s0, o0, n0, N * C, "mlp dx");
    assert_sum(s1, o1, n1, F * C, "mlp dW1");
    assert_sum(s2, o2, n2, F, "mlp db1");
    assert_sum(s3, o3, n3, C * F, "mlp dW2");
    assert_sum(s4, o4, n4, C, "mlp db2");
#undef RESET_SUMS
    free(x); free(dy); free(w); free(bb); free(dyl);
    free(n0); free(n1); free(n2); free(n3); free(n4);
    free(o0); free(o1); free(o2); free(o3); free(o4);
    free(s0); free(s1); free(s2); free(s3); free(s4);
}

/* ---- direct formulas ---------------------------------------------------------------- */

/* The float GELU (own vectorisable tanh) against the double one (libm's tanh) on a fine
 * grid of x in [−12, 12] and at huge |x|: value within 3e-7·max(1, |x|), derivative within
 * 1e-6·max(1, |x|) (for x < −5 float's 1 + tanh u is 0 while the true derivative is
 * ~3e-7: float32 cannot do better, and torch's float GELU does the same). */
static void test_layers_gelu_float_accuracy(void **state)
{
    (void)state;
    enum { NG = 24003 };
    float *xf = malloc(NG * sizeof(float)), *yf = malloc(NG * sizeof(float));
    float *onef = malloc(NG * sizeof(float)), *df = calloc(NG, sizeof(float));
    double *xd = malloc(NG * sizeof(double)), *yd = malloc(NG * sizeof(double));
    double *oned = malloc(NG * sizeof(double)), *dd = calloc(NG, sizeof(double));
    assert_non_null(xf); assert_non_null(yf); assert_non_null(onef); assert_non_null(df);
    assert_non_null(xd); assert_non_null(yd); assert_non_null(oned); assert_non_null(dd);
    for (int i = 0; i < NG - 2; i++)
        xf[i] = (float)(-12.0 + 1e-3 * i);
    xf[NG - 2] = -3e19f;
    xf[NG - 1] = 3e19f;
    for (int i = 0; i < NG; i++) {
        xd[i] = xf[i];
        onef[i] = 1.0f;
        oned[i] = 1.0;
    }
    assert_int_equal(mha_gelu_forward(NG, xf, yf), MHA_OK);
    assert_int_equal(mhad_gelu_forward(NG, xd, yd), MHA_OK);
    assert_int_equal(mha_gelu_backward(NG, xf, onef, df), MHA_OK);
    assert_int_equal(mhad_gelu_backward(NG, xd, oned, dd), MHA_OK);
    for (int i = 0; i < NG; i++) {
        double tol = 3e-7 * fmax(1.0, fabs(xd[i]));
        if (!(fabs(yf[i] - yd[i]) <= tol) || !(fabs(df[i] - dd[i]) <= 10.0 / 3.0 * tol))
            fail_msg("x = %.9g: y %.9g vs %.17g, dy %.9g vs %.17g", xd[i], yf[i], yd[i], df[i],
                     dd[i]);
    }
    free(xf); free(yf); free(onef); free(df); free(xd); free(yd); free(oned); free(dd);
    /* NaN stays NaN, forward and backward, in the vector body and alone (the float tanh
     * must not convert a NaN to an integer: undefined, which the sanitizer build reports) */
    float xn[19], yn[19], gn[19], dn[19];
    for (int i = 0; i < 19; i++) {
        xn[i] = i % 3 == 0 ? NAN : (float)(i - 9);
        gn[i] = 1.0f;
        dn[i] = 0.0f;
    }
    assert_int_equal(mha_gelu_forward(19, xn, yn), MHA_OK);
    assert_int_equal(mha_gelu_backward(19, xn, gn, dn), MHA_OK);
    for (int i = 0; i < 19; i++)
        assert_true(i % 3 == 0 ? isnan(yn[i]) && isnan(dn[i]) : isfinite(yn[i]) && isfinite(dn[i]));
}

/* Distance in units in the last place between two finite floats of the same sign. */
static long ulps_apart(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return labs((long)ia - (long)ib);
}

/* The softmax's exponentials (mha_internal.h's exp_shift_sum). float: within 2 ulp of
 * libm's double exp rounded to float over [−104, 88] (a grid of 1e-3 below 0, 1e-2 above;
 * within 3 of the smallest subnormal where the result is subnormal), exactly 0 below −104
 * (the masked scores' −1e9 too), e^0 = 1 exactly, NaN stays NaN; a row of 37 (vector body
 * and tail) gives each element the bits it gives alone, and a sum within 1e-15 of the
 * running double sum of its outputs. double: libm's exp and that running sum, bit for bit. */
static void test_layers_softmax_exp(void **state)
{
    (void)state;
    long worst = 0;
    for (int i = 0; i <= 104000 + 8800; i++) {
        float x = i <= 104000 ? (float)(-104.0 + 1e-3 * i) : (float)(0.01 * (i - 104000));
        float y = x;
        const double s = mha__sexp_shift_sum(&y, 1, 0.0f);
        const float ref = (float)exp((double)x);
        if (ref < FLT_MIN) {
            if (!(fabs((double)y - ref) <= 3.0 * 0x1p-149))
                fail_msg("e^%.9g = %.9g, libm %.9g (subnormal)", x, y, ref);
        } else {
            const long u = ulps_apart(y, ref);
            worst = u > worst ? u : worst;
            if (u > 2)
                fail_msg("e^%.9g = %.9g, libm %.9g: %ld ulp", x, y, ref, u);
        }
        assert_true(s == (double)y);
    }
    print_message("exp_shift_sum: at most %ld ulp from libm over [-104, 88]\n", worst);
    const float special[6] = {0.0f, -0.0f, -104.01f, -1e9f, -INFINITY, NAN};
    const float want[6] = {1.0f, 1.0f, 0.0f, 0.0f, 0.0f, NAN};
    for (int i = 0; i < 6; i++) {
        float y = special[i];
        mha__sexp_shift_sum(&y, 1, 0.0f);
        if (isnan(want[i]))
            assert_true(isnan(y));
        else
            assert_true(y == want[i]);
    }
    enum { N = 37 };
    float row[N], one[N];
    double rowd[N], refd[N], run = 0;
    for (int j = 0; j < N; j++) {
        row[j] = one[j] = (float)(-3.0 + 0.37 * j - (j == 11 ? 1e9 : 0));
        rowd[j] = refd[j] = row[j];
    }
    const double sum = mha__sexp_shift_sum(row, N, 5.5f);
    for (int j = 0; j < N; j++) {
        mha__sexp_shift_sum(&one[j], 1, 5.5f);
        assert_memory_equal(&row[j], &one[j], sizeof row[j]);
        run += row[j];
    }
    assert_true(row[11] == 0.0f);
    assert_close(sum, run, 0, 1e-15);
    const double sumd = mha__dexp_shift_sum(rowd, N, 5.5);
    run = 0;
    for (int j = 0; j < N; j++) {
        refd[j] = refd[j] - 5.5 < -750.0 ? 0.0 : exp(refd[j] - 5.5);
        run += refd[j];
    }
    assert_memory_equal(rowd, refd, sizeof rowd);
    assert_memory_equal(&sumd, &run, sizeof run);
}

/* LayerNorm, GELU, linear and cross-entropy equal naive formulas (layernorm rows at 1e6). */
static void test_layers_formulas(void **state)
{
    (void)state;
    enum { N = 4, C = 9, OUT = 5, V = 6 };
    double *x = dbuf(N * C, -1, 1, 110), *w = dbuf(C, -2, 2, 111), *b = dbuf(C, -1, 1, 112);
    for (size_t c = 0; c < C; c++)
        x[2 * C + c] += 1000.0; /* a row far from zero mean */
    double y[N * C], mu[N], rs[N];
    assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, b, y, mu, rs), MHA_OK);
    for (size_t r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (size_t c = 0; c < C; c++)
            m += x[r * C + c];
        m /= C;
        for (size_t c = 0; c < C; c++)
            v += (x[r * C + c] - m) * (x[r * C + c] - m);
        v /= C;
        const double s = 1.0 / sqrt(v + 1e-5);
        assert_close(mu[r], m, 0, 1e-15);
        assert_close(rs[r], s, 0, 1e-14);
        for (size_t c = 0; c < C; c++)
            assert_close(y[r * C + c], (x[r * C + c] - m) * s * w[c] + b[c], 1e-14, 1e-14);
    }
    /* GELU against 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), and its derivative */
    const double gx[] = {-3, -1, -0.5, 0, 0.1, 0.7, 2, 5, 50, -50, 1e200, -1e200};
    const size_t ng = sizeof gx / sizeof gx[0];
    double gy[12], gd[12] = {0}, ones[12];
    for (size_t i = 0; i < ng; i++)
        ones[i] = 1.0;
    assert_int_equal(mhad_gelu_forward(ng, gx, gy), MHA_OK);
    assert_int_equal(mhad_gelu_backward(ng, gx, ones, gd), MHA_OK);
    const double k = sqrt(2.0 / 3.14159265358979323846);
    for (size_t i = 0; i < 10; i++) {
        const double xx = gx[i], t = tanh(k * (xx + 0.044715 * xx * xx * xx));
        assert_close(gy[i], 0.5 * xx * (1 + t), 1e-15, 1e-14);
        const double d = 0.5 * (1 + t) + 0.5 * xx * (1 - t * t) * k * (1 + 3 * 0.044715 * xx * xx);
        assert_close(gd[i], d, 1e-15, 1e-14);
    }
    assert_true(gy[3] == 0.0);
    assert_true(gy[10] == 1e200 && gd[10] == 1.0); /* large x: y = x, y' = 1 (no NaN) */
    assert_true(gy[11] == 0.0 && gd[11] == 0.0);   /* large −x: y = 0, y' = 0 */
    assert_close(gy[4], 0.053982751045435165, 1e-15, 1e-14); /* torch gelu(0.1, "tanh") */
    /* linear against a triple loop */
    double *W = dbuf(OUT * C, -1, 1, 113), *bo = dbuf(OUT, -1, 1, 114), yl[N * OUT];
    assert_int_equal(mhad_linear_forward(N, C, OUT, x, W, bo, yl), MHA_OK);
    for (size_t r = 0; r < N; r++)
        for (size_t o = 0; o < OUT; o++) {
            double s = bo[o];
            for (size_t c = 0; c < C; c++)
                s += x[r * C + c] * W[o * C + c];
            assert_close(yl[r * OUT + o], s, 1e-9, 1e-13);
        }
    /* cross-entropy against −mean log softmax, and S = 0 gives loss 0 */
    double *z = dbuf(N * V, -5, 5, 115), loss;
    const int32_t tg[N] = {2, 5, -1, 0};
    size_t S;
    assert_int_equal(mhad_xent_forward(N, V, z, tg, &loss, &S), MHA_OK);
    double ref = 0;
    for (size_t r = 0; r < N; r++) {
        if (tg[r] < 0)
            continue;
        double se = 0;
        for (size_t v = 0; v < V; v++)
            se += exp(z[r * V + v]);
        ref += -log(exp(z[r * V + (size_t)tg[r]]) / se);
    }
    assert_int_equal((int)S, 3);
    assert_close(loss, ref / 3.0, 1e-14, 1e-13);
    const int32_t none[N] = {-1, -1, -1, -1};
    assert_int_equal(mhad_xent_forward(N, V, z, none, &loss, &S), MHA_OK);
    assert_true(loss == 0.0 && S == 0);
    free(x); free(w); free(b); free(W); free(bo); free(z);
}

/* ---- bad arguments ---------------------------------------------------------------- */

/* Each invalid argument returns its documented status and writes nothing. */
static void test_layers_bad_args(void **state)
{
    (void)state;
    enum { N = 3, C = 4, V = 5 };
    const size_t big = (size_t)INT32_MAX + 1; /* beyond BLAS's int */
    double *x = dbuf(N * C, -1, 1, 120), *w = dconst(C, 1), *b = dconst(C, 0);
    double *y = dconst(N * C, SENTINEL), *mu = dconst(N, SENTINEL), *rs = dconst(N, SENTINEL);
    double *g = dconst(N * C, SENTINEL), *g2 = dconst(N * C, SENTINEL);
    double *g3 = dconst(N * C, SENTINEL);
    const double *dy = x;
#define UNTOUCHED()                                                                              \
    do {                                                                                         \
        assert_true(all_equal(y, N * C, SENTINEL) && all_equal(mu, N, SENTINEL));               \
        assert_true(all_equal(rs, N, SENTINEL) && all_equal(g, N * C, SENTINEL));               \
        assert_true(all_equal(g2, N * C, SENTINEL) && all_equal(g3, N * C, SENTINEL));          \
    } while (0)
    /* layernorm */
    assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, NULL, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, NULL, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, b, y, mu, NULL), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(0, C, 1e-5, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, 0, 1e-5, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, 0.0, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, -1e-5, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, NAN, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(N, C, INFINITY, x, w, b, y, mu, rs), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_forward(SIZE_MAX / 4, 5, 1e-5, x, w, b, y, mu, rs),
                     MHA_EOVERFLOW);
    assert_int_equal(mhad_layernorm_backward(N, C, x, NULL, mu, rs, dy, g, g2, g3), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_backward(N, C, x, w, mu, rs, NULL, g, g2, g3), MHA_EINVAL);
    assert_int_equal(mhad_layernorm_backward(N, 0, x, w, mu, rs, dy, g, g2, g3), MHA_EINVAL);
    UNTOUCHED();
    /* linear */
    assert_int_equal(mhad_linear_forward(N, C, C, NULL, x, b, y), MHA_EINVAL);
    assert_int_equal(mhad_linear_forward(N, C, C, x, NULL, b, y), MHA_EINVAL);
    assert_int_equal(mhad_linear_forward(N, C, C, x, x, b, NULL), MHA_EINVAL);
    assert_int_equal(mhad_linear_forward(N, 0, C, x, x, b, y), MHA_EINVAL);
    assert_int_equal(mhad_linear_forward(big, 1, 1, x, x, b, y), MHA_EOVERFLOW);
    assert_int_equal(mhad_linear_forward(1, big, 1, x, x, b, y), MHA_EOVERFLOW);
    assert_int_equal(mhad_linear_forward(1, 1, big, x, x, b, y), MHA_EOVERFLOW);
    assert_int_equal(mhad_linear_backward(N, C, C, x, x, NULL, g, g2, g3), MHA_EINVAL);
    assert_int_equal(mhad_linear_backward(N, C, 0, x, x, dy, g, g2, g3), MHA_EINVAL);
    assert_int_equal(mhad_linear_backward(big, 1, 1, x, x, dy, g, g2, g3), MHA_EOVERFLOW);
    UNTOUCHED();
    /* gelu */
    assert_int_equal(mhad_gelu_forward(0, x, y), MHA_EINVAL);
    assert_int_equal(mhad_gelu_forward(N, x, NULL), MHA_EINVAL);
    assert_int_equal(mhad_gelu_backward(N, NULL, dy, g), MHA_EINVAL);
    assert_int_equal(mhad_gelu_backward(N, x, dy, NULL), MHA_EINVAL);
    assert_int_equal(mhad_gelu_forward(SIZE_MAX, x, y), MHA_EOVERFLOW);
    UNTOUCHED();
    /* embedding: the bad id is the last one, so it must be checked before any write */
    const int32_t ok_ids[N] = {0, 4, 2}, bad_hi[N] = {0, 1, V}, bad_neg[N] = {0, 1, -1};
    assert_int_equal(mhad_embedding_forward(1, N, C, bad_hi, V, x, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(1, N, C, bad_neg, V, x, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(1, N, C, NULL, V, x, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(1, N, C, ok_ids, V, NULL, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(1, N, C, ok_ids, 0, x, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(0, N, C, ok_ids, V, x, NULL, y), MHA_EINVAL);
    assert_int_equal(mhad_embedding_forward(1, N, SIZE_MAX / 2, ok_ids, V, x, NULL, y),
                     MHA_EOVERFLOW);
    assert_int_equal(mhad_embedding_backward(1, N, C, bad_hi, V, dy, g, g2), MHA_EINVAL);
    assert_int_equal(mhad_embedding_backward(1, N, C, ok_ids, V, NULL, g, g2), MHA_EINVAL);
    UNTOUCHED();
    /* cross-entropy */
    const int32_t tg_hi[N] = {0, 1, C}, tg_neg[N] = {0, -2, 1}, tg_ok[N] = {0, -1, 3};
    double loss = SENTINEL;
    size_t S = 77;
    assert_int_equal(mhad_xent_forward(N, C, x, tg_hi, &loss, &S), MHA_EINVAL);
    assert_int_equal(mhad_xent_forward(N, C, x, tg_neg, &loss, &S), MHA_EINVAL);
    assert_int_equal(mhad_xent_forward(N, C, x, tg_ok, NULL, &S), MHA_EINVAL);
    assert_int_equal(mhad_xent_forward(N, 0, x, tg_ok, &loss, &S), MHA_EINVAL);
    assert_int_equal(mhad_xent_forward(0, C, x, tg_ok, &loss, &S), MHA_EINVAL);
    assert_true(loss == SENTINEL && S == 77);
    assert_int_equal(mhad_xent_backward(N, C, x, tg_hi, 1.0, g), MHA_EINVAL);
    assert_int_equal(mhad_xent_backward(N, C, x, tg_ok, NAN, g), MHA_EINVAL);
    assert_int_equal(mhad_xent_backward(N, C, x, tg_ok, INFINITY, g), MHA_EINVAL);
    assert_int_equal(mhad_xent_backward(N, C, x, tg_ok, 1.0, NULL), MHA_EINVAL);
    UNTOUCHED();
    /* dropout */
    uint64_t keep[1] = {0x5a5a5a5a5a5a5a5aULL};
    assert_int_equal(mhad_dropout_forward(N, -0.1, 1, 1, 0, x, y, keep), MHA_EINVAL);
    assert_int_equal(mhad_dropout_forward(N, 1.1, 1, 1, 0, x, y, keep), MHA_EINVAL);
    assert_int_equal(mhad_dropout_forward(N, NAN, 1, 1, 0, x, y, keep), MHA_EINVAL);
    assert_int_equal(mhad_dropout_forward(0, 0.5, 1, 1, 0, x, y, keep), MHA_EINVAL);
    assert_int_equal(mhad_dropout_forward(N, 0.5, 1, 1, 0, x, y, NULL), MHA_EINVAL);
    assert_int_equal(mhad_dropout_forward(((size_t)1 << 40) + 1, 0.5, 1, 1, 0, x, y, keep),
                     MHA_EOVERFLOW);
    assert_int_equal(mhad_dropout_backward(N, NAN, keep, dy, g), MHA_EINVAL);
    assert_int_equal(mhad_dropout_backward(N, 0.5, NULL, dy, g), MHA_EINVAL);
    assert_int_equal(mhad_dropout_backward(((size_t)1 << 40) + 1, 0.5, keep, dy, g),
                     MHA_EOVERFLOW);
    assert_true(keep[0] == 0x5a5a5a5a5a5a5a5aULL);
    UNTOUCHED();
    /* MLP (C = 4, F = 4 here) */
    assert_int_equal(mhad_mlp_forward(1, C, C, x, x, b, x, b, NULL, g2, y), MHA_EINVAL);
    assert_int_equal(mhad_mlp_forward(1, C, 0, x, x, b, x, b, g, g2, y), MHA_EINVAL);
    assert_int_equal(mhad_mlp_forward(1, big, 1, x, x, b, x, b, g, g2, y), MHA_EOVERFLOW);
    assert_int_equal(mhad_mlp_backward(1, C, C, x, x, x, x, x, dy, NULL, g, g2, g3, NULL, NULL),
                     MHA_EINVAL);
    assert_int_equal(mhad_mlp_backward(1, C, C, x, x, x, NULL, x, dy, y, g, g2, g3, NULL, NULL),
                     MHA_EINVAL);
    assert_int_equal(mhad_mlp_backward(1, 1, big, x, x, x, x, x, dy, y, g, g2, g3, NULL, NULL),
                     MHA_EOVERFLOW);
    UNTOUCHED();
#undef UNTOUCHED
    free(x); free(w); free(b); free(y); free(mu); free(rs); free(g); free(g2); free(g3);
}

/* ---- dropout stream --------------------------------------------------------------- */

static int bit(const uint64_t *keep, size_t i) { return (int)((keep[i / 64] >> (i % 64)) & 1); }

/* p = 0 copies x and sets every bit (bits past n are 0); p = 1 gives zeros, clears every
 * bit, and backward gives 0 (+= leaves dx, in place zeroes it). */
static void test_layers_dropout_p0_p1(void **state)
{
    (void)state;
    enum { N = 130 };
    double *x = dbuf(N, -1, 1, 130), *y = dconst(N, SENTINEL), *dx = dbuf(N, -1, 1, 131);
    double *dx0 = malloc(N * sizeof *dx0);
    memcpy(dx0, dx, N * sizeof *dx0);
    uint64_t keep[MHA_DROPOUT_WORDS(N)];
    assert_int_equal(mhad_dropout_forward(N, 0.0, 1, 2, 3, x, y, keep), MHA_OK);
    assert_memory_equal(x, y, N * sizeof *x);
    assert_true(keep[0] == ~0ULL && keep[1] == ~0ULL && keep[2] == 0x3ULL);
    memcpy(y, x, N * sizeof *x); /* in place */
    assert_int_equal(mhad_dropout_forward(N, 0.0, 1, 2, 3, y, y, keep), MHA_OK);
    assert_memory_equal(x, y, N * sizeof *x);
    assert_int_equal(mhad_dropout_forward(N, 1.0, 1, 2, 3, x, y, keep), MHA_OK);
    assert_true(all_equal(y, N, 0.0));
    assert_true(keep[0] == 0 && keep[1] == 0 && keep[2] == 0);
    assert_int_equal(mhad_dropout_backward(N, 1.0, keep, x, dx), MHA_OK);
    assert_memory_equal(dx, dx0, N * sizeof *dx);
    assert_int_equal(mhad_dropout_backward(N, 1.0, keep, dx, dx), MHA_OK);
    assert_true(all_equal(dx, N, 0.0));
    free(x); free(y); free(dx); free(dx0);
}

/* p = 0.3 over 1e5 elements keeps 70% within 5σ, and kept values are x/(1 − p). */
static void test_layers_dropout_fraction(void **state)
{
    (void)state;
    const size_t n = 100000;
    double *x = dbuf(n, 0.5, 1.5, 140), *y = dconst(n, SENTINEL);
    uint64_t *keep = calloc(MHA_DROPOUT_WORDS(n), sizeof *keep);
    assert_int_equal(mhad_dropout_forward(n, 0.3, 11, 4, 0, x, y, keep), MHA_OK);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (bit(keep, i)) {
            kept++;
            assert_true(y[i] == x[i] * (1.0 / 0.7));
        } else {
            assert_true(y[i] == 0.0);
        }
    }
    const double mean = 0.7 * (double)n, sd = sqrt((double)n * 0.3 * 0.7);
    assert_true(fabs((double)kept - mean) < 5 * sd);
    free(x); free(y); free(keep);
}

/* Masks and outputs are bit-identical with 1 and 2 threads (n not a multiple of 64, many
 * chunks); the same call replays the mask, the next call draws another. */
static void test_layers_dropout_threads_replay(void **state)
{
    (void)state;
    const size_t n = 3 * 4096 * 4 + 37, words = MHA_DROPOUT_WORDS(n);
    double *x = dbuf(n, -1, 1, 150), *y1 = dconst(n, 0), *y2 = dconst(n, 0);
    uint64_t *k1 = calloc(words, 8), *k2 = calloc(words, 8), *k3 = calloc(words, 8);
    float *xf = fcopy(x, n), *yf1 = fconst(n, 0), *yf2 = fconst(n, 0);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(mhad_dropout_forward(n, 0.25, 5, 6, 7, x, y1, k1), MHA_OK);
    assert_int_equal(mha_dropout_forward(n, 0.25, 5, 6, 7, xf, yf1, k3), MHA_OK);
    assert_memory_equal(k1, k3, words * 8);
    omp_set_num_threads(2);
    assert_int_equal(mhad_dropout_forward(n, 0.25, 5, 6, 7, x, y2, k2), MHA_OK);
    assert_memory_equal(k1, k2, words * 8);
    assert_memory_equal(y1, y2, n * sizeof *y1);
    assert_int_equal(mha_dropout_forward(n, 0.25, 5, 6, 7, xf, yf2, k3), MHA_OK);
    assert_memory_equal(k1, k3, words * 8);
    assert_memory_equal(yf1, yf2, n * sizeof *yf1);
    /* backward with 1 and 2 threads */
    memset(y2, 0, n * sizeof *y2);
    assert_int_equal(mhad_dropout_backward(n, 0.25, k1, x, y2), MHA_OK);
    omp_set_num_threads(1);
    memset(y1, 0, n * sizeof *y1);
    assert_int_equal(mhad_dropout_backward(n, 0.25, k1, x, y1), MHA_OK);
    assert_memory_equal(y1, y2, n * sizeof *y1);
    /* replay: call 7 again gives the same mask; call 8 another one */
    assert_int_equal(mhad_dropout_forward(n, 0.25, 5, 6, 7, x, y1, k2), MHA_OK);
    assert_memory_equal(k1, k2, words * 8);
    assert_int_equal(mhad_dropout_forward(n, 0.25, 5, 6, 8, x, y1, k2), MHA_OK);
    size_t differ = 0;
    for (size_t i = 0; i < words; i++)
        differ += k1[i] != k2[i];
    assert_true(differ > words / 2);
    /* a different stream also gives another mask */
    assert_int_equal(mhad_dropout_forward(n, 0.25, 5, 9, 7, x, y1, k2), MHA_OK);
    assert_true(memcmp(k1, k2, words * 8) != 0);
    omp_set_num_threads(saved);
    free(x); free(y1); free(y2); free(k1); free(k2); free(k3); free(xf); free(yf1); free(yf2);
}

/* Element i of call c is dropped iff output number c·2^40 + i of PCG32(seed, stream) is
 * < floor(p·2^32): recomputed by hand at chunk and word edges. */
static void test_layers_dropout_position(void **state)
{
    (void)state;
    const size_t n = 10000;
    const uint64_t seed = 1234, stream = 77, call = 3;
    const double p = 0.45;
    double *x = dbuf(n, -1, 1, 160), *y = dconst(n, 0);
    uint64_t *keep = calloc(MHA_DROPOUT_WORDS(n), 8);
    assert_int_equal(mhad_dropout_forward(n, p, seed, stream, call, x, y, keep), MHA_OK);
    const size_t at[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 8191, 8192, 9998, 9999};
    const uint64_t threshold = (uint64_t)floor(p * 4294967296.0);
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        mha_pcg32 rng;
        mha_pcg32_seed(&rng, seed, stream);
        mha_pcg32_advance(&rng, (call << 40) + at[k]);
        const int kept = (uint64_t)mha_pcg32_next(&rng) >= threshold;
        assert_int_equal(bit(keep, at[k]), kept);
    }
    /* and every bit, across words and chunks, by walking one generator: the interleaved
     * lanes of the full words and the scalar last word draw its outputs in order; each
     * kept element is x·1/(1 − p), each dropped one 0 */
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, stream);
    mha_pcg32_advance(&rng, call << 40);
    for (size_t i = 0; i < n; i++) {
        const int kept = (uint64_t)mha_pcg32_next(&rng) >= threshold;
        assert_int_equal(bit(keep, i), kept);
        assert_true(y[i] == (kept ? x[i] * (1.0 / (1.0 - p)) : 0.0));
    }
    free(x); free(y); free(keep);
}

/* The masks drawn on AVX-512 (mha__dropout_simd) are the portable loop's bit for bit, and
 * so are the outputs, in both precisions: p from 1e-9 (threshold 4) to 1 − 1e-6, over
 * several chunks and a last partial word. Skipped, visibly, on a CPU without AVX-512 F
 * and DQ, where the portable loop is the only one (test_layers_dropout_position checks it
 * against PCG32 element by element). The backward's products and sums likewise. */
static void test_layers_dropout_simd(void **state)
{
    (void)state;
    if (!mha__dropout_simd(1)) {
        print_message("[  SKIP    ] this CPU has no AVX-512 F + DQ: dropout's masks are drawn "
                      "by the portable loop only\n");
        skip();
    }
    const size_t n = 3 * 4096 + 200, words = MHA_DROPOUT_WORDS(n);
    const double ps[] = {1e-9, 0.1, 0.45, 0.5, 1 - 1e-6};
    double *x = dbuf(n, -1, 1, 170), *y[2] = {dconst(n, 0), dconst(n, 0)};
    float *xf = fcopy(x, n), *yf[2] = {fconst(n, 0), fconst(n, 0)};
    uint64_t *k[2] = {calloc(words, 8), calloc(words, 8)}, *kf = calloc(words, 8);
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        for (int simd = 0; simd < 2; simd++) {
            assert_int_equal(mha__dropout_simd(simd), simd);
            assert_int_equal(mhad_dropout_forward(n, ps[i], 31, 8, 4, x, y[simd], k[simd]),
                             MHA_OK);
            assert_int_equal(mha_dropout_forward(n, ps[i], 31, 8, 4, xf, yf[simd], kf), MHA_OK);
            assert_memory_equal(kf, k[simd], words * 8);
        }
        assert_memory_equal(k[0], k[1], words * 8);
        assert_memory_equal(y[0], y[1], n * sizeof *y[0]);
        assert_memory_equal(yf[0], yf[1], n * sizeof *yf[0]);
        /* backward, added into dx (every third element −0: +0 added makes it +0 in both)
         * and in place */
        for (int simd = 0; simd < 2; simd++) {
            mha__dropout_simd(simd);
            for (size_t e = 0; e < n; e++) {
                y[simd][e] = e % 3 ? x[(e * 7) % n] : -0.0;
                yf[simd][e] = (float)y[simd][e];
            }
            assert_int_equal(mhad_dropout_backward(n, ps[i], k[0], x, y[simd]), MHA_OK);
            assert_int_equal(mha_dropout_backward(n, ps[i], k[0], xf, yf[simd]), MHA_OK);
            assert_int_equal(mhad_dropout_backward(n, ps[i], k[0], y[simd], y[simd]), MHA_OK);
            assert_int_equal(mha_dropout_backward(n, ps[i], k[0], yf[simd], yf[simd]), MHA_OK);
        }
        assert_memory_equal(y[0], y[1], n * sizeof *y[0]);
        assert_memory_equal(yf[0], yf[1], n * sizeof *yf[0]);
    }
    assert_int_equal(mha__dropout_simd(1), 1); /* the default again */
    free(x); free(y[0]); free(y[1]); free(xf); free(yf[0]); free(yf[1]);
    free(k[0]); free(k[1]); free(kf);
}

/* dropout_forward_at(offset) is the slice [offset, offset + n) of a longer call's masks
 * and outputs (offsets off word and chunk boundaries; float too), offset 0 is
 * dropout_forward, and offset + n past 2^40 is refused without writing. */
static void test_layers_dropout_at_offset(void **state)
{
    (void)state;
    const size_t N = 9000;
    const uint64_t seed = 99, stream = 5, call = 12;
    const double p = 0.3;
    double *x = dbuf(N, -1, 1, 161), *y = dconst(N, 0), *ys = dconst(N, 0);
    uint64_t *keep = calloc(MHA_DROPOUT_WORDS(N), 8), *ks = calloc(MHA_DROPOUT_WORDS(N), 8);
    assert_int_equal(mhad_dropout_forward(N, p, seed, stream, call, x, y, keep), MHA_OK);
    const size_t offs[] = {0, 1, 63, 64, 100, 4095, 4097, 8000};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        const size_t o = offs[k], n = N - o;
        assert_int_equal(mhad_dropout_forward_at(n, p, seed, stream, call, o, x + o, ys, ks),
                         MHA_OK);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(bit(ks, i), bit(keep, o + i));
            assert_true(ys[i] == y[o + i]);
        }
    }
    float *xf = malloc(N * sizeof *xf), *yf = malloc(N * sizeof *yf);
    for (size_t i = 0; i < N; i++)
        xf[i] = (float)x[i];
    assert_int_equal(mha_dropout_forward_at(N - 100, p, seed, stream, call, 100, xf + 100, yf, ks),
                     MHA_OK);
    for (size_t i = 0; i < N - 100; i++)
        assert_int_equal(bit(ks, i), bit(keep, 100 + i));
    /* positions of one call stay below 2^40 */
    const uint64_t lim = (uint64_t)1 << 40;
    memcpy(ys, y, N * sizeof *y);
    assert_int_equal(mhad_dropout_forward_at(10, p, seed, stream, call, lim - 9, x, ys, ks),
                     MHA_EOVERFLOW);
    assert_memory_equal(ys, y, N * sizeof *y);
    assert_int_equal(mhad_dropout_forward_at(10, p, seed, stream, call, lim - 10, x, ys, ks),
                     MHA_OK);
    free(x); free(y); free(ys); free(keep); free(ks); free(xf); free(yf);
}

/* One MLP run's outputs, of either precision (elements of es bytes). */
typedef struct mlp_run {
    const void *h, *a, *y, *dx, *g[4];
} mlp_run;

/* r[1] (the keeping run) against r[0] (recomputing) and GELU's own derivative gh: its h
 * holds gh's bytes, every other output is r[0]'s. */
static void mlp_keep_check(const mlp_run r[2], const void *gh, size_t N, size_t C, size_t F,
                           const size_t gn[4], size_t es)
{
    assert_memory_equal(r[1].h, gh, N * F * es);
    assert_memory_equal(r[1].a, r[0].a, N * F * es);
    assert_memory_equal(r[1].y, r[0].y, N * C * es);
    assert_memory_equal(r[1].dx, r[0].dx, N * C * es);
    for (int t = 0; t < 4; t++)
        assert_memory_equal(r[1].g[t], r[0].g[t], gn[t] * es);
}

/* The MLP that keeps gelu'(h) from its forward (what a block's training forward does:
 * mha__?mlp_forward_keep) writes that derivative over h — the bits mha_gelu_backward gives
 * for a unit gradient — and the same a and y; its backward (kept = 1) multiplies by it and
 * gives the bits of the backward that recomputes the tanh: dx and the four gradients. At
 * sizes where the products split, 2 threads; float32, bf16 (where the CPU has it), float64. */
static void test_layers_mlp_keep_is_the_same_bits(void **state)
{
    (void)state;
    enum { N = 155, C = 48, F = 100 };
    const size_t gn[4] = {F * C, F, C * F, C};
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    double *xd = dbuf(N * C, -2, 2, 190), *dyd = dbuf(N * C, -1, 1, 191);
    double *w1d = dbuf(F * C, -0.5, 0.5, 192), *w2d = dbuf(C * F, -0.3, 0.3, 193);
    double *b1d = dbuf(F, -0.5, 0.5, 194), *b2d = dbuf(C, -0.5, 0.5, 195), *one = dconst(N * F, 1);
    for (int pi = 0; pi < 3; pi++) {
        const mha_precision prec = pi == 1 ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32;
        if (!mha_precision_available(prec)) {
            print_message("[  SKIPPED ] bf16 keep: this CPU lacks avx512_bf16\n");
            continue;
        }
        double *h[2], *a[2], *y[2], *dx[2], *g[2][4], *scr = dconst(N * F, 0), *gh = dconst(N * F, 0);
        for (int k = 0; k < 2; k++) {
            h[k] = dconst(N * F, 0), a[k] = dconst(N * F, 0), y[k] = dconst(N * C, 0);
            dx[k] = dconst(N * C, 0);
            for (int t = 0; t < 4; t++)
                g[k][t] = dbuf(gn[t], -1, 1, 196 + (uint64_t)t); /* the same start in both */
        }
        if (pi == 2) { /* float64 */
            for (int k = 0; k < 2; k++) {
                assert_int_equal(mha__dmlp_forward_keep(prec, N, C, F, xd, w1d, b1d, w2d, b2d, h[k],
                                                        a[k], y[k], k),
                                 MHA_OK);
                if (k == 0)
                    assert_int_equal(mhad_gelu_backward(N * F, h[0], one, gh), MHA_OK);
                assert_int_equal(mha__dmlp_backward_set(prec, N, C, F, xd, w1d, w2d, h[k], a[k],
                                                        dyd, scr, dx[k], g[k][0], g[k][1],
                                                        g[k][2], g[k][3], k),
                                 MHA_OK);
            }
            const mlp_run r[2] = {{h[0], a[0], y[0], dx[0], {g[0][0], g[0][1], g[0][2], g[0][3]}},
                                  {h[1], a[1], y[1], dx[1], {g[1][0], g[1][1], g[1][2], g[1][3]}}};
            mlp_keep_check(r, gh, N, C, F, gn, sizeof(double));
        } else {
            float *x = fcopy(xd, N * C), *dy = fcopy(dyd, N * C), *W1 = fcopy(w1d, F * C);
            float *W2 = fcopy(w2d, C * F), *b1 = fcopy(b1d, F), *b2 = fcopy(b2d, C);
            float *fone = fcopy(one, N * F), *fs = fcopy(scr, N * F), *fgh = fcopy(gh, N * F);
            float *fh[2], *fa[2], *fy[2], *fdx[2], *fg[2][4];
            for (int k = 0; k < 2; k++) {
                fh[k] = fcopy(h[k], N * F), fa[k] = fcopy(a[k], N * F), fy[k] = fcopy(y[k], N * C);
                fdx[k] = fcopy(dx[k], N * C);
                for (int t = 0; t < 4; t++)
                    fg[k][t] = fcopy(g[k][t], gn[t]);
                assert_int_equal(mha__smlp_forward_keep(prec, N, C, F, x, W1, b1, W2, b2, fh[k],
                                                        fa[k], fy[k], k),
                                 MHA_OK);
                if (k == 0)
                    assert_int_equal(mha_gelu_backward(N * F, fh[0], fone, fgh), MHA_OK);
                assert_int_equal(mha__smlp_backward_set(prec, N, C, F, x, W1, W2, fh[k], fa[k], dy,
                                                        fs, fdx[k], fg[k][0], fg[k][1], fg[k][2],
                                                        fg[k][3], k),
                                 MHA_OK);
            }
            const mlp_run r[2] = {
                {fh[0], fa[0], fy[0], fdx[0], {fg[0][0], fg[0][1], fg[0][2], fg[0][3]}},
                {fh[1], fa[1], fy[1], fdx[1], {fg[1][0], fg[1][1], fg[1][2], fg[1][3]}}};
            mlp_keep_check(r, fgh, N, C, F, gn, sizeof(float));
            for (int k = 0; k < 2; k++) {
                free(fh[k]), free(fa[k]), free(fy[k]), free(fdx[k]);
                for (int t = 0; t < 4; t++)
                    free(fg[k][t]);
            }
            free(x), free(dy), free(W1), free(W2), free(b1), free(b2), free(fone), free(fs), free(fgh);
        }
        for (int k = 0; k < 2; k++) {
            free(h[k]), free(a[k]), free(y[k]), free(dx[k]);
            for (int t = 0; t < 4; t++)
                free(g[k][t]);
        }
        free(scr), free(gh);
    }
    omp_set_num_threads(saved);
    free(xd), free(dyd), free(w1d), free(w2d), free(b1d), free(b2d), free(one);
}

/* The MLP runs GELU forward and backward as epilogues of its products, on each block of
 * rows a thread finishes (src/gemm.h): at sizes where the products split over threads, its
 * h, a, y and every gradient are those of the composition done step by step through the
 * public layers (Linear, GELU, Linear), at 1 and 2 threads, in float32 and bf16 (where the
 * CPU has it) — a block's epilogue on the wrong rows would leave rows stale. Compared with
 * ==: the composition's accumulating calls may give +0 where the MLP writes −0. */
static void test_layers_mlp_is_its_composition(void **state)
{
    (void)state;
    enum { N = 300, C = 64, F = 256 };
    double *xd = dbuf(N * C, -1, 1, 180), *dyd = dbuf(N * C, -1, 1, 181);
    double *w1d = dbuf(F * C, -0.3, 0.3, 182), *w2d = dbuf(C * F, -0.3, 0.3, 183);
    double *b1d = dbuf(F, -0.5, 0.5, 184), *b2d = dbuf(C, -0.5, 0.5, 185);
    float *x = fcopy(xd, N * C), *dy = fcopy(dyd, N * C), *W1 = fcopy(w1d, F * C);
    float *W2 = fcopy(w2d, C * F), *b1 = fcopy(b1d, F), *b2 = fcopy(b2d, C);
    const int saved = omp_get_max_threads();
    for (int pi = 0; pi < 2; pi++) {
        const mha_precision prec = pi ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32;
        if (!mha_precision_available(prec)) {
            print_message("[  SKIPPED ] bf16 composition: this CPU lacks avx512_bf16\n");
            continue;
        }
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            /* [0] h [1] a [2] y [3] scratch [4] dx [5] dW1 [6] db1 [7] dW2 [8] db2, MLP then
             * composition */
            const size_t len[9] = {N * F, N * F, N * C, N * F, N * C, F * C, F, C * F, C};
            float *m[9], *r[9];
            for (int i = 0; i < 9; i++) {
                m[i] = fconst(len[i], 0);
                r[i] = fconst(len[i], 0);
            }
            assert_int_equal(mha_mlp_forward_prec(prec, N, C, F, x, W1, b1, W2, b2, m[0], m[1],
                                                  m[2]),
                             MHA_OK);
            assert_int_equal(mha_mlp_backward_prec(prec, N, C, F, x, W1, W2, m[0], m[1], dy,
                                                   m[3], m[4], m[5], m[6], m[7], m[8]),
                             MHA_OK);
            assert_int_equal(mha_linear_forward_prec(prec, N, C, F, x, W1, b1, r[0]), MHA_OK);
            assert_int_equal(mha_gelu_forward(N * F, r[0], r[1]), MHA_OK);
            assert_int_equal(mha_linear_forward_prec(prec, N, F, C, r[1], W2, b2, r[2]), MHA_OK);
            /* dW2, db2 and da (= 0 + dy·W2, into r[3]) of the second Linear */
            assert_int_equal(mha_linear_backward_prec(prec, N, F, C, r[1], W2, dy, r[3], r[7],
                                                      r[8]),
                             MHA_OK);
            float *dh = fconst(N * F, 0);
            assert_int_equal(mha_gelu_backward(N * F, r[0], r[3], dh), MHA_OK);
            assert_int_equal(mha_linear_backward_prec(prec, N, C, F, x, W1, dh, r[4], r[5],
                                                      r[6]),
                             MHA_OK);
            for (int i = 0; i < 9; i++) {
                if (i == 3) /* the MLP's scratch ends as dh */
                    for (size_t e = 0; e < len[i]; e++)
                        assert_true(m[3][e] == dh[e]);
                else
                    for (size_t e = 0; e < len[i]; e++)
                        if (!(m[i][e] == r[i][e]))
                            fail_msg("%s, %d threads: output %d element %zu: %g, composed %g",
                                     mha_precision_name(prec), threads, i, e, (double)m[i][e],
                                     (double)r[i][e]);
                free(m[i]);
                free(r[i]);
            }
            free(dh);
        }
    }
    omp_set_num_threads(saved);
    free(xd); free(dyd); free(w1d); free(w2d); free(b1d); free(b2d);
    free(x); free(dy); free(W1); free(W2); free(b1); free(b2);
}

/* ---- thread-count independence ---------------------------------------------------- */

/* LayerNorm (forward, dx, dw, db), embedding backward (dE with repeats, dP), linear db,
 * GELU and cross-entropy give bitwise the same results with 1 and 2 OpenMP threads. */
static void test_layers_threads(void **state)
{
    (void)state;
    enum { N = 300, C = 130, V = 17, B = 4, T = 75 };
    double *x = dbuf(N * C, -1, 1, 170), *dy = dbuf(N * C, -1, 1, 171);
    double *w = dbuf(C, 0.5, 1.5, 172), *b = dbuf(C, -1, 1, 173);
    int32_t ids[N], tg[N];
    for (size_t i = 0; i < N; i++) {
        ids[i] = (int32_t)((i * 7) % V);
        tg[i] = (int32_t)(i % 5 == 0 ? -1 : (int)((i * 3) % C));
    }
    double *out[2][12];
    const int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        double **o = out[k];
        o[0] = dconst(N * C, 0); o[1] = dconst(N, 0); o[2] = dconst(N, 0);
        o[3] = dconst(N * C, 0.5); o[4] = dconst(C, 0.5); o[5] = dconst(C, 0.5);
        o[6] = dconst(V * C, 0.5); o[7] = dconst(T * C, 0.5); o[8] = dconst(C, 0.5);
        o[9] = dconst(N * C, 0.5); o[10] = dconst(N * C, 0.5); o[11] = dconst(2, 0);
        assert_int_equal(mhad_layernorm_forward(N, C, 1e-5, x, w, b, o[0], o[1], o[2]), MHA_OK);
        assert_int_equal(mhad_layernorm_backward(N, C, x, w, o[1], o[2], dy, o[3], o[4], o[5]),
                         MHA_OK);
        assert_int_equal(mhad_embedding_backward(B, T, C, ids, V, dy, o[6], o[7]), MHA_OK);
        assert_int_equal(mhad_linear_backward(N, 7, C, x, x, dy, NULL, NULL, o[8]), MHA_OK);
        assert_int_equal(mhad_gelu_backward(N * C, x, dy, o[9]), MHA_OK);
        assert_int_equal(mhad_xent_backward(N, C, x, tg, 0.01, o[10]), MHA_OK);
        assert_int_equal(mhad_xent_forward(N, C, x, tg, &o[11][0], NULL), MHA_OK);
    }
    omp_set_num_threads(saved);
    const size_t len[12] = {N * C, N, N, N * C, C, C, V * C, T * C, C, N * C, N * C, 1};
    for (size_t i = 0; i < 12; i++) {
        if (memcmp(out[0][i], out[1][i], len[i] * sizeof(double)) != 0)
            fail_msg("result %zu differs between 1 and 2 threads", i);
        free(out[0][i]);
        free(out[1][i]);
    }
    free(x); free(dy); free(w); free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers_grad_layernorm),
        cmocka_unit_test(test_layers_grad_linear),
        cmocka_unit_test(test_layers_grad_gelu),
        cmocka_unit_test(test_layers_grad_embedding),
        cmocka_unit_test(test_layers_grad_xent),
        cmocka_unit_test(test_layers_xent_wide_vocab),
        cmocka_unit_test(test_layers_grad_dropout),
        cmocka_unit_test(test_layers_grad_mlp),
        cmocka_unit_test(test_layers_grad_tied),
        cmocka_unit_test(test_layers_f32_vs_f64),
        cmocka_unit_test(test_layers_accumulate),
        cmocka_unit_test(test_layers_backward_set),
        cmocka_unit_test(test_layers_formulas),
        cmocka_unit_test(test_layers_gelu_float_accuracy),
        cmocka_unit_test(test_layers_bad_args),
        cmocka_unit_test(test_layers_dropout_p0_p1),
        cmocka_unit_test(test_layers_dropout_fraction),
        cmocka_unit_test(test_layers_dropout_threads_replay),
        cmocka_unit_test(test_layers_dropout_position),
        cmocka_unit_test(test_layers_dropout_simd),
        cmocka_unit_test(test_layers_dropout_at_offset),
        cmocka_unit_test(test_layers_threads),
        cmocka_unit_test(test_layers_mlp_is_its_composition),
        cmocka_unit_test(test_layers_mlp_keep_is_the_same_bits),
        cmocka_unit_test(test_layers_softmax_exp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
