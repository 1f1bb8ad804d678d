/*
 * g2p_data — pronunciation dictionaries for the grapheme-to-phoneme program (mha-g2p):
 * reading (CMUdict and a TSV form), the split by word, vocabularies, encoding and padded
 * batches. Scoring (WER, PER) is g2p_score.h. data/README.md gives the conventions.
 *
 * Files. Two formats, one entry (one pronunciation) a line:
 *   G2P_FMT_CMUDICT  `WORD␠␠PH PH …`: the word, two spaces, the phones separated by spaces
 *                    (runs of spaces are one separator). `WORD(n)` (n decimal digits) is a
 *                    further pronunciation of WORD. Kept: words matching ^[A-Z][A-Z']*$ once
 *                    the `(n)` is removed, with at least one phone, every byte printable
 *                    ASCII. Source symbols: the word's letters and apostrophes.
 *   G2P_FMT_TSV      `source<TAB>T T …`: any non-empty source of valid UTF-8 without control
 *                    characters (U+0000..U+001F, U+007F..U+009F), a TAB, one or more target
 *                    tokens separated by spaces (no control character; a second TAB is one).
 *                    Source symbols: the source's Unicode code points.
 *   G2P_FMT_AUTO     TSV if the first line that is neither blank nor a comment holds a TAB,
 *                    else CMUdict.
 * In both: lines end in LF or CR LF; trailing spaces and CRs are removed; a missing final
 * newline is fine. Blank lines are ignored (not counted). Every other line that is not a
 * usable entry — a comment (starting with ";;;"), no separator, a word outside the filter,
 * bytes that are not ASCII (CMUdict) or not UTF-8 (TSV), an empty pronunciation — is skipped
 * and counted, never an error. A source that repeats (CMUdict: also as WORD(n)) adds
 * pronunciations to the first one's word, wherever it appears; each word's pronunciations are
 * then contiguous, in file order. Identical repeated pronunciations are kept.
 *
 * Split (by word, so all pronunciations of a word share it): h = FNV-1a 64 of the word's bytes
 * (CMUdict: without "(n)"); h mod 20 ∈ {0, 1} → G2P_TEST, 2 → G2P_VALID, else G2P_TRAIN.
 *
 * Vocabularies: `n_special` reserved symbols first, then the distinct symbols of the data
 * sorted by strcmp (bytes; for UTF-8 that is code point order):
 *   source  0 "<pad>", then the code points of every word (CMUdict: ' A..Z: 28 in all);
 *   target  0 "<pad>", 1 "<s>", 2 "</s>", then the tokens (CMUdict: 69 phones, 72 in all).
 *
 * Errors: every function that can fail returns MHA_OK (0) or a negative MHA_ status from
 * <mha.h> and writes a one-line message (no newline, truncated to fit) to err[errcap] when
 * err != NULL and errcap > 0, naming the file (and the line, 1-based, where there is one).
 * On error no output is written: a zeroed or previously filled struct stays as it was and
 * stays freeable. Nothing here prints, exits or aborts.
 *   MHA_EINVAL    bad argument (NULL, unknown format, id out of range);
 *   MHA_EIO       the file cannot be opened or read (with the system's reason), or is not a
 *                 regular file;
 *   MHA_EFORMAT   empty file, no usable entry (the message says how many lines were
 *                 skipped), a line longer than G2P_MAX_LINE bytes, a reserved symbol in
 *                 the data, a malformed vocabulary;
 *   MHA_EOVERFLOW file larger than G2P_MAX_FILE_BYTES, a buffer or batch too small;
 *   MHA_ENOMEM    out of memory.
 *
 * Letters: W words, P pronunciations, K tokens (Σ pronunciation lengths), B batch rows,
 * S source positions, T target positions.
 */
#ifndef MHA_TRAIN_G2P_DATA_H
#define MHA_TRAIN_G2P_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Target ids of the reserved symbols; the source vocabulary reserves only id 0 (pad). */
enum { G2P_PAD = 0, G2P_BOS = 1, G2P_EOS = 2, G2P_NSPECIAL = 3, G2P_SRC_NSPECIAL = 1 };
/* The decoder target of a padded position in g2p_batch: the "not scored" row of
 * mha_xent_forward. */
enum { G2P_UNSCORED = -1 };

typedef enum g2p_split { G2P_TRAIN = 0, G2P_VALID = 1, G2P_TEST = 2, G2P_NSPLIT = 3 } g2p_split;
typedef enum g2p_format { G2P_FMT_AUTO = 0, G2P_FMT_CMUDICT = 1, G2P_FMT_TSV = 2 } g2p_format;

/* Longest line (bytes, without its LF) and largest file read. */
#define G2P_MAX_LINE ((size_t)64 * 1024)
#define G2P_MAX_FILE_BYTES ((size_t)1 << 30)

/* ---- split ----------------------------------------------------------------------------- */

/* FNV-1a 64 of s[0..n): h = 0xcbf29ce484222325; per byte h = (h ^ byte) · 0x100000001b3. */
uint64_t g2p_fnv1a64(const char *s, size_t n);
/* The split of a word (NUL-terminated): enum g2p_split from g2p_fnv1a64(word) mod 20. */
int g2p_split_of(const char *word);

/* ---- dictionary ------------------------------------------------------------------------ */

typedef struct g2p_word {  /* one distinct word and all its pronunciations            */
    char *text;            /* the word as written (CMUdict: upper case, no "(n)"); UTF-8 */
    int split;             /* enum g2p_split, g2p_split_of(text)                       */
    size_t first, count;   /* its pronunciations: prons[first .. first + count), count >= 1 */
} g2p_word;

typedef struct g2p_pron {  /* one pronunciation (one line of the file)                 */
    size_t word;           /* index into words                                         */
    size_t line;           /* 1-based line number in the file                          */
    size_t off, len;       /* its target symbols: tokens[off .. off + len), len >= 1   */
} g2p_pron;

typedef struct g2p_dict {      /* a file as parsed, before any vocabulary              */
    g2p_word *words;           /* [W] in order of first appearance                     */
    size_t n_words;            /* W                                                    */
    g2p_pron *prons;           /* [P] grouped by word (words[w].first ..), file order within */
    size_t n_prons;            /* P                                                    */
    char **tokens;             /* [K] every pronunciation's symbols, NUL-terminated, file order */
    size_t n_tokens;           /* K                                                    */
    size_t n_split[G2P_NSPLIT];/* words per split                                      */
    size_t n_lines;            /* lines in the file (a last line without LF counts)    */
    size_t skipped;            /* lines that are not usable entries (blank ones not counted) */
    size_t skipped_line_first; /* the first such line (1-based), 0 if none            */
    const char *skipped_why;   /* why that line was skipped (static string), "" if none */
    size_t max_src, max_tgt;   /* longest word (source symbols), pronunciation (tokens) */
    int format;                /* the format read: G2P_FMT_CMUDICT or G2P_FMT_TSV      */
    char *store;               /* private: the storage every string above points into  */
    size_t store_bytes;        /* private: its size                                    */
    uint64_t *index;           /* private: [index_cap] the parse's g2p__smap of the words
                                  (hash << 32 | word + 1, or 0; g2p_dict_find)         */
    size_t index_cap;          /* private: a power of two > 2 · W                      */
} g2p_dict;

/* Read and parse the file at `path` (a regular file of at most G2P_MAX_FILE_BYTES; a FIFO
 * or directory is refused without blocking). format: enum g2p_format. *d is owned on
 * success (free with g2p_dict_free); on error it is not written. */
int g2p_dict_read(const char *path, int format, g2p_dict *d, char *err, size_t errcap);
/* The same for data[0..len) (copied); `name` (may be NULL) names it in messages. */
int g2p_dict_parse(const void *data, size_t len, const char *name, int format, g2p_dict *d,
                   char *err, size_t errcap);
/* Free what *d owns and zero it. NULL and a zeroed dict are no-ops. */
void g2p_dict_free(g2p_dict *d);
/* The bytes a parsed dictionary holds (its tables and the copy of its file). */
size_t g2p_dict_bytes(const g2p_dict *d);
/* The index of `word` in d->words (exact, case-sensitive), or SIZE_MAX: the hash table the
 * parse built to merge alternates, kept. */
size_t g2p_dict_find(const g2p_dict *d, const char *word);

/* ---- vocabularies ---------------------------------------------------------------------- */

typedef struct g2p_vocab { /* id -> symbol                                              */
    size_t n;              /* V, <= INT32_MAX                                          */
    size_t n_special;      /* the first n_special ids are reserved; sym[n_special .. n) is
                              strictly increasing by strcmp                            */
    char **sym;            /* [V] owned NUL-terminated non-empty symbols, all distinct  */
} g2p_vocab;

/* Build both vocabularies of a dictionary (see the top of this file). A target token equal
 * to a reserved symbol ("<pad>", "<s>", "</s>") is MHA_EFORMAT (naming its line). *src and
 * *tgt are owned on success (g2p_vocab_free), not written on error. */
int g2p_vocab_build(const g2p_dict *d, g2p_vocab *src, g2p_vocab *tgt, char *err,
                    size_t errcap);
/* A vocabulary from a list (e.g. a checkpoint's): sym[0..n) copied; it must satisfy the
 * g2p_vocab invariants (MHA_EFORMAT otherwise, naming the offending id). */
int g2p_vocab_make(g2p_vocab *v, const char *const *sym, size_t n, size_t n_special,
                   char *err, size_t errcap);
/* Deep copy of src into *dst (owned). MHA_EINVAL, MHA_ENOMEM; *dst not written on error. */
int g2p_vocab_copy(g2p_vocab *dst, const g2p_vocab *src);
/* 1 if a and b hold the same symbols in the same order (and the same reserved count). */
int g2p_vocab_equal(const g2p_vocab *a, const g2p_vocab *b);
/* Free the symbols and zero *v. NULL and a zeroed vocabulary are no-ops. */
void g2p_vocab_free(g2p_vocab *v);
/* The id of sym, or -1 (reserved symbols searched in order, the rest by binary search). */
int g2p_vocab_find(const g2p_vocab *v, const char *sym);

/* What g2p_encode_word returns for a word it cannot encode. */
enum { G2P_ENC_UNKNOWN = -1, G2P_ENC_BADUTF8 = -2 };
/* Encode a word (NUL-terminated UTF-8) to source ids, one per code point. Returns the number
 * of symbols n; ids[0..n) are written only when n <= cap (else nothing: call again with a
 * larger buffer; ids may be NULL with cap 0 to count). G2P_ENC_UNKNOWN: a code point is not
 * in v; G2P_ENC_BADUTF8: the word is not valid UTF-8; then *bad (if non-NULL) gets the byte
 * offset of the first such symbol and nothing is written (v or word NULL: G2P_ENC_UNKNOWN). */
long g2p_encode_word(const g2p_vocab *v, const char *word, int32_t *ids, size_t cap,
                     size_t *bad);
/* The symbols of ids[0..n) joined by sep (NULL: ""), in buf[0..*len) plus a NUL.
 * MHA_EINVAL: an id outside [0, V); MHA_EOVERFLOW: buf too small (buf gets "" if cap > 0). */
int g2p_vocab_join(const g2p_vocab *v, const int32_t *ids, size_t n, const char *sep,
                   char *buf, size_t cap, size_t *len);

/* ---- a dictionary encoded with a fixed vocabulary pair --------------------------------- */

/* Arrays parallel to the dictionary's words and pronunciations. A word is usable when its
 * spelling and every one of its pronunciations encode (so evaluation on another dictionary
 * than the model's scores only words it can represent, against all their references);
 * an unknown symbol is stored as -1. */
typedef struct g2p_set {
    size_t n_words, n_prons;    /* W, P of the dictionary                               */
    int32_t *src;               /* [src_off[W]] source ids: word w is
                                   src[src_off[w] .. src_off[w+1])                      */
    size_t *src_off;            /* [W + 1]                                              */
    int32_t *tgt;               /* [tgt_off[P]] target ids without <s> / </s>: pron p =
                                   tgt[tgt_off[p] .. tgt_off[p+1]) (its dict tokens)   */
    size_t *tgt_off;            /* [P + 1]                                              */
    size_t *pron_off;           /* [W + 1] word w's pronunciations are p in
                                   [pron_off[w], pron_off[w+1]) (= the dict's first, count) */
    size_t *pron_word;          /* [P] the word of each pronunciation                   */
    unsigned char *usable;      /* [W] 1 if usable, else 0                              */
    size_t *word_idx;           /* [words_off[G2P_NSPLIT]] usable word indices by split:
                                   split s = word_idx[words_off[s] .. words_off[s+1]), file order */
    size_t words_off[G2P_NSPLIT + 1];
    size_t *pron_idx;           /* [prons_off[G2P_NSPLIT]] the pronunciations of those words,
                                   the same way: the training examples of a split      */
    size_t prons_off[G2P_NSPLIT + 1];
    size_t unknown_src_words;   /* words with a source symbol outside the vocabulary    */
    size_t unknown_tgt_prons;   /* pronunciations with a token outside the target vocabulary */
    size_t unknown_tgt_words;   /* words with at least one such pronunciation          */
    size_t skipped_words;       /* words not usable (either reason)                    */
    size_t unknown_line_first;  /* first line with an unknown symbol (1-based), 0 if none */
    size_t max_src, max_tgt;    /* longest usable word, pronunciation                  */
    int reverse_targets;        /* g2p_batch writes each pronunciation last token first
                                   (a right-to-left model's batches); 0 after encoding  */
} g2p_set;

/* Encode every word and pronunciation of d with src and tgt (which need not come from d).
 * *s owned on success (g2p_set_free), not written on error. */
int g2p_set_encode(const g2p_dict *d, const g2p_vocab *src, const g2p_vocab *tgt, g2p_set *s,
                   char *err, size_t errcap);
/* Free what *s owns and zero it. NULL and a zeroed set are no-ops. */
void g2p_set_free(g2p_set *s);

/* A padded batch of B pronunciations prons[0..B) (pronunciation indices of usable words):
 * for row b with word ids x[0..m) and pronunciation ids y[0..L),
 *   src     [B, S]  x_0 … x_{m−1}, then G2P_PAD                       (encoder input)
 *   tgt_in  [B, T]  <s> y_0 … y_{L−1}, then G2P_PAD                   (decoder input)
 *   tgt_out [B, T]  y_0 … y_{L−1} </s>, then G2P_UNSCORED (−1)        (decoder targets)
 * where y is the pronunciation, or its tokens in reverse order when s->reverse_targets
 * (the source padding mask is src != G2P_PAD; the target's, tgt_out != G2P_UNSCORED).
 * Needs m <= S and L + 1 <= T for every row (else MHA_EOVERFLOW); MHA_EINVAL for an index
 * out of range or of a word that is not usable. Nothing is written on error. */
int g2p_batch(const g2p_set *s, const size_t *prons, size_t B, size_t S, size_t T,
              int32_t *src, int32_t *tgt_in, int32_t *tgt_out, char *err, size_t errcap);

/* order[0..n) = 0..n−1 sorted by len[] (a length above max_len counts as max_len), ties
 * by index: the order in which words are decoded in batches of similar length. A counting
 * sort (max_len <= 256): no global state, so decoders in several threads never meet. */
void g2p_order_by_length(size_t n, const size_t *len, size_t max_len, size_t *order);

#ifdef __cplusplus
}
#endif

#endif /* MHA_TRAIN_G2P_DATA_H */
