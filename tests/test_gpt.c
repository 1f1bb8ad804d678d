/*
 * The GPT block and model (include/mha_gpt.h): the block as its documented composition of
 * the layers, float32 against float64, generation with key/value caches against the full
 * forward, the tensor table and GPT-2 initialisation, the gradient hook, data-parallel
 * slices, refused arguments and a small model that learns. Their gradients (every element
 * by finite differences in float64, accumulation, the thread count) are rows of the one
 * table of gradient cases, tests/test_grad_table.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "mha.h"
#include "test_util.h"

/* ---- block ------------------------------------------------------------------ */

/* A block's parameter gradients, concatenated into g (NULL: just count); returns the count. */
static size_t block_grads(mha_block *b, mha_decoder_block *d, float *g)
{
    size_t n = 0;
    const size_t nt = b ? MHA_BLOCK_NUM_TENSORS : MHA_DEC_BLOCK_NUM_TENSORS;
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *gr;
        assert_int_equal(b ? mha_block_tensor(b, i, &in, NULL, &gr)
                           : mha_decoder_block_tensor(d, i, &in, NULL, &gr),
                         MHA_OK);
        if (g)
            memcpy(g + n, gr, in.numel * sizeof *gr);
        n += in.numel;
    }
    return n;
}

/* A training forward keeps gelu'(h) for its backward (src/layers_linear.inc); an evaluation
 * forward does not. A backward after an evaluation forward of x2, which follows a training
 * step on x1, gives the bits of one after a training forward of x2 (no dropout: the two
 * forwards compute the same): gradients and dx, for the GPT block and the decoder block,
 * 2 threads. */
static void blocks_backward_after_either_forward(void **state)
{
    (void)state;
    enum { B = 5, T = 31, S = 7, C = 48, R = B * T };
    const mha_block_config cfg = {.dim = C, .heads = 2, .mlp_dim = 100, .causal = 1,
                                  .threads = 2, .seed = 9};
    for (int dec = 0; dec < 2; dec++) {
        mha_block *b = NULL;
        mha_decoder_block *d = NULL;
        if (dec)
            assert_int_equal(mha_decoder_block_create(&d, &cfg, B, T, S), MHA_OK);
        else
            assert_int_equal(mha_block_create(&b, &cfg, B, T), MHA_OK);
        const size_t n = block_grads(b, d, NULL);
        float *x1 = xmalloc(R * C * sizeof *x1), *x2 = xmalloc(R * C * sizeof *x2);
        float *mem = xmalloc(B * S * C * sizeof *mem), *dmem = xcalloc(B * S * C, sizeof *dmem);
        float *dy = xmalloc(R * C * sizeof *dy), *y = xmalloc(R * C * sizeof *y);
        float *dx[2], *g[2];
        fill_uniform_f(x1, R * C, -1, 1, 170);
        fill_uniform_f(x2, R * C, -1, 1, 171);
        fill_uniform_f(mem, B * S * C, -1, 1, 172);
        fill_uniform_f(dy, R * C, -1, 1, 173);
        for (int k = 0; k < 2; k++) {
            dx[k] = xcalloc(R * C, sizeof *dx[k]);
            g[k] = xmalloc(n * sizeof *g[k]);
        }
        /* k = 0: train on x1 (forward, backward), then evaluate x2 and run its backward;
         * k = 1: train on x2 */
        for (int k = 0; k < 2; k++) {
            for (int pass = k; pass < 2; pass++) {
                const int training = !(k == 0 && pass == 1);
                const float *x = pass == 0 ? x1 : x2;
                if (dec) {
                    assert_int_equal(mha_decoder_block_zero_grad(d), MHA_OK);
                    assert_int_equal(mha_decoder_block_forward(d, training, B, T, x, S, mem, NULL,
                                                               y),
                                     MHA_OK);
                    assert_int_equal(mha_decoder_block_backward(d, x, mem, dy, dx[k], dmem),
                                     MHA_OK);
                } else {
                    assert_int_equal(mha_block_zero_grad(b), MHA_OK);
                    assert_int_equal(mha_block_forward(b, training, B, T, x, y), MHA_OK);
                    assert_int_equal(mha_block_backward(b, x, dy, dx[k]), MHA_OK);
                }
                if (pass == 0)
                    memset(dx[k], 0, R * C * sizeof *dx[k]);
            }
            block_grads(b, d, g[k]);
        }
        assert_memory_equal(dx[0], dx[1], R * C * sizeof *dx[0]);
        assert_memory_equal(g[0], g[1], n * sizeof *g[0]);
        for (int k = 0; k < 2; k++)
            free(dx[k]), free(g[k]);
        free(x1), free(x2), free(mem), free(dmem), free(dy), free(y);
        mha_block_destroy(b);
        mha_decoder_block_destroy(d);
    }
}

/* The block is exactly the documented composition of the layers: LN1, the attention
 * module (causal), dropout with PCG32(block seed, MHA_PCG32_STREAM_RESID_ATTN) at the
 * block's call index, the residual, LN2, the MLP, dropout with
 * MHA_PCG32_STREAM_RESID_MLP, the residual (float64, within 1e-12). */
static void gpt_block_is_its_composition(void **state)
{
    (void)state;
    enum { B = 2, T = 5, C = 8, F = 32, N = B * T * C };
    mha_block_config cfg = {.dim = C, .heads = 2, .resid_dropout = 0.5, .causal = 1,
                            .seed = 77, .threads = 1};
    mhad_block *blk;
    assert_int_equal(mhad_block_create(&blk, &cfg, B, T), MHA_OK);
    randomize_block(blk, 77);
    double *p[MHA_BLOCK_NUM_TENSORS];
    for (size_t i = 0; i < MHA_BLOCK_NUM_TENSORS; i++)
        assert_int_equal(mhad_block_tensor(blk, i, NULL, &p[i], NULL), MHA_OK);
    double x[N], y[N], n1[N], a[N], x1[N], n2[N], m[N], want[N], mean[B * T], rstd[B * T];
    double h[B * T * F], act[B * T * F];
    uint64_t keep[MHA_DROPOUT_WORDS(N)];
    fill_uniform(x, N, -1.0, 1.0, 78);
    assert_int_equal(mhad_block_set_call_index(blk, 7), MHA_OK);
    assert_int_equal(mhad_block_forward(blk, 1, B, T, x, y), MHA_OK);

    assert_int_equal(mhad_layernorm_forward(B * T, C, 1e-5, x, p[0], p[1], n1, mean, rstd),
                     MHA_OK);
    mhad_cache *c;
    mhad_module *attn = mhad_block_attention(blk);
    assert_int_equal(mhad_cache_create(&c, attn, B, T, T), MHA_OK);
    const mha_mask causal = {.causal = 1, .mask_batch = 1, .mask_heads = 1};
    assert_int_equal(mhad_forward(attn, c, 0, B, T, n1, T, NULL, &causal, a), MHA_OK);
    assert_int_equal(mhad_dropout_forward(N, 0.5, 77, MHA_PCG32_STREAM_RESID_ATTN, 7, a, a, keep),
                     MHA_OK);
    for (int i = 0; i < N; i++)
        x1[i] = x[i] + a[i];
    assert_int_equal(mhad_layernorm_forward(B * T, C, 1e-5, x1, p[10], p[11], n2, mean, rstd),
                     MHA_OK);
    assert_int_equal(mhad_mlp_forward(B * T, C, F, n2, p[12], p[13], p[14], p[15], h, act, m),
                     MHA_OK);
    assert_int_equal(mhad_dropout_forward(N, 0.5, 77, MHA_PCG32_STREAM_RESID_MLP, 7, m, m, keep),
                     MHA_OK);
    for (int i = 0; i < N; i++)
        want[i] = x1[i] + m[i];
    assert_true(max_abs_diff(y, want, N) <= 1e-12);
    mhad_cache_destroy(c);
    mhad_block_destroy(blk);
}

/* ---- model ------------------------------------------------------------------- */

static mha_gpt_config small_config(double p_attn, double p_resid, uint64_t seed)
{
    mha_gpt_config c = {.vocab = 7, .context = 6, .layers = 2, .heads = 2, .dim = 8,
                        .attn_dropout = p_attn, .resid_dropout = p_resid, .seed = seed,
                        .threads = 2};
    return c;
}

/* float32 and float64 models with the same parameters agree: loss within 1e-5 relative,
 * every gradient within 1e-4 in relative L2 norm (attn.w_k.bias, whose exact gradient is
 * 0 by softmax shift invariance, on the scale of its weight). */
static void gpt_model_f32_matches_f64(void **state)
{
    (void)state;
    mha_gpt_config cfg = small_config(0.0, 0.0, 31);
    cfg.vocab = 13;
    cfg.context = 9;
    cfg.dim = 16;
    mhad_gpt *gd;
    mha_gpt *gf;
    assert_int_equal(mhad_gpt_create(&gd, &cfg, 3), MHA_OK);
    assert_int_equal(mha_gpt_create(&gf, &cfg, 3), MHA_OK);
    for (size_t i = 0; i < mhad_gpt_num_tensors(gd); i++) {
        mha_param_info in;
        double *pd;
        float *pf;
        assert_int_equal(mhad_gpt_tensor(gd, i, &in, &pd, NULL), MHA_OK);
        assert_int_equal(mha_gpt_tensor(gf, i, NULL, &pf, NULL), MHA_OK);
        for (size_t k = 0; k < in.numel; k++)
            pf[k] = (float)pd[k]; /* GPT-2 init of the double model, rounded */
        for (size_t k = 0; k < in.numel; k++)
            pd[k] = (double)pf[k];
    }
    int32_t tok[27], tgt[27];
    fill_ids(tok, 27, 0, 13, 1);
    fill_ids(tgt, 27, 0, 13, 2);
    double ld, lf;
    assert_int_equal(mhad_gpt_forward(gd, 1, 3, 9, tok, tgt, &ld), MHA_OK);
    assert_int_equal(mha_gpt_forward(gf, 1, 3, 9, tok, tgt, &lf), MHA_OK);
    assert_close(lf, ld, 0.0, 1e-5);
    assert_int_equal(mhad_gpt_backward(gd), MHA_OK);
    assert_int_equal(mha_gpt_backward(gf), MHA_OK);
    for (size_t i = 0; i < mhad_gpt_num_tensors(gd); i++) {
        mha_param_info in;
        double *g64;
        float *g32;
        assert_int_equal(mhad_gpt_tensor(gd, i, &in, NULL, &g64), MHA_OK);
        assert_int_equal(mha_gpt_tensor(gf, i, NULL, NULL, &g32), MHA_OK);
        double num = 0, den = 0;
        for (size_t k = 0; k < in.numel; k++) {
            num += ((double)g32[k] - g64[k]) * ((double)g32[k] - g64[k]);
            den += g64[k] * g64[k];
        }
        if (strstr(in.name, "w_k.bias")) { /* scale of the sibling weight (tensor i − 1) */
            mha_param_info wi;
            double *gw;
            assert_int_equal(mhad_gpt_tensor(gd, i - 1, &wi, NULL, &gw), MHA_OK);
            den = 0;
            for (size_t k = 0; k < wi.numel; k++)
                den += gw[k] * gw[k];
        }
        if (!(sqrt(num) <= 1e-4 * sqrt(den)))
            print_error("%s: ‖g32 − g64‖ %.3g vs ‖g64‖ %.3g\n", in.name, sqrt(num), sqrt(den));
        assert_true(sqrt(num) <= 1e-4 * sqrt(den));
    }
    mhad_gpt_destroy(gd);
    mha_gpt_destroy(gf);
}

/* ---- generation with key/value caches ------------------------------------------ */

/* Logits from the cached path equal the full forward's at every position: prefill of 3,
 * then one token at a time, for 2 sequences; float64 within 1e-12 of the largest logit,
 * float32 within 1e-5. After reset the same feed gives bit-identical logits. */
static void gpt_infer_matches_full_forward(void **state)
{
    (void)state;
    mha_gpt_config cfg = small_config(0.3, 0.3, 41); /* dropout must not apply */
    cfg.context = 10;
    const size_t B = 2, T = 10, V = cfg.vocab;
    int32_t tok[20];
    fill_ids(tok, B * T, 0, (int32_t)V, 3);
    for (int prec = 0; prec < 2; prec++) {
        double *full = malloc(B * T * V * sizeof(double));
        double step_logits[2 * 7], first[2 * 7];
        int32_t chunk[2 * 3];
        double maxabs = 0, worst = 0;
        mhad_gpt *gd = NULL;
        mha_gpt *gf = NULL;
        mhad_gpt_infer *sd = NULL;
        mha_gpt_infer *sf = NULL;
        if (prec == 0) {
            assert_int_equal(mhad_gpt_create(&gd, &cfg, B), MHA_OK);
            randomize_gpt(gd, 41);
            assert_int_equal(mhad_gpt_forward(gd, 0, B, T, tok, NULL, NULL), MHA_OK);
            memcpy(full, mhad_gpt_logits(gd, NULL), B * T * V * sizeof(double));
            assert_int_equal(mhad_gpt_infer_create(&sd, gd, B, T), MHA_OK);
        } else {
            assert_int_equal(mha_gpt_create(&gf, &cfg, B), MHA_OK);
            assert_int_equal(mha_gpt_forward(gf, 0, B, T, tok, NULL, NULL), MHA_OK);
            const float *lf = mha_gpt_logits(gf, NULL);
            for (size_t i = 0; i < B * T * V; i++)
                full[i] = lf[i];
            assert_int_equal(mha_gpt_infer_create(&sf, gf, B, T), MHA_OK);
        }
        for (size_t i = 0; i < B * T * V; i++)
            maxabs = fmax(maxabs, fabs(full[i]));
        for (int round = 0; round < 2; round++) {
            size_t pos = 0;
            while (pos < T) {
                size_t n = pos == 0 ? 3 : 1;
                for (size_t b = 0; b < B; b++)
                    for (size_t k = 0; k < n; k++)
                        chunk[b * n + k] = tok[b * T + pos + k];
                if (prec == 0) {
                    assert_int_equal(mhad_gpt_infer_step(gd, sd, B, n, chunk, step_logits),
                                     MHA_OK);
                } else {
                    float lf[2 * 7];
                    assert_int_equal(mha_gpt_infer_step(gf, sf, B, n, chunk, lf), MHA_OK);
                    for (size_t i = 0; i < B * V; i++)
                        step_logits[i] = lf[i];
                }
                pos += n;
                for (size_t b = 0; b < B; b++)
                    for (size_t v = 0; v < V; v++)
                        worst = fmax(worst, fabs(step_logits[b * V + v] -
                                                 full[(b * T + pos - 1) * V + v]));
                if (pos == 3 && round == 0)
                    memcpy(first, step_logits, sizeof first);
                if (pos == 3 && round == 1)
                    assert_memory_equal(first, step_logits, sizeof first);
            }
            size_t len;
            if (prec == 0) {
                assert_int_equal(mhad_gpt_infer_length(sd, &len), MHA_OK);
                assert_int_equal(len, T);
                /* full: one more position is refused and changes nothing */
                assert_int_equal(mhad_gpt_infer_step(gd, sd, B, 1, chunk, step_logits),
                                 MHA_ESHAPE);
                assert_int_equal(mhad_gpt_infer_length(sd, &len), MHA_OK);
                assert_int_equal(len, T);
                assert_int_equal(mhad_gpt_infer_reset(sd), MHA_OK);
            } else {
                assert_int_equal(mha_gpt_infer_length(sf, &len), MHA_OK);
                assert_int_equal(len, T);
                assert_int_equal(mha_gpt_infer_reset(sf), MHA_OK);
            }
        }
        double tol = prec == 0 ? 1e-12 : 1e-5;
        if (!(worst <= tol * maxabs))
            print_error("prec %d: cached vs full max |diff| %.3g (largest logit %.3g)\n", prec,
                        worst, maxabs);
        assert_true(worst <= tol * maxabs);
        mhad_gpt_infer_destroy(sd);
        mha_gpt_infer_destroy(sf);
        mhad_gpt_destroy(gd);
        mha_gpt_destroy(gf);
        free(full);
    }
}

/* Generation refuses a bad token, another batch size mid-sequence, a longer cache than
 * the context, and another model's state, changing nothing. */
static void gpt_infer_refusals(void **state)
{
    (void)state;
    mha_gpt_config cfg = small_config(0, 0, 42);
    mha_gpt *g, *other;
    mha_gpt_infer *s;
    assert_int_equal(mha_gpt_create(&g, &cfg, 2), MHA_OK);
    assert_int_equal(mha_gpt_create(&other, &cfg, 2), MHA_OK);
    assert_int_equal(mha_gpt_infer_create(&s, g, 2, cfg.context + 1), MHA_ESHAPE);
    assert_int_equal(mha_gpt_infer_create(&s, g, 0, 4), MHA_EINVAL);
    assert_int_equal(mha_gpt_infer_create(&s, g, 2, cfg.context), MHA_OK);
    float logits[14];
    for (int i = 0; i < 14; i++)
        logits[i] = 42.0f;
    int32_t bad[2] = {0, 7}, ok[2] = {1, 2};
    size_t len;
    assert_int_equal(mha_gpt_infer_step(g, s, 2, 1, bad, logits), MHA_EINVAL);
    assert_int_equal(mha_gpt_infer_step(other, s, 2, 1, ok, logits), MHA_EMISMATCH);
    assert_int_equal(mha_gpt_infer_step(g, s, 3, 1, ok, logits), MHA_ESHAPE);
    for (int i = 0; i < 14; i++)
        assert_true(logits[i] == 42.0f);
    assert_int_equal(mha_gpt_infer_length(s, &len), MHA_OK);
    assert_int_equal(len, 0);
    assert_int_equal(mha_gpt_infer_step(g, s, 2, 1, ok, logits), MHA_OK);
    assert_int_equal(mha_gpt_infer_step(g, s, 1, 1, ok, logits), MHA_ESHAPE);
    assert_int_equal(mha_gpt_infer_length(s, &len), MHA_OK);
    assert_int_equal(len, 1);
    mha_gpt_infer_destroy(s);
    mha_gpt_destroy(g);
    mha_gpt_destroy(other);
}

/* ---- tensors, initialisation, contract ------------------------------------------ */

/* Names, order and shapes of the state_dict; decay only on matmul weights; the
 * parameter count; GPT-2 init: LN weight 1, biases 0, weights N(0, 0.02), residual
 * projections N(0, 0.02/√(2L)), embeddings N(0, 0.02). */
static void gpt_tensors_and_init(void **state)
{
    (void)state;
    mha_gpt_config cfg = {.vocab = 65, .context = 64, .layers = 4, .heads = 4, .dim = 128,
                          .seed = 1337, .threads = 1};
    mha_gpt *g;
    assert_int_equal(mha_gpt_create(&g, &cfg, 1), MHA_OK);
    const size_t n = mha_gpt_num_tensors(g);
    assert_int_equal(n, 2 + 16 * 4 + 2);
    static const char *const expect[] = {"wte.weight", "wpe.weight", "blocks.0.ln1.weight",
                                         "blocks.0.ln1.bias", "blocks.0.attn.w_q.weight"};
    size_t total = 0, arena_n = 0;
    float *arena = mha_gpt_params(g, &arena_n), *garena = mha_gpt_grads(g, NULL);
    assert_non_null(arena);
    assert_non_null(garena);
    for (size_t i = 0; i < n; i++) {
        mha_param_info in;
        float *p, *pg;
        assert_int_equal(mha_gpt_tensor(g, i, &in, &p, &pg), MHA_OK);
        /* the arenas: tensor i right after tensor i - 1 */
        assert_true(p == arena + total && pg == garena + total);
        if (i < 5)
            assert_string_equal(in.name, expect[i]);
        size_t idx;
        assert_int_equal(mha_gpt_tensor_find(g, in.name, &idx), MHA_OK);
        assert_int_equal(idx, i);
        assert_int_equal(in.numel, in.ndim == 2 ? in.shape[0] * in.shape[1] : in.shape[0]);
        total += in.numel;
        assert_int_equal(in.decay, in.role == MHA_ROLE_WEIGHT || in.role == MHA_ROLE_RESID_WEIGHT);
        assert_int_equal(in.decay, in.ndim == 2 && in.role != MHA_ROLE_EMBEDDING);
        double s = 0, s2 = 0;
        for (size_t k = 0; k < in.numel; k++) {
            s += p[k];
            s2 += (double)p[k] * p[k];
        }
        double mean = s / (double)in.numel, sd = sqrt(s2 / (double)in.numel - mean * mean);
        switch (in.role) {
        case MHA_ROLE_NORM_WEIGHT: assert_true(s == (double)in.numel && sd == 0); break;
        case MHA_ROLE_BIAS:
        case MHA_ROLE_NORM_BIAS: assert_true(s2 == 0.0); break;
        case MHA_ROLE_RESID_WEIGHT:
            assert_close(sd, 0.02 / sqrt(8.0), 0, 0.05);
            break;
        default: /* weights and embeddings */
            assert_close(sd, 0.02, 0, 0.05);
            assert_true(fabs(mean) < 4 * 0.02 / sqrt((double)in.numel));
        }
    }
    mha_param_info last;
    assert_int_equal(mha_gpt_tensor(g, n - 1, &last, NULL, NULL), MHA_OK);
    assert_string_equal(last.name, "ln_f.bias");
    assert_int_equal(mha_gpt_tensor(g, 2 + 16 + 12, &last, NULL, NULL), MHA_OK);
    assert_string_equal(last.name, "blocks.1.mlp.fc.weight");
    assert_int_equal(last.shape[0], 512);
    assert_int_equal(last.shape[1], 128);
    size_t count, idx;
    assert_int_equal(mha_gpt_param_count(g, &count), MHA_OK);
    assert_int_equal(count, total);
    assert_int_equal(arena_n, total);
    /* a block's module is a view of the arena too, and zero_grad clears all of it */
    size_t attn_n = 0;
    mha_module *attn = mha_block_attention(mha_gpt_block(g, 1));
    float *attn_p = mha_params(attn, &attn_n), *attn_g = mha_grads(attn, NULL);
    assert_true(attn_p == arena + 65 * 128 + 64 * 128 + (12 * 128 * 128 + 13 * 128) + 2 * 128);
    assert_true(attn_g == garena + (attn_p - arena));
    assert_int_equal(attn_n, 4 * 128 * 128 + 4 * 128);
    for (size_t k = 0; k < total; k++)
        garena[k] = 1.0f;
    assert_int_equal(mha_gpt_zero_grad(g), MHA_OK);
    for (size_t k = 0; k < total; k++)
        assert_true(garena[k] == 0.0f);
    assert_null(mha_gpt_params(NULL, &arena_n));
    assert_null(mha_gpt_grads(NULL, NULL));
    assert_int_equal(arena_n, total); /* untouched */
    /* the baby GPT: 4·(12·C² + 13·C) + V·C + T·C + 2C */
    assert_int_equal(count, 4 * (12 * 128 * 128 + 13 * 128) + 65 * 128 + 64 * 128 + 256);
    assert_int_equal(mha_gpt_tensor_find(g, "lm_head.weight", &idx), MHA_ENOTFOUND);
    assert_int_equal(mha_gpt_tensor(g, n, NULL, NULL, NULL), MHA_EINVAL);
    /* same seed, same weights; another seed, other weights */
    mha_gpt *g2;
    assert_int_equal(mha_gpt_create(&g2, &cfg, 1), MHA_OK);
    float *a, *b;
    mha_param_info in;
    assert_int_equal(mha_gpt_tensor(g, 4, &in, &a, NULL), MHA_OK);
    assert_int_equal(mha_gpt_tensor(g2, 4, NULL, &b, NULL), MHA_OK);
    assert_memory_equal(a, b, in.numel * sizeof(float));
    assert_int_equal(mha_gpt_reset_parameters(g2, 7), MHA_OK);
    assert_memory_not_equal(a, b, in.numel * sizeof(float));
    mha_gpt_destroy(g2);
    mha_gpt_destroy(g);
}

/* The gradient hook: each tensor reported once, in the documented order (ln_f, blocks
 * from the last, wte+wpe), and a reported range is already final (a snapshot taken in
 * the callback equals the gradient after backward). */
typedef struct hook_log {
    mhad_gpt *g;
    size_t calls, first[16], count[16];
    double *snap;   /* [param_count] gradients as seen in the callback, per tensor offset */
    size_t *offset; /* [n_tensors] offset of each tensor in snap                          */
} hook_log;

static void record_hook(void *user, size_t first, size_t count)
{
    hook_log *h = user;
    assert_true(h->calls < 16);
    h->first[h->calls] = first;
    h->count[h->calls] = count;
    h->calls++;
    for (size_t i = first; i < first + count; i++) {
        mha_param_info in;
        double *gr;
        assert_int_equal(mhad_gpt_tensor(h->g, i, &in, NULL, &gr), MHA_OK);
        memcpy(h->snap + h->offset[i], gr, in.numel * sizeof(double));
    }
}

static void gpt_grad_hook_reports_final_ranges(void **state)
{
    (void)state;
    mha_gpt_config cfg = small_config(0.1, 0.1, 53);
    cfg.layers = 3;
    mhad_gpt *g;
    assert_int_equal(mhad_gpt_create(&g, &cfg, 2), MHA_OK);
    randomize_gpt(g, 53);
    const size_t n = mhad_gpt_num_tensors(g), L = 3;
    assert_int_equal(n, 4 + L * MHA_BLOCK_NUM_TENSORS);
    size_t total = 0;
    assert_int_equal(mhad_gpt_param_count(g, &total), MHA_OK);
    hook_log h = {.g = g, .snap = calloc(total, sizeof(double)),
                  .offset = calloc(n, sizeof(size_t))};
    for (size_t i = 0, off = 0; i < n; i++) {
        mha_param_info in;
        assert_int_equal(mhad_gpt_tensor(g, i, &in, NULL, NULL), MHA_OK);
        h.offset[i] = off;
        off += in.numel;
    }
    int32_t tok[12], tgt[12];
    fill_ids(tok, 12, 0, 7, 3);
    fill_ids(tgt, 12, 0, 7, 4);
    assert_int_equal(mhad_gpt_set_grad_hook(NULL, record_hook, &h), MHA_EINVAL);
    assert_int_equal(mhad_gpt_set_grad_hook(g, record_hook, &h), MHA_OK);
    assert_int_equal(mhad_gpt_forward(g, 1, 2, 6, tok, tgt, NULL), MHA_OK);
    assert_int_equal(h.calls, 0); /* forward reports nothing */
    assert_int_equal(mhad_gpt_backward(g), MHA_OK);
    assert_int_equal(h.calls, L + 2);
    assert_int_equal(h.first[0], n - 2);
    assert_int_equal(h.count[0], 2);
    for (size_t k = 0; k < L; k++) {
        assert_int_equal(h.first[1 + k], 2 + (L - 1 - k) * MHA_BLOCK_NUM_TENSORS);
        assert_int_equal(h.count[1 + k], MHA_BLOCK_NUM_TENSORS);
    }
    assert_int_equal(h.first[L + 1], 0);
    assert_int_equal(h.count[L + 1], 2);
    for (size_t i = 0; i < n; i++) {
        mha_param_info in;
        double *gr;
        assert_int_equal(mhad_gpt_tensor(g, i, &in, NULL, &gr), MHA_OK);
        assert_memory_equal(h.snap + h.offset[i], gr, in.numel * sizeof(double));
    }
    /* a refused backward reports nothing; a removed hook is not called */
    assert_int_equal(mhad_gpt_backward(g), MHA_ESTATE);
    assert_int_equal(h.calls, L + 2);
    assert_int_equal(mhad_gpt_set_grad_hook(g, NULL, &h), MHA_OK);
    assert_int_equal(mhad_gpt_forward(g, 1, 2, 6, tok, tgt, NULL), MHA_OK);
    assert_int_equal(mhad_gpt_backward(g), MHA_OK);
    assert_int_equal(h.calls, L + 2);
    free(h.snap);
    free(h.offset);
    mhad_gpt_destroy(g);
}

/* Data-parallel slices with every dropout on: a batch of 4 run as two slices of 2 with
 * batch offsets 0 and 2 (same call index) gives the full batch's logits rows, the mean
 * of the slices' losses is its loss, and the slices' gradients add up to twice its
 * gradient (each slice's loss is a mean over half the rows); float64, 1e-12. */
static void gpt_dropout_batch_offset_slices(void **state)
{
    (void)state;
    mha_gpt_config cfg = small_config(0.2, 0.2, 57);
    mhad_gpt *g;
    assert_int_equal(mhad_gpt_create(&g, &cfg, 4), MHA_OK);
    randomize_gpt(g, 57);
    const size_t B = 4, T = 6, half = 2, V = 7;
    int32_t tok[24], tgt[24];
    fill_ids(tok, 24, 0, 7, 5);
    fill_ids(tgt, 24, 0, 7, 6);
    size_t total = 0, shape[3];
    assert_int_equal(mhad_gpt_param_count(g, &total), MHA_OK);
    const size_t n = mhad_gpt_num_tensors(g);
    double *full = malloc(total * sizeof(double)), *logits = malloc(B * T * V * sizeof(double));
    double loss_full, loss_half[2];
    assert_int_equal(mhad_gpt_set_call_index(g, 7), MHA_OK);
    assert_int_equal(mhad_gpt_zero_grad(g), MHA_OK);
    assert_int_equal(mhad_gpt_forward(g, 1, B, T, tok, tgt, &loss_full), MHA_OK);
    memcpy(logits, mhad_gpt_logits(g, shape), B * T * V * sizeof(double));
    assert_int_equal(mhad_gpt_backward(g), MHA_OK);
    for (size_t i = 0, off = 0; i < n; i++) {
        mha_param_info in;
        double *gr;
        assert_int_equal(mhad_gpt_tensor(g, i, &in, NULL, &gr), MHA_OK);
        memcpy(full + off, gr, in.numel * sizeof(double));
        off += in.numel;
    }
    assert_int_equal(mhad_gpt_zero_grad(g), MHA_OK);
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(mhad_gpt_set_call_index(g, 7), MHA_OK);
        assert_int_equal(mhad_gpt_set_dropout_batch_offset(g, k * half), MHA_OK);
        assert_int_equal(mhad_gpt_forward(g, 1, half, T, tok + k * half * T, tgt + k * half * T,
                                          &loss_half[k]), MHA_OK);
        const double *lg = mhad_gpt_logits(g, shape);
        for (size_t e = 0; e < half * T * V; e++)
            assert_close(lg[e], logits[k * half * T * V + e], 1e-12, 1e-12);
        assert_int_equal(mhad_gpt_backward(g), MHA_OK);
    }
    assert_close((loss_half[0] + loss_half[1]) / 2, loss_full, 1e-13, 1e-13);
    for (size_t i = 0, off = 0; i < n; i++) {
        mha_param_info in;
        double *gr;
        assert_int_equal(mhad_gpt_tensor(g, i, &in, NULL, &gr), MHA_OK);
        for (size_t e = 0; e < in.numel; e++)
            assert_close(gr[e] / 2, full[off + e], 1e-12, 1e-10);
        off += in.numel;
    }
    /* the second slice at offset 0 draws other masks: another loss */
    double other;
    assert_int_equal(mhad_gpt_set_call_index(g, 7), MHA_OK);
    assert_int_equal(mhad_gpt_set_dropout_batch_offset(g, 0), MHA_OK);
    assert_int_equal(mhad_gpt_forward(g, 1, half, T, tok + half * T, tgt + half * T, &other),
                     MHA_OK);
    assert_true(fabs(other - loss_half[1]) > 1e-6);
    /* limits: beyond 2^40 refused; a training forward past it refused, eval allowed */
    assert_int_equal(mhad_gpt_set_dropout_batch_offset(NULL, 0), MHA_EINVAL);
    assert_int_equal(mhad_gpt_set_dropout_batch_offset(g, ((uint64_t)1 << 40) + 1),
                     MHA_EOVERFLOW);
    assert_int_equal(mhad_gpt_set_dropout_batch_offset(g, (uint64_t)1 << 39), MHA_OK);
    assert_int_equal(mhad_gpt_forward(g, 1, half, T, tok, tgt, NULL), MHA_EOVERFLOW);
    assert_int_equal(mhad_gpt_forward(g, 0, half, T, tok, tgt, NULL), MHA_OK);
    free(full);
    free(logits);
    mhad_gpt_destroy(g);
}

/* Bad arguments and calls out of order return their status and change nothing. */
static void gpt_refusals(void **state)
{
    (void)state;
    mha_gpt *g;
    mha_gpt_config cfg = small_config(0, 0, 61), bad;
    bad = cfg; bad.heads = 3;
    assert_int_equal(mha_gpt_create(&g, &bad, 1), MHA_EINVAL);
    bad = cfg; bad.resid_dropout = 1.0;
    assert_int_equal(mha_gpt_create(&g, &bad, 1), MHA_EINVAL);
    bad = cfg; bad.ln_eps = NAN;
    assert_int_equal(mha_gpt_create(&g, &bad, 1), MHA_EINVAL);
    bad = cfg; bad.vocab = 0;
    assert_int_equal(mha_gpt_create(&g, &bad, 1), MHA_EINVAL);
    bad = cfg; bad.context = (size_t)1 << 62;
    assert_int_equal(mha_gpt_create(&g, &bad, 1 << 8), MHA_EOVERFLOW);
    assert_int_equal(mha_gpt_create(&g, &cfg, 0), MHA_EINVAL);

    assert_int_equal(mha_gpt_create(&g, &cfg, 2), MHA_OK);
    int32_t tok[12], tgt[12];
    fill_ids(tok, 12, 0, 7, 1);
    fill_ids(tgt, 12, 0, 7, 2);
    assert_int_equal(mha_gpt_backward(g), MHA_ESTATE);
    assert_null(mha_gpt_logits(g, NULL));
    double loss = 99;
    assert_int_equal(mha_gpt_forward(g, 1, 2, 6, tok, tgt, &loss), MHA_OK);
    size_t shape[3];
    const float *lg = mha_gpt_logits(g, shape);
    assert_non_null(lg);
    assert_int_equal(shape[0] * shape[1] * shape[2], 2 * 6 * 7);
    float *copy = malloc(84 * sizeof(float));
    memcpy(copy, lg, 84 * sizeof(float));
    double l2 = 123;
    tok[3] = 7;
    assert_int_equal(mha_gpt_forward(g, 1, 2, 6, tok, tgt, &l2), MHA_EINVAL);
    tok[3] = 0;
    tgt[4] = -2;
    assert_int_equal(mha_gpt_forward(g, 1, 2, 6, tok, tgt, &l2), MHA_EINVAL);
    tgt[4] = 1;
    assert_int_equal(mha_gpt_forward(g, 1, 3, 6, tok, tgt, &l2), MHA_ESHAPE);
    assert_int_equal(mha_gpt_forward(g, 1, 1, 7, tok, tgt, &l2), MHA_ESHAPE);
    assert_int_equal(mha_gpt_forward(g, 1, 2, 6, NULL, tgt, &l2), MHA_EINVAL);
    assert_true(l2 == 123);
    assert_memory_equal(copy, mha_gpt_logits(g, NULL), 84 * sizeof(float));
    uint64_t call;
    assert_int_equal(mha_gpt_get_call_index(g, &call), MHA_OK);
    assert_int_equal(call, 1); /* the refused forwards did not count */
    assert_int_equal(mha_gpt_backward(g), MHA_OK);
    assert_int_equal(mha_gpt_backward(g), MHA_ESTATE);
    assert_int_equal(mha_gpt_forward(g, 0, 2, 6, tok, NULL, NULL), MHA_OK);
    assert_int_equal(mha_gpt_backward(g), MHA_ESTATE); /* no targets, no loss */
    const float *w;
    size_t ashape[4];
    assert_int_equal(mha_gpt_attention(g, 1, &w, ashape), MHA_OK);
    assert_int_equal(ashape[1], 2);
    assert_int_equal(ashape[2], 6);
    assert_int_equal(mha_gpt_attention(g, 2, &w, ashape), MHA_EINVAL);
    assert_non_null(mha_gpt_residual(g, 2));
    assert_null(mha_gpt_residual(g, 3));
    free(copy);
    mha_gpt_destroy(g);
}

/* AdamW training drives the loss of a small repeating text down: the model, the
 * optimizer groups from the tensor table and backward fit together. */
static void gpt_learns_a_pattern(void **state)
{
    (void)state;
    mha_gpt_config cfg = {.vocab = 5, .context = 8, .layers = 1, .heads = 2, .dim = 16,
                          .seed = 3, .threads = 1};
    mha_gpt *g;
    assert_int_equal(mha_gpt_create(&g, &cfg, 4), MHA_OK);
    mha_optim_config oc;
    mha_optim_default_config(MHA_OPTIM_ADAMW, &oc);
    oc.beta2 = 0.99;
    mha_optimizer *opt;
    assert_int_equal(mha_optim_create(&opt, &oc), MHA_OK);
    for (size_t i = 0; i < mha_gpt_num_tensors(g); i++) {
        mha_param_info in;
        float *p, *gr;
        assert_int_equal(mha_gpt_tensor(g, i, &in, &p, &gr), MHA_OK);
        assert_int_equal(mha_optim_add_decay(opt, in.name, p, gr, in.numel,
                                             in.decay ? 0.1 : 0.0), MHA_OK);
    }
    int32_t tok[32], tgt[32];
    const int32_t pattern[5] = {0, 1, 2, 3, 4};
    double first = 0, last = 0;
    for (int step = 0; step < 150; step++) {
        for (int b = 0; b < 4; b++)
            for (int t = 0; t < 8; t++) {
                tok[b * 8 + t] = pattern[(b + t + step) % 5];
                tgt[b * 8 + t] = pattern[(b + t + step + 1) % 5];
            }
        double loss;
        assert_int_equal(mha_gpt_zero_grad(g), MHA_OK);
        assert_int_equal(mha_gpt_forward(g, 1, 4, 8, tok, tgt, &loss), MHA_OK);
        assert_int_equal(mha_gpt_backward(g), MHA_OK);
        assert_int_equal(mha_optim_clip_grad_norm(opt, 1.0, NULL), MHA_OK);
        assert_int_equal(mha_optim_step(opt, 1e-2), MHA_OK);
        if (step == 0)
            first = loss;
        last = loss;
    }
    assert_close(first, log(5.0), 0.0, 0.05); /* starts at chance */
    assert_true(last < 0.05);                /* the next symbol is determined */
    mha_optim_destroy(opt);
    mha_gpt_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt_block_is_its_composition),
        cmocka_unit_test(blocks_backward_after_either_forward),
        cmocka_unit_test(gpt_model_f32_matches_f64),
        cmocka_unit_test(gpt_infer_matches_full_forward),
        cmocka_unit_test(gpt_infer_refusals),
        cmocka_unit_test(gpt_tensors_and_init),
        cmocka_unit_test(gpt_grad_hook_reports_final_ranges),
        cmocka_unit_test(gpt_dropout_batch_offset_slices),
        cmocka_unit_test(gpt_refusals),
        cmocka_unit_test(gpt_learns_a_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
