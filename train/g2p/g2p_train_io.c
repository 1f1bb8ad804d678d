/*
 * mha-g2p train's files: checkpoints, the curves, the alignment pictures, summary.json, and
 * the state every rank takes from rank 0 (see g2p_train.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "g2p_train.h"

/* Save a checkpoint, or say whether the last one is intact and exit 1. */
void g2p_save_or_stop(trainer *t, const char *path, int with_moments)
{
    if (g2p_save(&t->r, &t->cfg, path, with_moments) == MHA_OK)
        return;
    train_loop_save_failed(&t->loop);
}

void g2p_write_curves(const trainer *t, const char *path)
{
    const train_panel p[2] = {
        {"label-smoothed cross-entropy per phone (nats)", "loss", 0, 0, 0,
         {{"batch loss", "#c6dbef", H_LOSS, 1, 0},
          {"smoothed", "#08519c", TRAIN_CURVE_SMOOTH + H_LOSS, 1, 0}}},
        {"validation error rates (%), greedy", "%", 0, 0, 0,
         {{"validation WER (no stress)", "#cb181d", H_WER, 100, 1},
          {"validation PER (no stress)", "#238b45", H_PER, 100, 1}}}};
    train_write_curves(&t->hist, path, p, 2);
}

/* Cross-attention heat maps of a few validation words: one file per decoder layer, the
 * heads side by side, letters across, phones down. Returns the files written. */
size_t g2p_write_alignments(trainer *t)
{
    const size_t nw = t->set.words_off[G2P_VALID + 1] - t->set.words_off[G2P_VALID];
    size_t files = 0;
    /* the first three validation words of 7 to 10 letters (long enough to show an
     * alignment, short enough to read) */
    for (size_t k = 0, i = 0; k < 3 && i < nw; i++) {
        const size_t w = t->set.word_idx[t->set.words_off[G2P_VALID] + i];
        const size_t letters = t->set.src_off[w + 1] - t->set.src_off[w];
        if (letters < 7 || letters > 10)
            continue;
        const size_t p = t->set.pron_off[w];
        size_t S, T;
        const size_t ls = t->set.src_off[w + 1] - t->set.src_off[w];
        const size_t lt = t->set.tgt_off[p + 1] - t->set.tgt_off[p] + 1;
        char err[256];
        if (g2p_batch(&t->set, &p, 1, ls, lt, t->src, t->tin, t->tout, err, sizeof err))
            continue;
        S = ls;
        T = lt;
        size_t len1 = S;
        cli_check(mha_s2s_forward(t->r.m, 0, 1, S, t->src, &len1, T, t->tin, NULL, NULL),
                  "forward");
        const char **rl = calloc(T, sizeof *rl), **cl = calloc(S, sizeof *cl);
        if (!rl || !cl)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        for (size_t j = 0; j < S; j++)
            cl[j] = t->r.src.sym[t->src[j]];
        for (size_t q = 0; q < T; q++)
            rl[q] = t->r.tgt.sym[t->tout[q]];
        for (size_t l = 0; l < t->cfg.dec_layers; l++) {
            const float *wts;
            size_t shape[4];
            if (mha_s2s_cross_attention(t->r.m, l, &wts, shape) != MHA_OK)
                continue;
            char path[CLI_PATH_CAP + 96], title[256];
            snprintf(path, sizeof path, "%s/alignment_%zu_layer%zu.svg", t->cfg.out, k, l);
            snprintf(title, sizeof title, "%s: cross-attention of decoder layer %zu",
                     t->dict.words[w].text, l);
            report_heatmaps(path, title, shape[1], shape[2], shape[3], wts, rl, cl);
            files++;
        }
        free(rl);
        free(cl);
        k++;
    }
    return files;
}

void g2p_write_summary(const trainer *t, const char *path, double wall, int completed)
{
    const double *last = t->loop.last;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "mha-g2p-summary 1");
    cJSON_AddItemToObject(root, "config", report_config_json(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS,
                                                             &t->cfg));
    cJSON_AddNumberToObject(root, "parameters", (double)t->n_params);
    cJSON_AddNumberToObject(root, "steps_done", (double)t->r.step);
    cJSON_AddBoolToObject(root, "completed", completed);
    cJSON_AddNumberToObject(root, "wall_seconds", wall);
    if (t->precision_why[0]) /* config.precision is what --precision auto chose */
        cJSON_AddStringToObject(root, "precision_chosen", t->precision_why);
    /* this process's training steps (evaluations excluded): their mean time, and their
     * model FLOPs over that time as a share of the measured peak (g2p_train.c) */
    const g2p_clock *k = &t->clk;
    const train_loop *L = &t->loop;
    if (L->steps_done > 0 && L->train_s > 0)
        cJSON_AddNumberToObject(root, "step_ms", 1e3 * L->train_s / (double)L->steps_done);
    train_loop_mfu_json(L, root, k->peak, k->peak_src.measured);
    cJSON_AddNumberToObject(root, "train_pronunciations", (double)t->n_train);
    cJSON_AddNumberToObject(root, "epochs", (double)t->r.step * (double)t->cfg.batch /
                                                (double)(t->n_train ? t->n_train : 1));
    cJSON_AddNumberToObject(root, "best_step", (double)t->r.best_step);
    if (isfinite(t->r.best_wer))
        cJSON_AddNumberToObject(root, "best_val_wer", t->r.best_wer);
    if (isfinite(last[H_WER])) {
        cJSON *v = cJSON_AddObjectToObject(root, "last_validation");
        cJSON_AddNumberToObject(v, "wer", last[H_WER]);
        cJSON_AddNumberToObject(v, "per", last[H_PER]);
        cJSON_AddNumberToObject(v, "wer_stress", last[H_WER_S]);
        cJSON_AddNumberToObject(v, "per_stress", last[H_PER_S]);
    }
    report_write_json(root, path, 1);
}

/* Several ranks: every rank takes rank 0's weights, AdamW moments and training state, and
 * gets the gradient combiner. One rank: nothing to share, and the combiner does nothing. */
void g2p_share_rank0_state(trainer *t)
{
    g2p_run *r = &t->r;
    t->dg = dist_grads_create(r->pt, r->n_pt, NULL, DIST_SYNC_AFTER);
    if (!t->dg)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    t->rank0 = dist_rank() == 0;
    /* the checkpoint's table (with the moments) and the seconds of earlier processes */
    ckpt_layout lay = g2p_run_layout(r, 1);
    dist_bcast_layout(&lay);
    dist_bcast(&r->elapsed, sizeof r->elapsed);
    cli_check(mha_optim_set_step(r->opt, r->optim_t), "optimizer");
    cli_check(mha_s2s_set_call_index(r->m, r->call_index), "model");
}
