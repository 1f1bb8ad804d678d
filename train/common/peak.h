/*
 * peak — this machine's peak float32 (and bfloat16) FLOP rate, measured: the denominator
 * of mha-bench's peak fractions and of the training programs' MFU (model FLOPs
 * utilisation: the model's FLOPs per second over this peak).
 *
 * A loop of independent fused multiply-adds on the widest vectors the CPU has
 * (picked at run time with __builtin_cpu_supports: AVX-512F, else AVX2+FMA, else
 * SSE2 with a multiply and an add in place of the FMA), timed with 1..t threads.
 * Each lane of an FMA counts 2 flops (a mul+add pair in the SSE loop counts 2 too).
 * The bfloat16 peak (PEAK_ISA_AVX512_BF16, asked for explicitly) is the same loop on
 * _mm512_dpbf16_ps: 16 float32 lanes, each adding two bf16 products, 4 flops a lane.
 * The loop measures how many of them a core retires per second: it does not assume
 * how many FMA units the core has or at which clock it runs them.
 */
#ifndef TRAIN_PEAK_H
#define TRAIN_PEAK_H

#include <stddef.h>

/* The instruction sets the loop can run, widest last. */
typedef enum peak_isa {
    PEAK_ISA_AUTO = 0, /* the widest the CPU supports (peak_measure resolves it) */
    PEAK_ISA_SCALAR,   /* not x86: plain float multiply-adds, 1 lane          */
    PEAK_ISA_SSE2,     /* 128-bit, 4 lanes, _mm_mul_ps + _mm_add_ps           */
    PEAK_ISA_AVX2,     /* 256-bit, 8 lanes, _mm256_fmadd_ps (needs FMA too)   */
    PEAK_ISA_AVX512,   /* 512-bit, 16 lanes, _mm512_fmadd_ps                   */
    PEAK_ISA_AVX512_BF16 /* the bfloat16 peak (not a float32 loop, never AUTO):
                          * 512-bit, 16 float32 lanes, _mm512_dpbf16_ps, each lane
                          * 2 bf16 products + 2 adds = 4 flops (64 an instruction) */
} peak_isa;

/* What one loop is: its instruction set and shape. */
typedef struct peak_loop {
    peak_isa isa;
    const char *name;  /* "avx512f", "avx2+fma", "sse2", "scalar"               */
    int vector_bits;   /* 512, 256, 128, 32                                     */
    int lanes;         /* floats per vector                                     */
    int accumulators;  /* independent FMA chains per thread (hide the latency) */
    int flops_per_lane; /* per instruction and float32 lane: 2 (FMA, or mul + add),
                           4 for VDPBF16PS (two bf16 products summed into the lane) */
} peak_loop;

/* The widest instruction set this CPU supports. */
peak_isa peak_widest_isa(void);

/* Parses "auto", "avx512", "avx2", "sse2", "scalar" into *isa; returns 0, or -1 on an
 * unknown name. */
int peak_parse_isa(const char *name, peak_isa *isa);

/* Fills *loop for `isa` (PEAK_ISA_AUTO = the widest float32 loop); returns 0, or -1 when
 * this CPU cannot run it (e.g. avx512 on an AVX2-only CPU; PEAK_ISA_AVX512_BF16 without
 * AVX512_BF16, checked with __builtin_cpu_supports("avx512bf16")). */
int peak_describe(peak_isa isa, peak_loop *loop);

/* GFLOP/s of `loop` run by `threads` OpenMP threads at once (each thread the same
 * number of FMAs, sized so that one run takes about `seconds`), the median of `runs`
 * timed runs after one untimed one: threads · FMAs · lanes · flops_per_lane / wall time
 * of the parallel region. *actual_threads gets the team size OpenMP gave (may be NULL). */
double peak_gflops(const peak_loop *loop, int threads, int runs, double seconds,
                   int *actual_threads);

/* For a training program's MFU: the peak GFLOP/s of the loop its products run on — the
 * bfloat16 loop when bf16 != 0 (0 if the CPU lacks it), else the widest float32 loop —
 * with `threads` threads: the fastest of 8 runs of ~10 ms (~0.1 s in all; a run slowed
 * by another process on the core is discarded). 0 when it cannot be measured. */
double peak_training_gflops(int bf16, int threads);

/* ---- the MFU's denominator on a busy machine (peak_cache.c) ----------------------------- */

enum { PEAK_KEY_CAP = 512, PEAK_PATH_CAP = 4096 };

/* The peak a training program divides by, and where it came from. */
typedef struct peak_best {
    double gflops;   /* the denominator: the larger of `measured` and `kept` (0: none)   */
    double measured; /* peak_training_gflops now                                          */
    double kept;     /* the fastest an earlier run on this CPU kept (0: none)             */
    char cache[PEAK_PATH_CAP]; /* the cache file read, "" when none was                  */
} peak_best;

/* peak_training_gflops(bf16, threads), never below the fastest earlier measurement of the
 * same loop and thread count on the same CPU model: with use_cache, the measurement is
 * compared with the one kept in the cache file (peak_cache_path) and the faster one is the
 * denominator; a faster measurement replaces the kept one. Another process can only slow
 * the loop down, so the fastest ever measured is the nearest to the machine's peak, and an
 * MFU divided by it does not jump up when the machine is busy at start. Nothing is printed;
 * a cache that cannot be read or written leaves the measurement alone. Not thread-safe
 * (a program calls it once, at start). */
void peak_training_best(int bf16, int threads, int use_cache, peak_best *out);

/* For a program's header line, where b->gflops came from: "" without a cache; else
 * "; the fastest so far on this CPU, kept in PATH", or, when an earlier run's is the
 * denominator, "; N now: the fastest of the earlier runs on this CPU, kept in PATH". */
void peak_best_note(const peak_best *b, char *buf, size_t cap);

/* The cache file: $MHA_PEAK_CACHE if set ("" or "off": none), else
 * $XDG_CACHE_HOME/mha/peak.tsv (an absolute XDG_CACHE_HOME), else $HOME/.cache/mha/peak.tsv.
 * Returns 0, or -1 when there is none. */
int peak_cache_path(char *path, size_t cap);

/* This CPU's key for a loop (peak_loop.name) and thread count: the loop, the threads and
 * /proc/cpuinfo's model name, family, model and stepping of the first processor. Returns
 * 0, or -1 without a model name (no key: nothing is kept) or when key[cap] is too small. */
int peak_cache_key(const char *loop_name, int threads, char *key, size_t cap);

/* In the cache file at path (its directory made if missing), the line of `key` keeps the
 * highest GFLOP/s: *kept gets the value kept before (0: none); a `measured` above it
 * replaces it, the file rewritten atomically under a lock (see peak_cache.c). Returns 0,
 * or -1 when the file could not be written or the lock not taken (nothing changed then;
 * *kept is still what could be read). A file that is not a peak cache is never written. */
int peak_cache_update(const char *path, const char *key, double measured, double *kept);

#endif
