/* The run log of the training programs (report.h): its in-memory history, the CSV file
 * appended row by row, read back on --resume, and the run id beside it
 * (train_log.csv.run) that keeps two runs' rows apart. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rundir.h"

/* ---- history ------------------------------------------------------------------------- */

void report_history_init(report_history *h, size_t cols)
{
    memset(h, 0, sizeof *h);
    h->cols = cols;
    h->init = malloc(cols * sizeof(double));
    if (!h->init)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t c = 0; c < cols; c++)
        h->init[c] = NAN;
}

void report_history_absent(report_history *h, uint64_t steps)
{
    h->n = h->absent = 0;
    double *row = malloc(h->cols * sizeof(double));
    if (!row)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t c = 0; c < h->cols; c++)
        row[c] = NAN;
    for (uint64_t s = 0; s < steps; s++)
        report_history_push(h, row);
    free(row);
    h->absent = (size_t)steps;
}

void report_history_free(report_history *h)
{
    free(h->v);
    free(h->init);
    memset(h, 0, sizeof *h);
}

void report_history_push(report_history *h, const double *row)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        double *p = realloc(h->v, cap * h->cols * sizeof(double));
        if (!p)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        h->v = p;
        h->cap = cap;
    }
    memcpy(h->v + h->n * h->cols, row, h->cols * sizeof(double));
    h->n++;
}

/* ---- CSV ------------------------------------------------------------------------------ */

/* Write all of buf[n] to fd (restarting after a signal). 0, or -1 with errno set (a
 * short write of a full disk reports ENOSPC). */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Report a failed write of the log, let the program add its word, exit 1. */
static void csv_failed(report_csv *c, int e) __attribute__((noreturn));
static void csv_failed(report_csv *c, int e)
{
    /* cut the partial row, so the log holds whole rows only (best effort) */
    if (c->fd >= 0 && ftruncate(c->fd, (off_t)c->good) != 0) {
        /* nothing more to do: the next resume cuts the log at a line boundary anyway */
    }
    fflush(stdout);
    fprintf(stderr, "\n%s: cannot write %s: %s; stopping (the log holds every step up to "
            "the last one written)\n", cli_program(), c->path, strerror(e));
    if (c->on_fail)
        c->on_fail(c->ctx);
    exit(CLI_EXIT_RUNTIME);
}

/* "step,v1,...\n" of one row into buf[cap]; its length (0 if it does not fit). */
static size_t format_row(const report_csv *c, char *buf, size_t cap, uint64_t step,
                         const double *row, size_t cols)
{
    size_t n = (size_t)snprintf(buf, cap, "%llu", (unsigned long long)step);
    for (size_t k = 0; k < cols && n < cap; k++) {
        buf[n++] = ',';
        if (n < cap && isfinite(row[k]))
            n += (size_t)snprintf(buf + n, cap - n, c->fmts[k], row[k]);
    }
    if (n + 1 >= cap)
        return 0;
    buf[n++] = '\n';
    buf[n] = '\0';
    return n;
}

void report_csv_row(report_csv *c, uint64_t step, const double *row, size_t cols)
{
    char buf[64 * 32];
    const size_t n = format_row(c, buf, sizeof buf, step, row, cols);
    if (n == 0)
        cli_die(CLI_EXIT_RUNTIME, "internal error: a row of %s is too long", c->path);
    if (write_all(c->fd, buf, n) != 0)
        csv_failed(c, errno);
    c->good += (long long)n;
}

/* Parse "step,v1,...,vcols" (empty fields NaN) into *step, row. 0 if it is not one. */
static int parse_row(const char *line, size_t cols, unsigned long long *step, double *row)
{
    char *end;
    if (line[0] < '0' || line[0] > '9')
        return 0;
    *step = strtoull(line, &end, 10);
    const char *p = end;
    for (size_t k = 0; k < cols; k++) {
        if (*p != ',')
            return 0;
        p++;
        if (*p == ',' || *p == '\n' || *p == '\0') {
            row[k] = NAN;
            continue;
        }
        row[k] = strtod(p, &end);
        if (end == p)
            return 0;
        p = end;
    }
    return *p == '\n' || *p == '\0';
}


/* A new log at path holding the header, the step-0 row when h->init has a value, and the
 * rows of h it knows (steps h->absent + 1..h->n), written to a temporary and renamed.
 * Returns its size. */
static long long csv_new(const report_csv *c, const char *header, const report_history *h)
{
    enum { ROW_CAP = 64 * 32 }; /* format_row's bound for one row */
    const size_t n_head = strlen(header);
    size_t n = n_head, cap = n_head + 2 + (h->n + 1) * (size_t)ROW_CAP;
    char *buf = malloc(cap);
    if (!buf)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    memcpy(buf, header, n);
    buf[n++] = '\n';
    int has_init = 0;
    for (size_t k = 0; k < h->cols; k++)
        has_init |= isfinite(h->init[k]) != 0;
    if (has_init)
        n += format_row(c, buf + n, ROW_CAP, 0, h->init, h->cols);
    for (size_t i = h->absent; i < h->n; i++)
        n += format_row(c, buf + n, ROW_CAP, i + 1, h->v + i * h->cols, h->cols);
    report_write_file(c->path, buf, n);
    free(buf);
    return (long long)n;
}

/* How the first line of an old log compares with this run's header: CSV_SAME, CSV_OLDER
 * (the header of a log written before the last columns were added: `header` begins with
 * it and a comma; *old_cols gets its number of value columns) or CSV_OTHER. */
enum { CSV_SAME, CSV_OLDER, CSV_OTHER, CSV_AFTER };
static int csv_header_kind(const char *line, const char *header, size_t *old_cols)
{
    if (strcmp(line, header) == 0)
        return CSV_SAME;
    const size_t n = strlen(line);
    if (strncmp(line, header, n) != 0 || header[n] != ',' || strchr(line, ',') == NULL)
        return CSV_OTHER;
    *old_cols = 0;
    for (const char *p = line; *p; p++)
        *old_cols += *p == ',';
    return CSV_OLDER;
}

/* Read the rows 0..step of the log at path (f open) into h (see report_csv_open); the
 * offset just after the row of `step` into *keep. The log's rows are consecutive from its
 * first one, step k + 1 (a run that came to its directory at step k), up to `step`: h gets
 * rows 1..step, the first k NaN (h->absent = k). Returns CSV_SAME if the log holds every
 * row from its first up to `step` under this header, CSV_OLDER if it does under an older
 * header (the columns it lacks are NaN in h), CSV_AFTER if its first row is after `step`,
 * else CSV_OTHER (h then empty in both cases). */
static int csv_read_back(FILE *f, const char *header, report_history *h, uint64_t step,
                         long long *keep)
{
    double *row = malloc(h->cols * sizeof(double));
    if (!row)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    char *line = NULL;
    size_t cap = 0, cols = h->cols;
    ssize_t len;
    long long off = 0;
    uint64_t expect = 1;
    int first = 1, ok = 0, after = 0, kind = CSV_OTHER;
    while (expect <= step && (len = getline(&line, &cap, f)) > 0) {
        off += len;
        if (line[len - 1] != '\n')
            break; /* a torn last line */
        if (first) {
            first = 0;
            line[len - 1] = '\0';
            kind = csv_header_kind(line, header, &cols);
            if (kind == CSV_OTHER)
                break; /* another program's log */
            continue;
        }
        unsigned long long s;
        for (size_t k = cols; k < h->cols; k++)
            row[k] = NAN; /* a column the older log lacks */
        if (!parse_row(line, cols, &s, row))
            break;
        if (s == 0 && expect == 1) { /* the evaluation before the first step */
            memcpy(h->init, row, h->cols * sizeof(double));
            continue;
        }
        if (h->n == 0 && s > expect) { /* the first row of a run that came here at s - 1 */
            if (s > step) {
                after = 1;
                break;
            }
            report_history_absent(h, s - 1);
            expect = s;
        }
        if (s != expect)
            break;
        report_history_push(h, row);
        if (expect == step) {
            *keep = off;
            ok = 1;
        }
        expect++;
    }
    free(line);
    free(row);
    if (!ok) {
        h->n = h->absent = 0;
        for (size_t k = 0; k < h->cols; k++)
            h->init[k] = NAN;
    }
    return ok ? kind : after && kind != CSV_OTHER ? CSV_AFTER : CSV_OTHER;
}

/* ---- whose log: the run id beside it ---------------------------------------------------- */

/* The file beside the log at path that names its run: "<path>.run", one line, the run id. */
static void sidecar_path(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s.run", path);
}

/* The run id the sidecar of log `path` names: 1 and id set; 0 if it has none (a log from
 * before run ids were written beside logs, or a sidecar that cannot be read). */
static int log_run_id(const char *path, char id[RUNDIR_ID_CAP])
{
    char sc[CLI_PATH_CAP + 80], buf[64] = "";
    sidecar_path(path, sc, sizeof sc);
    FILE *f = fopen(sc, "r");
    if (!f)
        return 0;
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    if (!ok || !rundir_id_valid(buf))
        return 0;
    snprintf(id, RUNDIR_ID_CAP, "%s", buf);
    return 1;
}

/* Rename the log at path (and its sidecar) to the first free name of "<path>.<tag>",
 * "<path>.<tag>.2", "<path>.<tag>.3", ...: a file kept aside earlier is never replaced
 * (the run directory is locked: nothing else names files there meanwhile). The name
 * into aside[cap]. Exit 1 if it cannot be renamed. */
static void move_aside(const char *path, const char *tag, char *aside, size_t cap)
{
    struct stat sb;
    for (unsigned k = 1;; k++) {
        if (k == 1)
            snprintf(aside, cap, "%s.%s", path, tag);
        else
            snprintf(aside, cap, "%s.%s.%u", path, tag, k);
        if (lstat(aside, &sb) != 0 && errno == ENOENT)
            break;
        if (k == 100000)
            cli_die(CLI_EXIT_RUNTIME, "cannot find a free name to keep %s aside (%s)", path,
                    aside);
    }
    if (rename(path, aside) != 0)
        cli_die(CLI_EXIT_RUNTIME, "cannot rename %s to %s: %s", path, aside, strerror(errno));
    char from[CLI_PATH_CAP + 80], to[CLI_PATH_CAP + 160];
    sidecar_path(path, from, sizeof from);
    sidecar_path(aside, to, sizeof to);
    if (rename(from, to) != 0 && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "cannot rename %s to %s: %s", from, to, strerror(errno));
}

/* Write the sidecar of the log at path: it belongs to run `id`. After the log itself was
 * made: a kill in between leaves a log that is refused as another run's (or taken as
 * one from before run ids), never another run's log taken as this run's. */
static void write_sidecar(const char *path, const char *id)
{
    char sc[CLI_PATH_CAP + 80], buf[RUNDIR_ID_CAP + 1];
    sidecar_path(path, sc, sizeof sc);
    const int n = snprintf(buf, sizeof buf, "%s\n", id);
    report_write_file(sc, buf, (size_t)n);
}

/* Read the rows up to `step` of the log at path into h (rows 1..step: those before the
 * log's first row NaN) and its step-0 row into h->init; see csv_read_back. Returns its
 * kind (CSV_OTHER when it cannot be read whole up to `step`, h then empty). */
static int csv_read_path(const char *path, const char *header, report_history *h,
                         uint64_t step, long long *keep)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT)
            cli_die(CLI_EXIT_RUNTIME, "cannot read %s: %s", path, strerror(errno));
        return CSV_OTHER;
    }
    const int kind = csv_read_back(f, header, h, step, keep);
    const int rd_err = ferror(f);
    fclose(f);
    if (rd_err)
        cli_die(CLI_EXIT_RUNTIME, "cannot read %s", path);
    return kind;
}

/* 1 if the log at path exists and is this run's to go on with; another run's log (its
 * sidecar names another run; one without is the run's whose checkpoint is resumed from this
 * directory, same_dir) is refused when resuming without force, else moved aside. */
static int own_log(const char *path, const char *dir, uint64_t step, const char *run_id,
                   const char *resume, int same_dir, int force)
{
    struct stat sb;
    const int exists = stat(path, &sb) == 0;
    if (!exists && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "cannot read %s: %s", path, strerror(errno));
    char theirs[RUNDIR_ID_CAP] = "", aside[CLI_PATH_CAP + 96];
    const int has_id = exists && log_run_id(path, theirs);
    if (!exists || (has_id ? strcmp(theirs, run_id) == 0 : step > 0 && same_dir))
        return exists;
    char who[64] = "no run id";
    if (has_id)
        snprintf(who, sizeof who, "run %s", theirs);
    if (step > 0 && !force)
        cli_die(CLI_EXIT_USAGE, "cannot resume %s (run %s) into --out %s: %s is the log "
                "of another run (%s), and the two histories would be mixed; choose "
                "another --out (or none: the checkpoint's own directory), or give --force "
                "to move that log aside", resume, run_id, dir, path, who);
    /* a new run's log starts afresh: the old one is kept aside, never replaced */
    move_aside(path, "other", aside, sizeof aside);
    fprintf(stderr, "%s: note: %s is the log of another run (%s): moved to %s\n",
            cli_program(), path, who, aside);
    return 0;
}

/* This run's log at path, resumed at `step` > 0: its rows up to `step` into h and the log
 * cut after them (or rewritten under a newer header). Returns 1 when it goes on; 0 when it
 * cannot (moved aside: it lacks steps up to `step`) or holds only later rows. */
static int go_on_log(report_csv *c, const char *path, const char *header, report_history *h,
                     uint64_t step)
{
    long long keep = 0;
    const int kind = csv_read_path(path, header, h, step, &keep);
    if (kind == CSV_OLDER) {
        /* a log from before the last columns were added: rewritten whole under the new
         * header (a temporary renamed over it), the new columns empty up to `step` */
        c->good = csv_new(c, header, h);
        return 1;
    }
    if (kind == CSV_SAME) {
        /* cut the rows after `step`: one truncation at a line boundary, so a kill at any
         * moment leaves rows 1..step (and possibly the later ones) */
        if (truncate(path, (off_t)keep) != 0)
            cli_die(CLI_EXIT_RUNTIME, "cannot cut %s after step %llu: %s", path,
                    (unsigned long long)step, strerror(errno));
        c->good = keep;
        return 1;
    }
    if (kind != CSV_AFTER) { /* CSV_AFTER: every row is after the checkpoint's step: all
                              * cut, as rows after it always are */
        char aside[CLI_PATH_CAP + 96];
        move_aside(path, "incomplete", aside, sizeof aside);
        fprintf(stderr, "%s: note: %s does not hold every step from its first row up to the "
                "checkpoint's step %llu: kept as %s; the new log starts after step %llu\n",
                cli_program(), path, (unsigned long long)step, aside,
                (unsigned long long)step);
    }
    return 0;
}

void report_csv_open(report_csv *c, const char *path, const char *header,
                     const char *const *fmts, report_history *h, uint64_t step,
                     const char *run_id, const char *resume, int force)
{
    snprintf(c->path, sizeof c->path, "%s", path);
    c->fmts = fmts;
    c->fd = -1;
    c->good = 0;
    c->on_fail = NULL;
    c->ctx = NULL;
    char dir[CLI_PATH_CAP + 64], rdir[CLI_PATH_CAP] = "", from[2 * CLI_PATH_CAP + 80] = "";
    cli_dirname(path, dir, sizeof dir);
    if (resume && resume[0]) {
        cli_dirname(resume, rdir, sizeof rdir);
        const char *base = strrchr(path, '/');
        snprintf(from, sizeof from, "%s/%s", rdir, base ? base + 1 : path);
    }
    const int same_dir = rdir[0] && cli_same_file(rdir, dir);
    const int exists = own_log(path, dir, step, run_id, resume, same_dir, force);
    const int kept = exists && step > 0 && go_on_log(c, path, header, h, step);
    if (!kept && step > 0) {
        /* a run that comes to this directory: its history up to `step` is that of the log
         * beside the checkpoint when that is the same run's (its sidecar names this run,
         * or it has none: it is then the checkpoint's directory's), copied; else absent */
        char id[RUNDIR_ID_CAP];
        long long keep = 0;
        int copied = 0;
        if (from[0] && !cli_same_file(from, path) &&
            (!log_run_id(from, id) || strcmp(id, run_id) == 0)) {
            const int kind = csv_read_path(from, header, h, step, &keep);
            copied = kind == CSV_SAME || kind == CSV_OLDER;
        }
        if (!copied)
            report_history_absent(h, step);
    }
    if (!kept)
        c->good = csv_new(c, header, h);
    write_sidecar(path, run_id);
    c->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (c->fd < 0)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s: %s", path, strerror(errno));
}

void report_csv_flush(report_csv *c)
{
    (void)c;
}

void report_csv_close(report_csv *c)
{
    if (c->fd >= 0 && close(c->fd) != 0)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s: %s", c->path, strerror(errno));
    c->fd = -1;
}

