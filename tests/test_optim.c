/*
 * Tests of src/optim_core.inc (include/mha_optim.h): SGD (momentum, coupled weight decay),
 * Adam (coupled weight decay) and AdamW (decoupled), global gradient-norm clipping,
 * the warm-up + cosine learning-rate schedule, validation and the checkpoint accessors.
 *
 * The float64 optimizer (mhad_optim_*, the same source) is tested by the optim_f64_ tests
 * at the end, against the same reference at double accuracy.
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

static void run_case(const optim_case *c)
{
    float p[N], g[N];
    memcpy(p, k_p0, sizeof p);
    ref_state ref = {{0}, {0}, {0}};
    for (int i = 0; i < N; i++)
        ref.p[i] = (double)k_p0[i];

    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &c->cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "w", p, g, N), MHA_OK);
    for (int k = 0; k < STEPS; k++) {
        double lr = c->base_lr * k_lr_mult[k];
        memcpy(g, k_grads[k], sizeof g);
        assert_int_equal(mha_optim_step(o, lr), MHA_OK);
        ref_step(&ref, &c->cfg, lr, k + 1, k_grads[k]);
        for (int i = 0; i < N; i++) {
            assert_close(p[i], ref.p[i], P_ATOL, 0.0);
            assert_close(p[i], c->torch_p[k][i], P_ATOL, 0.0);
        }
        /* the step reads the gradients and leaves them alone */
        assert_memory_equal(g, k_grads[k], sizeof g);
    }
    uint64_t t = 0;
    assert_int_equal(mha_optim_get_step(o, &t), MHA_OK);
    assert_int_equal(t, STEPS);

    float *m = NULL, *v = NULL;
    assert_int_equal(mha_optim_group(o, 0, NULL, NULL, &m, &v), MHA_OK);
    int has_m = c->cfg.kind != MHA_OPTIM_SGD || c->cfg.momentum != 0.0;
    int has_v = c->cfg.kind != MHA_OPTIM_SGD;
    assert_true((m != NULL) == has_m);
    assert_true((v != NULL) == has_v);
    for (int i = 0; i < N; i++) {
        if (has_m) {
            assert_close(m[i], ref.m[i], M_ATOL, M_RTOL);
            assert_close(m[i], c->torch_m[i], M_ATOL, M_RTOL);
        }
        if (has_v) {
            assert_close(v[i], ref.v[i], 1e-10, M_RTOL);
            assert_close(v[i], c->torch_v[i], 1e-10, M_RTOL);
        }
    }
    mha_optim_destroy(o);
}

/* Plain SGD: p ← p − lr·g, three steps with changing lr, vs formula and torch. */
static void optim_sgd_plain_matches_formula_and_torch(void **state)
{
    (void)state;
    run_case(&k_sgd);
}

/* SGD with momentum 0.9 and coupled weight decay 0.01, vs formula and torch. */
static void optim_sgd_momentum_weight_decay_matches_formula_and_torch(void **state)
{
    (void)state;
    run_case(&k_sgd_mom_wd);
}

/* Adam with bias correction, vs formula and torch (params, exp_avg, exp_avg_sq). */
static void optim_adam_matches_formula_and_torch(void **state)
{
    (void)state;
    run_case(&k_adam);
}

/* Adam with coupled L2 weight decay (g += wd·p), vs formula and torch. */
static void optim_adam_weight_decay_matches_formula_and_torch(void **state)
{
    (void)state;
    run_case(&k_adam_wd);
}

/* AdamW with decoupled decay (p ← p·(1 − lr·wd) first), vs formula and torch. */
static void optim_adamw_matches_formula_and_torch(void **state)
{
    (void)state;
    run_case(&k_adamw);
}

/* Run `steps` steps of cfg on the test problem (grads k_grads, lr base·mult) into p. */
static void run_steps(const mha_optim_config *cfg, double base, int steps, float p[N])
{
    float g[N];
    memcpy(p, k_p0, N * sizeof(float));
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "w", p, g, N), MHA_OK);
    for (int k = 0; k < steps; k++) {
        memcpy(g, k_grads[k], sizeof g);
        assert_int_equal(mha_optim_step(o, base * k_lr_mult[k]), MHA_OK);
    }
    mha_optim_destroy(o);
}

/* Per-group weight decay (mha_optim_add_decay) is torch's per-param-group weight_decay:
 * in one AdamW optimizer, a group with wd 0 and a group with wd 0.1 end bit-equal to two
 * optimizers configured with 0 and 0.1, and the two groups differ from each other. */
static void optim_group_weight_decay_is_per_group(void **state)
{
    (void)state;
    mha_optim_config cfg;
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_ADAMW, &cfg), MHA_OK);
    float ref0[N], ref1[N];
    cfg.weight_decay = 0.0;
    run_steps(&cfg, 0.05, STEPS, ref0);
    cfg.weight_decay = 0.1;
    run_steps(&cfg, 0.05, STEPS, ref1);

    cfg.weight_decay = 0.5; /* the config's value must not be used by either group */
    float a[N], b[N], ga[N], gb[N];
    memcpy(a, k_p0, sizeof a);
    memcpy(b, k_p0, sizeof b);
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add_decay(o, "no_decay", a, ga, N, 0.0), MHA_OK);
    assert_int_equal(mha_optim_add_decay(o, "decay", b, gb, N, 0.1), MHA_OK);
    assert_int_equal(mha_optim_add_decay(o, "bad", b, gb, N, -1.0), MHA_EINVAL);
    assert_int_equal(mha_optim_add_decay(o, "bad", b, gb, N, NAN), MHA_EINVAL);
    assert_int_equal(mha_optim_num_groups(o), 2);
    for (int k = 0; k < STEPS; k++) {
        memcpy(ga, k_grads[k], sizeof ga);
        memcpy(gb, k_grads[k], sizeof gb);
        assert_int_equal(mha_optim_step(o, 0.05 * k_lr_mult[k]), MHA_OK);
    }
    mha_optim_destroy(o);
    assert_memory_equal(a, ref0, sizeof a);
    assert_memory_equal(b, ref1, sizeof b);
    assert_memory_not_equal(a, b, sizeof a);
}

/* The update is shared among OpenMP threads: 1 and 2 threads give the same bits, for
 * AdamW and SGD with momentum, on groups large enough to be split. */
static void optim_thread_count_independent(void **state)
{
    (void)state;
    enum { BIG = 70001 };
    for (int kind = 0; kind < 2; kind++) {
        float *p[2], *g = malloc(BIG * sizeof(float));
        assert_non_null(g);
        for (int run = 0; run < 2; run++) {
            mha_optim_config cfg;
            mha_optim_default_config(kind ? MHA_OPTIM_ADAMW : MHA_OPTIM_SGD, &cfg);
            cfg.momentum = kind ? 0.0 : 0.9;
            p[run] = malloc(BIG * sizeof(float));
            assert_non_null(p[run]);
            for (int i = 0; i < BIG; i++)
                p[run][i] = (float)((i % 97) - 48) / 50.0f;
            mha_optimizer *o = NULL;
            assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
            assert_int_equal(mha_optim_add(o, "big", p[run], g, BIG), MHA_OK);
            omp_set_num_threads(run + 1);
            for (int step = 0; step < 3; step++) {
                for (int i = 0; i < BIG; i++)
                    g[i] = (float)(((i * 7 + step) % 31) - 15) / 100.0f;
                assert_int_equal(mha_optim_step(o, 0.01), MHA_OK);
            }
            mha_optim_destroy(o);
        }
        omp_set_num_threads(2);
        assert_memory_equal(p[0], p[1], BIG * sizeof(float));
        free(p[0]);
        free(p[1]);
        free(g);
    }
}

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
    run_steps(&plain, lr, 1, a);
    run_steps(&mom, lr, 1, b);
    assert_memory_equal(a, b, sizeof a); /* step 1: buffer = g, same update */
    run_steps(&plain, lr, 2, a);
    run_steps(&mom, lr, 2, b);
    for (int i = 0; i < N; i++) /* step 2 lr = 2·lr: extra −2lr·μ·g₁ */
        assert_close(b[i] - a[i], -(2.0 * lr) * mu * (double)k_grads[0][i], 1e-6, 0.0);

    mha_optim_config adam = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8};
    mha_optim_config adamw = adam;
    adamw.kind = MHA_OPTIM_ADAMW;
    run_steps(&adam, 0.01, STEPS, a);
    run_steps(&adamw, 0.01, STEPS, b);
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
static void optim_step_count_set_get(void **state)
{
    (void)state;
    float p[N], g[N];
    memcpy(p, k_p0, sizeof p);
    memcpy(g, k_grads[0], sizeof g);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.01;
    mha_optim_config cfg = {MHA_OPTIM_ADAM, 0.0, 0.0, b1, b2, eps};
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "w", p, g, N), MHA_OK);
    uint64_t t = 77;
    assert_int_equal(mha_optim_get_step(o, &t), MHA_OK);
    assert_int_equal(t, 0);
    assert_int_equal(mha_optim_set_step(o, 100), MHA_OK);
    assert_int_equal(mha_optim_get_step(o, &t), MHA_OK);
    assert_int_equal(t, 100);
    assert_int_equal(mha_optim_step(o, lr), MHA_OK);
    assert_int_equal(mha_optim_get_step(o, &t), MHA_OK);
    assert_int_equal(t, 101);
    for (int i = 0; i < N; i++) {
        double gi = (double)g[i];
        double m = (1.0 - b1) * gi, v = (1.0 - b2) * gi * gi; /* from zero moments */
        double upd = lr / (1.0 - pow(b1, 101)) * m / (sqrt(v) / sqrt(1.0 - pow(b2, 101)) + eps);
        assert_close(p[i], (double)k_p0[i] - upd, 1e-7, 0.0);
        /* and it differs from the t = 1 update lr·g/(|g| + eps) (≈ 2% smaller) */
        assert_true(fabs(upd - lr * gi / (fabs(gi) + eps)) > 1e-5);
    }

    float before[N];
    memcpy(before, p, sizeof p);
    assert_int_equal(mha_optim_set_step(o, UINT64_MAX), MHA_OK);
    assert_int_equal(mha_optim_step(o, lr), MHA_EOVERFLOW);
    assert_memory_equal(p, before, sizeof p);
    assert_int_equal(mha_optim_get_step(o, &t), MHA_OK);
    assert_true(t == UINT64_MAX);
    assert_int_equal(mha_optim_set_step(NULL, 1), MHA_EINVAL);
    assert_int_equal(mha_optim_get_step(o, NULL), MHA_EINVAL);
    assert_int_equal(mha_optim_get_step(NULL, &t), MHA_EINVAL);
    mha_optim_destroy(o);
}

/* Checkpoint round trip: an optimizer rebuilt after step 2 from the params, the moment
 * buffers (written through mha_optim_group) and the step count gives bit-identical
 * params and moments after step 3. Two groups; SGD-momentum and AdamW. */
static void optim_checkpoint_resume_is_bitwise(void **state)
{
    (void)state;
    const mha_optim_config cfgs[2] = {
        {MHA_OPTIM_SGD, 0.9, 0.01, 0.0, 0.0, 0.0},
        {MHA_OPTIM_ADAMW, 0.0, 0.05, 0.8, 0.99, 1e-6},
    };
    for (int c = 0; c < 2; c++) {
        float pa[N], pb[N], qa[2], qb[2], ga[N], gq[2];
        memcpy(pa, k_p0, sizeof pa);
        qa[0] = 0.25f;
        qa[1] = -0.75f;
        mha_optimizer *a = NULL, *b = NULL;
        assert_int_equal(mha_optim_create(&a, &cfgs[c]), MHA_OK);
        assert_int_equal(mha_optim_add(a, "w", pa, ga, N), MHA_OK);
        assert_int_equal(mha_optim_add(a, "bias", qa, gq, 2), MHA_OK);
        for (int k = 0; k < 2; k++) {
            memcpy(ga, k_grads[k], sizeof ga);
            gq[0] = 0.5f * (float)(k + 1);
            gq[1] = -0.125f;
            assert_int_equal(mha_optim_step(a, 0.05), MHA_OK);
        }
        /* "checkpoint": copy params, moments and t into a fresh optimizer */
        memcpy(pb, pa, sizeof pb);
        memcpy(qb, qa, sizeof qb);
        assert_int_equal(mha_optim_create(&b, &cfgs[c]), MHA_OK);
        assert_int_equal(mha_optim_add(b, "w", pb, ga, N), MHA_OK);
        assert_int_equal(mha_optim_add(b, "bias", qb, gq, 2), MHA_OK);
        assert_int_equal(mha_optim_num_groups(b), 2);
        for (size_t j = 0; j < 2; j++) {
            const char *na = NULL, *nb = NULL;
            size_t n_a = 0, n_b = 0;
            float *ma = NULL, *va = NULL, *mb = NULL, *vb = NULL;
            assert_int_equal(mha_optim_group(a, j, &na, &n_a, &ma, &va), MHA_OK);
            assert_int_equal(mha_optim_group(b, j, &nb, &n_b, &mb, &vb), MHA_OK);
            assert_string_equal(na, nb);
            assert_int_equal(n_a, n_b);
            assert_non_null(ma);
            memcpy(mb, ma, n_a * sizeof(float));
            if (va != NULL)
                memcpy(vb, va, n_a * sizeof(float));
        }
        uint64_t t = 0;
        assert_int_equal(mha_optim_get_step(a, &t), MHA_OK);
        assert_int_equal(t, 2);
        assert_int_equal(mha_optim_set_step(b, t), MHA_OK);

        memcpy(ga, k_grads[2], sizeof ga);
        gq[0] = 2.0f;
        gq[1] = 0.0625f;
        assert_int_equal(mha_optim_step(a, 0.05), MHA_OK);
        assert_int_equal(mha_optim_step(b, 0.05), MHA_OK);
        assert_memory_equal(pa, pb, sizeof pa);
        assert_memory_equal(qa, qb, sizeof qa);
        for (size_t j = 0; j < 2; j++) {
            size_t n = 0;
            float *ma = NULL, *va = NULL, *mb = NULL, *vb = NULL;
            assert_int_equal(mha_optim_group(a, j, NULL, &n, &ma, &va), MHA_OK);
            assert_int_equal(mha_optim_group(b, j, NULL, NULL, &mb, &vb), MHA_OK);
            assert_memory_equal(ma, mb, n * sizeof(float));
            if (va != NULL)
                assert_memory_equal(va, vb, n * sizeof(float));
        }
        /* and the moved params are not the starting ones (the steps did something) */
        assert_true(pa[0] != k_p0[0] && qa[0] != 0.25f);
        mha_optim_destroy(a);
        mha_optim_destroy(b);
    }
}

/* Group access: names are copied, order and n are kept, and which moment buffers
 * exist depends on the kind (plain SGD none, momentum SGD m, Adam/AdamW m and v),
 * all zero when added. */
static void optim_group_access(void **state)
{
    (void)state;
    float p1[4], g1[4], p2[1], g2[1];
    char name[8] = "first";
    const mha_optim_config cfgs[4] = {
        {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0},
        {MHA_OPTIM_SGD, 0.5, 0.0, 0.0, 0.0, 0.0},
        {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8},
        {MHA_OPTIM_ADAMW, 0.0, 0.01, 0.9, 0.999, 1e-8},
    };
    const int want_m[4] = {0, 1, 1, 1}, want_v[4] = {0, 0, 1, 1};
    for (int c = 0; c < 4; c++) {
        mha_optimizer *o = NULL;
        assert_int_equal(mha_optim_create(&o, &cfgs[c]), MHA_OK);
        assert_int_equal(mha_optim_num_groups(o), 0);
        strcpy(name, "first");
        assert_int_equal(mha_optim_add(o, name, p1, g1, 4), MHA_OK);
        assert_int_equal(mha_optim_add(o, "second", p2, g2, 1), MHA_OK);
        name[0] = 'X'; /* the optimizer kept its own copy */
        assert_int_equal(mha_optim_num_groups(o), 2);
        const char *nm = NULL;
        size_t n = 0;
        float dummy = 0.0f, *m = &dummy, *v = &dummy;
        assert_int_equal(mha_optim_group(o, 0, &nm, &n, &m, &v), MHA_OK);
        assert_string_equal(nm, "first");
        assert_int_equal(n, 4);
        assert_true((m != NULL) == want_m[c]);
        assert_true((v != NULL) == want_v[c]);
        for (size_t i = 0; m != NULL && i < n; i++)
            assert_true(m[i] == 0.0f);
        for (size_t i = 0; v != NULL && i < n; i++)
            assert_true(v[i] == 0.0f);
        assert_int_equal(mha_optim_group(o, 1, &nm, &n, NULL, NULL), MHA_OK);
        assert_string_equal(nm, "second");
        assert_int_equal(n, 1);
        nm = "untouched";
        assert_int_equal(mha_optim_group(o, 2, &nm, &n, &m, &v), MHA_EINVAL);
        assert_string_equal(nm, "untouched");
        assert_int_equal(n, 1);
        assert_int_equal(mha_optim_group(NULL, 0, &nm, &n, &m, &v), MHA_EINVAL);
        mha_optim_destroy(o);
    }
    assert_int_equal(mha_optim_num_groups(NULL), 0);
    mha_optim_destroy(NULL); /* no-op */
}

/* ---- clipping ------------------------------------------------------------------- */
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

/* A global norm above max_norm is scaled to max_norm (across both groups). */
static void optim_clip_scales_to_max_norm(void **state)
{
    (void)state;
    float pa[2] = {0}, pb[2] = {0}, ga[2] = {3.0f, 0.0f}, gb[2] = {0.0f, -4.0f};
    mha_optim_config cfg = {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0};
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "a", pa, ga, 2), MHA_OK);
    assert_int_equal(mha_optim_add(o, "b", pb, gb, 2), MHA_OK);
    double norm = -1.0;
    assert_int_equal(mha_optim_clip_grad_norm(o, 1.0, &norm), MHA_OK);
    assert_close(norm, 5.0, 1e-12, 0.0);
    assert_close(ga[0], 0.599999905, CLIP_ATOL, 0.0);
    assert_close(gb[1], -0.799999833, CLIP_ATOL, 0.0);
    assert_close(ga[0], 3.0 / (5.0 + 1e-6), 3e-8, 0.0);   /* the formula, half an ulp */
    assert_close(gb[1], -4.0 / (5.0 + 1e-6), 3e-8, 0.0);
    assert_true(ga[1] == 0.0f && gb[0] == 0.0f);
    /* the new norm is max_norm (up to the 1e-6 of the formula) */
    assert_int_equal(mha_optim_clip_grad_norm(o, 0.0, &norm), MHA_OK);
    assert_close(norm, 1.0, 1e-6, 0.0);

    /* boundary: a norm equal to max_norm is scaled by max/(max + 1e-6), as torch */
    ga[0] = 0.6f;
    ga[1] = 0.0f;
    gb[0] = 0.0f;
    gb[1] = 0.8f;
    assert_int_equal(mha_optim_clip_grad_norm(o, 1.0, &norm), MHA_OK);
    assert_close(norm, 1.0, 1e-7, 0.0);
    assert_close(ga[0], 0.599999428, CLIP_ATOL, 0.0); /* unclipped would be 0.60000002 */
    assert_close(gb[1], 0.799999237, CLIP_ATOL, 0.0); /* unclipped would be 0.80000001 */
    /* the same with a norm that is exactly max_norm in any precision: 3² + 4² = 5² */
    ga[0] = 3.0f;
    gb[1] = -4.0f;
    assert_int_equal(mha_optim_clip_grad_norm(o, 5.0, &norm), MHA_OK);
    assert_true(norm == 5.0);
    assert_close(ga[0], 2.99999928, 3e-7, 0.0); /* ulp(3) = 2.4e-7; unclipped: 3 */
    assert_close(gb[1], -3.99999905, 3e-7, 0.0);
    assert_true(ga[0] < 3.0f && gb[1] > -4.0f);
    mha_optim_destroy(o);
}

/* A norm below max_norm, max_norm = 0 (measure only) and max_norm = ∞ leave the
 * gradients bit for bit; the norm is the double L2 norm over all groups. */
static void optim_clip_leaves_small_gradients_alone(void **state)
{
    (void)state;
    enum { NA = 5, NB = 7 };
    float pa[NA], pb[NB], ga[NA], gb[NB], ga0[NA], gb0[NB];
    fill_uniform_f(ga, NA, -1.0f, 1.0f, 11);
    fill_uniform_f(gb, NB, -1.0f, 1.0f, 12);
    memcpy(ga0, ga, sizeof ga);
    memcpy(gb0, gb, sizeof gb);
    double ss = 0.0;
    for (int i = 0; i < NA; i++)
        ss += (double)ga[i] * ga[i];
    for (int i = 0; i < NB; i++)
        ss += (double)gb[i] * gb[i];
    const double want = sqrt(ss);
    mha_optim_config cfg = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8};
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add(o, "a", pa, ga, NA), MHA_OK);
    assert_int_equal(mha_optim_add(o, "b", pb, gb, NB), MHA_OK);
    const double max_norms[3] = {want * 1.01 + 1e-6, 0.0, INFINITY};
    for (int k = 0; k < 3; k++) {
        double norm = -1.0;
        assert_int_equal(mha_optim_clip_grad_norm(o, max_norms[k], &norm), MHA_OK);
        assert_close(norm, want, 0.0, 1e-14);
        assert_memory_equal(ga, ga0, sizeof ga);
        assert_memory_equal(gb, gb0, sizeof gb);
    }
    /* and a max_norm below the norm does clip (norm optional): the new norm is 1 */
    assert_true(want > 1.2);
    assert_int_equal(mha_optim_clip_grad_norm(o, 1.0, NULL), MHA_OK);
    double after = 0.0;
    assert_int_equal(mha_optim_clip_grad_norm(o, 0.0, &after), MHA_OK);
    assert_close(after, 1.0, 1e-6, 0.0);
    mha_optim_destroy(o);
}

/* ---- refusals change nothing ------------------------------------------------------- */
typedef struct snapshot {
    float p1[N], g1[N], m1[N], v1[N], p2[2], g2[2], m2[2], v2[2];
    uint64_t t;
} snapshot;

typedef struct two_groups {
    float p1[N], g1[N], p2[2], g2[2];
    mha_optimizer *o;
} two_groups;

static void take(two_groups *w, snapshot *s)
{
    memset(s, 0, sizeof *s);
    memcpy(s->p1, w->p1, sizeof s->p1);
    memcpy(s->g1, w->g1, sizeof s->g1);
    memcpy(s->p2, w->p2, sizeof s->p2);
    memcpy(s->g2, w->g2, sizeof s->g2);
    float *m = NULL, *v = NULL;
    assert_int_equal(mha_optim_group(w->o, 0, NULL, NULL, &m, &v), MHA_OK);
    memcpy(s->m1, m, sizeof s->m1);
    memcpy(s->v1, v, sizeof s->v1);
    assert_int_equal(mha_optim_group(w->o, 1, NULL, NULL, &m, &v), MHA_OK);
    memcpy(s->m2, m, sizeof s->m2);
    memcpy(s->v2, v, sizeof s->v2);
    assert_int_equal(mha_optim_get_step(w->o, &s->t), MHA_OK);
}

static void assert_unchanged(two_groups *w, const snapshot *before)
{
    snapshot now;
    take(w, &now);
    assert_memory_equal(&now, before, sizeof now);
    assert_int_equal(mha_optim_num_groups(w->o), 2);
}

/* An AdamW with two groups and one completed step, so moments and t are nonzero. */
static void two_groups_init(two_groups *w)
{
    memcpy(w->p1, k_p0, sizeof w->p1);
    memcpy(w->g1, k_grads[0], sizeof w->g1);
    w->p2[0] = 1.5f;
    w->p2[1] = -0.5f;
    w->g2[0] = 0.01f;
    w->g2[1] = 0.02f;
    mha_optim_config cfg = {MHA_OPTIM_ADAMW, 0.0, 0.01, 0.9, 0.999, 1e-8};
    w->o = NULL;
    assert_int_equal(mha_optim_create(&w->o, &cfg), MHA_OK);
    assert_int_equal(mha_optim_add(w->o, "w", w->p1, w->g1, N), MHA_OK);
    assert_int_equal(mha_optim_add(w->o, "b", w->p2, w->g2, 2), MHA_OK);
    assert_int_equal(mha_optim_step(w->o, 0.01), MHA_OK);
    memcpy(w->g1, k_grads[1], sizeof w->g1);
}

/* A NaN or ±∞ gradient in any group: step and clip return MHA_ENONFINITE and change
 * nothing (params, grads, moments, t, *norm); once repaired, both work again. */
static void optim_nonfinite_gradient_refused(void **state)
{
    (void)state;
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        two_groups w;
        two_groups_init(&w);
        w.g2[1] = bad[b]; /* the last element of the last group: checked before any write */
        snapshot s;
        take(&w, &s);
        assert_int_equal(mha_optim_step(w.o, 0.01), MHA_ENONFINITE);
        assert_unchanged(&w, &s);
        double norm = 42.0;
        assert_int_equal(mha_optim_clip_grad_norm(w.o, 1e-3, &norm), MHA_ENONFINITE);
        assert_true(norm == 42.0);
        assert_unchanged(&w, &s);
        w.g2[1] = 0.5f;
        assert_int_equal(mha_optim_clip_grad_norm(w.o, 1e9, &norm), MHA_OK);
        assert_int_equal(mha_optim_step(w.o, 0.01), MHA_OK);
        uint64_t t = 0;
        assert_int_equal(mha_optim_get_step(w.o, &t), MHA_OK);
        assert_int_equal(t, 2);
        mha_optim_destroy(w.o);
    }
    assert_string_equal(mha_status_name(MHA_ENONFINITE), "MHA_ENONFINITE");
    assert_int_equal(MHA_ENONFINITE, -8);
}

/* Invalid arguments to step, clip, add and create: MHA_EINVAL (or the documented code)
 * and nothing changes. */
static void optim_invalid_arguments_change_nothing(void **state)
{
    (void)state;
    two_groups w;
    two_groups_init(&w);
    snapshot s;
    take(&w, &s);

    const double bad_lr[4] = {NAN, -1e-3, INFINITY, -INFINITY};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(mha_optim_step(w.o, bad_lr[k]), MHA_EINVAL);
        assert_unchanged(&w, &s);
    }
    assert_int_equal(mha_optim_step(NULL, 0.01), MHA_EINVAL);
    double norm = 42.0;
    assert_int_equal(mha_optim_clip_grad_norm(w.o, -1.0, &norm), MHA_EINVAL);
    assert_int_equal(mha_optim_clip_grad_norm(w.o, NAN, &norm), MHA_EINVAL);
    assert_int_equal(mha_optim_clip_grad_norm(NULL, 1.0, &norm), MHA_EINVAL);
    assert_true(norm == 42.0);
    assert_unchanged(&w, &s);

    /* add: bad arguments, then a valid add refused because a step was taken */
    float p[2], g[2];
    assert_int_equal(mha_optim_add(NULL, "x", p, g, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, NULL, p, g, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, "", p, g, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, "x", NULL, g, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, "x", p, NULL, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, "x", p, g, 0), MHA_EINVAL);
    assert_int_equal(mha_optim_add(w.o, "w", p, g, 2), MHA_EINVAL); /* duplicate name */
    assert_int_equal(mha_optim_add(w.o, "x", p, g, 2), MHA_ESTATE);  /* after a step */
    assert_unchanged(&w, &s);
    mha_optim_destroy(w.o);

    /* add before any step: overflow and duplicate leave the group count alone */
    mha_optim_config adam = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8};
    mha_optimizer *o = NULL;
    assert_int_equal(mha_optim_create(&o, &adam), MHA_OK);
    assert_int_equal(mha_optim_add(o, "x", p, g, SIZE_MAX / sizeof(float) + 1),
                     MHA_EOVERFLOW);
    assert_int_equal(mha_optim_num_groups(o), 0);
    assert_int_equal(mha_optim_add(o, "x", p, g, 2), MHA_OK);
    assert_int_equal(mha_optim_add(o, "x", p, g, 2), MHA_EINVAL);
    assert_int_equal(mha_optim_num_groups(o), 1);
    mha_optim_destroy(o);

    /* create: each used field out of range or NaN; *out is not written */
    mha_optimizer *const sentinel = (mha_optimizer *)&w;
    mha_optim_config c;
    struct {
        mha_optim_kind kind;
        int field; /* 0 momentum, 1 weight_decay, 2 beta1, 3 beta2, 4 eps */
        double value;
    } bad[] = {
        {MHA_OPTIM_SGD, 0, -0.1},     {MHA_OPTIM_SGD, 0, 1.0},      {MHA_OPTIM_SGD, 0, NAN},
        {MHA_OPTIM_SGD, 1, -1e-4},    {MHA_OPTIM_SGD, 1, INFINITY}, {MHA_OPTIM_SGD, 1, NAN},
        {MHA_OPTIM_ADAM, 1, -0.1},    {MHA_OPTIM_ADAM, 1, NAN},     {MHA_OPTIM_ADAM, 2, -0.1},
        {MHA_OPTIM_ADAM, 2, 1.0},     {MHA_OPTIM_ADAM, 2, NAN},     {MHA_OPTIM_ADAM, 3, 1.0},
        {MHA_OPTIM_ADAM, 3, -1e-9},   {MHA_OPTIM_ADAM, 3, NAN},     {MHA_OPTIM_ADAMW, 4, 0.0},
        {MHA_OPTIM_ADAMW, 4, -1e-8},  {MHA_OPTIM_ADAMW, 4, NAN},    {MHA_OPTIM_ADAMW, 4, INFINITY},
        {MHA_OPTIM_ADAMW, 1, INFINITY},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(mha_optim_default_config(bad[k].kind, &c), MHA_OK);
        double *f[5] = {&c.momentum, &c.weight_decay, &c.beta1, &c.beta2, &c.eps};
        *f[bad[k].field] = bad[k].value;
        o = sentinel;
        assert_int_equal(mha_optim_create(&o, &c), MHA_EINVAL);
        assert_ptr_equal(o, sentinel);
    }
    c.kind = (mha_optim_kind)3; /* unknown kind */
    o = sentinel;
    assert_int_equal(mha_optim_create(&o, &c), MHA_EINVAL);
    assert_ptr_equal(o, sentinel);
    assert_int_equal(mha_optim_create(&o, NULL), MHA_EINVAL);
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_SGD, &c), MHA_OK);
    assert_int_equal(mha_optim_create(NULL, &c), MHA_EINVAL);
    assert_int_equal(mha_optim_default_config((mha_optim_kind)7, &c), MHA_EINVAL);
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_SGD, NULL), MHA_EINVAL);

    /* fields a kind does not use are not validated: SGD ignores eps, Adam momentum */
    c = (mha_optim_config){MHA_OPTIM_SGD, 0.5, 0.0, NAN, NAN, 0.0};
    assert_int_equal(mha_optim_create(&o, &c), MHA_OK);
    mha_optim_destroy(o);
    c = (mha_optim_config){MHA_OPTIM_ADAM, NAN, 0.0, 0.0, 0.0, 1e-8}; /* β = 0 allowed */
    assert_int_equal(mha_optim_create(&o, &c), MHA_OK);
    mha_optim_destroy(o);
}

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

/* ==== float64: mhad_optim_* ============================================================= */
/* The same optimizers on double parameters, gradients and moments (one source with the
 * float ones, src/optim_core.inc). The double path rounds nowhere to float, so it is held
 * to the double reference ref_step() at a few ulp — float rounding would miss by ~1e-8:
 * parameters (O(1), ulp(2) = 4.4e-16) to D_ATOL, moments to D_RTOL relative (Adam's m is
 * computed as β1·m + (1−β1)·g here and by lerp in ref_step: the same value, other
 * roundings). The tests mirror the float tests above; names start with optim_f64_. */
#define D_ATOL 2e-15
#define D_RTOL 1e-14

/* Run case c (k_p0, k_grads, base·k_lr_mult) in double against ref_step after each step. */
static void run_case_d(const optim_case *c)
{
    double p[N], g[N];
    ref_state ref = {{0}, {0}, {0}};
    for (int i = 0; i < N; i++)
        p[i] = ref.p[i] = (double)k_p0[i];

    mhad_optimizer *o = NULL;
    assert_int_equal(mhad_optim_create(&o, &c->cfg), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "w", p, g, N), MHA_OK);
    for (int k = 0; k < STEPS; k++) {
        double lr = c->base_lr * k_lr_mult[k];
        for (int i = 0; i < N; i++)
            g[i] = (double)k_grads[k][i];
        assert_int_equal(mhad_optim_step(o, lr), MHA_OK);
        ref_step(&ref, &c->cfg, lr, k + 1, k_grads[k]);
        for (int i = 0; i < N; i++) {
            assert_close(p[i], ref.p[i], D_ATOL, 0.0);
            assert_close(p[i], c->torch_p[k][i], P_ATOL, 0.0); /* torch's float32 run */
            assert_true(g[i] == (double)k_grads[k][i]);         /* gradients only read */
        }
    }
    uint64_t t = 0;
    assert_int_equal(mhad_optim_get_step(o, &t), MHA_OK);
    assert_int_equal(t, STEPS);
    double *m = NULL, *v = NULL;
    assert_int_equal(mhad_optim_group(o, 0, NULL, NULL, &m, &v), MHA_OK);
    int has_m = c->cfg.kind != MHA_OPTIM_SGD || c->cfg.momentum != 0.0;
    int has_v = c->cfg.kind != MHA_OPTIM_SGD;
    assert_true((m != NULL) == has_m);
    assert_true((v != NULL) == has_v);
    for (int i = 0; i < N; i++) {
        if (has_m)
            assert_close(m[i], ref.m[i], 0.0, D_RTOL);
        if (has_v)
            assert_close(v[i], ref.v[i], 0.0, D_RTOL);
    }
    mhad_optim_destroy(o);
}

/* SGD, SGD with momentum and coupled decay, Adam, Adam with coupled decay and AdamW in
 * double: every step's params and the final moments match the double formula at a few
 * ulp (and torch's float32 run at float accuracy). */
static void optim_f64_all_kinds_match_formula(void **state)
{
    (void)state;
    const optim_case *cases[5] = {&k_sgd, &k_sgd_mom_wd, &k_adam, &k_adam_wd, &k_adamw};
    for (int c = 0; c < 5; c++)
        run_case_d(cases[c]);
}

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

/* Per-group weight decay in double: one AdamW with groups at wd 0 and 0.1 (config 0.5,
 * unused) equals the double formula with wd 0 and 0.1 respectively. */
static void optim_f64_group_weight_decay_is_per_group(void **state)
{
    (void)state;
    mha_optim_config cfg;
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_ADAMW, &cfg), MHA_OK);
    cfg.weight_decay = 0.5;
    double a[N], b[N], ga[N], gb[N];
    ref_state ra = {{0}, {0}, {0}}, rb = {{0}, {0}, {0}};
    for (int i = 0; i < N; i++)
        a[i] = b[i] = ra.p[i] = rb.p[i] = (double)k_p0[i];
    mhad_optimizer *o = NULL;
    assert_int_equal(mhad_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mhad_optim_add_decay(o, "no_decay", a, ga, N, 0.0), MHA_OK);
    assert_int_equal(mhad_optim_add_decay(o, "decay", b, gb, N, 0.1), MHA_OK);
    assert_int_equal(mhad_optim_add_decay(o, "bad", b, gb, N, -1.0), MHA_EINVAL);
    assert_int_equal(mhad_optim_add_decay(o, "bad", b, gb, N, INFINITY), MHA_EINVAL);
    assert_int_equal(mhad_optim_num_groups(o), 2);
    mha_optim_config c0 = cfg, c1 = cfg;
    c0.weight_decay = 0.0;
    c1.weight_decay = 0.1;
    for (int k = 0; k < STEPS; k++) {
        const double lr = 0.05 * k_lr_mult[k];
        for (int i = 0; i < N; i++)
            ga[i] = gb[i] = (double)k_grads[k][i];
        assert_int_equal(mhad_optim_step(o, lr), MHA_OK);
        ref_step(&ra, &c0, lr, k + 1, k_grads[k]);
        ref_step(&rb, &c1, lr, k + 1, k_grads[k]);
    }
    for (int i = 0; i < N; i++) {
        assert_close(a[i], ra.p[i], D_ATOL, 0.0);
        assert_close(b[i], rb.p[i], D_ATOL, 0.0);
        assert_true(fabs(a[i] - b[i]) > 1e-4); /* the decay did act on b only */
    }
    mhad_optim_destroy(o);
}

/* Thread-count independence in double: 1 and 2 OpenMP threads give the same bits for
 * AdamW and SGD with momentum on a group large enough to be split (17 spans), with the
 * norm and clipping included. */
static void optim_f64_thread_count_independent(void **state)
{
    (void)state;
    enum { BIG = 70001 };
    for (int kind = 0; kind < 2; kind++) {
        double *p[2], norm[2], *g = malloc(BIG * sizeof(double));
        assert_non_null(g);
        for (int run = 0; run < 2; run++) {
            mha_optim_config cfg;
            mha_optim_default_config(kind ? MHA_OPTIM_ADAMW : MHA_OPTIM_SGD, &cfg);
            cfg.momentum = kind ? 0.0 : 0.9;
            p[run] = malloc(BIG * sizeof(double));
            assert_non_null(p[run]);
            for (int i = 0; i < BIG; i++)
                p[run][i] = (double)((i % 97) - 48) / 50.0;
            mhad_optimizer *o = NULL;
            assert_int_equal(mhad_optim_create(&o, &cfg), MHA_OK);
            assert_int_equal(mhad_optim_add(o, "big", p[run], g, BIG), MHA_OK);
            omp_set_num_threads(run + 1);
            for (int step = 0; step < 3; step++) {
                for (int i = 0; i < BIG; i++)
                    g[i] = (double)(((i * 7 + step) % 31) - 15) / 100.0;
                assert_int_equal(mhad_optim_clip_grad_norm(o, 10.0, &norm[run]), MHA_OK);
                assert_int_equal(mhad_optim_step(o, 0.01), MHA_OK);
            }
            mhad_optim_destroy(o);
        }
        omp_set_num_threads(2);
        assert_memory_equal(p[0], p[1], BIG * sizeof(double));
        assert_true(norm[0] == norm[1] && norm[0] > 10.0); /* the clip did scale */
        free(p[0]);
        free(p[1]);
        free(g);
    }
}

/* Clipping in double: the norm over both groups, the scale max_norm/(norm + 1e-6) at
 * double accuracy, a norm of 5e100 (beyond float's range) handled, gradients below
 * max_norm left bit for bit; Σg² overflowing double (|g| ~ 1e200, finite) is refused
 * with MHA_ENONFINITE and nothing written, as the header says. */
static void optim_f64_clip(void **state)
{
    (void)state;
    double pa[2] = {0}, pb[2] = {0}, ga[2] = {3.0, 0.0}, gb[2] = {0.0, -4.0};
    const mha_optim_config cfg = {MHA_OPTIM_SGD, 0.0, 0.0, 0.0, 0.0, 0.0};
    mhad_optimizer *o = NULL;
    assert_int_equal(mhad_optim_create(&o, &cfg), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "a", pa, ga, 2), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "b", pb, gb, 2), MHA_OK);
    double norm = -1.0;
    assert_int_equal(mhad_optim_clip_grad_norm(o, 1.0, &norm), MHA_OK);
    assert_true(norm == 5.0);
    assert_close(ga[0], 3.0 / (5.0 + 1e-6), 0.0, 1e-15);
    assert_close(gb[1], -4.0 / (5.0 + 1e-6), 0.0, 1e-15);
    assert_true(ga[1] == 0.0 && gb[0] == 0.0);
    /* boundary: norm == max_norm is still scaled by max/(max + 1e-6) */
    ga[0] = 3.0;
    gb[1] = -4.0;
    assert_int_equal(mhad_optim_clip_grad_norm(o, 5.0, &norm), MHA_OK);
    assert_true(norm == 5.0);
    assert_close(ga[0], 15.0 / (5.0 + 1e-6), 0.0, 1e-15);
    assert_true(ga[0] < 3.0);
    /* beyond float: 3e100 and −4e100 have the norm 5e100 */
    ga[0] = 3e100;
    gb[1] = -4e100;
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

/* Two double groups (3 and 2 elements) of an AdamW after one step: moments and t
 * nonzero. Snapshot = params, grads, moments, t. */
typedef struct two_groups_d {
    double p1[N], g1[N], p2[2], g2[2];
    mhad_optimizer *o;
} two_groups_d;

typedef struct snapshot_d {
    double p1[N], g1[N], m1[N], v1[N], p2[2], g2[2], m2[2], v2[2];
    uint64_t t;
} snapshot_d;

static void two_groups_d_init(two_groups_d *w)
{
    for (int i = 0; i < N; i++) {
        w->p1[i] = (double)k_p0[i];
        w->g1[i] = (double)k_grads[0][i];
    }
    w->p2[0] = 1.5;
    w->p2[1] = -0.5;
    w->g2[0] = 0.01;
    w->g2[1] = 0.02;
    const mha_optim_config cfg = {MHA_OPTIM_ADAMW, 0.0, 0.01, 0.9, 0.999, 1e-8};
    w->o = NULL;
    assert_int_equal(mhad_optim_create(&w->o, &cfg), MHA_OK);
    assert_int_equal(mhad_optim_add(w->o, "w", w->p1, w->g1, N), MHA_OK);
    assert_int_equal(mhad_optim_add(w->o, "b", w->p2, w->g2, 2), MHA_OK);
    assert_int_equal(mhad_optim_step(w->o, 0.01), MHA_OK);
    for (int i = 0; i < N; i++)
        w->g1[i] = (double)k_grads[1][i];
}

static void take_d(two_groups_d *w, snapshot_d *s)
{
    memset(s, 0, sizeof *s);
    memcpy(s->p1, w->p1, sizeof s->p1);
    memcpy(s->g1, w->g1, sizeof s->g1);
    memcpy(s->p2, w->p2, sizeof s->p2);
    memcpy(s->g2, w->g2, sizeof s->g2);
    double *m = NULL, *v = NULL;
    assert_int_equal(mhad_optim_group(w->o, 0, NULL, NULL, &m, &v), MHA_OK);
    memcpy(s->m1, m, sizeof s->m1);
    memcpy(s->v1, v, sizeof s->v1);
    assert_int_equal(mhad_optim_group(w->o, 1, NULL, NULL, &m, &v), MHA_OK);
    memcpy(s->m2, m, sizeof s->m2);
    memcpy(s->v2, v, sizeof s->v2);
    assert_int_equal(mhad_optim_get_step(w->o, &s->t), MHA_OK);
}

static void assert_unchanged_d(two_groups_d *w, const snapshot_d *before)
{
    snapshot_d now;
    take_d(w, &now);
    assert_memory_equal(&now, before, sizeof now);
    assert_int_equal(mhad_optim_num_groups(w->o), 2);
}

/* Refusals in double change nothing (params, grads, moments, t, *norm, group count):
 * bad lr, bad max_norm, NULL optimizer, a NaN/±∞ gradient in the last element of the
 * last group, t == UINT64_MAX, bad add arguments, n·sizeof(double) overflowing, a group
 * after a step, a bad group index, a bad config. */
static void optim_f64_invalid_arguments_change_nothing(void **state)
{
    (void)state;
    two_groups_d w;
    two_groups_d_init(&w);
    snapshot_d s;
    take_d(&w, &s);

    const double bad_lr[4] = {NAN, -1e-3, INFINITY, -INFINITY};
    for (int k = 0; k < 4; k++)
        assert_int_equal(mhad_optim_step(w.o, bad_lr[k]), MHA_EINVAL);
    assert_int_equal(mhad_optim_step(NULL, 0.01), MHA_EINVAL);
    double norm = 42.0;
    assert_int_equal(mhad_optim_clip_grad_norm(w.o, -1.0, &norm), MHA_EINVAL);
    assert_int_equal(mhad_optim_clip_grad_norm(w.o, NAN, &norm), MHA_EINVAL);
    assert_int_equal(mhad_optim_clip_grad_norm(NULL, 1.0, &norm), MHA_EINVAL);
    assert_true(norm == 42.0);
    assert_unchanged_d(&w, &s);

    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        w.g2[1] = bad[b];
        take_d(&w, &s);
        assert_int_equal(mhad_optim_step(w.o, 0.01), MHA_ENONFINITE);
        assert_int_equal(mhad_optim_clip_grad_norm(w.o, 1e-3, &norm), MHA_ENONFINITE);
        assert_true(norm == 42.0);
        assert_unchanged_d(&w, &s);
    }
    w.g2[1] = 0.5;
    take_d(&w, &s);

    double p[2], g[2];
    assert_int_equal(mhad_optim_add(NULL, "x", p, g, 2), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, NULL, p, g, 2), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, "", p, g, 2), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, "x", NULL, g, 2), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, "x", p, NULL, 2), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, "x", p, g, 0), MHA_EINVAL);
    assert_int_equal(mhad_optim_add(w.o, "w", p, g, 2), MHA_EINVAL); /* duplicate name */
    assert_int_equal(mhad_optim_add(w.o, "x", p, g, 2), MHA_ESTATE);  /* after a step */
    const char *nm = "untouched";
    size_t n = 7;
    assert_int_equal(mhad_optim_group(w.o, 2, &nm, &n, NULL, NULL), MHA_EINVAL);
    assert_int_equal(mhad_optim_group(NULL, 0, &nm, &n, NULL, NULL), MHA_EINVAL);
    assert_true(n == 7 && strcmp(nm, "untouched") == 0);
    assert_unchanged_d(&w, &s);

    /* t == UINT64_MAX: MHA_EOVERFLOW, params and moments unchanged */
    assert_int_equal(mhad_optim_set_step(w.o, UINT64_MAX), MHA_OK);
    s.t = UINT64_MAX;
    assert_int_equal(mhad_optim_step(w.o, 0.01), MHA_EOVERFLOW);
    assert_unchanged_d(&w, &s);
    assert_int_equal(mhad_optim_set_step(NULL, 1), MHA_EINVAL);
    assert_int_equal(mhad_optim_get_step(w.o, NULL), MHA_EINVAL);
    mhad_optim_destroy(w.o);

    /* before any step: the double size limit, then a valid add */
    const mha_optim_config adam = {MHA_OPTIM_ADAM, 0.0, 0.0, 0.9, 0.999, 1e-8};
    mhad_optimizer *o = NULL;
    assert_int_equal(mhad_optim_create(&o, &adam), MHA_OK);
    assert_int_equal(mhad_optim_add(o, "x", p, g, SIZE_MAX / sizeof(double) + 1),
                     MHA_EOVERFLOW);
    assert_int_equal(mhad_optim_num_groups(o), 0);
    assert_int_equal(mhad_optim_add(o, "x", p, g, 2), MHA_OK);
    double *m = NULL, *v = NULL;
    assert_int_equal(mhad_optim_group(o, 0, &nm, &n, &m, &v), MHA_OK);
    assert_true(n == 2 && strcmp(nm, "x") == 0);
    assert_true(m != NULL && v != NULL && m[0] == 0.0 && m[1] == 0.0 && v[0] == 0.0 &&
                v[1] == 0.0);
    mhad_optim_destroy(o);

    /* create: a bad config or NULL; *out is not written */
    mhad_optimizer *const sentinel = (mhad_optimizer *)&w;
    mha_optim_config c = adam;
    c.beta2 = 1.0;
    o = sentinel;
    assert_int_equal(mhad_optim_create(&o, &c), MHA_EINVAL);
    assert_int_equal(mhad_optim_create(&o, NULL), MHA_EINVAL);
    assert_ptr_equal(o, sentinel);
    assert_int_equal(mhad_optim_create(NULL, &adam), MHA_EINVAL);
    assert_int_equal(mhad_optim_num_groups(NULL), 0);
    mhad_optim_destroy(NULL); /* no-op */
}

/* Checkpoint round trip in double: an optimizer rebuilt after step 2 from the params,
 * the moments (written through mhad_optim_group) and the step count gives bit-identical
 * params and moments after step 3. Two groups; SGD-momentum and AdamW. */
static void optim_f64_checkpoint_resume_is_bitwise(void **state)
{
    (void)state;
    const mha_optim_config cfgs[2] = {
        {MHA_OPTIM_SGD, 0.9, 0.01, 0.0, 0.0, 0.0},
        {MHA_OPTIM_ADAMW, 0.0, 0.05, 0.8, 0.99, 1e-6},
    };
    for (int c = 0; c < 2; c++) {
        double pa[N], pb[N], pc[N], qa[2] = {0.25, -0.75}, qb[2], qc[2], ga[N], gq[2];
        for (int i = 0; i < N; i++)
            pa[i] = (double)k_p0[i];
        mhad_optimizer *a = NULL, *b = NULL;
        assert_int_equal(mhad_optim_create(&a, &cfgs[c]), MHA_OK);
        assert_int_equal(mhad_optim_add(a, "w", pa, ga, N), MHA_OK);
        assert_int_equal(mhad_optim_add(a, "bias", qa, gq, 2), MHA_OK);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < N; i++)
                ga[i] = (double)k_grads[k][i];
            gq[0] = 0.5 * (k + 1);
            gq[1] = -0.125;
            assert_int_equal(mhad_optim_step(a, 0.05), MHA_OK);
        }
        /* "checkpoint": copy params, moments and t into a fresh optimizer */
        memcpy(pb, pa, sizeof pb);
        memcpy(qb, qa, sizeof qb);
        memcpy(pc, pa, sizeof pc);
        memcpy(qc, qa, sizeof qc);
        assert_int_equal(mhad_optim_create(&b, &cfgs[c]), MHA_OK);
        assert_int_equal(mhad_optim_add(b, "w", pb, ga, N), MHA_OK);
        assert_int_equal(mhad_optim_add(b, "bias", qb, gq, 2), MHA_OK);
        for (size_t j = 0; j < 2; j++) {
            const char *na = NULL, *nb = NULL;
            size_t n_a = 0, n_b = 0;
            double *ma = NULL, *va = NULL, *mb = NULL, *vb = NULL;
            assert_int_equal(mhad_optim_group(a, j, &na, &n_a, &ma, &va), MHA_OK);
            assert_int_equal(mhad_optim_group(b, j, &nb, &n_b, &mb, &vb), MHA_OK);
            assert_string_equal(na, nb);
            assert_int_equal(n_a, n_b);
            assert_non_null(ma);
            assert_true((va != NULL) == (c == 1));
            memcpy(mb, ma, n_a * sizeof(double));
            if (va != NULL)
                memcpy(vb, va, n_a * sizeof(double));
        }
        uint64_t t = 0;
        assert_int_equal(mhad_optim_get_step(a, &t), MHA_OK);
        assert_int_equal(t, 2);
        assert_int_equal(mhad_optim_set_step(b, t), MHA_OK);

        for (int i = 0; i < N; i++)
            ga[i] = (double)k_grads[2][i];
        gq[0] = 2.0;
        gq[1] = 0.0625;
        assert_int_equal(mhad_optim_step(a, 0.05), MHA_OK);
        assert_int_equal(mhad_optim_step(b, 0.05), MHA_OK);
        assert_memory_equal(pa, pb, sizeof pa);
        assert_memory_equal(qa, qb, sizeof qa);
        for (size_t j = 0; j < 2; j++) {
            size_t n = 0;
            double *ma = NULL, *va = NULL, *mb = NULL, *vb = NULL;
            assert_int_equal(mhad_optim_group(a, j, NULL, &n, &ma, &va), MHA_OK);
            assert_int_equal(mhad_optim_group(b, j, NULL, NULL, &mb, &vb), MHA_OK);
            assert_memory_equal(ma, mb, n * sizeof(double));
            if (va != NULL)
                assert_memory_equal(va, vb, n * sizeof(double));
        }
        assert_int_equal(mhad_optim_get_step(b, &t), MHA_OK);
        assert_int_equal(t, 3);
        /* the restored state mattered: from the same params without it (zero moments,
         * t = 0) step 3 goes elsewhere */
        mhad_optimizer *fresh = NULL;
        assert_int_equal(mhad_optim_create(&fresh, &cfgs[c]), MHA_OK);
        assert_int_equal(mhad_optim_add(fresh, "w", pc, ga, N), MHA_OK);
        assert_int_equal(mhad_optim_add(fresh, "bias", qc, gq, 2), MHA_OK);
        assert_int_equal(mhad_optim_step(fresh, 0.05), MHA_OK);
        assert_true(fabs(pc[0] - pa[0]) > 1e-4);
        mhad_optim_destroy(fresh);
        mhad_optim_destroy(a);
        mhad_optim_destroy(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(optim_sgd_plain_matches_formula_and_torch),
        cmocka_unit_test(optim_sgd_momentum_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_adam_matches_formula_and_torch),
        cmocka_unit_test(optim_adam_weight_decay_matches_formula_and_torch),
        cmocka_unit_test(optim_adamw_matches_formula_and_torch),
        cmocka_unit_test(optim_variants_differ_as_they_should),
        cmocka_unit_test(optim_group_weight_decay_is_per_group),
        cmocka_unit_test(optim_thread_count_independent),
        cmocka_unit_test(optim_adam_bias_correction_step1),
        cmocka_unit_test(optim_step_count_set_get),
        cmocka_unit_test(optim_checkpoint_resume_is_bitwise),
        cmocka_unit_test(optim_group_access),
        cmocka_unit_test(optim_clip_scales_to_max_norm),
        cmocka_unit_test(optim_clip_leaves_small_gradients_alone),
        cmocka_unit_test(optim_nonfinite_gradient_refused),
        cmocka_unit_test(optim_invalid_arguments_change_nothing),
        cmocka_unit_test(optim_default_config_is_torch),
        cmocka_unit_test(optim_lr_schedule_warmup_and_cosine),
        cmocka_unit_test(optim_lr_schedule_invalid),
        cmocka_unit_test(optim_f64_all_kinds_match_formula),
        cmocka_unit_test(optim_f64_does_not_round_to_float),
        cmocka_unit_test(optim_f64_group_weight_decay_is_per_group),
        cmocka_unit_test(optim_f64_thread_count_independent),
        cmocka_unit_test(optim_f64_clip),
        cmocka_unit_test(optim_f64_invalid_arguments_change_nothing),
        cmocka_unit_test(optim_f64_checkpoint_resume_is_bitwise),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
