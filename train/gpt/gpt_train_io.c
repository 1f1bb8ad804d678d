/*
 * mha-gpt train's files (train/gpt/gpt_train.h): checkpoints — written atomically by rank 0,
 * read and checked before use, the training state shared from rank 0 — and the end of a
 * run: pictures, sample and summary.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gpt_train.h"

/* ---- checkpoints ----------------------------------------------------------------------- */

/* FNV-1a of every parameter and AdamW moment: ranks that applied the same steps agree. */
static uint64_t state_hash(const gpt_run *r)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < r->n_pt; i++) {
        const float *a[3] = {r->pt[i].p, r->pt[i].m, r->pt[i].v};
        for (int k = 0; k < 3; k++) {
            const unsigned char *b = (const unsigned char *)a[k];
            for (size_t j = 0; j < r->pt[i].numel * sizeof(float); j++)
                h = (h ^ b[j]) * 1099511628211ULL;
        }
    }
    return h;
}

/* The run state the layout names, from the live objects (batch generator, optimizer,
 * model) before a save or a broadcast, and back into them after a load or a broadcast. */
static void state_out(trainer *t)
{
    gpt_run *r = &t->r;
    r->rng[0] = t->rng.state;
    r->rng[1] = t->rng.inc;
    cli_check(mha_optim_get_step(r->opt, &r->optim_t), "optimizer");
    cli_check(mha_gpt_get_call_index(r->g, &r->call_index), "model");
}

static void state_in(trainer *t)
{
    gpt_run *r = &t->r;
    t->rng.state = r->rng[0];
    t->rng.inc = r->rng[1];
    cli_check(mha_optim_set_step(r->opt, r->optim_t), "optimizer");
    cli_check(mha_gpt_set_call_index(r->g, r->call_index), "model");
}

/* Every rank calls it; rank 0 writes the file (and all return its status). With several
 * ranks it first checks that every rank holds the same weights and moments. */
int gpt_save_checkpoint(trainer *t, const char *path)
{
    gpt_run *r = &t->r;
    if (dist_size() > 1 && !dist_same(state_hash(r)))
        cli_die(CLI_EXIT_RUNTIME, "the ranks' weights differ at step %llu (the all-reduce did "
                "not give every rank the same sum); not saving %s", (unsigned long long)r->step,
                path);
    if (!t->rank0)
        return MHA_OK;
    ckpt_layout c = gpt_run_layout(r);
    state_out(t);
    const char *const extra[] = {"data_mode", t->cfg.utf8 ? "utf8" : "bytes", "vocab",
                                 t->vocab_text, NULL};
    return train_save_checkpoint(path, &c, GPT_CKPT_FORMAT, GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS,
                                 &t->cfg, extra, t->elapsed0 + (report_now() - t->t_start),
                                 t->run_id);
}

/* Load the tensors and state of a checkpoint whose configuration and state were taken and
 * checked already (gpt_open_checkpoint: train_read_state). */
void gpt_load_checkpoint(trainer *t, mha_st_file *f, const char *what)
{
    ckpt_layout c = gpt_run_layout(&t->r);
    char err[512] = "";
    if (ckpt_load(f, &c, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
    state_in(t);
}

/* Several ranks: every rank takes rank 0's weights, AdamW moments and training state (the
 * same bits whether rank 0 initialised them or read them from a checkpoint): the
 * checkpoint's table, broadcast. */
void gpt_share_rank0_state(trainer *t)
{
    state_out(t);
    ckpt_layout c = gpt_run_layout(&t->r);
    dist_bcast_layout(&c);
    state_in(t);
}

/* ---- pictures and summary ------------------------------------------------------------------ */

void gpt_write_loss_svg(const trainer *t, const char *path)
{
    const train_panel p[2] = {
        {"cross-entropy per character (nats)", "loss", 0, 0, 0,
         {{"batch loss", "#c6dbef", H_LOSS, 1, 0},
          {"batch loss, smoothed", "#6baed6", TRAIN_CURVE_SMOOTH + H_LOSS, 1, 0},
          {"training split (eval)", "#08519c", H_EVTR, 1, 0},
          {"validation split (eval)", "#d94801", H_EVVA, 1, 0}}},
        {"learning rate", "lr", 0, 0, 0, {{"learning rate", "#238b45", H_LR, 1, 0}}}};
    train_write_curves(&t->hist, path, p, 2);
}

/* Heat maps of every head of every block on the first T characters of the validation
 * part, characters on the axes. Returns the number of files written. */
size_t gpt_write_attention_svgs(trainer *t)
{
    const size_t T = t->cfg.context;
    const text_vocab *voc = text_corpus_vocab(t->corpus);
    cli_check(mha_gpt_forward(t->r.g, 0, 1, T, t->ids[1], NULL, NULL), "evaluation forward");
    char(*lab)[16] = calloc(T, sizeof *lab);
    const char **lp = calloc(T, sizeof *lp);
    if (!lab || !lp)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t i = 0; i < T; i++) {
        size_t len;
        char err[128];
        cli_check(text_decode(voc, t->ids[1] + i, 1, lab[i], sizeof lab[i], &len, err,
                              sizeof err), "decode");
        if (lab[i][0] == '\n')
            snprintf(lab[i], sizeof lab[i], "\\n");
        else if (lab[i][0] == '\t')
            snprintf(lab[i], sizeof lab[i], "\\t");
        else if (lab[i][0] == ' ')
            snprintf(lab[i], sizeof lab[i], "\xe2\x90\xa3"); /* ␣ */
        else if ((unsigned char)lab[i][0] < 0x20 || (!t->cfg.utf8 && (unsigned char)lab[i][0] >= 0x80))
            snprintf(lab[i], sizeof lab[i], "x%02x", (unsigned char)lab[i][0]);
        lp[i] = lab[i];
    }
    for (size_t l = 0; l < t->cfg.layers; l++) {
        const float *w;
        size_t shape[4];
        cli_check(mha_gpt_attention(t->r.g, l, &w, shape), "attention weights");
        char path[CLI_PATH_CAP + 64], title[200];
        snprintf(path, sizeof path, "%s/attention_layer%zu.svg", t->cfg.out, l);
        snprintf(title, sizeof title, "block %zu: attention weights of every head on the first "
                 "%zu characters of the validation text (row: query, column: key)", l, T);
        report_heatmaps(path, title, shape[1], shape[2], shape[3], w, lp, lp);
    }
    free(lab);
    free(lp);
    return t->cfg.layers;
}

void gpt_write_summary(const trainer *t, const char *path, double wall, double tok_s,
                          int completed, const char *sample, size_t n_params)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "program", "mha-gpt train");
    cJSON_AddNumberToObject(root, "steps", (double)t->r.step);
    cJSON_AddBoolToObject(root, "completed", completed);
    cJSON_AddNumberToObject(root, "train_loss", t->loop.last[H_EVTR]);
    cJSON_AddNumberToObject(root, "val_loss", t->loop.last[H_EVVA]);
    cJSON_AddNumberToObject(root, "eval_step", (double)t->loop.last_eval_step); /* of both */
    cJSON_AddNumberToObject(root, "best_val_loss", t->r.best_val);
    cJSON_AddNumberToObject(root, "best_val_step", (double)t->r.best_step);
    cJSON_AddNumberToObject(root, "wall_seconds", wall);
    cJSON_AddNumberToObject(root, "tokens_per_second", tok_s);
    /* this process: its evaluations' seconds, and the mean milliseconds of its training
     * steps without them (logging and checkpoints included) */
    const train_loop *L = &t->loop;
    cJSON_AddNumberToObject(root, "eval_seconds", L->eval_s);
    cJSON_AddNumberToObject(root, "step_ms", L->steps_done ? 1e3 * (L->loop_s - L->eval_s) /
                                                                 (double)L->steps_done
                                                           : 0.0);
    /* the model FLOPs of the training steps over their time, as a share of the measured
     * peak of every rank (gpt_train.c's step_flops and peak.h) */
    train_loop_mfu_json(L, root, t->clk.peak, t->clk.peak_src.measured);
    cJSON_AddNumberToObject(root, "parameters", (double)n_params);
    double wait = 0;
    uint64_t n_sync = 0;
    dist_grads_stats(t->dg, &wait, &n_sync);
    cJSON_AddNumberToObject(root, "ranks", dist_size());
    cJSON_AddStringToObject(root, "precision", CLI_PRECISION_NAMES[t->cfg.precision]);
    cJSON_AddStringToObject(root, "grad_sync", dist_size() == 1 ? "none"
                                               : t->cfg.grad_sync == DIST_SYNC_OVERLAP ? "overlap"
                                                                                       : "after");
    /* this process's steps: the gradient all-reduce's exposed time (rank 0's) */
    cJSON_AddNumberToObject(root, "allreduce_wait_ms_per_step",
                            n_sync ? 1e3 * wait / (double)n_sync : 0.0);
    cJSON_AddNumberToObject(root, "vocab_size", (double)text_vocab_size(text_corpus_vocab(t->corpus)));
    cJSON_AddNumberToObject(root, "train_chars", (double)t->len[0]);
    cJSON_AddNumberToObject(root, "val_chars", (double)t->len[1]);
    cJSON_AddItemToObject(root, "config", report_config_json(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS,
                                                             &t->cfg));
    if (sample)
        cJSON_AddStringToObject(root, "sample", sample);
    else
        cJSON_AddNullToObject(root, "sample");
    report_write_json(root, path, 1);
}

/* ---- the end of a run ---- */

void gpt_finish_run(trainer *t, double tok_s, int completed)
{
    const gpt_run_config *c = &t->cfg;
    gpt_write_loss_svg(t, t->svg_path);
    const size_t heat = c->attention == MHA_ATTN_STORED ? gpt_write_attention_svgs(t) : 0;
    report_remove_stale_numbered(c->out, "attention_layer", heat, ".svg");
    char *sample = NULL;
    train_say_stopped(&t->loop, t->ckpt_path);
    if (isfinite(t->loop.last[H_EVVA]))
        printf("validation loss %.4f, training %.4f (evaluated at step %llu; best validation "
               "%.4f at step %llu)  %.0f tokens/s with the evaluations\n", t->loop.last[H_EVVA],
               t->loop.last[H_EVTR], (unsigned long long)t->loop.last_eval_step, t->r.best_val,
               (unsigned long long)t->r.best_step, tok_s);
    if (c->sample_chars > 0) {
        const int32_t nl = 0; /* start from the first symbol (the newline in most texts) */
        printf("sample (%zu characters, seed %llu, temperature 1):\n", c->sample_chars,
               (unsigned long long)c->seed);
        fflush(stdout);
        gpt_generate(t->r.g, text_corpus_vocab(t->corpus), &nl, 1, c->sample_chars, 1.0, 0,
                     c->seed, stdout, &sample);
        printf("\n");
        report_write_file(t->smp_path, sample, strlen(sample));
    }
    /* the whole run's time: earlier processes of a resumed run, and all of this one up to
     * its last file */
    const double wall = t->elapsed0 + (report_now() - t->t_start);
    gpt_write_summary(t, t->sum_path, wall, tok_s, completed, sample, t->n_params);
    printf("pictures: %s", t->svg_path);
    for (size_t l = 0; l < heat; l++)
        printf(", %s/attention_layer%zu.svg", c->out, l);
    if (c->attention != MHA_ATTN_STORED)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s%s%s\ncheckpoints: %s, best: %s\n", t->csv_path, t->sum_path,
           sample ? "  sample: " : "", sample ? t->smp_path : "", t->ckpt_path, t->best_path);
    char walls[32];
    report_duration(wall, walls, sizeof walls);
    printf("time: %.1f s = %s%s\n", wall, walls,
           t->elapsed0 > 0 ? " (the whole run, with the earlier part before --resume)" : "");
    free(sample);
}
