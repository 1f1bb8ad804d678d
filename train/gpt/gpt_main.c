/*
 * mha-gpt — train a character-level GPT (include/mha_gpt.h) on a text, and sample from it.
 *
 *   mha-gpt train                                   # baby GPT on data/tinyshakespeare.txt
 *   mha-gpt train --data my.txt --out runs/mine --steps 5000
 *   mha-gpt train --resume runs/gpt/checkpoint.safetensors
 *   mha-gpt sample --prompt "ROMEO:" --chars 300 --seed 7
 *
 * Training (gpt_train.c) writes into --out: train_log.csv, summary.json, loss.svg,
 * attention_layer<l>.svg, sample.txt, checkpoint.safetensors (latest) and
 * best.safetensors (best validation loss).
 *
 * Checkpoint layout (safetensors, little-endian): every parameter under its PyTorch
 * state_dict name (wte.weight, wpe.weight, blocks.<l>.…, ln_f.*) F32;
 * optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name> F32; train.step, optimizer.step,
 * dropout.call_index, best.step (U64 scalars), data.rng [2] U64 (PCG32 state, inc),
 * best.val_loss (F64); __metadata__: format = "mha-gpt/1", every option that defines the
 * run (as text), data_mode (bytes | utf8) and vocab (text_vocab_format).
 *
 * Exit status: 0 done; 1 runtime error; 2 bad option or input (text, prompt, checkpoint);
 * 3 training stopped on a non-finite loss or gradient; 130 / 143 training stopped by
 * SIGINT / SIGTERM after finishing its step, checkpoint and reports written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <unistd.h>

#include "dist.h"
#include "gpt_prog.h"

static void print_train_help(const gpt_run_config *d)
{
    printf("Usage: %s train [OPTIONS]\n"
           "Train a character-level GPT (token + position embeddings, L pre-LayerNorm blocks of\n"
           "causal multi-head attention and a GELU MLP, read-out tied to the token embedding)\n"
           "with AdamW on random windows of a text; evaluate both splits on fixed windows;\n"
           "write train_log.csv, summary.json, loss.svg, attention heat maps, sample.txt,\n"
           "checkpoint.safetensors and best.safetensors (best validation loss) into --out.\n"
           "%s"
           "Options (--name VALUE or --name=VALUE):\n", cli_program(),
           dist_with_mpi()
               ? "Under `mpirun -np N` the N processes train one model data-parallel: each\n"
                 "takes its share of every batch's windows, gradients are summed across them,\n"
                 "rank 0 writes the files; checkpoints resume with any number of processes.\n\n"
               : "\n");
    cli_print_options(GPT_TRAIN_OPTS, GPT_N_TRAIN_OPTS, d);
    printf("  %-22s show this help and exit\n", "--help");
}

static void print_sample_help(const gpt_run_config *d)
{
    printf("Usage: %s sample [OPTIONS]\n"
           "Generate text from a checkpoint of `%s train`, streaming each character to\n"
           "stdout as it is drawn (the prompt is printed first). Generation uses a key/value\n"
           "cache: each new character costs one row of attention per block. When the cache\n"
           "holds --context characters, the window slides: the cache is reset and the last\n"
           "context/2 characters are fed again.\n\n"
           "Options (--name VALUE or --name=VALUE):\n", cli_program(), cli_program());
    cli_print_options(GPT_SAMPLE_OPTS, GPT_N_SAMPLE_OPTS, d);
    printf("  %-22s show this help and exit\n", "--help");
}

static void print_exit_status(void)
{
    printf("\nExit status: 0 done; 1 runtime error (a full disk: a failed write of the log\n"
           "names the last checkpoint, read back and checked); 2 bad option or input\n"
           "(unusable text, prompt character outside the vocabulary, checkpoint of another\n"
           "program or model size, corrupt (checksum mismatch) or inconsistent; --out in use\n"
           "by another run, or holding another run's checkpoints without --force); 3\n"
           "training stopped on a non-finite loss or gradient (the last checkpoint stays\n"
           "intact); 130 / 143 training stopped by Ctrl-C (SIGINT) / SIGTERM: the current\n"
           "step is finished, a checkpoint and the reports are written and the --resume\n"
           "command printed; a second signal stops at once (the last checkpoint stays\n"
           "intact).\n");
}

static void print_help(const gpt_run_config *d)
{
    printf("Usage: %s train [OPTIONS]    train a character-level GPT on a text\n"
           "       %s sample [OPTIONS]   generate text from a checkpoint\n"
           "       %s [train | sample] --help\n\n", cli_program(), cli_program(),
           cli_program());
    print_train_help(d);
    printf("\n");
    print_sample_help(d);
    print_exit_status();
}

/* ---- sample ------------------------------------------------------------------------------ */

static int sample_main(int argc, char **argv, int first)
{
    static gpt_run_config cfg; /* static: large path buffers off the stack */
    gpt_defaults(&cfg);
    const char *vals[16] = {0};
    cli_collect(GPT_SAMPLE_OPTS, GPT_N_SAMPLE_OPTS, argc, argv, first, vals);
    cli_apply(GPT_SAMPLE_OPTS, GPT_N_SAMPLE_OPTS, vals, &cfg);
    const int n_threads = cli_check_threads(cfg.sample_threads, 1);
    if (cfg.prompt[0] == '\0')
        cli_die_usage("invalid value '' for --prompt: needs at least one character");
    char what[CLI_PATH_CAP + 32];
    snprintf(what, sizeof what, "cannot sample from %s", cfg.checkpoint);
    text_vocab *voc = NULL;
    train_state_read ck; /* a bad state is refused */
    mha_st_file *f = gpt_open_checkpoint(cfg.checkpoint, what, NULL, &cfg, &voc, &ck);

    /* the prompt, before anything is allocated for the model */
    const size_t plen = strlen(cfg.prompt);
    int32_t *ids = malloc((plen + 1) * sizeof *ids);
    if (!ids)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t np = 0;
    char err[512];
    int st = text_encode(voc, cfg.prompt, plen, ids, plen + 1, &np, err, sizeof err);
    if (st != MHA_OK || np == 0)
        cli_die(CLI_EXIT_USAGE, "invalid value for --prompt: %s",
                st != MHA_OK ? err : "no character");

    cfg.threads = cfg.sample_threads;
    cfg.dropout = 0;
    cfg.precision = MHA_PRECISION_FP32; /* generation runs the key/value cache in float32 */
    openblas_set_num_threads(n_threads);
    gpt_run r;
    gpt_run_create(&r, &cfg, text_vocab_size(voc), 1, 0);
    ckpt_layout c = gpt_run_layout(&r);
    if (ckpt_load(f, &c, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
    mha_st_free(f);

    gpt_write_ids(stdout, voc, ids, np);
    fflush(stdout);
    char *gen = NULL;
    gpt_generate(r.g, voc, ids, np, cfg.chars, cfg.temperature, cfg.top_k, cfg.sample_seed,
                 stdout, &gen);
    /* end with a newline (a shell prompt after the text, a whole last line in a file),
     * unless the text already does */
    const size_t glen = strlen(gen);
    if (glen ? gen[glen - 1] != '\n' : cfg.prompt[strlen(cfg.prompt) - 1] != '\n')
        putchar('\n');
    free(gen);
    cli_flush_stdout();
    free(ids);
    text_vocab_free(voc);
    gpt_run_destroy(&r);
    return 0;
}

static int run(int argc, char **argv)
{
    static gpt_run_config defs;
    gpt_defaults(&defs);
    int help = 0;
    for (int i = 1; i < argc; i++)
        help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    if (argc < 2 || (argv[1][0] == '-' && help)) {
        if (!help)
            cli_die_usage("missing command: train or sample");
        print_help(&defs);
        return 0;
    }
    if (strcmp(argv[1], "train") == 0) {
        if (help) {
            print_train_help(&defs);
            print_exit_status();
            return 0;
        }
        return gpt_train_main(argc, argv, 2);
    }
    if (strcmp(argv[1], "sample") == 0) {
        if (help) {
            print_sample_help(&defs);
            print_exit_status();
            return 0;
        }
        if (dist_rank() != 0)
            return 0; /* under mpirun, rank 0 alone samples */
        return sample_main(argc, argv, 2);
    }
    cli_die_usage("unknown command '%s': train or sample", argv[1]);
}

int main(int argc, char **argv) { return dist_main(argc, argv, "mha-gpt", run); }
