/*
 * st_internal.h — what the safetensors reader and writer (st_read.c, st_header.c,
 * st_write.c, st_convert.c) share and nothing else includes: the limits, the parsed file,
 * and the small helpers of st_read.c. Never installed; internal names carry mha__st_.
 */
#ifndef MHA_ST_INTERNAL_H
#define MHA_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "mha.h"
#include "mha_safetensors.h"

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
    mha_st_dtype dtype;
    size_t ndim;
    size_t shape[MHA_ST_MAX_NDIM];   /* shape[ndim..) = 0                               */
    uint64_t begin, end;         /* byte range within the data section              */
    const void *data;            /* into the file buffer, or = copy                 */
    void *copy;                  /* owned aligned copy for a misaligned tensor      */
} st_entry;

struct mha_st_file {
    unsigned char *alloc;        /* owned [data_size]: the data section (malloc's
                                    alignment), read only after the header is valid */
    const unsigned char *data;   /* [data_size] = alloc                             */
    size_t data_size;
    cJSON *root;                 /* owned parsed header; names and metadata borrow  */
    const cJSON *meta;           /* the "__metadata__" object or NULL               */
    st_entry *t;                 /* [n] owned, in header order                      */
    size_t n;
};

/* ---- helpers (st_read.c) ---- */

/* Format a one-line message into err[errlen] (nothing when err is NULL). */
void mha__st_set_err(char *err, size_t errlen, const char *fmt, ...) ST_PRINTF(3, 4);
/* errno text without strerror's static buffer. */
const char *mha__st_errno_text(int e, char *buf, size_t len);
/* A name in quotes for a message, control characters escaped, cut to 64 bytes with
 * "...". dst has ST_QUOTE bytes. */
enum { ST_QUOTE = 72 };
const char *mha__st_quote(char dst[ST_QUOTE], const char *name);
/* "[d0,d1,...]" into dst[ST_SHAPE]. */
enum { ST_SHAPE = 96 };
const char *mha__st_fmt_shape(char dst[ST_SHAPE], size_t ndim, const size_t *shape);
int mha__st_host_is_little_endian(void);
int mha__st_dtype_valid(mha_st_dtype dtype);
/* "F32" … into *out; 1, or 0 for a name that is no mha_st_dtype. */
int mha__st_dtype_parse(const char *s, mha_st_dtype *out);
/* The bytes of a tensor (product of shape, times elem), refused past limit (st_read.c). */
int mha__st_tensor_bytes(size_t ndim, const uint64_t *shape, uint64_t elem, uint64_t limit,
                         uint64_t *bytes);
/* Length of the valid UTF-8 sequence at s[0..n), n >= 1, or 0 if it is not one. */
size_t mha__st_utf8_seq(const unsigned char *s, size_t n);
/* 1 when str is valid UTF-8 with no NUL. */
int mha__st_utf8_valid(const char *str);
/* A name that appears twice among names[n] (sorted in place), or NULL. */
const char *mha__st_find_duplicate(const char **names, size_t n);

/* The entry of tensor `name`, or NULL with "no tensor 'name' in the file" in err. */
const st_entry *mha__st_find(const mha_st_file *f, const char *name, char *err, size_t errlen);
/* The entry of tensor `name` for the getter `caller`: MHA_EINVAL for a NULL f or name,
 * ndim > MHA_ST_MAX_NDIM, a NULL shape with ndim > 0 or `bad` (the caller's own invalid
 * argument, named by `what`, e.g. "bad dtype, "), MHA_ENOTFOUND; the message in err. */
int mha__st_lookup(const mha_st_file *f, const char *name, size_t ndim, const size_t *shape,
                   const char *caller, int bad, const char *what, char *err, size_t errlen,
                   const st_entry **e);
/* 1 when entry e has shape shape[ndim]. */
int mha__st_same_shape(const st_entry *e, size_t ndim, const size_t *shape);

/* ---- the header (st_header.c) ---- */

/* Parse and validate header h[header_len] into f (entries, metadata, tiling of the data
 * section of f->data_size bytes). MHA_OK or an error status with err set. */
int mha__st_parse_header(mha_st_file *f, const unsigned char *h, size_t header_len, char *err,
                         size_t errlen);
/* Point every entry at its bytes in f->data (an aligned copy when misaligned). */
int mha__st_attach_data(mha_st_file *f, char *err, size_t errlen);

#endif /* MHA_ST_INTERNAL_H */
