/*
 * mha-train's internal interface between its parts, one concern each:
 *   toy_main.c     main: the steps below in order
 *   toy_options.c  the option table, defaults, --help, reading the command line
 *   toy_setup.c    checks and memory plan, the model, the optimizer, the tensor table
 *   toy_train.c    the model's half of the training loop (train/common/trainer.h),
 *                  evaluation, the end of a run
 *   toy_io.c       checkpoints, pictures, summary.json, example.json
 */
#ifndef TRAIN_TOY_RUN_H
#define TRAIN_TOY_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "cli.h"
#include "mha.h"
#include "mha_optim.h"
#include "peak.h"
#include "report.h"
#include "rundir.h"
#include "toy_model.h"
#include "toy_tasks.h"
#include "trainer.h"

#define CKPT_FORMAT "mha-train/1"

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
    char out[CLI_PATH_CAP]; /* output directory                               */
    int force;           /* --force: replace another run's checkpoint in --out */
    int progress;        /* --progress: REPORT_PROGRESS_* (report.h)            */
    char resume[CLI_PATH_CAP];
} run_config;

/* The option table (toy_options.c); ckpt marks what checkpoints store. */
extern const cli_opt TRAIN_OPTS[];
extern const size_t TRAIN_N_OPTS;
/* --optimizer's names, by mha_optim_kind. */
extern const char *const TOY_OPTIM_NAMES[];

/* History columns (one row per completed step, trainer.h's layout). */
enum { H_LOSS, H_LR, H_GN, H_TOK, H_SEQ, H_TIME, H_TOKS, H_COLS };
/* H_TIME: seconds since the run started (earlier processes of a resumed run included);
 * H_TOKS: the step's tokens per second (the batch's query positions over its time). */

typedef struct run_state {
    run_config cfg;
    task_spec spec;
    tm_config mcfg;
    tm_model *model;
    mha_optimizer *opt;
    ckpt_tensor pt[TM_NUM_OWN_TENSORS + MHA_NUM_TENSORS * TM_MAX_LAYERS];
    size_t n_pt;
    mha_pcg32 data_rng;
    uint64_t step; /* completed steps */
    size_t eval_chunk;   /* examples per evaluation forward (the model's batch capacity
                            covers it; sized to what the run can hold)                */
    double elapsed0;     /* seconds the run took before this process (a resumed run's
                            checkpoint metadata "elapsed_seconds"; 0 for a new run)   */
    double t_start;      /* report_now() when this process started                    */
    int n_threads;       /* the threads it runs on (--threads, 0 resolved)             */
    /* the model FLOPs of one training step, the MFU's denominator in GFLOP/s (0: none)
     * and where it came from (peak.h: measured now or kept from an earlier run) */
    double flops_step, peak;
    peak_best peak_src;
    train_loop loop;     /* the training loop (trainer.h): this process's steps and their
                            seconds (evaluations excluded), for summary.json            */
    report_history hist; /* loss, lr, grad norm, held-out token and sequence accuracy
                            (NaN unless evaluated), time, tokens/s; init: the evaluation
                            before step 1                                             */
    char run_id[RUNDIR_ID_CAP]; /* this run's (rundir.h), kept across --resume          */
} run_state;

/* What resume_config reads of a checkpoint's state besides the config. */
typedef struct resume_info {
    uint64_t step;   /* train.step: completed steps                               */
    uint64_t steps;  /* the --steps it was made with                              */
    double elapsed;  /* metadata elapsed_seconds (0 if absent: an older checkpoint) */
    char run_id[RUNDIR_ID_CAP]; /* metadata run_id ("" if absent: an older checkpoint) */
    mha_st_file *ck; /* the checkpoint, open until load_checkpoint (NULL: none)      */
} resume_info;

/* ---- toy_options.c ---------------------------------------------------------------- */

/* Read the command line into *cfg (with --resume: the checkpoint's options merged in,
 * its step counters into *ri) and check it; *n_threads: the thread count to use. Returns
 * 1 to train, 0 when there is nothing to do (--help printed, or a finished run resumed
 * without a larger --steps: said so). Exits 2 on a bad option. */
int toy_configure(int argc, char **argv, run_config *cfg, resume_info *ri, int *n_threads);

/* ---- toy_setup.c ------------------------------------------------------------------ */

/* Build the run for cfg: check that the task has both splits and that its activations fit
 * in memory (exit 2 otherwise), prepare the output directory, create the model and the
 * optimizer, fill the tensor table, and load the checkpoint when resuming (ri->ck, then
 * closed and NULL). Returns the number of parameters. Free with toy_run_free. */
size_t toy_build(run_state *rs, const run_config *cfg, resume_info *ri, double t_start,
                 int n_threads);
void toy_run_free(run_state *rs);

/* ---- toy_train.c ------------------------------------------------------------------ */

/* Train from rs->step to --steps (or --stop-after, or a stop signal), evaluate, write
 * every file, print the closing lines. Returns the exit status: 0, 1 (a failed final
 * checkpoint), CLI_EXIT_NONFINITE, or 128 + the signal that stopped it. */
int toy_train(run_state *rs, const resume_info *ri, size_t n_params);

/* ---- toy_io.c ------------------------------------------------------------------- */

/* Save the run's checkpoint to path (atomic); MHA_OK or a status (message printed). */
int save_checkpoint(run_state *rs, const char *path);
/* Take the configuration of checkpoint `path` into *cfg (options with ckpt == 1 always,
 * an explicit different value refused; ckpt == 2 unless given) and check its step
 * counters and data.rng (each named in the message); exit 2 on any problem. The file
 * stays open in info->ck. */
void resume_config(const char *path, const int *explicit_opt, run_config *cfg,
                   resume_info *info);
/* Load tensors and state from checkpoint f (resume_config's, whose state it checked) into
 * the run built for its config, then close f; exit 2. */
void load_checkpoint(run_state *rs, mha_st_file *f);
/* loss.svg: the training loss (raw and smoothed) and the held-out accuracy. */
void write_loss_svg(const run_state *rs, const char *path);
/* attention_layer<l>.svg for held-out example 0; paths[l] gets each file's name. */
void write_attention_svgs(run_state *rs, const task_buffer *ev, char paths[][CLI_PATH_CAP + 64],
                          const char *dir);
/* example.json: held-out example 0 with the model's activations. */
void write_example_json(run_state *rs, const task_buffer *ev, const char *path);
/* summary.json. */
void write_summary(const run_state *rs, const char *path, double wall, double tok, double seq,
                   double eval_loss, double final_loss, size_t n_params, int stopped_early);

#endif /* TRAIN_TOY_RUN_H */
