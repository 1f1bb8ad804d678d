/*
 * mha-gpt's internal interface: the run configuration and option tables, the model with
 * its optimizer and checkpoint layout, reading a checkpoint's configuration, and
 * generation with the key/value cache. Shared by gpt_main.c (command dispatch, sampling)
 * and gpt_train.c (training); implemented in gpt_common.c.
 */
#ifndef TRAIN_GPT_PROG_H
#define TRAIN_GPT_PROG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "cli.h"
#include "mha.h"
#include "mha_gpt.h"
#include "mha_optim.h"
#include "text.h"
#include "trainer.h"

#define GPT_CKPT_FORMAT "mha-gpt/1"
enum { GPT_MAX_VOCAB = 4096 };       /* largest vocabulary a text may have            */
enum { GPT_EVAL_SEED = 1337 };       /* seed of the fixed evaluation windows (any run) */

/* Everything a run is made of (train and sample options; see the tables in
 * gpt_common.c for ranges, defaults and which are stored in checkpoints). */
typedef struct gpt_run_config {
    /* train */
    char data[CLI_PATH_CAP];
    int utf8;
    size_t layers, heads, dim, context, batch;
    uint64_t steps;
    double lr, min_lr;
    uint64_t warmup;
    double beta2, weight_decay;
    int decay_all;
    double clip, dropout;
    uint64_t seed;
    uint64_t eval_every;
    size_t eval_batches;
    uint64_t ckpt_every, stop_after;
    int threads, attention;
    int precision;         /* mha_precision of the model's products                  */
    int grad_sync;         /* dist_sync: how ranks combine gradients (mha-gpt-mpi)     */
    size_t sample_chars;
    char out[CLI_PATH_CAP];
    char resume[CLI_PATH_CAP];
    int force;             /* --force: replace another run's checkpoints in --out       */
    int progress;          /* --progress: REPORT_PROGRESS_* (report.h)                   */
    /* sample */
    char checkpoint[CLI_PATH_CAP];
    char prompt[CLI_PATH_CAP];
    size_t chars;
    double temperature;
    size_t top_k;
    uint64_t sample_seed;
    int sample_threads;
} gpt_run_config;

extern const cli_opt GPT_TRAIN_OPTS[];
extern const size_t GPT_N_TRAIN_OPTS;
extern const cli_opt GPT_SAMPLE_OPTS[];
extern const size_t GPT_N_SAMPLE_OPTS;

/* The defaults of every option. */
void gpt_defaults(gpt_run_config *c);

/* The model, its optimizer (NULL when sampling) and the checkpoint layout. */
typedef struct gpt_run {
    mha_gpt *g;
    mha_optimizer *opt;
    ckpt_tensor *pt;       /* [n_pt]: every model tensor and its AdamW moments        */
    size_t n_pt;
    float *scratch;        /* sampling: moment buffers the checkpoint is read into      */
    /* state entries of a checkpoint */
    uint64_t step, optim_t, rng[2], call_index, best_step;
    double best_val;
    ckpt_state s[6];
} gpt_run;

/* Create the model of cfg for a vocabulary of V and batches of max_batch, and, when
 * with_optimizer, AdamW (β1 0.9, β2 cfg->beta2, eps 1e-8) with one group per tensor
 * (its state_dict name) decayed by cfg->weight_decay if the tensor's decay flag is set
 * or cfg->decay_all, else 0; without it (sample: a model to load) the weights are not
 * drawn (mha_gpt_config.no_init). Exit 1 on failure. */
void gpt_run_create(gpt_run *r, const gpt_run_config *cfg, size_t V, size_t max_batch,
                    int with_optimizer);
void gpt_run_destroy(gpt_run *r);
/* The checkpoint layout of r (parameters, exp_avg / exp_avg_sq, train.step,
 * optimizer.step, data.rng, dropout.call_index, best.val_loss, best.step). */
ckpt_layout gpt_run_layout(gpt_run *r);

/* Open checkpoint `path` and take its configuration into cfg (train options marked
 * ckpt != 0; explicit_opt[k] (train table order) marks options given on the command
 * line, may be NULL: none), refuse it unless it is an mha-gpt checkpoint whose
 * parameter tensors have the shapes of that configuration and whose run state is
 * consistent (*state: its step, the --steps it was made with, its elapsed seconds), and
 * read its vocabulary (*vocab owned: text_vocab_free). `what` starts every message
 * ("cannot resume from X"). Exit 2 on any problem. Returns the loaded file (mha_st_free
 * it). */
mha_st_file *gpt_open_checkpoint(const char *path, const char *what, const int *explicit_opt,
                                 gpt_run_config *cfg, text_vocab **vocab,
                                 train_state_read *state);

/* Generate `n` symbols after prompt ids[np] (np >= 1) with the key/value cache:
 * feed the last min(np, context) prompt ids once, then one symbol per step, drawn by
 * text_sample from PCG32(seed, TEXT_STREAM_SAMPLE); when the cache is full, reset it
 * and feed the last context/2 symbols again (the window slides). Each symbol is
 * written to `stream` as it is drawn (flushed) unless stream is NULL; the decoded
 * text of the generated symbols (not the prompt) goes to *text (owned, free()) unless
 * text is NULL. Exit 1 on a library failure. */
void gpt_generate(mha_gpt *g, const text_vocab *voc, const int32_t *ids, size_t np, size_t n,
                  double temperature, size_t top_k, uint64_t seed, FILE *stream, char **text);

/* Write ids[n] decoded (text_decode) to stream. */
void gpt_write_ids(FILE *stream, const text_vocab *voc, const int32_t *ids, size_t n);

/* The memory a training run of configuration c needs, estimated before anything large is
 * allocated (V: vocabulary size, max_batch: windows a forward holds, text_bytes: the
 * data file's size), and exit 2 naming the bytes and the options that drive them when it
 * is more than this process may use (physical memory, RLIMIT_AS). Returns the estimate. */
double gpt_check_memory(const gpt_run_config *c, size_t V, size_t max_batch, size_t text_bytes);

/* The train command (argv[first..argc) are its options). Returns the exit status. */
int gpt_train_main(int argc, char **argv, int first);

#endif /* TRAIN_GPT_PROG_H */
