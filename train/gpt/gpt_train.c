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

/* The log's columns (history columns H_* in gpt_train.h). */
static const char *const CSV_HEADER =
    "step,train_loss,lr,grad_norm,eval_train_loss,eval_val_loss";
static const char *const CSV_FMTS[H_COLS] = {"%.17g", "%.17g", "%.17g", "%.17g", "%.17g"};

/* ---- evaluation -------------------------------------------------------------------------- */

/* Mean loss over the fixed evaluation windows of part p (eval mode: no dropout): the mean
 * of the --eval-batches batch means. The windows are split among the ranks, each running
 * its share in chunks of at most cap_b windows; a chunk's mean counts with weight
 * (its windows / B), so that one rank (chunks of B) sums exactly the batch means. */
static double evaluate(trainer *t, int p)
{
    const size_t B = t->cfg.batch, T = t->cfg.context, n = t->cfg.eval_batches * B;
    char err[256];
    size_t w0, wn;
    dist_share(n, &w0, &wn);
    double sum = 0;
    for (size_t w = w0; w < w0 + wn; w += t->cap_b) {
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

/* ---- setup ----------------------------------------------------------------------------- */

static void parse_train_options(trainer *t, int argc, char **argv, int first, int *explicit_opt)
{
    const char **vals = calloc(GPT_N_TRAIN_OPTS, sizeof *vals);
    if (!vals)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    gpt_defaults(&t->cfg);
    cli_collect(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, argc, argv, first, vals);
    cli_apply(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, vals, &t->cfg);
    for (size_t k = 0; k < GPT_N_TRAIN_OPTS; k++)
        explicit_opt[k] = vals[k] != NULL;
    free(vals);
}

static void check_options(gpt_run_config *c, int warmup_given)
{
    if (!warmup_given && c->warmup >= c->steps) { /* a short run: scale the default down */
        const uint64_t w = c->steps / 10;
        if (dist_rank() == 0)
            fprintf(stderr, "%s: note: the default --warmup %llu is not below --steps %llu: "
                    "using --warmup %llu (a tenth of the steps)\n", cli_program(),
                    (unsigned long long)c->warmup, (unsigned long long)c->steps,
                    (unsigned long long)w);
        c->warmup = w;
    }
    if (c->dim % c->heads != 0)
        cli_die_usage("invalid value '%zu' for --heads: must divide --dim %zu", c->heads, c->dim);
    if (c->warmup >= c->steps)
        cli_die_usage("invalid value '%llu' for --warmup: must be less than --steps (%llu)",
                      (unsigned long long)c->warmup, (unsigned long long)c->steps);
    if (c->min_lr > c->lr)
        cli_die_usage("invalid value '%g' for --min-lr: must not exceed --lr (%g)", c->min_lr,
                      c->lr);
}

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

static void trainer_free(trainer *t)
{
    dist_grads_destroy(t->dg);
    gpt_run_destroy(&t->r);
    text_corpus_free(t->corpus);
    free(t->vocab_text);
    free(t->ev_off[0]);
    free(t->ev_off[1]);
    free(t->tok);
    free(t->tgt);
    report_history_free(&t->hist);
}

/* 1 if every parameter and AdamW moment is finite (so that no checkpoint holds one). */
static int params_finite(const gpt_run *r)
{
    for (size_t i = 0; i < r->n_pt; i++) {
        const ckpt_tensor *p = &r->pt[i];
        for (size_t k = 0; k < p->numel; k++)
            if (!isfinite(p->p[k]) || !isfinite(p->m[k]) || !isfinite(p->v[k]))
                return 0;
    }
    return 1;
}

/* last_ckpt: the last checkpoint this run resumed from or wrote, NULL if none. Every rank
 * stops at the same step: the losses and gradients tested are sums across ranks. */
static int stop_nonfinite(const trainer *t, int tty, const char *what, const char *last_ckpt)
{
    if (!t->rank0)
        return CLI_EXIT_NONFINITE; /* every rank sees the same sums; rank 0 says it */
    fprintf(stderr, "%s%s: stopped at step %llu: %s is non-finite (NaN or inf); try a smaller "
            "--lr or --clip. ", tty ? "\n" : "", cli_program(),
            (unsigned long long)t->r.step + 1, what);
    if (last_ckpt)
        fprintf(stderr, "The last checkpoint (%s) is intact.\n", last_ckpt);
    else
        fprintf(stderr, "No checkpoint was written (--ckpt-every %llu).\n",
                (unsigned long long)t->cfg.ckpt_every);
    return CLI_EXIT_NONFINITE;
}

/* The log could not be written (report_csv_row has said so): say whether the last
 * checkpoint is intact before the exit. */
static void log_failed(void *ctx)
{
    const trainer *t = ctx;
    report_last_checkpoint(t->last_ckpt);
}

/* A checkpoint could not be saved (gpt_save_checkpoint has said why; the file it was to
 * replace is untouched): say whether the last one is intact, exit 1. */
static void save_failed(const trainer *t) __attribute__((noreturn));
static void save_failed(const trainer *t)
{
    fprintf(stderr, "%s: stopping: the checkpoint could not be saved\n", cli_program());
    report_last_checkpoint(t->last_ckpt);
    exit(CLI_EXIT_RUNTIME);
}

/* Evaluation steps in (from, to]: multiples of --eval-every and the last step --steps. */
static uint64_t evals_between(const gpt_run_config *c, uint64_t from, uint64_t to)
{
    if (to <= from)
        return 0;
    return to / c->eval_every - from / c->eval_every +
           (to == c->steps && c->steps % c->eval_every != 0);
}

/* ---- the command ----------------------------------------------------------------------- */

int gpt_train_main(int argc, char **argv, int first)
{
    static trainer tr; /* static: zeroed, and large path buffers off the stack */
    trainer *t = &tr;
    t->t_start = report_now();
    int explicit_opt[64] = {0};
    parse_train_options(t, argc, argv, first, explicit_opt);
    gpt_run_config *c = &t->cfg;
    mha_st_file *ck = NULL;
    text_vocab *ck_vocab = NULL;
    char what[CLI_PATH_CAP + 32];
    uint64_t ck_step = 0, ck_made = 0;
    if (c->resume[0]) {
        snprintf(what, sizeof what, "cannot resume from %s", c->resume);
        ck = gpt_open_checkpoint(c->resume, what, explicit_opt, c, &ck_vocab);
        if (!explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "out")])
            cli_dirname(c->resume, c->out, sizeof c->out); /* the checkpoint's directory */
        gpt_resume_state(ck, what, &ck_step, &ck_made, &t->elapsed0);
    }
    check_options(c, explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "warmup")]);
    const int threads_given = explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "threads")];
    if (dist_size() > 1 && !threads_given)
        c->threads = 1; /* the ranks share the cores */
    const int n_threads = cli_check_threads(c->threads, threads_given || !c->resume[0]);
    cli_check_precision(c->precision,
                        explicit_opt[cli_index(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, "precision")] ||
                            !c->resume[0]);
    if ((size_t)dist_size() > c->batch)
        cli_die_usage("invalid value '%zu' for --batch: less than the %d ranks (each rank "
                      "trains on a share of the batch's windows)", c->batch, dist_size());
    t->rank0 = dist_rank() == 0;
    dist_share(c->batch, &t->b_first, &t->b_count);
    t->cap_b = (c->batch + (size_t)dist_size() - 1) / (size_t)dist_size();
    load_data(t);
    /* several ranks: the same options, text and checkpoint as rank 0, before any decision */
    dist_agree_inputs(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, c, c->data, c->resume);
    if (ck && strcmp(mha_st_meta(ck, "vocab"), t->vocab_text) != 0)
        cli_die(CLI_EXIT_USAGE, "%s: the vocabulary of --data %s (%zu characters) differs from "
                "the checkpoint's (%zu)", what, c->data,
                text_vocab_size(text_corpus_vocab(t->corpus)), text_vocab_size(ck_vocab));
    text_vocab_free(ck_vocab);
    if (ck) {
        if (ck_step == c->steps) { /* finished, and no larger --steps: nothing to do */
            printf("%s: %s is a finished run (step %llu of --steps %llu); nothing to do. To "
                   "train it further, resume with a larger --steps (e.g. --steps %llu).\n",
                   cli_program(), c->resume, (unsigned long long)ck_step,
                   (unsigned long long)c->steps, (unsigned long long)(2 * c->steps));
            mha_st_free(ck);
            trainer_free(t);
            return 0;
        }
        if (ck_step > c->steps)
            cli_die_usage("invalid value '%llu' for --steps: the checkpoint %s is at step %llu "
                          "already; give more steps than that", (unsigned long long)c->steps,
                          c->resume, (unsigned long long)ck_step);
    }
    /* before anything large is allocated, and before the directory is claimed */
    gpt_check_memory(c, text_vocab_size(text_corpus_vocab(t->corpus)), t->cap_b,
                     text_corpus_len(t->corpus));
    /* the run's id: the checkpoint's (one from before run ids gets a new one) */
    const char *ck_id = ck ? mha_st_meta(ck, "run_id") : NULL;
    if (!rundir_id_valid(ck_id))
        ck_id = NULL;
    if (ck_id)
        snprintf(t->run_id, sizeof t->run_id, "%s", ck_id);
    else
        rundir_new_id(t->run_id);
    if (t->rank0) {
        cli_prepare_out_dir(c->out); /* exit 2 before the model is built */
        /* one run per directory: no other process in it, no other run's checkpoints */
        static const char *const files[] = {"checkpoint.safetensors", "best.safetensors"};
        rundir_lock(c->out);
        rundir_claim(c->out, files, 2, c->resume[0] ? c->resume : NULL, ck_id, c->force);
    }
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
    t->dg = dist_grads_create(t->r.g, (dist_sync)c->grad_sync);
    if (!t->dg)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t n_params = 0;
    cli_check(mha_gpt_param_count(t->r.g, &n_params), "model");

    if (t->rank0)
        report_make_dirs(c->out);
    char csv_path[CLI_PATH_CAP + 64], sum_path[CLI_PATH_CAP + 64], svg_path[CLI_PATH_CAP + 64],
        smp_path[CLI_PATH_CAP + 64];
    snprintf(csv_path, sizeof csv_path, "%s/train_log.csv", c->out);
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s/checkpoint.safetensors", c->out);
    snprintf(t->best_path, sizeof t->best_path, "%s/best.safetensors", c->out);
    snprintf(sum_path, sizeof sum_path, "%s/summary.json", c->out);
    snprintf(svg_path, sizeof svg_path, "%s/loss.svg", c->out);
    snprintf(smp_path, sizeof smp_path, "%s/sample.txt", c->out);
    if (t->rank0) {
        ckpt_remove_stale(t->ckpt_path); /* temporaries of killed saves */
        ckpt_remove_stale(t->best_path);
    }
    report_catch_stop_signals();
    report_history_init(&t->hist, H_COLS);
    report_csv csv = {0};
    t->last_ckpt = c->resume[0] ? c->resume : NULL;
    if (t->rank0)
        report_csv_open(&csv, csv_path, CSV_HEADER, CSV_FMTS, &t->hist, t->r.step);
    csv.on_fail = log_failed;
    csv.ctx = t;
    t->last_ev[0] = t->last_ev[1] = NAN;
    for (size_t i = t->hist.n; i-- > 0;) /* the last evaluation in a resumed log */
        if (isfinite(report_at(&t->hist, i, H_EVVA))) {
            t->last_ev[0] = report_at(&t->hist, i, H_EVTR);
            t->last_ev[1] = report_at(&t->hist, i, H_EVVA);
            t->last_ev_step = t->r.step - t->hist.n + i + 1;
            break;
        }

    printf("mha-gpt train: %s (%zu characters%s, vocabulary %zu; train %zu, validation %zu)\n"
           "  %zu block(s), %zu heads, dim %zu, context %zu, %zu parameters, dropout %g\n"
           "  AdamW lr %g (warm-up %llu, cosine to %g), beta2 %g, weight decay %g%s, clip %g, "
           "batch %zu, %llu steps, seed %llu, threads %d, %s, out %s\n",
           c->data, text_corpus_len(t->corpus), c->utf8 ? ", UTF-8" : "", V, t->len[0],
           t->len[1], c->layers, c->heads, c->dim, c->context, n_params, c->dropout, c->lr,
           (unsigned long long)c->warmup, c->min_lr, c->beta2, c->weight_decay,
           c->decay_all ? " (all tensors)" : " (matmul weights)", c->clip, c->batch,
           (unsigned long long)c->steps, (unsigned long long)c->seed, c->threads,
           CLI_PRECISION_NAMES[c->precision], c->out);
    if (dist_size() > 1)
        printf("  %d ranks (MPI), each with %zu or %zu of the %zu windows of a step, gradients "
               "summed %s\n", dist_size(), c->batch / (size_t)dist_size(), t->cap_b, c->batch,
               c->grad_sync == DIST_SYNC_OVERLAP ? "block by block during backward (overlap)"
                                                 : "after backward");
    if (c->resume[0])
        printf("  resumed from %s at step %llu%s\n", c->resume, (unsigned long long)t->r.step,
               ck_made != c->steps ? " (--steps changed: the remaining steps follow the "
                                     "schedule of the new --steps)" : "");
    fflush(stdout);

    const mha_lr_schedule sched = {.base_lr = c->lr, .min_lr = c->min_lr,
                                   .warmup_steps = c->warmup, .total_steps = c->steps};
    const uint64_t end = (c->stop_after && c->stop_after < c->steps) ? c->stop_after : c->steps;
    const size_t B = c->batch, T = c->context;
    report_progress prog;
    report_progress_start(&prog);
    report_progress_mode(&prog, c->progress, dist_with_mpi());
    const uint64_t step0 = t->r.step;
    const double t_loop = report_now();
    double t_eval = 0; /* seconds of the evaluations in this process, and how many */
    unsigned long n_eval = 0;
    char err[256];
    const size_t nr = (size_t)dist_size();
    const double share = (double)t->b_count / (double)B; /* exactly 1 with one rank */
    int stopped = 0; /* a rank was sent SIGINT or SIGTERM */
    while (t->r.step < end) {
        double loss, gn = 0, lr = 0;
        /* the step's B windows, the same on every rank; this rank trains on its slice */
        cli_check(text_batch(t->ids[0], t->len[0], B, T, &t->rng, t->tok, t->tgt, err,
                             sizeof err), "training batch");
        cli_check(mha_gpt_zero_grad(t->r.g), "zero_grad");
        cli_check(mha_gpt_forward(t->r.g, 1, t->b_count, T, t->tok + t->b_first * T,
                                  t->tgt + t->b_first * T, &loss), "forward");
        if (nr > 1) {
            loss *= share; /* the global batch's mean: Σ_r share_r · mean_r */
            dist_sum(&loss, 1);
        }
        if (!isfinite(loss))
            return stop_nonfinite(t, prog.tty, "the training loss", t->last_ckpt);
        dist_grads_begin(t->dg, share);
        cli_check(mha_gpt_backward(t->r.g), "backward");
        dist_grads_finish(t->dg);
        int st = mha_optim_clip_grad_norm(t->r.opt, c->clip, &gn);
        if (st == MHA_OK)
            st = mha_lr_at(&sched, t->r.step, &lr);
        if (st == MHA_OK)
            st = mha_optim_step(t->r.opt, lr);
        if (st == MHA_ENONFINITE)
            return stop_nonfinite(t, prog.tty, "a gradient", t->last_ckpt);
        cli_check(st, "optimizer step");
        t->r.step++;
        /* An update can still overflow for an absurd --lr: the next forward's loss shows
         * it; checkpoints are checked before they are written (a full scan per step
         * would cost ~1 ms of a ~20 ms step). */
        const int save_now = (c->ckpt_every && t->r.step % c->ckpt_every == 0 &&
                              t->r.step != end) || t->r.step == end;
        if ((save_now || t->r.step % c->eval_every == 0) && !params_finite(&t->r))
            return stop_nonfinite(t, prog.tty, "a parameter or AdamW moment after the update",
                                  t->last_ckpt);
        double row[H_COLS] = {loss, lr, gn, NAN, NAN};
        const int eval_now = t->r.step % c->eval_every == 0 || t->r.step == c->steps;
        if (eval_now) {
            const double te = report_now();
            if (prog.tty)
                report_progress_show(&prog, "  step %llu/%llu  evaluating (%zu batches per "
                                     "split)...", (unsigned long long)t->r.step,
                                     (unsigned long long)c->steps, c->eval_batches);
            row[H_EVTR] = t->last_ev[0] = evaluate(t, 0);
            row[H_EVVA] = t->last_ev[1] = evaluate(t, 1);
            t->last_ev_step = t->r.step;
            t_eval += report_now() - te;
            n_eval++;
            if (!isfinite(row[H_EVTR]) || !isfinite(row[H_EVVA]))
                return stop_nonfinite(t, prog.tty, "the evaluation loss", t->last_ckpt);
        }
        report_history_push(&t->hist, row);
        if (t->rank0)
            report_csv_row(&csv, t->r.step, row, H_COLS);
        if (eval_now && row[H_EVVA] < t->r.best_val) {
            t->r.best_val = row[H_EVVA];
            t->r.best_step = t->r.step;
            if (gpt_save_checkpoint(t, t->best_path) != MHA_OK)
                save_failed(t);
        }
        if (c->ckpt_every && t->r.step % c->ckpt_every == 0 && t->r.step != end) {
            if (t->rank0)
                report_csv_flush(&csv);
            if (gpt_save_checkpoint(t, t->ckpt_path) != MHA_OK)
                save_failed(t);
            t->last_ckpt = t->ckpt_path;
        }
        /* time left: the remaining steps at this process's training speed (evaluations
         * excluded) and the remaining evaluations at their measured mean cost (before the
         * first: 2 · eval-batches forwards, each a third of a training step) */
        const double now = report_now(), el = now - t->t_start, tl = now - t_loop;
        const double done = (double)(t->r.step - step0), train_s = tl - t_eval;
        const double sps = done / (tl > 0 ? tl : 1e-9);
        const double per_eval = n_eval ? t_eval / (double)n_eval
                                       : train_s / done / 3 * 2 * (double)c->eval_batches;
        char left[32], els[32], val[32] = "-";
        report_duration((double)(end - t->r.step) * train_s / done +
                            (double)evals_between(c, t->r.step, end) * per_eval,
                        left, sizeof left);
        report_duration(t->elapsed0 + el, els, sizeof els);
        if (isfinite(t->last_ev[1]))
            snprintf(val, sizeof val, "%.4f", t->last_ev[1]);
        if (eval_now || (prog.tty && report_progress_due(&prog, t->r.step == end)))
            report_progress_show(&prog, "%sstep %llu/%llu  loss %.4f  val %s  lr %.2e  %.0f tok/s"
                                 "  elapsed %s  left %s", prog.tty ? "  " : "",
                                 (unsigned long long)t->r.step, (unsigned long long)c->steps,
                                 loss, val, lr, sps * (double)(B * T), els, left);
        if (eval_now)
            report_progress_end(&prog); /* each evaluation keeps its line on a terminal */
        if ((stopped = dist_any(report_stop_signal())))
            break; /* finish as at --stop-after (every rank at this step); a second signal
                      ends the process */
    }
    const double t_steps = report_now() - t_loop; /* the loop, evaluations included */
    t->loop_s = t_steps;
    t->eval_s = t_eval;
    t->loop_steps = t->r.step - step0;
    report_progress_end(&prog);
    if (t->rank0)
        report_csv_close(&csv);
    if (gpt_save_checkpoint(t, t->ckpt_path) != MHA_OK)
        save_failed(t);
    const int completed = t->r.step == c->steps;
    const double tok_s = t_steps > 0 ? (double)((t->r.step - step0) * B * T) / t_steps : 0;
    const int sig = report_stop_signal();
    if (!t->rank0) { /* rank 0 writes the files; exit after it (mpirun ends the job when a
                        rank exits non-zero, as after a signal) */
        dist_barrier();
        trainer_free(t);
        return sig ? 128 + sig : 0; /* stopped for another rank's signal: as --stop-after */
    }

    gpt_write_loss_svg(t, svg_path, t->r.step);
    const size_t heat = c->attention == MHA_ATTN_STORED ? gpt_write_attention_svgs(t) : 0;
    report_remove_stale_numbered(c->out, "attention_layer", heat, ".svg");
    char *sample = NULL;
    if (!completed)
        printf("stopped after step %llu of %llu (%s); continue with --resume %s\n",
               (unsigned long long)t->r.step, (unsigned long long)c->steps,
               sig ? report_signal_name(sig) : stopped ? "a signal to another rank"
                                                       : "--stop-after", t->ckpt_path);
    if (isfinite(t->last_ev[1]))
        printf("validation loss %.4f, training %.4f (evaluated at step %llu; best validation "
               "%.4f at step %llu)  %.0f tokens/s\n", t->last_ev[1], t->last_ev[0],
               (unsigned long long)t->last_ev_step, t->r.best_val,
               (unsigned long long)t->r.best_step, tok_s);
    if (c->sample_chars > 0) {
        const int32_t nl = 0; /* start from the first symbol (the newline in most texts) */
        printf("sample (%zu characters, seed %llu, temperature 1):\n", c->sample_chars,
               (unsigned long long)c->seed);
        fflush(stdout);
        gpt_generate(t->r.g, text_corpus_vocab(t->corpus), &nl, 1, c->sample_chars, 1.0, 0,
                     c->seed, stdout, &sample);
        printf("\n");
        report_write_file(smp_path, sample, strlen(sample));
    }
    /* the whole run's time: earlier processes of a resumed run, and all of this one up to
     * its last file */
    const double wall = t->elapsed0 + (report_now() - t->t_start);
    gpt_write_summary(t, sum_path, wall, tok_s, completed, sample, n_params);
    printf("pictures: %s", svg_path);
    for (size_t l = 0; l < heat; l++)
        printf(", %s/attention_layer%zu.svg", c->out, l);
    if (c->attention != MHA_ATTN_STORED)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s%s%s\ncheckpoints: %s, best: %s\n", csv_path, sum_path,
           sample ? "  sample: " : "", sample ? smp_path : "", t->ckpt_path, t->best_path);
    char walls[32];
    report_duration(wall, walls, sizeof walls);
    printf("time: %.1f s = %s%s\n", wall, walls,
           t->elapsed0 > 0 ? " (the whole run, with the earlier part before --resume)" : "");
    free(sample);
    trainer_free(t);
    dist_barrier();
    return sig ? 128 + sig : 0; /* stopped for another rank's signal: as --stop-after */
}
