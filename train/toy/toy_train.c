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

/* ---- the loop ---------------------------------------------------------------------------- */

/* What the loop keeps besides the run state and the trainer (rs->loop). */
typedef struct toy_loop {
    run_state *rs;
    size_t n_params;
    char csv_path[CLI_PATH_CAP + 64], ckpt_path[CLI_PATH_CAP + 64],
        sum_path[CLI_PATH_CAP + 64], svg_path[CLI_PATH_CAP + 64];
    char eval_what[48];   /* the progress line's " (N examples)"                        */
    report_progress prog;
    task_buffer ev, tr;   /* the held-out set, the training batch                        */
    tm_batch b;           /* the step's batch (a view of tr)                             */
    report_csv csv;
    double last_loss, acc_ema; /* the last step's loss; the training accuracy, smoothed   */
    double ev_loss;       /* the mean loss of the last evaluation                        */
} toy_loop;

/* the history's columns are the trainer's row (trainer.h) with two evaluation columns */
_Static_assert((int)H_LOSS == (int)TRAIN_COL_LOSS && (int)H_LR == (int)TRAIN_COL_LR &&
                   (int)H_GN == (int)TRAIN_COL_GN && (int)H_TOK == (int)TRAIN_COL_EVAL &&
                   (int)H_COLS == (int)TRAIN_COL_EVAL + 2 + 2,
               "the history's columns are the trainer's row");

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
static void print_header(const toy_loop *tl, const resume_info *ri)
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
    train_say_run_state(cfg->resume, tl->rs->step, ri->steps, cfg->steps, &tl->rs->peak_src,
                        tl->rs->peak, "fp32", tl->rs->n_threads, 1, tl->rs->flops_step);
}

/* ---- the trainer's hooks (trainer.h) --------------------------------------------------- */

/* A fresh batch from the training stream, forward: its loss, its query positions as the
 * work, its model FLOPs. */
static void forward(void *ctx, double *loss, double *work, double *flops)
{
    toy_loop *tl = ctx;
    run_state *rs = tl->rs;
    cli_check(task_fill(&rs->spec, &rs->data_rng, TASK_TRAIN, &tl->tr, 0, rs->cfg.batch),
              "training data");
    tl->b = task_view(&tl->tr, 0, rs->cfg.batch);
    cli_check(tm_zero_grad(rs->model), "zero_grad");
    cli_check(tm_forward(rs->model, &tl->b, 1, loss), "forward");
    tl->last_loss = *loss;
    *work = (double)(rs->cfg.batch * rs->mcfg.seq_len);
    *flops = rs->flops_step;
}

/* The batch's accuracy (the progress line's, smoothed), backward. */
static void backward(void *ctx)
{
    toy_loop *tl = ctx;
    run_state *rs = tl->rs;
    size_t tc, ts, sc;
    cli_check(tm_accuracy(rs->model, &tl->b, &tc, &ts, &sc), "accuracy");
    const double acc = ts ? (double)tc / (double)ts : 0;
    tl->acc_ema = isfinite(tl->acc_ema) ? 0.9 * tl->acc_ema + 0.1 * acc : acc;
    cli_check(tm_backward(rs->model, &tl->b), "backward");
}

/* The held-out token and sequence accuracy into row[H_TOK], row[H_SEQ]. */
static int evaluate_row(void *ctx, double *row)
{
    toy_loop *tl = ctx;
    evaluate(tl->rs, &tl->ev, &row[H_TOK], &row[H_SEQ], &tl->ev_loss);
    return 0;
}

/* The latest checkpoint (there is no best one). */
static void save(void *ctx, const char *path, int kind)
{
    (void)kind;
    toy_loop *tl = ctx;
    if (save_checkpoint(tl->rs, path) != MHA_OK)
        train_loop_save_failed(&tl->rs->loop);
}

/* "acc 97.5%  held-out 96.10% (sequence 80.20%)": the training accuracy (smoothed) and the
 * last held-out accuracy ("-" before any). */
static void describe(void *ctx, const double *last, char *buf, size_t cap)
{
    const toy_loop *tl = ctx;
    char evs[48];
    train_describe(evs, sizeof evs, "", last[H_TOK], "%.2f%% (sequence %.2f%%)",
                   100 * last[H_TOK], 100 * last[H_SEQ]);
    snprintf(buf, cap, "acc %.1f%%  held-out %s", 100 * tl->acc_ema, evs);
}

/* ---- a run ------------------------------------------------------------------------------- */

/* Paths, header, the held-out set (its own generator stream, disjoint from training by
 * hash class) and its accuracy before training, signal handlers, the CSV log, the
 * trainer. */
static void loop_open(toy_loop *tl, run_state *rs, const resume_info *ri, size_t n_params)
{
    const run_config *cfg = &rs->cfg;
    memset(tl, 0, sizeof *tl);
    tl->rs = rs;
    tl->n_params = n_params;
    snprintf(tl->ckpt_path, sizeof tl->ckpt_path, "%s/checkpoint.safetensors", cfg->out);
    snprintf(tl->sum_path, sizeof tl->sum_path, "%s/summary.json", cfg->out);
    snprintf(tl->svg_path, sizeof tl->svg_path, "%s/loss.svg", cfg->out);
    snprintf(tl->eval_what, sizeof tl->eval_what, " (%zu examples)", cfg->eval_size);
    rs->flops_step = step_flops(&rs->mcfg, cfg->batch);
    peak_training_best(0, rs->n_threads, 1, &rs->peak_src); /* fastest kept (peak.h) */
    rs->peak = rs->peak_src.gflops;
    print_header(tl, ri);
    report_progress_start(&tl->prog, cfg->progress, 0);

    train_loop *L = &rs->loop;
    train_loop_init(L);
    report_progress_show(&tl->prog, "%sbuilding the evaluation set (%zu examples)...",
                         tl->prog.tty ? "  " : "", cfg->eval_size);
    cli_check(task_buffer_init(&tl->ev, &rs->spec, cfg->eval_size), "evaluation set");
    cli_check(task_buffer_init(&tl->tr, &rs->spec, cfg->batch), "training batch");
    mha_pcg32 ev_rng;
    mha_pcg32_seed(&ev_rng, cfg->seed, TASK_STREAM_EVAL);
    cli_check(task_fill(&rs->spec, &ev_rng, TASK_EVAL, &tl->ev, 0, cfg->eval_size),
              "evaluation set");
    tl->last_loss = tl->acc_ema = tl->ev_loss = NAN;
    if (rs->step == 0) { /* held-out accuracy before training: the curve's first point */
        double el, t = report_now();
        report_progress_show(&tl->prog, "%sevaluating (step 0, %zu examples)...",
                             tl->prog.tty ? "  " : "", cfg->eval_size);
        evaluate(rs, &tl->ev, &rs->hist.init[H_TOK], &rs->hist.init[H_SEQ], &el);
        L->eval_s += report_now() - t; /* its cost counts in the time left */
        L->n_evals++;
    }
    train_loop_open_log(L, &(train_log){cfg->out, 1, &rs->hist, &tl->csv, rs->step, CSV_HEADER,
                                        CSV_FMTS, rs->run_id, cfg->resume, cfg->force},
                        tl->csv_path, sizeof tl->csv_path);
    train_loop_plan(L, &(train_hooks){tl, forward, backward, evaluate_row, save, describe, NULL},
                    rs->opt, rs->pt, rs->n_pt, &rs->step, &TRAIN_PLAN_OF(cfg));
    L->early_evals = 1;
    L->final_eval = 1;
    /* no best checkpoint; an evaluation: forwards, a third of a step per batch */
    train_loop_report(L, &(train_report){2, -1, NULL, NULL,
                                         (double)cfg->eval_size / (double)cfg->batch / 3,
                                         tl->ckpt_path, NULL, "tok", tl->eval_what, rs->peak,
                                         rs->elapsed0, rs->t_start, &tl->prog});
}

/* The end of a run that did not stop on a non-finite value: the checkpoint, the final
 * evaluation (unless the last step had one), pictures, example.json, summary.json and
 * the closing lines. Returns the exit status (128 + the signal that stopped it, or 0). */
static int loop_finish(toy_loop *tl)
{
    run_state *rs = tl->rs;
    const run_config *cfg = &rs->cfg;
    train_loop *L = &rs->loop;
    train_loop_close(L);
    double ev_tok = L->last[H_TOK], ev_seq = L->last[H_SEQ];
    if (L->last_eval_step != rs->step) { /* the loop's last step was not an evaluation step */
        if (tl->prog.tty)
            report_progress_show(&tl->prog, "  step %llu/%llu  evaluating (%zu examples)...",
                                 (unsigned long long)rs->step, (unsigned long long)cfg->steps,
                                 cfg->eval_size);
        evaluate(rs, &tl->ev, &ev_tok, &ev_seq, &tl->ev_loss);
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
    write_summary(rs, tl->sum_path, wall, ev_tok, ev_seq, tl->ev_loss, tl->last_loss,
                  tl->n_params, rs->step < cfg->steps);

    char walls[32];
    report_duration(wall, walls, sizeof walls);
    train_say_stopped(L, tl->ckpt_path);
    printf("held-out accuracy (%zu examples): token %.2f%%, sequence %.2f%%  (%.1f s = %s%s)\n",
           cfg->eval_size, 100 * ev_tok, 100 * ev_seq, wall, walls,
           rs->elapsed0 > 0 ? ", the whole run" : "");
    printf("pictures: %s", tl->svg_path);
    for (size_t l = 0; heatmaps && l < cfg->layers; l++)
        printf(", %s", att[l]);
    if (!heatmaps)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s  checkpoint: %s\n", tl->csv_path, tl->sum_path,
           tl->ckpt_path);
    const int sig = report_stop_signal();
    return sig ? 128 + sig : 0;
}

int toy_train(run_state *rs, const resume_info *ri, size_t n_params)
{
    toy_loop tl;
    loop_open(&tl, rs, ri, n_params);
    int status = train_loop_run(&rs->loop);
    if (status == 0)
        status = loop_finish(&tl);
    task_buffer_free(&tl.ev);
    task_buffer_free(&tl.tr);
    return status;
}
