/*
 * Tests of src/optim_core.c (include/mha_optim.h): SGD (momentum, coupled weight decay),
 * Adam (coupled weight decay) and AdamW (decoupled), global gradient-norm clipping,
 * the warm-up + cosine learning-rate schedule, validation and the checkpoint accessors.
 *
 * Every test that holds for both precisions is written once, in test_optim_run.inc,
 * and included twice: float (tests optim_<name>, mha_optim_*) and double (tests
 * optim_f64_<name>, mhad_optim_*, the same source in src/optim_core.c). Each is
 * held to the double reference at its own precision's accuracy and to torch's float32
 * results at float accuracy.
 *
 * Every optimizer is checked two ways on the same 3-element problem (k_p0, k_grads,
 * learning rate base·k_lr_mult[k] at step k):
 *   - against ref_step(), the torch algorithm written out in double in this file
 *     (torch's own form: first momentum step clones the gradient, Adam's first moment by
 *     lerp), independent of the library's code path;
 *   - against literal float32 results of torch.optim 1.13 (SGD, Adam, AdamW) run with
 *     /usr/bin/python3 on the same float32 inputs, recorded below with the script.
 *
 * All tests share the prefix optim_ (cmocka_set_test_filter("optim_*")).
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>
#include <string.h>

#include "mha.h"

enum { N = 3, STEPS = 3 };

static const float k_p0[N] = {0.5f, -1.25f, 2.0f};
static const float k_grads[STEPS][N] = {
    {0.1f, -0.3f, 0.25f},
    {-0.2f, 0.05f, 0.4f},
    {0.3f, 0.1f, -0.15f},
};
static const double k_lr_mult[STEPS] = {1.0, 2.0, 0.5}; /* lr of step k = base·mult[k] */

/* ---- the double reference: torch's algorithm, written independently ----------- */
typedef struct ref_state {
    double p[N], m[N], v[N];
} ref_state;

/* One torch step with step number t (1-based). */
static void ref_step(ref_state *s, const mha_optim_config *c, double lr, int t,
                     const float *grad)
{
    for (int i = 0; i < N; i++) {
        double g = (double)grad[i];
        if (c->kind == MHA_OPTIM_SGD) {
            if (c->weight_decay != 0.0)
                g = g + c->weight_decay * s->p[i];
            if (c->momentum != 0.0) {
                if (t == 1)
                    s->m[i] = g; /* torch: buf = torch.clone(d_p) */
                else
                    s->m[i] = s->m[i] * c->momentum + g; /* buf.mul_(μ).add_(d_p) */
                g = s->m[i];
            }
            s->p[i] -= lr * g;
        } else {
            if (c->kind == MHA_OPTIM_ADAMW)
                s->p[i] *= 1.0 - lr * c->weight_decay;
            else if (c->weight_decay != 0.0)
                g += c->weight_decay * s->p[i];
            s->m[i] += (g - s->m[i]) * (1.0 - c->beta1); /* exp_avg.lerp_(g, 1 − β1) */
            s->v[i] = s->v[i] * c->beta2 + (1.0 - c->beta2) * g * g;
            double bc1 = 1.0 - pow(c->beta1, t);
            double bc2 = 1.0 - pow(c->beta2, t);
            double denom = sqrt(s->v[i]) / sqrt(bc2) + c->eps;
            s->p[i] -= (lr / bc1) * s->m[i] / denom;
        }
    }
}

/* ---- torch literals ------------------------------------------------------------- */
/* Obtained with /usr/bin/python3, torch 1.13, float32 tensors:
 *   p = torch.tensor([0.5, -1.25, 2.0], requires_grad=True); opt = torch.optim.X([p], ...)
 *   for k in range(3): opt.param_groups[0]['lr'] = base * [1, 2, 0.5][k]
 *                      p.grad = torch.tensor(k_grads[k]); opt.step(); print(p)
 *   then print(opt.state[p]['momentum_buffer' | 'exp_avg' | 'exp_avg_sq'])
 * printed with "%.9g". The step-1 Adam values were also checked by hand: with bias
 * correction the first update is lr·g/(|g| + eps) ≈ lr·sign(g) = ±0.01. */
typedef struct optim_case {
    mha_optim_config cfg;
    double base_lr;
    float torch_p[STEPS][N]; /* params after steps 1, 2, 3 */
    float torch_m[N];        /* momentum_buffer or exp_avg after step 3 (unused: plain SGD) */
    float torch_v[N];        /* exp_avg_sq after step 3 (Adam/AdamW)  */
} optim_case;

static const optim_case k_sgd = {
    {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0}, 0.1,
    {{0.49000001f, -1.22000003f, 1.97500002f},
     {0.530000031f, -1.23000002f, 1.89499998f},
     {0.515000045f, -1.23500001f, 1.90250003f}},
    {0},
    {0},
};
static const optim_case k_sgd_mom_wd = { /* torch.optim.SGD(momentum=0.9, weight_decay=0.01) */
    {MHA_OPTIM_SGD, 0.9, 0.01, 0.0, 0.0, 0.0}, 0.1,
    {{0.489499986f, -1.21875f, 1.97300005f},
     {0.509620965f, -1.17006254f, 1.8404541f},
     {0.49889338f, -1.16352284f, 1.81721103f}},
    {0.214551717f, -0.130794361f, 0.464861482f},
    {0},
};
static const optim_case k_adam = { /* torch.optim.Adam(betas=(0.9, 0.999), eps=1e-8) */
    {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8}, 0.01,
    {{0.49000001f, -1.24000001f, 1.99000001f},
     {0.497322083f, -1.22922921f, 1.97027767f},
     {0.495605886f, -1.22825062f, 1.96761429f}},
    {0.0201000012f, -0.00979999918f, 0.0412499979f},
    {0.000139940021f, 0.000102317601f, 0.000244715076f},
};
static const optim_case k_adam_wd = { /* torch.optim.Adam(..., weight_decay=0.1) */
    {MHA_OPTIM_ADAM, 0.0, 0.1, 0.9, 0.999, 1e-8}, 0.01,
    {{0.49000001f, -1.24000001f, 1.99000001f},
     {0.491119087f, -1.22424352f, 1.97005212f},
     {0.488503844f, -1.22103667f, 1.96600461f}},
    {0.0334711932f, -0.0433274321f, 0.0950605199f},
    {0.000167112361f, 0.000186237346f, 0.000562747009f},
};
static const optim_case k_adamw = { /* torch.optim.AdamW(..., weight_decay=0.1) */
    {MHA_OPTIM_ADAMW, 0.0, 0.1, 0.9, 0.999, 1e-8}, 0.01,
    {{0.489500016f, -1.23874998f, 1.98800004f},
     {0.495843112f, -1.22550166f, 1.96430171f},
     {0.49387899f, -1.22391033f, 1.96065617f}},
    {0.0201000012f, -0.00979999918f, 0.0412499979f},
    {0.000139940021f, 0.000102317601f, 0.000244715076f},
};

/* Tolerances: float32 results after a few steps of O(1) values are a few ulp (ulp(2) =
 * 2.4e-7) from the double reference and from torch's float32 arithmetic; the smallest
 * update in these cases is ~1e-3, so 1e-6 separates a correct step from a wrong one. */
#define P_ATOL 1e-6
#define M_ATOL 1e-7 /* moments are O(0.1) for SGD momentum, O(1e-2)/O(1e-4) for Adam */
#define M_RTOL 1e-5

/* ---- clipping: torch literals ---------------------------------------------------- */
/* torch literals, /usr/bin/python3 with torch 1.13:
 *   a.grad = [3, 0], b.grad = [0, -4]; clip_grad_norm_([a, b], 1.0) returns 5 and leaves
 *   a.grad = [0.599999905, 0], b.grad = [0, -0.799999833]  (scale 1/(5 + 1e-6))
 *   a.grad = [0.6, 0], b.grad = [0, 0.8]; clip_grad_norm_([a, b], 1.0) returns 1 and leaves
 *   a.grad = [0.599999428, 0], b.grad = [0, 0.799999237]  (scale 1/(1 + 1e-6): norm ==
 *   max_norm is still clipped, torch's clamp(coef, max=1));
 *   a.grad = [3, 0], b.grad = [0, -4]; clip_grad_norm_([a, b], 5.0) returns 5 and leaves
 *   a.grad = [2.99999928, 0], b.grad = [0, -3.99999905]  (norm exactly max_norm). */

/* torch rounds the norm and the coefficient to float32, we keep them in double: the
 * results may differ by one float ulp (6e-8 near 0.6 .. 0.8, seen at 0.8 on the boundary
 * case), far below the 8e-7 change the boundary clip itself makes. */
#define CLIP_ATOL 1e-7

/* The double path rounds nowhere to float, so it is held to the double reference
 * ref_step() at a few ulp — float rounding would miss by ~1e-8: parameters (O(1),
 * ulp(2) = 4.4e-16) to D_ATOL, moments to D_RTOL relative (Adam's m is computed as
 * β1·m + (1−β1)·g here and by lerp in ref_step: the same value, other roundings). */
#define D_ATOL 2e-15
#define D_RTOL 1e-14

/* ==== the typed tests, float then double ================================================ */
/* Tolerances of one precision (see test_optim_run.inc for what each bounds). */
typedef struct precision_tol {
    double p_atol, m_atol, v_atol, m_rtol, upd_atol, clip_atol, clip_rtol;
} precision_tol;
static const precision_tol tol_f32 = {P_ATOL, M_ATOL, 1e-10, M_RTOL, 1e-7,
                                      3e-8 /* half a float ulp near 0.6 .. 0.8 */, 0.0};
static const precision_tol tol_f64 = {D_ATOL, 0.0, 0.0, D_RTOL, D_ATOL, 0.0, 1e-15};
#define FILL(x, n, lo, hi, seed) \
    _Generic((x), float *: fill_uniform_f, double *: fill_uniform)(x, n, lo, hi, seed)

#define REAL float
#define MHA_X(n) mha_##n
#define SFX(n) n##_f32
#define TEST(n) optim_##n
#include "test_optim_run.inc"

#define REAL double
#define MHA_X(n) mhad_##n
#define SFX(n) n##_f64
#define TEST(n) optim_f64_##n
#include "test_optim_run.inc"

/* ==== float only ======================================================================== */
/* Momentum, coupled and decoupled decay change the result exactly as they should:
 * momentum adds −lr₂·μ·g₁ at step 2; Adam and AdamW agree bit for bit at wd = 0 and
 * differ at wd > 0; coupled wd on Adam is not a multiplicative decay. */
static void optim_variants_differ_as_they_should(void **state)
{
    (void)state;
    const double lr = 0.1, mu = 0.9;
    mha_optim_config plain = {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0};
    mha_optim_config mom = {MHA_OPTIM_SGD, mu, 0.0, 0.0, 0.0, 0.0};
    float a[N], b[N];
    run_steps_f32(&plain, lr, 1, a);
    run_steps_f32(&mom, lr, 1, b);
    assert_memory_equal(a, b, sizeof a); /* step 1: buffer = g, same update */
    run_steps_f32(&plain, lr, 2, a);
    run_steps_f32(&mom, lr, 2, b);
    for (int i = 0; i < N; i++) /* step 2 lr = 2·lr: extra −2lr·μ·g₁ */
        assert_close(b[i] - a[i], -(2.0 * lr) * mu * (double)k_grads[0][i], 1e-6, 0.0);

    mha_optim_config adam = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8};
    mha_optim_config adamw = adam;
    adamw.kind = MHA_OPTIM_ADAMW;
    run_steps_f32(&adam, 0.01, STEPS, a);
    run_steps_f32(&adamw, 0.01, STEPS, b);
    assert_memory_equal(a, b, sizeof a); /* wd = 0: the same optimizer */

    /* With a zero gradient only the decay acts:
     *   AdamW: p ← p·(1 − lr·wd) exactly; m, v stay 0.
     *   Adam:  g = wd·p, first normalised step ≈ lr·sign(p) (bias-corrected).
     *   SGD:   p ← p − lr·wd·p. */
    const double wd = 0.1, alr = 0.01;
    float p_w[N], p_a[N], p_s[N], zero[N] = {0.0f, 0.0f, 0.0f};
    memcpy(p_w, k_p0, sizeof p_w);
    memcpy(p_a, k_p0, sizeof p_a);
    memcpy(p_s, k_p0, sizeof p_s);
    adam.weight_decay = wd;
    adamw.weight_decay = wd;
    mha_optim_config sgd_wd = {MHA_OPTIM_SGD, 0.0, wd, 0.0, 0.0, 0.0};
    mha_optimizer *ow = NULL, *oa = NULL, *os = NULL;
    assert_int_equal(mha_optim_create(&ow, &adamw), MHA_OK);
    assert_int_equal(mha_optim_create(&oa, &adam), MHA_OK);
    assert_int_equal(mha_optim_create(&os, &sgd_wd), MHA_OK);
    assert_int_equal(mha_optim_add(ow, "w", p_w, zero, N), MHA_OK);
    assert_int_equal(mha_optim_add(oa, "w", p_a, zero, N), MHA_OK);
    assert_int_equal(mha_optim_add(os, "w", p_s, zero, N), MHA_OK);
    assert_int_equal(mha_optim_step(ow, alr), MHA_OK);
    assert_int_equal(mha_optim_step(oa, alr), MHA_OK);
    assert_int_equal(mha_optim_step(os, alr), MHA_OK);
    for (int i = 0; i < N; i++) {
        double p0 = (double)k_p0[i];
        assert_close(p_w[i], p0 * (1.0 - alr * wd), 1e-7, 0.0);
        assert_close(p_a[i], p0 - alr * (p0 > 0 ? 1.0 : -1.0), 1e-6, 0.0);
        assert_close(p_s[i], p0 - alr * wd * p0, 1e-7, 0.0);
        assert_true(fabs((double)p_w[i] - (double)p_a[i]) > 1e-3);
    }
    mha_optim_destroy(ow);
    mha_optim_destroy(oa);
    mha_optim_destroy(os);
}

/* Bias correction on step 1: Adam's first update is lr·g/(|g| + eps) for every g
 * whatever its magnitude (uncorrected it would be lr·0.1g/(√0.001·|g|) ≈ 3.16·lr), and
 * the stored moments are the UNcorrected (1−β1)·g and (1−β2)·g². */
static void optim_adam_bias_correction_step1(void **state)
{
    (void)state;
    enum { M = 8 };
    float p[M], g[M];
    double gd[M];
    fill_uniform(gd, M, -1.0, 1.0, 7);
    for (int i = 0; i < M; i++) {
        g[i] = (float)(gd[i] * pow(10.0, i - 4)); /* magnitudes 1e-4 .. 1e3 */
        p[i] = 1.0f;
    }
    const double lr = 0.001, eps = 1e-8;
    mha_optim_config cfg = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, eps};
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "w", p, g, M), MHA_OK);
    assert_int_equal(mha_optim_step(o, lr), MHA_OK);
    float *m = NULL, *v = NULL;
    assert_int_equal(mha_optim_group(o, 0, NULL, NULL, &m, &v), MHA_OK);
    for (int i = 0; i < M; i++) {
        double gi = (double)g[i];
        assert_close(1.0 - (double)p[i], lr * gi / (fabs(gi) + eps), 2e-7, 0.0);
        assert_close(m[i], 0.1 * gi, 0.0, 1e-6);
        assert_close(v[i], 0.001 * gi * gi, 0.0, 1e-6);
    }
    mha_optim_destroy(o);
}

/* set_step(100) makes the next step use t = 101 in the bias correction, and get_step
 * reports the count; t == UINT64_MAX refuses to step and changes nothing. */
/* Defaults are torch's. */
static void optim_default_config_is_torch(void **state)
{
    (void)state;
    mha_optim_config c;
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_ADAMW, &c), MHA_OK);
    assert_int_equal(c.kind, MHA_OPTIM_ADAMW);
    assert_true(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.01);
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_ADAM, &c), MHA_OK);
    assert_true(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.0);
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_SGD, &c), MHA_OK);
    assert_true(c.momentum == 0.0 && c.weight_decay == 0.0);
}

/* ---- learning-rate schedule ------------------------------------------------------- */
static double lr_of(const mha_lr_schedule *s, uint64_t step)
{
    double lr = -1.0;
    assert_int_equal(mha_lr_at(s, step, &lr), MHA_OK);
    return lr;
}

/* Warm-up: base·(k+1)/W, reaching base at W−1; cosine: base at W, the mean of base and
 * min halfway, the cos(π/4) point at a quarter, min at T−1 and after; non-increasing
 * after W. */
static void optim_lr_schedule_warmup_and_cosine(void **state)
{
    (void)state;
    const double base = 3e-4, lo = 3e-5;
    const mha_lr_schedule s = {base, lo, 10, 111}; /* cosine over steps 10..110 (100 gaps) */
    assert_close(lr_of(&s, 0), base / 10.0, 0.0, 1e-15);
    assert_close(lr_of(&s, 4), base * 5.0 / 10.0, 0.0, 1e-15);
    assert_close(lr_of(&s, 9), base, 0.0, 1e-15);
    assert_close(lr_of(&s, 10), base, 0.0, 1e-15);
    assert_close(lr_of(&s, 35), lo + (base - lo) * (1.0 + sqrt(0.5)) / 2.0, 0.0, 1e-14);
    assert_close(lr_of(&s, 60), (base + lo) / 2.0, 0.0, 1e-14);
    /* literal, q = 0.9: 3e-5 + 2.7e-4·(1 + cos(0.9π))/2 with cos(0.9π) = −0.9510565163,
     * = 3.66073703e-5 (computed with /usr/bin/python3 math.cos) */
    assert_close(lr_of(&s, 100), 3.66073703e-5, 1e-13, 0.0);
    assert_close(lr_of(&s, 110), lo, 0.0, 1e-15);
    assert_close(lr_of(&s, 111), lo, 0.0, 1e-15);
    assert_close(lr_of(&s, UINT64_MAX), lo, 0.0, 1e-15);
    double prev = lr_of(&s, 10);
    for (uint64_t k = 11; k <= 115; k++) {
        double cur = lr_of(&s, k);
        assert_true(cur <= prev);
        assert_true(cur >= lo);
        prev = cur;
    }
    for (uint64_t k = 1; k < 10; k++)
        assert_true(lr_of(&s, k) > lr_of(&s, k - 1));

    /* no warm-up: base at step 0 */
    const mha_lr_schedule s0 = {1.0, 0.0, 0, 5};
    assert_close(lr_of(&s0, 0), 1.0, 0.0, 1e-15);
    assert_close(lr_of(&s0, 2), 0.5, 1e-15, 0.0); /* q = 1/2 */
    assert_close(lr_of(&s0, 1), (1.0 + sqrt(0.5)) / 2.0, 0.0, 1e-15);
    assert_close(lr_of(&s0, 4), 0.0, 0.0, 0.0);
    /* W = T − 1: warm-up to base at T − 2, then min at the last step */
    const mha_lr_schedule s1 = {2.0, 0.5, 3, 4};
    assert_close(lr_of(&s1, 2), 2.0, 0.0, 1e-15);
    assert_close(lr_of(&s1, 3), 0.5, 0.0, 1e-15);
    /* min = base: warm-up then constant */
    const mha_lr_schedule s2 = {0.1, 0.1, 2, 10};
    assert_close(lr_of(&s2, 0), 0.05, 0.0, 1e-15);
    for (uint64_t k = 1; k < 12; k++)
        assert_close(lr_of(&s2, k), 0.1, 0.0, 1e-15);
}

/* Invalid schedules: MHA_EINVAL and *lr untouched. */
static void optim_lr_schedule_invalid(void **state)
{
    (void)state;
    const mha_lr_schedule bad[] = {
        {NAN, 0.0, 0, 10},  {1.0, NAN, 0, 10},      {-1.0, 0.0, 0, 10}, {1.0, -0.1, 0, 10},
        {1.0, 2.0, 0, 10},  {INFINITY, 0.0, 0, 10}, {1.0, 0.0, 0, 0},   {1.0, 0.0, 10, 10},
        {1.0, 0.0, 11, 10},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        double lr = 42.0;
        assert_int_equal(mha_lr_at(&bad[k], 0, &lr), MHA_EINVAL);
        assert_true(lr == 42.0);
    }
    double lr = 42.0;
    assert_int_equal(mha_lr_at(NULL, 0, &lr), MHA_EINVAL);
    assert_true(lr == 42.0);
    const mha_lr_schedule ok = {1.0, 0.0, 0, 1};
    assert_int_equal(mha_lr_at(&ok, 0, NULL), MHA_EINVAL);
    assert_int_equal(mha_lr_at(&ok, 0, &lr), MHA_OK); /* T = 1, W = 0: the last step */
    assert_true(lr == 0.0);
}

/* ==== float64 only ====================================================================== */

/* The double optimizer keeps what the float one rounds away: an SGD update of 2^-40
 * on p = 1 moves a double parameter (by exactly 2^-40) and leaves a float one at 1. */
static void optim_f64_does_not_round_to_float(void **state)
{
    (void)state;
    const mha_optim_config sgd = {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0};
    double pd = 1.0, gd = 0x1p-40;
    float pf = 1.0f, gf = 0x1p-40f;
    mhad_optimizer *od = NULL;
    mha_optimizer *of = NULL;
    assert_int_equal(mhad_optim_create(&od, &sgd), MHA_OK);
    assert_int_equal(mha_optim_create(&of, &sgd), MHA_OK);
    assert_int_equal(mhad_optim_add(od, "w", &pd, &gd, 1), MHA_OK);
    assert_int_equal(mha_optim_add(of, "w", &pf, &gf, 1), MHA_OK);
    assert_int_equal(mhad_optim_step(od, 1.0), MHA_OK);
    assert_int_equal(mha_optim_step(of, 1.0), MHA_OK);
    assert_true(pd == 1.0 - 0x1p-40);
    assert_true(pf == 1.0f);
    mhad_optim_destroy(od);
    mha_optim_destroy(of);
}


/* Clipping beyond float's range: 3e100 and −4e100 have the norm 5e100 and are scaled
 * to 0.6, −0.8; below max_norm, max_norm 0 and ∞ leave them bit for bit; Σg²
 * overflowing double (|g| ~ 1e200, finite) is refused with MHA_ENONFINITE and nothing
 * written, as the header says. */
static void optim_f64_clip_beyond_float_range(void **state)
{
    (void)state;
    double pa[2] = {0}, pb[2] = {0}, ga[2] = {3e100, 0.0}, gb[2] = {0.0, -4e100};
    const mha_optim_config cfg = {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0};
    mhad_optimizer *o = NULL;
    assert_int_equal(mhad_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "a", pa, ga, 2), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "b", pb, gb, 2), MHA_OK);
    double norm = -1.0;
    assert_int_equal(mhad_optim_clip_grad_norm(o, 1.0, &norm), MHA_OK);
    assert_close(norm, 5e100, 0.0, 1e-15);
    assert_close(ga[0], 0.6, 0.0, 1e-15);
    assert_close(gb[1], -0.8, 0.0, 1e-15);
    /* below max_norm, max_norm 0 and ∞: bit for bit untouched */
    const double a0 = ga[0], b1 = gb[1];
    const double max_norms[3] = {1.5, 0.0, INFINITY};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(mhad_optim_clip_grad_norm(o, max_norms[k], &norm), MHA_OK);
        assert_close(norm, 1.0, 0.0, 1e-15);
        assert_true(ga[0] == a0 && gb[1] == b1 && ga[1] == 0.0 && gb[0] == 0.0);
    }
    /* Σg² = 2.5e400 overflows double: refused, nothing written */
    ga[0] = 3e200;
    gb[1] = -4e200;
    norm = 42.0;
    assert_int_equal(mhad_optim_clip_grad_norm(o, 1.0, &norm), MHA_ENONFINITE);
    assert_true(norm == 42.0 && ga[0] == 3e200 && gb[1] == -4e200);
    mhad_optim_destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(optim_sgd_plain_matches_formula_and_torch),
        cmocka_unit_test(optim_sgd_momentum_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_adam_matches_formula_and_torch),
        cmocka_unit_test(optim_adam_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_adamw_matches_formula_and_torch),
        cmocka_unit_test(optim_group_weight_decay_is_per_group),
        cmocka_unit_test(optim_thread_count_independent),
        cmocka_unit_test(optim_segments_match_groups),
        cmocka_unit_test(optim_step_count_set_get),
        cmocka_unit_test(optim_checkpoint_resume_is_bitwise),
        cmocka_unit_test(optim_group_access),
        cmocka_unit_test(optim_clip_scales_to_max_norm),
        cmocka_unit_test(optim_clip_leaves_small_gradients_alone),
        cmocka_unit_test(optim_nonfinite_gradient_refused),
        cmocka_unit_test(optim_invalid_arguments_change_nothing),
        cmocka_unit_test(optim_variants_differ_as_they_should),
        cmocka_unit_test(optim_adam_bias_correction_step1),
        cmocka_unit_test(optim_default_config_is_torch),
        cmocka_unit_test(optim_lr_schedule_warmup_and_cosine),
        cmocka_unit_test(optim_lr_schedule_invalid),
        cmocka_unit_test(optim_f64_sgd_plain_matches_formula_and_torch),
        cmocka_unit_test(optim_f64_sgd_momentum_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_f64_adam_matches_formula_and_torch),
        cmocka_unit_test(optim_f64_adam_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_f64_adamw_matches_formula_and_torch),
        cmocka_unit_test(optim_f64_group_weight_decay_is_per_group),
        cmocka_unit_test(optim_f64_thread_count_independent),
        cmocka_unit_test(optim_f64_segments_match_groups),
        cmocka_unit_test(optim_f64_step_count_set_get),
        cmocka_unit_test(optim_f64_checkpoint_resume_is_bitwise),
        cmocka_unit_test(optim_f64_group_access),
        cmocka_unit_test(optim_f64_clip_scales_to_max_norm),
        cmocka_unit_test(optim_f64_clip_leaves_small_gradients_alone),
        cmocka_unit_test(optim_f64_nonfinite_gradient_refused),
        cmocka_unit_test(optim_f64_invalid_arguments_change_nothing),
        cmocka_unit_test(optim_f64_does_not_round_to_float),
        cmocka_unit_test(optim_f64_clip_beyond_float_range),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
