/*
 * Parity of the C encoder–decoder (include/mha_s2s.h) with the PyTorch definition of the
 * same model (tools/s2s_torch.py), on the committed fixtures written in float64 by
 * tools/make_s2s_fixtures.py (its docstring lists every tensor and metadata key):
 *   tests/fixtures/s2s_parity.safetensors         tied read-out, cases a and b
 *   tests/fixtures/s2s_parity_untied.safetensors  own out.weight, case a
 * Case a: S 6 > T 5, sources of lengths {6,3,1}, unscored targets, label smoothing 0.1;
 * case b: S 3 < T 5, plain cross-entropy. All tests are named s2s_parity_*.
 *
 * The model is built from the fixture's config (dropout 0, the case's label smoothing) in
 * float64 and float32 (STORED attention, and RECOMPUTE for a few cases), every parameter
 * is copied in by its state_dict name (mhad_s2s_tensor_find), and the case is run forward
 * (evaluation mode) and backward from zeroed gradients. Compared per tensor, as
 * tests/test_gpt_parity.c does:
 *   max |C − torch| <= rtol × scale,   scale = largest |element| of the torch tensor,
 *   rtol = 1e-10 (float64), 1e-4 (float32),
 * for the encoder output (mhad_s2s_memory, padded source rows included: they are computed
 * on both sides, attending to the real positions), the logits, the loss and every
 * gradient. One exception: every attention's w_k.bias gradient (encoder attn, decoder
 * self_attn and cross_attn) is 0 in exact arithmetic (adding q·b_k to all the scores of a
 * row leaves its softmax unchanged, masked scores included), so both sides return rounding
 * noise; its scale is the largest |element| of the same attention's w_k.weight gradient.
 *
 * The typed half (run one case in one precision) is this file included into itself twice
 * (S2S_PARITY_TYPED), so that it is written once.
 */
#ifndef S2S_PARITY_TYPED

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"
#include "mha_s2s.h"
#include "mha_safetensors.h"

#define FIXTURE_TIED MHA_SOURCE_DIR "/tests/fixtures/s2s_parity.safetensors"
#define FIXTURE_UNTIED MHA_SOURCE_DIR "/tests/fixtures/s2s_parity_untied.safetensors"

enum { MAX_PARAMS = 128, MAX_CASES = 4 };

static const double RTOL_F64 = 1e-10, RTOL_F32 = 1e-4;

/* One loaded fixture file and what its metadata says. */
typedef struct fixture {
    mha_st_file *f;
    const char *path;
    mha_s2s_config cfg;       /* dropout 0, threads 2; label_smoothing set per case */
    size_t batch;
    size_t n_params;          /* tensors named in "param_names", in C order          */
    char *names_buf;          /* owned copy of "param_names", split at ','           */
    const char *names[MAX_PARAMS];
    size_t n_cases;
    char *cases_buf;          /* owned copy of "cases", split at ','                 */
    const char *cases[MAX_CASES];
} fixture;

typedef struct fixtures {
    fixture tied, untied;
} fixtures;

/* What one precision's run of a case gives, widened to double (owned by the caller). */
typedef struct case_result {
    double *memory;           /* [B, S, C]  */
    double *logits;           /* [B, T, Vt] */
    double loss;
    size_t scored;
    double *grad[MAX_PARAMS]; /* fixture order (param_names), each its tensor's numel */
} case_result;

/* ---- fixture access ------------------------------------------------------------------ */

static const char *fx_meta(const fixture *fx, const char *key)
{
    const char *v = mha_st_meta(fx->f, key);
    if (v == NULL)
        fail_msg("%s: no metadata key \"%s\"", fx->path, key);
    return v;
}

static size_t fx_size(const fixture *fx, const char *key)
{
    const char *v = fx_meta(fx, key);
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*v == '\0' || *end != '\0')
        fail_msg("%s: metadata %s = \"%s\" is not an integer", fx->path, key, v);
    return (size_t)x;
}

static double fx_double(const fixture *fx, const char *key)
{
    const char *v = fx_meta(fx, key);
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0')
        fail_msg("%s: metadata %s = \"%s\" is not a number", fx->path, key, v);
    return x;
}

/* Metadata "<k>.<key>" as a size or a number. */
static size_t case_size(const fixture *fx, const char *k, const char *key)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", k, key);
    return fx_size(fx, full);
}

static double case_double(const fixture *fx, const char *k, const char *key)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", k, key);
    return fx_double(fx, full);
}

/* Tensor prefix+name, F64 of exactly this shape (borrowed, valid until mha_st_free). */
static const double *fx_tensor(const fixture *fx, const char *prefix, const char *name,
                               size_t ndim, const size_t *shape)
{
    char full[192], err[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const void *data = NULL;
    if (mha_st_get(fx->f, full, MHA_ST_F64, ndim, shape, &data, err, sizeof err) != MHA_OK)
        fail_msg("%s: %s", fx->path, err);
    return data;
}

/* I64 tensor "<k>.<name>" of shape [n] or [B, n] (ndim 1 or 2) into int64 (borrowed). */
static const int64_t *fx_ids(const fixture *fx, const char *k, const char *name, size_t ndim,
                             const size_t *shape)
{
    char full[96], err[256];
    snprintf(full, sizeof full, "%s.%s", k, name);
    const void *data = NULL;
    if (mha_st_get(fx->f, full, MHA_ST_I64, ndim, shape, &data, err, sizeof err) != MHA_OK)
        fail_msg("%s: %s", fx->path, err);
    return data;
}

/* Split an owned copy of metadata `key` at ',' into out[<= cap]; returns the count. */
static size_t fx_list(const fixture *fx, const char *key, char **buf, const char **out,
                      size_t cap)
{
    const char *v = fx_meta(fx, key);
    *buf = malloc(strlen(v) + 1);
    assert_non_null(*buf);
    strcpy(*buf, v);
    size_t n = 0;
    for (char *s = *buf, *comma; s != NULL; s = comma ? comma + 1 : NULL) {
        comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        assert_true(n < cap);
        out[n++] = s;
    }
    return n;
}

static void fixture_load(fixture *fx, const char *path)
{
    char err[256];
    fx->path = path;
    if (mha_st_load(path, &fx->f, err, sizeof err) != MHA_OK)
        fail_msg("cannot load %s: %s", path, err);
    assert_string_equal(fx_meta(fx, "format"), "mha-s2s-parity 1");
    fx->cfg = (mha_s2s_config){.src_vocab = fx_size(fx, "src_vocab"),
                               .tgt_vocab = fx_size(fx, "tgt_vocab"),
                               .src_context = fx_size(fx, "src_context"),
                               .tgt_context = fx_size(fx, "tgt_context"),
                               .enc_layers = fx_size(fx, "enc_layers"),
                               .dec_layers = fx_size(fx, "dec_layers"),
                               .heads = fx_size(fx, "heads"),
                               .dim = fx_size(fx, "dim"),
                               .mlp_dim = fx_size(fx, "mlp_dim"),
                               .ln_eps = fx_double(fx, "ln_eps"),
                               .untied = (int)fx_size(fx, "untied"),
                               .attn_dropout = 0.0,
                               .resid_dropout = 0.0,
                               .label_smoothing = 0.0,
                               .seed = 1,
                               .threads = 2,
                               .attn_mode = MHA_ATTN_STORED};
    fx->batch = fx_size(fx, "batch");
    fx->n_params = fx_list(fx, "param_names", &fx->names_buf, fx->names, MAX_PARAMS);
    fx->n_cases = fx_list(fx, "cases", &fx->cases_buf, fx->cases, MAX_CASES);
}

static void fixture_free(fixture *fx)
{
    mha_st_free(fx->f);
    free(fx->names_buf);
    free(fx->cases_buf);
}

static int fixtures_setup(void **state)
{
    fixtures *fs = calloc(1, sizeof *fs);
    assert_non_null(fs);
    fixture_load(&fs->tied, FIXTURE_TIED);
    fixture_load(&fs->untied, FIXTURE_UNTIED);
    *state = fs;
    return 0;
}

static int fixtures_teardown(void **state)
{
    fixtures *fs = *state;
    fixture_free(&fs->tied);
    fixture_free(&fs->untied);
    free(fs);
    return 0;
}

/* The ids of case k, validated against the config, as the C API wants them (owned). */
typedef struct case_ids {
    size_t S, T;
    int32_t *src, *tgt_in, *targets;
    size_t *src_len;
} case_ids;

static case_ids case_ids_load(const fixture *fx, const char *k)
{
    const size_t B = fx->batch;
    case_ids c = {.S = case_size(fx, k, "src_seq_len"), .T = case_size(fx, k, "tgt_seq_len")};
    const size_t ss[2] = {B, c.S}, ts[2] = {B, c.T}, bs[1] = {B};
    const int64_t *src = fx_ids(fx, k, "src", 2, ss), *len = fx_ids(fx, k, "src_len", 1, bs);
    const int64_t *tin = fx_ids(fx, k, "tgt_in", 2, ts), *tg = fx_ids(fx, k, "targets", 2, ts);
    c.src = malloc(B * c.S * sizeof(int32_t));
    c.tgt_in = malloc(B * c.T * sizeof(int32_t));
    c.targets = malloc(B * c.T * sizeof(int32_t));
    c.src_len = malloc(B * sizeof(size_t));
    assert_true(c.src && c.tgt_in && c.targets && c.src_len);
    for (size_t i = 0; i < B * c.S; i++) {
        assert_true(src[i] >= 0 && src[i] < (int64_t)fx->cfg.src_vocab);
        c.src[i] = (int32_t)src[i];
    }
    for (size_t b = 0; b < B; b++) {
        assert_true(len[b] >= 1 && len[b] <= (int64_t)c.S);
        c.src_len[b] = (size_t)len[b];
    }
    for (size_t i = 0; i < B * c.T; i++) {
        assert_true(tin[i] >= 0 && tin[i] < (int64_t)fx->cfg.tgt_vocab);
        assert_true(tg[i] >= -1 && tg[i] < (int64_t)fx->cfg.tgt_vocab);
        c.tgt_in[i] = (int32_t)tin[i];
        c.targets[i] = (int32_t)tg[i];
    }
    return c;
}

static void case_ids_free(case_ids *c)
{
    free(c->src);
    free(c->tgt_in);
    free(c->targets);
    free(c->src_len);
}

/* ---- the typed half: one case in one precision ---------------------------------------- */

#define S2S_PARITY_TYPED
#define REAL double
#define MHA_X(n) mhad_##n
#define SFX(n) n##_f64
#include "test_s2s_parity.c"
#undef REAL
#undef MHA_X
#undef SFX

#define REAL float
#define MHA_X(n) mha_##n
#define SFX(n) n##_f32
#include "test_s2s_parity.c"
#undef REAL
#undef MHA_X
#undef SFX
#undef S2S_PARITY_TYPED

/* ---- comparisons --------------------------------------------------------------------- */

static double max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

static int zero_in_exact_arithmetic(const char *name)
{
    const char *suffix = "w_k.bias";
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

/* Fails unless max |got − ref| <= rtol·scale; the message names the tensor, the worst
 * element and the ratio. */
static void check_tensor(const char *what, const char *name, const double *got,
                         const double *ref, size_t n, double scale, double rtol)
{
    double worst = -1.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        if (!(d <= worst)) { /* NaN counts as worst */
            worst = d;
            at = i;
            if (isnan(d))
                break;
        }
    }
    if (!(worst <= rtol * scale))
        fail_msg("%s %s: max |diff| %.3g at element %zu (C %.17g, torch %.17g) = %.3g x scale "
                 "%.3g > rtol %.0e",
                 what, name, worst, at, got[at], ref[at], worst / scale, scale, rtol);
}

/* Run case k of fx in one precision and compare everything with the fixture. */
static void check_case(const fixture *fx, const char *k, int f32, mha_attn_mode mode)
{
    const double rtol = f32 ? RTOL_F32 : RTOL_F64;
    const size_t B = fx->batch, C = fx->cfg.dim, Vt = fx->cfg.tgt_vocab;
    case_ids ids = case_ids_load(fx, k);
    const size_t S = ids.S, T = ids.T;
    case_result r = {0};
    if (f32)
        run_case_f32(fx, k, mode, &ids, &r);
    else
        run_case_f64(fx, k, mode, &ids, &r);
    char what[80], prefix[16];
    snprintf(what, sizeof what, "%s case %s %s%s:", fx->cfg.untied ? "untied" : "tied", k,
             f32 ? "float32" : "float64", mode == MHA_ATTN_RECOMPUTE ? " RECOMPUTE" : "");
    snprintf(prefix, sizeof prefix, "%s.", k);

    const size_t ms[3] = {B, S, C}, ls[3] = {B, T, Vt};
    const double *mem = fx_tensor(fx, prefix, "memory", 3, ms);
    check_tensor(what, "memory", r.memory, mem, B * S * C, max_abs(mem, B * S * C), rtol);
    const double *logits = fx_tensor(fx, prefix, "logits", 3, ls);
    check_tensor(what, "logits", r.logits, logits, B * T * Vt, max_abs(logits, B * T * Vt), rtol);
    const double *loss = fx_tensor(fx, prefix, "loss", 0, NULL);
    check_tensor(what, "loss", &r.loss, loss, 1, fabs(*loss), rtol);
    size_t scored = 0;
    for (size_t i = 0; i < B * T; i++)
        scored += ids.targets[i] >= 0;
    assert_int_equal(r.scored, scored);

    /* the reference gradients; w_k.bias on the scale of its sibling w_k.weight's */
    mhad_s2s *shape_of = NULL; /* tensor shapes from a float64 model of the same config */
    assert_int_equal(mhad_s2s_create(&shape_of, &fx->cfg, 1), MHA_OK);
    char gprefix[24];
    snprintf(gprefix, sizeof gprefix, "%s.grad.", k);
    for (size_t p = 0; p < fx->n_params; p++) {
        size_t i;
        mha_param_info info;
        assert_int_equal(mhad_s2s_tensor_find(shape_of, fx->names[p], &i), MHA_OK);
        assert_int_equal(mhad_s2s_tensor(shape_of, i, &info, NULL, NULL), MHA_OK);
        const double *g = fx_tensor(fx, gprefix, info.name, info.ndim, info.shape);
        double scale = max_abs(g, info.numel);
        if (zero_in_exact_arithmetic(info.name)) {
            char wname[128];
            mha_param_info wi;
            size_t wi_idx;
            snprintf(wname, sizeof wname, "%.*sweight", (int)(strlen(info.name) - 4), info.name);
            assert_int_equal(mhad_s2s_tensor_find(shape_of, wname, &wi_idx), MHA_OK);
            assert_int_equal(mhad_s2s_tensor(shape_of, wi_idx, &wi, NULL, NULL), MHA_OK);
            scale = max_abs(fx_tensor(fx, gprefix, wname, wi.ndim, wi.shape), wi.numel);
        }
        char gname[160];
        snprintf(gname, sizeof gname, "grad.%s", info.name);
        check_tensor(what, gname, r.grad[p], g, info.numel, scale, rtol);
    }
    mhad_s2s_destroy(shape_of);
    for (size_t p = 0; p < fx->n_params; p++)
        free(r.grad[p]);
    free(r.memory);
    free(r.logits);
    case_ids_free(&ids);
}

/* ---- tests --------------------------------------------------------------------------- */

/* Each fixture names exactly the model's tensors, in the model's order, with its shapes
 * (out.weight last, only in the untied file); param_count is their total; the cases are
 * the documented ones (tied a, b; untied a) with their sizes and label smoothing. */
static void s2s_parity_names_and_shapes(void **state)
{
    const fixtures *fs = *state;
    const fixture *all[2] = {&fs->tied, &fs->untied};
    for (int u = 0; u < 2; u++) {
        const fixture *fx = all[u];
        assert_int_equal(fx->cfg.untied, u);
        mhad_s2s *m = NULL;
        assert_int_equal(mhad_s2s_create(&m, &fx->cfg, fx->batch), MHA_OK);
        assert_int_equal(mhad_s2s_num_tensors(m), fx->n_params);
        size_t total = 0;
        for (size_t i = 0; i < fx->n_params; i++) {
            mha_param_info info;
            assert_int_equal(mhad_s2s_tensor(m, i, &info, NULL, NULL), MHA_OK);
            assert_string_equal(info.name, fx->names[i]);
            (void)fx_tensor(fx, "", info.name, info.ndim, info.shape); /* shape must match */
            total += info.numel;
        }
        assert_int_equal(strcmp(fx->names[fx->n_params - 1], "out.weight") == 0, u);
        size_t count = 0;
        assert_int_equal(mhad_s2s_param_count(m, &count), MHA_OK);
        assert_int_equal(count, total);
        mhad_s2s_destroy(m);
        assert_int_equal(fx->n_cases, u ? 1 : 2);
        assert_string_equal(fx->cases[0], "a");
        assert_close(case_double(fx, "a", "label_smoothing"), 0.1, 0, 1e-15);
        assert_true(case_size(fx, "a", "src_seq_len") > case_size(fx, "a", "tgt_seq_len"));
        if (!u) {
            assert_string_equal(fx->cases[1], "b");
            assert_true(case_double(fx, "b", "label_smoothing") == 0.0);
            assert_true(case_size(fx, "b", "src_seq_len") < case_size(fx, "b", "tgt_seq_len"));
        }
    }
}

/* Tied, case a (S > T, sources {6,3,1}, unscored targets, ε 0.1): float64, 1e-10. */
static void s2s_parity_tied_a_f64(void **state)
{
    check_case(&((const fixtures *)*state)->tied, "a", 0, MHA_ATTN_STORED);
}

/* Tied, case a in float32 (1e-4). */
static void s2s_parity_tied_a_f32(void **state)
{
    check_case(&((const fixtures *)*state)->tied, "a", 1, MHA_ATTN_STORED);
}

/* Tied, case b (S < T, plain cross-entropy): float64, 1e-10. */
static void s2s_parity_tied_b_f64(void **state)
{
    check_case(&((const fixtures *)*state)->tied, "b", 0, MHA_ATTN_STORED);
}

/* Tied, case b in float32 (1e-4). */
static void s2s_parity_tied_b_f32(void **state)
{
    check_case(&((const fixtures *)*state)->tied, "b", 1, MHA_ATTN_STORED);
}

/* Untied read-out (out.weight), case a: float64, 1e-10. */
static void s2s_parity_untied_a_f64(void **state)
{
    check_case(&((const fixtures *)*state)->untied, "a", 0, MHA_ATTN_STORED);
}

/* Untied read-out, case a in float32 (1e-4). */
static void s2s_parity_untied_a_f32(void **state)
{
    check_case(&((const fixtures *)*state)->untied, "a", 1, MHA_ATTN_STORED);
}

/* The memory-efficient attention mode (weights recomputed in backward, masks included)
 * gives the same: tied case a and case b, float64, 1e-10. */
static void s2s_parity_tied_recompute_f64(void **state)
{
    check_case(&((const fixtures *)*state)->tied, "a", 0, MHA_ATTN_RECOMPUTE);
    check_case(&((const fixtures *)*state)->tied, "b", 0, MHA_ATTN_RECOMPUTE);
}

/* RECOMPUTE, untied case a in float32 (1e-4). */
static void s2s_parity_untied_recompute_f32(void **state)
{
    check_case(&((const fixtures *)*state)->untied, "a", 1, MHA_ATTN_RECOMPUTE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(s2s_parity_names_and_shapes),
        cmocka_unit_test(s2s_parity_tied_a_f64),
        cmocka_unit_test(s2s_parity_tied_a_f32),
        cmocka_unit_test(s2s_parity_tied_b_f64),
        cmocka_unit_test(s2s_parity_tied_b_f32),
        cmocka_unit_test(s2s_parity_untied_a_f64),
        cmocka_unit_test(s2s_parity_untied_a_f32),
        cmocka_unit_test(s2s_parity_tied_recompute_f64),
        cmocka_unit_test(s2s_parity_untied_recompute_f32),
    };
    return cmocka_run_group_tests_name("s2s_parity", tests, fixtures_setup, fixtures_teardown);
}

#else /* S2S_PARITY_TYPED: included from above with REAL / MHA_X / SFX set */

/* Case k of fx in this precision: a model with the fixture's config (dropout 0, the
 * case's label smoothing, attention mode `mode`) and parameters, copied in by name;
 * forward in evaluation mode and backward from zeroed gradients; memory, logits, loss,
 * the scored count and every gradient (fixture order) into r, widened to double. */
static void SFX(run_case)(const fixture *fx, const char *k, mha_attn_mode mode,
                          const case_ids *ids, case_result *r)
{
    mha_s2s_config cfg = fx->cfg;
    cfg.attn_mode = mode;
    cfg.label_smoothing = case_double(fx, k, "label_smoothing");
    const size_t B = fx->batch, S = ids->S, T = ids->T, C = cfg.dim, Vt = cfg.tgt_vocab;
    MHA_X(s2s) *m = NULL;
    assert_int_equal(MHA_X(s2s_create)(&m, &cfg, B), MHA_OK);
    assert_int_equal(MHA_X(s2s_num_tensors)(m), fx->n_params);
    for (size_t p = 0; p < fx->n_params; p++) {
        size_t i;
        mha_param_info info;
        REAL *v = NULL;
        assert_int_equal(MHA_X(s2s_tensor_find)(m, fx->names[p], &i), MHA_OK);
        assert_int_equal(MHA_X(s2s_tensor)(m, i, &info, &v, NULL), MHA_OK);
        assert_string_equal(info.name, fx->names[p]);
        const double *ref = fx_tensor(fx, "", info.name, info.ndim, info.shape);
        for (size_t j = 0; j < info.numel; j++)
            v[j] = (REAL)ref[j];
    }
    assert_int_equal(MHA_X(s2s_zero_grad)(m), MHA_OK);
    r->loss = NAN;
    assert_int_equal(MHA_X(s2s_forward)(m, 0, B, S, ids->src, ids->src_len, T, ids->tgt_in,
                                        ids->targets, &r->loss),
                     MHA_OK);
    r->scored = MHA_X(s2s_scored)(m);
    size_t shape[3] = {0, 0, 0};
    const REAL *mem = MHA_X(s2s_memory)(m, shape);
    assert_non_null(mem);
    assert_true(shape[0] == B && shape[1] == S && shape[2] == C);
    const REAL *logits = MHA_X(s2s_logits)(m, shape);
    assert_non_null(logits);
    assert_true(shape[0] == B && shape[1] == T && shape[2] == Vt);
    r->memory = malloc(B * S * C * sizeof(double));
    r->logits = malloc(B * T * Vt * sizeof(double));
    assert_true(r->memory && r->logits);
    for (size_t j = 0; j < B * S * C; j++)
        r->memory[j] = mem[j];
    for (size_t j = 0; j < B * T * Vt; j++)
        r->logits[j] = logits[j];
    assert_int_equal(MHA_X(s2s_backward)(m), MHA_OK);
    for (size_t p = 0; p < fx->n_params; p++) {
        size_t i;
        mha_param_info info;
        REAL *g = NULL;
        assert_int_equal(MHA_X(s2s_tensor_find)(m, fx->names[p], &i), MHA_OK);
        assert_int_equal(MHA_X(s2s_tensor)(m, i, &info, NULL, &g), MHA_OK);
        r->grad[p] = malloc(info.numel * sizeof(double));
        assert_non_null(r->grad[p]);
        for (size_t j = 0; j < info.numel; j++)
            r->grad[p][j] = g[j];
    }
    MHA_X(s2s_destroy)(m);
}

#endif /* S2S_PARITY_TYPED */
