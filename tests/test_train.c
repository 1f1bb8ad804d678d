/* Tests of the mha-train program (train/toy/toy_main.c), run as a child process on tiny
 * configurations: resume from a checkpoint reproduces an uninterrupted run bit for bit
 * (CSV log and summary numbers, with dropout and Adam/SGD state), the checkpoint holds
 * the expected tensors and round-trips into a model that gives the logged held-out
 * loss exactly, mismatched / truncated / corrupted checkpoints and bad options are
 * refused with exit status 2 and a message naming the problem, and a diverging run
 * stops with status 3 leaving a loadable checkpoint. A property test resumes from a few
 * hundred deterministic mutants of two real checkpoints (byte and bit flips, truncations,
 * size-field changes, and valid safetensors files with a tensor reshaped, retyped,
 * removed or added, a metadata value changed, a state value or weight changed): each is
 * refused with status 2 or, if still a valid checkpoint, runs to completion. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "crc32c.h"
#include "mha.h"
#include "mha_optim.h"
#include "mha_safetensors.h"
#include "test_prog.h"
#include "toy_model.h"
#include "toy_tasks.h"

#ifndef MHA_TRAIN_EXE
#error "MHA_TRAIN_EXE must name the mha-train program"
#endif

/* Run mha-train with args (a shell word list) in tmpdir; stdout/stderr go to
 * <tmpdir>/<tag>.out and .err. Returns the exit status (or −1 if it did not exit
 * normally). */
static int run(const char *tag, const char *args)
{
    return run_prog(MHA_TRAIN_EXE, tag, args);
}

/* Interrupt (--stop-after 13) and resume (no other option: the config, --threads
 * included, comes from the checkpoint, and the outputs go into its directory), then compare with a run never stopped: the CSV logs (every loss, lr,
 * gradient norm and held-out accuracy, printed with 17 digits), the summary numbers and
 * the final checkpoints must be identical. Three configs: 2-layer reverse with dropout
 * and AdamW, 2-layer lookup (cross-attention) with dropout and SGD momentum, causal copy
 * with Adam. */
static void test_train_resume_bitwise(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"adamw", "--task reverse --seq-len 6 --vocab 5 --layers 2 --dim 16 --heads 2 "
                  "--dropout 0.1 --batch 8 --steps 30 --warmup 5 --optimizer adamw --lr 0.01 "
                  "--eval-every 10 --eval-size 40 --ckpt-every 7 --threads 1 --seed 5"},
        {"sgd", "--task lookup --seq-len 3 --vocab 8 --pairs 5 --layers 2 --dim 8 "
                "--heads 2 --dropout 0.2 --batch 4 --steps 30 --warmup 3 --optimizer sgd "
                "--momentum 0.9 --lr 0.05 --eval-every 10 --eval-size 30 --threads 1"},
        {"copy", "--task copy --seq-len 4 --vocab 4 --layers 1 --dim 8 --heads 2 "
                 "--batch 4 --steps 30 --warmup 0 --optimizer adam --lr 0.01 --eval-every 10 "
                 "--eval-size 30 --threads 1"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *name = cases[c][0], *common = cases[c][1];
        char args[2048], full[64], part[64], res[64];
        snprintf(full, sizeof full, "%s_full", name);
        snprintf(part, sizeof part, "%s_part", name);
        snprintf(res, sizeof res, "%s_resume", name);
        snprintf(args, sizeof args, "%s --out '%s/%s'", common, tmpdir, full);
        assert_int_equal(run(full, args), 0);
        snprintf(args, sizeof args, "%s --stop-after 13 --out '%s/%s'", common, tmpdir, part);
        assert_int_equal(run(part, args), 0);
        char rel[128];
        snprintf(rel, sizeof rel, "%s.out", part);
        assert_file_contains(rel, "stopped after step 13 of 30");
        /* resume with no other option: the config (threads included) comes from the
         * checkpoint, and the outputs go beside it */
        snprintf(args, sizeof args, "--resume '%s/%s/checkpoint.safetensors'", tmpdir, part);
        if (run(res, args) != 0) {
            snprintf(rel, sizeof rel, "%s.err", res);
            char *err = slurp(rel, NULL);
            fail_msg("resume failed: %s", err ? err : "?");
        }
        assert_false(file_exists("runs")); /* not the default runs/<task> */
        size_t n1, n2;
        snprintf(rel, sizeof rel, "%s/train_log.csv", full);
        char *csv1 = slurp(rel, &n1);
        snprintf(rel, sizeof rel, "%s/train_log.csv", part);
        char *csv2 = slurp(rel, &n2);
        assert_non_null(csv1);
        assert_non_null(csv2);
        snprintf(rel, sizeof rel, "%s/train_log.csv", full);
        char rel2[512];
        snprintf(rel2, sizeof rel2, "%s/train_log.csv", part);
        assert_same_log(rel, rel2); /* every column but the clock's */
        /* header, the evaluation before training (step 0), 30 steps */
        assert_non_null(strstr(csv1, "\n0,,,,"));
        size_t lines = 0;
        for (size_t i = 0; i < n1; i++)
            lines += csv1[i] == '\n';
        assert_int_equal(lines, 32);
        free(csv1);
        free(csv2);
        char s1[128], s2[128];
        snprintf(s1, sizeof s1, "%s/summary.json", full);
        snprintf(s2, sizeof s2, "%s/summary.json", part);
        const char *keys[] = {"token_accuracy", "sequence_accuracy", "eval_loss",
                              "final_train_loss", "steps"};
        for (size_t k = 0; k < 5; k++) {
            double x = summary_number(s1, keys[k]), y = summary_number(s2, keys[k]);
            if (memcmp(&x, &y, sizeof x) != 0)
                fail_msg("%s: summary %s differs: %.17g vs %.17g", name, keys[k], x, y);
        }
        /* the final checkpoints are identical too (but for the wall time so far) */
        snprintf(s1, sizeof s1, "%s/checkpoint.safetensors", full);
        snprintf(s2, sizeof s2, "%s/checkpoint.safetensors", part);
        assert_same_checkpoint(s1, s2);
    }
}

/* The checkpoint has the seed's state_dict names under a per-layer prefix, the model's
 * own tensors, the optimizer state and the config; loading its weights into a fresh
 * model gives exactly the held-out loss the program reported. */
static void test_train_checkpoint_round_trip(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args,
             "--task reverse --seq-len 5 --vocab 6 --layers 2 --dim 12 --heads 3 "
             "--batch 8 --steps 20 --warmup 2 --eval-size 60 --eval-every 10 --threads 1 "
             "--seed 11 --out '%s/rt'", tmpdir);
    assert_int_equal(run("rt", args), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/rt/checkpoint.safetensors", tmpdir);
    mha_st_file *f = NULL;
    char err[256];
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(mha_st_meta(f, "layers"), "2");
    assert_string_equal(mha_st_meta(f, "task"), "reverse");
    assert_string_equal(mha_st_meta(f, "optimizer"), "adam");

    task_spec t = {.kind = TASK_REVERSE, .n = 5, .vocab = 6};
    tm_config cfg = {.model_dim = 12, .num_heads = 3, .layers = 2, .seed = 999, .threads = 1};
    assert_int_equal(task_model_shape(&t, &cfg), MHA_OK);
    tm_model *m = NULL;
    assert_int_equal(tm_create(&m, &cfg, 250), MHA_OK);
    /* own tensors by name */
    float *own = tm_params(m, NULL);
    for (size_t k = 0; k < TM_NUM_OWN_TENSORS; k++) {
        mha_tensor_info ti;
        assert_int_equal(tm_tensor_info_at(&cfg, k, &ti), MHA_OK);
        const void *d = NULL;
        if (ti.numel == 0) { /* no value embedding without a context */
            assert_int_equal(mha_st_get(f, ti.name, MHA_ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                             MHA_ENOTFOUND);
            continue;
        }
        assert_int_equal(mha_st_get(f, ti.name, MHA_ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                         MHA_OK);
        memcpy(own + ti.offset, d, ti.numel * sizeof(float));
        char mname[96];
        snprintf(mname, sizeof mname, "optimizer.exp_avg_sq.%s", ti.name);
        assert_int_equal(mha_st_get(f, mname, MHA_ST_F32, ti.ndim, ti.shape, NULL, err, sizeof err),
                         MHA_OK);
    }
    /* attention layers: layers.<l>.w_q.weight ... with the seed's names and shapes */
    for (size_t l = 0; l < 2; l++) {
        float *p = mha_params(tm_layer(m, l), NULL);
        for (size_t k = 0; k < MHA_NUM_TENSORS; k++) {
            mha_tensor_info ti;
            assert_int_equal(mha_tensor_info_at(12, k, &ti), MHA_OK);
            char name[96];
            snprintf(name, sizeof name, "layers.%zu.%s", l, ti.name);
            const void *d = NULL;
            assert_int_equal(mha_st_get(f, name, MHA_ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                             MHA_OK);
            memcpy(p + ti.offset, d, ti.numel * sizeof(float));
        }
    }
    size_t one = 1;
    const void *d = NULL;
    assert_int_equal(mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    assert_int_equal(*(const uint64_t *)d, 20);
    assert_int_equal(mha_st_get(f, "data.rng", MHA_ST_U64, 1, &one, NULL, err, sizeof err), MHA_ESHAPE);
    mha_st_free(f);

    /* the held-out set the program used: PCG32(seed, TASK_STREAM_EVAL), eval split */
    task_buffer ev;
    assert_int_equal(task_buffer_init(&ev, &t, 60), MHA_OK);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 11, TASK_STREAM_EVAL);
    assert_int_equal(task_fill(&t, &rng, TASK_EVAL, &ev, 0, 60), MHA_OK);
    tm_batch b = task_view(&ev, 0, 60);
    double loss;
    assert_int_equal(tm_forward(m, &b, 0, &loss), MHA_OK);
    double logged = summary_number("rt/summary.json", "eval_loss");
    if (memcmp(&loss, &logged, sizeof loss) != 0)
        fail_msg("reloaded model's held-out loss %.17g != logged %.17g", loss, logged);
    task_buffer_free(&ev);
    tm_destroy(m);
}

/* Copy the file at src to dst with at most `keep` bytes, and with byte `flip_at` (if
 * < keep) XOR-ed with `flip`. */
static void copy_mutated(const char *src, const char *dst, size_t keep, size_t flip_at,
                         unsigned char flip)
{
    size_t n;
    char *buf = slurp(src, &n);
    assert_non_null(buf);
    if (keep > n)
        keep = n;
    if (flip_at < keep)
        buf[flip_at] = (char)(buf[flip_at] ^ flip);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, keep, f), keep);
    fclose(f);
    free(buf);
}

/* Resuming from a file made with another config, a truncated or corrupted file, or a
 * missing file is refused with exit status 2 and a message; no crash. */
static void test_train_resume_refusals(void **state)
{
    (void)state;
    char args[1024], ck[512], bad[512];
    snprintf(args, sizeof args,
             "--seq-len 4 --vocab 4 --dim 8 --heads 2 --batch 4 --steps 6 --warmup 1 "
             "--eval-size 20 --threads 1 --out '%s/base'", tmpdir);
    assert_int_equal(run("base", args), 0);
    snprintf(ck, sizeof ck, "%s/base/checkpoint.safetensors", tmpdir);

    snprintf(args, sizeof args, "--resume '%s' --layers 2 --out '%s/mm'", ck, tmpdir);
    assert_int_equal(run("mm", args), 2);
    assert_file_contains("mm.err", "--layers 1");
    assert_file_contains("mm.err", "--layers 2");
    snprintf(args, sizeof args, "--resume '%s' --optimizer sgd --out '%s/mm2'", ck, tmpdir);
    assert_int_equal(run("mm2", args), 2);
    assert_file_contains("mm2.err", "--optimizer");

    snprintf(args, sizeof args, "--resume '%s/nonexistent.safetensors' --out '%s/ne'", tmpdir,
             tmpdir);
    assert_int_equal(run("ne", args), 2);
    assert_file_contains("ne.err", "cannot resume");

    size_t n;
    char *whole = slurp(ck, &n);
    assert_non_null(whole);
    free(whole);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmpdir);
    /* truncations at several places, and single-byte corruptions of the size field,
     * the JSON header and the data (data corruption of a float is not detectable in
     * general, but must not crash: it either loads or is refused) */
    const size_t cuts[] = {0, 4, 8, 20, n / 3, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        copy_mutated(ck, bad, cuts[i], (size_t)-1, 0);
        snprintf(args, sizeof args, "--resume '%s' --out '%s/trunc'", bad, tmpdir);
        int rc = run("trunc", args);
        if (rc != 2)
            fail_msg("truncation to %zu bytes: exit status %d, expected 2", cuts[i], rc);
        assert_file_contains("trunc.err", "cannot resume");
    }
    const size_t flips[] = {0, 3, 7, 9, 30, 60, 100};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        copy_mutated(ck, bad, n, flips[i], 0x5A);
        snprintf(args, sizeof args, "--resume '%s' --steps 6 --out '%s/flip'", bad, tmpdir);
        int rc = run("flip", args);
        if (rc != 2 && rc != 0)
            fail_msg("corruption at byte %zu: exit status %d (crash?)", flips[i], rc);
        if (flips[i] < 8) /* the size field: always detected */
            assert_int_equal(rc, 2);
    }
}

/* Bad options: exit status 2 and a message naming the option; --help lists every
 * option with its default. */
static void test_train_options(void **state)
{
    (void)state;
    const char *bad[][2] = {
        {"--layers 9", "--layers"},        {"--optimizer foo", "--optimizer"},
        {"--dim 16 --heads 3", "--heads"}, {"--dropout 1.5", "--dropout"},
        {"--steps 0", "--steps"},          {"--lr -1", "--lr"},
        {"--task sort", "--task"},         {"--batch x", "--batch"},
        {"--frobnicate 1", "--frobnicate"}, {"--warmup 10 --steps 10", "--warmup"},
        {"--task lookup --vocab 4 --pairs 8", "--pairs"}, {"--seed", "--seed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "%s --out '%s/never'", bad[i][0], tmpdir);
        int rc = run("opt", args);
        if (rc != 2)
            fail_msg("'%s': exit status %d, expected 2", bad[i][0], rc);
        assert_file_contains("opt.err", bad[i][1]);
    }
    assert_false(file_exists("never")); /* nothing was created */
    assert_int_equal(run("help", "--help"), 0);
    const char *opts[] = {"--task", "--seq-len", "--vocab", "--layers", "--dim", "--heads",
                          "--dropout", "--batch", "--steps", "--optimizer", "--lr", "--seed",
                          "--threads", "--out", "--resume", "--eval-every", "--ckpt-every",
                          "--warmup", "--clip", "--weight-decay", "--pairs"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        assert_file_contains("help.out", opts[i]);
    assert_file_contains("help.out", "default: 64");         /* --dim */
    assert_file_contains("help.out", "default: reverse 16"); /* --seq-len per task */
}

/* A diverging run (SGD, huge lr, no clipping) stops with status 3 and a message; the
 * last checkpoint written before it is intact and loadable. */
static void test_train_nonfinite_stop(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args,
             "--seq-len 4 --vocab 4 --dim 8 --heads 2 --batch 8 --steps 50 --warmup 0 "
             "--optimizer sgd --momentum 0 --lr 1000000 --clip 0 --ckpt-every 1 --eval-size 20 "
             "--threads 1 --out '%s/nf'", tmpdir);
    assert_int_equal(run("nf", args), 3);
    assert_file_contains("nf.err", "non-finite");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/nf/checkpoint.safetensors", tmpdir);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    const void *d;
    assert_int_equal(mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    assert_true(*(const uint64_t *)d >= 1);
    /* every float tensor of the last checkpoint (weights and moments) is finite */
    assert_f32_tensors_finite(f);
    mha_st_free(f);
}

/* Same seed, one thread: two runs give bitwise the same summary numbers; the pictures
 * and the log exist. */
static void test_train_deterministic_outputs(void **state)
{
    (void)state;
    const char *common = "--task lookup --seq-len 3 --vocab 8 --pairs 4 --dim 8 "
                         "--heads 2 --batch 8 --steps 15 --warmup 2 --eval-size 40 --threads 1";
    char args[1024];
    snprintf(args, sizeof args, "%s --out '%s/d1'", common, tmpdir);
    assert_int_equal(run("d1", args), 0);
    snprintf(args, sizeof args, "%s --out '%s/d2'", common, tmpdir);
    assert_int_equal(run("d2", args), 0);
    const char *keys[] = {"token_accuracy", "sequence_accuracy", "eval_loss", "final_train_loss"};
    for (size_t k = 0; k < 4; k++) {
        double x = summary_number("d1/summary.json", keys[k]);
        double y = summary_number("d2/summary.json", keys[k]);
        assert_true(memcmp(&x, &y, sizeof x) == 0);
    }
    assert_file_contains("d1/loss.svg", "<svg");
    assert_file_contains("d1/attention_layer0.svg", "head 1");
    assert_file_contains("d1.out", "held-out accuracy");
    /* the speed of its training steps: their mean time and their share of the peak */
    assert_true(summary_number("d1/summary.json", "step_ms") > 0);
    assert_true(summary_number("d1/summary.json", "mfu") > 0);
    assert_file_contains("d1.out", " ms/step  MFU ");
    assert_file_contains("d1.out", "attention_layer0.svg");
}

/* The MFU's denominator (peak.h): a run keeps its measured peak in the cache file named by
 * MHA_PEAK_CACHE; a later run divides by a faster kept value (here one no CPU reaches) and
 * says so, keeping it; MHA_PEAK_CACHE=off measures alone and leaves the file alone. */
static void test_train_peak_cache(void **state)
{
    (void)state;
    char cache[512], args[1024];
    snprintf(cache, sizeof cache, "%s/cache/mha/peak.tsv", tmpdir);
    setenv("MHA_PEAK_CACHE", cache, 1); /* the children inherit it */
    const char *common = "--task copy --seq-len 3 --vocab 4 --dim 8 --heads 2 --batch 4 "
                         "--steps 3 --warmup 0 --eval-size 10 --threads 1";
    snprintf(args, sizeof args, "%s --out '%s/p1'", common, tmpdir);
    assert_int_equal(run("p1", args), 0);
    double g = summary_number("p1/summary.json", "peak_gflops");
    assert_true(g > 0 && g == summary_number("p1/summary.json", "peak_gflops_measured"));
    assert_file_contains("p1.out", "the fastest so far on this CPU, kept in ");
    /* the file: a header and this CPU's line; raise its value to 999999 (checksum redone) */
    char *text = slurp(cache, NULL);
    assert_non_null(text);
    char *l1 = strchr(text, '\n'), *val = l1 ? strchr(l1 + 1, '\t') : NULL;
    char *key = val ? strchr(val + 1, '\t') : NULL;
    assert_non_null(key);
    assert_int_equal((int)count_lines(cache), 2);
    key++;
    key[strcspn(key, "\n")] = '\0';
    char rest[700], fresh[2048];
    snprintf(rest, sizeof rest, "999999.000\t%s", key);
    l1[1] = '\0';
    snprintf(fresh, sizeof fresh, "%s%08x\t%s\n", text, (unsigned)crc32c(0, rest, strlen(rest)),
             rest);
    free(text);
    write_file(cache, fresh, strlen(fresh));
    snprintf(args, sizeof args, "%s --out '%s/p2'", common, tmpdir);
    assert_int_equal(run("p2", args), 0);
    assert_true(summary_number("p2/summary.json", "peak_gflops") == 999999.0);
    assert_true(summary_number("p2/summary.json", "peak_gflops_measured") < 999999.0);
    assert_file_contains("p2.out", "measured peak 999999 GFLOP/s");
    assert_file_contains("p2.out", " now: the fastest of the earlier runs on this CPU, kept in ");
    char *after = slurp(cache, NULL);
    assert_non_null(after);
    assert_string_equal(after, fresh); /* a slower measurement does not lower it */
    free(after);
    setenv("MHA_PEAK_CACHE", "off", 1);
    snprintf(args, sizeof args, "%s --out '%s/p3'", common, tmpdir);
    assert_int_equal(run("p3", args), 0);
    g = summary_number("p3/summary.json", "peak_gflops");
    assert_true(g > 0 && g < 999999.0 &&
                g == summary_number("p3/summary.json", "peak_gflops_measured"));
    char *p3 = slurp("p3.out", NULL);
    assert_non_null(p3);
    assert_null(strstr(p3, "kept in"));
    free(p3);
}

/* ---- property test: hundreds of mutations of real checkpoints ----------------------
 *
 * Two real checkpoints (reverse, 2 layers, dropout, Adam; lookup with cross-attention,
 * 1 layer, dropout, SGD momentum) taken at step 2 of 4, so that they hold weights, both
 * kinds of optimizer state, the data generator, the dropout call indices and every
 * config key. Each mutant is resumed with `--resume <mutant> --steps 4` and must either
 * be refused (exit 2, with a message on stderr) or, when the mutation leaves a valid
 * checkpoint, run to completion (exit 0: summary.json says 4 steps, completed). Exit 3
 * (stopped on a non-finite value) is allowed only where a mutation changed tensor data.
 * A signal, a sanitizer report, exit 1 or anything else fails. The resumes write into one
 * --out with --force: what is tested is the checkpoint, not who owns the directory. */

enum { ALLOW0 = 1, ALLOW2 = 2, ALLOW3 = 4 };

typedef enum mut_kind {
    MK_HDR_BYTE,  /* a random byte of the JSON header replaced                          */
    MK_DATA_BYTE, /* a random byte of the data section XOR-ed                            */
    MK_BIT,       /* one bit anywhere                                                    */
    MK_TRUNC,     /* cut at a random length (uniform, or near the header end / file end) */
    MK_APPEND,    /* 1..32 bytes of garbage, zeros or spaces appended                    */
    MK_SIZE,      /* the 8-byte header-size field replaced                               */
    /* the rest are written with mha_st_save: valid safetensors files that mha_st_load accepts */
    MK_RESHAPE,   /* a tensor's shape changed: same element count, or one row more/fewer  */
    MK_RETYPE,    /* a tensor's dtype changed (F32→F64/U8, U64→I64/F64/U8)               */
    MK_REMOVE,    /* a tensor removed                                                    */
    MK_EXTRA,     /* a tensor this run does not have added                               */
    MK_META,      /* a metadata value changed: garbage, or another valid value           */
    MK_META_DEL,  /* a metadata key removed                                              */
    MK_META_ADD,  /* an unknown metadata key added                                       */
    MK_U64,       /* a value of train.step, optimizer.step, data.rng, dropout.call_index */
    MK_F32,       /* one weight / moment element set to NaN, ±inf, −1, 3e38, 0, 1e-40    */
    MK_COUNT
} mut_kind;

static const char *const MK_NAMES[MK_COUNT] = {
    "hdr-byte", "data-byte", "bit", "truncate", "append", "size-field", "reshape", "retype",
    "remove", "extra", "meta-value", "meta-remove", "meta-add", "state-u64", "value-f32"};
/* mutants of each kind per base checkpoint */
static const unsigned MK_PER_BASE[MK_COUNT] = {16, 16, 12, 10, 4, 5, 12, 8,
                                               8,  4, 26, 5, 2, 28, 14};

typedef struct ckpt_base {
    unsigned char *bytes; /* the whole file, n bytes                       */
    size_t n, hdr_end;    /* hdr_end = 8 + N: the data section's start     */
    mha_st_file *f;           /* the same file, loaded                         */
    cJSON *hdr;           /* its JSON header                               */
    const cJSON *meta;    /* hdr's "__metadata__" object (borrowed)        */
    uint64_t steps;       /* its --steps                                   */
} ckpt_base;

/* One edit of a loaded checkpoint, written back with mha_st_save. */
typedef struct variant {
    size_t target;                    /* tensor index edited; SIZE_MAX: none         */
    int remove;                       /* drop the target                             */
    int reshape;                      /* give the target ndim/shape                  */
    size_t ndim, shape[MHA_ST_MAX_NDIM];
    int retype;                       /* give the target dtype                       */
    mha_st_dtype dtype;
    const void *data;                 /* the target's new data (NULL: unchanged)     */
    const mha_st_tensor *extra;           /* a tensor to add (NULL: none)                */
    const char *meta_key, *meta_val;  /* set key to val (added if absent); val NULL:
                                         remove the key                              */
} variant;

static void save_variant(const ckpt_base *b, const char *dst, const variant *v)
{
    size_t nt = mha_st_count(b->f), k = 0;
    mha_st_tensor *ts = calloc(nt + 1, sizeof *ts);
    assert_non_null(ts);
    for (size_t i = 0; i < nt; i++) {
        mha_st_tensor t;
        assert_int_equal(mha_st_tensor_at(b->f, i, &t), MHA_OK);
        if (i == v->target) {
            if (v->remove)
                continue;
            if (v->reshape) {
                t.ndim = v->ndim;
                memcpy(t.shape, v->shape, sizeof t.shape);
            }
            if (v->retype)
                t.dtype = v->dtype;
            if (v->data)
                t.data = v->data;
        }
        ts[k++] = t;
    }
    if (v->extra)
        ts[k++] = *v->extra;
    enum { MAXM = 64 };
    const char *keys[MAXM], *vals[MAXM];
    size_t nm = 0;
    int found = 0;
    for (const cJSON *c = b->meta->child; c; c = c->next) {
        const char *val = c->valuestring;
        if (v->meta_key && strcmp(c->string, v->meta_key) == 0) {
            found = 1;
            if (!v->meta_val)
                continue;
            val = v->meta_val;
        }
        assert_true(nm < MAXM - 1);
        keys[nm] = c->string;
        vals[nm++] = val;
    }
    if (v->meta_key && v->meta_val && !found) {
        keys[nm] = v->meta_key;
        vals[nm++] = v->meta_val;
    }
    char err[256];
    int st = mha_st_save(dst, ts, k, keys, vals, nm, err, sizeof err);
    if (st != MHA_OK)
        fail_msg("cannot write the mutant: %s", err);
    free(ts);
}

static uint64_t rand64(mha_pcg32 *r)
{
    uint64_t hi = mha_pcg32_next(r);
    return (hi << 32) | mha_pcg32_next(r);
}

static uint32_t below(mha_pcg32 *r, size_t bound)
{
    uint32_t x = 0;
    assert_true(bound > 0 && bound <= UINT32_MAX);
    assert_int_equal(mha_pcg32_bounded(r, (uint32_t)bound, &x), 0);
    return x;
}

static size_t numel_of(const mha_st_tensor *t)
{
    size_t n = 1;
    for (size_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* Values that no config key accepts. */
static const char *const META_GARBAGE[] = {"",    "x",   "-1",  " -1", "1e999",
                                           "nan", "inf", "3x",  "18446744073709551616"};
/* Keys whose change alters a tensor's shape or set: a valid but different value must be
 * refused too (steps is overridden by the mutants' explicit --steps). */
static int meta_must_refuse(const char *key)
{
    const char *keys[] = {"format", "task", "seq-len", "vocab", "layers", "model-dim"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

/* Write mutant `j` of kind k (the j-th of its kind for this base) to dst; describe it in
 * desc and return the exit statuses it may have (ALLOW* bits). */
static int make_mutant(const ckpt_base *b, mut_kind k, unsigned j, mha_pcg32 *r,
                       const char *dst, char *desc, size_t dcap)
{
    const size_t n = b->n, N = b->hdr_end - 8, nd = n - b->hdr_end;
    unsigned char *buf = malloc(n + 64);
    assert_non_null(buf);
    memcpy(buf, b->bytes, n);
    size_t len = n;
    int allow = ALLOW2;
    variant v = {.target = SIZE_MAX};
    void *owned = NULL; /* replacement data of a variant */
    int structured = 0;
    const size_t nt = mha_st_count(b->f);
    switch (k) {
    case MK_HDR_BYTE: {
        size_t pos = 8 + below(r, N);
        unsigned char to = (unsigned char)(buf[pos] ^ (1 + below(r, 255)));
        snprintf(desc, dcap, "header byte %zu: 0x%02x -> 0x%02x", pos, buf[pos], to);
        buf[pos] = to;
        allow = ALLOW0 | ALLOW2;
        break;
    }
    case MK_DATA_BYTE: {
        size_t pos = b->hdr_end + below(r, nd);
        unsigned char to = (unsigned char)(buf[pos] ^ (1 + below(r, 255)));
        snprintf(desc, dcap, "data byte %zu: 0x%02x -> 0x%02x", pos, buf[pos], to);
        buf[pos] = to;
        allow = ALLOW0 | ALLOW2 | ALLOW3;
        break;
    }
    case MK_BIT: {
        size_t pos = below(r, n);
        unsigned bit = below(r, 8);
        buf[pos] ^= (unsigned char)(1u << bit);
        snprintf(desc, dcap, "bit %u of byte %zu", bit, pos);
        allow = pos < 8 ? ALLOW2 : pos < b->hdr_end ? ALLOW0 | ALLOW2 : ALLOW0 | ALLOW2 | ALLOW3;
        break;
    }
    case MK_TRUNC: {
        if (j % 2 == 0)
            len = below(r, n);
        else if (j % 4 == 1) /* around the end of the header */
            len = b->hdr_end - 8 + below(r, 17);
        else /* just short of the end, or inside the size field */
            len = (j % 8 == 3) ? below(r, 9) : n - 1 - below(r, 16);
        snprintf(desc, dcap, "truncated to %zu of %zu bytes", len, n);
        break;
    }
    case MK_APPEND: {
        size_t add = 1 + below(r, 32);
        for (size_t i = 0; i < add; i++)
            buf[n + i] = j % 3 == 0 ? (unsigned char)below(r, 256) : j % 3 == 1 ? 0 : ' ';
        len = n + add;
        snprintf(desc, dcap, "%zu bytes of %s appended", add,
                 j % 3 == 0 ? "garbage" : j % 3 == 1 ? "zeros" : "spaces");
        break;
    }
    case MK_SIZE: {
        const uint64_t opts[] = {0, 1, N - 1, N + 1, N - 8, N + 8, n - 8, n,
                                 (uint64_t)1 << 63, UINT64_MAX, rand64(r)};
        uint64_t to = opts[below(r, sizeof opts / sizeof opts[0])];
        for (int i = 0; i < 8; i++)
            buf[i] = (unsigned char)(to >> (8 * i));
        snprintf(desc, dcap, "header size %zu -> %llu", N, (unsigned long long)to);
        break;
    }
    case MK_RESHAPE: {
        mha_st_tensor t;
        size_t i = below(r, nt);
        assert_int_equal(mha_st_tensor_at(b->f, i, &t), MHA_OK);
        /* same element count (the data kept), or one row / element fewer or more (the
         * data cut, or extended with zeros) */
        size_t opts[8][5]; /* ndim, shape... */
        size_t no = 0;
#define OPT(nd_, a_, b_, c_) (opts[no][0] = (nd_), opts[no][1] = (a_), opts[no][2] = (b_), \
                              opts[no][3] = (c_), no++)
        if (t.ndim == 0) {
            OPT(1, 1, 0, 0);
            OPT(2, 1, 1, 0);
            OPT(1, 2, 0, 0);
        } else if (t.ndim == 1) {
            OPT(2, 1, t.shape[0], 0);
            OPT(2, t.shape[0], 1, 0);
            if (t.shape[0] == 1)
                OPT(0, 0, 0, 0);
            if (t.shape[0] % 2 == 0 && t.shape[0] > 2)
                OPT(2, 2, t.shape[0] / 2, 0);
            OPT(1, t.shape[0] - 1, 0, 0);
            OPT(1, t.shape[0] + 1, 0, 0);
        } else {
            size_t a = t.shape[0], c = t.shape[1];
            if (a != c)
                OPT(2, c, a, 0);
            OPT(1, a * c, 0, 0);
            OPT(3, 1, a, c);
            OPT(3, a, c, 1);
            OPT(2, a - 1, c, 0);
            OPT(2, a, c + 1, 0);
        }
#undef OPT
        size_t o = below(r, no);
        v.target = i;
        v.reshape = 1;
        v.ndim = opts[o][0];
        char sh[64] = "[";
        size_t ne = 1, esz = mha_st_dtype_size(t.dtype), old_bytes = numel_of(&t) * esz;
        for (size_t d = 0; d < v.ndim; d++) {
            v.shape[d] = opts[o][1 + d];
            ne *= v.shape[d];
            snprintf(sh + strlen(sh), sizeof sh - strlen(sh), d ? ",%zu" : "%zu", v.shape[d]);
        }
        strcat(sh, "]");
        if (ne * esz != old_bytes) {
            unsigned char *d = calloc(ne * esz + 1, 1);
            assert_non_null(d);
            memcpy(d, t.data, ne * esz < old_bytes ? ne * esz : old_bytes);
            owned = d;
            v.data = d;
        }
        snprintf(desc, dcap, "tensor %s %s [%zu elements] -> %s [%zu elements]", t.name,
                 mha_st_dtype_name(t.dtype), numel_of(&t), sh, ne);
        structured = 1;
        break;
    }
    case MK_RETYPE: {
        mha_st_tensor t;
        size_t i = below(r, nt);
        assert_int_equal(mha_st_tensor_at(b->f, i, &t), MHA_OK);
        size_t ne = numel_of(&t);
        unsigned how = below(r, t.dtype == MHA_ST_F32 ? 2 : 3);
        v.target = i;
        v.retype = 1;
        if (t.dtype == MHA_ST_F32 && how == 0) { /* F64, same values */
            double *d = malloc((ne ? ne : 1) * sizeof *d);
            assert_non_null(d);
            for (size_t e = 0; e < ne; e++)
                d[e] = ((const float *)t.data)[e];
            owned = d;
            v.dtype = MHA_ST_F64;
            v.data = d;
        } else if (t.dtype == MHA_ST_U64 && how == 0) { /* I64, same bytes */
            v.dtype = MHA_ST_I64;
        } else if (t.dtype == MHA_ST_U64 && how == 1) { /* F64, same values */
            double *d = malloc((ne ? ne : 1) * sizeof *d);
            assert_non_null(d);
            for (size_t e = 0; e < ne; e++)
                d[e] = (double)((const uint64_t *)t.data)[e];
            owned = d;
            v.dtype = MHA_ST_F64;
            v.data = d;
        } else { /* U8 with one more dimension of the element size, same bytes */
            v.dtype = MHA_ST_U8;
            v.reshape = 1;
            v.ndim = t.ndim + 1;
            memcpy(v.shape, t.shape, sizeof v.shape);
            v.shape[t.ndim] = mha_st_dtype_size(t.dtype);
        }
        snprintf(desc, dcap, "tensor %s retyped %s -> %s", t.name, mha_st_dtype_name(t.dtype),
                 mha_st_dtype_name(v.dtype));
        structured = 1;
        break;
    }
    case MK_REMOVE: {
        v.target = below(r, nt);
        v.remove = 1;
        snprintf(desc, dcap, "tensor %s removed", mha_st_name(b->f, v.target));
        structured = 1;
        break;
    }
    case MK_EXTRA: {
        static float zeros[1024];
        static mha_st_tensor extra;
        static char name[96];
        mha_st_tensor first;
        assert_int_equal(mha_st_tensor_at(b->f, 0, &first), MHA_OK);
        const size_t D = strtoull(mha_st_meta(b->f, "dim"), NULL, 10);
        const size_t L = strtoull(mha_st_meta(b->f, "layers"), NULL, 10);
        extra = (mha_st_tensor){name, MHA_ST_F32, first.ndim, {first.shape[0], first.shape[1]}, zeros};
        switch (j % 4) {
        case 0: /* the next layer */
            snprintf(name, sizeof name, "layers.%zu.w_q.weight", L);
            extra.ndim = 2;
            extra.shape[0] = extra.shape[1] = D;
            break;
        case 1: /* the other optimizer's state */
            snprintf(name, sizeof name, "optimizer.%s.%s",
                     strcmp(mha_st_meta(b->f, "optimizer"), "sgd") == 0 ? "exp_avg"
                                                                    : "momentum_buffer",
                     first.name);
            break;
        case 2: /* the value embedding (lookup only) */
            snprintf(name, sizeof name, "val_emb.weight");
            break;
        default:
            snprintf(name, sizeof name, "zz.unknown");
            extra.ndim = 1;
            extra.shape[0] = 3;
            break;
        }
        char err[128];
        if (mha_st_get(b->f, name, MHA_ST_F32, 0, NULL, NULL, err, sizeof err) != MHA_ENOTFOUND) {
            snprintf(name, sizeof name, "zz.unknown.%u", j);
            extra.ndim = 1;
            extra.shape[0] = 3;
        }
        assert_true(numel_of(&extra) <= sizeof zeros / sizeof zeros[0]);
        v.extra = &extra;
        snprintf(desc, dcap, "extra tensor %s added", name);
        structured = 1;
        break;
    }
    case MK_META: {
        static char val[64];
        size_t nkeys = (size_t)cJSON_GetArraySize(b->meta);
        const cJSON *c = cJSON_GetArrayItem(b->meta, (int)(j % nkeys));
        const char *key = c->string, *cur = c->valuestring;
        if (below(r, 3) == 0) { /* garbage: refused for every key */
            snprintf(val, sizeof val, "%s",
                     META_GARBAGE[below(r, sizeof META_GARBAGE / sizeof META_GARBAGE[0])]);
        } else if (strcmp(key, "format") == 0) {
            snprintf(val, sizeof val, "mha-train/2");
        } else if (strcmp(key, "task") == 0 || strcmp(key, "optimizer") == 0) {
            const char *const tasks[] = {"reverse", "copy", "lookup"};
            const char *const opts[] = {"sgd", "adam", "adamw"};
            const char *const *names = strcmp(key, "task") == 0 ? tasks : opts;
            unsigned skip = below(r, 2), m = 0;
            for (unsigned q = 0; q < 3; q++)
                if (strcmp(names[q], cur) != 0 && m++ == skip)
                    snprintf(val, sizeof val, "%s", names[q]);
            /* the optimizer state differs between sgd and adam/adamw */
            if (strcmp(key, "optimizer") == 0 &&
                (strcmp(cur, "sgd") == 0) == (strcmp(val, "sgd") == 0))
                allow = ALLOW0 | ALLOW2;
        } else { /* another number: x + 1, 2x, or for a shape key its largest value */
            const char *const big_keys[] = {"seq-len", "vocab", "dim", "layers"};
            const double big[] = {4096, 4096, 4096, TM_MAX_LAYERS};
            double x = strtod(cur, NULL), y;
            unsigned how = below(r, 3);
            y = how == 0 ? x + 1 : x != 0 ? 2 * x : 1;
            for (size_t q = 0; q < 4 && how == 2; q++)
                if (strcmp(key, big_keys[q]) == 0 && big[q] != x)
                    y = big[q]; /* refused before a model of that size is allocated */
            if (strcmp(key, "layers") == 0 && y > TM_MAX_LAYERS)
                y = x - 1;
            if (strpbrk(cur, ".eE"))
                snprintf(val, sizeof val, "%.17g", y);
            else
                snprintf(val, sizeof val, "%.0f", y);
            if (!meta_must_refuse(key))
                allow = ALLOW0 | ALLOW2;
        }
        if (strcmp(key, "run_id") == 0) /* a malformed id is read as none (a new one) */
            allow = ALLOW0 | ALLOW2;
        v.meta_key = key;
        v.meta_val = val;
        snprintf(desc, dcap, "metadata %s: \"%s\" -> \"%s\"", key, cur, val);
        structured = 1;
        break;
    }
    case MK_META_DEL: {
        size_t nkeys = (size_t)cJSON_GetArraySize(b->meta);
        v.meta_key = cJSON_GetArrayItem(b->meta, (int)below(r, nkeys))->string;
        v.meta_val = NULL;
        snprintf(desc, dcap, "metadata %s removed", v.meta_key);
        if (strcmp(v.meta_key, "elapsed_seconds") == 0 || strcmp(v.meta_key, "run_id") == 0)
            allow = ALLOW0; /* optional: older checkpoints have none (0 s before; a new id) */
        structured = 1;
        break;
    }
    case MK_META_ADD: {
        v.meta_key = j % 2 ? "comment" : "zz-unknown";
        v.meta_val = j % 2 ? "made by hand" : "1";
        snprintf(desc, dcap, "metadata %s added", v.meta_key);
        allow = ALLOW0 | ALLOW2;
        structured = 1;
        break;
    }
    case MK_U64: {
        const char *const names[] = {"train.step", "optimizer.step", "data.rng",
                                     "dropout.call_index"};
        const char *name = names[j % 4];
        mha_st_tensor t;
        size_t i = 0;
        while (i < nt && strcmp(mha_st_name(b->f, i), name) != 0)
            i++;
        assert_true(i < nt);
        assert_int_equal(mha_st_tensor_at(b->f, i, &t), MHA_OK);
        size_t ne = numel_of(&t), e = below(r, ne);
        uint64_t *d = malloc(ne * sizeof *d);
        assert_non_null(d);
        memcpy(d, t.data, ne * sizeof *d);
        const uint64_t opts[] = {0, 1, b->steps, b->steps + 1, (uint64_t)1 << 63, UINT64_MAX,
                                 rand64(r)};
        uint64_t to = opts[(j / 4) % 7]; /* every value for every tensor */
        if (to == d[e])
            to ^= 2;
        snprintf(desc, dcap, "%s[%zu]: %llu -> %llu", name, e, (unsigned long long)d[e],
                 (unsigned long long)to);
        d[e] = to;
        owned = d;
        v.target = i;
        v.data = d;
        /* the two step counts always agree (every step is one optimizer step), and a
         * PCG32 increment is odd; any generator state and call index can be continued from
         * (or refused as inconsistent) */
        int must = strcmp(name, "train.step") == 0 || strcmp(name, "optimizer.step") == 0 ||
                   (strcmp(name, "data.rng") == 0 && e == 1 && (to & 1u) == 0);
        allow = must ? ALLOW2 : ALLOW0 | ALLOW2;
        structured = 1;
        break;
    }
    case MK_F32: {
        size_t i;
        mha_st_tensor t;
        do {
            i = below(r, nt);
            assert_int_equal(mha_st_tensor_at(b->f, i, &t), MHA_OK);
        } while (t.dtype != MHA_ST_F32);
        size_t ne = numel_of(&t), e = below(r, ne);
        float *d = malloc(ne * sizeof *d);
        assert_non_null(d);
        memcpy(d, t.data, ne * sizeof *d);
        const float opts[] = {NAN, INFINITY, -INFINITY, -1.0f, 3e38f, 0.0f, 1e-40f};
        unsigned o = j < 7 ? j : below(r, 7); /* every value at least once */
        d[e] = opts[o];
        snprintf(desc, dcap, "%s[%zu] = %g", t.name, e, (double)opts[o]);
        owned = d;
        v.target = i;
        v.data = d;
        if (!isfinite(opts[o]))
            allow = ALLOW2; /* a checkpoint never holds a non-finite value */
        else if (opts[o] < 0 && strncmp(t.name, "optimizer.exp_avg_sq.", 21) == 0)
            allow = ALLOW2; /* a second moment is never negative */
        else if (opts[o] > 1e38f)
            allow = ALLOW0 | ALLOW3; /* finite, but may overflow in training */
        else
            allow = ALLOW0; /* an ordinary value: a valid checkpoint */
        structured = 1;
        break;
    }
    default:
        fail_msg("unknown mutation kind %d", (int)k);
    }
    if (structured)
        save_variant(b, dst, &v);
    else
        write_file(dst, buf, len);
    free(owned);
    free(buf);
    return allow;
}

static void test_train_checkpoint_mutations(void **state)
{
    (void)state;
    const char *bases[][2] = {
        {"mb_adam", "--task reverse --seq-len 5 --vocab 6 --layers 2 --dim 8 --heads 2 "
                    "--dropout 0.1 --batch 4 --steps 4 --stop-after 2 --warmup 1 "
                    "--optimizer adam --eval-size 8 --eval-every 2 --threads 1 --seed 3"},
        {"mb_sgd", "--task lookup --seq-len 3 --vocab 7 --pairs 4 --layers 1 --dim 12 "
                   "--heads 3 --dropout 0.2 --batch 4 --steps 4 --stop-after 2 --warmup 1 "
                   "--optimizer sgd --momentum 0.9 --eval-size 8 --eval-every 2 --threads 1 "
                   "--seed 4"},
    };
    enum { NB = sizeof bases / sizeof bases[0] };
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 20240611u, 77u);
    size_t count[MK_COUNT][3] = {{0}}; /* exit 2, 0, 3 */
    size_t total = 0, bad = 0;
    char mut[512], args[2048], sum[600];
    snprintf(mut, sizeof mut, "%s/mutant.safetensors", tmpdir);
    snprintf(sum, sizeof sum, "%s/mout/summary.json", tmpdir);
    snprintf(args, sizeof args, "--resume '%s' --steps 4 --out '%s/mout' --force", mut,
             tmpdir);
    for (size_t bi = 0; bi < NB; bi++) {
        char bargs[1024], path[512];
        snprintf(bargs, sizeof bargs, "%s --out '%s/%s'", bases[bi][1], tmpdir, bases[bi][0]);
        assert_int_equal(run(bases[bi][0], bargs), 0);
        snprintf(path, sizeof path, "%s/%s/checkpoint.safetensors", tmpdir, bases[bi][0]);
        ckpt_base b = {.steps = 4};
        b.bytes = (unsigned char *)slurp(path, &b.n);
        assert_non_null(b.bytes);
        assert_true(b.n > 8);
        uint64_t N = 0;
        for (int i = 0; i < 8; i++)
            N |= (uint64_t)b.bytes[i] << (8 * i);
        assert_true(N < b.n - 8);
        b.hdr_end = 8 + (size_t)N;
        b.hdr = cJSON_ParseWithLength((const char *)b.bytes + 8, (size_t)N);
        assert_non_null(b.hdr);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(b.hdr, "__metadata__");
        assert_true(cJSON_IsObject(meta));
        /* the mutants written with mha_st_save have no checksums (a file without any is
         * accepted): what they test is the checks beyond the checksums, which the byte
         * mutations of the real file meet first */
        for (cJSON *c = meta->child, *next; c; c = next) {
            next = c->next;
            if (strncmp(c->string, "crc32c.", 7) == 0)
                cJSON_Delete(cJSON_DetachItemViaPointer(meta, c));
        }
        b.meta = meta;
        char err[256];
        assert_int_equal(mha_st_load(path, &b.f, err, sizeof err), MHA_OK);
        /* the unmutated checkpoint resumes and completes */
        snprintf(bargs, sizeof bargs, "--resume '%s' --steps 4 --out '%s/mout' --force",
                 path, tmpdir);
        assert_int_equal(run("mut", bargs), 0);
        assert_int_equal((int)summary_number("mout/summary.json", "steps"), 4);

        for (int k = 0; k < MK_COUNT; k++) {
            for (unsigned j = 0; j < MK_PER_BASE[k]; j++) {
                char desc[256];
                int allow = make_mutant(&b, (mut_kind)k, j, &rng, mut, desc, sizeof desc);
                remove(sum);
                int rc = run("mut", args);
                total++;
                char *errtext = slurp("mut.err", NULL);
                assert_non_null(errtext);
                const char *why = NULL;
                int bit = rc == 0 ? ALLOW0 : rc == 2 ? ALLOW2 : rc == 3 ? ALLOW3 : 0;
                if (strstr(errtext, "Sanitizer") || strstr(errtext, "runtime error"))
                    why = "sanitizer report";
                else if (!(bit & allow))
                    why = rc < 0 || rc > 128 ? "killed by a signal" : "exit status not allowed";
                else if (rc != 0 && strncmp(errtext, "mha-train: ", 11) != 0)
                    why = "no message on stderr";
                else if (rc != 0 && strlen(errtext) < 20)
                    why = "message too short";
                if (!why && rc == 0) {
                    char *s = slurp(sum, NULL);
                    cJSON *js = s ? cJSON_Parse(s) : NULL;
                    const cJSON *st = cJSON_GetObjectItemCaseSensitive(js, "steps");
                    const cJSON *co = cJSON_GetObjectItemCaseSensitive(js, "completed");
                    if (!cJSON_IsNumber(st) || st->valuedouble != 4 || !cJSON_IsTrue(co))
                        why = "exit 0 without a completed run";
                    cJSON_Delete(js);
                    free(s);
                }
                if (why) {
                    bad++;
                    print_message("mutant %zu (%s, %s: %s): exit %d, allowed%s%s%s: %s\n%s",
                                  total, bases[bi][0], MK_NAMES[k], desc, rc,
                                  allow & ALLOW0 ? " 0" : "", allow & ALLOW2 ? " 2" : "",
                                  allow & ALLOW3 ? " 3" : "", why, errtext);
                } else {
                    count[k][rc == 2 ? 0 : rc == 0 ? 1 : 2]++;
                }
                free(errtext);
            }
        }
        mha_st_free(b.f);
        cJSON_Delete(b.hdr);
        free(b.bytes);
    }
    char line[2048];
    size_t r2 = 0, r0 = 0, r3 = 0, len = 0;
    for (int k = 0; k < MK_COUNT; k++) {
        r2 += count[k][0];
        r0 += count[k][1];
        r3 += count[k][2];
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %zu/%zu/%zu", k ? ", " : "",
                                MK_NAMES[k], count[k][0], count[k][1], count[k][2]);
    }
    print_message("checkpoint mutations: %zu mutants of %d real checkpoints: %zu refused (2), "
                  "%zu accepted and completed (0), %zu stopped non-finite (3), %zu bad; by kind "
                  "(refused/completed/non-finite): %s\n",
                  total, (int)NB, r2, r0, r3, bad, line);
    if (bad)
        fail_msg("%zu of %zu checkpoint mutants were not handled (see above)", bad, total);
}

/* Copy checkpoint src to dst (paths relative to tmpdir) with one change: the U64 tensor
 * `tensor` element `at` set to `val` (tensor NULL: none), and metadata `key` set to
 * `mval` (key NULL: none) or, when mval is NULL, renamed to new_key. Written with
 * mha_st_save, so the file is a valid safetensors (without checksums). */
static void resave(const char *src, const char *dst, const char *tensor, size_t at,
                   uint64_t val, const char *key, const char *mval, const char *new_key)
{
    char ps[512], pd[512], err[256];
    snprintf(ps, sizeof ps, "%s/%s", tmpdir, src);
    snprintf(pd, sizeof pd, "%s/%s", tmpdir, dst);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(ps, &f, err, sizeof err), MHA_OK);
    const size_t n = mha_st_count(f);
    mha_st_tensor *t = calloc(n, sizeof *t);
    assert_non_null(t);
    uint64_t *copy = NULL;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mha_st_tensor_at(f, i, &t[i]), MHA_OK);
        if (tensor && strcmp(t[i].name, tensor) == 0) {
            size_t ne = t[i].ndim ? t[i].shape[0] : 1;
            copy = malloc(ne * sizeof *copy);
            assert_non_null(copy);
            memcpy(copy, t[i].data, ne * sizeof *copy);
            copy[at] = val;
            t[i].data = copy;
        }
    }
    size_t len;
    char *bytes = slurp(src, &len);
    assert_non_null(bytes);
    uint64_t hn = 0;
    for (int i = 0; i < 8; i++)
        hn |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
    cJSON *h = cJSON_ParseWithLength(bytes + 8, (size_t)hn);
    assert_non_null(h);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(h, "__metadata__");
    size_t nm = (size_t)cJSON_GetArraySize(meta);
    const char **mk = calloc(nm + 1, sizeof *mk), **mv = calloc(nm + 1, sizeof *mv);
    assert_non_null(mk);
    assert_non_null(mv);
    size_t k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, meta) {
        if (strncmp(c->string, "crc32c.", 7) == 0)
            continue; /* an edited file has no checksums (a file without any is accepted) */
        const int hit = key && strcmp(c->string, key) == 0;
        mk[k] = hit && !mval ? new_key : c->string;
        mv[k] = hit && mval ? mval : c->valuestring;
        k++;
    }
    assert_int_equal(mha_st_save(pd, t, n, mk, mv, k, err, sizeof err), MHA_OK);
    free(mk);
    free(mv);
    cJSON_Delete(h);
    free(bytes);
    free(copy);
    free(t);
    mha_st_free(f);
}

/* One run per --out: a second run into a directory holding a run is refused (exit 2,
 * naming the checkpoint and the ways on) unless --force; a directory another process is
 * running in is refused at once. Checkpoints carry checksums: a flipped byte in a tensor
 * is refused on --resume (exit 2, naming the tensor). The former option name --model-dim
 * is accepted, and a checkpoint written under it resumes. */
static void test_train_run_dir(void **state)
{
    (void)state;
    const char *args = "--seq-len 4 --vocab 4 --dim 8 --heads 2 --batch 4 --steps 6 --warmup 1 "
                       "--eval-size 50 --eval-every 3 --out r";
    assert_int_equal(run("a", args), 0);
    assert_int_equal(run("b", args), 2);
    assert_file_contains("b.err", "already holds a run");
    assert_file_contains("b.err", "--force");
    char forced[512];
    snprintf(forced, sizeof forced, "%s --force", args);
    assert_int_equal(run("c", forced), 0);
    /* a process holding the directory's lock */
    char lock[512];
    snprintf(lock, sizeof lock, "%s/r/run.lock", tmpdir);
    const int fd = open(lock, O_RDWR | O_CREAT, 0666);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(run("d", "--resume r/checkpoint.safetensors --steps 8"), 2);
    assert_file_contains("d.err", "in use by another run");
    close(fd);
    /* a flipped byte in the last tensor's data */
    size_t n;
    char *ck = slurp("r/checkpoint.safetensors", &n);
    assert_non_null(ck);
    ck[n - 3] ^= 0x10;
    write_file("flip.safetensors", ck, n);
    free(ck);
    assert_int_equal(run("e", "--resume flip.safetensors --steps 8 --out f"), 2);
    assert_file_contains("e.err", "does not match its checksum");
    /* the former name, on the command line and in a checkpoint's metadata */
    assert_int_equal(run("g", "--seq-len 4 --vocab 4 --model-dim 8 --heads 2 --batch 4 "
                              "--steps 6 --warmup 1 --eval-size 50 --out old"), 0);
    resave("old/checkpoint.safetensors", "old/former.safetensors", NULL, 0, 0, "dim", NULL,
           "model-dim");
    assert_int_equal(run("h", "--resume old/former.safetensors --steps 8 --force"), 0);
    assert_file_contains("h.out", "D 8");
}

/* The limits found by probing: each is refused with exit status 2 and a message naming
 * the option, before a model is built or a directory made (no output directory appears):
 * too many threads, a task too small for a held-out split, --seq-len above 4096 (the
 * message states the limit), a configuration whose activations cannot fit in memory
 * (the bytes needed stated), non-decimal --lr forms and a --lr that underflows to 0,
 * an --out that is a file or lies under one. A subnormal --lr (1e-320) is accepted. A FIFO
 * given to --resume is refused at once (not waited on). */
static void test_train_limits(void **state)
{
    (void)state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long max = 4 * (cpus > 0 ? cpus : 1);
    char too_many[64];
    snprintf(too_many, sizeof too_many, "--threads %ld", max < 256 ? max + 1 : 257);
    write_file("afile", "x", 1);
    const char *bad[][2] = {
        {too_many, "--threads"},
        {"--threads 100000", "--threads"},
        {"--seq-len 1 --vocab 2", "held-out"},
        {"--seq-len 4097", "[1, 4096]"},
        {"--seq-len 4096 --attention stored --batch 65536", "needs at least"},
        {"--lr 0x10", "--lr"},
        {"--lr ' 1'", "--lr"},
        {"--lr +1", "--lr"},
        {"--lr inf", "--lr"},
        {"--lr nan", "--lr"},
        {"--lr 1e-400", "--lr"},
        {"--lr 1.5e", "--lr"},
        {"--out afile", "--out"},
        {"--out afile/sub", "--out"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "--seq-len 4 --vocab 4 --dim 8 --heads 2 --steps 2 "
                 "--eval-size 10 --out never %s", bad[i][0]);
        int rc = run("lim", args);
        if (rc != 2)
            fail_msg("'%s': exit status %d, expected 2", bad[i][0], rc);
        assert_file_contains("lim.err", bad[i][1]);
    }
    assert_false(file_exists("never"));
    assert_file_contains("lim.err", "not a directory");
    assert_int_equal(run("sub", "--seq-len 4 --vocab 4 --dim 8 --heads 2 --steps 2 "
                            "--eval-size 10 --threads 1 --lr 1e-320 --out sub"), 0);
    assert_file_contains("sub/summary.json", "\"lr\":");
    char fifo[512], args[600];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "--resume '%s'", fifo);
    assert_int_equal(run("fifo", args), 2);
    assert_file_contains("fifo.err", "not a regular file");
}

/* Resuming: a finished run resumed as it is exits 0 saying so and changes nothing; a
 * larger --steps continues it, each new step with the learning rate of the schedule of
 * the new total (mha_lr_at), and its wall time counts the earlier part (the checkpoint's
 * elapsed_seconds); a --steps below the checkpoint's step is refused naming --steps. A
 * bad data.rng is reported as such, and a non-finite stop without any checkpoint names
 * none. The output starts with the header and tells what it does before the steps. */
static void test_train_resume_extend(void **state)
{
    (void)state;
    const char *common = "--seq-len 4 --vocab 4 --dim 8 --heads 2 --batch 4 --warmup 2 "
                         "--lr 0.01 --min-lr 0.001 --eval-size 20 --eval-every 5 --threads 1";
    char args[1024];
    snprintf(args, sizeof args, "%s --steps 10 --out a", common);
    assert_int_equal(run("a", args), 0);
    char *out = slurp("a.out", NULL);
    assert_non_null(out);
    assert_true(strncmp(out, "mha-train: task reverse", 23) == 0);
    char *build = strstr(out, "building the evaluation set"), *first = strstr(out, "step 5/10");
    assert_true(build && first && build < first);
    free(out);
    size_t n0, n1;
    char *before = slurp("a/checkpoint.safetensors", &n0);
    assert_non_null(before);
    assert_int_equal(run("fin", "--resume a/checkpoint.safetensors"), 0);
    assert_file_contains("fin.out", "finished run (step 10 of --steps 10)");
    char *after = slurp("a/checkpoint.safetensors", &n1);
    assert_non_null(after);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    assert_int_equal(run("less", "--resume a/checkpoint.safetensors --steps 7"), 2);
    assert_file_contains("less.err", "--steps");

    /* the earlier part's time: 1000 s in the checkpoint */
    resave("a/checkpoint.safetensors", "a/ck1000.safetensors", NULL, 0, 0, "elapsed_seconds",
           "1000", NULL);
    assert_int_equal(run("ext", "--resume a/ck1000.safetensors --steps 16"), 0);
    assert_file_contains("ext.out", "resumed from a/ck1000.safetensors at step 10 (--steps "
                                    "changed");
    double wall = summary_number("a/summary.json", "wall_seconds");
    assert_true(wall >= 1000 && wall < 1100);
    assert_int_equal((int)summary_number("a/summary.json", "steps"), 16);
    /* steps 11..16 use the schedule of 16 steps */
    char *csv = slurp("a/train_log.csv", NULL);
    assert_non_null(csv);
    const mha_lr_schedule sch = {.base_lr = 0.01, .min_lr = 0.001, .warmup_steps = 2,
                                 .total_steps = 16};
    for (uint64_t st = 11; st <= 16; st++) {
        char key[32];
        snprintf(key, sizeof key, "\n%llu,", (unsigned long long)st);
        const char *row = strstr(csv, key);
        assert_non_null(row);
        const char *lrf = strchr(row + strlen(key), ',');
        assert_non_null(lrf);
        double lr, want;
        lr = strtod(lrf + 1, NULL);
        assert_int_equal(mha_lr_at(&sch, st - 1, &want), MHA_OK);
        if (lr != want)
            fail_msg("step %llu: lr %.17g, expected %.17g", (unsigned long long)st, lr, want);
    }
    free(csv);

    /* a bad data.rng state is named as such */
    resave("a/checkpoint.safetensors", "rng.safetensors", "data.rng", 1, 42, NULL, NULL, NULL);
    assert_int_equal(run("rng", "--resume rng.safetensors --steps 20 --out r"), 2);
    assert_file_contains("rng.err", "data.rng");
    /* a diverging run that never wrote a checkpoint does not name one */
    assert_int_equal(run("nf0", "--seq-len 4 --vocab 4 --dim 8 --heads 2 --batch 8 "
                                "--steps 50 --warmup 0 --optimizer sgd --momentum 0 --lr 1000000 "
                                "--clip 0 --ckpt-every 0 --eval-size 20 --threads 1 --out nf0"),
                     3);
    assert_file_contains("nf0.err", "No checkpoint was written");
    char *e = slurp("nf0.err", NULL);
    assert_non_null(e);
    assert_null(strstr(e, "intact"));
    free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_train_resume_bitwise, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_checkpoint_round_trip, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_resume_refusals, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_options, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_nonfinite_stop, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_deterministic_outputs, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_limits, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_peak_cache, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_resume_extend, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_run_dir, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_train_checkpoint_mutations, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
