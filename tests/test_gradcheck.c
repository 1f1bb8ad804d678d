/*
 * Tests of the public gradient checkers mha_gradcheck (float64) and mha_gradcheck_f
 * (float32) (src/gradcheck.c, include/mha_gradcheck.h): they pass correct gradients,
 * catch wrong ones and point at them, restore the values bit for bit, and reject
 * bad arguments; the float32 one with its own defaults, the stored-step rule and
 * the float64 version's random directions.
 *
 * Test problem, two tensors x [N] and w [N], fixed r [N]:
 *   L(x, w) = Σ_i r_i·sin(w_i·x_i) + (Σ_i x_i)²
 *   dL/dx_i = r_i·w_i·cos(w_i·x_i) + 2·Σ_j x_j      dL/dw_i = r_i·x_i·cos(w_i·x_i)
 * N is odd, so Σ v_i ≠ 0 for every ±1 direction v (used by the direction tests).
 *
 * Every test that holds for both checkers is written once, in test_gradcheck_run.inc,
 * and included twice: double (tests gradcheck_<name>) and float (gradcheck_f32_<name>),
 * each with its precision's defaults, bounds and premises (a gc_precision below). The
 * tests after the includes are about one checker only.
 *
 * All tests share the prefix gradcheck_ (cmocka_set_test_filter("gradcheck_*")).
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

#include "mha.h"

enum { N = 9 };

/* What the typed tests need to know about one precision. */
typedef struct gc_precision {
    double step, atol, rtol;                   /* the checker's defaults              */
    double other_step, other_atol, other_rtol; /* the other checker's defaults        */
    double err_elem, err_dir;   /* bounds on max |a − n| of a correct gradient         */
    double num_tol, num_tol_dir; /* |numeric − true| for an element, for a direction   */
    double add;     /* error put on one element (perturbed_element_is_found)           */
    double dir_add; /* error put on one element seen through directions                */
    int tested[3];  /* premise: elements of 2N where add, a flip, 10% exceed 2·tolerance */
    int inexact_min; /* premise: special values that ±h does not survive               */
    int specials_always; /* sine_setup puts the special values in                      */
    size_t n_spec_x;     /* special values: x[0 .. n_spec_x), and w[N − 1]             */
    double spec_x[3], spec_w_last;
    double bad_scale, bad_add; /* the failing element of defaults_and_options         */
} gc_precision;

/* Double: h = 1e-5, atol 1e-7, rtol 1e-6. Values below the step (where (v + h) − h != v:
 * restoring by undoing the step would change their bits) are in every test's problem;
 * of the 18 elements, dL/dw_0 = 2.9e-7 (at x_0 = 3e-6) is too small for 10% of it to
 * exceed 2·atol. */
static const gc_precision prec_f64 = {
    1e-5, 1e-7, 1e-6, 5e-3, 1e-3, 1e-2, 1e-8, 1e-7, 1e-8, 1e-7, 1e-4, 1e-3,
    {2 * N, 2 * N, 2 * N - 1}, 1, 1, 1, {3.0e-6 + 1e-22}, 2.5e-6 + 1e-22, 1.0, 1e-4,
};
/* Float: h = 5e-3, atol 1e-3, rtol 1e-2 (include/mha_gradcheck.h says why). Of the 18
 * elements, dL/dw_3 = 0.0040 is too small for 10% of it to exceed atol. The special
 * values −0.0f, a subnormal, 3e-3f, 0.9991f do not survive ±h arithmetically. */
static const gc_precision prec_f32 = {
    5e-3, 1e-3, 1e-2, 1e-5, 1e-7, 1e-6, 1e-3, 1e-3, 1e-3, 1e-3, 0.25, 0.25,
    {2 * N, 2 * N, 2 * N - 1}, 4, 0, 3, {-0.0, 1e-40, 3e-3}, 0.9991, 1.1, 0.0,
};
typedef mha_gc_tensor gc_tensor_f64;
typedef mha_gc_tensor_f gc_tensor_f32;
#define GRADCHECK(loss, ctx, t, n, opt, res) \
    _Generic((t), mha_gc_tensor *: mha_gradcheck, mha_gc_tensor_f *: mha_gradcheck_f)( \
        loss, ctx, t, n, opt, res)
#define FILL(x, n, lo, hi, seed) \
    _Generic((x), float *: fill_uniform_f, double *: fill_uniform)(x, n, lo, hi, seed)
#define SIN(v) _Generic((v), float: sinf, default: sin)(v)

#define REAL double
#define SFX(n) n##_f64
#define TEST(n) gradcheck_##n
#include "test_gradcheck_run.inc"

#define REAL float
#define SFX(n) n##_f32
#define TEST(n) gradcheck_f32_##n
#include "test_gradcheck_run.inc"

/* ==== float64 only ====================================================================== */
/* What the loss sees: in element mode call 2k+1 has element k at x_k + h and call
 * 2k+2 at x_k − h with everything else untouched; in direction mode every element
 * of the one tensor is at x_i ± h, the − call mirrors the + call, and the signs
 * are mixed. */
typedef struct probe {
    sine_problem_f64 *p;
    double h;
    size_t directions;
    int violations;
    int plus_signs, minus_signs;
    int last_sign[N]; /* the + call's signs, for the − call */
} probe;

static int probe_loss(void *ctx, double *loss)
{
    probe *q = ctx;
    sine_problem_f64 *p = q->p;
    size_t call = p->calls; /* 0-based index of this call */
    int rc = sine_loss_f64(p, loss);
    if (q->directions == 0) {
        size_t k = call / 2, tensor = k / N, elem = k % N;
        double sign = call % 2 == 0 ? 1.0 : -1.0;
        for (size_t i = 0; i < N; i++) {
            double ex = p->x0[i], ew = p->w0[i];
            if (i == elem && tensor == 0)
                ex = p->x0[i] + sign * q->h;
            if (i == elem && tensor == 1)
                ew = p->w0[i] + sign * q->h;
            q->violations += p->x[i] != ex;
            q->violations += p->w[i] != ew;
        }
    } else {
        size_t tensor = call / (2 * q->directions);
        int plus = call % 2 == 0;
        const double *v = tensor == 0 ? p->x : p->w, *v0 = tensor == 0 ? p->x0 : p->w0;
        const double *o = tensor == 0 ? p->w : p->x, *o0 = tensor == 0 ? p->w0 : p->x0;
        for (size_t i = 0; i < N; i++) {
            double d = (v[i] - v0[i]) / q->h;
            int s = d > 0.0 ? 1 : -1;
            q->violations += fabs(fabs(d) - 1.0) > 1e-6;
            q->violations += o[i] != o0[i];
            if (plus) {
                q->last_sign[i] = s;
                q->plus_signs += s > 0;
                q->minus_signs += s < 0;
            } else {
                q->violations += s != -q->last_sign[i];
            }
        }
    }
    return rc;
}

/* The checker perturbs exactly as documented, in both modes. */
static void gradcheck_perturbation_pattern(void **unused)
{
    (void)unused;
    for (size_t m = 0; m <= 12; m += 12) {
        sine_problem_f64 p;
        sine_setup_f64(&p);
        probe q = {.p = &p, .h = 1e-5, .directions = m};
        mha_gc_tensor t[2];
        sine_tensors_f64(&p, t);
        mha_gc_result res[2];
        const mha_gc_options opt = {.directions = m, .seed = 21u};
        assert_int_equal(mha_gradcheck(probe_loss, &q, t, 2, &opt, res), MHA_OK);
        assert_int_equal(p.calls, m == 0 ? 4u * N : 4u * m);
        assert_int_equal(q.violations, 0);
        if (m > 0) {
            print_message("direction signs: %d plus, %d minus\n", q.plus_signs, q.minus_signs);
            assert_int_equal(q.plus_signs + q.minus_signs, 2 * (int)m * N);
            assert_true(q.plus_signs > (int)m * N / 2 && q.minus_signs > (int)m * N / 2);
        }
        assert_values_restored_f64(&p);
    }
}

/* Recorder for gradcheck_direction_bits: a tensor x [NB] around 0 and the signs of
 * every evaluation's perturbation x/h (loss Σ x, gradient 1). */
enum { NB = 70, NB_DIRS = 2 };
typedef struct bit_probe {
    double x[NB], g[NB];
    int sign[2 * NB_DIRS][NB]; /* call c: sign of x_i (+1, −1, or 0 if x_i is 0) */
    size_t calls;
} bit_probe;

static int bit_loss(void *ctx, double *loss)
{
    bit_probe *q = ctx;
    double s = 0.0;
    for (size_t i = 0; i < NB; i++) {
        if (q->calls < 2 * NB_DIRS)
            q->sign[q->calls][i] = (q->x[i] > 0) - (q->x[i] < 0);
        s += q->x[i];
    }
    q->calls++;
    *loss = s;
    return 0;
}

/* The documented direction signs (src/gradcheck.c): one PCG32 generator seeded
 * (seed, 0x6763) per call; element i of direction d takes bit i mod 32 of the
 * generator's (d·⌈n/32⌉ + i div 32)-th output, 1 → +1, 0 → −1; call 2d+1 is
 * x + h·v_d, call 2d+2 is x − h·v_d. n = 70 crosses two word boundaries. */
static void gradcheck_direction_bits(void **unused)
{
    (void)unused;
    bit_probe q;
    memset(&q, 0, sizeof q);
    for (size_t i = 0; i < NB; i++)
        q.g[i] = 1.0;
    mha_gc_tensor t = {"x", q.x, q.g, NB};
    const mha_gc_options opt = {.directions = NB_DIRS, .seed = 12345u};
    mha_gc_result res;
    assert_int_equal(mha_gradcheck(bit_loss, &q, &t, 1, &opt, &res), MHA_OK);
    assert_int_equal(q.calls, 2 * NB_DIRS);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 12345u, 0x6763u); /* MHA_GC_STREAM */
    int plus = 0;
    for (size_t d = 0; d < NB_DIRS; d++) {
        uint32_t word = 0;
        for (size_t i = 0; i < NB; i++) {
            if (i % 32 == 0)
                word = mha_pcg32_next(&rng);
            const int v = ((word >> (i % 32)) & 1u) ? 1 : -1;
            plus += v > 0;
            assert_int_equal(q.sign[2 * d][i], v);
            assert_int_equal(q.sign[2 * d + 1][i], -v);
        }
    }
    assert_true(plus > 0 && plus < (int)(NB * NB_DIRS)); /* both signs occur */
}

/* A tensor whose analytic gradient is exactly 0 while the numeric one is rounding
 * noise passes, max_rel_err is the meaningless 1 the header warns about, and
 * mha_gc_format says "exactly 0" instead of quoting it; a failing tensor's line
 * says FAIL with the worst element. */
static int noisy_zero_loss(void *ctx, double *loss)
{
    const double *x = ctx;
    /* does not depend on x mathematically, but rounding of 1e3 + x − x shows */
    *loss = (1e3 + x[0]) - x[0] + (1e3 + x[1]) - x[1];
    return 0;
}

static void gradcheck_format_exact_zero(void **unused)
{
    (void)unused;
    double x[2] = {0.3, -0.7}, g[2] = {0.0, 0.0};
    mha_gc_tensor t = {"w_k.bias", x, g, 2};
    mha_gc_result r;
    const mha_gc_options opt = {.step = 1e-9};
    assert_int_equal(mha_gradcheck(noisy_zero_loss, x, &t, 1, &opt, &r), MHA_OK);
    char line[256];
    assert_int_equal(mha_gc_format(&r, t.name, line, sizeof line), MHA_OK);
    print_message("%s\n", line);
    assert_true(r.worst_ratio <= 1.0);
    assert_true(r.max_abs_analytic == 0.0);
    assert_non_null(strstr(line, "w_k.bias: pass"));
    assert_non_null(strstr(line, "exactly 0"));
    if (r.max_abs_err > 0.0) /* the noise the old message reported as rel 1.00e+00 */
        assert_true(r.max_rel_err == 1.0);

    /* a wrong gradient: FAIL, the worst element, and the relative error */
    sine_problem_f64 p;
    sine_setup_f64(&p);
    p.gw[4] += 0.5;
    mha_gc_tensor ts[2];
    sine_tensors_f64(&p, ts);
    mha_gc_result rs[2];
    assert_int_equal(mha_gradcheck(sine_loss_f64, &p, ts, 2, NULL, rs), MHA_OK);
    assert_int_equal(mha_gc_format(&rs[1], "w", line, sizeof line), MHA_OK);
    print_message("%s\n", line);
    assert_non_null(strstr(line, "w: FAIL"));
    assert_non_null(strstr(line, " at 4: "));
    assert_non_null(strstr(line, "max rel"));
    assert_int_equal(mha_gc_format(&rs[0], NULL, line, sizeof line), MHA_OK);
    assert_non_null(strstr(line, "tensor: pass"));
    /* truncation keeps a NUL; bad arguments */
    char tiny[8];
    assert_int_equal(mha_gc_format(&rs[1], "w", tiny, sizeof tiny), MHA_OK);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
    assert_int_equal(mha_gc_format(NULL, "w", line, sizeof line), MHA_EINVAL);
    assert_int_equal(mha_gc_format(&r, "w", NULL, sizeof line), MHA_EINVAL);
    assert_int_equal(mha_gc_format(&r, "w", line, 0), MHA_EINVAL);
}

/* ==== float32 only ====================================================================== */
/* A float layer from the library: y = gelu(x·Wᵀ + b), L = Σ R ⊙ y (in double), with
 * the library's own float backward as the analytic gradient. */
enum { LN = 3, LIN = 5, LOUT = 4 };
typedef struct layer_f {
    float x[LN * LIN], W[LOUT * LIN], b[LOUT]; /* x [N, in], W [out, in], b [out]     */
    float R[LN * LOUT];                        /* [N, out] fixed loss weights          */
    float z[LN * LOUT], y[LN * LOUT];          /* [N, out] z = x·Wᵀ + b, y = gelu(z)   */
    float dx[LN * LIN], dW[LOUT * LIN], db[LOUT], dz[LN * LOUT]; /* dL/d(x, W, b, z)  */
} layer_f;

static int layer_loss_f(void *ctx, double *loss)
{
    layer_f *q = ctx;
    int rc = mha_linear_forward(LN, LIN, LOUT, q->x, q->W, q->b, q->z);
    if (rc == MHA_OK)
        rc = mha_gelu_forward(LN * LOUT, q->z, q->y);
    if (rc != MHA_OK)
        return rc;
    double l = 0.0;
    for (size_t i = 0; i < LN * LOUT; i++)
        l += (double)q->R[i] * q->y[i];
    *loss = l;
    return 0;
}

static void layer_setup_f(layer_f *q)
{
    memset(q, 0, sizeof *q);
    fill_uniform_f(q->x, LN * LIN, -1.5f, 1.5f, 11u);
    fill_uniform_f(q->W, LOUT * LIN, -0.8f, 0.8f, 12u);
    fill_uniform_f(q->b, LOUT, -0.5f, 0.5f, 13u);
    fill_uniform_f(q->R, LN * LOUT, -1.0f, 1.0f, 14u);
    double l;
    assert_int_equal(layer_loss_f(q, &l), 0); /* z for the backward */
    assert_int_equal(mha_gelu_backward(LN * LOUT, q->z, q->R, q->dz), MHA_OK);
    assert_int_equal(
        mha_linear_backward(LN, LIN, LOUT, q->x, q->W, q->dz, q->dx, q->dW, q->db), MHA_OK);
}

/* The float checker passes Linear + GELU's float gradients (x, W, b) with its
 * defaults in both modes, and in element mode finds a 10% error on W[7]. */
static void gradcheck_f32_layer(void **unused)
{
    (void)unused;
    layer_f q;
    layer_setup_f(&q);
    layer_f q0 = q;
    mha_gc_tensor_f t[3] = {{"x", q.x, q.dx, LN * LIN},
                            {"W", q.W, q.dW, LOUT * LIN},
                            {"b", q.b, q.db, LOUT}};
    mha_gc_result res[3];
    for (size_t m = 0; m <= 8; m += 8) {
        const mha_gc_options opt = {.directions = m, .seed = 5u};
        assert_int_equal(mha_gradcheck_f(layer_loss_f, &q, t, 3, &opt, res), MHA_OK);
        for (int k = 0; k < 3; k++) {
            char line[200];
            assert_int_equal(mha_gc_format(&res[k], t[k].name, line, sizeof line), MHA_OK);
            print_message("f32 layer m=%zu %s\n", m, line);
            assert_true(res[k].worst_ratio <= 1.0);
        }
        assert_memory_equal(q.x, q0.x, sizeof q.x);
        assert_memory_equal(q.W, q0.W, sizeof q.W);
        assert_memory_equal(q.b, q0.b, sizeof q.b);
    }
    assert_true(fabsf(q.dW[7]) > 0.05f); /* premise: 10% of it exceeds the tolerance */
    q.dW[7] *= 1.1f;
    assert_int_equal(mha_gradcheck_f(layer_loss_f, &q, t, 3, NULL, res), MHA_OK);
    print_message("f32 layer, dW[7] 10%% off: worst_ratio %.3g at %zu\n", res[1].worst_ratio,
                  res[1].worst_index);
    assert_true(res[1].worst_ratio > 1.0);
    assert_int_equal(res[1].worst_index, 7u);
    assert_true(res[0].worst_ratio <= 1.0 && res[2].worst_ratio <= 1.0);
}

/* A value the step cannot move in float (1e7 with h = 5e-3 — accepted with h = 1 —,
 * +inf, NaN): MHA_EINVAL before any loss call, in both modes, values untouched. */
static void gradcheck_f32_unmovable_value_refused(void **unused)
{
    (void)unused;
    sine_problem_f32 p;
    mha_gc_tensor_f t[2];
    mha_gc_result res[2];
    const float unmovable[] = {1e7f, INFINITY, NAN};
    for (size_t u = 0; u < 3; u++) {
        for (size_t m = 0; m <= 2; m += 2) {
            sine_setup_f32(&p);
            p.w[N - 1] = unmovable[u];
            memcpy(p.w0, p.w, sizeof p.w);
            sine_tensors_f32(&p, t);
            const mha_gc_options opt = {.directions = m};
            assert_int_equal(mha_gradcheck_f(sine_loss_f32, &p, t, 2, &opt, res), MHA_EINVAL);
            assert_int_equal(p.calls, 0u);
            assert_values_restored_f32(&p);
        }
    }
    sine_setup_f32(&p);
    p.w[N - 1] = 1e7f;
    memcpy(p.w0, p.w, sizeof p.w);
    sine_tensors_f32(&p, t);
    const mha_gc_options big_step = {.step = 1.0};
    assert_int_equal(mha_gradcheck_f(sine_loss_f32, &p, t, 2, &big_step, res), MHA_OK);
    assert_values_restored_f32(&p);
}

/* The quotients use the perturbation actually stored. For L = Σ c_i·x_i (exact in
 * double for float x), element mode gives n_k = c_k to 1e-12 although
 * (fl(x + h) − fl(x − h)) / 2h differs from 1 by more than 1e-7 for some elements;
 * direction mode reports a = Σ c_i·δ_i / 2h, equal to n, with the call sequence
 * x⁺, x⁻ of each direction using the double checker's signs for the same seed. */
enum { NL = 40 };
typedef struct linear_probe_f {
    float x[NL], c[NL];
    size_t calls;
    float seen[4][NL]; /* the values of the first 4 calls */
} linear_probe_f;

static int linear_loss_f(void *ctx, double *loss)
{
    linear_probe_f *q = ctx;
    if (q->calls < 4)
        memcpy(q->seen[q->calls], q->x, sizeof q->x);
    q->calls++;
    double l = 0.0;
    for (size_t i = 0; i < NL; i++)
        l += (double)q->c[i] * q->x[i];
    *loss = l;
    return 0;
}

static void gradcheck_f32_realized_step(void **unused)
{
    (void)unused;
    linear_probe_f q;
    memset(&q, 0, sizeof q);
    fill_uniform_f(q.x, NL, -3.0f, 3.0f, 41u);
    fill_uniform_f(q.c, NL, -1.0f, 1.0f, 42u);
    const double h = 5e-3; /* the default */
    double worst_nominal = 0.0;
    for (size_t i = 0; i < NL; i++) {
        double delta = (double)(float)(q.x[i] + h) - (double)(float)(q.x[i] - h);
        worst_nominal = fmax(worst_nominal, fabs(delta / (2.0 * h) - 1.0));
    }
    print_message("f32: max |δ/2h − 1| = %.3g\n", worst_nominal);
    assert_true(worst_nominal > 1e-7); /* premise: 2h would be off */

    mha_gc_tensor_f t = {"x", q.x, q.c, NL};
    mha_gc_result r;
    const mha_gc_options tight = {.atol = 1e-12, .rtol = 1e-12};
    assert_int_equal(mha_gradcheck_f(linear_loss_f, &q, &t, 1, &tight, &r), MHA_OK);
    print_message("f32 element mode on a linear loss: max |a-n| %.3g\n", r.max_abs_err);
    assert_true(r.worst_ratio <= 1.0);

    /* direction mode, 1 direction: a = Σ c_i·δ_i / 2h with the documented signs */
    float x0[NL];
    memcpy(x0, q.x, sizeof x0);
    q.calls = 0;
    const mha_gc_options dir = {.directions = 1, .seed = 77u, .atol = 1e-12, .rtol = 1e-12};
    assert_int_equal(mha_gradcheck_f(linear_loss_f, &q, &t, 1, &dir, &r), MHA_OK);
    assert_int_equal(q.calls, 2u);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 77u, 0x6763u);
    double a = 0.0;
    uint32_t word = 0;
    for (size_t i = 0; i < NL; i++) {
        if (i % 32 == 0)
            word = mha_pcg32_next(&rng);
        const double v = ((word >> (i % 32)) & 1u) ? 1.0 : -1.0;
        const float xp = (float)(x0[i] + h * v), xm = (float)(x0[i] - h * v);
        assert_true(q.seen[0][i] == xp);
        assert_true(q.seen[1][i] == xm);
        a += (double)q.c[i] * ((double)xp - (double)xm);
    }
    a /= 2.0 * h;
    print_message("f32 direction: analytic %.17g expected %.17g numeric %.17g\n",
                  r.worst_analytic, a, r.worst_numeric);
    assert_true(r.worst_analytic == a);
    assert_true(r.worst_ratio <= 1.0);
    assert_memory_equal(q.x, x0, sizeof x0);
}

/* Random directions of mha_gradcheck_f are those of mha_gradcheck for the same seed
 * and tensor sizes: the sign of every element in every call agrees, over two
 * tensors (n = 70 and 33, crossing 32-bit word boundaries) and 3 directions. */
enum { NS1 = 70, NS2 = 33, NS_DIRS = 3, NS_CALLS = 2 * NS_DIRS * 2 };
typedef struct sign_probe {
    double xd[NS1 + NS2], gd[NS1 + NS2];
    float xf[NS1 + NS2], gf[NS1 + NS2];
    int use_float;
    size_t calls;
    signed char sign[NS_CALLS][NS1 + NS2];
} sign_probe;

static int sign_loss(void *ctx, double *loss)
{
    sign_probe *q = ctx;
    for (size_t i = 0; i < NS1 + NS2; i++) {
        double v = q->use_float ? (double)q->xf[i] : q->xd[i];
        if (q->calls < NS_CALLS)
            q->sign[q->calls][i] = (signed char)((v > 0) - (v < 0));
    }
    q->calls++;
    *loss = 0.0;
    return 0;
}

static void gradcheck_f32_directions_match_f64(void **unused)
{
    (void)unused;
    static sign_probe qd, qf;
    memset(&qd, 0, sizeof qd);
    memset(&qf, 0, sizeof qf);
    qf.use_float = 1;
    mha_gc_tensor td[2] = {{"a", qd.xd, qd.gd, NS1}, {"b", qd.xd + NS1, qd.gd + NS1, NS2}};
    mha_gc_tensor_f tf[2] = {{"a", qf.xf, qf.gf, NS1}, {"b", qf.xf + NS1, qf.gf + NS1, NS2}};
    const mha_gc_options opt = {.directions = NS_DIRS, .seed = 2024u};
    mha_gc_result rd[2], rf[2];
    assert_int_equal(mha_gradcheck(sign_loss, &qd, td, 2, &opt, rd), MHA_OK);
    assert_int_equal(mha_gradcheck_f(sign_loss, &qf, tf, 2, &opt, rf), MHA_OK);
    assert_int_equal(qd.calls, NS_CALLS);
    assert_int_equal(qf.calls, NS_CALLS);
    assert_memory_equal(qd.sign, qf.sign, sizeof qd.sign);
    int plus = 0, moved = 0;
    for (size_t c = 0; c < NS_CALLS; c++)
        for (size_t i = 0; i < NS1 + NS2; i++) {
            plus += qf.sign[c][i] > 0;
            moved += qf.sign[c][i] != 0;
        }
    /* each call moves exactly the tensor being checked; both signs occur */
    assert_int_equal(moved, 2 * NS_DIRS * (NS1 + NS2));
    assert_true(plus > 0 && plus < moved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gradcheck_correct_gradient_passes_elements),
        cmocka_unit_test(gradcheck_correct_gradient_passes_directions),
        cmocka_unit_test(gradcheck_perturbed_element_is_found),
        cmocka_unit_test(gradcheck_directions_flag_wrong_gradient),
        cmocka_unit_test(gradcheck_nan_gradient_fails),
        cmocka_unit_test(gradcheck_values_restored_bit_exact),
        cmocka_unit_test(gradcheck_callback_failure_restores_values),
        cmocka_unit_test(gradcheck_invalid_arguments),
        cmocka_unit_test(gradcheck_defaults_and_options),
        cmocka_unit_test(gradcheck_directions_follow_seed),
        cmocka_unit_test(gradcheck_perturbation_pattern),
        cmocka_unit_test(gradcheck_direction_bits),
        cmocka_unit_test(gradcheck_format_exact_zero),
        cmocka_unit_test(gradcheck_f32_correct_gradient_passes_elements),
        cmocka_unit_test(gradcheck_f32_correct_gradient_passes_directions),
        cmocka_unit_test(gradcheck_f32_perturbed_element_is_found),
        cmocka_unit_test(gradcheck_f32_directions_flag_wrong_gradient),
        cmocka_unit_test(gradcheck_f32_nan_gradient_fails),
        cmocka_unit_test(gradcheck_f32_values_restored_bit_exact),
        cmocka_unit_test(gradcheck_f32_callback_failure_restores_values),
        cmocka_unit_test(gradcheck_f32_invalid_arguments),
        cmocka_unit_test(gradcheck_f32_defaults_and_options),
        cmocka_unit_test(gradcheck_f32_directions_follow_seed),
        cmocka_unit_test(gradcheck_f32_layer),
        cmocka_unit_test(gradcheck_f32_unmovable_value_refused),
        cmocka_unit_test(gradcheck_f32_realized_step),
        cmocka_unit_test(gradcheck_f32_directions_match_f64),
    };
    return cmocka_run_group_tests_name("gradcheck", tests, NULL, NULL);
}
