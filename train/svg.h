/*
 * Hand-written SVG pictures for mha-train: line charts (loss and accuracy curves) and
 * attention heat maps. No plotting dependency; the files open in any browser.
 * Functions return 0 or a negative MHA_ status (MHA_EINVAL for bad arguments, MHA_EIO
 * when the file cannot be written) and never print.
 */
#ifndef TRAIN_SVG_H
#define TRAIN_SVG_H

#include <stddef.h>
#include <stdio.h>

/* One curve: points (x[i], y[i]), i < n; non-finite y values are skipped. Borrowed. */
typedef struct svg_series {
    const char *label; /* legend text                       */
    const char *color; /* any SVG colour, e.g. "#1f77b4"     */
    const double *x, *y;
    size_t n;
} svg_series;

/* One chart panel. y range: [ymin, ymax] if ymin < ymax, else fitted to the data;
 * log_y plots log10(y) (values <= 0 skipped). */
typedef struct svg_chart {
    const char *title, *xlabel, *ylabel;
    const svg_series *series;
    size_t n_series;
    int log_y;
    double ymin, ymax;
} svg_chart;

/* Write `n` charts stacked vertically (each width × height pixels) to path. */
int svg_write_charts(const char *path, const svg_chart *charts, size_t n, int width, int height);

/* Write heat maps of attention weights for `heads` heads side by side:
 *   w [heads, rows, cols], values in [0, 1] (0 white → 1 dark blue; cells of exactly 0
 *   are left to the white background, which keeps causal maps half the size), row i =
 *   query position, column j = key position; row_labels[rows] / col_labels[cols] are shown
 *   along the axes (may be NULL). title above. */
int svg_write_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                       size_t cols, const double *w, const char *const *row_labels,
                       const char *const *col_labels);

#endif
