/* float32 instantiation of src/layers_core.inc: the mha_* layers of include/mha_layers.h. */
#include <stdint.h>

/* tanh for float, written so that loops over it vectorise (no call, no branch):
 *   tanh u = 1 − 2 / (e^{2u} + 1),   e^{2u} = 2^a,  a = 2u·log2(e) clamped to ±126,
 *   2^a = 2^k · 2^f with k = round(a) (the 1.5·2^23 trick: exact, no rint call),
 *   f ∈ [−½, ½], 2^f by its degree-7 Taylor polynomial (truncation < 2e-9).
 * Absolute error below 2.5e-7 over the whole range (tests/test_layers.c checks it
 * against libm's double tanh); ±1 exactly beyond |u| ≈ 9; NaN gives a finite value
 * (GELU's x·(…) still propagates the NaN). */
static inline float mha__tanhf(float u)
{
    float a = 2.8853900817779268f * u; /* 2·log2(e)·u */
    a = a < -126.0f ? -126.0f : a;
    a = a > 126.0f ? 126.0f : a;
    const float k = (a + 12582912.0f) - 12582912.0f; /* round to nearest, |a| < 2^22 */
    const float f = a - k;                             /* exact, in [−½, ½] */
    float p = 1.5252733804059841e-05f;
    p = p * f + 1.5403530393381606e-04f;
    p = p * f + 1.3333558146428443e-03f;
    p = p * f + 9.6181291076284772e-03f;
    p = p * f + 5.5504108664821580e-02f;
    p = p * f + 2.4022650695910071e-01f;
    p = p * f + 6.9314718055994531e-01f;
    p = p * f + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)k + 127) << 23}; /* 2^k, k ∈ [−126, 126]: a normal float */
    const float e = p * scale.f;
    return 1.0f - 2.0f / (e + 1.0f);
}

#define REAL float
#define X(name) mha_##name      /* public names           */
#define PRIV(name) mha__s##name /* the internal GEMM wrapper */
#define GELU_TANH(u) mha__tanhf(u)
#include "layers_core.inc"
