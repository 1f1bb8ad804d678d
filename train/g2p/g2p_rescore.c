/* n-best rescoring by a second ensemble (g2p_rescore.h). */
#include "g2p_rescore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "g2p_data.h"
#include "mha.h"
#include "util.h"

void g2p_rescorer_free(g2p_rescorer *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        mha_s2s_infer_destroy(r->inf[i]);
    UTIL_FREE_ALL(r->src, r->tgt, r->src_len, r->tgt_len, r->lp);
    memset(r, 0, sizeof *r);
}

int g2p_rescorer_init(g2p_rescorer *r, size_t n, mha_s2s *const *m, int reverse,
                      double weight, size_t rows, size_t max_src, size_t max_tgt)
{
    if (!r)
        return MHA_EINVAL;
    memset(r, 0, sizeof *r);
    if (n == 0 || n > G2P_RESCORE_MAX_MODELS || !m || rows == 0 || max_src == 0 ||
        max_tgt < 2 || !isfinite(weight) || weight < 0)
        return MHA_EINVAL;
    for (size_t i = 0; i < n; i++) {
        r->m[i] = m[i];
        const int st = mha_s2s_infer_create(&r->inf[i], m[i], rows, max_src, max_tgt);
        if (st != MHA_OK) {
            g2p_rescorer_free(r);
            return st;
        }
        r->n = i + 1;
    }
    r->reverse = reverse != 0;
    r->weight = weight;
    r->rows = rows;
    r->max_src = max_src;
    r->max_tgt = max_tgt;
    r->src = calloc(rows * max_src, sizeof *r->src);
    r->tgt = calloc(rows * max_tgt, sizeof *r->tgt);
    r->src_len = calloc(rows, sizeof *r->src_len);
    r->tgt_len = calloc(rows, sizeof *r->tgt_len);
    r->lp = calloc(rows, sizeof *r->lp);
    if (!r->src || !r->tgt || !r->src_len || !r->tgt_len || !r->lp) {
        g2p_rescorer_free(r);
        return MHA_ENOMEM;
    }
    return MHA_OK;
}

/* A hypothesis the models can score: one the beam filled, with room for its eos. */
static int scorable(const mha_s2s_hyp *h, size_t max_tgt)
{
    return isfinite(h->logprob) && h->len + 1 <= max_tgt;
}

int g2p_rescore(g2p_rescorer *r, size_t B, size_t K, size_t S, const int32_t *src,
                const size_t *src_len, const int32_t *tok, int hyp_reverse, double alpha,
                mha_s2s_hyp *hyps, size_t *perm)
{
    if (!r || r->n == 0 || !src || !src_len || !tok || !hyps || !perm || B == 0 || K == 0 ||
        S == 0 || S > r->max_src || B > r->rows / K)
        return MHA_EINVAL;
    const size_t L = r->max_tgt, R = B * K;
    const int turn = (hyp_reverse != 0) != r->reverse; /* into the models' direction */
    for (size_t i = 0; i < R; i++) {
        const size_t b = i / K, n = hyps[i].len;
        memcpy(r->src + i * S, src + b * S, S * sizeof *r->src);
        r->src_len[i] = src_len[b];
        const int ok = scorable(&hyps[i], L);
        r->tgt_len[i] = ok ? n : 0;
        for (size_t t = 0; ok && t < n; t++)
            r->tgt[i * L + t] = tok[i * L + (turn ? n - 1 - t : t)];
    }
    const int st = mha_s2s_ensemble_score(r->n, r->m, r->inf, R, S, r->src, r->src_len,
                                          G2P_BOS, G2P_EOS, r->tgt, L, r->tgt_len, r->lp);
    if (st != MHA_OK)
        return st;
    for (size_t i = 0; i < R; i++) {
        mha_s2s_hyp *h = hyps + i;
        h->score = scorable(h, L) ? (h->logprob + r->weight * r->lp[i]) /
                                        pow((double)h->len + 1.0, alpha)
                                  : -INFINITY;
    }
    for (size_t b = 0; b < B; b++) { /* insertion sort: stable */
        size_t *p = perm + b * K;
        const mha_s2s_hyp *h = hyps + b * K;
        for (size_t k = 0; k < K; k++)
            p[k] = k;
        for (size_t i = 1; i < K; i++)
            for (size_t j = i; j > 0 && h[p[j]].score > h[p[j - 1]].score; j--) {
                const size_t t = p[j];
                p[j] = p[j - 1];
                p[j - 1] = t;
            }
    }
    return MHA_OK;
}
