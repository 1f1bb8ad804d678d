/* The library's thread team (src/pool.h): every chunk of a loop runs exactly once, on a slot
 * below the thread count that no other running chunk holds; ranges tile the loop; a task's
 * own loops and a second caller's loops run in their calling thread; loops after a fork
 * and under thousands of back-to-back jobs (the shape of a training step) all complete; the
 * waiting policy reads the system's runnable tasks and spins short beside other work. */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "test_util.h"

enum { MAX_N = 4096, MAX_SLOTS = 16 };

/* What a loop saw: per chunk how many times it ran, per slot whether a chunk holds it. */
typedef struct seen {
    atomic_int runs[MAX_N];
    atomic_int busy[MAX_SLOTS];
    atomic_int bad_slot, overlap, in_task_missing;
    int threads;
    int alone_allowed; /* another caller may hold the team: chunks may run unmarked */
    unsigned spin;     /* iterations of busy work per chunk (to let chunks overlap) */
} seen;

static void count_task(void *ctx, size_t i, int slot)
{
    seen *s = ctx;
    if (slot < 0 || slot >= s->threads || slot >= MAX_SLOTS) {
        atomic_store(&s->bad_slot, 1);
        return;
    }
    if (atomic_exchange(&s->busy[slot], 1))
        atomic_store(&s->overlap, 1);
    if (s->threads > 1 && !s->alone_allowed && !mha__pool_in_task())
        atomic_store(&s->in_task_missing, 1);
    volatile unsigned x = 0;
    for (unsigned k = 0; k < s->spin; k++)
        x += k;
    (void)x; /* the loop is the work; clang warns of a variable only written */
    atomic_fetch_add(&s->runs[i], 1);
    atomic_store(&s->busy[slot], 0);
}

static void check_loop_(int threads, size_t n, unsigned spin, int alone_allowed)
{
    seen *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->threads = threads;
    s->spin = spin;
    s->alone_allowed = alone_allowed;
    mha__pool_for(threads, n, count_task, s);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&s->runs[i]), 1);
    for (size_t i = n; i < MAX_N; i++)
        assert_int_equal(atomic_load(&s->runs[i]), 0);
    assert_int_equal(atomic_load(&s->bad_slot), 0);
    assert_int_equal(atomic_load(&s->overlap), 0);
    if (n > 1)
        assert_int_equal(atomic_load(&s->in_task_missing), 0);
    free(s);
}

static void check_loop(int threads, size_t n, unsigned spin)
{
    check_loop_(threads, n, spin, 0);
}

/* every chunk once, for thread counts and loop lengths around the edges */
static void test_each_chunk_once(void **state)
{
    (void)state;
    const int threads[] = {1, 2, 3, 4, 8};
    const size_t ns[] = {0, 1, 2, 3, 7, 64, 1000, MAX_N};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            check_loop(threads[t], ns[k], 0);
            check_loop(threads[t], ns[k], 2000);
        }
}

/* many short jobs back to back, as a training step runs them: none lost, none hangs */
static void test_back_to_back(void **state)
{
    (void)state;
    for (int r = 0; r < 20000; r++)
        check_loop(2 + r % 3, (size_t)(1 + r % 17), r % 5 == 0 ? 500 : 0);
}

typedef struct range_seen {
    atomic_int runs[MAX_N];
    atomic_int calls, short_range, bad_slot;
    size_t grain, n;
    int threads;
} range_seen;

static void range_task(void *ctx, size_t i0, size_t i1, int slot)
{
    range_seen *s = ctx;
    atomic_fetch_add(&s->calls, 1);
    if (slot < 0 || slot >= (s->threads > 1 ? s->threads : 1))
        atomic_store(&s->bad_slot, 1);
    if (i1 - i0 < s->grain && i1 != s->n) /* only the last range may be short */
        atomic_store(&s->short_range, 1);
    for (size_t i = i0; i < i1; i++)
        atomic_fetch_add(&s->runs[i], 1);
}

/* ranges tile [0, n), none shorter than the grain but the last, a few per thread */
static void test_ranges_tile(void **state)
{
    (void)state;
    const size_t ns[] = {1, 2, 5, 8, 9, 100, 1023, MAX_N};
    const size_t grains[] = {1, 3, 64};
    for (int threads = 1; threads <= 4; threads++)
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
                range_seen *s = calloc(1, sizeof *s);
                assert_non_null(s);
                s->grain = grains[g];
                s->n = ns[a];
                s->threads = threads;
                mha__pool_range(threads, ns[a], grains[g], range_task, s);
                for (size_t i = 0; i < MAX_N; i++)
                    assert_int_equal(atomic_load(&s->runs[i]), i < ns[a] ? 1 : 0);
                assert_int_equal(atomic_load(&s->short_range), 0);
                assert_int_equal(atomic_load(&s->bad_slot), 0);
                const int calls = atomic_load(&s->calls);
                assert_true(calls >= 1);
                if (threads == 1)
                    assert_int_equal(calls, 1);
                else
                    assert_true(calls <= threads * MHA__POOL_RANGES_PER_THREAD);
                free(s);
            }
}

/* a task's own loop runs in its thread (slot 0, every chunk), and inside a task the
 * library's thread count is 1 */
typedef struct nested {
    atomic_int inner_runs, inner_bad, threads_bad;
} nested;

static void inner_task(void *ctx, size_t i, int slot)
{
    nested *s = ctx;
    (void)i;
    if (slot != 0 || !mha__pool_in_task())
        atomic_store(&s->inner_bad, 1);
    atomic_fetch_add(&s->inner_runs, 1);
}

static void outer_task(void *ctx, size_t i, int slot)
{
    nested *s = ctx;
    (void)i, (void)slot;
    if (mha__pool_threads() != 1)
        atomic_store(&s->threads_bad, 1);
    mha__pool_for(4, 10, inner_task, s);
}

static void test_nested_runs_inline(void **state)
{
    (void)state;
    nested s = {0};
    mha__pool_for(2, 8, outer_task, &s);
    assert_int_equal(atomic_load(&s.inner_runs), 80);
    assert_int_equal(atomic_load(&s.inner_bad), 0);
    assert_int_equal(atomic_load(&s.threads_bad), 0);
    assert_false(mha__pool_in_task());
    omp_set_num_threads(3);
    assert_int_equal(mha__pool_threads(), 3);
    int in_region = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        in_region = mha__pool_threads();
    }
    assert_int_equal(in_region, 1);
}

/* two threads of a program calling at once: both loops complete, each chunk once */
static void *caller_main(void *arg)
{
    (void)arg;
    for (int r = 0; r < 2000; r++)
        check_loop_(2, (size_t)(1 + r % 33), r % 7 == 0 ? 300 : 0, 1);
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, NULL), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
}

/* What a forked child found, 0 when every loop ran right (1: a chunk not run once,
 * 2: two chunks on one slot at once or a slot out of range, 3: no memory). */
static char child_loops(void)
{
    seen *s = calloc(1, sizeof *s);
    if (s == NULL)
        return 3;
    char verdict = 0;
    for (int r = 0; r < 200 && verdict == 0; r++) {
        memset(s, 0, sizeof *s);
        s->threads = 2;
        mha__pool_for(2, 50, count_task, s);
        for (size_t i = 0; i < 50; i++)
            if (atomic_load(&s->runs[i]) != 1)
                verdict = 1;
        if (atomic_load(&s->overlap) || atomic_load(&s->bad_slot))
            verdict = 2;
    }
    free(s);
    return verdict;
}

/* a forked child (the parent's team already started) runs its loops to the end. The child
 * reports through a pipe, not its exit status: under valgrind the child's leak check counts
 * the parent's threads' stacks, which the child never had, as lost, and exits 99. */
static void test_after_fork(void **state)
{
    (void)state;
    check_loop(2, 100, 100); /* the team exists */
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char verdict = (char)('0' + child_loops());
        _exit(write(fd[1], &verdict, 1) == 1 ? 0 : 4);
    }
    close(fd[1]);
    char verdict = 'x';
    assert_int_equal(read(fd[0], &verdict, 1), 1);
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(verdict, '0');
    check_loop(2, 100, 100); /* and the parent's team still works */
}

/* The waiting policy's two parts: the runnable count of a /proc/loadavg line (malformed
 * lines give -1), and the spin for it — long while the team is alone or the CPUs suffice,
 * short when another task wants a CPU the team's threads are on. */
static void test_waiting_policy(void **state)
{
    (void)state;
    assert_int_equal(mha__pool_parse_runnable("0.52 0.58 0.59 3/211 4567\n"), 3);
    assert_int_equal(mha__pool_parse_runnable("12.00 9.10 7.25 17/1024 99"), 17);
    assert_int_equal(mha__pool_parse_runnable("0.00 0.00 0.00 0/5 1"), 0);
    static const char *const bad[] = {"", "0.5 0.5 0.5", "0.5 0.5 0.5 3", "0.5 0.5 0.5 /9 1",
                                      "0.5 0.5 0.5 3/ 1", "x 0.5 0.5 3/9 1",
                                      "0.5 0.5 0.5 -3/9 1", "0.5  0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(mha__pool_parse_runnable(bad[i]), -1);
    /* 2 CPUs, a 2-thread loop: the team alone (its 2 awake threads, or 1 with the other
     * asleep), or with one other task (busy, whether the member is awake or asleep) */
    assert_int_equal(mha__pool_spin_us(2, 2, 2, 2), MHA__POOL_SPIN_US);
    assert_int_equal(mha__pool_spin_us(1, 1, 2, 2), MHA__POOL_SPIN_US);
    assert_int_equal(mha__pool_spin_us(1, 2, 2, 2), MHA__POOL_SPIN_US); /* counted late */
    assert_int_equal(mha__pool_spin_us(3, 2, 2, 2), MHA__POOL_SPIN_BUSY_US);
    assert_int_equal(mha__pool_spin_us(2, 1, 2, 2), MHA__POOL_SPIN_BUSY_US);
    /* 8 CPUs: two other tasks leave room for the loop's 2 threads; seven do not */
    assert_int_equal(mha__pool_spin_us(4, 2, 2, 8), MHA__POOL_SPIN_US);
    assert_int_equal(mha__pool_spin_us(9, 2, 2, 8), MHA__POOL_SPIN_BUSY_US);
    assert_true(MHA__POOL_SPIN_BUSY_US < MHA__POOL_SPIN_US);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_chunk_once),    cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_ranges_tile),        cmocka_unit_test(test_nested_runs_inline),
        cmocka_unit_test(test_concurrent_callers), cmocka_unit_test(test_after_fork),
        cmocka_unit_test(test_waiting_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
