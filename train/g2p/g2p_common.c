/* mha-g2p: options, the model with its optimizer and checkpoint layout, checkpoints
 * (g2p_prog.h). */
#include "g2p_prog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "trainer.h"

#define OFF(f) offsetof(g2p_config, f)
/* ckpt: 1 = defines the model or the data (a different explicit value on --resume is
 * refused), 2 = taken from the checkpoint unless given again, 0 = not stored. */
static const char *const FORMAT_NAMES[] = {"auto", "cmudict", "tsv", NULL};
static const char *const WORDS_NAMES[] = {"test", "validation", NULL};

const cli_opt G2P_TRAIN_OPTS[] = {
    {"data", CLI_PATH, OFF(data), 0, 0, 2, "FILE",
     "pronunciation dictionary: CMUdict lines 'WORD  PH PH ...' (WORD(1) for alternates), or "
     "'source<TAB>target tokens' lines for any sequence-to-sequence job; split by word "
     "(FNV-1a 64 mod 20: 0-1 test, 2 validation, the rest training)", NULL},
    {"data-format", CLI_CHOICE, OFF(format), 0, 0, 1, "F",
     "auto (TSV if the first entry has a TAB) | cmudict | tsv", FORMAT_NAMES},
    {"enc-layers", CLI_SIZE, OFF(enc_layers), 1, 64, 1, "N", "encoder blocks", NULL},
    {"dec-layers", CLI_SIZE, OFF(dec_layers), 1, 64, 1, "N", "decoder blocks", NULL},
    {"heads", CLI_SIZE, OFF(heads), 1, 1024, 1, "H", "attention heads (must divide --dim)",
     NULL},
    {"dim", CLI_SIZE, OFF(dim), 1, 4096, 1, "C", "model width", NULL},
    {"mlp-dim", CLI_SIZE, OFF(mlp_dim), 0, 65536, 1, "F", "MLP width (0 = 4C)", NULL},
    {"batch", CLI_SIZE, OFF(batch), 1, 4096, 1, "B",
     "pronunciations per training step (batches group words of similar length)", NULL},
    CLI_OPT_STEPS(OFF(steps)),
    CLI_OPT_LR(OFF(lr), 2),
    CLI_OPT_MIN_LR(OFF(min_lr), 2),
    {"warmup", CLI_U64, OFF(warmup), 0, 1e9, 2, "N",
     "linear warm-up steps (scaled down to a tenth of --steps when that is smaller)", NULL},
    CLI_OPT_BETA2(OFF(beta2)),
    {"weight-decay", CLI_DBL, OFF(weight_decay), 0, 1000, 2, "X",
     "AdamW decoupled weight decay, on matmul weights only", NULL},
    CLI_OPT_CLIP(OFF(clip), 2),
    {"dropout", CLI_DBL, OFF(dropout), 0, 0.99, 1, "P",
     "dropout on attention weights, residual branches and embeddings (training only)", NULL},
    {"label-smoothing", CLI_DBL, OFF(label_smoothing), 0, 0.99, 1, "E",
     "label smoothing of the training loss", NULL},
    {"distill", CLI_STR, OFF(distill), 0, 0, 4, "FILE[:FILE...]",
     "knowledge distillation from teachers: models of mha-g2p of the same symbols and "
     "direction (up to 8) whose mean distribution at every training position (their softmax "
     "given the reference's prefix, computed once at the start) becomes part of its target: "
     "(1 - W) x the label-smoothed reference + W x the teachers' (W = --distill-weight); "
     "empty: none", NULL},
    {"distill-weight", CLI_DBL, OFF(distill_weight), 0, 1, 4, "W",
     "the teachers' share of each target with --distill", NULL},
    {"reverse", CLI_FLAG, OFF(reverse), 0, 1, 4, "",
     "train a right-to-left model: it writes each pronunciation from its last token to its "
     "first (eval and pronounce turn its output around; their --rescore uses one to rescore "
     "another model's n-best list)", NULL},
    {"seed", CLI_U64, OFF(seed), 0, 18446744073709551615.0, 1, "N",
     "seed of the initial weights, dropout and the batch order", NULL},
    {"eval-every", CLI_U64, OFF(eval_every), 1, 1e9, 2, "N",
     "steps between greedy evaluations on the validation words (also at the last step)", NULL},
    {"eval-words", CLI_SIZE, OFF(eval_words), 1, 1e9, 2, "N",
     "validation words decoded per evaluation (the first N; all when fewer)", NULL},
    CLI_OPT_CKPT_EVERY(OFF(ckpt_every)),
    {"keep-checkpoints", CLI_SIZE, OFF(keep_checkpoints), 0, 1e6, 3, "K",
     "also keep the last K checkpoints as checkpoint-<step>.safetensors (each a hard link of "
     "checkpoint.safetensors as saved), to average them with mha-g2p average (0 = none)",
     NULL},
    CLI_OPT_STOP_AFTER(OFF(stop_after)),
    CLI_OPT_THREADS(OFF(threads)),
    {"precision", CLI_CHOICE, OFF(precision), 0, 0, 3, "P",
     "fp32 | bf16 | auto: bf16 is mixed precision, the matrix products (attention, MLP, "
     "read-out) take bfloat16 operands with float32 sums (weights, optimizer, norms, softmax "
     "and loss stay float32) and needs a CPU with AVX512_BF16; auto takes bf16 where the CPU "
     "has it and its measured bf16 peak is at least 1.25x the float32 one (twice on an AMD "
     "EPYC Zen 4, half on a Sapphire Rapids Xeon), else fp32, and the header says which and "
     "why",
     G2P_PRECISION_NAMES},
    CLI_OPT_OUT(OFF(out)),
    CLI_OPT_RESUME(OFF(resume)),
    CLI_OPT_FORCE(OFF(force)),
    CLI_OPT_PROGRESS(OFF(progress)),
    /* derived from the data at the start of a run; stored so a model knows its sizes */
    {"src-context", CLI_SIZE, OFF(src_context), 0, G2P_MAX_POS, 1, "N",
     "source positions of the model (0 = the longest word of the data)", NULL},
    {"tgt-context", CLI_SIZE, OFF(tgt_context), 0, G2P_MAX_POS, 1, "N",
     "target positions of the model (0 = the longest pronunciation + 1)", NULL},
};
const size_t G2P_N_TRAIN_OPTS = sizeof G2P_TRAIN_OPTS / sizeof G2P_TRAIN_OPTS[0];

#define G2P_OPT_MODEL                                                                        \
    {"model", CLI_PATH, OFF(model), 0, 0, 0, "FILE",                                        \
     "a model of mha-g2p train (best.safetensors or checkpoint.safetensors)", NULL}
#define G2P_OPT_ENSEMBLE                                                                     \
    {"ensemble", CLI_PATH, OFF(ensemble), 0, 0, 0, "FILE[:FILE...]",                        \
     "more models decoded with --model as one (an ensemble: their log-probabilities are "   \
     "averaged at each step); trained on the same data (the same symbols and sizes of "     \
     "words), up to 7", NULL}
#define G2P_OPT_RESCORE                                                                      \
    {"rescore", CLI_PATH, OFF(rescore), 0, 0, 0, "FILE[:FILE...]",                          \
     "models of the same data (right-to-left ones: train --reverse) that rescore the beam's " \
     "list of --beam hypotheses per word, ranked by (logprob + W x their mean logprob) / "   \
     "(length + 1)^A (W = --rescore-weight); needs --beam 2 or more (eval: its greedy pass " \
     "is not rescored)", NULL},                                                              \
    {"rescore-weight", CLI_DBL, OFF(rescore_weight), 0, 100, 0, "W",                        \
     "weight of the --rescore models' log-probability", NULL}
#define G2P_OPT_BEAM                                                                         \
    {"beam", CLI_SIZE, OFF(beam), 1, 64, 0, "K", "beam width (1 = greedy)", NULL}
#define G2P_OPT_ALPHA                                                                        \
    {"alpha", CLI_DBL, OFF(alpha), 0, 10, 0, "A",                                           \
     "beam length normalisation: hypotheses ranked by logprob / (length + 1)^A", NULL}
#define G2P_OPT_THREADS                                                                      \
    {"threads", CLI_INT, OFF(run_threads), 0, CLI_MAX_THREADS, 0, "N",                      \
     "threads (0 = all cores); at most 4 x the online CPUs", NULL}

const cli_opt G2P_PRONOUNCE_OPTS[] = {
    G2P_OPT_MODEL, G2P_OPT_ENSEMBLE, G2P_OPT_BEAM,
    {"nbest", CLI_SIZE, OFF(nbest), 1, 64, 0, "N",
     "pronunciations per word, as WORD, WORD(1), ... each with '# logprob' after it when "
     "N > 1; the beam is at least N wide (--nbest 3 alone searches with a beam of 3)", NULL},
    G2P_OPT_ALPHA, G2P_OPT_RESCORE, G2P_OPT_THREADS,
    {"lexicon", CLI_PATH, OFF(lexicon), 0, 0, 0, "FILE[:FILE...]",
     "dictionaries looked up before the model's own (your overrides first): a word they list "
     "gets their pronunciations, in file order; CMUdict lines or 'word<TAB>PH PH' lines",
     NULL},
    {"no-lexicon", CLI_FLAG, OFF(no_lexicon), 0, 1, 0, "",
     "ask the model for every word (by default the dictionary the model was trained on, "
     "named in its file, answers the words it lists)", NULL},
    {"no-stress", CLI_FLAG, OFF(no_stress), 0, 1, 0, "",
     "remove the stress digits: HH AH0 L OW1 -> HH AH L OW", NULL},
    {"show-source", CLI_FLAG, OFF(show_source), 0, 1, 0, "",
     "end each line with '# lexicon FILE', '# model' or '# parts' (a hyphenated word "
     "pronounced part by part)", NULL},
};
const size_t G2P_N_PRONOUNCE_OPTS = sizeof G2P_PRONOUNCE_OPTS / sizeof G2P_PRONOUNCE_OPTS[0];

const cli_opt G2P_EVAL_OPTS[] = {
    G2P_OPT_MODEL, G2P_OPT_ENSEMBLE, G2P_OPT_BEAM, G2P_OPT_ALPHA,
    {"dict", CLI_PATH, OFF(dict), 0, 0, 0, "FILE",
     "dictionary to score: every usable word of it (default: the test words of the "
     "model's own --data)", NULL},
    G2P_OPT_RESCORE,
    {"words", CLI_CHOICE, OFF(eval_split), 0, 0, 0, "SET",
     "test | validation: which words of the model's own --data are scored (validation: to "
     "choose decoding options without looking at the test words)", WORDS_NAMES},
    {"out", CLI_PATH, OFF(eval_out), 0, 0, 0, "DIR",
     "where eval.json and errors.txt (the words it got wrong) are written", NULL},
    G2P_OPT_THREADS,
};
const size_t G2P_N_EVAL_OPTS = sizeof G2P_EVAL_OPTS / sizeof G2P_EVAL_OPTS[0];

const cli_opt G2P_AVERAGE_OPTS[] = {
    {"out", CLI_PATH, OFF(average_out), 0, 0, 0, "FILE",
     "the averaged model to write (weights only; required)", NULL},
    {"force", CLI_FLAG, OFF(force), 0, 1, 0, "", "replace --out if it exists", NULL},
};
const size_t G2P_N_AVERAGE_OPTS = sizeof G2P_AVERAGE_OPTS / sizeof G2P_AVERAGE_OPTS[0];

void g2p_default_path(char *out, size_t cap, const char *rel)
{
    cli_default_path(out, cap, rel);
}

const char *const G2P_PRECISION_NAMES[] = {"fp32", "bf16", "auto", NULL};

void g2p_defaults(g2p_config *c)
{
    static const g2p_config d = {
        .format = G2P_FMT_AUTO, .enc_layers = 2, .dec_layers = 2, .heads = 4, .dim = 192,
        .mlp_dim = 640, .batch = 128, .steps = 26000, .lr = 1.5e-3, .min_lr = 1e-5,
        .warmup = 600, .beta2 = 0.98, .weight_decay = 0.01, .clip = 1.0,
        .dropout = 0, /* docs/g2p_sweep.md: s26k-p0 and s29k-p0 beat s26k-p05 on validation */
        .label_smoothing = 0.1, .distill_weight = 0.5, .seed = 1337, .eval_every = 1000,
        .eval_words = 1000000, .ckpt_every = 1000, .threads = 2,
        .precision = G2P_PRECISION_AUTO, .out = "runs/g2p", .beam = 1, .nbest = 1, .alpha = 1.0, .rescore_weight = 1.0, .run_threads = 2};
    *c = d;
    g2p_default_path(c->data, sizeof c->data, "data/cmudict.dict");
    g2p_default_path(c->model, sizeof c->model, "models/g2p-cmudict.safetensors");
}

size_t g2p_split_list(const char *value, const char *opt, char (*paths)[CLI_PATH_CAP],
                      size_t max)
{
    char list[CLI_PATH_CAP];
    snprintf(list, sizeof list, "%s", value);
    size_t n = 0;
    for (char *p = list; list[0] && p;) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        if (!*p)
            cli_die_usage("%s '%s': an empty file name", opt, value);
        if (n == max)
            cli_die_usage("%s: at most %zu %s", opt, max,
                          strcmp(opt, "--ensemble") == 0 ? "models besides --model" : "files");
        snprintf(paths[n++], CLI_PATH_CAP, "%s", p);
        p = colon ? colon + 1 : NULL;
    }
    return n;
}

/* ---- memory ---------------------------------------------------------------------------- */

/* A lower bound of what mha_s2s_create and AdamW take, from the model's own buffers
 * (src/s2s_core.c, s2s_block.inc, gpt_block.inc), in float32, for batches of B pairs of
 * S source and T target positions (the model's contexts):
 *   parameters P = (Vs + Vt + S + T)·C + Le·(4C² + 2FC + F + 9C) + Ld·(8C² + 2FC + F + 15C)
 *     + 4C, each with its gradient and AdamW's two moments: 16·P bytes;
 *   activations: per encoder block 9·B·S·C + 2·B·S·F + B·H·S² (as a GPT block), per
 *     decoder block 14·B·T·C + 2·B·T·F + B·H·T·(T + S) (self- and cross-attention), and
 *     the logits with their gradient 2·B·T·Vt; 4 bytes each. */
void g2p_memory_estimate(const g2p_config *cfg, size_t Vs, size_t Vt, double *params,
                         double *acts)
{
    const double C = (double)cfg->dim, F = cfg->mlp_dim ? (double)cfg->mlp_dim : 4.0 * C;
    const double Le = (double)cfg->enc_layers, Ld = (double)cfg->dec_layers;
    const double S = (double)cfg->src_context, T = (double)cfg->tgt_context;
    const double H = (double)cfg->heads, B = (double)cfg->batch;
    const double P = ((double)Vs + (double)Vt + S + T) * C +
                     Le * (4 * C * C + 2 * F * C + F + 9 * C) +
                     Ld * (8 * C * C + 2 * F * C + F + 15 * C) + 4 * C;
    *params = 16.0 * P;
    *acts = 4.0 * (Le * (9 * B * S * C + 2 * B * S * F + B * H * S * S) +
                   Ld * (14 * B * T * C + 2 * B * T * F + B * H * T * (T + S)) +
                   2 * B * T * (double)Vt);
}

double g2p_check_memory(const g2p_config *cfg, size_t Vs, size_t Vt, double other)
{
    double params, acts;
    g2p_memory_estimate(cfg, Vs, Vt, &params, &acts);
    char config[160], batch[48];
    snprintf(config, sizeof config, "--enc-layers %zu --dec-layers %zu --dim %zu --batch %zu",
             cfg->enc_layers, cfg->dec_layers, cfg->dim, cfg->batch);
    snprintf(batch, sizeof batch, "%zu pairs", cfg->batch);
    return cli_check_memory(params, acts, other, config, batch, "--dim or fewer layers",
                            "--batch");
}

/* ---- model, optimizer, checkpoint layout ----------------------------------------------- */

/* mha_s2s_tensor for ckpt_tensors_of_model. */
static int s2s_tensor_fn(void *model, size_t i, mha_param_info *info, float **p, float **grad)
{
    return mha_s2s_tensor(model, i, info, p, grad);
}

void g2p_run_create(g2p_run *r, const g2p_config *cfg, const g2p_vocab *src,
                    const g2p_vocab *tgt, size_t max_batch, int with_optimizer)
{
    memset(r, 0, sizeof *r);
    r->best_wer = INFINITY;
    if (g2p_vocab_copy(&r->src, src) != MHA_OK || g2p_vocab_copy(&r->tgt, tgt) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    mha_s2s_config mc = {.src_vocab = src->n, .tgt_vocab = tgt->n,
                         .src_context = cfg->src_context, .tgt_context = cfg->tgt_context,
                         .enc_layers = cfg->enc_layers, .dec_layers = cfg->dec_layers,
                         .heads = cfg->heads, .dim = cfg->dim, .mlp_dim = cfg->mlp_dim,
                         .attn_dropout = cfg->dropout, .resid_dropout = cfg->dropout,
                         .label_smoothing = cfg->label_smoothing, .seed = cfg->seed,
                         .threads = with_optimizer ? cfg->threads : cfg->run_threads,
                         .attn_mode = MHA_ATTN_STORED,
                         /* pronounce and eval decode in float32 (the key/value caches) */
                         .precision = with_optimizer ? (mha_precision)cfg->precision
                                                     : MHA_PRECISION_FP32,
                         /* without the optimizer the caller loads every weight next */
                         .no_init = !with_optimizer};
    cli_check(mha_s2s_create(&r->m, &mc, max_batch), "cannot create the model");
    if (with_optimizer)
        r->opt = train_adamw(cfg->beta2, cfg->weight_decay);
    r->n_pt = mha_s2s_num_tensors(r->m);
    char err[256];
    if (ckpt_tensors_of_model(r->m, r->n_pt, s2s_tensor_fn, r->opt, cfg->weight_decay, 0,
                              &r->pt, &r->scratch, NULL, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "model tensors: %s", err);
}

void g2p_run_destroy(g2p_run *r)
{
    mha_optim_destroy(r->opt);
    mha_s2s_destroy(r->m);
    g2p_vocab_free(&r->src);
    g2p_vocab_free(&r->tgt);
    free(r->pt);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

ckpt_layout g2p_run_layout(g2p_run *r, int with_moments)
{
    size_t n = 0;
    r->s[n++] = (ckpt_state){"train.step", MHA_ST_U64, 0, 0, &r->step};
    r->s[n++] = (ckpt_state){"best.step", MHA_ST_U64, 0, 0, &r->best_step};
    r->s[n++] = (ckpt_state){"best.val_wer", MHA_ST_F64, 0, 0, &r->best_wer};
    if (with_moments) {
        r->s[n++] = (ckpt_state){"optimizer.step", MHA_ST_U64, 0, 0, &r->optim_t};
        r->s[n++] = (ckpt_state){"data.rng", MHA_ST_U64, 1, 2, r->rng};
        r->s[n++] = (ckpt_state){"data.epoch", MHA_ST_U64, 0, 0, &r->epoch};
        r->s[n++] = (ckpt_state){"data.batch", MHA_ST_U64, 0, 0, &r->batch_in_epoch};
        r->s[n++] = (ckpt_state){"dropout.call_index", MHA_ST_U64, 0, 0, &r->call_index};
    }
    ckpt_layout c = {r->pt, r->n_pt, {NULL, NULL}, r->s, n,
                     "(a checkpoint of another model size?)"};
    if (with_moments) {
        c.moment[0] = "exp_avg";
        c.moment[1] = "exp_avg_sq";
    }
    return c;
}

/* A vocabulary as a JSON array of its symbols (owned string). */
static char *vocab_json(const g2p_vocab *v)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < v->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v->sym[i]));
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    if (!s)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    return s;
}

int g2p_save(g2p_run *r, const g2p_config *cfg, const char *path, int with_moments)
{
    char *vs = vocab_json(&r->src), *vt = vocab_json(&r->tgt);
    const char *const extra[] = {"src_vocab", vs, "tgt_vocab", vt, "averaged_from",
                                 r->averaged_from, NULL};
    const ckpt_layout lay = g2p_run_layout(r, with_moments);
    const int st = train_save_checkpoint(path, &lay, G2P_CKPT_FORMAT, G2P_TRAIN_OPTS,
                                         G2P_N_TRAIN_OPTS, cfg, extra, r->elapsed, cfg->run_id);
    free(vs);
    free(vt);
    return st;
}

/* Parse a JSON array of symbols (metadata `key`) into a vocabulary. Exit 2. */
static void vocab_from_meta(const mha_st_file *f, const char *key, size_t n_special,
                            const char *what, g2p_vocab *v)
{
    const char *s = mha_st_meta(f, key);
    if (!s)
        cli_die(CLI_EXIT_USAGE, "%s: its metadata has no \"%s\" (not a model of mha-g2p?)",
                what, key);
    cJSON *a = cJSON_Parse(s);
    const size_t n = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
    if (n <= n_special || n > 1000000)
        cli_die(CLI_EXIT_USAGE, "%s: metadata %s is not a vocabulary", what, key);
    const char **sym = calloc(n, sizeof *sym);
    if (!sym)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t i = 0;
    for (cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e))
            cli_die(CLI_EXIT_USAGE, "%s: metadata %s: entry %zu is not a string", what, key, i);
        sym[i] = e->valuestring;
    }
    char err[512];
    if (g2p_vocab_make(v, sym, n, n_special, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: metadata %s: %s", what, key, err);
    free(sym);
    cJSON_Delete(a);
}

mha_st_file *g2p_open_checkpoint(const char *path, const char *what, const int *explicit_opt,
                                 g2p_config *cfg, g2p_vocab *src, g2p_vocab *tgt)
{
    mha_st_file *f = train_open_checkpoint(path, what, G2P_CKPT_FORMAT, "a model of mha-g2p",
                                           G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, explicit_opt, cfg,
                                           sizeof *cfg);
    if (cfg->dim % cfg->heads != 0)
        cli_die(CLI_EXIT_USAGE, "%s: metadata heads %zu does not divide dim %zu", what,
                cfg->heads, cfg->dim);
    /* the training state: a weights-only model (best.safetensors) has no optimizer.step or
     * data.rng; a word error rate is a rate */
    const train_state_rules rules = {0, 1, "best.val_wer", 1.0, "a word error rate is in [0, 1]"};
    train_state_read st;
    train_read_state(f, what, G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, sizeof *cfg, &rules, &st);
    cfg->elapsed = st.elapsed;
    cfg->ck_step = st.step;
    vocab_from_meta(f, "src_vocab", G2P_SRC_NSPECIAL, what, src);
    vocab_from_meta(f, "tgt_vocab", G2P_NSPECIAL, what, tgt);
    /* the tensors must have this configuration's shapes before a model is allocated */
    const size_t C = cfg->dim;
    train_shape need[4] = {{"src_emb.weight", 2, {src->n, C}}, {"tgt_emb.weight", 2, {tgt->n, C}},
                           {"tgt_pos.weight", 2, {cfg->tgt_context, C}}, {"", 2, {0, C}}};
    snprintf(need[3].name, sizeof need[3].name, "decoder.%zu.mlp.fc.weight",
             cfg->dec_layers - 1);
    need[3].shape[0] = cfg->mlp_dim ? cfg->mlp_dim : 4 * C;
    train_require_tensors(f, what, need, 4);
    return f;
}

void g2p_load_model(g2p_run *r, const g2p_config *cfg, mha_st_file *f, const char *what,
                    const g2p_vocab *src, const g2p_vocab *tgt, size_t max_batch)
{
    g2p_run_create(r, cfg, src, tgt, max_batch, 0);
    char name[CKPT_NAME_CAP + 32];
    snprintf(name, sizeof name, "optimizer.exp_avg.%s", r->pt[0].name);
    int with_moments = 0;
    for (size_t i = 0; i < mha_st_count(f); i++)
        if (strcmp(mha_st_name(f, i), name) == 0)
            with_moments = 1;
    ckpt_layout lay = g2p_run_layout(r, with_moments);
    char err[2 * CLI_PATH_CAP] = "";
    if (ckpt_load(f, &lay, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
}
