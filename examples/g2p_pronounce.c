/* Pronounce words through the G2P library: the model, the dictionary it was trained on
 * looked up first, and the model's three best guesses for a word no dictionary lists.
 *   g2p_pronounce MODEL DICTIONARY WORD...                                              */
#include <stdio.h>

#include <mha.h>
#include <mha_g2p.h>

int main(int argc, char **argv)
{
    char err[512];
    mha_g2p *g;
    if (argc < 4 || mha_g2p_open(&g, argv[1], 1, err, sizeof err) != MHA_OK ||
        mha_g2p_add_lexicon(g, argv[2], NULL, err, sizeof err) != MHA_OK) {
        fprintf(stderr, "%s\n", argc < 4 ? "usage: g2p_pronounce MODEL DICTIONARY WORD..." : err);
        return 2;
    }
    static const char *const source[] = {"", "lexicon", "parts", "model"};
    mha_g2p_set_beam(g, 4, 1.0);
    for (int i = 3; i < argc; i++) {
        mha_g2p_pron p[3];
        size_t n;
        if (mha_g2p_pronounce(g, argv[i], 0, 3, p, &n, err, sizeof err) != MHA_OK) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        for (size_t k = 0; k < n; k++)
            printf("%s  %s  # %s %.3f\n", p[k].word, p[k].phones, source[p[k].source],
                   p[k].logprob);
    }
    mha_g2p_close(g);
    return 0;
}
