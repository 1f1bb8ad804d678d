/* Option tables, strict parsing and --help of the training programs (cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"

static const char *prog = "mha";
static int usage_quiet = 0;

void cli_set_program(const char *name)
{
    prog = name;
}

void cli_start_program(const char *name)
{
    cli_set_program(name);
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG: reported */
}

void cli_set_usage_quiet(int quiet)
{
    usage_quiet = quiet;
}

const char *cli_program(void)
{
    return prog;
}

void cli_die_usage(const char *fmt, ...)
{
    if (usage_quiet)
        exit(CLI_EXIT_USAGE);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see %s --help)\n", prog);
    va_end(ap);
    exit(CLI_EXIT_USAGE);
}

void cli_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(code);
}

void cli_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return;
    /* stdio keeps what it could not write and tries again: the flush names the cause */
    cli_die(CLI_EXIT_RUNTIME, "cannot write standard output: %s",
            errno ? strerror(errno) : "a write failed");
}

void cli_check(int st, const char *what)
{
    if (st != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "%s: %s", what, mha_strerror(st));
}

const char *const CLI_ATTN_NAMES[] = {"stored", "recompute", NULL};
const char *const CLI_PRECISION_NAMES[] = {"fp32", "bf16", NULL};
const char *const CLI_PROGRESS_NAMES[] = {"auto", "live", "plain", NULL};

void cli_dirname(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

size_t cli_index(const cli_opt *opts, size_t n, const char *name)
{
    size_t k = 0;
    while (k < n && strcmp(opts[k].name, name) != 0)
        k++;
    return k;
}

/* CLI_STR: \n, \t and \\ are written as escapes (and read back by cli_parse). */
static void format_escaped(const char *s, char *buf, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 3 < cap; s++) {
        if (*s == '\n' || *s == '\t' || *s == '\\') {
            buf[k++] = '\\';
            buf[k++] = *s == '\n' ? 'n' : *s == '\t' ? 't' : '\\';
        } else {
            buf[k++] = *s;
        }
    }
    if (cap)
        buf[k < cap ? k : cap - 1] = '\0';
}

void cli_format(const cli_opt *o, const void *cfg, char *buf, size_t cap)
{
    const char *p = (const char *)cfg + o->off;
    switch (o->type) {
    case CLI_CHOICE: snprintf(buf, cap, "%s", o->choices[*(const int *)p]); break;
    case CLI_FLAG: snprintf(buf, cap, "%d", *(const int *)p ? 1 : 0); break;
    case CLI_SIZE: snprintf(buf, cap, "%zu", *(const size_t *)p); break;
    case CLI_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case CLI_DBL: { /* shortest text that reads back as the same double */
        double v = *(const double *)p;
        snprintf(buf, cap, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, cap, "%.17g", v);
        break;
    }
    case CLI_INT: snprintf(buf, cap, "%d", *(const int *)p); break;
    case CLI_PATH: snprintf(buf, cap, "%s", p); break;
    case CLI_STR: format_escaped(p, buf, cap); break;
    }
}

/* CLI_STR: text with \n, \t, \\ unescaped into dst[CLI_PATH_CAP]; 1 if it does not fit,
 * 2 if a backslash starts any other escape (a typo: write \\ for a backslash). */
static int unescape(const char *text, char *dst)
{
    size_t k = 0;
    for (const char *s = text; *s; s++) {
        char c = *s;
        if (c == '\\') {
            if (s[1] != 'n' && s[1] != 't' && s[1] != '\\')
                return 2;
            s++;
            c = *s == 'n' ? '\n' : *s == 't' ? '\t' : '\\';
        }
        if (k + 1 >= CLI_PATH_CAP)
            return 1;
        dst[k++] = c;
    }
    dst[k] = '\0';
    return 0;
}

/* 1 if s is digits [. digits] [(e|E) [+-] digits] or . digits [...], with at least one
 * mantissa digit: the decimal floating-point form, nothing strtod would also take
 * (leading white space, a sign, hex, inf, nan). */
static int decimal_syntax(const char *s)
{
    size_t digits = 0;
    while (*s >= '0' && *s <= '9') {
        s++;
        digits++;
    }
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') {
            s++;
            digits++;
        }
    }
    if (digits == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* 1 if the mantissa of decimal text s has a non-zero digit. */
static int has_nonzero_digit(const char *s)
{
    for (; *s && *s != 'e' && *s != 'E'; s++)
        if (*s >= '1' && *s <= '9')
            return 1;
    return 0;
}

const char *cli_parse(const cli_opt *o, const char *text, void *cfg)
{
    char *p = (char *)cfg + o->off;
    char *end = NULL;
    switch (o->type) {
    case CLI_CHOICE: {
        static char msg[256];
        size_t len = (size_t)snprintf(msg, sizeof msg, "must be one of");
        for (int k = 0; o->choices[k]; k++) {
            if (strcmp(text, o->choices[k]) == 0) {
                *(int *)p = k;
                return NULL;
            }
            if (len < sizeof msg)
                len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s", k ? "," : "",
                                        o->choices[k]);
        }
        return msg;
    }
    case CLI_FLAG:
        if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
            return "a flag takes no value (or =0 / =1)";
        *(int *)p = text[0] == '1';
        return NULL;
    case CLI_PATH:
        if (text[0] == '\0' || strlen(text) >= CLI_PATH_CAP)
            return "must be a non-empty path";
        strcpy(p, text);
        return NULL;
    case CLI_STR: {
        char tmp[CLI_PATH_CAP];
        const int u = unescape(text, tmp);
        if (u == 2)
            return "has an unknown escape: the escapes are \\n (newline), \\t (tab) and \\\\ (a "
                   "backslash)";
        if (u)
            return "is too long";
        strcpy(p, tmp);
        return NULL;
    }
    case CLI_DBL: {
        if (!decimal_syntax(text))
            return "must be a decimal number (digits, an optional fraction and exponent; no "
                   "sign, spaces, hex, inf or nan) in range";
        errno = 0;
        double v = strtod(text, &end);
        /* ERANGE: overflow (±HUGE_VAL) or underflow; a subnormal result is kept, one that
         * rounded to 0 from a non-zero text is refused */
        if (errno == ERANGE && (isinf(v) || (v == 0 && has_nonzero_digit(text))))
            return "is not representable as a double (overflow or underflow); must be in range";
        if (end == text || *end != '\0' || !(v >= o->lo && v <= o->hi))
            return "must be a number in range";
        *(double *)p = v;
        return NULL;
    }
    default: {
        if (text[0] < '0' || text[0] > '9') /* strtoull would skip white space and wrap
                                               " -1" to 2^64-1 */
            return "must be a non-negative integer in range";
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (errno || end == text || *end != '\0' || (double)v < o->lo || (double)v > o->hi)
            return "must be a non-negative integer in range";
        if (o->type == CLI_SIZE)
            *(size_t *)p = (size_t)v;
        else if (o->type == CLI_U64)
            *(uint64_t *)p = (uint64_t)v;
        else
            *(int *)p = (int)v;
        return NULL;
    }
    }
}

void cli_range_text(const cli_opt *o, char *buf, size_t cap)
{
    const int integral = o->type == CLI_SIZE || o->type == CLI_U64 || o->type == CLI_INT;
    if (integral && o->hi >= 18446744073709551615.0)
        snprintf(buf, cap, " [%.0f, 2^64-1]", o->lo);
    else if (o->type == CLI_DBL)
        snprintf(buf, cap, " [%g, %g]", o->lo, o->hi);
    else if (integral)
        snprintf(buf, cap, " [%.0f, %.0f]", o->lo, o->hi);
    else
        buf[0] = '\0';
}

void cli_copy_field(const cli_opt *o, void *dst, const void *src)
{
    size_t sz = o->type == CLI_DBL   ? sizeof(double)
                : o->type == CLI_U64  ? sizeof(uint64_t)
                : o->type == CLI_SIZE ? sizeof(size_t)
                : o->type == CLI_PATH || o->type == CLI_STR ? (size_t)CLI_PATH_CAP
                                                              : sizeof(int);
    memcpy((char *)dst + o->off, (const char *)src + o->off, sz);
}

/* Optimal string alignment distance (Levenshtein with adjacent transpositions) between
 * a[la] and b[lb], counted up to 3 (names longer than 63 bytes: 3). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    enum { CAP = 64 };
    if (la >= CAP || lb >= CAP)
        return 3;
    size_t d[CAP][CAP];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 3 ? d[la][lb] : 3;
}

/* The option of opts[n] nearest to name[len] — at most 2 edits, or name a prefix of it
 * — or NULL. */
static const char *nearest_option(const cli_opt *opts, size_t n, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t k = 0; k < n; k++) {
        const size_t lk = strlen(opts[k].name);
        size_t d = edit_distance(name, len, opts[k].name, lk);
        if (d > 2 && len >= 3 && len < lk && strncmp(opts[k].name, name, len) == 0)
            d = 2; /* an abbreviation */
        if (d < best_d) {
            best_d = d;
            best = opts[k].name;
        }
    }
    return best;
}

/* Options every program has renamed, so that all of them say the same thing the same
 * way: {former name, name}. The former name is still accepted, on the command line and
 * in the metadata of checkpoints written before the change. */
static const char *const RENAMED[][2] = {
    {"model-dim", "dim"}, /* mha-train's, before it took mha-gpt's and mha-g2p's name */
};

const char *cli_former_name(const char *name)
{
    for (size_t i = 0; i < sizeof RENAMED / sizeof RENAMED[0]; i++)
        if (strcmp(RENAMED[i][1], name) == 0)
            return RENAMED[i][0];
    return NULL;
}

/* The index in opts[n] of the option named name[len], or of the one it is the former name
 * of; n if none. */
static size_t find_option(const cli_opt *opts, size_t n, const char *name, size_t len)
{
    for (size_t k = 0; k < n; k++)
        if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0)
            return k;
    for (size_t k = 0; k < n; k++) {
        const char *old = cli_former_name(opts[k].name);
        if (old && strlen(old) == len && strncmp(old, name, len) == 0)
            return k;
    }
    return n;
}

void cli_collect(const cli_opt *opts, size_t n, int argc, char **argv, int first,
                 const char **vals)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            cli_die_usage("unexpected argument '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const size_t k = find_option(opts, n, name, len);
        if (k == n) {
            const char *near = nearest_option(opts, n, name, len);
            if (near)
                cli_die_usage("unknown option '%s' (did you mean --%s?)", a, near);
            cli_die_usage("unknown option '%s'", a);
        }
        if (opts[k].type == CLI_FLAG) {
            vals[k] = eq ? eq + 1 : "1";
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!eq && v && strncmp(v, "--", 2) == 0) /* no value accepted starts with "--" */
            v = NULL;
        if (!v)
            cli_die_usage("option --%s needs a value (%s)", opts[k].name, opts[k].arg);
        vals[k] = v;
    }
}

void cli_apply(const cli_opt *opts, size_t n, const char *const *vals, void *cfg)
{
    for (size_t k = 0; k < n; k++) {
        if (!vals[k])
            continue;
        const char *e = cli_parse(&opts[k], vals[k], cfg);
        if (e) {
            char rng[64];
            cli_range_text(&opts[k], rng, sizeof rng);
            cli_die_usage("invalid value '%s' for --%s: %s%s", vals[k], opts[k].name, e, rng);
        }
    }
}

void cli_print_wrapped(const char *head, const char *text)
{
    const int indent = 25, width = 79;
    int col = printf("  %-22s", head);
    if (col > indent - 1) {
        printf("\n%*s", indent - 1, "");
        col = indent - 1;
    }
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        int len = sp ? (int)(sp - p) : (int)strlen(p);
        if (col + 1 + len > width && col > indent - 1) {
            printf("\n%*s", indent - 1, "");
            col = indent - 1;
        }
        col += printf(" %.*s", len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
    printf("\n");
}

void cli_print_options(const cli_opt *opts, size_t n, const void *defs)
{
    for (size_t i = 0; i < n; i++) {
        const cli_opt *o = &opts[i];
        char head[64], rng[64], text[1024], def[256], shown[300];
        if (o->type == CLI_FLAG)
            snprintf(head, sizeof head, "--%s", o->name);
        else
            snprintf(head, sizeof head, "--%s %s", o->name, o->arg);
        cli_range_text(o, rng, sizeof rng);
        snprintf(text, sizeof text, "%s%s", o->help, rng);
        cli_print_wrapped(head, text);
        cli_format(o, defs, def, sizeof def);
        if (o->type == CLI_FLAG)
            snprintf(shown, sizeof shown, "%s",
                     *(const int *)((const char *)defs + o->off) ? "on" : "off");
        else if ((o->type == CLI_PATH || o->type == CLI_STR) && def[0] == '\0')
            snprintf(shown, sizeof shown, "none");
        else if (o->type == CLI_STR)
            snprintf(shown, sizeof shown, "\"%s\"", def);
        else
            snprintf(shown, sizeof shown, "%s", def);
        printf("  %-22s   default: %s\n", "", shown);
    }
}
