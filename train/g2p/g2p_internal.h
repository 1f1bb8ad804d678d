/*
 * g2p_internal — helpers the g2p sources share (private: not part of the g2p_data.h or
 * g2p_score.h contract, never installed).
 */
#ifndef MHA_TRAIN_G2P_INTERNAL_H
#define MHA_TRAIN_G2P_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "util.h" /* util_fail: the message into err[errcap], and the status returned */

/* Grow the array *p (of *cap elements of `size` bytes, doubling) to hold at least `need`;
 * 0, or -1 when out of memory (then *p and *cap are unchanged). */
int g2p__grow(void *p, size_t *cap, size_t need, size_t size);

/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n) (n >= 1) and its code point in
 * *cp, or 0 (Unicode 15, table 3-7: no overlong forms, surrogates, values above U+10FFFF). */
size_t g2p__utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Code points of the NUL-terminated string s, assumed valid UTF-8. */
size_t g2p__utf8_count(const char *s);

/* A set of strings: open addressing over indices into a caller's array of keys (fewer than
 * 2^32 - 1). A slot holds the low 32 bits of its key's FNV-1a hash in its high half and
 * index + 1 in its low half (0 = empty): a probe compares strings only when the hashes agree
 * (a dictionary's words are then read once each, not at every probe that passes them), and
 * growing moves slots by their stored hash, without reading a key. */
typedef struct g2p__smap {
    uint64_t *slot; /* [cap] 0 = empty, else hash << 32 | (index + 1)  */
    size_t cap;     /* 0 or a power of two, > 2·n, at most 2^32         */
    size_t n;       /* entries                                         */
} g2p__smap;

/* Find key among keys[] (indexed through m). Found: *idx = its index, returns 1. Not found:
 * inserts index `next` for it (the caller then stores keys[next] = key), *idx = next,
 * returns 0. -1: out of memory (nothing inserted). Free m->slot when done. */
int g2p__smap_get(g2p__smap *m, const char *const *keys, const char *key, size_t next,
                  size_t *idx);

#endif /* MHA_TRAIN_G2P_INTERNAL_H */
