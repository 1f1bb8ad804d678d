/*
 * g2p_dict — reading pronunciation dictionaries (CMUdict, TSV), the split, and the helpers
 * the g2p sources share (g2p_internal.h). See g2p_data.h for the contract.
 *
 * Parsing works in place on one copy of the file (g2p_dict.store): every word and token is
 * made a NUL-terminated string there, so the dictionary costs the file's bytes plus the
 * pointer arrays, and g2p_dict_free frees four blocks.
 */
#include "g2p_data.h"
#include "g2p_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ---------------------------------------------------------------------- */

int g2p__grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap < 16 ? 16 : *cap;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size)
            return -1;
        n *= 2;
    }
    void *q = realloc(*(void **)p, n * size);
    if (q == NULL)
        return -1;
    *(void **)p = q;
    *cap = n;
    return 0;
}

size_t g2p__utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = c < 0xC2 || c > 0xF4 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (len == 0 || len > n)
        return 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    uint32_t v = c & (0x7Fu >> len);
    for (size_t k = 1; k < len; k++) {
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
            return 0;
        v = v << 6 | (b & 0x3Fu);
    }
    *cp = v;
    return len;
}

size_t g2p__utf8_count(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xC0) != 0x80;
    return n;
}

/* ---- split ------------------------------------------------------------------------------- */

uint64_t g2p_fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3u;
    }
    return h;
}

int g2p_split_of(const char *word)
{
    uint64_t r = g2p_fnv1a64(word, strlen(word)) % 20;
    return r <= 1 ? G2P_TEST : r == 2 ? G2P_VALID : G2P_TRAIN;
}

/* ---- the string set (g2p__smap): linear probing, FNV-1a of the key ----------------------- */

static size_t shash(const char *s) { return (size_t)g2p_fnv1a64(s, strlen(s)); }

/* A slot of g2p__smap: its hash half, its index (index + 1 stored; 0 is empty). */
static uint32_t slot_hash(uint64_t s) { return (uint32_t)(s >> 32); }
static size_t slot_index(uint64_t s) { return (size_t)(s & 0xFFFFFFFFu) - 1; }

int g2p__smap_get(g2p__smap *m, const char *const *keys, const char *key, size_t next, size_t *idx)
{
    if (next >= 0xFFFFFFFFu)
        return -1; /* no room for index + 1 in a slot's half (files hold fewer entries) */
    if (2 * (m->n + 1) >= m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 1024;
        uint64_t *slot = cap <= ((size_t)1 << 32) ? calloc(cap, sizeof *slot) : NULL;
        if (slot == NULL)
            return -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slot[i]) { /* cap <= 2^32: the stored low half of the hash places it */
                size_t h = slot_hash(m->slot[i]) & (cap - 1);
                while (slot[h])
                    h = (h + 1) & (cap - 1);
                slot[h] = m->slot[i];
            }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
    }
    const uint32_t kh = (uint32_t)shash(key);
    size_t h = kh & (m->cap - 1);
    for (; m->slot[h]; h = (h + 1) & (m->cap - 1))
        if (slot_hash(m->slot[h]) == kh && strcmp(keys[slot_index(m->slot[h])], key) == 0) {
            *idx = slot_index(m->slot[h]);
            return 1;
        }
    m->slot[h] = (uint64_t)kh << 32 | (uint64_t)(next + 1);
    m->n++;
    *idx = next;
    return 0;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static int is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

/* A line's verdict: NULL = usable, else why it is skipped. */
static const char *const WHY_COMMENT = "comment line";

/* The state of one parse: growable arrays in file order. */
typedef struct parse {
    char **wtext;    /* [n_words] word texts (g2p__smap keys)                  */
    g2p_word *words; /* [n_words]                                         */
    size_t n_words, cap_words, cap_wtext;
    g2p_pron *prons; /* [n_prons] in file order                           */
    size_t n_prons, cap_prons;
    char **tokens; /* [n_tokens]                                        */
    size_t n_tokens, cap_tokens;
    g2p__smap map;
} parse;

static void parse_free(parse *p)
{
    UTIL_FREE_ALL(p->wtext, p->words, p->prons, p->tokens, p->map.slot);
}

/* Split s (NUL-terminated, no control bytes) on runs of spaces, making each token a string
 * in place and appending it to p->tokens. *count gets the number; -1 out of memory. */
static int add_tokens(parse *p, char *s, size_t *count)
{
    size_t n = 0;
    for (;;) {
        while (*s == ' ')
            s++;
        if (*s == '\0')
            break;
        if (g2p__grow(&p->tokens, &p->cap_tokens, p->n_tokens + 1, sizeof *p->tokens) != 0)
            return -1;
        p->tokens[p->n_tokens++] = s;
        n++;
        while (*s != ' ' && *s != '\0')
            s++;
        if (*s == ' ')
            *s++ = '\0';
    }
    *count = n;
    return 0;
}

/* Add the entry (word, its tokens in the string tgt) found on line `line`; *why gets a reason
 * if the line turns out unusable (empty pronunciation). -1: out of memory. */
static int add_entry(parse *p, char *word, char *tgt, size_t line, const char **why)
{
    size_t off = p->n_tokens, len = 0;
    if (add_tokens(p, tgt, &len) != 0)
        return -1;
    if (len == 0) {
        *why = "empty pronunciation";
        return 0;
    }
    if (g2p__grow(&p->prons, &p->cap_prons, p->n_prons + 1, sizeof *p->prons) != 0 ||
        g2p__grow(&p->words, &p->cap_words, p->n_words + 1, sizeof *p->words) != 0 ||
        g2p__grow(&p->wtext, &p->cap_wtext, p->n_words + 1, sizeof *p->wtext) != 0)
        return -1;
    size_t w = 0;
    int found = g2p__smap_get(&p->map, (const char *const *)p->wtext, word, p->n_words, &w);
    if (found < 0)
        return -1;
    if (!found) {
        p->wtext[w] = word;
        p->words[w] = (g2p_word){.text = word, .split = g2p_split_of(word), .first = 0, .count = 0};
        p->n_words++;
    }
    p->words[w].count++;
    p->prons[p->n_prons++] = (g2p_pron){.word = w, .line = line, .off = off, .len = len};
    return 0;
}

/* A CMUdict line s[0..n) (s[n] == '\0', trailing spaces removed): the entry it holds, or why
 * it is skipped. */
static const char *cmudict_line(parse *p, char *s, size_t n, size_t line, int *oom)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80)
            return "bytes that are not ASCII";
        if (c < 0x20 || c == 0x7F)
            return "control character";
    }
    char *sep = strstr(s, "  ");
    if (sep == NULL)
        return "no two-space separator after the word";
    *sep = '\0';
    size_t wl = (size_t)(sep - s);
    /* a trailing "(digits)" marks an alternate pronunciation */
    if (wl >= 3 && s[wl - 1] == ')') {
        size_t k = wl - 1;
        while (k > 0 && s[k - 1] >= '0' && s[k - 1] <= '9')
            k--;
        if (k < wl - 1 && k >= 2 && s[k - 1] == '(') {
            wl = k - 1;
            s[wl] = '\0';
        }
    }
    if (wl == 0 || s[0] < 'A' || s[0] > 'Z')
        return "word not of the form ^[A-Z][A-Z']*$";
    for (size_t i = 1; i < wl; i++)
        if ((s[i] < 'A' || s[i] > 'Z') && s[i] != '\'')
            return "word not of the form ^[A-Z][A-Z']*$";
    const char *why = NULL;
    if (add_entry(p, s, sep + 2, line, &why) != 0)
        *oom = 1;
    return why;
}

/* A TSV line, as cmudict_line. */
static const char *tsv_line(parse *p, char *s, size_t n, size_t line, int *oom)
{
    char *tab = NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t k = g2p__utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (k == 0)
            return "invalid UTF-8";
        if (cp == '\t' && tab == NULL)
            tab = s + i;
        else if (is_control(cp))
            return tab == NULL ? "control character in the source"
                               : "control character in the target";
        i += k;
    }
    if (tab == NULL)
        return "no TAB after the source";
    if (tab == s)
        return "empty source";
    *tab = '\0';
    const char *why = NULL;
    if (add_entry(p, s, tab + 1, line, &why) != 0)
        *oom = 1;
    return why == NULL ? NULL : "empty target";
}

/* The line [s, e) without trailing CRs and spaces: its new end. */
static char *trim_end(char *s, char *e)
{
    while (e > s && (e[-1] == ' ' || e[-1] == '\r'))
        e--;
    return e;
}

static int is_comment(const char *s, size_t n) { return n >= 3 && memcmp(s, ";;;", 3) == 0; }

/* G2P_FMT_AUTO: TSV if the first line that is neither blank nor a comment holds a TAB. */
static int detect_format(const char *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - buf) : len;
        char *te = trim_end((char *)buf + i, (char *)buf + e);
        size_t n = (size_t)(te - (buf + i));
        if (n > 0 && !is_comment(buf + i, n))
            return memchr(buf + i, '\t', n) ? G2P_FMT_TSV : G2P_FMT_CMUDICT;
        i = e + 1;
    }
    return G2P_FMT_CMUDICT;
}

/* What g2p_dict_parse checks before it copies: the arguments, the format, the size. */
static int parse_check(size_t len, const char *nm, int format, char *err, size_t errcap)
{
    if (format != G2P_FMT_AUTO && format != G2P_FMT_CMUDICT && format != G2P_FMT_TSV)
        return util_fail(MHA_EINVAL, err, errcap, "%s: unknown dictionary format %d", nm, format);
    if (len == 0)
        return util_fail(MHA_EFORMAT, err, errcap, "%s: empty file", nm);
    if (len > G2P_MAX_FILE_BYTES)
        return util_fail(MHA_EOVERFLOW, err, errcap, "%s: %zu bytes, more than the limit of %zu",
                         nm, len, G2P_MAX_FILE_BYTES);
    return MHA_OK;
}

static int parse_owned(char *buf, size_t len, const char *nm, int format, g2p_dict *d,
                       char *err, size_t errcap);

int g2p_dict_parse(const void *data, size_t len, const char *name, int format, g2p_dict *d,
                   char *err, size_t errcap)
{
    const char *nm = name != NULL ? name : "(memory)";
    if (d == NULL || (data == NULL && len > 0))
        return util_fail(MHA_EINVAL, err, errcap, "g2p_dict_parse: NULL argument");
    int rc = parse_check(len, nm, format, err, errcap);
    if (rc != MHA_OK)
        return rc;
    char *buf = malloc(len + 1);
    if (buf == NULL)
        return util_fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
    memcpy(buf, data, len);
    buf[len] = '\0';
    return parse_owned(buf, len, nm, format, d, err, errcap);
}

/* Parse buf[0..len) (buf[len] == '\0', checked by parse_check), which becomes the dict's
 * storage (freed on error): a file read for parsing is not copied again. */
static int parse_owned(char *buf, size_t len, const char *nm, int format, g2p_dict *d,
                       char *err, size_t errcap)
{
    if (format == G2P_FMT_AUTO)
        format = detect_format(buf, len);

    parse p = {0};
    g2p_dict out = {.format = format, .skipped_why = ""};
    int rc = MHA_OK, oom = 0;
    for (size_t i = 0; i < len && rc == MHA_OK;) {
        char *s = buf + i, *nl = memchr(s, '\n', len - i);
        char *e = nl != NULL ? nl : buf + len;
        size_t line = ++out.n_lines;
        i = (size_t)(e - buf) + 1;
        if ((size_t)(e - s) > G2P_MAX_LINE) {
            rc = util_fail(MHA_EFORMAT, err, errcap,
                           "%s:%zu: line of %zu bytes, longer than the limit of %zu", nm, line,
                           (size_t)(e - s), G2P_MAX_LINE);
            break;
        }
        e = trim_end(s, e);
        *e = '\0';
        size_t n = (size_t)(e - s);
        if (n == 0)
            continue; /* blank */
        const char *why = is_comment(s, n)            ? WHY_COMMENT
                          : format == G2P_FMT_CMUDICT ? cmudict_line(&p, s, n, line, &oom)
                                                      : tsv_line(&p, s, n, line, &oom);
        if (oom)
            rc = util_fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
        else if (why != NULL && out.skipped++ == 0) {
            out.skipped_line_first = line;
            out.skipped_why = why;
        }
    }
    if (rc == MHA_OK && p.n_prons == 0)
        rc = out.skipped == 0
                 ? util_fail(MHA_EFORMAT, err, errcap,
                             "%s: no usable entry: 0 lines skipped, all %zu blank", nm, out.n_lines)
                 : util_fail(MHA_EFORMAT, err, errcap,
                             "%s: no usable entry: all %zu non-blank lines of %zu skipped "
                             "(the first, line %zu: %s)",
                             nm, out.skipped, out.n_lines, out.skipped_line_first, out.skipped_why);
    /* group the pronunciations by word, keeping file order within each (a counting sort) */
    g2p_pron *grouped = rc == MHA_OK ? malloc(p.n_prons * sizeof *grouped) : NULL;
    if (rc == MHA_OK && grouped == NULL)
        rc = util_fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
    if (rc != MHA_OK) {
        parse_free(&p);
        free(buf);
        return rc;
    }
    for (size_t w = 0, at = 0; w < p.n_words; w++) {
        p.words[w].first = at;
        at += p.words[w].count;
        p.words[w].count = 0;
        size_t m = g2p__utf8_count(p.words[w].text);
        out.max_src = m > out.max_src ? m : out.max_src;
        out.n_split[p.words[w].split]++;
    }
    for (size_t k = 0; k < p.n_prons; k++) {
        g2p_word *w = &p.words[p.prons[k].word];
        grouped[w->first + w->count++] = p.prons[k];
        out.max_tgt = p.prons[k].len > out.max_tgt ? p.prons[k].len : out.max_tgt;
    }
    free(p.prons);
    free(p.wtext);
    out.index = p.map.slot; /* its slots index the words: g2p_dict_find */
    out.index_cap = p.map.cap;
    out.words = p.words;
    out.n_words = p.n_words;
    out.prons = grouped;
    out.n_prons = p.n_prons;
    out.tokens = p.tokens;
    out.n_tokens = p.n_tokens;
    out.store = buf;
    out.store_bytes = len + 1;
    *d = out;
    return MHA_OK;
}

int g2p_dict_read(const char *path, int format, g2p_dict *d, char *err, size_t errcap)
{
    if (path == NULL || d == NULL)
        return util_fail(MHA_EINVAL, err, errcap, "g2p_dict_read: NULL argument");
    char *buf;
    size_t got;
    int rc = util_read_file(path, G2P_MAX_FILE_BYTES, &buf, &got, err, errcap);
    if (rc == MHA_OK)
        rc = parse_check(got, path, format, err, errcap);
    if (rc != MHA_OK) {
        free(buf);
        return rc;
    }
    return parse_owned(buf, got, path, format, d, err, errcap); /* it owns buf now */
}

size_t g2p_dict_find(const g2p_dict *d, const char *word)
{
    if (d == NULL || word == NULL || d->index_cap == 0)
        return SIZE_MAX;
    const size_t mask = d->index_cap - 1;
    const uint32_t kh = (uint32_t)shash(word);
    for (size_t h = kh & mask; d->index[h]; h = (h + 1) & mask)
        if (slot_hash(d->index[h]) == kh &&
            strcmp(d->words[slot_index(d->index[h])].text, word) == 0)
            return slot_index(d->index[h]);
    return SIZE_MAX;
}

void g2p_dict_free(g2p_dict *d)
{
    if (d == NULL)
        return;
    UTIL_FREE_ALL(d->index, d->words, d->prons, d->tokens, d->store);
    memset(d, 0, sizeof *d);
}

size_t g2p_dict_bytes(const g2p_dict *d)
{
    return d->index_cap * sizeof *d->index + d->n_words * sizeof *d->words +
           d->n_prons * sizeof *d->prons + d->n_tokens * sizeof *d->tokens + d->store_bytes;
}
