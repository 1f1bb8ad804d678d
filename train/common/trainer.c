/*
 * The training loop every program shares (trainer.h).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rundir.h"
#include "trainer.h"

void train_loop_init(train_loop *L)
{
    memset(L, 0, sizeof *L);
    L->rep.best_col = -1;
    L->rep.eval_cost = 1;
    L->rep.unit = "items";
    L->rep.eval_what = "";
    for (size_t k = 0; k < TRAIN_ROW_CAP; k++)
        L->last[k] = NAN;
}

mha_optimizer *train_adamw(double beta2, double weight_decay)
{
    mha_optim_config oc;
    cli_check(mha_optim_default_config(MHA_OPTIM_ADAMW, &oc), "optimizer");
    oc.beta1 = 0.9;
    oc.beta2 = beta2;
    oc.eps = 1e-8;
    oc.weight_decay = weight_decay;
    mha_optimizer *o = NULL;
    cli_check(mha_optim_create(&o, &oc), "cannot create the optimizer");
    return o;
}

void train_loop_plan(train_loop *L, const train_hooks *h, mha_optimizer *opt,
                     const ckpt_tensor *pt, size_t n_pt, uint64_t *step, const train_plan *p)
{
    L->h = *h;
    L->opt = opt;
    L->pt = pt;
    L->n_pt = n_pt;
    L->step = step;
    L->sched = (mha_lr_schedule){.base_lr = p->lr, .min_lr = p->min_lr,
                                 .warmup_steps = p->warmup, .total_steps = p->steps};
    L->clip = p->clip;
    L->steps = p->steps;
    L->end = p->stop_after && p->stop_after < p->steps ? p->stop_after : p->steps;
    L->eval_every = p->eval_every;
    L->ckpt_every = p->ckpt_every;
}

/* The early evaluations' interval (every eval_every / 4 steps below eval_every). */
static uint64_t early_every(const train_loop *L)
{
    return L->eval_every >= 4 ? L->eval_every / 4 : 1;
}

int train_loop_is_eval_step(const train_loop *L, uint64_t s)
{
    return s % L->eval_every == 0 || s == L->steps ||
           (L->early_evals && s < L->eval_every && s % early_every(L) == 0);
}

/* Evaluation steps in (from, to]. */
static uint64_t evals_between(const train_loop *L, uint64_t from, uint64_t to)
{
    if (to <= from)
        return 0;
    const uint64_t E = L->eval_every, early = early_every(L);
    uint64_t n = to / E - from / E; /* multiples of eval_every */
    if (L->early_evals) {
        const uint64_t lim = to < E - 1 ? to : E - 1; /* the early ones */
        if (lim > from)
            n += lim / early - from / early;
    }
    if (to == L->steps && !(L->steps % E == 0) &&
        !(L->early_evals && L->steps < E && L->steps % early == 0))
        n++; /* the last step */
    return n;
}

double train_loop_elapsed(const train_loop *L)
{
    return L->rep.elapsed0 + (report_now() - L->rep.t_start);
}

/* Seconds left to `end`: the remaining steps at this process's training speed, and the
 * remaining evaluations (the program's final one included) at their measured mean cost
 * (before the first: eval_cost training steps each). NaN while nothing is measured. */
static double time_left(const train_loop *L)
{
    const uint64_t s = *L->step, done = s - L->step0;
    if (done == 0 || L->train_s <= 0)
        return NAN;
    const double per_step = L->train_s / (double)done;
    const double per_eval = L->n_evals ? L->eval_s / (double)L->n_evals
                                       : per_step * L->rep.eval_cost;
    double evals = (double)evals_between(L, s, L->end);
    if (L->final_eval && L->end < L->steps && !train_loop_is_eval_step(L, L->end))
        evals += 1;
    return (double)(L->end - s) * per_step + evals * per_eval;
}

/* The last evaluation in a resumed run's history (rows read back from its log), so that
 * the progress line shows it from the first step. */
static void find_last_eval(train_loop *L)
{
    const report_history *h = L->hist;
    if (L->rep.n_cols == 0 || h->n == 0 || h->cols != TRAIN_COL_EVAL + L->rep.n_cols + 2)
        return;
    for (size_t i = h->n; i-- > 0;)
        if (isfinite(report_at(h, i, TRAIN_COL_EVAL))) {
            memcpy(L->last, h->v + i * h->cols, h->cols * sizeof *L->last);
            L->last_eval_step = *L->step - h->n + i + 1;
            return;
        }
}

/* 1 if every parameter and optimizer moment is finite. */
static int params_finite(const train_loop *L)
{
    for (size_t i = 0; i < L->n_pt; i++) {
        const ckpt_tensor *t = &L->pt[i];
        for (size_t k = 0; k < t->numel; k++)
            if (!isfinite(t->p[k]) || (t->m && !isfinite(t->m[k])) ||
                (t->v && !isfinite(t->v[k])))
                return 0;
    }
    return 1;
}

/* A non-finite `what` at step s: rank 0 says so and what is left; the log is closed. */
static int stop_nonfinite(train_loop *L, uint64_t s, const char *what)
{
    report_progress_end(L->rep.prog); /* a live line ends first */
    if (L->rank0) {
        fprintf(stderr, "%s: stopped at step %llu: %s is non-finite (NaN or inf); try a "
                "smaller --lr or --clip. ", cli_program(), (unsigned long long)s, what);
        if (L->last_ckpt)
            fprintf(stderr, "The last checkpoint (%s) is intact.\n", L->last_ckpt);
        else
            fprintf(stderr, "No checkpoint was written (--ckpt-every %llu).\n",
                    (unsigned long long)L->ckpt_every);
        report_csv_close(L->csv);
    }
    return CLI_EXIT_NONFINITE;
}

/* keep: the checkpoint just saved also as checkpoint-<step>.safetensors (a hard link; a
 * second save where the file system has none), and only the `keep` highest steps of
 * those kept (rank 0). */
static void keep_checkpoint(train_loop *L)
{
    if (!L->keep || !L->rank0)
        return;
    char path[CLI_PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/checkpoint-%llu.safetensors", L->out,
             (unsigned long long)*L->step);
    if (unlink(path) != 0 && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "cannot replace %s: %s", path, strerror(errno));
    if (link(L->rep.ckpt_path, path) != 0)
        L->h.save(L->h.ctx, path, TRAIN_SAVE_LATEST);
    char **kept;
    const size_t n = rundir_list_numbered(L->out, "checkpoint-", ".safetensors", &kept);
    for (size_t i = 0; i < n; i++) {
        if (i + L->keep < n) {
            snprintf(path, sizeof path, "%s/%s", L->out, kept[i]);
            if (unlink(path) != 0 && errno != ENOENT)
                cli_die(CLI_EXIT_RUNTIME, "cannot remove %s: %s", path, strerror(errno));
        }
        free(kept[i]);
    }
    free(kept);
}

/* After step s: the best checkpoint after a better evaluation, the latest every
 * --ckpt-every (not at `end`: train_loop_close saves it). */
static void save_due(train_loop *L, int eval_now, const double *row, uint64_t s)
{
    if (eval_now && L->rep.best_col >= 0 && row[L->rep.best_col] < *L->rep.best) {
        *L->rep.best = row[L->rep.best_col];
        *L->rep.best_step = s;
        L->h.save(L->h.ctx, L->rep.best_path, TRAIN_SAVE_BEST);
    }
    if (L->ckpt_every && s % L->ckpt_every == 0 && s != L->end) {
        if (L->rank0)
            report_csv_flush(L->csv);
        L->h.save(L->h.ctx, L->rep.ckpt_path, TRAIN_SAVE_LATEST);
        L->last_ckpt = L->rep.ckpt_path;
        keep_checkpoint(L);
    }
}

/* The progress line (every evaluation keeps one; a terminal also gets the live line): the
 * step's loss, the last evaluation, the speed of the training steps since the last line
 * (ms a step, MFU, units a second; evaluations excluded), the time left and spent. */
static void show_progress(train_loop *L, int eval_now, double loss, double lr)
{
    report_progress *p = L->rep.prog;
    const uint64_t s = *L->step;
    if (!eval_now && !(p->tty && report_progress_due(p, s == L->end)))
        return;
    char left[32], els[32], mid[192], mfu[32] = "";
    report_duration(time_left(L), left, sizeof left);
    report_duration(train_loop_elapsed(L), els, sizeof els);
    L->h.describe(L->h.ctx, L->last, mid, sizeof mid);
    const double ms = L->win_steps ? 1e3 * L->win_s / (double)L->win_steps : 0;
    if (L->win_s > 0 && L->rep.peak > 0)
        snprintf(mfu, sizeof mfu, "  MFU %.1f%%", 100 * L->win_flops / L->win_s /
                                                      (L->rep.peak * 1e9));
    /* the most wanted first: a terminal narrower than the line cuts its end */
    report_progress_show(p, "%sstep %llu/%llu  loss %.4f  %s  lr %.2e  %.1f ms/step%s  left %s"
                         "  elapsed %s  %.0f %s/s", p->tty ? "  " : "", (unsigned long long)s,
                         (unsigned long long)L->steps, loss, mid, lr, ms, mfu, left, els,
                         L->win_s > 0 ? L->win_work / L->win_s : 0, L->rep.unit);
    L->win_s = L->win_flops = L->win_work = 0;
    L->win_steps = 0;
    if (eval_now)
        report_progress_end(p);
}

/* The evaluation of step s into row (and `last`). Returns 0 or the non-finite status. */
static int evaluate_now(train_loop *L, double *row, uint64_t s)
{
    if (L->rep.prog->tty)
        report_progress_show(L->rep.prog, "  step %llu/%llu  evaluating%s...",
                             (unsigned long long)s, (unsigned long long)L->steps,
                             L->rep.eval_what);
    const double te = report_now();
    const int cut = L->h.evaluate(L->h.ctx, row);
    L->eval_s += report_now() - te;
    if (cut) /* no evaluation at this step: the loop saves a checkpoint and stops */
        return 0;
    L->n_evals++;
    for (size_t k = 0; k < L->rep.n_cols; k++)
        if (!isfinite(row[TRAIN_COL_EVAL + k]))
            return stop_nonfinite(L, s, "the evaluation");
    return 0;
}

/* One step: forward, backward and the update; the clocks. Returns 0 or the non-finite
 * status; *loss, *lr, *gn, and *speed: the step's work units a second. */
static int one_step(train_loop *L, double *loss, double *lr, double *gn, double *speed)
{
    const uint64_t s = *L->step + 1;
    double flops = 0, work = 0;
    *lr = *gn = *speed = 0;
    const double ts = report_now();
    L->h.forward(L->h.ctx, loss, &work, &flops);
    if (!isfinite(*loss))
        return stop_nonfinite(L, s, "the training loss");
    L->h.backward(L->h.ctx);
    int st = mha_optim_clip_grad_norm(L->opt, L->clip, gn);
    if (st == MHA_OK)
        st = mha_lr_at(&L->sched, *L->step, lr);
    if (st == MHA_OK)
        st = mha_optim_step(L->opt, *lr);
    if (st == MHA_ENONFINITE)
        return stop_nonfinite(L, s, "a gradient");
    cli_check(st, "optimizer step");
    const double step_s = report_now() - ts;
    L->train_s += step_s;
    L->flops += flops;
    L->steps_done++;
    L->win_s += step_s;
    L->win_flops += flops;
    L->win_work += work;
    L->win_steps++;
    *speed = step_s > 0 ? work / step_s : 0;
    /* an update can still overflow for an absurd --lr: the next forward's loss shows it;
     * what is evaluated or saved is checked first (a scan per step would cost ~5% of a
     * small model's step) */
    const int save_now = (L->ckpt_every && s % L->ckpt_every == 0) || s == L->end;
    if ((save_now || train_loop_is_eval_step(L, s)) && !params_finite(L))
        return stop_nonfinite(L, s, "a parameter or optimizer moment after the update");
    *L->step = s;
    return 0;
}

int train_loop_run(train_loop *L)
{
    L->step0 = *L->step;
    if (L->last_eval_step == 0)
        find_last_eval(L);
    const size_t cols = TRAIN_COL_EVAL + L->rep.n_cols + 2;
    const double t_loop = report_now();
    int rc = 0;
    while (*L->step < L->end) {
        double row[TRAIN_ROW_CAP], speed;
        for (size_t k = 0; k < TRAIN_ROW_CAP; k++)
            row[k] = NAN;
        if ((rc = one_step(L, &row[TRAIN_COL_LOSS], &row[TRAIN_COL_LR], &row[TRAIN_COL_GN],
                           &speed)) != 0)
            break;
        const uint64_t s = *L->step;
        const int eval_now = train_loop_is_eval_step(L, s);
        if (eval_now && (rc = evaluate_now(L, row, s)) != 0)
            break;
        row[cols - 2] = train_loop_elapsed(L);
        row[cols - 1] = speed;
        if (eval_now && isfinite(row[TRAIN_COL_EVAL])) {
            memcpy(L->last, row, sizeof row);
            L->last_eval_step = s;
        }
        report_history_push(L->hist, row);
        if (L->rank0)
            report_csv_row(L->csv, s, row, cols);
        save_due(L, eval_now, row, s);
        show_progress(L, eval_now, row[TRAIN_COL_LOSS], row[TRAIN_COL_LR]);
        const int sig = report_stop_signal();
        if ((L->stop_sig = L->h.agree ? L->h.agree(sig) : sig) != 0)
            break; /* every rank at this step, to finish as at --stop-after; a second
                      signal ends the process */
    }
    L->loop_s = report_now() - t_loop;
    return rc;
}

void train_loop_close(train_loop *L)
{
    if (L->rank0)
        report_csv_close(L->csv);
    L->h.save(L->h.ctx, L->rep.ckpt_path, TRAIN_SAVE_LATEST);
    L->last_ckpt = L->rep.ckpt_path;
    keep_checkpoint(L);
}

int train_loop_exit_status(const train_loop *L)
{
    return L->stop_sig ? 128 + L->stop_sig : 0;
}

void train_describe(char *buf, size_t cap, const char *prefix, double v, const char *fmt, ...)
{
    const int n = snprintf(buf, cap, "%s", prefix);
    if (n < 0 || (size_t)n >= cap)
        return;
    if (!isfinite(v)) {
        snprintf(buf + n, cap - (size_t)n, "-");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

void train_loop_log_failed(void *ctx)
{
    const train_loop *L = ctx;
    report_last_checkpoint(L->last_ckpt);
}

void train_loop_save_failed(const train_loop *L)
{
    fprintf(stderr, "%s: stopping: the checkpoint could not be saved\n", cli_program());
    report_last_checkpoint(L->last_ckpt);
    exit(CLI_EXIT_RUNTIME);
}

void train_loop_mfu_json(const train_loop *L, cJSON *root, double peak, double measured)
{
    if (!(peak > 0) || !(L->train_s > 0))
        return;
    cJSON_AddNumberToObject(root, "peak_gflops", peak);
    cJSON_AddNumberToObject(root, "peak_gflops_measured", measured);
    cJSON_AddNumberToObject(root, "mfu", L->flops / L->train_s / (peak * 1e9));
}
