/*
 * trainer — the training loop of every program (mha-train, mha-gpt, mha-g2p), written once:
 * a step's optimizer half (global-norm clipping, the schedule's learning rate, the update),
 * the non-finite policy, evaluations on their schedule, the history row and the CSV log,
 * checkpoints (the latest every --ckpt-every, the best after a better evaluation, the last
 * K kept by step), the progress line with its speed, MFU and time left, and the stop
 * signals. A program supplies its model's half as hooks: the batch and forward, backward,
 * an evaluation, a save, the text of its evaluation on the progress line.
 *
 * The policy on non-finite values (one for all programs): a non-finite training loss (before
 * backward), gradient (the optimizer refuses it) or evaluation, or a non-finite parameter or
 * optimizer moment at a step that evaluates or saves (a checkpoint never holds one), stops
 * the run: rank 0 says what, at which step, and whether the last checkpoint is intact, and
 * train_loop_run returns CLI_EXIT_NONFINITE with nothing more written.
 *
 * Program code: failures of the hooks exit (cli.h); the loop itself only calls the library
 * and report.h.
 */
#ifndef TRAIN_TRAINER_H
#define TRAIN_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "cli.h"
#include "mha_optim.h"
#include "report.h"

/* A history row (and CSV row): the step's loss, learning rate and gradient norm (before
 * clipping), the program's n_cols evaluation columns (NaN unless the step evaluated), the
 * seconds of the whole run so far (earlier processes of a resumed run included) and the
 * step's work units (tokens, words) per second. */
enum { TRAIN_COL_LOSS, TRAIN_COL_LR, TRAIN_COL_GN, TRAIN_COL_EVAL };
enum { TRAIN_MAX_EVAL_COLS = 8, TRAIN_ROW_CAP = TRAIN_COL_EVAL + TRAIN_MAX_EVAL_COLS + 2 };

/* What a save hook is asked for: the latest checkpoint (everything to resume) or the best
 * one (what the program keeps of its best evaluation). */
enum { TRAIN_SAVE_LATEST, TRAIN_SAVE_BEST };

typedef struct train_hooks {
    void *ctx;
    /* The next training batch, the gradients zeroed, forward in training mode: *loss the
     * batch's mean (with several ranks, the whole batch's, the same on every rank), *work
     * its units for the speed, *flops its model FLOPs (forward and backward). */
    void (*forward)(void *ctx, double *loss, double *work, double *flops);
    /* Backward of that forward; with several ranks the gradients summed on return. */
    void (*backward)(void *ctx);
    /* Evaluate into row[TRAIN_COL_EVAL ..] (n_cols values; the same on every rank).
     * Returns 0, or 1 when a stop signal cut it short (nothing written). */
    int (*evaluate)(void *ctx, double *row);
    /* Save checkpoint `path` (kind TRAIN_SAVE_*); on failure say so and exit. Called on
     * every rank (the hook decides who writes). */
    void (*save)(void *ctx, const char *path, int kind);
    /* The progress line's text of the last evaluation `last` (a history row; its columns
     * NaN before any), e.g. "val 1.2345" or "val -". */
    void (*describe)(void *ctx, const double *last, char *buf, size_t cap);
    /* The largest v over the ranks (dist_max), so that every rank stops at the same step;
     * NULL: one process. */
    int (*agree)(int v);
} train_hooks;

typedef struct train_loop {
    /* ---- set by the program (after train_loop_init) ---- */
    train_hooks h;
    mha_optimizer *opt;
    mha_lr_schedule sched;
    double clip;                /* global-norm clip (0: measure only)                  */
    const ckpt_tensor *pt;      /* [n_pt] the parameters and moments checked for        */
    size_t n_pt;                /* finiteness before an evaluation or a save             */
    uint64_t *step;             /* the program's count of completed steps               */
    uint64_t steps, end;        /* --steps; this process's last step (--stop-after)      */
    uint64_t eval_every;        /* and the last step --steps                             */
    int early_evals;            /* 1: also 4 times as often in the first eval_every      */
    int final_eval;             /* 1: the program evaluates after a loop that stopped
                                   between evaluations (the time left counts it)        */
    double eval_cost;           /* an evaluation's cost in training steps, for the time
                                   left until one is measured                            */
    size_t n_cols;              /* evaluation columns, ≤ TRAIN_MAX_EVAL_COLS             */
    int best_col;               /* row column whose new low saves the best (-1: none)    */
    double *best;               /* the best value so far and its step (the program's     */
    uint64_t *best_step;        /* run state: checkpoints keep them)                     */
    uint64_t ckpt_every;        /* 0: only at the end                                    */
    size_t keep;                /* also keep the last `keep` checkpoints by step         */
    const char *out;            /* the run's directory                                   */
    const char *ckpt_path, *best_path;
    const char *unit;           /* the work unit on the progress line ("tok", "words")   */
    const char *eval_what;      /* after "evaluating" on a terminal, e.g. " (20 examples)" */
    double peak;                /* GFLOP/s, the MFU's denominator (0: none shown)        */
    double elapsed0, t_start;   /* seconds of earlier processes; report_now() at start   */
    int rank0;                  /* this process writes the log and says what stopped     */
    report_history *hist;
    report_csv *csv;            /* open on rank 0                                        */
    report_progress *prog;
    const char *last_ckpt;      /* the last checkpoint resumed from or written (NULL: none) */
    /* ---- kept by the loop ---- */
    double last[TRAIN_ROW_CAP]; /* the row of the last evaluation (NaN before any)       */
    uint64_t last_eval_step;    /* its step (0: none)                                    */
    double train_s, flops;      /* this process's training steps: seconds (evaluations   */
    uint64_t steps_done;        /* excluded), model FLOPs, how many                      */
    double eval_s;              /* its evaluations: seconds (cut ones too), completed    */
    unsigned long n_evals;
    double loop_s;              /* the whole loop's seconds                              */
    double win_s, win_flops, win_work; /* since the last progress line                    */
    uint64_t win_steps;
    uint64_t step0;             /* the step this process started at                      */
    int stop_sig;               /* the stop signal (a rank's), 0 if none                 */
} train_loop;

/* Zero *L, no best column, no evaluation yet. */
void train_loop_init(train_loop *L);

/* What every program's options give the loop: the cosine schedule from lr to min_lr after
 * warmup steps over steps, the global-norm clip, the last step of this process (stop_after
 * when it comes first; 0: none), evaluations every eval_every steps, checkpoints every
 * ckpt_every steps (0: only at the end). */
typedef struct train_plan {
    double lr, min_lr, clip;
    uint64_t warmup, steps, stop_after, eval_every, ckpt_every;
} train_plan;
/* The programs' AdamW (torch.optim.AdamW with β1 0.9, β2 beta2, ε 1e-8 and decoupled decay
 * weight_decay; its groups are added by the caller); exit 1 if it cannot be made. */
mha_optimizer *train_adamw(double beta2, double weight_decay);
/* Set L's optimizer (over the tensors pt[n_pt], checked for finiteness), the program's step
 * counter and the plan p. */
void train_loop_plan(train_loop *L, mha_optimizer *opt, const ckpt_tensor *pt, size_t n_pt,
                     uint64_t *step, const train_plan *p);
/* 1 if step s (1-based, after its update) evaluates: every eval_every steps, the last step
 * --steps, and with early_evals every eval_every / 4 steps below eval_every. */
int train_loop_is_eval_step(const train_loop *L, uint64_t s);
/* Seconds of the whole run: elapsed0 and this process's since t_start. */
double train_loop_elapsed(const train_loop *L);
/* Train from *step to end, or to a stop signal (stop_sig: every rank at the same step).
 * Returns 0, or CLI_EXIT_NONFINITE (said on stderr by rank 0; the log closed). */
int train_loop_run(train_loop *L);
/* After the loop: close the log, save the latest checkpoint, keep it by step. */
void train_loop_close(train_loop *L);
/* For report_csv's on_fail (ctx: the train_loop): say whether the last checkpoint is
 * intact before the exit. */
void train_loop_log_failed(void *ctx);
/* A save hook's checkpoint could not be saved (the saver said why; the file it was to
 * replace is untouched): say so and whether the last checkpoint is intact; exit 1. */
void train_loop_save_failed(const train_loop *L) __attribute__((noreturn));

#endif /* TRAIN_TRAINER_H */
