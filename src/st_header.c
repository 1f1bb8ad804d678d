/*
 * st_header.c — the safetensors header, read as hostile input (st_read.c reads the file): the
 * bytes are lexed before cJSON builds the tree (UTF-8, allowed characters, "\u0000",
 * where the JSON value ends), every entry's dtype, shape and offsets are checked, and the
 * tensors' byte ranges must tile the data section.
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

/* Byte i of a string's content (h[i] < 0x80): how far it takes the scan (*adv), and
 * *in_str 0 when it closes the string. An escape must be one of JSON's (\uXXXX not NUL);
 * a raw control character is refused. */
static int string_byte(const unsigned char *h, size_t n, size_t i, size_t *adv, int *in_str,
                       char *err, size_t errlen)
{
    const unsigned char c = h[i];
    *adv = 1;
    if (c == '"') {
        *in_str = 0;
        return MHA_OK;
    }
    if (c < 0x20) {
        mha__st_set_err(err, errlen, "header byte %zu: control character 0x%02x in a string",
                        i, c);
        return MHA_EFORMAT;
    }
    if (c != '\\')
        return MHA_OK;
    const unsigned char e = i + 1 < n ? h[i + 1] : 0;
    if (e == 'u') {
        unsigned v = 0;
        for (size_t k = 2; k < 6; k++) {
            unsigned char x = i + k < n ? h[i + k] : 0;
            unsigned dig = (x >= '0' && x <= '9')   ? (unsigned)(x - '0')
                           : (x >= 'a' && x <= 'f') ? (unsigned)(x - 'a' + 10)
                           : (x >= 'A' && x <= 'F') ? (unsigned)(x - 'A' + 10)
                                                    : 16u;
            if (dig == 16u) {
                mha__st_set_err(err, errlen, "header byte %zu: bad \\u escape", i);
                return MHA_EFORMAT;
            }
            v = v * 16u + dig;
        }
        if (v == 0) {
            mha__st_set_err(err, errlen, "header byte %zu: \\u0000 (NUL) in a string", i);
            return MHA_EFORMAT;
        }
        *adv = 6;
        return MHA_OK;
    }
    if (e == 0 || strchr("\"\\/bfnrt", e) == NULL) {
        mha__st_set_err(err, errlen, "header byte %zu: bad escape in a string", i);
        return MHA_EFORMAT;
    }
    *adv = 2;
    return MHA_OK;
}

/* After the top-level object (bytes from `from`), only JSON whitespace: the format pads with
 * spaces. */
static int only_padding(const unsigned char *h, size_t n, size_t from, char *err, size_t errlen)
{
    for (size_t j = from; j < n; j++) {
        if (h[j] != ' ' && h[j] != '\t' && h[j] != '\n' && h[j] != '\r') {
            mha__st_set_err(err, errlen,
                            "header byte %zu: 0x%02x after the JSON object (only space "
                            "padding may follow it)",
                            j, h[j]);
            return MHA_EFORMAT;
        }
    }
    return MHA_OK;
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
        mha__st_set_err(err, errlen, "header does not start with '{'");
        return MHA_EFORMAT;
    }
    size_t depth = 0, i = 0;
    int in_str = 0;
    while (i < n) {
        unsigned char c = h[i];
        if (c >= 0x80) {
            size_t k = in_str ? mha__st_utf8_seq(h + i, n - i) : 0;
            if (k == 0) {
                mha__st_set_err(err, errlen, "header byte %zu: %s", i,
                                in_str ? "invalid UTF-8" : "non-ASCII byte outside a string");
                return MHA_EFORMAT;
            }
            i += k;
            continue;
        }
        if (in_str) {
            size_t adv;
            const int st = string_byte(h, n, i, &adv, &in_str, err, errlen);
            if (st != MHA_OK)
                return st;
            i += adv;
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
                return only_padding(h, n, i + 1, err, errlen);
            }
            break;
        case '0':
            if (i + 1 < n && h[i + 1] >= '0' && h[i + 1] <= '9' &&
                !(h[i - 1] >= '0' && h[i - 1] <= '9')) { /* i >= 1: h[0] is '{' */
                mha__st_set_err(err, errlen, "header byte %zu: integer with a leading zero", i);
                return MHA_EFORMAT;
            }
            break;
        case ':': case ',': case '-': case ' ': case '\t': case '\n': case '\r':
        case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
        case '9':
            break;
        default:
            if (c >= 0x20 && c < 0x7f)
                mha__st_set_err(err, errlen,
                                "header byte %zu: unexpected '%c' (the header holds only objects, "
                                "arrays, strings and integers)",
                                i, c);
            else
                mha__st_set_err(err, errlen, "header byte %zu: unexpected byte 0x%02x", i, c);
            return MHA_EFORMAT;
        }
        i++;
    }
    mha__st_set_err(err, errlen, "header: %s",
                    in_str ? "unterminated string" : "the JSON object is not closed");
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

/* An entry's three keys (dtype, shape, data_offsets), each once, no other. */
static int entry_keys(const cJSON *item, const char *q, const cJSON **jdtype,
                      const cJSON **jshape, const cJSON **joff, char *err, size_t errlen)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, item) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? jdtype
                             : strcmp(c->string, "shape") == 0        ? jshape
                             : strcmp(c->string, "data_offsets") == 0 ? joff
                                                                      : NULL;
        char kq[ST_QUOTE];
        if (slot == NULL) {
            mha__st_set_err(err, errlen, "tensor '%s': unknown key '%s'", q,
                            mha__st_quote(kq, c->string));
            return MHA_EFORMAT;
        }
        if (*slot != NULL) {
            mha__st_set_err(err, errlen, "tensor '%s': key '%s' appears twice", q, c->string);
            return MHA_EFORMAT;
        }
        *slot = c;
    }
    if (*jdtype == NULL || *jshape == NULL || *joff == NULL) {
        mha__st_set_err(err, errlen, "tensor '%s': no '%s'", q,
                        *jdtype == NULL ? "dtype" : *jshape == NULL ? "shape" : "data_offsets");
        return MHA_EFORMAT;
    }
    return MHA_OK;
}

/* The shape: an array of at most MHA_ST_MAX_NDIM integers in [0, 2^53), into dims[*nd]. */
static int entry_shape(const cJSON *jshape, const char *q, uint64_t *dims, size_t *nd,
                       char *err, size_t errlen)
{
    if (!cJSON_IsArray(jshape)) {
        mha__st_set_err(err, errlen, "tensor '%s': shape is not an array", q);
        return MHA_EFORMAT;
    }
    const cJSON *c;
    *nd = 0;
    cJSON_ArrayForEach(c, jshape) {
        if (*nd == MHA_ST_MAX_NDIM) {
            mha__st_set_err(err, errlen, "tensor '%s': shape has more than %d dimensions", q,
                            MHA_ST_MAX_NDIM);
            return MHA_EFORMAT;
        }
        if (!json_uint(c, &dims[*nd]) || dims[*nd] > SIZE_MAX) {
            mha__st_set_err(err, errlen, "tensor '%s': shape[%zu] is not an integer in [0, 2^53)",
                            q, *nd);
            return MHA_EFORMAT;
        }
        (*nd)++;
    }
    return MHA_OK;
}

/* data_offsets: [begin, end], integers in [0, 2^53), begin <= end, into off[2]. */
static int entry_offsets(const cJSON *joff, const char *q, uint64_t *off, char *err,
                         size_t errlen)
{
    const cJSON *c;
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
        mha__st_set_err(err, errlen,
                        "tensor '%s': data_offsets is not [begin, end] with integers in "
                        "[0, 2^53)",
                        q);
        return MHA_EFORMAT;
    }
    if (off[0] > off[1]) {
        mha__st_set_err(err, errlen,
                        "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before "
                        "they begin",
                        q, off[0], off[1]);
        return MHA_EFORMAT;
    }
    return MHA_OK;
}

/* One tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]} → *e
 * (name, dtype, shape, begin, end; data is set later). */
static int parse_entry(const cJSON *item, st_entry *e, char *err, size_t errlen)
{
    char q[ST_QUOTE], sh[ST_SHAPE];
    const cJSON *jdtype = NULL, *jshape = NULL, *joff = NULL;
    mha__st_quote(q, item->string);
    if (!cJSON_IsObject(item)) {
        mha__st_set_err(err, errlen, "tensor '%s': entry is not an object", q);
        return MHA_EFORMAT;
    }
    int st = entry_keys(item, q, &jdtype, &jshape, &joff, err, errlen);
    if (st != MHA_OK)
        return st;
    if (!cJSON_IsString(jdtype) || !mha__st_dtype_parse(jdtype->valuestring, &e->dtype)) {
        char dq[ST_QUOTE];
        mha__st_set_err(
            err, errlen,
            "tensor '%s': dtype %s%s%s not supported (F32, F64, I64, U64, U8, BF16, F16, I32)", q,
            cJSON_IsString(jdtype) ? "'" : "",
            cJSON_IsString(jdtype) ? mha__st_quote(dq, jdtype->valuestring) : "(not a string)",
            cJSON_IsString(jdtype) ? "'" : "");
        return MHA_EFORMAT;
    }
    uint64_t dims[MHA_ST_MAX_NDIM];
    size_t nd = 0;
    if ((st = entry_shape(jshape, q, dims, &nd, err, errlen)) != MHA_OK)
        return st;
    e->ndim = nd;
    for (size_t d = 0; d < MHA_ST_MAX_NDIM; d++)
        e->shape[d] = d < nd ? (size_t)dims[d] : 0;
    mha__st_fmt_shape(sh, e->ndim, e->shape);
    uint64_t off[2];
    if ((st = entry_offsets(joff, q, off, err, errlen)) != MHA_OK)
        return st;
    uint64_t need;
    if (mha__st_tensor_bytes(nd, dims, mha_st_dtype_size(e->dtype), UINT64_MAX, &need) != 0) {
        mha__st_set_err(err, errlen, "tensor '%s': %s %s is too large (its byte count overflows)",
                        q, mha_st_dtype_name(e->dtype), sh);
        return MHA_EFORMAT;
    }
    if (off[1] - off[0] != need) {
        mha__st_set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold "
                        "%" PRIu64 " bytes but %s %s needs %" PRIu64, q, off[0], off[1],
                        off[1] - off[0], mha_st_dtype_name(e->dtype), sh, need);
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
        mha__st_set_err(err, errlen, "out of memory");
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
            mha__st_set_err(err, errlen,
                            "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap "
                            "tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                            mha__st_quote(q, e->name), e->begin, e->end,
                            mha__st_quote(q2, prev->name), prev->begin, prev->end);
            rc = MHA_EFORMAT;
        } else if (e->begin > pos) {
            mha__st_set_err(err, errlen,
                            "data section: bytes [%" PRIu64 ", %" PRIu64 ") before tensor "
                            "'%s' belong to no tensor",
                            pos, e->begin, mha__st_quote(q, e->name));
            rc = MHA_EFORMAT;
        } else if (e->end > data_size) {
            mha__st_set_err(err, errlen, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run "
                            "past the end of the %zu-byte data section (truncated file?)",
                            mha__st_quote(q, e->name), e->begin, e->end, data_size);
            rc = MHA_EFORMAT;
        }
        pos = e->end;
        prev = e;
    }
    if (rc == MHA_OK && pos != data_size) {
        mha__st_set_err(err, errlen,
                        "data section: %" PRIu64 " bytes after the last tensor belong to "
                        "no tensor",
                        (uint64_t)data_size - pos);
        rc = MHA_EFORMAT;
    }
    free(order);
    return rc;
}

/* __metadata__: an object of strings with unique keys. */
static int check_metadata(const cJSON *meta, char *err, size_t errlen)
{
    if (!cJSON_IsObject(meta)) {
        mha__st_set_err(err, errlen, "__metadata__ is not an object");
        return MHA_EFORMAT;
    }
    size_t nmeta = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, meta) {
        char q[ST_QUOTE];
        if (!cJSON_IsString(c)) {
            mha__st_set_err(err, errlen, "__metadata__: value of '%s' is not a string",
                            mha__st_quote(q, c->string));
            return MHA_EFORMAT;
        }
        nmeta++;
    }
    const char **keys = malloc((nmeta ? nmeta : 1) * sizeof *keys);
    if (keys == NULL) {
        mha__st_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    size_t k = 0;
    cJSON_ArrayForEach(c, meta)
        keys[k++] = c->string;
    const char *dup = mha__st_find_duplicate(keys, nmeta);
    free(keys);
    if (dup != NULL) {
        char q[ST_QUOTE];
        mha__st_set_err(err, errlen, "__metadata__: key '%s' appears twice",
                        mha__st_quote(q, dup));
        return MHA_EFORMAT;
    }
    return MHA_OK;
}

/* Validate the header h[0..header_len) against a data section of f->data_size bytes (the
 * file's size less 8 + header_len) and fill in f->root, f->meta, f->t, f->n; the data
 * section itself is not read yet (attach_data). */
int mha__st_parse_header(mha_st_file *f, const unsigned char *h, size_t header_len, char *err,
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
        mha__st_set_err(err, errlen,
                        "header is not a valid JSON object (error near header byte %zu)", at);
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
        mha__st_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    size_t k = 0;
    cJSON_ArrayForEach(c, f->root)
        names[k++] = c->string;
    const char *dup = mha__st_find_duplicate(names, nkeys);
    free(names);
    if (dup != NULL) {
        char q[ST_QUOTE];
        mha__st_set_err(err, errlen, "header: key '%s' appears twice", mha__st_quote(q, dup));
        return MHA_EFORMAT;
    }

    /* Metadata: an object of strings with unique keys. */
    f->meta = cJSON_GetObjectItemCaseSensitive(f->root, ST_METADATA_KEY);
    if (f->meta != NULL && (rc = check_metadata(f->meta, err, errlen)) != MHA_OK)
        return rc;

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
int mha__st_attach_data(mha_st_file *f, char *err, size_t errlen)
{
    /* Data pointers; a tensor at an offset that is not a multiple of its element size is
     * copied to its own allocation (malloc's alignment covers every dtype). */
    for (size_t i = 0; i < f->n; i++) {
        st_entry *e = &f->t[i];
        size_t nbytes = (size_t)(e->end - e->begin);
        if (nbytes == 0) {
            e->data = f->data; /* aligned, never read */
        } else if (e->begin % mha_st_dtype_size(e->dtype) == 0) {
            e->data = f->data + e->begin;
        } else {
            e->copy = malloc(nbytes);
            if (e->copy == NULL) {
                mha__st_set_err(err, errlen, "out of memory");
                return MHA_ENOMEM;
            }
            memcpy(e->copy, f->data + e->begin, nbytes);
            e->data = e->copy;
        }
    }
    return MHA_OK;
}
