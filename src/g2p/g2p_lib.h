/*
 * libmha_g2p's insides (src/g2p/): the handle, and what its three sources share —
 *   mha_g2p.c       opening models (an ensemble, rescoring models), lexicons, settings;
 *   g2p_words.c     the answers' strings, a word's spellings, lexicon lookup;
 *   g2p_pronounce.c the model's batches and the pronounce calls.
 * Not installed; nothing here is visible outside the library.
 */
#ifndef MHA_G2P_LIB_H
#define MHA_G2P_LIB_H

#include <stddef.h>
#include <stdint.h>

#include "g2p_data.h"
#include "g2p_internal.h"
#include "g2p_rescore.h"
#include "mha.h"
#include "mha_g2p.h"
#include "mha_s2s.h"
#include "mha_safetensors.h"

/* The sizes that set the memory of decoding (the key/value caches hold DECODE_ROWS rows in
 * all, the encoder's activations ENCODE_BATCH words); a build may choose others. Chosen with
 * bench/g2p_rows.sh (pronounce, 12,362 words, 2 threads): 128/16 ran greedy at 1,944 words/s
 * in 93 MiB, 64/8 at 1,673 in 62 MiB (beam 4: 779 → 709 words/s, 94 → 63 MiB), 32/8 at
 * 1,633 in 50 MiB (beam 4 620): 64/8 keeps both under 64 MiB for the least speed.
 * The rows are shared out over DECODE_STREAMS streams (a thread decodes its own batches;
 * before, two threads split each product of one batch and waited for each other at every
 * step, one of them idle a third of the time): on the AMD EPYC, 2 streams of 32 rows decode
 * the test words greedy in 3.4 s against 5.5–6.0 for one of 64 (beam 4: 8.1 against 14.2),
 * 67 MiB against 64 (beam 4: 62 against 59); 2 streams of 64 rows were no faster (3.8 s,
 * 84 MiB). */
#ifndef MHA_G2P_ENCODE_BATCH
#define MHA_G2P_ENCODE_BATCH 8
#endif
#ifndef MHA_G2P_DECODE_STREAMS
#define MHA_G2P_DECODE_STREAMS 2
#endif
#ifndef MHA_G2P_DECODE_ROWS
#define MHA_G2P_DECODE_ROWS 64
#endif
enum {
    ENCODE_BATCH = MHA_G2P_ENCODE_BATCH, /* words the model's encoder takes at once       */
    DECODE_ROWS = MHA_G2P_DECODE_ROWS,   /* hypotheses decoded at once (/ beam: words),
                                            shared out over the streams                  */
    DECODE_STREAMS = MHA_G2P_DECODE_STREAMS, /* batches decoded at once, a thread each    */
    SHOWN_BYTES = 64,   /* of a word in a message                                         */
    MAX_MODELS = 8      /* of an ensemble                                                 */
};

typedef struct lexicon {
    g2p_dict d; /* looked up with g2p_dict_find: the table its parse made */
} lexicon;

/* One answer while a call runs: its phones are arena[off ..] (pointers are made at the
 * end, as the arena may move while it grows). */
typedef struct answer {
    size_t off, word_off;
    double logprob;
    int source, lexicon;
} answer;

/* A decoding stream: what one thread decodes a batch of words with (rows hypotheses). */
typedef struct g2p_stream {
    mha_s2s_infer *inf[MAX_MODELS]; /* made at the first word the model answers (NULL
                                       before: g2p__ready)                               */
    int32_t *srcbuf, *tok;          /* the batch's sources; hypotheses' tokens            */
    size_t *lens, *tlen;
    double *lp;
    mha_s2s_hyp *hyps;
} g2p_stream;

struct mha_g2p {
    size_t n_models;
    mha_s2s *m[MAX_MODELS];      /* m[0] the model opened, the others its ensemble       */
    g2p_stream str[DECODE_STREAMS]; /* n_str of them, rows hypotheses each: batches of
                                       words are shared out over threads (one each)     */
    size_t n_str, rows;
    size_t cap0;                 /* rows of every stream's caches: rows, or the widest
                                    beam asked for (a word's K hypotheses in one batch)  */
    mha_st_file *file[MAX_MODELS];  /* m[i]'s verified file while its weights wait to be
                                       copied (g2p__ready), else NULL                   */
    int threads;
    int unverified; /* a model without checksums was opened */
    int reverse;    /* the models write right to left (answers are turned around)       */
    mha_s2s *rm[MAX_MODELS];     /* rescoring models (mha_g2p_add_rescorer)               */
    size_t n_rm;
    int rm_reverse;              /* they write right to left                              */
    double rweight;              /* mha_g2p_set_rescore_weight                            */
    mha_st_file *rfile[MAX_MODELS]; /* as file[], for rm[]                                */
    g2p_rescorer resc;           /* their caches, remade when one was added (resc_stale)  */
    int resc_stale;
    size_t *perm;                /* [DECODE_ROWS] the rescored order of a batch's lists   */
    g2p_vocab src, tgt;
    size_t max_src, max_tgt, beam;
    double alpha;
    char data[4096];
    lexicon *lex;
    size_t n_lex;
    char *arena; /* the strings of the answers of the last call                          */
    size_t arena_len, arena_cap;
    answer *ans;
    size_t n_ans, cap_ans;
    /* decoding scratch, grown as needed */
    int32_t *ids;
    size_t *ids_off, *ids_len, *order;
};

/* One-line messages: the g2p sources' formatter (g2p_internal.h). */
#define set_err(err, errlen, ...) ((void)util_fail(MHA_OK, (err), (errlen), __VA_ARGS__))

/* ---- mha_g2p.c ------------------------------------------------------------------------ */

/* Make what decoding needs and opening deferred: the weights of every model copied from its
 * file (read and verified when it was opened), its decoding caches, the rescoring models'
 * caches. A process whose words all come from lexicons never pays for them. MHA_ENOMEM
 * (with a message); MHA_OK when all is ready already. */
int g2p__ready(mha_g2p *g, char *err, size_t errlen);
/* After g2p__ready: the caches of streams 1 .. n_str−1, sharing stream 0's copy of each
 * model's weights (mha_s2s_infer_share), made when a call first has batches for them.
 * MHA_OK or MHA_ENOMEM. */
int g2p__streams(mha_g2p *g);
/* Make the streams' caches hold at least K rows (a beam of K > rows decodes one word per
 * batch): when they hold fewer, every stream's caches are dropped, to be made again with K
 * rows by g2p__ready / g2p__streams. */
void g2p__widen(mha_g2p *g, size_t K);

/* ---- g2p_words.c ---------------------------------------------------------------------- */

/* Append s[0..n) and a NUL to the arena; its offset in *off. */
int g2p__arena_put(mha_g2p *g, const char *s, size_t n, size_t *off);
/* Append the symbols sym[0..n) joined by spaces (stress digits removed when no_stress). */
int g2p__arena_join(mha_g2p *g, const char *const *sym, size_t n, int no_stress, size_t *off);
/* Append an answer: phones at arena offset off, the word as spelled at word_off. */
int g2p__add_answer(mha_g2p *g, size_t off, size_t word_off, double logprob, int source,
                    int lex);
/* word as a message shows it, in buf[cap] (returned): quoted, a word of more than
 * SHOWN_BYTES bytes cut after its first SHOWN_BYTES (up to 3 fewer, to end on a whole UTF-8
 * character), followed by "..." and its length, so a huge word gives a short message. */
const char *g2p__shown(const char *word, char *buf, size_t cap);
/* The word with U+2019 read as an apostrophe, in a new string (NULL: out of memory). */
char *g2p__normalised(const char *word);
/* Look word up in the lexicons (each spelling, each lexicon in order): the answers of the
 * first that lists it. *found 1 if one did. */
int g2p__lookup(mha_g2p *g, const char *word, unsigned flags, size_t nbest, int *found);
/* Source ids of word (as is, upper-, lower-cased: the first the alphabet spells) into ids
 * [max_src]; the length in *len, the spelling's arena offset in *woff. whole: the
 * hyphenated word `word` is a part of (for messages), or NULL. */
int g2p__spell(mha_g2p *g, const char *word, const char *whole, int32_t *ids, size_t *len,
               size_t *woff, char *err, size_t errlen);

#endif /* MHA_G2P_LIB_H */
