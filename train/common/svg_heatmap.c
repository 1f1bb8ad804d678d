/* Hand-written SVG heat maps of attention weights (svg_write_heatmaps, svg_write_heatmaps_fn,
 * svg_heatmap_layout): see svg.h. */
#include "svg.h"
#include "svg_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"

enum {
    HM_LEVELS = 64,      /* colour levels: level l shows weights near l/64           */
    HM_MAX_WIDTH = 1200, /* the picture's width in px, at most (heads wrap into rows)  */
    HM_MARGIN = 20,
};

/* Colour of level l (0 white → HM_LEVELS dark blue (8,48,107)), as "#rrggbb". */
static void level_colour(int l, char out[8])
{
    double v = (double)l / HM_LEVELS;
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround(255 - v * (255 - 8)),
             (unsigned)lround(255 - v * (255 - 48)), (unsigned)lround(255 - v * (255 - 107)));
}

/* Level of a weight: 0 only for exactly 0 (and non-finite values); any positive weight at
 * least level 1; else the nearest level. */
static unsigned char weight_level(double v)
{
    if (!isfinite(v) || v <= 0)
        return 0;
    long l = lround(fmin(v, 1.0) * HM_LEVELS);
    return (unsigned char)(l < 1 ? 1 : l);
}

/* The smallest step 1, 2, 4, 8, ... with step × px_per_position ≥ 30 px. */
static size_t tick_step(double px_per_position)
{
    size_t s = 1;
    while ((double)s * px_per_position < 30.0 && s < ((size_t)1 << 40))
        s *= 2;
    return s;
}

/* Print s, wrapped before a space to lines of at most `cap` characters (2 lines at most
 * are wrapped; the rest stays on the last one), as <text> lines from y, `dy` apart.
 * Returns the number of lines. */
static int wrapped_text(FILE *f, const char *s, double x, double y, double dy, size_t cap,
                        const char *attrs)
{
    int lines = 0;
    while (s && *s) {
        size_t n = strlen(s), cut = n;
        if (svg__utf8_len(s) > cap && lines == 0) {
            cut = 0;
            for (size_t i = 0, chars = 0; i < n && chars <= cap; i++) {
                if (s[i] == ' ')
                    cut = i;
                chars += ((unsigned char)s[i] & 0xC0) != 0x80;
            }
            if (cut == 0)
                cut = n;
        }
        char *line = malloc(cut + 1);
        if (!line)
            return lines;
        memcpy(line, s, cut);
        line[cut] = '\0';
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y + dy * lines, attrs);
        svg__text(f, line);
        fprintf(f, "</text>\n");
        free(line);
        lines++;
        s += cut;
        while (*s == ' ')
            s++;
    }
    return lines;
}

int svg_heatmap_layout(size_t heads, size_t rows, size_t cols, svg_heatmap_geometry *g)
{
    if (!g || heads == 0 || rows == 0 || cols == 0 || heads > SIZE_MAX / rows ||
        heads * rows > SIZE_MAX / cols)
        return MHA_EINVAL;
    memset(g, 0, sizeof *g);
    g->pool_rows = rows > SVG_HEATMAP_MAX_CELLS ? (rows + SVG_HEATMAP_MAX_CELLS - 1) /
                                                       SVG_HEATMAP_MAX_CELLS : 1;
    g->pool_cols = cols > SVG_HEATMAP_MAX_CELLS ? (cols + SVG_HEATMAP_MAX_CELLS - 1) /
                                                       SVG_HEATMAP_MAX_CELLS : 1;
    g->rows = (rows + g->pool_rows - 1) / g->pool_rows;
    g->cols = (cols + g->pool_cols - 1) / g->pool_cols;
    size_t big = g->rows > g->cols ? g->rows : g->cols;
    size_t cell = 512 / big;
    g->cell = cell < 3 ? 3 : cell > 22 ? 22 : cell;
    return MHA_OK;
}

/* w [heads, rows, cols] as svg_weight_fn */
static double weight_f64(const void *ctx, size_t h, size_t i, size_t j, size_t rows,
                         size_t cols)
{
    return ((const double *)ctx)[(h * rows + i) * cols + j];
}

int svg_write_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                       size_t cols, const double *w, const char *const *row_labels,
                       const char *const *col_labels)
{
    if (!w)
        return MHA_EINVAL;
    return svg_write_heatmaps_fn(path, title, heads, rows, cols, weight_f64, w, row_labels,
                                 col_labels);
}

/* The whole picture's layout for heads × rows × cols weights, decided before writing. */
typedef struct hm_plan {
    svg_heatmap_geometry g;       /* cells shown R × C, positions per cell, cell side      */
    size_t heads, rows, cols;     /* the weights' shape                                    */
    int tok_r, tok_c, vertical;   /* query / key tokens shown; key tokens written upwards  */
    double c, fs, num_w;          /* cell side, token font size, query-number column (px)  */
    double left, top;             /* the map's corner in its panel (px)                    */
    double map_w, map_h, pw, ph;  /* the map, one panel (px)                               */
    size_t per_row, n_rows;       /* panels per row, rows of panels                        */
    size_t title_chars;           /* title characters per line                             */
    double y_note, y_scale;       /* baselines of the down-sampling note, the colour scale  */
    double head_top, W, H;        /* top of the first row of panels; the picture (px)      */
    char note[320];               /* what down-sampling did, or ""                         */
} hm_plan;

/* The longest of labels[n] in characters (0 for NULL labels). */
static size_t longest_label(const char *const *labels, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; labels && i < n; i++)
        len = svg__utf8_len(labels[i]) > len ? svg__utf8_len(labels[i]) : len;
    return len;
}

/* One panel (head name; key tokens; [query numbers | query tokens | map]; key numbers):
 * the cell shrinks (not below 3 px) until two heads fit side by side; tokens are shown
 * along an axis only when every position has its own cell, wide enough. */
static void hm_plan_panel(hm_plan *p, int have_row_labels, int have_col_labels, size_t len_r,
                          size_t len_c)
{
    for (;; p->g.cell--) {
        const double c = (double)p->g.cell;
        p->c = c;
        p->tok_r = have_row_labels && p->g.pool_rows == 1 && p->g.cell >= 7;
        p->tok_c = have_col_labels && p->g.pool_cols == 1 && p->g.cell >= 7;
        p->fs = fmin(11.0, c * 0.8);
        const double cw = 0.62 * p->fs; /* token font, char width */
        p->left = p->num_w + (p->tok_r ? cw * (double)len_r + 14 : 0);
        p->top = 18 + (p->tok_c ? (p->vertical ? cw * (double)len_c : p->fs) + 6 : 0);
        p->map_w = c * (double)p->g.cols;
        p->map_h = c * (double)p->g.rows;
        p->pw = p->left + p->map_w + 16;
        p->ph = p->top + p->map_h + 30;
        if (p->g.cell <= 3 || p->heads == 1 || 2 * p->pw <= HM_MAX_WIDTH - 2 * HM_MARGIN)
            break;
    }
}

/* Fill *p: the geometry, the panel, how panels wrap into rows (balanced: 6 heads in 2 rows
 * of 3), the header's lines and the picture's size. MHA_EINVAL for a bad shape. */
static int hm_plan_make(hm_plan *p, const char *title, size_t heads, size_t rows, size_t cols,
                        const char *const *row_labels, const char *const *col_labels)
{
    memset(p, 0, sizeof *p);
    if (svg_heatmap_layout(heads, rows, cols, &p->g) != MHA_OK)
        return MHA_EINVAL;
    p->heads = heads;
    p->rows = rows;
    p->cols = cols;
    const size_t len_r = longest_label(row_labels, rows), len_c = longest_label(col_labels, cols);
    p->vertical = len_c > 2;
    p->num_w = 8 + 5.5 * (double)svg__utf8_len("0000") + (rows >= 10000 ? 11 : 0);
    hm_plan_panel(p, row_labels != NULL, col_labels != NULL, len_r, len_c);
    size_t per_row = (size_t)fmax(1.0, floor((HM_MAX_WIDTH - 2 * HM_MARGIN) / p->pw));
    if (per_row > heads)
        per_row = heads;
    p->n_rows = (heads + per_row - 1) / per_row;
    p->per_row = (heads + p->n_rows - 1) / p->n_rows;
    p->title_chars = (size_t)((HM_MAX_WIDTH - 2 * HM_MARGIN) / 8.5);
    double W = 2 * HM_MARGIN + p->pw * (double)p->per_row;
    double title_w = 8.5 * (double)svg__utf8_len(title) + 2 * HM_MARGIN;
    W = fmax(W, fmin(title_w, (double)HM_MAX_WIDTH));
    p->W = fmax(W, 640); /* room for the colour scale and the down-sampling note */
    const size_t R = p->g.rows, C = p->g.cols, pr = p->g.pool_rows, pc = p->g.pool_cols;
    if (pr > 1 || pc > 1)
        snprintf(p->note, sizeof p->note, "down-sampled %zu\xc3\x97%zu \xe2\x86\x92 "
                 "%zu\xc3\x97%zu: each cell is the maximum over %zu\xc3\x97%zu positions",
                 rows, cols, R, C, pr, pc);
    const size_t t_lines = svg__utf8_len(title) > p->title_chars ? 2 : 1; /* as wrapped_text */
    p->y_note = 22 + 19.0 * (double)t_lines;
    p->y_scale = p->y_note + (p->note[0] ? 20 : 0);
    p->head_top = p->y_scale + 40;
    p->H = p->head_top + p->ph * (double)p->n_rows + 18;
    return MHA_OK;
}

/* The <svg> element's opening, the title (1-2 lines) and the down-sampling note. */
static void hm_header(FILE *f, const char *title, const hm_plan *p)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", p->W, p->H, p->W,
            p->H);
    wrapped_text(f, title, HM_MARGIN, 22, 19, p->title_chars,
                 "font-size=\"15\" font-weight=\"bold\"");
    if (p->note[0]) {
        fprintf(f, "<text class=\"note\" x=\"%d\" y=\"%.1f\" font-size=\"13\" fill=\"#a33\">",
                HM_MARGIN, p->y_note);
        svg__text(f, p->note);
        fprintf(f, "</text>\n");
    }
}

/* The colour scale on baseline y_scale: the 64 levels as a bar 0 → 1, ticks every 0.25. */
static void hm_colour_scale(FILE *f, double y_scale)
{
    const double x0 = HM_MARGIN + 110, bw = 256, bh = 12, y0 = y_scale - 4;
    fprintf(f, "<g class=\"colour-scale\" font-size=\"11\" shape-rendering=\"crispEdges\">\n"
               "<text x=\"%d\" y=\"%.1f\">attention weight</text>\n", HM_MARGIN, y0 + 10);
    for (int l = 0; l <= HM_LEVELS; l++) {
        char col[8];
        level_colour(l, col);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                   "fill=\"%s\"/>\n", x0 + bw * ((double)l - 0.5) / HM_LEVELS +
                   (l == 0 ? bw * 0.5 / HM_LEVELS : 0), y0,
                bw / HM_LEVELS * (l == 0 || l == HM_LEVELS ? 0.5 : 1.0), bh, col);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"#888\"/>\n", x0, y0, bw, bh);
    for (int k = 0; k <= 4; k++) {
        double x = x0 + bw * k / 4.0;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>"
                   "\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                x, y0 + bh, y0 + bh + 4, x, y0 + bh + 15, k / 4.0);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">white: exactly 0 (any weight "
               "&gt; 0 is tinted)</text>\n</g>\n", x0 + bw + 14, y0 + 10);
}

/* lv [R, C] = the colour level of each cell of head h: the maximum weight over its block
 * of pool_rows × pool_cols positions (exactly 0 only if the whole block is). */
static void hm_levels(unsigned char *lv, const hm_plan *p, svg_weight_fn weight,
                      const void *ctx, size_t h)
{
    const size_t R = p->g.rows, C = p->g.cols, pr = p->g.pool_rows, pc = p->g.pool_cols;
    for (size_t I = 0; I < R; I++)
        for (size_t J = 0; J < C; J++) {
            double m = 0;
            for (size_t i = I * pr; i < (I + 1) * pr && i < p->rows; i++)
                for (size_t j = J * pc; j < (J + 1) * pc && j < p->cols; j++) {
                    double v = weight(ctx, h, i, j, p->rows, p->cols);
                    if (isfinite(v) && v > m)
                        m = v;
                }
            lv[I * C + J] = weight_level(m);
        }
}

/* The cells of lv [R, C] with their corner at (mx, my): one path per colour level, a run of
 * equal cells in a row one rectangle; level 0 is left to the background. */
static void hm_cells(FILE *f, const hm_plan *p, const unsigned char *lv, double mx, double my)
{
    const size_t R = p->g.rows, C = p->g.cols, cell = p->g.cell;
    fprintf(f, "<g transform=\"translate(%.1f,%.1f)\" shape-rendering=\"crispEdges\">\n",
            mx, my);
    for (int l = 1; l <= HM_LEVELS; l++) {
        int open = 0;
        for (size_t I = 0; I < R; I++)
            for (size_t J = 0; J < C;) {
                if (lv[I * C + J] != l) {
                    J++;
                    continue;
                }
                size_t J1 = J;
                while (J1 < C && lv[I * C + J1] == l)
                    J1++;
                if (!open) {
                    char col[8];
                    level_colour(l, col);
                    fprintf(f, "<path fill=\"%s\" d=\"", col);
                    open = 1;
                }
                fprintf(f, "M%zu %zuh%zuv%zuh-%zuz", J * cell, I * cell, (J1 - J) * cell, cell,
                        (J1 - J) * cell);
                J = J1;
            }
        if (open)
            fprintf(f, "\"/>\n");
    }
    fprintf(f, "</g>\n");
}

/* The tokens of a map with its corner at (mx, my), where shown: query tokens (row_labels
 * [rows]) left of it, key tokens (col_labels [cols]) above it. */
static void hm_tokens(FILE *f, const hm_plan *p, double mx, double my,
                      const char *const *row_labels, const char *const *col_labels)
{
    const double c = p->c, fs = p->fs;
    for (size_t i = 0; p->tok_r && i < p->rows; i++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"end\">",
                mx - 3, my + c * ((double)i + 0.5) + 0.35 * fs, fs);
        svg__text(f, row_labels[i]);
        fprintf(f, "</text>\n");
    }
    for (size_t j = 0; p->tok_c && j < p->cols; j++) {
        double cx = mx + c * ((double)j + 0.5), cy = my - 4;
        if (p->vertical)
            fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
                       "font-size=\"%.1f\" dominant-baseline=\"middle\">", cx, cy, fs);
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" "
                       "text-anchor=\"middle\">", cx, cy, fs);
        svg__text(f, col_labels[j]);
        fprintf(f, "</text>\n");
    }
}

/* Position numbers with ticks of the panel at x = ox whose map's corner is (mx, my): query
 * positions every rstep at the far left, key positions every cstep below the map. */
static void hm_positions(FILE *f, const hm_plan *p, double ox, double mx, double my,
                         size_t rstep, size_t cstep)
{
    const double c = p->c, num_w = p->num_w, map_h = p->map_h;
    const size_t pr = p->g.pool_rows, pc = p->g.pool_cols;
    fprintf(f, "<g font-size=\"9\" fill=\"#666\">\n");
    for (size_t q = 0; q < p->rows; q += rstep) {
        double y = my + c / (double)pr * ((double)q + 0.5);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%zu</text>\n",
                ox + num_w - 4, ox + num_w, y, y, ox + num_w - 6, y + 3, q);
    }
    for (size_t k = 0; k < p->cols; k += cstep) {
        double x = mx + c / (double)pc * ((double)k + 0.5);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>\n",
                x, x, my + map_h, my + map_h + 4, x, my + map_h + 13, k);
    }
    fprintf(f, "</g>\n");
}

int svg_write_heatmaps_fn(const char *path, const char *title, size_t heads, size_t rows,
                          size_t cols, svg_weight_fn weight, const void *ctx,
                          const char *const *row_labels, const char *const *col_labels)
{
    hm_plan p;
    if (!path || !weight || hm_plan_make(&p, title, heads, rows, cols, row_labels,
                                         col_labels) != MHA_OK)
        return MHA_EINVAL;
    unsigned char *lv = malloc(p.g.rows * p.g.cols); /* [R, C] one head's levels */
    if (!lv)
        return MHA_ENOMEM;
    FILE *f = fopen(path, "w");
    if (!f) {
        const int e = errno; /* fopen's cause, kept across free */
        free(lv);
        errno = e;
        return MHA_EIO;
    }
    hm_header(f, title, &p);
    hm_colour_scale(f, p.y_scale);
    const size_t rstep = tick_step(p.c / (double)p.g.pool_rows),
                 cstep = tick_step(p.c / (double)p.g.pool_cols);
    for (size_t h = 0; h < heads; h++) { /* one panel per head */
        const double ox = HM_MARGIN + p.pw * (double)(h % p.per_row),
                     oy = p.head_top + p.ph * (double)(h / p.per_row);
        const double mx = ox + p.left, my = oy + p.top; /* the map's corner */
        fprintf(f, "<g class=\"head\">\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" "
                   "font-weight=\"bold\">head %zu</text>\n", mx, oy + 12, h);
        hm_levels(lv, &p, weight, ctx, h);
        hm_cells(f, &p, lv, mx, my);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                   "fill=\"none\" stroke=\"#888\"/>\n", mx, my, p.map_w, p.map_h);
        hm_tokens(f, &p, mx, my, row_labels, col_labels);
        hm_positions(f, &p, ox, mx, my, rstep, cstep);
        fprintf(f, "</g>\n");
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">rows: query position, "
               "columns: key position; numbers: positions (from 0)%s</text>\n", HM_MARGIN,
            p.H - 8, p.tok_r || p.tok_c ? ", labels beside them: the tokens" : "");
    fprintf(f, "</svg>\n");
    free(lv);
    return svg__close(f);
}
