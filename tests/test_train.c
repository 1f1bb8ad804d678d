/* Tests of the mha-train program (train/main.c), run as a child process on tiny
 * configurations: resume from a checkpoint reproduces an uninterrupted run bit for bit
 * (CSV log and summary numbers, with dropout and Adam/SGD state), the checkpoint holds
 * the expected tensors and round-trips into a model that gives the logged held-out
 * loss exactly, mismatched / truncated / corrupted checkpoints and bad options are
 * refused with exit status 2 and a message naming the problem, and a diverging run
 * stops with status 3 leaving a loadable checkpoint. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "mha.h"
#include "model.h"
#include "st.h"
#include "tasks.h"

#ifndef MHA_TRAIN_EXE
#error "MHA_TRAIN_EXE must name the mha-train program"
#endif

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mha_test_train_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Run mha-train with args (a shell word list); stdout/stderr go to <tmpdir>/<tag>.out
 * and .err. Returns the exit status (or −1 if it did not exit normally). */
static int run(const char *tag, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s/%s.out' 2> '%s/%s.err'", MHA_TRAIN_EXE, args, tmpdir,
             tag, tmpdir, tag);
    int st = system(cmd);
    return (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

/* Whole file into a NUL-terminated owned buffer (NULL if unreadable). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

static char *slurp_in(const char *rel, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    return slurp(path, len);
}

static void assert_file_contains(const char *rel, const char *needle)
{
    char *s = slurp_in(rel, NULL);
    assert_non_null(s);
    if (!strstr(s, needle))
        fail_msg("%s does not contain \"%s\":\n%s", rel, needle, s);
    free(s);
}

static double summary_number(const char *rel, const char *key)
{
    char *s = slurp_in(rel, NULL);
    assert_non_null(s);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(j);
    free(s);
    return d;
}

/* Interrupt (--stop-after 13) and resume (no other option: the config comes from the
 * checkpoint), then compare with a run never stopped: the CSV logs (every loss, lr,
 * gradient norm and held-out accuracy, printed with 17 digits), the summary numbers and
 * the final checkpoints must be identical. Three configs: 2-layer reverse with dropout
 * and AdamW, 2-layer lookup (cross-attention) with dropout and SGD momentum, causal copy
 * with Adam. */
static void test_train_resume_bitwise(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"adamw", "--task reverse --seq-len 6 --vocab 5 --layers 2 --model-dim 16 --heads 2 "
                  "--dropout 0.1 --batch 8 --steps 30 --warmup 5 --optimizer adamw --lr 0.01 "
                  "--eval-every 10 --eval-size 40 --ckpt-every 7 --threads 1 --seed 5"},
        {"sgd", "--task lookup --seq-len 3 --vocab 8 --pairs 5 --layers 2 --model-dim 8 "
                "--heads 2 --dropout 0.2 --batch 4 --steps 30 --warmup 3 --optimizer sgd "
                "--momentum 0.9 --lr 0.05 --eval-every 10 --eval-size 30 --threads 1"},
        {"copy", "--task copy --seq-len 4 --vocab 4 --layers 1 --model-dim 8 --heads 2 "
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
        /* resume with no other option: the config comes from the checkpoint */
        snprintf(args, sizeof args, "--resume '%s/%s/checkpoint.safetensors' --out '%s/%s'",
                 tmpdir, part, tmpdir, part);
        if (run(res, args) != 0) {
            snprintf(rel, sizeof rel, "%s.err", res);
            char *err = slurp_in(rel, NULL);
            fail_msg("resume failed: %s", err ? err : "?");
        }
        size_t n1, n2;
        snprintf(rel, sizeof rel, "%s/train_log.csv", full);
        char *csv1 = slurp_in(rel, &n1);
        snprintf(rel, sizeof rel, "%s/train_log.csv", part);
        char *csv2 = slurp_in(rel, &n2);
        assert_non_null(csv1);
        assert_non_null(csv2);
        if (n1 != n2 || memcmp(csv1, csv2, n1) != 0)
            fail_msg("%s: resumed log differs from the uninterrupted one:\n--- full\n%s\n--- "
                     "resumed\n%s", name, csv1, csv2);
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
        /* the final checkpoints are byte-identical too */
        snprintf(s1, sizeof s1, "%s/checkpoint.safetensors", full);
        snprintf(s2, sizeof s2, "%s/checkpoint.safetensors", part);
        char *k1 = slurp_in(s1, &n1), *k2 = slurp_in(s2, &n2);
        assert_non_null(k1);
        assert_non_null(k2);
        assert_true(n1 == n2 && memcmp(k1, k2, n1) == 0);
        free(k1);
        free(k2);
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
             "--task reverse --seq-len 5 --vocab 6 --layers 2 --model-dim 12 --heads 3 "
             "--batch 8 --steps 20 --warmup 2 --eval-size 60 --eval-every 10 --threads 1 "
             "--seed 11 --out '%s/rt'", tmpdir);
    assert_int_equal(run("rt", args), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/rt/checkpoint.safetensors", tmpdir);
    st_file *f = NULL;
    char err[256];
    assert_int_equal(st_load(path, &f, err, sizeof err), MHA_OK);
    assert_string_equal(st_meta(f, "layers"), "2");
    assert_string_equal(st_meta(f, "task"), "reverse");
    assert_string_equal(st_meta(f, "optimizer"), "adam");

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
            assert_int_equal(st_get(f, ti.name, ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                             MHA_ENOTFOUND);
            continue;
        }
        assert_int_equal(st_get(f, ti.name, ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                         MHA_OK);
        memcpy(own + ti.offset, d, ti.numel * sizeof(float));
        char mname[96];
        snprintf(mname, sizeof mname, "optimizer.exp_avg_sq.%s", ti.name);
        assert_int_equal(st_get(f, mname, ST_F32, ti.ndim, ti.shape, NULL, err, sizeof err),
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
            assert_int_equal(st_get(f, name, ST_F32, ti.ndim, ti.shape, &d, err, sizeof err),
                             MHA_OK);
            memcpy(p + ti.offset, d, ti.numel * sizeof(float));
        }
    }
    size_t one = 1;
    const void *d = NULL;
    assert_int_equal(st_get(f, "train.step", ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    assert_int_equal(*(const uint64_t *)d, 20);
    assert_int_equal(st_get(f, "data.rng", ST_U64, 1, &one, NULL, err, sizeof err), MHA_ESHAPE);
    st_free(f);

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
             "--seq-len 4 --vocab 4 --model-dim 8 --heads 2 --batch 4 --steps 6 --warmup 1 "
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
        {"--model-dim 16 --heads 3", "--heads"}, {"--dropout 1.5", "--dropout"},
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
    struct stat sb;
    char never[512];
    snprintf(never, sizeof never, "%s/never", tmpdir);
    assert_true(stat(never, &sb) != 0); /* nothing was created */
    assert_int_equal(run("help", "--help"), 0);
    const char *opts[] = {"--task", "--seq-len", "--vocab", "--layers", "--model-dim", "--heads",
                          "--dropout", "--batch", "--steps", "--optimizer", "--lr", "--seed",
                          "--threads", "--out", "--resume", "--eval-every", "--ckpt-every",
                          "--warmup", "--clip", "--weight-decay", "--pairs"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        assert_file_contains("help.out", opts[i]);
    assert_file_contains("help.out", "default: 64");         /* --model-dim */
    assert_file_contains("help.out", "default: reverse 16"); /* --seq-len per task */
}

/* A diverging run (SGD, huge lr, no clipping) stops with status 3 and a message; the
 * last checkpoint written before it is intact and loadable. */
static void test_train_nonfinite_stop(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args,
             "--seq-len 4 --vocab 4 --model-dim 8 --heads 2 --batch 8 --steps 50 --warmup 0 "
             "--optimizer sgd --momentum 0 --lr 1000000 --clip 0 --ckpt-every 1 --eval-size 20 "
             "--threads 1 --out '%s/nf'", tmpdir);
    assert_int_equal(run("nf", args), 3);
    assert_file_contains("nf.err", "non-finite");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/nf/checkpoint.safetensors", tmpdir);
    st_file *f = NULL;
    assert_int_equal(st_load(path, &f, err, sizeof err), MHA_OK);
    const void *d;
    assert_int_equal(st_get(f, "train.step", ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    assert_true(*(const uint64_t *)d >= 1);
    /* every float tensor of the last checkpoint (weights and moments) is finite */
    for (size_t i = 0; i < st_count(f); i++) {
        st_tensor t;
        assert_int_equal(st_tensor_at(f, i, &t), MHA_OK);
        if (t.dtype != ST_F32)
            continue;
        size_t n = 1;
        for (size_t k = 0; k < t.ndim; k++)
            n *= t.shape[k];
        for (size_t k = 0; k < n; k++)
            if (!isfinite(((const float *)t.data)[k]))
                fail_msg("checkpoint tensor %s[%zu] is not finite", t.name, k);
    }
    st_free(f);
}

/* Same seed, one thread: two runs give bitwise the same summary numbers; the pictures
 * and the log exist. */
static void test_train_deterministic_outputs(void **state)
{
    (void)state;
    const char *common = "--task lookup --seq-len 3 --vocab 8 --pairs 4 --model-dim 8 "
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
    assert_file_contains("d1.out", "attention_layer0.svg");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_train_resume_bitwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_checkpoint_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_resume_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_nonfinite_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_deterministic_outputs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
