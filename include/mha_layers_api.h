/*
 * Typed half of mha_layers.h, included twice (no include guard on purpose):
 *   MHA_REAL = float,  MHA_NAME(x) = mha_##x
 *   MHA_REAL = double, MHA_NAME(x) = mhad_##x
 * Letters as in mha_layers.h: N rows, C features, F hidden, V vocabulary, B batch, T length.
 */
#if !defined(MHA_REAL) || !defined(MHA_NAME)
#error "include <mha_layers.h>, not mha_layers_api.h"
#endif

/* ---- LayerNorm (torch.nn.LayerNorm(C, eps), elementwise affine) ------------------
 *   μ_r = (1/C) Σ_c x[r,c];   σ²_r = (1/C) Σ_c (x[r,c] − μ_r)²   (biased, as torch)
 *   rstd_r = 1/√(σ²_r + eps);  x̂[r,c] = (x[r,c] − μ_r)·rstd_r
 *   y[r,c] = x̂[r,c]·w[c] + b[c]
 * x, y [N, C]; w, b [C]; saves mean [N] and rstd [N] (what backward reads, with x).
 * Row statistics are accumulated in double (two passes: mean, then squared deviations),
 * and y is computed in double; mean and rstd are stored in REAL, and backward recomputes
 * x̂ from the stored values. MHA_EINVAL: a NULL pointer, N or C zero, eps not finite or
 * <= 0; MHA_EOVERFLOW: N·C elements overflow size_t. */
MHA_API int MHA_NAME(layernorm_forward)(size_t N, size_t C, double eps, const MHA_REAL *x,
                                        const MHA_REAL *w, const MHA_REAL *b, MHA_REAL *y,
                                        MHA_REAL *mean, MHA_REAL *rstd);
/* Given dy [N, C] (x̂ from the saved mean and rstd):
 *   dw[c] += Σ_r dy[r,c]·x̂[r,c];   db[c] += Σ_r dy[r,c]   (summed in double, r in order)
 *   g = dy ⊙ w;   dx[r,:] += rstd_r·(g − mean_c(g) − x̂·mean_c(g ⊙ x̂))
 * dx, dw, db may each be NULL (skipped). MHA_EINVAL: x, w, mean, rstd or dy NULL, N or C
 * zero; MHA_EOVERFLOW as forward. */
MHA_API int MHA_NAME(layernorm_backward)(size_t N, size_t C, const MHA_REAL *x,
                                         const MHA_REAL *w, const MHA_REAL *mean,
                                         const MHA_REAL *rstd, const MHA_REAL *dy, MHA_REAL *dx,
                                         MHA_REAL *dw, MHA_REAL *db);

/* ---- Linear (torch.nn.Linear(in, out)) ---------------------------------------------
 *   y = x·Wᵀ + b      x [N, in], W [out, in] (torch's layout), b [out] or NULL, y [N, out]
 * y is overwritten (b NULL: y = x·Wᵀ). MHA_EINVAL: x, W or y NULL, a size zero;
 * MHA_EOVERFLOW: a size beyond what BLAS takes (INT_MAX). */
MHA_API int MHA_NAME(linear_forward)(size_t N, size_t in, size_t out, const MHA_REAL *x,
                                     const MHA_REAL *W, const MHA_REAL *b, MHA_REAL *y);
/* Given dy [N, out]:
 *   dW += dyᵀ·x   (out,in) += (out,N)(N,in)
 *   db += Σ_r dy[r,:]                      (summed in double, r in order)
 *   dx += dy·W    (N,in) += (N,out)(out,in)
 * dx, dW, db may each be NULL. Errors as forward (x, W, dy NULL: MHA_EINVAL).
 * (A read-out tied to an embedding E [V, C] is this layer with W = E, b = NULL: its dW
 * adds into E's gradient.) */
MHA_API int MHA_NAME(linear_backward)(size_t N, size_t in, size_t out, const MHA_REAL *x,
                                      const MHA_REAL *W, const MHA_REAL *dy, MHA_REAL *dx,
                                      MHA_REAL *dW, MHA_REAL *db);
/* The same two with the precision of their products (mha_precision in mha.h): BF16 rounds
 * x, W and dy to bfloat16 in the products (float32 sums; db stays float). MHA_EINVAL for
 * BF16 in the double API, MHA_ECPU on a CPU without AVX512_BF16. */
MHA_API int MHA_NAME(linear_forward_prec)(mha_precision prec, size_t N, size_t in, size_t out,
                                          const MHA_REAL *x, const MHA_REAL *W,
                                          const MHA_REAL *b, MHA_REAL *y);
MHA_API int MHA_NAME(linear_backward_prec)(mha_precision prec, size_t N, size_t in, size_t out,
                                           const MHA_REAL *x, const MHA_REAL *W,
                                           const MHA_REAL *dy, MHA_REAL *dx, MHA_REAL *dW,
                                           MHA_REAL *db);

/* ---- GELU, tanh approximation (GPT-2; torch.nn.GELU(approximate="tanh")) ----------
 *   y = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
 * x, y [n]; y may be the same buffer as x (in place). Evaluated in double for both
 * precisions. MHA_EINVAL: NULL, n zero. */
MHA_API int MHA_NAME(gelu_forward)(size_t n, const MHA_REAL *x, MHA_REAL *y);
/*   dx += dy·(½(1 + tanh u) + ½·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²))
 * x is the forward's input; dx must not overlap dy. For |u| so large that tanh² u
 * rounds to 1, the second term is exactly 0 (no 0·∞ for huge |x|). MHA_EINVAL as forward. */
MHA_API int MHA_NAME(gelu_backward)(size_t n, const MHA_REAL *x, const MHA_REAL *dy,
                                    MHA_REAL *dx);

/* ---- Token + position embedding ----------------------------------------------------
 *   y[b,t,:] = E[ids[b,t], :] + P[t, :]
 * ids [B, T] in [0, V); E [V, C]; P [T_max, C] with T <= T_max, or NULL (no position
 * term); y [B, T, C] overwritten. MHA_EINVAL for an id outside [0, V) (checked before
 * anything is written), a NULL pointer, a size zero; MHA_EOVERFLOW: B·T·C or V·C elements
 * overflow size_t. */
MHA_API int MHA_NAME(embedding_forward)(size_t B, size_t T, size_t C, const int32_t *ids,
                                        size_t V, const MHA_REAL *E, const MHA_REAL *P,
                                        MHA_REAL *y);
/*   dE[ids[b,t], :] += dy[b,t,:];   dP[t, :] += dy[b,t,:]
 * dE, dP may each be NULL. Repeated ids accumulate; the result does not depend on the
 * thread count. MHA_EINVAL as forward. */
MHA_API int MHA_NAME(embedding_backward)(size_t B, size_t T, size_t C, const int32_t *ids,
                                         size_t V, const MHA_REAL *dy, MHA_REAL *dE,
                                         MHA_REAL *dP);

/* ---- Softmax cross-entropy -----------------------------------------------------------
 *   loss = (1/S) Σ_{r: targets[r] >= 0} (logsumexp(logits[r,:]) − logits[r, targets[r]])
 * logits [N, V]; targets [N] in [0, V) or −1 (row not scored); S = scored rows.
 * *loss (nats; 0 when S = 0) and *scored (may be NULL) are written. Computed with the
 * row maximum subtracted, sums in double, in fixed row blocks (the same value for any
 * thread count). MHA_EINVAL: a target >= V or < −1, logits/targets/loss NULL, N or V
 * zero; MHA_EOVERFLOW: N·V elements overflow size_t. */
MHA_API int MHA_NAME(xent_forward)(size_t N, size_t V, const MHA_REAL *logits,
                                   const int32_t *targets, double *loss, size_t *scored);
/*   dlogits[r,:] += scale·(softmax(logits[r,:]) − onehot(targets[r]))   (scored rows)
 * scale = dL/dloss / S for the mean loss (1/S). Unscored rows are untouched.
 * MHA_EINVAL as forward, and for dlogits NULL or scale not finite. */
MHA_API int MHA_NAME(xent_backward)(size_t N, size_t V, const MHA_REAL *logits,
                                    const int32_t *targets, double scale, MHA_REAL *dlogits);

/* ---- Label-smoothed softmax cross-entropy (torch's cross_entropy(label_smoothing=ε)) ----
 * The target distribution of a scored row is q = (1 − ε)·onehot(t) + ε/V:
 *   loss = (1/S) Σ_{scored r} (lse(z_r) − (1 − ε)·z_r[t] − (ε/V)·Σ_v z_r[v])
 * ε = smoothing in [0, 1); ε = 0 gives exactly MHA_NAME(xent_forward)'s value. Errors as
 * xent_forward, and MHA_EINVAL for ε outside [0, 1). */
MHA_API int MHA_NAME(xent_smooth_forward)(size_t N, size_t V, const MHA_REAL *logits,
                                          const int32_t *targets, double smoothing,
                                          double *loss, size_t *scored);
/*   dlogits[r,:] += scale·(softmax(z_r) − q_r)   (scored rows; scale as xent_backward) */
MHA_API int MHA_NAME(xent_smooth_backward)(size_t N, size_t V, const MHA_REAL *logits,
                                           const int32_t *targets, double smoothing,
                                           double scale, MHA_REAL *dlogits);

/* ---- Cross-entropy against a teacher's distributions (knowledge distillation) ----------
 * Each scored row's target distribution mixes the label-smoothed one with soft[r, :]:
 *   q_r = (1 − w)·((1 − ε)·onehot(t_r) + ε/V) + w·soft_r
 *   loss = (1/S) Σ_{scored r} −Σ_v q_r[v]·log softmax(z_r)[v]
 *        = (1/S) Σ_{scored r} ((Σ_v q_r[v])·lse(z_r) − Σ_v q_r[v]·z_r[v])
 * soft [N, V]: e.g. a teacher model's softmax on the same positions; rows of unscored
 * positions are not read, a scored row's elements must be finite and >= 0 (normally they
 * sum to 1; the formula holds for any mass). w = weight in [0, 1]; w = 0 does not read soft
 * (it may be NULL) and gives exactly xent_smooth_forward's value and gradient. Errors as
 * xent_smooth_forward, and MHA_EINVAL for w outside [0, 1] or NaN, soft NULL with w > 0,
 * a negative or non-finite element of a scored row. */
MHA_API int MHA_NAME(xent_distill_forward)(size_t N, size_t V, const MHA_REAL *logits,
                                           const int32_t *targets, double smoothing,
                                           const MHA_REAL *soft, double weight, double *loss,
                                           size_t *scored);
/*   dlogits[r,:] += scale·((Σ_v q_r[v])·softmax(z_r) − q_r)   (scored rows) */
MHA_API int MHA_NAME(xent_distill_backward)(size_t N, size_t V, const MHA_REAL *logits,
                                            const int32_t *targets, double smoothing,
                                            const MHA_REAL *soft, double weight,
                                            double scale, MHA_REAL *dlogits);

/* ---- Dropout on activations (addressable, like the attention dropout) ----------------
 * Element i of call `call` is dropped iff the 32-bit output at position
 *   call·2^40 + i
 * of PCG32(seed, stream) is < floor(p·2^32); kept elements are scaled by 1/(1−p)
 * (p = 1: y = 0). So a mask is a function of (seed, stream, call, i) alone: it does not
 * depend on threads, and replays exactly. Give every dropout site its own stream.
 *   y = x ⊙ keep / (1 − p)     x, y [n] (y may be x);  keep [MHA_DROPOUT_WORDS(n)] saved
 * p = 0 copies x to y and sets every keep bit. Bits past n in the last word are 0.
 * call·2^40 + i is taken mod 2^64 (the generator's period). MHA_EINVAL: NULL, n zero,
 * p outside [0, 1] or NaN; MHA_EOVERFLOW: n > 2^40. */
MHA_API int MHA_NAME(dropout_forward)(size_t n, double p, uint64_t seed, uint64_t stream,
                                      uint64_t call, const MHA_REAL *x, MHA_REAL *y,
                                      uint64_t *keep);
/* The same with element i at position call·2^40 + offset + i: x is elements [offset,
 * offset + n) of a larger tensor (a slice of a batch). keep's bits count from the slice's
 * element 0. MHA_EOVERFLOW also when offset + n > 2^40. */
MHA_API int MHA_NAME(dropout_forward_at)(size_t n, double p, uint64_t seed, uint64_t stream,
                                         uint64_t call, uint64_t offset, const MHA_REAL *x,
                                         MHA_REAL *y, uint64_t *keep);
/*   dx += dy ⊙ keep / (1 − p)     (dx may be dy: then dx = dy ⊙ keep/(1 − p), in place)
 * p must be the forward's; p = 1 adds nothing (in place: dx = 0). Errors as forward. */
MHA_API int MHA_NAME(dropout_backward)(size_t n, double p, const uint64_t *keep,
                                       const MHA_REAL *dy, MHA_REAL *dx);

/* ---- MLP of a GPT-2 block: Linear(C, F) → GELU → Linear(F, C) ---------------------------
 *   h = x·W1ᵀ + b1    [N, F]      (saved)
 *   a = gelu(h)       [N, F]      (saved)
 *   y = a·W2ᵀ + b2    [N, C]      (overwritten)
 * x [N, C]; W1 [F, C], b1 [F]; W2 [C, F], b2 [C]; b1, b2 may be NULL (no bias).
 * MHA_EINVAL: another pointer NULL, a size zero; MHA_EOVERFLOW: N, C or F > INT_MAX. */
MHA_API int MHA_NAME(mlp_forward)(size_t N, size_t C, size_t F, const MHA_REAL *x,
                                  const MHA_REAL *W1, const MHA_REAL *b1, const MHA_REAL *W2,
                                  const MHA_REAL *b2, MHA_REAL *h, MHA_REAL *a, MHA_REAL *y);
/* Given dy [N, C], with h, a saved by forward and scratch [N, F] (overwritten):
 *   dW2 += dyᵀ·a;  db2 += Σ_r dy;  da = dy·W2           (into scratch)
 *   dh = da ⊙ gelu'(h)                                  (in scratch)
 *   dW1 += dhᵀ·x;  db1 += Σ_r dh;  dx += dh·W1
 * Any of dx, dW1, db1, dW2, db2 may be NULL; scratch must not overlap the other
 * arguments. Errors as forward (scratch NULL: MHA_EINVAL). */
MHA_API int MHA_NAME(mlp_backward)(size_t N, size_t C, size_t F, const MHA_REAL *x,
                                   const MHA_REAL *W1, const MHA_REAL *W2, const MHA_REAL *h,
                                   const MHA_REAL *a, const MHA_REAL *dy, MHA_REAL *scratch,
                                   MHA_REAL *dx, MHA_REAL *dW1, MHA_REAL *db1, MHA_REAL *dW2,
                                   MHA_REAL *db2);
/* The MLP with the precision of its four products (as linear_forward_prec); GELU and the
 * biases stay in the API's type. */
MHA_API int MHA_NAME(mlp_forward_prec)(mha_precision prec, size_t N, size_t C, size_t F,
                                       const MHA_REAL *x, const MHA_REAL *W1,
                                       const MHA_REAL *b1, const MHA_REAL *W2,
                                       const MHA_REAL *b2, MHA_REAL *h, MHA_REAL *a,
                                       MHA_REAL *y);
MHA_API int MHA_NAME(mlp_backward_prec)(mha_precision prec, size_t N, size_t C, size_t F,
                                        const MHA_REAL *x, const MHA_REAL *W1,
                                        const MHA_REAL *W2, const MHA_REAL *h,
                                        const MHA_REAL *a, const MHA_REAL *dy,
                                        MHA_REAL *scratch, MHA_REAL *dx, MHA_REAL *dW1,
                                        MHA_REAL *db1, MHA_REAL *dW2, MHA_REAL *db2);
