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
#include "peak.h"
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

/* What the loop evaluates and keeps, where it saves and what its progress line says
 * (train_loop_report). */
typedef struct train_report {
    size_t n_cols;                     /* evaluation columns, ≤ TRAIN_MAX_EVAL_COLS       */
    int best_col;                      /* row column whose new low saves the best (-1: none) */
    double *best;                      /* the best value so far and its step: the program's */
    uint64_t *best_step;               /* run state, kept by checkpoints (NULL: no best)  */
    double eval_cost;                  /* an evaluation's cost in training steps, for the
                                          time left until one is measured                 */
    const char *ckpt_path, *best_path; /* best_path NULL: no best checkpoint              */
    const char *unit;                  /* the work unit on the progress line ("tok")      */
    const char *eval_what;             /* after "evaluating" on a terminal: " (20 examples)" */
    double peak;                       /* GFLOP/s, the MFU's denominator (0: none shown)  */
    double elapsed0, t_start;          /* seconds of earlier processes; report_now() at start */
    report_progress *prog;
} train_report;

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
    train_report rep;           /* evaluations, checkpoints' paths, the progress line
                                   (train_loop_report)                                   */
    uint64_t ckpt_every;        /* 0: only at the end                                    */
    size_t keep;                /* also keep the last `keep` checkpoints by step         */
    const char *out;            /* the run's directory                                   */
    int rank0;                  /* this process writes the log and says what stopped     */
    report_history *hist;
    report_csv *csv;            /* open on rank 0                                        */
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
/* The plan of a program's config c whose fields have the options' names (lr, min_lr, clip,
 * warmup, steps, stop_after, eval_every, ckpt_every): every program's. */
#define TRAIN_PLAN_OF(c)                                                                     \
    ((train_plan){(c)->lr, (c)->min_lr, (c)->clip, (c)->warmup, (c)->steps, (c)->stop_after,  \
                  (c)->eval_every, (c)->ckpt_every})
/* The programs' AdamW (torch.optim.AdamW with β1 0.9, β2 beta2, ε 1e-8 and decoupled decay
 * weight_decay; its groups are added by the caller); exit 1 if it cannot be made. */
mha_optimizer *train_adamw(double beta2, double weight_decay);
/* Set L's hooks h, optimizer (over the tensors pt[n_pt], checked for finiteness), the
 * program's step counter and the plan p. */
void train_loop_plan(train_loop *L, const train_hooks *h, mha_optimizer *opt,
                     const ckpt_tensor *pt, size_t n_pt, uint64_t *step, const train_plan *p);
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
/* The exit status of a run the loop ended without an error: 128 + the stop signal (that
 * of any rank, so the same on every rank: mpirun passes the first non-zero status on, and
 * the job's is the signal's as for one process), 0 without one. */
int train_loop_exit_status(const train_loop *L);
/* The text of the last evaluation on the progress line (a describe hook's): prefix, then
 * "-" when v, its first value, is not finite (NaN: no evaluation yet), else fmt with its
 * arguments. */
void train_describe(char *buf, size_t cap, const char *prefix, double v, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* For report_csv's on_fail (ctx: the train_loop): say whether the last checkpoint is
 * intact before the exit. */
void train_loop_log_failed(void *ctx);
/* Into a summary's root: peak_gflops (the MFU's denominator), peak_gflops_measured (what
 * this run measured itself) and mfu (the model FLOPs of this process's training steps over
 * their seconds, as a share of peak), when peak > 0 and a step was timed. */
void train_loop_mfu_json(const train_loop *L, cJSON *root, double peak, double measured);
/* A save hook's checkpoint could not be saved (the saver said why; the file it was to
 * replace is untouched): say so and whether the last checkpoint is intact; exit 1. */
void train_loop_save_failed(const train_loop *L) __attribute__((noreturn));

/* ---- setup (train/common/trainer_setup.c): what the programs do before the loop ---- */

/* Read argv[first ..] into cfg (over the caller's defaults) by the option table opts[n];
 * given[k] = 1 when option k was given. Exit 2 on a bad option (cli.h). */
void train_parse(const cli_opt *opts, size_t n, int argc, char **argv, int first, void *cfg,
                 int *given);
/* The schedule's options agree: a default --warmup (not given) not below --steps — a short
 * run — becomes a tenth of the steps, said on stderr when `say` (rank 0); then exit 2
 * unless --warmup < --steps and --min-lr <= --lr, naming the option. */
void train_check_schedule(double lr, double min_lr, uint64_t *warmup, uint64_t steps,
                          int warmup_given, int say);
/* Resuming checkpoint `resume` at step ck_step with --steps `steps`: returns 1 when the run
 * is finished (ck_step == steps: "nothing to do", and how to go on, said on stdout), 0
 * when there are steps to train; fewer --steps than ck_step exits 2 naming both. */
int train_resume_finished(const char *resume, uint64_t ck_step, uint64_t steps);

/* Open checkpoint `path`, check its checksums (a file without any is accepted with a note
 * on stderr) and take its options into cfg (ckpt_config_from_meta: its format must be
 * `format`; an option given (given[k], NULL: none) with another value than a defining one
 * of the file is refused). kind (NULL: none): what a file of another format is not, said
 * first ("a model of mha-g2p"). Exit 2 with `what` ("cannot resume from X") and the
 * reason. The caller frees the file (mha_st_free). */
mha_st_file *train_open_checkpoint(const char *path, const char *what, const char *format,
                                   const char *kind, const cli_opt *opts, size_t n,
                                   const int *given, void *cfg, size_t cfg_size);

/* A float tensor a configuration needs, with its shape. */
typedef struct train_shape {
    char name[64];
    size_t ndim, shape[2];
} train_shape;
/* Exit 2 (with `what` and the tensor) unless f holds every need[i] as F32 of its shape:
 * before a model of a checkpoint's configuration is allocated, so that a corrupt size in
 * its metadata is refused as a mismatch, not by an allocation. */
void train_require_tensors(const mha_st_file *f, const char *what, const train_shape *need,
                           size_t n);

/* What a program's checkpoints hold of the run state beside train.step. */
typedef struct train_state_rules {
    int full;               /* optimizer.step and data.rng are required (else checked
                               where present: a weights-only file has neither)         */
    int need_elapsed;       /* metadata elapsed_seconds is required                    */
    const char *best;       /* the best evaluation's F64 entry ("best.val_loss"), with
                               best.step; NULL: none                                   */
    double best_max;        /* its largest valid value (INFINITY: a loss)              */
    const char *best_range; /* its range in words ("a word error rate is in [0, 1]")   */
} train_state_rules;
/* What train_read_state gives. */
typedef struct train_state_read {
    uint64_t made;          /* the --steps the file was made with (metadata "steps")   */
    uint64_t step;          /* train.step                                              */
    double elapsed;         /* metadata elapsed_seconds (0 when absent)                */
} train_state_read;
/* Read and check the run state of checkpoint f before a model is built (exit 2 with `what`,
 * naming the entry): metadata steps (as opts' --steps, of a config of cfg_size bytes) and
 * elapsed_seconds (a duration); train.step within those steps; optimizer.step equal to it
 * and data.rng's PCG32 increment odd; best.step not past train.step, the best value within
 * its range or +inf exactly while best.step is 0. */
void train_read_state(const mha_st_file *f, const char *what, const cli_opt *opts, size_t n,
                      size_t cfg_size, const train_state_rules *rules, train_state_read *s);

/* The run's log: the run's directory (claimed: rundir_start), whether this process writes
 * it, the history (initialised) and the log's state, the step the run is at; the CSV header
 * and the formats of its columns, the run's id (rundir.h), the checkpoint resumed from (""
 * or NULL: none), --force. */
typedef struct train_log {
    const char *out;
    int rank0;
    report_history *hist;
    report_csv *csv;
    uint64_t step;
    const char *header;
    const char *const *fmts;
    const char *run_id, *resume;
    int force;
} train_log;
/* The loop's out, rank0, hist and csv from log; the stop signals caught, and on rank 0 the
 * CSV log <out>/train_log.csv opened (report_csv_open: a resumed run's rows up to log->step
 * read back into the history), whose failing write says whether the last checkpoint is
 * intact (L->last_ckpt: the checkpoint resumed from until one is written). csv_path[cap]
 * receives the log's path. */
void train_loop_open_log(train_loop *L, const train_log *log, char *csv_path, size_t cap);

/* L->rep = *r. */
void train_loop_report(train_loop *L, const train_report *r);

/* A training program's run, in its own hooks around the loop (ctx: the program's state). */
typedef struct train_program {
    void *ctx;
    train_loop *loop;
    /* Options, data, model, the log, the header. Returns 1 when there is nothing to do (a
     * finished run: said on stdout), 0 to train. Failures exit (cli.h). */
    int (*setup)(void *ctx, int argc, char **argv, int first);
    /* After a setup that returned 0: the loop set for this run (train_loop_plan,
     * train_loop_report). */
    void (*plan)(void *ctx);
    /* After a loop that ended without an error: the program's files and closing lines;
     * completed: the run reached --steps. */
    void (*finish)(void *ctx, int completed);
    void (*destroy)(void *ctx);
} train_program;
/* train_loop_init, setup, plan, train_loop_run_and_close, finish, destroy. Returns 0 with
 * nothing to do, the loop's non-finite status, or train_loop_exit_status. */
int train_program_run(const train_program *p, int argc, char **argv, int first);

/* train_loop_run, then (when it returns 0) the progress line ended and train_loop_close:
 * the run of a program with nothing to evaluate after its loop. Returns train_loop_run's
 * status. */
int train_loop_run_and_close(train_loop *L);

/* ---- the run's files and lines (train/common/trainer_files.c) ---- */

enum { TRAIN_PANEL_CURVES = 4, TRAIN_MAX_PANELS = 2, TRAIN_CURVE_SMOOTH = 1000 };
/* A curve of the history: column col (TRAIN_CURVE_SMOOTH + col: that column smoothed by
 * report_smooth, a dense curve) times scale. sparse: only the steps where the column has a
 * value (an evaluation's), after the row of step 0 when it has one; else every step. */
typedef struct train_curve {
    const char *label, *color;
    int col;
    double scale;
    int sparse;
} train_curve;
/* A panel of the picture (as svg_chart: title, y label, log scale, y range) and its curves
 * (label NULL after the last). */
typedef struct train_panel {
    const char *title, *ylabel;
    int log_y;
    double ymin, ymax;
    train_curve c[TRAIN_PANEL_CURVES];
} train_panel;
/* The picture of the history h at path: the panels p[n] (n <= TRAIN_MAX_PANELS) stacked,
 * steps across, 900 × 330 px each (svg_write_charts); a panel with no point (no evaluation
 * yet) is left out when another has points (all are drawn, empty, when none has). Exit 1
 * when it cannot be written. */
void train_write_curves(const report_history *h, const char *path, const train_panel *p,
                        size_t n);

/* Save checkpoint `path` of layout c (ckpt_save, with checksums), its metadata: "format",
 * the options of opts[n] that checkpoints keep, as cfg holds them (ckpt_meta_init), the
 * program's own pairs extra[] (key, value, …; NULL after the last pair; a NULL value leaves
 * its key out), elapsed_seconds and run_id (unless empty). Returns ckpt_save's status, said
 * on stderr when it failed ("cannot write PATH: why"); the file it replaces is untouched.
 * Exit 1 out of memory. */
int train_save_checkpoint(const char *path, const ckpt_layout *c, const char *format,
                          const cli_opt *opts, size_t n, const void *cfg,
                          const char *const *extra, double elapsed, const char *run_id);

/* The header's last lines: "resumed from RESUME at step STEP" (when resume is not empty;
 * with a note when --steps is not the `made` the checkpoint was made with), then the
 * MFU's denominator when peak > 0: the peak of src (peak_best_note), its precision,
 * threads, "a rank, all ranks" with several ranks, the model GFLOP of a step when
 * flops_step > 0. Flushes stdout. */
void train_say_run_state(const char *resume, uint64_t step, uint64_t made, uint64_t steps,
                         const peak_best *src, double peak, const char *precision, int threads,
                         int ranks, double flops_step);
/* After a loop that stopped before --steps: "stopped after step S of N (why); continue
 * with --resume CKPT" — the signal, one to another rank, or --stop-after. Nothing when the
 * run reached --steps. */
void train_say_stopped(const train_loop *L, const char *ckpt_path);

#endif /* TRAIN_TRAINER_H */
