/*
 * peak_cache.c — the MFU's denominator on a busy machine (see peak.h).
 *
 * A peak measured when a run starts is only as fast as the cores were free: beside a build
 * the float32 loop read 56 GFLOP/s on a machine whose peak is ~230, and every MFU of that
 * run was four times too high. Another process can make the loop slower, never faster, so
 * the fastest measurement seen on this CPU is the nearest to its peak. Each run measures
 * (as before) and compares with the fastest one kept for the same CPU model, loop and
 * thread count in a small file of the user's cache; the larger is the denominator, and a
 * faster measurement replaces the kept one.
 *
 * The file (peak_cache_path): a header line, then one line per key,
 *     <CRC-32C of the rest, 8 hex digits> TAB <GFLOP/s> TAB <key>
 * A line that does not parse, whose checksum is wrong, or whose value is not a finite
 * positive number under 1e7 is ignored and not written back. The file is rewritten whole
 * (a temporary file in the same directory, fsync, rename), under an flock on "<path>.lock"
 * so that two programs starting at once do not lose each other's line; the lock is tried
 * for at most ~0.2 s (never a hang: without it the kept value is still read, nothing is
 * written). A file whose first line is not the header is someone else's: read as empty,
 * never overwritten.
 */
#include "peak.h"

#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_FILE = 64 * 1024, /* bytes read of the file; a larger one is not ours          */
    MAX_LINES = 256,      /* lines kept (the others, the oldest last, are dropped)     */
    LINE_CAP = 600        /* PEAK_KEY_CAP + the checksum and the number                */
};

static const char HEADER[] =
    "# mha peak cache 1: the fastest GFLOP/s measured per loop, thread count and CPU "
    "(CRC-32C, GFLOP/s, key; train/common/peak.h)\n";

/* ---- the key and the path ------------------------------------------------------------ */

/* The value of the first "name<spaces>: value" line of /proc/cpuinfo text, into out. */
static int cpuinfo_field(const char *text, const char *name, char *out, size_t cap)
{
    const size_t n = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, name, n) != 0)
            continue;
        const char *p = l + n;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ')
            p++;
        size_t k = 0;
        while (p[k] && p[k] != '\n' && k + 1 < cap) {
            /* keep the key one printable line: no TAB or control byte in it */
            out[k] = (unsigned char)p[k] < 0x20 || p[k] == 0x7F ? ' ' : p[k];
            k++;
        }
        while (k > 0 && out[k - 1] == ' ')
            k--;
        out[k] = '\0';
        return k > 0 ? 0 : -1;
    }
    return -1;
}

int peak_cache_key(const char *loop_name, int threads, char *key, size_t cap)
{
    if (!loop_name || !key || cap == 0 || threads < 1)
        return -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return -1;
    enum { TEXT_CAP = 16384 }; /* the first processor's block is far shorter */
    char *text = malloc(TEXT_CAP);
    if (!text) {
        fclose(f);
        return -1;
    }
    size_t got = fread(text, 1, TEXT_CAP - 1, f);
    fclose(f);
    text[got] = '\0';
    char model[256], fam[32] = "?", mod[32] = "?", step[32] = "?";
    const int named = cpuinfo_field(text, "model name", model, sizeof model) == 0;
    cpuinfo_field(text, "cpu family", fam, sizeof fam);
    cpuinfo_field(text, "model", mod, sizeof mod);
    cpuinfo_field(text, "stepping", step, sizeof step);
    free(text);
    if (!named)
        return -1; /* no name, no key: a peak is not kept for an unknown CPU */
    int n = snprintf(key, cap, "%s, %d thread(s), %s (family %s, model %s, stepping %s)",
                     loop_name, threads, model, fam, mod, step);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int peak_cache_path(char *path, size_t cap)
{
    if (!path || cap == 0)
        return -1;
    const char *set = getenv("MHA_PEAK_CACHE");
    int n;
    if (set) {
        if (set[0] == '\0' || strcmp(set, "off") == 0)
            return -1;
        n = snprintf(path, cap, "%s", set);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/') /* the XDG rule: a relative value is ignored */
            n = snprintf(path, cap, "%s/mha/peak.tsv", xdg);
        else if (home && home[0] == '/')
            n = snprintf(path, cap, "%s/.cache/mha/peak.tsv", home);
        else
            return -1;
    }
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* ---- the file ------------------------------------------------------------------------ */

typedef struct kept_line {
    double gflops;
    char key[PEAK_KEY_CAP];
} kept_line;

/* The value of line s (NUL-terminated, no newline), or 0 if it is not a valid line; its key
 * into key[PEAK_KEY_CAP]. */
static double parse_line(const char *s, char *key)
{
    char *end = NULL;
    errno = 0;
    unsigned long crc = strtoul(s, &end, 16);
    if (end != s + 8 || *end != '\t' || errno != 0)
        return 0;
    const char *rest = end + 1;
    if (crc32c(0, rest, strlen(rest)) != (uint32_t)crc)
        return 0;
    double g = strtod(rest, &end);
    if (end == rest || *end != '\t' || !isfinite(g) || g <= 0 || g >= 1e7)
        return 0;
    const char *k = end + 1;
    size_t n = strlen(k);
    if (n == 0 || n >= PEAK_KEY_CAP)
        return 0;
    memcpy(key, k, n + 1);
    return g;
}

/* Read the valid lines of the file at path into lines[MAX_LINES]; their count. *ours: 0 when
 * the file exists but is not a peak cache (then no line is read). */
static size_t read_lines(const char *path, kept_line *lines, int *ours)
{
    *ours = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        *ours = errno == ENOENT; /* none yet; one we cannot read is not replaced */
        return 0;
    }
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_FILE ||
        !(buf = malloc(MAX_FILE + 1))) {
        close(fd);
        *ours = 0; /* a FIFO, a directory, a large file: not a peak cache, never written */
        return 0;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, MAX_FILE - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    if (got > 0 && strncmp(buf, HEADER, sizeof HEADER - 1) != 0)
        *ours = 0;
    if (got == 0 || !*ours) {
        free(buf);
        return 0;
    }
    size_t n = 0;
    for (char *l = buf + sizeof HEADER - 1; *l && n < MAX_LINES;) {
        char *nl = strchr(l, '\n');
        if (!nl)
            break; /* a last line without its newline was cut short: not trusted */
        *nl = '\0';
        const double g = parse_line(l, lines[n].key);
        size_t same = 0; /* a key twice (written by hand?): one line, the larger value */
        while (g > 0 && same < n && strcmp(lines[same].key, lines[n].key) != 0)
            same++;
        if (g > 0 && same < n)
            lines[same].gflops = g > lines[same].gflops ? g : lines[same].gflops;
        else if (g > 0)
            lines[n++].gflops = g;
        l = nl + 1;
    }
    free(buf);
    return n;
}

/* mkdir -p of path's directory. */
static void make_parent_dirs(const char *path)
{
    char dir[PEAK_PATH_CAP];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return;
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return;
        *p = '/';
    }
}

/* Write lines[n] to path atomically. 0 or -1. */
static int write_lines(const char *path, const kept_line *lines, size_t n)
{
    char tmp[PEAK_PATH_CAP + 32];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fputs(HEADER, f) >= 0;
    for (size_t i = 0; i < n && ok; i++) {
        char rest[LINE_CAP];
        snprintf(rest, sizeof rest, "%.3f\t%s", lines[i].gflops, lines[i].key);
        ok = fprintf(f, "%08x\t%s\n", (unsigned)crc32c(0, rest, strlen(rest)), rest) > 0;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Take the lock file's flock, trying for ~0.2 s; its descriptor, or -1. */
static int take_lock(const char *path)
{
    char lk[PEAK_PATH_CAP + 8];
    if (snprintf(lk, sizeof lk, "%s.lock", path) >= (int)sizeof lk)
        return -1;
    int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    for (int i = 0; i < 100; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 2000000}, NULL);
    }
    close(fd);
    return -1;
}

int peak_cache_update(const char *path, const char *key, double measured, double *kept)
{
    if (kept)
        *kept = 0;
    if (!path || !key || !kept || !key[0] || strlen(key) >= PEAK_KEY_CAP ||
        strlen(path) >= PEAK_PATH_CAP || strpbrk(key, "\t\n\r"))
        return -1;
    make_parent_dirs(path);
    kept_line *lines = malloc((MAX_LINES + 1) * sizeof *lines);
    if (!lines)
        return -1;
    const int lock = take_lock(path);
    int ours = 1;
    size_t n = read_lines(path, lines, &ours), at = n;
    for (size_t i = 0; i < n; i++)
        if (strcmp(lines[i].key, key) == 0) {
            *kept = lines[i].gflops;
            at = i;
        }
    int rc = -1;
    const int faster = isfinite(measured) && measured > *kept && measured < 1e7;
    if (lock >= 0 && ours && faster) {
        if (at == n) { /* a new key: first in the file, the oldest dropped past MAX_LINES */
            memmove(lines + 1, lines, (n < MAX_LINES ? n : MAX_LINES - 1) * sizeof *lines);
            n = n < MAX_LINES ? n + 1 : MAX_LINES;
            at = 0;
            snprintf(lines[0].key, sizeof lines[0].key, "%s", key);
        }
        lines[at].gflops = measured;
        rc = write_lines(path, lines, n);
    } else if (lock >= 0 && ours) {
        rc = 0; /* nothing to write: the kept value stands */
    }
    if (lock >= 0)
        close(lock); /* releases the flock */
    free(lines);
    return rc;
}

void peak_training_best(int bf16, int threads, int use_cache, peak_best *b)
{
    memset(b, 0, sizeof *b);
    b->measured = peak_training_gflops(bf16, threads);
    b->gflops = b->measured;
    peak_loop loop;
    char key[PEAK_KEY_CAP];
    if (!use_cache || b->measured <= 0 ||
        peak_describe(bf16 ? PEAK_ISA_AVX512_BF16 : PEAK_ISA_AUTO, &loop) != 0 ||
        peak_cache_key(loop.name, threads < 1 ? 1 : threads, key, sizeof key) != 0 ||
        peak_cache_path(b->cache, sizeof b->cache) != 0) {
        b->cache[0] = '\0';
        return;
    }
    double kept = 0;
    if (peak_cache_update(b->cache, key, b->measured, &kept) != 0 && kept <= 0)
        b->cache[0] = '\0'; /* neither read nor written: say nothing of it */
    b->kept = kept;
    if (kept > b->gflops)
        b->gflops = kept;
}

void peak_best_note(const peak_best *b, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (!b->cache[0])
        return;
    if (b->kept > b->measured)
        snprintf(buf, cap, "; %.0f now: the fastest of the earlier runs on this CPU, kept in %s",
                 b->measured, b->cache);
    else
        snprintf(buf, cap, "; the fastest so far on this CPU, kept in %s", b->cache);
}
