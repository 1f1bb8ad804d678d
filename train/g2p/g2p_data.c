/*
 * g2p_data — vocabularies, encoding with a fixed vocabulary pair, and padded batches (see
 * g2p_data.h for the contract; reading the dictionaries is g2p_dict.c).
 */
#include "g2p_data.h"
#include "g2p_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const TGT_SPECIAL[G2P_NSPECIAL] = {"<pad>", "<s>", "</s>"};
static const char *const SRC_SPECIAL[G2P_SRC_NSPECIAL] = {"<pad>"};

/* The message of the two failures below the parser (no link to the library's table). */
static const char *why_status(int rc)
{
    return rc == MHA_ENOMEM      ? "out of memory"
           : rc == MHA_EOVERFLOW ? "more than 2^31 - 1 symbols"
                                 : "error";
}

/* ---- vocabularies ------------------------------------------------------------------------ */

int g2p_vocab_equal(const g2p_vocab *a, const g2p_vocab *b)
{
    if (a->n != b->n || a->n_special != b->n_special)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->sym[i], b->sym[i]) != 0)
            return 0;
    return 1;
}

void g2p_vocab_free(g2p_vocab *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v->sym != NULL && i < v->n; i++)
        free(v->sym[i]);
    free(v->sym);
    memset(v, 0, sizeof *v);
}

/* A vocabulary of the specials then list[0..n) (distinct, sorted), all copied. */
static int vocab_from(g2p_vocab *v, const char *const *special, size_t ns, const char *const *list,
                      size_t n)
{
    if (n > (size_t)INT32_MAX - ns)
        return MHA_EOVERFLOW;
    g2p_vocab t = {.n = 0, .n_special = ns, .sym = calloc(ns + n, sizeof(char *))};
    if (t.sym == NULL)
        return MHA_ENOMEM;
    for (size_t i = 0; i < ns + n; i++, t.n++)
        if ((t.sym[i] = strdup(i < ns ? special[i] : list[i - ns])) == NULL) {
            g2p_vocab_free(&t);
            return MHA_ENOMEM;
        }
    *v = t;
    return MHA_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct code points of every word, as UTF-8 strings sorted by byte value (= code
 * point order), in *list (strings in one block *blob). */
static int source_symbols(const g2p_dict *d, char ***list, size_t *n, char **blob)
{
    enum { NCODE = 0x110000 };
    unsigned char *seen = calloc(NCODE / 8, 1);
    if (seen == NULL)
        return MHA_ENOMEM;
    size_t count = 0;
    uint32_t cp_end = 0; /* past the largest code point seen: the scan below stops there */
    for (size_t w = 0; w < d->n_words; w++) {
        const unsigned char *s = (const unsigned char *)d->words[w].text;
        size_t len = strlen((const char *)s);
        for (size_t i = 0; i < len;) {
            uint32_t cp = 0;
            size_t k = g2p__utf8_next(s + i, len - i, &cp);
            if (k == 0) { /* cannot happen for a parsed dictionary */
                free(seen);
                return MHA_EFORMAT;
            }
            if (!(seen[cp >> 3] & (1u << (cp & 7))))
                count++;
            seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
            cp_end = cp >= cp_end ? cp + 1 : cp_end;
            i += k;
        }
    }
    char **l = malloc((count ? count : 1) * sizeof *l);
    char *b = malloc(5 * (count ? count : 1));
    if (l == NULL || b == NULL) {
        free(l);
        free(b);
        free(seen);
        return MHA_ENOMEM;
    }
    size_t j = 0;
    for (uint32_t cp = 0; cp < cp_end; cp++) { /* 1.1 M steps for every vocabulary was
                                                  most of a dictionary's build time */
        if (!(seen[cp >> 3] & (1u << (cp & 7))))
            continue;
        unsigned char *o = (unsigned char *)(l[j] = b + 5 * j);
        size_t len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
        uint32_t v = cp;
        for (size_t k = len - 1; k > 0; k--, v >>= 6)
            o[k] = (unsigned char)(0x80 | (v & 0x3F));
        o[0] = (unsigned char)(len == 1 ? v : lead[len] | v);
        o[len] = '\0';
        j++;
    }
    free(seen);
    *list = l;
    *n = count;
    *blob = b;
    return MHA_OK;
}

/* The distinct tokens of d, sorted by strcmp, in *list (borrowed from d). *clash gets the
 * index of a token equal to a reserved target symbol, or SIZE_MAX. */
static int target_symbols(const g2p_dict *d, char ***list, size_t *n, size_t *clash)
{
    g2p__smap m = {0};
    char **l = malloc((d->n_tokens ? d->n_tokens : 1) * sizeof *l);
    if (l == NULL)
        return MHA_ENOMEM;
    size_t count = 0;
    *clash = SIZE_MAX;
    for (size_t k = 0; k < d->n_tokens; k++) {
        size_t idx = 0;
        int found = g2p__smap_get(&m, (const char *const *)l, d->tokens[k], count, &idx);
        if (found < 0) {
            free(m.slot);
            free(l);
            return MHA_ENOMEM;
        }
        if (!found) {
            l[count++] = d->tokens[k];
            for (size_t s = 0; s < G2P_NSPECIAL; s++)
                if (*clash == SIZE_MAX && strcmp(d->tokens[k], TGT_SPECIAL[s]) == 0)
                    *clash = k;
        }
    }
    free(m.slot);
    qsort(l, count, sizeof *l, cmp_str);
    *list = l;
    *n = count;
    return MHA_OK;
}

int g2p_vocab_build(const g2p_dict *d, g2p_vocab *src, g2p_vocab *tgt, char *err, size_t errcap)
{
    if (d == NULL || src == NULL || tgt == NULL || d->n_words == 0)
        return util_fail(MHA_EINVAL, err, errcap,
                         "g2p_vocab_build: NULL argument or empty dictionary");
    char **sl = NULL, **tl = NULL, *blob = NULL;
    size_t sn = 0, tn = 0, clash = SIZE_MAX;
    g2p_vocab s = {0}, t = {0};
    int rc = source_symbols(d, &sl, &sn, &blob);
    if (rc == MHA_OK)
        rc = target_symbols(d, &tl, &tn, &clash);
    if (rc == MHA_OK && clash != SIZE_MAX) {
        size_t line = 0;
        for (size_t p = 0; p < d->n_prons && line == 0; p++)
            if (clash >= d->prons[p].off && clash < d->prons[p].off + d->prons[p].len)
                line = d->prons[p].line;
        rc = util_fail(MHA_EFORMAT, err, errcap,
                       "line %zu: target symbol \"%s\" is reserved (<pad>, <s>, </s>)", line,
                       d->tokens[clash]);
    } else {
        if (rc == MHA_OK)
            rc = vocab_from(&s, SRC_SPECIAL, G2P_SRC_NSPECIAL, (const char *const *)sl, sn);
        if (rc == MHA_OK)
            rc = vocab_from(&t, TGT_SPECIAL, G2P_NSPECIAL, (const char *const *)tl, tn);
        if (rc != MHA_OK)
            util_fail(rc, err, errcap, "g2p_vocab_build: %s", why_status(rc));
    }
    free(sl);
    free(blob);
    free(tl);
    if (rc != MHA_OK) {
        g2p_vocab_free(&s);
        g2p_vocab_free(&t);
        return rc;
    }
    *src = s;
    *tgt = t;
    return MHA_OK;
}

int g2p_vocab_make(g2p_vocab *v, const char *const *sym, size_t n, size_t n_special, char *err,
                   size_t errcap)
{
    if (v == NULL || sym == NULL || n_special > n)
        return util_fail(MHA_EINVAL, err, errcap, "g2p_vocab_make: NULL argument or n_special > n");
    if (n > INT32_MAX)
        return util_fail(MHA_EFORMAT, err, errcap, "vocabulary of %zu symbols, more than 2^31 - 1",
                         n);
    for (size_t i = 0; i < n; i++) {
        if (sym[i] == NULL || sym[i][0] == '\0')
            return util_fail(MHA_EFORMAT, err, errcap, "vocabulary: symbol %zu is empty", i);
        if (i > n_special && strcmp(sym[i - 1], sym[i]) >= 0)
            return util_fail(
                MHA_EFORMAT, err, errcap,
                "vocabulary: symbol %zu \"%s\" is not after symbol %zu \"%s\" (strcmp)", i, sym[i],
                i - 1, sym[i - 1]);
        for (size_t s = 0; s < n_special && s < i; s++)
            if (strcmp(sym[s], sym[i]) == 0)
                return util_fail(MHA_EFORMAT, err, errcap,
                                 "vocabulary: symbol %zu \"%s\" repeats reserved symbol %zu", i,
                                 sym[i], s);
    }
    int rc = vocab_from(v, sym, n_special, sym + n_special, n - n_special);
    return rc == MHA_OK ? rc : util_fail(rc, err, errcap, "g2p_vocab_make: %s", why_status(rc));
}

int g2p_vocab_copy(g2p_vocab *dst, const g2p_vocab *src)
{
    if (dst == NULL || src == NULL || src->sym == NULL || src->n_special > src->n)
        return MHA_EINVAL;
    return vocab_from(dst, (const char *const *)src->sym, src->n_special,
                      (const char *const *)src->sym + src->n_special, src->n - src->n_special);
}

int g2p_vocab_find(const g2p_vocab *v, const char *sym)
{
    if (v == NULL || sym == NULL)
        return -1;
    for (size_t i = 0; i < v->n_special; i++)
        if (strcmp(v->sym[i], sym) == 0)
            return (int)i;
    size_t lo = v->n_special, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v->sym[mid], sym);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Walk word's code points; when ids != NULL write each one's id. Returns the count or a
 * G2P_ENC_ code with *bad set. */
static long encode_walk(const g2p_vocab *v, const char *word, int32_t *ids, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)word;
    size_t len = strlen(word);
    long n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp = 0;
        size_t k = g2p__utf8_next(s + i, len - i, &cp);
        if (k == 0) {
            if (bad != NULL)
                *bad = i;
            return G2P_ENC_BADUTF8;
        }
        char one[5] = {0};
        memcpy(one, s + i, k);
        int id = g2p_vocab_find(v, one);
        if (id < 0) {
            if (bad != NULL)
                *bad = i;
            return G2P_ENC_UNKNOWN;
        }
        if (ids != NULL)
            ids[n] = id;
        i += k;
    }
    return n;
}

long g2p_encode_word(const g2p_vocab *v, const char *word, int32_t *ids, size_t cap, size_t *bad)
{
    if (v == NULL || word == NULL)
        return G2P_ENC_UNKNOWN;
    long n = encode_walk(v, word, NULL, bad);
    if (n >= 0 && ids != NULL && (size_t)n <= cap)
        encode_walk(v, word, ids, bad);
    return n;
}

int g2p_vocab_join(const g2p_vocab *v, const int32_t *ids, size_t n, const char *sep, char *buf,
                   size_t cap, size_t *len)
{
    if (v == NULL || (ids == NULL && n > 0) || buf == NULL || len == NULL)
        return MHA_EINVAL;
    size_t ls = sep != NULL ? strlen(sep) : 0, need = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= v->n)
            return MHA_EINVAL;
        need += strlen(v->sym[ids[i]]) + (i > 0 ? ls : 0);
    }
    if (need >= cap) {
        if (cap > 0)
            buf[0] = '\0';
        return MHA_EOVERFLOW;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && ls > 0) {
            memcpy(buf + at, sep, ls);
            at += ls;
        }
        size_t l = strlen(v->sym[ids[i]]);
        memcpy(buf + at, v->sym[ids[i]], l);
        at += l;
    }
    buf[at] = '\0';
    *len = at;
    return MHA_OK;
}

void g2p_order_by_length(size_t n, const size_t *len, size_t max_len, size_t *order)
{
    size_t count[257] = {0};
    max_len = max_len < 256 ? max_len : 256;
    for (size_t j = 0; j < n; j++)
        count[len[j] <= max_len ? len[j] : max_len]++;
    size_t start = 0;
    for (size_t l = 0; l <= max_len; l++) {
        const size_t c = count[l];
        count[l] = start;
        start += c;
    }
    for (size_t j = 0; j < n; j++)
        order[count[len[j] <= max_len ? len[j] : max_len]++] = j;
}

/* ---- encoded sets ------------------------------------------------------------------------ */

void g2p_set_free(g2p_set *s)
{
    if (s == NULL)
        return;
    UTIL_FREE_ALL(s->src, s->src_off, s->tgt, s->tgt_off, s->pron_off, s->pron_word, s->usable,
                  s->word_idx, s->pron_idx);
    memset(s, 0, sizeof *s);
}

/* Word w of d into o: its spelling code point by code point from *at (-1 where src lacks
 * one), its pronunciations' tokens from *kt (-1 where tgt lacks one), in pronunciation
 * order; whether it is usable, and the counts and first line of what is unknown. */
static void encode_word(const g2p_dict *d, size_t w, const g2p_vocab *src, const g2p_vocab *tgt,
                        g2p_set *o, size_t *at, size_t *kt)
{
    const g2p_word *wd = &d->words[w];
    const unsigned char *t = (const unsigned char *)wd->text;
    size_t len = strlen(wd->text), bad_line = 0;
    int src_ok = 1, tgt_ok = 1;
    o->src_off[w] = *at;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = g2p__utf8_next(t + i, len - i, &cp);
        k = k ? k : 1; /* cannot happen for a parsed dictionary */
        char one[5] = {0};
        memcpy(one, t + i, k);
        int id = g2p_vocab_find(src, one);
        src_ok &= id >= 0;
        o->src[(*at)++] = id;
        i += k;
    }
    if (!src_ok)
        bad_line = d->prons[wd->first].line;
    o->pron_off[w] = wd->first;
    for (size_t p = wd->first; p < wd->first + wd->count; p++) {
        const g2p_pron *pr = &d->prons[p];
        int ok = 1;
        o->pron_word[p] = w;
        o->tgt_off[p] = *kt;
        for (size_t j = 0; j < pr->len; j++) {
            int id = g2p_vocab_find(tgt, d->tokens[pr->off + j]);
            ok &= id >= 0;
            o->tgt[(*kt)++] = id;
        }
        if (!ok) {
            o->unknown_tgt_prons++;
            if (bad_line == 0 || pr->line < bad_line)
                bad_line = pr->line;
        }
        tgt_ok &= ok;
    }
    o->unknown_src_words += !src_ok;
    o->unknown_tgt_words += !tgt_ok;
    o->usable[w] = (unsigned char)(src_ok && tgt_ok);
    o->skipped_words += !o->usable[w];
    if (bad_line != 0 && (o->unknown_line_first == 0 || bad_line < o->unknown_line_first))
        o->unknown_line_first = bad_line;
}

/* The usable words and their pronunciations, by split (word_idx, pron_idx and their
 * offsets), and the longest spelling and pronunciation among them. */
static void index_splits(const g2p_dict *d, g2p_set *o)
{
    const size_t W = o->n_words;
    size_t nw = 0, np = 0;
    for (int sp = 0; sp < G2P_NSPLIT; sp++) {
        o->words_off[sp] = nw;
        o->prons_off[sp] = np;
        for (size_t w = 0; w < W; w++) {
            if (!o->usable[w] || d->words[w].split != sp)
                continue;
            o->word_idx[nw++] = w;
            size_t m = o->src_off[w + 1] - o->src_off[w];
            o->max_src = m > o->max_src ? m : o->max_src;
            for (size_t p = o->pron_off[w]; p < o->pron_off[w + 1]; p++) {
                o->pron_idx[np++] = p;
                size_t L = o->tgt_off[p + 1] - o->tgt_off[p];
                o->max_tgt = L > o->max_tgt ? L : o->max_tgt;
            }
        }
    }
    o->words_off[G2P_NSPLIT] = nw;
    o->prons_off[G2P_NSPLIT] = np;
}

int g2p_set_encode(const g2p_dict *d, const g2p_vocab *src, const g2p_vocab *tgt, g2p_set *s,
                   char *err, size_t errcap)
{
    if (d == NULL || src == NULL || tgt == NULL || s == NULL || src->sym == NULL ||
        tgt->sym == NULL)
        return util_fail(MHA_EINVAL, err, errcap, "g2p_set_encode: NULL argument");
    size_t W = d->n_words, P = d->n_prons, nsrc = 0;
    for (size_t w = 0; w < W; w++)
        nsrc += g2p__utf8_count(d->words[w].text);
    g2p_set o = {.n_words = W, .n_prons = P};
    o.src = malloc((nsrc ? nsrc : 1) * sizeof *o.src);
    o.src_off = malloc((W + 1) * sizeof *o.src_off);
    o.tgt = malloc((d->n_tokens ? d->n_tokens : 1) * sizeof *o.tgt);
    o.tgt_off = malloc((P + 1) * sizeof *o.tgt_off);
    o.pron_off = malloc((W + 1) * sizeof *o.pron_off);
    o.pron_word = malloc((P ? P : 1) * sizeof *o.pron_word);
    o.usable = malloc(W ? W : 1);
    o.word_idx = malloc((W ? W : 1) * sizeof *o.word_idx);
    o.pron_idx = malloc((P ? P : 1) * sizeof *o.pron_idx);
    if (!o.src || !o.src_off || !o.tgt || !o.tgt_off || !o.pron_off || !o.pron_word || !o.usable ||
        !o.word_idx || !o.pron_idx) {
        g2p_set_free(&o);
        return util_fail(MHA_ENOMEM, err, errcap, "g2p_set_encode: out of memory");
    }
    size_t at = 0, kt = 0;
    for (size_t w = 0; w < W; w++)
        encode_word(d, w, src, tgt, &o, &at, &kt);
    o.src_off[W] = at;
    o.tgt_off[P] = kt;
    o.pron_off[W] = P;
    index_splits(d, &o);
    *s = o;
    return MHA_OK;
}

int g2p_batch(const g2p_set *s, const size_t *prons, size_t B, size_t S, size_t T, int32_t *src,
              int32_t *tgt_in, int32_t *tgt_out, char *err, size_t errcap)
{
    if (s == NULL || prons == NULL || src == NULL || tgt_in == NULL || tgt_out == NULL || B == 0 ||
        S == 0 || T == 0)
        return util_fail(MHA_EINVAL, err, errcap, "g2p_batch: NULL argument or B, S or T = 0");
    if (B > SIZE_MAX / S || B > SIZE_MAX / T)
        return util_fail(MHA_EOVERFLOW, err, errcap, "g2p_batch: B·S or B·T overflows");
    for (size_t b = 0; b < B; b++) {
        size_t p = prons[b];
        if (p >= s->n_prons || !s->usable[s->pron_word[p]])
            return util_fail(MHA_EINVAL, err, errcap, "g2p_batch: row %zu: pronunciation %zu %s", b,
                             p, p >= s->n_prons ? "out of range" : "of a word that is not usable");
        size_t w = s->pron_word[p], m = s->src_off[w + 1] - s->src_off[w];
        size_t L = s->tgt_off[p + 1] - s->tgt_off[p];
        if (m > S || L + 1 > T)
            return util_fail(MHA_EOVERFLOW, err, errcap,
                             "g2p_batch: row %zu: a word of %zu symbols and a pronunciation of %zu "
                             "need S >= %zu and T >= %zu; have S = %zu, T = %zu",
                             b, m, L, m, L + 1, S, T);
    }
    for (size_t b = 0; b < B; b++) {
        size_t p = prons[b], w = s->pron_word[p];
        size_t m = s->src_off[w + 1] - s->src_off[w], L = s->tgt_off[p + 1] - s->tgt_off[p];
        const int32_t *x = s->src + s->src_off[w], *y = s->tgt + s->tgt_off[p];
        int32_t *xs = src + b * S, *yi = tgt_in + b * T, *yo = tgt_out + b * T;
        for (size_t i = 0; i < S; i++)
            xs[i] = i < m ? x[i] : G2P_PAD;
        const int r = s->reverse_targets; /* token j of the sequence the model writes */
#define G2P_Y(j) (r ? y[L - 1 - (j)] : y[j])
        for (size_t t = 0; t < T; t++) {
            yi[t] = t == 0 ? G2P_BOS : t <= L ? G2P_Y(t - 1) : G2P_PAD;
            yo[t] = t < L ? G2P_Y(t) : t == L ? G2P_EOS : G2P_UNSCORED;
        }
#undef G2P_Y
    }
    return MHA_OK;
}
