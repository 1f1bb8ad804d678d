#include "test_util.h"

#include <math.h>

#include "mha_pcg32.h"

void assert_close_impl(double actual, double expected, double atol, double rtol,
                       const char *what, const char *file, int line)
{
    double tol = atol + rtol * fabs(expected);
    double err = fabs(actual - expected);
    if (!(err <= tol)) { /* written this way round so that NaN fails too */
        print_error("%s = %.17g, expected %.17g (|diff| %.3g > tol %.3g)\n", what, actual,
                    expected, err, tol);
        _fail(file, line);
    }
}

void fill_uniform(double *x, size_t n, double lo, double hi, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 99);
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * mha_pcg32_double(&rng);
}

void fill_uniform_f(float *x, size_t n, float lo, float hi, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 99);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * mha_pcg32_double(&rng));
}

double rel_l2_diff(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    if (den == 0.0)
        return num == 0.0 ? 0.0 : INFINITY;
    return sqrt(num / den);
}

double max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) /* NaN propagates */
            m = d;
    }
    return m;
}
