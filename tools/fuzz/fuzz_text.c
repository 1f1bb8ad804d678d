/* tools/fuzz (run.sh), libFuzzer: text_from_memory (bytes and UTF-8; the first byte selects),
 * the vocabulary's string form and its parse (a round trip), text_vocab_parse of arbitrary
 * strings, text_encode of the input as a prompt, and text_decode of the corpus's ids back
 * to the text, byte for byte. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mha.h"
#include "text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int sel = data[0];
    data++, size--;
    char err[256];
    if (sel & 4) { /* a vocabulary string */
        char *s = malloc(size + 1);
        memcpy(s, data, size);
        s[size] = 0;
        text_vocab *v = NULL;
        if (text_vocab_parse(s, 1000000, &v, err, sizeof err) == MHA_OK) {
            char *back = NULL;
            assert(text_vocab_format(v, &back, err, sizeof err) == MHA_OK);
            assert(strcmp(back, s) == 0);
            free(back);
            text_vocab_free(v);
        }
        free(s);
        return 0;
    }
    const text_mode mode = (sel & 1) ? TEXT_UTF8 : TEXT_BYTES;
    text_corpus *c = NULL;
    if (text_from_memory(data, size, mode, 1 + (sel >> 3) * 100, 2, &c, err, sizeof err) != MHA_OK)
        return 0;
    const text_vocab *v = text_corpus_vocab(c);
    char *s = NULL;
    assert(text_vocab_format(v, &s, err, sizeof err) == MHA_OK);
    text_vocab *v2 = NULL;
    assert(text_vocab_parse(s, 1000000, &v2, err, sizeof err) == MHA_OK);
    free(s);
    text_vocab_free(v2);
    const size_t n = text_corpus_len(c);
    char *buf = malloc(4 * n + 1);
    size_t len = 0;
    assert(text_decode(v, text_corpus_ids(c), n, buf, 4 * n + 1, &len, err, sizeof err) == MHA_OK);
    assert(len == size && memcmp(buf, data, size) == 0); /* the text, to the byte */
    int32_t *ids = malloc((size + 1) * sizeof *ids);
    size_t m = 0;
    assert(text_encode(v, (const char *)data, size, ids, size + 1, &m, err, sizeof err) == MHA_OK);
    assert(m == n && memcmp(ids, text_corpus_ids(c), n * sizeof *ids) == 0);
    free(ids);
    free(buf);
    text_corpus_free(c);
    return 0;
}
