/*
 * Tests of train/g2p/ (g2p_dict.c, g2p_data.c, g2p_score.c): dictionaries (CMUdict and TSV),
 * the split, vocabularies, encoding, batches, edit distance and WER/PER (all tests g2p_*).
 *
 * data/cmudict.dict is read from MHA_SOURCE_DIR; other files go to a fresh directory under
 * $TMPDIR (or /tmp), removed at the end. The expected CMUdict numbers were computed
 * independently (python3 over the same file, with the rules of data/README.md).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "g2p_data.h"
#include "g2p_score.h"
#include "mha_pcg32.h"

#define CMUDICT MHA_SOURCE_DIR "/data/cmudict.dict"

static char g_dir[512]; /* the test directory */

static void path_in(char *buf, size_t len, const char *name)
{
    int r = snprintf(buf, len, "%s/%s", g_dir, name);
    assert_true(r > 0 && (size_t)r < len);
}

/* Write s to the test directory as `name`; its path goes to path[cap]. */
static void make_file(char *path, size_t cap, const char *name, const char *s, size_t n)
{
    path_in(path, cap, name);
    write_bytes(path, s, n);
}

/* Index of the word `text` in d, failing the test if absent. */
static size_t word_of(const g2p_dict *d, const char *text)
{
    for (size_t w = 0; w < d->n_words; w++)
        if (strcmp(d->words[w].text, text) == 0)
            return w;
    fail_msg("word \"%s\" not in the dictionary", text);
    return 0;
}

/* Pronunciation k of word w joined by spaces, into buf. */
static const char *pron_text(const g2p_dict *d, size_t w, size_t k, char *buf, size_t cap)
{
    assert_true(k < d->words[w].count);
    const g2p_pron *p = &d->prons[d->words[w].first + k];
    assert_int_equal(p->word, w);
    size_t at = 0;
    buf[0] = '\0';
    for (size_t j = 0; j < p->len; j++) {
        int r = snprintf(buf + at, cap - at, "%s%s", j ? " " : "", d->tokens[p->off + j]);
        assert_true(r > 0 && (size_t)r < cap - at);
        at += (size_t)r;
    }
    return buf;
}

static void assert_has(const char *msg, const char *want)
{
    if (strstr(msg, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

/* ---- CMUdict ---------------------------------------------------------------------------- */

/* data/cmudict.dict: 123,874 words, 132,585 pronunciations, 1,199 skipped lines, the FNV-1a
 * split 105,360 / 6,152 / 12,362, longest word 34 letters and pronunciation 32 phones;
 * alternates merged; every word usable with its own vocabularies (28 source, 72 target
 * symbols, 42 without stress). */
static void g2p_cmudict_counts(void **state)
{
    (void)state;
    char err[512] = "", buf[512];
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_read(CMUDICT, G2P_FMT_AUTO, &d, err, sizeof err), MHA_OK);
    assert_int_equal(d.format, G2P_FMT_CMUDICT);
    assert_int_equal(d.n_lines, 133784);
    assert_int_equal(d.n_words, 123874);
    assert_int_equal(d.n_prons, 132585);
    assert_int_equal(d.n_tokens, 844165);
    assert_int_equal(d.skipped, 1199);
    assert_int_equal(d.n_lines - d.skipped, d.n_prons); /* no blank lines */
    assert_int_equal(d.skipped_line_first, 4);          /* "A.  EY1" */
    assert_int_equal(d.n_split[G2P_TRAIN], 105360);
    assert_int_equal(d.n_split[G2P_VALID], 6152);
    assert_int_equal(d.n_split[G2P_TEST], 12362);
    assert_int_equal(d.max_src, 34);
    assert_int_equal(d.max_tgt, 32);
    /* first appearance order, alternates merged and in file order */
    assert_string_equal(d.words[0].text, "A");
    assert_string_equal(d.words[1].text, "A'S");
    assert_string_equal(d.words[d.n_words - 1].text, "ZYWICKI");
    size_t a = word_of(&d, "A");
    assert_int_equal(d.words[a].count, 2);
    /* g2p_dict_find: every word at its index, exact (case, alternate marks), else SIZE_MAX */
    for (size_t w = 0; w < d.n_words; w++)
        assert_int_equal(g2p_dict_find(&d, d.words[w].text), w);
    assert_int_equal(g2p_dict_find(&d, "A"), a);
    assert_true(g2p_dict_find(&d, "a") == SIZE_MAX);
    assert_true(g2p_dict_find(&d, "A(1)") == SIZE_MAX);
    assert_true(g2p_dict_find(&d, "") == SIZE_MAX);
    assert_true(g2p_dict_find(&d, "ZZZZNOTAWORD") == SIZE_MAX);
    assert_true(g2p_dict_find(&d, NULL) == SIZE_MAX);
    assert_true(g2p_dict_find(NULL, "A") == SIZE_MAX);
    assert_string_equal(pron_text(&d, a, 0, buf, sizeof buf), "AH0");
    assert_string_equal(pron_text(&d, a, 1, buf, sizeof buf), "EY1");
    assert_int_equal(d.prons[d.words[a].first + 1].line, 2);
    size_t rd = word_of(&d, "READ");
    assert_string_equal(pron_text(&d, rd, 1, buf, sizeof buf), "R IY1 D");
    assert_int_equal(d.prons[d.words[rd].first + 1].line, 97757);
    assert_int_equal(d.words[word_of(&d, "WITH")].count, 4);
    assert_int_equal(d.words[word_of(&d, "AACHENER")].split, G2P_TEST);
    assert_int_equal(d.words[word_of(&d, "AAA")].split, G2P_VALID);
    size_t sup = word_of(&d, "SUPERCALIFRAGILISTICEXPIALIDOCIOUS");
    assert_int_equal(d.prons[d.words[sup].first].len, 32);
    /* the pronunciations are grouped by word, in word order */
    for (size_t w = 0, at = 0; w < d.n_words; w++) {
        assert_int_equal(d.words[w].first, at);
        assert_true(d.words[w].count >= 1);
        at += d.words[w].count;
    }

    g2p_vocab src = {0}, tgt = {0}, red = {0};
    assert_int_equal(g2p_vocab_build(&d, &src, &tgt, err, sizeof err), MHA_OK);
    assert_int_equal(src.n, 28);
    assert_int_equal(src.n_special, 1);
    assert_string_equal(src.sym[0], "<pad>");
    assert_string_equal(src.sym[1], "'");
    assert_string_equal(src.sym[2], "A");
    assert_string_equal(src.sym[27], "Z");
    assert_int_equal(tgt.n, 69 + G2P_NSPECIAL); /* 15 vowels × 3 stresses + 24 consonants */
    assert_string_equal(tgt.sym[G2P_PAD], "<pad>");
    assert_string_equal(tgt.sym[G2P_BOS], "<s>");
    assert_string_equal(tgt.sym[G2P_EOS], "</s>");
    assert_string_equal(tgt.sym[3], "AA0");
    assert_string_equal(tgt.sym[tgt.n - 1], "ZH");
    int32_t *map = malloc(tgt.n * sizeof *map);
    assert_non_null(map);
    assert_int_equal(g2p_stress_map(&tgt, &red, map, err, sizeof err), MHA_OK);
    assert_int_equal(red.n, 39 + G2P_NSPECIAL);
    g2p_vocab_free(&red);
    free(map);

    g2p_set s = {0};
    assert_int_equal(g2p_set_encode(&d, &src, &tgt, &s, err, sizeof err), MHA_OK);
    assert_int_equal(s.skipped_words, 0);
    assert_int_equal(s.unknown_line_first, 0);
    assert_int_equal(s.words_off[G2P_VALID] - s.words_off[G2P_TRAIN], 105360);
    assert_int_equal(s.words_off[G2P_TEST] - s.words_off[G2P_VALID], 6152);
    assert_int_equal(s.words_off[G2P_NSPLIT] - s.words_off[G2P_TEST], 12362);
    assert_int_equal(s.prons_off[G2P_VALID] - s.prons_off[G2P_TRAIN], 112770);
    assert_int_equal(s.prons_off[G2P_TEST] - s.prons_off[G2P_VALID], 6566);
    assert_int_equal(s.prons_off[G2P_NSPLIT] - s.prons_off[G2P_TEST], 13249);
    assert_int_equal(s.max_src, 34);
    assert_int_equal(s.max_tgt, 32);
    assert_int_equal(s.tgt_off[s.n_prons], 844165);
    /* word "A": source id of 'A' is 2; its prons AH0 then EY1 */
    assert_int_equal(s.src_off[a + 1] - s.src_off[a], 1);
    assert_int_equal(s.src[s.src_off[a]], 2);
    size_t p0 = s.pron_off[a];
    assert_int_equal(s.pron_off[a + 1] - p0, 2);
    assert_int_equal(s.tgt[s.tgt_off[p0]], g2p_vocab_find(&tgt, "AH0"));
    assert_int_equal(s.tgt[s.tgt_off[p0 + 1]], g2p_vocab_find(&tgt, "EY1"));
    g2p_set_free(&s);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    g2p_dict_free(&d);
}

/* What "(n)" of an alternate is: one or more decimal digits in parentheses right after the
 * word and nothing else — empty parentheses, letters, signs, spaces, a missing or doubled
 * parenthesis are not alternates, and such lines are skipped and counted. */
static void g2p_cmudict_alternate_marks(void **state)
{
    (void)state;
    static const char text[] = "A  AH0\n"
                               "A()  EY1\n"
                               "A(1a)  EY1\n"
                               "A(-1)  EY1\n"
                               "A(+1)  EY1\n"
                               "A( 1)  EY1\n"
                               "A(1  EY1\n"
                               "A1)  EY1\n"
                               "A((1))  EY1\n"
                               "A(1)(2)  EY1\n"
                               "A(12)  AA1\n";
    char path[1024], err[512] = "";
    make_file(path, sizeof path, "alt.dict", text, sizeof text - 1);
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_OK);
    assert_int_equal(d.n_lines, 11);
    assert_int_equal(d.skipped, 9);
    assert_int_equal(d.n_words, 1);
    assert_int_equal(d.n_prons, 2);
    assert_string_equal(d.words[0].text, "A");
    assert_int_equal(d.prons[1].line, 11);
    g2p_dict_free(&d);
}

/* A small CMUdict file with every defect: comments, no separator, non-ASCII, "A.", digits,
 * a hyphen, a brace, lower case, "(X)", a TAB, alternates out of order, CR LF, trailing
 * spaces, blank lines, no final newline. Exactly the good entries are kept, in order. */
static void g2p_cmudict_defects(void **state)
{
    (void)state;
    static const char text[] = ";;; a comment line\n"       /*  1 skipped */
                               "A  AH0\r\n"                 /*  2 */
                               "NO_SEPARATOR AH0\n"         /*  3 skipped: one space */
                               "CAF\xc3\x89  K AE0 F EY1\n" /*  4 skipped: not ASCII */
                               "A.  EY1\n"                  /*  5 skipped */
                               "R2D2  AA1 R T UW1 D IY1\n"  /*  6 skipped: digits */
                               "AD-HOC  AE1 D HH AA1 K\n"   /*  7 skipped */
                               "{BRACE  B R EY1 S\n"        /*  8 skipped */
                               "BOOK  B UH1 K\n"            /*  9 */
                               "\n"                         /* 10 blank */
                               "   \r\n"                    /* 11 blank */
                               "A(1)  EY1\n"                /* 12 alternate of A, after BOOK */
                               "lower  L OW1 ER0\n"         /* 13 skipped */
                               "A(X)  EY1\n"                /* 14 skipped: (X) is no alternate */
                               "BOOK(2)  B   UW1 K   \r\n"  /* 15 runs of spaces */
                               "TAB  T\tAE1 B\n"            /* 16 skipped: control character */
                               "DON'T  D OW1 N T\n"         /* 17 */
                               ";;; another\n"              /* 18 skipped */
                               "A(2)  AH1\n"                /* 19 */
                               "'TIS  T IH1 Z\n"  /* 20 skipped: starts with an apostrophe */
                               "LAST  L AE1 S T"; /* 21, no final newline */
    char path[1024], err[512] = "", buf[256];
    make_file(path, sizeof path, "defects.dict", text, sizeof text - 1);
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_OK);
    assert_int_equal(d.format, G2P_FMT_CMUDICT);
    assert_int_equal(d.n_lines, 21);
    assert_int_equal(d.skipped, 12);
    assert_int_equal(d.skipped_line_first, 1);
    assert_string_equal(d.skipped_why, "comment line");
    assert_int_equal(d.n_words, 4);
    assert_int_equal(d.n_prons, 7);
    static const char *words[4] = {"A", "BOOK", "DON'T", "LAST"};
    static const size_t counts[4] = {3, 2, 1, 1};
    for (size_t w = 0; w < 4; w++) {
        assert_string_equal(d.words[w].text, words[w]);
        assert_int_equal(d.words[w].count, counts[w]);
        assert_int_equal(d.words[w].split, g2p_split_of(words[w]));
    }
    assert_string_equal(pron_text(&d, 0, 0, buf, sizeof buf), "AH0");
    assert_string_equal(pron_text(&d, 0, 1, buf, sizeof buf), "EY1");
    assert_string_equal(pron_text(&d, 0, 2, buf, sizeof buf), "AH1");
    assert_int_equal(d.prons[2].line, 19);
    assert_string_equal(pron_text(&d, 1, 0, buf, sizeof buf), "B UH1 K");
    assert_string_equal(pron_text(&d, 1, 1, buf, sizeof buf), "B UW1 K");
    assert_int_equal(d.prons[4].line, 15);
    assert_string_equal(pron_text(&d, 2, 0, buf, sizeof buf), "D OW1 N T");
    assert_string_equal(pron_text(&d, 3, 0, buf, sizeof buf), "L AE1 S T");
    assert_int_equal(d.prons[6].line, 21);
    assert_int_equal(d.max_src, 5);
    assert_int_equal(d.max_tgt, 4);
    g2p_dict_free(&d);
    assert_null(d.words);
    g2p_dict_free(&d); /* a zeroed dict: no-op */

    /* the same bytes from memory, forced to CMUdict, give the same */
    assert_int_equal(
        g2p_dict_parse(text, sizeof text - 1, "mem", G2P_FMT_CMUDICT, &d, err, sizeof err), MHA_OK);
    assert_int_equal(d.n_prons, 7);
    assert_int_equal(d.skipped, 12);
    g2p_dict_free(&d);
}

/* Refusals, each naming the file: missing file and directory (MHA_EIO with the reason),
 * empty file, only blank lines, nothing usable (with the skipped count), a line over
 * G2P_MAX_LINE (with its number), a bad format; the output is not written. */
static void g2p_read_errors(void **state)
{
    (void)state;
    char path[1024], err[1024];
    g2p_dict d, keep;
    memset(&d, 0x5a, sizeof d);
    keep = d;

    path_in(path, sizeof path, "missing.dict");
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EIO);
    assert_has(err, "missing.dict");
    assert_has(err, "No such file");
    assert_int_equal(g2p_dict_read(g_dir, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EIO);
    assert_has(err, "not a regular file");

    make_file(path, sizeof path, "empty.dict", "", 0);
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "empty.dict");
    assert_has(err, "empty");

    make_file(path, sizeof path, "blank.dict", "\n  \n\r\n", 6);
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "blank.dict");

    static const char junk[] = ";;; header\nA.  EY1\nAD-HOC  AE1 D HH AA1 K\n\nno separator\n";
    make_file(path, sizeof path, "junk.dict", junk, sizeof junk - 1);
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "junk.dict");
    assert_has(err, "no usable entry");
    assert_has(err, "all 4 non-blank lines of 5 skipped");

    /* line 2 one byte over the limit (the LF and a CR not counted before trimming: it is
     * the raw length that is capped) */
    size_t n = 8 + G2P_MAX_LINE + 1 + 1;
    char *big = malloc(n);
    assert_non_null(big);
    memcpy(big, "A  AH0\n", 7);
    memset(big + 7, 'B', G2P_MAX_LINE + 1);
    big[7 + G2P_MAX_LINE + 1] = '\n';
    make_file(path, sizeof path, "long.dict", big, 7 + G2P_MAX_LINE + 2);
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "long.dict:2:");
    assert_has(err, "longer than");
    /* exactly at the limit: fine (skipped, no separator) */
    make_file(path, sizeof path, "edge.dict", big, 7 + G2P_MAX_LINE);
    g2p_dict ok = {0};
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &ok, err, sizeof err), MHA_OK);
    assert_int_equal(ok.n_prons, 1);
    assert_int_equal(ok.skipped, 1);
    g2p_dict_free(&ok);
    free(big);

    assert_int_equal(g2p_dict_parse("A  AH0\n", 7, "x", 7, &d, err, sizeof err), MHA_EINVAL);
    assert_int_equal(g2p_dict_read(NULL, G2P_FMT_AUTO, &d, err, sizeof err), MHA_EINVAL);
    assert_memory_equal(&d, &keep, sizeof d); /* nothing written by any refusal */
}

/* The invariants of a parsed dictionary: words' pronunciations contiguous and in line
 * order, every token non-empty without a space, every line counted once. */
static void assert_consistent(const g2p_dict *d)
{
    size_t at = 0, toks = 0, maxs = 0, maxt = 0, split[G2P_NSPLIT] = {0};
    for (size_t w = 0; w < d->n_words; w++) {
        const g2p_word *wd = &d->words[w];
        assert_int_equal(wd->first, at);
        assert_true(wd->count >= 1);
        assert_true(wd->text[0] != '\0');
        assert_int_equal(wd->split, g2p_split_of(wd->text));
        assert_int_equal(g2p_dict_find(d, wd->text), w); /* the kept table finds each word */
        split[wd->split]++;
        size_t len = strlen(wd->text);
        maxs = len > maxs ? len : maxs; /* CMUdict: bytes are symbols */
        if (d->format == G2P_FMT_CMUDICT) {
            assert_true(wd->text[0] >= 'A' && wd->text[0] <= 'Z');
            assert_int_equal(strspn(wd->text, "ABCDEFGHIJKLMNOPQRSTUVWXYZ'"), len);
        }
        for (size_t p = wd->first; p < wd->first + wd->count; p++) {
            const g2p_pron *pr = &d->prons[p];
            assert_int_equal(pr->word, w);
            assert_true(pr->len >= 1 && pr->off + pr->len <= d->n_tokens);
            assert_true(p == wd->first || pr->line > d->prons[p - 1].line);
            for (size_t j = 0; j < pr->len; j++) {
                const char *t = d->tokens[pr->off + j];
                assert_true(t[0] != '\0' && strchr(t, ' ') == NULL);
            }
            toks += pr->len;
            maxt = pr->len > maxt ? pr->len : maxt;
        }
        at += wd->count;
    }
    assert_int_equal(at, d->n_prons);
    assert_int_equal(toks, d->n_tokens);
    assert_int_equal(maxt, d->max_tgt);
    if (d->format == G2P_FMT_CMUDICT)
        assert_int_equal(maxs, d->max_src);
    for (int s = 0; s < G2P_NSPLIT; s++)
        assert_int_equal(split[s], d->n_split[s]);
    assert_true(d->n_prons + d->skipped <= d->n_lines);
}

/* 4000 random mutations (bytes replaced by ones that matter here: space, TAB, CR, LF, NUL,
 * '(', ')', digits, 0xC3, 0xFF, letters; bytes deleted; cut short) of a small dictionary in
 * both formats: each either parses into a consistent dictionary (whose vocabularies build)
 * or is refused with MHA_EFORMAT and a message; never anything else. */
static void g2p_parse_mutations(void **state)
{
    (void)state;
    static const char base[] = "A  AH0\nA(1)  EY1\nAB'S  EY1 B IY1 Z\n;;; c\nBE  B IY1\r\n"
                               "B(2)  B IY1\nCAF\xc3\xa9\tk a f\nZOO  Z UW1";
    static const char junk[] = "  \t\r\n\0()019\xc3\xff"
                               "aZ'";
    mha_pcg32 r;
    mha_pcg32_seed(&r, 2024, 77);
    char buf[sizeof base], err[256];
    size_t ok = 0;
    for (int it = 0; it < 4000; it++) {
        size_t n = sizeof base - 1;
        memcpy(buf, base, n);
        uint32_t k = mha_pcg32_next(&r) % 4 + 1;
        for (uint32_t m = 0; m < k && n > 0; m++) {
            size_t at = mha_pcg32_next(&r) % n;
            uint32_t op = mha_pcg32_next(&r) % 3;
            if (op == 0)
                buf[at] = junk[mha_pcg32_next(&r) % (sizeof junk - 1)];
            else if (op == 1) {
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
            } else
                n = at;
        }
        int fmt = (int)(mha_pcg32_next(&r) % 3);
        g2p_dict d = {0};
        err[0] = '\0';
        int rc = g2p_dict_parse(buf, n, "mut", fmt, &d, err, sizeof err);
        if (rc == MHA_OK) {
            assert_consistent(&d);
            g2p_vocab src = {0}, tgt = {0};
            assert_int_equal(g2p_vocab_build(&d, &src, &tgt, err, sizeof err), MHA_OK);
            g2p_set s = {0};
            assert_int_equal(g2p_set_encode(&d, &src, &tgt, &s, err, sizeof err), MHA_OK);
            assert_int_equal(s.skipped_words, 0);
            g2p_set_free(&s);
            g2p_vocab_free(&src);
            g2p_vocab_free(&tgt);
            ok++;
        } else {
            assert_int_equal(rc, MHA_EFORMAT);
            assert_has(err, "mut");
            assert_null(d.words);
        }
        g2p_dict_free(&d);
    }
    assert_true(ok > 1000); /* most mutations leave something usable */
}

/* ---- TSV -------------------------------------------------------------------------------- */

/* TSV: UTF-8 sources are code points (sorted by code point in the vocabulary), repeated
 * sources merge, invalid UTF-8 / control characters / no TAB / empty sides are skipped;
 * AUTO detects the form past comments and blank lines; a reserved target symbol is refused
 * with its line. */
static void g2p_tsv(void **state)
{
    (void)state;
    static const char text[] = ";;; comment\n"                         /* 1 skipped */
                               "\n"                                    /* 2 blank */
                               "caf\xc3\xa9\tk a f e\n"                /* 3 café */
                               "na\xc3\xafve\tn a i v\r\n"             /* 4 naïve */
                               "\xe6\x97\xa5\xe6\x9c\xac\tn i h o n\n" /* 5 日本 */
                               "\xff\tx\n" /* 6 skipped: invalid UTF-8 */
                               "a\x01"
                               "b\tx\n"                  /* 7 skipped: control */
                               "no tab here\n"           /* 8 skipped */
                               "abc\t   \n"              /* 9 skipped: empty target */
                               "\tx\n"                   /* 10 skipped: empty source */
                               "caf\xc3\xa9\tk a f e2\n" /* 11 alternate of café */
                               "two words\tt  w\n";      /* 12 a space in a source */
    char path[1024], err[512] = "";
    make_file(path, sizeof path, "g.tsv", text, sizeof text - 1);
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_read(path, G2P_FMT_AUTO, &d, err, sizeof err), MHA_OK);
    assert_int_equal(d.format, G2P_FMT_TSV);
    assert_int_equal(d.n_lines, 12);
    assert_int_equal(d.skipped, 6);
    assert_int_equal(d.skipped_line_first, 1);
    assert_int_equal(d.n_words, 4);
    assert_int_equal(d.n_prons, 5);
    assert_string_equal(d.words[0].text, "caf\xc3\xa9");
    assert_int_equal(d.words[0].count, 2);
    assert_int_equal(d.prons[1].line, 11);
    assert_string_equal(d.tokens[d.prons[1].off + 3], "e2");
    assert_string_equal(d.words[2].text, "\xe6\x97\xa5\xe6\x9c\xac");
    assert_string_equal(d.words[3].text, "two words");
    assert_int_equal(d.prons[4].len, 2);
    assert_int_equal(d.max_src, 9);
    assert_int_equal(d.max_tgt, 5);
    assert_int_equal(d.words[0].split, G2P_TRAIN); /* FNV-1a 0x48e8823acfa40d89 mod 20 = 13 */

    g2p_vocab src = {0}, tgt = {0};
    assert_int_equal(g2p_vocab_build(&d, &src, &tgt, err, sizeof err), MHA_OK);
    static const char *want[] = {"<pad>",
                                 " ",
                                 "a",
                                 "c",
                                 "d",
                                 "e",
                                 "f",
                                 "n",
                                 "o",
                                 "r",
                                 "s",
                                 "t",
                                 "v",
                                 "w",
                                 "\xc3\xa9",
                                 "\xc3\xaf",
                                 "\xe6\x97\xa5",
                                 "\xe6\x9c\xac"};
    assert_int_equal(src.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < src.n; i++)
        assert_string_equal(src.sym[i], want[i]);
    int32_t ids[8];
    size_t bad = 99;
    assert_int_equal(g2p_encode_word(&src, "\xe6\x97\xa5\xe6\x9c\xac", ids, 8, &bad), 2);
    assert_int_equal(ids[0], 16);
    assert_int_equal(ids[1], 17);
    assert_int_equal(tgt.n, G2P_NSPECIAL + 12); /* a e e2 f h i k n o t v w */
    assert_int_equal(g2p_vocab_find(&tgt, "e2"), G2P_NSPECIAL + 2);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    g2p_dict_free(&d);

    /* a reserved symbol as a target token */
    static const char res[] = "ab\ta b\nxy\tx <s> y\n";
    assert_int_equal(
        g2p_dict_parse(res, sizeof res - 1, "res.tsv", G2P_FMT_AUTO, &d, err, sizeof err), MHA_OK);
    g2p_vocab s2, t2;
    memset(&s2, 0x11, sizeof s2);
    assert_int_equal(g2p_vocab_build(&d, &s2, &t2, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "line 2");
    assert_has(err, "<s>");
    assert_int_equal(s2.n, (size_t)0x1111111111111111u); /* not written */
    g2p_dict_free(&d);
}

/* ---- split ------------------------------------------------------------------------------ */

/* FNV-1a 64 against values computed independently (python3); the split of words. */
static void g2p_fnv1a(void **state)
{
    (void)state;
    assert_true(g2p_fnv1a64("", 0) == 0xcbf29ce484222325u);
    assert_true(g2p_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cu);
    assert_true(g2p_fnv1a64("A", 1) == 0xaf63fc4c860222ecu);
    assert_true(g2p_fnv1a64("HELLO", 5) == 0xa0b400b98ea8182bu);
    assert_true(g2p_fnv1a64("DON'T", 5) == 0xdcb8d0055542b1edu);
    assert_true(g2p_fnv1a64("caf\xc3\xa9", 5) == 0x48e8823acfa40d89u);
    assert_true(g2p_fnv1a64("\xe6\x97\xa5\xe6\x9c\xac", 6) == 0x121d7e35a6d3ce91u);
    assert_true(g2p_fnv1a64("ABC", 2) == g2p_fnv1a64("AB", 2));
    assert_int_equal(g2p_split_of("AACHENER"), G2P_TEST);
    assert_int_equal(g2p_split_of("AAA"), G2P_VALID);
    assert_int_equal(g2p_split_of("HELLO"), G2P_TRAIN);
    assert_int_equal(g2p_split_of(""), G2P_TRAIN); /* 0xcbf29ce484222325 mod 20 = 17 */
}

/* ---- vocabularies and encoding ---------------------------------------------------------- */

/* encode_word: ids of known words, the byte offset of the first unknown symbol or invalid
 * byte, nothing written when the buffer is too small; find, make, copy, join. */
static void g2p_vocab_encode(void **state)
{
    (void)state;
    char err[256] = "";
    static const char *const syms[] = {"<pad>", "'", "A", "B", "C", "D", "N", "O", "T"};
    g2p_vocab v = {0}, c = {0};
    assert_int_equal(g2p_vocab_make(&v, syms, 9, 1, err, sizeof err), MHA_OK);
    int32_t ids[8] = {0};
    size_t bad = 99;
    assert_int_equal(g2p_encode_word(&v, "DON'T", ids, 8, &bad), 5);
    static const int32_t want[5] = {5, 7, 6, 1, 8};
    assert_memory_equal(ids, want, sizeof want);
    assert_int_equal(g2p_encode_word(&v, "DON'T", NULL, 0, NULL), 5);
    int32_t few[3] = {-7, -7, -7};
    assert_int_equal(g2p_encode_word(&v, "DON'T", few, 3, NULL), 5);
    assert_int_equal(few[0], -7); /* too small: nothing written */
    assert_int_equal(g2p_encode_word(&v, "CAT", few, 3, NULL), 3);
    assert_int_equal(g2p_encode_word(&v, "DOXT", ids, 8, &bad), G2P_ENC_UNKNOWN);
    assert_int_equal(bad, 2);
    assert_int_equal(g2p_encode_word(&v, "CA\xc3\xa9T", ids, 8, &bad), G2P_ENC_UNKNOWN);
    assert_int_equal(bad, 2);
    assert_int_equal(g2p_encode_word(&v, "CAT\xc3", ids, 8, &bad), G2P_ENC_BADUTF8);
    assert_int_equal(bad, 3);
    assert_int_equal(g2p_encode_word(&v, "dot", ids, 8, &bad), G2P_ENC_UNKNOWN);
    assert_int_equal(bad, 0);
    assert_int_equal(g2p_encode_word(&v, "", ids, 8, &bad), 0);

    assert_int_equal(g2p_vocab_find(&v, "<pad>"), 0);
    assert_int_equal(g2p_vocab_find(&v, "T"), 8);
    assert_int_equal(g2p_vocab_find(&v, "'"), 1);
    assert_int_equal(g2p_vocab_find(&v, "E"), -1);
    assert_int_equal(g2p_vocab_copy(&c, &v), MHA_OK);
    assert_int_equal(c.n, 9);
    assert_ptr_not_equal(c.sym[3], v.sym[3]);
    assert_string_equal(c.sym[3], "B");

    char out[16];
    size_t len = 0;
    assert_int_equal(g2p_vocab_join(&v, want, 5, " ", out, sizeof out, &len), MHA_OK);
    assert_string_equal(out, "D O N ' T");
    assert_int_equal(len, 9);
    assert_int_equal(g2p_vocab_join(&v, want, 5, NULL, out, sizeof out, &len), MHA_OK);
    assert_string_equal(out, "DON'T");
    assert_int_equal(g2p_vocab_join(&v, want, 5, " ", out, 9, &len), MHA_EOVERFLOW);
    assert_string_equal(out, "");
    int32_t oob[1] = {9};
    assert_int_equal(g2p_vocab_join(&v, oob, 1, " ", out, sizeof out, &len), MHA_EINVAL);

    /* malformed lists */
    static const char *const unsorted[] = {"<pad>", "B", "A"};
    static const char *const dup[] = {"<pad>", "<pad>", "A"};
    static const char *const empty[] = {"<pad>", "", "A"};
    g2p_vocab w;
    memset(&w, 0x22, sizeof w);
    assert_int_equal(g2p_vocab_make(&w, unsorted, 3, 1, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "symbol 2");
    assert_int_equal(g2p_vocab_make(&w, dup, 3, 1, err, sizeof err), MHA_EFORMAT);
    assert_int_equal(g2p_vocab_make(&w, empty, 3, 1, err, sizeof err), MHA_EFORMAT);
    assert_int_equal(g2p_vocab_make(&w, dup, 3, 4, err, sizeof err), MHA_EINVAL);
    /* a repeated data symbol (sorted, but not strictly increasing) */
    static const char *const rep[] = {"<pad>", "A", "A", "B"};
    assert_int_equal(g2p_vocab_make(&w, rep, 4, 1, err, sizeof err), MHA_EFORMAT);
    assert_has(err, "symbol 2");
    assert_int_equal(w.n, (size_t)0x2222222222222222u);
    g2p_vocab_free(&c);
    g2p_vocab_free(&v);
    g2p_vocab_free(&v); /* zeroed: no-op */
}

/* A dictionary encoded with another one's vocabularies: a word with a letter outside the
 * source vocabulary, a word with one pronunciation outside the target vocabulary, both
 * skipped and counted (the first such line named); the rest usable and indexed by split. */
static void g2p_set_foreign(void **state)
{
    (void)state;
    char err[256] = "";
    static const char model[] = "CAT  K AE1 T\nTACK  T AE1 K\nAT  AE1 T\n";
    static const char other[] = "TACT\tT AE1 K T\n"   /* usable */
                                "CAT\tK AE1 T\n"      /* usable, 2 prons */
                                "CAT\tK AE0 T\n"      /* AE0 unknown: CAT not usable */
                                "CA\xc3\x9c\tK AE1\n" /* Ü unknown: not usable */
                                "A\tAE1\n";           /* usable */
    g2p_dict dm = {0}, dx = {0};
    assert_int_equal(
        g2p_dict_parse(model, sizeof model - 1, "model", G2P_FMT_AUTO, &dm, err, sizeof err),
        MHA_OK);
    assert_int_equal(
        g2p_dict_parse(other, sizeof other - 1, "other", G2P_FMT_AUTO, &dx, err, sizeof err),
        MHA_OK);
    assert_int_equal(dx.n_words, 4);
    g2p_vocab src = {0}, tgt = {0};
    assert_int_equal(g2p_vocab_build(&dm, &src, &tgt, err, sizeof err), MHA_OK);
    g2p_set s = {0};
    assert_int_equal(g2p_set_encode(&dx, &src, &tgt, &s, err, sizeof err), MHA_OK);
    assert_int_equal(s.unknown_src_words, 1);
    assert_int_equal(s.unknown_tgt_prons, 1);
    assert_int_equal(s.unknown_tgt_words, 1);
    assert_int_equal(s.skipped_words, 2);
    assert_int_equal(s.unknown_line_first, 3);
    assert_int_equal(s.usable[0], 1);
    assert_int_equal(s.usable[1], 0);
    assert_int_equal(s.usable[2], 0);
    assert_int_equal(s.usable[3], 1);
    assert_int_equal(s.words_off[G2P_NSPLIT], 2);
    assert_int_equal(s.prons_off[G2P_NSPLIT], 2);
    /* the unknown symbols are -1 */
    assert_int_equal(s.tgt[s.tgt_off[s.pron_off[1] + 1] + 1], -1);
    assert_int_equal(s.src[s.src_off[2] + 2], -1);
    /* the usable words, by split, are TACT and A */
    size_t seen = 0;
    for (int sp = 0; sp < G2P_NSPLIT; sp++)
        for (size_t k = s.words_off[sp]; k < s.words_off[sp + 1]; k++) {
            size_t w = s.word_idx[k];
            assert_int_equal(dx.words[w].split, sp);
            seen |= (size_t)1 << w;
        }
    assert_int_equal(seen, 1 | 8);
    g2p_set_free(&s);
    g2p_set_free(&s);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    g2p_dict_free(&dm);
    g2p_dict_free(&dx);
}

/* Batches: source padded with G2P_PAD, decoder input <s> y…, targets y… </s> then −1
 * (y backwards for a right-to-left model); too small S or T and a word that is not usable
 * refused, nothing written. */
static void g2p_batch_layout(void **state)
{
    (void)state;
    char err[256] = "";
    static const char text[] = "AT  AE1 T\nCAT  K AE1 T\nAT(1)  AH0 T\n";
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_parse(text, sizeof text - 1, "b", G2P_FMT_AUTO, &d, err, sizeof err),
                     MHA_OK);
    g2p_vocab src = {0}, tgt = {0};
    assert_int_equal(g2p_vocab_build(&d, &src, &tgt, err, sizeof err), MHA_OK);
    /* source: <pad> A C T;  target: <pad> <s> </s> AE1 AH0 K T */
    g2p_set s = {0};
    assert_int_equal(g2p_set_encode(&d, &src, &tgt, &s, err, sizeof err), MHA_OK);
    /* prons grouped: 0 = AT "AE1 T", 1 = AT "AH0 T", 2 = CAT "K AE1 T" */
    const size_t rows[2] = {2, 1};
    enum { B = 2, S = 4, T = 5 };
    int32_t x[B * S], yi[B * T], yo[B * T];
    assert_int_equal(g2p_batch(&s, rows, B, S, T, x, yi, yo, err, sizeof err), MHA_OK);
    static const int32_t wx[B * S] = {2, 1, 3, 0, 1, 3, 0, 0};
    static const int32_t wyi[B * T] = {1, 5, 3, 6, 0, 1, 4, 6, 0, 0};
    static const int32_t wyo[B * T] = {5, 3, 6, 2, -1, 4, 6, 2, -1, -1};
    assert_memory_equal(x, wx, sizeof x);
    assert_memory_equal(yi, wyi, sizeof yi);
    assert_memory_equal(yo, wyo, sizeof yo);
    int32_t keep[B * T];
    memcpy(keep, yo, sizeof yo);
    assert_int_equal(g2p_batch(&s, rows, B, 2, T, x, yi, yo, err, sizeof err), MHA_EOVERFLOW);
    assert_has(err, "row 0");
    assert_int_equal(g2p_batch(&s, rows, B, S, 3, x, yi, yo, err, sizeof err), MHA_EOVERFLOW);
    const size_t oob[2] = {0, 3};
    assert_int_equal(g2p_batch(&s, oob, B, S, T, x, yi, yo, err, sizeof err), MHA_EINVAL);
    assert_memory_equal(yo, keep, sizeof yo);
    assert_memory_equal(x, wx, sizeof x);
    /* exactly fitting: S = 3, T = 4 */
    assert_int_equal(g2p_batch(&s, rows, 1, 3, 4, x, yi, yo, err, sizeof err), MHA_OK);
    /* a right-to-left model's batch: each pronunciation last token first, the source and
     * the <s> / </s> / padding layout unchanged */
    s.reverse_targets = 1;
    assert_int_equal(g2p_batch(&s, rows, B, S, T, x, yi, yo, err, sizeof err), MHA_OK);
    static const int32_t ryi[B * T] = {1, 6, 3, 5, 0, 1, 6, 4, 0, 0};
    static const int32_t ryo[B * T] = {6, 3, 5, 2, -1, 6, 4, 2, -1, -1};
    assert_memory_equal(x, wx, sizeof x);
    assert_memory_equal(yi, ryi, sizeof yi);
    assert_memory_equal(yo, ryo, sizeof yo);
    g2p_set_free(&s);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    g2p_dict_free(&d);
}

/* ---- scoring ---------------------------------------------------------------------------- */

static size_t dist_str(const char *a, const char *b)
{
    int32_t x[32], y[32];
    size_t na = strlen(a), nb = strlen(b), work[33];
    for (size_t i = 0; i < na; i++)
        x[i] = (unsigned char)a[i];
    for (size_t i = 0; i < nb; i++)
        y[i] = (unsigned char)b[i];
    size_t d = g2p_edit_distance(x, na, y, nb, work);
    assert_int_equal(g2p_edit_distance(y, nb, x, na, work), d); /* symmetric */
    return d;
}

/* Levenshtein distance: empty sides, equal, one substitution, insertion, deletion, and the
 * textbook cases. */
static void g2p_edit_distance_cases(void **state)
{
    (void)state;
    assert_int_equal(dist_str("", ""), 0);
    assert_int_equal(dist_str("", "abc"), 3);
    assert_int_equal(dist_str("abc", "abc"), 0);
    assert_int_equal(dist_str("abc", "axc"), 1);  /* substitution */
    assert_int_equal(dist_str("abc", "abxc"), 1); /* insertion */
    assert_int_equal(dist_str("abc", "ac"), 1);   /* deletion */
    assert_int_equal(dist_str("kitten", "sitting"), 3);
    assert_int_equal(dist_str("flaw", "lawn"), 2);
    assert_int_equal(dist_str("intention", "execution"), 5);
    assert_int_equal(dist_str("abcdef", "fedcba"), 6);
    assert_int_equal(dist_str("a", "b"), 1);
}

/* The closest reference: least distance; among equally close ones the shortest; among
 * equally short ones the first. */
static void g2p_closest_tie(void **state)
{
    (void)state;
    size_t work[8];
    const int32_t hyp[3] = {1, 2, 3};
    /* refs: [1 2 3 4] (d 1, len 4), [1 2] (d 1, len 2), [1 9 3] (d 1, len 3) */
    const int32_t ref[9] = {1, 2, 3, 4, 1, 2, 1, 9, 3};
    const size_t off[4] = {0, 4, 6, 9};
    g2p_closest c = g2p_closest_ref(hyp, 3, ref, off, 3, work);
    assert_int_equal(c.ref, 1);
    assert_int_equal(c.dist, 1);
    assert_int_equal(c.len, 2);
    /* equal length ties: the first */
    const int32_t ref2[6] = {1, 2, 7, 1, 8, 3};
    const size_t off2[3] = {0, 3, 6};
    c = g2p_closest_ref(hyp, 3, ref2, off2, 2, work);
    assert_int_equal(c.ref, 0);
    assert_int_equal(c.dist, 1);
    /* an exact match wins over everything */
    const int32_t ref3[5] = {1, 2, 1, 2, 3};
    const size_t off3[3] = {0, 2, 5};
    c = g2p_closest_ref(hyp, 3, ref3, off3, 2, work);
    assert_int_equal(c.ref, 1);
    assert_int_equal(c.dist, 0);
    assert_int_equal(c.len, 3);
    /* absolute offsets: the same references further into a buffer */
    const int32_t shifted[11] = {-5, -5, 1, 2, 3, 4, 1, 2, 1, 9, 3};
    const size_t offs[4] = {2, 6, 8, 11};
    c = g2p_closest_ref(hyp, 3, shifted, offs, 3, work);
    assert_int_equal(c.ref, 1);
    assert_int_equal(c.len, 2);
}

/* WER and PER on a hand-made example of three words, with and without stress, in one pass:
 *   w1 refs [B AH0 T], [B EY1 T], hyp [B AH1 T]: stress d 1 (len 3, wrong); without: correct
 *   w2 ref  [K AH0 T],            hyp [K AH0 T]: correct both (len 3)
 *   w3 refs [B EY1], [B AH0 K T], hyp [T]:       d 2 to [B EY1] (len 2) both
 * stress WER 2/3, PER 3/8; no stress WER 1/3, PER 2/8. Bad ids refused, nothing tallied. */
static void g2p_score_wer_per(void **state)
{
    (void)state;
    char err[256] = "";
    static const char *const syms[] = {"<pad>", "<s>", "</s>", "AH0", "AH1", "B", "EY1", "K", "T"};
    enum { AH0 = 3, AH1 = 4, B_ = 5, EY1 = 6, K_ = 7, T_ = 8 };
    g2p_vocab tgt = {0}, red = {0};
    assert_int_equal(g2p_vocab_make(&tgt, syms, 9, G2P_NSPECIAL, err, sizeof err), MHA_OK);
    int32_t map[9];
    assert_int_equal(g2p_stress_map(&tgt, &red, map, err, sizeof err), MHA_OK);
    static const char *const rwant[] = {"<pad>", "<s>", "</s>", "AH", "B", "EY", "K", "T"};
    assert_int_equal(red.n, 8);
    assert_int_equal(red.n_special, 3);
    for (size_t i = 0; i < red.n; i++)
        assert_string_equal(red.sym[i], rwant[i]);
    static const int32_t wmap[9] = {0, 1, 2, 3, 3, 4, 5, 6, 7};
    assert_memory_equal(map, wmap, sizeof map);

    g2p_scorer sc;
    assert_int_equal(g2p_scorer_init(&sc, map, 9), MHA_OK);
    g2p_closest c[2];
    const int32_t r1[6] = {B_, AH0, T_, B_, EY1, T_}, h1[3] = {B_, AH1, T_};
    const size_t o1[3] = {0, 3, 6};
    assert_int_equal(g2p_scorer_add(&sc, h1, 3, r1, o1, 2, c, err, sizeof err), MHA_OK);
    assert_int_equal(c[0].dist, 1);
    assert_int_equal(c[0].ref, 0);
    assert_int_equal(c[1].dist, 0);
    assert_int_equal(c[1].ref, 0);
    const int32_t r2[3] = {K_, AH0, T_};
    const size_t o2[2] = {0, 3};
    assert_int_equal(g2p_scorer_add(&sc, r2, 3, r2, o2, 1, NULL, err, sizeof err), MHA_OK);
    const int32_t r3[6] = {B_, EY1, B_, AH0, K_, T_}, h3[1] = {T_};
    const size_t o3[3] = {0, 2, 6};
    assert_int_equal(g2p_scorer_add(&sc, h3, 1, r3, o3, 2, c, err, sizeof err), MHA_OK);
    assert_int_equal(c[0].ref, 0);
    assert_int_equal(c[0].dist, 2);
    assert_int_equal(c[1].len, 2);

    /* refused: an id outside the vocabulary, a word without references */
    const int32_t bad[2] = {B_, 9};
    assert_int_equal(g2p_scorer_add(&sc, bad, 2, r2, o2, 1, NULL, err, sizeof err), MHA_EINVAL);
    assert_int_equal(
        g2p_scorer_add(&sc, r2, 3, bad, (const size_t[2]){0, 2}, 1, NULL, err, sizeof err),
        MHA_EINVAL);
    assert_int_equal(g2p_scorer_add(&sc, h1, 3, r1, o1, 0, NULL, err, sizeof err), MHA_EINVAL);

    assert_int_equal(sc.stress.words, 3);
    assert_int_equal(sc.stress.wrong, 2);
    assert_int_equal(sc.stress.edits, 3);
    assert_int_equal(sc.stress.ref_len, 8);
    assert_int_equal(sc.nostress.words, 3);
    assert_int_equal(sc.nostress.wrong, 1);
    assert_int_equal(sc.nostress.edits, 2);
    assert_int_equal(sc.nostress.ref_len, 8);
    assert_close(g2p_wer(&sc.stress), 2.0 / 3.0, 1e-15, 0);
    assert_close(g2p_per(&sc.stress), 3.0 / 8.0, 1e-15, 0);
    /* absolute reference offsets: the references of a word further into a buffer (as a
     * g2p_set's tgt holds every word's) are read there, not from the buffer's start */
    {
        g2p_scorer s2;
        assert_int_equal(g2p_scorer_init(&s2, map, 9), MHA_OK);
        const int32_t buf[8] = {T_, T_, EY1, K_, AH0, T_, B_, EY1};
        const size_t ob[3] = {3, 6, 8};
        g2p_closest c2[2];
        assert_int_equal(g2p_scorer_add(&s2, r2, 3, buf, ob, 2, c2, err, sizeof err), MHA_OK);
        assert_int_equal(c2[0].dist, 0);
        assert_int_equal(c2[0].ref, 0);
        assert_int_equal(c2[0].len, 3);
        const int32_t hb[2] = {B_, EY1};
        assert_int_equal(g2p_scorer_add(&s2, hb, 2, buf, ob, 2, c2, err, sizeof err), MHA_OK);
        assert_int_equal(c2[0].ref, 1);
        assert_int_equal(c2[0].dist, 0);
        assert_int_equal(c2[1].ref, 1);
        assert_int_equal(c2[1].dist, 0);
        assert_int_equal(s2.stress.wrong, 0);
        assert_int_equal(s2.stress.ref_len, 5);
        assert_int_equal(s2.nostress.wrong, 0); /* the mapped references, from there too */
        assert_int_equal(s2.nostress.edits, 0);
        assert_int_equal(s2.nostress.ref_len, 5);
        g2p_scorer_free(&s2);
    }
    assert_close(g2p_wer(&sc.nostress), 1.0 / 3.0, 1e-15, 0);
    assert_close(g2p_per(&sc.nostress), 2.0 / 8.0, 1e-15, 0);
    g2p_scorer_free(&sc);

    /* without a map only the stressed tally; an empty hypothesis counts all deletions */
    assert_int_equal(g2p_scorer_init(&sc, NULL, 0), MHA_OK);
    assert_int_equal(g2p_scorer_add(&sc, NULL, 0, r1, o1, 2, c, err, sizeof err), MHA_OK);
    assert_int_equal(sc.stress.edits, 3);
    assert_int_equal(sc.stress.wrong, 1);
    assert_int_equal(sc.nostress.words, 0);
    g2p_tally zero = {0};
    assert_close(g2p_wer(&zero), 0, 0, 0);
    g2p_scorer_free(&sc);
    g2p_vocab_free(&red);
    g2p_vocab_free(&tgt);
}

/* The CMUdict stress map: every stressed vowel goes to its bare phone, consonants and the
 * reserved ids to themselves. */
static void g2p_stress_map_cmudict(void **state)
{
    (void)state;
    char err[512] = "";
    g2p_dict d = {0};
    assert_int_equal(g2p_dict_read(CMUDICT, G2P_FMT_CMUDICT, &d, err, sizeof err), MHA_OK);
    g2p_vocab src = {0}, tgt = {0}, red = {0};
    assert_int_equal(g2p_vocab_build(&d, &src, &tgt, err, sizeof err), MHA_OK);
    int32_t *map = malloc(tgt.n * sizeof *map);
    assert_non_null(map);
    assert_int_equal(g2p_stress_map(&tgt, &red, map, err, sizeof err), MHA_OK);
    assert_int_equal(red.n, 42);
    for (int i = 0; i < G2P_NSPECIAL; i++)
        assert_int_equal(map[i], i);
    int ah = g2p_vocab_find(&red, "AH");
    assert_true(ah >= G2P_NSPECIAL);
    assert_int_equal(map[g2p_vocab_find(&tgt, "AH0")], ah);
    assert_int_equal(map[g2p_vocab_find(&tgt, "AH1")], ah);
    assert_int_equal(map[g2p_vocab_find(&tgt, "AH2")], ah);
    assert_int_equal(map[g2p_vocab_find(&tgt, "ZH")], g2p_vocab_find(&red, "ZH"));
    /* the reduced phones are exactly the 39 of data/cmudict.phones */
    FILE *fp = fopen(MHA_SOURCE_DIR "/data/cmudict.phones", "r");
    assert_non_null(fp);
    char line[64];
    size_t n = 0;
    while (fgets(line, sizeof line, fp) != NULL) {
        line[strcspn(line, "\t")] = '\0';
        assert_true(g2p_vocab_find(&red, line) >= G2P_NSPECIAL);
        n++;
    }
    fclose(fp);
    assert_int_equal(n, 39);
    free(map);
    g2p_vocab_free(&red);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    g2p_dict_free(&d);
}

/* ---- fixtures and main ------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    return make_temp_dir(g_dir, sizeof g_dir, "test_g2p_data");
}

static int group_teardown(void **state)
{
    (void)state;
    return remove_tree(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(g2p_cmudict_counts),
        cmocka_unit_test(g2p_cmudict_defects),
        cmocka_unit_test(g2p_cmudict_alternate_marks),
        cmocka_unit_test(g2p_read_errors),
        cmocka_unit_test(g2p_parse_mutations),
        cmocka_unit_test(g2p_tsv),
        cmocka_unit_test(g2p_fnv1a),
        cmocka_unit_test(g2p_vocab_encode),
        cmocka_unit_test(g2p_set_foreign),
        cmocka_unit_test(g2p_batch_layout),
        cmocka_unit_test(g2p_edit_distance_cases),
        cmocka_unit_test(g2p_closest_tie),
        cmocka_unit_test(g2p_score_wer_per),
        cmocka_unit_test(g2p_stress_map_cmudict),
    };
    return cmocka_run_group_tests_name("g2p_data", tests, group_setup, group_teardown);
}
