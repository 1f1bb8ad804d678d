/*
 * mha-g2p train as a user runs it: a tiny model trained on a small dictionary learns, a
 * resumed run is the uninterrupted one bit for bit (1 thread, and at 2 threads where the
 * products split), bf16 and --precision auto, bad input is refused with exit 2 and a
 * message naming the file, position limits, the TSV form, --keep-checkpoints, --distill
 * learns from teachers (weight 0 is a run without it; refusals), a diverging run stops.
 * Using a model: tests/test_g2p_use.c; several models: tests/test_g2p_models.c.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "mha_safetensors.h"
#include "test_g2p_prog.h"
#include "test_prog.h"
#include "test_util.h"

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
        cmocka_unit_test_setup_teardown(g2p_train_resume_finished, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_bf16, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_precision_auto, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_bad_input, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_position_limits, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_tsv_form, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_keep_checkpoints, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_distill, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_train_nonfinite, tmpdir_setup, tmpdir_teardown),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "g2p_train_*": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
