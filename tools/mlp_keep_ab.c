/*
 * mha-mlp-keep-ab — the MLP's forward and backward as a block runs them
 * (src/layers_linear.inc), timed in one process in alternation: with the forward keeping
 * gelu'(h) for the backward (what a block's training forward does) and without (the
 * backward takes the tanh again, as before). Both give the same bits; this measures what
 * keeping saves. Medians of --reps rounds after 20 untimed ones.
 *
 *   mha-mlp-keep-ab [--rows N] [--dim C] [--mlp-dim F] [--threads T] [--precision P]
 *                   [--reps R]
 *
 * Defaults: the baby GPT's MLP (768 rows, C 128, F 512), 2 threads, fp32, 400 rounds.
 * The G2P model's: --rows 1280 --dim 192 --mlp-dim 640. Exit status 2 for a bad option
 * or a precision this CPU lacks, 1 when memory or a call fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "mha.h"
#include "mha_internal.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(const char *why)
{
    fprintf(stderr, "mha-mlp-keep-ab: %s\nusage: mha-mlp-keep-ab [--rows N] [--dim C] "
                    "[--mlp-dim F] [--threads T] [--precision fp32|bf16] [--reps R]\n",
            why);
    return 2;
}

/* a positive integer of at most `max`, or 0 */
static size_t parse_count(const char *s, size_t max)
{
    char *end;
    const unsigned long long v = strtoull(s, &end, 10);
    return s[0] >= '0' && s[0] <= '9' && *end == '\0' && v > 0 && v <= max ? (size_t)v : 0;
}

/* deterministic values in [lo, hi) */
static void fill(float *x, size_t n, float lo, float hi, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)mha_pcg32_double(&rng);
}

int main(int argc, char **argv)
{
    size_t N = 768, C = 128, F = 512, reps = 400, threads = 2;
    mha_precision prec = MHA_PRECISION_FP32;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t *dst = !strcmp(o, "--rows")      ? &N
                      : !strcmp(o, "--dim")     ? &C
                      : !strcmp(o, "--mlp-dim") ? &F
                      : !strcmp(o, "--reps")    ? &reps
                      : !strcmp(o, "--threads") ? &threads
                                                : NULL;
        if (dst != NULL) {
            if (v == NULL || (*dst = parse_count(v, !strcmp(o, "--threads") ? 256 : 100000)) == 0)
                return usage("expected a positive integer after an option");
            i++;
        } else if (!strcmp(o, "--precision") && v != NULL) {
            if (!strcmp(v, "fp32"))
                prec = MHA_PRECISION_FP32;
            else if (!strcmp(v, "bf16"))
                prec = MHA_PRECISION_BF16;
            else
                return usage("--precision: fp32 or bf16");
            i++;
        } else {
            return usage("unknown option");
        }
    }
    if (!mha_precision_available(prec)) {
        fprintf(stderr, "mha-mlp-keep-ab: this CPU has no %s: bf16 cannot run here\n",
                mha_precision_cpu_feature(prec));
        return 2;
    }
    omp_set_num_threads((int)threads);
    float *x = malloc(N * C * sizeof *x), *dy = malloc(N * C * sizeof *dy);
    float *W1 = malloc(F * C * sizeof *W1), *W2 = malloc(C * F * sizeof *W2);
    float *b1 = malloc(F * sizeof *b1), *b2 = malloc(C * sizeof *b2);
    float *h = malloc(N * F * sizeof *h), *a = malloc(N * F * sizeof *a);
    float *scr = malloc(N * F * sizeof *scr), *y = malloc(N * C * sizeof *y);
    float *dx = malloc(N * C * sizeof *dx), *g1 = calloc(F * C, sizeof *g1);
    float *gb1 = calloc(F, sizeof *gb1), *g2 = calloc(C * F, sizeof *g2);
    float *gb2 = calloc(C, sizeof *gb2);
    double *t[2] = {malloc(reps * sizeof(double)), malloc(reps * sizeof(double))};
    if (!x || !dy || !W1 || !W2 || !b1 || !b2 || !h || !a || !scr || !y || !dx || !g1 || !gb1 ||
        !g2 || !gb2 || !t[0] || !t[1]) {
        fprintf(stderr, "mha-mlp-keep-ab: out of memory\n");
        return 1;
    }
    fill(x, N * C, -1, 1, 1);
    fill(dy, N * C, -1, 1, 2);
    fill(W1, F * C, -0.1f, 0.1f, 3);
    fill(W2, C * F, -0.1f, 0.1f, 4);
    fill(b1, F, -0.1f, 0.1f, 5);
    fill(b2, C, -0.1f, 0.1f, 6);
    for (size_t r = 0; r < reps + 20; r++)
        for (int keep = 0; keep < 2; keep++) {
            const double t0 = now_s();
            int st = mha__smlp_forward_keep(prec, N, C, F, x, W1, b1, W2, b2, h, a, y, keep);
            if (st == MHA_OK)
                st = mha__smlp_backward_set(prec, N, C, F, x, W1, W2, h, a, dy, scr, dx, g1, gb1,
                                            g2, gb2, keep);
            if (st != MHA_OK) {
                fprintf(stderr, "mha-mlp-keep-ab: %s\n", mha_strerror(st));
                return 1;
            }
            if (r >= 20)
                t[keep][r - 20] = now_s() - t0;
        }
    for (int k = 0; k < 2; k++)
        qsort(t[k], reps, sizeof(double), cmp_double);
    const double m0 = t[0][reps / 2], m1 = t[1][reps / 2];
    printf("MLP %zu rows, C %zu, F %zu, %s, %zu threads: forward + backward %.1f us recomputing "
           "gelu', %.1f us keeping it (median of %zu, alternating): %.3f\n",
           N, C, F, prec == MHA_PRECISION_BF16 ? "bf16" : "fp32", threads, 1e6 * m0, 1e6 * m1,
           reps, m1 / m0);
    free(x), free(dy), free(W1), free(W2), free(b1), free(b2), free(h), free(a), free(scr);
    free(y), free(dx), free(g1), free(gb1), free(g2), free(gb2), free(t[0]), free(t[1]);
    return 0;
}
