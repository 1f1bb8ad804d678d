/*
 * mha-g2p-mpi under mpirun (train/common/dist.h) against the one-process mha-g2p: 2 and 3
 * ranks follow the one-process trajectory (every step's training loss within 1e-5
 * relative: the same global batch, dropout drawn by each row's place in it, gradients
 * summed weighted by each rank's share of the scored positions), and a run resumed with
 * another number of ranks continues it. mpirun runs with --allow-run-as-root (CI is root)
 * and --oversubscribe (3 ranks on 2 cores).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_prog.h"
#include "test_util.h"

#if !defined(MHA_G2P_EXE) || !defined(MHA_G2P_MPI_EXE) || !defined(MHA_MPIEXEC)
#error "MHA_G2P_EXE, MHA_G2P_MPI_EXE and MHA_MPIEXEC must name the programs"
#endif

/* as tests/test_gpt_mpi.c: no LeakSanitizer in the ranks (Open MPI's own allocations) */
#define MPIRUN "--allow-run-as-root --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 -np"

static int g2pn(int n, const char *tag, const char *args)
{
    if (n == 1)
        return run_prog(MHA_G2P_EXE, tag, args);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, MPIRUN " %d '%s' %s", n, MHA_G2P_MPI_EXE, args);
    return run_prog(MHA_MPIEXEC, tag, cmd);
}

/* The first 3000 lines of CMUdict. */
static void write_small_dict(void)
{
    char *all = slurp(MHA_SOURCE_DIR "/data/cmudict.dict", NULL);
    assert_non_null(all);
    char *p = all;
    for (int i = 0; i < 3000; i++)
        p = strchr(p, '\n') + 1;
    write_file("d.dict", all, (size_t)(p - all));
    free(all);
}

/* float32: the default, --precision auto, follows peaks each start measures */
#define TINY "train --precision fp32 --data d.dict --enc-layers 1 --dec-layers 1 --dim 16 " \
             "--heads 2 --mlp-dim 32 --batch 12 --threads 1 --eval-words 40 --eval-every 10 " \
             "--dropout 0.1"

/* Column 2 (the training loss) of every row of a train_log.csv, into loss[] (n rows). */
static size_t read_losses(const char *path, double *loss, size_t cap)
{
    char *log = slurp(path, NULL);
    assert_non_null(log);
    size_t n = 0;
    for (char *line = strchr(log, '\n'); line && line[1] && n < cap; line = strchr(line + 1, '\n'))
        if (sscanf(line + 1, "%*d,%lf", &loss[n]) == 1)
            n++;
    free(log);
    return n;
}

static void assert_same_trajectory(const char *a, const char *b, size_t steps)
{
    double la[64], lb[64];
    assert_int_equal(read_losses(a, la, 64), steps);
    assert_int_equal(read_losses(b, lb, 64), steps);
    for (size_t i = 0; i < steps; i++)
        if (!(fabs(la[i] - lb[i]) <= 1e-5 * fabs(la[i])))
            fail_msg("step %zu: loss %.9g (%s) vs %.9g (%s)", i + 1, la[i], a, lb[i], b);
}

static void g2p_mpi_matches_one_process(void **state)
{
    (void)state;
    write_small_dict();
    assert_prog_status(g2pn(1, "one", TINY " --steps 20 --out one"), 0, "one");
    assert_prog_status(g2pn(2, "two", TINY " --steps 20 --out two"), 0, "two");
    assert_prog_status(g2pn(3, "three", TINY " --steps 20 --out three"), 0, "three");
    assert_same_trajectory("one/train_log.csv", "two/train_log.csv", 20);
    assert_same_trajectory("one/train_log.csv", "three/train_log.csv", 20);
    /* 2 ranks for 10 steps, then one process to 20: the same trajectory */
    assert_prog_status(g2pn(2, "r1", TINY " --steps 20 --stop-after 10 --out r"), 0, "r1");
    assert_prog_status(g2pn(1, "r2", "train --resume r/checkpoint.safetensors"), 0, "r2");
    assert_same_trajectory("one/train_log.csv", "r/train_log.csv", 20);
    /* --batch below the number of ranks is refused */
    assert_prog_status(g2pn(3, "small", TINY " --batch 2 --steps 2 --out s"), 2, "small");
}

/* Ranks given dictionaries of the same name but other content stop together before
 * anything is decided (exit 2), rank 0 naming the rank and the file; nothing is written. */
static void g2p_mpi_ranks_agree(void **state)
{
    (void)state;
    write_small_dict();
    char *all = slurp("d.dict", NULL);
    assert_non_null(all);
    char dir[1024];
    for (const char *d = "AB"; *d; d++) {
        snprintf(dir, sizeof dir, "%s/%c", tmpdir, *d);
        assert_int_equal(mkdir(dir, 0755), 0);
    }
    const size_t n = strlen(all);
    write_file("A/d.dict", all, n);
    write_file("B/d.dict", all, n - 200); /* fewer entries */
    free(all);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "--allow-run-as-root --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 "
             "-np 1 -wdir '%s/A' '%s' " TINY " --steps 10 --out r : "
             "-x ASAN_OPTIONS=detect_leaks=0 -np 1 -wdir '%s/B' '%s' " TINY " --steps 10 --out r",
             tmpdir, MHA_G2P_MPI_EXE, tmpdir, MHA_G2P_MPI_EXE);
    assert_int_equal(run_prog(MHA_MPIEXEC, "agree", cmd), 2);
    assert_file_contains("agree.err", "rank 1 was given another --data d.dict than rank 0");
    assert_false(file_exists("A/r/checkpoint.safetensors"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(g2p_mpi_ranks_agree, tmpdir_setup, tmpdir_teardown),
        cmocka_unit_test_setup_teardown(g2p_mpi_matches_one_process, tmpdir_setup,
                                        tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
