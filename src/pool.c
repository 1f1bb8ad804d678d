/* The library's persistent team (src/pool.h): chunks claimed from one counter, spin-then-
 * futex waiting.
 *
 * One pool per process. A caller that owns it (a try-lock: a second caller runs its loop
 * alone) publishes a job under a sequence lock — `seq` odd while the job's fields are
 * written, even when they are readable, and the futex word the idle members sleep on —
 * then claims chunks itself. Claims go through `claim` = (the job's seq << 32) | next
 * chunk, advanced by compare-and-swap, so a member that read an old job can never claim
 * a chunk of a newer one. The owner returns when `done` reaches n: every claimed chunk has
 * finished; it never waits for a member that has not claimed anything. Members and the
 * owner spin for the spin time, then sleep on a futex (seq for members, done for the
 * owner); each side wakes the other only when it has said it sleeps (seq_cst stores and
 * loads in opposite order on the two sides, so one of them always sees the other).
 * A fork's child forgets the parent's members (pthread_atfork; they are not in the child)
 * and starts its own at its first loop. */
#define _GNU_SOURCE
#include "pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long a waiting thread spins before it sleeps, in microseconds. Chosen by
 * bench/contention.sh (README, "Sharing the machine"): long enough that the gaps between
 * the loops of a training step (a few microseconds of serial work) do not put the team to
 * sleep — sleeping at once made the quiet baby GPT step 12% slower —, short enough that a
 * thread waiting beside a busy process gives its core back within a fraction of a
 * scheduler slice. MHA_SPIN_US in the environment overrides it (read once, when the pool
 * starts; 0 sleeps at once: the better choice on a machine other jobs share). Tried and
 * left out: sched_yield() while spinning (no change beside a busy process), and stopping
 * the spin while the thread's involuntary context switches showed a busy core (the quiet
 * step kept its speed, the busy one gained nothing measurable). */
#define MHA__POOL_SPIN_US 50
#define MAX_MEMBERS 63 /* threads besides the caller */

/* The words written while a loop runs (claim, done) sit on cache lines of their own, away
 * from the job's fields that waiting members read. */
typedef struct pool {
    _Alignas(64) atomic_uint seq; /* the job's sequence: odd while written; futex word */
    _Atomic(mha__pool_task) task; /* the job, written while seq is odd                 */
    _Atomic(void *) ctx;
    atomic_uint n;                /* chunks                                            */
    atomic_int threads;           /* members with slot < threads take part             */
    atomic_int sleepers;          /* members asleep on seq                             */
    long spin_ns;
    _Alignas(64) atomic_uint_least64_t claim; /* (seq << 32) | next chunk              */
    _Alignas(64) atomic_uint done; /* chunks finished; the owner's futex word          */
    atomic_int owner_sleeps;
    _Alignas(64) atomic_int busy;  /* a caller owns the pool                           */
    int members;                   /* started (changed by the owner only)              */
    int cannot_start;              /* pthread_create failed: do not try again          */
} pool;

static pool the_pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local int tl_in_task;

static long futex(atomic_uint *word, int op, unsigned val)
{
    return syscall(SYS_futex, (unsigned *)word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void after_fork_child(void)
{
    /* the members are not in the child; a loop the parent's other thread owned is gone */
    the_pool.members = 0;
    /* a job the parent's other thread was publishing: the next one must have an even seq */
    atomic_store(&the_pool.seq, (atomic_load(&the_pool.seq) + 1u) & ~1u);
    atomic_store(&the_pool.sleepers, 0);
    atomic_store(&the_pool.owner_sleeps, 0);
    atomic_store(&the_pool.busy, 0);
}

static void pool_init(void)
{
    const char *e = getenv("MHA_SPIN_US");
    long us = MHA__POOL_SPIN_US;
    if (e != NULL && *e != '\0') {
        char *end;
        const long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 1000000)
            us = v;
    }
    the_pool.spin_ns = us * 1000;
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* Claims and runs chunks of job `seq` (n chunks) until none is left. */
static void run_chunks(pool *p, unsigned seq, unsigned n, mha__pool_task task, void *ctx, int slot)
{
    for (;;) {
        uint_least64_t c = atomic_load_explicit(&p->claim, memory_order_relaxed);
        do {
            if ((unsigned)(c >> 32) != seq || (unsigned)(c & 0xffffffffu) >= n)
                return;
        } while (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1,
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed));
        tl_in_task = 1;
        task(ctx, (size_t)(c & 0xffffffffu), slot);
        tl_in_task = 0;
        if (atomic_fetch_add(&p->done, 1) + 1 == n && atomic_load(&p->owner_sleeps))
            futex(&p->done, FUTEX_WAKE, 1);
    }
}

/* A member's wait for a job newer than `seen`: spin, then sleep on seq. Returns its
 * (even) sequence. */
static unsigned wait_job(pool *p, unsigned seen)
{
    long deadline = now_ns() + p->spin_ns;
    for (unsigned k = 1;; k++) {
        const unsigned s = atomic_load_explicit(&p->seq, memory_order_acquire);
        if (s != seen && !(s & 1u))
            return s;
        if (k % 64 != 0 || now_ns() < deadline) {
            cpu_relax();
            continue;
        }
        atomic_fetch_add(&p->sleepers, 1);
        const unsigned s2 = atomic_load(&p->seq);
        if (s2 == s)
            futex(&p->seq, FUTEX_WAIT, s2); /* returns at once if seq moved meanwhile */
        atomic_fetch_sub(&p->sleepers, 1);
        deadline = now_ns() + p->spin_ns;
    }
}

static void *member_main(void *arg)
{
    pool *p = &the_pool;
    const int slot = (int)(intptr_t)arg;
    /* OpenMP code a task calls (an OpenMP OpenBLAS) runs on this thread alone, as it did
     * inside the parallel regions this team replaces */
    omp_set_num_threads(1);
    unsigned seen = 0; /* no job has sequence 0: the first is 2 */
    for (;;) {
        const unsigned s = wait_job(p, seen);
        const mha__pool_task task = atomic_load_explicit(&p->task, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        const unsigned n = atomic_load_explicit(&p->n, memory_order_relaxed);
        const int threads = atomic_load_explicit(&p->threads, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->seq, memory_order_relaxed) != s)
            continue; /* rewritten while read: wait for the next one */
        seen = s;
        if (slot < threads)
            run_chunks(p, s, n, task, ctx, slot);
    }
    return NULL;
}

/* Starts members up to `want` (the owner holds the pool). */
static void grow(pool *p, int want)
{
    if (want > MAX_MEMBERS)
        want = MAX_MEMBERS;
    while (p->members < want && !p->cannot_start) {
        pthread_attr_t a;
        pthread_t t;
        int ok = pthread_attr_init(&a) == 0;
        if (ok && pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
            pthread_create(&t, &a, member_main, (void *)(intptr_t)(p->members + 1)) == 0)
            p->members++;
        else
            p->cannot_start = 1;
        if (ok)
            pthread_attr_destroy(&a);
    }
}

/* The loop in the calling thread, as an OpenMP loop with a false `if` ran it: not marked
 * as a task, so what it calls may use threads as the caller could. */
static void run_alone(size_t n, mha__pool_task task, void *ctx)
{
    for (size_t i = 0; i < n; i++)
        task(ctx, i, 0);
}

void mha__pool_for(int threads, size_t n, mha__pool_task task, void *ctx)
{
    if (n == 0)
        return;
    pool *p = &the_pool;
    if (threads <= 1 || n <= 1 || n > UINT_MAX || tl_in_task || omp_in_parallel() ||
        pthread_once(&pool_once, pool_init) != 0 || atomic_exchange(&p->busy, 1)) {
        run_alone(n, task, ctx);
        return;
    }
    grow(p, threads - 1);
    if (p->members == 0) {
        atomic_store(&p->busy, 0);
        run_alone(n, task, ctx);
        return;
    }
    /* publish: seq odd, the fields, then seq even (a new job) */
    const unsigned s = atomic_load_explicit(&p->seq, memory_order_relaxed) + 2;
    atomic_store_explicit(&p->seq, s - 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&p->task, task, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, (unsigned)n, memory_order_relaxed);
    atomic_store_explicit(&p->threads, threads, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint_least64_t)s << 32, memory_order_relaxed);
    atomic_store(&p->seq, s);
    if (atomic_load(&p->sleepers) > 0)
        futex(&p->seq, FUTEX_WAKE, INT_MAX);
    const int icv = omp_get_max_threads(); /* the caller's chunks: one thread, as members */
    omp_set_num_threads(1);
    run_chunks(p, s, (unsigned)n, task, ctx, 0);
    omp_set_num_threads(icv);
    /* the chunks others claimed: spin, then sleep on done */
    const long deadline = now_ns() + p->spin_ns;
    for (unsigned k = 1; atomic_load(&p->done) != n; k++) {
        if (k % 64 != 0 || now_ns() < deadline) {
            cpu_relax();
            continue;
        }
        atomic_store(&p->owner_sleeps, 1);
        const unsigned d = atomic_load(&p->done);
        if (d != n)
            futex(&p->done, FUTEX_WAIT, d);
        atomic_store(&p->owner_sleeps, 0);
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}

typedef struct range_job {
    size_t n, per;
    mha__pool_range_task task;
    void *ctx;
} range_job;

static void range_chunk(void *ctx, size_t k, int slot)
{
    const range_job *r = ctx;
    const size_t i0 = k * r->per, i1 = r->n - i0 < r->per ? r->n : i0 + r->per;
    r->task(r->ctx, i0, i1, slot);
}

void mha__pool_range(int threads, size_t n, size_t grain, mha__pool_range_task task, void *ctx)
{
    if (n == 0)
        return;
    if (threads <= 1 || n == 1) {
        task(ctx, 0, n, 0);
        return;
    }
    const size_t want = (size_t)threads * MHA__POOL_RANGES_PER_THREAD;
    size_t per = (n + want - 1) / want;
    if (per < grain)
        per = grain;
    range_job r = {n, per, task, ctx};
    mha__pool_for(threads, (n + per - 1) / per, range_chunk, &r);
}

int mha__pool_in_task(void) { return tl_in_task; }

int mha__pool_threads(void)
{
    return tl_in_task || omp_in_parallel() ? 1 : omp_get_max_threads();
}
