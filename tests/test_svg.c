/* Tests of the training programs' pictures: the loss-curve smoother (report_smooth) and
 * the SVG writers (train/common/svg.c, svg_heatmap.c): no lag, bounded heat maps that fit
 * a 1200-px window, charts whose panels share their x ticks. */
#include "test_util.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"
#include "svg.h"

/* ---- helpers ---- */

static char tmpdir[512];

static int setup_dir(void **state)
{
    (void)state;
    return make_temp_dir(tmpdir, sizeof tmpdir, "test_svg");
}

static int teardown_dir(void **state)
{
    (void)state;
    return remove_tree(tmpdir);
}

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* The whole file as a string (owned: free). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return s;
}

static size_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* The number after `attr="` in the <svg> element (its width or height). */
static double svg_attr(const char *svg, const char *attr)
{
    char key[32];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *p = strstr(svg, key);
    assert_non_null(p);
    return strtod(p + strlen(key), NULL);
}

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* ---- report_duration ---- */

/* Rounded to whole seconds before the split into minutes and hours (119.8 s was once
 * "1m60s"). */
static void test_duration(void **state)
{
    (void)state;
    const struct {
        double s;
        const char *want;
    } cases[] = {{0, "0s"},         {59.4, "59s"},       {59.6, "1m00s"},  {119.8, "2m00s"},
                 {185, "3m05s"},    {3599.4, "59m59s"},  {3599.6, "1h00m00s"},
                 {3723, "1h02m03s"}, {-1, "?"},          {NAN, "?"},       {INFINITY, "?"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        report_duration(cases[i].s, buf, sizeof buf);
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("report_duration(%g) = \"%s\", expected \"%s\"", cases[i].s, buf,
                     cases[i].want);
    }
}

/* ---- report_smooth ---- */

/* A step 0 → 1 keeps its midpoint at the step: the values on both sides of it add up to
 * 1 (a lagging smoother, e.g. a one-sided moving average, leaves both near 0). */
static void test_smooth_step_stays(void **state)
{
    (void)state;
    enum { N = 2000, K = 1000 };
    double *y = malloc(N * sizeof *y), *s = malloc(N * sizeof *s);
    for (size_t i = 0; i < N; i++)
        y[i] = i < K ? 0.0 : 1.0;
    report_smooth(y, N, s);
    assert_true(s[K - 1] < 0.5 && s[K] > 0.5);
    assert_close(s[K - 1] + s[K], 1.0, 1e-9, 0);
    assert_close(s[K - 20] + s[K + 19], 1.0, 1e-9, 0); /* symmetric around the step */
    assert_close(s[10], 0.0, 1e-12, 0);
    assert_close(s[N - 10], 1.0, 1e-12, 0);
    free(y);
    free(s);
}

/* A single spike stays a peak centred on it, symmetric, strictly falling on both sides:
 * not a flat block (a moving mean makes one as wide as its window). */
static void test_smooth_spike_centred(void **state)
{
    (void)state;
    enum { N = 3000, K = 1500 };
    double *y = calloc(N, sizeof *y), *s = malloc(N * sizeof *s);
    y[K] = 1.0;
    report_smooth(y, N, s);
    for (size_t d = 1; d < 60; d++) {
        assert_close(s[K - d], s[K + d], 1e-15, 1e-9);
        assert_true(s[K + d] < s[K + d - 1]);
    }
    size_t arg = 0;
    for (size_t i = 0; i < N; i++)
        if (s[i] > s[arg])
            arg = i;
    assert_int_equal(arg, K);
    free(y);
    free(s);
}

/* Constants come out unchanged (non-finite points skipped); nothing finite: NaN. */
static void test_smooth_constant(void **state)
{
    (void)state;
    enum { N = 777 };
    double y[N], s[N];
    for (size_t i = 0; i < N; i++)
        y[i] = i % 7 == 3 ? NAN : i % 11 == 5 ? INFINITY : 3.25;
    report_smooth(y, N, s);
    for (size_t i = 0; i < N; i++)
        assert_close(s[i], 3.25, 0, 1e-12);
    for (size_t i = 0; i < 5; i++)
        y[i] = NAN;
    report_smooth(y, 5, s);
    for (size_t i = 0; i < 5; i++)
        assert_true(isnan(s[i]));
    y[0] = 2.0;
    report_smooth(y, 1, s);
    assert_true(s[0] == 2.0);
}

/* A straight line (through 0: fitted as it is) and an exponential decay over 8 decades
 * (all > 0: fitted in log) come out unchanged everywhere, the ends included (a centred
 * mean clipped at the ends lags there by half its window; an arithmetic mean of a fall
 * over decades sits far above it). A million points take one pass. */
static void test_smooth_line_no_lag_at_ends(void **state)
{
    (void)state;
    const size_t n = 1000000;
    double *y = malloc(n * sizeof *y), *s = malloc(n * sizeof *s);
    for (size_t i = 0; i < n; i++)
        y[i] = 1.0 - 2e-6 * (double)i;
    report_smooth(y, n, s);
    for (size_t i = 0; i < n; i += (i < 20000 || i > n - 20000) ? 1 : 997)
        assert_close(s[i], y[i], 1e-7, 1e-7);
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0 * exp(-18.42 * (double)i / (double)n);
    report_smooth(y, n, s);
    for (size_t i = 0; i < n; i += (i < 20000 || i > n - 20000) ? 1 : 997)
        assert_close(s[i], y[i], 0, 1e-7);
    free(y);
    free(s);
}

/* ---- heat maps ---- */

/* Pseudo-random weights in [0, 1) from the position, constant over the blocks a long
 * map is pooled over (so every cell shown has its own level: the largest file), zero
 * above the diagonal when ctx says causal. */
static double hash_weight(const void *ctx, size_t h, size_t i, size_t j, size_t rows,
                          size_t cols)
{
    if (ctx && j > i)
        return 0.0;
    if (rows > 128) /* constant over each pooled block: its maximum is random too */
        i = i * 128 / rows;
    if (cols > 128)
        j = j * 128 / cols;
    uint64_t x = (h * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^
                 (j * 0x94D049BB133111EBull);
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* 4 heads at length 1024 and 4096, random weights (no two neighbours alike): the file
 * stays under 1.5 MB, the picture within 1220 px, and the title says it is down-sampled. */
static void test_heatmap_long_is_bounded(void **state)
{
    (void)state;
    const size_t lens[2] = {1024, 4096};
    for (int k = 0; k < 2; k++) {
        char path[600];
        tmp_path(path, sizeof path, "long.svg");
        assert_int_equal(svg_write_heatmaps_fn(path, "long", 4, lens[k], lens[k], hash_weight,
                                               NULL, NULL, NULL), MHA_OK);
        size_t bytes = file_size(path);
        print_message("heat map 4 heads x %zu: %zu bytes\n", lens[k], bytes);
        assert_true(bytes < 1500000);
        char *s = slurp(path, NULL);
        assert_true(svg_attr(s, "width") <= 1220);
        assert_non_null(strstr(s, "down-sampled"));
        char expect[80];
        snprintf(expect, sizeof expect, "maximum over %zu\xc3\x97%zu positions", lens[k] / 128,
                 lens[k] / 128);
        assert_non_null(strstr(s, expect));
        free(s);
    }
}

/* Heads wrap into rows: 4, 6 and 8 heads of a 64-long causal map (the baby GPT's) and of
 * short and 128-long ones are at most 1220 px wide; not down-sampled up to 128; the
 * colour scale (0 and 1 ticks) and position numbers are there. */
static void test_heatmap_fits_window(void **state)
{
    (void)state;
    const size_t heads[3] = {4, 6, 8}, lens[4] = {8, 33, 64, 128};
    static char lab[128][8];
    const char *lp[128];
    for (size_t i = 0; i < 128; i++) {
        snprintf(lab[i], sizeof lab[i], "%c", 'a' + (int)(i % 26));
        lp[i] = lab[i];
    }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) {
            char path[600];
            tmp_path(path, sizeof path, "fit.svg");
            assert_int_equal(svg_write_heatmaps_fn(path, "block 0: attention weights of every "
                                                   "head on the first 64 characters of the "
                                                   "validation text (row: query, column: key)",
                                                   heads[a], lens[b], lens[b], hash_weight, "c",
                                                   lp, lp), MHA_OK);
            char *s = slurp(path, NULL);
            double wpx = svg_attr(s, "width");
            print_message("%zu heads x %zu: %.0f x %.0f px, %zu bytes\n", heads[a], lens[b],
                          wpx, svg_attr(s, "height"), strlen(s));
            assert_true(wpx <= 1220);
            assert_null(strstr(s, "down-sampled"));
            assert_non_null(strstr(s, "class=\"colour-scale\""));
            assert_non_null(strstr(s, "text-anchor=\"middle\">0</text>"));
            assert_non_null(strstr(s, "text-anchor=\"middle\">1</text>"));
            assert_int_equal(count(s, "class=\"head\""), heads[a]);
            if (lens[b] == 64) /* every 4th position numbered (8 px cells) */
                assert_non_null(strstr(s, ">60</text>"));
            free(s);
        }
}

/* Cells of exactly 0 are left to the background: an all-zero map draws no cell, one
 * positive weight (however small) draws one path of one rectangle. */
static void test_heatmap_zero_is_background(void **state)
{
    (void)state;
    double w[2 * 3 * 3] = {0};
    char path[600];
    tmp_path(path, sizeof path, "zero.svg");
    assert_int_equal(svg_write_heatmaps(path, "z", 2, 3, 3, w, NULL, NULL), MHA_OK);
    char *s = slurp(path, NULL);
    assert_int_equal(count(s, "<path"), 0);
    free(s);
    w[9 + 4] = 1e-6;
    assert_int_equal(svg_write_heatmaps(path, "z", 2, 3, 3, w, NULL, NULL), MHA_OK);
    s = slurp(path, NULL);
    assert_int_equal(count(s, "<path"), 1);
    assert_int_equal(count(s, "h-"), 1);
    free(s);
    assert_int_equal(svg_write_heatmaps(path, "z", 0, 3, 3, w, NULL, NULL), MHA_EINVAL);
    assert_int_equal(svg_write_heatmaps(path, "z", 2, 3, 3, NULL, NULL, NULL), MHA_EINVAL);
}

/* The layout: pooling factors and cells shown for lengths around the limit. */
static void test_heatmap_layout(void **state)
{
    (void)state;
    svg_heatmap_geometry g;
    assert_int_equal(svg_heatmap_layout(4, 128, 128, &g), MHA_OK);
    assert_int_equal(g.pool_rows, 1);
    assert_int_equal(g.rows, 128);
    assert_int_equal(svg_heatmap_layout(4, 129, 1024, &g), MHA_OK);
    assert_int_equal(g.pool_rows, 2);
    assert_int_equal(g.rows, 65);
    assert_int_equal(g.pool_cols, 8);
    assert_int_equal(g.cols, 128);
    assert_int_equal(svg_heatmap_layout(1, 4096, 5, &g), MHA_OK);
    assert_int_equal(g.pool_rows, 32);
    assert_int_equal(g.pool_cols, 1);
    assert_int_equal(svg_heatmap_layout(1, (size_t)1 << 40, (size_t)1 << 40, &g), MHA_EINVAL);
}

/* ---- charts ---- */

/* x1 of every element of class `cls` in panel k (0-based) of a chart file. */
static size_t panel_positions(const char *svg, int k, const char *cls, const char *attr,
                              double *out, size_t cap)
{
    const char *p = svg;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "class=\"panel\"");
        assert_non_null(p);
        p++;
    }
    const char *end = strstr(p, "class=\"panel\"");
    char key[64], akey[32];
    snprintf(key, sizeof key, "class=\"%s\"", cls);
    snprintf(akey, sizeof akey, " %s=\"", attr);
    size_t n = 0;
    for (const char *q = strstr(p, key); q && (!end || q < end); q = strstr(q + 1, key)) {
        const char *a = strstr(q, akey);
        assert_non_null(a);
        assert_true(n < cap);
        out[n++] = strtod(a + strlen(akey), NULL);
    }
    return n;
}

/* Two panels over different x ranges (loss from step 1, accuracy from step 0) get the
 * same x ticks at the same pixels; a fitted y axis has its lowest tick on the frame's
 * bottom edge in both panels. */
static void test_charts_share_x_ticks(void **state)
{
    (void)state;
    enum { N = 1000, E = 11 };
    static double x[N], loss[N], ex[E], acc[E];
    for (size_t i = 0; i < N; i++) {
        x[i] = (double)(i + 1);
        loss[i] = 2.0 * exp(-(double)i / 200) + 0.13;
    }
    for (size_t i = 0; i < E; i++) {
        ex[i] = 100.0 * (double)i;
        acc[i] = 37.0 + 5.0 * (double)i;
    }
    svg_series ls[1] = {{"loss", "#9ecae1", x, loss, N}};
    svg_series as[1] = {{"acc", "#d94801", ex, acc, E}};
    svg_chart ch[2] = {{"loss", "step", "loss", ls, 1, 0, 0, 0},
                       {"accuracy", "step", "%", as, 1, 0, 0, 0}};
    char path[600];
    tmp_path(path, sizeof path, "charts.svg");
    assert_int_equal(svg_write_charts(path, ch, 2, 900, 330), MHA_OK);
    char *s = slurp(path, NULL);
    double a[64], b[64];
    size_t na = panel_positions(s, 0, "xgrid", "x1", a, 64);
    size_t nb = panel_positions(s, 1, "xgrid", "x1", b, 64);
    assert_true(na >= 4);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++)
        assert_true(a[i] == b[i]);
    /* y grid lines are written from the lowest: the first is on the bottom edge
     * (panel k's frame spans y from 330 k + 30 to 330 k + 285) */
    for (int k = 0; k < 2; k++) {
        double y[64];
        assert_true(panel_positions(s, k, "ygrid", "y1", y, 64) >= 3);
        assert_close(y[0], 330.0 * k + 285.0, 0.051, 0);
    }
    free(s);
}

/* Two accuracy curves both at 100%: the second is drawn dashed so the first shows; two
 * curves apart are both solid. */
static void test_charts_coinciding_lines_dashed(void **state)
{
    (void)state;
    double x[6] = {0, 100, 200, 300, 400, 500}, tok[6] = {20, 70, 100, 100, 100, 100},
           seq[6] = {1, 10, 60, 100, 100, 100}, low[6] = {1, 2, 3, 4, 5, 6};
    svg_series s1[2] = {{"token", "#d94801", x, tok, 6}, {"sequence", "#238b45", x, seq, 6}};
    svg_series s2[2] = {{"token", "#d94801", x, tok, 6}, {"sequence", "#238b45", x, low, 6}};
    svg_chart c1[1] = {{"acc", "step", "%", s1, 2, 0, 0, 100}};
    svg_chart c2[1] = {{"acc", "step", "%", s2, 2, 0, 0, 100}};
    char path[600];
    tmp_path(path, sizeof path, "acc.svg");
    assert_int_equal(svg_write_charts(path, c1, 1, 900, 330), MHA_OK);
    char *s = slurp(path, NULL);
    assert_int_equal(count(s, "stroke-dasharray"), 2); /* the curve and its legend line */
    assert_true(strstr(s, "stroke-dasharray") > strstr(s, "#238b45"));
    free(s);
    assert_int_equal(svg_write_charts(path, c2, 1, 900, 330), MHA_OK);
    s = slurp(path, NULL);
    assert_int_equal(count(s, "stroke-dasharray"), 0);
    free(s);
}

/* A write that fails says why: errno holds the system's cause after MHA_EIO, and
 * svg_strerror gives its text, so a full disk reads "No space left on device" (it read
 * "input/output error"). A small chart fails only when closed, heat maps while written. */
static void test_write_errors_keep_errno(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0)
        skip();
    double x[3] = {0, 1, 2}, y[3] = {3, 2, 1};
    svg_series ls[1] = {{"loss", "#9ecae1", x, y, 3}};
    svg_chart ch[1] = {{"loss", "step", "loss", ls, 1, 0, 0, 0}};
    errno = 0;
    int st = svg_write_charts("/dev/full", ch, 1, 900, 330);
    const int e = errno;
    assert_int_equal(st, MHA_EIO);
    assert_int_equal(e, ENOSPC);
    errno = ENOSPC;
    assert_string_equal(svg_strerror(st), strerror(ENOSPC));
    double w[4 * 64 * 64];
    for (size_t i = 0; i < 4 * 64 * 64; i++)
        w[i] = (double)(i % 7) / 7.0;
    errno = 0;
    st = svg_write_heatmaps("/dev/full", "full", 4, 64, 64, w, NULL, NULL);
    assert_int_equal(st, MHA_EIO);
    assert_int_equal(errno, ENOSPC);
    char path[600];
    tmp_path(path, sizeof path, "no-such-dir/c.svg");
    assert_int_equal(svg_write_charts(path, ch, 1, 900, 330), MHA_EIO);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(svg_write_charts(path, ch, 0, 900, 330), MHA_EINVAL);
    assert_string_equal(svg_strerror(MHA_EINVAL), mha_strerror(MHA_EINVAL));
}

/* What a program prints when a heat map cannot be written to a full disk (report_heatmaps,
 * as mha-train calls it, in a child whose stderr is a file): the system's reason, not
 * "input/output error", and exit 1. */
static void test_report_full_disk_message(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0)
        skip();
    char err[600];
    tmp_path(err, sizeof err, "report.err");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
#if defined(__SANITIZE_ADDRESS__)
        __lsan_disable(); /* the child exits through cli_die with report_heatmaps' buffers */
#endif
        FILE *e = freopen(err, "w", stderr);
        if (!e)
            _exit(99);
        const float w[2 * 3 * 3] = {0.5f, 0.25f, 0.25f, 0, 1, 0, 0.1f, 0.2f, 0.7f,
                                    1, 0, 0, 0.5f, 0.5f, 0, 0.3f, 0.3f, 0.4f};
        report_heatmaps("/dev/full", "full disk", 2, 3, 3, w, NULL, NULL);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    char *s = slurp(err, NULL);
    assert_non_null(s);
    if (!strstr(s, "cannot write /dev/full: No space left on device"))
        fail_msg("expected the full disk named, got: %s", s);
    free(s);
}

/* A million points make a small file (at most 4 points per pixel column are written). */
static void test_charts_million_points_small(void **state)
{
    (void)state;
    const size_t n = 1000000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(i + 1);
        y[i] = 1.0 + 0.5 * sin((double)i * 0.37) + 1e-6 * (double)i;
    }
    svg_series ls[1] = {{"loss", "#9ecae1", x, y, n}};
    svg_chart ch[1] = {{"loss", "step", "loss", ls, 1, 1, 0, 0}};
    char path[600];
    tmp_path(path, sizeof path, "million.svg");
    assert_int_equal(svg_write_charts(path, ch, 1, 900, 330), MHA_OK);
    size_t bytes = file_size(path);
    print_message("chart of 1e6 points: %zu bytes\n", bytes);
    assert_true(bytes < 60000);
    free(x);
    free(y);
}

/* Short series of any values (1-3 points, equal, a few ulps apart, tiny or huge magnitudes,
 * negative, a fixed range of one ulp, log or linear) give a chart of a few ticks: the tick
 * loop ends and the file stays small. Guarded so a regression fails instead of hanging or
 * filling the disk: the file may not grow past 1 MiB (SIGXFSZ ignored, so the write fails
 * with EFBIG and the writer returns an error) and an alarm ends a loop that never does. */
static void test_charts_short_series_terminate(void **state)
{
    (void)state;
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1 << 20;
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < lim.rlim_cur)
        lim.rlim_cur = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
    alarm(120);
    const double bases[] = {4.0, 1.0, 0.0, -3.25, 1e15, 9.007199254740993e15, 1e-300, 1e300,
                            2.5e-5, 123456.789};
    uint64_t rng = 0x9e3779b97f4a7c15u;
    char path[600];
    tmp_path(path, sizeof path, "short.svg");
    for (int trial = 0; trial < 3000; trial++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        uint64_t r = rng >> 11;
        double base = bases[r % 10];
        size_t n = 1 + (r >> 4) % 3;
        double x[3], y[3], x2[3], y2[3];
        for (size_t i = 0; i < n; i++) {
            double v = base;
            for (unsigned u = 0; u < ((r >> (8 + 2 * i)) & 3); u++) /* 0-3 ulps up */
                v = nextafter(v, INFINITY);
            y[i] = v;
            y2[i] = (r >> 20) & 1 ? base : -v;
            x[i] = (r >> 21) & 1 ? (double)(i + 1) : 1e6 + (double)i;
            x2[i] = x[i];
        }
        svg_series se[2] = {{"a", "#111111", x, y, n}, {"b", "#222222", x2, y2, n}};
        svg_chart ch[1] = {{"t", "step", "y", se, 1 + ((r >> 22) & 1), (r >> 23) & 1, 0, 0}};
        if ((r >> 24) % 4 == 0) { /* a fixed range of one ulp */
            ch[0].ymin = fabs(base) > 0 ? fabs(base) : 1.0;
            ch[0].ymax = nextafter(ch[0].ymin, INFINITY);
        }
        assert_int_equal(svg_write_charts(path, ch, 1, 900, 330), MHA_OK);
        size_t bytes = file_size(path);
        if (bytes > 8000)
            fail_msg("trial %d (base %g, %zu points): %zu bytes", trial, base, n, bytes);
        char *s = slurp(path, NULL);
        size_t ny = count(s, "class=\"ygrid\""), nx = count(s, "class=\"xgrid\"");
        if (ny < 1 || ny > 12 || nx < 1 || nx > 12)
            fail_msg("trial %d (base %g): %zu y and %zu x ticks", trial, base, ny, nx);
        free(s);
    }
    alarm(0);
    signal(SIGXFSZ, old_xfsz);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_smooth_step_stays),
        cmocka_unit_test(test_smooth_spike_centred),
        cmocka_unit_test(test_smooth_constant),
        cmocka_unit_test(test_smooth_line_no_lag_at_ends),
        cmocka_unit_test(test_heatmap_long_is_bounded),
        cmocka_unit_test(test_heatmap_fits_window),
        cmocka_unit_test(test_heatmap_zero_is_background),
        cmocka_unit_test(test_heatmap_layout),
        cmocka_unit_test(test_charts_share_x_ticks),
        cmocka_unit_test(test_charts_coinciding_lines_dashed),
        cmocka_unit_test(test_charts_million_points_small),
        cmocka_unit_test(test_write_errors_keep_errno),
        cmocka_unit_test(test_report_full_disk_message),
        cmocka_unit_test(test_charts_short_series_terminate),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
