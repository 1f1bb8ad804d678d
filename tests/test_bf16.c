/*
 * bfloat16 mixed precision (MHA_PRECISION_BF16): the rounding to bfloat16, the bf16 GEMM
 * against its reference on the rounded operands (tight), and the layers, the attention
 * module, the GPT and the encoder–decoder in bf16 against the same objects in float32
 * (bounds derived below), the refusals (double API, unknown value, a CPU without it).
 *
 * Every test that runs bf16 arithmetic needs AVX512_BF16: where the CPU lacks it (or
 * MHA_DISABLE_BF16 is set) it says so and is skipped, visibly in cmocka's summary.
 *
 * The bounds. bf16 keeps 8 significant bits: rounding x gives x(1 + δ), |δ| <= u = 2⁻⁸.
 * A product of two rounded operands is then off by at most (2u + u²)·|a·b| and the GEMM
 * sums those exactly-computed products in float32, so
 *   |bgemm − exact| <= (2u + u²)·Σ|a||b| + (K−1)·2⁻²⁴·Σ|a||b|      per element.
 * The bf16 GEMM and its reference sum the same exact products in two orders, so they
 * differ by at most 2(K−1)·2⁻²⁴·Σ|a||b| — that is the "tight" bound of the GEMM tests.
 * For a model, the per-element bound is far too pessimistic (random rounding errors are
 * independent and cancel like a random walk; the products' error relative to the output
 * is ~u/√3 per operand, not 2u); what holds in norm is: each product stage adds a relative
 * error of about √(2/3)·u ≈ 0.8u = 0.003, and errors of stages in series add up. The tests
 * below allow 4u = 0.016 relative L2 per output for a single product stage, 8u for the
 * attention module (projections, the per-head Q·Kᵀ and P·V, the output projection: four
 * stages, but softmax damps the scores' errors) and for a whole model's
 * logits and gradient (several stages in series, but each output mostly set by the last
 * few; softmax and LayerNorm amplify by small factors). The loss is a mean over positions
 * of log-probabilities whose rounding errors are independent and average out: u/8. The
 * measured values are printed beside the bounds (on an AMD EPYC with AVX512_BF16: linear
 * 2.1e-3, module 3.0e-3 to 6.2e-3, GPT logits 2.7e-3 and worst tensor 6.8e-3, loss 5e-5):
 * 4 to 9 times below them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha_internal.h"
#include "test_util.h"

static const double U = 1.0 / 256; /* bf16's unit roundoff 2⁻⁸ */

/* Skips the calling test (visibly) when bf16 is unavailable; returns otherwise. */
#define NEED_BF16()                                                                          \
    do {                                                                                     \
        if (!mha_precision_available(MHA_PRECISION_BF16)) {                                  \
            print_message("[  SKIP    ] this CPU has no %s (or MHA_DISABLE_BF16 is set): "   \
                          "bf16 not tested here\n",                                          \
                          mha_precision_cpu_feature(MHA_PRECISION_BF16));                    \
            skip();                                                                          \
        }                                                                                    \
    } while (0)

/* ‖a − b‖₂ / ‖b‖₂ of float arrays (0 when both are 0) */
static double rel_l2_f(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r == 0 ? sqrt(d) : sqrt(d / r);
}

/* Asserts err <= bound, printing both (so a run shows the margin). */
/* A draw in [0, bound) */
static int32_t draw(mha_pcg32 *rng, size_t bound)
{
    uint32_t v = 0;
    assert_int_equal(mha_pcg32_bounded(rng, (uint32_t)bound, &v), 0);
    return (int32_t)v;
}

static void check_rel(const char *what, double err, double bound)
{
    print_message("  %-34s relative L2 %.3e (bound %.3e)\n", what, err, bound);
    assert_true(err <= bound);
}

/* ---- rounding ------------------------------------------------------------------- */

/* Round to nearest, ties to even, NaN kept quiet, subnormals to signed zero, overflow to
 * infinity: the values VCVTNEPS2BF16 gives. */
static void bf16_rounding_values(void **state)
{
    (void)state;
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* 1 + 2⁻⁸: a tie, to even (down) */
        {0x3f818000u, 0x3f82}, /* 1 + 3·2⁻⁸: a tie, to even (up) */
        {0x3f808001u, 0x3f81}, /* just above the tie: up */
        {0x3f807fffu, 0x3f80}, /* just below: down */
        {0xbf808001u, 0xbf81}, /* negative: magnitude rounds the same way */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds up to infinity */
        {0x7f800000u, 0x7f80}, /* +inf */
        {0xff800000u, 0xff80}, /* −inf */
        {0x00000001u, 0x0000}, /* smallest subnormal: +0 */
        {0x807fffffu, 0x8000}, /* largest negative subnormal: −0 */
        {0x00800000u, 0x0080}, /* smallest normal stays */
        {0x7fc00000u, 0x7fc0}, /* quiet NaN */
        {0x7f800001u, 0x7fc0}, /* signalling NaN with a low payload: quiet, still NaN */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x;
        memcpy(&x, &cases[i].in, sizeof x);
        assert_int_equal(mha__bf16_from_float(x), cases[i].out);
    }
    assert_true(mha__bf16_to_float(0x3f80) == 1.0f);
    assert_true(mha__bf16_to_float(0xc040) == -3.0f);
}

/* ---- the GEMM ------------------------------------------------------------------- */

/* Odd, one-sized, beyond-one-block and K-odd shapes, strides wider than the matrices (the
 * space between holding infinities: nothing may read it). */
static const size_t shapes[][3] = {{1, 1, 1},  {3, 5, 7},   {7, 16, 2},  {6, 64, 33},
                                   {13, 65, 9}, {2, 130, 64}, {19, 33, 128}, {40, 17, 257}};

/* |C − R| <= 2(K−1)·2⁻²⁴·|alpha|·Σ|a||b| + 4 ulp of the result's terms (the epilogue's
 * alpha·s + beta·c rounds in both) */
static void bgemm_case(int threads, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                       float beta, uint64_t seed)
{
    const size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
    const size_t ar = ta ? K : M, br = tb ? N : K;
    float *A = malloc((ar + 1) * lda * sizeof *A), *B = malloc((br + 1) * ldb * sizeof *B);
    float *C = malloc(M * ldc * sizeof *C), *R = malloc(M * ldc * sizeof *R);
    assert_true(A && B && C && R);
    fill_uniform_f(A, ar * lda, -2, 2, seed);
    fill_uniform_f(B, br * ldb, -2, 2, seed + 1);
    fill_uniform_f(C, M * ldc, -1, 1, seed + 2);
    /* beyond each row of A and B (inside the stride): infinities, which a product that
     * read them — even times a zero of padding — would turn into inf or NaN */
    for (size_t r = 0; r <= ar; r++) /* and a row of them after the last */
        for (size_t c = r < ar ? (ta ? M : K) : 0; c < lda; c++)
            A[r * lda + c] = (c & 1) ? INFINITY : -INFINITY;
    for (size_t r = 0; r <= br; r++)
        for (size_t c = r < br ? (tb ? K : N) : 0; c < ldb; c++)
            B[r * ldb + c] = (c & 1) ? -INFINITY : INFINITY;
    memcpy(R, C, M * ldc * sizeof *C);
    mha__bgemm(threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    mha__bgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < ldc; j++) {
            const size_t at = i * ldc + j;
            if (j >= N) { /* beyond the matrix: untouched */
                assert_true(C[at] == R[at]);
                continue;
            }
            double mag = 0; /* Σ|a||b| of the rounded operands */
            for (size_t p = 0; p < K; p++) {
                const float a = ta ? A[p * lda + i] : A[i * lda + p];
                const float b = tb ? B[j * ldb + p] : B[p * ldb + j];
                mag += fabs((double)mha__bf16_to_float(mha__bf16_from_float(a)) *
                            mha__bf16_to_float(mha__bf16_from_float(b)));
            }
            const double tol = 2.0 * (double)(K > 0 ? K - 1 : 0) * 0x1p-24 * fabs(alpha) * mag +
                               4 * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * R[at]));
            assert_close(C[at], R[at], tol, 0);
        }
    free(A);
    free(B);
    free(C);
    free(R);
}

/* Every transposition, shape, alpha and beta, against the reference on rounded operands. */
static void bgemm_against_reference(void **state)
{
    (void)state;
    NEED_BF16();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                bgemm_case(1, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1, 0, 10 + s);
                bgemm_case(1, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], -0.75f, 0.5f,
                           20 + s);
                bgemm_case(1, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1, 1, 30 + s);
            }
    /* the row split over threads (above SPLIT_MIN_WORK) */
    bgemm_case(2, 0, 1, 96, 80, 72, 1, 1, 40);
    bgemm_case(2, 1, 0, 70, 48, 130, 0.5f, 0, 41);
}

/* Rows split over 1 to 4 threads give the very same bits (each element is computed as in
 * one call), with B's packing shared out over the same threads: N = 97 and 300 (two and
 * five blocks of the kernel's 64 columns, the last one partial), K = 129 (an odd K: 65
 * pairs, the last with a zero partner, split unevenly over 3 and 4 threads). */
static void bgemm_thread_independent(void **state)
{
    (void)state;
    NEED_BF16();
    enum { T = 4 };
    const size_t M = 150, K = 129, widths[] = {97, 300};
    for (size_t w = 0; w < 2; w++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const size_t N = widths[w];
                float *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
                float *C[T];
                assert_true(A && B);
                fill_uniform_f(A, M * K, -1, 1, 50);
                fill_uniform_f(B, K * N, -1, 1, 51);
                for (int t = 0; t < T; t++) {
                    C[t] = malloc(M * N * sizeof *C[t]);
                    assert_non_null(C[t]);
                    fill_uniform_f(C[t], M * N, -1, 1, 52);
                    mha__bgemm(t + 1, ta, tb, M, N, K, 1, A, ta ? M : K, B, tb ? K : N, 1, C[t],
                               N);
                }
                for (int t = 1; t < T; t++)
                    assert_memory_equal(C[0], C[t], M * N * sizeof *C[0]);
                for (int t = 0; t < T; t++)
                    free(C[t]);
                free(A);
                free(B);
            }
}

/* beta = 0 never reads C (NaN there stays out); K = 0 scales C by beta; the bf16 product
 * differs from the float32 one of the unrounded operands, by no more than rounding allows. */
static void bgemm_edges_and_rounding(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t M = 9, N = 21, K = 40;
    float A[9 * 40], B[40 * 21], C[9 * 21], F[9 * 21];
    fill_uniform_f(A, M * K, -1, 1, 60);
    fill_uniform_f(B, K * N, -1, 1, 61);
    for (size_t i = 0; i < M * N; i++)
        C[i] = NAN;
    mha__bgemm(1, 0, 0, M, N, K, 1, A, K, B, N, 0, C, N);
    mha__sgemm_ref(0, 0, M, N, K, 1, A, K, B, N, 0, F, N);
    int differs = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            assert_false(isnan(C[i * N + j]));
            double mag = 0;
            for (size_t p = 0; p < K; p++)
                mag += fabs((double)A[i * K + p] * B[p * N + j]);
            /* (2u + u²)Σ|ab| from the operands, 2(K−1)·2⁻²⁴ from two float sums */
            assert_close(C[i * N + j], F[i * N + j], (2 * U + U * U + 2 * K * 0x1p-24) * mag * 1.01,
                         0);
            differs |= C[i * N + j] != F[i * N + j];
        }
    assert_true(differs); /* the operands really were rounded */
    for (size_t i = 0; i < M * N; i++)
        C[i] = 2.0f;
    mha__bgemm(1, 0, 0, M, N, 0, 1, A, K, B, N, 0.5f, C, N);
    for (size_t i = 0; i < M * N; i++)
        assert_true(C[i] == 1.0f);
}

/* mha__bgemm_epi gives the bits of filling C's rows with the bias and adding the product
 * (alpha = beta = 1): every shape (partial vectors, odd K, K = 0), both layouts of B, one
 * thread and the row split; C's old contents (NaN) are never read, nor its stride's tail;
 * its epilogue sees every row once, after the row is final (E = 2·C + 1 read at the call
 * equals the result's). */
static void bgemm_bias_is_fill_and_add(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t more[][3] = {{96, 80, 72}, {150, 97, 129}, {5, 9, 0}};
    const size_t n_all = sizeof shapes / sizeof shapes[0] + sizeof more / sizeof more[0];
    for (size_t s = 0; s < n_all; s++) {
        const size_t *sh = s < sizeof shapes / sizeof shapes[0]
                               ? shapes[s]
                               : more[s - sizeof shapes / sizeof shapes[0]];
        const size_t M = sh[0], N = sh[1], K = sh[2], ldc = N + 3;
        for (int tb = 0; tb < 2; tb++)
            for (int threads = 1; threads <= 2; threads++) {
                const size_t lda = K + 1, ldb = (tb ? K : N) + 1;
                float *A = malloc((M * lda + 1) * sizeof *A);
                float *B = malloc(((tb ? N : K) * ldb + 1) * sizeof *B);
                float *bias = malloc(N * sizeof *bias);
                float *C = malloc(M * ldc * sizeof *C), *R = malloc(M * ldc * sizeof *R);
                float *E = malloc(M * N * sizeof *E + 1);
                int *count = calloc(M, sizeof *count);
                assert_true(A && B && bias && C && R && E && count);
                fill_uniform_f(A, M * lda + 1, -2, 2, 70 + s);
                fill_uniform_f(B, (tb ? N : K) * ldb + 1, -2, 2, 80 + s);
                fill_uniform_f(bias, N, -3, 3, 90 + s);
                for (size_t i = 0; i < M * ldc; i++) {
                    C[i] = i % ldc < N ? NAN : 7.0f; /* the tail of each row: untouched */
                    R[i] = i % ldc < N ? bias[i % ldc] : 7.0f;
                }
                epi_seen seen = {N, ldc, C, E, count};
                mha__bgemm_epi(threads, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, epi_record,
                               &seen);
                mha__bgemm(threads, 0, tb, M, N, K, 1, A, lda, B, ldb, 1, R, ldc);
                assert_memory_equal(C, R, M * ldc * sizeof *C);
                epi_check(&seen, M, R);
                free(E);
                free(count);
                free(A);
                free(B);
                free(bias);
                free(C);
                free(R);
            }
    }
}

/* ---- precision setting: names, refusals ---------------------------------------------- */

static void precision_api(void **state)
{
    (void)state;
    assert_string_equal(mha_precision_name(MHA_PRECISION_FP32), "fp32");
    assert_string_equal(mha_precision_name(MHA_PRECISION_BF16), "bf16");
    assert_null(mha_precision_name((mha_precision)7));
    assert_string_equal(mha_precision_cpu_feature(MHA_PRECISION_BF16), "avx512_bf16");
    assert_null(mha_precision_cpu_feature(MHA_PRECISION_FP32));
    assert_int_equal(mha_precision_available(MHA_PRECISION_FP32), 1);
    assert_int_equal(mha_precision_available((mha_precision)7), 0);
    assert_string_equal(mha_status_name(MHA_ECPU), "MHA_ECPU");

    /* double objects refuse BF16; every object refuses an unknown precision */
    mha_config mc = {.model_dim = 8, .num_heads = 2, .seed = 1, .threads = 1,
                     .precision = MHA_PRECISION_BF16};
    mhad_module *md = NULL;
    assert_int_equal(mhad_create(&md, &mc), MHA_EINVAL);
    assert_null(md);
    mc.precision = (mha_precision)2;
    mha_module *mf = NULL;
    assert_int_equal(mha_create(&mf, &mc), MHA_EINVAL);
    mha_gpt_config gc = {.vocab = 5, .context = 4, .layers = 1, .heads = 2, .dim = 8,
                         .seed = 1, .threads = 1, .precision = MHA_PRECISION_BF16};
    mhad_gpt *gd = NULL;
    assert_int_equal(mhad_gpt_create(&gd, &gc, 2), MHA_EINVAL);
    double x[8] = {0}, y[8];
    double w[64] = {0};
    assert_int_equal(mhad_linear_forward_prec(MHA_PRECISION_BF16, 1, 8, 8, x, w, NULL, y),
                     MHA_EINVAL);

    /* a CPU without bf16 (as MHA_DISABLE_BF16 makes this one): MHA_ECPU, nothing made */
    const char *old = getenv("MHA_DISABLE_BF16");
    char saved[64] = "";
    if (old != NULL)
        snprintf(saved, sizeof saved, "%s", old);
    setenv("MHA_DISABLE_BF16", "1", 1);
    assert_int_equal(mha_precision_available(MHA_PRECISION_BF16), 0);
    mc.precision = MHA_PRECISION_BF16;
    assert_int_equal(mha_create(&mf, &mc), MHA_ECPU);
    assert_null(mf);
    mha_gpt *gf = NULL;
    assert_int_equal(mha_gpt_create(&gf, &gc, 2), MHA_ECPU);
    assert_null(gf);
    float xf[8] = {0}, yf[8], wf[64] = {0};
    assert_int_equal(mha_linear_forward_prec(MHA_PRECISION_BF16, 1, 8, 8, xf, wf, NULL, yf),
                     MHA_ECPU);
    if (old != NULL)
        setenv("MHA_DISABLE_BF16", saved, 1);
    else
        unsetenv("MHA_DISABLE_BF16");
}

/* ---- layers ---------------------------------------------------------------------- */

/* Linear in bf16 is the bf16 GEMM of its operands: forward against the reference GEMM
 * (tight), backward's dW, db, dx against float32 (one product stage each: 4u). */
static void linear_bf16(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t N = 37, in = 48, out = 29;
    float *x = malloc(N * in * sizeof *x), *W = malloc(out * in * sizeof *W), b[29];
    float *y = malloc(N * out * sizeof *y), *r = malloc(N * out * sizeof *r);
    float *dy = malloc(N * out * sizeof *dy);
    float *dx[2], *dW[2], db[2][29];
    assert_true(x && W && y && r && dy);
    fill_uniform_f(x, N * in, -1, 1, 70);
    fill_uniform_f(W, out * in, -0.5f, 0.5f, 71);
    fill_uniform_f(b, out, -0.5f, 0.5f, 72);
    fill_uniform_f(dy, N * out, -1, 1, 73);
    assert_int_equal(mha_linear_forward_prec(MHA_PRECISION_BF16, N, in, out, x, W, b, y), MHA_OK);
    for (size_t i = 0; i < N; i++)
        memcpy(r + i * out, b, sizeof b);
    mha__bgemm_ref(0, 1, N, out, in, 1, x, in, W, in, 1, r, out);
    for (size_t i = 0; i < N * out; i++)
        assert_close(y[i], r[i], 2 * in * 0x1p-24 * 8, 0); /* Σ|a||b| <= in·1·0.5, ×2 margin */
    for (int p = 0; p < 2; p++) {
        dx[p] = calloc(N * in, sizeof *dx[p]);
        dW[p] = calloc(out * in, sizeof *dW[p]);
        assert_true(dx[p] && dW[p]);
        memset(db[p], 0, sizeof db[p]);
        assert_int_equal(mha_linear_backward_prec(p ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32, N,
                                                  in, out, x, W, dy, dx[p], dW[p], db[p]),
                         MHA_OK);
    }
    check_rel("linear dx", rel_l2_f(dx[1], dx[0], N * in), 4 * U);
    check_rel("linear dW", rel_l2_f(dW[1], dW[0], out * in), 4 * U);
    assert_memory_equal(db[1], db[0], sizeof db[0]); /* the bias gradient stays float32 */
    for (int p = 0; p < 2; p++) {
        free(dx[p]);
        free(dW[p]);
    }
    free(x), free(W), free(y), free(r), free(dy);
}

/* ---- the attention module ------------------------------------------------------------ */

/* Cross-attention with a padding mask, dropout, both attention modes: out, dx, dctx and
 * the parameter gradient in bf16 against float32 (8u: see the file's head). */
static void module_bf16(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t B = 3, Sq = 7, Sk = 9, D = 32, H = 4;
    const size_t lens[3] = {9, 4, 1};
    for (int mode = 0; mode < 2; mode++) {
        float *out[2], *dxq[2], *dxc[2], *grads[2];
        float *xq = malloc(B * Sq * D * sizeof *xq), *xc = malloc(B * Sk * D * sizeof *xc);
        float *dout = malloc(B * Sq * D * sizeof *dout);
        assert_true(xq && xc && dout);
        fill_uniform_f(xq, B * Sq * D, -1, 1, 80);
        fill_uniform_f(xc, B * Sk * D, -1, 1, 81);
        fill_uniform_f(dout, B * Sq * D, -1, 1, 82);
        size_t np = 0;
        for (int p = 0; p < 2; p++) {
            mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = 0.1, .seed = 5,
                              .threads = 2,
                              .precision = p ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32};
            mha_module *m;
            mha_cache *c;
            assert_int_equal(mha_create(&m, &cfg), MHA_OK);
            assert_int_equal(mha_cache_create_mode(&c, m, B, Sq, Sk, (mha_attn_mode)mode), MHA_OK);
            mha_mask mask = {.key_lengths = lens};
            out[p] = malloc(B * Sq * D * sizeof *out[p]);
            dxq[p] = calloc(B * Sq * D, sizeof *dxq[p]);
            dxc[p] = calloc(B * Sk * D, sizeof *dxc[p]);
            assert_true(out[p] && dxq[p] && dxc[p]);
            assert_int_equal(mha_forward(m, c, 1, B, Sq, xq, Sk, xc, &mask, out[p]), MHA_OK);
            assert_int_equal(mha_backward(m, c, xq, xc, dout, dxq[p], dxc[p]), MHA_OK);
            const float *g = mha_grads(m, &np);
            grads[p] = malloc(np * sizeof *grads[p]);
            assert_non_null(grads[p]);
            memcpy(grads[p], g, np * sizeof *g);
            mha_cache_destroy(c);
            mha_destroy(m);
        }
        check_rel(mode ? "module out (recompute)" : "module out (stored)",
                  rel_l2_f(out[1], out[0], B * Sq * D), 8 * U);
        check_rel("module dx_query", rel_l2_f(dxq[1], dxq[0], B * Sq * D), 8 * U);
        check_rel("module dx_context", rel_l2_f(dxc[1], dxc[0], B * Sk * D), 8 * U);
        check_rel("module parameter gradient", rel_l2_f(grads[1], grads[0], np), 8 * U);
        for (int p = 0; p < 2; p++) {
            free(out[p]), free(dxq[p]), free(dxc[p]), free(grads[p]);
        }
        free(xq), free(xc), free(dout);
    }
}

/* ---- the GPT --------------------------------------------------------------------------- */

/* The whole model: loss within u/8 relative (a mean of log-probabilities whose errors
 * average out), logits and the whole gradient within 8u, every tensor's gradient
 * within 8u of its own norm (tensors whose float32 gradient is below 1e-3 of the
 * largest are held to 8u of that largest instead: w_k's bias has an exactly-zero true
 * gradient, so it is rounding noise in either precision). Training mode, dropout on. */
static void gpt_bf16(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t B = 4, T = 16, V = 23;
    mha_gpt *g[2];
    double loss[2];
    int32_t tok[4 * 16], tgt[4 * 16];
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 3, 0);
    for (size_t i = 0; i < B * T; i++) {
        tok[i] = draw(&rng, V);
        tgt[i] = draw(&rng, V);
    }
    for (int p = 0; p < 2; p++) {
        mha_gpt_config cfg = {.vocab = V, .context = T, .layers = 2, .heads = 4, .dim = 64,
                              .attn_dropout = 0.1, .resid_dropout = 0.1, .seed = 11,
                              .threads = 2,
                              .precision = p ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32};
        assert_int_equal(mha_gpt_create(&g[p], &cfg, B), MHA_OK);
        assert_int_equal(mha_gpt_zero_grad(g[p]), MHA_OK);
        assert_int_equal(mha_gpt_forward(g[p], 1, B, T, tok, tgt, &loss[p]), MHA_OK);
        assert_int_equal(mha_gpt_backward(g[p]), MHA_OK);
    }
    check_rel("gpt loss", fabs(loss[1] - loss[0]) / loss[0], U / 8);
    size_t sh[3];
    check_rel("gpt logits", rel_l2_f(mha_gpt_logits(g[1], sh), mha_gpt_logits(g[0], sh), B * T * V),
              8 * U);
    const size_t nt = mha_gpt_num_tensors(g[0]);
    double gmax = 0, d_all = 0, r_all = 0, worst = 0;
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *gr;
        assert_int_equal(mha_gpt_tensor(g[0], i, &in, NULL, &gr), MHA_OK);
        for (size_t k = 0; k < in.numel; k++)
            gmax = fmax(gmax, fabs(gr[k]));
    }
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *g0, *g1;
        assert_int_equal(mha_gpt_tensor(g[0], i, &in, NULL, &g0), MHA_OK);
        assert_int_equal(mha_gpt_tensor(g[1], i, NULL, NULL, &g1), MHA_OK);
        double d = 0, r = 0, m = 0;
        for (size_t k = 0; k < in.numel; k++) {
            d += ((double)g1[k] - g0[k]) * ((double)g1[k] - g0[k]);
            r += (double)g0[k] * g0[k];
            m = fmax(m, fabs(g0[k]));
        }
        d_all += d;
        r_all += r;
        const double scale = m >= 1e-3 * gmax ? sqrt(r) : 1e-3 * gmax * sqrt((double)in.numel);
        const double e = sqrt(d) / scale;
        if (e > worst)
            worst = e;
        if (e > 8 * U)
            print_message("  tensor %s: %.3e\n", in.name, e);
        assert_true(e <= 8 * U);
    }
    check_rel("gpt gradient (all tensors)", sqrt(d_all / r_all), 8 * U);
    check_rel("gpt gradient (worst tensor)", worst, 8 * U);
    for (int p = 0; p < 2; p++)
        mha_gpt_destroy(g[p]);
}

/* ---- the encoder–decoder ---------------------------------------------------------------- */

/* Loss and whole gradient of the encoder–decoder with padded sources, bounds as the GPT's. */
static void s2s_bf16(void **state)
{
    (void)state;
    NEED_BF16();
    const size_t B = 3, S = 8, T = 6, Vs = 11, Vt = 13;
    int32_t src[3 * 8], tin[3 * 6], tgt[3 * 6];
    const size_t slen[3] = {8, 5, 2};
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 4, 0);
    for (size_t i = 0; i < B * S; i++)
        src[i] = draw(&rng, Vs);
    for (size_t i = 0; i < B * T; i++) {
        tin[i] = draw(&rng, Vt);
        tgt[i] = i % 5 == 4 ? -1 : draw(&rng, Vt);
    }
    mha_s2s *m[2];
    double loss[2];
    for (int p = 0; p < 2; p++) {
        mha_s2s_config cfg = {.src_vocab = Vs, .tgt_vocab = Vt, .src_context = S,
                              .tgt_context = T, .enc_layers = 2, .dec_layers = 2, .heads = 4,
                              .dim = 32, .label_smoothing = 0.1, .seed = 9, .threads = 2,
                              .precision = p ? MHA_PRECISION_BF16 : MHA_PRECISION_FP32};
        assert_int_equal(mha_s2s_create(&m[p], &cfg, B), MHA_OK);
        assert_int_equal(mha_s2s_zero_grad(m[p]), MHA_OK);
        assert_int_equal(mha_s2s_forward(m[p], 1, B, S, src, slen, T, tin, tgt, &loss[p]), MHA_OK);
        assert_int_equal(mha_s2s_backward(m[p]), MHA_OK);
    }
    check_rel("s2s loss", fabs(loss[1] - loss[0]) / loss[0], U / 8);
    double d = 0, r = 0;
    for (size_t i = 0; i < mha_s2s_num_tensors(m[0]); i++) {
        mha_param_info in;
        float *g0, *g1;
        assert_int_equal(mha_s2s_tensor(m[0], i, &in, NULL, &g0), MHA_OK);
        assert_int_equal(mha_s2s_tensor(m[1], i, NULL, NULL, &g1), MHA_OK);
        for (size_t k = 0; k < in.numel; k++) {
            d += ((double)g1[k] - g0[k]) * ((double)g1[k] - g0[k]);
            r += (double)g0[k] * g0[k];
        }
    }
    check_rel("s2s gradient (all tensors)", sqrt(d / r), 8 * U);
    for (int p = 0; p < 2; p++)
        mha_s2s_destroy(m[p]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_rounding_values),
        cmocka_unit_test(bgemm_against_reference),
        cmocka_unit_test(bgemm_thread_independent),
        cmocka_unit_test(bgemm_edges_and_rounding),
        cmocka_unit_test(bgemm_bias_is_fill_and_add),
        cmocka_unit_test(precision_api),
        cmocka_unit_test(linear_bf16),
        cmocka_unit_test(module_bf16),
        cmocka_unit_test(gpt_bf16),
        cmocka_unit_test(s2s_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
