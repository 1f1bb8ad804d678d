/*
 * Tests of train/common/text.c: corpora, vocabulary, windows and the sampler (all tests text_*).
 *
 * Tiny Shakespeare is read from MHA_SOURCE_DIR/data; other files go to a fresh directory
 * under $TMPDIR (or /tmp), removed at the end.
 */
#include "test_util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mha_pcg32.h"
#include "text.h"

#define SHAKESPEARE MHA_SOURCE_DIR "/data/tinyshakespeare.txt"

static char g_dir[512]; /* the test directory */

static void path_in(char *buf, size_t len, const char *name)
{
    int r = snprintf(buf, len, "%s/%s", g_dir, name);
    assert_true(r > 0 && (size_t)r < len);
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    assert_true(n > 0);
    rewind(fp);
    unsigned char *p = malloc((size_t)n);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return p;
}

/* The whole corpus decoded back equals `bytes`. */
static void assert_roundtrip(const text_corpus *c, const unsigned char *bytes, size_t len)
{
    size_t n = text_corpus_len(c), got = 0;
    char *buf = malloc(4 * n + 1);
    assert_non_null(buf);
    char err[256];
    assert_int_equal(text_decode(text_corpus_vocab(c), text_corpus_ids(c), n, buf, 4 * n + 1,
                                 &got, err, sizeof err),
                     MHA_OK);
    assert_int_equal(got, len);
    assert_memory_equal(buf, bytes, len);
    assert_int_equal(buf[len], '\0');
    free(buf);
}

/* text_from_memory must refuse s with status rc and a message containing `want`. */
static void assert_refused(const char *s, size_t len, text_mode mode, size_t max_vocab,
                           size_t context, int rc, const char *want)
{
    text_corpus *c = (text_corpus *)&c; /* must come back NULL */
    char err[256] = "";
    assert_int_equal(text_from_memory(s, len, mode, max_vocab, context, &c, err, sizeof err),
                     rc);
    assert_null(c);
    if (strstr(err, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", err, want);
}

/* ---- corpus --------------------------------------------------------------------------- */

/* Tiny Shakespeare: 65 symbols ('\n' = 0, ' ' = 1), the published split, exact round trip,
 * and the UTF-8 mode agrees on this ASCII file. */
static void text_shakespeare(void **state)
{
    (void)state;
    char err[256];
    size_t len;
    unsigned char *bytes = read_file(SHAKESPEARE, &len);
    assert_int_equal(len, 1115394);
    text_corpus *c = NULL, *u = NULL;
    assert_int_equal(text_load(SHAKESPEARE, TEXT_BYTES, 4096, 64, &c, err, sizeof err), MHA_OK);
    const text_vocab *v = text_corpus_vocab(c);
    assert_int_equal(text_vocab_size(v), 65);
    assert_int_equal(text_vocab_symbol(v, 0), '\n');
    assert_int_equal(text_vocab_symbol(v, 1), ' ');
    for (size_t i = 1; i < 65; i++)
        assert_true(text_vocab_symbol(v, i - 1) < text_vocab_symbol(v, i));
    assert_int_equal(text_corpus_len(c), 1115394);
    size_t ntr = 0, nva = 0;
    const int32_t *tr = text_corpus_part(c, TEXT_TRAIN, &ntr);
    const int32_t *va = text_corpus_part(c, TEXT_VAL, &nva);
    assert_int_equal(ntr, 1003854);
    assert_int_equal(nva, 111540);
    assert_ptr_equal(tr, text_corpus_ids(c));
    assert_ptr_equal(va, text_corpus_ids(c) + 1003854);
    assert_roundtrip(c, bytes, len);

    assert_int_equal(text_load(SHAKESPEARE, TEXT_UTF8, 65, 64, &u, err, sizeof err), MHA_OK);
    assert_int_equal(text_vocab_size(text_corpus_vocab(u)), 65);
    assert_memory_equal(text_corpus_ids(u), text_corpus_ids(c), len * sizeof(int32_t));
    /* one symbol fewer allowed: refused */
    text_corpus *none = NULL;
    assert_int_equal(text_load(SHAKESPEARE, TEXT_BYTES, 64, 64, &none, err, sizeof err),
                     MHA_EFORMAT);
    assert_null(none);
    assert_non_null(strstr(err, "65"));
    text_corpus_free(u);
    text_corpus_free(c);
    free(bytes);
}

/* UTF-8 mode: 1- to 4-byte characters become one symbol each, sorted by code point, and
 * decode back exactly; bytes mode sees the same text as bytes. */
static void text_utf8_multibyte(void **state)
{
    (void)state;
    static const char s[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n" /* a é € 😀 \n */
                            "\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9" "a\n";
    size_t len = sizeof s - 1;
    char err[256];
    text_corpus *c = NULL;
    assert_int_equal(text_from_memory(s, len, TEXT_UTF8, 100, 0, &c, err, sizeof err), MHA_OK);
    const text_vocab *v = text_corpus_vocab(c);
    static const uint32_t want[5] = {'\n', 'a', 0xE9, 0x20AC, 0x1F600};
    assert_int_equal(text_vocab_size(v), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(text_vocab_symbol(v, i), want[i]);
    assert_int_equal(text_corpus_len(c), 10);
    static const int32_t ids[10] = {1, 2, 3, 4, 0, 4, 3, 2, 1, 0};
    assert_memory_equal(text_corpus_ids(c), ids, sizeof ids);
    assert_roundtrip(c, (const unsigned char *)s, len);
    text_corpus_free(c);

    assert_int_equal(text_from_memory(s, len, TEXT_BYTES, 100, 0, &c, err, sizeof err), MHA_OK);
    assert_int_equal(text_corpus_len(c), len);
    assert_int_equal(text_vocab_size(text_corpus_vocab(c)), 11); /* \n a + 9 distinct bytes */
    assert_roundtrip(c, (const unsigned char *)s, len);
    text_corpus_free(c);
}

/* Every kind of ill-formed UTF-8 is refused, naming the byte offset of the sequence; the
 * same bytes are fine in bytes mode. */
static void text_utf8_invalid(void **state)
{
    (void)state;
    static const struct {
        const char *bytes; /* after the prefix "ok\xc3\xa9" (offset 4) */
        const char *why;
    } bad[] = {
        {"\xc0\xaf", "overlong"},          {"\xc1\xbf", "overlong"},
        {"\xe0\x80\xaf", "overlong"},      {"\xe0\x9f\xbf", "overlong"},
        {"\xf0\x80\x80\xaf", "overlong"},  {"\xf0\x8f\xbf\xbf", "overlong"},
        {"\xed\xa0\x80", "surrogate"},     {"\xed\xbf\xbf", "surrogate"},
        {"\xf4\x90\x80\x80", "U+10FFFF"},  {"\xf5\x80\x80\x80", "F5..FF"},
        {"\xff", "F5..FF"},                {"\xfe", "F5..FF"},
        {"\x80", "continuation"},          {"\xbf", "continuation"},
        {"\xc3" "a", "truncated"},         {"\xe2\x82" "a", "truncated"},
        {"\xf0\x9f\x98" "a", "truncated"}, {"\xc3", "end of the text"},
        {"\xe2\x82", "end of the text"},   {"\xf0\x9f\x98", "end of the text"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char s[32];
        int n = snprintf(s, sizeof s, "ok\xc3\xa9%s", bad[i].bytes);
        assert_true(n > 0 && n < (int)sizeof s);
        assert_refused(s, (size_t)n, TEXT_UTF8, 100, 0, MHA_EFORMAT, bad[i].why);
        assert_refused(s, (size_t)n, TEXT_UTF8, 100, 0, MHA_EFORMAT, "at byte offset 4:");
        text_corpus *c = NULL;
        assert_int_equal(text_from_memory(s, (size_t)n, TEXT_BYTES, 256, 0, &c, NULL, 0),
                         MHA_OK);
        assert_roundtrip(c, (const unsigned char *)s, (size_t)n);
        text_corpus_free(c);
    }
    /* the largest valid forms of each length are accepted */
    static const char edge[] = "\x7f\xdf\xbf\xef\xbf\xbf\xf4\x8f\xbf\xbf\xee\x80\x80";
    text_corpus *c = NULL;
    assert_int_equal(text_from_memory(edge, sizeof edge - 1, TEXT_UTF8, 100, 0, &c, NULL, 0),
                     MHA_OK);
    assert_int_equal(text_vocab_symbol(text_corpus_vocab(c), 4), 0x10FFFF);
    assert_roundtrip(c, (const unsigned char *)edge, sizeof edge - 1);
    text_corpus_free(c);
}

/* Bytes mode: all 255 non-zero byte values, the high ones included, sorted by value and
 * decoded back exactly. */
static void text_bytes_high(void **state)
{
    (void)state;
    unsigned char s[2 * 255];
    for (size_t i = 0; i < 255; i++)
        s[i] = (unsigned char)(255 - i), s[255 + i] = (unsigned char)(1 + i);
    text_corpus *c = NULL;
    assert_int_equal(text_from_memory(s, sizeof s, TEXT_BYTES, 4096, 10, &c, NULL, 0), MHA_OK);
    const text_vocab *v = text_corpus_vocab(c);
    assert_int_equal(text_vocab_size(v), 255);
    for (size_t i = 0; i < 255; i++)
        assert_int_equal(text_vocab_symbol(v, i), i + 1);
    assert_int_equal(text_corpus_ids(c)[0], 254);
    assert_roundtrip(c, s, sizeof s);
    text_corpus_free(c);
}

/* Bad texts: NUL, empty, too short for the context (either part), vocabulary too large,
 * bad arguments. */
static void text_refuses_bad_text(void **state)
{
    (void)state;
    assert_refused("abc\0def", 7, TEXT_BYTES, 100, 0, MHA_EFORMAT, "NUL byte at byte offset 3");
    assert_refused("abc\0def", 7, TEXT_UTF8, 100, 0, MHA_EFORMAT, "not text");
    assert_refused("", 0, TEXT_BYTES, 100, 0, MHA_EFORMAT, "empty");
    /* 20 symbols: 18 train, 2 validation → context 1 fits, context 2 does not */
    const char *t20 = "abcdefghijabcdefghij";
    text_corpus *c = NULL;
    assert_int_equal(text_from_memory(t20, 20, TEXT_BYTES, 100, 1, &c, NULL, 0), MHA_OK);
    text_corpus_free(c);
    assert_refused(t20, 20, TEXT_BYTES, 100, 2, MHA_EFORMAT, "too short");
    assert_refused(t20, 20, TEXT_BYTES, 100, 17, MHA_EFORMAT, "at least 18");
    assert_refused(t20, 20, TEXT_BYTES, 100, (size_t)-1, MHA_EFORMAT, "too short");
    /* 10 distinct symbols */
    assert_int_equal(text_from_memory(t20, 20, TEXT_BYTES, 10, 0, &c, NULL, 0), MHA_OK);
    text_corpus_free(c);
    assert_refused(t20, 20, TEXT_BYTES, 9, 0, MHA_EFORMAT, "larger than the limit 9");
    assert_refused(t20, 20, (text_mode)7, 100, 0, MHA_EINVAL, "");
    assert_refused(t20, 20, TEXT_BYTES, 0, 0, MHA_EINVAL, "");
    assert_refused(NULL, 3, TEXT_BYTES, 100, 0, MHA_EINVAL, "");
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "text_load_files: text_load blocked on a FIFO\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(99);
}

/* Files: empty file, missing file, directory and FIFO refused (the FIFO without blocking:
 * an alarm kills the test if text_load hangs), a good file accepted. */
static void text_load_files(void **state)
{
    (void)state;
    char path[1024], err[512];
    text_corpus *c = (text_corpus *)&c;
    path_in(path, sizeof path, "empty.txt");
    write_bytes(path, "", 0);
    assert_int_equal(text_load(path, TEXT_BYTES, 100, 0, &c, err, sizeof err), MHA_EFORMAT);
    assert_null(c);
    assert_non_null(strstr(err, "empty"));

    path_in(path, sizeof path, "missing.txt");
    assert_int_equal(text_load(path, TEXT_BYTES, 100, 0, &c, err, sizeof err), MHA_EIO);
    assert_non_null(strstr(err, "missing.txt"));

    assert_int_equal(text_load(g_dir, TEXT_BYTES, 100, 0, &c, err, sizeof err), MHA_EIO);
    assert_non_null(strstr(err, "not a regular file"));

    path_in(path, sizeof path, "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(10);
    assert_int_equal(text_load(path, TEXT_UTF8, 100, 0, &c, err, sizeof err), MHA_EIO);
    alarm(0);
    assert_null(c);
    assert_non_null(strstr(err, "not a regular file"));

    path_in(path, sizeof path, "good.txt");
    write_bytes(path, "hello world\n", 12);
    assert_int_equal(text_load(path, TEXT_UTF8, 100, 0, &c, err, sizeof err), MHA_OK);
    assert_int_equal(text_corpus_len(c), 12);
    text_corpus_free(c);
    assert_int_equal(text_load(NULL, TEXT_UTF8, 100, 0, &c, err, sizeof err), MHA_EINVAL);
}

/* ---- vocabulary ----------------------------------------------------------------------- */

/* format → parse is exact in both modes, with '\n', '"', '\\', high bytes and 4-byte code
 * points; the string needs no JSON escaping; malformed strings are refused. */
static void text_vocab_serialise(void **state)
{
    (void)state;
    static const char bytes_text[] = "say \"hi\\there\"\n\x80\xff\x01";
    static const char utf8_text[] = "say \"hi\\there\"\n\xc3\xa9\xf0\x9f\x98\x80\x01";
    const char *texts[2] = {bytes_text, utf8_text};
    const size_t lens[2] = {sizeof bytes_text - 1, sizeof utf8_text - 1};
    const char *prefix[2] = {"bytes:", "utf8:"};
    char err[256];
    for (int m = 0; m < 2; m++) {
        text_corpus *c = NULL;
        assert_int_equal(text_from_memory(texts[m], lens[m], (text_mode)m, 100, 0, &c, err,
                                          sizeof err),
                         MHA_OK);
        const text_vocab *v = text_corpus_vocab(c);
        char *s = NULL;
        assert_int_equal(text_vocab_format(v, &s, err, sizeof err), MHA_OK);
        assert_int_equal(strncmp(s, prefix[m], strlen(prefix[m])), 0);
        assert_int_equal(strlen(s), strlen(prefix[m]) + (m ? 6 : 2) * text_vocab_size(v));
        assert_null(strpbrk(s, "\"\\\n"));
        text_vocab *w = NULL;
        assert_int_equal(text_vocab_parse(s, 100, &w, err, sizeof err), MHA_OK);
        assert_int_equal(text_vocab_mode(w), (text_mode)m);
        assert_int_equal(text_vocab_size(w), text_vocab_size(v));
        for (size_t i = 0; i < text_vocab_size(v); i++)
            assert_int_equal(text_vocab_symbol(w, i), text_vocab_symbol(v, i));
        assert_int_equal(text_vocab_parse(s, text_vocab_size(v) - 1, &w, err, sizeof err),
                         MHA_EFORMAT);
        /* the parsed vocabulary encodes the text to the corpus's ids */
        int32_t ids[64];
        size_t n = 0;
        assert_int_equal(text_encode(w, texts[m], lens[m], ids, 64, &n, err, sizeof err), MHA_OK);
        assert_int_equal(n, text_corpus_len(c));
        assert_memory_equal(ids, text_corpus_ids(c), n * sizeof ids[0]);
        text_vocab_free(w);
        free(s);
        text_corpus_free(c);
    }
    static const char *bad[] = {"", "bytes:", "ascii:0a", "bytes:0a2", "bytes:0A", "bytes:0a0a",
                                "bytes:200a", "bytes:000a", "utf8:00d800", "utf8:110000",
                                "utf8:0a", "bytes:0g"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        text_vocab *w = (text_vocab *)&w;
        assert_int_equal(text_vocab_parse(bad[i], 100, &w, err, sizeof err), MHA_EFORMAT);
        assert_ptr_equal(w, (text_vocab *)&w);
    }
}

/* Prompts: encoded by the vocabulary; a character outside it is refused, named with its
 * position; too small a buffer refused with nothing written; decode checks ids and room. */
static void text_prompt_lookup(void **state)
{
    (void)state;
    static const char s[] = "hello, w\xc3\xb6rld\n";
    char err[256];
    text_corpus *c = NULL;
    assert_int_equal(text_from_memory(s, sizeof s - 1, TEXT_UTF8, 100, 0, &c, NULL, 0), MHA_OK);
    const text_vocab *v = text_corpus_vocab(c);
    int32_t ids[16] = {0};
    size_t n = 0;
    assert_int_equal(text_encode(v, "w\xc3\xb6rld", 6, NULL, 0, &n, err, sizeof err), MHA_OK);
    assert_int_equal(n, 5);
    assert_int_equal(text_encode(v, "hell\xc3\xb6 q", 8, ids, 16, &n, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "'q' (U+0071) at position 6 (byte offset 7)"));
    assert_int_equal(text_encode(v, "ab\xe2\x82\xac", 5, ids, 16, &n, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "'a' (U+0061) at position 0"));
    assert_int_equal(text_encode(v, "lo\xe2\x82\xac", 5, ids, 16, &n, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "'\xe2\x82\xac' (U+20AC) at position 2 (byte offset 2)"));
    assert_int_equal(text_encode(v, "lo\t", 3, ids, 16, &n, err, sizeof err), MHA_EFORMAT);
    assert_non_null(strstr(err, "U+0009 at position 2"));
    assert_int_equal(text_encode(v, "lo\xc3", 3, ids, 16, &n, err, sizeof err), MHA_EFORMAT);
    assert_non_null(strstr(err, "byte offset 2"));
    assert_int_equal(text_encode(v, "hello", 5, ids, 4, &n, err, sizeof err), MHA_EOVERFLOW);
    assert_int_equal(ids[0], 0); /* nothing written */
    assert_int_equal(text_encode(v, "h\xc3\xb6", 3, ids, 2, &n, err, sizeof err), MHA_OK);
    assert_int_equal(n, 2);

    char out[8];
    size_t len = 0;
    assert_int_equal(text_decode(v, ids, 2, out, 3, &len, err, sizeof err), MHA_EOVERFLOW);
    assert_int_equal(text_decode(v, ids, 2, out, 4, &len, err, sizeof err), MHA_OK);
    assert_int_equal(len, 3);
    assert_string_equal(out, "h\xc3\xb6");
    int32_t badid[1] = {(int32_t)text_vocab_size(v)};
    assert_int_equal(text_decode(v, badid, 1, out, 8, &len, err, sizeof err), MHA_EINVAL);
    badid[0] = -1;
    assert_int_equal(text_decode(v, badid, 1, out, 8, &len, err, sizeof err), MHA_EINVAL);
    text_corpus_free(c);

    /* bytes mode names the byte */
    assert_int_equal(text_from_memory("ab\xe9", 3, TEXT_BYTES, 100, 0, &c, NULL, 0), MHA_OK);
    assert_int_equal(text_encode(text_corpus_vocab(c), "a\xea", 2, ids, 16, &n, err, sizeof err),
                     MHA_EFORMAT);
    assert_non_null(strstr(err, "byte 0xea at position 1"));
    text_corpus_free(c);
}

/* ---- windows -------------------------------------------------------------------------- */

enum { WB = 64, WT = 7, WLEN = 40 };

/* Batches: tokens are windows of the ids, targets the same shifted by one, offsets cover
 * exactly [0, len − T − 1], the same seed gives the same batch, text_batch draws as
 * text_draw_offsets + text_windows. */
static void text_batch_windows(void **state)
{
    (void)state;
    int32_t ids[WLEN], tok[WB * WT], tgt[WB * WT], tok2[WB * WT], tgt2[WB * WT];
    for (int i = 0; i < WLEN; i++)
        ids[i] = 1000 + i; /* an id names its position */
    mha_pcg32 r1, r2;
    mha_pcg32_seed(&r1, 42, TEXT_STREAM_BATCH);
    r2 = r1;
    int seen[WLEN] = {0};
    for (int rep = 0; rep < 20; rep++) {
        assert_int_equal(text_batch(ids, WLEN, WB, WT, &r1, tok, tgt, NULL, 0), MHA_OK);
        size_t off[WB];
        assert_int_equal(text_draw_offsets(WLEN, WT, WB, &r2, off, NULL, 0), MHA_OK);
        assert_int_equal(text_windows(ids, WLEN, WT, off, WB, tok2, tgt2, NULL, 0), MHA_OK);
        assert_memory_equal(tok, tok2, sizeof tok);
        assert_memory_equal(tgt, tgt2, sizeof tgt);
        for (int b = 0; b < WB; b++) {
            int o = tok[b * WT] - 1000;
            assert_true(o >= 0 && o <= WLEN - WT - 1);
            assert_int_equal((size_t)o, off[b]);
            seen[o] = 1;
            for (int t = 0; t < WT; t++) {
                assert_int_equal(tok[b * WT + t], 1000 + o + t);
                assert_int_equal(tgt[b * WT + t], 1000 + o + t + 1);
            }
        }
    }
    for (int o = 0; o < WLEN; o++)
        assert_int_equal(seen[o], o <= WLEN - WT - 1);
    assert_memory_equal(&r1, &r2, sizeof r1);
    /* len = T + 1: one window only; len = T refused, generator untouched */
    assert_int_equal(text_batch(ids, WT + 1, 2, WT, &r1, tok, tgt, NULL, 0), MHA_OK);
    assert_int_equal(tok[WT], 1000);
    assert_int_equal(tgt[2 * WT - 1], 1000 + WT);
    mha_pcg32 before = r1;
    char err[256];
    assert_int_equal(text_batch(ids, WT, 2, WT, &r1, tok, tgt, err, sizeof err), MHA_EINVAL);
    assert_memory_equal(&r1, &before, sizeof r1);
    size_t bad_off[1] = {WLEN - WT};
    assert_int_equal(text_windows(ids, WLEN, WT, bad_off, 1, tok, tgt, err, sizeof err),
                     MHA_EINVAL);
}

/* The evaluation windows are the same every time they are built from the same seed, in
 * range, change with the seed, and are the pinned draws of PCG32(seed, TEXT_STREAM_EVAL). */
static void text_eval_set_fixed(void **state)
{
    (void)state;
    enum { N = 200 * 12 };
    size_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    assert_true(a && b && c);
    assert_int_equal(text_eval_offsets(111540, 64, N, 1337, a, NULL, 0), MHA_OK);
    assert_int_equal(text_eval_offsets(111540, 64, N, 1337, b, NULL, 0), MHA_OK);
    assert_memory_equal(a, b, N * sizeof *a);
    size_t same = 0;
    for (size_t i = 0; i < N; i++)
        assert_true(a[i] <= 111540 - 64 - 1);
    assert_int_equal(text_eval_offsets(111540, 64, N, 1338, c, NULL, 0), MHA_OK);
    for (size_t i = 0; i < N; i++)
        same += a[i] == c[i];
    assert_true(same < 10);
    /* pinned: the first offsets of PCG32(1337, TEXT_STREAM_EVAL) bounded by 111476 */
    mha_pcg32 r;
    mha_pcg32_seed(&r, 1337, TEXT_STREAM_EVAL);
    for (size_t i = 0; i < 4; i++) {
        uint32_t o;
        assert_int_equal(mha_pcg32_bounded(&r, 111540 - 64, &o), 0);
        assert_int_equal(a[i], o);
    }
    free(a);
    free(b);
    free(c);
}

/* ---- sampler -------------------------------------------------------------------------- */

/* top_k = 1 and a tiny temperature give the argmax (ties: the lower id); same generator
 * state → same id; one double drawn per call whatever the settings; bad input refused. */
static void text_sample_argmax(void **state)
{
    (void)state;
    const float logits[6] = {0.5f, 2.0f, -1.0f, 3.0f, 3.0f, 1.0f};   /* tie: argmax is 3 */
    const float close[6] = {0.5f, 2.0f, -1.0f, 2.999f, 3.0f, 1.0f};  /* argmax 4 by 1e-3 */
    mha_pcg32 r, ref;
    mha_pcg32_seed(&r, 7, TEXT_STREAM_SAMPLE);
    for (int i = 0; i < 200; i++) {
        int32_t id = -1;
        ref = r;
        (void)mha_pcg32_double(&ref);
        assert_int_equal(text_sample(logits, 6, 1.0, 1, &r, &id, NULL, 0), MHA_OK);
        assert_int_equal(id, 3);
        assert_int_equal(text_sample(close, 6, 1e-6, 0, &ref, &id, NULL, 0), MHA_OK);
        assert_int_equal(id, 4);
        (void)mha_pcg32_double(&r);
        assert_memory_equal(&r, &ref, sizeof r);
    }
    mha_pcg32 a = r, b = r;
    for (int i = 0; i < 100; i++) {
        int32_t x, y;
        assert_int_equal(text_sample(logits, 6, 0.8, 3, &a, &x, NULL, 0), MHA_OK);
        assert_int_equal(text_sample(logits, 6, 0.8, 3, &b, &y, NULL, 0), MHA_OK);
        assert_int_equal(x, y);
    }
    char err[256];
    int32_t id = 77;
    b = r;
    const double bad_t[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(text_sample(logits, 6, bad_t[i], 0, &r, &id, err, sizeof err),
                         MHA_EINVAL);
    const float nan_logits[3] = {0.0f, NAN, 1.0f}, inf_logits[3] = {0.0f, INFINITY, 1.0f};
    assert_int_equal(text_sample(nan_logits, 3, 1.0, 0, &r, &id, err, sizeof err),
                     MHA_ENONFINITE);
    assert_int_equal(text_sample(inf_logits, 3, 1.0, 0, &r, &id, err, sizeof err),
                     MHA_ENONFINITE);
    assert_int_equal(text_sample(logits, 0, 1.0, 0, &r, &id, err, sizeof err), MHA_EINVAL);
    assert_int_equal(id, 77);
    assert_memory_equal(&r, &b, sizeof r); /* refused calls draw nothing */
}

/* Empirical frequencies of 1e5 draws match softmax(logits / temperature), restricted and
 * renormalised to the top_k, within 5 sigma per symbol; the others never appear. */
static void text_sample_frequencies(void **state)
{
    (void)state;
    enum { V = 6, N = 100000 };
    const float logits[V] = {0.3f, -0.4f, 1.1f, 0.0f, 1.1f, -2.0f};
    const double temps[3] = {1.0, 0.7, 1.5};
    const size_t ks[3] = {0, 3, 2};
    /* top 3: ids 2, 4 (tie, 1.1), 0 (0.3); top 2: ids 2, 4 */
    mha_pcg32 r;
    mha_pcg32_seed(&r, 2024, TEXT_STREAM_SAMPLE);
    for (int c = 0; c < 3; c++) {
        double p[V], z = 0;
        for (int i = 0; i < V; i++) {
            int in = ks[c] == 0 || i == 2 || i == 4 || (ks[c] == 3 && i == 0);
            p[i] = in ? exp((double)logits[i] / temps[c]) : 0;
            z += p[i];
        }
        long count[V] = {0};
        for (int n = 0; n < N; n++) {
            int32_t id;
            assert_int_equal(text_sample(logits, V, temps[c], ks[c], &r, &id, NULL, 0), MHA_OK);
            assert_true(id >= 0 && id < V);
            count[id]++;
        }
        for (int i = 0; i < V; i++) {
            double pi = p[i] / z, sigma = sqrt(N * pi * (1 - pi));
            if (pi == 0)
                assert_int_equal(count[i], 0);
            else
                assert_close((double)count[i], N * pi, 5 * sigma, 0);
        }
    }
}

/* ---- fixtures and main ---------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    return make_temp_dir(g_dir, sizeof g_dir, "test_text");
}

static int group_teardown(void **state)
{
    (void)state;
    return remove_tree(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_shakespeare),
        cmocka_unit_test(text_utf8_multibyte),
        cmocka_unit_test(text_utf8_invalid),
        cmocka_unit_test(text_bytes_high),
        cmocka_unit_test(text_refuses_bad_text),
        cmocka_unit_test(text_load_files),
        cmocka_unit_test(text_vocab_serialise),
        cmocka_unit_test(text_prompt_lookup),
        cmocka_unit_test(text_batch_windows),
        cmocka_unit_test(text_eval_set_fixed),
        cmocka_unit_test(text_sample_argmax),
        cmocka_unit_test(text_sample_frequencies),
    };
    return cmocka_run_group_tests_name("text", tests, group_setup, group_teardown);
}
