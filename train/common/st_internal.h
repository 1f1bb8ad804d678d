/*
 * st_internal.h — what the safetensors reader and writer (st.c, st_header.c, st_write.c)
 * share and nothing else includes: the limits, the parsed file, and the small helpers of
 * st.c. Internal names carry the prefix st__.
 */
#ifndef TRAIN_ST_INTERNAL_H
#define TRAIN_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "st.h"

/* The reference reader (huggingface/safetensors, MAX_HEADER_SIZE) refuses larger headers. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* Integers the header may hold: below 2^53, so that readers that parse JSON numbers as
 * doubles (Python's json does not, JavaScript does) see them exactly. */
#define ST_MAX_JSON_INT ((uint64_t)1 << 53)
#define ST_METADATA_KEY "__metadata__"

#if defined(__GNUC__)
#define ST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ST_PRINTF(f, a)
#endif

typedef struct st_entry {
    const char *name;            /* borrowed from the cJSON tree                    */
    st_dtype dtype;
    size_t ndim;
    size_t shape[ST_MAX_NDIM];   /* shape[ndim..) = 0                               */
    uint64_t begin, end;         /* byte range within the data section              */
    const void *data;            /* into the file buffer, or = copy                 */
    void *copy;                  /* owned aligned copy for a misaligned tensor      */
} st_entry;

struct st_file {
    unsigned char *alloc;        /* owned [data_size]: the data section (malloc's
                                    alignment), read only after the header is valid */
    const unsigned char *data;   /* [data_size] = alloc                             */
    size_t data_size;
    cJSON *root;                 /* owned parsed header; names and metadata borrow  */
    const cJSON *meta;           /* the "__metadata__" object or NULL               */
    st_entry *t;                 /* [n] owned, in header order                      */
    size_t n;
};

/* ---- helpers (st.c) ---- */

/* Format a one-line message into err[errlen] (nothing when err is NULL). */
void st__set_err(char *err, size_t errlen, const char *fmt, ...) ST_PRINTF(3, 4);
/* errno text without strerror's static buffer. */
const char *st__errno_text(int e, char *buf, size_t len);
/* A name in quotes for a message, control characters escaped, cut to 64 bytes with
 * "...". dst has ST_QUOTE bytes. */
enum { ST_QUOTE = 72 };
const char *st__quote(char dst[ST_QUOTE], const char *name);
/* "[d0,d1,...]" into dst[ST_SHAPE]. */
enum { ST_SHAPE = 96 };
const char *st__fmt_shape(char dst[ST_SHAPE], size_t ndim, const size_t *shape);
int st__host_is_little_endian(void);
int st__dtype_valid(st_dtype dtype);
/* "F32" … into *out; 0, or -1 for a name that is no st_dtype. */
int st__dtype_parse(const char *s, st_dtype *out);
/* The bytes of a tensor (product of shape, times elem), refused past limit (st.c). */
int st__tensor_bytes(size_t ndim, const uint64_t *shape, uint64_t elem, uint64_t limit,
                     uint64_t *bytes);
/* Length of the valid UTF-8 sequence at s[0..n), n >= 1, or 0 if it is not one. */
size_t st__utf8_seq(const unsigned char *s, size_t n);
/* 1 when str is valid UTF-8 with no NUL. */
int st__utf8_valid(const char *str);
/* A name that appears twice among names[n] (sorted in place), or NULL. */
const char *st__find_duplicate(const char **names, size_t n);

/* ---- the header (st_header.c) ---- */

/* Parse and validate header h[header_len] into f (entries, metadata, tiling of the data
 * section of f->data_size bytes). MHA_OK or an error status with err set. */
int st__parse_header(st_file *f, const unsigned char *h, size_t header_len, char *err,
                     size_t errlen);
/* Point every entry at its bytes in f->data (an aligned copy when misaligned). */
int st__attach_data(st_file *f, char *err, size_t errlen);

#endif /* TRAIN_ST_INTERNAL_H */
