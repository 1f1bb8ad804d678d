/* Shared helpers for the cmocka tests: the one floating-point comparison
 * (cmocka 1.1.5 has none) and small tensor utilities. */
#ifndef MHA_TEST_UTIL_H
#define MHA_TEST_UTIL_H

#include <setjmp.h> /* cmocka needs these three before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Fails the test unless |actual − expected| <= atol + rtol·|expected|;
 * the message shows both values and the tolerance. */
void assert_close_impl(double actual, double expected, double atol, double rtol,
                       const char *what, const char *file, int line);
#define assert_close(actual, expected, atol, rtol) \
    assert_close_impl((actual), (expected), (atol), (rtol), #actual, __FILE__, __LINE__)

/* Fill x[n] with uniform values in [lo, hi) from PCG32(seed, stream 99). */
void fill_uniform(double *x, size_t n, double lo, double hi, uint64_t seed);
void fill_uniform_f(float *x, size_t n, float lo, float hi, uint64_t seed);

/* ‖a − b‖₂ / ‖b‖₂ (0 when both are 0) and max |a_i − b_i|. */
double rel_l2_diff(const double *a, const double *b, size_t n);
double max_abs_diff(const double *a, const double *b, size_t n);

#endif
