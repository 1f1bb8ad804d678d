/* Tests of the tiny training model (train/toy/toy_model.h) and its tasks (toy_tasks.h):
 * float64 finite-difference checks of the whole model end to end (every parameter, 1–2
 * layers, self/causal/cross attention, dropout frozen by resetting the call counters),
 * the held-out split of the tasks, error paths, and a short training run whose loss must
 * fall. Its pieces are the library's layers (embeddings, Linear, cross-entropy), checked
 * one by one in test_layers.c. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "mha_optim.h"
#include "toy_model.h"
#include "toy_tasks.h"

/* The tolerance of the brief: |a − n| <= 1e-7 + 1e-6·|n|, step 1e-5 (central). */
static const mha_gc_options GC_OPT = {.step = 1e-5, .atol = 1e-7, .rtol = 1e-6,
                                      .directions = 0, .seed = 7};

static void assert_gc_pass(const mha_gc_result *r, const char *what)
{
    if (!(r->worst_ratio <= 1.0))
        fail_msg("%s: worst ratio %.3g at %zu (analytic %.12g, numeric %.12g)", what,
                 r->worst_ratio, r->worst_index, r->worst_analytic, r->worst_numeric);
    assert_true(r->compared > 0);
}

/* --pos-init sinusoidal: pos_emb starts as pos_emb[s, 2k] = sin(s·ω_k),
 * pos_emb[s, 2k+1] = cos(s·ω_k), ω_k = 10000^(−2k/D) (toy_model.h), exactly (rounded once to
 * float); the uniform start does not look like it. */
static void test_model_pos_init_sinusoidal(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_REVERSE, .n = 7, .vocab = 5};
    tm_config cfg = {.model_dim = 6, .num_heads = 2, .layers = 1, .seed = 3, .threads = 1,
                     .pos_sinusoidal = 1};
    assert_int_equal(task_model_shape(&t, &cfg), MHA_OK);
    tm_model *m = NULL;
    assert_int_equal(tm_create(&m, &cfg, 1), MHA_OK);
    mha_tensor_info ti;
    assert_int_equal(tm_tensor_info_at(&cfg, 1, &ti), MHA_OK);
    assert_string_equal(ti.name, "pos_emb.weight");
    const float *pe = tm_params(m, NULL) + ti.offset;
    const size_t D = cfg.model_dim;
    for (size_t pos = 0; pos < cfg.seq_len; pos++)
        for (size_t k = 0; 2 * k < D; k++) {
            const double w = pow(10000.0, -(double)(2 * k) / (double)D);
            assert_true(pe[pos * D + 2 * k] == (float)sin((double)pos * w));
            if (2 * k + 1 < D)
                assert_true(pe[pos * D + 2 * k + 1] == (float)cos((double)pos * w));
        }
    tm_destroy(m);
    cfg.pos_sinusoidal = 0;
    assert_int_equal(tm_create(&m, &cfg, 1), MHA_OK);
    pe = tm_params(m, NULL) + ti.offset;
    assert_false(pe[1] == 1.0f && pe[D + 1] == (float)cos(1.0)); /* cos(0) = 1 at (0, 1) */
    tm_destroy(m);
}

/* ---- the whole model, end to end --------------------------------------------- */

typedef struct model_ctx {
    tmd_model *m;
    const tm_batch *b;
    uint64_t idx[TM_MAX_LAYERS];
} model_ctx;

/* Loss of a training forward with every layer's dropout counter reset first, so each
 * evaluation sees the same dropout masks. */
static int model_loss(void *vctx, double *loss)
{
    model_ctx *c = vctx;
    int st = tmd_set_call_indices(c->m, c->idx);
    if (st == MHA_OK)
        st = tmd_forward(c->m, c->b, 1, loss);
    return st;
}

/* Gradient check of every parameter (own tensors and each layer's 8 tensors) of a
 * model for task t with the given layers, dropout and width. */
static void check_model(const task_spec *t, size_t layers, double dropout, size_t D, size_t H,
                        size_t B)
{
    tm_config cfg = {.model_dim = D, .num_heads = H, .layers = layers, .dropout = dropout,
                     .seed = 1234 + layers, .threads = 1};
    assert_int_equal(task_model_shape(t, &cfg), MHA_OK);
    task_buffer buf;
    assert_int_equal(task_buffer_init(&buf, t, B), MHA_OK);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 5, TASK_STREAM_TRAIN);
    assert_int_equal(task_fill(t, &rng, TASK_TRAIN, &buf, 0, B), MHA_OK);
    tm_batch b = task_view(&buf, 0, B);

    tmd_model *m = NULL;
    assert_int_equal(tmd_create(&m, &cfg, B), MHA_OK);
    /* make the read-out and embeddings less uniform than at init, so every path matters */
    size_t n_own;
    double *p = tmd_params(m, &n_own);
    fill_uniform(p, n_own, -1, 1, 77);

    model_ctx c = {.m = m, .b = &b};
    for (size_t l = 0; l < layers; l++)
        c.idx[l] = 3 + 5 * l; /* arbitrary dropout call indices */
    assert_int_equal(tmd_zero_grad(m), MHA_OK);
    double loss;
    assert_int_equal(model_loss(&c, &loss), MHA_OK);
    assert_true(isfinite(loss) && loss > 0);
    assert_int_equal(tmd_backward(m, &b), MHA_OK);
    /* backward needs a new forward */
    assert_int_equal(tmd_backward(m, &b), MHA_ESTATE);

    size_t nt = 1 + MHA_NUM_TENSORS * layers;
    mha_gc_tensor tens[1 + MHA_NUM_TENSORS * TM_MAX_LAYERS];
    char names[TM_MAX_LAYERS][MHA_NUM_TENSORS][40];
    double *gcopy[1 + TM_MAX_LAYERS];
    gcopy[0] = malloc(n_own * sizeof(double));
    memcpy(gcopy[0], tmd_grads(m, NULL), n_own * sizeof(double));
    tens[0] = (mha_gc_tensor){"own (embeddings, read-out)", p, gcopy[0], n_own};
    for (size_t l = 0; l < layers; l++) {
        size_t n;
        double *lp = mhad_params(tmd_layer(m, l), &n);
        gcopy[1 + l] = malloc(n * sizeof(double));
        memcpy(gcopy[1 + l], mhad_grads(tmd_layer(m, l), NULL), n * sizeof(double));
        for (size_t k = 0; k < MHA_NUM_TENSORS; k++) {
            mha_tensor_info ti;
            assert_int_equal(mha_tensor_info_at(D, k, &ti), MHA_OK);
            snprintf(names[l][k], sizeof names[l][k], "layers.%zu.%s", l, ti.name);
            tens[1 + l * MHA_NUM_TENSORS + k] =
                (mha_gc_tensor){names[l][k], lp + ti.offset, gcopy[1 + l] + ti.offset, ti.numel};
        }
    }
    mha_gc_result res[1 + MHA_NUM_TENSORS * TM_MAX_LAYERS];
    assert_int_equal(mha_gradcheck(model_loss, &c, tens, nt, &GC_OPT, res), MHA_OK);
    for (size_t i = 0; i < nt; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s (%s, L=%zu, p=%.2f)", tens[i].name, task_name(t->kind),
                 layers, dropout);
        assert_gc_pass(&res[i], what);
    }
    /* the own-tensor gradient is not trivially zero */
    double gn = 0;
    for (size_t i = 0; i < n_own; i++)
        gn += gcopy[0][i] * gcopy[0][i];
    assert_true(gn > 0);
    for (size_t l = 0; l <= layers; l++)
        free(gcopy[l]);
    tmd_destroy(m);
    task_buffer_free(&buf);
}

/* Reverse: bidirectional self-attention, 1 and 2 layers, with and without dropout. */
static void test_model_grad_reverse(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_REVERSE, .n = 5, .vocab = 4};
    check_model(&t, 1, 0.0, 8, 2, 3);
    check_model(&t, 2, 0.3, 8, 2, 3);
}

/* Copy: causal mask, unscored first half, SEP token; 2 layers with dropout. */
static void test_model_grad_copy(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_COPY, .n = 3, .vocab = 4};
    check_model(&t, 2, 0.25, 8, 4, 2);
}

/* Lookup: cross-attention with Sk = 5 ≠ S = 3, value embedding; 1 and 2 layers. */
static void test_model_grad_lookup(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_LOOKUP, .n = 3, .vocab = 6, .pairs = 5};
    check_model(&t, 1, 0.0, 8, 2, 2);
    check_model(&t, 2, 0.2, 8, 2, 2);
}

/* The float and double models built from the same config start from the same
 * parameters (one source, two precisions) and give the same loss to float accuracy. */
static void test_model_float_double_agree(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_REVERSE, .n = 6, .vocab = 5};
    tm_config cfg = {.model_dim = 8, .num_heads = 2, .layers = 2, .seed = 9, .threads = 1};
    assert_int_equal(task_model_shape(&t, &cfg), MHA_OK);
    task_buffer buf;
    assert_int_equal(task_buffer_init(&buf, &t, 4), MHA_OK);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 1, TASK_STREAM_TRAIN);
    assert_int_equal(task_fill(&t, &rng, TASK_TRAIN, &buf, 0, 4), MHA_OK);
    tm_batch b = task_view(&buf, 0, 4);
    tm_model *mf = NULL;
    tmd_model *md = NULL;
    assert_int_equal(tm_create(&mf, &cfg, 4), MHA_OK);
    assert_int_equal(tmd_create(&md, &cfg, 4), MHA_OK);
    size_t n;
    float *pf = tm_params(mf, &n);
    double *pd = tmd_params(md, NULL);
    for (size_t i = 0; i < n; i++)
        assert_true(pf[i] == (float)pd[i]);
    double lf, ld;
    assert_int_equal(tm_forward(mf, &b, 0, &lf), MHA_OK);
    assert_int_equal(tmd_forward(md, &b, 0, &ld), MHA_OK);
    assert_close(lf, ld, 1e-5, 1e-5);
    tm_destroy(mf);
    tmd_destroy(md);
    task_buffer_free(&buf);
}

/* Errors: a token outside the vocabulary, a batch over capacity, backward before
 * forward, a bad config. */
static void test_model_errors(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_REVERSE, .n = 4, .vocab = 3};
    tm_config cfg = {.model_dim = 4, .num_heads = 2, .layers = 1, .seed = 1, .threads = 1};
    assert_int_equal(task_model_shape(&t, &cfg), MHA_OK);
    tm_model *m = NULL;
    assert_int_equal(tm_create(&m, &cfg, 2), MHA_OK);
    int32_t tok[12] = {0, 1, 2, 0, 1, 1, 1, 1, 0, 0, 0, 0};
    int32_t tgt[12] = {0, 2, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0};
    tm_batch b = {.batch = 2, .tokens = tok, .targets = tgt};
    assert_int_equal(tm_backward(m, &b), MHA_ESTATE);
    double loss;
    assert_int_equal(tm_forward(m, &b, 1, &loss), MHA_OK);
    b.batch = 3;
    assert_int_equal(tm_forward(m, &b, 1, &loss), MHA_ESHAPE);
    b.batch = 2;
    tok[3] = 3;
    assert_int_equal(tm_forward(m, &b, 1, &loss), MHA_EINVAL);
    tok[3] = 0;
    tgt[2] = 7;
    assert_int_equal(tm_forward(m, &b, 1, &loss), MHA_EINVAL);
    tm_destroy(m);
    tm_config bad = cfg;
    bad.layers = TM_MAX_LAYERS + 1;
    assert_int_equal(tm_create(&m, &bad, 2), MHA_EINVAL);
    bad = cfg;
    bad.num_heads = 3;
    assert_int_equal(tm_create(&m, &bad, 2), MHA_EINVAL);
}

/* Tasks: targets follow the definitions, evaluation and training examples never share
 * a hash class (so never coincide), and the same seed gives the same data. */
static void test_model_tasks(void **state)
{
    (void)state;
    const task_spec specs[3] = {{TASK_REVERSE, 6, 4, 0}, {TASK_COPY, 4, 3, 0},
                                {TASK_LOOKUP, 3, 8, 5}};
    for (int k = 0; k < 3; k++) {
        const task_spec *t = &specs[k];
        task_buffer tr, ev;
        assert_int_equal(task_buffer_init(&tr, t, 200), MHA_OK);
        assert_int_equal(task_buffer_init(&ev, t, 200), MHA_OK);
        mha_pcg32 r1, r2;
        mha_pcg32_seed(&r1, 3, TASK_STREAM_TRAIN);
        mha_pcg32_seed(&r2, 3, TASK_STREAM_EVAL);
        assert_int_equal(task_fill(t, &r1, TASK_TRAIN, &tr, 0, 200), MHA_OK);
        assert_int_equal(task_fill(t, &r2, TASK_EVAL, &ev, 0, 200), MHA_OK);
        const size_t S = tr.S, Sk = tr.Sk;
        for (size_t i = 0; i < 200; i++) {
            const int32_t *x = tr.tokens + i * S, *y = tr.targets + i * S;
            const int32_t *c = tr.ctx ? tr.ctx + i * Sk * 2 : NULL;
            assert_true(task_hash(t, x, c) % 8 != 0);
            assert_true(task_hash(t, ev.tokens + i * S, ev.ctx ? ev.ctx + i * Sk * 2 : NULL) %
                            8 == 0);
            for (size_t s = 0; s < S; s++) {
                if (t->kind == TASK_REVERSE)
                    assert_int_equal(y[s], x[S - 1 - s]);
                else if (t->kind == TASK_COPY) {
                    size_t n = t->n;
                    if (s < n)
                        assert_int_equal(y[s], -1);
                    else
                        assert_int_equal(y[s], x[s - n]);
                    if (s == n)
                        assert_int_equal(x[s], (int32_t)t->vocab);
                    if (s > n) /* second half repeats the first, shifted by SEP */
                        assert_int_equal(x[s], x[s - n - 1]);
                } else {
                    int found = 0;
                    for (size_t j = 0; j < Sk; j++)
                        if (c[2 * j] == x[s]) {
                            found++;
                            assert_int_equal(y[s], c[2 * j + 1]);
                        }
                    assert_int_equal(found, 1); /* keys are distinct */
                }
            }
        }
        /* determinism */
        task_buffer again;
        assert_int_equal(task_buffer_init(&again, t, 200), MHA_OK);
        mha_pcg32_seed(&r1, 3, TASK_STREAM_TRAIN);
        assert_int_equal(task_fill(t, &r1, TASK_TRAIN, &again, 0, 200), MHA_OK);
        assert_memory_equal(again.tokens, tr.tokens, 200 * S * sizeof(int32_t));
        task_buffer_free(&again);
        task_buffer_free(&tr);
        task_buffer_free(&ev);
    }
    task_spec bad = {TASK_LOOKUP, 3, 4, 5};
    tm_config cfg;
    assert_int_equal(task_model_shape(&bad, &cfg), MHA_EINVAL);
}

/* A short float training run on reverse with Adam: the mean loss of the last 20 steps
 * is well below that of the first 20. */
static void test_model_train_smoke(void **state)
{
    (void)state;
    task_spec t = {.kind = TASK_REVERSE, .n = 6, .vocab = 6};
    tm_config cfg = {.model_dim = 32, .num_heads = 4, .layers = 1, .seed = 3, .threads = 1};
    assert_int_equal(task_model_shape(&t, &cfg), MHA_OK);
    enum { B = 32, STEPS = 300 };
    tm_model *m = NULL;
    assert_int_equal(tm_create(&m, &cfg, B), MHA_OK);
    mha_optim_config oc;
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_ADAM, &oc), MHA_OK);
    mha_optimizer *opt = NULL;
    assert_int_equal(mha_optim_create(&opt, &oc), MHA_OK);
    size_t n;
    float *p = tm_params(m, &n);
    assert_int_equal(mha_optim_add(opt, "own", p, tm_grads(m, NULL), n), MHA_OK);
    size_t nl;
    float *lp = mha_params(tm_layer(m, 0), &nl);
    assert_int_equal(mha_optim_add(opt, "layer0", lp, mha_grads(tm_layer(m, 0), NULL), nl),
                     MHA_OK);
    task_buffer buf;
    assert_int_equal(task_buffer_init(&buf, &t, B), MHA_OK);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 3, TASK_STREAM_TRAIN);
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        assert_int_equal(task_fill(&t, &rng, TASK_TRAIN, &buf, 0, B), MHA_OK);
        tm_batch b = task_view(&buf, 0, B);
        double loss;
        assert_int_equal(tm_zero_grad(m), MHA_OK);
        assert_int_equal(tm_forward(m, &b, 1, &loss), MHA_OK);
        assert_int_equal(tm_backward(m, &b), MHA_OK);
        assert_int_equal(mha_optim_step(opt, 3e-3), MHA_OK);
        if (step < 20)
            first += loss / 20;
        if (step >= STEPS - 20)
            last += loss / 20;
    }
    if (!(last < 0.5 * first))
        fail_msg("loss did not fall: first %.4f last %.4f", first, last);
    mha_optim_destroy(opt);
    tm_destroy(m);
    task_buffer_free(&buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_pos_init_sinusoidal),
        cmocka_unit_test(test_model_grad_reverse),
        cmocka_unit_test(test_model_grad_copy),
        cmocka_unit_test(test_model_grad_lookup),
        cmocka_unit_test(test_model_float_double_agree),
        cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_model_tasks),
        cmocka_unit_test(test_model_train_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
