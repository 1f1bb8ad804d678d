/* mha-gpt: options, the model with its optimizer and checkpoint layout, checkpoint
 * configuration, generation (gpt_prog.h). */
#include "gpt_prog.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"


#define OFF(f) offsetof(gpt_run_config, f)
/* ckpt: 1 = defines the model or the data (a different explicit value on --resume is
 * refused), 2 = taken from the checkpoint unless given again, 0 = not stored. */
/* Names of dist_sync values (train/common/dist.h), NULL-terminated (index = value). */
static const char *const GRAD_SYNC_NAMES[] = {"overlap", "after", NULL};

const cli_opt GPT_TRAIN_OPTS[] = {
    {"data", CLI_PATH, OFF(data), 0, 0, 2, "FILE",
     "training text; characters are bytes unless --utf8; the first 90% trains, the last 10% "
     "validates (each part needs at least --context + 1 characters; at most 4096 distinct "
     "characters, no NUL byte)", NULL},
    {"utf8", CLI_FLAG, OFF(utf8), 0, 1, 1, "",
     "characters are UTF-8 code points (the file must be valid UTF-8)", NULL},
    {"layers", CLI_SIZE, OFF(layers), 1, 64, 1, "L", "transformer blocks", NULL},
    {"heads", CLI_SIZE, OFF(heads), 1, 1024, 1, "H", "attention heads (must divide --dim)", NULL},
    {"dim", CLI_SIZE, OFF(dim), 1, 4096, 1, "C", "model width (the MLP is 4C wide)", NULL},
    {"context", CLI_SIZE, OFF(context), 1, 4096, 1, "T",
     "characters per training window, the longest context", NULL},
    {"batch", CLI_SIZE, OFF(batch), 1, 65536, 1, "B", "windows per training step", NULL},
    CLI_OPT_STEPS(OFF(steps)),
    CLI_OPT_LR(OFF(lr), 2),
    CLI_OPT_MIN_LR(OFF(min_lr), 2),
    {"warmup", CLI_U64, OFF(warmup), 0, 1e9, 2, "N", "linear warm-up steps (< --steps)", NULL},
    CLI_OPT_BETA2(OFF(beta2)),
    {"weight-decay", CLI_DBL, OFF(weight_decay), 0, 1000, 2, "X",
     "AdamW decoupled weight decay, on matmul weights only (not biases, LayerNorm or "
     "embeddings) unless --decay-all", NULL},
    {"decay-all", CLI_FLAG, OFF(decay_all), 0, 1, 1, "",
     "also decay biases, LayerNorm weights and the embeddings", NULL},
    CLI_OPT_CLIP(OFF(clip), 2),
    {"dropout", CLI_DBL, OFF(dropout), 0, 0.99, 1, "P",
     "dropout probability on the attention weights, the residual branches and the "
     "embeddings (training only)", NULL},
    {"seed", CLI_U64, OFF(seed), 0, 18446744073709551615.0, 1, "N",
     "seed of the initial weights, dropout and training batches", NULL},
    {"eval-every", CLI_U64, OFF(eval_every), 1, 1e9, 2, "N",
     "steps between evaluations of both splits (also at the last step)", NULL},
    {"eval-batches", CLI_SIZE, OFF(eval_batches), 1, 100000, 1, "N",
     "batches of --batch windows per split in the fixed evaluation set (drawn once from "
     "seed 1337, the same for every run)", NULL},
    CLI_OPT_CKPT_EVERY(OFF(ckpt_every)),
    {"sample-chars", CLI_SIZE, OFF(sample_chars), 0, 1e6, 2, "N",
     "characters generated at the end into sample.txt (0 = none)", NULL},
    CLI_OPT_STOP_AFTER(OFF(stop_after)),
    CLI_OPT_THREADS(OFF(threads)),
    CLI_OPT_ATTENTION(OFF(attention)),
    CLI_OPT_PRECISION(OFF(precision)),
    {"grad-sync", CLI_CHOICE, OFF(grad_sync), 0, 0, 0, "MODE",
     "under mpirun with several ranks (mha-gpt-mpi): overlap (each block's gradients are "
     "summed across ranks while backward goes on) | after (one all-reduce after backward); "
     "the same sums either way, up to their order with more than 2 ranks", GRAD_SYNC_NAMES},
    CLI_OPT_OUT(OFF(out)),
    CLI_OPT_RESUME(OFF(resume)),
    CLI_OPT_FORCE(OFF(force)),
    CLI_OPT_PROGRESS(OFF(progress)),
};
const size_t GPT_N_TRAIN_OPTS = sizeof GPT_TRAIN_OPTS / sizeof GPT_TRAIN_OPTS[0];

const cli_opt GPT_SAMPLE_OPTS[] = {
    {"checkpoint", CLI_PATH, OFF(checkpoint), 0, 0, 0, "FILE", "checkpoint of mha-gpt train",
     NULL},
    {"prompt", CLI_STR, OFF(prompt), 0, 0, 0, "TEXT",
     "text to continue (\\n, \\t and \\\\ are read as escapes); every character must be in "
     "the checkpoint's vocabulary", NULL},
    {"chars", CLI_SIZE, OFF(chars), 0, 1e9, 0, "N", "characters to generate", NULL},
    {"temperature", CLI_DBL, OFF(temperature), 0.001, 1000, 0, "X",
     "divide the logits by X (< 1: more likely characters, > 1: more varied)", NULL},
    {"top-k", CLI_SIZE, OFF(top_k), 0, GPT_MAX_VOCAB, 0, "K",
     "draw only among the K most likely characters (0 = all; 1 = greedy: always the most "
     "likely, the same text for any seed)", NULL},
    {"seed", CLI_U64, OFF(sample_seed), 0, 18446744073709551615.0, 0, "N",
     "seed of the draws (the same seed gives the same text)", NULL},
    {"threads", CLI_INT, OFF(sample_threads), 0, CLI_MAX_THREADS, 0, "N",
     "threads (0 = all cores); at most 4 x the online CPUs", NULL},
};
const size_t GPT_N_SAMPLE_OPTS = sizeof GPT_SAMPLE_OPTS / sizeof GPT_SAMPLE_OPTS[0];

void gpt_defaults(gpt_run_config *c)
{
    static const gpt_run_config d = {
        .layers = 4, .heads = 4, .dim = 128, .context = 64, .batch = 12, .steps = 2000,
        .lr = 1e-3, .min_lr = 1e-4, .warmup = 100, .beta2 = 0.99, .weight_decay = 0.1,
        .clip = 1.0, .seed = 1337, .eval_every = 250, .eval_batches = 200, .ckpt_every = 500,
        .sample_chars = 500, .threads = 2, .attention = MHA_ATTN_STORED, .out = "runs/gpt",
        .checkpoint = "runs/gpt/best.safetensors", .prompt = "\n", .chars = 500,
        .temperature = 1.0, .sample_seed = 1337, .sample_threads = 1};
    *c = d;
    cli_default_path(c->data, sizeof c->data, "data/tinyshakespeare.txt");
}

/* ---- model, optimizer, checkpoint layout ----------------------------------------------- */

/* mha_gpt_tensor for ckpt_tensors_of_model. */
static int gpt_tensor_fn(void *model, size_t i, mha_param_info *info, float **p, float **grad)
{
    return mha_gpt_tensor(model, i, info, p, grad);
}

void gpt_run_create(gpt_run *r, const gpt_run_config *cfg, size_t V, size_t max_batch,
                    int with_optimizer)
{
    memset(r, 0, sizeof *r);
    r->best_val = INFINITY;
    mha_gpt_config mc = {.vocab = V, .context = cfg->context, .layers = cfg->layers,
                         .heads = cfg->heads, .dim = cfg->dim, .mlp_dim = 0,
                         .attn_dropout = cfg->dropout, .resid_dropout = cfg->dropout,
                         .ln_eps = 0, .seed = cfg->seed, .threads = cfg->threads,
                         .attn_mode = (mha_attn_mode)cfg->attention,
                         .precision = (mha_precision)cfg->precision,
                         /* without the optimizer (sample) the caller loads the weights */
                         .no_init = !with_optimizer};
    cli_check(mha_gpt_create(&r->g, &mc, max_batch), "cannot create the model");
    if (with_optimizer)
        r->opt = train_adamw(cfg->beta2, cfg->weight_decay);
    r->n_pt = mha_gpt_num_tensors(r->g);
    char err[256];
    if (ckpt_tensors_of_model(r->g, r->n_pt, gpt_tensor_fn, r->opt, cfg->weight_decay,
                              cfg->decay_all, &r->pt, &r->scratch, NULL, err,
                              sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "model tensors: %s", err);
}

void gpt_run_destroy(gpt_run *r)
{
    mha_optim_destroy(r->opt);
    mha_gpt_destroy(r->g);
    free(r->pt);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

ckpt_layout gpt_run_layout(gpt_run *r)
{
    r->s[0] = (ckpt_state){"train.step", MHA_ST_U64, 0, 0, &r->step};
    r->s[1] = (ckpt_state){"optimizer.step", MHA_ST_U64, 0, 0, &r->optim_t};
    r->s[2] = (ckpt_state){"data.rng", MHA_ST_U64, 1, 2, r->rng};
    r->s[3] = (ckpt_state){"dropout.call_index", MHA_ST_U64, 0, 0, &r->call_index};
    r->s[4] = (ckpt_state){"best.val_loss", MHA_ST_F64, 0, 0, &r->best_val};
    r->s[5] = (ckpt_state){"best.step", MHA_ST_U64, 0, 0, &r->best_step};
    ckpt_layout c = {r->pt, r->n_pt, {"exp_avg", "exp_avg_sq"}, r->s, 6,
                     "(a checkpoint of another model size?)"};
    return c;
}

/* ---- a checkpoint's configuration --------------------------------------------------------- */

mha_st_file *gpt_open_checkpoint(const char *path, const char *what, const int *explicit_opt,
                                 gpt_run_config *cfg, text_vocab **vocab,
                                 train_state_read *state)
{
    mha_st_file *f = train_open_checkpoint(path, what, GPT_CKPT_FORMAT, NULL, GPT_TRAIN_OPTS,
                                           GPT_N_TRAIN_OPTS, explicit_opt, cfg, sizeof *cfg);
    /* the run state: every completed step one optimizer step, a loss >= 0 */
    const train_state_rules rules = {1, 0, "best.val_loss", INFINITY,
                                     "a validation loss is finite and >= 0"};
    train_read_state(f, what, GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, sizeof *cfg, &rules, state);
    char err[256];
    const char *mode = mha_st_meta(f, "data_mode"), *vs = mha_st_meta(f, "vocab");
    const char *want = cfg->utf8 ? "utf8" : "bytes";
    if (!mode || strcmp(mode, want) != 0)
        cli_die(CLI_EXIT_USAGE, "%s: metadata data_mode is %s, expected %s", what,
                mode ? mode : "missing", want);
    if (!vs)
        cli_die(CLI_EXIT_USAGE, "%s: its metadata has no vocabulary (\"vocab\")", what);
    if (text_vocab_parse(vs, GPT_MAX_VOCAB, vocab, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: metadata vocab: %s", what, err);
    if ((text_vocab_mode(*vocab) == TEXT_UTF8) != (cfg->utf8 != 0))
        cli_die(CLI_EXIT_USAGE, "%s: the vocabulary's mode differs from data_mode %s", what,
                want);
    if (cfg->dim % cfg->heads != 0)
        cli_die(CLI_EXIT_USAGE, "%s: metadata heads %zu does not divide dim %zu", what,
                cfg->heads, cfg->dim);
    /* the tensors must have this configuration's shapes before a model of it is
     * allocated (a corrupt metadata value is refused here, not by a huge allocation) */
    const size_t V = text_vocab_size(*vocab), C = cfg->dim;
    train_shape need[4] = {{"wte.weight", 2, {V, C}}, {"wpe.weight", 2, {cfg->context, C}},
                           {"", 2, {4 * C, C}}, {"ln_f.weight", 1, {C, 0}}};
    snprintf(need[2].name, sizeof need[2].name, "blocks.%zu.mlp.fc.weight", cfg->layers - 1);
    train_require_tensors(f, what, need, 4);
    return f;
}

/* ---- generation ------------------------------------------------------------------------ */

void gpt_write_ids(FILE *stream, const text_vocab *voc, const int32_t *ids, size_t n)
{
    char buf[4 * 64 + 1], err[256];
    for (size_t i = 0; i < n; i += 64) {
        size_t k = n - i < 64 ? n - i : 64, len;
        cli_check(text_decode(voc, ids + i, k, buf, sizeof buf, &len, err, sizeof err),
                  "decode");
        fwrite(buf, 1, len, stream);
    }
}

void gpt_generate(mha_gpt *g, const text_vocab *voc, const int32_t *ids, size_t np, size_t n,
                  double temperature, size_t top_k, uint64_t seed, FILE *stream, char **text)
{
    mha_gpt_config mc;
    cli_check(mha_gpt_get_config(g, &mc), "model");
    const size_t T = mc.context, V = mc.vocab, keep = T / 2 > 0 ? T / 2 : 1;
    const size_t feed = np < T ? np : T;
    /* hist [2T]: the last symbols fed or drawn (a slide feeds the last `keep` again);
     * out [n]: the drawn ids, kept only for *text */
    int32_t *hist = malloc(2 * T * sizeof *hist);
    int32_t *out = text ? malloc((n + 1) * sizeof *out) : NULL;
    float *logits = malloc(V * sizeof *logits);
    mha_gpt_infer *s = NULL;
    if (!hist || (text && !out) || !logits)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cli_check(mha_gpt_infer_create(&s, g, 1, T), "generation cache");
    memcpy(hist, ids + np - feed, feed * sizeof *hist);
    size_t nh = feed;
    cli_check(mha_gpt_infer_step(g, s, 1, feed, hist, logits), "generation");
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, TEXT_STREAM_SAMPLE);
    char err[256];
    for (size_t i = 0; i < n; i++) {
        int32_t id;
        int st = text_sample(logits, V, temperature, top_k, &rng, &id, err, sizeof err);
        if (st != MHA_OK)
            cli_die(st == MHA_ENONFINITE ? CLI_EXIT_NONFINITE : CLI_EXIT_RUNTIME,
                    "sampling: %s", err);
        if (out)
            out[i] = id;
        if (stream) {
            gpt_write_ids(stream, voc, &id, 1);
            fflush(stream);
        }
        if (i + 1 == n)
            break;
        if (nh == 2 * T) { /* keep the last T */
            memmove(hist, hist + T, T * sizeof *hist);
            nh = T;
        }
        hist[nh++] = id;
        size_t len;
        cli_check(mha_gpt_infer_length(s, &len), "generation");
        if (len == T) { /* the window is full: slide it */
            cli_check(mha_gpt_infer_reset(s), "generation");
            cli_check(mha_gpt_infer_step(g, s, 1, keep, hist + nh - keep, logits), "generation");
        } else {
            cli_check(mha_gpt_infer_step(g, s, 1, 1, &id, logits), "generation");
        }
    }
    if (text) {
        size_t cap = 4 * n + 1, len;
        *text = malloc(cap);
        if (!*text)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        cli_check(text_decode(voc, out, n, *text, cap, &len, err, sizeof err), "decode");
    }
    mha_gpt_infer_destroy(s);
    free(hist);
    free(out);
    free(logits);
}

/* ---- memory ---------------------------------------------------------------------------- */

/* A lower bound of what mha_gpt_create, AdamW and the data take, from the model's own
 * buffers (src/gpt_core.c, gpt_block.inc, mha_cache.inc), in float32:
 *   parameters P = V·C + T·C + L·(4C² + 4C + 2FC + F + 5C) + 2C, each with its gradient
 *     and AdamW's two moments: 16·P bytes;
 *   activations of R = B·T rows: per block LN outputs, attention in and out, residuals,
 *     the MLP's h and gelu(h), Q, K, V and the context (9·R·C + 2·R·F), the attention
 *     weights B·H·T·T (stored mode); for the model the residual stream of every block
 *     ((L + 1)·R·C), LayerNorm f, the two backward buffers and three block workspaces
 *     (6·R·C + R·F) and logits with their gradient (2·R·V); 4 bytes each;
 *   the text: its bytes and one int32 id per character; the evaluation windows, an offset
 *     (8 bytes) per window of each part (2 · --eval-batches · --batch). */
double gpt_check_memory(const gpt_run_config *c, size_t V, size_t max_batch, size_t text_bytes)
{
    const double C = (double)c->dim, F = 4.0 * C, L = (double)c->layers, T = (double)c->context;
    const double H = (double)c->heads, B = (double)max_batch, R = B * T;
    const double P = (double)V * C + T * C + L * (4 * C * C + 4 * C + 2 * F * C + F + 5 * C) +
                     2 * C;
    const double params = 16.0 * P;
    const double attn_w = c->attention == MHA_ATTN_STORED ? B * H * T * T : 0;
    const double acts = 4.0 * (L * (9 * R * C + 2 * R * F + attn_w) + (L + 1) * R * C +
                               6 * R * C + R * F + 2 * R * (double)V);
    /* the text, and the fixed evaluation windows of both parts (one offset each) with the
     * batch's token and target buffers */
    const double windows = 2.0 * 8.0 * (double)c->eval_batches * (double)c->batch;
    const double data = 5.0 * (double)text_bytes + windows + 2.0 * 4.0 * (double)c->batch * T;
    char config[160], batch[48];
    snprintf(config, sizeof config, "--layers %zu --dim %zu --batch %zu --context %zu%s",
             c->layers, c->dim, c->batch, c->context,
             windows > acts ? " with its evaluation windows" : "");
    snprintf(batch, sizeof batch, "%zu windows", max_batch);
    return cli_check_memory(params, acts, data, config, batch, "--dim or --layers",
                            windows > acts ? "--eval-batches or --batch"
                                           : "--batch or --context");
}
