/*
 * libmha_g2p: the strings of the answers (an arena that one pronounce call fills), the
 * spellings a word is tried in (as given, upper case, lower case), lexicon lookup and the
 * model's spelling of a word (src/g2p/g2p_lib.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "g2p_lib.h"

/* g2p_lib.h */
const char *g2p__shown(const char *word, char *buf, size_t cap)
{
    const size_t len = strlen(word);
    size_t keep = len;
    if (len > SHOWN_BYTES) {
        keep = SHOWN_BYTES;
        while (keep > SHOWN_BYTES - 3 && ((unsigned char)word[keep] & 0xC0) == 0x80)
            keep--;
    }
    if (keep < len)
        snprintf(buf, cap, "'%.*s...' (%zu bytes)", (int)keep, word, len);
    else
        snprintf(buf, cap, "'%s'", word);
    return buf;
}

/* ---- answers -------------------------------------------------------------------------- */

/* Append s[0..n) and a NUL to the arena; its offset in *off. */
int g2p__arena_put(mha_g2p *g, const char *s, size_t n, size_t *off)
{
    if (g->arena_len + n + 1 > g->arena_cap) {
        size_t cap = g->arena_cap ? 2 * g->arena_cap : 4096;
        while (cap < g->arena_len + n + 1)
            cap *= 2;
        char *a = realloc(g->arena, cap);
        if (!a)
            return MHA_ENOMEM;
        g->arena = a;
        g->arena_cap = cap;
    }
    memcpy(g->arena + g->arena_len, s, n);
    g->arena[g->arena_len + n] = '\0';
    *off = g->arena_len;
    g->arena_len += n + 1;
    return MHA_OK;
}

/* Append the symbols sym[0..n) joined by spaces (stress digits removed when no_stress). */
int g2p__arena_join(mha_g2p *g, const char *const *sym, size_t n, int no_stress, size_t *off)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(sym[i]) + 1;
    char *buf = malloc(total + 1), *o = buf;
    if (!buf)
        return MHA_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *o++ = ' ';
        size_t l = strlen(sym[i]);
        memcpy(o, sym[i], l);
        if (no_stress)
            while (l > 1 && o[l - 1] >= '0' && o[l - 1] <= '9')
                l--;
        o += l;
    }
    const int st = g2p__arena_put(g, buf, (size_t)(o - buf), off);
    free(buf);
    return st;
}

int g2p__add_answer(mha_g2p *g, size_t off, size_t word_off, double logprob, int source,
                    int lex)
{
    if (g->n_ans == g->cap_ans) {
        const size_t cap = g->cap_ans ? 2 * g->cap_ans : 64;
        answer *a = realloc(g->ans, cap * sizeof *a);
        if (!a)
            return MHA_ENOMEM;
        g->ans = a;
        g->cap_ans = cap;
    }
    g->ans[g->n_ans++] = (answer){.off = off, .word_off = word_off, .logprob = logprob,
                                  .source = source, .lexicon = lex};
    return MHA_OK;
}

/* The word with U+2019 read as an apostrophe, in a new string (NULL: out of memory). */
char *g2p__normalised(const char *word)
{
    char *w = malloc(strlen(word) + 1), *o = w;
    if (!w)
        return NULL;
    for (const char *p = word; *p;) {
        if ((unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
            (unsigned char)p[2] == 0x99) {
            *o++ = '\'';
            p += 3;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return w;
}

/* Spelling `pass` of w into buf (0 as is, 1 upper case, 2 lower case: ASCII letters). */
static void cased(const char *w, int pass, char *buf)
{
    size_t i = 0;
    for (; w[i]; i++) {
        const char c = w[i];
        buf[i] = pass == 1 && c >= 'a' && c <= 'z'   ? (char)(c - 32)
                 : pass == 2 && c >= 'A' && c <= 'Z' ? (char)(c + 32)
                                                     : c;
    }
    buf[i] = '\0';
}

/* Look word up in the lexicons (each spelling, each lexicon in order): the answers of the
 * first that lists it. *found 1 if one did. */
int g2p__lookup(mha_g2p *g, const char *word, unsigned flags, size_t nbest, int *found)
{
    *found = 0;
    char *buf = malloc(strlen(word) + 1);
    if (!buf)
        return MHA_ENOMEM;
    int st = MHA_OK;
    for (size_t l = 0; l < g->n_lex && !*found; l++)
        for (int pass = 0; pass < 3 && !*found; pass++) {
            cased(word, pass, buf);
            const lexicon *lx = &g->lex[l];
            const size_t w = g2p_dict_find(&lx->d, buf);
            if (w == SIZE_MAX)
                continue;
            *found = 1;
            const g2p_word *gw = &lx->d.words[w];
            size_t woff;
            if ((st = g2p__arena_put(g, gw->text, strlen(gw->text), &woff)) != MHA_OK)
                break;
            for (size_t k = 0; k < gw->count && k < nbest && st == MHA_OK; k++) {
                const g2p_pron *p = &lx->d.prons[gw->first + k];
                size_t off;
                const char *const *sym = (const char *const *)lx->d.tokens + p->off;
                if ((st = g2p__arena_join(g, sym, p->len, (flags & MHA_G2P_NO_STRESS) != 0,
                                          &off)) == MHA_OK)
                    st = g2p__add_answer(g, off, woff, 0.0, MHA_G2P_SOURCE_LEXICON, (int)l);
            }
        }
    free(buf);
    return st;
}

/* Source ids of word (as is, upper-, lower-cased: the first the alphabet spells) into ids
 * [max_src]; the length in *len, the spelling's arena offset in *woff. */
int g2p__spell(mha_g2p *g, const char *word, const char *whole, int32_t *ids, size_t *len,
               size_t *woff, char *err, size_t errlen)
{
    char sw[SHOWN_BYTES * 4 + 100], sp[SHOWN_BYTES * 2 + 40];
    if (whole) { /* a part of a hyphenated word: "'COVID-19' (part '19')" */
        char sh[SHOWN_BYTES * 2 + 40];
        snprintf(sw, sizeof sw, "%s (part %s)", g2p__shown(whole, sh, sizeof sh),
                 g2p__shown(word, sp, sizeof sp));
    } else {
        g2p__shown(word, sw, sizeof sw);
    }
    if (!word[0]) {
        set_err(err, errlen, "word %s: empty", sw);
        return MHA_EINVAL;
    }
    char *buf = malloc(strlen(word) + 1);
    if (!buf)
        return MHA_ENOMEM;
    size_t bad = 0, bad_best = 0;
    long n = -1;
    int bad_utf8 = 0;
    for (int pass = 0; pass < 3 && n < 0; pass++) {
        cased(word, pass, buf);
        n = g2p_encode_word(&g->src, buf, NULL, 0, &bad);
        if (n == G2P_ENC_BADUTF8) {
            bad_utf8 = 1;
            bad_best = bad;
            break;
        }
        if (n < 0 && bad > bad_best)
            bad_best = bad;
    }
    int st = MHA_OK;
    if (n < 0) {
        const unsigned char c = (unsigned char)word[bad_best];
        if (bad_utf8)
            set_err(err, errlen, "word %s: not UTF-8 (byte %zu)", sw, bad_best);
        else
            set_err(err, errlen, "word %s: character '%.*s' is not in the model's alphabet",
                    sw, 1 + (c >= 0xC0) + (c >= 0xE0) + (c >= 0xF0), word + bad_best);
        st = MHA_EINVAL;
    } else if ((size_t)n > g->max_src) {
        set_err(err, errlen, "word %s: too long (the model reads at most %zu)", sw,
                g->max_src);
        st = MHA_ESHAPE;
    } else if (g2p_encode_word(&g->src, buf, ids, g->max_src, NULL) != n) {
        st = MHA_EINVAL; /* cannot happen: the same spelling as above */
    } else {
        *len = (size_t)n;
        st = g2p__arena_put(g, buf, strlen(buf), woff);
    }
    free(buf);
    return st;
}

