/* The library's threads: one persistent team whose members take a parallel loop's chunks
 * as they come, and sleep soon after the work runs out. Never installed.
 *
 * Why not OpenMP's `parallel for`: libgomp hands a static loop's blocks to fixed threads
 * and its waiting threads spin (~300,000 iterations) before sleeping. On a machine that
 * another process shares, a step of a small model runs hundreds of such loops; each one
 * waits for a descheduled thread to run its block, while the waiting thread spins on the
 * core the late one needs (the baby GPT's 2-thread step: 2.8x slower beside one busy
 * process; OMP_WAIT_POLICY=passive cured most of that but cost 16% on the quiet machine,
 * bench/contention.sh). Here a chunk is claimed by whichever member is running, the caller
 * included, so a loop never waits for a thread that has not started; a waiting member spins
 * for MHA__POOL_SPIN_US microseconds (long enough to catch the next loop of a step;
 * MHA__POOL_SPIN_BUSY_US while other work wants the CPUs), then sleeps on a futex and leaves
 * the core to whoever needs it.
 *
 * Results do not depend on which thread runs a chunk: the chunks are the loop's own (fixed
 * by its sizes and, where a loop splits by threads, by the thread count), and a chunk's
 * `slot` only picks per-thread scratch. So every result is bit for bit what the OpenMP
 * loops computed, at every thread count they were given. */
#ifndef MHA_POOL_H
#define MHA_POOL_H

#include <stddef.h>

/* One chunk of a loop: i in [0, n), slot in [0, threads) names the thread running it
 * (for per-thread scratch only; two chunks never run at once in one slot). */
typedef void (*mha__pool_task)(void *ctx, size_t i, int slot);

/* Runs task(ctx, i, slot) for every i < n on up to `threads` threads (the caller is one of
 * them, slot 0) and returns when every call has returned. Runs all n in the calling thread,
 * in order, with slot 0 when threads <= 1 or n <= 1, inside a task or an OpenMP parallel
 * region, or while another thread of the process is running a loop on the pool. Never
 * fails: a team member that could not be started leaves its chunks to the others. */
void mha__pool_for(int threads, size_t n, mha__pool_task task, void *ctx);

/* One range of a loop: iterations i0 .. i1−1 (slot as above). */
typedef void (*mha__pool_range_task)(void *ctx, size_t i0, size_t i1, int slot);

/* mha__pool_for over n iterations grouped in ranges of consecutive iterations, about
 * MHA__POOL_RANGES_PER_THREAD per thread (none shorter than `grain`): a loop whose
 * iterations each compute their own outputs, the same whichever range holds them. A few
 * ranges per thread let the running threads take over a descheduled one's share. */
#define MHA__POOL_RANGES_PER_THREAD 4
void mha__pool_range(int threads, size_t n, size_t grain, mha__pool_range_task task, void *ctx);

/* The thread count for a loop of the library here: 1 inside a task or an OpenMP parallel
 * region, else omp_get_max_threads() (the count the caller set for the call). */
int mha__pool_threads(void);

/* The waiting policy (src/pool.c): a waiting thread spins MHA__POOL_SPIN_US microseconds
 * before it sleeps, MHA__POOL_SPIN_BUSY_US while other work wants the CPUs, unless
 * MHA_SPIN_US fixes it. mha__pool_parse_runnable: the runnable tasks of a /proc/loadavg
 * line ("0.52 0.58 0.59 3/211 4567" → 3), −1 if it is not one. mha__pool_spin_us: the spin
 * for `runnable` tasks of which `awake` are the team's own, a loop of `threads`, `online`
 * CPUs: the busy spin when the other tasks with the loop's threads want more CPUs than
 * there are. */
#define MHA__POOL_SPIN_US 200
#define MHA__POOL_SPIN_BUSY_US 5
long mha__pool_parse_runnable(const char *loadavg);
long mha__pool_spin_us(long runnable, long awake, int threads, long online);

/* Nonzero while the calling thread runs a task (where omp_in_parallel() is 0 on the
 * pool's own threads): nested products and loops then run in the calling thread. */
int mha__pool_in_task(void);

#endif
