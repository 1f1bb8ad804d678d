/*
 * text — character-level corpora for the GPT program: loading, vocabulary, split, batches of
 * windows, the fixed evaluation windows, and the next-character sampler.
 *
 * Symbols. A text is read in one of two modes:
 *   TEXT_BYTES  every byte is a symbol (0x01..0xFF; any encoding, or none);
 *   TEXT_UTF8   every Unicode code point is a symbol; the file must be valid UTF-8
 *               (no overlong forms, surrogates, truncated sequences, bytes C0 C1 F5..FF,
 *               stray continuation bytes, code points above U+10FFFF).
 * A NUL byte makes a file "not text" in both modes.
 *
 * Vocabulary: the distinct symbols of the text sorted by value (byte value or code point);
 * id i ∈ [0, V) is the i-th smallest. For Tiny Shakespeare V = 65, id 0 = '\n', id 1 = ' '.
 *
 * Split: the first n_train = floor(0.9·n) symbols are the training part, the other
 * n − n_train the validation part (n counted in symbols). Windows never cross the cut.
 *
 * Letters: V vocabulary size, n symbols, B windows per batch, T tokens per window.
 *
 * Errors: every function that can fail returns MHA_OK (0) or a negative MHA_ status from
 * <mha.h>, and writes a one-line human message (no newline) to err[errlen] when err != NULL
 * and errlen > 0 (truncated to fit; untouched on success). On error no output is written
 * (except *out of text_load / text_from_memory, set to NULL) and no generator is advanced.
 * Nothing here prints, exits or aborts.
 * Status codes: MHA_EINVAL bad argument; MHA_EIO cannot open/read the file (errno text),
 * or it is not a regular file; MHA_EOVERFLOW file larger than TEXT_MAX_FILE_BYTES or an
 * output buffer too small; MHA_EFORMAT the contents are unusable (empty, NUL byte, invalid
 * UTF-8, vocabulary too large, too short for the context, symbol outside the vocabulary,
 * malformed vocabulary string); MHA_ENONFINITE a NaN/inf logit; MHA_ENOMEM.
 */
#ifndef MHA_TRAIN_TEXT_H
#define MHA_TRAIN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "mha.h"
#include "mha_pcg32.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum text_mode { TEXT_BYTES = 0, TEXT_UTF8 = 1 } text_mode;

typedef enum text_part { TEXT_TRAIN = 0, TEXT_VAL = 1 } text_part;

/* PCG32 streams (initseq) for the callers' generators, apart from the library's (1..6)
 * and mha-train's (11, 21, 22): training batches, the evaluation windows (used inside
 * text_eval_offsets), sampling. */
enum { TEXT_STREAM_BATCH = 31, TEXT_STREAM_EVAL = 32, TEXT_STREAM_SAMPLE = 33 };

/* Largest file text_load reads (1 GiB); larger ones are refused before reading. */
#define TEXT_MAX_FILE_BYTES ((size_t)1 << 30)

/* ---- vocabulary --------------------------------------------------------------------- */

typedef struct text_vocab text_vocab; /* opaque: mode + sorted symbols */

/* Free a vocabulary from text_vocab_parse. NULL is a no-op. (The one of a corpus belongs to
 * the corpus: do not free it.) */
void text_vocab_free(text_vocab *v);

/* V (0 for NULL), the mode, and symbol `id` (byte value or code point; 0 when id >= V). */
size_t text_vocab_size(const text_vocab *v);
text_mode text_vocab_mode(const text_vocab *v);
uint32_t text_vocab_symbol(const text_vocab *v, size_t id);

/* Serialisation for a checkpoint's metadata: an ASCII string with no character that JSON
 * escapes, exact in both directions:
 *   TEXT_BYTES  "bytes:" then 2 lowercase hex digits per symbol   ("bytes:0a2021...")
 *   TEXT_UTF8   "utf8:"  then 6 lowercase hex digits per symbol   ("utf8:00000a000020...")
 * in id order. *out is owned (free with free()), NUL-terminated. */
int text_vocab_format(const text_vocab *v, char **out, char *err, size_t errlen);
/* Parse such a string (strictly: that prefix, lowercase hex, whole symbols, 1 <= V <=
 * max_vocab, strictly increasing, no 0, code points valid Unicode scalar values).
 * *out is owned (free with text_vocab_free). */
int text_vocab_parse(const char *s, size_t max_vocab, text_vocab **out, char *err,
                     size_t errlen);

/* Encode s[0..len) (a prompt; in TEXT_UTF8 mode it must be valid UTF-8 without NUL) to ids:
 * writes *n symbols' ids to ids[0..*n) (*n <= len, so cap >= len always suffices).
 * ids may be NULL (then cap is ignored): only check and count. A symbol outside the
 * vocabulary → MHA_EFORMAT, the message names it and its position (symbol index and byte
 * offset, both from 0). Buffer too small → MHA_EOVERFLOW. */
int text_encode(const text_vocab *v, const char *s, size_t len, int32_t *ids, size_t cap,
                size_t *n, char *err, size_t errlen);

/* Decode ids[0..n) (each in [0, V)) to bytes (TEXT_BYTES) or UTF-8 (TEXT_UTF8) in
 * buf[0..*len), followed by a NUL at buf[*len]. cap >= 4·n + 1 always suffices;
 * too small → MHA_EOVERFLOW (the message gives the size needed). */
int text_decode(const text_vocab *v, const int32_t *ids, size_t n, char *buf, size_t cap,
                size_t *len, char *err, size_t errlen);

/* ---- corpus ------------------------------------------------------------------------- */

typedef struct text_corpus text_corpus; /* opaque: vocabulary + ids of the whole text */

/* Read the file at `path` and make a corpus of it (text_from_memory on its bytes).
 * The file must be a regular file (a FIFO, directory or device is refused without blocking:
 * it is opened O_NONBLOCK and checked with fstat) of at most TEXT_MAX_FILE_BYTES bytes.
 * *out owned (free with text_corpus_free), NULL on error. */
int text_load(const char *path, text_mode mode, size_t max_vocab, size_t context,
              text_corpus **out, char *err, size_t errlen);

/* Make a corpus of data[0..len): check it (not empty, no NUL, valid UTF-8 in TEXT_UTF8
 * mode with the byte offset of the first bad sequence in the message), build the vocabulary
 * (refused when V > max_vocab; 1 <= max_vocab <= INT32_MAX), refuse a text whose training
 * or validation part has fewer than context + 1 symbols, and encode it.
 * The data is copied; *out owned (free with text_corpus_free), NULL on error. */
int text_from_memory(const void *data, size_t len, text_mode mode, size_t max_vocab,
                     size_t context, text_corpus **out, char *err, size_t errlen);

void text_corpus_free(text_corpus *c); /* NULL is a no-op */

/* The corpus's vocabulary (borrowed: valid until text_corpus_free). */
const text_vocab *text_corpus_vocab(const text_corpus *c);
/* n, and the ids of the whole text [n] (borrowed). */
size_t text_corpus_len(const text_corpus *c);
const int32_t *text_corpus_ids(const text_corpus *c);
/* The ids of one part (borrowed, a view into text_corpus_ids) and its length in *len:
 * TEXT_TRAIN = ids[0, floor(0.9·n)), TEXT_VAL = the rest. NULL for a bad argument. */
const int32_t *text_corpus_part(const text_corpus *c, text_part part, size_t *len);

/* ---- windows ------------------------------------------------------------------------ */

/* Draw count window offsets in [0, len − T − 1], each mha_pcg32_bounded(rng, len − T),
 * into offsets[count]. Needs T >= 1, len >= T + 1, len − T <= UINT32_MAX. */
int text_draw_offsets(size_t len, size_t T, size_t count, mha_pcg32 *rng, size_t *offsets,
                      char *err, size_t errlen);

/* The fixed evaluation windows of a part: count offsets drawn as text_draw_offsets from a
 * fresh PCG32(seed, TEXT_STREAM_EVAL). Same (len, T, count, seed) → same offsets, always. */
int text_eval_offsets(size_t len, size_t T, size_t count, uint64_t seed, size_t *offsets,
                      char *err, size_t errlen);

/* Copy B windows of ids[len]: for window b at o = offsets[b] (o + T + 1 <= len),
 *   tokens[b·T + t] = ids[o + t],  targets[b·T + t] = ids[o + t + 1],  t < T.
 * tokens [B,T], targets [B,T]. */
int text_windows(const int32_t *ids, size_t len, size_t T, const size_t *offsets, size_t B,
                 int32_t *tokens, int32_t *targets, char *err, size_t errlen);

/* A training batch: B offsets drawn from rng as text_draw_offsets (in order b = 0..B−1),
 * then text_windows. tokens [B,T], targets [B,T]. No allocation. */
int text_batch(const int32_t *ids, size_t len, size_t B, size_t T, mha_pcg32 *rng,
               int32_t *tokens, int32_t *targets, char *err, size_t errlen);

/* ---- sampling ----------------------------------------------------------------------- */

/* Draw the next id from logits [V]: p_i ∝ exp((logits_i − max) / temperature) over the
 * top_k largest logits (ties broken by the lower id; top_k == 0 or >= V: all V), computed
 * in double. Exactly one mha_pcg32_double draw (two PCG32 outputs) per call, whatever the
 * settings, so a fixed generator state gives a fixed id. temperature must be > 0 and
 * finite (MHA_EINVAL), every logit finite (MHA_ENONFINITE). Allocates V (logit, id) pairs
 * per call (MHA_ENOMEM). */
int text_sample(const float *logits, size_t V, double temperature, size_t top_k,
                mha_pcg32 *rng, int32_t *id, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* MHA_TRAIN_TEXT_H */
