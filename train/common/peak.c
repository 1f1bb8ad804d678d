/*
 * peak.c — this machine's peak float32 and bfloat16 FLOP rates (see peak.h).
 *
 * Each kernel keeps N independent accumulators a_0..a_{N-1} (vectors of L floats)
 * in registers and runs, `iters` times,
 *     a_k = a_k · m + c        k = 0..N-1     (one FMA each: 2·L flops)
 * N is chosen so that N ≥ FMA latency × FMA units per core on every CPU we know
 * (latency 4–5 cycles, 1–2 units: ≥ 10 chains), so the loop is bound by FMA
 * throughput, not by the dependency chains: AVX-512 16 of its 32 registers, AVX2 and
 * SSE2 12 of their 16. With m = 0.5 and c > 0 every a_k converges to 2c (no
 * overflow, no subnormal operands that could slow the loop down); the kernels
 * return the sum of all lanes, which the caller checks, so no loop can be deleted.
 *
 * The bfloat16 peak (PEAK_ISA_AVX512_BF16) runs the same loop on VDPBF16PS: each lane of
 * an accumulator gets two bf16 products added per instruction, 4 flops a lane.
 *
 * The kernels are compiled for their instruction sets with target attributes (the
 * rest of the program stays baseline x86-64) and are only called after
 * __builtin_cpu_supports said the CPU has them.
 */
#include "peak.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define PEAK_X86 1
#include <immintrin.h>
#else
#define PEAK_X86 0
#endif

enum { ACC_AVX512 = 16, ACC_AVX2 = 12, ACC_SSE2 = 12, ACC_SCALAR = 8 };

/* The multiplier and addend, read at run time so the compiler knows nothing of them. */
static volatile float peak_m = 0.5f, peak_c = 0.25f;

/* Applies OP(k, ...) for k = 0..15 / 0..11. */
#define PEAK_REPEAT12(OP, ...)                                                               \
    OP(0, __VA_ARGS__) OP(1, __VA_ARGS__) OP(2, __VA_ARGS__) OP(3, __VA_ARGS__)             \
    OP(4, __VA_ARGS__) OP(5, __VA_ARGS__) OP(6, __VA_ARGS__) OP(7, __VA_ARGS__)             \
    OP(8, __VA_ARGS__) OP(9, __VA_ARGS__) OP(10, __VA_ARGS__) OP(11, __VA_ARGS__)
#define PEAK_REPEAT16(OP, ...)                                                               \
    PEAK_REPEAT12(OP, __VA_ARGS__)                                                           \
    OP(12, __VA_ARGS__) OP(13, __VA_ARGS__) OP(14, __VA_ARGS__) OP(15, __VA_ARGS__)

#if PEAK_X86
/* A kernel's body: accumulators a0, a1, ... (REPEAT's count) of vector type V set to 1,
 * 2, ... (SET1 broadcasts a float); `iters` rounds of a_k = STEP(a_k); their sum (ADD,
 * from ZERO()) in s. */
#define PEAK_DECL(k, V, SET1) V a##k = SET1((float)(k + 1));
#define PEAK_STEP(k, STEP) a##k = STEP(a##k);
#define PEAK_SUM(k, ADD) s = ADD(s, a##k);
#define PEAK_BODY(REPEAT, V, SET1, STEP, ADD, ZERO)                                           \
    REPEAT(PEAK_DECL, V, SET1)                                                               \
    for (long i = 0; i < iters; i++) {                                                       \
        REPEAT(PEAK_STEP, STEP)                                                              \
    }                                                                                        \
    V s = ZERO();                                                                            \
    REPEAT(PEAK_SUM, ADD)

/* AVX-512F: 16 accumulators of 16 floats; 16 FMAs = 512 flops per iteration. */
#define FMA512(a) _mm512_fmadd_ps(a, vm, vc)
__attribute__((target("avx512f"))) static float kernel_avx512(long iters, float m, float c) {
    const __m512 vm = _mm512_set1_ps(m), vc = _mm512_set1_ps(c);
    PEAK_BODY(PEAK_REPEAT16, __m512, _mm512_set1_ps, FMA512, _mm512_add_ps, _mm512_setzero_ps)
    return _mm512_reduce_add_ps(s);
}

/* AVX512_BF16: the bfloat16 peak. 16 accumulators of 16 float32 lanes; each
 * _mm512_dpbf16_ps (VDPBF16PS) adds to every lane the products of two bf16 pairs:
 * a_k += m·c + m·c (m, c rounded to bf16, exact: 0.5 and 0.25), 4 flops per lane, 64 per
 * instruction, 1024 per iteration. The accumulators grow by 0.25 per step until float32
 * stops adding it (at 2^22 the sum rounds back, ties to even): they stay finite and
 * positive; the instruction does the same work either way. */
#define DPBF16(a) _mm512_dpbf16_ps(a, vm, vc)
__attribute__((target("avx512f,avx512bf16"))) static float kernel_avx512_bf16(long iters,
                                                                                float m,
                                                                                float c) {
    const __m512bh vm = _mm512_cvtne2ps_pbh(_mm512_set1_ps(m), _mm512_set1_ps(m));
    const __m512bh vc = _mm512_cvtne2ps_pbh(_mm512_set1_ps(c), _mm512_set1_ps(c));
    PEAK_BODY(PEAK_REPEAT16, __m512, _mm512_set1_ps, DPBF16, _mm512_add_ps, _mm512_setzero_ps)
    return _mm512_reduce_add_ps(s);
}

/* AVX2 + FMA: 12 accumulators of 8 floats; 12 FMAs = 192 flops per iteration. */
#define FMA256(a) _mm256_fmadd_ps(a, vm, vc)
__attribute__((target("avx2,fma"))) static float kernel_avx2(long iters, float m, float c) {
    const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(c);
    PEAK_BODY(PEAK_REPEAT12, __m256, _mm256_set1_ps, FMA256, _mm256_add_ps, _mm256_setzero_ps)
    float lane[8];
    _mm256_storeu_ps(lane, s);
    float t = 0;
    for (int k = 0; k < 8; k++) t += lane[k];
    return t;
}

/* SSE2 (every x86-64): no FMA, a multiply then an add, 2 flops per lane as well;
 * 12 accumulators of 4 floats, 96 flops per iteration. */
#define MULADD128(a) _mm_add_ps(_mm_mul_ps(a, vm), vc)
static float kernel_sse2(long iters, float m, float c) {
    const __m128 vm = _mm_set1_ps(m), vc = _mm_set1_ps(c);
    PEAK_BODY(PEAK_REPEAT12, __m128, _mm_set1_ps, MULADD128, _mm_add_ps, _mm_setzero_ps)
    float lane[4];
    _mm_storeu_ps(lane, s);
    return lane[0] + lane[1] + lane[2] + lane[3];
}
#endif

/* Not x86 (or --peak-isa scalar): 8 chains in plain C, counted as 1 lane each. ISO C
 * mode does not contract a·m + c into an FMA; the compiler may still vectorise the
 * chains, so on x86 this is a portability fallback, not a measurement of anything. */
static float kernel_scalar(long iters, float m, float c) {
    float a[ACC_SCALAR];
    for (int k = 0; k < ACC_SCALAR; k++) a[k] = (float)(k + 1);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < ACC_SCALAR; k++) a[k] = a[k] * m + c;
    float t = 0;
    for (int k = 0; k < ACC_SCALAR; k++) t += a[k];
    return t;
}

static float run_kernel(peak_isa isa, long iters, float m, float c) {
    switch (isa) {
#if PEAK_X86
    case PEAK_ISA_AVX512: return kernel_avx512(iters, m, c);
    case PEAK_ISA_AVX512_BF16: return kernel_avx512_bf16(iters, m, c);
    case PEAK_ISA_AVX2: return kernel_avx2(iters, m, c);
    case PEAK_ISA_SSE2: return kernel_sse2(iters, m, c);
#endif
    default: return kernel_scalar(iters, m, c);
    }
}

static int cpu_has(peak_isa isa) {
#if PEAK_X86
    __builtin_cpu_init();
    switch (isa) {
    case PEAK_ISA_AVX512: return __builtin_cpu_supports("avx512f");
    case PEAK_ISA_AVX512_BF16:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
    case PEAK_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PEAK_ISA_SSE2: return __builtin_cpu_supports("sse2");
    case PEAK_ISA_SCALAR: return 1;
    default: return 0;
    }
#else
    return isa == PEAK_ISA_SCALAR;
#endif
}

peak_isa peak_widest_isa(void) {
    if (cpu_has(PEAK_ISA_AVX512)) return PEAK_ISA_AVX512;
    if (cpu_has(PEAK_ISA_AVX2)) return PEAK_ISA_AVX2;
    if (cpu_has(PEAK_ISA_SSE2)) return PEAK_ISA_SSE2;
    return PEAK_ISA_SCALAR;
}

int peak_parse_isa(const char *name, peak_isa *isa) {
    static const struct { const char *name; peak_isa isa; } names[] = {
        {"auto", PEAK_ISA_AUTO},  {"avx512", PEAK_ISA_AVX512}, {"avx2", PEAK_ISA_AVX2},
        {"sse2", PEAK_ISA_SSE2},  {"scalar", PEAK_ISA_SCALAR}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) {
            *isa = names[i].isa;
            return 0;
        }
    return -1;
}

int peak_describe(peak_isa isa, peak_loop *loop) {
    if (isa == PEAK_ISA_AUTO) isa = peak_widest_isa();
    if (!cpu_has(isa)) return -1;
    static const peak_loop loops[] = {
        [PEAK_ISA_SCALAR] = {PEAK_ISA_SCALAR, "scalar", 32, 1, ACC_SCALAR, 2},
        [PEAK_ISA_SSE2] = {PEAK_ISA_SSE2, "sse2", 128, 4, ACC_SSE2, 2},
        [PEAK_ISA_AVX2] = {PEAK_ISA_AVX2, "avx2+fma", 256, 8, ACC_AVX2, 2},
        [PEAK_ISA_AVX512] = {PEAK_ISA_AVX512, "avx512f", 512, 16, ACC_AVX512, 2},
        [PEAK_ISA_AVX512_BF16] = {PEAK_ISA_AVX512_BF16, "avx512_bf16", 512, 16, ACC_AVX512,
                                  4}};
    *loop = loops[isa];
    return 0;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Wall seconds of one run: `threads` threads each run the kernel `iters` times. The
 * kernels' sums go to *sum (the caller checks it); the team size to *team. */
static double timed_run(const peak_loop *loop, int threads, long iters, double *sum, int *team) {
    const float m = peak_m, c = peak_c;
    double s = 0;
    int got = 1;
    double t0 = seconds_now();
#pragma omp parallel num_threads(threads) reduction(+ : s)
    {
        s += (double)run_kernel(loop->isa, iters, m, c);
#pragma omp single
        got = omp_get_num_threads();
    }
    double dt = seconds_now() - t0;
    *sum += s;
    *team = got;
    return dt;
}

/* The loops' results, kept where the compiler must assume someone reads them. */
volatile double peak_sink;

/* Time `runs` runs of `loop` on `threads` threads into t[runs] (seconds), each sized to take
 * about `seconds`, after one untimed run; the flops of one run, or 0 if the loop's result
 * shows it broken. *team: the team size OpenMP gave. */
static double timed_runs(const peak_loop *loop, int threads, int runs, double seconds,
                         double *t, int *team) {
    /* size a run on one thread: double the count until a run takes >= 10 ms */
    double sum = 0;
    long iters = 1L << 14;
    double dt = timed_run(loop, 1, iters, &sum, team);
    while (dt < 0.01 && iters < (1L << 40)) {
        iters *= 2;
        dt = timed_run(loop, 1, iters, &sum, team);
    }
    double scaled = (double)iters * seconds / (dt > 0 ? dt : 1e-9);
    iters = scaled < 1024.0 ? 1024 : (long)scaled;
    for (int r = -1; r < runs; r++) { /* one untimed run: thread start-up, clock ramp */
        double x = timed_run(loop, threads, iters, &sum, team);
        if (r >= 0) t[r] = x;
    }
    /* every lane of every accumulator converges to 2c; a wrong sum means a broken loop */
    peak_sink = sum;
    if (!isfinite(sum) || sum <= 0) return 0.0;
    return (double)loop->flops_per_lane * (double)*team * (double)iters *
           (double)loop->accumulators * (double)loop->lanes;
}

double peak_gflops(const peak_loop *loop, int threads, int runs, double seconds,
                   int *actual_threads) {
    if (threads < 1) threads = 1;
    if (runs < 1) runs = 1;
    if (runs > 63) runs = 63;
    double t[64];
    int team = 1;
    const double flops = timed_runs(loop, threads, runs, seconds, t, &team);
    if (flops <= 0) return 0.0;
    qsort(t, (size_t)runs, sizeof t[0], cmp_dbl);
    double med = (runs % 2) ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
    if (actual_threads) *actual_threads = team;
    return flops / med * 1e-9;
}

double peak_training_gflops(int bf16, int threads) {
    peak_loop loop;
    if (peak_describe(bf16 ? PEAK_ISA_AVX512_BF16 : PEAK_ISA_AUTO, &loop) != 0) return 0.0;
    if (threads < 1) threads = 1;
    /* the fastest of 8 short runs: a run that shared its core with another process is
     * slower, never faster, so the fastest is the nearest to the machine's own peak */
    double t[8];
    int team = 1;
    const double flops = timed_runs(&loop, threads, 8, 0.01, t, &team);
    if (flops <= 0) return 0.0;
    qsort(t, 8, sizeof t[0], cmp_dbl);
    return flops / t[0] * 1e-9;
}
