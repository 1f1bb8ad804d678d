/*
 * report — what the training programs write and show while they run: the per-step
 * history and its CSV log (kept across --resume), JSON files written atomically, the
 * config as JSON, smoothed curves and attention heat maps for svg.h, the live progress
 * line (a terminal) or plain lines (a pipe or file), and durations.
 *
 * Program code: on an I/O or memory failure these functions print a message naming the
 * file and exit with CLI_EXIT_RUNTIME (cli.h).
 */
#ifndef TRAIN_REPORT_H
#define TRAIN_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "cli.h"

/* ---- history: one row of `cols` doubles per completed step -------------------------- */

typedef struct report_history {
    size_t cols;
    double *v;      /* [n, cols]; NaN = no value (e.g. not an evaluation step) */
    size_t n, cap;  /* rows: row i is step i + 1                               */
    size_t absent;  /* rows 1..absent are not known (NaN): the log holds none   */
    double *init;   /* [cols]: the row of step 0 (before training), NaN if none */
} report_history;

/* An empty history of `cols` columns (init row all NaN). */
void report_history_init(report_history *h, size_t cols);
void report_history_free(report_history *h);
/* Make h hold `steps` rows, all unknown (NaN, h->absent = steps): a run whose history
 * before it came to its directory cannot be found. */
void report_history_absent(report_history *h, uint64_t steps);
void report_history_push(report_history *h, const double *row);
/* Value of column c of row i. */
static inline double report_at(const report_history *h, size_t i, size_t c)
{
    return h->v[i * h->cols + c];
}

/* ---- CSV log ---------------------------------------------------------------------- */

/* A log "step,<columns>" whose row for step s prints each column with fmts[c] (a printf
 * format for one double, e.g. "%.17g"), a NaN as an empty field.
 * The log is only ever appended to: each row is one write(2) of a whole line, checked;
 * resuming cuts the rows after the checkpoint's step by truncating the file at a line
 * boundary (one ftruncate), so a process killed at any moment leaves every earlier row. */
typedef struct report_csv {
    int fd;                  /* -1 when closed                                        */
    char path[CLI_PATH_CAP + 64];
    const char *const *fmts; /* [h->cols] */
    long long good;          /* bytes of whole rows: the file's size after the last row */
    /* Called after a failed write has been reported, before the exit (NULL: none): the
     * program says what state its last checkpoint is in (report_last_checkpoint). */
    void (*on_fail)(void *ctx);
    void *ctx;
} report_csv;

/* Open path for run `run_id` at `step` completed steps, resumed from checkpoint `resume`
 * (NULL or "" for a new run), with --force or not (c may be uninitialised; on_fail and ctx
 * are set to NULL: set them after). h gets rows 1..step, its step-0 row into h->init.
 *
 * A log belongs to one run: "<path>.run" beside it holds that run's id (written each
 * time a log is opened, after the log). A log without one (from before these files) is
 * taken to be the run's whose checkpoint is resumed from the log's own directory.
 *  - A log of another run is never merged into this run's history, nor replaced: for a
 *    new run (step 0) it is renamed to "<path>.other" (or .other.2, .other.3, ...: an
 *    earlier one is never replaced), with a note on stderr; for a resumed run the same
 *    with force, else exit 2 naming the log and the run it is of.
 *  - step 0, or no log: a new log holding the header and, when h->init has a value (an
 *    evaluation before the first step), the step-0 row (written to a temporary and
 *    renamed over path).
 *  - This run's log: its rows from its first, step k + 1 (the run came to this directory
 *    at step k), up to `step` (consecutive, as written by this module) are read back into
 *    h, rows 1..k NaN (h->absent = k), so the log and curves cover the whole run; the
 *    rows after `step` (of a later checkpoint or of a killed process) are cut by
 *    truncating the file after the row of `step`. A log written before the header's last
 *    columns existed (its header is a prefix of `header`) is read the same way, its
 *    missing columns NaN, and rewritten whole under the new header (a temporary renamed
 *    over it). A log whose rows all come after `step` is cut whole. One that lacks a row
 *    between its first and `step` (or has another header) is not touched but renamed to
 *    "<path>.incomplete" (or .incomplete.2, ...; a note on stderr says so).
 *  - When this run comes to this directory (no log of its own there up to `step`), its
 *    rows 1..step are those of the log of the same name beside `resume` if that log is
 *    this run's and holds them (copied into the new log), else unknown (h->absent =
 *    step) and the new log starts with the rows after `step`.
 * Exit 1 if a log cannot be read or written. */
void report_csv_open(report_csv *c, const char *path, const char *header,
                     const char *const *fmts, report_history *h, uint64_t step,
                     const char *run_id, const char *resume, int force);
/* Append the row of `step` (cols doubles). A failed or short write (a full disk, a file
 * size limit) removes the partial row, prints "cannot write <path>: <why>; stopping",
 * calls c->on_fail and exits with status 1. */
void report_csv_row(report_csv *c, uint64_t step, const double *row, size_t cols);
/* Rows are written as they come (no buffer): nothing to flush; kept for the callers. */
void report_csv_flush(report_csv *c);
void report_csv_close(report_csv *c);

/* For a program's on_fail: on stderr, whether the last checkpoint `path` (NULL: none
 * yet) is intact — read back, valid and its checksums right (ckpt_verify) — with its
 * step and the --resume command, or what is wrong with it. */
void report_last_checkpoint(const char *path);

/* ---- files -------------------------------------------------------------------------- */

/* mkdir -p; exit 1 on failure. */
void report_make_dirs(const char *path);
/* Write data[len] to path atomically (temporary file, rename); exit 1 on failure. */
void report_write_file(const char *path, const void *data, size_t len);
/* Write a cJSON tree to path atomically (indented when pretty), then free the tree. */
void report_write_json(cJSON *root, const char *path, int pretty);
/* The options of opts[n] in cfg as a JSON object: choices, paths and strings as strings
 * (an empty path or string as null), numbers as numbers (integers above 2^53 as
 * strings, exact), flags as booleans. */
cJSON *report_config_json(const cli_opt *opts, size_t n, const void *cfg);

/* ---- pictures ------------------------------------------------------------------------ */

/* A smoothed copy of y[n] without lag: out[i] is a straight line fitted to y by least
 * squares with weights exp(-|k - i| / tau) over every point k, evaluated at i
 * (exponentially weighted local-linear regression; tau = n/200 steps, at least 1).
 * Within the series the weights are symmetric and this is their weighted mean (a
 * two-sided exponential filter, zero phase): a step's midpoint stays at the step and a
 * single spike stays a centred peak decaying both ways, not a block. At the ends, where
 * the weights are one-sided, the line removes the lag a mean would have there; the
 * result is kept within [min y, max y]. Constants and straight lines come out unchanged.
 * When every finite y is > 0 (a loss), the fit is made to log y and exponentiated: a
 * geometric mean, so a fall over decades on mha-train's log-scale chart shows no lag
 * (an arithmetic mean there sits above the curve where it falls); exponential decays
 * then come out unchanged instead of straight lines.
 * Non-finite points are skipped (NaN where no finite point has weight). O(n): two passes
 * with recursive sums, 40·n bytes of scratch (exit 1 if it cannot be allocated). */
void report_smooth(const double *y, size_t n, double *out);
/* Heat maps of attention weights w [heads, rows, cols] (float) through
 * svg_write_heatmaps; exit 1 on failure. */
void report_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                     size_t cols, const float *w, const char *const *row_labels,
                     const char *const *col_labels);

/* Remove <dir>/<prefix><k><suffix> for every k >= keep (e.g. attention_layer3.svg after
 * a run with 3 layers, or every heat map of a run that wrote none), so no picture of an
 * earlier run stands beside the new outputs. Returns how many were removed. */
size_t report_remove_stale_numbered(const char *dir, const char *prefix, size_t keep,
                                    const char *suffix);

/* ---- stopping on a signal ------------------------------------------------------------ */

/* Catch SIGINT and SIGTERM for a training loop: the first one is recorded and acknowledged
 * at once on stderr ("stopping after this step ...", even in the middle of a long
 * evaluation); the loop polls report_stop_signal() after each step, then saves a
 * checkpoint and its reports as at --stop-after and exits with 128 + the signal number
 * (130 for Ctrl-C, 143 for SIGTERM); a second one takes the default action at once (the
 * process ends: the CSV log holds only whole lines, each written by one write(2), and a
 * checkpoint being written is left as a temporary file, never as a partial checkpoint). */
void report_catch_stop_signals(void);
/* The first stop signal received (SIGINT or SIGTERM), or 0. */
int report_stop_signal(void);
/* "SIGINT" / "SIGTERM" / "signal N". Static storage. */
const char *report_signal_name(int sig);

/* ---- progress ------------------------------------------------------------------------ */

typedef struct report_progress {
    int tty;           /* stdout is a terminal                        */
    int open;          /* a live line is on the terminal (no newline yet) */
    double t0;         /* report_now() at the start                   */
    double last_shown; /* seconds since t0 of the last terminal update */
} report_progress;

/* --progress (cli.h's CLI_PROGRESS_NAMES): auto, live, plain. */
enum { REPORT_PROGRESS_AUTO, REPORT_PROGRESS_LIVE, REPORT_PROGRESS_PLAIN };

/* Seconds from a monotonic clock. */
double report_now(void);
/* Start the progress line in the display --progress asks for (mode REPORT_PROGRESS_*).
 * AUTO: a live line on a terminal, except under mpirun (mpi != 0), whose ranks see a
 * terminal even when mpirun writes to a file: plain lines there; LIVE rewrites a line in
 * place (as on a terminal), PLAIN prints a line per update. */
void report_progress_start(report_progress *p, int mode, int mpi);
/* Terminal: 1 if at least 0.1 s passed since the last update, or `last`. */
int report_progress_due(report_progress *p, int last);
/* Terminal: "\r<text>" cut to the terminal's width less one column (never wrapped: a
 * wrapped line would leave a new line per update), then "clear to the end of the line"
 * (the line is rewritten); otherwise "<text>\n". Flushes. */
void report_progress_show(report_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Terminal: end the live line (a newline), so that it stays, e.g. after an evaluation;
 * nothing if no live line is open. */
void report_progress_end(report_progress *p);
/* "12s", "3m05s", "1h02m03s" (rounded to whole seconds first), "?" for a negative or
 * non-finite value. */
void report_duration(double seconds, char *buf, size_t cap);

#endif /* TRAIN_REPORT_H */
