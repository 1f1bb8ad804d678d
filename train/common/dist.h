/*
 * Data-parallel training across processes (mha-gpt train under mpirun).
 *
 * One source, train/common/dist.c, built twice: with MHA_WITH_MPI (mha-gpt-mpi, Open MPI) and
 * without (mha-gpt: one rank, every call below a no-op or an identity, so the serial
 * program computes exactly what it did before this layer existed).
 *
 * The scheme (README, "Training on several processes"):
 *   - every rank parses the same options, reads the same files and builds the same model;
 *     rank 0's tensors and training state are then broadcast (dist_bcast), so every rank
 *     starts from the bits rank 0 has;
 *   - a step's global batch of G windows is drawn by every rank from the one batch
 *     generator (the same G windows for any number of ranks); rank r trains on its slice
 *     (dist_share) and its mean loss is weighted by its share of G;
 *   - gradients: each rank scales its gradients by its share and the ranks sum them
 *     (dist_grads), so every rank holds the gradient of the global mean loss and applies the
 *     same optimizer step; with overlap, a block's all-reduce starts as soon as backward has
 *     produced its gradients (mha_gpt_set_grad_hook) and the step waits only before the
 *     optimizer;
 *   - rank 0 alone writes files and prints (the other ranks' stdout goes to /dev/null;
 *     their error messages name the rank).
 * MPI is initialised with MPI_THREAD_FUNNELED: only the thread that called dist_init
 * calls MPI (OpenMP worker threads never do). Communication errors abort the job
 * (MPI_ERRORS_ARE_FATAL): mpirun then ends every rank with a non-zero exit.
 */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "cli.h"
#include "mha_gpt.h"

/* Initialise (MPI_Init_thread when built with MPI) and learn this process's rank and the
 * number of ranks; start the program (cli_start_program: its name, SIGXFSZ ignored). Ranks
 * other than 0 get stdout redirected to /dev/null and the program name `name` suffixed
 * with " (rank r)" for their messages, and exit silently on a bad option
 * (cli_set_usage_quiet: rank 0 reports it). Exit 1 if MPI cannot be initialised. */
void dist_init(int *argc, char ***argv, const char *name);
/* MPI_Finalize (when built with MPI). Call once, on the normal return path of main. */
void dist_finalize(void);
/* A program's main: dist_init as `name` (with MPI: `name`-mpi), run(argc, argv) on every
 * rank, dist_finalize; returns run's status. */
int dist_main(int argc, char **argv, const char *name, int (*run)(int argc, char **argv));
int dist_rank(void);
int dist_size(void);
/* 1 when built with MPI (mha-gpt-mpi), 0 otherwise. */
int dist_with_mpi(void);

/* x[n] ← the sum of every rank's x[n] (float64), the same bits on every rank (rank 0's
 * result is broadcast: MPI does not promise that every rank sums in the same order). For
 * the few values the ranks must agree on: losses, evaluation sums. */
void dist_sum(double *x, size_t n);
/* 1 if any rank's flag is nonzero (all ranks call it; all get the same answer). */
int dist_any(int flag);
/* The largest of every rank's v (all ranks call it; all get the same answer): e.g. the
 * stop signal one rank got, so that every rank exits with its status. */
int dist_max(int v);
/* 1 if every rank passed the same value. */
int dist_same(uint64_t v);
/* Wait until every rank has called it. */
void dist_barrier(void);
/* Before any decision: every rank passes the same n fingerprints v[n] of what it was given
 * (its options, the bytes of --data, of the checkpoint to resume; what[i] names v[i] for a
 * message, e.g. "--data FILE"). When a rank's differ from rank 0's, every rank stops with
 * exit 2, and rank 0 names the first rank that differs and every item of its that differs,
 * in the order of v (a rank with a stale copy of a checkpoint would otherwise decide alone,
 * or hang in a collective call rank 0 never makes). One rank: nothing to compare. */
void dist_agree(const char *const *what, const uint64_t *v, size_t n);
/* dist_agree on what a training program was given: the bytes of the checkpoint to resume
 * ("" for none), of its data file, and its options (opts[n], values in cfg, which on
 * --resume include the checkpoint's), named in that order, so that a rank with another
 * checkpoint is told so ("another checkpoint (--resume F) and another set of options"), not
 * only that its options differ. Exit 2 when a file cannot be read. */
void dist_agree_inputs(const cli_opt *opts, size_t n, const void *cfg, const char *data,
                       const char *resume);
/* buf[bytes] ← rank 0's buf[bytes] on every rank. */
void dist_bcast(void *buf, size_t bytes);
/* Every rank takes rank 0's values of a checkpoint layout: each tensor with its optimizer
 * moments (those not NULL, stored in the layout or not) and each state value — the one
 * table a checkpoint reads and writes, so that what a rank resumes with is what a
 * checkpoint would give it. One rank: nothing to do. */
void dist_bcast_layout(const ckpt_layout *lay);

/* This rank's share of n items split into dist_size() contiguous parts whose sizes differ
 * by at most 1 (the first n % size parts one larger): items [*first, *first + *count). */
void dist_share(size_t n, size_t *first, size_t *count);

/* ---- gradient averaging ------------------------------------------------------------------ */

typedef struct dist_grads dist_grads;

/* How gradients are combined across ranks. */
typedef enum dist_sync {
    DIST_SYNC_OVERLAP = 0, /* one non-blocking all-reduce per block, started during backward */
    DIST_SYNC_AFTER = 1    /* one blocking all-reduce of every gradient after backward         */
} dist_sync;

/* The gradient combiner of the tensors pt[n] of a program's table (ckpt.h: their
 * gradients pt[i].g [numel]): with model g (a GPT, pt in its tensor order), hooked with
 * mha_gpt_set_grad_hook while a backward is bracketed by begin/finish, mode as asked;
 * without (g NULL: any model), one all-reduce per run of memory-adjacent tensors after
 * backward (DIST_SYNC_AFTER). NULL when out of memory. With one rank it does nothing at
 * all. */
dist_grads *dist_grads_create(const ckpt_tensor *pt, size_t n, mha_gpt *g, dist_sync mode);
void dist_grads_destroy(dist_grads *d);
/* Before mha_gpt_backward: this rank's gradients will be multiplied by `scale` (its share of
 * the global batch) before the sum. */
void dist_grads_begin(dist_grads *d, double scale);
/* After mha_gpt_backward: wait for every all-reduce and write the sums into the model's
 * gradients. */
void dist_grads_finish(dist_grads *d);
/* Seconds this rank spent waiting for gradient communication (the part not hidden behind
 * backward; for DIST_SYNC_AFTER the whole all-reduce), and the number of finished steps. */
void dist_grads_stats(const dist_grads *d, double *wait_seconds, uint64_t *steps);

#endif /* TRAIN_DIST_H */
