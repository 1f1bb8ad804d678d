/*
 * mha-g2p as a user runs it: a tiny model trained on a small dictionary learns, a resumed
 * run is the uninterrupted one bit for bit (1 thread), pronounce prints dictionary lines
 * and names words it cannot spell (a line holding a NUL byte too; a huge word by its
 * first bytes and length), exits 1 when its output cannot be written, eval writes its
 * numbers and the wrong words, bad input is refused with exit 2 and a message naming the
 * file, an ensemble of a model with itself is the model, --distill learns from teachers
 * (weight 0 is a run without it; refusals); and the committed model (and the committed
 * ensemble) reproduces the test-set numbers its summary claims, at 1 and 2 threads.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "mha_safetensors.h"
#include "test_prog.h"
#include "test_util.h"

static int g2p(const char *tag, const char *args) { return run_prog(MHA_G2P_EXE, tag, args); }

/* A small dictionary in CMUdict format: the first words of the real one with every
 * pronunciation, plus a few lines the loader must skip. */
static void write_small_dict(const char *path, size_t lines)
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

/* A tiny model; TINY in float32 (the tests that compare runs need one precision: the
 * default, auto, follows peaks measured at each start) */
#define TINY_MODEL "--enc-layers 1 --dec-layers 1 --dim 16 --heads 2 --mlp-dim 32 " \
                   "--batch 16 --threads 1 --eval-words 40 --ckpt-every 0"
#define TINY "--precision fp32 " TINY_MODEL

/* A small model learns (300 steps, ~3 s): the loss falls, the validation WER is a number,
 * the files are there, and the lines that are not entries were counted. */
static void g2p_train_learns(void **state)
{
    (void)state;
    write_small_dict("d.dict", 3000);
    assert_int_equal(g2p("t", "train --data d.dict --enc-layers 1 --dec-layers 1 --dim 32 "
                              "--heads 2 --mlp-dim 64 --batch 32 --threads 1 --eval-words 100 "
                              "--precision fp32 --steps 300 --eval-every 150 --lr 3e-3 --out run"), 0);
    assert_file_contains("t.out", "lines skipped");
    assert_file_contains("t.out", "  memory: about "); /* the estimate it checked */
    /* --help says what the memory of a default run is and what decoding holds */
    assert_int_equal(g2p("h", "--help"), 0);
    assert_file_contains("h.out", "Memory: train estimates what a run needs");
    assert_file_contains("h.out", "MiB for the defaults on CMUdict");
    const char *files[] = {"run/train_log.csv", "run/checkpoint.safetensors",
                           "run/best.safetensors", "run/summary.json", "run/curves.svg",
                           "run/alignment_0_layer0.svg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        assert_true(file_exists(files[i]));
    char *log = slurp("run/train_log.csv", NULL);
    assert_non_null(log);
    double first = 0, last = 0;
    char *line = strchr(log, '\n') + 1; /* after the header */
    assert_int_equal(sscanf(line, "%*d,%lf", &first), 1);
    char *end = log + strlen(log) - 2;
    while (end > log && *end != '\n')
        end--;
    assert_int_equal(sscanf(end + 1, "300,%lf", &last), 1);
    assert_true(last < 0.75 * first); /* measured: 4.28 → 2.76 */
    free(log);
    const double wer = summary_number("run/summary.json", "best_val_wer");
    assert_true(summary_number("run/summary.json", "step_ms") > 0);
    assert_true(summary_number("run/summary.json", "mfu") > 0);
    assert_true(wer >= 0 && wer <= 1);
}

/* 20 steps in one run = 10 steps, then --resume to 20 (1 thread: the same bits). */
static void g2p_train_resume_bitwise(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 20 --eval-every 10 "
                              "--out a"), 0);
    assert_int_equal(g2p("b1", "train --data d.dict " TINY " --steps 20 --eval-every 10 "
                               "--stop-after 10 --out b"), 0);
    assert_int_equal(g2p("b2", "train --resume b/checkpoint.safetensors"), 0);
    assert_same_checkpoint("a/checkpoint.safetensors", "b/checkpoint.safetensors");
}

/* A float32 run at 2 threads gives the 1-thread run's tensors bit for bit, at a size where
 * the products split over the threads (the read-out of 70-odd symbols over 40 words: the
 * row split's boundaries on libxsmm's 6-row blocks, src/gemm_core.c split_row). */
static void g2p_train_threads_bitwise(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    const char *run = "train --data d.dict --precision fp32 --enc-layers 1 --dec-layers 1 "
                      "--dim 32 --heads 2 --mlp-dim 64 --batch 40 --eval-words 40 "
                      "--ckpt-every 0 --steps 8 --eval-every 8";
    char cmd[512];
    for (int t = 1; t <= 2; t++) {
        snprintf(cmd, sizeof cmd, "%s --threads %d --out t%d", run, t, t);
        assert_int_equal(g2p(t == 1 ? "t1" : "t2", cmd), 0);
    }
    char why[256];
    if (!same_checkpoint_tensors("t1/checkpoint.safetensors", "t2/checkpoint.safetensors", why,
                                 sizeof why))
        fail_msg("1 and 2 threads differ: %s", why);
}

/* Resuming a finished run trains nothing and says so (exit 0, its checkpoint untouched), as
 * mha-gpt and mha-train do; fewer --steps than the checkpoint's step is refused naming
 * --steps (exit 2), where the run used to save a checkpoint past its own --steps that every
 * loader then refused. */
static void g2p_train_resume_finished(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 10 --eval-every 5 "
                              "--out a"), 0);
    size_t n;
    char *before = slurp("a/checkpoint.safetensors", &n);
    assert_non_null(before);
    write_file("a10.safetensors", before, n); /* the checkpoint's bytes before the resume */
    free(before);
    assert_int_equal(g2p("f", "train --resume a/checkpoint.safetensors"), 0);
    assert_file_contains("f.out", "is a finished run (step 10 of --steps 10); nothing to do");
    assert_same_file("a10.safetensors", "a/checkpoint.safetensors");
    assert_int_equal(g2p("s", "train --resume a/checkpoint.safetensors --steps 5"), 2);
    assert_file_contains("s.err", "invalid value '5' for --steps");
    assert_int_equal(g2p("p", "pronounce --model a/checkpoint.safetensors HELLO"), 0);
}

/* --precision bf16: refused with exit 2 naming avx512_bf16 where the CPU lacks it (as
 * MHA_DISABLE_BF16 makes this one); elsewhere recorded in the checkpoint, resumed bit for
 * bit from it at one thread, and the model it trains pronounces (in float32). */
static void g2p_train_bf16(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    setenv("MHA_DISABLE_BF16", "1", 1);
    const int refused = g2p("no", "train --data d.dict " TINY " --steps 4 --precision bf16 "
                                  "--out no");
    unsetenv("MHA_DISABLE_BF16");
    assert_int_equal(refused, 2);
    assert_file_contains("no.err", "--precision bf16 needs a CPU with avx512_bf16");
    if (!mha_precision_available(MHA_PRECISION_BF16)) {
        print_message("[  SKIP    ] this CPU has no avx512_bf16: bf16 training not tested here\n");
        skip();
    }
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 20 --eval-every 10 "
                              "--precision bf16 --out a"), 0);
    assert_int_equal(g2p("b1", "train --data d.dict " TINY " --steps 20 --eval-every 10 "
                               "--precision bf16 --stop-after 10 --out b"), 0);
    assert_int_equal(g2p("b2", "train --resume b/checkpoint.safetensors"), 0);
    assert_same_checkpoint("a/checkpoint.safetensors", "b/checkpoint.safetensors");
    assert_file_contains("b/summary.json", "\"precision\":\t\"bf16\"");
    assert_int_equal(g2p("p", "pronounce --model a/best.safetensors hello"), 0);
    assert_file_contains("p.out", "HELLO ");
}

/* --precision auto, the default: where bf16 is turned off (MHA_DISABLE_BF16, as on a CPU
 * without it) fp32, and the header says why; where the CPU has it, the choice follows the
 * peaks the header states (bf16 when the bf16 one is at least 1.25x the float32 one);
 * summary.json records the choice, and a resumed run keeps it without choosing again. */
static void g2p_train_precision_auto(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("h", "--help"), 0);
    char *help = slurp("h.out", NULL);
    assert_non_null(help);
    const char *opt = strstr(help, "--precision P");
    assert_non_null(opt);
    assert_non_null(strstr(opt, "fp32 | bf16 | auto"));
    opt = strstr(opt, "default: ");
    assert_non_null(opt);
    assert_int_equal(strncmp(opt, "default: auto\n", 14), 0);
    free(help);
    setenv("MHA_DISABLE_BF16", "1", 1);
    const int off = g2p("off", "train --data d.dict " TINY_MODEL " --steps 2 --out off");
    unsetenv("MHA_DISABLE_BF16");
    assert_int_equal(off, 0);
    assert_file_contains("off.out",
                         "  precision fp32 (auto: avx512_bf16 turned off by MHA_DISABLE_BF16)");
    assert_file_contains("off/summary.json", "\"precision\":\t\"fp32\"");
    assert_file_contains("off/summary.json", "\"precision_chosen\":");
    if (!mha_precision_available(MHA_PRECISION_BF16)) {
        print_message("[  SKIP    ] this CPU has no avx512_bf16: the peaks' choice not tested\n");
        skip();
    }
    assert_int_equal(g2p("on", "train --data d.dict " TINY_MODEL " --steps 2 --out on"), 0);
    char *out = slurp("on.out", NULL);
    assert_non_null(out);
    const char *line = strstr(out, "  precision ");
    assert_non_null(line);
    char chosen[8] = "";
    double g16 = 0, ratio = 0, g32 = 0;
    assert_int_equal(sscanf(line, "  precision %7s (auto: the bf16 peak %lf GFLOP/s is %lfx the "
                                  "float32 %lf,", chosen, &g16, &ratio, &g32), 4);
    free(out);
    assert_true(g16 > 0 && g32 > 0);
    /* the ratio of the unrounded peaks, printed to 0.01; the peaks to 1 */
    assert_true(ratio >= (g16 - 0.5) / (g32 + 0.5) - 0.005);
    assert_true(ratio <= (g16 + 0.5) / (g32 - 0.5) + 0.005);
    if (fabs(ratio - 1.25) > 0.01) /* away from the threshold, where rounding decides */
        assert_string_equal(chosen, ratio >= 1.25 ? "bf16" : "fp32");
    char want[64];
    snprintf(want, sizeof want, "\"precision\":\t\"%s\"", chosen);
    assert_file_contains("on/summary.json", want);
    /* a resume takes the checkpoint's precision, and says nothing of auto */
    assert_int_equal(g2p("on2", "train --resume on/checkpoint.safetensors --steps 4"), 0);
    assert_file_contains("on/summary.json", want);
    char *out2 = slurp("on2.out", NULL);
    assert_non_null(out2);
    assert_null(strstr(out2, "(auto:"));
    free(out2);
}

/* pronounce: CMUdict lines; lower case accepted; a word it cannot spell is named with its
 * character, the others still pronounced, exit 2; --nbest lists alternates with scores; a
 * line of standard input holding a NUL byte is refused the same way. */
static void g2p_pronounce(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 4 --eval-every 4 "
                              "--out run"), 0);
    assert_int_equal(g2p("p", "pronounce --model run/best.safetensors hello World"), 0);
    char *out = slurp("p.out", NULL);
    assert_non_null(out);
    assert_true(strncmp(out, "HELLO  ", 7) == 0);
    assert_non_null(strstr(out, "\nWORLD  "));
    free(out);
    assert_int_equal(g2p("q", "pronounce --model run/best.safetensors abc x1y def"), 2);
    assert_file_contains("q.err", "word 'x1y': character '1'");
    out = slurp("q.out", NULL);
    assert_non_null(out);
    assert_true(strncmp(out, "ABC  ", 5) == 0);
    assert_non_null(strstr(out, "\nDEF  "));
    free(out);
    write_file("words.txt", "cat\n\n  dog  \n", 13);
    assert_int_equal(g2p("s", "pronounce --model run/best.safetensors --beam 3 --nbest 2 "
                              "< words.txt"), 0);
    assert_file_contains("s.out", "CAT(1)  ");
    assert_file_contains("s.out", "DOG  ");
    assert_file_contains("s.out", "# logprob ");
    /* --nbest widens the beam to its N (as the library does): --nbest 3 alone is a beam of
     * 3, the same answers as --beam 3 --nbest 3 */
    assert_int_equal(g2p("n", "pronounce --model run/best.safetensors --nbest 3 cat"), 0);
    assert_int_equal(g2p("n3", "pronounce --model run/best.safetensors --beam 3 --nbest 3 cat"),
                     0);
    assert_file_contains("n.out", "CAT(2)  ");
    char *n1 = slurp("n.out", NULL), *n3 = slurp("n3.out", NULL);
    assert_non_null(n1);
    assert_non_null(n3);
    assert_string_equal(n1, n3);
    free(n1);
    free(n3);

    /* a NUL byte in a line of standard input: the line is refused, named by its number and
     * the whole word (before, the word was silently cut at the NUL and pronounced) */
    write_file("nul.txt", "abc\nHEL\0LO\n\0\ndef\n", 17);
    assert_int_equal(g2p("z", "pronounce --model run/best.safetensors < nul.txt"), 2);
    assert_file_contains("z.err", "line 2: word 'HEL\\0LO': a NUL byte");
    assert_file_contains("z.err", "line 3: word '\\0': a NUL byte");
    out = slurp("z.out", NULL);
    assert_non_null(out);
    assert_true(strncmp(out, "ABC  ", 5) == 0);
    assert_non_null(strstr(out, "\nDEF  "));
    assert_null(strstr(out, "HEL"));
    free(out);
}

/* pronounce's output goes to a full device: exit 1 with a message, not 0 with the output
 * lost (before, stdout's writes went unchecked). */
static void g2p_pronounce_write_error(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 4 --eval-every 4 "
                              "--out run"), 0);
    /* through a shell of its own: run_prog's own "> f.out" would replace "> /dev/full" */
    assert_int_equal(run_prog("/bin/sh", "f", "-c \"'" MHA_G2P_EXE "' pronounce --model "
                              "run/best.safetensors hello world > /dev/full\""), 1);
    assert_file_contains("f.err", "cannot write standard output: No space left on device");
    write_file("words.txt", "cat\ndog\n", 8);
    assert_int_equal(run_prog("/bin/sh", "g", "-c \"'" MHA_G2P_EXE "' pronounce --model "
                              "run/best.safetensors --beam 2 --nbest 2 < words.txt "
                              "> /dev/full\""), 1);
    assert_file_contains("g.err", "cannot write standard output: ");
}

/* A huge word is named by its first 64 bytes and its length, not echoed whole: a 1 MiB line
 * (too long) and a 100 kB one with a character outside the alphabet at its end give a
 * message of a line each; the other words are still pronounced. */
static void g2p_pronounce_huge_word(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 4 --eval-every 4 "
                              "--out run"), 0);
    const size_t big = 1 << 20, mid = 100000;
    char *in = malloc(big + mid + 16);
    assert_non_null(in);
    size_t n = 0;
    memset(in + n, 'A', big);
    n += big;
    memcpy(in + n, "\nabc\n", 5);
    n += 5;
    memset(in + n, 'b', mid - 1);
    n += mid - 1;
    memcpy(in + n, "1\n", 2);
    n += 2;
    write_file("huge.txt", in, n);
    free(in);
    assert_int_equal(g2p("h", "pronounce --model run/best.safetensors < huge.txt"), 2);
    size_t elen;
    char *err = slurp("h.err", &elen);
    assert_non_null(err);
    if (elen > 600)
        fail_msg("%zu bytes of messages: %.300s...", elen, err);
    free(err);
    assert_file_contains("h.err", "(1048576 bytes): too long");
    assert_file_contains("h.err", "(100000 bytes): character '1'");
    char head[96] = "word '"; /* the first 64 bytes of the word, then "..." */
    memset(head + 6, 'A', 64);
    strcpy(head + 70, "...' (1048576");
    assert_file_contains("h.err", head);
    assert_file_contains("h.out", "ABC  ");
}

/* The first 40 wrong words of an errors.txt (WORD  HYPOTHESIS  # REFERENCES), pronounced
 * by `pronounce --no-lexicon ARGS` (the library's decoder, output under tag): each gets the
 * hypothesis eval's decoder found for it. Returns the number of words compared. */
static size_t errors_through_pronounce(const char *errors, const char *tag, const char *args)
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

/* eval writes eval.json and errors.txt; greedy and beam are both reported; --words
 * validation scores the validation words instead of the test words. */
static void g2p_eval_files(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 4 --eval-every 4 "
                              "--out run"), 0);
    assert_int_equal(g2p("e", "eval --model run/best.safetensors --beam 2 --out ev"), 0);
    assert_true(file_exists("ev/errors.txt"));
    /* every word of a dictionary (--dict: words of all three splits), by the committed
     * model (whose answers differ from word to word): each wrong word with its own
     * hypothesis (they were paired with other words' hypotheses) */
    char *all = slurp(MHA_SOURCE_DIR "/data/cmudict.dict", NULL);
    assert_non_null(all);
    char *sparse = malloc(strlen(all) + 1);
    assert_non_null(sparse);
    size_t line = 0, len = 0;
    for (char *p = all, *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1)
        if (line++ % 400 == 0) { /* 335 of CMUdict's lines */
            memcpy(sparse + len, p, (size_t)(nl - p + 1));
            len += (size_t)(nl - p + 1);
        }
    write_file("sparse.dict", sparse, len);
    free(sparse);
    free(all);
    assert_int_equal(g2p("ed", "eval --model " MHA_SOURCE_DIR "/models/g2p-cmudict.safetensors "
                               "--dict sparse.dict --out evd"), 0);
    assert_true(errors_through_pronounce("evd/errors.txt", "pd", "--model " MHA_SOURCE_DIR
                                         "/models/g2p-cmudict.safetensors") >= 30);
    char *js = slurp("ev/eval.json", NULL);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "greedy"), "wer"));
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "beam"), "wer"));
    cJSON_Delete(root);
    free(js);
    /* --words validation scores the validation words: all of them, with the numbers the
     * training run's own (greedy, every word) evaluation found for the same weights */
    assert_int_equal(g2p("v", "train --data d.dict --enc-layers 1 --dec-layers 1 --dim 16 "
                              "--heads 2 --mlp-dim 32 --batch 16 --threads 1 --steps 4 "
                              "--eval-every 4 --precision fp32 --out vr"), 0);
    size_t n_valid = 0;
    char *t = slurp("v.out", NULL);
    assert_non_null(t);
    const char *p = strstr(t, " training, ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, " training, %zu validation", &n_valid), 1);
    free(t);
    assert_int_equal(g2p("ev", "eval --model vr/best.safetensors --words validation "
                               "--out evv"), 0);
    assert_file_contains("ev.out", "validation words");
    js = slurp("evv/eval.json", NULL);
    assert_non_null(js);
    root = cJSON_Parse(js);
    assert_string_equal(cJSON_GetObjectItem(root, "words")->valuestring, "validation");
    const cJSON *g = cJSON_GetObjectItem(root, "greedy");
    assert_float_equal(cJSON_GetObjectItem(g, "words")->valuedouble, (double)n_valid, 0);
    assert_true(cJSON_GetObjectItem(g, "wer")->valuedouble ==
                summary_number("vr/summary.json", "best_val_wer"));
    cJSON_Delete(root);
    free(js);
    assert_int_equal(g2p("bad", "eval --model vr/best.safetensors --words validation "
                                "--dict d.dict"), 2);
    assert_file_contains("bad.err", "does not go with --dict");
}

/* Bad input: exit 2 with a message that names the file (or, for a model that cannot fit,
 * the bytes it needs). */
static void g2p_bad_input(void **state)
{
    (void)state;
    write_file("empty.dict", "", 0);
    assert_int_equal(g2p("e", "train --data empty.dict " TINY " --steps 2 --out r1"), 2);
    assert_file_contains("e.err", "empty.dict");
    write_file("junk.dict", "A.  EY1\n{X  Y\n", 14);
    assert_int_equal(g2p("j", "train --data junk.dict " TINY " --steps 2 --out r2"), 2);
    assert_file_contains("j.err", "junk.dict");
    assert_int_equal(g2p("x", "train --dim 18 --heads 4 --steps 2 --out r3"), 2);
    assert_file_contains("x.err", "--heads");
    write_file("notmodel.safetensors", "garbage", 7);
    assert_int_equal(g2p("m", "pronounce --model notmodel.safetensors hello"), 2);
    assert_file_contains("m.err", "notmodel.safetensors");
    assert_int_equal(g2p("u", "train --stepz 3"), 2);
    /* a model that cannot fit: refused before it is allocated, naming the bytes */
    write_small_dict("d.dict", 300);
    assert_int_equal(g2p("big", "train --data d.dict --dim 4096 --enc-layers 24 --dec-layers 24 "
                                "--heads 8 --steps 2 --out r4"), 2);
    assert_file_contains("big.err", "needs at least");
    assert_file_contains("big.err", "use a smaller --dim or fewer layers");
    assert_false(file_exists("r4/run.lock"));
}

/* The numbers of eval.json's `section` (greedy or beam) at path are the claimed ones
 * (`want`, from a model's summary): the same words, WER within 3 words, PER within 0.1%. */
static void check_claim(const cJSON *want, const char *path, const char *section,
                        double words)
{
    assert_non_null(want);
    char *ev = slurp(path, NULL);
    assert_non_null(ev);
    cJSON *er = cJSON_Parse(ev);
    assert_non_null(er);
    const cJSON *g = cJSON_GetObjectItem(er, section);
    assert_non_null(g);
    assert_float_equal(cJSON_GetObjectItem(g, "words")->valuedouble, words, 0);
    assert_float_equal(cJSON_GetObjectItem(want, "words")->valuedouble, words, 0);
    assert_true(fabs(cJSON_GetObjectItem(g, "wer")->valuedouble -
                     cJSON_GetObjectItem(want, "wer")->valuedouble) <= 3.0 / words + 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(g, "per")->valuedouble -
                     cJSON_GetObjectItem(want, "per")->valuedouble) <= 0.001);
    cJSON_Delete(er);
    free(ev);
}

/* pronounce and eval estimate what decoding allocates and refuse (exit 2, naming the
 * bytes, nothing on stdout) where the process may not use that much: here under an
 * address-space limit (ulimit -v) that leaves less than the estimate once what the
 * process has mapped and what its libraries map on first use are counted — the limit
 * train's estimate is checked against. The committed model; nothing is decoded. */
static void g2p_decode_memory_refused(void **state)
{
    (void)state;
    const char *model = MHA_SOURCE_DIR "/models/g2p-cmudict.safetensors";
    if (!file_exists(model)) {
        print_message("[  SKIPPED ] no committed model at %s\n", model);
        skip();
    }
#if defined(__SANITIZE_ADDRESS__)
    print_message("[  SKIPPED ] no program of an AddressSanitizer build starts under ulimit -v\n");
    skip();
#endif
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "-c 'ulimit -v 520000 && exec \"%s\" pronounce --model %s "
             "hello'", MHA_G2P_EXE, model);
    assert_int_equal(run_prog_limited("/bin/sh", "p", cmd, 60, 0), 2);
    assert_file_contains("p.err", "pronounce needs about");
    assert_file_contains("p.err", "MiB of memory");
    char *out = slurp("p.out", NULL);
    assert_non_null(out);
    assert_string_equal(out, "");
    free(out);
    snprintf(cmd, sizeof cmd, "-c 'ulimit -v 520000 && exec \"%s\" eval --model %s --out e'",
             MHA_G2P_EXE, model);
    assert_int_equal(run_prog_limited("/bin/sh", "e", cmd, 60, 0), 2);
    assert_file_contains("e.err", "eval needs about");
    assert_false(file_exists("e/eval.json"));
}

/* The committed model's summary claims its test-set numbers; eval reproduces them, and
 * gives the very same numbers at 1 and at 2 threads (decoding is deterministic and no sum
 * depends on the thread count). Against the claim the bound is 3 words of 12,362: the
 * claim was measured with one CPU's GEMM kernels (AVX2), and another CPU's (AVX-512)
 * sums products in another order — logits differ by ~1e-6 relative — which can flip a
 * greedy choice between two phones that are that close, in one word of many thousands. */
static void g2p_committed_model_reproduces(void **state)
{
    (void)state;
    const char *model = MHA_SOURCE_DIR "/models/g2p-cmudict.safetensors";
    const char *summary = MHA_SOURCE_DIR "/models/g2p-cmudict.json";
    if (!file_exists(model) || !file_exists(summary)) {
        print_message("[  SKIPPED ] no committed model at %s\n", model);
        skip();
    }
#if defined(__SANITIZE_ADDRESS__)
    /* 2 × 12,362 words through an instrumented decoder take minutes; the uninstrumented
     * build of the same suite (the README's test command, run first by CI) checks it */
    print_message("[  SKIPPED ] the committed-model check runs in the build without "
                  "sanitizers\n");
    skip();
#endif
    if (getenv("MHA_TEST_UNDER_VALGRIND")) { /* CI's valgrind pass: the programs this check
                                                runs are not instrumented; the passes
                                                before it ran the same check */
        print_message("[  SKIPPED ] the committed-model check does not run under valgrind\n");
        skip();
    }
    char *js = slurp(summary, NULL);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    const cJSON *test = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "test"), "greedy");
    assert_non_null(test);
    const double want_wer = cJSON_GetObjectItem(test, "wer")->valuedouble;
    const double want_per = cJSON_GetObjectItem(test, "per")->valuedouble;
    double wer1 = -1, per1 = -1;
    for (int threads = 1; threads <= 2; threads++) {
        char args[1024], path[64];
        snprintf(args, sizeof args, "eval --model %s --threads %d --out ev%d", model, threads,
                 threads);
        assert_int_equal(g2p("e", args), 0);
        snprintf(path, sizeof path, "ev%d/eval.json", threads);
        char *ev = slurp(path, NULL);
        assert_non_null(ev);
        cJSON *er = cJSON_Parse(ev);
        const cJSON *g = cJSON_GetObjectItem(er, "greedy");
        const double wer = cJSON_GetObjectItem(g, "wer")->valuedouble;
        const double per = cJSON_GetObjectItem(g, "per")->valuedouble;
        const double words = cJSON_GetObjectItem(g, "words")->valuedouble;
        assert_float_equal(words, 12362, 0);
        assert_true(fabs(wer - want_wer) <= 3.0 / words + 1e-12);
        assert_true(fabs(per - want_per) <= 0.001);
        if (threads == 1) {
            wer1 = wer;
            per1 = per;
        } else { /* the same bits at any thread count */
            assert_true(wer == wer1);
            assert_true(per == per1);
        }
        cJSON_Delete(er);
        free(ev);
    }
    cJSON_Delete(root);
    free(js);
    /* the committed ensemble (the model with the others its file lists): its claimed greedy
     * numbers, decoded with all of them as one */
    const char *ens = MHA_SOURCE_DIR "/models/g2p-cmudict-ensemble.json";
    if (!file_exists(ens))
        return;
    js = slurp(ens, NULL);
    assert_non_null(js);
    root = cJSON_Parse(js);
    assert_non_null(root);
    const cJSON *members = cJSON_GetObjectItem(root, "models");
    assert_true(cJSON_GetArraySize(members) >= 2);
    assert_string_equal(cJSON_GetArrayItem(members, 0)->valuestring, "g2p-cmudict.safetensors");
    char second[2048] = "";
    for (int i = 1; i < cJSON_GetArraySize(members); i++) {
        char one[512];
        snprintf(one, sizeof one, MHA_SOURCE_DIR "/models/%s",
                 cJSON_GetArrayItem(members, i)->valuestring);
        assert_true(file_exists(one));
        assert_true(strlen(second) + 1 + strlen(one) < sizeof second);
        if (i > 1)
            strcat(second, ":");
        strcat(second, one);
    }
    char args[4096];
    snprintf(args, sizeof args, "eval --model %s --ensemble %s --threads 2 --out eve", model,
             second);
    assert_int_equal(g2p("ee", args), 0);
    check_claim(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "test"), "greedy"),
                "eve/eval.json", "greedy", 12362);
    /* the right-to-left model (its answers turned around: a wrong turn would score ~100%)
     * and the ensemble's beam rescored by it, on the validation words */
    const char *r2l = MHA_SOURCE_DIR "/models/g2p-cmudict-r2l.safetensors";
    const char *r2l_summary = MHA_SOURCE_DIR "/models/g2p-cmudict-r2l.json";
    const cJSON *resc = cJSON_GetObjectItem(root, "rescored");
    if (file_exists(r2l) && file_exists(r2l_summary)) {
        char *rj = slurp(r2l_summary, NULL);
        assert_non_null(rj);
        cJSON *rr = cJSON_Parse(rj);
        assert_non_null(rr);
        snprintf(args, sizeof args, "eval --model %s --threads 2 --out evr", r2l);
        assert_int_equal(g2p("er", args), 0);
        check_claim(cJSON_GetObjectItem(cJSON_GetObjectItem(rr, "test"), "greedy"),
                    "evr/eval.json", "greedy", 12362);
        cJSON_Delete(rr);
        free(rj);
    }
    if (file_exists(r2l) && resc) {
        const double w = cJSON_GetObjectItem(resc, "weight")->valuedouble;
        const double beam = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "decoding"),
                                                "recommended_beam")->valuedouble;
        const double alpha = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "decoding"),
                                                 "alpha")->valuedouble;
        char key[32];
        snprintf(key, sizeof key, "beam%.0f", beam);
        snprintf(args, sizeof args, "eval --model %s --ensemble %s --rescore %s "
                 "--rescore-weight %.17g --beam %.0f --alpha %.17g --words validation "
                 "--threads 2 --out evx", model, second, r2l, w, beam, alpha);
        assert_int_equal(g2p("ex", args), 0);
        check_claim(cJSON_GetObjectItem(cJSON_GetObjectItem(resc, "validation"), key),
                    "evx/eval.json", "beam", 6152);
    }
    cJSON_Delete(root);
    free(js);
}

/* Load checkpoint path (relative to tmpdir) or fail. */
static mha_st_file *load_st(const char *path)
{
    char full[1024], err[256];
    snprintf(full, sizeof full, "%s/%s", tmpdir, path);
    mha_st_file *f = NULL;
    if (mha_st_load(full, &f, err, sizeof err) != MHA_OK)
        fail_msg("%s: %s", path, err);
    return f;
}

/* Every weight tensor of `mean` (the F32 tensors not named optimizer.*) against a and b:
 * mean = (float)(((double)a + b) / 2), element by element (a == b: the weights of a, bit
 * for bit); the same tensor list in both. Returns the elements compared. */
static size_t check_mean(const char *mean, const char *a, const char *b)
{
    mha_st_file *fm = load_st(mean), *fa = load_st(a), *fb = load_st(b);
    size_t compared = 0, weights = 0;
    for (size_t i = 0; i < mha_st_count(fa); i++) {
        mha_st_tensor ta, tb, tm;
        assert_int_equal(mha_st_tensor_at(fa, i, &ta), MHA_OK);
        if (ta.dtype != MHA_ST_F32 || strncmp(ta.name, "optimizer.", 10) == 0)
            continue;
        weights++;
        int found_b = 0, found_m = 0;
        for (size_t j = 0; j < mha_st_count(fb); j++)
            if (strcmp(mha_st_name(fb, j), ta.name) == 0) {
                assert_int_equal(mha_st_tensor_at(fb, j, &tb), MHA_OK);
                found_b = 1;
            }
        for (size_t j = 0; j < mha_st_count(fm); j++)
            if (strcmp(mha_st_name(fm, j), ta.name) == 0) {
                assert_int_equal(mha_st_tensor_at(fm, j, &tm), MHA_OK);
                found_m = 1;
            }
        if (!found_b || !found_m)
            fail_msg("%s missing from %s", ta.name, found_b ? mean : b);
        size_t n = 1;
        for (size_t d = 0; d < ta.ndim; d++) {
            assert_int_equal(tm.shape[d], ta.shape[d]);
            assert_int_equal(tb.shape[d], ta.shape[d]);
            n *= ta.shape[d];
        }
        assert_int_equal(tm.ndim, ta.ndim);
        assert_int_equal(tm.dtype, MHA_ST_F32);
        const float *x = ta.data, *y = tb.data, *z = tm.data;
        for (size_t e = 0; e < n; e++, compared++) {
            const float want = (float)(((double)x[e] + (double)y[e]) / 2);
            if (memcmp(&want, &z[e], sizeof want) != 0)
                fail_msg("%s[%zu]: %.9g, the mean of %.9g and %.9g is %.9g", ta.name, e, z[e],
                         x[e], y[e], want);
        }
    }
    size_t mean_weights = 0; /* and nothing else in the mean: no moments */
    for (size_t j = 0; j < mha_st_count(fm); j++) {
        mha_st_tensor t;
        assert_int_equal(mha_st_tensor_at(fm, j, &t), MHA_OK);
        assert_true(strncmp(t.name, "optimizer.", 10) != 0);
        mean_weights += t.dtype == MHA_ST_F32;
    }
    assert_int_equal(mean_weights, weights);
    mha_st_free(fm);
    mha_st_free(fa);
    mha_st_free(fb);
    return compared;
}

/* average: the mean of identical checkpoints is the checkpoint's weights bit for bit, of
 * two the element-wise mean rounded once (in either order); the result is a model pronounce and eval read, names its sources, and is refused
 * nothing a checkpoint is not. Refused: no files, no --out, an --out that exists (unless
 * --force) or is one of the inputs, a checkpoint of another model size, a file that is not
 * a model; nothing is written then. */
static void g2p_average(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 20 --eval-every 10 "
                              "--stop-after 10 --out a"), 0);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s/a/checkpoint.safetensors' '%s/a10.safetensors'", tmpdir,
             tmpdir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(g2p("a2", "train --resume a/checkpoint.safetensors"), 0);
    assert_int_equal(g2p("m1", "average a10.safetensors a10.safetensors a10.safetensors "
                               "--out m1.safetensors"), 0);
    assert_true(check_mean("m1.safetensors", "a10.safetensors", "a10.safetensors") > 1000);
    assert_int_equal(g2p("m2", "average a10.safetensors a/checkpoint.safetensors "
                               "--out m2.safetensors"), 0);
    assert_file_contains("m2.out", "the mean of 2 checkpoints");
    assert_true(check_mean("m2.safetensors", "a10.safetensors", "a/checkpoint.safetensors") >
                1000);
    assert_int_equal(g2p("m3", "average a/checkpoint.safetensors a10.safetensors "
                               "--out m3.safetensors"), 0);
    check_mean("m3.safetensors", "a/checkpoint.safetensors", "a10.safetensors");
    mha_st_file *f = load_st("m2.safetensors");
    const char *from = mha_st_meta(f, "averaged_from");
    assert_non_null(from);
    assert_non_null(strstr(from, "a10.safetensors"));
    assert_non_null(strstr(from, "\"step\":20"));
    mha_st_free(f);
    assert_int_equal(g2p("p", "pronounce --model m2.safetensors hello"), 0);
    assert_file_contains("p.out", "HELLO ");
    assert_int_equal(g2p("e", "eval --model m2.safetensors --out ev"), 0);
    assert_true(file_exists("ev/eval.json"));
    /* refusals */
    assert_int_equal(g2p("r1", "average --out x.safetensors"), 2);
    assert_file_contains("r1.err", "name the checkpoints");
    assert_int_equal(g2p("r2", "average a10.safetensors"), 2);
    assert_file_contains("r2.err", "--out MODEL is required");
    assert_int_equal(g2p("r3", "average a10.safetensors --out m1.safetensors"), 2);
    assert_file_contains("r3.err", "m1.safetensors exists");
    assert_int_equal(g2p("r4", "average a10.safetensors --out a10.safetensors --force"), 2);
    assert_file_contains("r4.err", "is one of the checkpoints");
    assert_int_equal(g2p("o", "train --data d.dict " TINY " --dim 8 --steps 2 --out o"), 0);
    assert_int_equal(g2p("r5", "average a10.safetensors o/checkpoint.safetensors "
                               "--out x.safetensors"), 2);
    assert_file_contains("r5.err", "o/checkpoint.safetensors");
    assert_file_contains("r5.err", "--dim differs");
    assert_int_equal(g2p("r6", "average a10.safetensors d.dict --out x.safetensors"), 2);
    assert_file_contains("r6.err", "d.dict");
    assert_false(file_exists("x.safetensors"));
    assert_int_equal(g2p("m4", "average a10.safetensors --out m1.safetensors --force"), 0);
    assert_true(check_mean("m1.safetensors", "a10.safetensors", "a10.safetensors") > 1000);
}

/* A model whose arithmetic overflows answers with scores that are not finite: eval refuses
 * to score its garbage (exit 2, naming the first such word, greedy and with a beam) and
 * writes nothing — no eval.json, no errors.txt, no temporary — as pronounce refuses the
 * word (exit 2). */
static void g2p_eval_nonfinite(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 4 --eval-every 4 "
                              "--out run"), 0);
    /* its first LayerNorm's weights (--dim 16 of TINY) at 3e38: finite, far beyond any
     * trained model's, so that its arithmetic overflows; without checksums, as a damaged
     * file that had none */
    float huge[16];
    for (size_t i = 0; i < 16; i++)
        huge[i] = 3e38f;
    rewrite_checkpoint("run/best.safetensors", "huge.safetensors", 1, NULL, NULL,
                       "encoder.0.ln1.weight", huge, sizeof huge);
    assert_int_equal(g2p("e1", "eval --model huge.safetensors --out ev1"), 2);
    assert_int_equal(g2p("e2", "eval --model huge.safetensors --beam 2 --out ev2"), 2);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "e%d.err", i + 1);
        assert_file_contains(name, "the model's scores for it are not finite");
        assert_file_contains(name, "nothing written");
        static const char *const files[] = {"eval.json", "errors.txt", "errors.txt.tmp"};
        for (size_t j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "ev%d/%s", i + 1, files[j]);
            assert_false(file_exists(name));
        }
    }
    assert_int_equal(g2p("p", "pronounce --model huge.safetensors --no-lexicon abc"), 2);
    assert_file_contains("p.err", "the model's scores for it are not finite");
    /* the same checkpoint as it was trained: scored */
    assert_int_equal(g2p("ok", "eval --model run/best.safetensors --out ev3"), 0);
    assert_true(file_exists("ev3/eval.json"));
}

/* --ensemble: a model with itself decodes as the model alone (eval's numbers and wrong
 * words, pronounce's n-best with log-probabilities: the same bytes); two models decode the
 * same whichever is --model (the mean of two is symmetric to the bit); eval.json names the
 * ensemble; a model of other data, an empty name, a missing file and too many models are
 * refused with exit 2 naming the file. */
static void g2p_ensemble(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 30 --eval-every 30 "
                              "--out a"), 0);
    assert_int_equal(g2p("b", "train --data d.dict " TINY " --dim 24 --steps 30 "
                              "--eval-every 30 --seed 7 --out b"), 0);
    assert_int_equal(g2p("e1", "eval --model a/best.safetensors --beam 3 --out e1"), 0);
    assert_int_equal(g2p("e2", "eval --model a/best.safetensors --ensemble a/best.safetensors "
                               "--beam 3 --out e2"), 0);
    char *e1 = slurp("e1/errors.txt", NULL), *e2 = slurp("e2/errors.txt", NULL);
    assert_non_null(e1);
    assert_non_null(e2);
    assert_string_equal(e1, e2);
    free(e1);
    free(e2);
    char *j1 = slurp("e1/eval.json", NULL), *j2 = slurp("e2/eval.json", NULL);
    cJSON *r1 = cJSON_Parse(j1), *r2 = cJSON_Parse(j2);
    assert_non_null(r1);
    assert_non_null(r2);
    static const char *const keys[] = {"wer", "per", "wer_stress", "per_stress", "words"};
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const char *part = pass ? "beam" : "greedy";
            const double v1 = cJSON_GetObjectItem(cJSON_GetObjectItem(r1, part), keys[k])
                                  ->valuedouble;
            const double v2 = cJSON_GetObjectItem(cJSON_GetObjectItem(r2, part), keys[k])
                                  ->valuedouble;
            assert_true(v1 == v2);
        }
    assert_null(cJSON_GetObjectItem(r1, "ensemble"));
    const cJSON *ens = cJSON_GetObjectItem(r2, "ensemble");
    assert_int_equal(cJSON_GetArraySize(ens), 1);
    assert_string_equal(cJSON_GetArrayItem(ens, 0)->valuestring, "a/best.safetensors");
    cJSON_Delete(r1);
    cJSON_Delete(r2);
    free(j1);
    free(j2);

    static const char words[] = "hello world cat phonetic abbreviation";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "pronounce --no-lexicon --model a/best.safetensors --beam 3 --nbest 3 %s",
             words);
    assert_int_equal(g2p("p1", cmd), 0);
    snprintf(cmd, sizeof cmd, "pronounce --no-lexicon --model a/best.safetensors --ensemble "
             "a/best.safetensors --beam 3 --nbest 3 %s", words);
    assert_int_equal(g2p("p2", cmd), 0);
    char *p1 = slurp("p1.out", NULL), *p2 = slurp("p2.out", NULL);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_non_null(strstr(p1, "# logprob"));
    assert_string_equal(p1, p2);
    free(p2);
    snprintf(cmd, sizeof cmd, "pronounce --no-lexicon --model a/best.safetensors --ensemble "
             "b/best.safetensors --beam 3 --nbest 3 %s", words);
    assert_int_equal(g2p("ab", cmd), 0);
    snprintf(cmd, sizeof cmd, "pronounce --no-lexicon --model b/best.safetensors --ensemble "
             "a/best.safetensors --beam 3 --nbest 3 %s", words);
    assert_int_equal(g2p("ba", cmd), 0);
    char *ab = slurp("ab.out", NULL), *ba = slurp("ba.out", NULL);
    assert_non_null(ab);
    assert_non_null(ba);
    assert_string_equal(ab, ba);
    assert_string_not_equal(ab, p1); /* the pair is not model a alone */
    free(ab);
    free(ba);
    free(p1);

    /* refusals */
    write_file("o.tsv", "abc\tx y z\nabd\tx y w\nbcd\ty z w\n", 31);
    assert_int_equal(g2p("o", "train --data o.tsv " TINY " --batch 2 --steps 2 --out o"), 0);
    assert_int_equal(g2p("r1", "pronounce --model a/best.safetensors --ensemble "
                               "o/best.safetensors hello"), 2);
    assert_file_contains("r1.err", "o/best.safetensors");
    assert_file_contains("r1.err", "other symbols");
    assert_int_equal(g2p("r2", "eval --model a/best.safetensors --ensemble "
                               "b/best.safetensors::a/best.safetensors --out r2"), 2);
    assert_file_contains("r2.err", "an empty file name");
    assert_int_equal(g2p("r3", "eval --model a/best.safetensors --ensemble "
                               "missing.safetensors --out r3"), 2);
    assert_file_contains("r3.err", "missing.safetensors");
    char many[1024] = "";
    for (int i = 0; i < 8; i++)
        strcat(many, i ? ":a/best.safetensors" : "a/best.safetensors");
    snprintf(cmd, sizeof cmd, "pronounce --model a/best.safetensors --ensemble %s hello", many);
    assert_int_equal(g2p("r4", cmd), 2);
    assert_file_contains("r4.err", "at most 7 models");
    assert_false(file_exists("r2/eval.json") || file_exists("r3/eval.json"));
}

/* The beam pass's WER in eval.json at path. */
static double beam_wer(const char *path)
{
    char *text = slurp(path, NULL);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "beam"), "wer");
    assert_true(cJSON_IsNumber(w));
    const double v = w->valuedouble;
    cJSON_Delete(root);
    free(text);
    return v;
}

/* A right-to-left model (train --reverse) and n-best rescoring (--rescore):
 * the run says so and stores it (a resume cannot change it; an older checkpoint cannot be
 * resumed as one); it does not mix with left-to-right models in an ensemble (eval and the
 * library); rescoring by the model itself, or by anything with weight 0, ranks as the beam
 * alone (the same words wrong, the same numbers); with weight 1 pronounce (the library)
 * gives eval's (the program's decoder) pronunciation of every word eval got wrong; the
 * refusals. Whether the turned-around answers are right is shown on the committed
 * right-to-left model (g2p_committed_model_reproduces). */
static void g2p_reverse_and_rescore(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    /* --dropout 0.1 (the default until 2026-12-05) keeps these two tiny models the ones
     * this test was written with: with 0.05 their errors files with and without rescoring
     * (by the model itself, or at weight 0) differ — presumably a near-tie among these
     * degenerate models' hypotheses, ranked again with forced decoding's log-probability,
     * which equals the beam's only up to rounding; not yet pinned down */
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 30 --eval-every 30 "
                              "--dropout 0.1 --out a"), 0);
    assert_int_equal(g2p("r", "train --data d.dict " TINY " --steps 30 --eval-every 30 "
                              "--dropout 0.1 --seed 7 --reverse --out r"), 0);
    assert_file_contains("r.out", "right-to-left");
    mha_st_file *f = NULL;
    char err[512] = "", best[512];
    snprintf(best, sizeof best, "%s/r/best.safetensors", tmpdir);
    if (mha_st_load(best, &f, err, sizeof err) != MHA_OK)
        fail_msg("%s", err);
    assert_string_equal(mha_st_meta(f, "reverse"), "1");
    mha_st_free(f);
    assert_int_equal(g2p("rr", "train --resume a/checkpoint.safetensors --steps 40 --reverse"),
                     2);
    assert_file_contains("rr.err", "it was made with --reverse 0");
    /* models/g2p-cmudict-3: the model committed before --reverse existed (no reverse key) */
    assert_int_equal(g2p("ro", "train --resume " MHA_SOURCE_DIR
                               "/models/g2p-cmudict-3.safetensors --reverse --out ro"), 2);
    assert_file_contains("ro.err", "before --reverse existed");
    assert_int_equal(g2p("m1", "eval --model a/best.safetensors --ensemble r/best.safetensors "
                               "--out m1"), 2);
    assert_file_contains("m1.err", "right to left");
    assert_int_equal(g2p("m2", "pronounce --model a/best.safetensors --ensemble "
                               "r/best.safetensors hello"), 2);
    assert_file_contains("m2.err", "right to left");

    assert_int_equal(g2p("e0", "eval --model a/best.safetensors --beam 3 --out e0"), 0);
    assert_int_equal(g2p("e1", "eval --model a/best.safetensors --beam 3 --rescore "
                               "a/best.safetensors --out e1"), 0);
    assert_int_equal(g2p("e2", "eval --model a/best.safetensors --beam 3 --rescore "
                               "r/best.safetensors --rescore-weight 0 --out e2"), 0);
    assert_int_equal(g2p("e3", "eval --model a/best.safetensors --beam 3 --rescore "
                               "r/best.safetensors --rescore-weight 1 --out e3"), 0);
    char *e0 = slurp("e0/errors.txt", NULL);
    assert_non_null(e0);
    for (int i = 1; i <= 2; i++) {
        char path[32];
        snprintf(path, sizeof path, "e%d/errors.txt", i);
        char *e = slurp(path, NULL);
        assert_non_null(e);
        assert_string_equal(e, e0);
        free(e);
        snprintf(path, sizeof path, "e%d/eval.json", i);
        assert_true(beam_wer(path) == beam_wer("e0/eval.json"));
    }
    free(e0);
    assert_file_contains("e3.out", "beam, rescored");
    assert_file_contains("e3/eval.json", "\"rescore\"");
    assert_file_contains("e3/eval.json", "\"rescore_weight\"");
    /* eval's wrong words (their pronunciation by the program's decoder) through pronounce */
    assert_true(errors_through_pronounce("e3/errors.txt", "p3", "--model a/best.safetensors "
                                         "--beam 3 --rescore r/best.safetensors "
                                         "--rescore-weight 1") >= 10);

    /* refusals */
    assert_int_equal(g2p("x1", "eval --model a/best.safetensors --rescore r/best.safetensors "
                               "--out x1"), 2);
    assert_file_contains("x1.err", "--beam 2 or more");
    assert_int_equal(g2p("x2", "pronounce --model a/best.safetensors --rescore "
                               "r/best.safetensors hello"), 2);
    assert_file_contains("x2.err", "--beam 2 or more");
    write_file("o.tsv", "abc\tx y z\nabd\tx y w\nbcd\ty z w\n", 31);
    assert_int_equal(g2p("o", "train --data o.tsv " TINY " --batch 2 --steps 2 --out o"), 0);
    assert_int_equal(g2p("x3", "eval --model a/best.safetensors --beam 2 --rescore "
                               "o/best.safetensors --out x3"), 2);
    assert_file_contains("x3.err", "other symbols");
    assert_int_equal(g2p("x4", "pronounce --model a/best.safetensors --beam 2 --rescore "
                               "o/best.safetensors hello"), 2);
    assert_file_contains("x4.err", "o/best.safetensors");
    assert_int_equal(g2p("x5", "eval --model a/best.safetensors --beam 2 --rescore "
                               "r/best.safetensors:a/best.safetensors --out x5"), 2);
    assert_file_contains("x5.err", "left to right");
    assert_false(file_exists("x1/eval.json") || file_exists("x3/eval.json") ||
                 file_exists("x5/eval.json"));
}

/* train --distill: weight 0 trains the very weights of a run without it; weight 0.5 others,
 * says so in its header and stores both options; a resumed distilled run is the
 * uninterrupted one bit for bit (the teachers' pass repeated, the options from the
 * checkpoint); refused with exit 2 and nothing trained: a teacher of other symbols, of the
 * other direction, a missing file, a weight outside [0, 1], another --distill on --resume. */
static void g2p_train_distill(void **state)
{
    (void)state;
    char why[256];
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("t", "train --data d.dict " TINY " --steps 30 --eval-every 30 "
                              "--seed 5 --out t"), 0);
    assert_int_equal(g2p("p", "train --data d.dict " TINY " --steps 12 --eval-every 6 "
                              "--out p"), 0);
    assert_int_equal(g2p("z", "train --data d.dict " TINY " --steps 12 --eval-every 6 "
                              "--distill t/best.safetensors --distill-weight 0 --out z"), 0);
    assert_true(same_checkpoint_tensors("p/checkpoint.safetensors", "z/checkpoint.safetensors",
                                        why, sizeof why));
    assert_int_equal(g2p("a", "train --data d.dict " TINY " --steps 12 --eval-every 6 "
                              "--distill t/best.safetensors --out a"), 0);
    assert_file_contains("a.out", "distillation from 1 teacher(s) t/best.safetensors, weight 0.5");
    assert_false(same_checkpoint_tensors("p/checkpoint.safetensors", "a/checkpoint.safetensors",
                                         why, sizeof why));
    mha_st_file *f = NULL;
    char err[512] = "", path[512];
    snprintf(path, sizeof path, "%s/a/checkpoint.safetensors", tmpdir);
    if (mha_st_load(path, &f, err, sizeof err) != MHA_OK)
        fail_msg("%s", err);
    assert_string_equal(mha_st_meta(f, "distill"), "t/best.safetensors");
    assert_string_equal(mha_st_meta(f, "distill-weight"), "0.5");
    mha_st_free(f);
    assert_int_equal(g2p("b1", "train --data d.dict " TINY " --steps 12 --eval-every 6 "
                               "--distill t/best.safetensors --stop-after 6 --out b"), 0);
    assert_int_equal(g2p("b2", "train --resume b/checkpoint.safetensors"), 0);
    assert_file_contains("b2.out", "distillation from 1 teacher(s)");
    assert_same_checkpoint("a/checkpoint.safetensors", "b/checkpoint.safetensors");

    /* refusals */
    assert_int_equal(g2p("r", "train --data d.dict " TINY " --steps 4 --reverse --out r"), 0);
    assert_int_equal(g2p("x1", "train --data d.dict " TINY " --steps 4 --distill "
                               "r/best.safetensors --out x1"), 2);
    assert_file_contains("x1.err", "cannot distill from r/best.safetensors: it writes "
                                   "pronunciations right to left");
    write_file("o.tsv", "abc\tx y z\nabd\tx y w\nbcd\ty z w\n", 31);
    assert_int_equal(g2p("o", "train --data o.tsv " TINY " --batch 2 --steps 2 --out o"), 0);
    assert_int_equal(g2p("x2", "train --data d.dict " TINY " --steps 4 --distill "
                               "t/best.safetensors:o/best.safetensors --out x2"), 2);
    assert_file_contains("x2.err", "other symbols");
    assert_int_equal(g2p("x3", "train --data d.dict " TINY " --steps 4 --distill "
                               "nothing.safetensors --out x3"), 2);
    assert_file_contains("x3.err", "nothing.safetensors");
    assert_int_equal(g2p("x4", "train --data d.dict " TINY " --steps 4 --distill "
                               "t/best.safetensors --distill-weight 1.5 --out x4"), 2);
    assert_file_contains("x4.err", "--distill-weight");
    assert_int_equal(g2p("x5", "train --resume b/checkpoint.safetensors --steps 20 "
                               "--distill p/best.safetensors"), 2);
    assert_file_contains("x5.err", "--distill");
    /* refused before --out was made */
    assert_false(file_exists("x1") || file_exists("x2") || file_exists("x3") ||
                 file_exists("x4"));
}

/* --keep-checkpoints K keeps the last K checkpoints as checkpoint-<step>.safetensors, each
 * the very file checkpoint.safetensors was at that step, also across --resume; they are
 * the run's like its other checkpoints: a new run is refused a directory holding only such
 * a file of another run, and --force removes them. */
static void g2p_keep_checkpoints(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("a", "train --data d.dict --enc-layers 1 --dec-layers 1 --dim 16 "
                              "--heads 2 --mlp-dim 32 --batch 16 --threads 1 --eval-words 40 "
                              "--steps 20 --eval-every 10 --ckpt-every 5 --keep-checkpoints 2 "
                              "--precision fp32 --stop-after 10 --out a"), 0);
    assert_true(file_exists("a/checkpoint-5.safetensors"));
    assert_same_file("a/checkpoint-10.safetensors", "a/checkpoint.safetensors");
    assert_int_equal(g2p("a2", "train --resume a/checkpoint.safetensors"), 0);
    assert_false(file_exists("a/checkpoint-5.safetensors"));
    assert_false(file_exists("a/checkpoint-10.safetensors"));
    assert_true(file_exists("a/checkpoint-15.safetensors"));
    assert_same_file("a/checkpoint-20.safetensors", "a/checkpoint.safetensors");
    /* the same steps as a run that never stopped, bit for bit (1 thread) */
    assert_int_equal(g2p("b", "train --data d.dict --enc-layers 1 --dec-layers 1 --dim 16 "
                              "--heads 2 --mlp-dim 32 --batch 16 --threads 1 --eval-words 40 "
                              "--steps 20 --eval-every 10 --ckpt-every 5 --keep-checkpoints 2 "
                              "--precision fp32 --out b"), 0);
    assert_same_checkpoint("a/checkpoint-20.safetensors", "b/checkpoint.safetensors");
    assert_int_equal(g2p("m", "average a/checkpoint-15.safetensors a/checkpoint-20.safetensors "
                              "--out m.safetensors"), 0);
    /* only a kept checkpoint of run a in c: a new run there is refused, --force removes it */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir '%s/c' && cp '%s/a/checkpoint-15.safetensors' '%s/c/'",
             tmpdir, tmpdir, tmpdir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(g2p("c1", "train --data d.dict " TINY " --steps 2 --out c"), 2);
    assert_file_contains("c1.err", "checkpoint-15.safetensors");
    assert_int_equal(g2p("c2", "train --data d.dict " TINY " --steps 2 --out c --force"), 0);
    assert_false(file_exists("c/checkpoint-15.safetensors"));
}

/* A diverging run (lr 1e6: AdamW's decoupled decay alone multiplies the weights by -1e4 a
 * step; no clipping; a checkpoint every step) stops with status 3 and the training loop's
 * message (the same policy as mha-train's and mha-gpt's); the checkpoint written before is
 * intact and finite, and the log holds only whole rows. */
static void g2p_train_nonfinite(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    assert_int_equal(g2p("nf", "train --data d.dict " TINY " --steps 50 --warmup 0 --lr 1e6 "
                               "--min-lr 1e6 --clip 0 --ckpt-every 1 --out nf"), 3);
    assert_file_contains("nf.err", "is non-finite (NaN or inf)");
    assert_file_contains("nf.err", "The last checkpoint (");
    assert_checkpoint_file_finite("nf/checkpoint.safetensors");
    size_t n = 0;
    char *log = slurp("nf/train_log.csv", &n);
    assert_non_null(log);
    assert_true(n > 0 && log[n - 1] == '\n');
    free(log);
}

/* The two-column form trains and decodes too: UTF-8 sources, multi-byte target tokens. */
static void g2p_tsv_form(void **state)
{
    (void)state;
    char *buf = malloc(64 * 1024);
    assert_non_null(buf);
    size_t n = 0;
    static const char *const src[] = {"straße", "café", "naïve", "über", "jalapeño"};
    static const char *const tgt[] = {"shtra-sse", "ka-fay", "nah-eev", "oo-ber", "ha-la-pe-nyo"};
    for (int rep = 0; rep < 200; rep++) /* distinct sources: a number after each */
        for (int i = 0; i < 5; i++)
            n += (size_t)snprintf(buf + n, 64 * 1024 - n, "%s%d\t%s %d\n", src[i], rep, tgt[i],
                                  rep % 10);
    write_file("pairs.tsv", buf, n);
    free(buf);
    assert_int_equal(g2p("t", "train --data pairs.tsv --enc-layers 1 --dec-layers 1 --dim 16 "
                              "--heads 2 --mlp-dim 32 --batch 16 --threads 1 --steps 4 "
                              "--eval-every 4 --precision fp32 --out run"), 0);
    assert_int_equal(g2p("p", "pronounce --model run/best.safetensors café1"), 0);
    assert_file_contains("p.out", "café1  ");
}

/* Entries that no model could hold are refused by train (exit 2, naming the file, the line
 * and the limit), as the reader refuses an over-long line, instead of training a model
 * whose stored positions (src-context 300) every loader refuses; one at the limit trains.
 * A reserved symbol as a token is refused naming the file. (Before: exit 0 and a model that
 * could not be loaded; the reserved-symbol message named only the line.) */
static void g2p_train_position_limits(void **state)
{
    (void)state;
    write_small_dict("d.dict", 1500);
    size_t n;
    char *base = slurp("d.dict", &n);
    assert_non_null(base);
    char *buf = malloc(n + 4096);
    assert_non_null(buf);
    /* a word of 257 letters (line 1505), then of 256 (fits) */
    memcpy(buf, base, n);
    size_t k = n;
    for (int i = 0; i < 257; i++)
        buf[k++] = 'A';
    k += (size_t)sprintf(buf + k, "  EY1\n");
    write_file("long.dict", buf, k);
    assert_int_equal(g2p("a", "train --data long.dict " TINY " --steps 2 --out a"), 2);
    assert_file_contains("a.err", "long.dict:1505:");
    assert_file_contains("a.err", "257 symbols");
    assert_file_contains("a.err", "256 source positions");
    assert_false(file_exists("a/checkpoint.safetensors"));
    k = n;
    for (int i = 0; i < 256; i++)
        buf[k++] = 'A';
    k += (size_t)sprintf(buf + k, "  EY1\n");
    write_file("fits.dict", buf, k);
    assert_int_equal(g2p("b", "train --data fits.dict " TINY " --steps 2 --out b"), 0);
    assert_int_equal(g2p("b2", "pronounce --model b/checkpoint.safetensors HELLO"), 0);
    /* a pronunciation of 256 phones: with <s>, 257 target positions */
    k = n + (size_t)sprintf(buf + n, "LONGWORD ");
    for (int i = 0; i < 256; i++)
        k += (size_t)sprintf(buf + k, " EY1");
    buf[k++] = '\n';
    write_file("longp.dict", buf, k);
    assert_int_equal(g2p("c", "train --data longp.dict " TINY " --steps 2 --out c"), 2);
    assert_file_contains("c.err", "longp.dict:1505:");
    assert_file_contains("c.err", "256 tokens");
    /* a reserved symbol as a token */
    k = n + (size_t)sprintf(buf + n, "WORD  <s> EY1\n");
    write_file("res.dict", buf, k);
    assert_int_equal(g2p("d", "train --data res.dict " TINY " --steps 2 --out d"), 2);
    assert_file_contains("d.err", "res.dict: line 1505: target symbol \"<s>\" is reserved");
    free(buf);
    free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(g2p_train_learns, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_resume_bitwise, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_threads_bitwise, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_resume_finished, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_bf16, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_precision_auto, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_pronounce, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_pronounce_write_error, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_pronounce_huge_word, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_eval_files, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_eval_nonfinite, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_bad_input, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_position_limits, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_tsv_form, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_average, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_ensemble, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_reverse_and_rescore, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_keep_checkpoints, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_distill, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_nonfinite, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_decode_memory_refused, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_committed_model_reproduces, tmpdir_setup,
                                        tmpdir_teardown),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "g2p_train_*": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
