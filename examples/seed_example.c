/* The seed's test case in C: batch 2, seq 10, model_dim 64, heads 8, mha(x, x).
 * Prints the shape at every stage, like the seed walk-through's data-flow table,
 * then checks what it can about the result (finite output; softmax rows sum to 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <mha.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        int st_ = (call);                                                            \
        if (st_ != MHA_OK) {                                                         \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, mha_strerror(st_),        \
                    mha_status_name(st_));                                           \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(void)
{
    const size_t B = 2, S = 10, D = 64, H = 8, hd = D / H;
    mha_config cfg = {.model_dim = D, .num_heads = H, .dropout_p = 0.0, .seed = 42, .threads = 0};
    mha_module *m = NULL;
    mha_cache *c = NULL;
    CHECK(mha_create(&m, &cfg));
    CHECK(mha_cache_create(&c, m, B, S, S));

    /* x ~ uniform(-1, 1), from PCG32 so that the run is reproducible */
    float *x = malloc(B * S * D * sizeof *x), *out = malloc(B * S * D * sizeof *out);
    if (x == NULL || out == NULL)
        return 1;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 7, 1);
    for (size_t i = 0; i < B * S * D; i++)
        x[i] = 2.0f * mha_pcg32_float(&rng) - 1.0f;

    /* mha(x, x): x_context = NULL means self-attention (K and V from x) */
    CHECK(mha_forward(m, c, /*training=*/0, B, S, x, 0, NULL, /*mask=*/NULL, out));

    const float *p = NULL;
    size_t ps[4];
    CHECK(mha_cache_attention(c, &p, ps));

    printf("seed example: batch=%zu seq=%zu model_dim=%zu heads=%zu head_dim=%zu\n", B, S, D, H, hd);
    printf("  input x                      [%zu, %zu, %zu]\n", B, S, D);
    printf("  w_q / w_k / w_v projections  Q, K, V: [%zu, %zu, %zu]\n", B, S, D);
    printf("  view + transpose (no copy)   Q, K, V: [%zu, %zu, %zu, %zu]\n", B, H, S, hd);
    printf("  Q·K^T / sqrt(%zu)             scores: [%zu, %zu, %zu, %zu]\n", hd, B, H, S, S);
    printf("  mask + softmax + dropout     attn_weights: [%zu, %zu, %zu, %zu]\n", ps[0], ps[1],
           ps[2], ps[3]);
    printf("  × V                          context: [%zu, %zu, %zu, %zu]\n", B, H, S, hd);
    printf("  transpose + view (merge)     merged: [%zu, %zu, %zu]\n", B, S, D);
    printf("  w_o projection               output: [%zu, %zu, %zu]\n", B, S, D);

    double worst_row = 0.0, sumsq = 0.0;
    for (size_t r = 0; r < ps[0] * ps[1] * ps[2]; r++) {
        double s = 0.0;
        for (size_t j = 0; j < ps[3]; j++)
            s += p[r * ps[3] + j];
        worst_row = fmax(worst_row, fabs(s - 1.0));
    }
    for (size_t i = 0; i < B * S * D; i++)
        sumsq += (double)out[i] * out[i];
    printf("Input shape: [%zu, %zu, %zu]\nOutput shape: [%zu, %zu, %zu]\n", B, S, D, B, S, D);
    printf("rms(output) = %.6f, max |rowsum(attn_weights) - 1| = %.2e\n", sqrt(sumsq / (B * S * D)),
           worst_row);

    mha_cache_destroy(c);
    mha_destroy(m);
    free(x);
    free(out);
    return isfinite(sumsq) && worst_row < 1e-5 ? 0 : 1;
}
