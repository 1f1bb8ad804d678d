/*
 * svg_internal.h — what the charts (svg.c) and the heat maps (svg_heatmap.c) share and
 * nothing else includes: the text helpers. Internal names carry the prefix svg__.
 */
#ifndef TRAIN_SVG_INTERNAL_H
#define TRAIN_SVG_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

/* Write s (NULL: nothing) with &, <, > escaped. */
void svg__text(FILE *f, const char *s);
/* Characters (UTF-8 code points) of s; 0 for NULL. */
size_t svg__utf8_len(const char *s);
/* Close f, written in full: MHA_OK, or MHA_EIO with errno the cause (fclose's, else that of
 * the write that failed before; EIO if neither is known). f is closed either way. */
int svg__close(FILE *f);

#endif
