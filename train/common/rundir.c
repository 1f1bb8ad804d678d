/* One run per output directory: the lock and the run ids (rundir.h). */
#define _DEFAULT_SOURCE /* flock, getrandom */
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "ckpt.h"
#include "cli.h"

void rundir_lock(const char *dir)
{
    char path[CLI_PATH_CAP + 32];
    snprintf(path, sizeof path, "%s/%s", dir, RUNDIR_LOCK_NAME);
    /* never closed: the lock lasts as long as the process (O_CLOEXEC: not a child's) */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "%s: note: cannot open %s (%s): running without the lock that keeps "
                "a second run out of --out %s\n", cli_program(), path, strerror(errno), dir);
        return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        if (e != EWOULDBLOCK) { /* a file system without locks (some network or FUSE ones) */
            fprintf(stderr, "%s: note: cannot lock %s (%s): running without the lock that "
                    "keeps a second run out of --out %s\n", cli_program(), path, strerror(e),
                    dir);
            close(fd);
            return;
        }
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        long pid = strtol(buf, NULL, 10);
        char who[48] = "another process";
        if (pid > 0)
            snprintf(who, sizeof who, "process %ld", pid);
        cli_die(CLI_EXIT_USAGE, "--out %s is in use by another run (%s holds %s): one run "
                "per directory; wait for it to end or choose another --out", dir, who, path);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        /* the pid is only for the message of a second run: the lock itself holds */
    }
}

void rundir_new_id(char id[RUNDIR_ID_CAP])
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)getpid() << 40);
    }
    snprintf(id, RUNDIR_ID_CAP, "%016llx", (unsigned long long)x);
}

int rundir_id_valid(const char *s)
{
    if (!s || strlen(s) != RUNDIR_ID_CAP - 1)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

/* The run id in the metadata of safetensors file `path`, read from its header alone (a
 * checkpoint may be large): 1 and id set; 0 if the file has none; -1 if the header cannot
 * be read (a corrupt or foreign file). */
static int read_run_id(const char *path, char id[RUNDIR_ID_CAP])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char b8[8];
    uint64_t n = 0;
    int r = -1;
    char *hdr = NULL;
    if (fread(b8, 1, 8, f) == 8) {
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)b8[i] << (8 * i);
        if (n > 0 && n <= 100000000u && (hdr = malloc((size_t)n)) != NULL &&
            fread(hdr, 1, (size_t)n, f) == (size_t)n) {
            cJSON *j = cJSON_ParseWithLength(hdr, (size_t)n);
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "__metadata__");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "run_id");
            if (j)
                r = 0;
            if (cJSON_IsString(v) && rundir_id_valid(v->valuestring)) {
                snprintf(id, RUNDIR_ID_CAP, "%s", v->valuestring);
                r = 1;
            }
            cJSON_Delete(j);
        }
    }
    free(hdr);
    fclose(f);
    return r;
}

typedef struct numbered {
    unsigned long long k;
    char *name;
} numbered;

static int numbered_cmp(const void *a, const void *b)
{
    const numbered *x = a, *y = b;
    return x->k < y->k ? -1 : x->k > y->k;
}

size_t rundir_list_numbered(const char *dir, const char *prefix, const char *suffix,
                            char ***names)
{
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    numbered *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        unsigned long long k;
        if (!cli_numbered_name(s, prefix, suffix, &k))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            numbered *w = realloc(v, cap * sizeof *v);
            if (!w)
                cli_die(CLI_EXIT_RUNTIME, "out of memory");
            v = w;
        }
        v[n].k = k;
        if (!(v[n++].name = strdup(s)))
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
    }
    closedir(d);
    if (n == 0) {
        free(v);
        return 0;
    }
    qsort(v, n, sizeof *v, numbered_cmp);
    char **out = malloc(n * sizeof *out);
    if (!out)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t i = 0; i < n; i++)
        out[i] = v[i].name;
    free(v);
    *names = out;
    return n;
}

void rundir_claim(const char *dir, const char *const *files, size_t n, const char *resume,
                  const char *resume_id, int force)
{
    char rdir[CLI_PATH_CAP] = "";
    if (resume)
        cli_dirname(resume, rdir, sizeof rdir);
    const int same_dir = resume && cli_same_file(rdir, dir);
    for (size_t i = 0; i < n; i++) {
        char path[CLI_PATH_CAP + 64], id[RUNDIR_ID_CAP] = "";
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        struct stat sb;
        if (stat(path, &sb) != 0)
            continue; /* nothing there */
        if (resume && cli_same_file(path, resume))
            continue; /* the checkpoint being resumed */
        const int has = read_run_id(path, id);
        if (resume) {
            if (has == 1 && resume_id && strcmp(id, resume_id) == 0)
                continue; /* the same run (its best checkpoint, or a copy of its directory) */
            if ((has != 1 || !resume_id) && same_dir)
                continue; /* files from before run ids: a directory is one run */
        }
        char theirs[64] = "";
        if (has == 1)
            snprintf(theirs, sizeof theirs, ", run %s", id);
        else if (has < 0)
            snprintf(theirs, sizeof theirs, ", unreadable");
        if (!force) {
            if (!resume)
                cli_die(CLI_EXIT_USAGE, "--out %s already holds a run (%s%s): continue it with "
                        "--resume %s, choose another --out, or give --force to replace it",
                        dir, path, theirs, path);
            char ours[64] = "";
            if (resume_id)
                snprintf(ours, sizeof ours, " (run %s)", resume_id);
            cli_die(CLI_EXIT_USAGE, "cannot resume %s%s into --out %s: it holds another run "
                    "(%s%s), and the two would be mixed; choose another --out (or none: "
                    "the checkpoint's own directory), or give --force to replace that run",
                    resume, ours, dir, path, theirs);
        }
        if (unlink(path) != 0)
            cli_die(CLI_EXIT_USAGE, "--force: cannot remove %s: %s", path, strerror(errno));
        fprintf(stderr, "%s: --force: removed %s (another run's)\n", cli_program(), path);
    }
    for (size_t i = 0; i < n; i++) { /* temporaries of killed saves (the lock is held) */
        char path[CLI_PATH_CAP + 64];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        ckpt_remove_stale(path);
    }
}

void rundir_start(const char *dir, const char *resume, const char *resume_id, int force,
                  int claim, char id[RUNDIR_ID_CAP])
{
    if (!rundir_id_valid(resume_id))
        resume_id = NULL;
    if (resume_id)
        snprintf(id, RUNDIR_ID_CAP, "%s", resume_id);
    else
        rundir_new_id(id);
    if (!claim)
        return;
    cli_prepare_out_dir(dir); /* exit 2 before the model is built */
    rundir_lock(dir);
    char **kept; /* the numbered checkpoints kept by step belong to their run too */
    const size_t nk = rundir_list_numbered(dir, "checkpoint-", ".safetensors", &kept);
    const char **files = malloc((nk + 2) * sizeof *files);
    if (!files)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    files[0] = "checkpoint.safetensors";
    files[1] = "best.safetensors";
    for (size_t i = 0; i < nk; i++)
        files[2 + i] = kept[i];
    rundir_claim(dir, files, nk + 2, resume && resume[0] ? resume : NULL, resume_id, force);
    for (size_t i = 0; i < nk; i++)
        free(kept[i]);
    free(kept);
    free(files);
}
