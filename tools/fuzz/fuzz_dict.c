/* tools/fuzz (run.sh), libFuzzer: g2p_dict_parse of arbitrary bytes (the first selects auto,
 * CMUdict or two-column), then on what it accepts: every word found by g2p_dict_find, the
 * vocabularies (sorted, every symbol found at its id) and the encoded training set. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "g2p_data.h"
#include "mha.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int format = data[0] % 3; /* auto, cmudict, tsv (enum g2p_format order) */
    g2p_dict d;
    char err[512];
    memset(&d, 0x5a, sizeof d);
    int st = g2p_dict_parse(data + 1, size - 1, "fuzz", format, &d, err, sizeof err);
    if (st != MHA_OK) {
        assert(strlen(err) < sizeof err);
        return 0;
    }
    for (size_t w = 0; w < d.n_words; w++) {
        assert(d.words[w].text != NULL);
        assert(g2p_dict_find(&d, d.words[w].text) != SIZE_MAX);
    }
    g2p_vocab src = {0}, tgt = {0};
    if (g2p_vocab_build(&d, &src, &tgt, err, sizeof err) == MHA_OK) {
        for (size_t i = src.n_special; i + 1 < src.n; i++)
            assert(strcmp(src.sym[i], src.sym[i + 1]) < 0);
        for (size_t i = 0; i < tgt.n; i++)
            assert(g2p_vocab_find(&tgt, tgt.sym[i]) == (int)i);
        g2p_set set;
        if (g2p_set_encode(&d, &src, &tgt, &set, err, sizeof err) == MHA_OK)
            g2p_set_free(&set);
        g2p_vocab_free(&src);
        g2p_vocab_free(&tgt);
    }
    (void)g2p_dict_bytes(&d);
    g2p_dict_free(&d);
    return 0;
}
