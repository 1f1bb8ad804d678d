/*
 * Tests of train/common/st.c, the safetensors reader/writer (all tests named st_*).
 *
 * Files go to a fresh directory under $TMPDIR (or /tmp), removed at the end.
 * The layout checks parse the bytes with cJSON and the format's rules directly, without
 * mha_st_load; the fuzz test is meant to be run under -DMHA_SANITIZE=ON as well.
 */
#include "test_util.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "mha_pcg32.h"
#include "mha_safetensors.h"

/* ---- helpers ------------------------------------------------------------------------ */

static char g_dir[512];      /* the test directory                         */
static volatile unsigned g_sink; /* keeps the fuzz test's reads from being elided */

static void path_in(char *buf, size_t len, const char *name)
{
    int r = snprintf(buf, len, "%s/%s", g_dir, name);
    assert_true(r > 0 && (size_t)r < len);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    assert_true(n >= 0);
    rewind(fp);
    unsigned char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return p;
}

/* Number of entries of dir whose name contains `part` (all entries for ""). */
static size_t count_entries(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (strstr(e->d_name, part) != NULL)
            n++;
    }
    closedir(d);
    return n;
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | b[k];
    return v;
}

static void put_le64(unsigned char *b, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)(v >> (8 * k));
}

/* The spec's names and sizes, written out here rather than taken from st.c. */
static const char *const spec_dtype[] = {"F32", "F64", "I64", "U64", "U8"};
static const size_t spec_size[] = {4, 8, 8, 8, 1};

static size_t numel(const mha_st_tensor *t)
{
    size_t n = 1;
    for (size_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* ---- the fixture: tensors of every dtype, awkward names, raw random bit patterns ------ */

enum { NT = 11 };
typedef struct fixture {
    float w[3 * 5], loss;
    double m[2 * 3 * 4], lr;
    int64_t ids[7];
    uint64_t rng[16];
    uint8_t u8a[13], u8b[3];
    mha_st_tensor t[NT];
    const char *mk[3], *mv[3];
} fixture;

static void fill_bits(void *p, size_t nbytes, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 7);
    unsigned char *b = p;
    for (size_t i = 0; i < nbytes; i++)
        b[i] = (unsigned char)mha_pcg32_next(&rng);
}

static void fixture_init(fixture *fx, uint64_t seed)
{
    memset(fx, 0, sizeof *fx);
    /* random bit patterns: NaNs with payloads, denormals and infinities included */
    fill_bits(fx->w, sizeof fx->w, seed + 1);
    fill_bits(fx->m, sizeof fx->m, seed + 2);
    fill_bits(fx->ids, sizeof fx->ids, seed + 3);
    fill_bits(fx->rng, sizeof fx->rng, seed + 4);
    fill_bits(fx->u8a, sizeof fx->u8a, seed + 5);
    fill_bits(fx->u8b, sizeof fx->u8b, seed + 6);
    fx->w[0] = -0.0f;
    fx->m[0] = -0.0;
    fx->loss = 0.125f + (float)seed;
    fx->lr = 3e-4;
    /* Sizes interleaved (U8, F32, F64, ...) so that the writer's layout is exercised. */
    const mha_st_tensor t[NT] = {
        {"emb.u8", MHA_ST_U8, 1, {13}, fx->u8a},
        {"w_q.weight", MHA_ST_F32, 2, {3, 5}, fx->w},
        {"odd \"name\" \\ with\ttab and \xc3\xb1", MHA_ST_U8, 1, {3}, fx->u8b},
        {"adam.m", MHA_ST_F64, 3, {2, 3, 4}, fx->m},
        {"rng", MHA_ST_U64, 4, {2, 2, 2, 2}, fx->rng},
        {"empty", MHA_ST_U8, 2, {0, 5}, NULL},
        {"loss", MHA_ST_F32, 0, {0}, &fx->loss},
        {"lr", MHA_ST_F64, 1, {1}, &fx->lr},
        {"ids", MHA_ST_I64, 1, {7}, fx->ids},
        {"empty.f64", MHA_ST_F64, 1, {0}, NULL},
        {"w_q.bias", MHA_ST_F32, 1, {5}, fx->w + 10},
    };
    memcpy(fx->t, t, sizeof t);
    fx->mk[0] = "format";
    fx->mv[0] = "pt";
    fx->mk[1] = "step";
    fx->mv[1] = "1234";
    fx->mk[2] = "note \"q\"";
    fx->mv[2] = "line1\nline2 \\ \xc3\xbcnicode";
}

static void save_fixture(const fixture *fx, const char *path)
{
    char err[256] = "";
    int rc = mha_st_save(path, fx->t, NT, fx->mk, fx->mv, 3, err, sizeof err);
    if (rc != MHA_OK)
        print_error("mha_st_save: %s\n", err);
    assert_int_equal(rc, MHA_OK);
}

/* Every tensor of fx is in f, bit for bit, aligned, in order; every metadata pair too. */
static void check_against_fixture(const mha_st_file *f, const fixture *fx)
{
    char err[256];
    assert_int_equal(mha_st_count(f), NT);
    for (size_t i = 0; i < NT; i++) {
        const mha_st_tensor *t = &fx->t[i];
        assert_string_equal(mha_st_name(f, i), t->name);
        const void *data = NULL;
        assert_int_equal(
            mha_st_get(f, t->name, t->dtype, t->ndim, t->shape, &data, err, sizeof err), MHA_OK);
        assert_non_null(data);
        assert_int_equal((uintptr_t)data % spec_size[t->dtype], 0);
        size_t nb = numel(t) * spec_size[t->dtype];
        if (nb > 0)
            assert_memory_equal(data, t->data, nb);
        mha_st_tensor d;
        assert_int_equal(mha_st_tensor_at(f, i, &d), MHA_OK);
        assert_string_equal(d.name, t->name);
        assert_int_equal(d.dtype, t->dtype);
        assert_int_equal(d.ndim, t->ndim);
        for (size_t k = 0; k < t->ndim; k++)
            assert_int_equal(d.shape[k], t->shape[k]);
        assert_ptr_equal(d.data, data);
    }
    assert_null(mha_st_name(f, NT));
    for (size_t k = 0; k < 3; k++)
        assert_string_equal(mha_st_meta(f, fx->mk[k]), fx->mv[k]);
    assert_null(mha_st_meta(f, "absent"));
}

/* ---- tests ------------------------------------------------------------------------------ */

/* Save + load returns every tensor of every dtype and every metadata pair bit for bit,
 * in order, with aligned data pointers; also with no metadata and with no tensors. */
static void st_roundtrip_bit_exact(void **state)
{
    (void)state;
    char path[600], err[256] = "";
    fixture fx;
    fixture_init(&fx, 11);
    path_in(path, sizeof path, "roundtrip.safetensors");
    save_fixture(&fx, path);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    check_against_fixture(f, &fx);
    mha_st_free(f);

    /* No metadata (NULL arrays allowed) */
    assert_int_equal(mha_st_save(path, fx.t, NT, NULL, NULL, 0, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(f), NT);
    assert_null(mha_st_meta(f, "format"));
    mha_st_free(f);

    /* No tensors, metadata only */
    assert_int_equal(mha_st_save(path, NULL, 0, fx.mk, fx.mv, 3, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(f), 0);
    assert_null(mha_st_name(f, 0));
    assert_string_equal(mha_st_meta(f, "step"), "1234");
    mha_st_free(f);
    mha_st_free(NULL);
    assert_int_equal(count_entries(g_dir, ".tmp."), 0);
}

/* The bytes follow the safetensors spec, checked without mha_st_load: 8-byte LE size N, a
 * header starting with '{' padded with spaces to a multiple of 8, the JSON keys, dtypes,
 * shapes and offsets; offsets contiguous from 0 covering the data section exactly, each a
 * multiple of its element size; the data bytes at those offsets are the tensors. */
static void st_file_matches_spec(void **state)
{
    (void)state;
    char path[600];
    fixture fx;
    fixture_init(&fx, 12);
    path_in(path, sizeof path, "spec.safetensors");
    save_fixture(&fx, path);
    size_t size;
    unsigned char *b = read_all(path, &size);
    assert_true(size >= 8);
    uint64_t n = le64(b);
    assert_true(n <= size - 8);
    assert_int_equal(n % 8, 0);
    assert_int_equal(b[8], '{');
    const char *hdr = (const char *)b + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    assert_non_null(root);
    assert_true(cJSON_IsObject(root));
    for (const char *p = end; p < hdr + n; p++)
        assert_int_equal(*p, ' ');
    assert_true(hdr + n - end < 8);

    /* keys: __metadata__ first, then the tensors in the caller's order */
    assert_int_equal(cJSON_GetArraySize(root), NT + 1);
    const cJSON *meta = root->child;
    assert_string_equal(meta->string, "__metadata__");
    assert_int_equal(cJSON_GetArraySize(meta), 3);
    for (size_t k = 0; k < 3; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, fx.mk[k]);
        assert_true(cJSON_IsString(v));
        assert_string_equal(v->valuestring, fx.mv[k]);
    }
    const unsigned char *data = b + 8 + n;
    size_t data_size = size - 8 - (size_t)n;
    uint64_t begins[NT], ends[NT], total = 0;
    const cJSON *e = meta->next;
    for (size_t i = 0; i < NT; i++, e = e->next) {
        const mha_st_tensor *t = &fx.t[i];
        assert_non_null(e);
        assert_string_equal(e->string, t->name);
        assert_int_equal(cJSON_GetArraySize(e), 3);
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        assert_true(cJSON_IsString(dt) && cJSON_IsArray(sh) && cJSON_IsArray(off));
        assert_string_equal(dt->valuestring, spec_dtype[t->dtype]);
        assert_int_equal(cJSON_GetArraySize(sh), t->ndim);
        for (size_t d = 0; d < t->ndim; d++)
            assert_true(cJSON_GetArrayItem(sh, (int)d)->valuedouble == (double)t->shape[d]);
        assert_int_equal(cJSON_GetArraySize(off), 2);
        begins[i] = (uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble;
        ends[i] = (uint64_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        size_t nb = numel(t) * spec_size[t->dtype];
        assert_int_equal(ends[i] - begins[i], nb);
        total += nb;
        assert_true(ends[i] <= data_size);
        assert_int_equal((8 + n + begins[i]) % spec_size[t->dtype], 0);
        if (nb > 0)
            assert_memory_equal(data + begins[i], t->data, nb);
    }
    assert_null(e);
    /* coverage: sort the non-empty ranges by begin; they must chain from 0 to data_size */
    uint64_t pos = 0;
    for (;;) {
        size_t next = NT;
        for (size_t i = 0; i < NT; i++)
            if (ends[i] > begins[i] && begins[i] == pos)
                next = i;
        if (next == NT)
            break;
        pos = ends[next];
    }
    assert_int_equal(pos, data_size);
    assert_int_equal(total, data_size); /* so the chain has no overlaps either */
    cJSON_Delete(root);
    free(b);
}

/* A file cut at any length 0..size−1 is refused with MHA_EFORMAT and a message. */
static void st_truncated_every_length(void **state)
{
    (void)state;
    char path[600], cut[600], err[256];
    fixture fx;
    fixture_init(&fx, 13);
    path_in(path, sizeof path, "full.safetensors");
    path_in(cut, sizeof cut, "cut.safetensors");
    save_fixture(&fx, path);
    size_t size;
    unsigned char *b = read_all(path, &size);
    for (size_t len = 0; len < size; len++) {
        write_bytes(cut, b, len);
        mha_st_file *f = (mha_st_file *)&fx; /* must be reset to NULL */
        err[0] = '\0';
        int rc = mha_st_load(cut, &f, err, sizeof err);
        if (rc != MHA_EFORMAT)
            print_error("length %zu of %zu: rc %d (%s)\n", len, size, rc, err);
        assert_int_equal(rc, MHA_EFORMAT);
        assert_null(f);
        assert_true(strlen(err) > 0);
    }
    free(b);
}

/* Property test: thousands of deterministic random mutations of a real file (byte
 * changes biased to the header, JSON-significant characters, inserted and deleted bytes,
 * digit changes that keep the JSON valid, size-field rewrites, truncation, extension).
 * Each mutant loads cleanly or is refused with MHA_EFORMAT; a loaded one is fully
 * consistent: every tensor's bytes can be read (ASan checks the bounds), mha_st_get agrees,
 * and the byte counts sum to the data section. Both outcomes must occur. */
static void st_fuzz_mutations(void **state)
{
    (void)state;
    char path[600], mut[600], err[256];
    fixture fx;
    fixture_init(&fx, 14);
    path_in(path, sizeof path, "fuzz_base.safetensors");
    path_in(mut, sizeof mut, "fuzz.safetensors");
    save_fixture(&fx, path);
    size_t size;
    unsigned char *base = read_all(path, &size);
    const size_t hdr_end = 8 + (size_t)le64(base);
    const size_t cap = 2 * size + 256;
    unsigned char *b = malloc(cap);
    assert_non_null(b);
    static const char json_chars[] = "{}[]\":,0123456789- \\u.eE";
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 2024, 5);
    size_t n_ok = 0, n_refused = 0;
    const int iters = 4000;
    for (int it = 0; it < iters; it++) {
        size_t len = size;
        memcpy(b, base, size);
        uint32_t nops = 1 + (mha_pcg32_next(&rng) % 3);
        for (uint32_t op = 0; op < nops; op++) {
            uint32_t r = mha_pcg32_next(&rng);
            /* position: 85% inside the header region [0, hdr_end), else anywhere */
            size_t span = (mha_pcg32_next(&rng) % 100 < 85 && hdr_end <= len) ? hdr_end : len;
            size_t pos = span ? mha_pcg32_next(&rng) % span : 0;
            switch (r % 9) {
            case 0: /* random byte */
                if (len)
                    b[pos] = (unsigned char)mha_pcg32_next(&rng);
                break;
            case 1: /* JSON-significant character */
                if (len)
                    b[pos] =
                        (unsigned char)json_chars[mha_pcg32_next(&rng) % (sizeof json_chars - 1)];
                break;
            case 2: /* insert 1..4 bytes */
            {
                size_t k = 1 + mha_pcg32_next(&rng) % 4;
                if (len + k <= cap) {
                    memmove(b + pos + k, b + pos, len - pos);
                    for (size_t j = 0; j < k; j++)
                        b[pos + j] = (unsigned char)
                            json_chars[mha_pcg32_next(&rng) % (sizeof json_chars - 1)];
                    len += k;
                }
                break;
            }
            case 3: /* delete 1..4 bytes */
            {
                size_t k = 1 + mha_pcg32_next(&rng) % 4;
                if (pos + k <= len) {
                    memmove(b + pos, b + pos + k, len - pos - k);
                    len -= k;
                }
                break;
            }
            case 4: /* change a digit of the header: the JSON stays valid */
            {
                for (size_t j = 0; j < len && j < hdr_end; j++) {
                    size_t q = (pos + j) % (hdr_end < len ? hdr_end : len);
                    if (q >= 8 && b[q] >= '0' && b[q] <= '9') {
                        b[q] = (unsigned char)('0' + mha_pcg32_next(&rng) % 10);
                        break;
                    }
                }
                break;
            }
            case 5: /* rewrite the size field: near the truth or anything */
                if (len >= 8) {
                    uint64_t v = le64(b);
                    uint32_t how = mha_pcg32_next(&rng) % 3;
                    v = how == 0   ? v + (uint64_t)(mha_pcg32_next(&rng) % 17) - 8
                        : how == 1 ? (uint64_t)mha_pcg32_next(&rng)
                                   : ((uint64_t)mha_pcg32_next(&rng) << 32) | mha_pcg32_next(&rng);
                    put_le64(b, v);
                }
                break;
            case 6: /* truncate */
                len = len ? mha_pcg32_next(&rng) % len : 0;
                break;
            case 7: /* extend with 1..16 random bytes */
            {
                size_t k = 1 + mha_pcg32_next(&rng) % 16;
                if (len + k <= cap) {
                    fill_bits(b + len, k, (uint64_t)it);
                    len += k;
                }
                break;
            }
            default: /* copy a chunk of the header over another place in it */
                if (hdr_end <= len && hdr_end > 16) {
                    size_t from = 8 + mha_pcg32_next(&rng) % (hdr_end - 8);
                    size_t k = 1 + mha_pcg32_next(&rng) % 12;
                    if (from + k <= len && pos + k <= len)
                        memmove(b + pos, b + from, k);
                }
                break;
            }
        }
        write_bytes(mut, b, len);
        mha_st_file *f = NULL;
        err[0] = '\0';
        int rc = mha_st_load(mut, &f, err, sizeof err);
        if (rc != MHA_OK && rc != MHA_EFORMAT)
            print_error("iteration %d: rc %d (%s)\n", it, rc, err);
        assert_true(rc == MHA_OK || rc == MHA_EFORMAT);
        if (rc == MHA_EFORMAT) {
            assert_null(f);
            assert_true(strlen(err) > 0);
            n_refused++;
            continue;
        }
        n_ok++;
        assert_true(len >= 8);
        size_t data_size = len - 8 - (size_t)le64(b), total = 0;
        for (size_t i = 0; i < mha_st_count(f); i++) {
            mha_st_tensor t;
            assert_int_equal(mha_st_tensor_at(f, i, &t), MHA_OK);
            assert_string_equal(t.name, mha_st_name(f, i));
            size_t nb = numel(&t) * spec_size[t.dtype];
            const unsigned char *p = t.data;
            unsigned sum = 0;
            for (size_t j = 0; j < nb; j++)
                sum += p[j];
            g_sink += sum; /* every byte read: out of bounds would trip ASan */
            const void *g = NULL;
            assert_int_equal(mha_st_get(f, t.name, t.dtype, t.ndim, t.shape, &g, err, sizeof err),
                             MHA_OK);
            assert_ptr_equal(g, t.data);
            assert_int_equal((uintptr_t)g % spec_size[t.dtype], 0);
            total += nb;
        }
        assert_int_equal(total, data_size);
        mha_st_free(f);
    }
    print_message("fuzz: %zu mutants loaded, %zu refused\n", n_ok, n_refused);
    assert_true(n_ok > 0);
    assert_true(n_refused > 0);
    free(b);
    free(base);
}

/* mha_st_get: wrong dtype → MHA_EFORMAT, wrong shape or rank → MHA_ESHAPE, unknown name →
 * MHA_ENOTFOUND, bad arguments → MHA_EINVAL; *data untouched on every error; the message
 * names the tensor with both descriptions. */
static void st_get_checks_dtype_and_shape(void **state)
{
    (void)state;
    char path[600], err[256];
    fixture fx;
    fixture_init(&fx, 15);
    path_in(path, sizeof path, "get.safetensors");
    save_fixture(&fx, path);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    const void *sentinel = &fx, *data = sentinel;
    const size_t s35[] = {3, 5}, s53[] = {5, 3}, s15[] = {15}, s1[] = {1}, s351[] = {3, 5, 1};

    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F64, 2, s35, &data, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "w_q.weight"));
    assert_non_null(strstr(err, "F32 [3,5]"));
    assert_non_null(strstr(err, "F64 [3,5]"));
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 2, s53, &data, err, sizeof err),
                     MHA_ESHAPE);
    assert_non_null(strstr(err, "[5,3]"));
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 1, s15, &data, err, sizeof err),
                     MHA_ESHAPE);
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 3, s351, &data, err, sizeof err),
                     MHA_ESHAPE);
    assert_int_equal(mha_st_get(f, "loss", MHA_ST_F32, 1, s1, &data, err, sizeof err), MHA_ESHAPE);
    assert_int_equal(mha_st_get(f, "lr", MHA_ST_F64, 0, NULL, &data, err, sizeof err), MHA_ESHAPE);
    assert_int_equal(
        mha_st_get(f, "ids", MHA_ST_U64, 1, (const size_t[]){7}, &data, err, sizeof err),
        MHA_EFORMAT);
    assert_int_equal(mha_st_get(f, "w_q", MHA_ST_F32, 2, s35, &data, err, sizeof err),
                     MHA_ENOTFOUND);
    assert_non_null(strstr(err, "w_q"));
    assert_int_equal(mha_st_get(NULL, "w_q.weight", MHA_ST_F32, 2, s35, &data, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_st_get(f, NULL, MHA_ST_F32, 2, s35, &data, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 5, s35, &data, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 2, NULL, &data, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_st_get(f, "w_q.weight", (mha_st_dtype)99, 2, s35, &data, err, sizeof err),
                     MHA_EINVAL);
    assert_ptr_equal(data, sentinel);
    /* and the right call works, with err NULL and data NULL allowed */
    assert_int_equal(mha_st_get(f, "loss", MHA_ST_F32, 0, NULL, &data, NULL, 0), MHA_OK);
    assert_memory_equal(data, &fx.loss, sizeof fx.loss);
    assert_int_equal(mha_st_get(f, "w_q.weight", MHA_ST_F32, 2, s35, NULL, NULL, 0), MHA_OK);
    mha_st_tensor t;
    assert_int_equal(mha_st_tensor_at(f, NT, &t), MHA_EINVAL);
    assert_int_equal(mha_st_tensor_at(NULL, 0, &t), MHA_EINVAL);
    assert_int_equal(mha_st_count(NULL), 0);
    assert_null(mha_st_name(NULL, 0));
    assert_null(mha_st_meta(NULL, "format"));
    assert_null(mha_st_meta(f, NULL));
    mha_st_free(f);
}

/* Write 8-byte size, json, `pad` spaces, then data_len bytes 0, 1, 2, ... */
static void write_raw(const char *path, const char *json, size_t pad, size_t data_len)
{
    size_t jl = strlen(json), n = jl + pad, total = 8 + n + data_len;
    unsigned char *b = malloc(total);
    assert_non_null(b);
    put_le64(b, n);
    memcpy(b + 8, json, jl);
    memset(b + 8 + jl, ' ', pad);
    for (size_t i = 0; i < data_len; i++)
        b[8 + n + i] = (unsigned char)i;
    write_bytes(path, b, total);
    free(b);
}

typedef struct bad_case {
    const char *json;
    size_t data_len;
    const char *msg; /* a part of the expected message */
} bad_case;

#define U8_4(name, b, e)                                                                           \
    "\"" name "\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[" #b "," #e "]}"

/* Hand-made headers that break one rule each are refused with MHA_EFORMAT and a message
 * that names the problem: overlapping, gapped, short, long or out-of-range offsets,
 * duplicate names and keys, unknown dtypes and keys, bad shapes and numbers, metadata
 * that is not strings, non-JSON, padding that is not whitespace, NUL and invalid UTF-8 in
 * names. */
static void st_refuses_bad_headers(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {"{" U8_4("a", 0, 4) "," U8_4("b", 2, 6) "}", 6, "overlap"},
        {"{" U8_4("a", 0, 4) "," U8_4("b", 6, 10) "}", 10, "belong to no tensor"},
        {"{" U8_4("a", 0, 4) "}", 6, "after the last tensor"},
        {"{" U8_4("a", 4, 8) "," U8_4("b", 0, 4) "}", 4, "run past the end"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[5,5],\"data_offsets\":[0,96]}}", 96, "needs 100"},
        {"{" U8_4("a", 0, 4) "," U8_4("a", 4, 8) "}", 8, "'a' appears twice"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "'k' appears twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
        {"{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         "appears twice"},
        {"{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
         "'I16' not supported"},
        {"{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "not supported"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,4]}}", 4,
         "more than 4"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4.0],\"data_offsets\":[0,4]}}", 4, "'.'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4e0],\"data_offsets\":[0,4]}}", 4, "'e'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[04],\"data_offsets\":[0,4]}}", 4, "leading zero"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":true,\"data_offsets\":[0,4]}}", 4, "'t'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":4,\"data_offsets\":[0,4]}}", 4, "not an array"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4],\"x\":[]}}", 4,
         "unknown key 'x'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4]}}", 4, "no 'data_offsets'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0]}}", 4, "[begin, end]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", 4, "[begin, end]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, "end before"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,9007199254740992]}}", 4,
         "2^53"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,8]}}",
         8, "overflows"},
        {"{\"a\":5}", 0, "not an object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
        {"{\"__metadata__\":[]}", 0, "__metadata__ is not an object"},
        {"[]", 0, "does not start with '{'"},
        {" {}", 0, "does not start with '{'"},
        {"{}x", 0, "after the JSON object"},
        {"{\"a\":}", 0, "not a valid JSON"},
        {"{\"a\":{}", 0, "not closed"},
        {"{\"a", 0, "unterminated string"},
        {"{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "NUL"},
        {"{\"a\\q\":{}}", 0, "bad escape"},
        {"{\"a\\u00zz\":{}}", 0, "bad \\u escape"},
        {"{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         "control character"},
        {"{\"a\xc3\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "invalid UTF-8"},
        {"{\"a\xed\xa0\x80\":{}}", 0, "invalid UTF-8"}, /* a UTF-16 surrogate */
        /* overlong forms: lead bytes C0 and C1 never start valid UTF-8 */
        {"{\"a\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         "invalid UTF-8"},
        {"{\"a\xc1\xbf\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         "invalid UTF-8"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}\x01}", 4, "0x01"},
    };
    char path[600], err[256];
    path_in(path, sizeof path, "bad.safetensors");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t jl = strlen(cases[c].json);
        write_raw(path, cases[c].json, (8 - jl % 8) % 8, cases[c].data_len);
        mha_st_file *f = NULL;
        err[0] = '\0';
        int rc = mha_st_load(path, &f, err, sizeof err);
        if (rc != MHA_EFORMAT || strstr(err, cases[c].msg) == NULL)
            print_error("case %zu (%s): rc %d, message \"%s\", expected \"%s\"\n", c,
                        cases[c].json, rc, err, cases[c].msg);
        assert_int_equal(rc, MHA_EFORMAT);
        assert_null(f);
        assert_non_null(strstr(err, cases[c].msg));
    }
}

/* The size field is checked against the file before anything is allocated from it. */
static void st_refuses_bad_size_field(void **state)
{
    (void)state;
    char path[600], err[256];
    path_in(path, sizeof path, "size.safetensors");
    unsigned char b[24];
    memcpy(b + 8, "{}      ", 8);
    memset(b + 16, 0, 8);
    const uint64_t sizes[] = {UINT64_MAX, (uint64_t)1 << 63, 100000001, 17, 9, 0};
    const char *msgs[] = {"exceeds the limit", "exceeds the limit", "exceeds the limit",
                          "only 16 bytes", "after the JSON object", "does not start"};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        put_le64(b, sizes[k]);
        write_bytes(path, b, sizeof b);
        mha_st_file *f = NULL;
        err[0] = '\0';
        assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_EFORMAT);
        if (strstr(err, msgs[k]) == NULL)
            print_error("size %llu: \"%s\"\n", (unsigned long long)sizes[k], err);
        assert_non_null(strstr(err, msgs[k]));
        assert_null(f);
    }
    write_bytes(path, b, 7);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_EFORMAT);
    assert_non_null(strstr(err, "shorter than"));
}

/* Files other writers may produce are accepted: no padding (and so a misaligned F64,
 * which comes back aligned and intact), entries not in offset order, zero-size tensors
 * sharing an offset, newline padding, an empty header. */
static void st_accepts_other_writers(void **state)
{
    (void)state;
    char path[600], err[256];
    path_in(path, sizeof path, "other.safetensors");
    /* U8 at [0,1), F64 at [1,9): misaligned in the file whatever the header length */
    const char *json = "{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[1,9]},"
                       "\"e1\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[9,9]},"
                       "\"e2\":{\"dtype\":\"I64\",\"shape\":[2,0],\"data_offsets\":[9,9]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}";
    for (size_t pad = 0; pad < 8; pad++) {
        write_raw(path, json, pad, 9);
        mha_st_file *f = NULL;
        int rc = mha_st_load(path, &f, err, sizeof err);
        if (rc != MHA_OK)
            print_error("pad %zu: %s\n", pad, err);
        assert_int_equal(rc, MHA_OK);
        assert_int_equal(mha_st_count(f), 4);
        assert_string_equal(mha_st_name(f, 0), "x");
        assert_string_equal(mha_st_name(f, 3), "b");
        const void *d = NULL;
        assert_int_equal(
            mha_st_get(f, "x", MHA_ST_F64, 1, (const size_t[]){1}, &d, err, sizeof err), MHA_OK);
        assert_int_equal((uintptr_t)d % 8, 0);
        const unsigned char expect[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        assert_memory_equal(d, expect, 8);
        assert_int_equal(mha_st_get(f, "b", MHA_ST_U8, 0, NULL, &d, err, sizeof err), MHA_OK);
        assert_int_equal(*(const unsigned char *)d, 0);
        assert_int_equal(
            mha_st_get(f, "e2", MHA_ST_I64, 2, (const size_t[]){2, 0}, &d, err, sizeof err),
            MHA_OK);
        mha_st_free(f);
    }
    /* whitespace other than spaces after the object, and an empty header */
    write_raw(path, "{}\n\t\r ", 2, 0);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(f), 0);
    mha_st_free(f);
}

/* Loading a missing file or a directory is MHA_EIO; NULL arguments are MHA_EINVAL. */
static void st_load_io_errors(void **state)
{
    (void)state;
    char path[600], err[256];
    mha_st_file *f = (mha_st_file *)&path;
    path_in(path, sizeof path, "does_not_exist.safetensors");
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_EIO);
    assert_null(f);
    assert_non_null(strstr(err, "does_not_exist"));
    assert_int_equal(mha_st_load(g_dir, &f, err, sizeof err), MHA_EIO);
    assert_int_equal(mha_st_load(NULL, &f, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_st_load(path, NULL, NULL, 0), MHA_EINVAL);
}

/* Saving into a directory that does not exist fails with MHA_EIO, creates nothing. */
static void st_save_missing_directory(void **state)
{
    (void)state;
    char path[600], sub[600], err[256] = "";
    fixture fx;
    fixture_init(&fx, 16);
    path_in(sub, sizeof sub, "no_such_dir");
    path_in(path, sizeof path, "no_such_dir/ck.safetensors");
    size_t before = count_entries(g_dir, "");
    assert_int_equal(mha_st_save(path, fx.t, NT, fx.mk, fx.mv, 3, err, sizeof err), MHA_EIO);
    assert_non_null(strstr(err, "no_such_dir"));
    assert_int_equal(count_entries(g_dir, ""), before);
    struct stat sb;
    assert_int_not_equal(stat(sub, &sb), 0);
}

/* Saving over an existing (larger) file replaces it completely: the result is
 * byte-identical to the same save into a fresh path, and no temporary is left. */
static void st_save_replaces_existing(void **state)
{
    (void)state;
    char path[600], fresh[600], err[256];
    fixture a, small;
    fixture_init(&a, 17);
    fixture_init(&small, 18);
    path_in(path, sizeof path, "replace.safetensors");
    path_in(fresh, sizeof fresh, "fresh.safetensors");
    save_fixture(&a, path);
    size_t size_a;
    free(read_all(path, &size_a));
    assert_int_equal(mha_st_save(path, small.t, 3, small.mk, small.mv, 1, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_save(fresh, small.t, 3, small.mk, small.mv, 1, err, sizeof err),
                     MHA_OK);
    size_t size_p, size_f;
    unsigned char *p = read_all(path, &size_p), *q = read_all(fresh, &size_f);
    assert_true(size_p < size_a);
    assert_int_equal(size_p, size_f);
    assert_memory_equal(p, q, size_p);
    free(p);
    free(q);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(f), 3);
    assert_null(mha_st_meta(f, "step"));
    mha_st_free(f);
    assert_int_equal(count_entries(g_dir, ".tmp."), 0);
}

/* A failed save leaves the old file byte-identical and no temporary: invalid tensors and
 * metadata (MHA_EINVAL), byte counts that overflow (MHA_EOVERFLOW), and a write error
 * half-way (RLIMIT_FSIZE makes write() fail with EFBIG: MHA_EIO). */
static void st_save_failure_keeps_old_file(void **state)
{
    (void)state;
    char path[600], err[256];
    fixture fx;
    fixture_init(&fx, 19);
    path_in(path, sizeof path, "keep.safetensors");
    save_fixture(&fx, path);
    size_t size0;
    unsigned char *orig = read_all(path, &size0);

    mha_st_tensor bad[NT];
    const char *keys2[2] = {"k", "k"}, *vals2[2] = {"1", "2"}, *vnull[1] = {NULL};
    for (int variant = 0; variant < 13; variant++) {
        memcpy(bad, fx.t, sizeof bad);
        const char *const *mk = fx.mk, *const *mv = fx.mv;
        size_t nm = 3;
        int want = MHA_EINVAL;
        switch (variant) {
        case 0: bad[4].name = bad[1].name; break;              /* duplicate name         */
        case 1: bad[2].ndim = 5; break;                        /* too many dimensions    */
        case 2: bad[3].dtype = (mha_st_dtype)9; break;             /* unknown dtype          */
        case 3: bad[8].data = NULL; break;                     /* NULL data, 7 elements  */
        case 4: bad[0].name = "__metadata__"; break;           /* reserved name          */
        case 5: bad[0].name = "bad\xff"; break;                /* not UTF-8              */
        case 6: bad[6].name = NULL; break;                     /* NULL name              */
        case 7: mk = keys2; mv = vals2; nm = 2; break;         /* duplicate metadata key */
        case 8: mk = fx.mk; mv = vnull; nm = 1; break;         /* NULL metadata value    */
        case 10: bad[0].name = "bad\xc0\xaf"; break;         /* overlong '/' (C0)      */
        case 11: bad[0].name = "bad\xc1\xbf"; break;         /* overlong (C1)          */
        case 9:                                                /* 2^40·2^40·4 bytes      */
            bad[1].shape[0] = (size_t)1 << 40;
            bad[1].shape[1] = (size_t)1 << 40;
            want = MHA_EOVERFLOW;
            break;
        default:                                               /* a dimension >= 2^53    */
            bad[5].shape[1] = (size_t)1 << 53;
            want = MHA_EOVERFLOW;
            break;
        }
        err[0] = '\0';
        int rc = mha_st_save(path, bad, NT, mk, mv, nm, err, sizeof err);
        if (rc != want)
            print_error("variant %d: rc %d (%s)\n", variant, rc, err);
        assert_int_equal(rc, want);
        assert_true(strlen(err) > 0);
        size_t size1;
        unsigned char *now = read_all(path, &size1);
        assert_int_equal(size1, size0);
        assert_memory_equal(now, orig, size0);
        free(now);
    }

    /* I/O failure after the temporary was created */
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    fflush(stdout); /* nothing buffered may be written while the limit is low */
    fflush(stderr);
    lim = old_lim;
    lim.rlim_cur = 100; /* smaller than the new file */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    fixture other;
    fixture_init(&other, 20);
    int rc = mha_st_save(path, other.t, NT, other.mk, other.mv, 3, err, sizeof err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    signal(SIGXFSZ, old_sig);
    assert_int_equal(rc, MHA_EIO);
    assert_non_null(strstr(err, "cannot write"));
    size_t size1;
    unsigned char *now = read_all(path, &size1);
    assert_int_equal(size1, size0);
    assert_memory_equal(now, orig, size0);
    free(now);
    free(orig);
    assert_int_equal(count_entries(g_dir, ".tmp."), 0);

    /* bad top-level arguments */
    assert_int_equal(mha_st_save(NULL, fx.t, NT, NULL, NULL, 0, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_st_save("", fx.t, NT, NULL, NULL, 0, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_st_save(path, NULL, 2, NULL, NULL, 0, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_st_save(path, fx.t, NT, NULL, fx.mv, 1, NULL, 0), MHA_EINVAL);
}

/* ---- fixtures and main ------------------------------------------------------------------- */

/* A large file is judged by its header before its data is read: a 3 GiB sparse file
 * (no disk used) whose header is malformed, or whose valid header's tensors do not account
 * for the 3 GiB, is refused as EFORMAT after reading only the header (fast, no 3 GiB
 * allocation: the test runs under a 1 GiB address-space limit in a child process). A
 * FIFO is refused as not a regular file without waiting for a writer. */
static void st_load_checks_header_first(void **state)
{
    (void)state;
    char big[600], fifo[600];
    path_in(big, sizeof big, "big.safetensors");
    path_in(fifo, sizeof fifo, "fifo.safetensors");
    const char *headers[2] = {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]",
                              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"};
    const char *want[2] = {"header", "belong to no tensor"};
    for (int k = 0; k < 2; k++) {
        FILE *fp = fopen(big, "wb");
        assert_non_null(fp);
        const uint64_t n = strlen(headers[k]);
        unsigned char size[8];
        for (int i = 0; i < 8; i++)
            size[i] = (unsigned char)(n >> (8 * i));
        assert_int_equal(fwrite(size, 1, 8, fp), 8);
        assert_int_equal(fwrite(headers[k], 1, n, fp), n);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(truncate(big, (off_t)3 << 30), 0); /* sparse: 3 GiB of zeros */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) { /* a child under a 1 GiB address-space limit (not under ASan or
                           valgrind: they reserve far more address space themselves) */
#if !defined(__SANITIZE_ADDRESS__)
            const char *pre = getenv("LD_PRELOAD");
            if (!pre || !strstr(pre, "vgpreload")) {
                struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
                setrlimit(RLIMIT_AS, &rl);
            }
#endif
            mha_st_file *f = NULL;
            char err[256] = "";
            int st = mha_st_load(big, &f, err, sizeof err);
            _exit(st == MHA_EFORMAT && f == NULL && strstr(err, want[k]) ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(remove(big), 0);
    }
    assert_int_equal(mkfifo(fifo, 0600), 0);
    mha_st_file *f = NULL;
    char err[256] = "";
    assert_int_equal(mha_st_load(fifo, &f, err, sizeof err), MHA_EIO);
    assert_null(f);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(remove(fifo), 0);
}

static int group_setup(void **state)
{
    (void)state;
    return make_temp_dir(g_dir, sizeof g_dir, "test_st");
}

static int group_teardown(void **state)
{
    (void)state;
    return remove_tree(g_dir);
}

/* ---- CRC-32C (crc32c.h), the checkpoints' checksum ---- */

/* The bit-at-a-time definition: reflected, polynomial 0x82F63B78, inverted in and out. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

/* The published check value crc32c("123456789") = 0xE3069283 and the iSCSI test vectors
 * of RFC 3720 (B.4: 32 bytes of zeros, of 0xFF, ascending); crc32c (the CPU's CRC32
 * instruction where it has SSE4.2) and the table version both equal the bitwise definition
 * at every length 0..300 and alignment 0..7, and chaining two calls (of either) equals one
 * call on the whole. */
static void st_crc32c_check_values(void **state)
{
    (void)state;
    assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c_table(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c(0, "", 0), 0);
    unsigned char b[32 + 300 + 8];
    memset(b, 0, 32);
    assert_int_equal(crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xFF, 32);
    assert_int_equal(crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    assert_int_equal(crc32c(0, b, 32), 0x46DD794Eu);
    fill_bits(b, sizeof b, 99);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            const uint32_t want = crc32c_bitwise(b + off, n);
            if (crc32c(0, b + off, n) != want)
                fail_msg("crc32c (%s) of %zu bytes at offset %zu", crc32c_impl(), n, off);
            if (crc32c_table(0, b + off, n) != want)
                fail_msg("crc32c_table of %zu bytes at offset %zu", n, off);
            if (crc32c_table(crc32c(0, b + off, n / 3), b + off + n / 3, n - n / 3) != want)
                fail_msg("crc32c then crc32c_table over %zu bytes at offset %zu", n, off);
            if (crc32c(crc32c(0, b + off, n / 3), b + off + n / 3, n - n / 3) != want)
                fail_msg("chained crc32c of %zu bytes at offset %zu", n, off);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(st_roundtrip_bit_exact),
        cmocka_unit_test(st_crc32c_check_values),
        cmocka_unit_test(st_file_matches_spec),
        cmocka_unit_test(st_truncated_every_length),
        cmocka_unit_test(st_fuzz_mutations),
        cmocka_unit_test(st_get_checks_dtype_and_shape),
        cmocka_unit_test(st_refuses_bad_headers),
        cmocka_unit_test(st_refuses_bad_size_field),
        cmocka_unit_test(st_accepts_other_writers),
        cmocka_unit_test(st_load_io_errors),
        cmocka_unit_test(st_load_checks_header_first),
        cmocka_unit_test(st_save_missing_directory),
        cmocka_unit_test(st_save_replaces_existing),
        cmocka_unit_test(st_save_failure_keeps_old_file),
    };
    return cmocka_run_group_tests_name("st", tests, group_setup, group_teardown);
}
