/* Hand-written SVG line charts (svg_write_charts; the heat maps are in svg_heatmap.c), and
 * the text helpers both share (svg_internal.h): see svg.h. */
#include "svg.h"
#include "svg_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "mha.h"

int svg__close(FILE *f)
{
    /* fclose flushes the rest of the buffer, and fails on it as an earlier write did
     * (ENOSPC again): its errno is the freshest cause. When it succeeds after a failed
     * write (an empty buffer), errno is still that write's, unless the maths since then
     * (log10 of 0: ERANGE) changed it; EIO when nothing better is known. */
    const int bad = ferror(f), before = errno;
    errno = 0;
    const int closed = fclose(f) == 0, at_close = errno;
    if (closed && !bad)
        return MHA_OK;
    errno = !closed && at_close ? at_close
          : before && before != ERANGE && before != EDOM ? before : EIO;
    return MHA_EIO;
}

const char *svg_strerror(int st)
{
    return st == MHA_EIO ? strerror(errno) : mha_strerror(st);
}

/* Write text with &, <, > escaped. */
void svg__text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else
            fputc(*s, f);
    }
}

/* Characters (UTF-8 code points) of s; 0 for NULL. */
size_t svg__utf8_len(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* A "nice" tick step (1, 2 or 5 × 10^k) for a range split into about n parts. */
static double nice_step(double range, int n)
{
    double raw = range / n;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Widen [*lo, *hi] about its middle to at least 1e-6 of its magnitude (and 1e-300): a
 * range of a few ulps (one point, or values equal but for rounding) would otherwise give a
 * tick step so small that k * step no longer moves when k grows past 2^53. */
static void range_floor(double *lo, double *hi)
{
    double floor_ = fmax(1e-6 * fmax(fabs(*lo), fabs(*hi)), 1e-300);
    if (*hi - *lo < floor_) {
        double mid = *lo / 2 + *hi / 2;
        *lo = mid - floor_ / 2;
        *hi = mid + floor_ / 2;
    }
}

/* The ticks k * step inside [lo, hi] (with a margin of 1e-9 step): first k in *k0, the
 * count as the result, at most 1000 — a bound for any range and step, not only those the
 * charts make (range_floor keeps theirs to about 10). */
static long tick_count(double lo, double hi, double step, double *k0)
{
    double a = ceil(lo / step - 1e-9), b = floor(hi / step + 1e-9);
    *k0 = a;
    if (!(b >= a) || !isfinite(a) || !isfinite(b))
        return 0;
    return b - a >= 999 ? 1000 : (long)(b - a) + 1;
}

/* ---- charts ---------------------------------------------------------------------------- */

enum { CHART_L = 70, CHART_R = 200, CHART_T = 30, CHART_B = 45 }; /* margins, legend right */

/* The x range [*lo, *hi] of every series of every chart (the charts share it). */
static void x_range(const svg_chart *charts, size_t n, double *lo, double *hi)
{
    double a = INFINITY, b = -INFINITY;
    for (size_t k = 0; k < n; k++)
        for (size_t s = 0; s < charts[k].n_series; s++) {
            const svg_series *se = &charts[k].series[s];
            for (size_t i = 0; i < se->n; i++) {
                if (!isfinite(se->y[i]) || !isfinite(se->x[i]) ||
                    (charts[k].log_y && se->y[i] <= 0))
                    continue;
                a = fmin(a, se->x[i]);
                b = fmax(b, se->x[i]);
            }
        }
    if (!(a <= b)) { a = 0; b = 1; }
    if (b == a) b = a + 1;
    range_floor(&a, &b);
    *lo = a;
    *hi = b;
}

/* The value series s draws at point i (log10 on a log chart), or NaN if it skips it. */
static double plotted(const svg_chart *c, const svg_series *se, size_t i)
{
    double y = se->y[i];
    if (!isfinite(y) || !isfinite(se->x[i]) || (c->log_y && y <= 0))
        return NAN;
    return c->log_y ? log10(y) : y;
}

/* 1 if series s lies on an earlier series of the chart (within `tol` in y at the same x)
 * along max(3, n/20) consecutive points of its own: it is then drawn dashed so the line
 * beneath shows through the gaps (two accuracy curves both at 100%); a noisy curve that
 * only crosses another now and then does not count. */
static int hides_earlier(const svg_chart *c, size_t s, double tol)
{
    const svg_series *se = &c->series[s];
    for (size_t t = 0; t < s; t++) {
        const svg_series *te = &c->series[t];
        size_t j = 0, run = 0, need = se->n / 20 > 3 ? se->n / 20 : 3;
        for (size_t i = 0; i < se->n; i++) {
            double y = plotted(c, se, i);
            if (!isfinite(y))
                continue;
            while (j < te->n && te->x[j] < se->x[i]) /* both in increasing x */
                j++;
            double u = j < te->n && te->x[j] == se->x[i] ? plotted(c, te, j) : NAN;
            run = isfinite(u) && fabs(u - y) <= tol ? run + 1 : 0;
            if (run >= need)
                return 1;
        }
    }
    return 0;
}

/* Where a chart panel draws: its corner (ox, oy), the plot frame pw × ph px at
 * (ox + L, oy + T), and the data ranges the frame spans. */
typedef struct chart_frame {
    double ox, oy, L, T, pw, ph;
    double xmin, xmax, ymin, ymax;
} chart_frame;

/* Pixel x of data x, pixel y of (plotted) data y. */
static double frame_px(const chart_frame *fr, double x)
{
    return fr->ox + fr->L + (x - fr->xmin) / (fr->xmax - fr->xmin) * fr->pw;
}
static double frame_py(const chart_frame *fr, double y)
{
    return fr->oy + fr->T + (1.0 - (y - fr->ymin) / (fr->ymax - fr->ymin)) * fr->ph;
}

/* The y range [*ymin, *ymax] of chart c (its own, or fitted to its plotted values and
 * widened to ticks) and the tick step *ys (1 decade on a log chart). */
static void chart_y_axis(const svg_chart *c, double *ymin_out, double *ymax_out, double *ys_out)
{
    double ymin = INFINITY, ymax = -INFINITY;
    for (size_t s = 0; s < c->n_series; s++)
        for (size_t i = 0; i < c->series[s].n; i++) {
            double y = plotted(c, &c->series[s], i);
            if (isfinite(y)) {
                ymin = fmin(ymin, y);
                ymax = fmax(ymax, y);
            }
        }
    const int fixed = c->ymin < c->ymax;
    if (fixed) {
        ymin = c->log_y ? log10(c->ymin) : c->ymin;
        ymax = c->log_y ? log10(c->ymax) : c->ymax;
    }
    if (!(ymin <= ymax)) { ymin = 0; ymax = 1; }
    if (ymax == ymin) { ymax += 0.5; ymin -= 0.5; }
    range_floor(&ymin, &ymax);
    double ys;
    if (c->log_y) {
        ymin = floor(ymin);
        ymax = ceil(ymax);
        if (ymax == ymin) ymax += 1;
        ys = 1.0;
    } else {
        ys = nice_step(ymax - ymin, 5);
        if (!fixed) { /* a fitted axis starts and ends on a tick */
            ymin = floor(ymin / ys + 1e-9) * ys;
            ymax = ceil(ymax / ys - 1e-9) * ys;
        }
    }
    *ymin_out = ymin;
    *ymax_out = ymax;
    *ys_out = ys;
}

/* The panel's title, frame, grid with tick labels (y every ys, x the same in every panel)
 * and axis labels; h is the panel's height in px. */
static void chart_axes(FILE *f, const svg_chart *c, const chart_frame *fr, double h, double ys)
{
    const double ox = fr->ox, oy = fr->oy, L = fr->L, T = fr->T, pw = fr->pw, ph = fr->ph;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", ox + L,
            oy + 20);
    svg__text(f, c->title);
    fprintf(f, "</text>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" "
               "stroke=\"#888\"/>\n", ox + L, oy + T, pw, ph);
    /* y grid and labels, from the bottom of the frame */
    double k0;
    long nk = tick_count(fr->ymin, fr->ymax, ys, &k0);
    for (long i = 0; i < nk; i++) {
        double y = (k0 + (double)i) * ys;
        fprintf(f, "<line class=\"ygrid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/>\n", ox + L, ox + L + pw, frame_py(fr, y), frame_py(fr, y));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ox + L - 5,
                frame_py(fr, y) + 4, c->log_y ? pow(10.0, y) : fabs(y) < 1e-9 * ys ? 0.0 : y);
    }
    /* x grid and labels: the same in every panel (the x range is shared) */
    double xs = nice_step(fr->xmax - fr->xmin, 6);
    nk = tick_count(fr->xmin, fr->xmax, xs, &k0);
    for (long i = 0; i < nk; i++) {
        double x = (k0 + (double)i) * xs;
        fprintf(f, "<line class=\"xgrid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/>\n", frame_px(fr, x), frame_px(fr, x), oy + T, oy + T + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                frame_px(fr, x), oy + T + ph + 16, fabs(x) < 1e-9 * xs ? 0.0 : x);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ox + L + pw / 2,
            oy + h - 8);
    svg__text(f, c->xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\">", ox + 16, oy + T + ph / 2);
    svg__text(f, c->ylabel);
    fprintf(f, "</text>\n");
}

/* The points of series se as one polyline's "x,y " list: at most 4 per pixel column (first,
 * min, max, last in x order), the same picture and a bounded file for a million steps;
 * values are clamped to the frame. */
static void chart_points(FILE *f, const svg_chart *c, const svg_series *se,
                         const chart_frame *fr)
{
    long col = LONG_MIN;
    double first = 0, lo = 0, hi = 0, last = 0;
    size_t ifirst = 0, ilo = 0, ihi = 0, ilast = 0;
    int have = 0;
    for (size_t i = 0; i <= se->n; i++) {
        double y = NAN;
        long cx = LONG_MAX;
        if (i < se->n) {
            y = plotted(c, se, i);
            if (!isfinite(y))
                continue;
            y = fmin(fmax(y, fr->ymin), fr->ymax);
            cx = lround(floor(frame_px(fr, se->x[i])));
            if (have && cx == col) {
                if (y < lo) { lo = y; ilo = i; }
                if (y > hi) { hi = y; ihi = i; }
                last = y;
                ilast = i;
                continue;
            }
        }
        if (have) { /* flush the column, its points in index order */
            size_t idx[4] = {ifirst, ilo < ihi ? ilo : ihi, ilo < ihi ? ihi : ilo, ilast};
            double val[4] = {first, ilo < ihi ? lo : hi, ilo < ihi ? hi : lo, last};
            for (int k = 0; k < 4; k++)
                if (k == 0 || idx[k] != idx[k - 1])
                    fprintf(f, "%.1f,%.1f ", frame_px(fr, se->x[idx[k]]), frame_py(fr, val[k]));
        }
        if (i == se->n)
            break;
        have = 1;
        col = cx;
        first = lo = hi = last = y;
        ifirst = ilo = ihi = ilast = i;
    }
}

/* Series s of chart c: its curve, and its legend entry (line and label) right of the frame,
 * the row of its index. Dashed if it lies on an earlier series (hides_earlier). */
static void chart_series(FILE *f, const svg_chart *c, size_t s, const chart_frame *fr)
{
    const svg_series *se = &c->series[s];
    const double tol = (fr->ymax - fr->ymin) / fr->ph; /* one pixel */
    const char *dash = hides_earlier(c, s, tol) ? " stroke-dasharray=\"7 5\"" : "";
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
            se->color, dash);
    chart_points(f, c, se, fr);
    fprintf(f, "\"/>\n");
    const double right = fr->ox + fr->L + fr->pw; /* the frame's right edge */
    double ly = fr->oy + fr->T + 10 + 18.0 * (double)s;
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
               "stroke-width=\"3\"%s/>\n", right + 10, right + 38, ly, ly, se->color, dash);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", right + 43, ly + 4);
    svg__text(f, se->label);
    fprintf(f, "</text>\n");
}

/* One panel of w × h px at (ox, oy): chart c over the shared x range [xmin, xmax]. */
static void chart(FILE *f, const svg_chart *c, double ox, double oy, double w, double h,
                  double xmin, double xmax)
{
    chart_frame fr = {.ox = ox, .oy = oy, .L = CHART_L, .T = CHART_T,
                      .pw = w - CHART_L - CHART_R, .ph = h - CHART_T - CHART_B,
                      .xmin = xmin, .xmax = xmax};
    double ys;
    chart_y_axis(c, &fr.ymin, &fr.ymax, &ys);
    fprintf(f, "<g class=\"panel\" font-family=\"sans-serif\" font-size=\"12\">\n");
    chart_axes(f, c, &fr, h, ys);
    for (size_t s = 0; s < c->n_series; s++) /* in order; later ones on top */
        chart_series(f, c, s, &fr);
    fprintf(f, "</g>\n");
}

int svg_write_charts(const char *path, const svg_chart *charts, size_t n, int width, int height)
{
    if (!path || !charts || n == 0 || width < 300 || height < 150)
        return MHA_EINVAL;
    FILE *f = fopen(path, "w");
    if (!f)
        return MHA_EIO; /* errno: fopen's */
    double xmin, xmax;
    x_range(charts, n, &xmin, &xmax);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%zu\" "
               "viewBox=\"0 0 %d %zu\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, (size_t)height * n, width, (size_t)height * n);
    for (size_t i = 0; i < n; i++)
        chart(f, &charts[i], 0, (double)height * (double)i, width, height, xmin, xmax);
    fprintf(f, "</svg>\n");
    return svg__close(f);
}
