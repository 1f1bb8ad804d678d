#define _XOPEN_SOURCE 700 /* nftw */
#include "test_util.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

void fill_param(double *p, const mha_param_info *in, uint64_t seed)
{
    const double lo = in->role == MHA_ROLE_NORM_WEIGHT ? 0.5 : -0.5;
    fill_uniform(p, in->numel, lo, lo + 1.0, seed);
}

void randomize_block(mhad_block *blk, uint64_t seed)
{
    for (size_t i = 0; i < MHA_BLOCK_NUM_TENSORS; i++) {
        mha_param_info in;
        double *p;
        assert_int_equal(mhad_block_tensor(blk, i, &in, &p, NULL), MHA_OK);
        fill_param(p, &in, seed + i);
    }
}

void randomize_dec(mhad_decoder_block *blk, uint64_t seed)
{
    for (size_t i = 0; i < MHA_DEC_BLOCK_NUM_TENSORS; i++) {
        mha_param_info in;
        double *p;
        assert_int_equal(mhad_decoder_block_tensor(blk, i, &in, &p, NULL), MHA_OK);
        fill_param(p, &in, seed + i);
    }
}

void randomize_gpt(mhad_gpt *g, uint64_t seed)
{
    for (size_t i = 0; i < mhad_gpt_num_tensors(g); i++) {
        mha_param_info in;
        double *p;
        assert_int_equal(mhad_gpt_tensor(g, i, &in, &p, NULL), MHA_OK);
        fill_param(p, &in, seed + 7 * i);
    }
}

void randomize_s2s(mhad_s2s *m, uint64_t seed)
{
    for (size_t i = 0; i < mhad_s2s_num_tensors(m); i++) {
        mha_param_info in;
        double *p;
        assert_int_equal(mhad_s2s_tensor(m, i, &in, &p, NULL), MHA_OK);
        fill_param(p, &in, seed + 7 * i);
    }
}

void fill_ids(int32_t *x, size_t n, int32_t lo, int32_t hi, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 5);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        mha_pcg32_bounded(&rng, (uint32_t)(hi - lo), &u);
        x[i] = lo + (int32_t)u;
    }
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

void fill_uniform_f(float *x, size_t n, float lo, float hi, uint64_t seed)
{
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, seed, 99);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * mha_pcg32_double(&rng));
}

double *make_input(size_t n, uint64_t seed)
{
    double *x = malloc(n * sizeof *x);
    assert_non_null(x);
    fill_uniform(x, n, -1.0, 1.0, seed);
    return x;
}

double *filled(size_t n, double v)
{
    double *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

double row_sum_exp(const double *row, size_t n, double *max)
{
    double m = row[0], se = 0.0;
    for (size_t v = 1; v < n; v++)
        m = row[v] > m ? row[v] : m;
    for (size_t v = 0; v < n; v++)
        se += exp(row[v] - m);
    *max = m;
    return se;
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

double rel_inf(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return den > 0 ? num / den : num;
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

int all_equal_to(const double *x, size_t n, double v)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != v)
            return 0;
    return 1;
}

mhad_module *make_module(size_t D, size_t H, double p, int threads, uint64_t seed)
{
    mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = p, .seed = seed,
                      .threads = threads};
    mhad_module *m = NULL;
    assert_int_equal(mhad_create(&m, &cfg), MHA_OK);
    assert_non_null(m);
    return m;
}

int make_temp_dir(char *dir, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    int r = snprintf(dir, cap, "%s/%s.XXXXXX", tmp, name);
    if (r < 0 || (size_t)r >= cap)
        return -1;
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path);
}

int remove_tree(const char *dir)
{
    /* depth first (a directory after its entries), without following links */
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n > 0)
        assert_int_equal(fwrite(p, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

void epi_record(void *ctx, size_t r0, size_t r1)
{
    const epi_seen *e = ctx;
    for (size_t r = r0; r < r1; r++) {
        e->count[r]++;
        for (size_t j = 0; j < e->N; j++)
            e->E[r * e->N + j] = 2 * e->C[r * e->ldc + j] + 1;
    }
}

void epi_check(const epi_seen *e, size_t M, const float *R)
{
    for (size_t r = 0; r < M; r++) {
        assert_int_equal(e->count[r], 1);
        for (size_t j = 0; j < e->N; j++)
            assert_true(e->E[r * e->N + j] == 2 * R[r * e->ldc + j] + 1);
    }
}
