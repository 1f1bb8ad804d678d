/*
 * util — the small helpers the programs and libmha_g2p share, each written once: the
 * one-line error message into a caller's buffer, reading a whole file, freeing a list.
 * (libmha has its own, src/st_read.c: its internal symbols are not visible here.)
 */
#ifndef TRAIN_UTIL_H
#define TRAIN_UTIL_H

#include <stddef.h>

#if defined(__GNUC__)
#define UTIL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define UTIL_PRINTF(f, a)
#endif

/* Format the message into err[errlen] (when err != NULL and errlen > 0; cut to fit) and
 * return status. */
int util_fail(int status, char *err, size_t errlen, const char *fmt, ...) UTIL_PRINTF(4, 5);

/* util_fail without a status. */
void util_set_err(char *err, size_t errlen, const char *fmt, ...) UTIL_PRINTF(3, 4);

/* The regular file at path, whole, into *buf (malloc'd, owned by the caller; a NUL after
 * its *len bytes). A file that shrinks while it is read gives what is there. MHA_OK;
 * MHA_EIO (cannot open, stat or read it, or not a regular file), MHA_EOVERFLOW (more than
 * max_bytes), MHA_ENOMEM; the message names the file. *buf is NULL on error. */
int util_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, char *err,
                   size_t errlen);

/* free() each of p[n]: UTIL_FREE_ALL(a, b, c) frees a, b and c (a struct's buffers in one
 * line). */
void util_free_all(void *const *p, size_t n);
#define UTIL_FREE_ALL(...)                                                                   \
    util_free_all((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) /      \
                                                    sizeof(void *))

#endif /* TRAIN_UTIL_H */
