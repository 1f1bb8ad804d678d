/* Files, JSON and pictures of the training programs (report.h); the run log and its history
 * are in report_csv.c, the progress line and the stop signals in report_progress.c. */
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

size_t report_remove_stale_numbered(const char *dir, const char *prefix, size_t keep,
                                    const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        unsigned long long k;
        if (!cli_numbered_name(n, prefix, suffix, &k) || k < keep)
            continue; /* not <prefix><digits><suffix>, or one of this run's */
        char path[CLI_PATH_CAP + 300];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
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

/* One point of a pass of report_smooth: its sums s = {F0, F1, F2, G0, G1} (or the backward
 * pass's) shifted one step away (d → d + 1), then the point (m, m·y) added at d = 0. */
static void smooth_step(double *s, double r, double m, double my)
{
    s[2] = r * (s[2] + 2 * s[1] + s[0]);
    s[1] = r * (s[1] + s[0]);
    s[0] = r * s[0] + m;
    s[4] = r * (s[4] + s[3]);
    s[3] = r * s[3] + my;
}

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
    double F[5] = {0, 0, 0, 0, 0}; /* F0 F1 F2 G0 G1 */
    for (size_t i = 0; i < n; i++) {
        const double m = isfinite(y[i]) ? 1.0 : 0.0, my = m ? VAL(i) : 0.0;
        smooth_step(F, r, m, my);
        memcpy(fw + 5 * i, F, sizeof F);
        if (m) {
            lo = fmin(lo, my);
            hi = fmax(hi, my);
        }
    }
    double B[5] = {0, 0, 0, 0, 0}; /* B0 B1 B2 H0 H1: the backward pass's sums */
    for (size_t i = n; i-- > 0;) {
        const double m = isfinite(y[i]) ? 1.0 : 0.0, my = m ? VAL(i) : 0.0;
        smooth_step(B, r, m, my);
        const double *q = fw + 5 * i;
        /* offsets e = k - i over all k: point i is in both passes once */
        const double S0 = q[0] + B[0] - m, S1 = B[1] - q[1], S2 = q[2] + B[2];
        const double T0 = q[3] + B[3] - my, T1 = B[4] - q[4];
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
