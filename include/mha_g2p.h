/*
 * mha_g2p — pronunciations as a library (libmha_g2p, pkg-config name mha_g2p): a model
 * of `mha-g2p train` (a file such as models/g2p-cmudict.safetensors), with zero or more
 * lexicons looked up first.
 *
 *   mha_g2p *g;
 *   char err[256];
 *   if (mha_g2p_open(&g, "g2p-cmudict.safetensors", 1, err, sizeof err) != MHA_OK) ...
 *   mha_g2p_add_lexicon(g, "cmudict.dict", err, sizeof err);   (optional, any number)
 *   mha_g2p_pron p[4];
 *   size_t n;
 *   mha_g2p_pronounce(g, "hello", 0, 4, p, &n, err, sizeof err);
 *   → p[0].phones "HH AH0 L OW1", p[0].source MHA_G2P_SOURCE_LEXICON, ...
 *   mha_g2p_close(g);
 *
 * Which source answers a word:
 *   1. the lexicons, in the order they were added (a user's overrides first, then the
 *      model's own dictionary, say): the first that lists the word gives its
 *      pronunciations, in file order (at most nbest of them); the model is not run;
 *   2. a hyphenated word that no lexicon lists (SELF-DRIVING), when the model's alphabet
 *      has no '-': each part pronounced on its own (steps 1 and 3, the best pronunciation
 *      of each), joined by a space: one answer, source MHA_G2P_SOURCE_PARTS, logprob the
 *      Σ of the parts' (0 for a lexicon's part);
 *   3. the model: beam search (mha_g2p_set_beam; width max(beam, nbest)), the nbest best
 *      hypotheses by score, with log P(phones | word).
 * Words are matched as given, then upper-cased, then lower-cased (ASCII letters; CMUdict's
 * words are upper case), in a lexicon and in the model's alphabet alike; a right single
 * quotation mark (U+2019) is read as an apostrophe. Flag MHA_G2P_NO_LEXICON skips the
 * lexicons (the model alone, a hyphenated word still by its parts); MHA_G2P_NO_STRESS
 * removes stress digits (AH0 → AH) from every answer.
 *
 * Contract: every function that can fail returns MHA_OK (0) or a negative MHA_ status of
 * <mha.h> and writes a one-line message (no newline) into err[errlen] when err != NULL and
 * errlen > 0. Nothing is printed; nothing exits or aborts. A handle is used by one thread
 * at a time (no internal lock): give each thread its own handle (they share nothing).
 * The strings of the answers belong to the handle and stay valid until its next
 * pronounce call or mha_g2p_close.
 *   MHA_EINVAL    NULL argument; nbest 0 or above 64; a word that is empty, not UTF-8, or
 *                 holds a character the model cannot read (the message names it);
 *   MHA_ESHAPE    a word longer than the model reads (the message says how long);
 *   MHA_EIO       a file that cannot be read (with the system's reason);
 *   MHA_EFORMAT   a file that is not a model of mha-g2p (or is corrupt: its checksums),
 *                 a lexicon with no usable line;
 *   MHA_ENOMEM    out of memory.
 */
#ifndef MHA_G2P_H
#define MHA_G2P_H

#include <stddef.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mha_g2p mha_g2p;

/* Which source answered (mha_g2p_pron.source). */
enum mha_g2p_source {
    MHA_G2P_SOURCE_LEXICON = 1, /* a lexicon listed the word                          */
    MHA_G2P_SOURCE_PARTS = 2,   /* a hyphenated word, pronounced part by part          */
    MHA_G2P_SOURCE_MODEL = 3    /* the model                                            */
};

/* Flags of mha_g2p_pronounce (bitwise or). */
enum {
    MHA_G2P_NO_STRESS = 1u, /* strip the stress digits: HH AH0 L OW1 → HH AH L OW          */
    MHA_G2P_NO_LEXICON = 2u /* ask the model only                                         */
};

enum { MHA_G2P_MAX_NBEST = 64 };

/* One pronunciation. */
typedef struct mha_g2p_pron {
    const char *phones; /* symbols separated by one space (the handle's; see above)       */
    const char *word;   /* the word as its source spells it: the lexicon's entry, or the
                           spelling the model read (HELLO for hello); parts joined by '-' */
    double logprob;     /* the model's log P(phones | word); 0 for a lexicon's            */
    int source;         /* enum mha_g2p_source                                             */
    int lexicon;        /* which lexicon (0 = the first added) for LEXICON, else -1        */
} mha_g2p_pron;

/* Open a model of mha-g2p train (weights-only or a checkpoint; its checksums verified)
 * for decoding with `threads` threads (0 = all cores): with 2 or more, the model's batches
 * of words (32 hypotheses each) are decoded two at a time, each on a thread of its own,
 * both reading the model's one set of weights, laid out for decoding in place
 * (mha_s2s_decode_only, mha_s2s_infer_share); the answers are the same bits whatever the
 * thread count. Beam 1 (greedy), alpha 1. *out is
 * owned (mha_g2p_close). The file is read and checked whole now (every error of a file is
 * an error of this call); the model's weights are laid out for decoding, and its caches
 * made, at the first word the model has to answer — a process whose words all come from
 * lexicons never pays for them, and a pronounce call may then return MHA_ENOMEM. The same
 * holds for mha_g2p_add_model and mha_g2p_add_rescorer. */
MHA_API int mha_g2p_open(mha_g2p **out, const char *model_path, int threads, char *err,
                         size_t errlen);
MHA_API void mha_g2p_close(mha_g2p *g);

/* Add a model decoded with the first as one (an ensemble: at each step the models'
 * log-probabilities are averaged, mha_s2s_ensemble_beam): a model of the same data (the
 * same symbols and word sizes, else MHA_EFORMAT) that writes in the same direction (a
 * right-to-left model of `mha-g2p train --reverse` goes with right-to-left ones; their
 * answers are turned around into reading order), up to 8 models in all (MHA_EINVAL).
 * logprob is then the ensemble's. */
MHA_API int mha_g2p_add_model(mha_g2p *g, const char *model_path, char *err, size_t errlen);

/* Add a model that rescores the beam's list (n-best rescoring; several make an ensemble of
 * their own, up to 8, of one direction): with a beam of width K = max(beam, nbest) >= 2,
 * the model (or ensemble) returns its K best hypotheses, each is scored by these models
 * (the log-probability they give it, by forced decoding: mha_s2s_ensemble_score), and they
 * are ranked by (logprob + weight · that) / (length + 1)^alpha; the answers' logprob stays
 * the first models'. A model of the same data as the first (MHA_EFORMAT otherwise). Made
 * for right-to-left models (`mha-g2p train --reverse`), which see each pronunciation from
 * its end; greedy decoding (K = 1) is not rescored. Weight 1 until set. */
MHA_API int mha_g2p_add_rescorer(mha_g2p *g, const char *model_path, char *err,
                                 size_t errlen);
/* The rescoring weight, in [0, 100] (MHA_EINVAL otherwise). */
MHA_API int mha_g2p_set_rescore_weight(mha_g2p *g, double weight);

/* Add a lexicon (a file mha-g2p train reads: CMUdict lines `WORD  PH PH …`, WORD(n) for
 * alternates, or `word<TAB>PH PH …` lines), searched after those added before. Lines that
 * are not entries are skipped, and counted in *skipped (may be NULL). */
MHA_API int mha_g2p_add_lexicon(mha_g2p *g, const char *path, size_t *skipped, char *err,
                                size_t errlen);

/* Beam width (1 = greedy; at most 64) and length normalisation alpha (hypotheses ranked by
 * logprob / (length + 1)^alpha, alpha in [0, 10]) of the model's answers. */
MHA_API int mha_g2p_set_beam(mha_g2p *g, size_t beam, double alpha);

/* Pronounce one word (NUL-terminated UTF-8): up to nbest (1 .. 64) pronunciations into
 * out[nbest], best first; *n gets how many (>= 1 on success). A word the model must answer
 * whose scores are not finite (a model whose weights, finite, overflow in decoding: a
 * damaged or crafted file) fails with MHA_ENONFINITE rather than answer garbage. */
MHA_API int mha_g2p_pronounce(mha_g2p *g, const char *word, unsigned flags, size_t nbest,
                              mha_g2p_pron *out, size_t *n, char *err, size_t errlen);

/* Pronounce n_words words at once (the model decodes them in batches: much faster than one
 * by one, and the same answers): word i's pronunciations in out[i·nbest ..], their number
 * in n_out[i] (0 when the word failed), its status in status[i]. Returns MHA_OK when every
 * word was pronounced; otherwise the first failing word's status, its message in err
 * (naming the word), the others still answered. */
MHA_API int mha_g2p_pronounce_batch(mha_g2p *g, size_t n_words, const char *const *words,
                                    unsigned flags, size_t nbest, mha_g2p_pron *out,
                                    size_t *n_out, int *status, char *err, size_t errlen);

/* The model's facts: the path of the dictionary it was trained on (its metadata "data",
 * as training saw it; "" if none), the longest word it reads (letters). */
MHA_API const char *mha_g2p_model_data(const mha_g2p *g);
/* 1 if every model of g was verified by its checksums, 0 if one has none (a file written
 * before mha-g2p stored them: its bytes could not be verified; a caller may say so). */
MHA_API int mha_g2p_checksummed(const mha_g2p *g);
MHA_API size_t mha_g2p_max_letters(const mha_g2p *g);

/* The bytes g holds, and will hold to decode with its thread count and the widest beam
 * set so far, into *bytes: its models' weights (each parameter once: a model that decodes
 * keeps them laid out for decoding, mha_s2s_decode_only), every decoding state its streams
 * make at the first word a model answers (mha_s2s_infer_bytes: key/value caches and the
 * encoder's buffers), the rescoring models' caches, and its lexicons' tables. Not counted:
 * the answers of the last call, and what the process's libraries map for themselves
 * (OpenBLAS, libxsmm, OpenMP: about 20 MiB). Known before any decoding, so a program can
 * refuse a model or a beam its machine cannot hold. MHA_EINVAL (NULL), MHA_EOVERFLOW. */
MHA_API int mha_g2p_memory(const mha_g2p *g, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* MHA_G2P_H */
