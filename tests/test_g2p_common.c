/* See test_g2p_prog.h. */
#include "test_g2p_prog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_prog.h"
#include "test_util.h"

int g2p(const char *tag, const char *args) { return run_prog(MHA_G2P_EXE, tag, args); }

void write_small_dict(const char *path, size_t lines)
{
    char *all = slurp(MHA_SOURCE_DIR "/data/cmudict.dict", NULL);
    assert_non_null(all);
    char *p = all;
    for (size_t i = 0; i < lines && p; i++) {
        p = strchr(p, '\n'); /* the first `lines` lines */
        if (p)
            p++;
    }
    size_t n = p ? (size_t)(p - all) : strlen(all);
    const char extra[] = "A.  EY1\n{BRACE  B R EY1 S\nNOSEPARATOR\nA42128  EY1\n";
    char *buf = malloc(n + sizeof extra);
    assert_non_null(buf);
    memcpy(buf, all, n);
    memcpy(buf + n, extra, sizeof extra);
    write_file(path, buf, n + sizeof extra - 1);
    free(buf);
    free(all);
}

/* The first 40 wrong words of an errors.txt (WORD  HYPOTHESIS  # REFERENCES), pronounced
 * by `pronounce --no-lexicon ARGS` (the library's decoder, output under tag): each gets the
 * hypothesis eval's decoder found for it. Returns the number of words compared. */
size_t errors_through_pronounce(const char *errors, const char *tag, const char *args)
{
    char *e = slurp(errors, NULL);
    assert_non_null(e);
    char words[4096] = "", want[16384] = "";
    size_t nw = 0;
    for (char *line = e; *line && nw < 40; nw++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        char *sep = strstr(line, "  "), *hash = strstr(line, "  #");
        assert_true(sep && hash && hash > sep);
        *hash = '\0';
        strncat(words, " \"", sizeof words - strlen(words) - 1); /* ' in words: quoted */
        strncat(words, line, (size_t)(sep - line));
        strncat(words, "\"", sizeof words - strlen(words) - 1);
        strncat(want, line, sizeof want - strlen(want) - 1);
        strncat(want, "\n", sizeof want - strlen(want) - 1);
        line = nl + 1;
    }
    char cmd[8192], out[64];
    snprintf(cmd, sizeof cmd, "pronounce --no-lexicon %s %s", args, words);
    assert_int_equal(g2p(tag, cmd), 0);
    snprintf(out, sizeof out, "%s.out", tag);
    char *p = slurp(out, NULL);
    assert_non_null(p);
    assert_string_equal(p, want);
    free(p);
    free(e);
    return nw;
}
