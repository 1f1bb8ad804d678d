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
 * All tests share the prefix gradcheck_ (cmocka_set_test_filter("gradcheck_*")).
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

#include "mha.h"

enum { N = 9 };

typedef struct sine_problem {
    double x[N], w[N], r[N]; /* values checked (x, w) and fixed weights r       */
    double gx[N], gw[N];     /* analytic gradients at the unperturbed point      */
    double x0[N], w0[N];     /* copies of the unperturbed x, w                   */
    size_t calls;            /* loss evaluations so far                          */
    size_t fail_at;          /* return fail_code on this call (1-based); 0 never */
    int fail_code;
    int perturbed_at_failure; /* x or w differed from x0, w0 when it failed      */
} sine_problem;

/* L(x, w) as above; counts calls and fails on call fail_at. */
static int sine_loss(void *ctx, double *loss)
{
    sine_problem *p = ctx;
    p->calls++;
    if (p->calls == p->fail_at) {
        p->perturbed_at_failure =
            memcmp(p->x, p->x0, sizeof p->x) != 0 || memcmp(p->w, p->w0, sizeof p->w) != 0;
        return p->fail_code;
    }
    double s = 0.0, l = 0.0;
    for (size_t i = 0; i < N; i++) {
        l += p->r[i] * sin(p->w[i] * p->x[i]);
        s += p->x[i];
    }
    *loss = l + s * s;
    return 0;
}

/* Fill x, w, r from fixed seeds and set the correct analytic gradient. */
static void sine_setup(sine_problem *p)
{
    memset(p, 0, sizeof *p);
    fill_uniform(p->x, N, -2.0, 2.0, 101u);
    fill_uniform(p->w, N, 0.5, 2.0, 202u);
    fill_uniform(p->r, N, -1.0, 1.0, 303u);
    /* Two values smaller than the step h = 1e-5, where (v + h) − h != v: restoring
     * by undoing the step would change their bits. */
    p->x[0] = 3.0e-6 + 1e-22;
    p->w[N - 1] = 2.5e-6 + 1e-22;
    double s = 0.0;
    for (size_t i = 0; i < N; i++)
        s += p->x[i];
    for (size_t i = 0; i < N; i++) {
        double c = cos(p->w[i] * p->x[i]);
        p->gx[i] = p->r[i] * p->w[i] * c + 2.0 * s;
        p->gw[i] = p->r[i] * p->x[i] * c;
    }
    memcpy(p->x0, p->x, sizeof p->x);
    memcpy(p->w0, p->w, sizeof p->w);
}

static void sine_tensors(sine_problem *p, mha_gc_tensor t[2])
{
    t[0] = (mha_gc_tensor){"x", p->x, p->gx, N};
    t[1] = (mha_gc_tensor){"w", p->w, p->gw, N};
}

/* x and w hold exactly their original bits. */
static void assert_values_restored(const sine_problem *p)
{
    assert_memory_equal(p->x, p->x0, sizeof p->x);
    assert_memory_equal(p->w, p->w0, sizeof p->w);
}

/* The correct gradient passes in element mode: every element of both tensors is
 * compared (2 calls each), the errors are tiny but nonzero (real differences were
 * taken), and the values come back unchanged. */
static void gradcheck_correct_gradient_passes_elements(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result res[2];
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, NULL, res), MHA_OK);
    assert_int_equal(p.calls, 2u * 2u * N);
    for (int k = 0; k < 2; k++) {
        print_message("%s: worst_ratio %.3g max_abs_err %.3g max_rel_err %.3g\n", t[k].name,
                      res[k].worst_ratio, res[k].max_abs_err, res[k].max_rel_err);
        assert_int_equal(res[k].compared, N);
        assert_true(res[k].worst_ratio <= 1.0);
        assert_true(res[k].max_abs_err > 0.0 && res[k].max_abs_err < 1e-8);
        assert_true(res[k].worst_index < N);
        assert_true(res[k].worst_analytic == t[k].grad[res[k].worst_index]);
        assert_close(res[k].worst_numeric, res[k].worst_analytic, 1e-8, 0.0);
    }
    assert_values_restored(&p);
}

/* The correct gradient passes in random-direction mode: m directions per tensor
 * (2m calls each), compared == m, and the values come back unchanged. */
static void gradcheck_correct_gradient_passes_directions(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result res[2];
    const mha_gc_options opt = {.directions = 16, .seed = 7u};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_OK);
    assert_int_equal(p.calls, 2u * 2u * 16u);
    for (int k = 0; k < 2; k++) {
        print_message("%s: worst_ratio %.3g max_abs_err %.3g\n", t[k].name, res[k].worst_ratio,
                      res[k].max_abs_err);
        assert_int_equal(res[k].compared, 16u);
        assert_true(res[k].worst_ratio <= 1.0);
        assert_true(res[k].max_abs_err > 0.0 && res[k].max_abs_err < 1e-7);
        assert_true(res[k].worst_index < 16u);
    }
    assert_values_restored(&p);
}

/* In element mode a gradient with one element off by 1e-4 fails, for every
 * element of either tensor, worst_index names that element, the reported pair is
 * (wrong analytic, true numeric), and the other tensor still passes. */
static void gradcheck_perturbed_element_is_found(void **unused)
{
    (void)unused;
    for (int which = 0; which < 2; which++) {
        for (size_t k = 0; k < N; k++) {
            sine_problem p;
            sine_setup(&p);
            double *g = which == 0 ? p.gx : p.gw;
            const double truth = g[k];
            g[k] += 1e-4;
            mha_gc_tensor t[2];
            sine_tensors(&p, t);
            mha_gc_result res[2];
            assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, NULL, res), MHA_OK);
            const mha_gc_result *bad = &res[which], *good = &res[1 - which];
            assert_true(bad->worst_ratio > 1.0);
            assert_int_equal(bad->worst_index, k);
            assert_true(bad->worst_analytic == truth + 1e-4);
            assert_close(bad->worst_numeric, truth, 1e-8, 0.0);
            assert_close(bad->max_abs_err, 1e-4, 1e-8, 0.0);
            /* worst_ratio follows the documented formula */
            assert_close(bad->worst_ratio,
                         fabs(bad->worst_analytic - bad->worst_numeric) /
                             (1e-7 + 1e-6 * fabs(bad->worst_numeric)),
                         0.0, 1e-12);
            assert_true(good->worst_ratio <= 1.0);
            assert_values_restored(&p);
        }
    }
}

/* Random-direction mode flags wrong gradients: the (Σx)² term with a dropped
 * factor 2 in dL/dx, and one element of dL/dw off by 1e-3; the correct tensor
 * next to it still passes. */
static void gradcheck_directions_flag_wrong_gradient(void **unused)
{
    (void)unused;
    const mha_gc_options opt = {.directions = 8, .seed = 11u};
    mha_gc_result res[2];
    mha_gc_tensor t[2];

    sine_problem p;
    sine_setup(&p);
    double s = 0.0;
    for (size_t i = 0; i < N; i++)
        s += p.x[i];
    assert_true(fabs(s) > 0.1); /* premise: the dropped term is not ~0 */
    for (size_t i = 0; i < N; i++)
        p.gx[i] -= s; /* r·w·cos + Σx instead of + 2Σx */
    sine_tensors(&p, t);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_OK);
    print_message("dropped 2: x worst_ratio %.3g, w worst_ratio %.3g\n", res[0].worst_ratio,
                  res[1].worst_ratio);
    assert_true(res[0].worst_ratio > 1.0);
    assert_true(res[0].worst_index < 8u);
    assert_true(res[1].worst_ratio <= 1.0);
    assert_values_restored(&p);

    sine_setup(&p);
    p.gw[4] += 1e-3;
    sine_tensors(&p, t);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_OK);
    print_message("w[4] off by 1e-3: x worst_ratio %.3g, w worst_ratio %.3g\n",
                  res[0].worst_ratio, res[1].worst_ratio);
    assert_true(res[0].worst_ratio <= 1.0);
    assert_true(res[1].worst_ratio > 1.0);
    /* every direction sees the error ±1e-3 exactly once */
    assert_close(res[1].max_abs_err, 1e-3, 1e-7, 0.0);
    assert_values_restored(&p);
}

/* A NaN in the analytic gradient fails the tensor (worst_ratio is not <= 1) and
 * worst_index points at it, in both modes. */
static void gradcheck_nan_gradient_fails(void **unused)
{
    (void)unused;
    for (size_t m = 0; m <= 4; m += 4) {
        sine_problem p;
        sine_setup(&p);
        p.gx[2] = NAN;
        mha_gc_tensor t[2];
        sine_tensors(&p, t);
        mha_gc_result res[2];
        const mha_gc_options opt = {.directions = m, .seed = 3u};
        assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_OK);
        assert_false(res[0].worst_ratio <= 1.0);
        if (m == 0)
            assert_int_equal(res[0].worst_index, 2u);
        assert_true(res[1].worst_ratio <= 1.0);
        assert_values_restored(&p);
    }
}

/* The values come back bit-exact after a full check in both modes, on values where
 * (x + h) − h != x for some elements (so undoing the step arithmetically would not
 * restore them). */
static void gradcheck_values_restored_bit_exact(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    int inexact = 0;
    for (size_t i = 0; i < N; i++) {
        volatile double up = p.x[i] + 1e-5, back = up - 1e-5;
        volatile double upw = p.w[i] - 1e-5, backw = upw + 1e-5;
        inexact += back != p.x[i];
        inexact += backw != p.w[i];
    }
    print_message("%d of %d values do not survive ±h arithmetically\n", inexact, 2 * N);
    assert_true(inexact > 0); /* premise */
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result res[2];
    for (size_t m = 0; m <= 5; m += 5) {
        const mha_gc_options opt = {.directions = m, .seed = 5u};
        assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_OK);
        assert_values_restored(&p);
    }
}

/* When the callback fails, its return code comes back, no further calls are made,
 * the values (perturbed at that moment) are restored bit-exact, results of
 * unfinished tensors are untouched: element and direction mode, failing on each
 * of the calls 1..4 and on the 3rd call of the second tensor. */
static void gradcheck_callback_failure_restores_values(void **unused)
{
    (void)unused;
    const int codes[2] = {42, -77};
    for (size_t m = 0; m <= 3; m += 3) {
        size_t per_tensor = m == 0 ? 2u * N : 2u * m; /* calls per tensor */
        const size_t fails[] = {1, 2, 3, 4, per_tensor + 3};
        for (size_t f = 0; f < sizeof fails / sizeof fails[0]; f++) {
            sine_problem p;
            sine_setup(&p);
            p.fail_at = fails[f];
            p.fail_code = codes[f % 2];
            mha_gc_tensor t[2];
            sine_tensors(&p, t);
            mha_gc_result res[2];
            memset(res, 0xA5, sizeof res);
            mha_gc_result sentinel;
            memset(&sentinel, 0xA5, sizeof sentinel);
            const mha_gc_options opt = {.directions = m, .seed = 9u};

            assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), p.fail_code);
            assert_int_equal(p.calls, fails[f]);
            assert_true(p.perturbed_at_failure); /* premise: a restore was needed */
            assert_values_restored(&p);
            if (fails[f] > per_tensor) { /* failed in tensor 1: tensor 0 is done */
                assert_int_equal(res[0].compared, m == 0 ? N : m);
                assert_true(res[0].worst_ratio <= 1.0);
            } else {
                assert_memory_equal(&res[0], &sentinel, sizeof sentinel);
            }
            assert_memory_equal(&res[1], &sentinel, sizeof sentinel);
        }
    }
}

/* What the loss sees: in element mode call 2k+1 has element k at x_k + h and call
 * 2k+2 at x_k − h with everything else untouched; in direction mode every element
 * of the one tensor is at x_i ± h, the − call mirrors the + call, and the signs
 * are mixed. */
typedef struct probe {
    sine_problem *p;
    double h;
    size_t directions;
    int violations;
    int plus_signs, minus_signs;
    int last_sign[N]; /* the + call's signs, for the − call */
} probe;

static int probe_loss(void *ctx, double *loss)
{
    probe *q = ctx;
    sine_problem *p = q->p;
    size_t call = p->calls; /* 0-based index of this call */
    int rc = sine_loss(p, loss);
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
        sine_problem p;
        sine_setup(&p);
        probe q = {.p = &p, .h = 1e-5, .directions = m};
        mha_gc_tensor t[2];
        sine_tensors(&p, t);
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
        assert_values_restored(&p);
    }
}

/* NULL loss / tensors / results, a tensor without values or gradient, and negative
 * or non-finite step, atol or rtol give MHA_EINVAL before any loss call, with
 * values and results untouched. */
static void gradcheck_invalid_arguments(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result res[2], sentinel[2];
    memset(sentinel, 0xA5, sizeof sentinel);
    memcpy(res, sentinel, sizeof res);

    assert_int_equal(mha_gradcheck(NULL, &p, t, 2, NULL, res), MHA_EINVAL);
    assert_int_equal(mha_gradcheck(sine_loss, &p, NULL, 2, NULL, res), MHA_EINVAL);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, NULL, NULL), MHA_EINVAL);

    mha_gc_tensor bad[2];
    memcpy(bad, t, sizeof bad);
    bad[1].value = NULL;
    assert_int_equal(mha_gradcheck(sine_loss, &p, bad, 2, NULL, res), MHA_EINVAL);
    memcpy(bad, t, sizeof bad);
    bad[1].grad = NULL;
    assert_int_equal(mha_gradcheck(sine_loss, &p, bad, 2, NULL, res), MHA_EINVAL);

    const double bad_values[] = {-1e-5, -INFINITY, INFINITY, NAN};
    for (size_t b = 0; b < sizeof bad_values / sizeof bad_values[0]; b++) {
        for (int field = 0; field < 3; field++) {
            for (size_t m = 0; m <= 2; m += 2) {
                mha_gc_options opt = {.directions = m};
                if (field == 0)
                    opt.step = bad_values[b];
                else if (field == 1)
                    opt.atol = bad_values[b];
                else
                    opt.rtol = bad_values[b];
                assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &opt, res), MHA_EINVAL);
            }
        }
    }
    assert_int_equal(p.calls, 0u);
    assert_memory_equal(res, sentinel, sizeof res);
    assert_values_restored(&p);

    /* count 0 is a valid, empty check */
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 0, NULL, res), MHA_OK);
    assert_int_equal(p.calls, 0u);
    assert_memory_equal(res, sentinel, sizeof res);
}

/* opt == NULL, all-zero options and the documented defaults written out (h = 1e-5,
 * atol = 1e-7, rtol = 1e-6) give identical results; a different step, atol or rtol
 * does change them, so the options are really used. */
static void gradcheck_defaults_and_options(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    p.gx[1] += 1e-4; /* a failing element, so the tolerances show in worst_ratio */
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result r_null[2], r_zero[2], r_explicit[2], r_other[2];
    memset(r_null, 0, sizeof r_null);
    memset(r_zero, 0, sizeof r_zero);
    memset(r_explicit, 0, sizeof r_explicit);

    const mha_gc_options zero = {0};
    const mha_gc_options explicit_defaults = {.step = 1e-5, .atol = 1e-7, .rtol = 1e-6};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, NULL, r_null), MHA_OK);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &zero, r_zero), MHA_OK);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &explicit_defaults, r_explicit),
                     MHA_OK);
    for (int k = 0; k < 2; k++) {
        assert_true(r_null[k].worst_ratio == r_zero[k].worst_ratio);
        assert_true(r_null[k].worst_ratio == r_explicit[k].worst_ratio);
        assert_true(r_null[k].max_abs_err == r_explicit[k].max_abs_err);
        assert_true(r_null[k].max_rel_err == r_explicit[k].max_rel_err);
        assert_int_equal(r_null[k].worst_index, r_explicit[k].worst_index);
        assert_true(r_null[k].worst_numeric == r_explicit[k].worst_numeric);
    }

    const mha_gc_options step = {.step = 1e-3};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &step, r_other), MHA_OK);
    assert_true(r_other[1].max_abs_err != r_null[1].max_abs_err); /* other differences */

    /* a loose atol lets the 1e-4 error pass; worst_ratio scales as 1/(atol + rtol·|n|) */
    const mha_gc_options loose = {.atol = 1e-3};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &loose, r_other), MHA_OK);
    assert_true(r_null[0].worst_ratio > 1.0);
    assert_true(r_other[0].worst_ratio <= 1.0);
    const mha_gc_options loose_rel = {.rtol = 1.0};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &loose_rel, r_other), MHA_OK);
    assert_true(r_other[0].worst_ratio <= 1.0);
    assert_values_restored(&p);
}

/* Directions are a function of the seed: the same seed repeats the results
 * exactly, another seed gives other directions (other numeric values). */
static void gradcheck_directions_follow_seed(void **unused)
{
    (void)unused;
    sine_problem p;
    sine_setup(&p);
    mha_gc_tensor t[2];
    sine_tensors(&p, t);
    mha_gc_result a[2], b[2], c[2];
    const mha_gc_options s1 = {.directions = 6, .seed = 1234u};
    const mha_gc_options s2 = {.directions = 6, .seed = 1235u};
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &s1, a), MHA_OK);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &s1, b), MHA_OK);
    assert_int_equal(mha_gradcheck(sine_loss, &p, t, 2, &s2, c), MHA_OK);
    for (int k = 0; k < 2; k++) {
        assert_true(a[k].worst_ratio == b[k].worst_ratio);
        assert_int_equal(a[k].worst_index, b[k].worst_index);
        assert_true(a[k].worst_numeric == b[k].worst_numeric);
        assert_true(a[k].max_abs_err == b[k].max_abs_err);
    }
    assert_true(a[0].max_abs_err != c[0].max_abs_err || a[0].worst_numeric != c[0].worst_numeric);
    assert_values_restored(&p);
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
    sine_problem p;
    sine_setup(&p);
    p.gw[4] += 0.5;
    mha_gc_tensor ts[2];
    sine_tensors(&p, ts);
    mha_gc_result rs[2];
    assert_int_equal(mha_gradcheck(sine_loss, &p, ts, 2, NULL, rs), MHA_OK);
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

/* ---- float32: mha_gradcheck_f ----------------------------------------------------
 * The same sine problem with float tensors. The loss is what a float layer gives:
 * each term computed in float, summed in double. Defaults: h = 5e-3, atol 1e-3,
 * rtol 1e-2. */
typedef struct sine_problem_f {
    float x[N], w[N], r[N];
    float gx[N], gw[N]; /* analytic gradients, computed in double, rounded to float */
    float x0[N], w0[N];
    size_t calls;
    size_t fail_at; /* return fail_code on this call (1-based); 0 never */
    int fail_code;
    int perturbed_at_failure;
} sine_problem_f;

static int sine_loss_f(void *ctx, double *loss)
{
    sine_problem_f *p = ctx;
    p->calls++;
    if (p->calls == p->fail_at) {
        p->perturbed_at_failure =
            memcmp(p->x, p->x0, sizeof p->x) != 0 || memcmp(p->w, p->w0, sizeof p->w) != 0;
        return p->fail_code;
    }
    double l = 0.0;
    float s = 0.0f;
    for (size_t i = 0; i < N; i++) {
        l += (double)(p->r[i] * sinf(p->w[i] * p->x[i]));
        s += p->x[i];
    }
    *loss = l + (double)(s * s);
    return 0;
}

/* The correct gradient of the current x, w (into gx, gw), and x0, w0 = x, w. */
static void sine_gradient_f(sine_problem_f *p)
{
    double s = 0.0;
    for (size_t i = 0; i < N; i++)
        s += p->x[i];
    for (size_t i = 0; i < N; i++) {
        double c = cos((double)p->w[i] * p->x[i]);
        p->gx[i] = (float)(p->r[i] * p->w[i] * c + 2.0 * s);
        p->gw[i] = (float)(p->r[i] * p->x[i] * c);
    }
    memcpy(p->x0, p->x, sizeof p->x);
    memcpy(p->w0, p->w, sizeof p->w);
}

static void sine_setup_f(sine_problem_f *p)
{
    memset(p, 0, sizeof *p);
    fill_uniform_f(p->x, N, -2.0f, 2.0f, 101u);
    fill_uniform_f(p->w, N, 0.5f, 2.0f, 202u);
    fill_uniform_f(p->r, N, -1.0f, 1.0f, 303u);
    sine_gradient_f(p);
}

static void sine_tensors_f(sine_problem_f *p, mha_gc_tensor_f t[2])
{
    t[0] = (mha_gc_tensor_f){"x", p->x, p->gx, N};
    t[1] = (mha_gc_tensor_f){"w", p->w, p->gw, N};
}

static void assert_values_restored_f(const sine_problem_f *p)
{
    assert_memory_equal(p->x, p->x0, sizeof p->x);
    assert_memory_equal(p->w, p->w0, sizeof p->w);
}

/* With its defaults the float checker passes the correct float gradient in both
 * modes (2 calls per element or direction), with real but small differences, and
 * puts the values back. */
static void gradcheck_f32_correct_gradient_passes(void **unused)
{
    (void)unused;
    for (size_t m = 0; m <= 16; m += 16) {
        sine_problem_f p;
        sine_setup_f(&p);
        mha_gc_tensor_f t[2];
        sine_tensors_f(&p, t);
        mha_gc_result res[2];
        const mha_gc_options opt = {.directions = m, .seed = 7u};
        assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_OK);
        assert_int_equal(p.calls, 2u * 2u * (m == 0 ? N : m));
        for (int k = 0; k < 2; k++) {
            print_message("f32 m=%zu %s: worst_ratio %.3g max_abs_err %.3g max_rel_err %.3g\n",
                          m, t[k].name, res[k].worst_ratio, res[k].max_abs_err,
                          res[k].max_rel_err);
            assert_int_equal(res[k].compared, m == 0 ? N : m);
            assert_true(res[k].worst_ratio <= 1.0);
            assert_true(res[k].max_abs_err > 0.0 && res[k].max_abs_err < 1e-3);
        }
        assert_values_restored_f(&p);
    }
}

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

/* Wrong float gradients fail with the defaults. Element mode: each element of
 * either tensor with its sign flipped, and each one 10% off where 10% exceeds the
 * tolerance (|g| > 0.02: 17 of the 18; dL/dw_3 = 0.0040, and 10% of it is below
 * atol 1e-3), is found at its index while the other tensor passes. Direction
 * mode: one element's sign flipped, the dominant element 10% off (a small one's
 * error is diluted in vᵀ·g), and the whole gradient negated. */
static void gradcheck_f32_wrong_gradient_is_found(void **unused)
{
    (void)unused;
    mha_gc_tensor_f t[2];
    mha_gc_result res[2];
    int tested_10 = 0;
    for (int which = 0; which < 2; which++) {
        for (size_t k = 0; k < N; k++) {
            for (int flip = 0; flip < 2; flip++) {
                sine_problem_f p;
                sine_setup_f(&p);
                float *g = which == 0 ? p.gx : p.gw;
                assert_true(fabsf(g[k]) > 2e-3f); /* premise: a flip exceeds 1e-3 + 1e-2·|g| */
                if (!flip && fabsf(g[k]) <= 0.02f) { /* 10% of it is within the tolerance */
                    print_message("f32: 10%% of %s[%zu] = %.3g not resolved\n",
                                  which ? "dL/dw" : "dL/dx", k, (double)g[k]);
                    continue;
                }
                tested_10 += !flip;
                const float wrong = flip ? -g[k] : g[k] * 1.1f;
                g[k] = wrong;
                sine_tensors_f(&p, t);
                assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, NULL, res), MHA_OK);
                const mha_gc_result *bad = &res[which], *good = &res[1 - which];
                assert_true(bad->worst_ratio > 1.0);
                assert_int_equal(bad->worst_index, k);
                assert_true(bad->worst_analytic == (double)wrong);
                assert_true(good->worst_ratio <= 1.0);
                assert_values_restored_f(&p);
            }
        }
    }
    assert_int_equal(tested_10, 2 * N - 1);

    const mha_gc_options opt = {.directions = 8, .seed = 11u};
    sine_problem_f p;
    sine_setup_f(&p);
    p.gw[7] = -p.gw[7];
    assert_true(fabsf(p.gw[7]) > 0.2f); /* premise */
    sine_tensors_f(&p, t);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_OK);
    print_message("f32 directions, w[7] sign flipped: x %.3g, w %.3g\n", res[0].worst_ratio,
                  res[1].worst_ratio);
    assert_true(res[0].worst_ratio <= 1.0);
    assert_true(res[1].worst_ratio > 1.0);
    assert_values_restored_f(&p);

    /* 10% off on w[7]: error 0.071 against at most 1e-3 + 1e-2·Σ|dL/dw| */
    sine_setup_f(&p);
    double sum_abs = 0.0;
    for (size_t i = 0; i < N; i++)
        sum_abs += fabsf(p.gw[i]);
    assert_true(0.1 * fabsf(p.gw[7]) > 2.0 * (1e-3 + 1e-2 * sum_abs)); /* premise */
    p.gw[7] *= 1.1f;
    sine_tensors_f(&p, t);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_OK);
    print_message("f32 directions, w[7] 10%% off: x %.3g, w %.3g\n", res[0].worst_ratio,
                  res[1].worst_ratio);
    assert_true(res[0].worst_ratio <= 1.0);
    assert_true(res[1].worst_ratio > 1.0);
    assert_values_restored_f(&p);

    sine_setup_f(&p);
    for (size_t i = 0; i < N; i++)
        p.gx[i] = -p.gx[i];
    sine_tensors_f(&p, t);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_OK);
    print_message("f32 directions, dL/dx negated: x %.3g, w %.3g\n", res[0].worst_ratio,
                  res[1].worst_ratio);
    assert_true(res[0].worst_ratio > 1.0);
    assert_true(res[1].worst_ratio <= 1.0);
    assert_values_restored_f(&p);
}

/* Values that ±h does not survive arithmetically (fl(fl(x ± h) ∓ h) != x for −0.0f,
 * a subnormal, 3e-3f, 0.9991f) come back bit for bit: after full checks in both
 * modes and after the callback fails on calls 1..4 and on the 3rd call of the second
 * tensor (its code returned, no further calls, unfinished results untouched). */
static void sine_setup_f_special(sine_problem_f *p)
{
    sine_setup_f(p);
    p->x[0] = -0.0f;
    p->x[1] = 1e-40f; /* subnormal */
    p->x[2] = 3e-3f;
    p->w[N - 1] = 0.9991f;
    sine_gradient_f(p);
}

static void gradcheck_f32_values_restored_bit_exact(void **unused)
{
    (void)unused;
    sine_problem_f p;
    sine_setup_f_special(&p);
    int inexact = 0;
    for (size_t i = 0; i < 2 * N; i++) {
        const float v = i < N ? p.x[i] : p.w[i - N];
        for (int sign = -1; sign <= 1; sign += 2) {
            volatile float moved = (float)((double)v + sign * 5e-3); /* the default step */
            volatile float back = (float)((double)moved - sign * 5e-3);
            if (memcmp((const void *)&back, &v, sizeof v) != 0) {
                inexact++;
                break;
            }
        }
    }
    print_message("f32: %d of %d values do not survive ±h arithmetically\n", inexact, 2 * N);
    assert_true(inexact >= 4); /* premise: the four special values at least */
    mha_gc_tensor_f t[2];
    sine_tensors_f(&p, t);
    mha_gc_result res[2];
    for (size_t m = 0; m <= 5; m += 5) {
        const mha_gc_options opt = {.directions = m, .seed = 5u};
        assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_OK);
        assert_values_restored_f(&p);
    }

    for (size_t m = 0; m <= 3; m += 3) {
        size_t per_tensor = m == 0 ? 2u * N : 2u * m;
        const size_t fails[] = {1, 2, 3, 4, per_tensor + 3};
        for (size_t f = 0; f < sizeof fails / sizeof fails[0]; f++) {
            sine_setup_f_special(&p);
            p.fail_at = fails[f];
            p.fail_code = f % 2 ? -77 : 42;
            sine_tensors_f(&p, t);
            mha_gc_result sentinel;
            memset(&sentinel, 0xA5, sizeof sentinel);
            memset(res, 0xA5, sizeof res);
            const mha_gc_options opt = {.directions = m, .seed = 9u};
            assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), p.fail_code);
            assert_int_equal(p.calls, fails[f]);
            assert_true(p.perturbed_at_failure);
            assert_values_restored_f(&p);
            if (fails[f] > per_tensor)
                assert_int_equal(res[0].compared, m == 0 ? N : m);
            else
                assert_memory_equal(&res[0], &sentinel, sizeof sentinel);
            assert_memory_equal(&res[1], &sentinel, sizeof sentinel);
        }
    }
}

/* MHA_EINVAL before any loss call, values and results untouched: NULL loss,
 * tensors or results; a tensor without values or gradient; a negative or
 * non-finite step, atol or rtol; a value the step cannot move in float (1e7 with
 * h = 5e-3 — accepted with h = 1 —, +inf, NaN). */
static void gradcheck_f32_invalid_arguments(void **unused)
{
    (void)unused;
    sine_problem_f p;
    sine_setup_f(&p);
    mha_gc_tensor_f t[2];
    sine_tensors_f(&p, t);
    mha_gc_result res[2], sentinel[2];
    memset(sentinel, 0xA5, sizeof sentinel);
    memcpy(res, sentinel, sizeof res);

    assert_int_equal(mha_gradcheck_f(NULL, &p, t, 2, NULL, res), MHA_EINVAL);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, NULL, 2, NULL, res), MHA_EINVAL);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, NULL, NULL), MHA_EINVAL);
    mha_gc_tensor_f bad[2];
    memcpy(bad, t, sizeof bad);
    bad[1].value = NULL;
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, bad, 2, NULL, res), MHA_EINVAL);
    memcpy(bad, t, sizeof bad);
    bad[1].grad = NULL;
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, bad, 2, NULL, res), MHA_EINVAL);

    const double bad_values[] = {-1e-2, -INFINITY, INFINITY, NAN};
    for (size_t b = 0; b < sizeof bad_values / sizeof bad_values[0]; b++) {
        for (int field = 0; field < 3; field++) {
            for (size_t m = 0; m <= 2; m += 2) {
                mha_gc_options opt = {.directions = m};
                if (field == 0)
                    opt.step = bad_values[b];
                else if (field == 1)
                    opt.atol = bad_values[b];
                else
                    opt.rtol = bad_values[b];
                assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res),
                                 MHA_EINVAL);
            }
        }
    }

    const float unmovable[] = {1e7f, INFINITY, NAN};
    for (size_t u = 0; u < 3; u++) {
        for (size_t m = 0; m <= 2; m += 2) {
            sine_setup_f(&p);
            p.w[N - 1] = unmovable[u];
            memcpy(p.w0, p.w, sizeof p.w);
            sine_tensors_f(&p, t);
            const mha_gc_options opt = {.directions = m};
            assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &opt, res), MHA_EINVAL);
            assert_int_equal(p.calls, 0u);
            assert_values_restored_f(&p);
        }
    }
    sine_setup_f(&p);
    p.w[N - 1] = 1e7f;
    memcpy(p.w0, p.w, sizeof p.w);
    sine_tensors_f(&p, t);
    const mha_gc_options big_step = {.step = 1.0};
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &big_step, res), MHA_OK);
    assert_values_restored_f(&p);

    sine_setup_f(&p);
    sine_tensors_f(&p, t);
    memcpy(res, sentinel, sizeof res);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 0, NULL, res), MHA_OK);
    assert_int_equal(p.calls, 0u);
    assert_memory_equal(res, sentinel, sizeof res);
}

/* The float defaults: opt NULL, all-zero options and {5e-3, 1e-3, 1e-2} written out
 * give identical results; the float64 defaults written out give other ones. */
static void gradcheck_f32_defaults(void **unused)
{
    (void)unused;
    sine_problem_f p;
    sine_setup_f(&p);
    p.gx[1] *= 1.1f; /* a failing element, so the tolerances show in worst_ratio */
    mha_gc_tensor_f t[2];
    sine_tensors_f(&p, t);
    mha_gc_result r_null[2], r_zero[2], r_explicit[2], r_f64[2];
    const mha_gc_options zero = {0};
    const mha_gc_options explicit_defaults = {.step = 5e-3, .atol = 1e-3, .rtol = 1e-2};
    const mha_gc_options f64_defaults = {.step = 1e-5, .atol = 1e-7, .rtol = 1e-6};
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, NULL, r_null), MHA_OK);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &zero, r_zero), MHA_OK);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &explicit_defaults, r_explicit),
                     MHA_OK);
    assert_int_equal(mha_gradcheck_f(sine_loss_f, &p, t, 2, &f64_defaults, r_f64), MHA_OK);
    for (int k = 0; k < 2; k++) {
        assert_memory_equal(&r_null[k], &r_zero[k], sizeof r_null[k]);
        assert_memory_equal(&r_null[k], &r_explicit[k], sizeof r_null[k]);
        assert_true(r_f64[k].worst_ratio != r_null[k].worst_ratio);
    }
    print_message("f32 w with float64 defaults: worst_ratio %.3g (fails: too tight for float)\n",
                  r_f64[1].worst_ratio);
    assert_values_restored_f(&p);
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
        cmocka_unit_test(gradcheck_perturbation_pattern),
        cmocka_unit_test(gradcheck_invalid_arguments),
        cmocka_unit_test(gradcheck_defaults_and_options),
        cmocka_unit_test(gradcheck_directions_follow_seed),
        cmocka_unit_test(gradcheck_direction_bits),
        cmocka_unit_test(gradcheck_format_exact_zero),
        cmocka_unit_test(gradcheck_f32_correct_gradient_passes),
        cmocka_unit_test(gradcheck_f32_layer),
        cmocka_unit_test(gradcheck_f32_wrong_gradient_is_found),
        cmocka_unit_test(gradcheck_f32_values_restored_bit_exact),
        cmocka_unit_test(gradcheck_f32_invalid_arguments),
        cmocka_unit_test(gradcheck_f32_defaults),
        cmocka_unit_test(gradcheck_f32_realized_step),
        cmocka_unit_test(gradcheck_f32_directions_match_f64),
    };
    return cmocka_run_group_tests_name("gradcheck", tests, NULL, NULL);
}
