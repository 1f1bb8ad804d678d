/* What protects a user's run directory in mha-gpt and mha-g2p (train/common/report.c,
 * rundir.c, ckpt.c), each defect reproduced by running the program as a child process,
 * every child bounded by a timeout:
 *   - the log is appended, never rewritten: processes resuming a run killed at random
 *     moments (during the resume's log handling among them) leave every row up to the
 *     checkpoint's step; a resume cuts the rows after it at a line boundary;
 *   - a write error while logging (a file size limit, as a full disk) stops the run with
 *     exit 1, whole log lines only, naming the last checkpoint as intact; it resumes. */
#include "test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "mha.h"
#include "st.h"
#include "test_prog.h"

enum { TIMEOUT = 120 }; /* seconds any one child may run */

static int gpt(const char *tag, const char *args)
{
    return run_prog_limited(MHA_GPT_EXE, tag, args, TIMEOUT, 0);
}

/* small.txt: the first 20,000 characters of Tiny Shakespeare. */
static void write_small_text(void)
{
    char *all = slurp(MHA_SOURCE_DIR "/data/tinyshakespeare.txt", NULL);
    assert_non_null(all);
    write_file("small.txt", all, 20000);
    free(all);
}

#define TINY "--data small.txt --layers 1 --heads 2 --dim 32 --context 16 --batch 8 " \
             "--eval-batches 4 --threads 1 --sample-chars 0"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* train.step of checkpoint path (relative to tmpdir). */
static uint64_t ckpt_step(const char *path)
{
    char full[512], err[256];
    snprintf(full, sizeof full, "%s/%s", tmpdir, path);
    st_file *f = NULL;
    if (st_load(full, &f, err, sizeof err) != MHA_OK)
        fail_msg("%s: %s", path, err);
    const void *d = NULL;
    assert_int_equal(st_get(f, "train.step", ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
    uint64_t s;
    memcpy(&s, d, sizeof s);
    st_free(f);
    return s;
}

/* The log at path starts with the header and then rows 1, 2, ... each a whole line; the
 * number of such consecutive rows (a step-0 row is skipped). Fails on a torn line. */
static size_t log_rows(const char *path)
{
    size_t len;
    char *t = slurp(path, &len);
    assert_non_null(t);
    if (len == 0 || t[len - 1] != '\n')
        fail_msg("%s does not end with a whole line (%zu bytes)", path, len);
    char *line = strchr(t, '\n');
    assert_non_null(line);
    size_t rows = 0;
    for (line++; *line; line = strchr(line, '\n') + 1) {
        unsigned long long s = strtoull(line, NULL, 10);
        if (s == 0 && rows == 0)
            continue;
        if (s != rows + 1)
            fail_msg("%s: row %zu is step %llu", path, rows + 1, s);
        rows++;
    }
    free(t);
    return rows;
}

/* ---- the log ------------------------------------------------------------------------- */

/* A run killed after its checkpoint leaves log rows past the checkpoint's step. Processes
 * resuming it, each killed (SIGKILL) after 0 to 40 ms — while loading, while handling the
 * log, while training — never lose a row up to the checkpoint's step, and the rows kept
 * are the original bytes; the last resume cuts the rows after the checkpoint and
 * continues from it. (The old resume rewrote the log in place: a kill in that window left
 * it cut short, and the next resume dropped the whole history.) */
static void rundir_log_survives_kills(void **state)
{
    (void)state;
    write_small_text();
    pid_t pid = start_prog(MHA_GPT_EXE, "a", "train " TINY " --steps 100000 --warmup 10 "
                           "--eval-every 100000 --ckpt-every 300 --out o", TIMEOUT);
    for (int i = 0; i < 3000 && count_lines("o/train_log.csv") < 700; i++)
        sleep_ms(10);
    kill(pid, SIGKILL);
    assert_int_equal(wait_prog(pid), -1 - SIGKILL);
    const uint64_t s = ckpt_step("o/checkpoint.safetensors");
    assert_true(s >= 300 && s % 300 == 0);
    size_t n0;
    char *orig = slurp("o/train_log.csv", &n0);
    assert_non_null(orig);
    /* the original's bytes up to the row of step s */
    char key[32];
    snprintf(key, sizeof key, "\n%llu,", (unsigned long long)s);
    const char *rs = strstr(orig, key);
    assert_non_null(rs);
    const size_t keep = (size_t)(strchr(rs + 1, '\n') + 1 - orig);
    for (int trial = 0; trial < 24; trial++) {
        pid = start_prog(MHA_GPT_EXE, "r", "train --resume o/checkpoint.safetensors "
                         "--steps 100000 --ckpt-every 100000", TIMEOUT);
        sleep_ms((trial * 7) % 41);
        kill(pid, SIGKILL);
        wait_prog(pid);
        size_t n;
        char *now = slurp("o/train_log.csv", &n);
        assert_non_null(now);
        if (n < keep || memcmp(now, orig, keep) != 0)
            fail_msg("trial %d: the log lost rows up to step %llu (%zu of %zu bytes kept)",
                     trial, (unsigned long long)s, n, keep);
        free(now);
    }
    char args[256];
    snprintf(args, sizeof args, "train --resume o/checkpoint.safetensors --stop-after %llu",
             (unsigned long long)s + 20);
    assert_int_equal(gpt("fin", args), 0);
    assert_int_equal(log_rows("o/train_log.csv"), s + 20);
    char *err = slurp("fin.err", NULL);
    assert_non_null(err);
    assert_null(strstr(err, "incomplete"));
    free(err);
    char *now = slurp("o/train_log.csv", NULL);
    assert_non_null(now);
    assert_int_equal(memcmp(now, orig, keep), 0);
    free(now);
    free(orig);
}

/* A log that lacks rows up to the checkpoint's step (here: cut by hand) is not dropped:
 * it is kept as train_log.csv.incomplete, said on stderr, and a new log goes on. */
static void rundir_incomplete_log_kept(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt("a", "train " TINY " --steps 40 --warmup 2 --eval-every 20 "
                              "--stop-after 30 --out o"), 0);
    size_t n;
    char *log = slurp("o/train_log.csv", &n);
    assert_non_null(log);
    write_file("o/train_log.csv", log, n / 2);
    assert_int_equal(gpt("b", "train --resume o/checkpoint.safetensors"), 0);
    assert_file_contains("b.err", "train_log.csv.incomplete");
    size_t m;
    char *kept = slurp("o/train_log.csv.incomplete", &m);
    assert_non_null(kept);
    assert_true(m == n / 2 && memcmp(kept, log, m) == 0);
    assert_file_contains("o/train_log.csv", "\n31,");
    assert_file_contains("o/train_log.csv", "\n40,");
    free(kept);
    free(log);
}

/* A write error while logging (a 40 kB file size limit: the checkpoints of this small
 * model fit, the log grows past it) stops the run at once with exit 1, naming the log and
 * the last checkpoint, which is intact; the log holds whole rows only; the run resumes
 * from that checkpoint without the limit. (Before, row writes went unchecked: the log
 * stopped mid-number and training went on.) */
static void rundir_log_write_error(void **state)
{
    (void)state;
    write_small_text();
    const int rc = run_prog_limited(MHA_GPT_EXE, "full", "train --data small.txt --layers 1 "
                                    "--heads 2 --dim 8 --context 8 --batch 4 --eval-batches 2 "
                                    "--threads 1 --sample-chars 0 --steps 3000 --warmup 10 "
                                    "--eval-every 1000 --ckpt-every 100 --out o",
                                    TIMEOUT, 40000);
    assert_int_equal(rc, 1);
    assert_file_contains("full.err", "cannot write o/train_log.csv");
    assert_file_contains("full.err", "is intact");
    assert_file_contains("full.err", "--resume o/checkpoint.safetensors");
    const size_t rows = log_rows("o/train_log.csv");
    const uint64_t s = ckpt_step("o/checkpoint.safetensors");
    assert_true(rows < 3000 && s <= rows && s % 100 == 0 && s > 0);
    char args[256];
    snprintf(args, sizeof args, "train --resume o/checkpoint.safetensors --stop-after %llu",
             (unsigned long long)s + 10);
    assert_int_equal(gpt("res", args), 0);
    assert_int_equal(log_rows("o/train_log.csv"), s + 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(rundir_log_survives_kills, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(rundir_incomplete_log_kept, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(rundir_log_write_error, tmpdir_setup, tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
