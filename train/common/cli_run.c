/* What a run of the training programs may use (cli.h): threads, the output directory,
 * memory, precision, default files, numbered files. The option tables and their parsing are
 * in cli.c; the run's own checks (the schedule, a finished resume) in trainer_setup.c. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mha.h"

/* ---- limits ------------------------------------------------------------------------- */

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < CLI_MAX_THREADS ? n : CLI_MAX_THREADS) : 1;
}

int cli_max_threads(void)
{
    int m = 4 * online_cpus();
    return m < CLI_MAX_THREADS ? m : CLI_MAX_THREADS;
}

int cli_check_threads(int threads, int given)
{
    const int max = cli_max_threads();
    if (threads < 0 || threads > max)
        cli_die_usage("invalid value '%d' for --threads%s: at most %d (4 x the %d online CPUs, "
                      "never more than %d)%s", threads, given ? "" : " (from the checkpoint)",
                      max, online_cpus(), (int)CLI_MAX_THREADS,
                      given ? "" : "; give --threads N to run with fewer");
    return threads > 0 ? threads : online_cpus();
}

void cli_prepare_out_dir(const char *dir)
{
    char buf[CLI_PATH_CAP];
    snprintf(buf, sizeof buf, "%s", dir);
    size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        if (buf[i] == '/' && buf[i - 1] == '/')
            continue;
        const char keep = buf[i];
        buf[i] = '\0';
        struct stat sb;
        if (stat(buf, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                cli_die_usage("invalid value '%s' for --out: %s is not a directory", dir, buf);
        } else if (errno != ENOENT || mkdir(buf, 0777) != 0) {
            if (errno != EEXIST)
                cli_die_usage("invalid value '%s' for --out: cannot create directory %s: %s",
                              dir, buf, strerror(errno));
        }
        buf[i] = keep;
    }
    if (access(dir, W_OK | X_OK) != 0)
        cli_die_usage("invalid value '%s' for --out: cannot write into it: %s", dir,
                      strerror(errno));
}

/* Address space kept free under RLIMIT_AS beyond what is mapped at the check: OpenBLAS
 * maps a 128 MiB buffer for each thread that calls it (and, when that fails, retries
 * forever: a run that passed the check would hang), plus OpenMP's thread stacks and the
 * heap's arenas: 256 MiB + 128 MiB per online CPU. */
static double as_headroom(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        cpus = 1;
    if (cpus > 64)
        cpus = 64;
    return (256.0 + 128.0 * (double)cpus) * 1024 * 1024;
}

size_t cli_memory_limit(void)
{
    double lim = (double)SIZE_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        lim = (double)pages * (double)page;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < lim) {
        /* an address-space limit counts what the process has mapped already (libraries,
         * thread stacks) and what OpenBLAS and OpenMP map on first use: leave that out */
        double mapped = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages_now = 0;
        if (f && fscanf(f, "%lu", &pages_now) == 1 && page > 0)
            mapped = (double)pages_now * (double)page;
        if (f)
            fclose(f);
        lim = (double)rl.rlim_cur - mapped - as_headroom();
        if (lim < 0)
            lim = 0;
    }
    return lim >= (double)SIZE_MAX ? SIZE_MAX : (size_t)lim;
}

void cli_bytes_text(double b, char *buf, size_t cap)
{
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, cap, "%.0f KiB", ceil(b / 1024.0));
}

int cli_bf16_disabled(void)
{
    const char *off = getenv("MHA_DISABLE_BF16");
    return off != NULL && off[0] != '\0' && strcmp(off, "0") != 0;
}

void cli_check_precision(int p, int given)
{
    if (mha_precision_available((mha_precision)p))
        return;
    const char *feature = mha_precision_cpu_feature((mha_precision)p);
    const int disabled = feature != NULL && cli_bf16_disabled();
    cli_die_usage("--precision %s%s needs a CPU with %s (bfloat16 dot products)%s; use "
                  "--precision fp32", CLI_PRECISION_NAMES[p], given ? "" : " (from the checkpoint)",
                  feature ? feature : "?",
                  disabled ? ", which MHA_DISABLE_BF16 turns off" : ", which this one lacks");
}

#ifndef MHA_DEFAULT_SOURCE_DIR
#define MHA_DEFAULT_SOURCE_DIR "."
#endif
#ifndef MHA_DEFAULT_DATA_DIR
#define MHA_DEFAULT_DATA_DIR "/usr/local/share/mha"
#endif

void cli_default_path(char *out, size_t cap, const char *rel)
{
    const char *const roots[] = {MHA_DEFAULT_SOURCE_DIR, MHA_DEFAULT_DATA_DIR};
    if (rel[0] == '/' || access(rel, F_OK) == 0) {
        snprintf(out, cap, "%s", rel);
        return;
    }
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(out, cap, "%s/%s", roots[i], rel);
        if (access(out, F_OK) == 0)
            return;
    }
    snprintf(out, cap, "%s", rel);
}

double cli_check_memory(double params, double acts, double other, const char *config,
                        const char *batch, const char *fix_params, const char *fix_acts)
{
    const double need = params + acts + other, have = (double)cli_memory_limit();
    if (need <= have)
        return need;
    char n[32], h[32], p[32], a[32];
    cli_bytes_text(need, n, sizeof n);
    cli_bytes_text(have, h, sizeof h);
    cli_bytes_text(params, p, sizeof p);
    cli_bytes_text(acts, a, sizeof a);
    cli_die_usage("%s needs at least %s of memory (parameters, gradients and AdamW's moments: "
                  "%s; activations of %s: %s), more than the %s this process may use; use a "
                  "smaller %s", config, n, p, batch, a, h, params >= acts ? fix_params : fix_acts);
}

int cli_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int cli_numbered_name(const char *name, const char *prefix, const char *suffix,
                      unsigned long long *k)
{
    const size_t np = strlen(prefix), ns = strlen(suffix), len = strlen(name);
    if (len <= np + ns || strncmp(name, prefix, np) != 0 || strcmp(name + len - ns, suffix) != 0)
        return 0;
    unsigned long long v = 0;
    size_t i = np;
    for (; i < len - ns && name[i] >= '0' && name[i] <= '9'; i++)
        v = v < ULLONG_MAX / 10 ? 10 * v + (unsigned long long)(name[i] - '0') : ULLONG_MAX;
    *k = v;
    return i == len - ns;
}
