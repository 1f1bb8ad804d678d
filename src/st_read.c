/*
 * st_read.c — safetensors reader (the header is parsed in st_header.c; the writer is
 * st_write.c, the float conversions st_convert.c) and the helpers they share; the format
 * and the contract are in include/mha_safetensors.h.
 *
 * Reading treats the file as hostile: the header is read only after its size is checked
 * against the file and ST_MAX_HEADER, and parsed (st_header.c) before any tensor data is
 * read; a FIFO or device is refused without waiting on it.
 */
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE, beside the build's _POSIX_C_SOURCE */
#include "mha_safetensors.h"
#include "st_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- small helpers ----------------------------------------------------------------- */

void mha__st_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* errno text without strerror's static buffer. */
const char *mha__st_errno_text(int e, char *buf, size_t len)
{
    if (strerror_r(e, buf, len) != 0)
        snprintf(buf, len, "errno %d", e);
    return buf;
}

/* A name made printable for a one-line message: control bytes become '?', long names are
 * cut to 64 bytes with "...". dst has ST_QUOTE bytes. */
const char *mha__st_quote(char dst[ST_QUOTE], const char *name)
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
const char *mha__st_fmt_shape(char dst[ST_SHAPE], size_t ndim, const size_t *shape)
{
    size_t len = 0;
    dst[len++] = '[';
    for (size_t d = 0; d < ndim && d < MHA_ST_MAX_NDIM; d++)
        len += (size_t)snprintf(dst + len, ST_SHAPE - len, d ? ",%zu" : "%zu", shape[d]);
    snprintf(dst + len, ST_SHAPE - len, "]");
    return dst;
}

int mha__st_host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Indexed by mha_st_dtype. */
static const char *const dtype_names[] = {"F32", "F64", "I64", "U64", "U8", "BF16", "F16", "I32"};
static const size_t dtype_sizes[] = {4, 8, 8, 8, 1, 2, 2, 4};
enum { ST_NUM_DTYPES = (int)(sizeof dtype_sizes / sizeof dtype_sizes[0]) };

int mha__st_dtype_valid(mha_st_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < ST_NUM_DTYPES;
}

const char *mha_st_dtype_name(mha_st_dtype dtype)
{
    return mha__st_dtype_valid(dtype) ? dtype_names[dtype] : NULL;
}

size_t mha_st_dtype_size(mha_st_dtype dtype)
{
    return mha__st_dtype_valid(dtype) ? dtype_sizes[dtype] : 0;
}

int mha__st_dtype_parse(const char *s, mha_st_dtype *out)
{
    for (int k = 0; k < ST_NUM_DTYPES; k++) {
        if (strcmp(s, dtype_names[k]) == 0) {
            *out = (mha_st_dtype)k;
            return 1;
        }
    }
    return 0;
}

/* bytes = product(shape[0..ndim)) · elem, 0 if any dimension is 0 (an empty tensor, even
 * when the other dimensions' product would overflow). Returns 0, or -1 if the product
 * exceeds `limit`. */
int mha__st_tensor_bytes(size_t ndim, const uint64_t *shape, uint64_t elem, uint64_t limit,
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
size_t mha__st_utf8_seq(const unsigned char *s, size_t n)
{
    const unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xC2 || c > 0xF4) /* a continuation byte, an overlong lead, past U+10FFFF */
        return 0;
    const size_t len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    /* the second byte's range: narrower after E0 (overlong), ED (surrogates), F0
     * (overlong) and F4 (past U+10FFFF) */
    const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return len;
}

int mha__st_utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        size_t k = mha__st_utf8_seq(s + i, n - i);
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
const char *mha__st_find_duplicate(const char **names, size_t n)
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

/* "cannot read '<path>': <errno text or a shrunk file>" for pread_full's result r. */
static int read_failed(const char *path, int r, char *err, size_t errlen)
{
    char eb[128];
    mha__st_set_err(err, errlen, "cannot read '%s': %s", path,
                    r < 0 ? mha__st_errno_text(errno, eb, sizeof eb)
                          : "file shrank while being read");
    return MHA_EIO;
}

/* Open path for reading and check it is a regular file of 8 bytes or more that fits in
 * memory: *fd and *size. O_NONBLOCK: opening a FIFO (or a device) must not wait for a
 * writer; it is refused as not a regular file (regular files ignore the flag). */
static int open_regular(const char *path, int *fd_out, size_t *size, char *err, size_t errlen)
{
    char eb[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        mha__st_set_err(err, errlen, "cannot open '%s': %s", path,
                        mha__st_errno_text(errno, eb, sizeof eb));
        return MHA_EIO;
    }
    struct stat sb;
    int st = MHA_OK;
    if (fstat(fd, &sb) != 0) {
        mha__st_set_err(err, errlen, "cannot stat '%s': %s", path,
                        mha__st_errno_text(errno, eb, sizeof eb));
        st = MHA_EIO;
    } else if (!S_ISREG(sb.st_mode)) {
        mha__st_set_err(err, errlen, "cannot read '%s': not a regular file", path);
        st = MHA_EIO;
    } else if (sb.st_size < 8) {
        mha__st_set_err(err, errlen, "'%s' is %jd bytes, shorter than the 8-byte header size field",
                        path, (intmax_t)sb.st_size);
        st = MHA_EFORMAT;
    } else if ((uintmax_t)sb.st_size > SIZE_MAX - 8) {
        mha__st_set_err(err, errlen, "'%s' is too large to hold in memory", path);
        st = MHA_EOVERFLOW;
    }
    if (st != MHA_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return MHA_OK;
}

/* Step 1: the size field and the header of the file open at fd (size bytes), checked
 * against the file's size — a malformed file is refused after reading at most
 * 8 + ST_MAX_HEADER bytes, however large it is — parsed into a new *out (its data section
 * not read yet) and its header size into *n_header. */
static int read_header(int fd, const char *path, size_t size, mha_st_file **out,
                       uint64_t *n_header, char *err, size_t errlen)
{
    unsigned char head[8];
    int r = pread_full(fd, head, 8, 0);
    if (r != 0)
        return read_failed(path, r, err, errlen);
    const uint64_t nh = load_le64(head);
    if (nh > ST_MAX_HEADER) {
        mha__st_set_err(err, errlen,
                        "header size %" PRIu64 " exceeds the limit of %" PRIu64 " bytes", nh,
                        ST_MAX_HEADER);
        return MHA_EFORMAT;
    }
    if (nh > size - 8) {
        mha__st_set_err(err, errlen,
                        "header size %" PRIu64 " but only %zu bytes follow the size field "
                        "(truncated file?)",
                        nh, size - 8);
        return MHA_EFORMAT;
    }
    mha_st_file *f = calloc(1, sizeof *f);
    unsigned char *hbuf = malloc((size_t)nh + 1);
    if (f == NULL || hbuf == NULL) {
        free(f);
        free(hbuf);
        mha__st_set_err(err, errlen, "out of memory for the %" PRIu64 "-byte header", nh);
        return MHA_ENOMEM;
    }
    r = pread_full(fd, hbuf, (size_t)nh, 8);
    int rc = r != 0 ? read_failed(path, r, err, errlen) : MHA_OK;
    f->data_size = size - 8 - (size_t)nh;
    if (rc == MHA_OK)
        rc = mha__st_parse_header(f, hbuf, (size_t)nh, err, errlen);
    free(hbuf); /* cJSON copied every string it keeps */
    if (rc != MHA_OK) {
        mha_st_free(f);
        return rc;
    }
    *out = f;
    *n_header = nh;
    return MHA_OK;
}

/* Memory for a data section of n bytes (free()d). From 4 MiB up, aligned to 2 MiB and
 * offered to the kernel for 2 MiB pages (transparent huge pages, which many systems give
 * only to memory that asks: "madvise" in /sys/kernel/mm/transparent_hugepage/enabled):
 * reading a model of 11 MB into it then takes a handful of page faults instead of ~2,800,
 * which were a tenth of a first word's time in `mha-g2p pronounce`. Where huge pages are
 * off, madvise fails or does nothing and the memory is ordinary. */
static void *data_alloc(size_t n)
{
    const size_t huge = (size_t)2 << 20;
#ifdef MADV_HUGEPAGE
    if (n >= 2 * huge && n <= SIZE_MAX - huge) {
        const size_t r = (n + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, r);
        if (p != NULL) {
            (void)madvise(p, r, MADV_HUGEPAGE);
            return p;
        }
    }
#endif
    return malloc(n ? n : 1);
}

/* Step 2: the data section of f (whose size the header's tensors account for exactly),
 * after the 8 + n_header bytes of the file open at fd; the tensors attached to it. */
static int read_data(int fd, const char *path, mha_st_file *f, uint64_t n_header, char *err,
                     size_t errlen)
{
    f->alloc = data_alloc(f->data_size);
    if (f->alloc == NULL) {
        mha__st_set_err(err, errlen, "out of memory for the %zu-byte data section", f->data_size);
        return MHA_ENOMEM;
    }
    const int r = pread_full(fd, f->alloc, f->data_size, (off_t)(8 + n_header));
    if (r != 0)
        return read_failed(path, r, err, errlen);
    f->data = f->alloc;
    return mha__st_attach_data(f, err, errlen);
}

int mha_st_load(const char *path, mha_st_file **out, char *err, size_t errlen)
{
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL) {
        mha__st_set_err(err, errlen, "mha_st_load: path and out must not be NULL");
        return MHA_EINVAL;
    }
    if (!mha__st_host_is_little_endian()) {
        mha__st_set_err(err, errlen, "mha_st_load: big-endian hosts are not supported");
        return MHA_EINVAL;
    }
    int fd;
    size_t size;
    int rc = open_regular(path, &fd, &size, err, errlen);
    if (rc != MHA_OK)
        return rc;
    mha_st_file *f = NULL;
    uint64_t n_header = 0;
    rc = read_header(fd, path, size, &f, &n_header, err, errlen);
    if (rc == MHA_OK)
        rc = read_data(fd, path, f, n_header, err, errlen);
    close(fd);
    if (rc != MHA_OK) {
        mha_st_free(f);
        return rc;
    }
    *out = f;
    return MHA_OK;
}

void mha_st_free(mha_st_file *f)
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

const st_entry *mha__st_find(const mha_st_file *f, const char *name, char *err, size_t errlen)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    char q[ST_QUOTE];
    mha__st_set_err(err, errlen, "no tensor '%s' in the file", mha__st_quote(q, name));
    return NULL;
}

int mha__st_lookup(const mha_st_file *f, const char *name, size_t ndim, const size_t *shape,
                   const char *caller, int bad, const char *what, char *err, size_t errlen,
                   const st_entry **e)
{
    if (f == NULL || name == NULL || ndim > MHA_ST_MAX_NDIM || bad ||
        (ndim > 0 && shape == NULL)) {
        mha__st_set_err(err, errlen, "%s: invalid argument (NULL file or name, %sndim > %d or "
                        "NULL shape)", caller, what, MHA_ST_MAX_NDIM);
        return MHA_EINVAL;
    }
    *e = mha__st_find(f, name, err, errlen);
    return *e ? MHA_OK : MHA_ENOTFOUND;
}

int mha__st_same_shape(const st_entry *e, size_t ndim, const size_t *shape)
{
    int same = e->ndim == ndim;
    for (size_t d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    return same;
}

int mha_st_get(const mha_st_file *f, const char *name, mha_st_dtype dtype, size_t ndim,
               const size_t *shape, const void **data, char *err, size_t errlen)
{
    char q[ST_QUOTE], have[ST_SHAPE], want[ST_SHAPE];
    const st_entry *e;
    const int st = mha__st_lookup(f, name, ndim, shape, "mha_st_get",
                                  !mha__st_dtype_valid(dtype), "bad dtype, ", err, errlen, &e);
    if (st != MHA_OK)
        return st;
    const int same_shape = mha__st_same_shape(e, ndim, shape);
    if (e->dtype != dtype || !same_shape) {
        mha__st_set_err(err, errlen, "tensor '%s': the file has %s %s, expected %s %s",
                        mha__st_quote(q, name), dtype_names[e->dtype],
                        mha__st_fmt_shape(have, e->ndim, e->shape), dtype_names[dtype],
                        mha__st_fmt_shape(want, ndim, shape));
        return e->dtype != dtype ? MHA_EFORMAT : MHA_ESHAPE;
    }
    if (data != NULL)
        *data = e->data;
    return MHA_OK;
}

const char *mha_st_meta(const mha_st_file *f, const char *key)
{
    if (f == NULL || key == NULL || f->meta == NULL)
        return NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, f->meta)
        if (strcmp(c->string, key) == 0)
            return c->valuestring;
    return NULL;
}

size_t mha_st_meta_count(const mha_st_file *f)
{
    return (f == NULL || f->meta == NULL) ? 0 : (size_t)cJSON_GetArraySize(f->meta);
}

int mha_st_meta_at(const mha_st_file *f, size_t i, const char **key, const char **value)
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

size_t mha_st_count(const mha_st_file *f)
{
    return f == NULL ? 0 : f->n;
}

const char *mha_st_name(const mha_st_file *f, size_t i)
{
    return (f == NULL || i >= f->n) ? NULL : f->t[i].name;
}

int mha_st_tensor_at(const mha_st_file *f, size_t i, mha_st_tensor *out)
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
