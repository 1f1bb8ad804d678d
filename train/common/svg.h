/*
 * Hand-written SVG pictures for mha-train: line charts (loss and accuracy curves) and
 * attention heat maps. No plotting dependency; the files open in any browser.
 * Functions return 0 or a negative MHA_ status (MHA_EINVAL for bad arguments, MHA_EIO
 * when the file cannot be opened or written) and never print. With MHA_EIO, errno holds
 * the cause (ENOSPC for a full disk, EACCES, ...; EIO only when the system gave none):
 * print it with svg_strerror before any other call can change errno.
 */
#ifndef TRAIN_SVG_H
#define TRAIN_SVG_H

#include <stddef.h>
#include <stdio.h>

/* The reason for status st of the svg_ call just made: strerror(errno) for MHA_EIO
 * ("No space left on device"), mha_strerror(st) otherwise. */
const char *svg_strerror(int st);

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

/* Write `n` charts stacked vertically (each width × height pixels) to path. The charts
 * share one x range (all their series) and so the same x ticks; a fitted linear y axis
 * starts and ends on a tick. Series are drawn in order, each as a 1.5-px line; a series
 * that lies on an earlier one of its chart (within a pixel, at the same x, for 3
 * consecutive points or more) is drawn dashed, in the legend too, so the line beneath
 * shows through its gaps (two accuracy curves at 100%). Series x must increase. A series
 * writes at most 4 points per pixel column (first, lowest, highest, last), so the file
 * stays small for a million steps and looks the same. */
int svg_write_charts(const char *path, const svg_chart *charts, size_t n, int width, int height);

/* Heat maps show at most SVG_HEATMAP_MAX_CELLS cells along an axis: a longer axis is
 * down-sampled by the factor ceil(n / SVG_HEATMAP_MAX_CELLS), each cell the MAXIMUM over
 * its block of positions (a sharp peak stays visible; a cell is white only if the whole
 * block is exactly 0), and the picture says so under its title. */
#define SVG_HEATMAP_MAX_CELLS 128

/* The geometry svg_write_heatmaps uses for heads × rows × cols weights. */
typedef struct svg_heatmap_geometry {
    size_t pool_rows, pool_cols; /* positions per cell along each axis (1: none pooled) */
    size_t rows, cols;           /* cells shown: ceil(rows / pool_rows), ...            */
    size_t cell;                 /* cell side in px (3 … 22)                             */
} svg_heatmap_geometry;
/* Fill *g; MHA_EINVAL for a zero size or one whose product overflows. */
int svg_heatmap_layout(size_t heads, size_t rows, size_t cols, svg_heatmap_geometry *g);

/* Write heat maps of attention weights for `heads` heads to path:
 *   w [heads, rows, cols], values in [0, 1], row i = query position, column j = key
 *   position; row_labels[rows] / col_labels[cols] (tokens, may be NULL) are shown along
 *   the axes when each position has a cell of 7 px or more; position numbers (from 0, every
 *   1, 2, 4, 8, ... positions, at least 30 px apart) are always shown, with ticks;
 *   title above (wrapped to two lines if long).
 * Colour: 64 levels from white to dark blue (8,48,107), with a colour scale 0 → 1 under
 * the title. Cells of exactly 0 (or non-finite) are left to the white background (a
 * causal mask's half costs nothing); any positive weight is at least the lightest tint.
 * Heads wrap into rows (balanced, e.g. 6 heads as 2 × 3) so the picture is at most 1200 px
 * wide; longer axes are down-sampled (SVG_HEATMAP_MAX_CELLS). Cells are drawn as one
 * <path> per colour level, a run of equal cells in a row as one rectangle: at most
 * about 17 bytes per cell, so a file stays under ~0.3 MB per head at any length.
 * MHA_ENOMEM if the 16 KiB level buffer cannot be allocated. */
int svg_write_heatmaps(const char *path, const char *title, size_t heads, size_t rows,
                       size_t cols, const double *w, const char *const *row_labels,
                       const char *const *col_labels);
/* The same with weight (h, i, j) read through weight(ctx, h, i, j, rows, cols), called
 * once per weight (e.g. for weights not stored as one array, or computed). */
typedef double (*svg_weight_fn)(const void *ctx, size_t h, size_t i, size_t j, size_t rows,
                                size_t cols);
int svg_write_heatmaps_fn(const char *path, const char *title, size_t heads, size_t rows,
                          size_t cols, svg_weight_fn weight, const void *ctx,
                          const char *const *row_labels, const char *const *col_labels);

#endif
