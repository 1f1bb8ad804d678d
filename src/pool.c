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

#include <fcntl.h>
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

/* How long a waiting thread spins before it sleeps, in microseconds, chosen by
 * bench/contention.sh (README, "Sharing the machine"). On a quiet machine 200: long enough
 * that the gaps between the loops of a training step (mostly a few microseconds of serial
 * work) do not put the team to sleep — sleeping at once made the quiet baby GPT step 12%
 * slower. It was 50 until a count of futex calls showed the gaps longer than that: 19,382
 * in a baby GPT float32 run (mha-gpt-bench, 110 steps and its evaluation) with 50 µs,
 * 10,657 with 200; the step took 0.942x as long (bench/ab.sh, 12 pairs; the G2P float32
 * step 0.955x, 4 pairs) on the 2-core Xeon of model 207, and beside a busy process it was
 * as before (the short spin below takes over there).
 * Beside other work 5: a thread that waits gives its core back to the late one at once
 * (the baby GPT's step beside a busy process 1.54x its quiet one instead of 1.99x). Which
 * one: every PROBE_NS the owner of a loop reads the number of runnable tasks of the system
 * (/proc/loadavg's fourth field), takes away the team's own awake threads, and spins short
 * while the others and the loop's threads together want more CPUs than are online (two
 * probes in a row: probe).
 * MHA_SPIN_US in the environment fixes the spin instead (read once, when the pool starts;
 * 0 sleeps at once). Tried and left out: sched_yield() while spinning (no change beside a
 * busy process), and stopping the spin while the thread's involuntary context switches
 * showed a busy core (the quiet step kept its speed, the busy one gained nothing). */
#define PROBE_NS 10000000L /* 10 ms */
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
    atomic_long spin_ns;          /* the spin now (the owner sets it: probe)           */
    int adaptive;                 /* MHA_SPIN_US unset: probe chooses the spin         */
    long online;                  /* CPUs online                                       */
    long next_probe;              /* now_ns() of the owner's next probe                */
    unsigned busy_seen;           /* the last probes' verdicts, newest in bit 0        */
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
    the_pool.adaptive = 1;
    if (e != NULL && *e != '\0') {
        char *end;
        const long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 1000000) {
            us = v;
            the_pool.adaptive = 0;
        }
    }
    the_pool.online = sysconf(_SC_NPROCESSORS_ONLN);
    if (the_pool.online < 1)
        the_pool.adaptive = 0;
    atomic_store(&the_pool.spin_ns, us * 1000);
    pthread_atfork(NULL, NULL, after_fork_child);
}

long mha__pool_parse_runnable(const char *loadavg)
{
    const char *c = loadavg;
    for (int field = 0; field < 3; field++) { /* skip the three averages */
        if (*c < '0' || *c > '9')
            return -1;
        while (*c != '\0' && *c != ' ')
            c++;
        while (*c == ' ')
            c++;
    }
    char *end = (char *)c;
    const long r = *c >= '0' && *c <= '9' ? strtol(c, &end, 10) : -1;
    return r >= 0 && *end == '/' && end[1] >= '0' && end[1] <= '9' ? r : -1;
}

long mha__pool_spin_us(long runnable, long awake, int threads, long online)
{
    const long others = runnable - awake;
    return others > 0 && others + threads > online ? MHA__POOL_SPIN_BUSY_US : MHA__POOL_SPIN_US;
}

/* The owner's probe (every PROBE_NS, when the spin is not fixed): the system's runnable
 * tasks from /proc/loadavg, the team's awake threads (the owner and the members not
 * asleep), this loop's thread count. An unreadable file leaves the spin as it is. */
static void probe(pool *p, int threads)
{
    const long t = now_ns();
    if (!p->adaptive || t < p->next_probe)
        return;
    p->next_probe = t + PROBE_NS;
    char buf[128];
    const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const long r = mha__pool_parse_runnable(buf);
    if (r < 0)
        return;
    const long awake = 1 + p->members - atomic_load(&p->sleepers);
    /* short only after two probes in a row saw other work. A quiet probe can look busy: a
     * member between saying it sleeps and sleeping (or waking) is runnable but not counted
     * awake, and the process's other threads (OpenBLAS's, spinning after a product) count
     * as others. Counted on the quiet baby GPT: 15% of single probes, 7-13% of pairs; the
     * short spin they cause costs its quiet step nothing measurable (README). */
    const long us = mha__pool_spin_us(r, awake, threads, p->online);
    p->busy_seen = (p->busy_seen << 1 | (us == MHA__POOL_SPIN_BUSY_US)) & 3u;
    atomic_store_explicit(&p->spin_ns,
                          (p->busy_seen == 3u ? MHA__POOL_SPIN_BUSY_US : MHA__POOL_SPIN_US) * 1000,
                          memory_order_relaxed);
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
    long deadline = now_ns() + atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
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
        deadline = now_ns() + atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
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
    probe(p, threads);
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
    const long deadline = now_ns() + atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
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
