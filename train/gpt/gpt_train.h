/*
 * mha-gpt train's state (the trainer), shared by the command (train/gpt/gpt_train.c: setup, the
 * model's half of the loop of train/common/trainer.h, evaluation) and its files (train/gpt/gpt_train_io.c: checkpoints, pictures, summary).
 * Private to those two files.
 */
#ifndef TRAIN_GPT_TRAIN_H
#define TRAIN_GPT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dist.h"
#include "peak.h"
#include "gpt_prog.h"
#include "report.h"
#include "rundir.h"
#include "trainer.h"

/* History columns (one row per completed step, trainer.h's layout). */
enum { H_LOSS, H_LR, H_GN, H_EVTR, H_EVVA, H_TIME, H_TOKS, H_COLS };
/* H_TIME: seconds since the run started (earlier processes of a resumed run included);
 * H_TOKS: the step's tokens per second (the batch's tokens over the step's time). */

/* The speed's measures besides the loop's own (trainer.h). */
typedef struct loop_clock {
    double flops_step;         /* model FLOPs of one step of the whole batch           */
    double peak;               /* GFLOP/s, the MFU's denominator (0: none): the peak's      */
    peak_best peak_src;        /* measured now (every rank's, summed) or kept (one process) */
} loop_clock;

typedef struct trainer {
    gpt_run_config cfg;
    gpt_run r;
    text_corpus *corpus;
    char *vocab_text;          /* text_vocab_format of the corpus's vocabulary    */
    const int32_t *ids[2];     /* the training and validation parts [len[p]]       */
    size_t len[2];
    size_t *ev_off[2];         /* fixed evaluation windows [eval_batches · B]      */
    int32_t *tok, *tgt;        /* one batch [B, T]                                 */
    mha_pcg32 rng;             /* training batches                                  */
    report_history hist;
    double elapsed0;           /* seconds of earlier processes of a resumed run      */
    double t_start;            /* report_now() when this process started            */
    char ckpt_path[CLI_PATH_CAP + 64], best_path[CLI_PATH_CAP + 64];
    char csv_path[CLI_PATH_CAP + 64], sum_path[CLI_PATH_CAP + 64], svg_path[CLI_PATH_CAP + 64],
        smp_path[CLI_PATH_CAP + 64];
    train_state_read ck;       /* --resume: the checkpoint's step, its --steps, seconds  */
    size_t ck_vocab_n;         /* and the size of its vocabulary                        */
    size_t n_params;
    loop_clock clk;
    train_loop loop;           /* the loop (trainer.h): its clocks, last evaluation, stop */
    report_csv csv;            /* its log (open on rank 0)                              */
    report_progress prog;      /* its progress line                                    */
    char eval_what[64];        /* the progress line's " (N batches per split)"          */
    char run_id[RUNDIR_ID_CAP]; /* this run's (rundir.h), kept across --resume           */
    /* data parallelism (train/common/dist.h); one rank: rank0 1, b_first 0, b_count B */
    int rank0;                 /* this process writes files and prints             */
    size_t b_first, b_count;   /* this rank's windows [b_first, +b_count) of a batch */
    size_t cap_b;              /* most windows a rank runs at once: ⌈B / ranks⌉     */
    dist_grads *dg;            /* sums the gradients across ranks                   */
} trainer;

/* ---- checkpoints (train/gpt/gpt_train_io.c) ---- */

/* Every rank calls it; rank 0 writes checkpoint `path` (and all return its status). With
 * several ranks it first checks that every rank holds the same weights and moments. */
int gpt_save_checkpoint(trainer *t, const char *path);
/* Load the tensors and state of a checkpoint whose configuration was taken already. */
void gpt_load_checkpoint(trainer *t, mha_st_file *f, const char *what);
/* Several ranks: every rank takes rank 0's weights, AdamW moments and training state. */
void gpt_share_rank0_state(trainer *t);
/* ---- pictures and summary (train/gpt/gpt_train_io.c; rank 0) ---- */

/* loss.svg: the losses of every logged step up to `step`, and the learning rate. */
void gpt_write_loss_svg(const trainer *t, const char *path);
/* Heat maps of every head of every block on the first T characters of the validation
 * part. Returns the number of files written. */
size_t gpt_write_attention_svgs(trainer *t);
/* summary.json. */
void gpt_write_summary(const trainer *t, const char *path, double wall, double tok_s,
                       int completed, const char *sample, size_t n_params);

/* Rank 0 at the end of a run (completed, or stopped: by a signal, by another rank's
 * signal, or at --stop-after: train_say_stopped): pictures, the sample, summary.json, and what was written
 * where. tok_s: this process's tokens per second over its loop. */
void gpt_finish_run(trainer *t, double tok_s, int completed);

#endif /* TRAIN_GPT_TRAIN_H */
