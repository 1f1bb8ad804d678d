/* Shared helpers for the cmocka tests: the one floating-point comparison
 * (cmocka 1.1.5 has none), small tensor utilities, a float64 attention module with
 * the test's config, and temporary directories and files. */
#ifndef MHA_TEST_UTIL_H
#define MHA_TEST_UTIL_H

#include <setjmp.h> /* cmocka needs these three before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mha.h"

/* Fails the test unless |actual − expected| <= atol + rtol·|expected|;
 * the message shows both values and the tolerance. */
void assert_close_impl(double actual, double expected, double atol, double rtol,
                       const char *what, const char *file, int line);
#define assert_close(actual, expected, atol, rtol) \
    assert_close_impl((actual), (expected), (atol), (rtol), #actual, __FILE__, __LINE__)

/* Fill x[n] with uniform values in [lo, hi) from PCG32(seed, stream 99). */
void fill_uniform(double *x, size_t n, double lo, double hi, uint64_t seed);
void fill_uniform_f(float *x, size_t n, float lo, float hi, uint64_t seed);
/* A new double[n]: uniform in [−1, 1) by fill_uniform; every element v. Fail the test
 * when out of memory. */
double *make_input(size_t n, uint64_t seed);
double *filled(size_t n, double v);
/* Σ_v exp(row[v] − m) over row[0..n), m = max_v row[v] into *max (the softmax's sum, summed
 * in order of v): the reference the cross-entropy tests compare against. */
double row_sum_exp(const double *row, size_t n, double *max);

/* The parameter tensor `in` describes (p[in->numel]) by fill_uniform: in ±0.5, a LayerNorm
 * weight in [0.5, 1.5] (away from 0). */
void fill_param(double *p, const mha_param_info *in, uint64_t seed);
/* Every parameter tensor of a float64 block or decoder block by fill_param (tensor i with
 * seed + i), of a GPT or encoder–decoder model (tensor i with seed + 7·i). */
void randomize_block(mhad_block *blk, uint64_t seed);
void randomize_dec(mhad_decoder_block *blk, uint64_t seed);
void randomize_gpt(mhad_gpt *g, uint64_t seed);
void randomize_s2s(mhad_s2s *m, uint64_t seed);
/* ids x[n] uniform in [lo, hi) from PCG32(seed, stream 5). */
void fill_ids(int32_t *x, size_t n, int32_t lo, int32_t hi, uint64_t seed);
/* malloc and calloc that fail the test instead of returning NULL (size 0: one byte). */
/* What a GEMM epilogue saw (tests of mha__sgemm_epi, mha__bgemm_epi): epi_record counts
 * its calls per row in count[r] and stores E[r·N + j] = 2·C[r·ldc + j] + 1 at the call;
 * epi_check asserts that every row of M was seen exactly once and that E is 2·R + 1 of the
 * final C (R, row stride ldc), i.e. that each row was final when the epilogue read it. */
typedef struct epi_seen {
    size_t N, ldc;
    const float *C;
    float *E;
    int *count;
} epi_seen;
void epi_record(void *ctx, size_t r0, size_t r1);
void epi_check(const epi_seen *e, size_t M, const float *R);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);

/* ‖a − b‖₂ / ‖b‖₂ (0 when both are 0) and max |a_i − b_i|. */
double rel_l2_diff(const double *a, const double *b, size_t n);
double max_abs_diff(const double *a, const double *b, size_t n);
/* max |a_i − b_i| / max |b_i| (the max difference when b is all 0). */
double rel_inf(const double *a, const double *b, size_t n);

/* 1 if every x_i == v (exactly), else 0. */
int all_equal_to(const double *x, size_t n, double v);

/* A float64 module of model_dim D, H heads, dropout p, `threads` threads, seed; fails
 * the test if mhad_create refuses it. Owned: mhad_destroy. */
mhad_module *make_module(size_t D, size_t H, double p, int threads, uint64_t seed);

/* A fresh empty directory "$TMPDIR/<name>.XXXXXX" ($TMPDIR unset or empty: /tmp); its
 * path goes into dir[cap]. Returns 0, or -1 (cap too small, or mkdtemp failed). */
int make_temp_dir(char *dir, size_t cap, const char *name);
/* Removes dir and everything below it (symbolic links themselves, never their
 * targets). Returns 0, or -1 if anything could not be removed. */
int remove_tree(const char *dir);
/* Writes the n bytes at p to path (created or truncated); fails the test on error. */
void write_bytes(const char *path, const void *p, size_t n);

#endif
