/*
 * mha-train's command line: the option table (what `--help` lists and checkpoints
 * store), the defaults per task, the help text, and the reading of the options into a
 * run_config — with --resume, the checkpoint's options merged in — and the checks across
 * options. Every refusal exits 2 with a message naming the option (cli.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mha_optim.h"
#include "toy_run.h"

#define SGD_DEFAULT_LR 0.1 /* --lr default for --optimizer sgd (Adam/AdamW: 3e-3) */

const char *const TOY_OPTIM_NAMES[] = {"sgd", "adam", "adamw", NULL};
static const char *const TASK_NAMES[] = {"reverse", "copy", "lookup", NULL}; /* task_kind */
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
    {"dim", CLI_SIZE, OFF(model_dim), 1, 4096, 1, "D",
     "model width (--model-dim, its former name, is accepted too)", NULL},
    {"heads", CLI_SIZE, OFF(heads), 1, 4096, 1, "H", "attention heads (must divide D)", NULL},
    {"dropout", CLI_DBL, OFF(dropout), 0, 1, 1, "P", "attention dropout probability", NULL},
    {"batch", CLI_SIZE, OFF(batch), 1, 65536, 1, "B", "examples per training step", NULL},
    CLI_OPT_STEPS(OFF(steps)),
    {"optimizer", CLI_CHOICE, OFF(optimizer), 0, 0, 1, "NAME", "sgd | adam | adamw", TOY_OPTIM_NAMES},
    CLI_OPT_LR(OFF(lr), 1),
    CLI_OPT_MIN_LR(OFF(min_lr), 1),
    {"warmup", CLI_U64, OFF(warmup), 0, 1e9, 1, "N",
     "linear warm-up steps (< --steps; by default at most --steps/10)", NULL},
    CLI_OPT_CLIP(OFF(clip), 1),
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
    CLI_OPT_RESUME(OFF(resume)),
    CLI_OPT_FORCE(OFF(force)),
    CLI_OPT_PROGRESS(OFF(progress)),
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
    static const run_config d = {
        .layers = 1, .model_dim = 64, .heads = 4, .dropout = 0.0, .batch = 64,
        .optimizer = MHA_OPTIM_ADAM, .lr = 3e-3, .min_lr = 3e-5, .warmup = 100, .clip = 1.0,
        .weight_decay = 0.0, .momentum = 0.9, .seed = 1, .eval_size = 2000, .eval_every = 100,
        .ckpt_every = 250, .threads = 1, .seq_len = 16, .vocab = 16, .pairs = 16,
        .steps = 1000}; /* reverse and copy; lookup: below */
    *c = d;
    c->task = task;
    if (task == TASK_LOOKUP) {
        c->seq_len = 8;
        c->vocab = 32;
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
        else if (o->type == CLI_FLAG)
            continue;
        else if (o->off == OFF(task))
            printf("  %-22s   default: reverse\n", "");
        else if (strcmp(a, b) == 0 && strcmp(a, c) == 0)
            printf("  %-22s   default: %s\n", "", a);
        else
            printf("  %-22s   default: reverse %s, copy %s, lookup %s\n", "", a, b, c);
    }
    printf("  %-22s show this help and exit\n\n"
           "Exit status: 0 done, 1 runtime error, 2 bad option, unusable checkpoint or an\n"
           "--out in use by another run or holding another run's checkpoint (see --force),\n"
           "3 stopped on a non-finite loss or gradient (the last checkpoint stays intact),\n"
           "130 / 143 stopped by Ctrl-C (SIGINT) / SIGTERM after finishing the step, with a\n"
           "checkpoint and the reports written (a second signal stops at once).\n",
           "--help");
}

/* ---- reading the command line ------------------------------------------------------ */

/* Options in order, the task first (its defaults under the rest); the defaults that
 * follow other options (--lr for sgd, --min-lr, --warmup). explicit_opt[k]: option k was
 * given. */
static void read_options(int argc, char **argv, run_config *cfg, int *explicit_opt)
{
    const char *vals[N_OPTS] = {0};
    cli_collect(TRAIN_OPTS, N_OPTS, argc, argv, 1, vals);
    for (size_t k = 0; k < N_OPTS; k++)
        explicit_opt[k] = vals[k] != NULL;
    const size_t k_task = opt_index("task");
    task_defaults(TASK_REVERSE, cfg);
    cli_apply(&TRAIN_OPTS[k_task], 1, &vals[k_task], cfg); /* exit 2 on a bad task */
    task_defaults(cfg->task, cfg);
    cli_apply(TRAIN_OPTS, N_OPTS, vals, cfg);
    /* SGD needs a larger step than Adam; the final rate follows the peak */
    if (!explicit_opt[opt_index("lr")] && cfg->optimizer == MHA_OPTIM_SGD)
        cfg->lr = SGD_DEFAULT_LR;
    if (!explicit_opt[opt_index("min-lr")])
        cfg->min_lr = cfg->lr / 100;
    if (!explicit_opt[opt_index("warmup")] && cfg->warmup > cfg->steps / 10)
        cfg->warmup = cfg->steps / 10; /* the default warm-up is at most 10% of a short run */
}

/* Exit 2 unless the options agree with each other. */
static void check_across_options(const run_config *cfg, const int *explicit_opt)
{
    if (cfg->model_dim % cfg->heads != 0)
        cli_die_usage("invalid value '%zu' for --heads: must divide --dim %zu", cfg->heads,
                      cfg->model_dim);
    if (cfg->task == TASK_LOOKUP && cfg->pairs > cfg->vocab)
        cli_die_usage("invalid value '%zu' for --pairs: lookup needs --pairs <= --vocab (%zu) "
                      "for distinct keys", cfg->pairs, cfg->vocab);
    uint64_t warmup = cfg->warmup; /* a default one was made at most a tenth already */
    train_check_schedule(cfg->lr, cfg->min_lr, &warmup, cfg->steps, 1, 0);
    if (cfg->optimizer != MHA_OPTIM_SGD && explicit_opt[opt_index("momentum")])
        cli_die_usage("--momentum applies to --optimizer sgd only");
}

int toy_configure(int argc, char **argv, run_config *cfg, resume_info *ri, int *n_threads)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        }
    }
    int explicit_opt[N_OPTS] = {0};
    read_options(argc, argv, cfg, explicit_opt);
    memset(ri, 0, sizeof *ri);
    if (cfg->resume[0]) {
        resume_config(cfg->resume, explicit_opt, cfg, ri);
        if (!explicit_opt[opt_index("out")]) /* the checkpoint's own directory */
            cli_dirname(cfg->resume, cfg->out, sizeof cfg->out);
        if (train_resume_finished(cfg->resume, ri->step, cfg->steps)) {
            mha_st_free(ri->ck);
            return 0;
        }
    }
    check_across_options(cfg, explicit_opt);
    *n_threads = cli_check_threads(cfg->threads, explicit_opt[opt_index("threads")] ||
                                                     !cfg->resume[0]);
    return 1;
}
