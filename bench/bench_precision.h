/*
 * bench/bench_precision.h — the --precision option the three benchmark programs share
 * (mha-bench, mha-gpt-bench, mha-g2p-bench): a comma list of "fp32" / "bf16", checked
 * against this CPU with the library's own answer (mha_precision_available), and the
 * message naming the missing CPU feature (mha_precision_cpu_feature) when a precision
 * cannot run. Header-only (static functions): each program includes it once.
 *
 *   --precision LIST        the precisions to time, in order (default fp32); a precision
 *                           this CPU cannot run: the message below on stderr, exit 2
 *   --check-precision LIST  print one line per precision ("bf16: available" or the
 *                           message) and exit: 0 when all are available, 2 otherwise
 *                           (bench/run*.sh ask this before they add bf16 rows)
 */
#ifndef MHA_BENCH_PRECISION_H
#define MHA_BENCH_PRECISION_H

#include <mha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BENCH_MAX_PRECISIONS = 2 };

/* The reason precision p cannot run here, into buf (for a p that is available: ""). */
static void bench_precision_why(mha_precision p, char *buf, size_t size)
{
    if (mha_precision_available(p)) {
        snprintf(buf, size, "%s", "");
        return;
    }
    const char *feature = mha_precision_cpu_feature(p);
    const char *off = getenv("MHA_DISABLE_BF16");
    const int disabled = feature && off && off[0] && strcmp(off, "0") != 0;
    snprintf(buf, size, "precision %s needs a CPU with %s%s", mha_precision_name(p),
             feature ? feature : "?",
             disabled ? " (MHA_DISABLE_BF16 is set: the library acts as if the CPU lacked it)"
                      : ", which this one lacks");
}

/* Parses a comma list of precision names into out[0..n) (n returned, at most
 * BENCH_MAX_PRECISIONS, no repeats); exits 2 with a message on a bad list. Does not check
 * the CPU (bench_precision_require does). */
static size_t bench_precision_parse(const char *prog, const char *list, mha_precision *out)
{
    size_t n = 0;
    const char *s = list;
    for (;;) {
        const size_t len = strcspn(s, ",");
        mha_precision p;
        if (len == 4 && !strncmp(s, "fp32", 4))
            p = MHA_PRECISION_FP32;
        else if (len == 4 && !strncmp(s, "bf16", 4))
            p = MHA_PRECISION_BF16;
        else {
            fprintf(stderr, "%s: bad value '%s' for --precision (fp32, bf16 or a comma list "
                            "of them, e.g. fp32,bf16)\n", prog, list);
            exit(2);
        }
        for (size_t k = 0; k < n; k++)
            if (out[k] == p) {
                fprintf(stderr, "%s: --precision '%s' names %s twice\n", prog, list,
                        mha_precision_name(p));
                exit(2);
            }
        out[n++] = p;
        if (!s[len])
            break;
        s += len + 1;
        if (n == BENCH_MAX_PRECISIONS || !*s) {
            fprintf(stderr, "%s: bad value '%s' for --precision\n", prog, list);
            exit(2);
        }
    }
    return n;
}

/* Exits 2 with a message naming the missing CPU feature when one of p[0..n) cannot run. */
static void bench_precision_require(const char *prog, const mha_precision *p, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!mha_precision_available(p[k])) {
            char why[256];
            bench_precision_why(p[k], why, sizeof why);
            fprintf(stderr, "%s: --precision %s: %s; use --precision fp32\n", prog,
                    mha_precision_name(p[k]), why);
            exit(2);
        }
}

/* --check-precision LIST: one line per precision on stdout; exit 0 if all are available,
 * 2 otherwise. */
static void bench_precision_check_and_exit(const char *prog, const char *list)
{
    mha_precision p[BENCH_MAX_PRECISIONS];
    const size_t n = bench_precision_parse(prog, list, p);
    int ok = 1;
    for (size_t k = 0; k < n; k++) {
        char why[256];
        bench_precision_why(p[k], why, sizeof why);
        if (why[0]) {
            printf("%s: not available: %s\n", mha_precision_name(p[k]), why);
            ok = 0;
        } else {
            printf("%s: available\n", mha_precision_name(p[k]));
        }
    }
    exit(ok ? 0 : 2);
}

#endif
