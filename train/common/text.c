/*
 * text — character-level corpora, windows and the sampler (see text.h for the contract).
 */
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TEXT_NCODE 0x110000u /* code points U+0000..U+10FFFF: the presence bitmap's size */

struct text_vocab {
    text_mode mode;
    size_t n;      /* V                                          */
    uint32_t *sym; /* [V] symbols (bytes or code points), sorted */
};

struct text_corpus {
    text_vocab vocab;
    int32_t *ids;   /* [n] ids of the whole text */
    size_t n;       /* symbols                   */
    size_t n_train; /* floor(0.9·n)              */
};

/* ---- small helpers ------------------------------------------------------------------ */

static int mode_ok(text_mode mode) { return mode == TEXT_BYTES || mode == TEXT_UTF8; }

/* Bytes of the UTF-8 form of a valid code point. */
static size_t utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/* Write the UTF-8 form of cp to out (utf8_len(cp) bytes); returns that length. */
static size_t utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    size_t len = utf8_len(cp);
    if (len == 1) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t k = len - 1; k > 0; k--) {
        o[k] = (unsigned char)(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    o[0] = (unsigned char)(lead[len] | cp);
    return len;
}

/* Decode the sequence starting at s[i] (i < n) into *cp and return its length (1..4), or
 * return 0 with *why naming the fault (Unicode 15, table 3-7 "well-formed byte sequences"). */
static size_t utf8_next(const unsigned char *s, size_t n, size_t i, uint32_t *cp, const char **why)
{
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : c < 0xC2 || c > 0xF4 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    *why = c < 0x80   ? NULL
           : c < 0xC0 ? "continuation byte without a lead byte"
           : c < 0xC2 ? "overlong encoding (lead byte C0 or C1)"
           : c > 0xF4 ? "byte F5..FF, never valid in UTF-8"
                      : NULL;
    /* the allowed range of the second byte, and the fault a byte outside it means */
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    const char *second = c == 0xED   ? "surrogate code point (U+D800..U+DFFF)"
                         : c == 0xF4 ? "code point above U+10FFFF"
                                     : "overlong encoding";
    uint32_t v = len == 1 ? c : c & (0x7Fu >> len);
    for (size_t k = 1; k < len && *why == NULL; k++) {
        unsigned b = i + k < n ? s[i + k] : 0;
        *why = i + k >= n                     ? "sequence truncated by the end of the text"
               : b < 0x80 || b > 0xBF         ? "truncated sequence (a continuation byte is missing)"
               : k == 1 && (b < lo || b > hi) ? second
                                              : NULL;
        v = v << 6 | (b & 0x3Fu);
    }
    *cp = v;
    return *why == NULL ? len : 0;
}

/* A symbol made printable for a message: "'a' (U+0061)", "U+000A", "byte 0xe9". */
static void describe(text_mode mode, uint32_t sym, char *buf, size_t len)
{
    if (sym >= 0x20 && sym < 0x7F)
        snprintf(buf, len, mode == TEXT_BYTES ? "'%c' (0x%02x)" : "'%c' (U+%04X)", (int)sym,
                 (unsigned)sym);
    else if (mode == TEXT_BYTES)
        snprintf(buf, len, "byte 0x%02x", (unsigned)sym);
    else if (sym >= 0xA0) {
        char u[5] = {0};
        utf8_put(sym, u);
        snprintf(buf, len, "'%s' (U+%04X)", u, (unsigned)sym);
    } else
        snprintf(buf, len, "U+%04X", (unsigned)sym);
}

/* Id of sym in v (binary search), or −1. */
static int32_t lookup(const text_vocab *v, uint32_t sym)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->sym[mid] < sym)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->sym[lo] == sym ? (int32_t)lo : -1;
}

/* Walk s[0..len) symbol by symbol: check UTF-8 (TEXT_UTF8) and, when v != NULL, look every
 * symbol up, writing its id to ids (when non-NULL); when bits != NULL, mark every symbol
 * there. *n receives the number of symbols. */
static int scan(text_mode mode, const unsigned char *s, size_t len, const text_vocab *v,
                int32_t *ids, uint8_t *bits, size_t *n, char *err, size_t errlen)
{
    size_t count = 0;
    for (size_t i = 0; i < len; count++) {
        uint32_t sym = s[i];
        size_t step = 1;
        if (mode == TEXT_UTF8) {
            const char *why = NULL;
            step = utf8_next(s, len, i, &sym, &why);
            if (step == 0)
                return util_fail(MHA_EFORMAT, err, errlen, "invalid UTF-8 at byte offset %zu: %s", i,
                            why);
        }
        if (bits != NULL)
            bits[sym >> 3] |= (uint8_t)(1u << (sym & 7));
        if (v != NULL) {
            int32_t id = lookup(v, sym);
            if (id < 0) {
                char d[32];
                describe(mode, sym, d, sizeof d);
                return util_fail(MHA_EFORMAT, err, errlen,
                            "character %s at position %zu (byte offset %zu) is not in the "
                            "vocabulary",
                            d, count, i);
            }
            if (ids != NULL)
                ids[count] = id;
        }
        i += step;
    }
    *n = count;
    return MHA_OK;
}

/* ---- vocabulary --------------------------------------------------------------------- */

void text_vocab_free(text_vocab *v)
{
    if (v == NULL)
        return;
    free(v->sym);
    free(v);
}

size_t text_vocab_size(const text_vocab *v) { return v != NULL ? v->n : 0; }

text_mode text_vocab_mode(const text_vocab *v) { return v != NULL ? v->mode : TEXT_BYTES; }

uint32_t text_vocab_symbol(const text_vocab *v, size_t id)
{
    return v != NULL && id < v->n ? v->sym[id] : 0;
}

static const char *const vocab_prefix[2] = {"bytes:", "utf8:"};
static const size_t vocab_width[2] = {2, 6}; /* hex digits per symbol */

int text_vocab_format(const text_vocab *v, char **out, char *err, size_t errlen)
{
    if (v == NULL || out == NULL)
        return util_fail(MHA_EINVAL, err, errlen, "text_vocab_format: NULL argument");
    const char *prefix = vocab_prefix[v->mode];
    size_t w = vocab_width[v->mode], plen = strlen(prefix);
    if (v->n > (SIZE_MAX - plen - 1) / w)
        return util_fail(MHA_EOVERFLOW, err, errlen, "vocabulary of %zu symbols too large", v->n);
    char *s = malloc(plen + w * v->n + 1);
    if (s == NULL)
        return util_fail(MHA_ENOMEM, err, errlen, "out of memory formatting the vocabulary");
    memcpy(s, prefix, plen);
    for (size_t i = 0; i < v->n; i++)
        snprintf(s + plen + w * i, w + 1, "%0*lx", (int)w, (unsigned long)v->sym[i]);
    s[plen + w * v->n] = '\0';
    *out = s;
    return MHA_OK;
}

/* Value of the w lowercase hex digits at s, or −1 if one is not [0-9a-f]. */
static long parse_hex(const char *s, size_t w)
{
    long v = 0;
    for (size_t k = 0; k < w; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

int text_vocab_parse(const char *s, size_t max_vocab, text_vocab **out, char *err,
                     size_t errlen)
{
    if (s == NULL || out == NULL || max_vocab == 0 || max_vocab > INT32_MAX)
        return util_fail(MHA_EINVAL, err, errlen, "text_vocab_parse: NULL argument or bad limit");
    int m = 0;
    while (m < 2 && strncmp(s, vocab_prefix[m], strlen(vocab_prefix[m])) != 0)
        m++;
    if (m == 2)
        return util_fail(MHA_EFORMAT, err, errlen,
                    "vocabulary string does not start with \"bytes:\" or \"utf8:\"");
    text_mode mode = (text_mode)m;
    const char *hex = s + strlen(vocab_prefix[mode]);
    size_t w = vocab_width[mode], len = strlen(hex), n = len / w;
    if (len == 0 || len % w != 0)
        return util_fail(MHA_EFORMAT, err, errlen,
                    "vocabulary string: %zu hex digits, expected a positive multiple of %zu",
                    len, w);
    if (n > max_vocab)
        return util_fail(MHA_EFORMAT, err, errlen,
                    "vocabulary of %zu symbols is larger than the limit %zu", n, max_vocab);
    uint32_t *sym = malloc(n * sizeof *sym);
    text_vocab *v = malloc(sizeof *v);
    if (sym == NULL || v == NULL) {
        free(sym);
        free(v);
        return util_fail(MHA_ENOMEM, err, errlen, "out of memory parsing the vocabulary");
    }
    for (size_t i = 0; i < n; i++) {
        long x = parse_hex(hex + w * i, w);
        const char *why = x < 0                                  ? "not lowercase hex"
                          : x == 0                               ? "NUL is never a symbol"
                          : x > 0x10FFFF                         ? "above U+10FFFF"
                          : x >= 0xD800 && x <= 0xDFFF           ? "a surrogate"
                          : i > 0 && (uint32_t)x <= sym[i - 1]   ? "not above the previous one"
                                                                 : NULL;
        if (why != NULL) {
            free(sym);
            free(v);
            return util_fail(MHA_EFORMAT, err, errlen, "vocabulary string: symbol %zu is %s", i,
                        why);
        }
        sym[i] = (uint32_t)x;
    }
    *v = (text_vocab){.mode = mode, .n = n, .sym = sym};
    *out = v;
    return MHA_OK;
}

int text_encode(const text_vocab *v, const char *s, size_t len, int32_t *ids, size_t cap,
                size_t *n, char *err, size_t errlen)
{
    if (v == NULL || (s == NULL && len > 0) || n == NULL)
        return util_fail(MHA_EINVAL, err, errlen, "text_encode: NULL argument");
    size_t count;
    int rc = scan(v->mode, (const unsigned char *)s, len, v, NULL, NULL, &count, err, errlen);
    if (rc != MHA_OK)
        return rc;
    if (ids != NULL) {
        if (count > cap)
            return util_fail(MHA_EOVERFLOW, err, errlen, "text_encode: %zu symbols, room for %zu",
                        count, cap);
        scan(v->mode, (const unsigned char *)s, len, v, ids, NULL, &count, NULL, 0);
    }
    *n = count;
    return MHA_OK;
}

int text_decode(const text_vocab *v, const int32_t *ids, size_t n, char *buf, size_t cap,
                size_t *len, char *err, size_t errlen)
{
    if (v == NULL || (ids == NULL && n > 0) || buf == NULL || len == NULL)
        return util_fail(MHA_EINVAL, err, errlen, "text_decode: NULL argument");
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= v->n)
            return util_fail(MHA_EINVAL, err, errlen, "text_decode: id %ld at position %zu is "
                        "outside [0, %zu)", (long)ids[i], i, v->n);
        need += v->mode == TEXT_BYTES ? 1 : utf8_len(v->sym[ids[i]]);
    }
    if (need >= cap)
        return util_fail(MHA_EOVERFLOW, err, errlen, "text_decode: needs %zu bytes, room for %zu",
                    need + 1, cap);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t sym = v->sym[ids[i]];
        if (v->mode == TEXT_BYTES)
            buf[at++] = (char)(unsigned char)sym;
        else
            at += utf8_put(sym, buf + at);
    }
    buf[at] = '\0';
    *len = at;
    return MHA_OK;
}

/* ---- corpus ------------------------------------------------------------------------- */

int text_from_memory(const void *data, size_t len, text_mode mode, size_t max_vocab,
                     size_t context, text_corpus **out, char *err, size_t errlen)
{
    if (out != NULL)
        *out = NULL;
    if ((data == NULL && len > 0) || out == NULL || !mode_ok(mode) || max_vocab == 0 ||
        max_vocab > INT32_MAX)
        return util_fail(MHA_EINVAL, err, errlen, "text_from_memory: NULL argument, bad mode or "
                    "vocabulary limit outside [1, 2^31 - 1]");
    const unsigned char *s = data;
    if (len == 0)
        return util_fail(MHA_EFORMAT, err, errlen, "empty text");
    const unsigned char *nul = memchr(s, 0, len);
    if (nul != NULL)
        return util_fail(MHA_EFORMAT, err, errlen, "not text: NUL byte at byte offset %zu",
                    (size_t)(nul - s));
    uint8_t *bits = calloc(TEXT_NCODE / 8, 1); /* presence of each symbol */
    text_corpus *c = NULL;
    size_t n = 0, V = 0;
    int rc = bits != NULL ? scan(mode, s, len, NULL, NULL, bits, &n, err, errlen)
                          : util_fail(MHA_ENOMEM, err, errlen, "out of memory reading the text");
    for (uint32_t cp = 0; rc == MHA_OK && cp < TEXT_NCODE; cp++)
        V += bits[cp >> 3] >> (cp & 7) & 1u;
    size_t n_train = n / 10 * 9 + n % 10 * 9 / 10; /* floor(0.9·n), exactly */
    if (rc == MHA_OK && V > max_vocab)
        rc = util_fail(MHA_EFORMAT, err, errlen,
                  "vocabulary of %zu distinct characters is larger than the limit %zu", V,
                  max_vocab);
    else if (rc == MHA_OK && (n_train <= context || n - n_train <= context))
        rc = util_fail(MHA_EFORMAT, err, errlen,
                  "text too short: %zu characters give %zu for training and %zu for "
                  "validation; the context %zu needs at least %zu in each",
                  n, n_train, n - n_train, context, context < SIZE_MAX ? context + 1 : context);
    if (rc == MHA_OK && ((c = calloc(1, sizeof *c)) == NULL ||
                         (c->vocab.sym = malloc(V * sizeof *c->vocab.sym)) == NULL ||
                         n > SIZE_MAX / sizeof *c->ids ||
                         (c->ids = malloc(n * sizeof *c->ids)) == NULL))
        rc = util_fail(MHA_ENOMEM, err, errlen, "out of memory for %zu characters", n);
    if (rc == MHA_OK) {
        c->vocab.mode = mode;
        for (uint32_t cp = 0; cp < TEXT_NCODE; cp++)
            if (bits[cp >> 3] >> (cp & 7) & 1u)
                c->vocab.sym[c->vocab.n++] = cp;
        c->n = n;
        c->n_train = n_train;
        scan(mode, s, len, &c->vocab, c->ids, NULL, &n, NULL, 0); /* cannot fail now */
        *out = c;
        c = NULL;
    }
    free(bits);
    text_corpus_free(c);
    return rc;
}

int text_load(const char *path, text_mode mode, size_t max_vocab, size_t context,
              text_corpus **out, char *err, size_t errlen)
{
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL)
        return util_fail(MHA_EINVAL, err, errlen, "text_load: NULL argument");
    char *buf;
    size_t got;
    int rc = util_read_file(path, TEXT_MAX_FILE_BYTES, &buf, &got, err, errlen);
    if (rc == MHA_OK)
        rc = text_from_memory((const unsigned char *)buf, got, mode, max_vocab, context, out,
                              err, errlen);
    free(buf);
    return rc;
}

void text_corpus_free(text_corpus *c)
{
    if (c == NULL)
        return;
    free(c->vocab.sym);
    free(c->ids);
    free(c);
}

const text_vocab *text_corpus_vocab(const text_corpus *c) { return c != NULL ? &c->vocab : NULL; }

size_t text_corpus_len(const text_corpus *c) { return c != NULL ? c->n : 0; }

const int32_t *text_corpus_ids(const text_corpus *c) { return c != NULL ? c->ids : NULL; }

const int32_t *text_corpus_part(const text_corpus *c, text_part part, size_t *len)
{
    if (c == NULL || len == NULL || (part != TEXT_TRAIN && part != TEXT_VAL))
        return NULL;
    *len = part == TEXT_TRAIN ? c->n_train : c->n - c->n_train;
    return part == TEXT_TRAIN ? c->ids : c->ids + c->n_train;
}

/* ---- windows ------------------------------------------------------------------------ */

/* Check that windows of T + 1 symbols fit in len and that len − T fits a PCG32 bound. */
static int check_window(size_t len, size_t T, char *err, size_t errlen)
{
    if (T == 0 || len <= T)
        return util_fail(MHA_EINVAL, err, errlen,
                    "windows of %zu tokens need T >= 1 and at least T + 1 symbols; have %zu",
                    T, len);
    if (len - T > UINT32_MAX)
        return util_fail(MHA_EOVERFLOW, err, errlen, "%zu window offsets exceed 2^32", len - T);
    return MHA_OK;
}

int text_draw_offsets(size_t len, size_t T, size_t count, mha_pcg32 *rng, size_t *offsets,
                      char *err, size_t errlen)
{
    if (rng == NULL || (offsets == NULL && count > 0))
        return util_fail(MHA_EINVAL, err, errlen, "text_draw_offsets: NULL argument");
    int rc = check_window(len, T, err, errlen);
    for (size_t i = 0; rc == MHA_OK && i < count; i++) {
        uint32_t o;
        mha_pcg32_bounded(rng, (uint32_t)(len - T), &o); /* bound >= 1: cannot fail */
        offsets[i] = o;
    }
    return rc;
}

int text_eval_offsets(size_t len, size_t T, size_t count, uint64_t seed, size_t *offsets,
                      char *err, size_t errlen)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, TEXT_STREAM_EVAL);
    return text_draw_offsets(len, T, count, &rng, offsets, err, errlen);
}

int text_windows(const int32_t *ids, size_t len, size_t T, const size_t *offsets, size_t B,
                 int32_t *tokens, int32_t *targets, char *err, size_t errlen)
{
    if (ids == NULL || ((offsets == NULL || tokens == NULL || targets == NULL) && B > 0))
        return util_fail(MHA_EINVAL, err, errlen, "text_windows: NULL argument");
    int rc = check_window(len, T, err, errlen);
    for (size_t b = 0; rc == MHA_OK && b < B; b++)
        if (offsets[b] > len - T - 1)
            rc = util_fail(MHA_EINVAL, err, errlen, "window %zu: offset %zu is past %zu", b,
                      offsets[b], len - T - 1);
    if (rc == MHA_OK && B > SIZE_MAX / T)
        rc = util_fail(MHA_EOVERFLOW, err, errlen, "B·T overflows");
    for (size_t b = 0; rc == MHA_OK && b < B; b++) {
        memcpy(tokens + b * T, ids + offsets[b], T * sizeof *ids);
        memcpy(targets + b * T, ids + offsets[b] + 1, T * sizeof *ids);
    }
    return rc;
}

int text_batch(const int32_t *ids, size_t len, size_t B, size_t T, mha_pcg32 *rng,
               int32_t *tokens, int32_t *targets, char *err, size_t errlen)
{
    if (ids == NULL || rng == NULL || ((tokens == NULL || targets == NULL) && B > 0))
        return util_fail(MHA_EINVAL, err, errlen, "text_batch: NULL argument");
    int rc = check_window(len, T, err, errlen);
    if (rc == MHA_OK && B > SIZE_MAX / T)
        rc = util_fail(MHA_EOVERFLOW, err, errlen, "B·T overflows");
    for (size_t b = 0; rc == MHA_OK && b < B; b++) {
        size_t o;
        text_draw_offsets(len, T, 1, rng, &o, NULL, 0); /* checked above: cannot fail */
        text_windows(ids, len, T, &o, 1, tokens + b * T, targets + b * T, NULL, 0);
    }
    return rc;
}

/* ---- sampling ----------------------------------------------------------------------- */

typedef struct ranked {
    float logit;
    int32_t id;
} ranked;

/* Larger logit first, then lower id. */
static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int text_sample(const float *logits, size_t V, double temperature, size_t top_k,
                mha_pcg32 *rng, int32_t *id, char *err, size_t errlen)
{
    if (logits == NULL || rng == NULL || id == NULL || V == 0 || V > INT32_MAX)
        return util_fail(MHA_EINVAL, err, errlen, "text_sample: NULL argument or V outside "
                    "[1, 2^31 - 1]");
    if (!(temperature > 0) || !isfinite(temperature))
        return util_fail(MHA_EINVAL, err, errlen, "temperature %g: must be > 0 and finite",
                    temperature);
    double max = -INFINITY;
    for (size_t i = 0; i < V; i++) {
        if (!isfinite(logits[i]))
            return util_fail(MHA_ENONFINITE, err, errlen, "logit %zu is %g", i, (double)logits[i]);
        if (logits[i] > max)
            max = logits[i];
    }
    size_t k = top_k == 0 || top_k >= V ? V : top_k;
    ranked *order = malloc(V * sizeof *order); /* candidates order[0..k) */
    if (order == NULL)
        return util_fail(MHA_ENOMEM, err, errlen, "text_sample: out of memory");
    for (size_t i = 0; i < V; i++)
        order[i] = (ranked){logits[i], (int32_t)i};
    if (k < V)
        qsort(order, V, sizeof *order, cmp_ranked);
    /* p_j = exp((l_j − max)/temperature) / Z over the candidates, and the first j whose
     * cumulative sum passes u·Z. The sums are the same operations in the same order, and
     * u·Z < Z for u < 1 in round-to-nearest, so some j is always found. */
    double u = mha_pcg32_double(rng), z = 0, cum = 0;
    for (size_t j = 0; j < k; j++)
        z += exp(((double)order[j].logit - max) / temperature);
    double target = u * z;
    size_t j = 0;
    while (j + 1 < k && (cum += exp(((double)order[j].logit - max) / temperature)) <= target)
        j++;
    *id = order[j].id;
    free(order);
    return MHA_OK;
}
