/* Hand-written SVG charts and heat maps: see svg.h. */
#include "svg.h"

#include <math.h>
#include <string.h>

#include "mha.h"

/* Write text with &, <, > escaped. */
static void svg_text(FILE *f, const char *s)
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

/* A "nice" tick step (1, 2 or 5 × 10^k) for a range split into about n parts. */
static double nice_step(double range, int n)
{
    double raw = range / n;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void chart(FILE *f, const svg_chart *c, double ox, double oy, double w, double h)
{
    const double L = 70, R = 200, T = 30, B = 45; /* margins: legend on the right */
    const double pw = w - L - R, ph = h - T - B;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (size_t s = 0; s < c->n_series; s++)
        for (size_t i = 0; i < c->series[s].n; i++) {
            double x = c->series[s].x[i], y = c->series[s].y[i];
            if (!isfinite(y) || (c->log_y && y <= 0))
                continue;
            if (c->log_y)
                y = log10(y);
            xmin = fmin(xmin, x);
            xmax = fmax(xmax, x);
            ymin = fmin(ymin, y);
            ymax = fmax(ymax, y);
        }
    if (c->ymin < c->ymax) {
        ymin = c->log_y ? log10(c->ymin) : c->ymin;
        ymax = c->log_y ? log10(c->ymax) : c->ymax;
    }
    if (!(xmin <= xmax)) { xmin = 0; xmax = 1; }
    if (!(ymin <= ymax)) { ymin = 0; ymax = 1; }
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) { ymax += 0.5; ymin -= 0.5; }
    if (c->log_y) { ymin = floor(ymin); ymax = ceil(ymax); }

#define PX(x) (ox + L + ((x) - xmin) / (xmax - xmin) * pw)
#define PY(y) (oy + T + (1.0 - ((y) - ymin) / (ymax - ymin)) * ph)
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"12\">\n");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", ox + L,
            oy + 20);
    svg_text(f, c->title);
    fprintf(f, "</text>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" "
               "stroke=\"#888\"/>\n", ox + L, oy + T, pw, ph);
    /* y grid and labels */
    double ys = c->log_y ? 1.0 : nice_step(ymax - ymin, 5);
    for (double y = ceil(ymin / ys) * ys; y <= ymax + 1e-9 * ys; y += ys) {
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                ox + L, ox + L + pw, PY(y), PY(y));
        if (c->log_y)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ox + L - 5,
                    PY(y) + 4, pow(10.0, y));
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ox + L - 5,
                    PY(y) + 4, fabs(y) < 1e-12 ? 0.0 : y);
    }
    /* x grid and labels */
    double xs = nice_step(xmax - xmin, 6);
    for (double x = ceil(xmin / xs) * xs; x <= xmax + 1e-9 * xs; x += xs) {
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                PX(x), PX(x), oy + T, oy + T + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x),
                oy + T + ph + 16, x);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ox + L + pw / 2,
            oy + h - 8);
    svg_text(f, c->xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\">", ox + 16, oy + T + ph / 2);
    svg_text(f, c->ylabel);
    fprintf(f, "</text>\n");
    /* curves */
    for (size_t s = 0; s < c->n_series; s++) {
        const svg_series *se = &c->series[s];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                se->color);
        for (size_t i = 0; i < se->n; i++) {
            double y = se->y[i];
            if (!isfinite(y) || (c->log_y && y <= 0))
                continue;
            if (c->log_y)
                y = log10(y);
            y = fmin(fmax(y, ymin), ymax);
            fprintf(f, "%.1f,%.1f ", PX(se->x[i]), PY(y));
        }
        fprintf(f, "\"/>\n");
        double ly = oy + T + 10 + 18.0 * (double)s;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n", ox + L + pw + 10, ox + L + pw + 30, ly, ly,
                se->color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", ox + L + pw + 35, ly + 4);
        svg_text(f, se->label);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
#undef PX
#undef PY
}

int svg_write_charts(const char *path, const svg_chart *charts, size_t n, int width, int height)
{
    if (!path || !charts || n == 0 || width < 300 || height < 150)
        return MHA_EINVAL;
    FILE *f = fopen(path, "w");
    if (!f)
        return MHA_EIO;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%zu\" "
               "viewBox=\"0 0 %d %zu\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, (size_t)height * n, width, (size_t)height * n);
    for (size_t i = 0; i < n; i++)
        chart(f, &charts[i], 0, (double)height * (double)i, width, height);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return MHA_EIO;
    return MHA_OK;
}

int svg_write_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                       size_t cols, const double *w, const char *const *row_labels,
                       const char *const *col_labels)
{
    if (!path || !w || heads == 0 || rows == 0 || cols == 0 || rows > 1024 || cols > 1024)
        return MHA_EINVAL;
    const double cell = fmax(8.0, fmin(22.0, 360.0 / (double)(rows > cols ? rows : cols)));
    /* column labels longer than 2 characters are written vertically */
    size_t maxlen = 0;
    for (size_t j = 0; col_labels && j < cols; j++)
        if (col_labels[j] && strlen(col_labels[j]) > maxlen)
            maxlen = strlen(col_labels[j]);
    const int vertical = maxlen > 2;
    const double lab = 34, gap = 30, top = vertical ? 30 + 6.5 * (double)maxlen : 50;
    const double pw = lab + cell * (double)cols, ph = lab + cell * (double)rows;
    const double W = gap + (pw + gap) * (double)heads, Hh = top + ph + 40;
    FILE *f = fopen(path, "w");
    if (!f)
        return MHA_EIO;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, Hh, W, Hh);
    fprintf(f, "<text x=\"%.1f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", gap);
    svg_text(f, title);
    fprintf(f, "</text>\n");
    const double fs = fmin(11.0, cell * 0.8);
    for (size_t h = 0; h < heads; h++) {
        double ox = gap + (pw + gap) * (double)h, oy = top;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">head %zu</text>\n", ox + lab,
                oy - 6, h);
        for (size_t i = 0; i < rows; i++) {
            if (row_labels) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"end\">",
                        ox + lab - 3, oy + lab + cell * ((double)i + 0.75), fs);
                svg_text(f, row_labels[i]);
                fprintf(f, "</text>\n");
            }
            for (size_t j = 0; j < cols; j++) {
                double v = w[(h * rows + i) * cols + j];
                v = isfinite(v) ? fmin(fmax(v, 0.0), 1.0) : 0.0;
                if (v == 0.0)
                    continue; /* white on the white background (e.g. a causal mask's half) */
                /* white (255,255,255) → dark blue (8,48,107) */
                int r = (int)lround(255 - v * (255 - 8)), g = (int)lround(255 - v * (255 - 48)),
                    b = (int)lround(255 - v * (255 - 107));
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"rgb(%d,%d,%d)\"><title>q%zu k%zu %.3f</title></rect>\n",
                        ox + lab + cell * (double)j, oy + lab + cell * (double)i, cell, cell, r,
                        g, b, i, j, v);
            }
        }
        if (col_labels)
            for (size_t j = 0; j < cols; j++) {
                double cx = ox + lab + cell * ((double)j + 0.5), cy = oy + lab - 4;
                if (vertical)
                    fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
                               "font-size=\"%.1f\" dominant-baseline=\"middle\">", cx, cy, fs);
                else
                    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" "
                               "text-anchor=\"middle\">", cx, cy, fs);
                svg_text(f, col_labels[j]);
                fprintf(f, "</text>\n");
            }
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                   "stroke=\"#888\"/>\n", ox + lab, oy + lab, cell * (double)cols,
                cell * (double)rows);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">rows: query "
                   "position, columns: key position</text>\n", ox + lab, oy + ph + 16);
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return MHA_EIO;
    return MHA_OK;
}
