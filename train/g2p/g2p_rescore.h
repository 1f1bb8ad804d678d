/*
 * g2p_rescore — n-best rescoring, shared by libmha_g2p and mha-g2p: a second ensemble of
 * models (e.g. right-to-left ones, `mha-g2p train --reverse`) scores each hypothesis of a
 * beam's list by forced decoding (mha_s2s_ensemble_score), and the list is ranked again by
 *   (logprob + weight · their logprob) / (length + 1)^alpha.
 * Private: never installed. Functions return MHA_OK or a negative MHA_ status; nothing is
 * printed.
 */
#ifndef MHA_TRAIN_G2P_RESCORE_H
#define MHA_TRAIN_G2P_RESCORE_H

#include <stddef.h>
#include <stdint.h>

#include "mha_s2s.h"

enum { G2P_RESCORE_MAX_MODELS = 8 };

typedef struct g2p_rescorer {
    size_t n;                                 /* models (0: no rescoring)             */
    mha_s2s *m[G2P_RESCORE_MAX_MODELS];       /* the caller's                          */
    mha_s2s_infer *inf[G2P_RESCORE_MAX_MODELS]; /* owned                                 */
    int reverse;                              /* the models write right to left        */
    double weight;
    size_t rows, max_src, max_tgt;
    int32_t *src, *tgt;                       /* [rows, max_src], [rows, max_tgt]      */
    size_t *src_len, *tgt_len;                /* [rows]                                */
    double *lp;                               /* [rows]                                */
} g2p_rescorer;

/* Caches and buffers for lists of up to `rows` hypotheses of words of up to max_src
 * symbols and max_tgt (the models' target context) tokens, for models m[0..n) (1..8, of one
 * vocabulary and direction: the caller checks). *r is owned on success
 * (g2p_rescorer_free), zeroed on error (MHA_EINVAL, MHA_ESHAPE, MHA_ENOMEM). */
int g2p_rescorer_init(g2p_rescorer *r, size_t n, mha_s2s *const *m, int reverse,
                      double weight, size_t rows, size_t max_src, size_t max_tgt);
void g2p_rescorer_free(g2p_rescorer *r);

/* Rescore the lists of B words, K hypotheses each (B·K <= rows): hyps [B, K] and their
 * tokens tok [B, K, max_tgt], written right to left when hyp_reverse, as
 * mha_s2s_ensemble_beam returns them for sources src [B, S] (src_len [B]). Each
 * hypothesis' score becomes its combined score; perm[b·K + j] = the index (< K) of word
 * b's j-th best by it (stable: the earlier of equal scores first). Hypotheses the beam did
 * not fill (logprob −inf), and cut ones of max_tgt tokens (no room for their eos), get
 * score −inf and come last. */
int g2p_rescore(g2p_rescorer *r, size_t B, size_t K, size_t S, const int32_t *src,
                const size_t *src_len, const int32_t *tok, int hyp_reverse, double alpha,
                mha_s2s_hyp *hyps, size_t *perm);

#endif /* MHA_TRAIN_G2P_RESCORE_H */
