/*
 * Parity with the seed's PyTorch module, without torch: the fixtures
 * tests/fixtures/parity_<case>.txt were written by tools/make_parity_fixtures.py from
 * the seed's own MultiHeadAttention (tools/seed_mha.py) in float64; each holds the
 * configuration, the 8 parameters, the inputs, the mask, d_out, and the expected
 * output, softmax weights and every gradient. The file format is documented in the
 * script's docstring.
 *
 * Each parity_<case>_f64 / _f32 test loads its fixture, builds a module with the
 * fixture's parameters (mhad_ / mha_), runs forward and backward, and compares every
 * tensor. The one tolerance rule, per tensor a (actual) against e (expected):
 *
 *     ‖a − e‖∞ ≤ tol · max(‖e‖∞, 1e-300)      tol = 1e-10 (float64), 1e-5 (float32)
 *
 * (float32 runs on the fixture's inputs rounded to float and is compared against
 * the float64 reference.)
 *
 * One exception, grad.w_k.bias: it is identically ZERO in exact arithmetic. b_k adds
 * q_i·b_k/√hd to every score of row i, softmax is shift-invariant, masked scores are
 * filled (not shifted) and get no gradient, so Σ_j dS_ij = 0 and dL/db_k =
 * Σ_{b,j} dK = Σ_i q_i·Σ_j dS_ij/√hd = 0. The fixture's float64 values are torch's
 * roundoff (~1e-17) and carry no information, so a relative comparison against them
 * is meaningless (the C core's equally valid roundoff differs by 100%). For that
 * tensor both the fixture and the C result must be ~0 on the scale of its sibling:
 *
 *     ‖e‖∞ ≤ tol · ‖e(grad.w_k.weight)‖∞   and   ‖a‖∞ ≤ tol · ‖e(grad.w_k.weight)‖∞
 *
 * Before running, each case also checks the fixture against the C side's own
 * definitions: for causal / key_lengths cases the mask tensor torch got must equal
 * what the mha_mask rules say, and the dropout keep-mask must equal the dropout
 * stream evaluated with the library's mha_pcg32. After the forward, the call
 * counter must have advanced by one exactly when training.
 *
 * parity_parser_* prove the fixture parser rejects malformed files, so a damaged
 * fixture fails its test instead of comparing garbage.
 *
 * Shapes use the letters of mha.h: B, Sq, Sk, D, H.
 */
#include "test_util.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"

#ifndef MHA_SOURCE_DIR
#error "MHA_SOURCE_DIR must be defined (CMakeLists.txt passes it to every test)"
#endif

#define PARITY_TOL_F64 1e-10
#define PARITY_TOL_F32 1e-5
#define PARITY_TINY 1e-300 /* floor of ‖e‖∞ in the tolerance rule */

enum {
    FX_MAX_TENSORS = 64,
    FX_MAX_CONFIG = 32,
    FX_MAX_NDIM = 4,
    FX_ERRLEN = 2048,
};
#define FX_MAX_DIM ((size_t)1 << 20)
#define FX_MAX_NUMEL ((size_t)1 << 22)

static const char *const k_param_names[MHA_NUM_TENSORS] = {
    "w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias",
    "w_v.weight", "w_v.bias", "w_o.weight", "w_o.bias",
};

/* ===================================================================================
 * The fixture file: parsing and validation
 * =================================================================================== */

typedef struct fx_tensor {
    char name[64];
    size_t ndim;
    size_t dims[FX_MAX_NDIM];
    size_t numel;
    double *data; /* [numel], owned */
} fx_tensor;

typedef struct fx_config {
    char key[32];
    char value[64];
} fx_config;

typedef struct fixture {
    fx_config config[FX_MAX_CONFIG];
    size_t nconfig;
    fx_tensor tensors[FX_MAX_TENSORS];
    size_t ntensors;
} fixture;

static void fixture_free(fixture *fx)
{
    for (size_t t = 0; t < fx->ntensors; t++)
        free(fx->tensors[t].data);
    memset(fx, 0, sizeof *fx);
}

/* Split the next whitespace-separated token off *p (in place, NUL-terminating it).
 * Returns NULL at the end of the line. */
static char *next_token(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    if (*s == '\0') {
        *p = s;
        return NULL;
    }
    char *start = s;
    while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r')
        s++;
    if (*s != '\0')
        *s++ = '\0';
    *p = s;
    return start;
}

/* A decimal unsigned integer that is the whole token (no sign, no junk). */
static int parse_u64(const char *tok, uint64_t *v)
{
    if (tok == NULL || *tok < '0' || *tok > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(tok, &end, 10);
    if (errno != 0 || end == tok || *end != '\0')
        return -1;
    *v = (uint64_t)x;
    return 0;
}

static int parse_size(const char *tok, size_t *v)
{
    uint64_t x;
    if (parse_u64(tok, &x) != 0 || x > (uint64_t)SIZE_MAX)
        return -1;
    *v = (size_t)x;
    return 0;
}

/* A finite double that is the whole token. */
static int parse_double(const char *tok, double *v)
{
    if (tok == NULL)
        return -1;
    char *end = NULL;
    errno = 0;
    double x = strtod(tok, &end);
    if (end == tok || *end != '\0' || !isfinite(x) || (errno == ERANGE && fabs(x) > 1.0))
        return -1;
    *v = x;
    return 0;
}

#define FX_FAIL(...)                                                                       \
    do {                                                                                   \
        int off_ = snprintf(err, errlen, "line %zu: ", lineno);                            \
        if (off_ >= 0 && (size_t)off_ < errlen)                                            \
            snprintf(err + off_, errlen - (size_t)off_, __VA_ARGS__);                      \
        goto fail;                                                                         \
    } while (0)

/* Parse a fixture held in text[len] (need not be NUL-terminated) into *fx.
 * Grammar (see tools/make_parity_fixtures.py): '#' and blank lines are comments;
 * "mha-parity-fixture 1" first; then "config <key> <value>" and
 * "tensor <name> <ndim> <dims...>" followed by exactly numel finite numbers;
 * "end" last. Returns 0, or -1 with a message in err (and *fx empty). */
static int fixture_parse(const char *text, size_t len, fixture *fx, char *err, size_t errlen)
{
    memset(fx, 0, sizeof *fx);
    size_t lineno = 0;
    char *buf = malloc(len + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (strlen(buf) != len) {
        snprintf(err, errlen, "NUL byte in the file");
        free(buf);
        return -1;
    }

    enum { WANT_HEADER, BODY, VALUES, DONE } state = WANT_HEADER;
    fx_tensor *cur = NULL; /* tensor whose values are being read */
    size_t have = 0;       /* values of *cur read so far        */
    char *line = buf;
    while (line != NULL && *line != '\0') {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        char *next_line = nl != NULL ? nl + 1 : NULL;
        lineno++;
        char *p = line;
        char *tok = next_token(&p);
        line = next_line;
        if (tok == NULL || tok[0] == '#')
            continue; /* blank line or comment */

        if (state == DONE)
            FX_FAIL("content after 'end'");
        if (state == WANT_HEADER) {
            char *ver = next_token(&p);
            if (strcmp(tok, "mha-parity-fixture") != 0 || ver == NULL || strcmp(ver, "1") != 0 ||
                next_token(&p) != NULL)
                FX_FAIL("expected the header 'mha-parity-fixture 1'");
            state = BODY;
            continue;
        }
        if (state == VALUES) {
            for (; tok != NULL; tok = next_token(&p)) {
                if (have == cur->numel)
                    FX_FAIL("tensor %s: more than %zu values", cur->name, cur->numel);
                if (parse_double(tok, &cur->data[have]) != 0)
                    FX_FAIL("tensor %s: value %zu is not a finite number: '%.40s'", cur->name,
                            have, tok);
                have++;
            }
            if (have == cur->numel)
                state = BODY;
            continue;
        }
        /* state == BODY */
        if (strcmp(tok, "end") == 0) {
            if (next_token(&p) != NULL)
                FX_FAIL("junk after 'end'");
            state = DONE;
        } else if (strcmp(tok, "config") == 0) {
            char *key = next_token(&p), *value = next_token(&p);
            if (key == NULL || value == NULL || next_token(&p) != NULL)
                FX_FAIL("expected 'config <key> <value>'");
            if (strlen(key) >= sizeof fx->config[0].key ||
                strlen(value) >= sizeof fx->config[0].value)
                FX_FAIL("config key or value too long");
            for (size_t k = 0; k < fx->nconfig; k++)
                if (strcmp(fx->config[k].key, key) == 0)
                    FX_FAIL("config %s given twice", key);
            if (fx->nconfig == FX_MAX_CONFIG)
                FX_FAIL("too many config lines");
            strcpy(fx->config[fx->nconfig].key, key);
            strcpy(fx->config[fx->nconfig].value, value);
            fx->nconfig++;
        } else if (strcmp(tok, "tensor") == 0) {
            char *name = next_token(&p);
            if (name == NULL || strlen(name) >= sizeof fx->tensors[0].name)
                FX_FAIL("tensor: missing or too long name");
            for (size_t t = 0; t < fx->ntensors; t++)
                if (strcmp(fx->tensors[t].name, name) == 0)
                    FX_FAIL("tensor %s given twice", name);
            if (fx->ntensors == FX_MAX_TENSORS)
                FX_FAIL("too many tensors");
            fx_tensor *t = &fx->tensors[fx->ntensors];
            strcpy(t->name, name);
            if (parse_size(next_token(&p), &t->ndim) != 0 || t->ndim < 1 ||
                t->ndim > FX_MAX_NDIM)
                FX_FAIL("tensor %s: ndim must be 1..%d", name, FX_MAX_NDIM);
            t->numel = 1;
            for (size_t d = 0; d < t->ndim; d++) {
                if (parse_size(next_token(&p), &t->dims[d]) != 0 || t->dims[d] < 1 ||
                    t->dims[d] > FX_MAX_DIM)
                    FX_FAIL("tensor %s: dimension %zu missing or out of range", name, d);
                if (t->numel > FX_MAX_NUMEL / t->dims[d])
                    FX_FAIL("tensor %s: too many elements", name);
                t->numel *= t->dims[d];
            }
            if (next_token(&p) != NULL)
                FX_FAIL("tensor %s: more dimensions than ndim", name);
            t->data = malloc(t->numel * sizeof *t->data);
            if (t->data == NULL)
                FX_FAIL("out of memory");
            fx->ntensors++;
            cur = t;
            have = 0;
            state = VALUES;
        } else {
            FX_FAIL("unknown line starting with '%.40s'", tok);
        }
    }
    if (state == VALUES)
        FX_FAIL("end of file inside tensor %s (%zu of %zu values)", cur->name, have, cur->numel);
    if (state != DONE)
        FX_FAIL("missing 'end' line (truncated file?)");
    free(buf);
    return 0;
fail:
    free(buf);
    fixture_free(fx);
    return -1;
}

static int fixture_load(const char *path, fixture *fx, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    int rc = -1;
    while (text != NULL) {
        len += fread(text + len, 1, cap - len, f);
        if (len < cap)
            break;
        if (cap > ((size_t)64 << 20)) {
            snprintf(err, errlen, "%s: larger than 64 MiB", path);
            goto out;
        }
        char *bigger = realloc(text, cap * 2);
        if (bigger == NULL)
            break;
        text = bigger;
        cap *= 2;
    }
    if (text == NULL || len >= cap) { /* len >= cap only when realloc failed */
        snprintf(err, errlen, "out of memory reading %s", path);
        goto out;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "read error on %s", path);
        goto out;
    }
    rc = fixture_parse(text, len, fx, err, errlen);
out:
    free(text);
    fclose(f);
    return rc;
}

static const char *fixture_config(const fixture *fx, const char *key)
{
    for (size_t k = 0; k < fx->nconfig; k++)
        if (strcmp(fx->config[k].key, key) == 0)
            return fx->config[k].value;
    return NULL;
}

static const fx_tensor *fixture_tensor(const fixture *fx, const char *name)
{
    for (size_t t = 0; t < fx->ntensors; t++)
        if (strcmp(fx->tensors[t].name, name) == 0)
            return &fx->tensors[t];
    return NULL;
}

/* ===================================================================================
 * From a parsed fixture to the inputs of one parity run, checking every shape
 * =================================================================================== */

typedef struct parity_case {
    size_t B, Sq, Sk, D, H;
    int self_attn; /* x_context = NULL                                   */
    int training;
    double p;
    uint64_t seed, call_index;
    const double *param[MHA_NUM_TENSORS];       /* fixture weights, by k_param_names */
    const double *xq, *xc, *d_out;              /* [B,Sq,D], [B,Sk,D] or NULL, [B,Sq,D] */
    const fx_tensor *mask_tensor;               /* what torch got, or NULL        */
    const fx_tensor *keep;                      /* [B,H,Sq,Sk] 0/1, or NULL       */
    int has_mask;
    mha_mask mask;                              /* the C side's mask              */
    uint8_t *mask_u8;                           /* owned; mask.mask points here   */
    size_t *key_lengths;                        /* owned; [B] or NULL             */
    const double *exp_out, *exp_attn;           /* [B,Sq,D], [B,H,Sq,Sk]          */
    const double *exp_grad[MHA_NUM_TENSORS];    /* by k_param_names               */
    const double *exp_dxq, *exp_dxc;            /* [B,Sq,D], [B,Sk,D] or NULL     */
} parity_case;

static void parity_case_free(parity_case *pc)
{
    free(pc->mask_u8);
    free(pc->key_lengths);
    memset(pc, 0, sizeof *pc);
}

/* The tensor `name` with exactly the shape dims[ndim]; NULL and a message otherwise. */
static const fx_tensor *want_tensor(const fixture *fx, const char *name, size_t ndim,
                                    const size_t *dims, char *err, size_t errlen)
{
    const fx_tensor *t = fixture_tensor(fx, name);
    if (t == NULL) {
        snprintf(err, errlen, "fixture has no tensor %s", name);
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (size_t d = 0; ok && d < ndim; d++)
        ok = t->dims[d] == dims[d];
    if (!ok) {
        snprintf(err, errlen, "tensor %s has the wrong shape (ndim %zu, dims %zu %zu ...)", name,
                 t->ndim, t->dims[0], t->ndim > 1 ? t->dims[1] : 0);
        return NULL;
    }
    return t;
}

static int config_size(const fixture *fx, const char *key, size_t *v, char *err, size_t errlen)
{
    const char *s = fixture_config(fx, key);
    if (s == NULL || parse_size(s, v) != 0 || *v == 0 || *v > FX_MAX_DIM) {
        snprintf(err, errlen, "config %s missing or not a positive size", key);
        return -1;
    }
    return 0;
}

static int config_flag(const fixture *fx, const char *key, int *v, char *err, size_t errlen)
{
    const char *s = fixture_config(fx, key);
    if (s == NULL || (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)) {
        snprintf(err, errlen, "config %s missing or not 0/1", key);
        return -1;
    }
    *v = s[0] == '1';
    return 0;
}

static int config_u64(const fixture *fx, const char *key, uint64_t *v, char *err, size_t errlen)
{
    const char *s = fixture_config(fx, key);
    if (s == NULL || parse_u64(s, v) != 0) {
        snprintf(err, errlen, "config %s missing or not a decimal uint64", key);
        return -1;
    }
    return 0;
}

/* Every value of t is 0 or 1. */
static int all_binary(const fx_tensor *t)
{
    for (size_t e = 0; e < t->numel; e++)
        if (t->data[e] != 0.0 && t->data[e] != 1.0)
            return 0;
    return 1;
}

#define PC_FAIL(...)                                                                       \
    do {                                                                                   \
        snprintf(err, errlen, __VA_ARGS__);                                                \
        goto fail;                                                                         \
    } while (0)
#define PC_TRY(expr)                                                                       \
    do {                                                                                   \
        if ((expr) != 0)                                                                   \
            goto fail;                                                                     \
    } while (0)
#define PC_TENSOR(dst, name, ndim, ...)                                                    \
    do {                                                                                   \
        const size_t dims_[] = {__VA_ARGS__};                                              \
        const fx_tensor *t_ = want_tensor(fx, (name), (ndim), dims_, err, errlen);         \
        if (t_ == NULL)                                                                    \
            goto fail;                                                                     \
        (dst) = t_->data;                                                                  \
    } while (0)

/* Resolve and validate everything a run needs; -1 and a message on any problem. */
static int parity_case_from_fixture(const fixture *fx, parity_case *pc, char *err,
                                    size_t errlen)
{
    memset(pc, 0, sizeof *pc);
    PC_TRY(config_size(fx, "batch", &pc->B, err, errlen));
    PC_TRY(config_size(fx, "seq_q", &pc->Sq, err, errlen));
    PC_TRY(config_size(fx, "seq_k", &pc->Sk, err, errlen));
    PC_TRY(config_size(fx, "model_dim", &pc->D, err, errlen));
    PC_TRY(config_size(fx, "num_heads", &pc->H, err, errlen));
    PC_TRY(config_flag(fx, "self_attention", &pc->self_attn, err, errlen));
    PC_TRY(config_flag(fx, "training", &pc->training, err, errlen));
    PC_TRY(config_u64(fx, "seed", &pc->seed, err, errlen));
    PC_TRY(config_u64(fx, "call_index", &pc->call_index, err, errlen));
    const char *ps = fixture_config(fx, "dropout_p");
    if (ps == NULL || parse_double(ps, &pc->p) != 0 || !(pc->p >= 0.0 && pc->p <= 1.0))
        PC_FAIL("config dropout_p missing or outside [0, 1]");
    if (fixture_config(fx, "name") == NULL)
        PC_FAIL("config name missing");
    const char *c_mask = fixture_config(fx, "c_mask");
    if (c_mask == NULL)
        PC_FAIL("config c_mask missing");

    const size_t B = pc->B, Sq = pc->Sq, Sk = pc->Sk, D = pc->D, H = pc->H;
    if (D % H != 0)
        PC_FAIL("model_dim %zu is not a multiple of num_heads %zu", D, H);
    if (pc->self_attn && Sk != Sq)
        PC_FAIL("self-attention fixture with seq_k %zu != seq_q %zu", Sk, Sq);

    for (size_t k = 0; k < MHA_NUM_TENSORS; k++) {
        char gname[80];
        snprintf(gname, sizeof gname, "grad.%s", k_param_names[k]);
        if (k % 2 == 0) { /* weight [D, D] */
            PC_TENSOR(pc->param[k], k_param_names[k], 2, D, D);
            PC_TENSOR(pc->exp_grad[k], gname, 2, D, D);
        } else { /* bias [D] */
            PC_TENSOR(pc->param[k], k_param_names[k], 1, D);
            PC_TENSOR(pc->exp_grad[k], gname, 1, D);
        }
    }
    PC_TENSOR(pc->xq, "x_query", 3, B, Sq, D);
    PC_TENSOR(pc->d_out, "d_out", 3, B, Sq, D);
    PC_TENSOR(pc->exp_out, "out", 3, B, Sq, D);
    PC_TENSOR(pc->exp_attn, "attn", 4, B, H, Sq, Sk);
    PC_TENSOR(pc->exp_dxq, "grad.x_query", 3, B, Sq, D);
    if (pc->self_attn) {
        if (fixture_tensor(fx, "x_context") != NULL || fixture_tensor(fx, "grad.x_context"))
            PC_FAIL("self-attention fixture with an x_context tensor");
    } else {
        PC_TENSOR(pc->xc, "x_context", 3, B, Sk, D);
        PC_TENSOR(pc->exp_dxc, "grad.x_context", 3, B, Sk, D);
    }

    /* Dropout: the keep-mask the script derived from the stream (checked separately). */
    if (pc->training && pc->p > 0.0) {
        const size_t kdims[] = {B, H, Sq, Sk};
        pc->keep = want_tensor(fx, "keep", 4, kdims, err, errlen);
        if (pc->keep == NULL)
            goto fail;
        if (!all_binary(pc->keep))
            PC_FAIL("tensor keep is not 0/1");
    } else if (fixture_tensor(fx, "keep") != NULL) {
        PC_FAIL("keep tensor in a fixture without dropout");
    }

    /* The mask torch got, and how the C side says the same thing. */
    const fx_tensor *mt = fixture_tensor(fx, "mask");
    if (strcmp(c_mask, "none") == 0) {
        if (mt != NULL)
            PC_FAIL("c_mask none but the fixture has a mask tensor");
        return 0;
    }
    if (mt == NULL)
        PC_FAIL("c_mask %s but the fixture has no mask tensor", c_mask);
    if (mt->ndim != 4 || (mt->dims[0] != 1 && mt->dims[0] != B) ||
        (mt->dims[1] != 1 && mt->dims[1] != H) || mt->dims[2] != Sq || mt->dims[3] != Sk)
        PC_FAIL("mask must be [1 or B, 1 or H, Sq, Sk]");
    if (!all_binary(mt))
        PC_FAIL("mask values must be 0/1");
    pc->mask_tensor = mt;
    pc->has_mask = 1;
    if (strcmp(c_mask, "tensor") == 0) {
        pc->mask_u8 = malloc(mt->numel);
        if (pc->mask_u8 == NULL)
            PC_FAIL("out of memory");
        for (size_t e = 0; e < mt->numel; e++)
            pc->mask_u8[e] = (uint8_t)mt->data[e];
        pc->mask.mask = pc->mask_u8;
        pc->mask.mask_batch = mt->dims[0];
        pc->mask.mask_heads = mt->dims[1];
        return 0;
    }
    if (strcmp(c_mask, "causal") != 0 && strcmp(c_mask, "causal+key_lengths") != 0)
        PC_FAIL("unknown c_mask '%.20s'", c_mask);
    pc->mask.causal = 1;
    if (strcmp(c_mask, "causal+key_lengths") == 0) {
        const double *kl;
        PC_TENSOR(kl, "key_lengths", 1, B);
        pc->key_lengths = malloc(B * sizeof *pc->key_lengths);
        if (pc->key_lengths == NULL)
            PC_FAIL("out of memory");
        for (size_t b = 0; b < B; b++) {
            if (!(kl[b] >= 0.0 && kl[b] <= (double)Sk && kl[b] == floor(kl[b])))
                PC_FAIL("key_lengths[%zu] = %g is not an integer in [0, Sk]", b, kl[b]);
            pc->key_lengths[b] = (size_t)kl[b];
        }
        pc->mask.key_lengths = pc->key_lengths;
    }
    /* The C rules must say exactly what the tensor torch got says: masked iff
     * j > i (causal, top-left aligned) or j >= key_lengths[b]. */
    if (pc->key_lengths != NULL && mt->dims[0] != B)
        PC_FAIL("key_lengths fixture needs a [B,...] mask tensor");
    for (size_t mb = 0; mb < mt->dims[0]; mb++)
        for (size_t mh = 0; mh < mt->dims[1]; mh++)
            for (size_t i = 0; i < Sq; i++)
                for (size_t j = 0; j < Sk; j++) {
                    int kept = j <= i && (pc->key_lengths == NULL || j < pc->key_lengths[mb]);
                    double v = mt->data[((mb * mt->dims[1] + mh) * Sq + i) * Sk + j];
                    if (v != (double)kept)
                        PC_FAIL("mask tensor (%zu,%zu,%zu,%zu) = %g but the C rule says %d", mb,
                                mh, i, j, v, kept);
                }
    return 0;
fail:
    parity_case_free(pc);
    return -1;
}

/* ===================================================================================
 * One run of the C module, written once for both precisions
 * =================================================================================== */

/* What the C module produced, converted to double. All owned. */
typedef struct parity_result {
    double *out;   /* [B,Sq,D]                          */
    double *attn;  /* [B,H,Sq,Sk] from cache_attention   */
    double *grads; /* [4D² + 4D], the module's layout    */
    double *dxq;   /* [B,Sq,D]                          */
    double *dxc;   /* [B,Sk,D] (cross) or NULL          */
    size_t attn_shape[4];
    uint64_t call_index_after;
} parity_result;

static void parity_result_free(parity_result *r)
{
    free(r->out);
    free(r->attn);
    free(r->grads);
    free(r->dxq);
    free(r->dxc);
    memset(r, 0, sizeof *r);
}

#define PR_CALL(call)                                                                      \
    do {                                                                                   \
        int st_ = (call);                                                                  \
        if (st_ != MHA_OK) {                                                               \
            snprintf(err, errlen, "%s returned %s (%s)", #call, mha_status_name(st_),      \
                     mha_strerror(st_));                                                   \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

/* Defines FN(pc, res, err, errlen): copy the fixture's parameters into a module of
 * precision REAL (API prefix macro P), forward, zero_grad, backward; results into
 * *res as doubles. Returns 0, or -1 with a message (nothing leaks either way). */
#define DEFINE_PARITY_RUN(FN, REAL, P)                                                     \
    static int FN(const parity_case *pc, parity_result *res, char *err, size_t errlen)    \
    {                                                                                      \
        const size_t B = pc->B, Sq = pc->Sq, Sk = pc->Sk, D = pc->D, H = pc->H;            \
        const size_t nq = B * Sq * D, nc = B * Sk * D, na = B * H * Sq * Sk;              \
        const size_t nparam = 4 * D * D + 4 * D;                                           \
        int rc = -1;                                                                       \
        P(module) *m = NULL;                                                               \
        P(cache) *c = NULL;                                                                \
        REAL *xq = calloc(nq, sizeof *xq), *dout = calloc(nq, sizeof *dout);               \
        REAL *out = calloc(nq, sizeof *out), *dxq = calloc(nq, sizeof *dxq);               \
        REAL *xc = calloc(nc, sizeof *xc), *dxc = calloc(nc, sizeof *dxc);                 \
        memset(res, 0, sizeof *res);                                                       \
        res->out = calloc(nq, sizeof(double));                                             \
        res->attn = calloc(na, sizeof(double));                                            \
        res->grads = calloc(nparam, sizeof(double));                                       \
        res->dxq = calloc(nq, sizeof(double));                                             \
        res->dxc = pc->self_attn ? NULL : calloc(nc, sizeof(double));                      \
        if (!xq || !dout || !out || !dxq || !xc || !dxc || !res->out || !res->attn ||      \
            !res->grads || !res->dxq || (!pc->self_attn && !res->dxc)) {                   \
            snprintf(err, errlen, "out of memory");                                        \
            goto done;                                                                     \
        }                                                                                  \
        for (size_t e = 0; e < nq; e++) {                                                  \
            xq[e] = (REAL)pc->xq[e];                                                       \
            dout[e] = (REAL)pc->d_out[e];                                                  \
        }                                                                                  \
        for (size_t e = 0; !pc->self_attn && e < nc; e++)                                  \
            xc[e] = (REAL)pc->xc[e];                                                       \
                                                                                           \
        /* the module: config seed drives only dropout here (weights are overwritten) */  \
        mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = pc->p,              \
                          .seed = pc->seed, .threads = 0};                                 \
        PR_CALL(P(create)(&m, &cfg));                                                      \
        size_t count = 0;                                                                  \
        REAL *params = P(params)(m, &count);                                               \
        if (params == NULL || count != nparam) {                                           \
            snprintf(err, errlen, "params(): %zu elements, expected 4D²+4D = %zu", count,  \
                     nparam);                                                              \
            goto done;                                                                     \
        }                                                                                  \
        for (size_t k = 0; k < MHA_NUM_TENSORS; k++) {                                     \
            mha_tensor_info info;                                                          \
            PR_CALL(mha_tensor_info_find(D, k_param_names[k], &info));                     \
            size_t want = k % 2 == 0 ? D * D : D;                                          \
            if (info.numel != want || info.offset > nparam - want) {                       \
                snprintf(err, errlen, "tensor info of %s: offset %zu numel %zu",           \
                         k_param_names[k], info.offset, info.numel);                       \
                goto done;                                                                 \
            }                                                                              \
            for (size_t e = 0; e < want; e++)                                              \
                params[info.offset + e] = (REAL)pc->param[k][e];                           \
        }                                                                                  \
        if (pc->training)                                                                  \
            PR_CALL(P(set_call_index)(m, pc->call_index));                                 \
        PR_CALL(P(cache_create)(&c, m, B, Sq, Sk));                                        \
                                                                                           \
        PR_CALL(P(forward)(m, c, pc->training, B, Sq, xq, Sk, pc->self_attn ? NULL : xc,   \
                           pc->has_mask ? &pc->mask : NULL, out));                         \
        PR_CALL(P(get_call_index)(m, &res->call_index_after));                             \
        const REAL *w = NULL;                                                              \
        PR_CALL(P(cache_attention)(c, &w, res->attn_shape));                               \
        if (res->attn_shape[0] != B || res->attn_shape[1] != H || res->attn_shape[2] != Sq \
            || res->attn_shape[3] != Sk) {                                                 \
            snprintf(err, errlen, "cache_attention shape [%zu,%zu,%zu,%zu]",               \
                     res->attn_shape[0], res->attn_shape[1], res->attn_shape[2],           \
                     res->attn_shape[3]);                                                  \
            goto done;                                                                     \
        }                                                                                  \
        for (size_t e = 0; e < na; e++)                                                    \
            res->attn[e] = (double)w[e];                                                   \
                                                                                           \
        /* backward accumulates: zero the parameter gradients, dx buffers are calloc'd */ \
        PR_CALL(P(zero_grad)(m));                                                          \
        PR_CALL(P(backward)(m, c, xq, pc->self_attn ? NULL : xc, dout, dxq,                \
                            pc->self_attn ? NULL : dxc));                                  \
        const REAL *grads = P(grads)(m, &count);                                           \
        if (grads == NULL || count != nparam) {                                            \
            snprintf(err, errlen, "grads(): %zu elements, expected %zu", count, nparam);   \
            goto done;                                                                     \
        }                                                                                  \
        for (size_t e = 0; e < nparam; e++)                                                \
            res->grads[e] = (double)grads[e];                                              \
        for (size_t e = 0; e < nq; e++) {                                                  \
            res->out[e] = (double)out[e];                                                  \
            res->dxq[e] = (double)dxq[e];                                                  \
        }                                                                                  \
        for (size_t e = 0; !pc->self_attn && e < nc; e++)                                  \
            res->dxc[e] = (double)dxc[e];                                                  \
        rc = 0;                                                                            \
    done:                                                                                  \
        P(cache_destroy)(c);                                                               \
        P(destroy)(m);                                                                     \
        free(xq);                                                                          \
        free(dout);                                                                        \
        free(out);                                                                         \
        free(dxq);                                                                         \
        free(xc);                                                                          \
        free(dxc);                                                                         \
        if (rc != 0)                                                                       \
            parity_result_free(res);                                                       \
        return rc;                                                                         \
    }

#define PARITY_F64(n) mhad_##n
#define PARITY_F32(n) mha_##n
DEFINE_PARITY_RUN(parity_run_f64, double, PARITY_F64)
DEFINE_PARITY_RUN(parity_run_f32, float, PARITY_F32)

/* ===================================================================================
 * Comparison and the test driver
 * =================================================================================== */

/* ratio = ‖a − e‖∞ / max(‖e‖∞, PARITY_TINY) over n elements; NaN anywhere gives NaN
 * (which fails every ≤ test). *worst gets the index of the largest |a − e|. */
static double inf_ratio(const double *a, const double *e, size_t n, size_t *worst)
{
    double num = 0.0, den = 0.0;
    *worst = 0;
    for (size_t k = 0; k < n; k++) {
        double d = fabs(a[k] - e[k]);
        if (isnan(d))
            return NAN;
        if (d > num) {
            num = d;
            *worst = k;
        }
        if (fabs(e[k]) > den)
            den = fabs(e[k]);
    }
    return num / (den > PARITY_TINY ? den : PARITY_TINY);
}

typedef struct compare_log {
    double worst_ratio;
    char worst_name[96];
    int failures;
    const char *label; /* "parity <case> <precision>", prefixed to every failure line */
} compare_log;

static void compare_tensor(compare_log *log, const char *name, const double *a,
                           const double *e, size_t n, double tol)
{
    size_t at = 0;
    double r = inf_ratio(a, e, n, &at);
    if (!(r <= log->worst_ratio)) { /* also takes NaN */
        log->worst_ratio = r;
        snprintf(log->worst_name, sizeof log->worst_name, "%s", name);
    }
    if (!(r <= tol)) {
        log->failures++;
        print_error("%s: %s: ‖a−e‖∞/‖e‖∞ = %.3g > %.0e; worst element %zu: got %.17g, "
                    "expected %.17g\n",
                    log->label, name, r, tol, at, a[at], e[at]);
    }
}

/* A tensor that is zero in exact arithmetic (grad.w_k.bias, see the top comment):
 * ‖a‖∞ and ‖e‖∞ must both be ≤ tol · scale, scale = ‖expected sibling‖∞ > 0. */
static void compare_zero_tensor(compare_log *log, const char *name, const double *a,
                                const double *e, size_t n, const double *sibling, size_t nsib,
                                double tol)
{
    double scale = 0.0, amax = 0.0, emax = 0.0;
    for (size_t k = 0; k < nsib; k++)
        scale = fabs(sibling[k]) > scale ? fabs(sibling[k]) : scale;
    for (size_t k = 0; k < n; k++) {
        if (isnan(a[k]) || isnan(e[k]))
            amax = NAN;
        amax = fabs(a[k]) > amax ? fabs(a[k]) : amax;
        emax = fabs(e[k]) > emax ? fabs(e[k]) : emax;
    }
    double ra = amax / (scale > PARITY_TINY ? scale : PARITY_TINY);
    double re = emax / (scale > PARITY_TINY ? scale : PARITY_TINY);
    double r = ra > re ? ra : re;
    if (isnan(amax))
        r = NAN;
    if (!(r <= log->worst_ratio)) {
        log->worst_ratio = r;
        snprintf(log->worst_name, sizeof log->worst_name, "%s (zero)", name);
    }
    if (!(scale > 0.0) || !(r <= tol)) {
        log->failures++;
        print_error("%s: %s must be 0: ‖a‖∞ = %.3g, ‖e‖∞ = %.3g, scale %.3g, tol %.0e\n",
                    log->label, name, amax, emax, scale, tol);
    }
}

/* The fixture's dropout keep-mask must be the stream of the dropout spec, here
 * evaluated with the library's own PCG32: dropped iff next(advance(rng0, pos)) < T. */
static int check_keep_stream(const parity_case *pc, char *err, size_t errlen)
{
    mha_pcg32 rng0;
    mha_pcg32_seed(&rng0, pc->seed, MHA_PCG32_STREAM_DROPOUT);
    const uint64_t T = (uint64_t)(pc->p * 4294967296.0);
    size_t e = 0;
    for (size_t b = 0; b < pc->B; b++)
        for (size_t h = 0; h < pc->H; h++)
            for (size_t i = 0; i < pc->Sq; i++)
                for (size_t j = 0; j < pc->Sk; j++, e++) {
                    uint64_t pos = (pc->call_index << 40) +
                                   (uint64_t)(((b * pc->H + h) * pc->Sq + i) * pc->Sk + j);
                    mha_pcg32 r = rng0;
                    mha_pcg32_advance(&r, pos);
                    double kept = (uint64_t)mha_pcg32_next(&r) < T ? 0.0 : 1.0;
                    if (pc->keep->data[e] != kept) {
                        snprintf(err, errlen,
                                 "fixture keep (%zu,%zu,%zu,%zu) = %g but the C PCG32 stream "
                                 "says %g",
                                 b, h, i, j, pc->keep->data[e], kept);
                        return -1;
                    }
                }
    return 0;
}

enum parity_precision { PARITY_DOUBLE, PARITY_FLOAT };

/* Load tests/fixtures/parity_<name>.txt, run one precision, compare everything.
 * Fails the current test with every disagreeing tensor listed; frees all first. */
static void run_parity_case(const char *name, enum parity_precision prec)
{
    char path[1024], err[FX_ERRLEN] = "", label[96];
    snprintf(path, sizeof path, "%s/tests/fixtures/parity_%s.txt", MHA_SOURCE_DIR, name);
    fixture fx;
    parity_case pc;
    parity_result res;
    memset(&pc, 0, sizeof pc);
    memset(&res, 0, sizeof res);
    const double tol = prec == PARITY_DOUBLE ? PARITY_TOL_F64 : PARITY_TOL_F32;
    const char *pname = prec == PARITY_DOUBLE ? "f64" : "f32";

    if (fixture_load(path, &fx, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    const char *fx_name = fixture_config(&fx, "name");
    int ok = fx_name != NULL && strcmp(fx_name, name) == 0;
    if (!ok)
        snprintf(err, sizeof err, "config name is '%s', expected '%s'",
                 fx_name ? fx_name : "(none)", name);
    ok = ok && parity_case_from_fixture(&fx, &pc, err, sizeof err) == 0;
    ok = ok && (pc.keep == NULL || check_keep_stream(&pc, err, sizeof err) == 0);
    ok = ok && (prec == PARITY_DOUBLE ? parity_run_f64(&pc, &res, err, sizeof err)
                                      : parity_run_f32(&pc, &res, err, sizeof err)) == 0;

    snprintf(label, sizeof label, "parity %s %s", name, pname);
    compare_log log = {.worst_ratio = 0.0, .worst_name = "", .failures = 0, .label = label};
    if (ok) {
        const size_t nq = pc.B * pc.Sq * pc.D, nc = pc.B * pc.Sk * pc.D;
        const size_t na = pc.B * pc.H * pc.Sq * pc.Sk;
        uint64_t want_n = pc.call_index + (pc.training ? 1u : 0u);
        if (res.call_index_after != want_n) {
            log.failures++;
            print_error("%s: call index after forward %llu, expected %llu\n", label,
                        (unsigned long long)res.call_index_after, (unsigned long long)want_n);
        }
        compare_tensor(&log, "out", res.out, pc.exp_out, nq, tol);
        compare_tensor(&log, "attn", res.attn, pc.exp_attn, na, tol);
        for (size_t k = 0; k < MHA_NUM_TENSORS; k++) {
            mha_tensor_info info;
            char gname[80];
            snprintf(gname, sizeof gname, "grad.%s", k_param_names[k]);
            if (mha_tensor_info_find(pc.D, k_param_names[k], &info) != MHA_OK) {
                log.failures++;
                print_error("%s: mha_tensor_info_find(%s) failed\n", label, k_param_names[k]);
                continue;
            }
            if (strcmp(k_param_names[k], "w_k.bias") == 0) /* k = 3; w_k.weight is k = 2 */
                compare_zero_tensor(&log, gname, res.grads + info.offset, pc.exp_grad[k],
                                    info.numel, pc.exp_grad[2], pc.D * pc.D, tol);
            else
                compare_tensor(&log, gname, res.grads + info.offset, pc.exp_grad[k],
                               info.numel, tol);
        }
        compare_tensor(&log, "grad.x_query", res.dxq, pc.exp_dxq, nq, tol);
        if (!pc.self_attn)
            compare_tensor(&log, "grad.x_context", res.dxc, pc.exp_dxc, nc, tol);
    }
    parity_result_free(&res);
    parity_case_free(&pc);
    fixture_free(&fx);

    if (!ok)
        fail_msg("parity %s %s: %s", name, pname, err);
    if (log.failures > 0)
        fail_msg("%s: %d check(s) disagree with the seed module (tol %.0e), listed above",
                 label, log.failures, tol);
    print_message("parity %-16s %s: worst ‖a−e‖∞/‖e‖∞ = %.2e (%s), tol %.0e\n", name, pname,
                  log.worst_ratio, log.worst_name, tol);
}

/* ===================================================================================
 * Tests
 * =================================================================================== */

#define PARITY_TESTS(name)                                                                 \
    static void parity_##name##_f64(void **state)                                          \
    {                                                                                      \
        (void)state;                                                                       \
        run_parity_case(#name, PARITY_DOUBLE);                                             \
    }                                                                                      \
    static void parity_##name##_f32(void **state)                                          \
    {                                                                                      \
        (void)state;                                                                       \
        run_parity_case(#name, PARITY_FLOAT);                                              \
    }

/* (a) self-attention, no mask: x_context = NULL; dx_query is the total gradient */
PARITY_TESTS(self_nomask)
/* (b) causal: the seed's tril [1,1,Sq,Sq] tensor equals mha_mask.causal = 1 */
PARITY_TESTS(causal)
/* (c) broadcast mask [B,1,Sq,Sk] with one fully masked row (uniform weights) */
PARITY_TESTS(bcast_mask)
/* (d) cross-attention Sk != Sq with a per-head mask [1,H,Sq,Sk] */
PARITY_TESTS(cross_head_mask)
/* (e) training dropout p = 0.3 at call index 3, 64-bit seed: the stream's addressing */
PARITY_TESTS(dropout)
/* (f) causal + key_lengths (one batch item with length 0, fully masked) */
PARITY_TESTS(causal_keylen)

/* A small well-formed fixture text; the malformed cases below are edits of it. */
static const char k_good[] = "# comment\n"
                             "mha-parity-fixture 1\n"
                             "config name tiny\n"
                             "tensor a 2 2 3\n"
                             "1 2 3\n"
                             "  4 5e-1 -6.25\r\n"
                             "\n"
                             "tensor b 1 1\n"
                             "7\n"
                             "end\n";

/* The parser accepts the good text and gives back exactly its values. */
static void parity_parser_accepts_good(void **state)
{
    (void)state;
    fixture fx;
    char err[FX_ERRLEN];
    int rc = fixture_parse(k_good, strlen(k_good), &fx, err, sizeof err);
    if (rc != 0)
        fail_msg("rejected a good fixture: %s", err);
    const fx_tensor *a = fixture_tensor(&fx, "a"), *b = fixture_tensor(&fx, "b");
    const char *name = fixture_config(&fx, "name");
    int good = a != NULL && b != NULL && name != NULL && strcmp(name, "tiny") == 0 &&
               a->ndim == 2 && a->dims[0] == 2 && a->dims[1] == 3 && a->numel == 6 &&
               a->data[4] == 0.5 && a->data[5] == -6.25 && b->numel == 1 && b->data[0] == 7.0;
    fixture_free(&fx);
    assert_true(good);
}

/* Every kind of damage is rejected with a message, never parsed into a fixture. */
static void parity_parser_rejects_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *what, *text;
    } bad[] = {
        {"empty file", ""},
        {"no header", "config name x\nend\n"},
        {"wrong version", "mha-parity-fixture 2\nend\n"},
        {"missing end", "mha-parity-fixture 1\ntensor a 1 2\n1 2\n"},
        {"truncated values", "mha-parity-fixture 1\ntensor a 1 3\n1 2\nend\n"},
        {"truncated at EOF", "mha-parity-fixture 1\ntensor a 1 3\n1 2"},
        {"too many values", "mha-parity-fixture 1\ntensor a 1 2\n1 2 3\nend\n"},
        {"not a number", "mha-parity-fixture 1\ntensor a 1 2\n1 x\nend\n"},
        {"trailing junk in number", "mha-parity-fixture 1\ntensor a 1 2\n1 2.5q\nend\n"},
        {"nan", "mha-parity-fixture 1\ntensor a 1 2\n1 nan\nend\n"},
        {"inf", "mha-parity-fixture 1\ntensor a 1 2\ninf 1\nend\n"},
        {"overflow", "mha-parity-fixture 1\ntensor a 1 1\n1e999\nend\n"},
        {"ndim 0", "mha-parity-fixture 1\ntensor a 0\nend\n"},
        {"ndim 5", "mha-parity-fixture 1\ntensor a 5 1 1 1 1 1\n1\nend\n"},
        {"dimension 0", "mha-parity-fixture 1\ntensor a 2 2 0\nend\n"},
        {"negative dimension", "mha-parity-fixture 1\ntensor a 1 -2\n1 2\nend\n"},
        {"missing dimension", "mha-parity-fixture 1\ntensor a 2 2\n1 2\nend\n"},
        {"extra dimension", "mha-parity-fixture 1\ntensor a 1 2 2\n1 2\nend\n"},
        {"huge tensor", "mha-parity-fixture 1\ntensor a 2 1048576 1048576\nend\n"},
        {"duplicate tensor", "mha-parity-fixture 1\ntensor a 1 1\n1\ntensor a 1 1\n2\nend\n"},
        {"duplicate config", "mha-parity-fixture 1\nconfig k 1\nconfig k 2\nend\n"},
        {"config without value", "mha-parity-fixture 1\nconfig k\nend\n"},
        {"config with extra token", "mha-parity-fixture 1\nconfig k 1 2\nend\n"},
        {"unknown keyword", "mha-parity-fixture 1\nweights a 1 1\n1\nend\n"},
        {"content after end", "mha-parity-fixture 1\nend\ntensor a 1 1\n1\n"},
        {"NUL byte", "mha-parity-fixture 1\nend\n\0\n"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fixture fx;
        char err[FX_ERRLEN] = "";
        /* the NUL case needs its true length; the others are plain C strings */
        size_t len = strcmp(bad[k].what, "NUL byte") == 0 ? strlen(bad[k].text) + 2
                                                          : strlen(bad[k].text);
        int rc = fixture_parse(bad[k].text, len, &fx, err, sizeof err);
        if (rc == 0) {
            fixture_free(&fx);
            fail_msg("parser accepted a malformed fixture: %s", bad[k].what);
        }
        if (err[0] == '\0')
            fail_msg("parser rejected '%s' without a message", bad[k].what);
    }
}

/* A syntactically valid fixture with a wrong shape or config fails the case check. */
static void parity_parser_rejects_bad_case(void **state)
{
    (void)state;
    char path[1024], err[FX_ERRLEN];
    snprintf(path, sizeof path, "%s/tests/fixtures/parity_cross_head_mask.txt", MHA_SOURCE_DIR);
    fixture fx;
    if (fixture_load(path, &fx, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    parity_case pc;
    /* the fixture as written is a valid case ... */
    int rc_good = parity_case_from_fixture(&fx, &pc, err, sizeof err);
    if (rc_good == 0)
        parity_case_free(&pc);
    /* ... but not with a wrong weight shape, */
    fx_tensor *w = NULL;
    for (size_t t = 0; t < fx.ntensors; t++)
        if (strcmp(fx.tensors[t].name, "w_k.weight") == 0)
            w = &fx.tensors[t];
    int rc_shape = 0, rc_mask = 0, rc_cfg = 0;
    if (w != NULL && w->ndim == 2) {
        w->dims[0]--;
        rc_shape = parity_case_from_fixture(&fx, &pc, err, sizeof err);
        if (rc_shape == 0)
            parity_case_free(&pc);
        w->dims[0]++;
    }
    /* ... a mask value other than 0/1, */
    fx_tensor *mt = NULL;
    for (size_t t = 0; t < fx.ntensors; t++)
        if (strcmp(fx.tensors[t].name, "mask") == 0)
            mt = &fx.tensors[t];
    if (mt != NULL) {
        double saved = mt->data[0];
        mt->data[0] = 2.0;
        rc_mask = parity_case_from_fixture(&fx, &pc, err, sizeof err);
        if (rc_mask == 0)
            parity_case_free(&pc);
        mt->data[0] = saved;
    }
    /* ... or a num_heads that does not divide model_dim. */
    for (size_t k = 0; k < fx.nconfig; k++)
        if (strcmp(fx.config[k].key, "num_heads") == 0)
            strcpy(fx.config[k].value, "5");
    rc_cfg = parity_case_from_fixture(&fx, &pc, err, sizeof err);
    if (rc_cfg == 0)
        parity_case_free(&pc);
    int have_both = w != NULL && mt != NULL;
    fixture_free(&fx);
    assert_true(have_both);
    assert_int_equal(rc_good, 0);
    assert_int_equal(rc_shape, -1);
    assert_int_equal(rc_mask, -1);
    assert_int_equal(rc_cfg, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parity_parser_accepts_good),
        cmocka_unit_test(parity_parser_rejects_malformed),
        cmocka_unit_test(parity_parser_rejects_bad_case),
        cmocka_unit_test(parity_self_nomask_f64),
        cmocka_unit_test(parity_self_nomask_f32),
        cmocka_unit_test(parity_causal_f64),
        cmocka_unit_test(parity_causal_f32),
        cmocka_unit_test(parity_bcast_mask_f64),
        cmocka_unit_test(parity_bcast_mask_f32),
        cmocka_unit_test(parity_cross_head_mask_f64),
        cmocka_unit_test(parity_cross_head_mask_f32),
        cmocka_unit_test(parity_dropout_f64),
        cmocka_unit_test(parity_dropout_f32),
        cmocka_unit_test(parity_causal_keylen_f64),
        cmocka_unit_test(parity_causal_keylen_f32),
    };
    return cmocka_run_group_tests_name("parity", tests, NULL, NULL);
}
