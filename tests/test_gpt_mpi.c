/* Data-parallel training (mha-gpt-mpi under mpirun, train/common/dist.h), against the one-process
 * program mha-gpt on a 200,000-character slice of Tiny Shakespeare:
 *   - 2 ranks (and 3, an uneven split of the batch) follow the loss trajectory of one
 *     process with the same global batch over 100 steps within 1e-5 relative (training
 *     loss of every step, both evaluations), and end with the same weights and AdamW
 *     moments within 1e-5 — except attn.w_k.bias, whose true gradient is exactly zero (a
 *     key bias adds q·b to every score of a row, which softmax ignores): AdamW turns its
 *     rounding noise into steps of up to lr, so it is only checked to stay that small;
 *   - overlapped and after-backward gradient sums give the same checkpoint;
 *   - a run saved with 2 ranks resumes with 1 process, and one saved by 1 process resumes
 *     with 2 ranks, each continuing the same trajectory; with dropout, 2 ranks draw one
 *     process's masks (the same trajectory), and a 2-rank run resumed with 2 ranks equals
 *     the run never stopped, byte for byte;
 *   - SIGTERM to one rank stops every rank at the same step with a checkpoint that
 *     resumes; a rank killed with SIGKILL ends the job with a non-zero exit within 30 s,
 *     and the last checkpoint is intact;
 *   - --batch smaller than the number of ranks is refused (exit 2).
 * mpirun runs with --allow-run-as-root (CI is root) and --oversubscribe (3 ranks on 2
 * cores). */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mha.h"
#include "mha_safetensors.h"
#include "test_prog.h"

#if !defined(MHA_GPT_EXE) || !defined(MHA_GPT_MPI_EXE) || !defined(MHA_MPIEXEC)
#error "MHA_GPT_EXE, MHA_GPT_MPI_EXE and MHA_MPIEXEC must name the programs"
#endif

/* ASAN_OPTIONS for the ranks: Open MPI does not free all it allocates by MPI_Finalize, and
 * its plugins are unloaded by then (no suppression can name them), so in a sanitizer build
 * the ranks run without LeakSanitizer (ignored otherwise). The one-process mha-gpt, the
 * same code apart from train/common/dist.c, is leak-checked by every test that runs it. */
#define MPIRUN "--allow-run-as-root --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 -np"

/* mha-gpt (one process) and mha-gpt-mpi under mpirun with n ranks; stdout/stderr to
 * <tag>.out/.err in tmpdir. Return the exit status. */
static int gpt1(const char *tag, const char *args)
{
    return run_prog(MHA_GPT_EXE, tag, args);
}

static int gptn(int n, const char *tag, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, MPIRUN " %d '%s' %s", n, MHA_GPT_MPI_EXE, args);
    return run_prog(MHA_MPIEXEC, tag, cmd);
}

/* small.txt: the first 200,000 characters of Tiny Shakespeare. */
static void write_small_text(void)
{
    char *all = slurp(MHA_SOURCE_DIR "/data/tinyshakespeare.txt", NULL);
    assert_non_null(all);
    write_file("small.txt", all, 200000);
    free(all);
}

/* 2 blocks, width 32, context 32, global batch 6 (3 ranks: 2 windows each; 4 ranks would
 * split it 2,2,1,1); dropout 0, as the default. */
#define RUN "train --data small.txt --layers 2 --heads 2 --dim 32 --context 32 --batch 6 " \
            "--warmup 10 --lr 1e-3 --eval-every 50 --eval-batches 3 --threads 1 "          \
            "--sample-chars 0 --ckpt-every 0"

/* The columns of a run's train_log.csv: rows[step-1][col], col as in its header
 * (step,train_loss,lr,grad_norm,eval_train_loss,eval_val_loss; NaN when empty). */
enum { LOG_COLS = 6, LOG_MAX = 128 };
static size_t read_log(const char *path, double rows[LOG_MAX][LOG_COLS])
{
    char *text = slurp(path, NULL);
    assert_non_null(text);
    size_t n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "step", 4) == 0)
            continue;
        assert_true(n < LOG_MAX);
        const char *p = line;
        for (int c = 0; c < LOG_COLS; c++) {
            char *end;
            rows[n][c] = (*p == ',' || *p == '\0') ? NAN : strtod(p, &end);
            if (!(*p == ',' || *p == '\0'))
                p = end;
            if (*p == ',')
                p++;
        }
        n++;
    }
    free(text);
    return n;
}

/* Fails unless logs a and b have the same steps and every number agrees within rel
 * (relative; both empty where one is): the losses and the learning rate; the gradient
 * norm (column 3) within 100·rel — it includes the key biases' gradients, which are pure
 * rounding noise (see the file comment) and differ wholly between summation orders.
 * Measured over seeds 1–8, with and without dropout, at this lr: losses ≤ 4e-7, gradient
 * norms ≤ 1e-4. (At lr 3e-3 this tiny model has loss spikes that amplify any rounding
 * difference: seed 6 drifted to 9e-5 by step 100 — chaos, not a rank-count effect.) */
static void assert_same_trajectory(const char *a, const char *b, double rel_loss)
{
    static double ra[LOG_MAX][LOG_COLS], rb[LOG_MAX][LOG_COLS];
    const size_t na = read_log(a, ra), nb = read_log(b, rb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++)
        for (int c = 0; c < LOG_COLS; c++) {
            if (isnan(ra[i][c]) || isnan(rb[i][c])) {
                if (isnan(ra[i][c]) != isnan(rb[i][c]))
                    fail_msg("%s vs %s: row %zu column %d: %g vs %g", a, b, i + 1, c, ra[i][c],
                             rb[i][c]);
                continue;
            }
            const double rel = c == 3 ? 100 * rel_loss : rel_loss;
            if (fabs(ra[i][c] - rb[i][c]) > rel * fabs(rb[i][c]))
                fail_msg("%s vs %s: step %g column %d: %.9g vs %.9g (relative %.2e > %.0e)", a,
                         b, ra[i][0], c, ra[i][c], rb[i][c],
                         fabs(ra[i][c] - rb[i][c]) / fabs(rb[i][c]), rel);
        }
}

/* Fails unless checkpoints a and b hold the same tensors and every F32 element agrees
 * within tol·max(1, |b|), U64 tensors exactly; attn.w_k.bias and its moments only within
 * wk_tol (see the file comment). */
static void assert_close_checkpoints(const char *a, const char *b, double tol, double wk_tol)
{
    char pa[512], pb[512], err[256];
    snprintf(pa, sizeof pa, "%s/%s", tmpdir, a);
    snprintf(pb, sizeof pb, "%s/%s", tmpdir, b);
    mha_st_file *fa = NULL, *fb = NULL;
    assert_int_equal(mha_st_load(pa, &fa, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_load(pb, &fb, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_count(fa), mha_st_count(fb));
    size_t checked = 0;
    for (size_t i = 0; i < mha_st_count(fa); i++) {
        mha_st_tensor x, y;
        assert_int_equal(mha_st_tensor_at(fa, i, &x), MHA_OK);
        assert_int_equal(mha_st_tensor_at(fb, i, &y), MHA_OK);
        assert_string_equal(x.name, y.name);
        assert_int_equal(x.dtype, y.dtype);
        size_t n = 1;
        for (size_t d = 0; d < x.ndim; d++)
            n *= x.shape[d];
        if (x.dtype == MHA_ST_U64) {
            assert_memory_equal(x.data, y.data, n * sizeof(uint64_t));
            continue;
        }
        if (x.dtype != MHA_ST_F32)
            continue; /* best.val_loss (F64): an evaluation, compared through the logs */
        const double t = strstr(x.name, "attn.w_k.bias") ? wk_tol : tol;
        const float *u = x.data, *v = y.data;
        for (size_t k = 0; k < n; k++)
            if (!(fabs((double)u[k] - v[k]) <= t * fmax(1.0, fabs((double)v[k]))))
                fail_msg("%s vs %s: %s[%zu] = %.9g vs %.9g (limit %.0e)", a, b, x.name, k, u[k],
                         v[k], t);
        checked++;
    }
    assert_true(checked > 30);
    mha_st_free(fa);
    mha_st_free(fb);
}

/* 1 process vs 2 and 3 ranks over 100 steps; overlap vs after-backward sums. */
static void test_mpi_matches_one_process(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt1("one", RUN " --steps 100 --out one"), 0);
    assert_prog_status(gptn(2, "two", RUN " --steps 100 --out two"), 0, "two");
    assert_file_contains("two.out", "2 ranks (MPI), each with 3 or 3 of the 6 windows");
    assert_prog_status(gptn(3, "three", RUN " --steps 100 --out three"), 0, "three");
    assert_same_trajectory("one/train_log.csv", "two/train_log.csv", 1e-5);
    assert_same_trajectory("one/train_log.csv", "three/train_log.csv", 1e-5);
    /* AdamW moves the free key bias by at most lr (1e-3) a step: 100 steps, 0.1 */
    assert_close_checkpoints("one/checkpoint.safetensors", "two/checkpoint.safetensors", 1e-5,
                             0.1);
    assert_close_checkpoints("one/checkpoint.safetensors", "three/checkpoint.safetensors",
                             1e-5, 0.1);
    assert_int_equal((int)summary_number("two/summary.json", "ranks"), 2);
    assert_prog_status(gptn(2, "after", RUN " --steps 100 --grad-sync after --out after"), 0, "after");
    assert_same_checkpoint("two/checkpoint.safetensors", "after/checkpoint.safetensors");
}

/* Stop at step 50 with one rank count, resume to 100 with the other. */
static void test_mpi_resume_across_rank_counts(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gpt1("ref", RUN " --steps 100 --out ref"), 0);
    assert_prog_status(gptn(2, "a1", RUN " --steps 100 --stop-after 50 --out a"), 0, "a1");
    assert_file_contains("a1.out", "stopped after step 50 of 100");
    assert_int_equal(gpt1("a2", "train --resume a/checkpoint.safetensors"), 0);
    assert_same_trajectory("ref/train_log.csv", "a/train_log.csv", 1e-5);
    assert_close_checkpoints("ref/checkpoint.safetensors", "a/checkpoint.safetensors", 1e-5,
                             0.1);
    assert_int_equal(gpt1("b1", RUN " --steps 100 --stop-after 50 --out b"), 0);
    assert_prog_status(gptn(2, "b2", "train --resume b/checkpoint.safetensors"), 0, "b2");
    assert_file_contains("b2.out", "2 ranks (MPI)");
    assert_same_trajectory("ref/train_log.csv", "b/train_log.csv", 1e-5);
    assert_close_checkpoints("ref/checkpoint.safetensors", "b/checkpoint.safetensors", 1e-5,
                             0.1);
}

/* With dropout, rank r draws the masks of its windows' places in the step's batch
 * (mha_gpt_set_dropout_batch_offset), so 2 ranks follow the one-process trajectory (1e-5)
 * with dropout too; and a 2-rank run stopped and resumed with 2 ranks equals the run never
 * stopped, byte for byte. */
static void test_mpi_dropout(void **state)
{
    (void)state;
    write_small_text();
    assert_prog_status(gptn(2, "d", RUN " --steps 60 --dropout 0.1 --out d"), 0, "d");
    assert_prog_status(gptn(2, "e1", RUN " --steps 60 --dropout 0.1 --stop-after 30 --out e"), 0, "e1");
    assert_prog_status(gptn(2, "e2", "train --resume e/checkpoint.safetensors"), 0, "e2");
    assert_same_log("d/train_log.csv", "e/train_log.csv");
    assert_same_checkpoint("d/checkpoint.safetensors", "e/checkpoint.safetensors");
    assert_same_checkpoint("d/best.safetensors", "e/best.safetensors");
    assert_int_equal(gpt1("o", RUN " --steps 60 --dropout 0.1 --out o"), 0);
    assert_same_trajectory("o/train_log.csv", "d/train_log.csv", 1e-5);
    assert_close_checkpoints("o/checkpoint.safetensors", "d/checkpoint.safetensors", 1e-5, 0.1);
}

/* ---- signals and failures ------------------------------------------------------------- */

/* Start `mpirun -np 2 mha-gpt-mpi args` in tmpdir (stdout/stderr to <tag>.out/.err);
 * returns mpirun's pid. */
static pid_t start_mpi(const char *tag, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec '%s' " MPIRUN " 2 '%s' %s >%s.out 2>%s.err", MHA_MPIEXEC,
             MHA_GPT_MPI_EXE, args, tag, tag);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(tmpdir) != 0)
            _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void nap(void) /* 20 ms */
{
    const struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The rank (OMPI_COMM_WORLD_RANK in its environment) of process pid, or -1. */
static int rank_of(long pid)
{
    char path[64], buf[16384];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    const size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    static const char key[] = "OMPI_COMM_WORLD_RANK=";
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, key, sizeof key - 1) == 0)
            return atoi(buf + i + sizeof key - 1);
    return -1;
}

/* The ranks of the job running mha-gpt-mpi with `mark` among its arguments: pids[r] for
 * ranks r < 2 (0 where none runs). Returns how many were found. mpirun's own arguments
 * name the program too; it is skipped by requiring argv[0] to be the program. */
static size_t rank_pids(const char *mark, pid_t pids[2])
{
    size_t n = 0;
    pids[0] = pids[1] = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        const long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        char buf[4096];
        const size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        if (len == 0 || strcmp(buf, MHA_GPT_MPI_EXE) != 0)
            continue; /* argv[0] must be the program */
        for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
            if (strcmp(buf + i, mark) == 0) {
                const int r = rank_of(pid);
                if (r == 0 || r == 1) {
                    pids[r] = (pid_t)pid;
                    n++;
                }
                break;
            }
    }
    closedir(d);
    return n;
}

/* Waits up to `limit` seconds for pid; returns its wait status, or -1 on time-out (the
 * process group is then killed). */
static int wait_for(pid_t pid, double limit)
{
    const double t0 = now_s();
    for (;;) {
        int status;
        const pid_t w = waitpid(pid, &status, WNOHANG);
        assert_true(w >= 0);
        if (w == pid)
            return status;
        if (now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nap();
    }
}

/* Waits (≤ 60 s) until the job's two ranks run and `file` exists in tmpdir. */
static void wait_for_ranks_and(const char *mark, const char *file, pid_t job, pid_t pids[2])
{
    const double t0 = now_s();
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    while (rank_pids(mark, pids) < 2 || !file_exists(path)) {
        int status;
        if (waitpid(job, &status, WNOHANG) == job)
            fail_msg("the job ended before %s appeared", file);
        if (now_s() - t0 > 60) {
            kill(job, SIGKILL);
            waitpid(job, &status, 0);
            fail_msg("no two ranks and %s after 60 s", file);
        }
        nap();
    }
}

#define LONG RUN " --steps 1000000 --eval-every 1000"

/* SIGTERM to rank 1: every rank stops at the same step (else their collectives would not
 * match), rank 0 writes the checkpoint and says why, the job exits 143 (every rank does,
 * and mpirun passes it on), and the checkpoint resumes. */
static void test_mpi_sigterm_to_one_rank(void **state)
{
    (void)state;
    write_small_text();
    const pid_t job = start_mpi("t", LONG " --ckpt-every 100 --out term");
    pid_t pids[2];
    wait_for_ranks_and("term", "term/checkpoint.safetensors", job, pids);
    kill(pids[1], SIGTERM);
    const int status = wait_for(job, 30);
    assert_true(status != -1);
    /* every rank exits 143 (rank 0 for rank 1's signal too), and mpirun passes it on */
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 143);
    assert_file_contains("t.out", "(a signal to another rank); continue with --resume");
    const double stopped = summary_number("term/summary.json", "steps");
    assert_true(stopped >= 100);
    char args[160];
    snprintf(args, sizeof args, "train --resume term/checkpoint.safetensors --stop-after %.0f",
             stopped + 5);
    assert_int_equal(gpt1("r", args), 0);
    assert_true(summary_number("term/summary.json", "steps") == stopped + 5);
}

/* SIGKILL to a rank (rank 0 or not): the job ends non-zero within 30 s and the last
 * checkpoint is intact (it loads and resumes). */
static void test_mpi_killed_rank_ends_job(void **state)
{
    (void)state;
    write_small_text();
    for (int victim = 0; victim < 2; victim++) {
        char out[32], args[512], tag[16];
        snprintf(out, sizeof out, "kill%d", victim);
        snprintf(tag, sizeof tag, "k%d", victim);
        snprintf(args, sizeof args, LONG " --ckpt-every 20 --out %s", out);
        const pid_t job = start_mpi(tag, args);
        pid_t pids[2];
        char ck[64];
        snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", out);
        wait_for_ranks_and(out, ck, job, pids);
        const double t0 = now_s();
        kill(pids[victim], SIGKILL);
        const int status = wait_for(job, 30);
        if (status == -1)
            fail_msg("the job still ran 30 s after a rank was killed");
        assert_true(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
        assert_true(now_s() - t0 < 30);
        pid_t left[2];
        const double t1 = now_s();
        while (rank_pids(out, left) > 0 && now_s() - t1 < 10)
            nap();
        assert_int_equal(rank_pids(out, left), 0); /* no rank left behind */
        /* the last checkpoint loads, and resumes for 3 more steps */
        char path[600], err[256];
        snprintf(path, sizeof path, "%s/%s", tmpdir, ck);
        mha_st_file *f = NULL;
        assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
        const void *d;
        uint64_t step;
        assert_int_equal(mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, err, sizeof err), MHA_OK);
        memcpy(&step, d, sizeof step);
        mha_st_free(f);
        assert_true(step >= 20 && step % 20 == 0);
        char resume[160];
        snprintf(resume, sizeof resume, "train --resume %s --stop-after %llu", ck,
                 (unsigned long long)step + 3);
        assert_int_equal(gpt1(tag, resume), 0);
    }
}

static void test_mpi_refuses_batch_below_ranks(void **state)
{
    (void)state;
    write_small_text();
    assert_int_equal(gptn(2, "b", "train --data small.txt --batch 1 --steps 10 --warmup 1 "
                                  "--out b"),
                     2);
    assert_file_contains("b.err", "invalid value '1' for --batch: less than the 2 ranks");
}

/* mha-gpt-mpi with rank 0 working in tmpdir/A and rank 1 in tmpdir/B (each with its own
 * files under the same names), the same args for both. Returns mpirun's exit status. Each
 * app context gets its own -x (the first context's does not reach the second). */
static int two_dirs(const char *tag, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "--allow-run-as-root --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 "
             "-np 1 -wdir '%s/A' '%s' %s : -x ASAN_OPTIONS=detect_leaks=0 -np 1 -wdir '%s/B' "
             "'%s' %s",
             tmpdir, MHA_GPT_MPI_EXE, args, tmpdir, MHA_GPT_MPI_EXE, args);
    return run_prog(MHA_MPIEXEC, tag, cmd);
}

/* One rank alone in tmpdir/<dir>. */
static int one_in(const char *dir, const char *tag, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, MPIRUN " 1 -wdir '%s/%s' '%s' %s", tmpdir, dir, MHA_GPT_MPI_EXE,
             args);
    return run_prog(MHA_MPIEXEC, tag, cmd);
}

/* Ranks that were given other files stop together before anything is decided (exit 2),
 * rank 0 naming the rank and the file: a text of the same name but other content; a stale
 * copy of the checkpoint to resume (which would otherwise decide "finished" alone, or train
 * from another state). The same files on both: the run goes. A checkpoint of another run
 * (whose options differ too) is named as the checkpoint. */
static void test_mpi_ranks_agree(void **state)
{
    (void)state;
    char *all = slurp(MHA_SOURCE_DIR "/data/tinyshakespeare.txt", NULL);
    assert_non_null(all);
    char dir[1024];
    for (const char *d = "AB"; *d; d++) {
        snprintf(dir, sizeof dir, "%s/%c", tmpdir, *d);
        assert_int_equal(mkdir(dir, 0755), 0);
    }
    write_file("A/d.txt", all, 20000);
    const char keep = all[100];
    all[100] = keep == 'e' ? 'a' : 'e'; /* one character changed */
    write_file("B/d.txt", all, 20000);
#define SMALL "train --data d.txt --layers 1 --heads 2 --dim 32 --context 16 --batch 4 " \
              "--warmup 2 --eval-every 5 --eval-batches 2 --threads 1 --sample-chars 0 "
    assert_int_equal(two_dirs("data", SMALL "--steps 10 --out r"), 2);
    assert_file_contains("data.err", "rank 1 was given another --data d.txt than rank 0");
    assert_false(file_exists("A/r/checkpoint.safetensors"));
    /* the same text; rank 1's checkpoint is an older one (step 5 of the same run) */
    all[100] = keep;
    write_file("B/d.txt", all, 20000);
    free(all);
    assert_int_equal(one_in("B", "b5", SMALL "--steps 10 --stop-after 5 --out r"), 0);
    assert_int_equal(one_in("A", "a10", SMALL "--steps 10 --out r"), 0);
    assert_int_equal(two_dirs("stale", "train --resume r/checkpoint.safetensors --steps 20"), 2);
    assert_file_contains("stale.err",
                         "rank 1 was given another checkpoint (--resume r/checkpoint.safetensors)");
    /* the same checkpoint everywhere: it goes on to step 20 */
    char cp[2048];
    snprintf(cp, sizeof cp, "cp '%s/A/r/checkpoint.safetensors' '%s/B/r/checkpoint.safetensors'",
             tmpdir, tmpdir);
    assert_int_equal(system(cp), 0);
    if (two_dirs("same", "train --resume r/checkpoint.safetensors --steps 20") != 0) {
        char *e = slurp("same.err", NULL);
        fail_msg("the ranks with the same files did not train: %s", e ? e : "?");
    }
    assert_file_contains("same.out", "resumed from r/checkpoint.safetensors at step 10");
    /* rank 1's checkpoint is of another run (another --seed): the options not given are the
     * checkpoint's, so they differ too, but the checkpoint is named as the cause (the
     * message said only "another set of options") */
    snprintf(dir, sizeof dir, "%s/B/r", tmpdir);
    assert_int_equal(remove_tree(dir), 0);
    assert_int_equal(one_in("B", "b5s", SMALL "--seed 7 --steps 30 --stop-after 5 --out r"), 0);
    assert_int_equal(two_dirs("other", "train --resume r/checkpoint.safetensors --steps 30"), 2);
    assert_file_contains("other.err", "rank 1 was given another checkpoint (--resume "
                                      "r/checkpoint.safetensors) and another set of options "
                                      "than rank 0");
#undef SMALL
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mpi_matches_one_process, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_resume_across_rank_counts, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_dropout, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_sigterm_to_one_rank, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_killed_rank_ends_job, tmpdir_setup,
                                        tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_ranks_agree, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_mpi_refuses_batch_below_ranks, tmpdir_setup,
                                        tmpdir_teardown),
    };
    const char *only = getenv("MHA_TEST_FILTER"); /* e.g. "test_mpi_ranks_agree": it alone */
    if (only && only[0])
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
