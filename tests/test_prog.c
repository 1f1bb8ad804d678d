/* Helpers for the tests that run a program in a temporary directory: see test_prog.h. */
#include "test_prog.h"

#include "test_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "mha.h"
#include "mha_safetensors.h"

char tmpdir[256];

int tmpdir_setup(void **state)
{
    (void)state;
    return make_temp_dir(tmpdir, sizeof tmpdir, "mha_test_prog");
}

int tmpdir_teardown(void **state)
{
    (void)state;
    return remove_tree(tmpdir);
}

/* path relative to tmpdir unless absolute, into buf[cap]; fails the test if it is cut */
static void resolve(char *buf, size_t cap, const char *path)
{
    int r = path[0] == '/' ? snprintf(buf, cap, "%s", path)
                           : snprintf(buf, cap, "%s/%s", tmpdir, path);
    assert_true(r > 0 && (size_t)r < cap);
}

int run_prog(const char *exe, const char *tag, const char *args)
{
    char cmd[4096];
    int r = snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > '%s.out' 2> '%s.err'", tmpdir, exe,
                     args, tag, tag);
    assert_true(r > 0 && (size_t)r < sizeof cmd);
    int st = system(cmd);
    return (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

/* The child of run_prog_limited / run_prog_fsize / start_prog: limits, then the shell with
 * the command. ignore_xfsz: SIGXFSZ ignored in the child, else its default action. */
static pid_t spawn(const char *exe, const char *tag, const char *args, unsigned timeout_s,
                   long long fsize, int ignore_xfsz)
{
    char cmd[4096];
    int r = snprintf(cmd, sizeof cmd, "exec '%s' %s > '%s.out' 2> '%s.err'", exe, args, tag,
                     tag);
    assert_true(r > 0 && (size_t)r < sizeof cmd);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(tmpdir) != 0)
            _exit(97);
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, ignore_xfsz ? SIG_IGN : SIG_DFL);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(96);
        }
        alarm(timeout_s); /* kept across exec: the program cannot outlive it */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(98);
    }
    return pid;
}

int wait_prog(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        assert_true(errno == EINTR);
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? -1 - WTERMSIG(st) : -1;
}

int run_prog_limited(const char *exe, const char *tag, const char *args, unsigned timeout_s,
                     long long fsize)
{
    int st = wait_prog(spawn(exe, tag, args, timeout_s, fsize, 1));
    return st >= 0 ? st : -1;
}

int run_prog_fsize(const char *exe, const char *tag, const char *args, unsigned timeout_s,
                   long long fsize)
{
    return wait_prog(spawn(exe, tag, args, timeout_s, fsize, 0));
}

pid_t start_prog(const char *exe, const char *tag, const char *args, unsigned timeout_s)
{
    return spawn(exe, tag, args, timeout_s, 0, 1);
}

void assert_prog_status(int got, int want, const char *tag)
{
    if (got == want)
        return;
    char path[300];
    snprintf(path, sizeof path, "%s.err", tag);
    size_t n = 0;
    char *err = slurp(path, &n);
    const size_t tail = 2000;
    print_message("[  STDERR  ] %s (exit status %d), the end of %s:\n%s\n", tag, got, path,
                  err == NULL ? "(unreadable)" : n > tail ? err + n - tail : err);
    free(err);
    fail_msg("%s: exit status %d, expected %d", tag, got, want);
}

size_t count_lines(const char *path)
{
    size_t len, n = 0;
    char *t = slurp(path, &len);
    for (size_t i = 0; t && i < len; i++)
        n += t[i] == '\n';
    free(t);
    return n;
}

char *slurp(const char *path, size_t *len)
{
    char full[1024];
    resolve(full, sizeof full, path);
    FILE *f = fopen(full, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

void write_file(const char *path, const void *data, size_t n)
{
    char full[1024];
    resolve(full, sizeof full, path);
    write_bytes(full, data, n);
}

int file_exists(const char *path)
{
    char full[1024];
    struct stat sb;
    resolve(full, sizeof full, path);
    return stat(full, &sb) == 0;
}

void assert_file_contains(const char *path, const char *needle)
{
    char *s = slurp(path, NULL);
    assert_non_null(s);
    if (!strstr(s, needle))
        fail_msg("%s does not contain \"%s\":\n%s", path, needle, s);
    free(s);
}

void assert_same_file(const char *a, const char *b)
{
    size_t n1, n2;
    char *x = slurp(a, &n1), *y = slurp(b, &n2);
    assert_non_null(x);
    assert_non_null(y);
    if (n1 != n2 || memcmp(x, y, n1) != 0)
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, n1, n2);
    free(x);
    free(y);
}

/* The columns a log holds of the machine's clock (they differ between any two runs). */
static int timing_column(const char *name, size_t len)
{
    static const char *const names[] = {"time_s", "tokens_per_s", "words_per_s"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && strncmp(names[i], name, len) == 0)
            return 1;
    return 0;
}

/* The log at path without its timing columns (named by its header), into a new string. */
static char *log_without_timing(const char *path)
{
    char *s = slurp(path, NULL);
    assert_non_null(s);
    char *out = malloc(strlen(s) + 1), *o = out;
    assert_non_null(out);
    int drop[64] = {0};
    size_t col = 0, line = 0;
    for (const char *p = s; *p;) {
        const char *e = p + strcspn(p, ",\n");
        if (line == 0 && col < 64)
            drop[col] = timing_column(p, (size_t)(e - p));
        if (col >= 64 || !drop[col]) {
            if (o > out && o[-1] != '\n')
                *o++ = ',';
            memcpy(o, p, (size_t)(e - p));
            o += e - p;
        }
        col++;
        if (*e == '\n') {
            *o++ = '\n';
            col = 0;
            line++;
        }
        p = *e ? e + 1 : e;
    }
    *o = '\0';
    free(s);
    return out;
}

void assert_same_log(const char *a, const char *b)
{
    char *x = log_without_timing(a), *y = log_without_timing(b);
    if (strcmp(x, y) != 0)
        fail_msg("%s and %s differ beyond their timing columns (%zu and %zu bytes left)", a,
                 b, strlen(x), strlen(y));
    free(x);
    free(y);
}

double summary_number(const char *path, const char *key)
{
    char *s = slurp(path, NULL);
    assert_non_null(s);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(j);
    free(s);
    return d;
}

void assert_f32_tensors_finite(const mha_st_file *f)
{
    for (size_t i = 0; i < mha_st_count(f); i++) {
        mha_st_tensor t;
        assert_int_equal(mha_st_tensor_at(f, i, &t), MHA_OK);
        if (t.dtype != MHA_ST_F32)
            continue;
        size_t n = 1;
        for (size_t k = 0; k < t.ndim; k++)
            n *= t.shape[k];
        for (size_t k = 0; k < n; k++)
            if (!isfinite(((const float *)t.data)[k]))
                fail_msg("checkpoint tensor %s[%zu] is not finite", t.name, k);
    }
}

void assert_checkpoint_file_finite(const char *rel)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    mha_st_file *f = NULL;
    assert_int_equal(mha_st_load(path, &f, err, sizeof err), MHA_OK);
    assert_f32_tensors_finite(f);
    mha_st_free(f);
}

int same_checkpoint_tensors(const char *a, const char *b, char *why, size_t cap)
{
    char pa[512], pb[512], err[256];
    snprintf(pa, sizeof pa, "%s/%s", tmpdir, a);
    snprintf(pb, sizeof pb, "%s/%s", tmpdir, b);
    mha_st_file *fa = NULL, *fb = NULL;
    assert_int_equal(mha_st_load(pa, &fa, err, sizeof err), MHA_OK);
    assert_int_equal(mha_st_load(pb, &fb, err, sizeof err), MHA_OK);
    int same = mha_st_count(fa) == mha_st_count(fb);
    if (!same)
        snprintf(why, cap, "%zu against %zu tensors", mha_st_count(fa), mha_st_count(fb));
    for (size_t i = 0; same && i < mha_st_count(fa); i++) {
        mha_st_tensor x, y;
        assert_int_equal(mha_st_tensor_at(fa, i, &x), MHA_OK);
        assert_int_equal(mha_st_tensor_at(fb, i, &y), MHA_OK);
        size_t n = mha_st_dtype_size(x.dtype);
        for (size_t d = 0; d < x.ndim; d++)
            n *= x.shape[d];
        same = strcmp(x.name, y.name) == 0 && x.dtype == y.dtype && x.ndim == y.ndim &&
               memcmp(x.shape, y.shape, x.ndim * sizeof x.shape[0]) == 0 &&
               memcmp(x.data, y.data, n) == 0;
        if (!same)
            snprintf(why, cap, "tensor %zu (%s against %s)", i, x.name, y.name);
    }
    mha_st_free(fa);
    mha_st_free(fb);
    return same;
}

/* Fails the test unless checkpoints a and b hold the same tensors (names, dtypes, shapes,
 * bytes) and the same metadata except "elapsed_seconds" (the run's wall time so far,
 * which differs between runs). */
void assert_same_checkpoint(const char *a, const char *b)
{
    char why[256];
    if (!same_checkpoint_tensors(a, b, why, sizeof why))
        fail_msg("%s and %s differ: %s", a, b, why);
    cJSON *m[2];
    const char *paths[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *bytes = slurp(paths[k], &len);
        assert_non_null(bytes);
        uint64_t hn = 0;
        for (int i = 0; i < 8; i++)
            hn |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
        cJSON *h = cJSON_ParseWithLength(bytes + 8, (size_t)hn);
        assert_non_null(h);
        m[k] = cJSON_DetachItemFromObjectCaseSensitive(h, "__metadata__");
        assert_non_null(m[k]);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(m[k], "elapsed_seconds"));
        cJSON_DeleteItemFromObjectCaseSensitive(m[k], "elapsed_seconds");
        cJSON_DeleteItemFromObjectCaseSensitive(m[k], "run_id");
        cJSON_DeleteItemFromObjectCaseSensitive(m[k], "crc32c.__metadata__");
        cJSON_Delete(h);
        free(bytes);
    }
    assert_true(cJSON_Compare(m[0], m[1], 1));
    cJSON_Delete(m[0]);
    cJSON_Delete(m[1]);
}

/* See test_prog.h. */
void rewrite_checkpoint(const char *src, const char *dst, int strip_crc, const char *swap_a,
                        const char *swap_b, const char *name, const void *data, size_t bytes)
{
    char ps[512], pd[512], err[256];
    snprintf(ps, sizeof ps, "%s/%s", tmpdir, src);
    snprintf(pd, sizeof pd, "%s/%s", tmpdir, dst);
    mha_st_file *f = NULL;
    if (mha_st_load(ps, &f, err, sizeof err) != MHA_OK)
        fail_msg("%s: %s", src, err);
    const size_t n = mha_st_count(f), nm = mha_st_meta_count(f);
    mha_st_tensor *t = calloc(n, sizeof *t);
    const char **mk = calloc(nm + 1, sizeof *mk), **mv = calloc(nm + 1, sizeof *mv);
    assert_non_null(t);
    assert_non_null(mk);
    assert_non_null(mv);
    size_t ia = n, ib = n, in = n;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mha_st_tensor_at(f, i, &t[i]), MHA_OK);
        if (swap_a && strcmp(t[i].name, swap_a) == 0)
            ia = i;
        if (swap_b && strcmp(t[i].name, swap_b) == 0)
            ib = i;
        if (name && strcmp(t[i].name, name) == 0) {
            size_t numel = 1;
            for (size_t d = 0; d < t[i].ndim; d++)
                numel *= t[i].shape[d];
            assert_int_equal(numel * mha_st_dtype_size(t[i].dtype), bytes);
            t[i].data = data;
            in = i;
        }
    }
    assert_true(name == NULL || in < n);
    if (swap_a) {
        assert_true(ia < n && ib < n);
        const void *d = t[ia].data;
        t[ia].data = t[ib].data;
        t[ib].data = d;
    }
    size_t k = 0;
    for (size_t i = 0; i < nm; i++) {
        assert_int_equal(mha_st_meta_at(f, i, &mk[k], &mv[k]), MHA_OK);
        if (!(strip_crc && (strncmp(mk[k], "crc32c.", 7) == 0 || strcmp(mk[k], "run_id") == 0)))
            k++;
    }
    if (mha_st_save(pd, t, n, mk, mv, k, err, sizeof err) != MHA_OK)
        fail_msg("cannot write %s: %s", dst, err);
    free(t);
    free(mk);
    free(mv);
    mha_st_free(f);
}
