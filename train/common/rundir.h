/*
 * rundir — one run per output directory (mha-gpt train, mha-g2p train).
 *
 *   rundir_lock(dir);                       // exit 2 if another process runs there
 *   rundir_claim(dir, files, n, resume, id, force);  // exit 2 if it holds another run;
 *                                                    // stale temporaries of saves removed
 *
 * A run is named by a run id (16 hex digits, drawn at its start, kept across --resume)
 * stored in the metadata of its checkpoints ("run_id"). Checkpoints written before run ids
 * existed have none: a directory's files are then taken to be one run.
 *
 * Program code: prints and exits (cli.h statuses).
 */
#ifndef TRAIN_RUNDIR_H
#define TRAIN_RUNDIR_H

#include <stddef.h>

enum { RUNDIR_ID_CAP = 17 }; /* 16 hex digits and the NUL */

/* The lock file in a run directory. */
#define RUNDIR_LOCK_NAME "run.lock"

/* Take an advisory lock (flock) on <dir>/run.lock, created if needed, and hold it until
 * the process ends; the file then holds this process's pid. If another process holds it:
 * "--out <dir> is in use by another run (process <pid> ...)" and exit 2, at once. On a
 * file system that cannot lock (or if the file cannot be opened) a note says the run goes
 * on without the lock. */
void rundir_lock(const char *dir);

/* A fresh run id: 16 hex digits from getrandom (the time and pid if it fails). */
void rundir_new_id(char id[RUNDIR_ID_CAP]);

/* 1 if s is a run id (16 lower-case hex digits). */
int rundir_id_valid(const char *s);

/* Refuse to mix two runs in dir (exit 2), given the checkpoint file names a run writes
 * there (files[n], e.g. "checkpoint.safetensors"):
 *  - a new run (resume NULL): refused if any of them exists, unless force;
 *  - a resumed run (resume: its checkpoint path, resume_id: its run id or NULL for a
 *    checkpoint that has none): each existing file that is not `resume` itself must be of
 *    the same run — the same run id, or, when either has none, in the same directory as
 *    `resume` — unless force.
 * With force, the files of the other run are removed (the new run writes its own).
 * Then the temporaries that killed saves of these files left in dir are removed
 * (ckpt_remove_stale: "<file>.tmp.<pid>" of a process that is gone), so every program that
 * claims its directory cleans up after a save that was killed (kill -9, a power cut).
 */
void rundir_claim(const char *dir, const char *const *files, size_t n, const char *resume,
                  const char *resume_id, int force);

/* The start of every training program's run in dir: its id into id (resume_id, a resumed
 * checkpoint's, when it is a valid id; else a fresh one), then, with claim (the process
 * that writes: rank 0), dir made ready (cli_prepare_out_dir), locked (rundir_lock) and
 * claimed (rundir_claim) for the run's checkpoint files: checkpoint.safetensors,
 * best.safetensors and the numbered checkpoint-<step>.safetensors kept by step. resume:
 * the checkpoint resumed from ("" or NULL: a new run). Exits 2 as those do. */
void rundir_start(const char *dir, const char *resume, const char *resume_id, int force,
                  int claim, char id[RUNDIR_ID_CAP]);

/* The files <dir>/<prefix><digits><suffix> (e.g. checkpoint-2000.safetensors), their names
 * (without dir) into *names (owned: free each and the array) in increasing order of the
 * number; returns how many. A directory that cannot be read has none. Exit 1 when out of
 * memory. */
size_t rundir_list_numbered(const char *dir, const char *prefix, const char *suffix,
                            char ***names);

#endif /* TRAIN_RUNDIR_H */
