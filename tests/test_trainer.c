/*
 * The training loop every program shares (train/common/trainer.h), driven by hooks of a toy
 * problem: four weights trained by SGD towards a target (the loss Σ (w − 1)², its gradient
 * 2 (w − 1)), every call recorded. The schedule of evaluations (every --eval-every, the last
 * step, mha-train's early ones), the best checkpoint at each new low and only then, the
 * latest every --ckpt-every and the last K kept by step, a stop at --stop-after, and the one
 * non-finite policy: a non-finite loss, gradient, evaluation or parameter stops the run with
 * CLI_EXIT_NONFINITE at that step, nothing logged for it, the log closed. The programs'
 * tests (test_train, test_gpt_train, test_g2p_prog) run the same loop through mha-train,
 * mha-gpt and mha-g2p.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "trainer.h"
#include "test_util.h"

enum { NW = 4, MAX_CALLS = 64 };

/* The toy problem and what the loop asked of it. */
typedef struct toy {
    float w[NW], g[NW];
    uint64_t step;             /* the loop's step counter                                  */
    double best;
    uint64_t best_step;
    uint64_t forwards, backwards;
    uint64_t evals[MAX_CALLS]; /* the steps evaluated                                      */
    size_t n_evals;
    const double *eval_values; /* what evaluation i reports (NULL: the loss)               */
    char saves[MAX_CALLS][64]; /* "L<step>" (latest) or "B<step>" (best), in order         */
    size_t n_saves;
    uint64_t nan_loss_at, nan_grad_at, nan_param_at, nan_eval_at; /* 0: never              */
} toy;

static double toy_loss(const toy *t)
{
    double l = 0;
    for (size_t i = 0; i < NW; i++)
        l += ((double)t->w[i] - 1) * ((double)t->w[i] - 1);
    return l;
}

static void fwd(void *ctx, double *loss, double *work, double *flops)
{
    toy *t = ctx;
    t->forwards++;
    *loss = t->step + 1 == t->nan_loss_at ? NAN : toy_loss(t);
    *work = 8;
    *flops = 100;
}

static void bwd(void *ctx)
{
    toy *t = ctx;
    t->backwards++;
    for (size_t i = 0; i < NW; i++)
        t->g[i] = 2 * (t->w[i] - 1);
    if (t->step + 1 == t->nan_grad_at)
        t->g[1] = INFINITY;
    if (t->step + 1 == t->nan_param_at)
        t->w[2] = NAN; /* as an overflowing update would leave it */
}

static int evaluate(void *ctx, double *row)
{
    toy *t = ctx;
    assert_true(t->n_evals < MAX_CALLS);
    const size_t i = t->n_evals;
    t->evals[t->n_evals++] = t->step;
    row[TRAIN_COL_EVAL] = t->step == t->nan_eval_at ? NAN
                          : t->eval_values       ? t->eval_values[i]
                                                 : toy_loss(t);
    return 0;
}

static void save(void *ctx, const char *path, int kind)
{
    toy *t = ctx;
    assert_true(t->n_saves < MAX_CALLS);
    snprintf(t->saves[t->n_saves++], sizeof t->saves[0], "%c%llu",
             kind == TRAIN_SAVE_BEST ? 'B' : 'L', (unsigned long long)t->step);
    write_bytes(path, t->w, sizeof t->w); /* a file to keep (hard-linked) by step */
}

static void describe(void *ctx, const double *last, char *buf, size_t cap)
{
    (void)ctx;
    snprintf(buf, cap, "val %.4f", last[TRAIN_COL_EVAL]);
}

/* One loop over a toy in a fresh directory, its log open. */
typedef struct fixture {
    char dir[256], ckpt[320], best[320], csv_path[320];
    toy t;
    mha_optimizer *opt;
    ckpt_tensor pt;
    report_history hist;
    report_csv csv;
    report_progress prog;
    train_loop L;
} fixture;

static fixture *fixture_new(uint64_t steps, uint64_t eval_every)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(make_temp_dir(f->dir, sizeof f->dir, "test_trainer"), 0);
    snprintf(f->ckpt, sizeof f->ckpt, "%s/checkpoint.safetensors", f->dir);
    snprintf(f->best, sizeof f->best, "%s/best.safetensors", f->dir);
    snprintf(f->csv_path, sizeof f->csv_path, "%s/train_log.csv", f->dir);
    for (size_t i = 0; i < NW; i++)
        f->t.w[i] = (float)i;
    f->t.best = INFINITY;
    mha_optim_config oc;
    assert_int_equal(mha_optim_default_config(MHA_OPTIM_SGD, &oc), MHA_OK);
    assert_int_equal(mha_optim_create(&f->opt, &oc), MHA_OK);
    assert_int_equal(mha_optim_add(f->opt, "w", f->t.w, f->t.g, NW), MHA_OK);
    f->pt = (ckpt_tensor){.name = "w", .p = f->t.w, .ndim = 1, .shape = {NW, 0}, .numel = NW};
    report_history_init(&f->hist, TRAIN_COL_EVAL + 1 + 2);
    static const char *const fmts[] = {"%.17g", "%.17g", "%.17g", "%.17g", "%.3f", "%.0f"};
    report_csv_open(&f->csv, f->csv_path, "step,loss,lr,grad_norm,val,time_s,items_per_s", fmts,
                    &f->hist, 0, "0123456789abcdef", NULL, 0);
    report_progress_start(&f->prog, REPORT_PROGRESS_PLAIN, 0);
    train_loop *L = &f->L;
    train_loop_init(L);
    train_loop_plan(L, &(train_hooks){&f->t, fwd, bwd, evaluate, save, describe, NULL}, f->opt,
                    &f->pt, 1, &f->t.step,
                    &(train_plan){.lr = 0.1, .min_lr = 0.01, .steps = steps,
                                  .eval_every = eval_every});
    L->rep.n_cols = 1;
    L->rep.best_col = TRAIN_COL_EVAL;
    L->rep.best = &f->t.best;
    L->rep.best_step = &f->t.best_step;
    L->out = f->dir;
    L->rep.ckpt_path = f->ckpt;
    L->rep.best_path = f->best;
    L->rep.unit = "items";
    L->rep.t_start = report_now();
    L->rank0 = 1;
    L->hist = &f->hist;
    L->csv = &f->csv;
    L->rep.prog = &f->prog;
    return f;
}

static void fixture_free(fixture *f)
{
    report_csv_close(&f->csv);
    report_history_free(&f->hist);
    mha_optim_destroy(f->opt);
    assert_int_equal(remove_tree(f->dir), 0);
    free(f);
}

static int exists_in(const fixture *f, const char *name)
{
    char path[400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return stat(path, &sb) == 0;
}

/* Evaluations at every multiple of --eval-every and at the last step; with early_evals also
 * every eval_every / 4 steps below eval_every (mha-train's). Each step one forward and one
 * backward; a history row per step, evaluation columns only at evaluations; the loss falls
 * (the optimizer ran at the schedule's rate). */
static void trainer_evaluation_schedule(void **state)
{
    (void)state;
    fixture *f = fixture_new(10, 4);
    assert_int_equal(train_loop_run(&f->L), 0);
    assert_int_equal(f->t.step, 10);
    assert_int_equal(f->t.forwards, 10);
    assert_int_equal(f->t.backwards, 10);
    assert_int_equal(f->t.n_evals, 3);
    assert_int_equal(f->t.evals[0], 4);
    assert_int_equal(f->t.evals[1], 8);
    assert_int_equal(f->t.evals[2], 10);
    assert_int_equal(f->hist.n, 10);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(isfinite(report_at(&f->hist, i, TRAIN_COL_EVAL)),
                         i + 1 == 4 || i + 1 == 8 || i + 1 == 10);
    assert_true(report_at(&f->hist, 9, TRAIN_COL_LOSS) <
                0.5 * report_at(&f->hist, 0, TRAIN_COL_LOSS));
    assert_close(report_at(&f->hist, 0, TRAIN_COL_LR), 0.1, 1e-12, 0); /* the cosine's start */
    assert_int_equal(f->L.last_eval_step, 10);
    assert_int_equal(f->L.steps_done, 10);
    assert_true(f->L.flops == 1000);
    fixture_free(f);

    f = fixture_new(10, 8);
    f->L.early_evals = 1;
    assert_int_equal(train_loop_run(&f->L), 0);
    const uint64_t want[] = {2, 4, 6, 8, 10};
    assert_int_equal(f->t.n_evals, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(f->t.evals[i], want[i]);
        assert_true(train_loop_is_eval_step(&f->L, want[i]));
    }
    assert_false(train_loop_is_eval_step(&f->L, 9));
    fixture_free(f);
}

/* The best checkpoint is saved at each new low of the best column and only then, its value
 * and step kept; the latest every --ckpt-every (not at the end: train_loop_close saves it),
 * and with keep K the last K by step as checkpoint-<step>.safetensors. */
static void trainer_checkpoints(void **state)
{
    (void)state;
    fixture *f = fixture_new(8, 1);
    const double vals[] = {5, 4, 4, 6, 3, 3.5, 2.5, 2.6};
    f->t.eval_values = vals;
    f->L.ckpt_every = 2;
    f->L.keep = 2;
    assert_int_equal(train_loop_run(&f->L), 0);
    train_loop_close(&f->L); /* the last step's latest, once */
    const char *want[] = {"B1", "B2", "L2", "L4", "B5", "L6", "B7", "L8"};
    assert_int_equal(f->t.n_saves, 8);
    for (size_t i = 0; i < 8; i++)
        assert_string_equal(f->t.saves[i], want[i]);
    assert_true(f->t.best == 2.5);
    assert_int_equal(f->t.best_step, 7);
    assert_false(exists_in(f, "checkpoint-2.safetensors"));
    assert_false(exists_in(f, "checkpoint-4.safetensors"));
    assert_true(exists_in(f, "checkpoint-6.safetensors"));
    assert_true(exists_in(f, "checkpoint-8.safetensors"));
    assert_string_equal(f->L.last_ckpt, f->ckpt);
    fixture_free(f);
}

/* A stop at end < --steps (--stop-after): the steps up to it, an evaluation only where the
 * schedule has one. */
static void trainer_stop_after(void **state)
{
    (void)state;
    fixture *f = fixture_new(10, 4);
    f->L.end = 6;
    assert_int_equal(train_loop_run(&f->L), 0);
    assert_int_equal(f->t.step, 6);
    assert_int_equal(f->t.n_evals, 1);
    assert_int_equal(f->L.last_eval_step, 4);
    fixture_free(f);
}

/* Each non-finite value stops the run at its step with CLI_EXIT_NONFINITE: nothing of that
 * step is logged or counted, no checkpoint is saved after it, the log is closed. */
static void trainer_nonfinite(void **state)
{
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        fixture *f = fixture_new(10, 2);
        f->L.ckpt_every = 1;
        uint64_t *at[] = {&f->t.nan_loss_at, &f->t.nan_grad_at, &f->t.nan_param_at,
                          &f->t.nan_eval_at};
        *at[kind] = 4;
        assert_int_equal(train_loop_run(&f->L), CLI_EXIT_NONFINITE);
        /* the evaluation's step was counted before it was evaluated; the others' were not */
        assert_int_equal(f->t.step, kind == 3 ? 4 : 3);
        assert_int_equal(f->hist.n, 3);
        assert_int_equal(f->t.forwards, 4);
        assert_int_equal(f->t.backwards, kind == 0 ? 3 : 4);
        for (size_t i = 0; i < f->t.n_saves; i++) /* the last save is step 3's */
            assert_true(strcmp(f->t.saves[i], "L4") != 0 && strcmp(f->t.saves[i], "B4") != 0);
        assert_int_equal(f->csv.fd, -1);
        assert_true(isfinite(f->t.w[0]));
        fixture_free(f);
    }
}

/* ---- the tensor table and the optimizer (ckpt_tensors_of_model) ---------------------- */

/* Three tensors (5, 1 and 4,100 elements: the last crosses a 4,096-element span), a decayed
 * one between two that are not, in one arena or in allocations of their own. */
enum { FT = 3, FT_TOTAL = 5 + 1 + 4100 };
static const size_t ft_numel[FT] = {5, 1, 4100};
static const int ft_decay[FT] = {0, 1, 0};
typedef struct fake_model {
    float *p[FT], *g[FT];
} fake_model;

static int fake_tensor(void *model, size_t i, mha_param_info *info, float **p, float **g)
{
    static const char *const names[FT] = {"a.bias", "b.weight", "c.weight"};
    const fake_model *m = model;
    *info = (mha_param_info){names[i], 1, {ft_numel[i], 0}, ft_numel[i], MHA_ROLE_BIAS,
                             ft_decay[i]};
    *p = m->p[i];
    *g = m->g[i];
    return MHA_OK;
}

/* A model whose tensors lie end to end gets one group of segments (its moments one block,
 * each tensor's at its offset); one whose tensors lie apart a group per tensor. Both
 * decay the marked tensor alone, and after AdamW steps with clipping hold the same bits. */
static void trainer_tensor_table_groups(void **state)
{
    (void)state;
    float *arena = malloc(2 * FT_TOTAL * sizeof *arena), *apart[2 * FT];
    assert_non_null(arena);
    fake_model m[2];
    for (size_t i = 0, off = 0; i < FT; off += ft_numel[i], i++) {
        m[0].p[i] = arena + off;
        m[0].g[i] = arena + FT_TOTAL + off;
        m[1].p[i] = apart[2 * i] = malloc(ft_numel[i] * sizeof(float));
        m[1].g[i] = apart[2 * i + 1] = malloc(ft_numel[i] * sizeof(float));
        assert_true(apart[2 * i] && apart[2 * i + 1]);
    }
    mha_optimizer *opt[2];
    ckpt_tensor *t[2];
    for (int r = 0; r < 2; r++) {
        for (size_t i = 0; i < FT; i++)
            for (size_t j = 0; j < ft_numel[i]; j++)
                m[r].p[i][j] = 1.0f + 0.001f * (float)j;
        opt[r] = train_adamw(0.99, 0.1);
        float *sc = NULL;
        size_t total = 0;
        char err[256] = "";
        assert_int_equal(ckpt_tensors_of_model(&m[r], FT, fake_tensor, opt[r], 0.1, 0, &t[r],
                                               &sc, &total, err, sizeof err), MHA_OK);
        assert_null(sc);
        assert_int_equal(total, FT_TOTAL);
        assert_int_equal(mha_optim_num_groups(opt[r]), r == 0 ? 1 : FT);
        float *gm = NULL, *gv = NULL;
        assert_int_equal(mha_optim_group(opt[r], 0, NULL, NULL, &gm, &gv), MHA_OK);
        assert_true(t[r][0].m == gm && t[r][0].v == gv);
        if (r == 0)
            for (size_t i = 1; i < FT; i++)
                assert_true(t[0][i].m == gm + (t[0][i].p - arena) &&
                            t[0][i].v == gv + (t[0][i].p - arena));
    }
    for (int step = 0; step < 3; step++)
        for (int r = 0; r < 2; r++) {
            for (size_t i = 0; i < FT; i++)
                for (size_t j = 0; j < ft_numel[i]; j++)
                    m[r].g[i][j] = step == 0 ? 0.0f : (float)((int)((i * 31 + j * 7) % 13) - 6);
            double norm;
            assert_int_equal(mha_optim_clip_grad_norm(opt[r], 1.0, &norm), MHA_OK);
            assert_int_equal(mha_optim_step(opt[r], 0.01), MHA_OK);
            if (step == 0) /* no gradient: the decay alone moved b.weight, 1 − lr·wd */
                for (size_t i = 0; i < FT; i++)
                    assert_true(m[r].p[i][0] == (ft_decay[i] ? (float)(1.0 - 0.01 * 0.1) : 1.0f));
        }
    for (size_t i = 0; i < FT; i++) {
        assert_memory_equal(m[0].p[i], m[1].p[i], ft_numel[i] * sizeof(float));
        assert_memory_equal(t[0][i].m, t[1][i].m, ft_numel[i] * sizeof(float));
        assert_memory_equal(t[0][i].v, t[1][i].v, ft_numel[i] * sizeof(float));
    }
    for (int r = 0; r < 2; r++) {
        mha_optim_destroy(opt[r]);
        free(t[r]);
    }
    for (size_t k = 0; k < 2 * FT; k++)
        free(apart[k]);
    free(arena);
}

/* ---- the curves picture (train_write_curves) ------------------------------------------ */

/* The file at path holds `needle`. */
static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* An empty history draws both panels, empty (a run stopped before its first step); a
 * history without an evaluation leaves the evaluation panel out; the evaluation before
 * training (the history's step-0 row) is a point of its own, which brings the panel back;
 * an evaluation at a step does too. */
static void trainer_curves(void **state)
{
    (void)state;
    char dir[256], path[300];
    assert_int_equal(make_temp_dir(dir, sizeof dir, "curves"), 0);
    snprintf(path, sizeof path, "%s/c.svg", dir);
    const train_panel p[2] = {
        {"TITLE-LOSS", "loss", 1, 0, 0,
         {{"raw", "#000001", 0, 1, 0}, {"smoothed", "#000002", TRAIN_CURVE_SMOOTH + 0, 1, 0}}},
        {"TITLE-EVAL", "%", 0, 0, 100, {{"acc", "#000003", 1, 100, 1}}}};
    report_history h;
    report_history_init(&h, 2);
    train_write_curves(&h, path, p, 2);
    assert_true(file_has(path, "height=\"660\"") && file_has(path, "TITLE-EVAL"));
    for (int i = 0; i < 3; i++)
        report_history_push(&h, (const double[]){2.0 - 0.5 * i, NAN});
    train_write_curves(&h, path, p, 2);
    assert_true(file_has(path, "height=\"330\"") && file_has(path, "TITLE-LOSS"));
    assert_false(file_has(path, "TITLE-EVAL"));
    h.init[1] = 0.25;
    train_write_curves(&h, path, p, 2);
    assert_true(file_has(path, "height=\"660\"") && file_has(path, "TITLE-EVAL"));
    h.init[1] = NAN;
    report_history_push(&h, (const double[]){0.5, 0.75});
    train_write_curves(&h, path, p, 2);
    assert_true(file_has(path, "height=\"660\"") && file_has(path, "TITLE-EVAL"));
    report_history_free(&h);
    assert_int_equal(remove_tree(dir), 0);
}

int main(void)
{
    cli_set_program("test_trainer");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trainer_evaluation_schedule),
        cmocka_unit_test(trainer_checkpoints),
        cmocka_unit_test(trainer_stop_after),
        cmocka_unit_test(trainer_nonfinite),
        cmocka_unit_test(trainer_tensor_table_groups),
        cmocka_unit_test(trainer_curves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
