/*
 * mha-train's training loop: the fixed held-out set and its evaluation, the schedule
 * of evaluations and the time left, one training step (forward, backward, clipping,
 * the optimizer; a non-finite loss, gradient or parameter stops the run), what follows
 * each step (evaluation, the CSV row, checkpoints, the progress line), and the end of a
 * run (the last checkpoint, pictures, example.json, summary.json, the closing lines).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mha.h"
#include "mha_optim.h"
#include "peak.h"
#include "report.h"
#include "toy_run.h"

/* ---- history and CSV ---------------------------------------------------------------- */

static const char *const CSV_HEADER =
    "step,loss,lr,grad_norm,eval_token_accuracy,eval_sequence_accuracy,time_s,tokens_per_s";
static const char *const CSV_FMTS[H_COLS] = {"%.17g", "%.17g", "%.17g", "%.6f",
                                             "%.6f",  "%.3f",  "%.0f"};

/* ---- evaluation ---------------------------------------------------------------------- */

/* Held-out token and sequence accuracy and mean loss (eval mode, no dropout). */
static void evaluate(run_state *rs, const task_buffer *ev, double *tok, double *seq,
                     double *loss)
{
    size_t tc = 0, ts = 0, sc = 0;
    double lsum = 0;
    const size_t chunk = rs->eval_chunk;
    for (size_t first = 0; first < rs->cfg.eval_size; first += chunk) {
        size_t n = rs->cfg.eval_size - first < chunk ? rs->cfg.eval_size - first : chunk;
        tm_batch b = task_view(ev, first, n);
        double l;
        size_t a, s2, c;
        cli_check(tm_forward(rs->model, &b, 0, &l), "evaluation forward");
        cli_check(tm_accuracy(rs->model, &b, &a, &s2, &c), "accuracy");
        tc += a;
        ts += s2;
        sc += c;
        lsum += l * (double)n;
    }
    *tok = ts ? (double)tc / (double)ts : 0.0;
    *seq = (double)sc / (double)rs->cfg.eval_size;
    *loss = lsum / (double)rs->cfg.eval_size;
}

/* ---- the schedule of evaluations and the time left ------------------------------------- */

/* 1 if step s (1-based, after its update) evaluates: every --eval-every steps, 4 times as
 * often during the first --eval-every steps (where accuracy changes fastest), and at the
 * last step --steps. */
static int is_eval_step(const run_config *c, uint64_t s)
{
    const uint64_t early = c->eval_every >= 4 ? c->eval_every / 4 : 1;
    return s % c->eval_every == 0 || s == c->steps || (s < c->eval_every && s % early == 0);
}

/* Evaluation steps in (from, to]. */
static uint64_t evals_between(const run_config *c, uint64_t from, uint64_t to)
{
    if (to <= from)
        return 0;
    const uint64_t early = c->eval_every >= 4 ? c->eval_every / 4 : 1;
    uint64_t n = to / c->eval_every - from / c->eval_every; /* multiples of eval_every */
    const uint64_t lim = to < c->eval_every - 1 ? to : c->eval_every - 1; /* early ones */
    if (lim > from)
        n += lim / early - from / early;
    if (to == c->steps && c->steps % c->eval_every != 0 &&
        !(c->steps < c->eval_every && c->steps % early == 0))
        n++; /* the last step */
    return n;
}

/* Seconds left to --steps (or the stop step `end`): the remaining steps at the training
 * speed this process measured (done steps over train_s seconds, evaluation excluded), the
 * remaining evaluations at their measured mean cost (n_eval of them took eval_s), plus
 * the final one after a stop between evaluations. NaN while nothing is measured. */
static double time_left(const run_config *c, uint64_t step, uint64_t end, uint64_t done,
                        double train_s, double eval_s, unsigned long n_eval)
{
    if (done == 0 || train_s <= 0)
        return NAN;
    /* before any evaluation is measured: a forward costs about a third of a training
     * step (forward + backward) of as many examples */
    double per_eval = n_eval ? eval_s / (double)n_eval
                             : train_s / (double)done / 3 * (double)c->eval_size /
                                   (double)c->batch;
    double evals = (double)evals_between(c, step, end);
    if (end < c->steps && !is_eval_step(c, end))
        evals += 1; /* evaluated after the loop */
    return (double)(end - step) * train_s / (double)done + evals * per_eval;
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* What the loop keeps between steps besides the run state. */
typedef struct train_loop {
    run_state *rs;
    size_t n_params;
    char csv_path[CLI_PATH_CAP + 64], ckpt_path[CLI_PATH_CAP + 64],
        sum_path[CLI_PATH_CAP + 64], svg_path[CLI_PATH_CAP + 64];
    const char *last_ckpt; /* the last checkpoint of this run that exists: the one resumed
                              from, then each save (NULL: none yet)                      */
    mha_lr_schedule sched;
    report_progress prog;
    int tty;
    task_buffer ev, tr;   /* the held-out set, the training batch                        */
    report_csv csv;
    uint64_t end;         /* the last step of this process (--stop-after or --steps)     */
    uint64_t step0;       /* the step this process started at                            */
    double t_eval;        /* seconds spent in evaluations by this process, and how many  */
    unsigned long n_eval;
    double t_loop, t_eval_before; /* the loop's start; t_eval then (step 0's evaluation) */
    double last_tok, last_loss, acc_ema;
    double ev_tok, ev_seq, ev_loss; /* the evaluation of step ev_step                    */
    double last_seq;      /* the sequence accuracy of the last evaluation               */
    uint64_t ev_step;
    double win_s;         /* training seconds and steps since the last progress line     */
    uint64_t win_steps;
    char intact[CLI_PATH_CAP + 128]; /* what a stop leaves behind, for its message       */
} train_loop;

/* Model FLOPs of one training step of `batch` examples, counting each multiply-add of a
 * matrix product as 2 and backward as twice forward (3× forward in all), as mha-gpt
 * does: per example and layer 4·D²·(S + Sk) (Q and the output projection on the S
 * queries, K and V on the Sk keys; Sk = S in self-attention) and 4·S·Sk·D (Q·Kᵀ, P·V),
 * and 2·S·D·V for the read-out. */
static double step_flops(const tm_config *m, size_t batch)
{
    const double D = (double)m->model_dim, S = (double)m->seq_len;
    const double Sk = m->ctx_len ? (double)m->ctx_len : S;
    const double fwd = (double)m->layers * (4 * D * D * (S + Sk) + 4 * S * Sk * D) +
                       2 * S * D * (double)m->vocab_out;
    return 3 * fwd * (double)batch;
}

/* The header lines (first: building the evaluation set can take a while). */
static void print_header(const train_loop *tl, const resume_info *ri)
{
    const run_config *cfg = &tl->rs->cfg;
    printf("mha-train: task %s (seq-len %zu, vocab %zu%s), %zu layer(s), D %zu, H %zu, "
           "%zu parameters\n", task_name((task_kind)cfg->task), cfg->seq_len, cfg->vocab,
           cfg->task == TASK_LOOKUP ? ", lookup pairs" : "", cfg->layers, cfg->model_dim,
           cfg->heads, tl->n_params);
    if (cfg->task == TASK_LOOKUP)
        printf("  lookup: %zu key-value pairs in the context\n", cfg->pairs);
    printf("  %s, lr %g (warm-up %llu, cosine to %g), batch %zu, %llu steps, seed %llu, "
           "threads %d, out %s\n", TOY_OPTIM_NAMES[cfg->optimizer], cfg->lr,
           (unsigned long long)cfg->warmup, cfg->min_lr, cfg->batch,
           (unsigned long long)cfg->steps, (unsigned long long)cfg->seed, cfg->threads,
           cfg->out);
    if (cfg->resume[0])
        printf("  resumed from %s at step %llu%s\n", cfg->resume,
               (unsigned long long)tl->rs->step,
               ri->steps != cfg->steps ? " (--steps changed: the remaining steps follow the "
                                         "schedule of the new --steps)" : "");
    char note[PEAK_PATH_CAP + 128];
    peak_best_note(&tl->rs->peak_src, note, sizeof note);
    if (tl->rs->peak > 0)
        printf("  measured peak %.0f GFLOP/s (fp32, %d thread(s)%s): the MFU's denominator, "
               "%.3g GFLOP a step\n", tl->rs->peak, tl->rs->n_threads, note,
               tl->rs->flops_step * 1e-9);
    fflush(stdout);
}

/* Paths, header, the held-out set (its own generator stream, disjoint from training by
 * hash class) and its accuracy before training, signal handlers, the CSV log. */
static void loop_open(train_loop *tl, run_state *rs, const resume_info *ri, size_t n_params)
{
    const run_config *cfg = &rs->cfg;
    memset(tl, 0, sizeof *tl);
    tl->rs = rs;
    tl->n_params = n_params;
    snprintf(tl->csv_path, sizeof tl->csv_path, "%s/train_log.csv", cfg->out);
    snprintf(tl->ckpt_path, sizeof tl->ckpt_path, "%s/checkpoint.safetensors", cfg->out);
    snprintf(tl->sum_path, sizeof tl->sum_path, "%s/summary.json", cfg->out);
    snprintf(tl->svg_path, sizeof tl->svg_path, "%s/loss.svg", cfg->out);
    tl->last_ckpt = cfg->resume[0] ? cfg->resume : NULL;
    tl->sched = (mha_lr_schedule){.base_lr = cfg->lr, .min_lr = cfg->min_lr,
                                  .warmup_steps = cfg->warmup, .total_steps = cfg->steps};
    rs->flops_step = step_flops(&rs->mcfg, cfg->batch);
    peak_training_best(0, rs->n_threads, 1, &rs->peak_src); /* fastest kept (peak.h) */
    rs->peak = rs->peak_src.gflops;
    print_header(tl, ri);
    report_progress_start(&tl->prog);
    report_progress_mode(&tl->prog, cfg->progress, 0);
    tl->tty = tl->prog.tty;

    report_progress_show(&tl->prog, "%sbuilding the evaluation set (%zu examples)...",
                         tl->tty ? "  " : "", cfg->eval_size);
    cli_check(task_buffer_init(&tl->ev, &rs->spec, cfg->eval_size), "evaluation set");
    cli_check(task_buffer_init(&tl->tr, &rs->spec, cfg->batch), "training batch");
    mha_pcg32 ev_rng;
    mha_pcg32_seed(&ev_rng, cfg->seed, TASK_STREAM_EVAL);
    cli_check(task_fill(&rs->spec, &ev_rng, TASK_EVAL, &tl->ev, 0, cfg->eval_size),
              "evaluation set");
    if (rs->step == 0) { /* held-out accuracy before training: the curve's first point */
        double el, t = report_now();
        report_progress_show(&tl->prog, "%sevaluating (step 0, %zu examples)...",
                             tl->tty ? "  " : "", cfg->eval_size);
        evaluate(rs, &tl->ev, &rs->hist.init[H_TOK], &rs->hist.init[H_SEQ], &el);
        tl->t_eval += report_now() - t;
        tl->n_eval++;
    }
    report_catch_stop_signals();
    report_csv_open(&tl->csv, tl->csv_path, CSV_HEADER, CSV_FMTS, &rs->hist, rs->step,
                    rs->run_id, cfg->resume, cfg->force);

    tl->end = (cfg->stop_after && cfg->stop_after < cfg->steps) ? cfg->stop_after : cfg->steps;
    tl->t_loop = report_now();
    tl->t_eval_before = tl->t_eval; /* the evaluation at step 0 is not in the loop */
    tl->last_tok = tl->last_seq = tl->last_loss = tl->acc_ema = NAN;
    tl->ev_tok = tl->ev_seq = tl->ev_loss = NAN;
    tl->ev_step = UINT64_MAX;
    tl->step0 = rs->step;
}

/* Print why training stopped at the coming step (a non-finite `what`), and what is left. */
static void report_nonfinite(const train_loop *tl, const char *what)
{
    fprintf(stderr, "%s%s: stopped at step %llu: %s; try a smaller --lr or --clip. %s\n",
            tl->tty ? "\n" : "", cli_program(), (unsigned long long)tl->rs->step + 1, what,
            tl->intact);
}

/* One training step on a fresh batch: forward, accuracy, backward, clipping and the
 * update at the schedule's rate. 1 if it stopped on a non-finite loss, gradient or
 * update (reported; the step not counted), else 0 with *loss, *lr and *gn set. */
static int train_step(train_loop *tl, double *loss, double *lr, double *gn)
{
    run_state *rs = tl->rs;
    const run_config *cfg = &rs->cfg;
    cli_check(task_fill(&rs->spec, &rs->data_rng, TASK_TRAIN, &tl->tr, 0, cfg->batch),
              "training data");
    tm_batch b = task_view(&tl->tr, 0, cfg->batch);
    *gn = 0;
    if (tl->last_ckpt)
        snprintf(tl->intact, sizeof tl->intact, "The last checkpoint (%s) is intact.",
                 tl->last_ckpt);
    else
        snprintf(tl->intact, sizeof tl->intact, "No checkpoint was written (--ckpt-every %llu).",
                 (unsigned long long)cfg->ckpt_every);
    cli_check(tm_zero_grad(rs->model), "zero_grad");
    cli_check(tm_forward(rs->model, &b, 1, loss), "forward");
    if (!isfinite(*loss)) {
        char what[64];
        snprintf(what, sizeof what, "the training loss is %g (non-finite)", *loss);
        report_nonfinite(tl, what);
        return 1;
    }
    size_t tc, ts, sc;
    cli_check(tm_accuracy(rs->model, &b, &tc, &ts, &sc), "accuracy");
    double acc = ts ? (double)tc / (double)ts : 0;
    tl->acc_ema = isfinite(tl->acc_ema) ? 0.9 * tl->acc_ema + 0.1 * acc : acc;
    cli_check(tm_backward(rs->model, &b), "backward");
    int st = mha_optim_clip_grad_norm(rs->opt, cfg->clip, gn);
    if (st == MHA_OK)
        st = mha_lr_at(&tl->sched, rs->step, lr);
    if (st == MHA_OK)
        st = mha_optim_step(rs->opt, *lr);
    if (st == MHA_ENONFINITE) {
        report_nonfinite(tl, "a gradient is non-finite (NaN or inf)");
        return 1;
    }
    cli_check(st, "optimizer step");
    if (!toy_params_finite(rs)) {
        report_nonfinite(tl, "a parameter or optimizer moment became non-finite (NaN or inf) "
                             "in the update");
        return 1;
    }
    return 0;
}

/* The progress line after a step: on a terminal the live line (each evaluation keeps its
 * line), in a log a plain line at each evaluation (tok, seq NaN otherwise), in the format
 * of every training program: the step's loss, the training accuracy (smoothed), the last
 * held-out accuracy, the speed of the training steps since the last line (ms a step,
 * MFU, tokens/s; evaluations excluded), the time left and spent. The time left: the
 * remaining steps at this process's training speed, plus the remaining evaluations (the
 * final one included) at their measured mean cost. */
static void show_progress(train_loop *tl, double loss, double lr, double tok)
{
    const run_state *rs = tl->rs;
    const run_config *cfg = &rs->cfg;
    const int eval_now = isfinite(tok);
    if (!eval_now && !(tl->tty && report_progress_due(&tl->prog, rs->step == tl->end)))
        return;
    const double now = report_now(), t = now - tl->t_loop;
    char left[32], els[32], evs[48] = "-", mfu[32] = "";
    report_duration(time_left(cfg, rs->step, tl->end, rs->step - tl->step0,
                              t - (tl->t_eval - tl->t_eval_before), tl->t_eval, tl->n_eval),
                    left, sizeof left);
    report_duration(rs->elapsed0 + now - rs->t_start, els, sizeof els);
    if (isfinite(tl->last_tok))
        snprintf(evs, sizeof evs, "%.2f%% (sequence %.2f%%)", 100 * tl->last_tok,
                 100 * tl->last_seq);
    const double ms = tl->win_steps ? 1e3 * tl->win_s / (double)tl->win_steps : 0;
    if (ms > 0 && rs->peak > 0)
        snprintf(mfu, sizeof mfu, "  MFU %.1f%%", 100 * rs->flops_step / (ms * 1e-3) /
                                                      (rs->peak * 1e9));
    /* the most wanted first: a terminal narrower than the line cuts its end */
    report_progress_show(&tl->prog, "%sstep %llu/%llu  loss %.4f  acc %.1f%%  held-out %s  "
                         "lr %.2e  %.1f ms/step%s  left %s  elapsed %s  %.0f tok/s",
                         tl->tty ? "  " : "", (unsigned long long)rs->step,
                         (unsigned long long)cfg->steps, loss, 100 * tl->acc_ema, evs, lr, ms,
                         mfu, left, els,
                         ms > 0 ? (double)(cfg->batch * rs->mcfg.seq_len) / (ms * 1e-3) : 0);
    tl->win_s = 0;
    tl->win_steps = 0;
    if (eval_now)
        report_progress_end(&tl->prog);
}

/* After a completed step: the evaluation if due, the history and CSV row, a checkpoint
 * every --ckpt-every steps (not at the last: the end saves), the progress line. */
static void after_step(train_loop *tl, double loss, double lr, double gn, double step_s)
{
    run_state *rs = tl->rs;
    const run_config *cfg = &rs->cfg;
    rs->step++;
    tl->last_loss = loss;
    double tok = NAN, seq = NAN;
    if (is_eval_step(cfg, rs->step)) {
        double t = report_now();
        if (tl->tty)
            report_progress_show(&tl->prog, "  step %llu/%llu  evaluating (%zu examples)...",
                                 (unsigned long long)rs->step, (unsigned long long)cfg->steps,
                                 cfg->eval_size);
        evaluate(rs, &tl->ev, &tok, &seq, &tl->ev_loss);
        tl->t_eval += report_now() - t;
        tl->n_eval++;
        tl->last_tok = tl->ev_tok = tok;
        tl->last_seq = tl->ev_seq = seq;
        tl->ev_step = rs->step;
    }
    const double tokens = (double)(cfg->batch * rs->mcfg.seq_len);
    const double row[H_COLS] = {loss, lr, gn, tok, seq,
                                rs->elapsed0 + report_now() - rs->t_start, tokens / step_s};
    report_history_push(&rs->hist, row);
    report_csv_row(&tl->csv, rs->step, row, H_COLS);
    if (cfg->ckpt_every && rs->step % cfg->ckpt_every == 0 && rs->step != tl->end) {
        report_csv_flush(&tl->csv);
        if (save_checkpoint(rs, tl->ckpt_path) != MHA_OK)
            cli_die(CLI_EXIT_RUNTIME, "stopping: checkpoint failed");
        tl->last_ckpt = tl->ckpt_path;
    }
    show_progress(tl, loss, lr, tok);
}

/* The end of a run that did not stop on a non-finite value: the checkpoint, the final
 * evaluation (unless the last step had one), pictures, example.json, summary.json and
 * the closing lines. Returns the exit status (128 + the signal that stopped it, or 0). */
static int loop_finish(train_loop *tl)
{
    run_state *rs = tl->rs;
    const run_config *cfg = &rs->cfg;
    if (save_checkpoint(rs, tl->ckpt_path) != MHA_OK)
        return 1;
    if (tl->ev_step != rs->step) { /* the loop's last step was not an evaluation step */
        if (tl->tty)
            report_progress_show(&tl->prog, "  step %llu/%llu  evaluating (%zu examples)...",
                                 (unsigned long long)rs->step, (unsigned long long)cfg->steps,
                                 cfg->eval_size);
        evaluate(rs, &tl->ev, &tl->ev_tok, &tl->ev_seq, &tl->ev_loss);
    }
    report_progress_end(&tl->prog);
    write_loss_svg(rs, tl->svg_path);
    char att[TM_MAX_LAYERS][CLI_PATH_CAP + 64];
    const int heatmaps = cfg->attention == MHA_ATTN_STORED; /* recompute keeps no weights */
    if (heatmaps)
        write_attention_svgs(rs, &tl->ev, att, cfg->out);
    report_remove_stale_numbered(cfg->out, "attention_layer", heatmaps ? cfg->layers : 0,
                                 ".svg");
    char ex_path[CLI_PATH_CAP + 32];
    snprintf(ex_path, sizeof ex_path, "%s/example.json", cfg->out);
    write_example_json(rs, &tl->ev, ex_path);
    /* the whole run's time: earlier processes of a resumed run, and all of this one up to
     * its last file */
    const double wall = rs->elapsed0 + (report_now() - rs->t_start);
    write_summary(rs, tl->sum_path, wall, tl->ev_tok, tl->ev_seq, tl->ev_loss, tl->last_loss,
                  tl->n_params, rs->step < cfg->steps);

    const int sig = report_stop_signal();
    char walls[32];
    report_duration(wall, walls, sizeof walls);
    if (rs->step < cfg->steps)
        printf("stopped after step %llu of %llu (%s); continue with --resume %s\n",
               (unsigned long long)rs->step, (unsigned long long)cfg->steps,
               sig ? report_signal_name(sig) : "--stop-after", tl->ckpt_path);
    printf("held-out accuracy (%zu examples): token %.2f%%, sequence %.2f%%  (%.1f s = %s%s)\n",
           cfg->eval_size, 100 * tl->ev_tok, 100 * tl->ev_seq, wall, walls,
           rs->elapsed0 > 0 ? ", the whole run" : "");
    printf("pictures: %s", tl->svg_path);
    for (size_t l = 0; heatmaps && l < cfg->layers; l++)
        printf(", %s", att[l]);
    if (!heatmaps)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s  checkpoint: %s\n", tl->csv_path, tl->sum_path,
           tl->ckpt_path);
    return sig ? 128 + sig : 0;
}

int toy_train(run_state *rs, const resume_info *ri, size_t n_params)
{
    train_loop tl;
    loop_open(&tl, rs, ri, n_params);
    int stopped_nonfinite = 0;
    while (rs->step < tl.end) {
        double loss, lr, gn;
        const double ts = report_now();
        if (train_step(&tl, &loss, &lr, &gn)) {
            stopped_nonfinite = 1;
            break;
        }
        const double step_s = report_now() - ts;
        tl.win_s += step_s;
        tl.win_steps++;
        rs->train_s += step_s;
        rs->train_steps++;
        after_step(&tl, loss, lr, gn, step_s);
        if (report_stop_signal())
            break; /* finish as at --stop-after; a second signal ends the process */
    }
    report_csv_close(&tl.csv);
    int status = CLI_EXIT_NONFINITE;
    if (stopped_nonfinite)
        report_progress_end(&tl.prog);
    else
        status = loop_finish(&tl);
    task_buffer_free(&tl.ev);
    task_buffer_free(&tl.tr);
    return status;
}
