/* Helpers for the tests that run a program (mha-train, mha-gpt, mha-g2p) as a child
 * process and check the files it writes (tests/test_train.c, test_gpt_train.c,
 * test_rundir.c and others).
 *
 * Each test gets a fresh empty directory, `tmpdir`: tmpdir_setup makes it and
 * tmpdir_teardown removes it with everything in it (pass both to
 * cmocka_unit_test_setup_teardown). The program runs with tmpdir as its working
 * directory. Every path given to these helpers is relative to tmpdir unless it is
 * absolute (starts with '/'). The helpers that can fail fail the running test with a
 * message; none of them prints otherwise. One test at a time (tmpdir is a global). */
#ifndef MHA_TEST_PROG_H
#define MHA_TEST_PROG_H

#include <stddef.h>
#include <sys/types.h>

#include "mha_safetensors.h"

/* The running test's directory, an absolute path; valid between tmpdir_setup and
 * tmpdir_teardown. */
extern char tmpdir[256];

/* cmocka setup: a fresh empty directory "$TMPDIR/mha_test_prog.XXXXXX" (/tmp when TMPDIR
 * is unset or empty) into tmpdir. Returns 0, or -1 if it could not be made. */
int tmpdir_setup(void **state);
/* cmocka teardown: removes tmpdir and everything below it. Returns 0, or -1 if anything
 * could not be removed. */
int tmpdir_teardown(void **state);

/* Runs `'exe' args` through the shell (args is a shell word list) with tmpdir as the
 * working directory; stdout goes to <tag>.out, stderr to <tag>.err in tmpdir.
 * Returns the exit status, or -1 if the program did not exit normally (a signal). */
int run_prog(const char *exe, const char *tag, const char *args);

/* Like run_prog, but bounded: the program gets timeout_s seconds (an alarm, which
 * survives exec: SIGALRM ends it and -1 is returned), and when fsize > 0 a file size
 * limit of fsize bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a write past the limit fails with
 * EFBIG, as on a full disk). */
int run_prog_limited(const char *exe, const char *tag, const char *args, unsigned timeout_s,
                     long long fsize);

/* Like run_prog_limited with a file size limit of fsize bytes (> 0), but SIGXFSZ keeps its
 * default action, as under a shell's `ulimit -f`: a program that does not ignore it is
 * killed by its first write past the limit. Returns the exit status, or -1 - the signal
 * that ended it (-1 - SIGXFSZ for that kill, -1 - SIGALRM at the timeout). */
int run_prog_fsize(const char *exe, const char *tag, const char *args, unsigned timeout_s,
                   long long fsize);

/* Start `'exe' args` in tmpdir in the background (stdout/stderr to <tag>.out/.err),
 * bounded by timeout_s seconds as run_prog_limited. Returns its pid (wait for it with
 * wait_prog). */
pid_t start_prog(const char *exe, const char *tag, const char *args, unsigned timeout_s);
/* Wait for a process of start_prog: its exit status, or -1 - the signal that ended it. */
int wait_prog(pid_t pid);

/* Fails the test unless a program of tag `tag` (run_prog and the like) exited with status
 * `want`, printing the end of its <tag>.err first: a run that fails where it should not
 * says why in the test's own output, before tmpdir_teardown removes the file. */
void assert_prog_status(int got, int want, const char *tag);

/* The number of whole lines in the file at path (0 if it cannot be read). */
size_t count_lines(const char *path);

/* The whole file at path into a NUL-terminated buffer owned by the caller (free it);
 * *len (if len is not NULL) gets the size without the NUL. Returns NULL if the file
 * cannot be read (no test failure: callers assert or report). */
char *slurp(const char *path, size_t *len);

/* Writes the n bytes of data to path (created or truncated); fails the test on error. */
void write_file(const char *path, const void *data, size_t n);

/* 1 if something (file or directory) exists at path, else 0. */
int file_exists(const char *path);

/* Fails the test unless the file at path can be read and contains needle; the message
 * shows the whole file. */
void assert_file_contains(const char *path, const char *needle);

/* Fails the test unless both files can be read and are byte for byte the same. */
void assert_same_file(const char *a, const char *b);

/* Fails the test unless two train_log.csv files are the same but for the columns of the
 * clock (time_s, tokens_per_s, words_per_s, found by name in each header). */
void assert_same_log(const char *a, const char *b);

/* The number at top-level key of the JSON file at path (a run's summary.json); fails the
 * test if the file cannot be read or parsed or the value is not a number (e.g. null). */
double summary_number(const char *path, const char *key);

/* Fails the test, naming tensor and element, if an F32 tensor of the loaded
 * safetensors file f (a checkpoint) holds a NaN or an infinity. */
void assert_f32_tensors_finite(const mha_st_file *f);
/* The same for the safetensors file at tmpdir/rel, which must load. */
void assert_checkpoint_file_finite(const char *rel);

/* 1 if checkpoints a and b (paths in tmpdir, which must load) hold the same tensors: names,
 * dtypes, shapes and bytes; else 0, with the first difference said in why[cap]. */
int same_checkpoint_tensors(const char *a, const char *b, char *why, size_t cap);
/* Fails the test unless checkpoints a and b hold the same tensors (names, dtypes, shapes,
 * bytes) and the same metadata except "elapsed_seconds" (the run's wall time so far,
 * which differs between runs), "run_id" (each run's own) and "crc32c.__metadata__" (the
 * checksum of the metadata, which holds both). */
void assert_same_checkpoint(const char *a, const char *b);

/* Rewrite checkpoint src as dst (relative to tmpdir) with mha_st_save: every tensor and
 * metadata pair as they are, except: strip_crc drops the crc32c.* keys and run_id (a file
 * from before checksums, or a damaged one without them), swap_a / swap_b (names, NULL:
 * none) exchange their data, and tensor `name` (NULL: none; it must exist) gets `data`,
 * which must be its size: `bytes`. */
void rewrite_checkpoint(const char *src, const char *dst, int strip_crc, const char *swap_a,
                        const char *swap_b, const char *name, const void *data, size_t bytes);

#endif
