/*
 * mha-g2p train: an encoder–decoder Transformer (include/mha_s2s.h) on a pronunciation
 * dictionary. Each step: B training pronunciations from the epoch's order (a PCG32
 * shuffle, then windows of 64·B sorted by length and cut into batches, so a batch holds
 * words of similar length), padded; the mean label-smoothed cross-entropy; backward;
 * global-norm clip; lr from warm-up + cosine (mha_lr_at); AdamW. Every --eval-every steps
 * and at the last step: greedy decoding of the validation words, WER and PER with and
 * without stress; the best (lowest WER without stress) is kept as best.safetensors
 * (weights only). checkpoint.safetensors (with AdamW moments and the data position)
 * every --ckpt-every steps and at the end; --resume continues bit for bit (1 thread).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "g2p_train.h"
#include "peak.h"
#include "rundir.h"

enum { WINDOW_BATCHES = 64 };

/* ---- batches and evaluation -------------------------------------------------------------- */

static const size_t *g_src_len;
static int by_src_len(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (g_src_len[i] != g_src_len[j])
        return g_src_len[i] < g_src_len[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* The order of epoch r.epoch: shuffle with PCG32 seeded from r.rng, sort windows of
 * WINDOW_BATCHES·B by source length, then shuffle the batches of each window. */
static void epoch_order(trainer *t)
{
    const size_t n = t->n_train, B = t->cfg.batch;
    const size_t *train = t->set.pron_idx + t->set.prons_off[G2P_TRAIN];
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, t->r.rng[0] + t->r.epoch, t->r.rng[1]);
    for (size_t i = 0; i < n; i++)
        t->order[i] = train[i];
    for (size_t i = n; i > 1; i--) { /* Fisher–Yates */
        uint32_t j;
        mha_pcg32_bounded(&rng, (uint32_t)i, &j);
        size_t tmp = t->order[i - 1];
        t->order[i - 1] = t->order[j];
        t->order[j] = tmp;
    }
    g_src_len = t->plen;
    const size_t win = WINDOW_BATCHES * B;
    for (size_t w0 = 0; w0 < n; w0 += win) {
        const size_t m = n - w0 < win ? n - w0 : win, nb = m / B;
        qsort(t->order + w0, m, sizeof *t->order, by_src_len);
        for (size_t i = nb; i > 1; i--) { /* shuffle whole batches within the window */
            uint32_t j;
            mha_pcg32_bounded(&rng, (uint32_t)i, &j);
            for (size_t k = 0; k < B; k++) {
                size_t *a = t->order + w0 + (i - 1) * B + k, *b = t->order + w0 + j * B + k;
                size_t tmp = *a;
                *a = *b;
                *b = tmp;
            }
        }
    }
    t->order_epoch = t->r.epoch;
}

/* Batch number r.batch_in_epoch of the epoch (B rows, the epoch's last one the n mod B
 * left): its rows, padded sizes *S, *T. */
static size_t next_batch(trainer *t, size_t *S, size_t *T)
{
    const size_t B = t->cfg.batch, n = t->n_train;
    if (t->r.batch_in_epoch * B >= n) { /* the epoch is over: the next one */
        t->r.epoch++;
        t->r.batch_in_epoch = 0;
    }
    if (t->order_epoch != t->r.epoch)
        epoch_order(t);
    const size_t first = t->r.batch_in_epoch * B, rows = n - first < B ? n - first : B;
    const size_t *pr = t->order + first;
    size_t s = 1, u = 2;
    for (size_t b = 0; b < rows; b++) {
        const size_t p = pr[b], w = t->set.pron_word[p];
        const size_t ls = t->set.src_off[w + 1] - t->set.src_off[w];
        const size_t lt = t->set.tgt_off[p + 1] - t->set.tgt_off[p] + 1;
        s = ls > s ? ls : s;
        u = lt > u ? lt : u;
        t->slen[b] = ls;
    }
    char err[256];
    cli_check(g2p_batch(&t->set, pr, rows, s, u, t->src, t->tin, t->tout, err, sizeof err) ==
                      MHA_OK ? MHA_OK : MHA_EINVAL,
              "training batch");
    *S = s;
    *T = u;
    return rows;
}

/* Greedy WER/PER on the validation words: row[H_WER ..]. */
static void evaluate(trainer *t, double *row)
{
    g2p_tally st, ns;
    g2p_score_split(&t->dec, &t->set, G2P_VALID, t->map, t->r.tgt.n, &st, &ns,
                    t->cfg.eval_words, NULL, NULL, NULL);
    row[H_WER] = g2p_wer(&ns);
    row[H_PER] = g2p_per(&ns);
    row[H_WER_S] = g2p_wer(&st);
    row[H_PER_S] = g2p_per(&st);
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* Model FLOPs of one training step on `rows` pairs padded to S letters and T phones,
 * counting each multiply-add of a matrix product as 2 and backward as twice forward (3×
 * forward in all), as for the GPT: per source position and encoder layer 8·C² (Q, K, V,
 * output), 4·C·M (the MLP) and 4·S·C (Q·Kᵀ, P·V); per target position and decoder layer
 * 8·C² + 4·T·C (self-attention), 4·C² + 4·S·C (cross-attention's Q, output and products),
 * 4·C·M, and 2·C·V for the read-out; per source position and decoder layer 4·C² (the
 * cross-attention's K and V of the encoder's output). */
static double step_flops(const trainer *t, size_t rows, size_t S, size_t T)
{
    const g2p_config *c = &t->cfg;
    const double C = (double)c->dim, M = (double)(c->mlp_dim ? c->mlp_dim : 4 * c->dim);
    const double s = (double)S, u = (double)T, Le = (double)c->enc_layers;
    const double Ld = (double)c->dec_layers, V = (double)t->r.tgt.n;
    const double enc = s * Le * (8 * C * C + 4 * C * M + 4 * s * C);
    const double dec = u * (Ld * (12 * C * C + 4 * u * C + 4 * s * C + 4 * C * M) + 2 * C * V) +
                       s * Ld * 4 * C * C;
    return 3 * (double)rows * (enc + dec);
}

/* One training step on this rank's rows of the next batch: the loss (of the whole batch),
 * the gradient norm before clipping, the learning rate used; the batch's rows and padded
 * sizes into *rows, *S, *T. */
static void train_step(trainer *t, const mha_lr_schedule *sched, double *loss, double *gn,
                       double *lr, size_t *rows_out, size_t *S_out, size_t *T_out)
{
    const g2p_config *c = &t->cfg;
    size_t S, T;
    const size_t rows = next_batch(t, &S, &T);
    /* this rank's rows [b0, b0 + nb) of the step's batch (all of it with one rank); its
     * mean loss counts by its share of the batch's scored positions */
    size_t b0, nb;
    dist_share(rows, &b0, &nb);
    double scored[2] = {0, 0}; /* this rank's, the batch's */
    for (size_t i = 0; i < rows * T; i++)
        if (t->tout[i] >= 0) {
            scored[1] += 1;
            scored[0] += i >= b0 * T && i < (b0 + nb) * T;
        }
    const double share = scored[1] > 0 ? scored[0] / scored[1] : 0;
    *loss = *gn = *lr = 0;
    cli_check(mha_s2s_zero_grad(t->r.m), "zero_grad");
    if (nb > 0) { /* a rank with no row of an epoch's short last batch adds zeros */
        cli_check(mha_s2s_set_dropout_batch_offset(t->r.m, b0), "dropout offset");
        cli_check(mha_s2s_forward(t->r.m, 1, nb, S, t->src + b0 * S, t->slen + b0, T,
                                  t->tin + b0 * T, t->tout + b0 * T, loss), "forward");
    } else { /* and advances its dropout counter as the training forward would */
        uint64_t ci;
        cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
        cli_check(mha_s2s_set_call_index(t->r.m, ci + 1), "model");
    }
    if (dist_size() > 1) {
        *loss *= share; /* the batch's mean: Σ_r share_r · mean_r */
        dist_sum(loss, 1);
    }
    if (!isfinite(*loss))
        cli_die(CLI_EXIT_NONFINITE, "the training loss is %g at step %llu: lower --lr or "
                "--clip", *loss, (unsigned long long)t->r.step + 1);
    dist_grads_begin(t->dg, share);
    if (nb > 0)
        cli_check(mha_s2s_backward(t->r.m), "backward");
    dist_grads_finish(t->dg);
    int st = mha_optim_clip_grad_norm(t->r.opt, c->clip > 0 ? c->clip : INFINITY, gn);
    if (st == MHA_OK)
        st = mha_lr_at(sched, t->r.step, lr);
    if (st == MHA_OK)
        st = mha_optim_step(t->r.opt, *lr);
    if (st == MHA_ENONFINITE)
        cli_die(CLI_EXIT_NONFINITE, "a gradient is not finite at step %llu",
                (unsigned long long)t->r.step + 1);
    cli_check(st, "optimizer step");
    t->r.step++;
    t->r.batch_in_epoch++;
    *rows_out = rows;
    *S_out = S;
    *T_out = T;
}

/* --keep-checkpoints K: the checkpoint just saved also as checkpoint-<step>.safetensors (a
 * hard link; a second save where the file system has none), and only the K highest steps
 * of those kept. */
static void keep_checkpoint(trainer *t)
{
    const g2p_config *c = &t->cfg;
    if (!c->keep_checkpoints)
        return;
    char path[CLI_PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/checkpoint-%llu.safetensors", c->out,
             (unsigned long long)t->r.step);
    if (unlink(path) != 0 && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "cannot replace %s: %s", path, strerror(errno));
    if (link(t->ckpt_path, path) != 0)
        g2p_save_or_stop(t, path, 1);
    char **kept;
    const size_t n = rundir_list_numbered(c->out, "checkpoint-", ".safetensors", &kept);
    for (size_t i = 0; i < n; i++) {
        if (i + c->keep_checkpoints < n) {
            snprintf(path, sizeof path, "%s/%s", c->out, kept[i]);
            if (unlink(path) != 0 && errno != ENOENT)
                cli_die(CLI_EXIT_RUNTIME, "cannot remove %s: %s", path, strerror(errno));
        }
        free(kept[i]);
    }
    free(kept);
}

/* After a step: the state a checkpoint holds, the best checkpoint after a better WER, the
 * latest every --ckpt-every (rank 0 writes). */
static void save_due(trainer *t, int eval_now, const double *row, uint64_t end)
{
    const g2p_config *c = &t->cfg;
    uint64_t ci;
    cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
    t->r.call_index = ci;
    cli_check(mha_optim_get_step(t->r.opt, &t->r.optim_t), "optimizer");
    if (eval_now && row[H_WER] < t->r.best_wer) {
        t->r.best_wer = row[H_WER];
        t->r.best_step = t->r.step;
        if (t->rank0)
            g2p_save_or_stop(t, t->best_path, 0);
    }
    if (c->ckpt_every && t->r.step % c->ckpt_every == 0 && t->r.step != end && t->rank0) {
        g2p_save_or_stop(t, t->ckpt_path, 1);
        t->last_ckpt = t->ckpt_path;
        keep_checkpoint(t);
    }
}

/* The progress line: the step's loss, the last validation, the speed of the training
 * steps since the last line (ms a step, MFU, words/s; evaluations excluded), the time. */
static void show_progress(trainer *t, report_progress *prog, int eval_now, double loss,
                          double lr, uint64_t end)
{
    const g2p_config *c = &t->cfg;
    g2p_clock *k = &t->clk;
    if (!eval_now && !(prog->tty && report_progress_due(prog, t->r.step == end)))
        return;
    char els[32], val[48] = "-", mfu[32] = "";
    report_duration(t->r.elapsed, els, sizeof els);
    if (isfinite(t->last[H_WER]))
        snprintf(val, sizeof val, "WER %.2f%% PER %.2f%%", 100 * t->last[H_WER],
                 100 * t->last[H_PER]);
    const double ms = k->win_steps ? 1e3 * k->win_s / (double)k->win_steps : 0;
    if (k->win_s > 0 && k->peak > 0)
        snprintf(mfu, sizeof mfu, "  MFU %.1f%%", 100 * k->win_flops / k->win_s /
                                                      (k->peak * 1e9));
    /* the most wanted first: a terminal narrower than the line cuts its end */
    report_progress_show(prog, "%sstep %llu/%llu  loss %.4f  val %s  lr %.2e  %.1f ms/step%s  "
                         "elapsed %s  %.0f words/s", prog->tty ? "  " : "",
                         (unsigned long long)t->r.step, (unsigned long long)c->steps, loss, val,
                         lr, ms, mfu, els,
                         k->win_s > 0 ? (double)k->win_words / k->win_s : 0);
    k->win_s = k->win_flops = 0;
    k->win_steps = k->win_words = 0;
    if (eval_now) /* each evaluation keeps its line on a terminal */
        report_progress_end(prog);
}

/* Train from the current step to `end` (--steps, --stop-after, or a stop signal). */
static void train_loop(trainer *t, report_csv *csv, report_progress *prog, uint64_t end)
{
    const g2p_config *c = &t->cfg;
    const mha_lr_schedule sched = {.base_lr = c->lr, .min_lr = c->min_lr,
                                   .warmup_steps = c->warmup, .total_steps = c->steps};
    const double t0 = report_now(), elapsed0 = t->r.elapsed;
    g2p_clock *k = &t->clk;
    while (t->r.step < end) {
        double loss, gn, lr;
        size_t rows, S, T;
        const double ts = report_now();
        train_step(t, &sched, &loss, &gn, &lr, &rows, &S, &T);
        const double step_s = report_now() - ts;
        k->train_s += step_s;
        k->win_s += step_s;
        const double fl = step_flops(t, rows, S, T);
        k->win_flops += fl;
        k->flops += fl;
        k->steps++;
        k->win_steps++;
        k->win_words += rows;
        double row[H_COLS] = {loss, lr, gn, NAN, NAN, NAN, NAN, NAN, (double)rows / step_s};
        const int eval_now = t->r.step % c->eval_every == 0 || t->r.step == c->steps;
        if (eval_now) {
            if (prog->tty)
                report_progress_show(prog, "  step %llu/%llu  evaluating...",
                                     (unsigned long long)t->r.step, (unsigned long long)c->steps);
            evaluate(t, row);
            dist_bcast(row + H_WER, 4 * sizeof(double)); /* every rank decides on rank 0's */
            memcpy(t->last, row, sizeof t->last);
        }
        t->r.elapsed = elapsed0 + (report_now() - t0);
        row[H_TIME] = t->r.elapsed;
        report_history_push(&t->hist, row);
        if (t->rank0)
            report_csv_row(csv, t->r.step, row, H_COLS);
        save_due(t, eval_now, row, end);
        show_progress(t, prog, eval_now, loss, lr, end);
        if ((t->stop_sig = dist_max(report_stop_signal())) != 0)
            break; /* every rank at this step, each to exit with 128 + the signal; a
                      second signal ends the process */
    }
}

static void trainer_free(trainer *t)
{
    dist_grads_destroy(t->dg);
    g2p_decoder_free(&t->dec);
    g2p_run_destroy(&t->r);
    g2p_set_free(&t->set);
    g2p_dict_free(&t->dict);
    g2p_vocab_free(&t->reduced);
    report_history_free(&t->hist);
    free(t->map);
    free(t->order);
    free(t->plen);
    free(t->src);
    free(t->tin);
    free(t->tout);
    free(t->slen);
}

int g2p_train_main(int argc, char **argv, int first)
{
    static trainer tr;
    trainer *t = &tr;
    report_csv csv = {0};
    g2p_train_setup(t, argc, argv, first, &csv);
    const g2p_config *c = &t->cfg;
    const uint64_t end = (c->stop_after && c->stop_after < c->steps) ? c->stop_after : c->steps;
    report_progress prog;
    report_progress_start(&prog);
    report_progress_mode(&prog, c->progress, dist_with_mpi());
    train_loop(t, &csv, &prog, end);
    report_progress_end(&prog);
    const int completed = t->r.step == c->steps;
    size_t nfig = 0;
    if (t->rank0) {
        char path[CLI_PATH_CAP + 64];
        report_csv_close(&csv);
        g2p_save_or_stop(t, t->ckpt_path, 1);
        keep_checkpoint(t);
        snprintf(path, sizeof path, "%s/curves.svg", c->out);
        if (t->hist.n)
            g2p_write_curves(t, path);
        report_remove_stale_numbered(c->out, "alignment_", 0, ".svg");
        nfig = g2p_write_alignments(t);
        snprintf(path, sizeof path, "%s/summary.json", c->out);
        g2p_write_summary(t, path, t->r.elapsed, completed);
    }
    dist_barrier(); /* the files are written before any rank exits */
    printf("%s step %llu in %.0f s: best validation WER %.2f%% (step %llu); files in %s "
           "(%zu alignment pictures)\n", completed ? "finished at" : "stopped at",
           (unsigned long long)t->r.step, t->r.elapsed, 100 * t->r.best_wer,
           (unsigned long long)t->r.best_step, c->out, nfig);
    trainer_free(t);
    /* 128 + the signal, on every rank (that of a rank which got none too): mpirun passes
     * the first non-zero status on, so the job's is the signal's as for one process */
    return t->stop_sig ? 128 + t->stop_sig : 0;
}
