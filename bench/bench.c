/*
 * mha-bench — times one training step (forward with training = 1, then backward)
 * of the float module, self-attention with a causal mask, and compares it with
 * the machine's peak FLOP rate and its BLAS limit, both measured in the same run.
 *
 * Dimension letters as in mha.h: B batch, S sequence (Sq = Sk = S), D model_dim,
 * H num_heads, hd = D/H.
 *
 * Per case (B, S, D, H) × dropout p × thread count t it reports:
 *   ms              median wall time of one forward+backward step, after warm-up
 *   fwd_ms, bwd_ms  medians of the two halves (the same steps)
 *   gflops          flops / ms, counting the work a causal layer has to do
 *                   (the FlashAttention convention: half of the S×S square)
 *                     forward  F = 8·B·S·D² + 2·B·S²·D
 *                              (projections 8·B·S·D²; QKᵀ and P·V 2·B·S²·D each
 *                              when dense, half of that under the causal mask)
 *                     backward 2·F               → 3·F per step
 *                   every case is causal (mask.causal = 1 in run_case)
 *   gflops_dense    the same time with the dense count F = 8·B·S·D² + 4·B·S²·D
 *                   (the count of earlier runs, as if no score were skipped)
 *   peak_gflops     this machine's peak float32 rate with t threads: a loop of
 *                   independent FMAs on the widest vectors the CPU has (peak.h),
 *                   median of 7 runs at the start of the run
 *   peak_fraction   gflops / peak_gflops (causal count)
 *   precision       the module's mha_config.precision (--precision fp32,bf16): bf16 rows
 *                   run the four projections on bfloat16 operands with float32 sums;
 *                   their peak_gflops / peak_fraction are against the bf16 peak (a loop of
 *                   independent _mm512_dpbf16_ps, 64 flops an instruction, peak.h), the
 *                   fp32 rows' against the FMA loop; sgemm_fraction is against the float32
 *                   sgemm for both (OpenBLAS has no bf16 reference here)
 *   sgemm_gflops    median GFLOP/s of 5 square 1024³ cblas_sgemm calls (2·1024³
 *                   flops each) with the same t, measured right before the case
 *                   (on a shared 2-core machine the limit drifts with the load, so
 *                   each record carries the limit measured next to it; the header
 *                   line's figure is the median of 7 at the start of the run)
 *   sgemm_fraction  gflops / sgemm_gflops (causal count; OpenBLAS runs whatever
 *                   kernel OPENBLAS_CORETYPE picks, so this limit may be a narrower
 *                   vector unit's than peak_gflops)
 *   activation_bytes  *saved_bytes of mha_cache_size() for a cache of (B, S, S)
 *   reference_bytes   the reference: 4·B·S·D floats (Q, K, V, context)
 *                     + B·H·S² floats (softmax weights) + ⌈B·H·S²/8⌉ bytes of
 *                     dropout bits (the bits only when p > 0: with p = 0 there is
 *                     no mask to save)
 * The thread count t goes to mha_config.threads and to openblas_set_num_threads()
 * (either OpenBLAS build: pthreads, or OpenMP, whose call also sets OpenMP's
 * default team size; the header lines and the JSON say which build is linked,
 * openblas_get_parallel(), and which file was loaded, from /proc/self/maps).
 *
 * The library never prints; this program does: a table on stdout, JSON with --json.
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <mha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_precision.h"
#include "peak.h"

/* ---- cases ------------------------------------------------------------------ */
typedef struct bench_case {
    size_t B, S, D, H;
} bench_case;

/* The four shapes: the seed's (2,10,64,8) and three larger ones. */
static const bench_case DEFAULT_CASES[] = {
    {2, 10, 64, 8}, {16, 64, 128, 4}, {8, 256, 256, 8}, {1, 2048, 256, 4}};
enum { NUM_DEFAULT_CASES = sizeof DEFAULT_CASES / sizeof DEFAULT_CASES[0] };
enum { MAX_CASES = 32, MAX_LIST = 16 };
#define SLOW_STEP 0.25 /* seconds */

typedef struct bench_options {
    bench_case cases[MAX_CASES];
    size_t num_cases;
    int threads[MAX_LIST]; /* as given; 0 = all cores                         */
    size_t num_threads;
    double dropouts[MAX_LIST];
    size_t num_dropouts;
    long reps;              /* fixed repetitions; 0 = from --min-time          */
    double min_time;        /* seconds of timed steps per measurement          */
    long warmup;            /* untimed steps before timing                     */
    long max_reps;          /* cap on automatic repetitions                    */
    int sgemm;              /* measure the 1024³ sgemm reference               */
    int peak;               /* measure the FMA-loop peak                       */
    peak_isa isa;           /* the peak loop's instruction set (AUTO = widest) */
    uint64_t seed;
    const char *json_path;  /* NULL = no JSON                                  */
    mha_attn_mode mode;     /* the caches' attention mode                      */
    mha_precision precisions[BENCH_MAX_PRECISIONS]; /* --precision, in order   */
    size_t num_precisions;
} bench_options;

/* One measured record (one row of the table, one JSON object). */
typedef struct bench_result {
    bench_case c;
    int threads;            /* actual count (0 resolved to all cores)          */
    mha_precision precision;
    double dropout;
    long reps;
    double ms, fwd_ms, bwd_ms, min_ms;
    double gflops, gflops_dense; /* causal-half count, dense count             */
    double sgemm_gflops, sgemm_fraction, peak_gflops, peak_fraction;
    size_t activation_bytes, total_bytes, reference_bytes;
} bench_result;

/* ---- small helpers ---------------------------------------------------------- */
static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v in place); n >= 1. */
static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Owned, 64-byte aligned, n floats (rounded up for aligned_alloc). Exits on OOM:
 * this is a program, not the library. */
static float *alloc_floats(size_t n) {
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "mha-bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* x[i] = scale · (2u − 1), u uniform in [0,1) from PCG32. */
static void fill_uniform_f(float *x, size_t n, float scale, mha_pcg32 *rng) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * mha_pcg32_float(rng) - 1.0f);
}

static void die_status(const char *what, int st) {
    fprintf(stderr, "mha-bench: %s failed: %s (%s)\n", what, mha_status_name(st),
            mha_strerror(st));
    exit(1);
}

/* The 1-, 5- and 15-minute load averages from /proc/loadavg into buf ("?" if
 * unreadable): on a 2-core machine anything else running skews every number. */
static void load_average(char *buf, size_t size) {
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
        snprintf(buf, size, "%.2f %.2f %.2f", a, b, c);
    else
        snprintf(buf, size, "?");
    if (f) fclose(f);
}

/* Which OpenBLAS build is linked: openblas_get_parallel() is 0 sequential,
 * 1 pthreads, 2 OpenMP. */
static const char *blas_parallel_name(void) {
    switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "openmp";
    default: return "unknown";
    }
}

/* The file the dynamic loader mapped for OpenBLAS (from /proc/self/maps), into buf;
 * "?" where there is no /proc or no mapping names libopenblas (a static link). Which
 * build runs can also be forced at run time (LD_LIBRARY_PATH=…/openblas-pthread), so
 * the path is recorded beside openblas_get_parallel(). */
static void blas_library(char *buf, size_t size) {
    snprintf(buf, size, "?");
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *path = strchr(line, '/');
        if (path && strstr(path, "libopenblas")) {
            size_t len = strcspn(path, "\n");
            snprintf(buf, size, "%.*s", (int)len, path);
            break;
        }
    }
    fclose(f);
}

static int all_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- the BLAS limit: square 1024³ sgemm ------------------------------------- */
/* C = A·B with A, B, C [n, n] row-major, 2·n³ flops; median GFLOP/s of `runs`
 * timed calls after 2 untimed ones, with OpenBLAS set to `threads` threads. */
static double sgemm_gflops(int threads, size_t n, int runs) {
    float *A = alloc_floats(n * n), *Bm = alloc_floats(n * n), *C = alloc_floats(n * n);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 12345u, 7u);
    fill_uniform_f(A, n * n, 1.0f, &rng);
    fill_uniform_f(Bm, n * n, 1.0f, &rng);
    openblas_set_num_threads(threads);
    double t[64];
    if (runs > 64) runs = 64;
    for (int r = -2; r < runs; r++) {
        double t0 = now_seconds();
        /* C = 1·A·B + 0·C   (n,n) = (n,n)(n,n) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
                    A, (int)n, Bm, (int)n, 0.0f, C, (int)n);
        double dt = now_seconds() - t0;
        if (r >= 0) t[r] = dt;
    }
    double med = median(t, (size_t)runs);
    free(A);
    free(Bm);
    free(C);
    return 2.0 * (double)n * (double)n * (double)n / med * 1e-9;
}

/* ---- one case ---------------------------------------------------------------- */
/* Times `reps` (or, if opt->reps == 0, enough for opt->min_time seconds) training
 * steps of a module (D, H, p) with t threads on input [B, S, D]:
 *   forward(training=1, x_query = x, x_context = NULL, causal)  → out [B,S,D]
 *   backward(d_out)                                            → grads, dx [B,S,D]
 * Gradients accumulate across steps (as the API does); that costs nothing extra. */
static void run_case(const bench_options *opt, bench_case c, double p, int threads,
                     mha_precision prec, bench_result *res) {
    mha_config cfg = {.model_dim = c.D, .num_heads = c.H, .dropout_p = p,
                      .seed = opt->seed, .threads = threads, .precision = prec};
    mha_module *m = NULL;
    mha_cache *cache = NULL;
    int st = mha_create(&m, &cfg);
    if (st) die_status("mha_create", st);
    st = mha_cache_create_mode(&cache, m, c.B, c.S, c.S, opt->mode);
    if (st) die_status("mha_cache_create_mode", st);
    size_t saved = 0, total = 0;
    st = mha_cache_size_mode(m, c.B, c.S, c.S, opt->mode, &saved, &total);
    if (st) die_status("mha_cache_size_mode", st);
    openblas_set_num_threads(threads);

    size_t n = c.B * c.S * c.D;
    float *x = alloc_floats(n), *out = alloc_floats(n), *dout = alloc_floats(n),
          *dx = alloc_floats(n);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, opt->seed, 99u);
    fill_uniform_f(x, n, 1.0f, &rng);
    fill_uniform_f(dout, n, 1.0f / (float)c.D, &rng);
    memset(dx, 0, n * sizeof *dx);
    mha_mask mask = {.mask = NULL, .mask_batch = 1, .mask_heads = 1, .causal = 1,
                     .key_lengths = NULL};

    /* warm-up; the last one also estimates a step's time. A step slower than
     * SLOW_STEP seconds is warm after one, and then 3 timed steps suffice. */
    double step = 0;
    for (long w = 0; w < (opt->warmup > 0 ? opt->warmup : 1); w++) {
        double t0 = now_seconds();
        st = mha_forward(m, cache, 1, c.B, c.S, x, c.S, NULL, &mask, out);
        if (st) die_status("mha_forward", st);
        st = mha_backward(m, cache, x, NULL, dout, dx, NULL);
        if (st) die_status("mha_backward", st);
        step = now_seconds() - t0;
        if (step > SLOW_STEP) break;
    }
    long reps = opt->reps;
    if (reps <= 0) {
        long floor_reps = step > SLOW_STEP ? 3 : 5;
        reps = (long)ceil(opt->min_time / (step > 1e-9 ? step : 1e-9));
        if (reps < floor_reps) reps = floor_reps;
        if (reps > opt->max_reps) reps = opt->max_reps;
    }
    double *tf = malloc((size_t)reps * sizeof *tf), *tb = malloc((size_t)reps * sizeof *tb),
           *ts = malloc((size_t)reps * sizeof *ts);
    if (!tf || !tb || !ts) {
        fprintf(stderr, "mha-bench: out of memory\n");
        exit(1);
    }
    for (long r = 0; r < reps; r++) {
        double t0 = now_seconds();
        st = mha_forward(m, cache, 1, c.B, c.S, x, c.S, NULL, &mask, out);
        double t1 = now_seconds();
        if (st) die_status("mha_forward", st);
        st = mha_backward(m, cache, x, NULL, dout, dx, NULL);
        double t2 = now_seconds();
        if (st) die_status("mha_backward", st);
        tf[r] = t1 - t0;
        tb[r] = t2 - t1;
        ts[r] = t2 - t0;
    }
    /* keep the results observable so no step is optimised away, and catch NaNs */
    double check = 0;
    for (size_t i = 0; i < n; i += 97) check += (double)out[i] + (double)dx[i];
    if (!isfinite(check)) {
        fprintf(stderr, "mha-bench: non-finite output or gradient in case %zu,%zu,%zu,%zu\n",
                c.B, c.S, c.D, c.H);
        exit(1);
    }

    double B = (double)c.B, S = (double)c.S, D = (double)c.D, H = (double)c.H;
    /* forward flops: projections Q, K, V, output 4·2·B·S·D²; QKᵀ and P·V 2·B·S²·D
     * each when dense, half of that under the causal mask (every case here is
     * causal: the scores above the diagonal are neither computed nor counted) */
    double fwd_flops = 8.0 * B * S * D * D + 2.0 * B * S * S * D;
    double fwd_flops_dense = 8.0 * B * S * D * D + 4.0 * B * S * S * D;
    res->c = c;
    res->threads = threads;
    res->precision = prec;
    res->dropout = p;
    res->reps = reps;
    res->fwd_ms = 1e3 * median(tf, (size_t)reps);
    res->bwd_ms = 1e3 * median(tb, (size_t)reps);
    res->ms = 1e3 * median(ts, (size_t)reps);
    res->min_ms = 1e3 * ts[0]; /* ts is sorted by median() */
    res->gflops = 3.0 * fwd_flops / (res->ms * 1e-3) * 1e-9;
    res->gflops_dense = 3.0 * fwd_flops_dense / (res->ms * 1e-3) * 1e-9;
    res->activation_bytes = saved;
    res->total_bytes = total;
    double ref = 4.0 * B * S * D * 4.0 + B * H * S * S * 4.0;
    if (p > 0) ref += ceil(B * H * S * S / 8.0);
    res->reference_bytes = (size_t)ref;

    free(tf);
    free(tb);
    free(ts);
    free(x);
    free(out);
    free(dout);
    free(dx);
    mha_cache_destroy(cache);
    mha_destroy(m);
}

/* ---- options ------------------------------------------------------------------ */
static void usage(FILE *f) {
    fprintf(f,
            "usage: mha-bench [options]\n"
            "Times forward(training)+backward of the float mha module (self-attention,\n"
            "causal mask) and compares it with the machine's peak (an FMA loop) and a\n"
            "square 1024^3 cblas_sgemm, both measured in the same run. GFLOP/s count\n"
            "the causal half of the attention scores (gflops_dense in the JSON: all).\n"
            "\n"
            "  --cases LIST     comma-separated cases: an index 1..%d of the default table\n"
            "                   or BxSxDxH (e.g. 4x128x256x8); default: all of\n"
            "                   1=2x10x64x8 2=16x64x128x4 3=8x256x256x8 4=1x2048x256x4\n"
            "  --threads LIST   comma-separated thread counts, 0 = all cores (%d here);\n"
            "                   default 1,0\n"
            "  --dropout LIST   comma-separated dropout probabilities; default 0,0.1\n"
            "  --reps N         timed steps per measurement; default 0 = enough for\n"
            "                   --min-time seconds (at least 5, or 3 when a step takes\n"
            "                   over 0.25 s; at most --max-reps)\n"
            "  --min-time SEC   default 0.3\n"
            "  --max-reps N     default 2000\n"
            "  --warmup N       untimed steps first (1 when a step takes over 0.25 s);\n"
            "                   default 3\n"
            "  --no-sgemm       skip the 1024^3 sgemm reference (sgemm fraction 0)\n"
            "  --no-peak        skip the FMA-loop peak (peak fraction 0)\n"
            "  --peak-isa ISA   the peak loop's vectors: auto (default: the widest the\n"
            "                   CPU has), avx512, avx2, sse2 or scalar\n"
            "  --seed N         weights/input/dropout seed; default 42\n"
            "  --json FILE      also write the results as JSON to FILE\n"
            "  --mode MODE      attention mode of the caches: stored (default) or\n"
            "                   recompute (memory-efficient; activation bytes linear in S)\n"
            "  --precision LIST the module's precision(s): fp32 (default), bf16 (bfloat16\n"
            "                   projections, float32 sums; needs AVX512_BF16) or fp32,bf16;\n"
            "                   bf16 rows' peak fraction is against the bf16 peak\n"
            "                   (_mm512_dpbf16_ps loop), measured when bf16 is asked for.\n"
            "                   A precision this CPU lacks: a message, exit status 2\n"
            "  --check-precision LIST  say whether each precision runs here, then exit\n"
            "                   (0: all available, 2: not)\n"
            "  --help           this text\n",
            NUM_DEFAULT_CASES, all_cores());
}

static long parse_long(const char *s, const char *opt) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0) {
        fprintf(stderr, "mha-bench: bad value '%s' for %s\n", s, opt);
        exit(2);
    }
    return v;
}

static double parse_double(const char *s, const char *opt) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v) || v < 0) {
        fprintf(stderr, "mha-bench: bad value '%s' for %s\n", s, opt);
        exit(2);
    }
    return v;
}

/* Splits a comma list into tokens[0..n) (each < 64 chars); returns n. Exits on a bad list. */
static size_t split_list(const char *list, char tokens[][64], size_t max) {
    size_t n = 0;
    const char *p = list;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (n == max || len == 0 || len >= 64) {
            fprintf(stderr, "mha-bench: bad list '%s'\n", list);
            exit(2);
        }
        memcpy(tokens[n], p, len);
        tokens[n][len] = '\0';
        n++;
        p += len + (q ? 1 : 0);
        if (q && !*p) {
            fprintf(stderr, "mha-bench: bad list '%s'\n", list);
            exit(2);
        }
    }
    return n;
}

static void parse_cases(const char *list, bench_options *o) {
    char tok[MAX_CASES][64];
    size_t n = split_list(list, tok, MAX_CASES);
    o->num_cases = 0;
    for (size_t i = 0; i < n; i++) {
        bench_case c;
        char extra;
        if (strchr(tok[i], 'x')) {
            if (sscanf(tok[i], "%zux%zux%zux%zu%c", &c.B, &c.S, &c.D, &c.H, &extra) != 4 ||
                !c.B || !c.S || !c.D || !c.H || c.D % c.H) {
                fprintf(stderr, "mha-bench: bad case '%s' (want BxSxDxH, D %% H == 0)\n",
                        tok[i]);
                exit(2);
            }
        } else {
            long k = parse_long(tok[i], "--cases");
            if (k < 1 || k > NUM_DEFAULT_CASES) {
                fprintf(stderr, "mha-bench: case index %ld not in 1..%d\n", k,
                        NUM_DEFAULT_CASES);
                exit(2);
            }
            c = DEFAULT_CASES[k - 1];
        }
        o->cases[o->num_cases++] = c;
    }
}

/* Every option's default (as usage() gives them). */
static void set_defaults(bench_options *o) {
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < NUM_DEFAULT_CASES; i++) o->cases[i] = DEFAULT_CASES[i];
    o->num_cases = NUM_DEFAULT_CASES;
    o->threads[0] = 1;
    o->threads[1] = 0;
    o->num_threads = 2;
    o->dropouts[0] = 0.0;
    o->dropouts[1] = 0.1;
    o->num_dropouts = 2;
    o->min_time = 0.3;
    o->max_reps = 2000;
    o->warmup = 3;
    o->sgemm = 1;
    o->peak = 1;
    o->isa = PEAK_ISA_AUTO;
    o->seed = 42;
    o->precisions[0] = MHA_PRECISION_FP32;
    o->num_precisions = 1;
}

/* --threads v: a comma list of thread counts (0 = all cores). */
static void parse_threads(const char *v, bench_options *o) {
    char tok[MAX_LIST][64];
    o->num_threads = split_list(v, tok, MAX_LIST);
    for (size_t k = 0; k < o->num_threads; k++)
        o->threads[k] = (int)parse_long(tok[k], "--threads");
}

/* --dropout v: a comma list of probabilities in [0, 1]. */
static void parse_dropouts(const char *v, bench_options *o) {
    char tok[MAX_LIST][64];
    o->num_dropouts = split_list(v, tok, MAX_LIST);
    for (size_t k = 0; k < o->num_dropouts; k++) {
        o->dropouts[k] = parse_double(tok[k], "--dropout");
        if (o->dropouts[k] > 1) {
            fprintf(stderr, "mha-bench: dropout %g not in [0,1]\n", o->dropouts[k]);
            exit(2);
        }
    }
}

/* Option a without a value (--help, --no-sgemm, --no-peak): 1 if it is one (done), else 0. */
static int parse_flag(const char *a, bench_options *o) {
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        usage(stdout);
        exit(0);
    } else if (!strcmp(a, "--no-sgemm")) {
        o->sgemm = 0;
    } else if (!strcmp(a, "--no-peak")) {
        o->peak = 0;
    } else {
        return 0;
    }
    return 1;
}

/* Option a with its value v (NULL: a was the last argument): 1 if a is such an option
 * (v used), 0 if it is none. Exits with status 2 on a missing or bad value. */
static int parse_value_option(const char *a, const char *v, bench_options *o) {
#define NEED_VALUE()                                                       \
    do {                                                                   \
        if (!v) {                                                          \
            fprintf(stderr, "mha-bench: %s needs a value\n", a);          \
            exit(2);                                                       \
        }                                                                  \
    } while (0)
    if (!strcmp(a, "--cases")) {
        NEED_VALUE();
        parse_cases(v, o);
    } else if (!strcmp(a, "--threads")) {
        NEED_VALUE();
        parse_threads(v, o);
    } else if (!strcmp(a, "--dropout")) {
        NEED_VALUE();
        parse_dropouts(v, o);
    } else if (!strcmp(a, "--reps")) {
        NEED_VALUE();
        o->reps = parse_long(v, a);
    } else if (!strcmp(a, "--min-time")) {
        NEED_VALUE();
        o->min_time = parse_double(v, a);
    } else if (!strcmp(a, "--max-reps")) {
        NEED_VALUE();
        o->max_reps = parse_long(v, a);
        if (o->max_reps < 1) o->max_reps = 1;
    } else if (!strcmp(a, "--warmup")) {
        NEED_VALUE();
        o->warmup = parse_long(v, a);
    } else if (!strcmp(a, "--seed")) {
        NEED_VALUE();
        o->seed = (uint64_t)parse_long(v, a);
    } else if (!strcmp(a, "--mode")) {
        NEED_VALUE();
        if (!strcmp(v, "stored"))
            o->mode = MHA_ATTN_STORED;
        else if (!strcmp(v, "recompute"))
            o->mode = MHA_ATTN_RECOMPUTE;
        else {
            fprintf(stderr, "mha-bench: bad value '%s' for --mode (stored | recompute)\n", v);
            exit(2);
        }
    } else if (!strcmp(a, "--precision")) {
        NEED_VALUE();
        o->num_precisions = bench_precision_parse("mha-bench", v, o->precisions);
    } else if (!strcmp(a, "--check-precision")) {
        NEED_VALUE();
        bench_precision_check_and_exit("mha-bench", v);
    } else if (!strcmp(a, "--json")) {
        NEED_VALUE();
        o->json_path = v;
    } else if (!strcmp(a, "--peak-isa")) {
        NEED_VALUE();
        if (peak_parse_isa(v, &o->isa)) {
            fprintf(stderr, "mha-bench: bad value '%s' for --peak-isa (auto | avx512 | "
                            "avx2 | sse2 | scalar)\n", v);
            exit(2);
        }
    } else {
        return 0;
    }
#undef NEED_VALUE
    return 1;
}

/* The options in argv, over the defaults; exits with status 2 on a bad one (0 after --help). */
static void parse_args(int argc, char **argv, bench_options *o) {
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (parse_flag(a, o))
            continue;
        if (!parse_value_option(a, v, o)) {
            fprintf(stderr, "mha-bench: unknown option '%s' (see --help)\n", a);
            exit(2);
        }
        i++; /* the value */
    }
    bench_precision_require("mha-bench", o->precisions, o->num_precisions);
}

/* ---- output ----------------------------------------------------------------- */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* The run's machine limits, per thread count of --threads (resolved, 0 → all cores). */
typedef struct bench_limits {
    size_t n;
    int threads[MAX_LIST];
    double sgemm[MAX_LIST];   /* 1024³ sgemm GFLOP/s, median of 7; 0 with --no-sgemm */
    double peak[MAX_LIST];    /* FMA-loop GFLOP/s, median of 7; 0 with --no-peak     */
    int peak_team[MAX_LIST];  /* threads OpenMP gave the peak loop                   */
    int have_peak;
    peak_loop loop;           /* the peak loop's instruction set and shape           */
    double peak_bf16[MAX_LIST];   /* the _mm512_dpbf16_ps loop's GFLOP/s; 0 = not run */
    int peak_bf16_team[MAX_LIST];
    int have_peak_bf16;           /* measured: bf16 asked for, the peak on          */
    peak_loop loop_bf16;
} bench_limits;

/* The limit a record is divided by: the bf16 peak for bf16 rows, the FMA loop's else. */
static double record_peak(const bench_limits *lim, size_t ti, mha_precision p) {
    return p == MHA_PRECISION_BF16 ? lim->peak_bf16[ti] : lim->peak[ti];
}

static int write_json(const char *path, const bench_options *o, const bench_result *r,
                      size_t n, const bench_limits *lim) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const char *ct = getenv("OPENBLAS_CORETYPE");
    fprintf(f, "{\n  \"program\": \"mha-bench\",\n  \"machine\": {\"cores\": %d, "
               "\"openblas_corename\": ", all_cores());
    json_string(f, openblas_get_corename());
    fprintf(f, ", \"openblas_config\": ");
    json_string(f, openblas_get_config());
    fprintf(f, ", \"openblas_parallel\": ");
    json_string(f, blas_parallel_name());
    char lib[512];
    blas_library(lib, sizeof lib);
    fprintf(f, ", \"openblas_library\": ");
    json_string(f, lib);
    fprintf(f, ", \"OPENBLAS_CORETYPE\": ");
    if (ct) json_string(f, ct); else fprintf(f, "null");
    char load[64];
    load_average(load, sizeof load);
    fprintf(f, ", \"loadavg_at_end\": ");
    json_string(f, load);
    fprintf(f, "},\n  \"seed\": %llu,\n  \"flop_count\": \"causal_half\",\n  \"sgemm_1024\": [",
            (unsigned long long)o->seed);
    for (size_t i = 0; i < lim->n; i++)
        fprintf(f, "%s{\"threads\": %d, \"gflops\": %.3f}", i ? ", " : "", lim->threads[i],
                lim->sgemm[i]);
    fprintf(f, "],\n  \"peak\": ");
    if (lim->have_peak) {
        fprintf(f, "{\"isa\": ");
        json_string(f, lim->loop.name);
        fprintf(f, ", \"vector_bits\": %d, \"lanes\": %d, \"accumulators\": %d, "
                   "\"flops_per_lane\": 2, \"runs\": 7, \"gflops\": [",
                lim->loop.vector_bits, lim->loop.lanes, lim->loop.accumulators);
        for (size_t i = 0; i < lim->n; i++)
            fprintf(f, "%s{\"threads\": %d, \"gflops\": %.3f}", i ? ", " : "",
                    lim->peak_team[i], lim->peak[i]);
        fprintf(f, "]}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"peak_gflops\": {");
    for (size_t i = 0; i < lim->n; i++)
        fprintf(f, "%s\"%d\": %.3f", i ? ", " : "", lim->threads[i], lim->peak[i]);
    fprintf(f, "},\n  \"peak_vector_bits\": %d,\n  \"precisions\": [",
            lim->have_peak ? lim->loop.vector_bits : 0);
    for (size_t i = 0; i < o->num_precisions; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", mha_precision_name(o->precisions[i]));
    fprintf(f, "],\n  \"peak_bf16\": ");
    if (lim->have_peak_bf16) {
        fprintf(f, "{\"isa\": ");
        json_string(f, lim->loop_bf16.name);
        fprintf(f, ", \"instruction\": \"_mm512_dpbf16_ps\", \"vector_bits\": %d, "
                   "\"lanes\": %d, \"accumulators\": %d, \"flops_per_lane\": %d, "
                   "\"runs\": 7, \"gflops\": [",
                lim->loop_bf16.vector_bits, lim->loop_bf16.lanes, lim->loop_bf16.accumulators,
                lim->loop_bf16.flops_per_lane);
        for (size_t i = 0; i < lim->n; i++)
            fprintf(f, "%s{\"threads\": %d, \"gflops\": %.3f}", i ? ", " : "",
                    lim->peak_bf16_team[i], lim->peak_bf16[i]);
        fprintf(f, "]}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n  \"peak_bf16_gflops\": {");
    for (size_t i = 0; lim->have_peak_bf16 && i < lim->n; i++)
        fprintf(f, "%s\"%d\": %.3f", i ? ", " : "", lim->threads[i], lim->peak_bf16[i]);
    fprintf(f, "},\n  \"records\": [\n");
    for (size_t i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        fprintf(f,
                "    {\"mode\": \"%s\", \"precision\": \"%s\", \"B\": %zu, \"S\": %zu, \"D\": %zu, \"H\": %zu, \"threads\": %d, "
                "\"dropout\": %g, \"reps\": %ld, \"ms\": %.6f, \"fwd_ms\": %.6f, "
                "\"bwd_ms\": %.6f, \"min_ms\": %.6f, \"gflops\": %.3f, \"gflops_dense\": %.3f, "
                "\"sgemm_gflops\": %.3f, \"sgemm_fraction\": %.4f, \"peak_gflops\": %.3f, "
                "\"peak_fraction\": %.4f, \"activation_bytes\": %zu, "
                "\"cache_total_bytes\": %zu, \"reference_bytes\": %zu, "
                "\"activation_ratio\": %.4f}%s\n",
                o->mode == MHA_ATTN_RECOMPUTE ? "recompute" : "stored",
                mha_precision_name(x->precision), x->c.B, x->c.S, x->c.D,
                x->c.H, x->threads, x->dropout, x->reps, x->ms, x->fwd_ms, x->bwd_ms, x->min_ms,
                x->gflops, x->gflops_dense, x->sgemm_gflops, x->sgemm_fraction, x->peak_gflops,
                x->peak_fraction, x->activation_bytes, x->total_bytes, x->reference_bytes,
                (double)x->activation_bytes / (double)x->reference_bytes,
                i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) ? -1 : 0;
}

/* Resolve the thread counts (0 = all `cores`) into *lim and measure the limits once each:
 * the FMA-loop peak (and the bf16 one when bf16 rows are asked for) and the sgemm
 * reference. Returns 0, or the exit status after a message. */
static int measure_limits(const bench_options *o, int cores, bench_limits *lim) {
    memset(lim, 0, sizeof *lim);
    lim->n = o->num_threads;
    if (o->peak) {
        if (peak_describe(o->isa, &lim->loop)) {
            fprintf(stderr, "mha-bench: this CPU cannot run the --peak-isa loop\n");
            return 2;
        }
        lim->have_peak = 1;
    }
    /* the bf16 peak, when bf16 rows are asked for (bench_precision_require has checked the
     * library can run them; the loop needs the same AVX512_BF16) */
    for (size_t k = 0; o->peak && k < o->num_precisions; k++)
        if (o->precisions[k] == MHA_PRECISION_BF16 &&
            peak_describe(PEAK_ISA_AVX512_BF16, &lim->loop_bf16) == 0)
            lim->have_peak_bf16 = 1;
    for (size_t k = 0; k < o->num_threads; k++) {
        lim->threads[k] = o->threads[k] ? o->threads[k] : cores;
        lim->peak_team[k] = lim->threads[k];
        if (o->peak) {
            lim->peak[k] = peak_gflops(&lim->loop, lim->threads[k], 7, 0.04, &lim->peak_team[k]);
            if (!(lim->peak[k] > 0)) {
                fprintf(stderr, "mha-bench: the peak loop returned a wrong result\n");
                return 1;
            }
        }
        lim->peak_bf16_team[k] = lim->threads[k];
        if (lim->have_peak_bf16) {
            lim->peak_bf16[k] = peak_gflops(&lim->loop_bf16, lim->threads[k], 7, 0.04,
                                            &lim->peak_bf16_team[k]);
            if (!(lim->peak_bf16[k] > 0)) {
                fprintf(stderr, "mha-bench: the bf16 peak loop returned a wrong result\n");
                return 1;
            }
        }
        lim->sgemm[k] = o->sgemm ? sgemm_gflops(lim->threads[k], 1024, 7) : 0.0;
    }
    return 0;
}

/* The header on stdout: the machine and its BLAS, the measured limits, notes and warnings
 * about them, what GFLOP/s counts, and the table's column names. */
static void print_header(const bench_options *o, int cores, const bench_limits *lim) {
    char load[64];
    load_average(load, sizeof load);
    printf("mha-bench: %d cores (load average %s), %s (%s build), core %s "
           "(OPENBLAS_CORETYPE=%s), seed %llu\n",
           cores, load, openblas_get_config(), blas_parallel_name(), openblas_get_corename(),
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset",
           (unsigned long long)o->seed);
    char lib[512];
    blas_library(lib, sizeof lib);
    printf("OpenBLAS library: %s\n", lib);
    for (size_t k = 0; k < o->num_threads; k++) {
        if (o->peak)
            printf("peak, FMA loop (%s, %d-bit vectors, %d accumulators), %d thread%s: "
                   "%.1f GFLOP/s (median of 7)\n",
                   lim->loop.name, lim->loop.vector_bits, lim->loop.accumulators,
                   lim->peak_team[k], lim->peak_team[k] == 1 ? "" : "s", lim->peak[k]);
        if (lim->have_peak_bf16)
            printf("bf16 peak, _mm512_dpbf16_ps loop (%d-bit vectors, %d accumulators, %d "
                   "flops per lane), %d thread%s: %.1f GFLOP/s (median of 7)\n",
                   lim->loop_bf16.vector_bits, lim->loop_bf16.accumulators,
                   lim->loop_bf16.flops_per_lane, lim->peak_bf16_team[k],
                   lim->peak_bf16_team[k] == 1 ? "" : "s", lim->peak_bf16[k]);
        if (o->sgemm)
            printf("sgemm 1024^3, %d thread%s: %.1f GFLOP/s (median of 7)\n", lim->threads[k],
                   lim->threads[k] == 1 ? "" : "s", lim->sgemm[k]);
    }
    for (size_t k = 0; k < o->num_precisions; k++)
        if (o->precisions[k] == MHA_PRECISION_BF16 && o->peak && !lim->have_peak_bf16)
            printf("note: no bf16 peak loop on this CPU (__builtin_cpu_supports(\"avx512bf16\") "
                   "is false although the library runs bf16): bf16 rows have no peak "
                   "fraction\n");
    /* t threads of independent FMAs scale linearly unless the cores are shared */
    for (size_t k = 0; o->peak && k < o->num_threads; k++)
        for (size_t j = 0; j < o->num_threads; j++)
            if (lim->peak_team[j] == 1 && lim->peak_team[k] > 1 &&
                lim->peak[k] < 0.8 * lim->peak_team[k] * lim->peak[j])
                printf("warning: the peak loop with %d threads ran only %.2fx its 1-thread "
                       "rate: the cores were busy, fractions at %d threads are inflated\n",
                       lim->peak_team[k], lim->peak[k] / lim->peak[j], lim->peak_team[k]);
    printf("GFLOP/s count the causal half of the attention scores "
           "(3·(8·B·S·D² + 2·B·S²·D) per step)%s\n",
           lim->have_peak_bf16 ? "; peak and %peak: bf16 rows against the bf16 peak" : "");
    printf("\n%-16s %3s %4s %4s %5s %10s %9s %9s %8s %7s %6s %7s %6s %12s %12s %6s\n",
           "B,S,D,H", "thr", "p", "prec", "reps", "ms", "fwd_ms", "bwd_ms", "GFLOP/s", "sgemm",
           "%sgemm", "peak", "%peak", "act_bytes", "ref_bytes", "ratio");
    fflush(stdout);
}

/* One record as a row of the table on stdout. */
static void print_row(const bench_result *r) {
    char name[96];
    snprintf(name, sizeof name, "%zu,%zu,%zu,%zu", r->c.B, r->c.S, r->c.D, r->c.H);
    printf("%-16s %3d %4.2g %4s %5ld %10.4f %9.4f %9.4f %8.2f %7.1f %5.1f%% %7.1f "
           "%5.1f%% %12zu %12zu %6.3f\n",
           name, r->threads, r->dropout, mha_precision_name(r->precision), r->reps,
           r->ms, r->fwd_ms, r->bwd_ms,
           r->gflops, r->sgemm_gflops, 100.0 * r->sgemm_fraction, r->peak_gflops,
           100.0 * r->peak_fraction, r->activation_bytes, r->reference_bytes,
           (double)r->activation_bytes / (double)r->reference_bytes);
    fflush(stdout);
}

/* Time every case × dropout × thread count × precision into res [that many], each record
 * with the sgemm limit measured right before it and its peak, and print it as it comes.
 * Returns the records written. */
static size_t run_all(const bench_options *o, const bench_limits *lim, bench_result *res) {
    size_t n = 0;
    /* the precisions innermost: a case's fp32 and bf16 rows are timed back to back */
    for (size_t ci = 0; ci < o->num_cases; ci++)
        for (size_t di = 0; di < o->num_dropouts; di++)
            for (size_t ti = 0; ti < o->num_threads; ti++)
                for (size_t pi = 0; pi < o->num_precisions; pi++) {
                    bench_result *r = &res[n++];
                    double sg_here = o->sgemm ? sgemm_gflops(lim->threads[ti], 1024, 5) : 0.0;
                    run_case(o, o->cases[ci], o->dropouts[di], lim->threads[ti],
                             o->precisions[pi], r);
                    r->sgemm_gflops = sg_here;
                    r->sgemm_fraction = sg_here > 0 ? r->gflops / sg_here : 0.0;
                    r->peak_gflops = record_peak(lim, ti, r->precision);
                    r->peak_fraction = r->peak_gflops > 0 ? r->gflops / r->peak_gflops : 0.0;
                    print_row(r);
                }
    return n;
}

int main(int argc, char **argv) {
    bench_options o;
    parse_args(argc, argv, &o);
    int cores = all_cores();
    bench_limits lim;
    int st = measure_limits(&o, cores, &lim);
    if (st)
        return st;
    print_header(&o, cores, &lim);

    size_t total = o.num_cases * o.num_dropouts * o.num_threads * o.num_precisions;
    bench_result *res = calloc(total, sizeof *res);
    if (!res) return 1;
    size_t n = run_all(&o, &lim, res);
    int rc = 0;
    if (o.json_path) {
        if (write_json(o.json_path, &o, res, n, &lim)) {
            fprintf(stderr, "mha-bench: cannot write %s: %s\n", o.json_path, strerror(errno));
            rc = 1;
        } else {
            printf("\nwrote %s\n", o.json_path);
        }
    }
    free(res);
    return rc;
}
