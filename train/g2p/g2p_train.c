/*
 * mha-g2p train: an encoder–decoder Transformer (include/mha_s2s.h) on a pronunciation
 * dictionary. Each step: B training pronunciations from the epoch's order (a PCG32
 * shuffle, then windows of 64·B sorted by length and cut into batches, so a batch holds
 * words of similar length), padded; the mean label-smoothed cross-entropy (with --distill,
 * towards a mix of the reference and the teachers' distributions: g2p_distill.c); backward;
 * global-norm clip; lr from warm-up + cosine (mha_lr_at); AdamW. Every --eval-every steps
 * and at the last step: greedy decoding of the validation words, WER and PER with and
 * without stress; the best (lowest WER without stress) is kept as best.safetensors
 * (weights only). checkpoint.safetensors (with AdamW moments and the data position)
 * every --ckpt-every steps and at the end; --resume continues bit for bit (1 thread).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "g2p_train.h"
#include "peak.h"

enum { WINDOW_BATCHES = 64 };

/* the history's columns are the trainer's row (trainer.h) with four evaluation columns */
_Static_assert((int)H_LOSS == (int)TRAIN_COL_LOSS && (int)H_LR == (int)TRAIN_COL_LR &&
                   (int)H_GN == (int)TRAIN_COL_GN && (int)H_WER == (int)TRAIN_COL_EVAL &&
                   (int)H_COLS == (int)TRAIN_COL_EVAL + 4 + 2,
               "the history's columns are the trainer's row");

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
    if (t->teach)
        g2p_distill_batch(t, pr, rows, u);
    *S = s;
    *T = u;
    return rows;
}

/* Greedy WER/PER on the validation words into row[H_WER ..], rank 0's on every rank (the
 * trainer's evaluate hook). */
static int evaluate(void *ctx, double *row)
{
    trainer *t = ctx;
    g2p_tally st, ns;
    g2p_score_split(&t->dec, &t->set, G2P_VALID, t->map, t->r.tgt.n, &st, &ns,
                    t->cfg.eval_words, NULL, NULL, NULL, NULL);
    row[H_WER] = g2p_wer(&ns);
    row[H_PER] = g2p_per(&ns);
    row[H_WER_S] = g2p_wer(&st);
    row[H_PER_S] = g2p_per(&st);
    dist_bcast(row + H_WER, 4 * sizeof(double)); /* every rank decides on rank 0's */
    return 0;
}

/* ---- the step -------------------------------------------------------------------------- */

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

/* The trainer's forward hook: the next batch, this rank's rows of it forward; the loss of
 * the whole batch, its pronunciations as the work, its model FLOPs. */
static void forward(void *ctx, double *loss, double *work, double *flops)
{
    trainer *t = ctx;
    size_t S, T;
    const size_t rows = next_batch(t, &S, &T);
    t->r.batch_in_epoch++;
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
    t->share = scored[1] > 0 ? scored[0] / scored[1] : 0;
    t->rank_rows = nb;
    *loss = 0;
    cli_check(mha_s2s_zero_grad(t->r.m), "zero_grad");
    if (nb > 0) { /* a rank with no row of an epoch's short last batch adds zeros */
        cli_check(mha_s2s_set_dropout_batch_offset(t->r.m, b0), "dropout offset");
        const float *soft = t->teach ? t->soft + b0 * T * t->r.tgt.n : NULL;
        cli_check(mha_s2s_forward_distill(t->r.m, 1, nb, S, t->src + b0 * S, t->slen + b0, T,
                                          t->tin + b0 * T, t->tout + b0 * T, soft,
                                          t->teach ? t->cfg.distill_weight : 0.0, loss),
                  "forward");
    } else { /* and advances its dropout counter as the training forward would */
        uint64_t ci;
        cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
        cli_check(mha_s2s_set_call_index(t->r.m, ci + 1), "model");
    }
    if (dist_size() > 1) {
        *loss *= t->share; /* the batch's mean: Σ_r share_r · mean_r */
        dist_sum(loss, 1);
    }
    *work = (double)rows;
    *flops = step_flops(t, rows, S, T);
}

/* The trainer's backward hook: this rank's rows, the gradients summed across ranks. */
static void backward(void *ctx)
{
    trainer *t = ctx;
    dist_grads_begin(t->dg, t->share);
    if (t->rank_rows > 0)
        cli_check(mha_s2s_backward(t->r.m), "backward");
    dist_grads_finish(t->dg);
}

/* The trainer's save hook (rank 0 writes): the state a checkpoint holds, then the latest
 * checkpoint with the AdamW moments, or the best weights alone. */
static void save(void *ctx, const char *path, int kind)
{
    trainer *t = ctx;
    uint64_t ci;
    cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
    t->r.call_index = ci;
    cli_check(mha_optim_get_step(t->r.opt, &t->r.optim_t), "optimizer");
    t->r.elapsed = train_loop_elapsed(&t->loop);
    if (t->rank0)
        g2p_save_or_stop(t, path, kind == TRAIN_SAVE_LATEST);
}

/* The progress line's validation: "val WER 26.61% PER 6.31%", "val -" before any. */
static void describe(void *ctx, const double *last, char *buf, size_t cap)
{
    (void)ctx;
    train_describe(buf, cap, "val ", last[H_WER], "WER %.2f%% PER %.2f%%", 100 * last[H_WER],
                   100 * last[H_PER]);
}

/* The plan hook (train_program): the loop set for this run, after setup. */
static void loop_setup(void *ctx)
{
    trainer *t = ctx;
    const g2p_config *c = &t->cfg;
    train_loop *L = &t->loop;
    report_progress_start(&t->prog, c->progress, dist_with_mpi());
    train_loop_plan(L, &(train_hooks){t, forward, backward, evaluate, save, describe, dist_max},
                    t->r.opt, t->r.pt, t->r.n_pt, &t->r.step, &TRAIN_PLAN_OF(c));
    /* greedy decoding of the validation words: about a forward of them, a third of a
     * training step per batch of words */
    const size_t words = t->set.words_off[G2P_VALID + 1] - t->set.words_off[G2P_VALID];
    const double eval_cost = (double)(c->eval_words && c->eval_words < words ? c->eval_words
                                                                              : words) /
                             (double)c->batch / 3;
    train_loop_report(L, &(train_report){4, H_WER, &t->r.best_wer, &t->r.best_step, eval_cost,
                                         t->ckpt_path, t->best_path, "words", "", t->clk.peak,
                                         t->r.elapsed, report_now(), &t->prog});
    L->keep = c->keep_checkpoints;
}

static void trainer_free(void *ctx)
{
    trainer *t = ctx;
    dist_grads_destroy(t->dg);
    g2p_decoder_free(&t->dec);
    g2p_run_destroy(&t->r);
    g2p_set_free(&t->set);
    g2p_dict_free(&t->dict);
    g2p_vocab_free(&t->reduced);
    report_history_free(&t->hist);
    UTIL_FREE_ALL(t->map, t->order, t->plen, t->src, t->tin, t->tout, t->slen, t->teach,
                  t->teach_off, t->soft);
}

/* After the loop: rank 0 writes the curves, the alignment pictures and summary.json; every
 * rank waits for them, then says where the run stopped. */
static void finish(void *ctx, int completed)
{
    trainer *t = ctx;
    const g2p_config *c = &t->cfg;
    size_t nfig = 0;
    if (t->rank0) {
        char path[CLI_PATH_CAP + 64];
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
}

int g2p_train_main(int argc, char **argv, int first)
{
    static trainer tr;
    return train_program_run(&(train_program){&tr, &tr.loop, g2p_train_setup, loop_setup,
                                              finish, trainer_free}, argc, argv, first);
}
