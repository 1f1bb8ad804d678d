/*
 * mha-g2p — pronunciations of words with an encoder–decoder Transformer (include/mha_s2s.h):
 *   mha-g2p train [options]       train on a pronunciation dictionary (g2p_train.c)
 *   mha-g2p pronounce [WORD ...]  pronounce words (arguments, or one per line on stdin)
 *   mha-g2p eval [options]        WER and PER on the test words (or a dictionary)
 *   mha-g2p average CKPT...       the mean of checkpoints' weights (g2p_average.c)
 * Here: the help, the options' parser and the dispatch; pronounce and eval are g2p_use.c.
 */
#include "g2p_prog.h"

#include <stdlib.h>
#include <string.h>

#include "dist.h"

static void usage(void)
{
    g2p_config d;
    g2p_defaults(&d);
    printf("usage: mha-g2p train [options]        train a pronunciation model\n"
           "       mha-g2p pronounce [options] [WORD ...]\n"
           "                                      pronounce words (or one per line on stdin),\n"
           "                                      printed as dictionary lines 'WORD  PH PH ...'\n"
           "       mha-g2p eval [options]         WER and PER on the test words\n"
           "       mha-g2p average CKPT... --out MODEL\n"
           "                                      the mean of the weights of checkpoints of\n"
           "                                      one model (checkpoint averaging)\n\n"
           "train options:\n");
    cli_print_options(G2P_TRAIN_OPTS, G2P_N_TRAIN_OPTS, &d);
    printf("\npronounce options:\n");
    cli_print_options(G2P_PRONOUNCE_OPTS, G2P_N_PRONOUNCE_OPTS, &d);
    printf("\neval options:\n");
    cli_print_options(G2P_EVAL_OPTS, G2P_N_EVAL_OPTS, &d);
    printf("\naverage options:\n");
    cli_print_options(G2P_AVERAGE_OPTS, G2P_N_AVERAGE_OPTS, &d);
    /* the memory a default run needs on CMUdict: 28 source and 72 target symbols, and the
     * positions a run takes from it (its longest word, 34 letters; its longest
     * pronunciation, 32 phones, and <s>) */
    g2p_config cm = d;
    cm.src_context = cm.src_context ? cm.src_context : 34;
    cm.tgt_context = cm.tgt_context ? cm.tgt_context : 33;
    double params, acts;
    g2p_memory_estimate(&cm, 28, 72, &params, &acts);
    char need[32];
    cli_bytes_text(params + acts, need, sizeof need);
    printf("\nMemory: train estimates what a run needs from its options before anything large "
           "is allocated (parameters with their gradients and AdamW's two moments, 16 bytes "
           "each; the activations of a batch), says it in its header, and refuses a run that "
           "needs more than this machine's RAM or the address-space limit (exit status 2): "
           "about %s for the defaults on CMUdict (--batch and --dim drive it). pronounce and "
           "eval likewise estimate what decoding allocates (the weights once, laid out for "
           "decoding; pronounce's caches of 32 hypotheses per thread, up to two threads, "
           "eval's of 128; the lexicons or words) and refuse to decode more: for the "
           "committed model pronounce allocates about 35 MiB at 1 thread and 60 MiB at 2, "
           "and 20 MiB more with CMUdict as its lexicon (measured peak resident size without "
           "a lexicon, libraries included: 43 and 55 MiB).\n", need);
    printf("\nExit status: 0 done, 1 runtime error, 2 bad option or input (pronounce: a word "
           "it cannot spell; the others are still pronounced; a corrupt or inconsistent "
           "checkpoint; train: --out in use by another run, or holding another run's "
           "checkpoints without --force), 3 training diverged, 130/143 "
           "stopped by SIGINT/SIGTERM (a checkpoint was written).\n");
}

/* Options of a command into cfg; exit 2 on a bad one. Positional arguments (pronounce's
 * words) are returned in *words / *n_words when words != NULL. */
void g2p_parse(const cli_opt *opts, size_t n, int argc, char **argv, g2p_config *cfg,
               char ***words, size_t *n_words)
{
    g2p_defaults(cfg);
    const char **vals = calloc(n, sizeof *vals);
    char **rest = calloc((size_t)argc + 1, sizeof *rest), **opt_argv = calloc((size_t)argc + 1,
                                                                             sizeof *opt_argv);
    if (!vals || !rest || !opt_argv)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    int na = 0;
    size_t nr = 0;
    for (int i = 2; i < argc; i++) { /* split words from options ("--x v" or "--x=v") */
        if (words && argv[i][0] != '-') {
            rest[nr++] = argv[i];
            continue;
        }
        opt_argv[na++] = argv[i];
        const size_t k = argv[i][0] == '-' && argv[i][1] == '-' && !strchr(argv[i], '=')
                             ? cli_index(opts, n, argv[i] + 2)
                             : n;
        if (k < n && opts[k].type != CLI_FLAG && i + 1 < argc)
            opt_argv[na++] = argv[++i];
    }
    cli_collect(opts, n, na, opt_argv, 0, vals);
    cli_apply(opts, n, vals, cfg);
    free(vals);
    free(opt_argv);
    if (words) {
        *words = rest;
        *n_words = nr;
    } else {
        free(rest);
    }
}

static int cmd_average(int argc, char **argv)
{
    g2p_config cfg;
    char **files;
    size_t n;
    g2p_parse(G2P_AVERAGE_OPTS, G2P_N_AVERAGE_OPTS, argc, argv, &cfg, &files, &n);
    const int st = g2p_average_main((const char *const *)files, n, cfg.average_out, cfg.force);
    free(files);
    return st;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage();
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        }
    if (strcmp(argv[1], "train") == 0)
        return g2p_train_main(argc, argv, 2);
    if (strcmp(argv[1], "pronounce") == 0)
        return g2p_pronounce_main(argc, argv);
    if (strcmp(argv[1], "eval") == 0)
        return g2p_eval_main(argc, argv);
    if (strcmp(argv[1], "average") == 0)
        return cmd_average(argc, argv);
    cli_die_usage("unknown command '%s' (train, pronounce, eval or average)", argv[1]);
}

/* under mpirun (mha-g2p-mpi) every rank runs the command; train shares the work */
int main(int argc, char **argv) { return dist_main(argc, argv, "mha-g2p", dispatch); }
