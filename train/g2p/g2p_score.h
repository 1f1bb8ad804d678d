/*
 * g2p_score — word and phone error rates of grapheme-to-phoneme predictions, with and
 * without stress (data/README.md gives the definitions).
 *
 * For each word, a hypothesis h (the predicted target ids, without <s>, </s> or padding) is
 * compared with the word's references r_1 … r_n (its pronunciations):
 *   correct   h equals some r_i exactly;
 *   closest   the r_i of least Levenshtein distance d(h, r_i) (unit costs); among equally
 *             close references the SHORTEST, and among those the first. (So a tie never
 *             lowers PER: the longer reference would divide the same distance by more.)
 * Over the words scored:
 *   WER = words not correct / words,   PER = Σ d(h, closest) / Σ |closest|.
 * Without stress, every id of h and of the references goes through a stress map first
 * (g2p_stress_map: "AH0" → "AH") and the closest reference is chosen again on the mapped
 * sequences; both tallies are kept in one pass (g2p_scorer).
 *
 * Errors as in g2p_data.h: MHA_OK or a negative MHA_ status and a one-line message in
 * err[errcap]; nothing written or tallied on error; nothing printed.
 */
#ifndef MHA_TRAIN_G2P_SCORE_H
#define MHA_TRAIN_G2P_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "g2p_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Levenshtein distance between a[na] and b[nb] (insertions, deletions, substitutions, each
 * cost 1), with the caller's scratch work[nb + 1]. No allocation. */
size_t g2p_edit_distance(const int32_t *a, size_t na, const int32_t *b, size_t nb, size_t *work);

typedef struct g2p_closest { /* the reference a hypothesis is scored against          */
    size_t ref;              /* its index in 0 .. n_ref                                */
    size_t dist;             /* d(h, r_ref); 0 = the hypothesis is correct             */
    size_t len;              /* |r_ref|                                                */
} g2p_closest;

/* The closest of n_ref >= 1 references (tie rule above): reference i is
 * ref[ref_off[i] .. ref_off[i+1]) (ref_off [n_ref + 1]; absolute offsets, so a g2p_set's
 * s->tgt with s->tgt_off + s->pron_off[w] and n_ref = pron_off[w+1] − pron_off[w] are the
 * references of word w). Scratch work[nh + 1]. No allocation. */
g2p_closest g2p_closest_ref(const int32_t *hyp, size_t nh, const int32_t *ref,
                            const size_t *ref_off, size_t n_ref, size_t *work);

/* The stress map of a target vocabulary: *reduced gets the same reserved symbols, then the
 * distinct symbols of tgt with a trailing stress digit 0, 1 or 2 removed (only from symbols
 * of two or more bytes), sorted; map[i] (map [tgt->n]) is the id in *reduced of symbol i so
 * reduced (reserved ids map to themselves). CMUdict: 72 → 42 (69 phones → 39).
 * A reduced symbol equal to a reserved one is MHA_EFORMAT. *reduced owned (g2p_vocab_free);
 * neither it nor map is written on error. */
int g2p_stress_map(const g2p_vocab *tgt, g2p_vocab *reduced, int32_t *map, char *err,
                   size_t errcap);

typedef struct g2p_tally {
    size_t words;   /* words scored                                                   */
    size_t wrong;   /* of them, not correct                                           */
    size_t edits;   /* Σ distance to the closest reference                            */
    size_t ref_len; /* Σ length of that reference                                     */
} g2p_tally;

/* wrong / words and edits / ref_len (0 when the denominator is 0). */
double g2p_wer(const g2p_tally *t);
double g2p_per(const g2p_tally *t);

typedef struct g2p_scorer {
    g2p_tally stress;     /* the symbols as they are                                   */
    g2p_tally nostress;   /* both sides through map (stays zero when map is NULL)      */
    const int32_t *map;   /* [map_n] borrowed stress map, or NULL                      */
    size_t map_n;         /* the target vocabulary size V it maps                      */
    size_t *work;         /* private scratch, grown as needed: [cap + 1]               */
    int32_t *buf;         /* private: mapped hypothesis and references [cap_buf]       */
    size_t *off;          /* private: mapped reference offsets [cap_off]               */
    size_t cap, cap_buf, cap_off;
} g2p_scorer;

/* Start with empty tallies; map (may be NULL: then only `stress` is kept) must outlive s. */
int g2p_scorer_init(g2p_scorer *s, const int32_t *map, size_t map_n);
/* Score one word: hyp[nh] against its n_ref >= 1 references (as g2p_closest_ref). With a
 * map, every id must be in [0, map_n) (MHA_EINVAL otherwise). *out (may be NULL) gets the
 * closest reference with stress [0] and without [1] ([1] zero without a map).
 * MHA_ENOMEM growing the scratch. Nothing is tallied on error. */
int g2p_scorer_add(g2p_scorer *s, const int32_t *hyp, size_t nh, const int32_t *ref,
                   const size_t *ref_off, size_t n_ref, g2p_closest out[2], char *err,
                   size_t errcap);
/* Free the scratch and zero *s. NULL is a no-op. */
void g2p_scorer_free(g2p_scorer *s);

#ifdef __cplusplus
}
#endif

#endif /* MHA_TRAIN_G2P_SCORE_H */
