/*
 * libmha_g2p: pronouncing — the lexicons first, a hyphenated word by its parts, the rest by
 * the model (or ensemble) in batches of similar length, rescored when rescoring models were
 * added (src/g2p/g2p_lib.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "g2p_lib.h"

/* Grow the decoding scratch for n words; each stream's buffers once. */
static int scratch(mha_g2p *g, size_t n)
{
    const size_t S = g->max_src, L = g->max_tgt, K = MHA_G2P_MAX_NBEST;
    const size_t rows = g->rows;
    UTIL_FREE_ALL(g->ids, g->ids_off, g->ids_len, g->order);
    g->ids = calloc(n * S + 1, sizeof *g->ids);
    g->ids_off = calloc(n + 1, sizeof *g->ids_off);
    g->ids_len = calloc(n + 1, sizeof *g->ids_len);
    g->order = calloc(n + 1, sizeof *g->order);
    int ok = g->ids && g->ids_off && g->ids_len && g->order;
    for (size_t k = 0; k < g->n_str; k++) {
        g2p_stream *s = &g->str[k];
        if (!s->srcbuf) {
            s->srcbuf = calloc(rows * S, sizeof *s->srcbuf);
            s->lens = calloc(rows, sizeof *s->lens);
            s->tok = calloc(rows * K * L, sizeof *s->tok);
            s->tlen = calloc(rows * K, sizeof *s->tlen);
            s->lp = calloc(rows * K, sizeof *s->lp);
            s->hyps = calloc(rows * K, sizeof *s->hyps);
        }
        ok = ok && s->srcbuf && s->lens && s->tok && s->tlen && s->lp && s->hyps;
    }
    return ok ? MHA_OK : MHA_ENOMEM;
}

/* One batch: words order[b0 .. b0+B) decoded on stream s (beam K, the list of KD kept per
 * word, rescored when resc); word w's hypotheses to res[w·nbest ..] as decode says. */
static int decode_batch(mha_g2p *g, g2p_stream *s, size_t b0, size_t B, size_t nbest,
                        size_t K, size_t KD, int resc, int32_t *res, size_t *res_len,
                        double *res_lp)
{
    const size_t S = g->max_src, L = g->max_tgt;
    const int greedy = K == 1;
    size_t Sb = 1;
    for (size_t b = 0; b < B; b++)
        Sb = g->ids_len[g->order[b0 + b]] > Sb ? g->ids_len[g->order[b0 + b]] : Sb;
    for (size_t b = 0; b < B; b++) {
        const size_t w = g->order[b0 + b];
        memset(s->srcbuf + b * Sb, 0, Sb * sizeof *s->srcbuf);
        memcpy(s->srcbuf + b * Sb, g->ids + w * S, g->ids_len[w] * sizeof *s->srcbuf);
        s->lens[b] = g->ids_len[w];
    }
    int st;
    if (greedy)
        st = mha_s2s_ensemble_greedy(g->n_models, g->m, s->inf, B, Sb, s->srcbuf, s->lens,
                                     G2P_BOS, G2P_EOS, L, s->tok, s->tlen, s->lp);
    else
        st = mha_s2s_ensemble_beam(g->n_models, g->m, s->inf, B, Sb, s->srcbuf, s->lens,
                                   G2P_BOS, G2P_EOS, L, K, KD, g->alpha, s->hyps, s->tok);
    if (st == MHA_OK && resc)
        st = g2p_rescore(&g->resc, B, KD, Sb, s->srcbuf, s->lens, s->tok, g->reverse, g->alpha,
                         s->hyps, g->perm);
    if (st != MHA_OK)
        return st;
    for (size_t b = 0; b < B; b++) {
        const size_t w = g->order[b0 + b];
        for (size_t k = 0; k < (greedy ? 1 : nbest); k++) {
            const size_t in = greedy ? b : b * KD + (resc ? g->perm[b * KD + k] : k);
            const size_t o = w * nbest + k;
            const size_t len = greedy ? s->tlen[b] : s->hyps[in].len;
            memcpy(res + o * L, s->tok + in * L, len * sizeof *res);
            if (g->reverse) /* into reading order */
                for (size_t i = 0; i < len / 2; i++) {
                    const int32_t t = res[o * L + i];
                    res[o * L + i] = res[o * L + len - 1 - i];
                    res[o * L + len - 1 - i] = t;
                }
            res_len[o] = len;
            res_lp[o] = greedy ? s->lp[b] : s->hyps[in].logprob;
        }
        for (size_t k = greedy ? 1 : nbest; k < nbest; k++) /* not written: none */
            res_lp[w * nbest + k] = -INFINITY;
    }
    return MHA_OK;
}

/* Decode the n words of ids (word j: g->ids[j·S ..] of length g->ids_len[j]) in batches of
 * similar length; word j's hypotheses go to res[j·nbest ..] (tokens [nbest, L]) with
 * res_len, res_lp. With several streams the batches are shared out over their threads (in
 * turn, so each batch is the same words whatever the thread count and comes out the same:
 * every decoding step runs in the one thread of its stream); rescoring keeps to one stream
 * (its caches are one). The first failing batch's status. */
static int decode(mha_g2p *g, size_t n, size_t nbest, int32_t *res, size_t *res_len,
                  double *res_lp)
{
    const size_t K = g->beam > nbest ? g->beam : nbest;
    g2p__widen(g, K); /* a beam wider than a stream's rows: K rows each */
    int st0 = g2p__ready(g, NULL, 0);
    if (st0 != MHA_OK)
        return st0;
    const int resc = K > 1 && g->resc.n > 0;
    const size_t KD = resc ? K : nbest; /* the beam's list: all of it when rescored */
    const size_t batch = g->rows / K > 0 ? g->rows / K : 1;
    const size_t nb = (n + batch - 1) / batch;
    g2p_order_by_length(n, g->ids_len, g->max_src, g->order);
    const int par = g->n_str > 1 && !resc && nb > 1;
    if (par && (st0 = g2p__streams(g)) != MHA_OK)
        return st0;
    if (!par) { /* not even an inactive region: the library's own regions run as always */
        for (size_t b0 = 0; b0 < n; b0 += batch) {
            const int st = decode_batch(g, &g->str[0], b0, n - b0 < batch ? n - b0 : batch,
                                        nbest, K, KD, resc, res, res_len, res_lp);
            if (st != MHA_OK)
                return st;
        }
        return MHA_OK;
    }
    size_t first = nb;
    int first_st = MHA_OK;
#pragma omp parallel for num_threads((int)g->n_str) schedule(static, 1)
    for (size_t bi = 0; bi < nb; bi++) {
        const size_t b0 = bi * batch, B = n - b0 < batch ? n - b0 : batch;
        const int st = decode_batch(g, &g->str[omp_get_thread_num()], b0, B, nbest, K, KD, 0,
                                    res, res_len, res_lp);
        if (st != MHA_OK) {
#pragma omp critical /* unnamed: a named one would be an exported symbol */
            if (bi < first) {
                first = bi;
                first_st = st;
            }
        }
    }
    return first_st;
}

/* ---- pronouncing ---------------------------------------------------------------------- */

/* What the batch call builds per word before the model runs. */
typedef struct pending {
    size_t first_ans, n_ans; /* its answers (lexicon, parts) so far                       */
    int status;
    int model;               /* 1: asks the model (word index in the model's list: slot)  */
    size_t slot, woff;
} pending;

/* The answers of the word (lexicon, or parts of a hyphenated word, or a model request). */
static int prepare(mha_g2p *g, const char *word, unsigned flags, size_t nbest, pending *pw,
                   size_t *n_model, char *err, size_t errlen);

/* A word whose hypothesis has a score that is not finite: the model's arithmetic overflowed
 * (finite weights far beyond any trained model's, e.g. a damaged file without checksums);
 * its tokens would be garbage, so the word fails, named as g2p__spell names words. */
static int not_finite(const char *word, char *err, size_t errlen)
{
    char sw[SHOWN_BYTES * 2 + 40];
    set_err(err, errlen, "word %s: the model's scores for it are not finite (its weights "
            "overflow: a damaged model?)", g2p__shown(word, sw, sizeof sw));
    return MHA_ENONFINITE;
}

/* One part of a hyphenated word by the model (greedy): its phones into *ph and its spelling
 * (as the word writes it) into *spelled, both owned; its log-probability added to *lp. */
static int part_by_model(mha_g2p *g, const char *part, const char *word, unsigned flags,
                         char **ph, char **spelled, double *lp, char *err, size_t errlen)
{
    int32_t *tok = malloc(g->max_tgt * sizeof *tok);
    size_t tl = 0, len = 0, woff = 0, off = 0;
    double plp = 0.0;
    int st = tok ? scratch(g, 1) : MHA_ENOMEM;
    if (st != MHA_OK) {
        free(tok);
        return MHA_ENOMEM;
    }
    if ((st = g2p__spell(g, part, word, g->ids, &len, &woff, err, errlen)) == MHA_OK) {
        g->ids_len[0] = len;
        st = decode(g, 1, 1, tok, &tl, &plp);
    }
    if (st == MHA_OK && !isfinite(plp))
        st = not_finite(word, err, errlen);
    if (st == MHA_OK) {
        const char **sym = calloc(tl + 1, sizeof *sym);
        if (!sym) {
            st = MHA_ENOMEM;
        } else {
            for (size_t t = 0; t < tl; t++)
                sym[t] = g->tgt.sym[tok[t]];
            st = g2p__arena_join(g, sym, tl, (flags & MHA_G2P_NO_STRESS) != 0, &off);
            free(sym);
        }
        if (st == MHA_OK && !(*ph = strdup(g->arena + off)))
            st = MHA_ENOMEM;
        if (st == MHA_OK && !(*spelled = strdup(g->arena + woff)))
            st = MHA_ENOMEM;
        *lp += plp;
    }
    free(tok);
    return st;
}

/* The parts' answers joined into the word's: phones with a space between parts, spellings
 * with a hyphen; one answer of source MHA_G2P_SOURCE_PARTS with log-probability lp. */
static int join_parts(mha_g2p *g, char *const *ph, char *const *spelled, size_t np, double lp)
{
    size_t total = 0, wtotal = 0;
    for (size_t i = 0; i < np; i++) {
        total += strlen(ph[i]) + 1;
        wtotal += strlen(spelled[i]) + 1;
    }
    char *joined = malloc(total + 1), *wj = malloc(wtotal + 1);
    int st = joined && wj ? MHA_OK : MHA_ENOMEM;
    if (st == MHA_OK) {
        joined[0] = wj[0] = '\0';
        for (size_t i = 0; i < np; i++) {
            if (i) {
                strcat(joined, " ");
                strcat(wj, "-");
            }
            strcat(joined, ph[i]);
            strcat(wj, spelled[i]);
        }
        size_t off, woff;
        if ((st = g2p__arena_put(g, joined, strlen(joined), &off)) == MHA_OK &&
            (st = g2p__arena_put(g, wj, strlen(wj), &woff)) == MHA_OK)
            st = g2p__add_answer(g, off, woff, lp, MHA_G2P_SOURCE_PARTS, -1);
    }
    free(joined);
    free(wj);
    return st;
}

/* Pronounce each part of a hyphenated word (lexicon or model, the best answer), joined. */
static int parts(mha_g2p *g, const char *word, unsigned flags, char *err, size_t errlen,
                 int *done)
{
    *done = 0;
    if (!strchr(word, '-') || word[0] == '-' || word[strlen(word) - 1] == '-' ||
        strstr(word, "--") || g2p_vocab_find(&g->src, "-") >= 0)
        return MHA_OK;
    char *w = malloc(strlen(word) + 1);
    if (!w)
        return MHA_ENOMEM;
    strcpy(w, word);
    size_t np = 1;
    for (char *p = w; *p; p++)
        np += *p == '-';
    const char **part = calloc(np, sizeof *part);
    char **ph = calloc(np, sizeof *ph);
    char **spelled = calloc(np, sizeof *spelled);
    int st = part && ph && spelled ? MHA_OK : MHA_ENOMEM;
    size_t k = 0;
    for (char *p = w, *q; st == MHA_OK && p; p = q) {
        q = strchr(p, '-');
        if (q)
            *q++ = '\0';
        part[k++] = p;
    }
    double lp = 0.0;
    for (size_t i = 0; st == MHA_OK && i < np; i++) {
        const size_t a0 = g->n_ans;
        pending pw;
        size_t nm = 0;
        if ((st = prepare(g, part[i], flags, 1, &pw, &nm, err, errlen)) != MHA_OK)
            break;
        if (pw.model) { /* the model, for this part alone */
            st = part_by_model(g, part[i], word, flags, &ph[i], &spelled[i], &lp, err, errlen);
        } else {
            if (!(ph[i] = strdup(g->arena + g->ans[a0].off)) ||
                !(spelled[i] = strdup(g->arena + g->ans[a0].word_off)))
                st = MHA_ENOMEM;
            lp += g->ans[a0].logprob;
        }
        g->n_ans = a0; /* a part's answer is not the word's */
    }
    if (st == MHA_OK && (st = join_parts(g, ph, spelled, np, lp)) == MHA_OK)
        *done = 1;
    for (size_t i = 0; i < np && ph && spelled; i++) {
        free(ph[i]);
        free(spelled[i]);
    }
    UTIL_FREE_ALL(ph, spelled, part, w);
    return st;
}

static int prepare(mha_g2p *g, const char *word, unsigned flags, size_t nbest, pending *pw,
                   size_t *n_model, char *err, size_t errlen)
{
    memset(pw, 0, sizeof *pw);
    pw->first_ans = g->n_ans;
    int st = MHA_OK, found = 0;
    if (!(flags & MHA_G2P_NO_LEXICON) &&
        (st = g2p__lookup(g, word, flags, nbest, &found)) != MHA_OK)
        return st;
    if (!found && (st = parts(g, word, flags, err, errlen, &found)) != MHA_OK)
        return st;
    if (found) {
        pw->n_ans = g->n_ans - pw->first_ans;
        return MHA_OK;
    }
    pw->model = 1;
    pw->slot = (*n_model)++;
    return MHA_OK;
}

/* The call's first failure in word order (the passes meet the words in another order):
 * its status (MHA_OK: none yet) and word. */
typedef struct first_failure {
    int st;
    size_t word;
} first_failure;

/* Word i failed with status s and message msg: its status, and the call's first failure
 * (status and message) when no earlier word has failed. */
static void word_failed(int *status, size_t i, int s, const char *msg, first_failure *f,
                        char *err, size_t errlen)
{
    status[i] = s;
    if (f->st == MHA_OK || i < f->word) {
        *f = (first_failure){s, i};
        set_err(err, errlen, "%s", msg);
    }
}

/* The model's half of one batch call: the words it decodes (dec_of[j]: the call's index of
 * decoding row j) and their hypotheses, nbest a row (res[row·nbest + k][max_tgt] tokens,
 * res_len, res_lp; a log-probability of -inf: no such hypothesis). */
typedef struct model_pass {
    int32_t *res;
    size_t *res_len;
    double *res_lp;
    size_t *dec_of;
    size_t n_dec;
} model_pass;

static void model_pass_free(model_pass *m)
{
    UTIL_FREE_ALL(m->res, m->res_len, m->res_lp, m->dec_of);
}

/* Room for n_model words: the decoding scratch and the pass's buffers. */
static int model_pass_alloc(mha_g2p *g, size_t n_model, size_t nbest, model_pass *m)
{
    int st = scratch(g, n_model);
    if (st != MHA_OK)
        return st;
    m->res = calloc(n_model * nbest * g->max_tgt + 1, sizeof *m->res);
    m->res_len = calloc(n_model * nbest + 1, sizeof *m->res_len);
    m->res_lp = calloc(n_model * nbest + 1, sizeof *m->res_lp);
    m->dec_of = calloc(n_model + 1, sizeof *m->dec_of);
    return m->res && m->res_len && m->res_lp && m->dec_of ? MHA_OK : MHA_ENOMEM;
}

/* The words the model answers, spelled into g->ids row by row (one that cannot be spelled
 * fails alone: its status and, if first, the call's message). MHA_OK or MHA_ENOMEM. */
static int spell_for_model(mha_g2p *g, size_t n_words, char *const *norm, pending *pw,
                           int *status, first_failure *first_bad, char *err, size_t errlen,
                           model_pass *m)
{
    const size_t S = g->max_src;
    for (size_t i = 0; i < n_words; i++) {
        if (!pw[i].model || status[i] != MHA_OK)
            continue;
        size_t len = 0;
        char e2[512] = "";
        const int s = g2p__spell(g, norm[i], NULL, g->ids + m->n_dec * S, &len, &pw[i].woff,
                                 e2, sizeof e2);
        if (s == MHA_ENOMEM)
            return s;
        if (s != MHA_OK) {
            word_failed(status, i, s, e2, first_bad, err, errlen);
            continue;
        }
        g->ids_len[m->n_dec] = len;
        pw[i].slot = m->n_dec;
        m->dec_of[m->n_dec++] = i;
    }
    return MHA_OK;
}

/* 1 if word row j's scores are all usable: its first hypothesis finite, and the others
 * finite or −inf (none). */
static int scores_usable(const model_pass *m, size_t j, size_t nbest)
{
    for (size_t k = 0; k < nbest; k++) {
        const double lp = m->res_lp[j * nbest + k];
        if (!(isfinite(lp) || (k > 0 && lp == -INFINITY)))
            return 0;
    }
    return 1;
}

/* The decoded hypotheses as the words' answers in the arena: up to nbest a word (fewer when
 * the beam found fewer). A word whose scores are not finite fails alone (not_finite: its
 * status and, if first, the call's message). */
static int model_answers(mha_g2p *g, pending *pw, const model_pass *m, size_t nbest,
                         unsigned flags, char *const *norm, int *status,
                         first_failure *first_bad, char *err, size_t errlen)
{
    const size_t L = g->max_tgt;
    int st = MHA_OK;
    for (size_t j = 0; st == MHA_OK && j < m->n_dec; j++) {
        pending *p = &pw[m->dec_of[j]];
        p->first_ans = g->n_ans;
        if (!scores_usable(m, j, nbest)) {
            char e2[512];
            const size_t i = m->dec_of[j];
            word_failed(status, i, not_finite(norm[i], e2, sizeof e2), e2, first_bad, err,
                        errlen);
            continue;
        }
        for (size_t k = 0; k < nbest && st == MHA_OK; k++) {
            const size_t o = j * nbest + k;
            if (!isfinite(m->res_lp[o]))
                break; /* fewer hypotheses than nbest */
            const char **sym = calloc(m->res_len[o] + 1, sizeof *sym);
            size_t off;
            if (!sym) {
                st = MHA_ENOMEM;
                break;
            }
            for (size_t t = 0; t < m->res_len[o]; t++)
                sym[t] = g->tgt.sym[m->res[o * L + t]];
            st = g2p__arena_join(g, sym, m->res_len[o], (flags & MHA_G2P_NO_STRESS) != 0, &off);
            free(sym);
            if (st == MHA_OK)
                st = g2p__add_answer(g, off, p->woff, m->res_lp[o], MHA_G2P_SOURCE_MODEL, -1);
        }
        p->n_ans = g->n_ans - p->first_ans;
    }
    return st;
}

/* Each word's answers into out[i·nbest ..] (pointers into the arena, which no longer moves)
 * and their number into n_out[i]. */
static void point_out(const mha_g2p *g, size_t n_words, const pending *pw, const int *status,
                      size_t nbest, mha_g2p_pron *out, size_t *n_out)
{
    for (size_t i = 0; i < n_words; i++) {
        if (status[i] != MHA_OK)
            continue;
        const size_t n = pw[i].n_ans < nbest ? pw[i].n_ans : nbest;
        for (size_t k = 0; k < n; k++) {
            const answer *a = &g->ans[pw[i].first_ans + k];
            out[i * nbest + k] = (mha_g2p_pron){.phones = g->arena + a->off,
                                                .word = g->arena + a->word_off,
                                                .logprob = a->logprob, .source = a->source,
                                                .lexicon = a->lexicon};
        }
        n_out[i] = n;
    }
}

int mha_g2p_pronounce_batch(mha_g2p *g, size_t n_words, const char *const *words,
                            unsigned flags, size_t nbest, mha_g2p_pron *out, size_t *n_out,
                            int *status, char *err, size_t errlen)
{
    if (!g || (n_words && (!words || !out || !n_out || !status)) || nbest == 0 ||
        nbest > MHA_G2P_MAX_NBEST || (flags & ~(unsigned)(MHA_G2P_NO_STRESS |
                                                          MHA_G2P_NO_LEXICON))) {
        set_err(err, errlen, "mha_g2p_pronounce: a NULL argument, nbest %zu outside [1, %d] "
                "or unknown flags", nbest, MHA_G2P_MAX_NBEST);
        return MHA_EINVAL;
    }
    g->arena_len = 0;
    g->n_ans = 0;
    for (size_t i = 0; i < n_words; i++) {
        n_out[i] = 0;
        status[i] = MHA_OK;
    }
    pending *pw = calloc(n_words + 1, sizeof *pw);
    char **norm = calloc(n_words + 1, sizeof *norm);
    int st = pw && norm ? MHA_OK : MHA_ENOMEM;
    first_failure first_bad = {MHA_OK, 0};
    size_t n_model = 0;
    /* 1. lexicons and hyphenated words; the rest is the model's */
    for (size_t i = 0; st == MHA_OK && i < n_words; i++) {
        if (!words[i]) {
            char e2[64];
            snprintf(e2, sizeof e2, "word %zu: NULL", i);
            word_failed(status, i, MHA_EINVAL, e2, &first_bad, err, errlen);
            continue;
        }
        if (!(norm[i] = g2p__normalised(words[i]))) {
            st = MHA_ENOMEM;
            break;
        }
        char e2[512] = "";
        const int s = prepare(g, norm[i], flags, nbest, &pw[i], &n_model, e2, sizeof e2);
        if (s == MHA_ENOMEM) {
            st = s;
            break;
        }
        if (s != MHA_OK)
            word_failed(status, i, s, e2, &first_bad, err, errlen);
    }
    /* 2. the model, for the words no lexicon answered, in one batch */
    model_pass mp = {0};
    if (st == MHA_OK && n_model > 0) {
        st = model_pass_alloc(g, n_model, nbest, &mp);
        if (st == MHA_OK)
            st = spell_for_model(g, n_words, norm, pw, status, &first_bad, err, errlen, &mp);
        if (st == MHA_OK && mp.n_dec > 0 &&
            (st = decode(g, mp.n_dec, nbest, mp.res, mp.res_len, mp.res_lp))) {
            set_err(err, errlen, "decoding: %s", mha_strerror(st));
            for (size_t j = 0; j < mp.n_dec; j++) /* the words the model was to answer failed */
                status[mp.dec_of[j]] = st;
        }
        if (st == MHA_OK)
            st = model_answers(g, pw, &mp, nbest, flags, norm, status, &first_bad, err, errlen);
    }
    /* 3. pointers into the arena, now that it no longer moves */
    if (st == MHA_OK)
        point_out(g, n_words, pw, status, nbest, out, n_out);
    if (st != MHA_OK) {
        for (size_t i = 0; i < n_words; i++)
            n_out[i] = 0;
        if (st == MHA_ENOMEM)
            set_err(err, errlen, "out of memory");
    }
    for (size_t i = 0; norm && i < n_words; i++)
        free(norm[i]);
    free(norm);
    free(pw);
    model_pass_free(&mp);
    return st != MHA_OK ? st : first_bad.st;
}

int mha_g2p_pronounce(mha_g2p *g, const char *word, unsigned flags, size_t nbest,
                      mha_g2p_pron *out, size_t *n, char *err, size_t errlen)
{
    if (!word || !n) {
        set_err(err, errlen, "mha_g2p_pronounce: a NULL argument");
        return MHA_EINVAL;
    }
    int status;
    return mha_g2p_pronounce_batch(g, 1, &word, flags, nbest, out, n, &status, err, errlen);
}
