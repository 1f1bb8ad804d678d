/*
 * What the programs write and say about a run beside the loop (trainer.h): the curves
 * picture of the history, the checkpoint's run metadata, the header's peak and resume lines,
 * the line of a run that stopped early.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "peak.h"
#include "svg.h"
#include "trainer.h"

/* One curve into x, y (room for n + 1 points): its points, in step order. */
static size_t curve_points(const report_history *h, const train_curve *c, double *sm, double *x,
                           double *y)
{
    const int smooth = c->col >= TRAIN_CURVE_SMOOTH;
    const size_t col = (size_t)(smooth ? c->col - TRAIN_CURVE_SMOOTH : c->col);
    size_t m = 0;
    if (c->sparse && isfinite(h->init[col])) { /* the evaluation before training */
        x[m] = 0;
        y[m++] = c->scale * h->init[col];
    }
    if (smooth) { /* sm: the column's raw values, smoothed into y */
        for (size_t i = 0; i < h->n; i++)
            sm[i] = report_at(h, i, col);
        report_smooth(sm, h->n, y);
    }
    for (size_t i = 0; i < h->n; i++) {
        const double v = report_at(h, i, col);
        if (c->sparse && !isfinite(v))
            continue;
        x[m] = (double)(i + 1); /* row i is step i + 1 */
        if (!smooth)
            y[m] = c->scale * v;
        m++;
    }
    return m;
}

void train_write_curves(const report_history *h, const char *path, const train_panel *p,
                        size_t n)
{
    enum { MAX_CURVES = TRAIN_MAX_PANELS * TRAIN_PANEL_CURVES };
    svg_series s[MAX_CURVES];
    svg_chart ch[TRAIN_MAX_PANELS];
    const size_t len = h->n + 1;
    double *buf = malloc((2 * MAX_CURVES + 1) * len * sizeof *buf);
    if (!buf)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    size_t ns = 0, nc = 0, points[TRAIN_MAX_PANELS] = {0}, any = 0;
    if (n > TRAIN_MAX_PANELS)
        n = TRAIN_MAX_PANELS;
    for (size_t k = 0; k < n; k++) {
        const size_t first = ns;
        for (size_t j = 0; j < TRAIN_PANEL_CURVES && p[k].c[j].label; j++, ns++) {
            double *x = buf + 2 * ns * len, *y = x + len;
            const size_t m = curve_points(h, &p[k].c[j], buf + 2 * MAX_CURVES * len, x, y);
            s[ns] = (svg_series){p[k].c[j].label, p[k].c[j].color, x, y, m};
            points[k] += m;
        }
        any += points[k];
        ch[k] = (svg_chart){p[k].title, "step", p[k].ylabel, s + first, ns - first, p[k].log_y,
                            p[k].ymin, p[k].ymax};
    }
    for (size_t k = 0; k < n; k++) /* an empty panel beside one with points is left out */
        if (points[k] > 0 || any == 0)
            ch[nc++] = ch[k];
    const int st = svg_write_charts(path, ch, nc, 900, 330);
    if (st != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s: %s", path, svg_strerror(st));
    free(buf);
}

int train_save_checkpoint(const char *path, const ckpt_layout *c, const char *format,
                          const cli_opt *opts, size_t n, const void *cfg,
                          const char *const *extra, double elapsed, const char *run_id)
{
    ckpt_meta meta = {0};
    char el[32];
    snprintf(el, sizeof el, "%.3f", elapsed);
    int st = ckpt_meta_init(&meta, format, opts, n, cfg);
    for (size_t k = 0; st == MHA_OK && extra && extra[k]; k += 2)
        if (extra[k + 1])
            st = ckpt_meta_add(&meta, extra[k], extra[k + 1]);
    if (st == MHA_OK)
        st = ckpt_meta_add(&meta, "elapsed_seconds", el);
    if (st == MHA_OK && run_id && run_id[0])
        st = ckpt_meta_add(&meta, "run_id", run_id);
    if (st != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    meta.checksums = 1; /* a CRC-32C of every tensor and of the metadata (ckpt.h) */
    char err[2 * CLI_PATH_CAP] = "";
    st = ckpt_save(path, c, &meta, err, sizeof err);
    if (st != MHA_OK)
        fprintf(stderr, "%s: cannot write %s: %s\n", cli_program(), path, err);
    ckpt_meta_free(&meta);
    return st;
}

void train_say_run_state(const char *resume, uint64_t step, uint64_t made, uint64_t steps,
                         const peak_best *src, double peak, const char *precision, int threads,
                         int ranks, double flops_step)
{
    if (resume && resume[0])
        printf("  resumed from %s at step %llu%s\n", resume, (unsigned long long)step,
               made != steps ? " (--steps changed: the remaining steps follow the schedule of "
                               "the new --steps)" : "");
    char note[PEAK_PATH_CAP + 128], gflop[48] = "";
    peak_best_note(src, note, sizeof note);
    if (flops_step > 0)
        snprintf(gflop, sizeof gflop, ", %.3g GFLOP a step", flops_step * 1e-9);
    if (peak > 0)
        printf("  measured peak %.0f GFLOP/s (%s, %d thread(s)%s%s): the MFU's denominator%s\n",
               peak, precision, threads, ranks > 1 ? " a rank, all ranks" : "", note, gflop);
    fflush(stdout);
}

void train_say_stopped(const train_loop *L, const char *ckpt_path)
{
    if (*L->step >= L->steps)
        return;
    const int sig = report_stop_signal();
    printf("stopped after step %llu of %llu (%s); continue with --resume %s\n",
           (unsigned long long)*L->step, (unsigned long long)L->steps,
           sig           ? report_signal_name(sig)
           : L->stop_sig ? "a signal to another rank"
                         : "--stop-after",
           ckpt_path);
}
