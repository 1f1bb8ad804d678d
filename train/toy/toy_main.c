/*
 * mha-train — train a tiny attention-only transformer (toy_model.h) built from the mha
 * module on a toy task (toy_tasks.h), with SGD / Adam / AdamW from the library.
 *
 *   mha-train                      # reverse, length 16, vocabulary 16, defaults
 *   mha-train --task copy --out runs/copy
 *   mha-train --resume runs/reverse/checkpoint.safetensors
 *
 * Writes into --out DIR: train_log.csv (one row per step, plus step 0: the held-out
 * accuracy before training), checkpoint.safetensors (every --ckpt-every steps and at
 * the end; atomic), summary.json, loss.svg, attention_layer<l>.svg (heat maps of every
 * head for one held-out example) and example.json (that example with the model's
 * activations; tools/check_checkpoint_torch.py compares them with PyTorch).
 *
 * Checkpoint layout (safetensors, all little-endian):
 *   tok_emb.weight, pos_emb.weight, val_emb.weight (lookup), readout.weight/.bias  F32
 *   layers.<l>.w_q.weight … layers.<l>.w_o.bias (the seed's state_dict names)      F32
 *   optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name> (Adam/AdamW) or
 *   optimizer.momentum_buffer.<name> (SGD with momentum)                          F32
 *   train.step, optimizer.step (U64 scalars), data.rng [2] (PCG32 state, inc),
 *   dropout.call_index [L] (U64); __metadata__: format = "mha-train/1" and every
 *   option that defines the run (task, seq-len, …, seed), as text.
 * Resuming restores all of it, so a single-thread run continues bit for bit.
 *
 * Exit status: 0 done; 1 runtime error (I/O, library); 2 bad option or a checkpoint
 * that does not fit; 3 training stopped on a non-finite loss or gradient; 130 / 143
 * stopped by SIGINT / SIGTERM after finishing its step (checkpoint and reports written).
 *
 * Options, checkpoint I/O, logs, JSON, pictures and the progress line are the modules
 * mha-gpt shares (cli.h, ckpt.h, report.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <cblas.h>

#include "mha.h"
#include "mha_optim.h"
#include "report.h"
#include "toy_model.h"
#include "toy_run.h"
#include "toy_tasks.h"

enum { EVAL_CHUNK = 250 };                    /* examples per evaluation forward, at most */
#define EVAL_BUDGET (256.0 * 1024 * 1024)    /* activation bytes an evaluation chunk may use
                                                beyond the training batch's               */
#define SGD_DEFAULT_LR 0.1 /* --lr default for --optimizer sgd (Adam/AdamW: 3e-3) */


static const char *const TASK_NAMES[] = {"reverse", "copy", "lookup", NULL}; /* task_kind */
static const char *const OPTIM_NAMES[] = {"sgd", "adam", "adamw", NULL};
static const char *const POSINIT_NAMES[] = {"uniform", "sinusoidal", NULL};

#define OFF(f) offsetof(run_config, f)
const cli_opt TRAIN_OPTS[] = {
    {"task", CLI_CHOICE, OFF(task), 0, 0, 1, "NAME", "reverse | copy | lookup", TASK_NAMES},
    {"seq-len", CLI_SIZE, OFF(seq_len), 1, TASK_MAX_LEN, 1, "N",
     "reverse: sequence length; copy: length of the copied part (the model sees 2N); "
     "lookup: number of queries", NULL},
    {"vocab", CLI_SIZE, OFF(vocab), 2, 4096, 1, "V", "vocabulary size of the task's tokens", NULL},
    {"pairs", CLI_SIZE, OFF(pairs), 1, 512, 1, "P", "lookup: key-value pairs in the context", NULL},
    {"layers", CLI_SIZE, OFF(layers), 1, TM_MAX_LAYERS, 1, "L", "attention layers", NULL},
    {"model-dim", CLI_SIZE, OFF(model_dim), 1, 4096, 1, "D", "model width", NULL},
    {"heads", CLI_SIZE, OFF(heads), 1, 4096, 1, "H", "attention heads (must divide D)", NULL},
    {"dropout", CLI_DBL, OFF(dropout), 0, 1, 1, "P", "attention dropout probability", NULL},
    {"batch", CLI_SIZE, OFF(batch), 1, 65536, 1, "B", "examples per training step", NULL},
    {"steps", CLI_U64, OFF(steps), 1, 1e9, 2, "N",
     "training steps. With --resume, another N (above the checkpoint's step) continues the "
     "run, a finished one too: each remaining step gets the learning rate a run started with "
     "--steps N has at that step (warm-up, then for 0-based step s >= warmup: min-lr + (lr - "
     "min-lr)(1 + cos(pi (s - warmup) / (N - 1 - warmup)))/2, min-lr from s = N - 1); the "
     "steps done keep theirs. The checkpoint's N continues bit for bit; a finished run "
     "resumed without a larger N exits 0 with a message", NULL},
    {"optimizer", CLI_CHOICE, OFF(optimizer), 0, 0, 1, "NAME", "sgd | adam | adamw", OPTIM_NAMES},
    {"lr", CLI_DBL, OFF(lr), 0, 1e6, 1, "X", "peak learning rate (after warm-up). Numbers are decimal (digits, "
     "fraction, exponent: 3e-3; no sign, hex, inf or nan); a subnormal such as 1e-320 is "
     "kept, a value that underflows to 0 (1e-400) is refused", NULL},
    {"min-lr", CLI_DBL, OFF(min_lr), 0, 1e6, 1, "X", "learning rate at the end of the cosine", NULL},
    {"warmup", CLI_U64, OFF(warmup), 0, 1e9, 1, "N",
     "linear warm-up steps (< --steps; by default at most --steps/10)", NULL},
    {"clip", CLI_DBL, OFF(clip), 0, 1e12, 1, "X", "clip the global gradient norm (0 = off)", NULL},
    {"weight-decay", CLI_DBL, OFF(weight_decay), 0, 1e6, 1, "X",
     "weight decay (coupled for sgd/adam, decoupled for adamw)", NULL},
    {"momentum", CLI_DBL, OFF(momentum), 0, 0.999999, 1, "X", "SGD momentum (--optimizer sgd)", NULL},
    {"seed", CLI_U64, OFF(seed), 0, 18446744073709551615.0, 1, "N", "seed of weights, dropout and data", NULL},
    {"eval-size", CLI_SIZE, OFF(eval_size), 1, 1e6, 1, "N", "held-out evaluation examples", NULL},
    {"eval-every", CLI_U64, OFF(eval_every), 1, 1e9, 2, "N", "steps between held-out evaluations", NULL},
    CLI_OPT_CKPT_EVERY(OFF(ckpt_every)),
    CLI_OPT_STOP_AFTER(OFF(stop_after)),
    CLI_OPT_THREADS(OFF(threads)),
    CLI_OPT_ATTENTION(OFF(attention)),
    {"pos-init", CLI_CHOICE, OFF(pos_init), 0, 0, 2, "NAME",
     "initial positional embedding: uniform (±1) | sinusoidal (sin/cos; long sequences "
     "learn from it; still trained)", POSINIT_NAMES},
    {"out", CLI_PATH, OFF(out), 0, 0, 0, "DIR",
     "output directory (default runs/<task>; with --resume, the checkpoint's directory)", NULL},
    {"resume", CLI_PATH, OFF(resume), 0, 0, 0, "FILE",
     "continue from a checkpoint (unspecified options are taken from it)", NULL},
};
enum { N_OPTS = sizeof TRAIN_OPTS / sizeof TRAIN_OPTS[0] };
const size_t TRAIN_N_OPTS = N_OPTS;

/* Index of option `name` in TRAIN_OPTS (the names used here all exist). */
static size_t opt_index(const char *name)
{
    return cli_index(TRAIN_OPTS, N_OPTS, name);
}

static void task_defaults(int task, run_config *c)
{
    memset(c, 0, sizeof *c);
    c->task = task;
    c->layers = 1;
    c->model_dim = 64;
    c->heads = 4;
    c->dropout = 0.0;
    c->batch = 64;
    c->optimizer = MHA_OPTIM_ADAM;
    c->lr = 3e-3;
    c->min_lr = 3e-5;
    c->warmup = 100;
    c->clip = 1.0;
    c->weight_decay = 0.0;
    c->momentum = 0.9;
    c->seed = 1;
    c->eval_size = 2000;
    c->eval_every = 100;
    c->ckpt_every = 250;
    c->threads = 1;
    switch (task) {
    case TASK_REVERSE:
        c->seq_len = 16;
        c->vocab = 16;
        c->pairs = 16;
        c->steps = 1000;
        break;
    case TASK_COPY:
        c->seq_len = 16;
        c->vocab = 16;
        c->pairs = 16;
        c->steps = 1000;
        break;
    default: /* TASK_LOOKUP */
        c->seq_len = 8;
        c->vocab = 32;
        c->pairs = 16;
        c->steps = 1000;
        break;
    }
    snprintf(c->out, sizeof c->out, "runs/%s", task_name((task_kind)task));
}



/* ---- help -------------------------------------------------------------------------- */

static void print_help(void)
{
    run_config d[3];
    for (int k = 0; k < 3; k++)
        task_defaults(k, &d[k]);
    printf("Usage: %s [OPTIONS]\n"
           "Train a tiny attention-only transformer (token + position embeddings, L residual\n"
           "multi-head attention layers, linear read-out) on a toy task, evaluate it on a\n"
           "held-out set and write a CSV log, checkpoints, summary.json, loss.svg and\n"
           "attention heat maps into --out.\n\n"
           "Tasks: reverse (output the sequence reversed), copy (a b c | a b c, next token\n"
           "under the causal mask, scored on the second half), lookup (cross-attention:\n"
           "context of key-value pairs, queries of keys, targets their values).\n\n"
           "Options (--name VALUE or --name=VALUE; defaults that differ by task are shown\n"
           "per task):\n", cli_program());
    for (size_t i = 0; i < N_OPTS; i++) {
        const cli_opt *o = &TRAIN_OPTS[i];
        char a[64], b[64], c[64], rng[64], head[64];
        cli_format(o, &d[0], a, sizeof a);
        cli_format(o, &d[1], b, sizeof b);
        cli_format(o, &d[2], c, sizeof c);
        cli_range_text(o, rng, sizeof rng);
        snprintf(head, sizeof head, "--%s %s", o->name, o->arg);
        char text[512];
        snprintf(text, sizeof text, "%s%s", o->help, rng);
        cli_print_wrapped(head, text);
        if (o->off == OFF(lr))
            printf("  %-22s   default: %s (adam, adamw), %g (sgd)\n", "", a, SGD_DEFAULT_LR);
        else if (o->off == OFF(min_lr))
            printf("  %-22s   default: --lr / 100\n", "");
        else if (o->off == OFF(resume))
            printf("  %-22s   default: none\n", "");
        else if (o->off == OFF(task))
            printf("  %-22s   default: reverse\n", "");
        else if (strcmp(a, b) == 0 && strcmp(a, c) == 0)
            printf("  %-22s   default: %s\n", "", a);
        else
            printf("  %-22s   default: reverse %s, copy %s, lookup %s\n", "", a, b, c);
    }
    printf("  %-22s show this help and exit\n\n"
           "Exit status: 0 done, 1 runtime error, 2 bad option or unusable checkpoint,\n"
           "3 stopped on a non-finite loss or gradient (the last checkpoint stays intact),\n"
           "130 / 143 stopped by Ctrl-C (SIGINT) / SIGTERM after finishing the step, with a\n"
           "checkpoint and the reports written (a second signal stops at once).\n",
           "--help");
}


static void check_st(int st, const char *what)
{
    cli_check(st, what);
}

/* Register the optimizer groups and build the tensor table. */
static void setup_tensors(run_state *rs)
{
    tm_model *m = rs->model;
    size_t n_own;
    float *own = tm_params(m, &n_own);
    check_st(mha_optim_add(rs->opt, "own", own, tm_grads(m, NULL), n_own), "optimizer");
    for (size_t l = 0; l < rs->mcfg.layers; l++) {
        char g[32];
        size_t n;
        snprintf(g, sizeof g, "layers.%zu", l);
        float *p = mha_params(tm_layer(m, l), &n);
        check_st(mha_optim_add(rs->opt, g, p, mha_grads(tm_layer(m, l), NULL), n), "optimizer");
    }
    rs->n_pt = 0;
    for (size_t gi = 0; gi <= rs->mcfg.layers; gi++) {
        float *gm = NULL, *gv = NULL;
        check_st(mha_optim_group(rs->opt, gi, NULL, NULL, &gm, &gv), "optimizer");
        size_t count = gi == 0 ? TM_NUM_OWN_TENSORS : MHA_NUM_TENSORS;
        float *base = gi == 0 ? own : mha_params(tm_layer(m, gi - 1), NULL);
        for (size_t k = 0; k < count; k++) {
            mha_tensor_info ti;
            if (gi == 0)
                check_st(tm_tensor_info_at(&rs->mcfg, k, &ti), "layout");
            else
                check_st(mha_tensor_info_at(rs->mcfg.model_dim, k, &ti), "layout");
            if (ti.numel == 0)
                continue;
            ckpt_tensor *t = &rs->pt[rs->n_pt++];
            if (gi == 0)
                snprintf(t->name, sizeof t->name, "%s", ti.name);
            else
                snprintf(t->name, sizeof t->name, "layers.%zu.%s", gi - 1, ti.name);
            t->p = base + ti.offset;
            t->m = gm ? gm + ti.offset : NULL;
            t->v = gv ? gv + ti.offset : NULL;
            t->ndim = ti.ndim;
            t->shape[0] = ti.shape[0];
            t->shape[1] = ti.shape[1];
            t->numel = ti.numel;
        }
    }
}

/* 1 if every parameter and optimizer moment is finite (checked after each update, so
 * that no checkpoint ever holds a non-finite value: load_checkpoint refuses those; the
 * moments are stored as float, so a finite double moment can still round to inf). */
static int params_finite(const run_state *rs)
{
    for (size_t i = 0; i < rs->n_pt; i++) {
        const ckpt_tensor *t = &rs->pt[i];
        for (size_t k = 0; k < t->numel; k++)
            if (!isfinite(t->p[k]) || (t->m && !isfinite(t->m[k])) ||
                (t->v && !isfinite(t->v[k])))
                return 0;
    }
    return 1;
}

/* ---- history and CSV ---------------------------------------------------------------- */

static const char *const CSV_HEADER =
    "step,loss,lr,grad_norm,eval_token_accuracy,eval_sequence_accuracy";
static const char *const CSV_FMTS[H_COLS] = {"%.17g", "%.17g", "%.17g", "%.6f", "%.6f"};

/* ---- evaluation ---------------------------------------------------------------------- */

/* Held-out token and sequence accuracy and mean loss (eval mode, no dropout). */
static void evaluate(run_state *rs, const task_buffer *ev, double *tok, double *seq,
                     double *loss)
{
    size_t tc = 0, ts = 0, sc = 0;
    double lsum = 0;
    const size_t chunk = rs->eval_chunk;
    for (size_t first = 0; first < rs->cfg.eval_size; first += chunk) {
        size_t n = rs->cfg.eval_size - first < chunk ? rs->cfg.eval_size - first : chunk;
        tm_batch b = task_view(ev, first, n);
        double l;
        size_t a, s2, c;
        check_st(tm_forward(rs->model, &b, 0, &l), "evaluation forward");
        check_st(tm_accuracy(rs->model, &b, &a, &s2, &c), "accuracy");
        tc += a;
        ts += s2;
        sc += c;
        lsum += l * (double)n;
    }
    *tok = ts ? (double)tc / (double)ts : 0.0;
    *seq = (double)sc / (double)rs->cfg.eval_size;
    *loss = lsum / (double)rs->cfg.eval_size;
}

/* ---- checks before the model is built -------------------------------------------------- */

/* Exit 2 unless the task can give both held-out and training examples: an example is
 * held out when its hash is 0 mod 8, so a task with very few distinct examples (say
 * --seq-len 1 --vocab 2: two) may have none in one split. */
static void check_splits(const task_spec *spec)
{
    task_buffer one;
    check_st(task_buffer_init(&one, spec, 1), "task");
    for (int split = 0; split < 2; split++) {
        mha_pcg32 r;
        mha_pcg32_seed(&r, 1, 99);
        if (task_fill(spec, &r, (task_split)split, &one, 0, 1) != MHA_OK) {
            task_buffer_free(&one);
            cli_die_usage("invalid task size (--seq-len %zu, --vocab %zu%s): no %s example in "
                          "10000 draws; the task has too few distinct examples to hold 1 in 8 "
                          "out for evaluation (by hash). Use a larger --seq-len or --vocab",
                          spec->n, spec->vocab, spec->kind == TASK_LOOKUP ? ", --pairs" : "",
                          split == TASK_EVAL ? "held-out" : "training");
        }
    }
    task_buffer_free(&one);
}

/* Activation bytes one example takes in the model (float; a lower bound: the model's
 * buffers and every layer's cache, without per-thread scratch): xs [(L+1), S, D], logits
 * and their gradient [S, V] each, two [S, D] work buffers, the context [Sk, D] twice; per
 * layer Q, K, V and the merged context, and in stored mode the attention weights
 * [H, S, Sk] (and their dropout bits), in recompute mode one log-sum-exp per (h, row). */
static double example_bytes(const run_config *c, const tm_config *m)
{
    const double S = (double)m->seq_len, Sk = m->ctx_len ? (double)m->ctx_len : S;
    const double D = (double)m->model_dim, H = (double)m->num_heads, L = (double)m->layers;
    const double V = (double)m->vocab_out;
    double own = (L + 1) * S * D + 2 * S * V + 2 * S * D + (m->ctx_len ? 2 * Sk * D : 0);
    double layer = 2 * S * D + 2 * Sk * D;
    if (c->attention == MHA_ATTN_STORED)
        layer += H * S * Sk * (1 + (c->dropout > 0 ? 1.0 / 32 : 0));
    else
        layer += H * S;
    return 4 * (own + L * layer) + 4.0 * (S + 2 * (double)m->ctx_len + 1); /* + its tokens */
}

/* The evaluation chunk (examples per evaluation forward): at most EVAL_CHUNK and
 * --eval-size, and no more than the training batch unless EVAL_BUDGET bytes hold it.
 * Exit 2 with the bytes needed when the model's activations for max(batch, chunk)
 * examples and the evaluation set cannot fit in this machine's memory. */
static size_t plan_memory(const run_config *c, const tm_config *m)
{
    const double per = example_bytes(c, m);
    double fit = floor(EVAL_BUDGET / per);
    size_t chunk = c->eval_size < EVAL_CHUNK ? c->eval_size : EVAL_CHUNK;
    if ((double)chunk > fit)
        chunk = fit > (double)c->batch ? (size_t)fit : c->batch;
    if (chunk > c->eval_size)
        chunk = c->eval_size;
    if (chunk == 0)
        chunk = 1;
    const size_t max_b = c->batch > chunk ? c->batch : chunk;
    const double need = per * (double)max_b +
                        4.0 * (double)c->eval_size * (double)(m->seq_len + 2 * m->ctx_len + 1);
    const double have = (double)cli_memory_limit();
    if (need > have) {
        char a[32], b[32];
        cli_bytes_text(need, a, sizeof a);
        cli_bytes_text(have, b, sizeof b);
        cli_die_usage("--seq-len %zu --batch %zu --attention %s needs at least %s of memory "
                      "(%zu examples of activations%s), more than the %s this process may use; "
                      "use a smaller --batch or --seq-len%s", c->seq_len, c->batch,
                      CLI_ATTN_NAMES[c->attention], a, max_b,
                      c->attention == MHA_ATTN_STORED ? ", with the attention weights" : "", b,
                      c->attention == MHA_ATTN_STORED ? ", or --attention recompute" : "");
    }
    return chunk;
}

/* ---- the schedule of evaluations and the time left ------------------------------------- */

/* 1 if step s (1-based, after its update) evaluates: every --eval-every steps, 4 times as
 * often during the first --eval-every steps (where accuracy changes fastest), and at the
 * last step --steps. */
static int is_eval_step(const run_config *c, uint64_t s)
{
    const uint64_t early = c->eval_every >= 4 ? c->eval_every / 4 : 1;
    return s % c->eval_every == 0 || s == c->steps || (s < c->eval_every && s % early == 0);
}

/* Evaluation steps in (from, to]. */
static uint64_t evals_between(const run_config *c, uint64_t from, uint64_t to)
{
    if (to <= from)
        return 0;
    const uint64_t early = c->eval_every >= 4 ? c->eval_every / 4 : 1;
    uint64_t n = to / c->eval_every - from / c->eval_every; /* multiples of eval_every */
    const uint64_t lim = to < c->eval_every - 1 ? to : c->eval_every - 1; /* early ones */
    if (lim > from)
        n += lim / early - from / early;
    if (to == c->steps && c->steps % c->eval_every != 0 &&
        !(c->steps < c->eval_every && c->steps % early == 0))
        n++; /* the last step */
    return n;
}

/* Seconds left to --steps (or the stop step `end`): the remaining steps at the training
 * speed this process measured (done steps over train_s seconds, evaluation excluded), the
 * remaining evaluations at their measured mean cost (n_eval of them took eval_s), plus
 * the final one after a stop between evaluations. NaN while nothing is measured. */
static double time_left(const run_config *c, uint64_t step, uint64_t end, uint64_t done,
                        double train_s, double eval_s, unsigned long n_eval)
{
    if (done == 0 || train_s <= 0)
        return NAN;
    /* before any evaluation is measured: a forward costs about a third of a training
     * step (forward + backward) of as many examples */
    double per_eval = n_eval ? eval_s / (double)n_eval
                             : train_s / (double)done / 3 * (double)c->eval_size /
                                   (double)c->batch;
    double evals = (double)evals_between(c, step, end);
    if (end < c->steps && !is_eval_step(c, end))
        evals += 1; /* evaluated after the loop */
    return (double)(end - step) * train_s / (double)done + evals * per_eval;
}

static void run_free(run_state *rs, task_buffer *ev, task_buffer *tr)
{
    task_buffer_free(ev);
    task_buffer_free(tr);
    mha_optim_destroy(rs->opt);
    tm_destroy(rs->model);
    report_history_free(&rs->hist);
}


/* ---- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const double t_start = report_now();
    cli_set_program("mha-train");
    /* pass 1: --help */
    int task = TASK_REVERSE;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        }
    }
    run_config cfg;
    int explicit_opt[N_OPTS] = {0};
    /* pass 2: every option, in order; the task is applied first */
    const char *vals[N_OPTS] = {0};
    cli_collect(TRAIN_OPTS, N_OPTS, argc, argv, 1, vals);
    for (size_t k = 0; k < N_OPTS; k++)
        explicit_opt[k] = vals[k] != NULL;
    const size_t k_task = opt_index("task");
    task_defaults(task, &cfg);
    cli_apply(&TRAIN_OPTS[k_task], 1, &vals[k_task], &cfg); /* exit 2 on a bad task */
    task_defaults(cfg.task, &cfg);
    cli_apply(TRAIN_OPTS, N_OPTS, vals, &cfg);
    /* SGD needs a larger step than Adam; the final rate follows the peak */
    if (!explicit_opt[opt_index("lr")] && cfg.optimizer == MHA_OPTIM_SGD)
        cfg.lr = SGD_DEFAULT_LR;
    if (!explicit_opt[opt_index("min-lr")])
        cfg.min_lr = cfg.lr / 100;
    if (!explicit_opt[opt_index("warmup")] && cfg.warmup > cfg.steps / 10)
        cfg.warmup = cfg.steps / 10; /* the default warm-up is at most 10% of a short run */
    resume_info ri = {0, 0, 0};
    if (cfg.resume[0]) {
        resume_config(cfg.resume, explicit_opt, &cfg, &ri);
        if (!explicit_opt[opt_index("out")]) /* the checkpoint's own directory */
            cli_dirname(cfg.resume, cfg.out, sizeof cfg.out);
        if (ri.step == cfg.steps) { /* finished, and no larger --steps: nothing to do */
            printf("%s: %s is a finished run (step %llu of --steps %llu); nothing to do. To "
                   "train it further, resume with a larger --steps (e.g. --steps %llu).\n",
                   cli_program(), cfg.resume, (unsigned long long)ri.step,
                   (unsigned long long)cfg.steps, (unsigned long long)(2 * cfg.steps));
            return 0;
        }
        if (ri.step > cfg.steps)
            cli_die_usage("invalid value '%llu' for --steps: the checkpoint %s is at step %llu "
                          "already; give more steps than that", (unsigned long long)cfg.steps,
                          cfg.resume, (unsigned long long)ri.step);
    }
    /* cross-option checks */
    if (cfg.model_dim % cfg.heads != 0)
        cli_die_usage("invalid value '%zu' for --heads: must divide --model-dim %zu", cfg.heads,
                  cfg.model_dim);
    if (cfg.task == TASK_LOOKUP && cfg.pairs > cfg.vocab)
        cli_die_usage("invalid value '%zu' for --pairs: lookup needs --pairs <= --vocab (%zu) for "
                  "distinct keys", cfg.pairs, cfg.vocab);
    if (cfg.warmup >= cfg.steps)
        cli_die_usage("invalid value '%llu' for --warmup: must be less than --steps (%llu)",
                  (unsigned long long)cfg.warmup, (unsigned long long)cfg.steps);
    if (cfg.min_lr > cfg.lr)
        cli_die_usage("invalid value '%g' for --min-lr: must not exceed --lr (%g)", cfg.min_lr,
                  cfg.lr);
    if (cfg.optimizer != MHA_OPTIM_SGD && explicit_opt[opt_index("momentum")])
        cli_die_usage("--momentum applies to --optimizer sgd only");
    const int n_threads = cli_check_threads(cfg.threads, explicit_opt[opt_index("threads")] ||
                                                         !cfg.resume[0]);

    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.cfg = cfg;
    rs.t_start = t_start;
    rs.elapsed0 = ri.elapsed;
    rs.spec = (task_spec){.kind = (task_kind)cfg.task, .n = cfg.seq_len, .vocab = cfg.vocab,
                          .pairs = cfg.pairs};
    rs.mcfg = (tm_config){.model_dim = cfg.model_dim, .num_heads = cfg.heads,
                          .layers = cfg.layers, .dropout = cfg.dropout, .seed = cfg.seed,
                          .threads = cfg.threads, .attn_mode = (mha_attn_mode)cfg.attention,
                          .pos_sinusoidal = cfg.pos_init};
    if (task_model_shape(&rs.spec, &rs.mcfg) != MHA_OK)
        cli_die_usage("invalid task shape (--seq-len %zu, --vocab %zu, --pairs %zu)", cfg.seq_len,
                  cfg.vocab, cfg.pairs);
    check_splits(&rs.spec);
    rs.eval_chunk = plan_memory(&cfg, &rs.mcfg);
    cli_prepare_out_dir(cfg.out); /* exit 2 before the model is built */
    report_history_init(&rs.hist, H_COLS);
    openblas_set_num_threads(n_threads);

    size_t max_b = cfg.batch > rs.eval_chunk ? cfg.batch : rs.eval_chunk;
    check_st(tm_create(&rs.model, &rs.mcfg, max_b), "cannot create the model");
    mha_optim_config oc;
    check_st(mha_optim_default_config((mha_optim_kind)cfg.optimizer, &oc), "optimizer");
    oc.weight_decay = cfg.weight_decay;
    if (cfg.optimizer == MHA_OPTIM_SGD)
        oc.momentum = cfg.momentum;
    check_st(mha_optim_create(&rs.opt, &oc), "cannot create the optimizer");
    setup_tensors(&rs);
    size_t n_params = 0;
    for (size_t i = 0; i < rs.n_pt; i++)
        n_params += rs.pt[i].numel;
    mha_pcg32_seed(&rs.data_rng, cfg.seed, TASK_STREAM_TRAIN);
    if (cfg.resume[0])
        load_checkpoint(&rs, cfg.resume);

    char csv_path[CLI_PATH_CAP + 64], ckpt_path[CLI_PATH_CAP + 64],
        sum_path[CLI_PATH_CAP + 64], svg_path[CLI_PATH_CAP + 64];
    snprintf(csv_path, sizeof csv_path, "%s/train_log.csv", cfg.out);
    snprintf(ckpt_path, sizeof ckpt_path, "%s/checkpoint.safetensors", cfg.out);
    snprintf(sum_path, sizeof sum_path, "%s/summary.json", cfg.out);
    snprintf(svg_path, sizeof svg_path, "%s/loss.svg", cfg.out);
    /* the last checkpoint of this run that exists: the one resumed from, then each save */
    const char *last_ckpt = cfg.resume[0] ? cfg.resume : NULL;

    /* the header first: building the evaluation set can take a while */
    mha_lr_schedule sched = {.base_lr = cfg.lr, .min_lr = cfg.min_lr,
                             .warmup_steps = cfg.warmup, .total_steps = cfg.steps};
    printf("mha-train: task %s (seq-len %zu, vocab %zu%s), %zu layer(s), D %zu, H %zu, "
           "%zu parameters\n", task_name((task_kind)cfg.task), cfg.seq_len, cfg.vocab,
           cfg.task == TASK_LOOKUP ? ", lookup pairs" : "", cfg.layers, cfg.model_dim,
           cfg.heads, n_params);
    if (cfg.task == TASK_LOOKUP)
        printf("  lookup: %zu key-value pairs in the context\n", cfg.pairs);
    printf("  %s, lr %g (warm-up %llu, cosine to %g), batch %zu, %llu steps, seed %llu, "
           "threads %d, out %s\n", OPTIM_NAMES[cfg.optimizer], cfg.lr,
           (unsigned long long)cfg.warmup, cfg.min_lr, cfg.batch,
           (unsigned long long)cfg.steps, (unsigned long long)cfg.seed, cfg.threads, cfg.out);
    if (cfg.resume[0])
        printf("  resumed from %s at step %llu%s\n", cfg.resume, (unsigned long long)rs.step,
               ri.steps != cfg.steps ? " (--steps changed: the remaining steps follow the "
                                       "schedule of the new --steps)" : "");
    fflush(stdout);
    report_progress prog;
    report_progress_start(&prog);
    const int tty = prog.tty;

    /* held-out set: its own generator stream, disjoint from training by hash class */
    task_buffer ev, tr;
    report_progress_show(&prog, "%sbuilding the evaluation set (%zu examples)...",
                         tty ? "  " : "", cfg.eval_size);
    check_st(task_buffer_init(&ev, &rs.spec, cfg.eval_size), "evaluation set");
    check_st(task_buffer_init(&tr, &rs.spec, cfg.batch), "training batch");
    mha_pcg32 ev_rng;
    mha_pcg32_seed(&ev_rng, cfg.seed, TASK_STREAM_EVAL);
    check_st(task_fill(&rs.spec, &ev_rng, TASK_EVAL, &ev, 0, cfg.eval_size), "evaluation set");
    double t_eval = 0; /* seconds spent in evaluations by this process, and how many */
    unsigned long n_eval = 0;
    if (rs.step == 0) { /* held-out accuracy before training: the curve's first point */
        double el, t = report_now();
        report_progress_show(&prog, "%sevaluating (step 0, %zu examples)...", tty ? "  " : "",
                             cfg.eval_size);
        evaluate(&rs, &ev, &rs.hist.init[H_TOK], &rs.hist.init[H_SEQ], &el);
        t_eval += report_now() - t;
        n_eval++;
    }
    ckpt_remove_stale(ckpt_path); /* temporaries of killed saves */
    report_catch_stop_signals();
    report_csv csv;
    report_csv_open(&csv, csv_path, CSV_HEADER, CSV_FMTS, &rs.hist, rs.step);

    const uint64_t end = (cfg.stop_after && cfg.stop_after < cfg.steps) ? cfg.stop_after
                                                                          : cfg.steps;
    const double t_loop = report_now();
    const double t_eval_before = t_eval; /* the evaluation at step 0 is not in the loop */
    double last_tok = NAN, last_loss = NAN, acc_ema = NAN;
    double ev_tok = NAN, ev_seq = NAN, ev_loss = NAN; /* the evaluation of step ev_step */
    uint64_t ev_step = UINT64_MAX;
    const uint64_t step0 = rs.step;
    int stopped_nonfinite = 0;
    char intact[CLI_PATH_CAP + 128];
    while (rs.step < end) {
        tm_batch b;
        check_st(task_fill(&rs.spec, &rs.data_rng, TASK_TRAIN, &tr, 0, cfg.batch),
                 "training data");
        b = task_view(&tr, 0, cfg.batch);
        double loss, gn = 0, lr;
        if (last_ckpt)
            snprintf(intact, sizeof intact, "The last checkpoint (%s) is intact.", last_ckpt);
        else
            snprintf(intact, sizeof intact, "No checkpoint was written (--ckpt-every %llu).",
                     (unsigned long long)cfg.ckpt_every);
        check_st(tm_zero_grad(rs.model), "zero_grad");
        check_st(tm_forward(rs.model, &b, 1, &loss), "forward");
        if (!isfinite(loss)) {
            fprintf(stderr, "%s%s: stopped at step %llu: the training loss is %g (non-finite); "
                    "try a smaller --lr or --clip. %s\n",
                    tty ? "\n" : "", cli_program(), (unsigned long long)rs.step + 1, loss, intact);
            stopped_nonfinite = 1;
            break;
        }
        size_t tc, ts, sc;
        check_st(tm_accuracy(rs.model, &b, &tc, &ts, &sc), "accuracy");
        double acc = ts ? (double)tc / (double)ts : 0;
        acc_ema = isfinite(acc_ema) ? 0.9 * acc_ema + 0.1 * acc : acc;
        check_st(tm_backward(rs.model, &b), "backward");
        int st = mha_optim_clip_grad_norm(rs.opt, cfg.clip, &gn);
        if (st == MHA_OK)
            st = mha_lr_at(&sched, rs.step, &lr);
        if (st == MHA_OK)
            st = mha_optim_step(rs.opt, lr);
        if (st == MHA_ENONFINITE) {
            fprintf(stderr, "%s%s: stopped at step %llu: a gradient is non-finite (NaN or inf); "
                    "try a smaller --lr or --clip. %s\n",
                    tty ? "\n" : "", cli_program(), (unsigned long long)rs.step + 1, intact);
            stopped_nonfinite = 1;
            break;
        }
        check_st(st, "optimizer step");
        if (!params_finite(&rs)) {
            fprintf(stderr, "%s%s: stopped at step %llu: a parameter or optimizer moment "
                    "became non-finite (NaN or inf) in the update; try a smaller --lr or --clip. "
                    "%s\n", tty ? "\n" : "", cli_program(),
                    (unsigned long long)rs.step + 1, intact);
            stopped_nonfinite = 1;
            break;
        }
        rs.step++;
        last_loss = loss;
        double tok = NAN, seq = NAN;
        if (is_eval_step(&cfg, rs.step)) {
            double t = report_now();
            if (tty)
                report_progress_show(&prog, "  step %llu/%llu  evaluating (%zu examples)...",
                                     (unsigned long long)rs.step,
                                     (unsigned long long)cfg.steps, cfg.eval_size);
            evaluate(&rs, &ev, &tok, &seq, &ev_loss);
            t_eval += report_now() - t;
            n_eval++;
            last_tok = ev_tok = tok;
            ev_seq = seq;
            ev_step = rs.step;
        }
        const double row[H_COLS] = {loss, lr, gn, tok, seq};
        report_history_push(&rs.hist, row);
        report_csv_row(&csv, rs.step, row, H_COLS);
        if (cfg.ckpt_every && rs.step % cfg.ckpt_every == 0 && rs.step != end) {
            report_csv_flush(&csv);
            if (save_checkpoint(&rs, ckpt_path) != MHA_OK)
                cli_die(CLI_EXIT_RUNTIME, "stopping: checkpoint failed");
            last_ckpt = ckpt_path;
        }
        /* time left: the remaining steps at this process's training speed (evaluation
         * excluded), plus the remaining evaluations (the final one included) at their
         * measured mean cost */
        const double now = report_now(), t = now - t_loop;
        double sps = (double)(rs.step - step0) / (t > 0 ? t : 1e-9);
        char left[32];
        report_duration(time_left(&cfg, rs.step, end, rs.step - step0, t - (t_eval - t_eval_before),
                                  t_eval, n_eval), left, sizeof left);
        if (tty) {
            if (report_progress_due(&prog, rs.step == end)) {
                char evs[32] = "-";
                if (isfinite(last_tok))
                    snprintf(evs, sizeof evs, "%.2f%%", 100 * last_tok);
                report_progress_show(&prog, "  step %llu/%llu  loss %.4f  acc %.1f%%  held-out "
                                     "%s  %.0f steps/s  %s left", (unsigned long long)rs.step,
                                     (unsigned long long)cfg.steps, loss, 100 * acc_ema, evs,
                                     sps, left);
            }
        } else if (isfinite(tok)) {
            report_progress_show(&prog, "step %llu/%llu loss %.4f acc %.1f%% held-out token "
                                 "%.2f%% sequence %.2f%% lr %.3g %.0f steps/s elapsed %.1fs "
                                 "left %s", (unsigned long long)rs.step,
                                 (unsigned long long)cfg.steps, loss, 100 * acc_ema, 100 * tok,
                                 100 * seq, lr, sps, now - t_start, left);
        }
        if (report_stop_signal())
            break; /* finish as at --stop-after; a second signal ends the process */
    }
    report_csv_close(&csv);
    if (stopped_nonfinite) {
        report_progress_end(&prog);
        run_free(&rs, &ev, &tr);
        return CLI_EXIT_NONFINITE;
    }

    if (save_checkpoint(&rs, ckpt_path) != MHA_OK)
        return 1;
    if (ev_step != rs.step) { /* the loop's last step was not an evaluation step */
        if (tty)
            report_progress_show(&prog, "  step %llu/%llu  evaluating (%zu examples)...",
                                 (unsigned long long)rs.step, (unsigned long long)cfg.steps,
                                 cfg.eval_size);
        evaluate(&rs, &ev, &ev_tok, &ev_seq, &ev_loss);
    }
    report_progress_end(&prog);
    write_loss_svg(&rs, svg_path);
    char att[TM_MAX_LAYERS][CLI_PATH_CAP + 64];
    const int heatmaps = cfg.attention == MHA_ATTN_STORED; /* recompute keeps no weights */
    if (heatmaps)
        write_attention_svgs(&rs, &ev, att, cfg.out);
    report_remove_stale_numbered(cfg.out, "attention_layer", heatmaps ? cfg.layers : 0, ".svg");
    char ex_path[CLI_PATH_CAP + 32];
    snprintf(ex_path, sizeof ex_path, "%s/example.json", cfg.out);
    write_example_json(&rs, &ev, ex_path);
    /* the whole run's time: earlier processes of a resumed run, and all of this one up to
     * its last file */
    const double wall = rs.elapsed0 + (report_now() - t_start);
    write_summary(&rs, sum_path, wall, ev_tok, ev_seq, ev_loss, last_loss, n_params,
                  rs.step < cfg.steps);

    const int sig = report_stop_signal();
    char walls[32];
    report_duration(wall, walls, sizeof walls);
    if (rs.step < cfg.steps)
        printf("stopped after step %llu of %llu (%s); continue with --resume %s\n",
               (unsigned long long)rs.step, (unsigned long long)cfg.steps,
               sig ? report_signal_name(sig) : "--stop-after", ckpt_path);
    printf("held-out accuracy (%zu examples): token %.2f%%, sequence %.2f%%  (%.1f s = %s%s)\n",
           cfg.eval_size, 100 * ev_tok, 100 * ev_seq, wall, walls,
           rs.elapsed0 > 0 ? ", the whole run" : "");
    printf("pictures: %s", svg_path);
    for (size_t l = 0; heatmaps && l < cfg.layers; l++)
        printf(", %s", att[l]);
    if (!heatmaps)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s  checkpoint: %s\n", csv_path, sum_path, ckpt_path);

    run_free(&rs, &ev, &tr);
    return sig ? 128 + sig : 0;
}
