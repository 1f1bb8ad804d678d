/*
 * st_write.c — the safetensors writer (mha_safetensors.h, mha_st_save): the header is
 * built by hand (cJSON prints large integers in exponent form, which safetensors readers
 * refuse), and the target file is replaced atomically (temporary file, fsync, rename, fsync
 * of the directory).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "st_internal.h"

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

/* Check the arguments of mha_st_save; byte counts → nbytes[n]. */
static int validate_save(const mha_st_tensor *t, size_t n, const char *const *mk,
                         const char *const *mv, size_t n_meta, uint64_t *nbytes, char *err,
                         size_t errlen)
{
    char q[ST_QUOTE], sh[ST_SHAPE];
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].name == NULL) {
            mha__st_set_err(err, errlen, "tensor %zu: name is NULL", i);
            return MHA_EINVAL;
        }
        mha__st_quote(q, t[i].name);
        if (!mha__st_utf8_valid(t[i].name) || strcmp(t[i].name, ST_METADATA_KEY) == 0) {
            mha__st_set_err(err, errlen, "tensor '%s': name is not valid UTF-8 or is the reserved "
                            "'" ST_METADATA_KEY "'", q);
            return MHA_EINVAL;
        }
        if (!mha__st_dtype_valid(t[i].dtype) || t[i].ndim > MHA_ST_MAX_NDIM) {
            mha__st_set_err(err, errlen, "tensor '%s': dtype %d unknown or ndim %zu > %d", q,
                            (int)t[i].dtype, t[i].ndim, MHA_ST_MAX_NDIM);
            return MHA_EINVAL;
        }
        uint64_t dims[MHA_ST_MAX_NDIM];
        int dims_ok = 1;
        for (size_t d = 0; d < t[i].ndim; d++) {
            dims[d] = t[i].shape[d];
            dims_ok = dims_ok && dims[d] < ST_MAX_JSON_INT;
        }
        if (!dims_ok ||
            mha__st_tensor_bytes(t[i].ndim, dims, mha_st_dtype_size(t[i].dtype),
                                 ST_MAX_JSON_INT - 1, &nbytes[i]) != 0 ||
            nbytes[i] > SIZE_MAX || nbytes[i] > ST_MAX_JSON_INT - 1 - total) {
            mha__st_set_err(err, errlen, "tensor '%s': %s %s: byte count overflows (limit 2^53)", q,
                            mha_st_dtype_name(t[i].dtype),
                            mha__st_fmt_shape(sh, t[i].ndim, t[i].shape));
            return MHA_EOVERFLOW;
        }
        total += nbytes[i];
        if (nbytes[i] > 0 && t[i].data == NULL) {
            mha__st_set_err(err, errlen, "tensor '%s': data is NULL", q);
            return MHA_EINVAL;
        }
    }
    for (size_t i = 0; i < n_meta; i++) {
        if (mk[i] == NULL || mv[i] == NULL || !mha__st_utf8_valid(mk[i]) ||
            !mha__st_utf8_valid(mv[i])) {
            mha__st_set_err(err, errlen, "metadata %zu: key or value is NULL or not valid UTF-8",
                            i);
            return MHA_EINVAL;
        }
    }
    /* Unique names, unique metadata keys. */
    size_t most = n > n_meta ? n : n_meta;
    const char **names = malloc((most ? most : 1) * sizeof *names);
    if (names == NULL) {
        mha__st_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = t[i].name;
    const char *dup = mha__st_find_duplicate(names, n);
    if (dup != NULL) {
        mha__st_set_err(err, errlen, "tensor name '%s' appears twice", mha__st_quote(q, dup));
        free(names);
        return MHA_EINVAL;
    }
    for (size_t i = 0; i < n_meta; i++)
        names[i] = mk[i];
    dup = mha__st_find_duplicate(names, n_meta);
    free(names);
    if (dup != NULL) {
        mha__st_set_err(err, errlen, "metadata key '%s' appears twice", mha__st_quote(q, dup));
        return MHA_EINVAL;
    }
    return MHA_OK;
}

/* The header text, padded with spaces to a multiple of 8 bytes; begin[i] = offset of
 * tensor i in the data section (largest element size first, caller order within). */
static int build_header(const mha_st_tensor *t, size_t n, const char *const *mk,
                        const char *const *mv, size_t n_meta, const uint64_t *nbytes,
                        uint64_t *begin, sbuf *hb)
{
    uint64_t pos = 0;
    for (int s = 0; s < ST_NUM_LAYOUT; s++) {
        for (size_t i = 0; i < n; i++) {
            if (mha_st_dtype_size(t[i].dtype) == layout_sizes[s]) {
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
        sb_str(hb, mha_st_dtype_name(t[i].dtype));
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
static int write_all(FILE *fp, const sbuf *hb, const mha_st_tensor *t, size_t n,
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
            if (mha_st_dtype_size(t[i].dtype) == layout_sizes[s] && nbytes[i] > 0 &&
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

/* The file: header and data into "<path>.tmp.<pid>" (tmp[tmplen]), flushed and renamed over
 * path, and the directory synced. MHA_OK, or MHA_EIO with the temporary removed. */
static int write_file(const char *path, char *tmp, size_t tmplen, const sbuf *hb,
                      const mha_st_tensor *tensors, size_t n, const uint64_t *nbytes, char *err,
                      size_t errlen)
{
    char eb[128];
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) { /* left by an earlier process with our pid */
        unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        mha__st_set_err(err, errlen, "cannot create '%s': %s", tmp,
                        mha__st_errno_text(errno, eb, sizeof eb));
        return MHA_EIO;
    }
    FILE *fp = fdopen(fd, "wb");
    if (fp == NULL) {
        mha__st_set_err(err, errlen, "cannot open '%s': %s", tmp,
                        mha__st_errno_text(errno, eb, sizeof eb));
        close(fd);
        unlink(tmp);
        return MHA_EIO;
    }
    int w = write_all(fp, hb, tensors, n, nbytes);
    int e = errno;
    if (fclose(fp) != 0 && w == 0) {
        w = -1;
        e = errno;
    }
    if (w != 0) {
        mha__st_set_err(err, errlen, "cannot write '%s': %s", tmp,
                        e ? mha__st_errno_text(e, eb, sizeof eb) : "short write");
        unlink(tmp);
        return MHA_EIO;
    }
    if (rename(tmp, path) != 0) {
        mha__st_set_err(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path,
                        mha__st_errno_text(errno, eb, sizeof eb));
        unlink(tmp);
        return MHA_EIO;
    }
    char *dir = tmp; /* reused: strlen(path) + 32 bytes */
    if (fsync_parent(path, dir) != 0) {
        mha__st_set_err(err, errlen, "'%s' was written, but fsync of directory '%s' failed: %s",
                        path, dir, mha__st_errno_text(errno, eb, sizeof eb));
        return MHA_EIO;
    }
    return MHA_OK;
}

int mha_st_save(const char *path, const mha_st_tensor *tensors, size_t n,
                const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                char *err, size_t errlen)
{
    if (!mha__st_host_is_little_endian()) {
        mha__st_set_err(err, errlen, "mha_st_save: big-endian hosts are not supported");
        return MHA_EINVAL;
    }
    if (path == NULL || path[0] == '\0' || (n > 0 && tensors == NULL) ||
        (n_meta > 0 && (meta_keys == NULL || meta_values == NULL))) {
        mha__st_set_err(err, errlen,
                        "mha_st_save: NULL or empty path, or NULL tensor/metadata array");
        return MHA_EINVAL;
    }
    uint64_t *nbytes = calloc(n ? 2 * n : 1, sizeof *nbytes); /* [n] sizes, [n] offsets */
    if (nbytes == NULL) {
        mha__st_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    uint64_t *begin = nbytes + n;
    sbuf hb = {0};
    char *tmp = NULL;
    int rc = validate_save(tensors, n, meta_keys, meta_values, n_meta, nbytes, err, errlen);
    if (rc == MHA_OK) {
        rc = build_header(tensors, n, meta_keys, meta_values, n_meta, nbytes, begin, &hb);
        if (rc != MHA_OK)
            mha__st_set_err(err, errlen, "out of memory building the header");
    }
    size_t tmplen = strlen(path) + 32;
    if (rc == MHA_OK && (tmp = malloc(tmplen)) == NULL) {
        mha__st_set_err(err, errlen, "out of memory");
        rc = MHA_ENOMEM;
    }
    if (rc != MHA_OK)
        goto done;

    rc = write_file(path, tmp, tmplen, &hb, tensors, n, nbytes, err, errlen);
done:
    free(tmp);
    free(hb.p);
    free(nbytes);
    return rc;
}
