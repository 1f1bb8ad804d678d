/*
 * Saving and loading a model's parameters by their state_dict names (mha_gpt_save /
 * mha_gpt_load in include/mha_gpt.h, mha_s2s_save / mha_s2s_load in include/mha_s2s.h):
 * F32 round trips bit for bit, BF16 and F16 within half a unit in the last place of the
 * stored format, and every refusal (another configuration, a missing, extra or integer
 * tensor, a NaN or an infinity, a bad argument) leaves the model's parameters untouched
 * and names the tensor. Tests are named model_io_*.
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"

/* One model of either kind (exactly one non-NULL), so each check is written once. */
typedef struct tmodel {
    mha_gpt *g;
    mha_s2s *m;
} tmodel;

static size_t tm_count(tmodel t)
{
    return t.g ? mha_gpt_num_tensors(t.g) : mha_s2s_num_tensors(t.m);
}

static void tm_tensor(tmodel t, size_t i, mha_param_info *in, float **p)
{
    assert_int_equal(t.g ? mha_gpt_tensor(t.g, i, in, p, NULL)
                         : mha_s2s_tensor(t.m, i, in, p, NULL), MHA_OK);
}

static int tm_save(tmodel t, const char *path, mha_st_dtype dt, char *err, size_t errlen)
{
    static const char *const keys[1] = {"note"}, *const vals[1] = {"test_model_io"};
    return t.g ? mha_gpt_save(t.g, path, dt, keys, vals, 1, err, errlen)
               : mha_s2s_save(t.m, path, dt, keys, vals, 1, err, errlen);
}

static int tm_load(tmodel t, const char *path, char *err, size_t errlen)
{
    return t.g ? mha_gpt_load(t.g, path, err, errlen) : mha_s2s_load(t.m, path, err, errlen);
}

static void tm_destroy(tmodel t)
{
    mha_gpt_destroy(t.g);
    mha_s2s_destroy(t.m);
}

/* Every parameter uniform in [-0.5, 0.5) (values not exactly representable in 16 bits). */
static void tm_randomize(tmodel t, uint64_t seed)
{
    for (size_t i = 0; i < tm_count(t); i++) {
        mha_param_info in;
        float *p;
        tm_tensor(t, i, &in, &p);
        fill_uniform_f(p, in.numel, -0.5f, 0.5f, seed + 13 * i);
    }
}

/* All parameters, tensor after tensor, into an owned array (*n floats). */
static float *tm_snapshot(tmodel t, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < tm_count(t); i++) {
        mha_param_info in;
        float *p;
        tm_tensor(t, i, &in, &p);
        total += in.numel;
    }
    float *s = malloc(total * sizeof *s);
    assert_non_null(s);
    size_t off = 0;
    for (size_t i = 0; i < tm_count(t); i++) {
        mha_param_info in;
        float *p;
        tm_tensor(t, i, &in, &p);
        memcpy(s + off, p, in.numel * sizeof *p);
        off += in.numel;
    }
    *n = total;
    return s;
}

/* The model's tensors as an F32 file at path, with one change: tensor `skip` left out,
 * an extra 1-element tensor `extra` added, tensor `poison` with `bad` in its element 1,
 * or tensor `as_int` stored as I32 (each NULL for none). */
static void tm_write_variant(tmodel t, const char *path, const char *skip, const char *extra,
                             const char *poison, float bad, const char *as_int)
{
    const size_t n = tm_count(t);
    mha_st_tensor *st = calloc(n + 1, sizeof *st);
    float **copies = calloc(n, sizeof *copies);
    assert_non_null(st);
    assert_non_null(copies);
    static const float one = 1.0f;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        mha_param_info in;
        float *p;
        tm_tensor(t, i, &in, &p);
        if (skip && strcmp(in.name, skip) == 0)
            continue;
        copies[i] = malloc(in.numel * sizeof(float));
        assert_non_null(copies[i]);
        memcpy(copies[i], p, in.numel * sizeof(float));
        if (poison && strcmp(in.name, poison) == 0)
            copies[i][1] = bad;
        st[k++] = (mha_st_tensor){in.name, (as_int && strcmp(in.name, as_int) == 0)
                                               ? MHA_ST_I32 : MHA_ST_F32,
                                  in.ndim, {in.shape[0], in.ndim == 2 ? in.shape[1] : 0},
                                  copies[i]};
    }
    if (extra)
        st[k++] = (mha_st_tensor){extra, MHA_ST_F32, 1, {1}, &one};
    char err[256] = "";
    if (mha_st_save(path, st, k, NULL, NULL, 0, err, sizeof err) != MHA_OK)
        fail_msg("%s", err);
    for (size_t i = 0; i < n; i++)
        free(copies[i]);
    free(copies);
    free(st);
}

static mha_gpt *make_gpt(size_t layers, size_t dim, uint64_t seed)
{
    mha_gpt_config c = {.vocab = 11, .context = 8, .layers = layers, .heads = 2, .dim = dim,
                        .seed = seed, .threads = 1};
    mha_gpt *g = NULL;
    assert_int_equal(mha_gpt_create(&g, &c, 2), MHA_OK);
    return g;
}

static mha_s2s *make_s2s(size_t dec_layers, int untied, uint64_t seed)
{
    mha_s2s_config c = {.src_vocab = 7, .tgt_vocab = 9, .src_context = 6, .tgt_context = 5,
                        .enc_layers = 1, .dec_layers = dec_layers, .heads = 2, .dim = 8,
                        .untied = untied, .seed = seed, .threads = 1};
    mha_s2s *m = NULL;
    assert_int_equal(mha_s2s_create(&m, &c, 2), MHA_OK);
    return m;
}

/* a saved as dtype and loaded into b: F32 bit for bit; BF16 / F16 each element equal to a's
 * value rounded to that format (mha_st_from_f32), within half its unit in the last place. */
static void check_round_trip(tmodel a, tmodel b, mha_st_dtype dt, const char *dir)
{
    char path[320], err[256] = "";
    snprintf(path, sizeof path, "%s/model_%s.safetensors", dir, mha_st_dtype_name(dt));
    tm_randomize(a, 101);
    if (tm_save(a, path, dt, err, sizeof err) != MHA_OK)
        fail_msg("save: %s", err);
    if (tm_load(b, path, err, sizeof err) != MHA_OK)
        fail_msg("load: %s", err);
    size_t na, nb;
    float *sa = tm_snapshot(a, &na), *sb = tm_snapshot(b, &nb);
    assert_int_equal(na, nb);
    if (dt == MHA_ST_F32)
        assert_memory_equal(sa, sb, na * sizeof *sa);
    const int frac_bits = dt == MHA_ST_BF16 ? 7 : 10;
    for (size_t i = 0; dt != MHA_ST_F32 && i < na; i++) {
        uint16_t h;
        float r;
        mha_st_from_f32(dt, &sa[i], &h, 1);
        mha_st_to_f32(dt, &h, &r, 1);
        /* half an ulp of the format at |a|; F16 below 2^-14 has fixed spacing 2^-24 */
        int e = ilogbf(sa[i]);
        if (dt == MHA_ST_F16 && e < -14)
            e = -14;
        const double half_ulp = ldexp(1.0, e - frac_bits - 1);
        if (sb[i] != r || fabs((double)sb[i] - sa[i]) > half_ulp)
            fail_msg("%s element %zu: %a saved, %a loaded (rounded: %a)",
                     mha_st_dtype_name(dt), i, (double)sa[i], (double)sb[i], (double)r);
    }
    free(sa);
    free(sb);
    /* the metadata went along */
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(mha_st_meta(f, "note"), "test_model_io");
    mha_st_free(f);
}

/* tm_load(b, path) fails with `code` and a message holding `name`; b is unchanged. */
static void check_refused(tmodel b, const char *path, int code, const char *name)
{
    size_t n0, n1;
    float *before = tm_snapshot(b, &n0);
    char err[256] = "";
    const int rc = tm_load(b, path, err, sizeof err);
    if (rc != code || strstr(err, name) == NULL)
        fail_msg("load of %s: status %d (%s), expected %d naming %s", path, rc, err, code, name);
    float *after = tm_snapshot(b, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0 * sizeof *before);
    free(before);
    free(after);
}

/* A GPT saved as F32, BF16 and F16 loads into a fresh model of the same configuration;
 * with F32 the forward loss is the same too. */
static void model_io_gpt_round_trip(void **state)
{
    (void)state;
    char dir[256];
    assert_int_equal(make_temp_dir(dir, sizeof dir, "model_io"), 0);
    tmodel a = {make_gpt(2, 8, 1), NULL}, b = {make_gpt(2, 8, 2), NULL};
    check_round_trip(a, b, MHA_ST_BF16, dir);
    check_round_trip(a, b, MHA_ST_F16, dir);
    check_round_trip(a, b, MHA_ST_F32, dir);
    const int32_t tok[2 * 5] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const int32_t tgt[2 * 5] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0};
    double la, lb;
    assert_int_equal(mha_gpt_forward(a.g, 0, 2, 5, tok, tgt, &la), MHA_OK);
    assert_int_equal(mha_gpt_forward(b.g, 0, 2, 5, tok, tgt, &lb), MHA_OK);
    assert_true(la == lb);
    tm_destroy(a);
    tm_destroy(b);
    assert_int_equal(remove_tree(dir), 0);
}

/* Every refusal of mha_gpt_load names the tensor and writes nothing into the model. */
static void model_io_gpt_refusals(void **state)
{
    (void)state;
    char dir[256], path[320], err[256] = "";
    assert_int_equal(make_temp_dir(dir, sizeof dir, "model_io"), 0);
    tmodel a = {make_gpt(2, 8, 1), NULL};
    tm_randomize(a, 7);
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    assert_int_equal(tm_save(a, path, MHA_ST_F32, err, sizeof err), MHA_OK);
    tmodel wide = {make_gpt(2, 12, 3), NULL}, deep = {make_gpt(3, 8, 4), NULL},
           shallow = {make_gpt(1, 8, 5), NULL}, b = {make_gpt(2, 8, 6), NULL};
    check_refused(wide, path, MHA_ESHAPE, "wte.weight");       /* another dim             */
    check_refused(deep, path, MHA_ENOTFOUND, "blocks.2.");     /* a layer the file lacks  */
    check_refused(shallow, path, MHA_EFORMAT, "blocks.1.");    /* a layer b does not have */
    tm_write_variant(a, path, "ln_f.bias", NULL, NULL, 0, NULL);
    check_refused(b, path, MHA_ENOTFOUND, "ln_f.bias");
    tm_write_variant(a, path, NULL, "head.weight", NULL, 0, NULL);
    check_refused(b, path, MHA_EFORMAT, "head.weight");
    tm_write_variant(a, path, NULL, NULL, "blocks.1.mlp.fc.weight", NAN, NULL);
    check_refused(b, path, MHA_ENONFINITE, "blocks.1.mlp.fc.weight");
    tm_write_variant(a, path, NULL, NULL, "wpe.weight", -INFINITY, NULL);
    check_refused(b, path, MHA_ENONFINITE, "wpe.weight");
    tm_write_variant(a, path, NULL, NULL, NULL, 0, "blocks.0.ln1.weight");
    check_refused(b, path, MHA_EFORMAT, "blocks.0.ln1.weight");
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    check_refused(b, path, MHA_EIO, "none.safetensors");
    /* bad arguments */
    assert_int_equal(mha_gpt_save(a.g, path, MHA_ST_F64, NULL, NULL, 0, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_gpt_save(a.g, path, MHA_ST_U8, NULL, NULL, 0, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_gpt_save(NULL, path, MHA_ST_F32, NULL, NULL, 0, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_gpt_save(a.g, NULL, MHA_ST_F32, NULL, NULL, 0, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_gpt_load(NULL, path, err, sizeof err), MHA_EINVAL);
    assert_int_equal(mha_gpt_load(b.g, NULL, err, sizeof err), MHA_EINVAL);
    snprintf(path, sizeof path, "%s/missing-dir/x.safetensors", dir);
    assert_int_equal(mha_gpt_save(a.g, path, MHA_ST_F32, NULL, NULL, 0, err, sizeof err),
                     MHA_EIO);
    tm_destroy(a);
    tm_destroy(wide);
    tm_destroy(deep);
    tm_destroy(shallow);
    tm_destroy(b);
    assert_int_equal(remove_tree(dir), 0);
}

/* The encoder–decoder, tied and untied, round trips as the GPT does. */
static void model_io_s2s_round_trip(void **state)
{
    (void)state;
    char dir[256];
    assert_int_equal(make_temp_dir(dir, sizeof dir, "model_io"), 0);
    for (int untied = 0; untied <= 1; untied++) {
        tmodel a = {NULL, make_s2s(2, untied, 1)}, b = {NULL, make_s2s(2, untied, 2)};
        check_round_trip(a, b, MHA_ST_BF16, dir);
        check_round_trip(a, b, MHA_ST_F32, dir);
        tm_destroy(a);
        tm_destroy(b);
    }
    assert_int_equal(remove_tree(dir), 0);
}

/* no_init: a model made without drawing its parameters (they differ from the drawn ones)
 * is, once loaded from a file, the model the file came from, bit for bit. */
static void model_io_s2s_no_init(void **state)
{
    (void)state;
    char dir[256], path[320], err[256] = "";
    assert_int_equal(make_temp_dir(dir, sizeof dir, "model_io"), 0);
    mha_s2s_config c = {.src_vocab = 7, .tgt_vocab = 9, .src_context = 6, .tgt_context = 5,
                        .enc_layers = 1, .dec_layers = 2, .heads = 2, .dim = 8, .seed = 5,
                        .threads = 1, .no_init = 1};
    tmodel z = {NULL, NULL}, a = {NULL, make_s2s(2, 0, 5)};
    assert_int_equal(mha_s2s_create(&z.m, &c, 2), MHA_OK);
    size_t nz, na;
    float *sz = tm_snapshot(z, &nz), *sa = tm_snapshot(a, &na);
    assert_int_equal(nz, na);
    size_t differ = 0;
    for (size_t i = 0; i < nz; i++)
        differ += sz[i] != sa[i]; /* not drawn as the same config drawn is */
    assert_true(differ > nz / 2);
    free(sz);
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    if (tm_save(a, path, MHA_ST_F32, err, sizeof err) != MHA_OK ||
        tm_load(z, path, err, sizeof err) != MHA_OK)
        fail_msg("%s", err);
    sz = tm_snapshot(z, &nz);
    assert_memory_equal(sz, sa, na * sizeof *sa);
    free(sz);
    free(sa);
    tm_destroy(z);
    tm_destroy(a);
    assert_int_equal(remove_tree(dir), 0);
}

/* mha_s2s_load refuses a tied model's file for an untied model and the other way round,
 * another depth, a NaN; the model is untouched. */
static void model_io_s2s_refusals(void **state)
{
    (void)state;
    char dir[256], tied_path[320], untied_path[320], path[320], err[256] = "";
    assert_int_equal(make_temp_dir(dir, sizeof dir, "model_io"), 0);
    tmodel tied = {NULL, make_s2s(2, 0, 1)}, untied = {NULL, make_s2s(2, 1, 2)},
           deep = {NULL, make_s2s(3, 0, 3)};
    snprintf(tied_path, sizeof tied_path, "%s/tied.safetensors", dir);
    snprintf(untied_path, sizeof untied_path, "%s/untied.safetensors", dir);
    snprintf(path, sizeof path, "%s/nan.safetensors", dir);
    assert_int_equal(tm_save(tied, tied_path, MHA_ST_F32, err, sizeof err), MHA_OK);
    assert_int_equal(tm_save(untied, untied_path, MHA_ST_BF16, err, sizeof err), MHA_OK);
    check_refused(untied, tied_path, MHA_ENOTFOUND, "out.weight");
    check_refused(tied, untied_path, MHA_EFORMAT, "out.weight");
    check_refused(deep, tied_path, MHA_ENOTFOUND, "decoder.2.");
    tm_write_variant(tied, path, NULL, NULL, "decoder.1.cross_attn.w_v.bias", NAN, NULL);
    check_refused(tied, path, MHA_ENONFINITE, "decoder.1.cross_attn.w_v.bias");
    assert_int_equal(mha_s2s_save(tied.m, path, MHA_ST_I64, NULL, NULL, 0, err, sizeof err),
                     MHA_EINVAL);
    assert_int_equal(mha_s2s_load(NULL, path, err, sizeof err), MHA_EINVAL);
    tm_destroy(tied);
    tm_destroy(untied);
    tm_destroy(deep);
    assert_int_equal(remove_tree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(model_io_gpt_round_trip),
        cmocka_unit_test(model_io_gpt_refusals),
        cmocka_unit_test(model_io_s2s_round_trip),
        cmocka_unit_test(model_io_s2s_refusals),
        cmocka_unit_test(model_io_s2s_no_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
