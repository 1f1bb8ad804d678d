/* What the tests of mha-g2p share (tests/test_g2p_prog.c: training; tests/test_g2p_use.c:
 * pronounce, eval, the committed model; tests/test_g2p_models.c: average, ensembles,
 * rescoring), defined in tests/test_g2p_common.c. */
#ifndef MHA_TEST_G2P_PROG_H
#define MHA_TEST_G2P_PROG_H

#include <stddef.h>

/* mha-g2p ARGS in tmpdir, its output in TAG.out / TAG.err (test_prog.h: run_prog) */
int g2p(const char *tag, const char *args);

/* A small dictionary in CMUdict format: the first words of the real one with every
 * pronunciation, plus a few lines the loader must skip. */
void write_small_dict(const char *path, size_t lines);

/* The first 40 wrong words of an errors.txt (WORD  HYPOTHESIS  # REFERENCES), pronounced
 * by `pronounce --no-lexicon ARGS` (the library's decoder, output under tag): each gets the
 * hypothesis eval's decoder found for it. Returns the number of words compared. */
size_t errors_through_pronounce(const char *errors, const char *tag, const char *args);

/* A tiny model; TINY in float32 (the tests that compare runs need one precision: the
 * default, auto, follows peaks measured at each start) */
#define TINY_MODEL "--enc-layers 1 --dec-layers 1 --dim 16 --heads 2 --mlp-dim 32 " \
                   "--batch 16 --threads 1 --eval-words 40 --ckpt-every 0"
#define TINY "--precision fp32 " TINY_MODEL

#endif
