/* Logs, JSON and pictures of the training programs (report.h); the progress line and the
 * stop signals are in report_progress.c. */
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "rundir.h"
#include "mha.h"
#include "mha_safetensors.h"
#include "svg.h"

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

size_t report_remove_stale_numbered(const char *dir, const char *prefix, size_t keep,
                                    const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    const size_t np = strlen(prefix), ns = strlen(suffix);
    size_t removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        const size_t len = strlen(n);
        if (len <= np + ns || strncmp(n, prefix, np) != 0 || strcmp(n + len - ns, suffix) != 0)
            continue;
        size_t k = 0, i = np;
        for (; i < len - ns && n[i] >= '0' && n[i] <= '9' && k < SIZE_MAX / 10; i++)
            k = 10 * k + (size_t)(n[i] - '0');
        if (i != len - ns || k < keep)
            continue; /* not <prefix><digits><suffix>, or one of this run's */
        char path[CLI_PATH_CAP + 300];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
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

/* 1 if a and b name the same existing file or directory. */
static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
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
    const int same_dir = rdir[0] && same_file(rdir, dir);
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    if (!exists && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "cannot read %s: %s", path, strerror(errno));
    char theirs[RUNDIR_ID_CAP] = "", aside[CLI_PATH_CAP + 96];
    const int has_id = exists && log_run_id(path, theirs);
    /* whose log: the run its sidecar names; one without (from before run ids were written
     * beside logs) is the run's whose checkpoint is resumed from this directory */
    if (exists && (has_id ? strcmp(theirs, run_id) != 0 : !(step > 0 && same_dir))) {
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
        exists = 0;
    }
    int kept = 0; /* the log in --out goes on */
    long long keep = 0;
    if (exists && step > 0) {
        const int kind = csv_read_path(path, header, h, step, &keep);
        if (kind == CSV_OLDER) {
            /* a log from before the last columns were added: rewritten whole under the new
             * header (a temporary renamed over it), the new columns empty up to `step` */
            c->good = csv_new(c, header, h);
            kept = 1;
        } else if (kind == CSV_SAME) {
            /* cut the rows after `step`: one truncation at a line boundary, so a kill at
             * any moment leaves rows 1..step (and possibly the later ones) */
            if (truncate(path, (off_t)keep) != 0)
                cli_die(CLI_EXIT_RUNTIME, "cannot cut %s after step %llu: %s", path,
                        (unsigned long long)step, strerror(errno));
            c->good = keep;
            kept = 1;
        } else if (kind != CSV_AFTER) { /* CSV_AFTER: every row is after the checkpoint's
                                          * step: all cut, as rows after it always are */
            move_aside(path, "incomplete", aside, sizeof aside);
            fprintf(stderr, "%s: note: %s does not hold every step from its first row up to "
                    "the checkpoint's step %llu: kept as %s; the new log starts after step "
                    "%llu\n", cli_program(), path, (unsigned long long)step, aside,
                    (unsigned long long)step);
        }
    }
    if (!kept && step > 0) {
        /* a run that comes to this directory: its history up to `step` is that of the log
         * beside the checkpoint when that is the same run's (its sidecar names this run,
         * or it has none: it is then the checkpoint's directory's), copied; else absent */
        char id[RUNDIR_ID_CAP];
        int copied = 0;
        if (from[0] && !same_file(from, path) &&
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

void report_last_checkpoint(const char *path)
{
    if (!path) {
        fprintf(stderr, "%s: no checkpoint was written yet.\n", cli_program());
        return;
    }
    mha_st_file *f = NULL;
    char err[CLI_PATH_CAP + 256] = "";
    int st = mha_st_load(path, &f, err, sizeof err);
    if (st == MHA_OK)
        st = ckpt_verify(f, err, sizeof err);
    const void *d = NULL;
    if (st == MHA_OK)
        st = mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, err, sizeof err);
    if (st == MHA_OK) {
        uint64_t step;
        memcpy(&step, d, sizeof step);
        fprintf(stderr, "%s: the last checkpoint, %s (step %llu), is intact: once there is "
                "room, continue with --resume %s\n", cli_program(), path,
                (unsigned long long)step, path);
    } else {
        fprintf(stderr, "%s: the last checkpoint, %s, cannot be used: %s\n", cli_program(),
                path, err);
    }
    mha_st_free(f);
}

/* ---- files ----------------------------------------------------------------------------- */

void report_make_dirs(const char *path)
{
    char buf[CLI_PATH_CAP];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                cli_die(CLI_EXIT_RUNTIME, "cannot create directory %s: %s", buf,
                        strerror(errno));
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        cli_die(CLI_EXIT_RUNTIME, "cannot create directory %s: %s", buf, strerror(errno));
}

void report_write_file(const char *path, const void *data, size_t len)
{
    char tmp[CLI_PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s: %s", path, strerror(e));
    }
}

/* cJSON prints a number with 15 significant digits whenever that re-reads within
 * DBL_EPSILON, which loses the last bit of a loss. Give every finite number the
 * shortest form that reads back exactly (at most 17 digits), as a raw literal. */
static void exact_numbers(cJSON *node)
{
    for (cJSON *c = node ? node->child : NULL; c; c = c->next) {
        if (cJSON_IsNumber(c) && isfinite(c->valuedouble)) {
            char buf[32];
            for (int digits = 15; digits <= 17; digits++) {
                snprintf(buf, sizeof buf, "%.*g", digits, c->valuedouble);
                if (strtod(buf, NULL) == c->valuedouble)
                    break;
            }
            char *raw = malloc(strlen(buf) + 1);
            if (!raw)
                cli_die(CLI_EXIT_RUNTIME, "out of memory");
            memcpy(raw, buf, strlen(buf) + 1);
            c->type = cJSON_Raw; /* cJSON_Delete frees valuestring of a raw node */
            c->valuestring = raw;
        } else {
            exact_numbers(c);
        }
    }
}

void report_write_json(cJSON *root, const char *path, int pretty)
{
    exact_numbers(root);
    char *text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
    if (!text)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t n = strlen(text);
    char *buf = malloc(n + 2);
    if (!buf)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    memcpy(buf, text, n);
    buf[n] = '\n';
    report_write_file(path, buf, n + 1);
    free(buf);
    cJSON_free(text);
    cJSON_Delete(root);
}

cJSON *report_config_json(const cli_opt *opts, size_t n, const void *cfg)
{
    cJSON *obj = cJSON_CreateObject();
    for (size_t i = 0; i < n; i++) {
        const cli_opt *o = &opts[i];
        const char *p = (const char *)cfg + o->off;
        char v[2 * CLI_PATH_CAP];
        cli_format(o, cfg, v, sizeof v);
        switch (o->type) {
        case CLI_PATH:
        case CLI_STR:
            if (p[0] == '\0')
                cJSON_AddNullToObject(obj, o->name);
            else
                cJSON_AddStringToObject(obj, o->name, p);
            break;
        case CLI_CHOICE: cJSON_AddStringToObject(obj, o->name, v); break;
        case CLI_FLAG: cJSON_AddBoolToObject(obj, o->name, *(const int *)p); break;
        case CLI_DBL: cJSON_AddNumberToObject(obj, o->name, *(const double *)p); break;
        case CLI_SIZE:
        case CLI_U64: {
            uint64_t x = o->type == CLI_SIZE ? (uint64_t) * (const size_t *)p
                                             : *(const uint64_t *)p;
            if (x > (1ull << 53))
                cJSON_AddStringToObject(obj, o->name, v); /* exact, e.g. a 64-bit seed */
            else
                cJSON_AddNumberToObject(obj, o->name, strtod(v, NULL));
            break;
        }
        case CLI_INT: cJSON_AddNumberToObject(obj, o->name, strtod(v, NULL)); break;
        }
    }
    return obj;
}

/* ---- pictures -------------------------------------------------------------------------- */

void report_smooth(const double *y, size_t n, double *out)
{
    if (n == 0)
        return;
    /* weights r^|i-k| around each point i, r = exp(-1/tau); the fit's sums by two
     * recursive passes. Forward (k <= i), per point, with d = i - k and m_k = 1 for a
     * finite y_k, else 0:  F0 = Σ r^d m, F1 = Σ r^d d m, F2 = Σ r^d d² m,
     * G0 = Σ r^d m y, G1 = Σ r^d d m y. The backward pass (k >= i) runs the same
     * recursions from the end and combines them with the stored forward sums. */
    const double tau = n / 200 > 1 ? (double)(n / 200) : 1.0, r = exp(-1.0 / tau);
    double *fw = malloc(5 * n * sizeof(double)); /* [n, 5]: F0 F1 F2 G0 G1 */
    if (!fw)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    int logs = 1; /* every finite value > 0: fit log y (a loss falling over decades) */
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i]) && !(y[i] > 0))
            logs = 0;
#define VAL(i) (logs ? log(y[i]) : y[i])
    double lo = INFINITY, hi = -INFINITY;
    double F0 = 0, F1 = 0, F2 = 0, G0 = 0, G1 = 0;
    for (size_t i = 0; i < n; i++) {
        const double m = isfinite(y[i]) ? 1.0 : 0.0, my = m ? VAL(i) : 0.0;
        /* shift the sums one step away (d → d + 1), then add point i at d = 0 */
        F2 = r * (F2 + 2 * F1 + F0);
        F1 = r * (F1 + F0);
        F0 = r * F0 + m;
        G1 = r * (G1 + G0);
        G0 = r * G0 + my;
        double *q = fw + 5 * i;
        q[0] = F0, q[1] = F1, q[2] = F2, q[3] = G0, q[4] = G1;
        if (m) {
            lo = fmin(lo, my);
            hi = fmax(hi, my);
        }
    }
    double B0 = 0, B1 = 0, B2 = 0, H0 = 0, H1 = 0;
    for (size_t i = n; i-- > 0;) {
        const double m = isfinite(y[i]) ? 1.0 : 0.0, my = m ? VAL(i) : 0.0;
        B2 = r * (B2 + 2 * B1 + B0);
        B1 = r * (B1 + B0);
        B0 = r * B0 + m;
        H1 = r * (H1 + H0);
        H0 = r * H0 + my;
        const double *q = fw + 5 * i;
        /* offsets e = k - i over all k: point i is in both passes once */
        const double S0 = q[0] + B0 - m, S1 = B1 - q[1], S2 = q[2] + B2;
        const double T0 = q[3] + H0 - my, T1 = H1 - q[4];
        const double det = S0 * S2 - S1 * S1;
        if (!(S0 > 0)) {
            out[i] = NAN;
            continue;
        }
        /* weighted least squares y ≈ a + b e; a at e = 0. Where the weights are
         * symmetric S1 = 0 and a = T0 / S0, the weighted mean. */
        double a = det > 1e-9 * S0 * S2 ? (S2 * T0 - S1 * T1) / det : T0 / S0;
        a = fmin(fmax(a, lo), hi);
        out[i] = logs ? exp(a) : a;
    }
#undef VAL
    free(fw);
}

void report_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                     size_t cols, const float *w, const char *const *row_labels,
                     const char *const *col_labels)
{
    size_t n = heads * rows * cols;
    double *wd = malloc((n ? n : 1) * sizeof(double));
    if (!wd)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t i = 0; i < n; i++)
        wd[i] = w[i];
    int st = svg_write_heatmaps(path, title, heads, rows, cols, wd, row_labels, col_labels);
    if (st != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s: %s", path, svg_strerror(st));
    free(wd);
}
