/*
 * mha-train — train a tiny attention-only transformer (train/model.h) built from the
 * mha module on a toy task (train/tasks.h), with SGD / Adam / AdamW from the library.
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
 * that does not fit; 3 training stopped on a non-finite loss or gradient.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <cblas.h>

#include "mha.h"
#include "mha_optim.h"
#include "model.h"
#include "st.h"
#include "svg.h"
#include "tasks.h"

enum { EXIT_USAGE = 2, EXIT_NONFINITE = 3, PATH_CAP = 4096, EVAL_CHUNK = 250 };
#define CKPT_FORMAT "mha-train/1"
#define SGD_DEFAULT_LR 0.1 /* --lr default for --optimizer sgd (Adam/AdamW: 3e-3) */

/* ---- configuration -------------------------------------------------------------- */

/* Everything a run is made of. Fields marked [ckpt] are stored in checkpoints and
 * must match on --resume. */
typedef struct run_config {
    int task;            /* [ckpt] task_kind                                  */
    size_t seq_len;      /* [ckpt]                                            */
    size_t vocab;        /* [ckpt]                                            */
    size_t pairs;        /* [ckpt] lookup context pairs                       */
    size_t layers;       /* [ckpt]                                            */
    size_t model_dim;    /* [ckpt]                                            */
    size_t heads;        /* [ckpt]                                            */
    double dropout;      /* [ckpt]                                            */
    size_t batch;        /* [ckpt]                                            */
    uint64_t steps;      /* [ckpt]                                            */
    int optimizer;       /* [ckpt] mha_optim_kind                             */
    double lr;           /* [ckpt] peak learning rate                         */
    double min_lr;       /* [ckpt] final learning rate of the cosine          */
    uint64_t warmup;     /* [ckpt]                                            */
    double clip;         /* [ckpt] global gradient-norm clip (0 = off)        */
    double weight_decay; /* [ckpt]                                            */
    double momentum;     /* [ckpt] SGD momentum                               */
    uint64_t seed;       /* [ckpt]                                            */
    size_t eval_size;    /* [ckpt] held-out examples                          */
    uint64_t eval_every; /* [ckpt, overridable] steps between evaluations      */
    uint64_t ckpt_every; /* [ckpt, overridable] 0 = only at the end            */
    uint64_t stop_after; /* stop (with a checkpoint) after this step; 0 = off */
    int threads;         /* attention and BLAS threads (0 = all cores)        */
    int attention;       /* mha_attn_mode of every layer's cache              */
    int pos_init;        /* 0 uniform, 1 sinusoidal (initial pos_emb)         */
    char out[PATH_CAP];  /* output directory                                  */
    char resume[PATH_CAP];
} run_config;

typedef enum opt_type { T_TASK, T_OPTIM, T_ATTN, T_POSINIT, T_SIZE, T_U64, T_DBL, T_INT, T_PATH } opt_type;

typedef struct opt_def {
    const char *name; /* without "--"                                  */
    opt_type type;
    size_t off;       /* offset in run_config                          */
    double lo, hi;    /* numeric range (inclusive)                     */
    int ckpt;         /* 1: stored in checkpoints, must match on --resume;
                         2: stored, taken from the checkpoint unless given;
                         0: not stored                                  */
    const char *arg, *help;
} opt_def;

#define OFF(f) offsetof(run_config, f)
static const opt_def OPTS[] = {
    {"task", T_TASK, OFF(task), 0, 0, 1, "NAME", "reverse | copy | lookup"},
    {"seq-len", T_SIZE, OFF(seq_len), 1, 16384, 1, "N",
     "reverse: sequence length; copy: length of the copied part (the model sees 2N); "
     "lookup: number of queries"},
    {"vocab", T_SIZE, OFF(vocab), 2, 4096, 1, "V", "vocabulary size of the task's tokens"},
    {"pairs", T_SIZE, OFF(pairs), 1, 512, 1, "P", "lookup: key-value pairs in the context"},
    {"layers", T_SIZE, OFF(layers), 1, TM_MAX_LAYERS, 1, "L", "attention layers"},
    {"model-dim", T_SIZE, OFF(model_dim), 1, 4096, 1, "D", "model width"},
    {"heads", T_SIZE, OFF(heads), 1, 4096, 1, "H", "attention heads (must divide D)"},
    {"dropout", T_DBL, OFF(dropout), 0, 1, 1, "P", "attention dropout probability"},
    {"batch", T_SIZE, OFF(batch), 1, 65536, 1, "B", "examples per training step"},
    {"steps", T_U64, OFF(steps), 1, 1e9, 1, "N", "training steps"},
    {"optimizer", T_OPTIM, OFF(optimizer), 0, 0, 1, "NAME", "sgd | adam | adamw"},
    {"lr", T_DBL, OFF(lr), 0, 1e6, 1, "X", "peak learning rate (after warm-up)"},
    {"min-lr", T_DBL, OFF(min_lr), 0, 1e6, 1, "X", "learning rate at the end of the cosine"},
    {"warmup", T_U64, OFF(warmup), 0, 1e9, 1, "N",
     "linear warm-up steps (< --steps; by default at most --steps/10)"},
    {"clip", T_DBL, OFF(clip), 0, 1e12, 1, "X", "clip the global gradient norm (0 = off)"},
    {"weight-decay", T_DBL, OFF(weight_decay), 0, 1e6, 1, "X",
     "weight decay (coupled for sgd/adam, decoupled for adamw)"},
    {"momentum", T_DBL, OFF(momentum), 0, 0.999999, 1, "X", "SGD momentum (--optimizer sgd)"},
    {"seed", T_U64, OFF(seed), 0, 18446744073709551615.0, 1, "N", "seed of weights, dropout and data"},
    {"eval-size", T_SIZE, OFF(eval_size), 1, 1e6, 1, "N", "held-out evaluation examples"},
    {"eval-every", T_U64, OFF(eval_every), 1, 1e9, 2, "N", "steps between held-out evaluations"},
    {"ckpt-every", T_U64, OFF(ckpt_every), 0, 1e9, 2, "N",
     "steps between checkpoints (0 = only at the end)"},
    {"stop-after", T_U64, OFF(stop_after), 0, 1e9, 0, "N",
     "stop after step N with a checkpoint, as if interrupted (0 = run to --steps)"},
    {"threads", T_INT, OFF(threads), 0, 1024, 0, "N",
     "threads for attention and BLAS (0 = all cores; 1 = bitwise reproducible)"},
    {"attention", T_ATTN, OFF(attention), 0, 0, 0, "MODE",
     "stored (saves the attention weights: heat maps) | recompute (memory-efficient: "
     "activation memory linear in the sequence length; no heat maps)"},
    {"pos-init", T_POSINIT, OFF(pos_init), 0, 0, 0, "NAME",
     "initial positional embedding: uniform (±1) | sinusoidal (sin/cos; long sequences "
     "learn from it; still trained)"},
    {"out", T_PATH, OFF(out), 0, 0, 0, "DIR", "output directory (default runs/<task>)"},
    {"resume", T_PATH, OFF(resume), 0, 0, 0, "FILE",
     "continue from a checkpoint (unspecified options are taken from it)"},
};
enum { N_OPTS = sizeof OPTS / sizeof OPTS[0] };

/* Index of option `name` in OPTS (the names used here all exist). */
static size_t opt_index(const char *name)
{
    size_t k = 0;
    while (k < N_OPTS - 1 && strcmp(OPTS[k].name, name) != 0)
        k++;
    return k;
}

static const char *const OPTIM_NAMES[] = {"sgd", "adam", "adamw"};
static const char *const ATTN_NAMES[] = {"stored", "recompute"}; /* by mha_attn_mode */
static const char *const POSINIT_NAMES[] = {"uniform", "sinusoidal"};

/* The defaults of each task (tuned so that the targets are reached, see README). */
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

/* ---- small helpers ---------------------------------------------------------------- */

static const char *prog = "mha-train";

static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see %s --help)\n", prog);
    va_end(ap);
    exit(EXIT_USAGE);
}

static void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(code);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Format option o of config c into buf (the same text --help shows and checkpoints
 * store). */
static void format_opt(const opt_def *o, const run_config *c, char *buf, size_t cap)
{
    const char *p = (const char *)c + o->off;
    switch (o->type) {
    case T_TASK: snprintf(buf, cap, "%s", task_name((task_kind) * (const int *)p)); break;
    case T_OPTIM: snprintf(buf, cap, "%s", OPTIM_NAMES[*(const int *)p]); break;
    case T_ATTN: snprintf(buf, cap, "%s", ATTN_NAMES[*(const int *)p]); break;
    case T_POSINIT: snprintf(buf, cap, "%s", POSINIT_NAMES[*(const int *)p]); break;
    case T_SIZE: snprintf(buf, cap, "%zu", *(const size_t *)p); break;
    case T_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case T_DBL: { /* shortest text that reads back as the same double */
        double v = *(const double *)p;
        snprintf(buf, cap, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, cap, "%.17g", v);
        break;
    }
    case T_INT: snprintf(buf, cap, "%d", *(const int *)p); break;
    case T_PATH: snprintf(buf, cap, "%s", p); break;
    }
}

/* *out = the index of text in names[n]; nonzero (and *out untouched) if absent. */
static int parse_name(const char *text, const char *const *names, int n, int *out)
{
    for (int k = 0; k < n; k++)
        if (strcmp(text, names[k]) == 0) {
            *out = k;
            return 0;
        }
    return 1;
}

/* Parse text into option o of c. Returns NULL or an error message (static). */
static const char *parse_opt(const opt_def *o, const char *text, run_config *c)
{
    char *p = (char *)c + o->off;
    char *end = NULL;
    switch (o->type) {
    case T_TASK: {
        task_kind k;
        if (task_parse(text, &k) != MHA_OK)
            return "must be one of reverse, copy, lookup";
        *(int *)p = (int)k;
        return NULL;
    }
    case T_OPTIM:
        return parse_name(text, OPTIM_NAMES, 3, (int *)p) ? "must be one of sgd, adam, adamw"
                                                          : NULL;
    case T_ATTN:
        return parse_name(text, ATTN_NAMES, 2, (int *)p) ? "must be one of stored, recompute"
                                                         : NULL;
    case T_POSINIT:
        return parse_name(text, POSINIT_NAMES, 2, (int *)p) ? "must be one of uniform, sinusoidal"
                                                            : NULL;
    case T_PATH:
        if (text[0] == '\0' || strlen(text) >= PATH_CAP)
            return "must be a non-empty path";
        strcpy(p, text);
        return NULL;
    case T_DBL: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || end == text || *end != '\0' || !(v >= o->lo && v <= o->hi))
            return "must be a number in range";
        *(double *)p = v;
        return NULL;
    }
    default: {
        if (text[0] < '0' || text[0] > '9') /* strtoull would skip white space and wrap
                                               " -1" to 2^64-1 */
            return "must be a non-negative integer in range";
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (errno || end == text || *end != '\0' || (double)v < o->lo || (double)v > o->hi)
            return "must be a non-negative integer in range";
        if (o->type == T_SIZE)
            *(size_t *)p = (size_t)v;
        else if (o->type == T_U64)
            *(uint64_t *)p = (uint64_t)v;
        else
            *(int *)p = (int)v;
        return NULL;
    }
    }
}

static void range_text(const opt_def *o, char *buf, size_t cap)
{
    if (o->off == OFF(seed))
        snprintf(buf, cap, " [0, 2^64-1]");
    else if (o->type == T_DBL)
        snprintf(buf, cap, " [%g, %g]", o->lo, o->hi);
    else if (o->type == T_SIZE || o->type == T_U64 || o->type == T_INT)
        snprintf(buf, cap, " [%.0f, %.0f]", o->lo, o->hi);
    else
        buf[0] = '\0';
}

/* "  HEAD  text..." with text word-wrapped at 79 columns, continuation lines indented. */
static void print_wrapped(const char *head, const char *text)
{
    const int indent = 25, width = 79;
    int col = printf("  %-22s", head);
    if (col > indent - 1) {
        printf("\n%*s", indent - 1, "");
        col = indent - 1;
    }
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        int len = sp ? (int)(sp - p) : (int)strlen(p);
        if (col + 1 + len > width && col > indent - 1) {
            printf("\n%*s", indent - 1, "");
            col = indent - 1;
        }
        col += printf(" %.*s", len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
    printf("\n");
}

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
           "per task):\n", prog);
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_def *o = &OPTS[i];
        char a[64], b[64], c[64], rng[64], head[64];
        format_opt(o, &d[0], a, sizeof a);
        format_opt(o, &d[1], b, sizeof b);
        format_opt(o, &d[2], c, sizeof c);
        range_text(o, rng, sizeof rng);
        snprintf(head, sizeof head, "--%s %s", o->name, o->arg);
        char text[512];
        snprintf(text, sizeof text, "%s%s", o->help, rng);
        print_wrapped(head, text);
        if (o->off == OFF(lr))
            printf("  %-22s   default: %s (adam, adamw), %g (sgd)\n", "", a, SGD_DEFAULT_LR);
        else if (o->off == OFF(min_lr))
            printf("  %-22s   default: --lr / 100\n", "");
        else if (o->type == T_PATH && strcmp(o->name, "resume") == 0)
            printf("  %-22s   default: none\n", "");
        else if (o->type == T_TASK)
            printf("  %-22s   default: reverse\n", "");
        else if (strcmp(a, b) == 0 && strcmp(a, c) == 0)
            printf("  %-22s   default: %s\n", "", a);
        else
            printf("  %-22s   default: reverse %s, copy %s, lookup %s\n", "", a, b, c);
    }
    printf("  %-22s show this help and exit\n\n"
           "Exit status: 0 done, 1 runtime error, 2 bad option or unusable checkpoint,\n"
           "3 stopped on a non-finite loss or gradient (the last checkpoint stays intact).\n",
           "--help");
}

/* ---- parameter tensors (for the optimizer and checkpoints) -------------------- */

typedef struct ptensor {
    char name[64];
    float *p, *m, *v; /* parameters and the optimizer's moments (NULL if none) */
    size_t ndim, shape[2], numel;
} ptensor;

typedef struct run_state {
    run_config cfg;
    task_spec spec;
    tm_config mcfg;
    tm_model *model;
    mha_optimizer *opt;
    ptensor pt[TM_NUM_OWN_TENSORS + MHA_NUM_TENSORS * TM_MAX_LAYERS];
    size_t n_pt;
    mha_pcg32 data_rng;
    uint64_t step; /* completed steps */
    /* history, one entry per completed step */
    double *h_loss, *h_lr, *h_gn, *h_tok, *h_seq; /* eval columns NaN unless evaluated */
    size_t h_n, h_cap;
    double init_tok, init_seq; /* held-out accuracy before training (NaN: unknown) */
} run_state;

static void check_st(int st, const char *what)
{
    if (st != MHA_OK)
        die(1, "%s: %s", what, mha_strerror(st));
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
            ptensor *t = &rs->pt[rs->n_pt++];
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
        const ptensor *t = &rs->pt[i];
        for (size_t k = 0; k < t->numel; k++)
            if (!isfinite(t->p[k]) || (t->m && !isfinite(t->m[k])) ||
                (t->v && !isfinite(t->v[k])))
                return 0;
    }
    return 1;
}

/* Names of the optimizer moment tensors of a kind (torch's state names). */
static const char *moment_name(int optimizer, int which)
{
    if (optimizer == MHA_OPTIM_SGD)
        return which == 0 ? "momentum_buffer" : NULL;
    return which == 0 ? "exp_avg" : "exp_avg_sq";
}

/* ---- checkpoints ------------------------------------------------------------------ */

static int save_checkpoint(run_state *rs, const char *path)
{
    const size_t cap = 3 * rs->n_pt + 4;
    st_tensor *ts = calloc(cap, sizeof *ts);
    char(*names)[96] = calloc(2 * rs->n_pt, sizeof *names);
    if (!ts || !names)
        die(1, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < rs->n_pt; i++) {
        const ptensor *t = &rs->pt[i];
        ts[n++] = (st_tensor){t->name, ST_F32, t->ndim, {t->shape[0], t->shape[1]}, t->p};
    }
    for (int w = 0; w < 2; w++) {
        const char *mn = moment_name(rs->cfg.optimizer, w);
        for (size_t i = 0; i < rs->n_pt; i++) {
            const ptensor *t = &rs->pt[i];
            const float *data = w == 0 ? t->m : t->v;
            if (!mn || !data)
                continue;
            snprintf(names[w * rs->n_pt + i], 96, "optimizer.%s.%s", mn, t->name);
            ts[n++] = (st_tensor){names[w * rs->n_pt + i], ST_F32, t->ndim,
                                  {t->shape[0], t->shape[1]}, data};
        }
    }
    uint64_t step = rs->step, optim_t = 0, rng[2] = {rs->data_rng.state, rs->data_rng.inc};
    uint64_t calls[TM_MAX_LAYERS];
    check_st(mha_optim_get_step(rs->opt, &optim_t), "optimizer");
    check_st(tm_get_call_indices(rs->model, calls), "model");
    ts[n++] = (st_tensor){"train.step", ST_U64, 0, {0}, &step};
    ts[n++] = (st_tensor){"optimizer.step", ST_U64, 0, {0}, &optim_t};
    ts[n++] = (st_tensor){"data.rng", ST_U64, 1, {2}, rng};
    ts[n++] = (st_tensor){"dropout.call_index", ST_U64, 1, {rs->mcfg.layers}, calls};

    const char *keys[N_OPTS + 1];
    char vals[N_OPTS + 1][80];
    const char *vptr[N_OPTS + 1];
    size_t nm = 0;
    keys[nm] = "format";
    snprintf(vals[nm], sizeof vals[nm], "%s", CKPT_FORMAT);
    vptr[nm] = vals[nm];
    nm++;
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!OPTS[i].ckpt)
            continue;
        keys[nm] = OPTS[i].name;
        format_opt(&OPTS[i], &rs->cfg, vals[nm], sizeof vals[nm]);
        vptr[nm] = vals[nm];
        nm++;
    }
    char err[512] = "";
    int st = st_save(path, ts, n, keys, vptr, nm, err, sizeof err);
    if (st != MHA_OK)
        fprintf(stderr, "%s: cannot save checkpoint %s: %s\n", prog, path, err);
    free(ts);
    free(names);
    return st;
}

/* Take the configuration stored in checkpoint `path` into *cfg: fields with ckpt == 1
 * always (an explicitly given option that differs is refused: exit 2 with both values),
 * fields with ckpt == 2 unless given on the command line. Any unreadable, corrupt or
 * foreign file is refused with st_load's message (exit 2). */
static void resume_config(const char *path, const int *explicit_opt, run_config *cfg)
{
    st_file *f = NULL;
    char err[512] = "";
    int st = st_load(path, &f, err, sizeof err);
    if (st != MHA_OK)
        die(EXIT_USAGE, "cannot resume from %s: %s", path, err);
    const char *fmt = st_meta(f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0)
        die(EXIT_USAGE, "cannot resume from %s: not an %s checkpoint (metadata \"format\" is %s)",
            path, CKPT_FORMAT, fmt ? fmt : "missing");
    run_config ck = *cfg;
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_def *o = &OPTS[i];
        if (!o->ckpt)
            continue;
        const char *v = st_meta(f, o->name);
        if (!v)
            die(EXIT_USAGE, "cannot resume from %s: its metadata has no \"%s\"", path, o->name);
        const char *e = parse_opt(o, v, &ck);
        if (e)
            die(EXIT_USAGE, "cannot resume from %s: metadata %s = \"%s\" %s", path, o->name, v,
                e);
        char mine[80], theirs[80];
        format_opt(o, cfg, mine, sizeof mine);
        format_opt(o, &ck, theirs, sizeof theirs);
        if (o->ckpt == 1 && explicit_opt[i] && strcmp(mine, theirs) != 0)
            die(EXIT_USAGE,
                "checkpoint %s does not fit this run: it was made with --%s %s, this run asks "
                "for --%s %s",
                path, o->name, theirs, o->name, mine);
    }
    /* take every checkpointed field from the file */
    for (size_t i = 0; i < N_OPTS; i++)
        if (OPTS[i].ckpt == 1 || (OPTS[i].ckpt == 2 && !explicit_opt[i])) {
            size_t sz = OPTS[i].type == T_DBL   ? sizeof(double)
                        : OPTS[i].type == T_U64 ? sizeof(uint64_t)
                        : OPTS[i].type == T_SIZE ? sizeof(size_t)
                                                 : sizeof(int);
            memcpy((char *)cfg + OPTS[i].off, (char *)&ck + OPTS[i].off, sz);
        }
    /* the parameter tensors must have the shapes of this config before a model of that
     * config is allocated: a corrupt value (say seq-len 4096) is refused as a mismatch
     * here, not by an allocation failure (exit 1) or after gigabytes of model */
    task_spec spec = {.kind = (task_kind)cfg->task, .n = cfg->seq_len, .vocab = cfg->vocab,
                      .pairs = cfg->pairs};
    tm_config mc = {.model_dim = cfg->model_dim, .num_heads = cfg->heads, .layers = cfg->layers};
    if (task_model_shape(&spec, &mc) == MHA_OK) /* otherwise refused by main's checks */
        for (size_t gi = 0; gi <= mc.layers; gi++) {
            for (size_t k = 0; k < (gi == 0 ? TM_NUM_OWN_TENSORS : MHA_NUM_TENSORS); k++) {
                mha_tensor_info ti;
                char name[96];
                if ((gi == 0 ? tm_tensor_info_at(&mc, k, &ti)
                             : mha_tensor_info_at(mc.model_dim, k, &ti)) != MHA_OK ||
                    ti.numel == 0)
                    continue;
                if (gi == 0)
                    snprintf(name, sizeof name, "%s", ti.name);
                else
                    snprintf(name, sizeof name, "layers.%zu.%s", gi - 1, ti.name);
                if (st_get(f, name, ST_F32, ti.ndim, ti.shape, NULL, err, sizeof err) != MHA_OK)
                    die(EXIT_USAGE, "cannot resume from %s: %s", path, err);
            }
        }
    st_free(f);
}

/* 1 if `name` is a tensor of a checkpoint of this run (load_checkpoint reads exactly
 * these: parameters, the moments the optimizer has, four state tensors). */
static int ckpt_tensor_expected(const run_state *rs, const char *name)
{
    const char *state[] = {"train.step", "optimizer.step", "data.rng", "dropout.call_index"};
    for (size_t i = 0; i < 4; i++)
        if (strcmp(name, state[i]) == 0)
            return 1;
    for (size_t i = 0; i < rs->n_pt; i++) {
        const ptensor *t = &rs->pt[i];
        if (strcmp(name, t->name) == 0)
            return 1;
        for (int w = 0; w < 2; w++) {
            const char *mn = moment_name(rs->cfg.optimizer, w);
            char full[96];
            if (!mn || !(w == 0 ? t->m : t->v))
                continue;
            snprintf(full, sizeof full, "optimizer.%s.%s", mn, t->name);
            if (strcmp(name, full) == 0)
                return 1;
        }
    }
    return 0;
}

/* Load tensors and state from a checkpoint whose config already matches. */
static void load_checkpoint(run_state *rs, const char *path)
{
    st_file *f = NULL;
    char err[512] = "";
    int st = st_load(path, &f, err, sizeof err);
    if (st != MHA_OK)
        die(EXIT_USAGE, "cannot resume from %s: %s", path, err);
    const void *d;
#define GET(nm, dt, nd, shp, dst, bytes)                                                      \
    do {                                                                                      \
        st = st_get(f, (nm), (dt), (nd), (shp), &d, err, sizeof err);                         \
        if (st != MHA_OK)                                                                     \
            die(EXIT_USAGE, "cannot resume from %s: %s", path, err);                          \
        memcpy((dst), d, (bytes));                                                            \
    } while (0)
    for (size_t i = 0; i < rs->n_pt; i++) {
        ptensor *t = &rs->pt[i];
        GET(t->name, ST_F32, t->ndim, t->shape, t->p, t->numel * sizeof(float));
        for (int w = 0; w < 2; w++) {
            const char *mn = moment_name(rs->cfg.optimizer, w);
            float *dst = w == 0 ? t->m : t->v;
            if (!mn || !dst)
                continue;
            char name[96];
            snprintf(name, sizeof name, "optimizer.%s.%s", mn, t->name);
            GET(name, ST_F32, t->ndim, t->shape, dst, t->numel * sizeof(float));
        }
    }
    uint64_t step, optim_t, rng[2], calls[TM_MAX_LAYERS];
    size_t two = 2, L = rs->mcfg.layers;
    GET("train.step", ST_U64, 0, NULL, &step, sizeof step);
    GET("optimizer.step", ST_U64, 0, NULL, &optim_t, sizeof optim_t);
    GET("data.rng", ST_U64, 1, &two, rng, sizeof rng);
    GET("dropout.call_index", ST_U64, 1, &L, calls, L * sizeof(uint64_t));
#undef GET
    /* every completed step made exactly one optimizer step (optimizer.step = train.step) */
    if (step > rs->cfg.steps || optim_t != step || (rng[1] & 1u) == 0)
        die(EXIT_USAGE, "cannot resume from %s: inconsistent state (step %llu of %llu, "
            "optimizer step %llu)", path, (unsigned long long)step,
            (unsigned long long)rs->cfg.steps, (unsigned long long)optim_t);
    for (size_t i = 0; i < rs->n_pt; i++) {
        const ptensor *t = &rs->pt[i];
        for (size_t k = 0; k < t->numel; k++) {
            int w = !isfinite(t->p[k]) ? 0 : (t->m && !isfinite(t->m[k])) ? 1
                    : (t->v && !(isfinite(t->v[k]) && t->v[k] >= 0)) ? 2 : -1;
            if (w >= 0)
                die(EXIT_USAGE, "cannot resume from %s: tensor %s%s%s%s[%zu] holds %g (weights "
                    "and optimizer moments are finite, second moments >= 0)", path,
                    w ? "optimizer." : "", w ? moment_name(rs->cfg.optimizer, w - 1) : "",
                    w ? "." : "", t->name, k,
                    (double)(w == 0 ? t->p[k] : w == 1 ? t->m[k] : t->v[k]));
        }
    }
    for (size_t i = 0; i < st_count(f); i++)
        if (!ckpt_tensor_expected(rs, st_name(f, i)))
            die(EXIT_USAGE, "cannot resume from %s: tensor '%.80s' is not part of this run "
                "(a checkpoint of another task, layer count or optimizer?)", path, st_name(f, i));
    rs->step = step;
    rs->data_rng.state = rng[0];
    rs->data_rng.inc = rng[1];
    check_st(mha_optim_set_step(rs->opt, optim_t), "optimizer");
    check_st(tm_set_call_indices(rs->model, calls), "model");
    st_free(f);
}

/* ---- history and CSV ---------------------------------------------------------------- */

static void history_push(run_state *rs, double loss, double lr, double gn, double tok,
                         double seq)
{
    if (rs->h_n == rs->h_cap) {
        size_t cap = rs->h_cap ? 2 * rs->h_cap : 1024;
        double **arrs[5] = {&rs->h_loss, &rs->h_lr, &rs->h_gn, &rs->h_tok, &rs->h_seq};
        for (int i = 0; i < 5; i++) {
            double *p = realloc(*arrs[i], cap * sizeof(double));
            if (!p)
                die(1, "out of memory");
            *arrs[i] = p;
        }
        rs->h_cap = cap;
    }
    rs->h_loss[rs->h_n] = loss;
    rs->h_lr[rs->h_n] = lr;
    rs->h_gn[rs->h_n] = gn;
    rs->h_tok[rs->h_n] = tok;
    rs->h_seq[rs->h_n] = seq;
    rs->h_n++;
}

static void csv_row(FILE *f, uint64_t step, double loss, double lr, double gn, double tok,
                    double seq)
{
    fprintf(f, "%llu,%.17g,%.17g,%.17g,", (unsigned long long)step, loss, lr, gn);
    if (isfinite(tok))
        fprintf(f, "%.6f,%.6f\n", tok, seq);
    else
        fprintf(f, ",\n");
}

/* On resume: keep the rows of an existing log up to the checkpoint's step (so the
 * curves show the whole run) and rewrite the file with exactly those rows. */
static FILE *open_csv(run_state *rs, const char *path)
{
    if (rs->step > 0) {
        FILE *old = fopen(path, "r");
        if (old) {
            char line[512];
            uint64_t expect = 1;
            while (fgets(line, sizeof line, old) && expect <= rs->step) {
                double t0, s0;
                if (strncmp(line, "0,,,,", 5) == 0 && sscanf(line + 5, "%lg,%lg", &t0, &s0) == 2) {
                    rs->init_tok = t0; /* the evaluation before the first step */
                    rs->init_seq = s0;
                    continue;
                }
                unsigned long long s;
                double loss, lr, gn, tok = NAN, seq = NAN;
                if (sscanf(line, "%llu,%lg,%lg,%lg,%lg,%lg", &s, &loss, &lr, &gn, &tok, &seq) <
                    4)
                    continue;
                if (s != expect)
                    break;
                history_push(rs, loss, lr, gn, tok, seq);
                expect++;
            }
            fclose(old);
            if (rs->h_n != rs->step) { /* incomplete log: keep none rather than a gap */
                rs->h_n = 0;
            }
        }
    }
    FILE *f = fopen(path, "w");
    if (!f)
        die(1, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "step,loss,lr,grad_norm,eval_token_accuracy,eval_sequence_accuracy\n");
    if (isfinite(rs->init_tok))
        fprintf(f, "0,,,,%.6f,%.6f\n", rs->init_tok, rs->init_seq);
    for (size_t i = 0; i < rs->h_n; i++)
        csv_row(f, (uint64_t)(rs->step - rs->h_n + i + 1), rs->h_loss[i], rs->h_lr[i],
                rs->h_gn[i], rs->h_tok[i], rs->h_seq[i]);
    return f;
}

/* ---- evaluation ---------------------------------------------------------------------- */

/* Held-out token and sequence accuracy and mean loss (eval mode, no dropout). */
static void evaluate(run_state *rs, const task_buffer *ev, double *tok, double *seq,
                     double *loss)
{
    size_t tc = 0, ts = 0, sc = 0;
    double lsum = 0;
    for (size_t first = 0; first < rs->cfg.eval_size; first += EVAL_CHUNK) {
        size_t n = rs->cfg.eval_size - first < EVAL_CHUNK ? rs->cfg.eval_size - first
                                                          : EVAL_CHUNK;
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

/* ---- pictures and summary ------------------------------------------------------------ */

static void write_loss_svg(const run_state *rs, const char *path)
{
    size_t n = rs->h_n;
    double *x = malloc((n + 1) * sizeof(double));
    double *ex = malloc((n + 2) * sizeof(double)), *et = malloc((n + 2) * sizeof(double)),
           *es = malloc((n + 2) * sizeof(double)), *sm = malloc((n + 1) * sizeof(double));
    if (!x || !ex || !et || !es || !sm)
        die(1, "out of memory");
    size_t ne = 0;
    const uint64_t first = rs->step - n + 1;
    if (isfinite(rs->init_tok) && first == 1) {
        ex[ne] = 0;
        et[ne] = 100.0 * rs->init_tok;
        es[ne] = 100.0 * rs->init_seq;
        ne++;
    }
    const size_t w = n / 100 > 1 ? n / 100 : 1; /* half-width of the smoothing window */
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(first + i);
        /* a smoothed curve next to the raw loss: centred moving mean over 2w+1 steps */
        size_t lo = i > w ? i - w : 0, hi = i + w < n ? i + w : n - 1;
        double sum = 0;
        for (size_t k = lo; k <= hi; k++)
            sum += rs->h_loss[k];
        sm[i] = sum / (double)(hi - lo + 1);
        if (isfinite(rs->h_tok[i])) {
            ex[ne] = x[i];
            et[ne] = 100.0 * rs->h_tok[i];
            es[ne] = 100.0 * rs->h_seq[i];
            ne++;
        }
    }
    char title[160];
    snprintf(title, sizeof title, "%s: training loss (cross-entropy, log scale)",
             task_name((task_kind)rs->cfg.task));
    svg_series ls[2] = {{"loss", "#9ecae1", x, rs->h_loss, n},
                        {"loss (smoothed)", "#08519c", x, sm, n}};
    svg_series as[2] = {{"token acc.", "#d94801", ex, et, ne},
                        {"sequence acc.", "#238b45", ex, es, ne}};
    svg_chart ch[2] = {{title, "step", "loss", ls, 2, 1, 0, 0},
                       {"held-out accuracy (%)", "step", "accuracy %", as, 2, 0, 0, 100}};
    int st = svg_write_charts(path, ch, 2, 900, 330);
    if (st != MHA_OK)
        die(1, "cannot write %s: %s", path, mha_strerror(st));
    free(x);
    free(ex);
    free(et);
    free(es);
    free(sm);
}

/* Heat maps of every head of every layer for held-out example 0. */
static void write_attention_svgs(run_state *rs, const task_buffer *ev, char paths[][PATH_CAP + 64],
                                 const char *dir)
{
    tm_batch b = task_view(ev, 0, 1);
    check_st(tm_forward(rs->model, &b, 0, NULL), "evaluation forward");
    const size_t S = rs->mcfg.seq_len, Sk = rs->mcfg.ctx_len ? rs->mcfg.ctx_len : S;
    char(*rl)[24] = calloc(S, sizeof *rl);
    char(*cl)[24] = calloc(Sk, sizeof *cl);
    const char **rlp = calloc(S, sizeof *rlp), **clp = calloc(Sk, sizeof *clp);
    if (!rl || !cl || !rlp || !clp)
        die(1, "out of memory");
    for (size_t i = 0; i < S; i++) {
        int32_t t = b.tokens[i];
        if (rs->cfg.task == TASK_COPY && (size_t)t == rs->cfg.vocab)
            snprintf(rl[i], sizeof rl[i], "|");
        else
            snprintf(rl[i], sizeof rl[i], "%d", (int)t);
        rlp[i] = rl[i];
    }
    for (size_t j = 0; j < Sk; j++) {
        if (rs->mcfg.ctx_len)
            snprintf(cl[j], sizeof cl[j], "%d:%d", (int)b.ctx[2 * j], (int)b.ctx[2 * j + 1]);
        else
            snprintf(cl[j], sizeof cl[j], "%s", rl[j]);
        clp[j] = cl[j];
    }
    for (size_t l = 0; l < rs->mcfg.layers; l++) {
        const float *w;
        size_t shape[4];
        check_st(tm_attention(rs->model, l, &w, shape), "attention weights");
        size_t n = shape[1] * shape[2] * shape[3];
        double *wd = malloc(n * sizeof(double));
        if (!wd)
            die(1, "out of memory");
        for (size_t i = 0; i < n; i++)
            wd[i] = w[i];
        snprintf(paths[l], PATH_CAP + 64, "%s/attention_layer%zu.svg", dir, l);
        char title[200];
        snprintf(title, sizeof title,
                 "%s, layer %zu: attention weights for one held-out example (labels: tokens%s)",
                 task_name((task_kind)rs->cfg.task), l,
                 rs->mcfg.ctx_len ? "; columns key:value" : "");
        int st = svg_write_heatmaps(paths[l], title, shape[1], shape[2], shape[3], wd, rlp, clp);
        if (st != MHA_OK)
            die(1, "cannot write %s: %s", paths[l], mha_strerror(st));
        free(wd);
    }
    free(rl);
    free(cl);
    free(rlp);
    free(clp);
}

/* Write a cJSON tree to path (indented when pretty), then free the tree. */
static void write_json(cJSON *root, const char *path, int pretty)
{
    char *text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
    if (!text)
        die(1, "out of memory");
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) == EOF || fputc('\n', f) == EOF || fclose(f) != 0)
        die(1, "cannot write %s: %s", path, strerror(errno));
    cJSON_free(text);
    cJSON_Delete(root);
}

/* cJSON array of n floats. */
static cJSON *json_floats(const float *x, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)x[i]));
    return a;
}

/* example.json: held-out example 0 with the model's activations, for inspection and for
 * tools/check_checkpoint_torch.py (which recomputes them with the seed's PyTorch module
 * from checkpoint.safetensors): tokens, ctx (key, value pairs), targets, predictions,
 * x[l] = residual stream before layer l (l = 0..L; x[L] feeds the read-out), ctx_embedded,
 * logits; matrices as row-major nested lists. */
static void write_example_json(run_state *rs, const task_buffer *ev, const char *path)
{
    tm_batch b = task_view(ev, 0, 1);
    check_st(tm_forward(rs->model, &b, 0, NULL), "evaluation forward");
    const size_t S = rs->mcfg.seq_len, Sk = rs->mcfg.ctx_len, D = rs->mcfg.model_dim;
    const size_t V = rs->mcfg.vocab_out;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "task", task_name((task_kind)rs->cfg.task));
    cJSON_AddBoolToObject(root, "causal", rs->mcfg.causal);
    cJSON_AddNumberToObject(root, "step", (double)rs->step);
    cJSON *tok = cJSON_AddArrayToObject(root, "tokens");
    cJSON *tgt = cJSON_AddArrayToObject(root, "targets");
    cJSON *pred = cJSON_AddArrayToObject(root, "predictions");
    const float *logits = tm_logits(rs->model);
    for (size_t i = 0; i < S; i++) {
        cJSON_AddItemToArray(tok, cJSON_CreateNumber(b.tokens[i]));
        cJSON_AddItemToArray(tgt, cJSON_CreateNumber(b.targets[i]));
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (logits[i * V + v] > logits[i * V + best])
                best = v;
        cJSON_AddItemToArray(pred, cJSON_CreateNumber(b.targets[i] < 0 ? -1.0 : (double)best));
    }
    if (Sk) {
        cJSON *ctx = cJSON_AddArrayToObject(root, "ctx");
        cJSON *ce = cJSON_AddArrayToObject(root, "ctx_embedded");
        for (size_t j = 0; j < Sk; j++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(b.ctx[2 * j]));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(b.ctx[2 * j + 1]));
            cJSON_AddItemToArray(ctx, pair);
            cJSON_AddItemToArray(ce, json_floats(tm_context(rs->model) + j * D, D));
        }
    }
    cJSON *xs = cJSON_AddArrayToObject(root, "x");
    for (size_t l = 0; l <= rs->mcfg.layers; l++) {
        cJSON *xl = cJSON_CreateArray();
        for (size_t i = 0; i < S; i++)
            cJSON_AddItemToArray(xl, json_floats(tm_activation(rs->model, l) + i * D, D));
        cJSON_AddItemToArray(xs, xl);
    }
    cJSON *lg = cJSON_AddArrayToObject(root, "logits");
    for (size_t i = 0; i < S; i++)
        cJSON_AddItemToArray(lg, json_floats(logits + i * V, V));
    write_json(root, path, 0);
}

static void write_summary(const run_state *rs, const char *path, double wall, double tok,
                          double seq, double eval_loss, double final_loss, size_t n_params,
                          int stopped_early)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "task", task_name((task_kind)rs->cfg.task));
    cJSON_AddNumberToObject(root, "steps", (double)rs->step);
    cJSON_AddBoolToObject(root, "completed", !stopped_early);
    cJSON_AddNumberToObject(root, "wall_seconds", wall);
    cJSON_AddNumberToObject(root, "token_accuracy", tok);
    cJSON_AddNumberToObject(root, "sequence_accuracy", seq);
    cJSON_AddNumberToObject(root, "eval_loss", eval_loss);
    cJSON_AddNumberToObject(root, "final_train_loss", final_loss);
    cJSON_AddNumberToObject(root, "eval_examples", (double)rs->cfg.eval_size);
    cJSON_AddNumberToObject(root, "parameters", (double)n_params);
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_def *o = &OPTS[i];
        char v[PATH_CAP + 8];
        if (strcmp(o->name, "resume") == 0 && rs->cfg.resume[0] == '\0') {
            cJSON_AddNullToObject(cfg, o->name);
            continue;
        }
        format_opt(o, &rs->cfg, v, sizeof v);
        if (o->type == T_TASK || o->type == T_OPTIM || o->type == T_ATTN ||
            o->type == T_POSINIT || o->type == T_PATH)
            cJSON_AddStringToObject(cfg, o->name, v);
        else if (o->type == T_DBL)
            cJSON_AddNumberToObject(cfg, o->name, *(const double *)((const char *)&rs->cfg + o->off));
        else if (o->type == T_SIZE && *(const size_t *)((const char *)&rs->cfg + o->off) > (1ull << 53))
            cJSON_AddStringToObject(cfg, o->name, v);
        else if (o->type == T_U64 && *(const uint64_t *)((const char *)&rs->cfg + o->off) > (1ull << 53))
            cJSON_AddStringToObject(cfg, o->name, v); /* exact, e.g. a 64-bit seed */
        else
            cJSON_AddNumberToObject(cfg, o->name, strtod(v, NULL));
    }
    write_json(root, path, 1);
}

static void run_free(run_state *rs, task_buffer *ev, task_buffer *tr)
{
    task_buffer_free(ev);
    task_buffer_free(tr);
    mha_optim_destroy(rs->opt);
    tm_destroy(rs->model);
    free(rs->h_loss);
    free(rs->h_lr);
    free(rs->h_gn);
    free(rs->h_tok);
    free(rs->h_seq);
}

/* mkdir -p */
static void make_dirs(const char *path)
{
    char buf[PATH_CAP];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                die(1, "cannot create directory %s: %s", buf, strerror(errno));
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        die(1, "cannot create directory %s: %s", buf, strerror(errno));
}

static void fmt_duration(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, cap, "?");
    else if (s < 60)
        snprintf(buf, cap, "%.0fs", s);
    else
        snprintf(buf, cap, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
}

/* ---- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            die_usage("unexpected argument '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        size_t k;
        for (k = 0; k < N_OPTS; k++)
            if (strlen(OPTS[k].name) == len && strncmp(OPTS[k].name, name, len) == 0)
                break;
        if (k == N_OPTS)
            die_usage("unknown option '%s'", a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!eq && v && strncmp(v, "--", 2) == 0) /* no value accepted starts with "--" */
            v = NULL;
        if (!v)
            die_usage("option --%s needs a value (%s)", OPTS[k].name, OPTS[k].arg);
        vals[k] = v;
        explicit_opt[k] = 1;
    }
    const char *task_val = vals[opt_index("task")];
    if (task_val) {
        task_kind tk;
        if (task_parse(task_val, &tk) != MHA_OK)
            die_usage("invalid value '%s' for --task: must be one of reverse, copy, lookup",
                      task_val);
        task = (int)tk;
    }
    task_defaults(task, &cfg);
    for (size_t k = 0; k < N_OPTS; k++) {
        if (!vals[k])
            continue;
        const char *e = parse_opt(&OPTS[k], vals[k], &cfg);
        if (e) {
            char rng[64];
            range_text(&OPTS[k], rng, sizeof rng);
            die_usage("invalid value '%s' for --%s: %s%s", vals[k], OPTS[k].name, e, rng);
        }
    }
    /* SGD needs a larger step than Adam; the final rate follows the peak */
    if (!explicit_opt[opt_index("lr")] && cfg.optimizer == MHA_OPTIM_SGD)
        cfg.lr = SGD_DEFAULT_LR;
    if (!explicit_opt[opt_index("min-lr")])
        cfg.min_lr = cfg.lr / 100;
    if (!explicit_opt[opt_index("warmup")] && cfg.warmup > cfg.steps / 10)
        cfg.warmup = cfg.steps / 10; /* the default warm-up is at most 10% of a short run */
    if (cfg.resume[0]) {
        resume_config(cfg.resume, explicit_opt, &cfg);
        if (!explicit_opt[opt_index("out")]) {
            /* default --out follows the checkpoint's task */
            snprintf(cfg.out, sizeof cfg.out, "runs/%s", task_name((task_kind)cfg.task));
        }
    }
    /* cross-option checks */
    if (cfg.model_dim % cfg.heads != 0)
        die_usage("invalid value '%zu' for --heads: must divide --model-dim %zu", cfg.heads,
                  cfg.model_dim);
    if (cfg.task == TASK_LOOKUP && cfg.pairs > cfg.vocab)
        die_usage("invalid value '%zu' for --pairs: lookup needs --pairs <= --vocab (%zu) for "
                  "distinct keys", cfg.pairs, cfg.vocab);
    if (cfg.warmup >= cfg.steps)
        die_usage("invalid value '%llu' for --warmup: must be less than --steps (%llu)",
                  (unsigned long long)cfg.warmup, (unsigned long long)cfg.steps);
    if (cfg.min_lr > cfg.lr)
        die_usage("invalid value '%g' for --min-lr: must not exceed --lr (%g)", cfg.min_lr,
                  cfg.lr);
    if (cfg.optimizer != MHA_OPTIM_SGD && explicit_opt[opt_index("momentum")])
        die_usage("--momentum applies to --optimizer sgd only");

    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.cfg = cfg;
    rs.init_tok = rs.init_seq = NAN;
    rs.spec = (task_spec){.kind = (task_kind)cfg.task, .n = cfg.seq_len, .vocab = cfg.vocab,
                          .pairs = cfg.pairs};
    rs.mcfg = (tm_config){.model_dim = cfg.model_dim, .num_heads = cfg.heads,
                          .layers = cfg.layers, .dropout = cfg.dropout, .seed = cfg.seed,
                          .threads = cfg.threads, .attn_mode = (mha_attn_mode)cfg.attention,
                          .pos_sinusoidal = cfg.pos_init};
    if (task_model_shape(&rs.spec, &rs.mcfg) != MHA_OK)
        die_usage("invalid task shape (--seq-len %zu, --vocab %zu, --pairs %zu)", cfg.seq_len,
                  cfg.vocab, cfg.pairs);
    openblas_set_num_threads(cfg.threads > 0 ? cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN));

    size_t max_b = cfg.batch > EVAL_CHUNK ? cfg.batch : EVAL_CHUNK;
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

    make_dirs(cfg.out);
    char csv_path[PATH_CAP + 64], ckpt_path[PATH_CAP + 64], sum_path[PATH_CAP + 64],
        svg_path[PATH_CAP + 64];
    snprintf(csv_path, sizeof csv_path, "%s/train_log.csv", cfg.out);
    snprintf(ckpt_path, sizeof ckpt_path, "%s/checkpoint.safetensors", cfg.out);
    snprintf(sum_path, sizeof sum_path, "%s/summary.json", cfg.out);
    snprintf(svg_path, sizeof svg_path, "%s/loss.svg", cfg.out);

    /* held-out set: its own generator stream, disjoint from training by hash class */
    task_buffer ev, tr;
    check_st(task_buffer_init(&ev, &rs.spec, cfg.eval_size), "evaluation set");
    check_st(task_buffer_init(&tr, &rs.spec, cfg.batch), "training batch");
    mha_pcg32 ev_rng;
    mha_pcg32_seed(&ev_rng, cfg.seed, TASK_STREAM_EVAL);
    check_st(task_fill(&rs.spec, &ev_rng, TASK_EVAL, &ev, 0, cfg.eval_size), "evaluation set");
    if (rs.step == 0) { /* held-out accuracy before training: the curve's first point */
        double el;
        evaluate(&rs, &ev, &rs.init_tok, &rs.init_seq, &el);
    }
    FILE *csv = open_csv(&rs, csv_path);

    mha_lr_schedule sched = {.base_lr = cfg.lr, .min_lr = cfg.min_lr,
                             .warmup_steps = cfg.warmup, .total_steps = cfg.steps};
    const int tty = isatty(STDOUT_FILENO);
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
        printf("  resumed from %s at step %llu\n", cfg.resume, (unsigned long long)rs.step);
    fflush(stdout);

    const uint64_t end = (cfg.stop_after && cfg.stop_after < cfg.steps) ? cfg.stop_after
                                                                          : cfg.steps;
    const double t0 = now_seconds();
    double last_print = 0, last_tok = NAN, last_loss = NAN, acc_ema = NAN;
    const uint64_t step0 = rs.step;
    int stopped_nonfinite = 0;
    while (rs.step < end) {
        tm_batch b;
        check_st(task_fill(&rs.spec, &rs.data_rng, TASK_TRAIN, &tr, 0, cfg.batch),
                 "training data");
        b = task_view(&tr, 0, cfg.batch);
        double loss, gn = 0, lr;
        check_st(tm_zero_grad(rs.model), "zero_grad");
        check_st(tm_forward(rs.model, &b, 1, &loss), "forward");
        if (!isfinite(loss)) {
            fprintf(stderr, "%s%s: stopped at step %llu: the training loss is %g (non-finite); "
                    "try a smaller --lr or --clip. The last checkpoint (%s) is intact.\n",
                    tty ? "\n" : "", prog, (unsigned long long)rs.step + 1, loss, ckpt_path);
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
                    "try a smaller --lr or --clip. The last checkpoint (%s) is intact.\n",
                    tty ? "\n" : "", prog, (unsigned long long)rs.step + 1, ckpt_path);
            stopped_nonfinite = 1;
            break;
        }
        check_st(st, "optimizer step");
        if (!params_finite(&rs)) {
            fprintf(stderr, "%s%s: stopped at step %llu: a parameter or optimizer moment "
                    "became non-finite (NaN or inf) in the update; try a smaller --lr or --clip. "
                    "The last checkpoint (%s) is intact.\n", tty ? "\n" : "", prog,
                    (unsigned long long)rs.step + 1, ckpt_path);
            stopped_nonfinite = 1;
            break;
        }
        rs.step++;
        last_loss = loss;
        double tok = NAN, seq = NAN;
        /* held-out evaluation every --eval-every steps (and 4 times as often during the
         * first --eval-every steps, where accuracy changes fastest) and at the end */
        const uint64_t early = cfg.eval_every >= 4 ? cfg.eval_every / 4 : 1;
        if (rs.step % cfg.eval_every == 0 || rs.step == cfg.steps ||
            (rs.step < cfg.eval_every && rs.step % early == 0)) {
            double el;
            evaluate(&rs, &ev, &tok, &seq, &el);
            last_tok = tok;
        }
        history_push(&rs, loss, lr, gn, tok, seq);
        csv_row(csv, rs.step, loss, lr, gn, tok, seq);
        if (cfg.ckpt_every && rs.step % cfg.ckpt_every == 0 && rs.step != end) {
            fflush(csv);
            if (save_checkpoint(&rs, ckpt_path) != MHA_OK)
                die(1, "stopping: checkpoint failed");
        }
        double t = now_seconds() - t0;
        double sps = (double)(rs.step - step0) / (t > 0 ? t : 1e-9);
        char left[32];
        fmt_duration((double)(cfg.steps - rs.step) / sps, left, sizeof left);
        if (tty) {
            if (t - last_print >= 0.1 || rs.step == end) {
                last_print = t;
                char evs[32] = "-";
                if (isfinite(last_tok))
                    snprintf(evs, sizeof evs, "%.2f%%", 100 * last_tok);
                printf("\r  step %llu/%llu  loss %.4f  acc %.1f%%  held-out %s  %.0f steps/s  "
                       "%s left   ", (unsigned long long)rs.step,
                       (unsigned long long)cfg.steps, loss, 100 * acc_ema, evs, sps, left);
                fflush(stdout);
            }
        } else if (isfinite(tok)) {
            printf("step %llu/%llu loss %.4f acc %.1f%% held-out token %.2f%% sequence %.2f%% "
                   "lr %.3g %.0f steps/s elapsed %.1fs left %s\n", (unsigned long long)rs.step,
                   (unsigned long long)cfg.steps, loss, 100 * acc_ema, 100 * tok, 100 * seq, lr,
                   sps, t, left);
            fflush(stdout);
        }
    }
    const double wall = now_seconds() - t0;
    if (tty)
        printf("\n");
    if (fclose(csv) != 0)
        die(1, "cannot write %s", csv_path);
    if (stopped_nonfinite) {
        run_free(&rs, &ev, &tr);
        return EXIT_NONFINITE;
    }

    if (save_checkpoint(&rs, ckpt_path) != MHA_OK)
        return 1;
    double tok, seq, eval_loss;
    evaluate(&rs, &ev, &tok, &seq, &eval_loss);
    write_summary(&rs, sum_path, wall, tok, seq, eval_loss, last_loss, n_params,
                  rs.step < cfg.steps);
    write_loss_svg(&rs, svg_path);
    char att[TM_MAX_LAYERS][PATH_CAP + 64];
    const int heatmaps = cfg.attention == MHA_ATTN_STORED; /* recompute keeps no weights */
    if (heatmaps)
        write_attention_svgs(&rs, &ev, att, cfg.out);
    char ex_path[PATH_CAP + 32];
    snprintf(ex_path, sizeof ex_path, "%s/example.json", cfg.out);
    write_example_json(&rs, &ev, ex_path);

    if (rs.step < cfg.steps)
        printf("stopped after step %llu of %llu (--stop-after); continue with --resume %s\n",
               (unsigned long long)rs.step, (unsigned long long)cfg.steps, ckpt_path);
    printf("held-out accuracy (%zu examples): token %.2f%%, sequence %.2f%%  (%.1f s)\n",
           cfg.eval_size, 100 * tok, 100 * seq, wall);
    printf("pictures: %s", svg_path);
    for (size_t l = 0; heatmaps && l < cfg.layers; l++)
        printf(", %s", att[l]);
    if (!heatmaps)
        printf(" (no attention heat maps with --attention recompute)");
    printf("\nlog: %s  summary: %s  checkpoint: %s\n", csv_path, sum_path, ckpt_path);

    run_free(&rs, &ev, &tr);
    return 0;
}
