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

static const char *const CSV_HEADER =
    "step,train_loss,lr,grad_norm,val_wer,val_per,val_wer_stress,val_per_stress,time_s,"
    "words_per_s";
static const char *const CSV_FMTS[H_COLS] = {"%.9g", "%.9g", "%.9g", "%.6f", "%.6f",
                                             "%.6f", "%.6f", "%.3f", "%.1f"};
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

/* ---- setup ------------------------------------------------------------------------------ */

/* The options and, with --resume, the checkpoint's configuration and vocabularies; the
 * checks that need no data. Returns the open checkpoint (NULL without --resume). */
static mha_st_file *read_options(trainer *t, int argc, char **argv, int first, int *given,
                             g2p_vocab *src, g2p_vocab *tgt, char *what, size_t what_cap)
{
    g2p_config *c = &t->cfg;
    g2p_defaults(c);
    const char **vals = calloc(G2P_N_TRAIN_OPTS, sizeof *vals);
    if (!vals)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cli_collect(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, argc, argv, first, vals);
    cli_apply(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, vals, c);
    for (size_t k = 0; k < G2P_N_TRAIN_OPTS; k++)
        given[k] = vals[k] != NULL;
    free(vals);
    mha_st_file *ck = NULL;
    if (c->resume[0]) {
        snprintf(what, what_cap, "cannot resume from %s", c->resume);
        g2p_config keep = *c;
        ck = g2p_open_checkpoint(c->resume, what, given, c, src, tgt);
        if (!given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "out")])
            cli_dirname(c->resume, c->out, sizeof c->out);
        snprintf(c->resume, sizeof c->resume, "%s", keep.resume);
    }
    if (c->dim % c->heads)
        cli_die_usage("--heads %zu does not divide --dim %zu", c->heads, c->dim);
    if (c->min_lr > c->lr)
        cli_die_usage("--min-lr %g is above --lr %g", c->min_lr, c->lr);
    cli_scale_warmup(&c->warmup, c->steps,
                     given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "warmup")],
                     dist_rank() == 0);
    if (c->warmup >= c->steps)
        cli_die_usage("--warmup %llu must be below --steps %llu",
                      (unsigned long long)c->warmup, (unsigned long long)c->steps);
    c->threads = cli_check_threads(c->threads, 1);
    const int p_given = given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "precision")];
    if (c->resume[0] && !p_given && c->precision == G2P_PRECISION_AUTO)
        c->precision = MHA_PRECISION_FP32; /* a checkpoint from before --precision: fp32 */
    if (c->precision != G2P_PRECISION_AUTO)
        cli_check_precision(c->precision, p_given || !c->resume[0]);
    return ck;
}

/* Every usable entry must fit the model's positions: its word's symbols the source
 * positions, its pronunciation's tokens and <s> the target ones — those given (--src-context,
 * --tgt-context, or the checkpoint's), else G2P_MAX_POS, the most any loader of a model
 * accepts (its options' range). An entry that does not fit is refused (exit 2, naming the
 * file, its line and the limit), as the dictionary reader refuses a line over G2P_MAX_LINE
 * bytes: a size limit is not a malformed line to skip silently, and a model trained around
 * it could not be loaded (before: "src-context 300" was stored, and every loader refused
 * the file). */
static void check_positions(const trainer *t)
{
    const g2p_config *c = &t->cfg;
    const g2p_set *s = &t->set;
    const size_t lim_s = c->src_context ? c->src_context : G2P_MAX_POS;
    const size_t lim_t = c->tgt_context ? c->tgt_context : G2P_MAX_POS;
    if (s->max_src <= lim_s && s->max_tgt + 1 <= lim_t)
        return;
    for (size_t p = 0; p < s->n_prons; p++) {
        const size_t w = s->pron_word[p];
        if (!s->usable[w])
            continue;
        const size_t ls = s->src_off[w + 1] - s->src_off[w], lt = s->tgt_off[p + 1] - s->tgt_off[p];
        const char *word = t->dict.words[w].text;
        const int shown = strlen(word) > 64 ? 64 : (int)strlen(word);
        const char *more = strlen(word) > 64 ? "..." : "";
        if (ls > lim_s)
            cli_die(CLI_EXIT_USAGE, "%s:%zu: the word \"%.*s%s\" has %zu symbols, more than "
                    "the model's %zu source positions%s", c->data, t->dict.prons[p].line, shown,
                    word, more, ls, lim_s, c->src_context ? "" : " (the most a model may have)");
        if (lt + 1 > lim_t)
            cli_die(CLI_EXIT_USAGE, "%s:%zu: the pronunciation of \"%.*s%s\" has %zu tokens: with "
                    "<s> more than the model's %zu target positions%s (at most %zu tokens)",
                    c->data, t->dict.prons[p].line, shown, word, more, lt, lim_t,
                    c->tgt_context ? "" : " (the most a model may have)", lim_t - 1);
    }
}

/* The dictionary, its vocabularies (unless a checkpoint gave them) and the split; the
 * model's positions from the data (a new model) or checked against them. */
static void read_data(trainer *t, int resumed, g2p_vocab *src, g2p_vocab *tgt)
{
    g2p_config *c = &t->cfg;
    char err[2 * CLI_PATH_CAP] = "";
    if (g2p_dict_read(c->data, c->format, &t->dict, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    if (!resumed && g2p_vocab_build(&t->dict, src, tgt, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", c->data, err); /* its messages name only a line */
    if (g2p_set_encode(&t->dict, src, tgt, &t->set, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    t->set.reverse_targets = c->reverse;
    t->n_train = t->set.prons_off[G2P_TRAIN + 1] - t->set.prons_off[G2P_TRAIN];
    if (t->n_train < c->batch)
        cli_die(CLI_EXIT_USAGE, "%s: %zu training pronunciations, fewer than --batch %zu",
                c->data, t->n_train, c->batch);
    if (c->batch < (size_t)dist_size())
        cli_die_usage("--batch %zu is below the number of ranks (%d)", c->batch, dist_size());
    check_positions(t);
    if (!resumed) { /* positions from the data; fixed for the model's life */
        if (!c->src_context)
            c->src_context = t->set.max_src;
        if (!c->tgt_context)
            c->tgt_context = t->set.max_tgt + 1;
    }
}

/* The run's id (the checkpoint's; one from before run ids gets a new one); rank 0 claims
 * --out: no other process in it, no other run's checkpoints (exit 2). */
static void claim_out_dir(trainer *t, const mha_st_file *ck)
{
    g2p_config *c = &t->cfg;
    cli_prepare_out_dir(c->out);
    const char *ck_id = ck ? mha_st_meta(ck, "run_id") : NULL;
    if (!rundir_id_valid(ck_id))
        ck_id = NULL;
    if (ck_id)
        snprintf(c->run_id, sizeof c->run_id, "%s", ck_id);
    else
        rundir_new_id(c->run_id);
    if (dist_rank() == 0) {
        rundir_lock(c->out);
        char **kept; /* --keep-checkpoints' files belong to the run that wrote them too */
        const size_t nk = rundir_list_numbered(c->out, "checkpoint-", ".safetensors", &kept);
        const char **files = malloc((nk + 2) * sizeof *files);
        if (!files)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        files[0] = "checkpoint.safetensors";
        files[1] = "best.safetensors";
        for (size_t i = 0; i < nk; i++)
            files[2 + i] = kept[i];
        rundir_claim(c->out, files, nk + 2, c->resume[0] ? c->resume : NULL, ck_id, c->force);
        for (size_t i = 0; i < nk; i++)
            free(kept[i]);
        free(kept);
        free(files);
    }
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s/checkpoint.safetensors", c->out);
    snprintf(t->best_path, sizeof t->best_path, "%s/best.safetensors", c->out);
}

/* The model and AdamW (from the checkpoint when there is one: then closed), the same on
 * every rank; the batch buffers, the batches' sort key, the stress map, the decoder. */
static void build_model(trainer *t, mha_st_file *ck, const char *what, g2p_vocab *src,
                        g2p_vocab *tgt)
{
    g2p_config *c = &t->cfg;
    char err[2 * CLI_PATH_CAP] = "";
    g2p_run_create(&t->r, c, src, tgt, c->batch, 1);
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
    g2p_share_rank0_state(t);
    cli_check(mha_s2s_param_count(t->r.m, &t->n_params), "model");
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
    g2p_decoder_init(&t->dec, 1, &t->r.m, 1, 1, 1.0);
    t->dec.reverse = t->cfg.reverse;
}

static void print_header(const trainer *t)
{
    const g2p_config *c = &t->cfg;
    printf("mha-g2p train: %s: %zu words (%zu training, %zu validation, %zu test), %zu "
           "pronunciations, %zu lines skipped\n", c->data, t->dict.n_words,
           t->set.words_off[1] - t->set.words_off[0], t->set.words_off[2] - t->set.words_off[1],
           t->set.words_off[3] - t->set.words_off[2], t->dict.n_prons, t->dict.skipped);
    printf("  model: %zu + %zu layers, dim %zu, %zu heads, MLP %zu, %zu parameters; %zu "
           "source and %zu target symbols%s\n", c->enc_layers, c->dec_layers, c->dim, c->heads,
           c->mlp_dim ? c->mlp_dim : 4 * c->dim, t->n_params, t->r.src.n, t->r.tgt.n,
           c->reverse ? "; right-to-left" : "");
    printf("  %llu steps of %zu pronunciations, AdamW lr %g (warm-up %llu, cosine to %g), "
           "dropout %g, label smoothing %g, %d threads, %s\n", (unsigned long long)c->steps,
           c->batch, c->lr, (unsigned long long)c->warmup, c->min_lr, c->dropout,
           c->label_smoothing, c->threads, G2P_PRECISION_NAMES[c->precision]);
    if (t->precision_why[0])
        printf("  precision %s (%s)\n", G2P_PRECISION_NAMES[c->precision], t->precision_why);
    char need[32];
    cli_bytes_text(t->mem_need, need, sizeof need);
    printf("  memory: about %s (estimated from the options: parameters, gradients, AdamW's "
           "moments and a batch's activations)\n", need);
    if (c->resume[0])
        printf("  resumed from %s at step %llu\n", c->resume, (unsigned long long)t->r.step);
    char note[PEAK_PATH_CAP + 128];
    peak_best_note(&t->clk.peak_src, note, sizeof note);
    if (t->clk.peak > 0)
        printf("  measured peak %.0f GFLOP/s (%s, %d thread(s)%s%s): the MFU's denominator\n",
               t->clk.peak, G2P_PRECISION_NAMES[c->precision], c->threads,
               dist_size() > 1 ? " a rank, all ranks" : "", note);
    fflush(stdout);
}

/* The peak of the loop of `bf16` or not (peak.h), the MFU's denominator: one process keeps
 * the fastest measured on this CPU; ranks measure at once (they share the cores) and sum
 * theirs, so every rank gets the same sum. */
static double measure_peak(const trainer *t, int bf16, peak_best *b)
{
    peak_training_best(bf16, t->cfg.threads, dist_size() == 1, b);
    dist_sum(&b->measured, 1);
    return dist_size() == 1 ? b->gflops : b->measured;
}

/* --precision auto becomes fp32 or bf16: bf16 where the CPU has AVX512_BF16 and its
 * measured peak is at least G2P_AUTO_BF16_RATIO times float32's. Measured, not assumed:
 * bf16 halves the products' time on an AMD EPYC Zen 4 (peaks 464 and 231 GFLOP/s at 2
 * threads: steps 1.21x faster), but on a Sapphire Rapids Xeon its dot product runs at half
 * float32's rate (233 and 479: steps 0.80x). Every rank gets the same sums, so the same
 * choice. Then the denominator of the MFU, in the precision of the run. */
static void choose_precision(trainer *t)
{
    g2p_config *c = &t->cfg;
    t->precision_why[0] = '\0';
    if (c->precision != G2P_PRECISION_AUTO) {
        t->clk.peak = measure_peak(t, c->precision == MHA_PRECISION_BF16, &t->clk.peak_src);
        return;
    }
    if (!mha_precision_available(MHA_PRECISION_BF16)) {
        const char *f = mha_precision_cpu_feature(MHA_PRECISION_BF16);
        c->precision = MHA_PRECISION_FP32;
        snprintf(t->precision_why, sizeof t->precision_why, "auto: %s %s", f ? f : "bf16",
                 cli_bf16_disabled() ? "turned off by MHA_DISABLE_BF16" : "not on this CPU");
        t->clk.peak = measure_peak(t, 0, &t->clk.peak_src);
        return;
    }
    peak_best p32, p16;
    const double g32 = measure_peak(t, 0, &p32), g16 = measure_peak(t, 1, &p16);
    const int bf16 = g32 > 0 && g16 >= G2P_AUTO_BF16_RATIO * g32;
    c->precision = bf16 ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32;
    snprintf(t->precision_why, sizeof t->precision_why,
             "auto: the bf16 peak %.0f GFLOP/s is %.2fx the float32 %.0f, %s %.2fx", g16,
             g32 > 0 ? g16 / g32 : 0.0, g32, bf16 ? "at least" : "below", G2P_AUTO_BF16_RATIO);
    t->clk.peak_src = bf16 ? p16 : p32;
    t->clk.peak = bf16 ? g16 : g32;
}

/* Parse the options, read the data (and a checkpoint), agree across ranks, claim --out,
 * build the model, open the log, say what the run is. */
static void setup(trainer *t, int argc, char **argv, int first, report_csv *csv)
{
    g2p_config *c = &t->cfg;
    int given[64] = {0};
    g2p_vocab src = {0}, tgt = {0};
    char what[CLI_PATH_CAP + 32];
    mha_st_file *ck = read_options(t, argc, argv, first, given, &src, &tgt, what, sizeof what);
    /* the optimizer and clipping run on the caller's OpenMP setting (the model sets its
     * own around each call): --threads 1 means one thread for the whole step */
    omp_set_num_threads(c->threads);
    /* several ranks: the same options, dictionary and checkpoint, before any decision */
    dist_agree_inputs(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, c, c->data, c->resume);
    choose_precision(t); /* before anything is made or stored in the run's precision */
    read_data(t, ck != NULL, &src, &tgt);
    /* before the model, and before the directory */
    t->mem_need = g2p_check_memory(c, src.n, tgt.n);
    claim_out_dir(t, ck);
    build_model(t, ck, what, &src, &tgt);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    report_catch_stop_signals();
    report_history_init(&t->hist, H_COLS);
    snprintf(t->csv_path, sizeof t->csv_path, "%s/train_log.csv", c->out);
    t->last_ckpt = c->resume[0] ? c->resume : NULL;
    if (t->rank0)
        report_csv_open(csv, t->csv_path, CSV_HEADER, CSV_FMTS, &t->hist, t->r.step,
                        c->run_id, c->resume, c->force);
    csv->on_fail = g2p_log_failed;
    csv->ctx = t;
    for (size_t k = 0; k < H_COLS; k++)
        t->last[k] = NAN;
    if (t->rank0)
        print_header(t);
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
    setup(t, argc, argv, first, &csv);
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
