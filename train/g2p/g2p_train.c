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
#include "g2p_prog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <omp.h>

#include "dist.h"
#include "report.h"
#include "rundir.h"
#include "svg.h"

enum { H_LOSS, H_LR, H_GN, H_WER, H_PER, H_WER_S, H_PER_S, H_COLS };
static const char *const CSV_HEADER =
    "step,train_loss,lr,grad_norm,val_wer,val_per,val_wer_stress,val_per_stress";
static const char *const CSV_FMTS[H_COLS] = {"%.9g", "%.9g", "%.9g", "%.6f",
                                             "%.6f", "%.6f", "%.6f"};
enum { WINDOW_BATCHES = 64 };

typedef struct trainer {
    g2p_config cfg;
    g2p_run r;
    g2p_dict dict;
    g2p_set set;
    g2p_vocab reduced;         /* phones without stress                             */
    int32_t *map;              /* [tgt.n] target id → reduced id                     */
    size_t *order;             /* [n_train] this epoch's pronunciations, batched     */
    size_t n_train;
    uint64_t order_epoch;      /* the epoch `order` is for (UINT64_MAX: none yet)    */
    size_t *plen;              /* [n_prons] sort key: source length · 64 + target's  */
    int32_t *src, *tin, *tout; /* one batch [B, S], [B, T], [B, T]                   */
    size_t *slen;
    report_history hist;
    g2p_decoder dec;
    int rank0;                 /* this process writes files and prints (dist.h)      */
    dist_grads *dg;            /* sums the gradients across ranks                    */
    char ckpt_path[CLI_PATH_CAP + 64], best_path[CLI_PATH_CAP + 64];
    const char *last_ckpt;     /* the last checkpoint resumed from or written (NULL: none) */
} trainer;

/* The log could not be written (report_csv_row has said so): say whether the last
 * checkpoint is intact before the exit. */
static void log_failed(void *ctx)
{
    const trainer *t = ctx;
    report_last_checkpoint(t->last_ckpt);
}

/* Save a checkpoint, or say whether the last one is intact and exit 1. */
static void save_or_stop(trainer *t, const char *path, int with_moments)
{
    if (g2p_save(&t->r, &t->cfg, path, with_moments) == MHA_OK)
        return;
    fprintf(stderr, "%s: stopping: the checkpoint could not be saved\n", cli_program());
    report_last_checkpoint(t->last_ckpt);
    exit(CLI_EXIT_RUNTIME);
}

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

static void write_curves(const trainer *t, const char *path)
{
    const size_t n = t->hist.n;
    double *x = calloc(n + 1, sizeof *x), *loss = calloc(n + 1, sizeof *loss);
    double *sm = calloc(n + 1, sizeof *sm), *xe = calloc(n + 1, sizeof *xe);
    double *wer = calloc(n + 1, sizeof *wer), *per = calloc(n + 1, sizeof *per);
    if (!x || !loss || !sm || !xe || !wer || !per)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t m = 0; /* the evaluated steps */
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(i + 1);
        loss[i] = report_at(&t->hist, i, H_LOSS);
        if (isfinite(report_at(&t->hist, i, H_WER))) {
            xe[m] = x[i];
            wer[m] = 100 * report_at(&t->hist, i, H_WER);
            per[m] = 100 * report_at(&t->hist, i, H_PER);
            m++;
        }
    }
    report_smooth(loss, n, sm);
    svg_series ls[2] = {{"batch loss", "#c6dbef", x, loss, n}, {"smoothed", "#08519c", x, sm, n}};
    svg_series ws[2] = {{"validation WER (no stress)", "#cb181d", xe, wer, m},
                        {"validation PER (no stress)", "#238b45", xe, per, m}};
    svg_chart ch[2] = {{"label-smoothed cross-entropy per phone (nats)", "step", "loss", ls, 2,
                        0, 0, 0},
                       {"validation error rates (%), greedy", "step", "%", ws, 2, 0, 0, 0}};
    if (svg_write_charts(path, ch, m ? 2 : 1, 900, 330) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s", path);
    free(x);
    free(loss);
    free(sm);
    free(xe);
    free(wer);
    free(per);
}

/* Cross-attention heat maps of a few validation words: one file per decoder layer, the
 * heads side by side, letters across, phones down. Returns the files written. */
static size_t write_alignments(trainer *t)
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

static void write_summary(const trainer *t, const char *path, double wall, int completed,
                          size_t n_params, const double *last)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "mha-g2p-summary 1");
    cJSON_AddItemToObject(root, "config", report_config_json(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS,
                                                             &t->cfg));
    cJSON_AddNumberToObject(root, "parameters", (double)n_params);
    cJSON_AddNumberToObject(root, "steps_done", (double)t->r.step);
    cJSON_AddBoolToObject(root, "completed", completed);
    cJSON_AddNumberToObject(root, "wall_seconds", wall);
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
static void share_rank0_state(trainer *t)
{
    g2p_run *r = &t->r;
    float **grads = calloc(r->n_pt + 1, sizeof *grads);
    size_t *numel = calloc(r->n_pt + 1, sizeof *numel);
    if (!grads || !numel)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t i = 0; i < r->n_pt; i++) {
        cli_check(mha_s2s_tensor(r->m, i, NULL, NULL, &grads[i]), "model tensors");
        numel[i] = r->pt[i].numel;
    }
    t->dg = dist_grads_create_list(grads, numel, r->n_pt);
    free(grads);
    free(numel);
    if (!t->dg)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    t->rank0 = dist_rank() == 0;
    if (dist_size() == 1)
        return;
    for (size_t i = 0; i < r->n_pt; i++) {
        dist_bcast(r->pt[i].p, r->pt[i].numel * sizeof(float));
        dist_bcast(r->pt[i].m, r->pt[i].numel * sizeof(float));
        dist_bcast(r->pt[i].v, r->pt[i].numel * sizeof(float));
    }
    uint64_t u[8] = {r->step, r->optim_t, r->rng[0], r->rng[1], r->epoch, r->batch_in_epoch,
                     r->call_index, r->best_step};
    double d[2] = {r->best_wer, r->elapsed};
    dist_bcast(u, sizeof u);
    dist_bcast(d, sizeof d);
    r->step = u[0];
    r->optim_t = u[1];
    r->rng[0] = u[2];
    r->rng[1] = u[3];
    r->epoch = u[4];
    r->batch_in_epoch = u[5];
    r->call_index = u[6];
    r->best_step = u[7];
    r->best_wer = d[0];
    r->elapsed = d[1];
    cli_check(mha_optim_set_step(r->opt, r->optim_t), "optimizer");
    cli_check(mha_s2s_set_call_index(r->m, r->call_index), "model");
}

/* Parse the options, read the data (and a checkpoint), build the model. */
static void setup(trainer *t, int argc, char **argv, int first)
{
    g2p_config *c = &t->cfg;
    g2p_defaults(c);
    const char **vals = calloc(G2P_N_TRAIN_OPTS, sizeof *vals);
    int *given = calloc(G2P_N_TRAIN_OPTS, sizeof *given);
    if (!vals || !given)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cli_collect(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, argc, argv, first, vals);
    cli_apply(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, vals, c);
    for (size_t k = 0; k < G2P_N_TRAIN_OPTS; k++)
        given[k] = vals[k] != NULL;
    mha_st_file *ck = NULL;
    g2p_vocab src = {0}, tgt = {0};
    char what[CLI_PATH_CAP + 32];
    if (c->resume[0]) {
        snprintf(what, sizeof what, "cannot resume from %s", c->resume);
        g2p_config keep = *c;
        ck = g2p_open_checkpoint(c->resume, what, given, c, &src, &tgt);
        if (!given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "out")])
            cli_dirname(c->resume, c->out, sizeof c->out);
        snprintf(c->resume, sizeof c->resume, "%s", keep.resume);
    }
    if (c->dim % c->heads)
        cli_die_usage("--heads %zu does not divide --dim %zu", c->heads, c->dim);
    if (c->min_lr > c->lr)
        cli_die_usage("--min-lr %g is above --lr %g", c->min_lr, c->lr);
    if (!given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "warmup")] && c->warmup >= c->steps) {
        const uint64_t w = c->steps / 10;
        if (dist_rank() == 0)
            fprintf(stderr, "%s: note: the default --warmup %llu is not below --steps %llu: "
                    "using --warmup %llu (a tenth of the steps)\n", cli_program(),
                    (unsigned long long)c->warmup, (unsigned long long)c->steps,
                    (unsigned long long)w);
        c->warmup = w;
    }
    if (c->warmup >= c->steps)
        cli_die_usage("--warmup %llu must be below --steps %llu",
                      (unsigned long long)c->warmup, (unsigned long long)c->steps);
    c->threads = cli_check_threads(c->threads, 1);
    cli_check_precision(c->precision,
                        given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "precision")] ||
                            !c->resume[0]);
    /* the optimizer and clipping run on the caller's OpenMP setting (the model sets its
     * own around each call): --threads 1 means one thread for the whole step */
    omp_set_num_threads(c->threads);
    /* several ranks: the same options, dictionary and checkpoint, before any decision */
    dist_agree_inputs(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, c, c->data, c->resume);
    char err[2 * CLI_PATH_CAP] = "";
    if (g2p_dict_read(c->data, c->format, &t->dict, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    if (!ck && g2p_vocab_build(&t->dict, &src, &tgt, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    if (g2p_set_encode(&t->dict, &src, &tgt, &t->set, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    t->n_train = t->set.prons_off[G2P_TRAIN + 1] - t->set.prons_off[G2P_TRAIN];
    if (t->n_train < c->batch)
        cli_die(CLI_EXIT_USAGE, "%s: %zu training pronunciations, fewer than --batch %zu",
                c->data, t->n_train, c->batch);
    if (c->batch < (size_t)dist_size())
        cli_die_usage("--batch %zu is below the number of ranks (%d)", c->batch, dist_size());
    if (!ck) { /* positions from the data; fixed for the model's life */
        if (!c->src_context)
            c->src_context = t->set.max_src;
        if (!c->tgt_context)
            c->tgt_context = t->set.max_tgt + 1;
    }
    if (t->set.max_src > c->src_context || t->set.max_tgt + 1 > c->tgt_context)
        cli_die(CLI_EXIT_USAGE,
                "%s: a word of %zu symbols or a pronunciation of %zu tokens does not fit the "
                "model's %zu source and %zu target positions", c->data, t->set.max_src,
                t->set.max_tgt, c->src_context, c->tgt_context);
    g2p_check_memory(c, src.n, tgt.n); /* before the model, and before the directory */
    cli_prepare_out_dir(c->out);
    /* the run's id: the checkpoint's (one from before run ids gets a new one) */
    const char *ck_id = ck ? mha_st_meta(ck, "run_id") : NULL;
    if (!rundir_id_valid(ck_id))
        ck_id = NULL;
    if (ck_id)
        snprintf(c->run_id, sizeof c->run_id, "%s", ck_id);
    else
        rundir_new_id(c->run_id);
    if (dist_rank() == 0) { /* one run per directory: no other process, no other run */
        static const char *const files[] = {"checkpoint.safetensors", "best.safetensors"};
        rundir_lock(c->out);
        rundir_claim(c->out, files, 2, c->resume[0] ? c->resume : NULL, ck_id, c->force);
    }
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s/checkpoint.safetensors", c->out);
    snprintf(t->best_path, sizeof t->best_path, "%s/best.safetensors", c->out);
    g2p_run_create(&t->r, c, &src, &tgt, c->batch, 1);
    t->r.rng[0] = c->seed;
    t->r.rng[1] = 7;
    if (ck) {
        ckpt_layout lay = g2p_run_layout(&t->r, 1);
        if (ckpt_load(ck, &lay, err, sizeof err) != MHA_OK)
            cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
        cli_check(mha_optim_set_step(t->r.opt, t->r.optim_t), "optimizer");
        cli_check(mha_s2s_set_call_index(t->r.m, t->r.call_index), "model");
        t->r.elapsed = c->elapsed;
        mha_st_free(ck);
    }
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    share_rank0_state(t);
    t->map = calloc(t->r.tgt.n, sizeof *t->map);
    t->order = calloc(t->n_train, sizeof *t->order);
    t->plen = calloc(t->set.n_prons, sizeof *t->plen);
    const size_t B = c->batch;
    t->src = calloc(B * c->src_context, sizeof *t->src);
    t->tin = calloc(B * c->tgt_context, sizeof *t->tin);
    t->tout = calloc(B * c->tgt_context, sizeof *t->tout);
    t->slen = calloc(B, sizeof *t->slen);
    if (!t->map || !t->order || !t->plen || !t->src || !t->tin || !t->tout || !t->slen)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t p = 0; p < t->set.n_prons; p++) { /* the batches' sort key */
        const size_t w = t->set.pron_word[p];
        t->plen[p] = (t->set.src_off[w + 1] - t->set.src_off[w]) * 64 +
                     (t->set.tgt_off[p + 1] - t->set.tgt_off[p]);
    }
    t->order_epoch = UINT64_MAX;
    if (g2p_stress_map(&t->r.tgt, &t->reduced, t->map, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "%s", err);
    g2p_decoder_init(&t->dec, t->r.m, 1, 1, 1.0);
    free(vals);
    free(given);
}

int g2p_train_main(int argc, char **argv, int first)
{
    static trainer tr;
    trainer *t = &tr;
    setup(t, argc, argv, first);
    const g2p_config *c = &t->cfg;
    report_catch_stop_signals();
    report_history_init(&t->hist, H_COLS);
    char csv_path[CLI_PATH_CAP + 64], path[CLI_PATH_CAP + 64];
    snprintf(csv_path, sizeof csv_path, "%s/train_log.csv", c->out);
    report_csv csv = {0};
    t->last_ckpt = c->resume[0] ? c->resume : NULL;
    if (t->rank0)
        report_csv_open(&csv, csv_path, CSV_HEADER, CSV_FMTS, &t->hist, t->r.step);
    csv.on_fail = log_failed;
    csv.ctx = t;
    size_t n_params;
    cli_check(mha_s2s_param_count(t->r.m, &n_params), "model");
    printf("mha-g2p train: %s: %zu words (%zu training, %zu validation, %zu test), %zu "
           "pronunciations, %zu lines skipped\n", c->data, t->dict.n_words,
           t->set.words_off[1] - t->set.words_off[0], t->set.words_off[2] - t->set.words_off[1],
           t->set.words_off[3] - t->set.words_off[2], t->dict.n_prons, t->dict.skipped);
    printf("  model: %zu + %zu layers, dim %zu, %zu heads, MLP %zu, %zu parameters; %zu "
           "source and %zu target symbols\n", c->enc_layers, c->dec_layers, c->dim, c->heads,
           c->mlp_dim ? c->mlp_dim : 4 * c->dim, n_params, t->r.src.n, t->r.tgt.n);
    printf("  %llu steps of %zu pronunciations, AdamW lr %g (warm-up %llu, cosine to %g), "
           "dropout %g, label smoothing %g, %d threads, %s\n", (unsigned long long)c->steps,
           c->batch, c->lr, (unsigned long long)c->warmup, c->min_lr, c->dropout,
           c->label_smoothing, c->threads, CLI_PRECISION_NAMES[c->precision]);
    if (c->resume[0])
        printf("  resumed from %s at step %llu\n", c->resume, (unsigned long long)t->r.step);
    fflush(stdout);
    const mha_lr_schedule sched = {.base_lr = c->lr, .min_lr = c->min_lr,
                                   .warmup_steps = c->warmup, .total_steps = c->steps};
    const uint64_t end = (c->stop_after && c->stop_after < c->steps) ? c->stop_after : c->steps;
    report_progress prog;
    report_progress_start(&prog);
    report_progress_mode(&prog, c->progress, dist_with_mpi());
    const double t0 = report_now(), elapsed0 = t->r.elapsed;
    double last[H_COLS] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    uint64_t pairs = 0;
    while (t->r.step < end) {
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
        double loss = 0, gn = 0, lr = 0;
        cli_check(mha_s2s_zero_grad(t->r.m), "zero_grad");
        if (nb > 0) { /* a rank with no row of an epoch's short last batch adds zeros */
            cli_check(mha_s2s_set_dropout_batch_offset(t->r.m, b0), "dropout offset");
            cli_check(mha_s2s_forward(t->r.m, 1, nb, S, t->src + b0 * S, t->slen + b0, T,
                                      t->tin + b0 * T, t->tout + b0 * T, &loss), "forward");
        } else { /* and advances its dropout counter as the training forward would */
            uint64_t ci;
            cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
            cli_check(mha_s2s_set_call_index(t->r.m, ci + 1), "model");
        }
        if (dist_size() > 1) {
            loss *= share; /* the batch's mean: Σ_r share_r · mean_r */
            dist_sum(&loss, 1);
        }
        if (!isfinite(loss))
            cli_die(CLI_EXIT_NONFINITE, "the training loss is %g at step %llu: lower --lr or "
                    "--clip", loss, (unsigned long long)t->r.step + 1);
        dist_grads_begin(t->dg, share);
        if (nb > 0)
            cli_check(mha_s2s_backward(t->r.m), "backward");
        dist_grads_finish(t->dg);
        int st = mha_optim_clip_grad_norm(t->r.opt, c->clip > 0 ? c->clip : INFINITY, &gn);
        if (st == MHA_OK)
            st = mha_lr_at(&sched, t->r.step, &lr);
        if (st == MHA_OK)
            st = mha_optim_step(t->r.opt, lr);
        if (st == MHA_ENONFINITE)
            cli_die(CLI_EXIT_NONFINITE, "a gradient is not finite at step %llu",
                    (unsigned long long)t->r.step + 1);
        cli_check(st, "optimizer step");
        t->r.step++;
        t->r.batch_in_epoch++;
        pairs += rows;
        double row[H_COLS] = {loss, lr, gn, NAN, NAN, NAN, NAN};
        const int eval_now = t->r.step % c->eval_every == 0 || t->r.step == c->steps;
        if (eval_now) {
            if (prog.tty)
                report_progress_show(&prog, "  step %llu/%llu  evaluating...",
                                     (unsigned long long)t->r.step, (unsigned long long)c->steps);
            evaluate(t, row);
            dist_bcast(row + H_WER, 4 * sizeof(double)); /* every rank decides on rank 0's */
            memcpy(last, row, sizeof last);
        }
        report_history_push(&t->hist, row);
        if (t->rank0)
            report_csv_row(&csv, t->r.step, row, H_COLS);
        t->r.elapsed = elapsed0 + (report_now() - t0);
        uint64_t ci;
        cli_check(mha_s2s_get_call_index(t->r.m, &ci), "model");
        t->r.call_index = ci;
        cli_check(mha_optim_get_step(t->r.opt, &t->r.optim_t), "optimizer");
        if (eval_now && row[H_WER] < t->r.best_wer) {
            t->r.best_wer = row[H_WER];
            t->r.best_step = t->r.step;
            if (t->rank0)
                save_or_stop(t, t->best_path, 0);
        }
        if (c->ckpt_every && t->r.step % c->ckpt_every == 0 && t->r.step != end && t->rank0) {
            report_csv_flush(&csv);
            save_or_stop(t, t->ckpt_path, 1);
            t->last_ckpt = t->ckpt_path;
        }
        const double el = report_now() - t0;
        char els[32], val[48] = "-";
        report_duration(elapsed0 + el, els, sizeof els);
        if (isfinite(last[H_WER]))
            snprintf(val, sizeof val, "WER %.2f%% PER %.2f%%", 100 * last[H_WER],
                     100 * last[H_PER]);
        if (eval_now || (prog.tty && report_progress_due(&prog, t->r.step == end)))
            report_progress_show(&prog, "%sstep %llu/%llu  loss %.4f  val %s  lr %.2e  "
                                 "%.0f words/s  %s", prog.tty ? "  " : "",
                                 (unsigned long long)t->r.step, (unsigned long long)c->steps,
                                 loss, val, lr, (double)pairs / (el > 0 ? el : 1e-9), els);
        if (eval_now) /* each evaluation keeps its line on a terminal */
            report_progress_end(&prog);
        if (dist_any(report_stop_signal()))
            break; /* every rank at this step; a second signal ends the process */
    }
    report_progress_end(&prog);
    const int completed = t->r.step == c->steps;
    const int sig = report_stop_signal();
    size_t nfig = 0;
    if (t->rank0) {
        report_csv_close(&csv);
        save_or_stop(t, t->ckpt_path, 1);
        snprintf(path, sizeof path, "%s/curves.svg", c->out);
        if (t->hist.n)
            write_curves(t, path);
        report_remove_stale_numbered(c->out, "alignment_", 0, ".svg");
        nfig = write_alignments(t);
        snprintf(path, sizeof path, "%s/summary.json", c->out);
        write_summary(t, path, t->r.elapsed, completed, n_params, last);
    }
    dist_barrier(); /* the files are written before any rank exits */
    printf("%s step %llu in %.0f s: best validation WER %.2f%% (step %llu); files in %s "
           "(%zu alignment pictures)\n", completed ? "finished at" : "stopped at",
           (unsigned long long)t->r.step, t->r.elapsed, 100 * t->r.best_wer,
           (unsigned long long)t->r.best_step, c->out, nfig);
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
    return sig ? 128 + sig : 0;
}
