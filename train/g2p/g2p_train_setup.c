/*
 * mha-g2p train, its setup (train/g2p/g2p_train.c runs the loop): the options and a
 * checkpoint, the data and its limits, the output directory, the model, --precision auto,
 * the log, the header line.
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

/* ---- setup ------------------------------------------------------------------------------ */

/* The options and, with --resume, the checkpoint's configuration and vocabularies; the
 * checks that need no data. Returns the open checkpoint (NULL without --resume). */
static mha_st_file *read_options(trainer *t, int argc, char **argv, int first, int *given,
                             g2p_vocab *src, g2p_vocab *tgt, char *what, size_t what_cap)
{
    g2p_config *c = &t->cfg;
    g2p_defaults(c);
    train_parse(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, argc, argv, first, c, given);
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
        cli_die_usage("invalid value '%zu' for --heads: must divide --dim %zu", c->heads, c->dim);
    train_check_schedule(c->lr, c->min_lr, &c->warmup, c->steps,
                         given[cli_index(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, "warmup")],
                         dist_rank() == 0);
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
    rundir_start(c->out, c->resume, ck ? mha_st_meta(ck, "run_id") : NULL, c->force,
                 dist_rank() == 0, c->run_id);
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
    if (t->teach) {
        char mb[32];
        cli_bytes_text((double)t->teach_positions * (double)t->r.tgt.n * sizeof(float), mb,
                       sizeof mb);
        printf("  distillation from %zu teacher(s) %s, weight %g: their distributions at %zu "
               "training positions (%s) in %.0f s\n", t->n_teachers, c->distill,
               c->distill_weight, t->teach_positions, mb, t->teach_seconds);
    }
    char need[32];
    cli_bytes_text(t->mem_need, need, sizeof need);
    printf("  memory: about %s (estimated from the options: parameters, gradients, AdamW's "
           "moments and a batch's activations%s)\n", need,
           t->teach ? "; the teachers' distributions" : "");
    train_say_run_state(c->resume, t->r.step, c->steps, c->steps, &t->clk.peak_src,
                        t->clk.peak, G2P_PRECISION_NAMES[c->precision], c->threads,
                        dist_size(), 0);
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
 * build the model, open the log, say what the run is. Returns 1 when a resumed run is
 * finished already (nothing to do: said on stdout). */
int g2p_train_setup(void *ctx, int argc, char **argv, int first)
{
    trainer *t = ctx;
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
    if (ck && train_resume_finished(c->resume, c->ck_step, c->steps)) {
        mha_st_free(ck);
        g2p_vocab_free(&src);
        g2p_vocab_free(&tgt);
        return 1;
    }
    choose_precision(t); /* before anything is made or stored in the run's precision */
    read_data(t, ck != NULL, &src, &tgt);
    /* before the model, and before the directory */
    t->mem_need = g2p_check_memory(c, src.n, tgt.n, g2p_distill_bytes(t, tgt.n));
    g2p_distill_check(t, &src, &tgt);
    claim_out_dir(t, ck);
    build_model(t, ck, what, &src, &tgt);
    g2p_distill_setup(t);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    report_history_init(&t->hist, H_COLS);
    train_loop_open_log(&t->loop,
                        &(train_log){c->out, t->rank0, &t->hist, &t->csv, t->r.step, CSV_HEADER,
                                     CSV_FMTS, c->run_id, c->resume, c->force},
                        t->csv_path, sizeof t->csv_path);
    if (t->rank0)
        print_header(t);
    return 0;
}
