/* Tests of the mha-gpt program (train/gpt/gpt_*.c), run as a child process on tiny models and
 * a 20,000-character slice of Tiny Shakespeare: a short run learns (validation loss far
 * below chance, ln V) and writes every output; a run stopped and resumed equals one never
 * stopped, byte for byte (log and both checkpoints, with dropout); sampling is
 * deterministic for a seed, slides its window past the context, and refuses a prompt
 * character outside the vocabulary; each bad input (empty text, too short for the
 * context, NUL bytes, invalid UTF-8, too many distinct characters, a checkpoint of
 * mha-train or of another model size, truncated checkpoints, bad options) is refused with
 * exit status 2 and a message, leaving an existing checkpoint untouched; a diverging run
 * stops with status 3 and a finite last checkpoint; Ctrl-C stops a run cleanly (exit 130,
 * checkpoint and reports written, resumable), a second signal at once, and stale
 * temporaries of killed saves are cleaned up. */
#include "test_util.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <pty.h>

#include "mha.h"
#include "mha_safetensors.h"
#include "test_prog.h"

#ifndef MHA_GPT_EXE
#error "MHA_GPT_EXE must name the mha-gpt program"
#endif
#ifndef MHA_TRAIN_EXE
#error "MHA_TRAIN_EXE must name the mha-train program"
#endif

/* Run mha-gpt with args in tmpdir; stdout/stderr go to <tag>.out / .err. Returns the
 * exit status (or -1 if it did not exit normally). */
static int gpt(const char *tag, const char *args)
{
    return run_prog(MHA_GPT_EXE, tag, args);
}

/* small.txt: the first 20,000 characters of Tiny Shakespeare (58 distinct). */
static void write_small_text(void)
{
    char *all = slurp(MHA_SOURCE_DIR "/data/tinyshakespeare.txt", NULL);
    assert_non_null(all);
    write_file("small.txt", all, 20000);
    free(all);
}

/* A tiny model: 1 block, width 32, context 16. */
#define TINY "--data small.txt --layers 1 --heads 2 --dim 32 --context 16 --batch 8 " \
             "--eval-batches 4 --threads 1 --sample-chars 40"

/* ---- learning and outputs ------------------------------------------------------------------ */

/* 200 steps of a 2-block model: the validation loss falls from ln V to 1.2 nats below
 * it; every output file is there, the log has one row per step with evaluations at
 * the eval steps, the checkpoint has the config, vocabulary and the state_dict names. */
static void test_gpt_train_learns(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("l", "train --data small.txt --layers 2 --heads 2 --dim 32 "
                              "--context 16 --batch 16 --steps 200 --warmup 10 --lr 1e-2 "
                              "--min-lr 1e-3 --eval-every 100 --eval-batches 8 --threads 1 "
                              "--sample-chars 60 --out l"), 0);
    const double V = summary_number("l/summary.json", "vocab_size");
    const double val = summary_number("l/summary.json", "val_loss");
    assert_int_equal((int)V, 58);
    if (!(val < log(V) - 1.2)) /* chance: ln 58 = 4.06; this run: 2.69 */
        fail_msg("validation loss %.4f is not below ln V - 1.2 = %.4f", val, log(V) - 1.2);
    assert_true(summary_number("l/summary.json", "best_val_loss") <= val);
    assert_int_equal((int)summary_number("l/summary.json", "steps"), 200);
    const char *files[] = {"l/train_log.csv", "l/summary.json", "l/loss.svg",
                           "l/attention_layer0.svg", "l/attention_layer1.svg", "l/sample.txt",
                           "l/checkpoint.safetensors", "l/best.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!file_exists(files[i]))
            fail_msg("%s was not written", files[i]);
    assert_file_contains("l/loss.svg", "validation");
    assert_file_contains("l/attention_layer1.svg", "head 1");
    assert_file_contains("l.out", "validation loss");
    size_t n;
    char *smp = slurp("l/sample.txt", &n);
    assert_non_null(smp);
    assert_int_equal(n, 60); /* bytes mode: one byte per character */
    free(smp);
    char *csv = slurp("l/train_log.csv", &n);
    assert_non_null(csv);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += csv[i] == '\n';
    assert_int_equal(lines, 201);
    assert_non_null(strstr(csv, "step,train_loss,lr,grad_norm,eval_train_loss,eval_val_loss,"
                                "time_s,tokens_per_s\n"));
    /* evaluations at steps 100 and 200 only: row 99 has two empty fields before the time */
    const char *r99 = strstr(csv, "\n99,"), *r100 = strstr(csv, "\n100,");
    assert_non_null(r99);
    assert_non_null(r100);
    double fv[8], prev_time = 0;
    assert_int_equal(sscanf(r99 + 1, "%lf,%lf,%lf,%lf,,,%lf,%lf\n", &fv[0], &fv[1], &fv[2],
                            &fv[3], &fv[6], &fv[7]), 6);
    /* every row: the time since the start grows, and the step's speed is positive */
    for (const char *row = strchr(csv, '\n') + 1; *row; row = strchr(row, '\n') + 1) {
        const char *c = row;
        for (int k = 0; k < 6; k++)
            c = strchr(c, ',') + 1;
        double tm, tok;
        assert_int_equal(sscanf(c, "%lf,%lf", &tm, &tok), 2);
        assert_true(tm >= prev_time);
        assert_true(tok > 0);
        prev_time = tm;
    }
    assert_true(prev_time > 0 && prev_time < 600);
    free(csv);
    /* the progress lines (a pipe: plain lines) show the speed and the MFU */
    assert_file_contains("l.out", " ms/step  MFU ");
    assert_true(summary_number("l/summary.json", "mfu") > 0);

    char path[512], err[256];
    snprintf(path, sizeof path, "%s/l/checkpoint.safetensors", tmpdir);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(mha_st_meta(f, "format"), "mha-gpt/1");
    assert_string_equal(mha_st_meta(f, "layers"), "2");
    assert_string_equal(mha_st_meta(f, "data_mode"), "bytes");
    assert_non_null(mha_st_meta(f, "vocab"));
    assert_int_equal(strncmp(mha_st_meta(f, "vocab"), "bytes:0a20", 10), 0); /* '\n' then ' ' */
    size_t wte[2] = {58, 32}, fc[2] = {128, 32};
    assert_int_equal(mha_st_get(f, "wte.weight", MHA_ST_F32, 2, wte, NULL, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_get(f, "blocks.1.mlp.fc.weight", MHA_ST_F32, 2, fc, NULL, err, sizeof err),
                     MHA_OK);
    assert_int_equal(mha_st_get(f, "optimizer.exp_avg_sq.blocks.0.attn.w_q.weight", MHA_ST_F32, 2, wte,
                                NULL, err, sizeof err), MHA_ESHAPE); /* present, [32, 32] */
    const void *d;
    assert_int_equal(mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    assert_int_equal(*(const uint64_t *)d, 200);
    mha_st_free(f);
}

/* 40 steps straight vs 20 (--stop-after) + --resume 20, one thread, dropout 0.1: the logs,
 * the latest and the best checkpoints and the samples are byte-identical. */
static void test_gpt_train_resume_bitwise(void **state)
{
    (void)state;
    write_small_text();
    const char *common = TINY " --steps 40 --warmup 5 --lr 1e-2 --eval-every 10 "
                              "--ckpt-every 15 --dropout 0.1";
    char args[1024];
    snprintf(args, sizeof args, "train %s --out full", common);
    assert_int_equal(gpt("full", args), 0);
    snprintf(args, sizeof args, "train %s --stop-after 20 --out part", common);
    assert_int_equal(gpt("part", args), 0);
    assert_file_contains("part.out", "stopped after step 20 of 40");
    /* resume with no option but the thread count: the rest comes from the checkpoint */
    if (gpt("res", "train --resume part/checkpoint.safetensors --threads 1 --out part") != 0) {
        char *e = slurp("res.err", NULL);
        fail_msg("resume failed: %s", e ? e : "?");
    }
    assert_file_contains("res.out", "resumed from part/checkpoint.safetensors at step 20");
    assert_same_log("full/train_log.csv", "part/train_log.csv");
    assert_same_checkpoint("full/checkpoint.safetensors", "part/checkpoint.safetensors");
    assert_same_checkpoint("full/best.safetensors", "part/best.safetensors");
    assert_same_file("full/sample.txt", "part/sample.txt");
    double a = summary_number("full/summary.json", "val_loss");
    double b = summary_number("part/summary.json", "val_loss");
    assert_true(memcmp(&a, &b, sizeof a) == 0);
}

/* A run that cannot fit is refused before anything large is allocated (at once, exit 2),
 * naming the bytes and the options that drive them: the parameters for a wide, deep model,
 * the activations for a huge batch of long windows (both far beyond any machine's memory),
 * and the output directory is left alone. */
static void test_gpt_train_memory(void **state)
{
    (void)state;
    write_small_text();
    const time_t t0 = time(NULL);
    assert_int_equal(gpt("wide", "train --data small.txt --dim 4096 --layers 64 --heads 4 "
                                 "--out wide"), 2);
    assert_file_contains("wide.err", "needs at least");
    assert_file_contains("wide.err", "use a smaller --dim or --layers");
    assert_int_equal(gpt("long", "train --data small.txt --batch 65536 --context 1000 "
                                 "--out long"), 2);
    assert_file_contains("long.err", "activations of 65536 windows");
    assert_file_contains("long.err", "use a smaller --batch or --context");
    assert_false(file_exists("wide/run.lock"));
    assert_false(file_exists("long/train_log.csv"));
    assert_true(time(NULL) - t0 < 20); /* refused up front, not after allocating */
}

/* --precision bf16: recorded in the checkpoint; stopped and resumed (the precision coming
 * from the checkpoint) equals the uninterrupted run byte for byte at one thread; the loss
 * is within 0.01 of the float32 run's; resuming in fp32 is allowed. Where the CPU has no
 * bf16 (MHA_DISABLE_BF16 makes this one such a CPU) --precision bf16 is refused with exit
 * 2 naming the CPU feature, from the command line and from a checkpoint. */
static void test_gpt_train_bf16(void **state)
{
    (void)state;
    write_small_text();
    const char *common = TINY " --steps 40 --warmup 5 --lr 1e-2 --eval-every 10 "
                              "--ckpt-every 15 --dropout 0.1";
    char args[1024];
    setenv("MHA_DISABLE_BF16", "1", 1);
    snprintf(args, sizeof args, "train %s --precision bf16 --out no", common);
    const int refused = gpt("no", args);
    unsetenv("MHA_DISABLE_BF16");
    assert_int_equal(refused, 2);
    assert_file_contains("no.err", "--precision bf16 needs a CPU with avx512_bf16");
    assert_false(file_exists("no/checkpoint.safetensors"));
    if (!mha_precision_available(MHA_PRECISION_BF16)) {
        print_message("[  SKIP    ] this CPU has no avx512_bf16: bf16 training not tested here\n");
        skip();
    }
    snprintf(args, sizeof args, "train %s --precision bf16 --out full", common);
    assert_int_equal(gpt("full", args), 0);
    snprintf(args, sizeof args, "train %s --out fp", common);
    assert_int_equal(gpt("fp", args), 0);
    snprintf(args, sizeof args, "train %s --precision bf16 --stop-after 20 --out part", common);
    assert_int_equal(gpt("part", args), 0);
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/part/checkpoint.safetensors", tmpdir);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(mha_st_meta(f, "precision"), "bf16");
    mha_st_free(f);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -r '%s/part' '%s/part32'", tmpdir, tmpdir);
    assert_int_equal(system(cmd), 0);
    setenv("MHA_DISABLE_BF16", "1", 1);
    const int refused_ck = gpt("nock", "train --resume part/checkpoint.safetensors --out part");
    unsetenv("MHA_DISABLE_BF16");
    assert_int_equal(refused_ck, 2);
    assert_file_contains("nock.err", "--precision bf16 (from the checkpoint) needs a CPU");
    assert_int_equal(
        gpt("res", "train --resume part/checkpoint.safetensors --threads 1 --out part"), 0);
    assert_same_log("full/train_log.csv", "part/train_log.csv");
    assert_same_checkpoint("full/checkpoint.safetensors", "part/checkpoint.safetensors");
    assert_same_checkpoint("full/best.safetensors", "part/best.safetensors");
    const double bf = summary_number("full/summary.json", "val_loss");
    const double fp = summary_number("fp/summary.json", "val_loss");
    if (!(fabs(bf - fp) < 0.01))
        fail_msg("bf16 validation loss %.5f is not within 0.01 of float32's %.5f", bf, fp);
    assert_true(bf != fp); /* the products really were rounded */
    /* the same checkpoint continued in float32 */
    assert_int_equal(gpt("res32", "train --resume part32/checkpoint.safetensors --precision fp32 "
                                  "--threads 1 --out part32"), 0);
    snprintf(path, sizeof path, "%s/part32/checkpoint.safetensors", tmpdir);
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(mha_st_meta(f, "precision"), "fp32");
    mha_st_free(f);
}

/* No stale picture: heat maps of layers the new run does not have (or all of them, when
 * the new run keeps no attention weights) are removed from --out (a new run replacing
 * another with --force); the run's own stay. */
static void test_gpt_train_no_stale_heat_maps(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("a", "train " TINY " --steps 3 --warmup 0 --eval-every 3 --out o"), 0);
    write_file("o/attention_layer1.svg", "old", 3);
    write_file("o/attention_layer12.svg", "old", 3);
    write_file("o/attention_layer_notes.svg", "mine", 4); /* not a heat map name: kept */
    assert_int_equal(gpt("b", "train " TINY " --steps 3 --warmup 0 --eval-every 3 --out o "
                              "--force"), 0);
    assert_true(file_exists("o/attention_layer0.svg"));
    assert_false(file_exists("o/attention_layer1.svg"));
    assert_false(file_exists("o/attention_layer12.svg"));
    assert_true(file_exists("o/attention_layer_notes.svg"));
    assert_int_equal(gpt("c", "train " TINY " --steps 3 --warmup 0 --eval-every 3 "
                              "--attention recompute --out o --force"), 0);
    assert_false(file_exists("o/attention_layer0.svg"));
}

/* ---- stopping on a signal ------------------------------------------------------------------- */

/* Start `mha-gpt train TINY --steps 100000 ... --out <out>` in tmpdir as a child process
 * (stdout/stderr to <out>.out/.err) and wait until its log has `rows` rows. */
static pid_t start_long_run(const char *out, size_t rows)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char o[64], e[64];
        snprintf(o, sizeof o, "%s.out", out);
        snprintf(e, sizeof e, "%s.err", out);
        if (chdir(tmpdir) != 0 || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
            _exit(99);
        execl(MHA_GPT_EXE, "mha-gpt", "train", "--data", "small.txt", "--layers", "1",
              "--heads", "2", "--dim", "32", "--context", "16", "--batch", "8",
              "--eval-batches", "4", "--threads", "1", "--sample-chars", "40", "--steps",
              "100000", "--eval-every", "100000", "--ckpt-every", "50", "--out", out,
              (char *)NULL);
        _exit(98);
    }
    char log[128];
    snprintf(log, sizeof log, "%s/train_log.csv", out);
    for (int tries = 0; tries < 2000; tries++) { /* up to 20 s */
        size_t len = 0, lines = 0;
        char *t = slurp(log, &len);
        for (size_t i = 0; t && i < len; i++)
            lines += t[i] == '\n';
        free(t);
        if (lines > rows) /* the header and `rows` rows */
            return pid;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("mha-gpt train did not log %zu rows within 20 s", rows);
    return -1;
}

/* Every line of a CSV log is whole: the file ends with a newline and each line has the
 * header's number of commas. Returns the number of rows. */
static size_t assert_whole_csv(const char *path)
{
    size_t len;
    char *t = slurp(path, &len);
    assert_non_null(t);
    assert_true(len > 0 && t[len - 1] == '\n');
    size_t commas_header = 0, rows = 0;
    char *line = t;
    for (char *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        size_t commas = 0;
        for (char *c = line; c < nl; c++)
            commas += *c == ',';
        if (line == t)
            commas_header = commas;
        else if (commas != commas_header)
            fail_msg("%s: a partial line: %.*s", path, (int)(nl - line), line);
        else
            rows++;
    }
    free(t);
    return rows;
}

/* Ctrl-C (SIGINT) finishes the current step, writes a checkpoint, the log, the summary
 * and the pictures, prints the --resume command and exits with 130; the run then
 * resumes from that checkpoint at the step it stopped. A second signal ends the process
 * at once, still leaving only whole log lines and no partial checkpoint. Temporaries of
 * killed saves whose process is gone are removed by the next run; another live
 * process's are left alone. */
static void test_gpt_train_stops_on_signal(void **state)
{
    (void)state;
    write_small_text();
    pid_t pid = start_long_run("sig", 30);
    assert_int_equal(kill(pid, SIGINT), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    assert_file_contains("sig.out", "(SIGINT); continue with --resume sig/checkpoint.safetensors");
    assert_file_contains("sig.err", "SIGINT: stopping after this step"); /* said at once */
    const size_t rows = assert_whole_csv("sig/train_log.csv");
    assert_true(rows >= 30);
    assert_true(file_exists("sig/summary.json"));
    assert_true(file_exists("sig/loss.svg"));
    mha_st_file *f = NULL;
    char err[256];
    char path[512];
    snprintf(path, sizeof path, "%s/sig/checkpoint.safetensors", tmpdir);
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    const void *step = NULL;
    assert_int_equal(mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &step, err, sizeof err), MHA_OK);
    assert_int_equal(*(const uint64_t *)step, rows);
    mha_st_free(f);

    /* stale temporaries: one of a process that is gone, one of a live process (ours) */
    pid_t gone = fork();
    assert_true(gone >= 0);
    if (gone == 0)
        _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    char dead_tmp[128], live_tmp[128];
    snprintf(dead_tmp, sizeof dead_tmp, "sig/checkpoint.safetensors.tmp.%ld", (long)gone);
    snprintf(live_tmp, sizeof live_tmp, "sig/checkpoint.safetensors.tmp.%ld", (long)getpid());
    write_file(dead_tmp, "x", 1);
    write_file(live_tmp, "x", 1);
    char args[256], expect[128];
    snprintf(args, sizeof args, "train --resume sig/checkpoint.safetensors --stop-after %zu",
             rows + 5);
    assert_int_equal(gpt("res", args), 0);
    snprintf(expect, sizeof expect, "resumed from sig/checkpoint.safetensors at step %zu", rows);
    assert_file_contains("res.out", expect);
    assert_false(file_exists(dead_tmp));
    assert_true(file_exists(live_tmp));
    assert_int_equal(assert_whole_csv("sig/train_log.csv"), rows + 5);

    /* a second signal: the process ends at once (or had already finished its step) */
    pid = start_long_run("sig2", 20);
    kill(pid, SIGINT);
    kill(pid, SIGINT);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 130));
    assert_true(assert_whole_csv("sig2/train_log.csv") >= 20);
    snprintf(path, sizeof path, "%s/sig2/checkpoint.safetensors", tmpdir);
    if (file_exists(path)) { /* a checkpoint, if any, is a whole one */
        assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
        mha_st_free(f);
    }
}

/* Sampling: the same seed gives the same text, another seed another text; the output is
 * the prompt then --chars characters, also past the context (the window slides); a
 * prompt character outside the vocabulary is refused, naming it; output that cannot be
 * written is exit 1. */
static void test_gpt_sample(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("t", "train " TINY " --steps 30 --warmup 3 --lr 1e-2 --eval-every 10 "
                              "--out t"), 0);
    const char *ck = "--checkpoint t/best.safetensors";
    char args[512];
    snprintf(args, sizeof args, "sample %s --prompt 'ROMEO:' --chars 100 --seed 5", ck);
    assert_int_equal(gpt("s1", args), 0);
    assert_int_equal(gpt("s2", args), 0);
    snprintf(args, sizeof args, "sample %s --prompt 'ROMEO:' --chars 100 --seed 6", ck);
    assert_int_equal(gpt("s3", args), 0);
    assert_same_file("s1.out", "s2.out");
    size_t n1, n3;
    char *x = slurp("s1.out", &n1), *y = slurp("s3.out", &n3);
    assert_non_null(x);
    assert_non_null(y);
    /* the prompt, then 100 characters (> context 16), then a newline unless the text
     * ends with one */
    assert_true(n1 == 6 + 100 + 1 || (n1 == 6 + 100 && x[n1 - 1] == '\n'));
    assert_true(x[n1 - 1] == '\n');
    assert_int_equal(strncmp(x, "ROMEO:", 6), 0);
    assert_true(n3 == n1 && memcmp(x, y, n1) != 0);
    free(x);
    free(y);
    /* top-k 1 is greedy: any seed gives the same text; escapes in the prompt */
    snprintf(args, sizeof args, "sample %s --prompt 'A\\nB' --chars 30 --top-k 1 --seed 1", ck);
    assert_int_equal(gpt("g1", args), 0);
    snprintf(args, sizeof args, "sample %s --prompt 'A\\nB' --chars 30 --top-k 1 --seed 2", ck);
    assert_int_equal(gpt("g2", args), 0);
    assert_same_file("g1.out", "g2.out");
    assert_file_contains("g1.out", "A\nB");
    /* outside the vocabulary: '@' does not occur in the slice */
    snprintf(args, sizeof args, "sample %s --prompt 'to @ be'", ck);
    assert_int_equal(gpt("oov", args), 2);
    assert_file_contains("oov.err", "'@'");
    assert_file_contains("oov.err", "--prompt");
    snprintf(args, sizeof args, "sample %s --prompt ''", ck);
    assert_int_equal(gpt("empty", args), 2);
    /* output to a full device: exit 1 with the reason (through a shell of its own: run_prog's
     * own "> full.out" would replace "> /dev/full") */
    snprintf(args, sizeof args, "-c \"'%s' sample %s --prompt 'ROMEO:' --chars 100 "
             "> /dev/full\"", MHA_GPT_EXE, ck);
    assert_int_equal(run_prog("/bin/sh", "full", args), 1);
    assert_file_contains("full.err", "cannot write standard output: No space left on device");
}

/* ---- bad input ------------------------------------------------------------------------------ */

/* Each unusable text is refused with status 2 and a message, before anything is written:
 * an existing checkpoint in --out stays byte for byte. */
static void test_gpt_bad_text(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("base", "train " TINY " --steps 5 --warmup 1 --eval-every 5 --out o"),
                     0);
    size_t n0;
    char *before = slurp("o/checkpoint.safetensors", &n0);
    assert_non_null(before);

    write_file("empty.txt", "", 0);
    char shortt[100];
    memset(shortt, 'a', sizeof shortt); /* validation part: 10 < context + 1 */
    shortt[50] = 'b';
    write_file("short.txt", shortt, sizeof shortt);
    char nul[400];
    for (size_t i = 0; i < sizeof nul; i++)
        nul[i] = (char)('a' + i % 7);
    nul[123] = '\0';
    write_file("nul.txt", nul, sizeof nul);
    char bad8[400];
    for (size_t i = 0; i < sizeof bad8; i++)
        bad8[i] = (char)('a' + i % 5);
    bad8[200] = (char)0xC3; /* a lead byte followed by 'a': invalid UTF-8 */
    write_file("bad8.txt", bad8, sizeof bad8);
    /* 5000 distinct code points U+4E00.., 3 bytes each: more than 4096 characters */
    unsigned char *big = malloc(3 * 5000);
    assert_non_null(big);
    for (unsigned i = 0; i < 5000; i++) {
        unsigned cp = 0x4E00 + i;
        big[3 * i] = (unsigned char)(0xE0 | (cp >> 12));
        big[3 * i + 1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        big[3 * i + 2] = (unsigned char)(0x80 | (cp & 0x3F));
    }
    write_file("big.txt", big, 3 * 5000);
    free(big);

    const char *cases[][3] = {
        {"--data empty.txt", "empty", ""},
        {"--data short.txt", "short", ""},
        {"--data nul.txt", "NUL", ""},
        {"--data bad8.txt --utf8", "UTF-8", ""},
        {"--data big.txt --utf8", "4096", ""},
        {"--data missing.txt", "missing.txt", ""},
        {"--data small.txt --context 4000", "context", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "train --layers 1 --dim 16 --heads 2 --context 16 --batch 4 "
                 "--steps 5 --warmup 1 --threads 1 %s --out o", cases[i][0]);
        int rc = gpt("bad", args);
        char *err = slurp("bad.err", NULL);
        assert_non_null(err);
        if (rc != 2 || strncmp(err, "mha-gpt: ", 9) != 0 || !strstr(err, cases[i][1]))
            fail_msg("'%s': exit %d, expected 2 and a message with \"%s\":\n%s", cases[i][0], rc,
                     cases[i][1], err);
        free(err);
    }
    /* the bytes mode takes the same UTF-8 file as bytes: fine (3 bytes per character) */
    size_t n1;
    char *after = slurp("o/checkpoint.safetensors", &n1);
    assert_non_null(after);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
}

/* Checkpoints that do not fit: mha-train's (refused by sample and by --resume), another
 * model size on --resume (naming the option), truncated files; bad options. All exit 2
 * with a message, nothing damaged. */
static void test_gpt_bad_checkpoints_and_options(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("base", "train " TINY " --steps 5 --warmup 1 --eval-every 5 --out o"),
                     0);
    assert_int_equal(run_prog(MHA_TRAIN_EXE, "mt", "--seq-len 4 --vocab 4 --model-dim 8 "
                                                  "--heads 2 --batch 4 --steps 3 --warmup 1 "
                                                  "--eval-size 10 --out mt"), 0);
    assert_int_equal(gpt("s", "sample --checkpoint mt/checkpoint.safetensors"), 2);
    assert_file_contains("s.err", "mha-train/1");
    assert_int_equal(gpt("r", "train --resume mt/checkpoint.safetensors --out x"), 2);
    assert_file_contains("r.err", "not an mha-gpt/1 checkpoint");
    assert_int_equal(gpt("g", "sample --checkpoint nonexistent.safetensors"), 2);

    size_t n0;
    char *before = slurp("o/checkpoint.safetensors", &n0);
    assert_non_null(before);
    assert_int_equal(gpt("mm", "train --resume o/checkpoint.safetensors --layers 2 --out o"), 2);
    assert_file_contains("mm.err", "--layers 1");
    assert_file_contains("mm.err", "--layers 2");
    assert_int_equal(gpt("mm2", "train --resume o/checkpoint.safetensors --dim 64 --out o"), 2);
    assert_file_contains("mm2.err", "--dim");
    assert_int_equal(gpt("mm3", "train --resume o/checkpoint.safetensors --utf8 --out o"), 2);
    assert_file_contains("mm3.err", "--utf8");
    /* the same model on another text: its vocabulary differs */
    char other[400];
    for (size_t i = 0; i < sizeof other; i++)
        other[i] = (char)('a' + i % 3);
    write_file("other.txt", other, sizeof other);
    assert_int_equal(gpt("voc", "train --resume o/checkpoint.safetensors --data other.txt "
                                "--out o"), 2);
    assert_file_contains("voc.err", "vocabulary");
    /* truncations */
    const size_t cuts[] = {0, 7, 8, 100, n0 / 2, n0 - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file("cut.safetensors", before, cuts[i]);
        int rc = gpt("cut", "sample --checkpoint cut.safetensors --chars 5");
        if (rc != 2)
            fail_msg("truncation to %zu bytes: exit %d, expected 2", cuts[i], rc);
        assert_file_contains("cut.err", "cannot sample from cut.safetensors");
        rc = gpt("cutr", "train --resume cut.safetensors --out o");
        if (rc != 2)
            fail_msg("resume from a truncation to %zu bytes: exit %d, expected 2", cuts[i], rc);
    }
    size_t n1;
    char *after = slurp("o/checkpoint.safetensors", &n1);
    assert_non_null(after);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);

    const char *bad[][2] = {
        {"train --dim 30 --heads 4", "--heads"},  {"train --lr -1", "--lr"},
        {"train --dropout 1", "--dropout"},       {"train --attention foo", "--attention"},
        {"train --frobnicate 1", "--frobnicate"}, {"train --warmup 10 --steps 10", "--warmup"},
        {"train --min-lr 1 --lr 0.1", "--min-lr"}, {"train --layers 0", "--layers"},
        {"train --seed", "--seed"},               {"sample --temperature 0", "--temperature"},
        {"sample --top-k x", "--top-k"},          {"sample --chars -3", "--chars"},
        {"frobnicate", "frobnicate"},             {"", "train or sample"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        /* train runs would write into "never" if they were accepted */
        snprintf(args, sizeof args, "%s%s", bad[i][0],
                 strncmp(bad[i][0], "train", 5) == 0 ? " --out never" : "");
        int rc = gpt("opt", args);
        if (rc != 2)
            fail_msg("'%s': exit status %d, expected 2", bad[i][0], rc);
        assert_file_contains("opt.err", bad[i][1]);
    }
    assert_false(file_exists("never"));

    assert_int_equal(gpt("help", "--help"), 0);
    const char *opts[] = {"--data", "--utf8", "--layers", "--heads", "--dim", "--context",
                          "--batch", "--steps", "--lr", "--min-lr", "--warmup", "--beta2",
                          "--weight-decay", "--decay-all", "--clip", "--dropout", "--seed",
                          "--eval-every", "--eval-batches", "--ckpt-every", "--threads",
                          "--attention", "--out", "--resume", "--stop-after", "--checkpoint",
                          "--prompt", "--chars", "--temperature", "--top-k"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        assert_file_contains("help.out", opts[i]);
    assert_file_contains("help.out", "data/tinyshakespeare.txt"); /* found from anywhere */
    assert_file_contains("help.out", "bytes unless --utf8");
    assert_file_contains("help.out", "default: runs/gpt/best.safetensors");
    assert_file_contains("help.out", "slides");
    assert_int_equal(gpt("help2", "train --help"), 0);
    assert_file_contains("help2.out", "default: 0.99"); /* --beta2 */
}

/* A diverging run (lr 1e6, no clipping) stops with status 3; the checkpoint written
 * before (every step) is intact and finite. */
static void test_gpt_train_nonfinite(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("nf", "train " TINY " --steps 50 --warmup 0 --lr 1e6 --min-lr 1e6 "
                               "--clip 0 --ckpt-every 1 --out nf"), 3);
    assert_file_contains("nf.err", "non-finite");
    assert_checkpoint_file_finite("nf/checkpoint.safetensors");
    /* and it still samples */
    assert_int_equal(gpt("nfs", "sample --checkpoint nf/checkpoint.safetensors --chars 5"), 0);
}

/* Resuming and limits: a finished run resumed as it is exits 0 saying so; a larger
 * --steps continues it (its summary counts the earlier part's time: wall_seconds at
 * least the first part's elapsed_seconds); a --steps below the checkpoint's step, too
 * many threads, an --out that is a file and a FIFO as --resume are refused with exit 2
 * naming the option; a diverging run without a checkpoint does not name one. */
static void test_gpt_train_resume_limits(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("a", "train " TINY " --steps 6 --warmup 1 --eval-every 3 "
                              "--sample-chars 0 --out a"), 0);
    assert_int_equal(gpt("fin", "train --resume a/checkpoint.safetensors"), 0);
    assert_file_contains("fin.out", "finished run (step 6 of --steps 6)");
    assert_int_equal(gpt("less", "train --resume a/checkpoint.safetensors --steps 4"), 2);
    assert_file_contains("less.err", "--steps");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/a/checkpoint.safetensors", tmpdir);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    const char *el = mha_st_meta(f, "elapsed_seconds");
    assert_non_null(el);
    const double first = strtod(el, NULL);
    mha_st_free(f);
    assert_int_equal(gpt("ext", "train --resume a/checkpoint.safetensors --steps 9"), 0);
    assert_file_contains("ext.out", "--steps changed");
    assert_int_equal((int)summary_number("a/summary.json", "steps"), 9);
    assert_true(summary_number("a/summary.json", "wall_seconds") >= first);

    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long max = 4 * (cpus > 0 ? cpus : 1);
    char args[512];
    snprintf(args, sizeof args, "train " TINY " --steps 2 --warmup 1 --threads %ld --out never",
             max < 256 ? max + 1 : 257);
    assert_int_equal(gpt("thr", args), 2);
    assert_file_contains("thr.err", "--threads");
    write_file("afile", "x", 1);
    assert_int_equal(gpt("out", "train " TINY " --steps 2 --warmup 1 --out afile"), 2);
    assert_file_contains("out.err", "--out");
    assert_false(file_exists("never"));
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(gpt("fifo", "train --resume fifo"), 2);
    assert_file_contains("fifo.err", "not a regular file");
    assert_int_equal(gpt("fifo2", "sample --checkpoint fifo"), 2);
    assert_int_equal(gpt("nf0", "train " TINY " --steps 50 --warmup 0 --lr 1e6 --min-lr 1e6 "
                                "--clip 0 --ckpt-every 0 --out nf0"), 3);
    assert_file_contains("nf0.err", "No checkpoint was written");
}


/* ---- the progress display and small frictions ----------------------------------------------- */

/* On a 60-column terminal (a pseudo-terminal) the live line is cut to 59 columns, never
 * wrapped, and each evaluation leaves a line of its own (steps 10, 20, 30); the final
 * summary names the step its losses come from. (Before: ~90 columns, so every update
 * wrapped into a new line, and each evaluation's line was overwritten.) Where no
 * pseudo-terminal can be opened the test is skipped, saying why (it failed). */
static void test_gpt_train_progress_on_terminal(void **state)
{
    (void)state;
    write_small_text();
    struct winsize ws = {.ws_row = 24, .ws_col = 60};
    int master = -1;
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0) { /* no terminal to test on (a container without /dev/pts): say so, skip */
        printf("[  SKIPPED ] no pseudo-terminal: forkpty: %s\n", strerror(errno));
        fflush(stdout);
        skip();
    }
    if (pid == 0) {
        if (chdir(tmpdir) != 0)
            _exit(97);
        alarm(120); /* bounded: kept across exec */
        execl(MHA_GPT_EXE, "mha-gpt", "train", "--data", "small.txt", "--layers", "1",
              "--heads", "2", "--dim", "32", "--context", "16", "--batch", "8",
              "--eval-batches", "4", "--threads", "1", "--sample-chars", "0", "--steps", "30",
              "--warmup", "2", "--eval-every", "10", "--out", "tty", (char *)NULL);
        _exit(98);
    }
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap + 1);
    assert_non_null(out);
    for (;;) { /* until the child closes the terminal (EIO on Linux) */
        ssize_t r = read(master, out + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        assert_true(len < cap);
    }
    out[len] = '\0';
    close(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* every segment between \r and \n, without the clear-line sequence, fits 59 columns */
    size_t evals = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        const size_t ll = strlen(line);
        if (ll > 0 && line[ll - 1] == '\r')
            line[ll - 1] = '\0'; /* the terminal's newline is \r\n */
        char *last = line;
        for (char *seg = line; seg; seg = strchr(seg, '\r') ? strchr(seg, '\r') + 1 : NULL) {
            size_t cols = 0;
            for (char *c = seg; *c && *c != '\r'; c++) {
                if (*c == '\033') { /* ESC [ K */
                    c += 2;
                    continue;
                }
                cols += ((unsigned char)*c & 0xC0) != 0x80;
            }
            if (cols > 59 && strncmp(seg, "  step", 6) == 0)
                fail_msg("a progress update of %zu columns on a 60-column terminal: %s", cols,
                         seg);
            last = seg;
        }
        /* the line that stays is its last update: one per evaluation */
        for (int s = 10; s <= 30; s += 10) {
            char key[32];
            snprintf(key, sizeof key, "  step %d/30  loss", s);
            evals += strncmp(last, key, strlen(key)) == 0;
        }
    }
    free(out);
    assert_int_equal(evals, 3);
    assert_int_equal((int)summary_number("tty/summary.json", "eval_step"), 30);
}

/* 1 if the file at path (in tmpdir) holds a carriage return (a line rewritten in place). */
static int file_has_cr(const char *path)
{
    char *s = slurp(path, NULL);
    assert_non_null(s);
    const int cr = strchr(s, '\r') != NULL;
    free(s);
    return cr;
}

/* Small frictions: a short run scales the default warm-up down and says so; --progress live
 * rewrites a line even into a pipe (plain lines are the default there); an unknown
 * option close to a known one is answered with "did you mean"; an unknown escape in the
 * prompt is named; byte mode on a UTF-8 text hints at --utf8; a stopped run's summary
 * names the step its losses were evaluated at. */
static void test_gpt_frictions(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("w", "train " TINY " --steps 20 --eval-every 10 --out w"), 0);
    assert_file_contains("w.err", "using --warmup 2");
    assert_false(file_has_cr("w.out")); /* a pipe: plain lines */
    /* --progress live: the live line even into a pipe (plain is the default there) */
    assert_int_equal(gpt("lv", "train " TINY " --steps 20 --eval-every 10 --progress live "
                               "--out lv"), 0);
    assert_file_contains("lv.out", "\r  step 10/20");
    assert_int_equal(gpt("t", "train --stepz 5"), 2);
    assert_file_contains("t.err", "did you mean --steps?");
    assert_int_equal(gpt("t2", "train --learning-rate 1"), 2);
    assert_file_contains("t2.err", "unknown option '--learning-rate'");
    /* an unknown escape in the prompt is named as such (not as a character outside the
     * vocabulary) */
    assert_int_equal(gpt("q", "sample --prompt 'A\\qB'"), 2);
    assert_file_contains("q.err", "unknown escape");
    /* byte mode on a text with UTF-8 characters: a hint to use --utf8 */
    char *txt = slurp("small.txt", NULL);
    assert_non_null(txt);
    for (size_t i = 0; i + 2 < 20000; i += 500)
        memcpy(txt + i, "\xc3\xa9", 2); /* é */
    write_file("utf.txt", txt, 20000);
    free(txt);
    assert_int_equal(gpt("u", "train --data utf.txt --layers 1 --heads 2 --dim 32 --context 16 "
                              "--batch 8 --eval-batches 4 --threads 1 --sample-chars 0 "
                              "--steps 2 --warmup 0 --out u"), 0);
    assert_file_contains("u.err", "add --utf8");
    assert_int_equal(gpt("s", "train " TINY " --steps 40 --warmup 2 --eval-every 10 "
                              "--stop-after 25 --out s"), 0);
    assert_file_contains("s.out", "evaluated at step 20");
    assert_int_equal((int)summary_number("s/summary.json", "eval_step"), 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gpt_train_learns, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_resume_bitwise, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_bf16, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_memory, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_sample, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_bad_text, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_bad_checkpoints_and_options, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_nonfinite, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_resume_limits, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_stops_on_signal, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_no_stale_heat_maps, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_train_progress_on_terminal, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gpt_frictions, tmpdir_setup, tmpdir_teardown),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "*on_terminal": those tests alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
