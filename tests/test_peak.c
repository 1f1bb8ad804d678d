/* Tests of the peak cache (train/common/peak_cache.c): the training programs' MFU divides by
 * the fastest peak measured on this CPU, kept in a small checksummed file of the user's
 * cache. Where the file is (MHA_PEAK_CACHE, XDG_CACHE_HOME, HOME); that the kept value only
 * ever rises, per key; that damaged, cut or repeated lines are ignored or merged, and a
 * foreign file is never written; that the file keeps at most 256 keys, the newest; the
 * refusals; and peak_training_best's choice between the measurement and the kept value. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "peak.h"
#include "test_prog.h"

static char path[PEAK_PATH_CAP];

static int setup(void **state)
{
    if (tmpdir_setup(state) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/a/b/peak.tsv", tmpdir); /* a/b do not exist yet */
    return 0;
}

/* The value kept for key (0: none), read through the public call without raising it. */
static double kept_of(const char *key)
{
    double k = -1;
    assert_int_equal(peak_cache_update(path, key, 0.0, &k), 0);
    return k;
}

/* A line whose checksum is right for `rest` ("<GFLOP/s>\t<key>"). */
static void raw_line(const char *rest, char *out, size_t cap)
{
    snprintf(out, cap, "%08x\t%s\n", (unsigned)crc32c(0, rest, strlen(rest)), rest);
}

/* A valid line for (g, key), as the file holds it. */
static void line_of(double g, const char *key, char *out, size_t cap)
{
    char rest[PEAK_KEY_CAP + 64];
    snprintf(rest, sizeof rest, "%.3f\t%s", g, key);
    raw_line(rest, out, cap);
}

static void test_peak_cache_path(void **state)
{
    (void)state;
    char p[PEAK_PATH_CAP];
    setenv("MHA_PEAK_CACHE", "/x/y.tsv", 1);
    assert_int_equal(peak_cache_path(p, sizeof p), 0);
    assert_string_equal(p, "/x/y.tsv");
    setenv("MHA_PEAK_CACHE", "off", 1);
    assert_int_equal(peak_cache_path(p, sizeof p), -1);
    setenv("MHA_PEAK_CACHE", "", 1);
    assert_int_equal(peak_cache_path(p, sizeof p), -1);
    unsetenv("MHA_PEAK_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(peak_cache_path(p, sizeof p), 0);
    assert_string_equal(p, "/xdg/mha/peak.tsv");
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the XDG rule says */
    assert_int_equal(peak_cache_path(p, sizeof p), 0);
    assert_string_equal(p, "/home/u/.cache/mha/peak.tsv");
    unsetenv("XDG_CACHE_HOME");
    assert_int_equal(peak_cache_path(p, sizeof p), 0);
    assert_string_equal(p, "/home/u/.cache/mha/peak.tsv");
    unsetenv("HOME");
    assert_int_equal(peak_cache_path(p, sizeof p), -1);
    assert_int_equal(peak_cache_path(p, 5), -1); /* too small a buffer */
    setenv("MHA_PEAK_CACHE", "off", 1);
}

/* The kept value only rises; each key is its own; the directories are made. */
static void test_peak_cache_rises(void **state)
{
    (void)state;
    double k = -1;
    assert_int_equal(peak_cache_update(path, "loop A", 100.0, &k), 0);
    assert_true(k == 0.0); /* none before */
    assert_true(file_exists(path));
    assert_true(kept_of("loop A") == 100.0);
    assert_int_equal(peak_cache_update(path, "loop A", 56.0, &k), 0); /* slower: kept stays */
    assert_true(k == 100.0);
    assert_true(kept_of("loop A") == 100.0);
    assert_int_equal(peak_cache_update(path, "loop A", 231.5, &k), 0); /* faster: replaces */
    assert_true(k == 100.0);
    assert_true(kept_of("loop A") == 231.5);
    assert_int_equal(peak_cache_update(path, "loop B, 2 thread(s)", 444.0, &k), 0);
    assert_true(k == 0.0);
    assert_true(kept_of("loop A") == 231.5);
    assert_true(kept_of("loop B, 2 thread(s)") == 444.0);
    assert_true(kept_of("loop C") == 0.0);
    /* a non-finite or absurd measurement is never kept */
    assert_int_equal(peak_cache_update(path, "loop A", 1.0 / 0.0, &k), 0);
    assert_int_equal(peak_cache_update(path, "loop A", 2e7, &k), 0);
    assert_true(kept_of("loop A") == 231.5);
    assert_int_equal(count_lines(path), 3); /* the header and two keys */
}

/* Damaged and cut lines are ignored (and gone after the next write); the others stay. */
static void test_peak_cache_damage(void **state)
{
    (void)state;
    double k = -1;
    assert_int_equal(peak_cache_update(path, "good", 10.0, &k), 0);
    assert_int_equal(peak_cache_update(path, "flipped", 20.0, &k), 0);
    char *text = slurp(path, NULL);
    assert_non_null(text);
    char *v = strstr(text, "20.000\tflipped");
    assert_non_null(v);
    v[0] = '9'; /* 90.000: the checksum no longer matches */
    char cut[700];
    line_of(30.0, "cut", cut, sizeof cut);
    cut[strlen(cut) - 1] = '\0'; /* a last line without its newline */
    char bad[700], neg[100], dup[100];
    line_of(15.0, "good", dup, sizeof dup); /* a key twice: the larger value counts */
    raw_line("nan\tnan", bad, sizeof bad); /* right checksums, values no peak can have */
    raw_line("-5.000\tneg", neg, sizeof neg);
    char *fresh = malloc(strlen(text) + 2000);
    assert_non_null(fresh);
    snprintf(fresh, strlen(text) + 2000, "%s%s%s%s%s%s", text,
             "zzzzzzzz\t5.000\tnot hex\n", bad, neg, dup, cut);
    write_file(path, fresh, strlen(fresh));
    free(text);
    free(fresh);
    assert_true(kept_of("good") == 15.0);
    assert_true(kept_of("flipped") == 0.0);
    assert_true(kept_of("cut") == 0.0);
    assert_true(kept_of("nan") == 0.0);
    assert_true(kept_of("neg") == 0.0);
    assert_true(kept_of("not hex") == 0.0);
    assert_int_equal(peak_cache_update(path, "flipped", 21.0, &k), 0); /* rewrites the file */
    assert_true(k == 0.0);
    assert_int_equal(count_lines(path), 3); /* header, flipped, good: the damage dropped */
    assert_true(kept_of("good") == 15.0);
    assert_true(kept_of("flipped") == 21.0);
}

/* A file that is not a peak cache is read as empty and never written. */
static void test_peak_cache_foreign(void **state)
{
    (void)state;
    char dir[PEAK_PATH_CAP + 8];
    snprintf(dir, sizeof dir, "%s/a", tmpdir);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(dir, sizeof dir, "%s/a/b", tmpdir);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char mine[] = "my notes\nnot a cache\n";
    write_file(path, mine, sizeof mine - 1);
    double k = -1;
    assert_int_equal(peak_cache_update(path, "loop", 100.0, &k), -1);
    assert_true(k == 0.0);
    char *text = slurp(path, NULL);
    assert_non_null(text);
    assert_string_equal(text, mine);
    free(text);
    /* a directory where the file should be: refused, nothing made */
    char p2[PEAK_PATH_CAP + 8];
    snprintf(p2, sizeof p2, "%s/a/b/dir.tsv", tmpdir);
    assert_int_equal(mkdir(p2, 0700), 0);
    assert_int_equal(peak_cache_update(p2, "loop", 100.0, &k), -1);
    assert_true(k == 0.0);
}

/* At most 256 keys, the newest first: a new key past that drops the oldest. */
static void test_peak_cache_bounded(void **state)
{
    (void)state;
    double k = -1;
    char key[64];
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "key %d", i);
        assert_int_equal(peak_cache_update(path, key, 1.0 + i, &k), 0);
    }
    assert_int_equal(count_lines(path), 257);
    assert_true(kept_of("key 299") == 300.0);
    assert_true(kept_of("key 44") == 45.0);
    assert_true(kept_of("key 43") == 0.0);
    assert_true(kept_of("key 0") == 0.0);
}

static void test_peak_cache_refusals(void **state)
{
    (void)state;
    double k = -1;
    assert_int_equal(peak_cache_update(path, "tab\tkey", 1.0, &k), -1);
    assert_int_equal(peak_cache_update(path, "new\nline", 1.0, &k), -1);
    assert_int_equal(peak_cache_update(path, "", 1.0, &k), -1);
    assert_int_equal(peak_cache_update(NULL, "k", 1.0, &k), -1);
    assert_int_equal(peak_cache_update(path, NULL, 1.0, &k), -1);
    assert_int_equal(peak_cache_update(path, "k", 1.0, NULL), -1);
    char long_key[PEAK_KEY_CAP + 1];
    memset(long_key, 'x', PEAK_KEY_CAP);
    long_key[PEAK_KEY_CAP] = '\0';
    assert_int_equal(peak_cache_update(path, long_key, 1.0, &k), -1);
    assert_false(file_exists(path));
    char key[PEAK_KEY_CAP];
    assert_int_equal(peak_cache_key("loop", 0, key, sizeof key), -1);
    assert_int_equal(peak_cache_key(NULL, 1, key, sizeof key), -1);
}

/* peak_training_best: the measurement without a cache; the kept value when it is faster;
 * the measurement kept when it is the faster. */
static void test_peak_training_best(void **state)
{
    (void)state;
    peak_loop loop;
    assert_int_equal(peak_describe(PEAK_ISA_AUTO, &loop), 0);
    char key[PEAK_KEY_CAP];
    if (peak_cache_key(loop.name, 1, key, sizeof key) != 0) {
        skip(); /* no model name in /proc/cpuinfo: nothing is ever kept here */
        return;
    }
    assert_non_null(strstr(key, loop.name));
    assert_non_null(strstr(key, ", 1 thread(s), "));
    peak_best b;
    setenv("MHA_PEAK_CACHE", path, 1);
    peak_training_best(0, 1, 0, &b); /* use_cache 0: the file is not touched */
    assert_true(b.measured > 0 && b.gflops == b.measured && b.kept == 0);
    assert_string_equal(b.cache, "");
    assert_false(file_exists(path));
    peak_training_best(0, 1, 1, &b); /* the first: kept as measured */
    assert_true(b.measured > 0 && b.gflops == b.measured && b.kept == 0);
    assert_string_equal(b.cache, path);
    char note[PEAK_PATH_CAP + 128];
    peak_best_note(&b, note, sizeof note);
    assert_non_null(strstr(note, "the fastest so far on this CPU, kept in "));
    double k = -1;
    assert_int_equal(peak_cache_update(path, key, 0.0, &k), 0);
    assert_true(fabs(k - b.measured) < 1e-3); /* the file keeps three decimals */
    /* an earlier run that was faster than any can be: its value is the denominator */
    char line[PEAK_KEY_CAP + 64];
    line_of(999999.0, key, line, sizeof line);
    char *text = slurp(path, NULL);
    assert_non_null(text);
    char *nl = strchr(text, '\n'); /* keep the header, replace the line */
    assert_non_null(nl);
    nl[1] = '\0';
    char *fresh = malloc(strlen(text) + strlen(line) + 1);
    assert_non_null(fresh);
    strcpy(fresh, text);
    strcat(fresh, line);
    write_file(path, fresh, strlen(fresh));
    free(text);
    free(fresh);
    peak_training_best(0, 1, 1, &b);
    assert_true(b.kept == 999999.0 && b.gflops == 999999.0 && b.measured < b.gflops);
    peak_best_note(&b, note, sizeof note);
    assert_non_null(strstr(note, " now: the fastest of the earlier runs on this CPU, kept in "));
    setenv("MHA_PEAK_CACHE", "off", 1);
    peak_training_best(0, 1, 1, &b); /* off: the measurement alone */
    assert_true(b.gflops == b.measured && b.kept == 0);
    peak_best_note(&b, note, sizeof note);
    assert_string_equal(note, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peak_cache_path),
        cmocka_unit_test_setup_teardown(test_peak_cache_rises, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_peak_cache_damage, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_peak_cache_foreign, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_peak_cache_bounded, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_peak_cache_refusals, setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_peak_training_best, setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
