/*
 * st.c — safetensors reader and writer; the format and the contract are in st.h.
 *
 * Reading treats the file as hostile: every number is checked before it is used, the
 * header bytes are lexed here (UTF-8, allowed characters, "\u0000", where the JSON value
 * ends) before cJSON builds the tree, and the tensors' byte ranges must tile the data
 * section. Writing builds the header by hand (cJSON prints large integers in exponent
 * form, which safetensors readers refuse) and replaces the target file atomically.
 */
#include "st.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* The reference reader (huggingface/safetensors, MAX_HEADER_SIZE) refuses larger headers. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* Integers the header may hold: below 2^53, so that readers that parse JSON numbers as
 * doubles (Python's json does not, JavaScript does) see them exactly. */
#define ST_MAX_JSON_INT ((uint64_t)1 << 53)
#define ST_METADATA_KEY "__metadata__"

/* ---- small helpers ----------------------------------------------------------------- */

#if defined(__GNUC__)
#define ST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ST_PRINTF(f, a)
#endif

static void set_err(char *err, size_t errlen, const char *fmt, ...) ST_PRINTF(3, 4);
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* errno text without strerror's static buffer. */
static const char *errno_text(int e, char *buf, size_t len)
{
    if (strerror_r(e, buf, len) != 0)
        snprintf(buf, len, "errno %d", e);
    return buf;
}

/* A name made printable for a one-line message: control bytes become '?', long names are
 * cut to 64 bytes with "...". dst has ST_QUOTE bytes. */
enum { ST_QUOTE = 72 };
static const char *quote(char dst[ST_QUOTE], const char *name)
{
    size_t i = 0;
    for (; name[i] != '\0' && i < 64; i++) {
        unsigned char c = (unsigned char)name[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (name[i] != '\0') {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
    return dst;
}

/* "[d0,d1,...]" into dst[ST_SHAPE] (4 dims × 20 digits + separators fit). */
enum { ST_SHAPE = 96 };
static const char *fmt_shape(char dst[ST_SHAPE], size_t ndim, const size_t *shape)
{
    size_t len = 0;
    dst[len++] = '[';
    for (size_t d = 0; d < ndim && d < ST_MAX_NDIM; d++)
        len += (size_t)snprintf(dst + len, ST_SHAPE - len, d ? ",%zu" : "%zu", shape[d]);
    snprintf(dst + len, ST_SHAPE - len, "]");
    return dst;
}

static int host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static const char *const dtype_names[] = {"F32", "F64", "I64", "U64", "U8"};
static const size_t dtype_sizes[] = {4, 8, 8, 8, 1};
enum { ST_NUM_DTYPES = (int)(sizeof dtype_sizes / sizeof dtype_sizes[0]) };

static int dtype_valid(st_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < ST_NUM_DTYPES;
}

const char *st_dtype_name(st_dtype dtype)
{
    return dtype_valid(dtype) ? dtype_names[dtype] : NULL;
}

size_t st_dtype_size(st_dtype dtype)
{
    return dtype_valid(dtype) ? dtype_sizes[dtype] : 0;
}

static int dtype_parse(const char *s, st_dtype *out)
{
    for (int k = 0; k < ST_NUM_DTYPES; k++) {
        if (strcmp(s, dtype_names[k]) == 0) {
            *out = (st_dtype)k;
            return 1;
        }
    }
    return 0;
}

/* bytes = product(shape[0..ndim)) · elem, 0 if any dimension is 0 (an empty tensor, even
 * when the other dimensions' product would overflow). Returns 0, or -1 if the product
 * exceeds `limit`. */
static int tensor_bytes(size_t ndim, const uint64_t *shape, uint64_t elem, uint64_t limit,
                        uint64_t *bytes)
{
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            *bytes = 0;
            return 0;
        }
    }
    uint64_t p = elem;
    for (size_t d = 0; d < ndim; d++) {
        if (p > limit / shape[d])
            return -1;
        p *= shape[d];
    }
    if (p > limit)
        return -1;
    *bytes = p;
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), n >= 1, or 0 if it is not one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return len;
}

static int utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice in names[0..n) (sorted in place), or NULL. */
static const char *find_duplicate(const char **names, size_t n)
{
    if (n < 2)
        return NULL;
    qsort(names, n, sizeof *names, cmp_cstr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

/* ---- reading --------------------------------------------------------------------- */

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

static uint64_t load_le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | b[k];
    return v;
}

/* Read exactly len bytes at offset off. 0 on success, -1 with errno set on a read error,
 * 1 if the file ended first. */
static int pread_full(int fd, unsigned char *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t r = pread(fd, buf, len, off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return 1;
        buf += r;
        len -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Checks of the header bytes h[0..n) that cJSON does not make (it accepts any byte
 * <= 0x20 as whitespace, raw control characters and invalid UTF-8 in strings, decodes
 * "\u0000" into a string it then cuts, and does not say where the value ends), and finds
 * the end of the top-level object: *json_len = one past its closing '}'.
 * Outside strings only {}[]:,-, digits and JSON whitespace are allowed (no true, false,
 * null, fractions or exponents: the header holds objects, arrays, strings and integers);
 * after the object only JSON whitespace (the format pads with spaces). */
static int scan_header(const unsigned char *h, size_t n, size_t *json_len, char *err,
                       size_t errlen)
{
    if (n == 0 || h[0] != '{') {
        set_err(err, errlen, "header does not start with '{'");
        return MHA_EFORMAT;
    }
    size_t depth = 0, i = 0;
    int in_str = 0;
    while (i < n) {
        unsigned char c = h[i];
        if (c >= 0x80) {
            size_t k = in_str ? utf8_seq(h + i, n - i) : 0;
            if (k == 0) {
                set_err(err, errlen, "header byte %zu: %s", i,
                        in_str ? "invalid UTF-8" : "non-ASCII byte outside a string");
                return MHA_EFORMAT;
            }
            i += k;
            continue;
        }
        if (in_str) {
            if (c == '"') {
                in_str = 0;
            } else if (c == '\\') {
                unsigned char e = i + 1 < n ? h[i + 1] : 0;
                if (e == 'u') {
                    unsigned v = 0;
                    for (size_t k = 2; k < 6; k++) {
                        unsigned char x = i + k < n ? h[i + k] : 0;
                        unsigned dig = (x >= '0' && x <= '9')   ? (unsigned)(x - '0')
                                       : (x >= 'a' && x <= 'f') ? (unsigned)(x - 'a' + 10)
                                       : (x >= 'A' && x <= 'F') ? (unsigned)(x - 'A' + 10)
                                                                : 16u;
                        if (dig == 16u) {
                            set_err(err, errlen, "header byte %zu: bad \\u escape", i);
                            return MHA_EFORMAT;
                        }
                        v = v * 16u + dig;
                    }
                    if (v == 0) {
                        set_err(err, errlen, "header byte %zu: \\u0000 (NUL) in a string", i);
                        return MHA_EFORMAT;
                    }
                    i += 6;
                    continue;
                }
                if (e == 0 || strchr("\"\\/bfnrt", e) == NULL) {
                    set_err(err, errlen, "header byte %zu: bad escape in a string", i);
                    return MHA_EFORMAT;
                }
                i += 2;
                continue;
            } else if (c < 0x20) {
                set_err(err, errlen, "header byte %zu: control character 0x%02x in a string", i,
                        c);
                return MHA_EFORMAT;
            }
            i++;
            continue;
        }
        switch (c) {
        case '"':
            in_str = 1;
            break;
        case '{':
        case '[':
            depth++;
            break;
        case '}':
        case ']':
            depth--; /* depth >= 1 here: the scan stops when it returns to 0 */
            if (depth == 0) {
                *json_len = i + 1;
                for (size_t j = i + 1; j < n; j++) {
                    if (h[j] != ' ' && h[j] != '\t' && h[j] != '\n' && h[j] != '\r') {
                        set_err(err, errlen,
                                "header byte %zu: 0x%02x after the JSON object (only space "
                                "padding may follow it)",
                                j, h[j]);
                        return MHA_EFORMAT;
                    }
                }
                return MHA_OK;
            }
            break;
        case '0':
            if (i + 1 < n && h[i + 1] >= '0' && h[i + 1] <= '9' &&
                !(h[i - 1] >= '0' && h[i - 1] <= '9')) { /* i >= 1: h[0] is '{' */
                set_err(err, errlen, "header byte %zu: integer with a leading zero", i);
                return MHA_EFORMAT;
            }
            break;
        case ':': case ',': case '-': case ' ': case '\t': case '\n': case '\r':
        case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
        case '9':
            break;
        default:
            if (c >= 0x20 && c < 0x7f)
                set_err(err, errlen,
                        "header byte %zu: unexpected '%c' (the header holds only objects, "
                        "arrays, strings and integers)",
                        i, c);
            else
                set_err(err, errlen, "header byte %zu: unexpected byte 0x%02x", i, c);
            return MHA_EFORMAT;
        }
        i++;
    }
    set_err(err, errlen, "header: %s", in_str ? "unterminated string" : "the JSON object is not closed");
    return MHA_EFORMAT;
}

/* A JSON integer in [0, 2^53) → *v. The scan already refused fractions and exponents;
 * the range check refuses negatives and values a double cannot hold exactly. */
static int json_uint(const cJSON *item, uint64_t *v)
{
    if (!cJSON_IsNumber(item))
        return 0;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d < (double)ST_MAX_JSON_INT))
        return 0;
    uint64_t u = (uint64_t)d;
    if ((double)u != d)
        return 0;
    *v = u;
    return 1;
}

/* One tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]} → *e
 * (name, dtype, shape, begin, end; data is set later). */
static int parse_entry(const cJSON *item, st_entry *e, char *err, size_t errlen)
{
    char q[ST_QUOTE], sh[ST_SHAPE];
    const cJSON *jdtype = NULL, *jshape = NULL, *joff = NULL, *c;
    quote(q, item->string);
    if (!cJSON_IsObject(item)) {
        set_err(err, errlen, "tensor '%s': entry is not an object", q);
        return MHA_EFORMAT;
    }
    cJSON_ArrayForEach(c, item) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &jdtype
                             : strcmp(c->string, "shape") == 0        ? &jshape
                             : strcmp(c->string, "data_offsets") == 0 ? &joff
                                                                      : NULL;
        char kq[ST_QUOTE];
        if (slot == NULL) {
            set_err(err, errlen, "tensor '%s': unknown key '%s'", q, quote(kq, c->string));
            return MHA_EFORMAT;
        }
        if (*slot != NULL) {
            set_err(err, errlen, "tensor '%s': key '%s' appears twice", q, c->string);
            return MHA_EFORMAT;
        }
        *slot = c;
    }
    if (jdtype == NULL || jshape == NULL || joff == NULL) {
        set_err(err, errlen, "tensor '%s': no '%s'", q,
                jdtype == NULL ? "dtype" : jshape == NULL ? "shape" : "data_offsets");
        return MHA_EFORMAT;
    }
    if (!cJSON_IsString(jdtype) || !dtype_parse(jdtype->valuestring, &e->dtype)) {
        char dq[ST_QUOTE];
        set_err(err, errlen, "tensor '%s': dtype %s%s%s not supported (F32, F64, I64, U64, U8)",
                q, cJSON_IsString(jdtype) ? "'" : "",
                cJSON_IsString(jdtype) ? quote(dq, jdtype->valuestring) : "(not a string)",
                cJSON_IsString(jdtype) ? "'" : "");
        return MHA_EFORMAT;
    }
    if (!cJSON_IsArray(jshape)) {
        set_err(err, errlen, "tensor '%s': shape is not an array", q);
        return MHA_EFORMAT;
    }
    uint64_t dims[ST_MAX_NDIM];
    size_t nd = 0;
    cJSON_ArrayForEach(c, jshape) {
        if (nd == ST_MAX_NDIM) {
            set_err(err, errlen, "tensor '%s': shape has more than %d dimensions", q,
                    ST_MAX_NDIM);
            return MHA_EFORMAT;
        }
        if (!json_uint(c, &dims[nd]) || dims[nd] > SIZE_MAX) {
            set_err(err, errlen, "tensor '%s': shape[%zu] is not an integer in [0, 2^53)", q,
                    nd);
            return MHA_EFORMAT;
        }
        nd++;
    }
    e->ndim = nd;
    for (size_t d = 0; d < ST_MAX_NDIM; d++)
        e->shape[d] = d < nd ? (size_t)dims[d] : 0;
    fmt_shape(sh, e->ndim, e->shape);

    uint64_t off[2];
    size_t noff = 0;
    int off_ok = cJSON_IsArray(joff);
    if (off_ok) {
        cJSON_ArrayForEach(c, joff) {
            if (noff == 2 || !json_uint(c, &off[noff])) {
                off_ok = 0;
                break;
            }
            noff++;
        }
    }
    if (!off_ok || noff != 2) {
        set_err(err, errlen, "tensor '%s': data_offsets is not [begin, end] with integers in "
                "[0, 2^53)", q);
        return MHA_EFORMAT;
    }
    if (off[0] > off[1]) {
        set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before "
                "they begin", q, off[0], off[1]);
        return MHA_EFORMAT;
    }
    uint64_t need;
    if (tensor_bytes(nd, dims, dtype_sizes[e->dtype], UINT64_MAX, &need) != 0) {
        set_err(err, errlen, "tensor '%s': %s %s is too large (its byte count overflows)", q,
                dtype_names[e->dtype], sh);
        return MHA_EFORMAT;
    }
    if (off[1] - off[0] != need) {
        set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                " bytes but %s %s needs %" PRIu64, q, off[0], off[1], off[1] - off[0],
                dtype_names[e->dtype], sh, need);
        return MHA_EFORMAT;
    }
    e->name = item->string;
    e->begin = off[0];
    e->end = off[1];
    return MHA_OK;
}

static int cmp_entry_range(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The entries' ranges, sorted, must tile [0, data_size): each begins where the previous
 * one ended, the last ends at data_size. */
static int check_tiling(st_entry *t, size_t n, size_t data_size, char *err, size_t errlen)
{
    st_entry **order = malloc((n ? n : 1) * sizeof *order);
    char q[ST_QUOTE], q2[ST_QUOTE];
    int rc = MHA_OK;
    if (order == NULL) {
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &t[i];
    qsort(order, n, sizeof *order, cmp_entry_range);
    uint64_t pos = 0;
    const st_entry *prev = NULL;
    for (size_t i = 0; i < n && rc == MHA_OK; i++) {
        const st_entry *e = order[i];
        if (e->begin < pos) {
            set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap "
                    "tensor '%s' [%" PRIu64 ", %" PRIu64 "]", quote(q, e->name), e->begin,
                    e->end, quote(q2, prev->name), prev->begin, prev->end);
            rc = MHA_EFORMAT;
        } else if (e->begin > pos) {
            set_err(err, errlen, "data section: bytes [%" PRIu64 ", %" PRIu64 ") before tensor "
                    "'%s' belong to no tensor", pos, e->begin, quote(q, e->name));
            rc = MHA_EFORMAT;
        } else if (e->end > data_size) {
            set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past "
                    "the end of the %zu-byte data section (truncated file?)", quote(q, e->name),
                    e->begin, e->end, data_size);
            rc = MHA_EFORMAT;
        }
        pos = e->end;
        prev = e;
    }
    if (rc == MHA_OK && pos != data_size) {
        set_err(err, errlen, "data section: %" PRIu64 " bytes after the last tensor belong to "
                "no tensor", (uint64_t)data_size - pos);
        rc = MHA_EFORMAT;
    }
    free(order);
    return rc;
}

/* Validate the header h[0..header_len) against a data section of f->data_size bytes (the
 * file's size less 8 + header_len) and fill in f->root, f->meta, f->t, f->n; the data
 * section itself is not read yet (attach_data). */
static int parse_header(st_file *f, const unsigned char *h, size_t header_len, char *err,
                        size_t errlen)
{
    size_t json_len = 0;
    int rc = scan_header(h, header_len, &json_len, err, errlen);
    if (rc != MHA_OK)
        return rc;
    const char *end = NULL;
    f->root = cJSON_ParseWithLengthOpts((const char *)h, json_len, &end, 0);
    if (f->root == NULL || !cJSON_IsObject(f->root) || end != (const char *)h + json_len) {
        size_t at = (end != NULL && end >= (const char *)h && end <= (const char *)h + json_len)
                        ? (size_t)(end - (const char *)h)
                        : 0;
        set_err(err, errlen, "header is not a valid JSON object (error near header byte %zu)",
                at);
        return MHA_EFORMAT;
    }

    /* Keys unique at the top level; count the tensors. */
    size_t nkeys = 0, ntensors = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, f->root) {
        nkeys++;
        if (strcmp(c->string, ST_METADATA_KEY) != 0)
            ntensors++;
    }
    const char **names = malloc((nkeys ? nkeys : 1) * sizeof *names);
    f->t = calloc(ntensors ? ntensors : 1, sizeof *f->t);
    if (names == NULL || f->t == NULL) {
        free(names);
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    size_t k = 0;
    cJSON_ArrayForEach(c, f->root)
        names[k++] = c->string;
    const char *dup = find_duplicate(names, nkeys);
    free(names);
    if (dup != NULL) {
        char q[ST_QUOTE];
        set_err(err, errlen, "header: key '%s' appears twice", quote(q, dup));
        return MHA_EFORMAT;
    }

    /* Metadata: an object of strings with unique keys. */
    f->meta = cJSON_GetObjectItemCaseSensitive(f->root, ST_METADATA_KEY);
    if (f->meta != NULL) {
        if (!cJSON_IsObject(f->meta)) {
            set_err(err, errlen, "__metadata__ is not an object");
            return MHA_EFORMAT;
        }
        size_t nmeta = 0;
        cJSON_ArrayForEach(c, f->meta) {
            char q[ST_QUOTE];
            if (!cJSON_IsString(c)) {
                set_err(err, errlen, "__metadata__: value of '%s' is not a string",
                        quote(q, c->string));
                return MHA_EFORMAT;
            }
            nmeta++;
        }
        const char **keys = malloc((nmeta ? nmeta : 1) * sizeof *keys);
        if (keys == NULL) {
            set_err(err, errlen, "out of memory");
            return MHA_ENOMEM;
        }
        k = 0;
        cJSON_ArrayForEach(c, f->meta)
            keys[k++] = c->string;
        dup = find_duplicate(keys, nmeta);
        free(keys);
        if (dup != NULL) {
            char q[ST_QUOTE];
            set_err(err, errlen, "__metadata__: key '%s' appears twice", quote(q, dup));
            return MHA_EFORMAT;
        }
    }

    /* Tensor entries, in header order. */
    k = 0;
    cJSON_ArrayForEach(c, f->root) {
        if (strcmp(c->string, ST_METADATA_KEY) == 0)
            continue;
        rc = parse_entry(c, &f->t[k], err, errlen);
        if (rc != MHA_OK)
            return rc;
        k++;
    }
    f->n = ntensors;

    return check_tiling(f->t, f->n, f->data_size, err, errlen);
}

/* Point the entries of a parsed header into f->data (read by now). */
static int attach_data(st_file *f, char *err, size_t errlen)
{
    /* Data pointers; a tensor at an offset that is not a multiple of its element size is
     * copied to its own allocation (malloc's alignment covers every dtype). */
    for (size_t i = 0; i < f->n; i++) {
        st_entry *e = &f->t[i];
        size_t nbytes = (size_t)(e->end - e->begin);
        if (nbytes == 0) {
            e->data = f->data; /* aligned, never read */
        } else if (e->begin % dtype_sizes[e->dtype] == 0) {
            e->data = f->data + e->begin;
        } else {
            e->copy = malloc(nbytes);
            if (e->copy == NULL) {
                set_err(err, errlen, "out of memory");
                return MHA_ENOMEM;
            }
            memcpy(e->copy, f->data + e->begin, nbytes);
            e->data = e->copy;
        }
    }
    return MHA_OK;
}

int st_load(const char *path, st_file **out, char *err, size_t errlen)
{
    char eb[128];
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL) {
        set_err(err, errlen, "st_load: path and out must not be NULL");
        return MHA_EINVAL;
    }
    if (!host_is_little_endian()) {
        set_err(err, errlen, "st_load: big-endian hosts are not supported");
        return MHA_EINVAL;
    }
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; it is refused
     * as not a regular file below (regular files ignore the flag) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_err(err, errlen, "cannot open '%s': %s", path, errno_text(errno, eb, sizeof eb));
        return MHA_EIO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        set_err(err, errlen, "cannot stat '%s': %s", path, errno_text(errno, eb, sizeof eb));
        close(fd);
        return MHA_EIO;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        set_err(err, errlen, "cannot read '%s': not a regular file", path);
        return MHA_EIO;
    }
    if (sb.st_size < 8) {
        close(fd);
        set_err(err, errlen, "'%s' is %jd bytes, shorter than the 8-byte header size field",
                path, (intmax_t)sb.st_size);
        return MHA_EFORMAT;
    }
    if ((uintmax_t)sb.st_size > SIZE_MAX - 8) {
        close(fd);
        set_err(err, errlen, "'%s' is too large to hold in memory", path);
        return MHA_EOVERFLOW;
    }
    size_t size = (size_t)sb.st_size;

    /* 1. the size field and the header, checked against the file's size: a malformed file
     *    is refused after reading at most 8 + ST_MAX_HEADER bytes, however large it is */
    unsigned char head[8];
    int r = pread_full(fd, head, 8, 0);
    if (r != 0) {
        set_err(err, errlen, "cannot read '%s': %s", path,
                r < 0 ? errno_text(errno, eb, sizeof eb) : "file shrank while being read");
        close(fd);
        return MHA_EIO;
    }
    uint64_t n_header = load_le64(head);
    if (n_header > ST_MAX_HEADER) {
        close(fd);
        set_err(err, errlen, "header size %" PRIu64 " exceeds the limit of %" PRIu64 " bytes",
                n_header, ST_MAX_HEADER);
        return MHA_EFORMAT;
    }
    if (n_header > size - 8) {
        close(fd);
        set_err(err, errlen, "header size %" PRIu64 " but only %zu bytes follow the size field "
                "(truncated file?)", n_header, size - 8);
        return MHA_EFORMAT;
    }
    st_file *f = calloc(1, sizeof *f);
    unsigned char *hbuf = malloc((size_t)n_header + 1);
    if (f == NULL || hbuf == NULL) {
        close(fd);
        free(f);
        free(hbuf);
        set_err(err, errlen, "out of memory for the %" PRIu64 "-byte header", n_header);
        return MHA_ENOMEM;
    }
    r = pread_full(fd, hbuf, (size_t)n_header, 8);
    if (r != 0) {
        set_err(err, errlen, "cannot read '%s': %s", path,
                r < 0 ? errno_text(errno, eb, sizeof eb) : "file shrank while being read");
        close(fd);
        free(f);
        free(hbuf);
        return MHA_EIO;
    }
    f->data_size = size - 8 - (size_t)n_header;
    int rc = parse_header(f, hbuf, (size_t)n_header, err, errlen);
    free(hbuf); /* cJSON copied every string it keeps */
    if (rc != MHA_OK) {
        close(fd);
        st_free(f);
        return rc;
    }
    /* 2. the data section, whose size the header's tensors account for exactly */
    f->alloc = malloc(f->data_size ? f->data_size : 1);
    if (f->alloc == NULL) {
        close(fd);
        st_free(f);
        set_err(err, errlen, "out of memory for the %zu-byte data section", f->data_size);
        return MHA_ENOMEM;
    }
    r = pread_full(fd, f->alloc, f->data_size, (off_t)(8 + n_header));
    close(fd);
    if (r != 0) {
        set_err(err, errlen, "cannot read '%s': %s", path,
                r < 0 ? errno_text(errno, eb, sizeof eb) : "file shrank while being read");
        st_free(f);
        return MHA_EIO;
    }
    f->data = f->alloc;
    rc = attach_data(f, err, errlen);
    if (rc != MHA_OK) {
        st_free(f);
        return rc;
    }
    *out = f;
    return MHA_OK;
}

void st_free(st_file *f)
{
    if (f == NULL)
        return;
    if (f->t != NULL)
        for (size_t i = 0; i < f->n; i++)
            free(f->t[i].copy);
    free(f->t);
    cJSON_Delete(f->root);
    free(f->alloc);
    free(f);
}

static const st_entry *find_entry(const st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

int st_get(const st_file *f, const char *name, st_dtype dtype, size_t ndim, const size_t *shape,
           const void **data, char *err, size_t errlen)
{
    char q[ST_QUOTE], have[ST_SHAPE], want[ST_SHAPE];
    if (f == NULL || name == NULL || ndim > ST_MAX_NDIM || !dtype_valid(dtype) ||
        (ndim > 0 && shape == NULL)) {
        set_err(err, errlen, "st_get: invalid argument (NULL file or name, bad dtype, ndim > %d "
                "or NULL shape)", ST_MAX_NDIM);
        return MHA_EINVAL;
    }
    const st_entry *e = find_entry(f, name);
    if (e == NULL) {
        set_err(err, errlen, "no tensor '%s' in the file", quote(q, name));
        return MHA_ENOTFOUND;
    }
    int same_shape = e->ndim == ndim;
    for (size_t d = 0; same_shape && d < ndim; d++)
        same_shape = e->shape[d] == shape[d];
    if (e->dtype != dtype || !same_shape) {
        set_err(err, errlen, "tensor '%s': the file has %s %s, expected %s %s", quote(q, name),
                dtype_names[e->dtype], fmt_shape(have, e->ndim, e->shape), dtype_names[dtype],
                fmt_shape(want, ndim, shape));
        return e->dtype != dtype ? MHA_EFORMAT : MHA_ESHAPE;
    }
    if (data != NULL)
        *data = e->data;
    return MHA_OK;
}

const char *st_meta(const st_file *f, const char *key)
{
    if (f == NULL || key == NULL || f->meta == NULL)
        return NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, f->meta)
        if (strcmp(c->string, key) == 0)
            return c->valuestring;
    return NULL;
}

size_t st_meta_count(const st_file *f)
{
    return (f == NULL || f->meta == NULL) ? 0 : (size_t)cJSON_GetArraySize(f->meta);
}

int st_meta_at(const st_file *f, size_t i, const char **key, const char **value)
{
    if (f == NULL || key == NULL || value == NULL || f->meta == NULL)
        return MHA_EINVAL;
    const cJSON *c;
    size_t k = 0;
    cJSON_ArrayForEach(c, f->meta) {
        if (k++ == i) {
            *key = c->string;
            *value = c->valuestring;
            return MHA_OK;
        }
    }
    return MHA_EINVAL;
}

size_t st_count(const st_file *f)
{
    return f == NULL ? 0 : f->n;
}

const char *st_name(const st_file *f, size_t i)
{
    return (f == NULL || i >= f->n) ? NULL : f->t[i].name;
}

int st_tensor_at(const st_file *f, size_t i, st_tensor *out)
{
    if (f == NULL || out == NULL || i >= f->n)
        return MHA_EINVAL;
    const st_entry *e = &f->t[i];
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof out->shape);
    out->data = e->data;
    return MHA_OK;
}

/* ---- writing --------------------------------------------------------------------- */

/* A growing NUL-terminated byte string; after an allocation failure every append is a
 * no-op and failed is set. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (n > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char tmp[24];
    int len = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    sb_put(b, tmp, (size_t)len);
}

/* s (valid UTF-8) as a JSON string literal: '"' and '\' escaped, control bytes as \u00XX,
 * everything else verbatim. */
static void sb_json_string(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* Element sizes in the order the data section is laid out (largest first keeps every
 * tensor aligned to its element size when the section starts 8-aligned). */
static const size_t layout_sizes[] = {8, 4, 2, 1};
enum { ST_NUM_LAYOUT = (int)(sizeof layout_sizes / sizeof layout_sizes[0]) };

/* Check the arguments of st_save; byte counts → nbytes[n]. */
static int validate_save(const st_tensor *t, size_t n, const char *const *mk,
                         const char *const *mv, size_t n_meta, uint64_t *nbytes, char *err,
                         size_t errlen)
{
    char q[ST_QUOTE], sh[ST_SHAPE];
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].name == NULL) {
            set_err(err, errlen, "tensor %zu: name is NULL", i);
            return MHA_EINVAL;
        }
        quote(q, t[i].name);
        if (!utf8_valid(t[i].name) || strcmp(t[i].name, ST_METADATA_KEY) == 0) {
            set_err(err, errlen, "tensor '%s': name is not valid UTF-8 or is the reserved "
                    "'" ST_METADATA_KEY "'", q);
            return MHA_EINVAL;
        }
        if (!dtype_valid(t[i].dtype) || t[i].ndim > ST_MAX_NDIM) {
            set_err(err, errlen, "tensor '%s': dtype %d unknown or ndim %zu > %d", q,
                    (int)t[i].dtype, t[i].ndim, ST_MAX_NDIM);
            return MHA_EINVAL;
        }
        uint64_t dims[ST_MAX_NDIM];
        int dims_ok = 1;
        for (size_t d = 0; d < t[i].ndim; d++) {
            dims[d] = t[i].shape[d];
            dims_ok = dims_ok && dims[d] < ST_MAX_JSON_INT;
        }
        if (!dims_ok ||
            tensor_bytes(t[i].ndim, dims, dtype_sizes[t[i].dtype], ST_MAX_JSON_INT - 1,
                         &nbytes[i]) != 0 ||
            nbytes[i] > SIZE_MAX || nbytes[i] > ST_MAX_JSON_INT - 1 - total) {
            set_err(err, errlen, "tensor '%s': %s %s: byte count overflows (limit 2^53)", q,
                    dtype_names[t[i].dtype], fmt_shape(sh, t[i].ndim, t[i].shape));
            return MHA_EOVERFLOW;
        }
        total += nbytes[i];
        if (nbytes[i] > 0 && t[i].data == NULL) {
            set_err(err, errlen, "tensor '%s': data is NULL", q);
            return MHA_EINVAL;
        }
    }
    for (size_t i = 0; i < n_meta; i++) {
        if (mk[i] == NULL || mv[i] == NULL || !utf8_valid(mk[i]) || !utf8_valid(mv[i])) {
            set_err(err, errlen, "metadata %zu: key or value is NULL or not valid UTF-8", i);
            return MHA_EINVAL;
        }
    }
    /* Unique names, unique metadata keys. */
    size_t most = n > n_meta ? n : n_meta;
    const char **names = malloc((most ? most : 1) * sizeof *names);
    if (names == NULL) {
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = t[i].name;
    const char *dup = find_duplicate(names, n);
    if (dup != NULL) {
        set_err(err, errlen, "tensor name '%s' appears twice", quote(q, dup));
        free(names);
        return MHA_EINVAL;
    }
    for (size_t i = 0; i < n_meta; i++)
        names[i] = mk[i];
    dup = find_duplicate(names, n_meta);
    free(names);
    if (dup != NULL) {
        set_err(err, errlen, "metadata key '%s' appears twice", quote(q, dup));
        return MHA_EINVAL;
    }
    return MHA_OK;
}

/* The header text, padded with spaces to a multiple of 8 bytes; begin[i] = offset of
 * tensor i in the data section (largest element size first, caller order within). */
static int build_header(const st_tensor *t, size_t n, const char *const *mk,
                        const char *const *mv, size_t n_meta, const uint64_t *nbytes,
                        uint64_t *begin, sbuf *hb)
{
    uint64_t pos = 0;
    for (int s = 0; s < ST_NUM_LAYOUT; s++) {
        for (size_t i = 0; i < n; i++) {
            if (dtype_sizes[t[i].dtype] == layout_sizes[s]) {
                begin[i] = pos;
                pos += nbytes[i];
            }
        }
    }
    sb_str(hb, "{");
    if (n_meta > 0) {
        sb_str(hb, "\"" ST_METADATA_KEY "\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i > 0)
                sb_str(hb, ",");
            sb_json_string(hb, mk[i]);
            sb_str(hb, ":");
            sb_json_string(hb, mv[i]);
        }
        sb_str(hb, "}");
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0 || n_meta > 0)
            sb_str(hb, ",");
        sb_json_string(hb, t[i].name);
        sb_str(hb, ":{\"dtype\":\"");
        sb_str(hb, dtype_names[t[i].dtype]);
        sb_str(hb, "\",\"shape\":[");
        for (size_t d = 0; d < t[i].ndim; d++) {
            if (d > 0)
                sb_str(hb, ",");
            sb_u64(hb, t[i].shape[d]);
        }
        sb_str(hb, "],\"data_offsets\":[");
        sb_u64(hb, begin[i]);
        sb_str(hb, ",");
        sb_u64(hb, begin[i] + nbytes[i]);
        sb_str(hb, "]}");
    }
    sb_str(hb, "}");
    while (!hb->failed && hb->len % 8 != 0)
        sb_str(hb, " ");
    return hb->failed ? MHA_ENOMEM : MHA_OK;
}

/* Write the whole file to the open stream. 0, or -1 with errno set. */
static int write_all(FILE *fp, const sbuf *hb, const st_tensor *t, size_t n,
                     const uint64_t *nbytes)
{
    unsigned char size_field[8];
    uint64_t len = hb->len;
    for (int k = 0; k < 8; k++)
        size_field[k] = (unsigned char)(len >> (8 * k));
    errno = 0;
    if (fwrite(size_field, 1, 8, fp) != 8 || fwrite(hb->p, 1, hb->len, fp) != hb->len)
        return -1;
    for (int s = 0; s < ST_NUM_LAYOUT; s++)
        for (size_t i = 0; i < n; i++)
            if (dtype_sizes[t[i].dtype] == layout_sizes[s] && nbytes[i] > 0 &&
                fwrite(t[i].data, 1, (size_t)nbytes[i], fp) != (size_t)nbytes[i])
                return -1;
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0)
        return -1;
    return 0;
}

/* fsync the directory that holds `path` (so that the rename is durable); its name goes
 * to dir[strlen(path) + 2]. 0, or -1 with errno set. */
static int fsync_parent(const char *path, char *dir)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

int st_save(const char *path, const st_tensor *tensors, size_t n, const char *const *meta_keys,
            const char *const *meta_values, size_t n_meta, char *err, size_t errlen)
{
    char eb[128];
    if (!host_is_little_endian()) {
        set_err(err, errlen, "st_save: big-endian hosts are not supported");
        return MHA_EINVAL;
    }
    if (path == NULL || path[0] == '\0' || (n > 0 && tensors == NULL) ||
        (n_meta > 0 && (meta_keys == NULL || meta_values == NULL))) {
        set_err(err, errlen, "st_save: NULL or empty path, or NULL tensor/metadata array");
        return MHA_EINVAL;
    }
    uint64_t *nbytes = calloc(n ? 2 * n : 1, sizeof *nbytes); /* [n] sizes, [n] offsets */
    if (nbytes == NULL) {
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    uint64_t *begin = nbytes + n;
    sbuf hb = {0};
    char *tmp = NULL;
    int rc = validate_save(tensors, n, meta_keys, meta_values, n_meta, nbytes, err, errlen);
    if (rc == MHA_OK) {
        rc = build_header(tensors, n, meta_keys, meta_values, n_meta, nbytes, begin, &hb);
        if (rc != MHA_OK)
            set_err(err, errlen, "out of memory building the header");
    }
    size_t tmplen = strlen(path) + 32;
    if (rc == MHA_OK && (tmp = malloc(tmplen)) == NULL) {
        set_err(err, errlen, "out of memory");
        rc = MHA_ENOMEM;
    }
    if (rc != MHA_OK)
        goto done;

    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) { /* left by an earlier process with our pid */
        unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        set_err(err, errlen, "cannot create '%s': %s", tmp, errno_text(errno, eb, sizeof eb));
        rc = MHA_EIO;
        goto done;
    }
    FILE *fp = fdopen(fd, "wb");
    if (fp == NULL) {
        set_err(err, errlen, "cannot open '%s': %s", tmp, errno_text(errno, eb, sizeof eb));
        close(fd);
        unlink(tmp);
        rc = MHA_EIO;
        goto done;
    }
    int w = write_all(fp, &hb, tensors, n, nbytes);
    int e = errno;
    if (fclose(fp) != 0 && w == 0) {
        w = -1;
        e = errno;
    }
    if (w != 0) {
        set_err(err, errlen, "cannot write '%s': %s", tmp,
                e ? errno_text(e, eb, sizeof eb) : "short write");
        unlink(tmp);
        rc = MHA_EIO;
        goto done;
    }
    if (rename(tmp, path) != 0) {
        set_err(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path,
                errno_text(errno, eb, sizeof eb));
        unlink(tmp);
        rc = MHA_EIO;
        goto done;
    }
    char *dir = tmp; /* reused: strlen(path) + 32 bytes */
    if (fsync_parent(path, dir) != 0) {
        set_err(err, errlen, "'%s' was written, but fsync of directory '%s' failed: %s", path,
                dir, errno_text(errno, eb, sizeof eb));
        rc = MHA_EIO;
    }
done:
    free(tmp);
    free(hb.p);
    free(nbytes);
    return rc;
}
