/* mha-g2p: decoding many words in batches of similar length, and scoring a split
 * (g2p_prog.h). */
#include "g2p_prog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    return p;
}

void g2p_decoder_init(g2p_decoder *d, size_t n_models, mha_s2s *const *models, size_t beam,
                      size_t nbest, double alpha)
{
    memset(d, 0, sizeof *d);
    if (n_models == 0 || n_models > G2P_MAX_MODELS)
        cli_die(CLI_EXIT_RUNTIME, "decoder: %zu models (1 to %d)", n_models, G2P_MAX_MODELS);
    mha_s2s_config mc;
    cli_check(mha_s2s_get_config(models[0], &mc), "model");
    d->n_models = n_models;
    d->beam = beam;
    d->nbest = nbest;
    d->alpha = alpha;
    d->max_src = mc.src_context;
    d->max_tgt = mc.tgt_context;
    /* words per batch: G2P_DECODE_ROWS hypotheses (the encoders take them in slices) */
    const size_t B = G2P_DECODE_ROWS / beam > 0 ? G2P_DECODE_ROWS / beam : 1;
    d->batch = B;
    for (size_t i = 0; i < n_models; i++) {
        d->m[i] = models[i];
        cli_check(mha_s2s_infer_create(&d->inf[i], models[i], B * beam, d->max_src, d->max_tgt),
                  "decoder caches");
    }
    d->src = xcalloc(B * d->max_src, sizeof *d->src);
    d->len = xcalloc(B, sizeof *d->len);
    d->kdec = nbest;
    d->out = xcalloc(B * beam * d->max_tgt, sizeof *d->out); /* room for rescoring's list */
    d->out_len = xcalloc(B * beam, sizeof *d->out_len);
    d->logprob = xcalloc(B * beam, sizeof *d->logprob);
    d->hyps = xcalloc(B * beam, sizeof *d->hyps);
}

void g2p_decoder_rescore(g2p_decoder *d, size_t n, mha_s2s *const *models, int reverse,
                         double weight)
{
    if (d->beam < 2 || d->resc.n)
        cli_die(CLI_EXIT_RUNTIME, "rescoring needs a beam (width %zu)", d->beam);
    cli_check(g2p_rescorer_init(&d->resc, n, models, reverse, weight, d->batch * d->beam,
                                d->max_src, d->max_tgt), "rescoring");
    d->kdec = d->beam;
}

void g2p_decoder_free(g2p_decoder *d)
{
    g2p_rescorer_free(&d->resc);
    for (size_t i = 0; i < d->n_models; i++)
        mha_s2s_infer_destroy(d->inf[i]);
    UTIL_FREE_ALL(d->src, d->len, d->out, d->out_len, d->logprob, d->hyps);
    memset(d, 0, sizeof *d);
}

/* Turn the n tokens of t around (a right-to-left model's hypothesis into reading order). */
static void turn_around(int32_t *t, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        const int32_t x = t[i];
        t[i] = t[n - 1 - i];
        t[n - 1 - i] = x;
    }
}

void g2p_decode_words(g2p_decoder *d, size_t n, const int32_t *const *srcs, const size_t *lens,
                      int32_t *out_tok, size_t *out_len, double *logprob, double *score)
{
    size_t *order = xcalloc(n, sizeof *order); /* by length, for little padding */
    g2p_order_by_length(n, lens, G2P_MAX_POS, order);
    const size_t K = d->nbest, L = d->max_tgt, maxlen = L; /* tokens before </s> */
    size_t *perm = xcalloc(d->batch * d->kdec, sizeof *perm);
    /* greedy and beam may emit up to max_tgt tokens; the model saw at most max_tgt − 1 */
    for (size_t b0 = 0; b0 < n; b0 += d->batch) {
        const size_t B = n - b0 < d->batch ? n - b0 : d->batch;
        size_t S = 1;
        for (size_t b = 0; b < B; b++)
            S = lens[order[b0 + b]] > S ? lens[order[b0 + b]] : S;
        for (size_t b = 0; b < B; b++) { /* src [B, S], padded with G2P_PAD */
            const size_t w = order[b0 + b];
            memset(d->src + b * S, 0, S * sizeof *d->src);
            memcpy(d->src + b * S, srcs[w], lens[w] * sizeof *d->src);
            d->len[b] = lens[w];
        }
        if (d->beam == 1) {
            cli_check(mha_s2s_ensemble_greedy(d->n_models, d->m, d->inf, B, S, d->src, d->len,
                                              G2P_BOS, G2P_EOS, maxlen, d->out, d->out_len,
                                              d->logprob),
                      "greedy decoding");
            for (size_t b = 0; b < B; b++) {
                const size_t w = order[b0 + b];
                memcpy(out_tok + w * L, d->out + b * maxlen, d->out_len[b] * sizeof *out_tok);
                out_len[w] = d->out_len[b];
                if (d->reverse)
                    turn_around(out_tok + w * L, out_len[w]);
                if (logprob)
                    logprob[w] = d->logprob[b];
                if (score)
                    score[w] = d->logprob[b];
            }
            continue;
        }
        const size_t KD = d->kdec; /* the beam's list per word; its best K are returned */
        cli_check(mha_s2s_ensemble_beam(d->n_models, d->m, d->inf, B, S, d->src, d->len, G2P_BOS,
                                        G2P_EOS, maxlen, d->beam, KD, d->alpha, d->hyps, d->out),
                  "beam search");
        if (d->resc.n)
            cli_check(g2p_rescore(&d->resc, B, KD, S, d->src, d->len, d->out, d->reverse,
                                  d->alpha, d->hyps, perm), "rescoring");
        for (size_t b = 0; b < B; b++)
            for (size_t k = 0; k < K; k++) {
                const size_t w = order[b0 + b], o = w * K + k;
                const size_t in = b * KD + (d->resc.n ? perm[b * KD + k] : k);
                memcpy(out_tok + o * L, d->out + in * maxlen,
                       d->hyps[in].len * sizeof *out_tok);
                out_len[o] = d->hyps[in].len;
                if (d->reverse)
                    turn_around(out_tok + o * L, out_len[o]);
                if (logprob)
                    logprob[o] = d->hyps[in].logprob;
                if (score)
                    score[o] = d->hyps[in].score;
            }
    }
    free(perm);
    free(order);
}

size_t g2p_score_split(g2p_decoder *d, const g2p_set *s, int split, const int32_t *map,
                       size_t map_n, g2p_tally *stress, g2p_tally *nostress, size_t limit,
                       unsigned char *wrong, int32_t *hyp_tok, size_t *hyp_len,
                       size_t *nonfinite)
{
    /* the split's usable words, or every usable word (every split's, one split after the
     * other): in word_idx's order, the order in which callers read wrong and hyp_* */
    const size_t first = s->words_off[split >= 0 ? split : 0];
    size_t count = s->words_off[split >= 0 ? split + 1 : G2P_NSPLIT] - first;
    const size_t *words = s->word_idx + first;
    if (count > limit)
        count = limit;
    const size_t K = d->nbest, L = d->max_tgt;
    const int32_t **srcs = xcalloc(count, sizeof *srcs);
    size_t *lens = xcalloc(count, sizeof *lens);
    int32_t *tok = xcalloc(count * K * L, sizeof *tok);
    size_t *tlen = xcalloc(count * K, sizeof *tlen);
    for (size_t i = 0; i < count; i++) {
        const size_t w = words[i];
        srcs[i] = s->src + s->src_off[w];
        lens[i] = s->src_off[w + 1] - s->src_off[w];
    }
    double *lp = nonfinite ? xcalloc(count * K + 1, sizeof *lp) : NULL;
    double *score = nonfinite ? xcalloc(count * K + 1, sizeof *score) : NULL;
    g2p_decode_words(d, count, srcs, lens, tok, tlen, lp, score);
    if (nonfinite) { /* the first word whose best hypothesis has a score that is not finite */
        *nonfinite = SIZE_MAX;
        for (size_t i = 0; i < count && *nonfinite == SIZE_MAX; i++)
            if (!isfinite(lp[i * K]) || !isfinite(score[i * K]))
                *nonfinite = i;
        free(lp);
        free(score);
        if (*nonfinite != SIZE_MAX) {
            UTIL_FREE_ALL(srcs, lens, tok, tlen);
            return 0;
        }
    }
    g2p_scorer sc;
    char err[256];
    cli_check(g2p_scorer_init(&sc, map, map_n), "scorer");
    /* references of word w: pronunciations [pron_off[w], pron_off[w+1]) as offsets into tgt */
    size_t *ref_off = NULL, cap = 0;
    for (size_t i = 0; i < count; i++) {
        const size_t w = words[i], p0 = s->pron_off[w], np = s->pron_off[w + 1] - p0;
        if (np + 1 > cap) {
            cap = 2 * (np + 1);
            ref_off = realloc(ref_off, cap * sizeof *ref_off);
            if (!ref_off)
                cli_die(CLI_EXIT_RUNTIME, "out of memory");
        }
        const size_t base = s->tgt_off[p0];
        for (size_t k = 0; k <= np; k++) /* pronunciations are contiguous in tgt */
            ref_off[k] = s->tgt_off[p0 + k] - base;
        g2p_closest c[2];
        const int32_t *h = tok + i * K * L;
        if (g2p_scorer_add(&sc, h, tlen[i * K], s->tgt + base, ref_off, np, c, err,
                           sizeof err) != MHA_OK)
            cli_die(CLI_EXIT_RUNTIME, "scoring: %s", err);
        if (wrong) /* as the headline WER counts: without stress when there is a map */
            wrong[i] = (map ? c[1].dist : c[0].dist) != 0;
        if (hyp_tok)
            memcpy(hyp_tok + i * L, h, tlen[i * K] * sizeof *hyp_tok);
        if (hyp_len)
            hyp_len[i] = tlen[i * K];
    }
    *stress = sc.stress;
    *nostress = sc.nostress;
    g2p_scorer_free(&sc);
    UTIL_FREE_ALL(ref_off, srcs, lens, tok, tlen);
    return count;
}
