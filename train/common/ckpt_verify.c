/* Checksums of checkpoints: computing and verifying them (ckpt_crc.h). */
#include "ckpt_crc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "mha.h"

/* ---- checksums ----------------------------------------------------------------------- */

int ckpt_is_crc_key(const char *k) { return strncmp(k, CRC_PREFIX, strlen(CRC_PREFIX)) == 0; }

/* The CRC-32C of the pairs keys[i] → vals[i] that are not crc32c.* keys, sorted by key,
 * each as key NUL value NUL. MHA_ENOMEM. (Insertion sort: a checkpoint has a few dozen
 * such keys.) */
int ckpt_meta_crc(const char *const *keys, const char *const *vals, size_t n, uint32_t *out)
{
    size_t *idx = malloc((n ? n : 1) * sizeof *idx), m = 0;
    if (!idx)
        return MHA_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (ckpt_is_crc_key(keys[i]))
            continue;
        size_t j = m++;
        for (; j > 0 && strcmp(keys[idx[j - 1]], keys[i]) > 0; j--)
            idx[j] = idx[j - 1];
        idx[j] = i;
    }
    uint32_t c = 0;
    for (size_t j = 0; j < m; j++) {
        c = crc32c(c, keys[idx[j]], strlen(keys[idx[j]]) + 1);
        c = crc32c(c, vals[idx[j]], strlen(vals[idx[j]]) + 1);
    }
    free(idx);
    *out = c;
    return MHA_OK;
}

size_t ckpt_tensor_bytes(const mha_st_tensor *t)
{
    size_t n = mha_st_dtype_size(t->dtype);
    for (size_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* 1 and *v if s is 8 lower-case hex digits. */
static int parse_crc(const char *s, uint32_t *v)
{
    if (!s || strlen(s) != 8)
        return 0;
    uint32_t x = 0;
    for (int i = 0; i < 8; i++) {
        const char ch = s[i];
        const int d = ch >= '0' && ch <= '9'   ? ch - '0'
                      : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                               : -1;
        if (d < 0)
            return 0;
        x = x << 4 | (uint32_t)d;
    }
    *v = x;
    return 1;
}

int ckpt_has_checksums(const mha_st_file *f)
{
    for (size_t i = 0; i < mha_st_meta_count(f); i++) {
        const char *k, *v;
        if (mha_st_meta_at(f, i, &k, &v) == MHA_OK && ckpt_is_crc_key(k))
            return 1;
    }
    return 0;
}

int ckpt_verify(const mha_st_file *f, char *err, size_t errlen)
{
    const size_t nm = mha_st_meta_count(f), nt = mha_st_count(f);
    const char **keys = malloc((nm ? nm : 1) * sizeof *keys);
    const char **vals = malloc((nm ? nm : 1) * sizeof *vals);
    if (!keys || !vals) {
        UTIL_FREE_ALL(keys, vals);
        return util_fail(MHA_ENOMEM, err, errlen, "out of memory");
    }
    size_t n_crc = 0;
    for (size_t i = 0; i < nm; i++) {
        mha_st_meta_at(f, i, &keys[i], &vals[i]);
        n_crc += ckpt_is_crc_key(keys[i]);
    }
    int st = MHA_OK;
    if (n_crc == 0)
        goto done; /* a file from before checksums: nothing to check */
    /* every crc32c.<name> names a tensor of the file */
    for (size_t i = 0; st == MHA_OK && i < nm; i++) {
        if (!ckpt_is_crc_key(keys[i]) || strcmp(keys[i], CRC_META_KEY) == 0)
            continue;
        const char *name = keys[i] + strlen(CRC_PREFIX);
        size_t k = 0;
        while (k < nt && strcmp(mha_st_name(f, k), name) != 0)
            k++;
        if (k == nt) {
            util_set_err(err, errlen, "metadata %.100s: a checksum of a tensor the file does not "
                    "hold (the file was edited, or is corrupt)", keys[i]);
            st = MHA_EFORMAT;
        }
    }
    for (size_t i = 0; st == MHA_OK && i < nt; i++) {
        mha_st_tensor t;
        mha_st_tensor_at(f, i, &t);
        char key[CKPT_NAME_CAP + 80];
        snprintf(key, sizeof key, CRC_PREFIX "%s", t.name);
        uint32_t want, got = crc32c(0, t.data, ckpt_tensor_bytes(&t));
        if (!parse_crc(mha_st_meta(f, key), &want)) {
            util_set_err(err, errlen,
                          "tensor %.100s has no valid checksum (metadata %.100s), though "
                    "the file has checksums: the file is corrupt or was edited", t.name, key);
            st = MHA_EFORMAT;
        } else if (got != want) {
            util_set_err(err, errlen, "tensor %.100s does not match its checksum (its bytes have "
                    "CRC-32C %08x, the file says %08x): the file is corrupt", t.name,
                    (unsigned)got, (unsigned)want);
            st = MHA_EFORMAT;
        }
    }
    if (st == MHA_OK) {
        uint32_t want, got = 0;
        st = ckpt_meta_crc(keys, vals, nm, &got);
        if (st == MHA_ENOMEM)
            util_set_err(err, errlen, "out of memory");
        else if (!parse_crc(mha_st_meta(f, CRC_META_KEY), &want) || got != want) {
            util_set_err(err, errlen, "the metadata (options, vocabulary) do not match their "
                    "checksum %s: the file is corrupt or was edited", CRC_META_KEY);
            st = MHA_EFORMAT;
        }
    }
done:
    free(keys);
    free(vals);
    return st;
}

