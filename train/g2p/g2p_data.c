/*
 * g2p_data — dictionaries, vocabularies, encoding and batches (see g2p_data.h for the
 * contract).
 *
 * Parsing works in place on one copy of the file (g2p_dict.store): every word and token is
 * made a NUL-terminated string there, so the dictionary costs the file's bytes plus the
 * pointer arrays, and g2p_dict_free frees five blocks.
 */
#include "g2p_data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const TGT_SPECIAL[G2P_NSPECIAL] = {"<pad>", "<s>", "</s>"};
static const char *const SRC_SPECIAL[G2P_SRC_NSPECIAL] = {"<pad>"};

/* ---- small helpers ----------------------------------------------------------------------- */

#if defined(__GNUC__)
#define G2P_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define G2P_PRINTF(f, a)
#endif

static int fail(int status, char *err, size_t errcap, const char *fmt, ...) G2P_PRINTF(4, 5);
/* Write the message (when err has room) and return status. */
static int fail(int status, char *err, size_t errcap, const char *fmt, ...)
{
    if (err != NULL && errcap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Grow *p (of *cap elements of `size` bytes) to hold at least `need`; 0 or -1. */
static int grow(void *p, size_t *cap, size_t need, size_t size)
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

/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n) and its code point in *cp, or 0
 * (Unicode 15, table 3-7: no overlong forms, surrogates, values above U+10FFFF). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
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

/* Code points of the NUL-terminated UTF-8 string s (assumed valid). */
static size_t utf8_count(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xC0) != 0x80;
    return n;
}

/* The message of the two failures below the parser (no link to the library's table). */
static const char *why_status(int rc)
{
    return rc == MHA_ENOMEM ? "out of memory" : rc == MHA_EOVERFLOW ? "more than 2^31 - 1 symbols" : "error";
}

static int is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

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

/* ---- a string set: open addressing over indices into a caller's array of strings -------- */

typedef struct smap {
    size_t *slot; /* [cap] 0 = empty, else index + 1                 */
    size_t cap;   /* a power of two, > 2·n                           */
    size_t n;     /* entries                                         */
} smap;

static size_t shash(const char *s) { return (size_t)g2p_fnv1a64(s, strlen(s)); }

/* Find key among keys[] (indexed through m). Found: *idx = its index, returns 1. Not found:
 * inserts index `next` for it (the caller stores keys[next] = key), *idx = next, returns 0.
 * -1: out of memory (nothing inserted). */
static int smap_get(smap *m, const char *const *keys, const char *key, size_t next, size_t *idx)
{
    if (2 * (m->n + 1) >= m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 1024;
        size_t *slot = calloc(cap, sizeof *slot);
        if (slot == NULL)
            return -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slot[i]) {
                size_t h = shash(keys[m->slot[i] - 1]) & (cap - 1);
                while (slot[h])
                    h = (h + 1) & (cap - 1);
                slot[h] = m->slot[i];
            }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
    }
    size_t h = shash(key) & (m->cap - 1);
    for (; m->slot[h]; h = (h + 1) & (m->cap - 1))
        if (strcmp(keys[m->slot[h] - 1], key) == 0) {
            *idx = m->slot[h] - 1;
            return 1;
        }
    m->slot[h] = next + 1;
    m->n++;
    *idx = next;
    return 0;
}

/* ---- parsing ----------------------------------------------------------------------------- */

/* A line's verdict: NULL = usable, else why it is skipped. */
static const char *const WHY_COMMENT = "comment line";

/* The state of one parse: growable arrays in file order. */
typedef struct parse {
    char **wtext;      /* [n_words] word texts (smap keys)                  */
    g2p_word *words;   /* [n_words]                                         */
    size_t n_words, cap_words, cap_wtext;
    g2p_pron *prons;   /* [n_prons] in file order                           */
    size_t n_prons, cap_prons;
    char **tokens;     /* [n_tokens]                                        */
    size_t n_tokens, cap_tokens;
    smap map;
} parse;

static void parse_free(parse *p)
{
    free(p->wtext);
    free(p->words);
    free(p->prons);
    free(p->tokens);
    free(p->map.slot);
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
        if (grow(&p->tokens, &p->cap_tokens, p->n_tokens + 1, sizeof *p->tokens) != 0)
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
    if (grow(&p->prons, &p->cap_prons, p->n_prons + 1, sizeof *p->prons) != 0 ||
        grow(&p->words, &p->cap_words, p->n_words + 1, sizeof *p->words) != 0 ||
        grow(&p->wtext, &p->cap_wtext, p->n_words + 1, sizeof *p->wtext) != 0)
        return -1;
    size_t w = 0;
    int found = smap_get(&p->map, (const char *const *)p->wtext, word, p->n_words, &w);
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
        size_t k = utf8_next((const unsigned char *)s + i, n - i, &cp);
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

int g2p_dict_parse(const void *data, size_t len, const char *name, int format, g2p_dict *d,
                   char *err, size_t errcap)
{
    const char *nm = name != NULL ? name : "(memory)";
    if (d == NULL || (data == NULL && len > 0))
        return fail(MHA_EINVAL, err, errcap, "g2p_dict_parse: NULL argument");
    if (format != G2P_FMT_AUTO && format != G2P_FMT_CMUDICT && format != G2P_FMT_TSV)
        return fail(MHA_EINVAL, err, errcap, "%s: unknown dictionary format %d", nm, format);
    if (len == 0)
        return fail(MHA_EFORMAT, err, errcap, "%s: empty file", nm);
    if (len > G2P_MAX_FILE_BYTES)
        return fail(MHA_EOVERFLOW, err, errcap, "%s: %zu bytes, more than the limit of %zu", nm,
                    len, G2P_MAX_FILE_BYTES);
    char *buf = malloc(len + 1);
    if (buf == NULL)
        return fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
    memcpy(buf, data, len);
    buf[len] = '\0';
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
            rc = fail(MHA_EFORMAT, err, errcap, "%s:%zu: line of %zu bytes, longer than the limit of %zu",
                      nm, line, (size_t)(e - s), G2P_MAX_LINE);
            break;
        }
        e = trim_end(s, e);
        *e = '\0';
        size_t n = (size_t)(e - s);
        if (n == 0)
            continue; /* blank */
        const char *why = is_comment(s, n)             ? WHY_COMMENT
                          : format == G2P_FMT_CMUDICT ? cmudict_line(&p, s, n, line, &oom)
                                                      : tsv_line(&p, s, n, line, &oom);
        if (oom)
            rc = fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
        else if (why != NULL && out.skipped++ == 0) {
            out.skipped_line_first = line;
            out.skipped_why = why;
        }
    }
    if (rc == MHA_OK && p.n_prons == 0)
        rc = out.skipped == 0 ? fail(MHA_EFORMAT, err, errcap, "%s: no entry (%zu blank lines)", nm,
                                     out.n_lines)
                              : fail(MHA_EFORMAT, err, errcap,
                                     "%s: no usable entry: all %zu non-blank lines of %zu skipped "
                                     "(the first, line %zu: %s)",
                                     nm, out.skipped, out.n_lines, out.skipped_line_first,
                                     out.skipped_why);
    /* group the pronunciations by word, keeping file order within each (a counting sort) */
    g2p_pron *grouped = rc == MHA_OK ? malloc(p.n_prons * sizeof *grouped) : NULL;
    if (rc == MHA_OK && grouped == NULL)
        rc = fail(MHA_ENOMEM, err, errcap, "%s: out of memory", nm);
    if (rc != MHA_OK) {
        parse_free(&p);
        free(buf);
        return rc;
    }
    for (size_t w = 0, at = 0; w < p.n_words; w++) {
        p.words[w].first = at;
        at += p.words[w].count;
        p.words[w].count = 0;
        size_t m = utf8_count(p.words[w].text);
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
    free(p.map.slot);
    out.words = p.words;
    out.n_words = p.n_words;
    out.prons = grouped;
    out.n_prons = p.n_prons;
    out.tokens = p.tokens;
    out.n_tokens = p.n_tokens;
    out.store = buf;
    *d = out;
    return MHA_OK;
}

int g2p_dict_read(const char *path, int format, g2p_dict *d, char *err, size_t errcap)
{
    if (path == NULL || d == NULL)
        return fail(MHA_EINVAL, err, errcap, "g2p_dict_read: NULL argument");
    char ebuf[128];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fail(MHA_EIO, err, errcap, "cannot open %s: %s", path,
                    strerror_r(e, ebuf, sizeof ebuf) == 0 ? ebuf : "error");
    }
    struct stat st;
    int rc = MHA_OK;
    if (fstat(fd, &st) != 0)
        rc = fail(MHA_EIO, err, errcap, "cannot stat %s", path);
    else if (!S_ISREG(st.st_mode))
        rc = fail(MHA_EIO, err, errcap, "%s is not a regular file", path);
    else if ((uintmax_t)st.st_size > G2P_MAX_FILE_BYTES)
        rc = fail(MHA_EOVERFLOW, err, errcap, "%s: %jd bytes, more than the limit of %zu", path,
                  (intmax_t)st.st_size, G2P_MAX_FILE_BYTES);
    size_t size = rc == MHA_OK ? (size_t)st.st_size : 0, got = 0;
    char *buf = rc == MHA_OK ? malloc(size + 1) : NULL;
    if (rc == MHA_OK && buf == NULL)
        rc = fail(MHA_ENOMEM, err, errcap, "out of memory reading %s", path);
    while (rc == MHA_OK && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = fail(MHA_EIO, err, errcap, "cannot read %s: %s", path,
                      strerror_r(e, ebuf, sizeof ebuf) == 0 ? ebuf : "error");
        } else if (r == 0)
            size = got; /* the file shrank while being read: take what is there */
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc == MHA_OK)
        rc = g2p_dict_parse(buf, got, path, format, d, err, errcap);
    free(buf);
    return rc;
}

void g2p_dict_free(g2p_dict *d)
{
    if (d == NULL)
        return;
    free(d->words);
    free(d->prons);
    free(d->tokens);
    free(d->store);
    memset(d, 0, sizeof *d);
}

/* ---- vocabularies ------------------------------------------------------------------------ */

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
static int vocab_from(g2p_vocab *v, const char *const *special, size_t ns,
                      const char *const *list, size_t n)
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
    for (size_t w = 0; w < d->n_words; w++) {
        const unsigned char *s = (const unsigned char *)d->words[w].text;
        size_t len = strlen((const char *)s);
        for (size_t i = 0; i < len;) {
            uint32_t cp = 0;
            size_t k = utf8_next(s + i, len - i, &cp);
            if (k == 0) { /* cannot happen for a parsed dictionary */
                free(seen);
                return MHA_EFORMAT;
            }
            if (!(seen[cp >> 3] & (1u << (cp & 7))))
                count++;
            seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
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
    for (uint32_t cp = 0; cp < NCODE; cp++) {
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
    smap m = {0};
    char **l = malloc((d->n_tokens ? d->n_tokens : 1) * sizeof *l);
    if (l == NULL)
        return MHA_ENOMEM;
    size_t count = 0;
    *clash = SIZE_MAX;
    for (size_t k = 0; k < d->n_tokens; k++) {
        size_t idx = 0;
        int found = smap_get(&m, (const char *const *)l, d->tokens[k], count, &idx);
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
        return fail(MHA_EINVAL, err, errcap, "g2p_vocab_build: NULL argument or empty dictionary");
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
        rc = fail(MHA_EFORMAT, err, errcap,
                  "line %zu: target symbol \"%s\" is reserved (<pad>, <s>, </s>)", line,
                  d->tokens[clash]);
    } else {
        if (rc == MHA_OK)
            rc = vocab_from(&s, SRC_SPECIAL, G2P_SRC_NSPECIAL, (const char *const *)sl, sn);
        if (rc == MHA_OK)
            rc = vocab_from(&t, TGT_SPECIAL, G2P_NSPECIAL, (const char *const *)tl, tn);
        if (rc != MHA_OK)
            fail(rc, err, errcap, "g2p_vocab_build: %s", why_status(rc));
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
        return fail(MHA_EINVAL, err, errcap, "g2p_vocab_make: NULL argument or n_special > n");
    if (n > INT32_MAX)
        return fail(MHA_EFORMAT, err, errcap, "vocabulary of %zu symbols, more than 2^31 - 1", n);
    for (size_t i = 0; i < n; i++) {
        if (sym[i] == NULL || sym[i][0] == '\0')
            return fail(MHA_EFORMAT, err, errcap, "vocabulary: symbol %zu is empty", i);
        if (i > n_special && strcmp(sym[i - 1], sym[i]) >= 0)
            return fail(MHA_EFORMAT, err, errcap,
                        "vocabulary: symbol %zu \"%s\" is not after symbol %zu \"%s\" (strcmp)", i,
                        sym[i], i - 1, sym[i - 1]);
        for (size_t s = 0; s < n_special && s < i; s++)
            if (strcmp(sym[s], sym[i]) == 0)
                return fail(MHA_EFORMAT, err, errcap,
                            "vocabulary: symbol %zu \"%s\" repeats reserved symbol %zu", i, sym[i],
                            s);
    }
    int rc = vocab_from(v, sym, n_special, sym + n_special, n - n_special);
    return rc == MHA_OK ? rc : fail(rc, err, errcap, "g2p_vocab_make: %s", why_status(rc));
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
        size_t k = utf8_next(s + i, len - i, &cp);
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

/* ---- encoded sets ------------------------------------------------------------------------ */

void g2p_set_free(g2p_set *s)
{
    if (s == NULL)
        return;
    free(s->src);
    free(s->src_off);
    free(s->tgt);
    free(s->tgt_off);
    free(s->pron_off);
    free(s->pron_word);
    free(s->usable);
    free(s->word_idx);
    free(s->pron_idx);
    memset(s, 0, sizeof *s);
}

int g2p_set_encode(const g2p_dict *d, const g2p_vocab *src, const g2p_vocab *tgt, g2p_set *s,
                   char *err, size_t errcap)
{
    if (d == NULL || src == NULL || tgt == NULL || s == NULL || src->sym == NULL ||
        tgt->sym == NULL)
        return fail(MHA_EINVAL, err, errcap, "g2p_set_encode: NULL argument");
    size_t W = d->n_words, P = d->n_prons, nsrc = 0;
    for (size_t w = 0; w < W; w++)
        nsrc += utf8_count(d->words[w].text);
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
    if (!o.src || !o.src_off || !o.tgt || !o.tgt_off || !o.pron_off || !o.pron_word ||
        !o.usable || !o.word_idx || !o.pron_idx) {
        g2p_set_free(&o);
        return fail(MHA_ENOMEM, err, errcap, "g2p_set_encode: out of memory");
    }
    size_t at = 0, kt = 0;
    for (size_t w = 0; w < W; w++) {
        const g2p_word *wd = &d->words[w];
        /* the spelling, code point by code point (-1 where unknown) */
        const unsigned char *t = (const unsigned char *)wd->text;
        size_t len = strlen(wd->text), bad_line = 0;
        int src_ok = 1, tgt_ok = 1;
        o.src_off[w] = at;
        for (size_t i = 0; i < len;) {
            uint32_t cp = 0;
            size_t k = utf8_next(t + i, len - i, &cp);
            k = k ? k : 1; /* cannot happen for a parsed dictionary */
            char one[5] = {0};
            memcpy(one, t + i, k);
            int id = g2p_vocab_find(src, one);
            src_ok &= id >= 0;
            o.src[at++] = id;
            i += k;
        }
        if (!src_ok)
            bad_line = d->prons[wd->first].line;
        /* the pronunciations, laid out in pronunciation order */
        o.pron_off[w] = wd->first;
        for (size_t p = wd->first; p < wd->first + wd->count; p++) {
            const g2p_pron *pr = &d->prons[p];
            int ok = 1;
            o.pron_word[p] = w;
            o.tgt_off[p] = kt;
            for (size_t j = 0; j < pr->len; j++) {
                int id = g2p_vocab_find(tgt, d->tokens[pr->off + j]);
                ok &= id >= 0;
                o.tgt[kt++] = id;
            }
            if (!ok) {
                o.unknown_tgt_prons++;
                if (bad_line == 0 || pr->line < bad_line)
                    bad_line = pr->line;
            }
            tgt_ok &= ok;
        }
        o.unknown_src_words += !src_ok;
        o.unknown_tgt_words += !tgt_ok;
        o.usable[w] = (unsigned char)(src_ok && tgt_ok);
        o.skipped_words += !o.usable[w];
        if (bad_line != 0 && (o.unknown_line_first == 0 || bad_line < o.unknown_line_first))
            o.unknown_line_first = bad_line;
    }
    o.src_off[W] = at;
    o.tgt_off[P] = kt;
    o.pron_off[W] = P;
    /* usable words and their pronunciations, by split */
    size_t nw = 0, np = 0;
    for (int sp = 0; sp < G2P_NSPLIT; sp++) {
        o.words_off[sp] = nw;
        o.prons_off[sp] = np;
        for (size_t w = 0; w < W; w++) {
            if (!o.usable[w] || d->words[w].split != sp)
                continue;
            o.word_idx[nw++] = w;
            size_t m = o.src_off[w + 1] - o.src_off[w];
            o.max_src = m > o.max_src ? m : o.max_src;
            for (size_t p = o.pron_off[w]; p < o.pron_off[w + 1]; p++) {
                o.pron_idx[np++] = p;
                size_t L = o.tgt_off[p + 1] - o.tgt_off[p];
                o.max_tgt = L > o.max_tgt ? L : o.max_tgt;
            }
        }
    }
    o.words_off[G2P_NSPLIT] = nw;
    o.prons_off[G2P_NSPLIT] = np;
    *s = o;
    return MHA_OK;
}

int g2p_batch(const g2p_set *s, const size_t *prons, size_t B, size_t S, size_t T, int32_t *src,
              int32_t *tgt_in, int32_t *tgt_out, char *err, size_t errcap)
{
    if (s == NULL || prons == NULL || src == NULL || tgt_in == NULL || tgt_out == NULL || B == 0 ||
        S == 0 || T == 0)
        return fail(MHA_EINVAL, err, errcap, "g2p_batch: NULL argument or B, S or T = 0");
    if (B > SIZE_MAX / S || B > SIZE_MAX / T)
        return fail(MHA_EOVERFLOW, err, errcap, "g2p_batch: B·S or B·T overflows");
    for (size_t b = 0; b < B; b++) {
        size_t p = prons[b];
        if (p >= s->n_prons || !s->usable[s->pron_word[p]])
            return fail(MHA_EINVAL, err, errcap,
                        "g2p_batch: row %zu: pronunciation %zu %s", b, p,
                        p >= s->n_prons ? "out of range" : "of a word that is not usable");
        size_t w = s->pron_word[p], m = s->src_off[w + 1] - s->src_off[w];
        size_t L = s->tgt_off[p + 1] - s->tgt_off[p];
        if (m > S || L + 1 > T)
            return fail(MHA_EOVERFLOW, err, errcap,
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
        for (size_t t = 0; t < T; t++) {
            yi[t] = t == 0 ? G2P_BOS : t <= L ? y[t - 1] : G2P_PAD;
            yo[t] = t < L ? y[t] : t == L ? G2P_EOS : G2P_UNSCORED;
        }
    }
    return MHA_OK;
}
