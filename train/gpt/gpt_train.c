/*
 * mha-gpt train: AdamW on random windows of a text, evaluation of both splits on fixed
 * windows, checkpoints (latest and best validation), logs, pictures and a sample.
 *
 * Per step: B windows of T+1 characters from PCG32(seed, TEXT_STREAM_BATCH) over the
 * training part; mean cross-entropy; backward; global-norm clip; lr from warm-up +
 * cosine (mha_lr_at); AdamW step. Every --eval-every steps and at the last step: the
 * mean loss over the fixed --eval-batches batches of each split (eval mode).
 * A single-thread run resumed from a checkpoint continues bit for bit: the checkpoint
 * holds the weights, AdamW's moments and step, the batch generator, the dropout call
 * index and the best validation loss.
 * Under mpirun (mha-gpt-mpi, train/common/dist.h) every rank draws the same B windows and trains
 * on its slice of them; gradients and losses are summed across ranks weighted by each
 * slice's share of B, the evaluation windows are split among the ranks, and rank 0 alone
 * writes files. Checkpoints do not depend on the number of ranks.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <unistd.h>

#include "gpt_train.h"
#include "peak.h"

/* the history's columns are the trainer's row (trainer.h) with two evaluation columns */
_Static_assert((int)H_LOSS == (int)TRAIN_COL_LOSS && (int)H_LR == (int)TRAIN_COL_LR &&
                   (int)H_GN == (int)TRAIN_COL_GN && (int)H_EVTR == (int)TRAIN_COL_EVAL &&
                   (int)H_COLS == (int)TRAIN_COL_EVAL + 2 + 2,
               "the history's columns are the trainer's row");

/* The log's columns (history columns H_* in gpt_train.h). */
static const char *const CSV_HEADER =
    "step,train_loss,lr,grad_norm,eval_train_loss,eval_val_loss,time_s,tokens_per_s";
static const char *const CSV_FMTS[H_COLS] = {"%.17g", "%.17g", "%.17g", "%.17g",
                                             "%.17g", "%.3f",  "%.0f"};

/* ---- evaluation -------------------------------------------------------------------------- */

/* Mean loss over the fixed evaluation windows of part p (eval mode: no dropout): the mean
 * of the --eval-batches batch means; *stopped = 1 (and NAN) when a stop signal came. The windows are split among the ranks, each running
 * its share in chunks of at most cap_b windows; a chunk's mean counts with weight
 * (its windows / B), so that one rank (chunks of B) sums exactly the batch means. */
static double evaluate(trainer *t, int p, int *stopped)
{
    const size_t B = t->cfg.batch, T = t->cfg.context, n = t->cfg.eval_batches * B;
    char err[256];
    size_t w0, wn;
    dist_share(n, &w0, &wn);
    double sum = 0;
    for (size_t w = w0; w < w0 + wn; w += t->cap_b) {
        /* a stop signal ends a long evaluation at once (one process: with several, the
         * ranks' chunks differ, and they finish theirs to meet in the sum below) */
        if (dist_size() == 1 && report_stop_signal()) {
            *stopped = 1;
            return NAN;
        }
        const size_t m = w0 + wn - w < t->cap_b ? w0 + wn - w : t->cap_b;
        double l;
        cli_check(text_windows(t->ids[p], t->len[p], T, t->ev_off[p] + w, m, t->tok, t->tgt,
                               err, sizeof err), "evaluation windows");
        cli_check(mha_gpt_forward(t->r.g, 0, m, T, t->tok, t->tgt, &l), "evaluation forward");
        sum += m == B ? l : l * ((double)m / (double)B);
    }
    dist_sum(&sum, 1);
    return sum / (double)t->cfg.eval_batches;
}

/* The trainer's evaluate hook: both splits into row[H_EVTR], row[H_EVVA]; 1 (nothing
 * written) when a stop signal cut it short. */
static int evaluate_both(void *ctx, double *row)
{
    trainer *t = ctx;
    int stopped = 0;
    const double tr = evaluate(t, 0, &stopped), va = stopped ? NAN : evaluate(t, 1, &stopped);
    if (stopped)
        return 1;
    row[H_EVTR] = tr;
    row[H_EVVA] = va;
    return 0;
}

/* ---- setup ----------------------------------------------------------------------------- */

/* Load the text (exit 2 if unusable) and make the batch buffers and evaluation windows. */
static void load_data(trainer *t)
{
    const gpt_run_config *c = &t->cfg;
    char err[CLI_PATH_CAP + 256] = "";
    int st = text_load(c->data, c->utf8 ? TEXT_UTF8 : TEXT_BYTES, GPT_MAX_VOCAB, c->context,
                       &t->corpus, err, sizeof err);
    if (st != MHA_OK)
        cli_die(st == MHA_ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE, "cannot train on --data "
                "%s: %s", c->data, err);
    cli_check(text_vocab_format(text_corpus_vocab(t->corpus), &t->vocab_text, err, sizeof err),
              "vocabulary");
    const text_vocab *voc = text_corpus_vocab(t->corpus);
    if (!c->utf8 && dist_rank() == 0) { /* UTF-8 lead bytes: characters cut into bytes */
        size_t lead = 0;
        for (size_t i = 0; i < text_vocab_size(voc); i++)
            lead += text_vocab_symbol(voc, i) >= 0xC2 && text_vocab_symbol(voc, i) <= 0xF4;
        if (lead)
            fprintf(stderr, "%s: note: --data %s holds bytes of UTF-8 characters beyond ASCII; "
                    "in byte mode each byte is a symbol, and samples may show broken "
                    "characters (\xef\xbf\xbd): add --utf8 to model whole characters\n",
                    cli_program(), c->data);
    }
    for (int p = 0; p < 2; p++)
        t->ids[p] = text_corpus_part(t->corpus, p == 0 ? TEXT_TRAIN : TEXT_VAL, &t->len[p]);
}

/* The batch buffers and the fixed evaluation windows of both parts (--eval-batches ·
 * --batch offsets each): after the memory check, which counts them. */
static void make_windows(trainer *t)
{
    const gpt_run_config *c = &t->cfg;
    char err[CLI_PATH_CAP + 256] = "";
    int st;
    const size_t B = c->batch, T = c->context, ne = c->eval_batches * B;
    t->tok = malloc(B * T * sizeof *t->tok);
    t->tgt = malloc(B * T * sizeof *t->tgt);
    for (int p = 0; p < 2; p++) {
        t->ev_off[p] = malloc(ne * sizeof *t->ev_off[p]);
        if (!t->ev_off[p])
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        st = text_eval_offsets(t->len[p], T, ne, GPT_EVAL_SEED, t->ev_off[p], err, sizeof err);
        if (st != MHA_OK)
            cli_die(CLI_EXIT_USAGE, "cannot train on --data %s: %s", c->data, err);
    }
    if (!t->tok || !t->tgt)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
}

static void trainer_free(void *ctx)
{
    trainer *t = ctx;
    dist_grads_destroy(t->dg);
    gpt_run_destroy(&t->r);
    text_corpus_free(t->corpus);
    UTIL_FREE_ALL(t->vocab_text, t->ev_off[0], t->ev_off[1], t->tok, t->tgt);
    report_history_free(&t->hist);
}

/* ---- the command: setup ------------------------------------------------------------------ */

/* The options and, with --resume, the checkpoint's configuration and state; the checks
 * that need no data. Returns the open checkpoint (NULL without --resume). */
static mha_st_file *read_options(trainer *t, int argc, char **argv, int first, int *explicit_opt,
                                 char *what, size_t what_cap, int *n_threads)
{
    gpt_run_config *c = &t->cfg;
    gpt_defaults(c);
    train_parse(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, argc, argv, first, c, explicit_opt);
    mha_st_file *ck = NULL;
    text_vocab *ck_vocab = NULL;
    if (c->resume[0]) {
        snprintf(what, what_cap, "cannot resume from %s", c->resume);
        ck = gpt_open_checkpoint(c->resume, what, explicit_opt, c, &ck_vocab, &t->ck);
        if (!explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "out")])
            cli_dirname(c->resume, c->out, sizeof c->out); /* the checkpoint's directory */
        t->elapsed0 = t->ck.elapsed;
        t->ck_vocab_n = text_vocab_size(ck_vocab);
        text_vocab_free(ck_vocab);
    }
    if (c->dim % c->heads != 0)
        cli_die_usage("invalid value '%zu' for --heads: must divide --dim %zu", c->heads, c->dim);
    train_check_schedule(c->lr, c->min_lr, &c->warmup, c->steps,
                         explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "warmup")],
                         dist_rank() == 0);
    const int threads_given = explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "threads")];
    if (dist_size() > 1 && !threads_given)
        c->threads = 1; /* the ranks share the cores */
    *n_threads = cli_check_threads(c->threads, threads_given || !c->resume[0]);
    cli_check_precision(c->precision,
                        explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "precision")] ||
                            !c->resume[0]);
    if ((size_t)dist_size() > c->batch)
        cli_die_usage("invalid value '%zu' for --batch: less than the %d ranks (each rank "
                      "trains on a share of the batch's windows)", c->batch, dist_size());
    return ck;
}

/* With a checkpoint: its vocabulary must be the text's, and --steps beyond its step.
 * Returns 1 when the run is finished already (nothing to do: said on stdout). */
static int check_resume(const trainer *t, const mha_st_file *ck, const char *what)
{
    const gpt_run_config *c = &t->cfg;
    if (strcmp(mha_st_meta(ck, "vocab"), t->vocab_text) != 0) {
        cli_die(CLI_EXIT_USAGE, "%s: the vocabulary of --data %s (%zu characters) differs from "
                "the checkpoint's (%zu)", what, c->data,
                text_vocab_size(text_corpus_vocab(t->corpus)), t->ck_vocab_n);
    }
    return train_resume_finished(c->resume, t->ck.step, c->steps);
}

/* The run's id (the checkpoint's; one from before run ids gets a new one); rank 0 makes
 * --out and claims it: no other process in it, no other run's checkpoints (exit 2). */
static void claim_out_dir(trainer *t, const mha_st_file *ck)
{
    const gpt_run_config *c = &t->cfg;
    rundir_start(c->out, c->resume, ck ? mha_st_meta(ck, "run_id") : NULL, c->force, t->rank0,
                 t->run_id);
}

/* The model, AdamW and the batch generator, from the checkpoint when there is one (then
 * closed), the same on every rank; the gradient exchange. */
static void build_model(trainer *t, mha_st_file *ck, const char *what, int n_threads)
{
    const gpt_run_config *c = &t->cfg;
    openblas_set_num_threads(n_threads);
    /* the optimizer and clipping run on the caller's OpenMP setting (the model sets its own
     * around each call): --threads 1 means one thread for the whole step (same bits) */
    omp_set_num_threads(n_threads);
    const size_t V = text_vocab_size(text_corpus_vocab(t->corpus));
    gpt_run_create(&t->r, c, V, t->cap_b, 1);
    mha_pcg32_seed(&t->rng, c->seed, TEXT_STREAM_BATCH);
    if (ck) {
        gpt_load_checkpoint(t, ck, what);
        mha_st_free(ck);
    }
    if (dist_size() > 1)
        gpt_share_rank0_state(t);
    /* this rank's windows are windows b_first.. of the step's batch: their dropout masks
     * are the ones one process training the whole batch draws */
    cli_check(mha_gpt_set_dropout_batch_offset(t->r.g, t->b_first), "model");
    t->dg = dist_grads_create(t->r.pt, t->r.n_pt, t->r.g, (dist_sync)c->grad_sync);
    if (!t->dg)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cli_check(mha_gpt_param_count(t->r.g, &t->n_params), "model");
}

/* Model FLOPs of one training step of the whole batch, counting each multiply-add of a
 * matrix product as 2 and backward as twice forward (3× forward in all), as nanoGPT's
 * MFU does: per token and block 24·C² (Q, K, V, the output projection and the MLP of
 * 4C) and 4·T·C (Q·Kᵀ and P·V over the whole window), and 2·C·V for the read-out. */
static double step_flops(const gpt_run_config *c, size_t V)
{
    const double C = (double)c->dim, T = (double)c->context, L = (double)c->layers;
    const double fwd_per_token = L * (24 * C * C + 4 * T * C) + 2 * C * (double)V;
    return 3 * fwd_per_token * (double)c->batch * T;
}

/* Paths of the run's files in --out (the stale temporaries of saves were removed when the
 * directory was claimed: rundir_claim), the signals caught, the log opened (a resumed run's
 * rows read back into the history). */
static void open_outputs(trainer *t, report_csv *csv)
{
    const gpt_run_config *c = &t->cfg;
    if (t->rank0)
        report_make_dirs(c->out);
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s/checkpoint.safetensors", c->out);
    snprintf(t->best_path, sizeof t->best_path, "%s/best.safetensors", c->out);
    snprintf(t->sum_path, sizeof t->sum_path, "%s/summary.json", c->out);
    snprintf(t->svg_path, sizeof t->svg_path, "%s/loss.svg", c->out);
    snprintf(t->smp_path, sizeof t->smp_path, "%s/sample.txt", c->out);
    report_history_init(&t->hist, H_COLS);
    train_loop_open_log(&t->loop, &(train_log){c->out, t->rank0, &t->hist, csv, t->r.step,
                                               CSV_HEADER, CSV_FMTS, t->run_id, c->resume,
                                               c->force}, t->csv_path, sizeof t->csv_path);
}

static void print_header(const trainer *t)
{
    const gpt_run_config *c = &t->cfg;
    printf("mha-gpt train: %s (%zu characters%s, vocabulary %zu; train %zu, validation %zu)\n"
           "  %zu block(s), %zu heads, dim %zu, context %zu, %zu parameters, dropout %g\n"
           "  AdamW lr %g (warm-up %llu, cosine to %g), beta2 %g, weight decay %g%s, clip %g, "
           "batch %zu, %llu steps, seed %llu, threads %d, %s, out %s\n",
           c->data, text_corpus_len(t->corpus), c->utf8 ? ", UTF-8" : "",
           text_vocab_size(text_corpus_vocab(t->corpus)), t->len[0], t->len[1], c->layers,
           c->heads, c->dim, c->context, t->n_params, c->dropout, c->lr,
           (unsigned long long)c->warmup, c->min_lr, c->beta2, c->weight_decay,
           c->decay_all ? " (all tensors)" : " (matmul weights)", c->clip, c->batch,
           (unsigned long long)c->steps, (unsigned long long)c->seed, c->threads,
           CLI_PRECISION_NAMES[c->precision], c->out);
    if (dist_size() > 1)
        printf("  %d ranks (MPI), each with %zu or %zu of the %zu windows of a step, gradients "
               "summed %s\n", dist_size(), c->batch / (size_t)dist_size(), t->cap_b, c->batch,
               c->grad_sync == DIST_SYNC_OVERLAP ? "block by block during backward (overlap)"
                                                 : "after backward");
    train_say_run_state(c->resume, t->r.step, t->ck.made, c->steps, &t->clk.peak_src,
                        t->clk.peak, CLI_PRECISION_NAMES[c->precision], c->threads,
                        dist_size(), t->clk.flops_step);
}

/* The program's setup (train_program; ctx: the trainer): parse, check, read the data and
 * the checkpoint, agree across ranks, claim --out, build the model, open the log, say what
 * the run is. Returns 1 when there is nothing to do. */
static int setup(void *ctx, int argc, char **argv, int first)
{
    trainer *t = ctx;
    t->t_start = report_now();
    int explicit_opt[64] = {0};
    char what[CLI_PATH_CAP + 32];
    int n_threads;
    mha_st_file *ck = read_options(t, argc, argv, first, explicit_opt, what, sizeof what,
                               &n_threads);
    gpt_run_config *c = &t->cfg;
    t->rank0 = dist_rank() == 0;
    dist_share(c->batch, &t->b_first, &t->b_count);
    t->cap_b = (c->batch + (size_t)dist_size() - 1) / (size_t)dist_size();
    load_data(t);
    /* several ranks: the same options, text and checkpoint as rank 0, before any decision */
    dist_agree_inputs(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, c, c->data, c->resume);
    if (ck && check_resume(t, ck, what)) {
        mha_st_free(ck);
        return 1;
    }
    /* before anything large is allocated, and before the directory is claimed */
    gpt_check_memory(c, text_vocab_size(text_corpus_vocab(t->corpus)), t->cap_b,
                     text_corpus_len(t->corpus));
    make_windows(t);
    claim_out_dir(t, ck);
    build_model(t, ck, what, n_threads);
    open_outputs(t, &t->csv);
    /* the MFU's denominator: one process keeps the fastest measured on this CPU (peak.h);
     * ranks measure at once (they share the cores) and sum theirs */
    t->clk.flops_step = step_flops(c, text_vocab_size(text_corpus_vocab(t->corpus)));
    peak_training_best(c->precision == MHA_PRECISION_BF16, n_threads, dist_size() == 1,
                       &t->clk.peak_src);
    dist_sum(&t->clk.peak_src.measured, 1);
    t->clk.peak = dist_size() == 1 ? t->clk.peak_src.gflops : t->clk.peak_src.measured;
    if (t->rank0)
        print_header(t);
    return 0;
}

/* ---- the command: the loop's hooks (trainer.h) ------------------------------------------ */

/* The step's B windows, the same on every rank; this rank's slice of them forward: the
 * loss of the whole batch, its tokens as the work, its model FLOPs. */
static void forward(void *ctx, double *loss, double *work, double *flops)
{
    trainer *t = ctx;
    const gpt_run_config *c = &t->cfg;
    const size_t B = c->batch, T = c->context;
    char err[256];
    cli_check(text_batch(t->ids[0], t->len[0], B, T, &t->rng, t->tok, t->tgt, err, sizeof err),
              "training batch");
    cli_check(mha_gpt_zero_grad(t->r.g), "zero_grad");
    cli_check(mha_gpt_forward(t->r.g, 1, t->b_count, T, t->tok + t->b_first * T,
                              t->tgt + t->b_first * T, loss), "forward");
    if (dist_size() > 1) {
        *loss *= (double)t->b_count / (double)B; /* the global batch's mean: Σ_r share_r ·
                                                     mean_r */
        dist_sum(loss, 1);
    }
    *work = (double)(B * T);
    *flops = t->clk.flops_step;
}

/* Backward of this rank's slice; the gradients summed across ranks by their shares. */
static void backward(void *ctx)
{
    trainer *t = ctx;
    dist_grads_begin(t->dg, (double)t->b_count / (double)t->cfg.batch); /* 1 with one rank */
    cli_check(mha_gpt_backward(t->r.g), "backward");
    dist_grads_finish(t->dg);
}

/* Every rank saves (gpt_save_checkpoint: rank 0 writes); the best is a whole checkpoint. */
static void save(void *ctx, const char *path, int kind)
{
    (void)kind;
    trainer *t = ctx;
    if (gpt_save_checkpoint(t, path) != MHA_OK)
        train_loop_save_failed(&t->loop);
}

/* The progress line's validation loss: "val 1.2345", "val -" before any. */
static void describe(void *ctx, const double *last, char *buf, size_t cap)
{
    (void)ctx;
    train_describe(buf, cap, "val ", last[H_EVVA], "%.4f", last[H_EVVA]);
}

/* The plan hook (train_program): the loop set for this run, after setup. */
static void loop_setup(void *ctx)
{
    trainer *t = ctx;
    const gpt_run_config *c = &t->cfg;
    train_loop *L = &t->loop;
    report_progress_start(&t->prog, c->progress, dist_with_mpi());
    train_loop_plan(L, &(train_hooks){t, forward, backward, evaluate_both, save, describe,
                                      dist_max},
                    t->r.opt, t->r.pt, t->r.n_pt, &t->r.step, &TRAIN_PLAN_OF(c));
    snprintf(t->eval_what, sizeof t->eval_what, " (%zu batches per split)", c->eval_batches);
    /* an evaluation: forwards of both splits' batches, a third of a step each */
    train_loop_report(L, &(train_report){2, H_EVVA, &t->r.best_val, &t->r.best_step,
                                         2 * (double)c->eval_batches / 3, t->ckpt_path,
                                         t->best_path, "tok", t->eval_what, t->clk.peak,
                                         t->elapsed0, t->t_start, &t->prog});
}

/* After the loop: rank 0 writes the files and says what the run did; the other ranks wait
 * for it (mpirun ends the job when a rank exits non-zero, as after a signal). */
static void finish(void *ctx, int completed)
{
    trainer *t = ctx;
    const gpt_run_config *c = &t->cfg;
    const train_loop *L = &t->loop;
    const double tok_s = L->loop_s > 0 ? (double)(L->steps_done * c->batch * c->context) /
                                             L->loop_s : 0;
    if (t->rank0)
        gpt_finish_run(t, tok_s, completed);
    dist_barrier();
}

int gpt_train_main(int argc, char **argv, int first)
{
    static trainer tr; /* static: zeroed, and large path buffers off the stack */
    return train_program_run(&(train_program){&tr, &tr.loop, setup, loop_setup, finish,
                                              trainer_free}, argc, argv, first);
}
