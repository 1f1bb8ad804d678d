/*
 * The typed half of the public API, written once and included twice by mha.h:
 *   MHA_REAL = float,  MHA_NAME(x) = mha_##x    (mha_forward, mha_module, ...)
 *   MHA_REAL = double, MHA_NAME(x) = mhad_##x   (mhad_forward, mhad_module, ...)
 * Do not include this file directly; include <mha.h>.
 * (No include guard on purpose: it is a template instantiated once per precision.)
 *
 * Shapes use the letters of mha.h: B, Sq, Sk, D, H, hd = D/H.
 */
#if !defined(MHA_REAL) || !defined(MHA_NAME)
#error "include <mha.h>, not mha_api.h"
#endif

/* The layer's parameters, gradients, dropout counter and configuration. Opaque. */
typedef struct MHA_NAME(module) MHA_NAME(module);

/* Saved activations of one forward (what backward needs) plus the per-thread
 * scratch of the attention core. Opaque. One module may have many caches alive
 * (one per application of the layer); each belongs to the module it was made for. */
typedef struct MHA_NAME(cache) MHA_NAME(cache);

/* Keys and values of earlier positions for incremental causal self-attention
 * (generation; see MHA_NAME(forward_cached)). Opaque. */
typedef struct MHA_NAME(kvcache) MHA_NAME(kvcache);

/* ---- Lifetime ---------------------------------------------------------------- */

/* Make a module. The parameters are initialised as PyTorch's nn.Linear does
 * (weight and bias uniform in ±1/√D) from PCG32 seeded with cfg->seed, gradients
 * are zero and the dropout call counter is 0. *out is owned: free with
 * MHA_NAME(destroy). Errors: MHA_EINVAL (NULL, D or H zero, D % H != 0,
 * dropout_p outside [0,1] or NaN, threads < 0), MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(create)(MHA_NAME(module) **out, const mha_config *cfg);

/* Free a module. NULL is allowed. Its caches must be destroyed separately
 * (before or after; a cache never touches a destroyed module unless used). */
MHA_API void MHA_NAME(destroy)(MHA_NAME(module) *m);

/* Copy the module's configuration into *cfg. */
MHA_API int MHA_NAME(get_config)(const MHA_NAME(module) *m, mha_config *cfg);

/* Re-draw all parameters as PyTorch's default nn.Linear init, in state_dict order
 * (w_q.weight, w_q.bias, ..., w_o.bias), each element
 *   u = mha_pcg32_double(rng), value = (2u − 1) / √D
 * drawn from an mha_pcg32 rng set up by mha_pcg32_seed(&rng, seed, MHA_PCG32_STREAM_INIT).
 * Gradients untouched. */
MHA_API int MHA_NAME(reset_parameters)(MHA_NAME(module) *m, uint64_t seed);

/* ---- Parameters and gradients ------------------------------------------------ */

/* The parameter buffer [4·D² + 4·D], laid out as mha_tensor_info_at() says.
 * Borrowed: valid until MHA_NAME(destroy). *count (if not NULL) gets its length.
 * Returns NULL only when m is NULL. */
MHA_API MHA_REAL *MHA_NAME(params)(MHA_NAME(module) *m, size_t *count);

/* The gradient buffer, same layout and lifetime as the parameters. */
MHA_API MHA_REAL *MHA_NAME(grads)(MHA_NAME(module) *m, size_t *count);

/* grads := 0. */
MHA_API int MHA_NAME(zero_grad)(MHA_NAME(module) *m);

/* ---- Dropout call counter ---------------------------------------------------- */
/* Every training forward uses the counter's value n as its call index and then
 * increments it. Whether attention weight (b, h, i, j) of call n is dropped is a
 * function of (seed, n, b, h, i, j) alone (see README, "Dropout stream"): it does
 * not depend on the thread count or on earlier calls' shapes. Setting the counter
 * back replays a mask exactly (gradient checks, checkpoints). */
MHA_API int MHA_NAME(get_call_index)(const MHA_NAME(module) *m, uint64_t *n);
MHA_API int MHA_NAME(set_call_index)(MHA_NAME(module) *m, uint64_t n);
/* The batch of the next forwards is rows [first, first + B) of a larger batch: weight
 * (b, h, i, j) draws the dropout position of row first + b (README, "Dropout stream"), so
 * that processes each running a slice of one batch (data parallelism) draw together the
 * masks one process running the whole batch draws. Default 0. MHA_EOVERFLOW if first
 * > 2^40; a forward whose rows would pass position 2^40 returns MHA_EOVERFLOW. */
MHA_API int MHA_NAME(set_dropout_batch_offset)(MHA_NAME(module) *m, uint64_t first);

/* ---- Caches -------------------------------------------------------------------- */

/* Bytes a cache of capacity (batch, seq_q, seq_k) takes. *saved_bytes: the saved
 * activations — Q, K, V [B,S,D] (head-split views, no copies), the merged context
 * [B,Sq,D], the softmax weights [B,H,Sq,Sk], when dropout_p > 0 the dropout
 * keep-mask bit-packed at 1 bit per weight (each head's bits padded to 64), one
 * byte per (b, h, row) flagging fully masked rows and the B key lengths.
 * *total_bytes: everything the cache allocates, including per-thread scratch.
 * Either pointer may be NULL. For self-attention pass seq_k = seq_q.
 * Errors: MHA_EINVAL (a size is 0), MHA_EOVERFLOW. */
MHA_API int MHA_NAME(cache_size)(const MHA_NAME(module) *m, size_t batch, size_t seq_q,
                                 size_t seq_k, size_t *saved_bytes, size_t *total_bytes);

/* The same for a cache of the given attention mode (mha.h, mha_attn_mode). For
 * MHA_ATTN_RECOMPUTE, *saved_bytes is Q, K, V, the context, one log-sum-exp and
 * one flag byte per (b, h, row) and the B key lengths: linear in Sq and Sk. MHA_EINVAL for an
 * unknown mode. */
MHA_API int MHA_NAME(cache_size_mode)(const MHA_NAME(module) *m, size_t batch, size_t seq_q,
                                      size_t seq_k, mha_attn_mode mode, size_t *saved_bytes,
                                      size_t *total_bytes);

/* Make a cache for forwards with B <= batch, Sq <= seq_q, Sk <= seq_k, in the
 * default mode MHA_ATTN_STORED. It belongs to m (using it with another module
 * gives MHA_EMISMATCH). *out is owned: free with MHA_NAME(cache_destroy).
 * No allocation happens in forward or backward. */
MHA_API int MHA_NAME(cache_create)(MHA_NAME(cache) **out, const MHA_NAME(module) *m,
                                   size_t batch, size_t seq_q, size_t seq_k);

/* The same with an explicit attention mode. With MHA_ATTN_RECOMPUTE, backward
 * recomputes the attention weights, so the mask given to forward — the mask
 * tensor and key_lengths arrays it points to — must stay alive and unchanged
 * until the matching backward, like x_query and x_context. */
MHA_API int MHA_NAME(cache_create_mode)(MHA_NAME(cache) **out, const MHA_NAME(module) *m,
                                        size_t batch, size_t seq_q, size_t seq_k,
                                        mha_attn_mode mode);

/* Free a cache. NULL is allowed. */
MHA_API void MHA_NAME(cache_destroy)(MHA_NAME(cache) *c);

/* ---- Forward -------------------------------------------------------------------- */

/* out = MultiHeadAttention(x_query, x_context, mask), exactly the seed's module:
 *   Q = x_query·W_qᵀ + b_q                         [B,Sq,D] → heads [B,H,Sq,hd]
 *   K = x_ctx·W_kᵀ + b_k,  V = x_ctx·W_vᵀ + b_v    [B,Sk,D] → heads [B,H,Sk,hd]
 *   S = Q·Kᵀ / √hd                                  [B,H,Sq,Sk]
 *   S = fill(S, masked, −1e9);  P = softmax_rows(S)  (saved; readable)
 *   P' = P ⊙ keep / (1 − p) when training (p = 1: P' = 0), else P' = P
 *   C = P'·V → merged heads                          [B,Sq,D]
 *   out = C·W_oᵀ + b_o                               [B,Sq,D]
 * x_ctx is x_context, or x_query when x_context is NULL (self-attention; then
 * seq_k is ignored and Sk = Sq). Cross-attention with Sk != Sq works; x_context
 * may be the same buffer as x_query. batch, seq_q, seq_k must fit the cache's
 * capacity (MHA_ESHAPE). mask may be NULL. `out` must not overlap the inputs.
 * The cache saves what backward needs; a training forward with dropout_p > 0 also
 * saves the keep-mask and advances the call counter (every training forward does).
 * Errors: MHA_EINVAL, MHA_ESHAPE, MHA_EMISMATCH; nothing is written on error. */
MHA_API int MHA_NAME(forward)(MHA_NAME(module) *m, MHA_NAME(cache) *c, int training,
                              size_t batch, size_t seq_q, const MHA_REAL *x_query,
                              size_t seq_k, const MHA_REAL *x_context,
                              const mha_mask *mask, MHA_REAL *out);

/* The softmax weights P [B, H, Sq, Sk] (after mask, before dropout) of the cache's
 * last forward, row-major with the forward's B, Sq, Sk; shape[] gets them.
 * Borrowed: valid until the next forward on this cache. MHA_ESTATE before any
 * forward; MHA_EUNSUPPORTED for a MHA_ATTN_RECOMPUTE cache, which never holds
 * them (use a MHA_ATTN_STORED cache to plot weights). Backward leaves them intact. */
MHA_API int MHA_NAME(cache_attention)(const MHA_NAME(cache) *c, const MHA_REAL **weights,
                                      size_t shape[4]);

/* ---- Backward ------------------------------------------------------------------- */

/* Gradients of a scalar loss L given dL/dout = d_out [B,Sq,D], for the cache's
 * last forward. x_query and x_context must be the buffers (with unchanged
 * contents) given to that forward; they are not copied into the cache.
 *   grads(w_o.weight) += d_outᵀ·C   grads(w_o.bias) += Σ_rows d_out
 *   ... and likewise for w_q, w_k, w_v (see README, "Backward")
 *   dx_query   += dL/dx_query    [B,Sq,D]  (self-attention: all three paths)
 *   dx_context += dL/dx_context  [B,Sk,D]  (cross-attention only; must be NULL
 *                                           after a self-attention forward)
 * dx_query / dx_context may be NULL to skip them, and may be the same buffer
 * (when x_context was the same buffer as x_query, that gives the total dL/dx).
 * Softmax backward is O(Sk) per row: dS = P ⊙ (dP − rowsum(P ⊙ dP)); masked
 * scores get no gradient. Backward consumes the cache's saved activations (its
 * buffers are reused for dQ, dK, dV): a second backward needs a new forward
 * (MHA_ESTATE). The attention weights stay readable.
 * Errors: MHA_EINVAL, MHA_ESTATE, MHA_EMISMATCH; nothing is written on error. */
MHA_API int MHA_NAME(backward)(MHA_NAME(module) *m, MHA_NAME(cache) *c,
                               const MHA_REAL *x_query, const MHA_REAL *x_context,
                               const MHA_REAL *d_out, MHA_REAL *dx_query,
                               MHA_REAL *dx_context);

/* ---- Inference with a key/value cache (generation) ------------------------------ */

/* Keys and values of up to max_len positions of `batch` sequences, for causal
 * self-attention one new position (or a few) at a time: each new row costs one row
 * of attention over the cached keys instead of a forward over the whole window.
 * It belongs to the module it was made for (MHA_EMISMATCH otherwise) and holds
 * K, V [batch, max_len, D] plus scratch for max_len new rows. *out is owned: free
 * with MHA_NAME(kvcache_destroy). Errors: MHA_EINVAL (NULL, a size 0),
 * MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(kvcache_create)(MHA_NAME(kvcache) **out, const MHA_NAME(module) *m,
                                     size_t batch, size_t max_len);
/* Free a key/value cache. NULL is allowed. */
MHA_API void MHA_NAME(kvcache_destroy)(MHA_NAME(kvcache) *kv);
/* Forget every cached position: the length becomes 0. MHA_EINVAL for NULL. */
MHA_API int MHA_NAME(kvcache_reset)(MHA_NAME(kvcache) *kv);
/* Number of cached positions L into *len. MHA_EINVAL for NULL. */
MHA_API int MHA_NAME(kvcache_length)(const MHA_NAME(kvcache) *kv, size_t *len);

/* Causal self-attention, evaluation mode (no dropout), of n_new positions that follow
 * the L cached ones:
 *   x_new [B, n_new, D] are the inputs of positions L .. L+n_new−1 of each sequence;
 *   their K, V are appended to the cache (the length becomes L + n_new);
 *   out [B, n_new, D] gets rows L .. L+n_new−1 of what MHA_NAME(forward) with
 *   training = 0 and a causal mask gives over the whole sequence 0 .. L+n_new−1
 *   (row i attends to keys 0 .. i), equal up to rounding.
 * B must not exceed the cache's batch and must be the same in every call since the
 * cache was made or reset (MHA_ESHAPE); L + n_new > max_len is MHA_ESHAPE (reset, or
 * rebuild the cache from the last positions, to slide a window). The dropout call
 * counter is not used. x_new is read completely before out is written, so out may
 * be x_new itself. No allocation; threads (cfg.threads) only when the attention
 * work is large, never for one new row.
 * Errors: MHA_EINVAL (NULL, batch or n_new 0), MHA_ESHAPE, MHA_EMISMATCH; on error
 * nothing is written and the cache is unchanged. */
MHA_API int MHA_NAME(forward_cached)(MHA_NAME(module) *m, MHA_NAME(kvcache) *kv,
                                     size_t batch, size_t n_new, const MHA_REAL *x_new,
                                     MHA_REAL *out);

/* ---- Cross-attention with cached keys/values (decoding an encoder–decoder) ---------- */

/* Fill the cache with the keys and values of a context (an encoder's output):
 *   K_b = x_context_b·W_kᵀ + b_k,  V_b = x_context_b·W_vᵀ + b_v   [seq_k, D] per sequence
 * x_context [batch, seq_k, D]; key_lengths [batch] in 1 .. seq_k (keys j >= key_lengths[b]
 * are masked, as mha_mask.key_lengths) or NULL. The cache then serves
 * MHA_NAME(forward_cross_cached) until reset (MHA_NAME(forward_cached) refuses it:
 * MHA_EUNSUPPORTED). seq_k <= max_len, batch <= the cache's batch (MHA_ESHAPE).
 * MHA_EINVAL (NULL, a size 0, a length 0 or > seq_k), MHA_EMISMATCH. */
MHA_API int MHA_NAME(kvcache_set_context)(MHA_NAME(module) *m, MHA_NAME(kvcache) *kv,
                                          size_t batch, size_t seq_k,
                                          const MHA_REAL *x_context, const size_t *key_lengths);
/* Add the contexts of `batch` more sequences after those set (sequences kv's batch ..):
 * the same as one set_context of them all (bit for bit: each sequence's keys and values
 * are computed alone), so an encoder's output can be cached a slice at a time. seq_k must
 * be the cached one, and the batch then up to the capacity (MHA_ESHAPE); MHA_ESTATE
 * before set_context (or after a reset); otherwise errors as set_context. */
MHA_API int MHA_NAME(kvcache_append_context)(MHA_NAME(module) *m, MHA_NAME(kvcache) *kv,
                                             size_t batch, size_t seq_k,
                                             const MHA_REAL *x_context,
                                             const size_t *key_lengths);
/* Cross-attention, evaluation mode, of n_new query rows per sequence over the cached
 * context: out [B, n_new, D] equals, up to rounding, MHA_NAME(forward) with training = 0,
 * x_context the cached context and mask key_lengths. B must be the set_context batch
 * (MHA_ESHAPE); MHA_ESTATE before set_context. out may be x_new. No allocation. */
MHA_API int MHA_NAME(forward_cross_cached)(MHA_NAME(module) *m, MHA_NAME(kvcache) *kv,
                                           size_t batch, size_t n_new, const MHA_REAL *x_new,
                                           MHA_REAL *out);
/* Keep sequences from[0 .. batch) of the cache: new sequence r is old sequence from[r]
 * (keys, values and, for a context cache, its key length). batch may be smaller or larger
 * than the current one (beam search: one copy per beam), up to the cache's capacity
 * (MHA_ESHAPE). MHA_EINVAL for from[r] >= the current batch (when positions are cached). */
MHA_API int MHA_NAME(kvcache_select)(MHA_NAME(kvcache) *kv, size_t batch, const size_t *from);
