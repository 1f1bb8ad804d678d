/*
 * Typed half of mha_s2s.h, included twice (no include guard on purpose):
 *   MHA_REAL = float,  MHA_NAME(x) = mha_##x   (mha_s2s_forward, mha_decoder_block, ...)
 *   MHA_REAL = double, MHA_NAME(x) = mhad_##x
 * Letters as in mha_s2s.h.
 */
#if !defined(MHA_REAL) || !defined(MHA_NAME)
#error "include <mha_s2s.h>, not mha_s2s_api.h"
#endif

/* ==== Encoder block ====================================================================== */

/* The encoder block is MHA_NAME(block) made with cfg.causal = 0. This forward hides each
 * sequence's padding from its self-attention: for sequence b, keys t >= lengths[b] are
 * masked (lengths [B], each in 1 .. T; copied, need not stay alive). lengths NULL is
 * MHA_NAME(block_forward). Rows at padding positions are computed like the others (they
 * attend to the real positions); a consumer that masks them as keys (the decoder's
 * cross-attention does) never reads them, and their gradient is whatever dy says.
 * Errors as block_forward, and MHA_EINVAL for a length 0 or > T. Backward is
 * MHA_NAME(block_backward). */
MHA_API int MHA_NAME(block_forward_lengths)(MHA_NAME(block) *blk, int training, size_t B,
                                            size_t T, const MHA_REAL *x,
                                            const size_t *lengths, MHA_REAL *y);

/* ==== Decoder block ====================================================================== */

typedef struct MHA_NAME(decoder_block) MHA_NAME(decoder_block);

/* A decoder block for targets [B, T, C] and encoder outputs [B, S, C], B <= max_batch,
 * T <= max_len, S <= max_src; cfg as for MHA_NAME(block_create) (cfg->causal is ignored:
 * the self-attention is always causal). GPT-2 initialisation from cfg->seed. Dropout
 * streams: the self-attention module is seeded with cfg->seed (as a GPT block's attention),
 * the cross-attention module with mha_gpt_block_seed(cfg->seed, 0); both count calls with
 * the block's call index; the residual dropouts use cfg->seed with the streams
 * MHA_PCG32_STREAM_RESID_ATTN, MHA_PCG32_STREAM_RESID_CROSS and MHA_PCG32_STREAM_RESID_MLP.
 * MHA_EINVAL, MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(decoder_block_create)(MHA_NAME(decoder_block) **out,
                                           const mha_block_config *cfg, size_t max_batch,
                                           size_t max_len, size_t max_src);
MHA_API void MHA_NAME(decoder_block_destroy)(MHA_NAME(decoder_block) *blk);
/* The 26 tensors in order: ln1.weight, ln1.bias, self_attn.w_q.weight … self_attn.w_o.bias
 * (8), ln2.weight, ln2.bias, cross_attn.w_q.weight … cross_attn.w_o.bias (8), ln3.weight,
 * ln3.bias, mlp.fc.weight, mlp.fc.bias, mlp.proj.weight, mlp.proj.bias. */
MHA_API int MHA_NAME(decoder_block_tensor)(MHA_NAME(decoder_block) *blk, size_t i,
                                           mha_param_info *info, MHA_REAL **param,
                                           MHA_REAL **grad);
MHA_API int MHA_NAME(decoder_block_reset_parameters)(MHA_NAME(decoder_block) *blk,
                                                     uint64_t seed);
MHA_API int MHA_NAME(decoder_block_zero_grad)(MHA_NAME(decoder_block) *blk);
/* The self-attention (which = 0) or cross-attention (which = 1) module (borrowed). */
MHA_API MHA_NAME(module) *MHA_NAME(decoder_block_attention)(MHA_NAME(decoder_block) *blk,
                                                            int which);
/* y = block(x, mem): x, y [B, T, C]; mem [B, S, C] (the encoder output); src_len [B] in
 * 1 .. S, or NULL (no source padding). x and mem are NOT copied: keep them alive and
 * unchanged until backward. Training applies the three residual dropouts and the
 * attention dropouts and advances the call counter. MHA_EINVAL, MHA_ESHAPE. */
MHA_API int MHA_NAME(decoder_block_forward)(MHA_NAME(decoder_block) *blk, int training,
                                            size_t B, size_t T, const MHA_REAL *x, size_t S,
                                            const MHA_REAL *mem, const size_t *src_len,
                                            MHA_REAL *y);
/* Given dy [B, T, C]: parameter gradients +=, dx += dL/dx, dmem += dL/dmem [B, S, C]
 * (either may be NULL). One backward per forward (MHA_ESTATE). */
MHA_API int MHA_NAME(decoder_block_backward)(MHA_NAME(decoder_block) *blk, const MHA_REAL *x,
                                             const MHA_REAL *mem, const MHA_REAL *dy,
                                             MHA_REAL *dx, MHA_REAL *dmem);
MHA_API int MHA_NAME(decoder_block_get_call_index)(const MHA_NAME(decoder_block) *blk,
                                                   uint64_t *n);
MHA_API int MHA_NAME(decoder_block_set_call_index)(MHA_NAME(decoder_block) *blk, uint64_t n);
/* As MHA_NAME(block_set_dropout_batch_offset), for all five dropouts of the block. */
MHA_API int MHA_NAME(decoder_block_set_dropout_batch_offset)(MHA_NAME(decoder_block) *blk,
                                                             uint64_t first);

/* ==== Model ============================================================================== */

typedef struct MHA_NAME(s2s) MHA_NAME(s2s);

/* Make a model for batches of B <= max_batch pairs, initialised as GPT-2 from cfg->seed.
 * *out is owned: free with MHA_NAME(s2s_destroy). MHA_EINVAL, MHA_EOVERFLOW, MHA_ENOMEM. */
MHA_API int MHA_NAME(s2s_create)(MHA_NAME(s2s) **out, const mha_s2s_config *cfg,
                                 size_t max_batch);
MHA_API void MHA_NAME(s2s_destroy)(MHA_NAME(s2s) *m);
/* The configuration with defaults resolved (mlp_dim, ln_eps). */
MHA_API int MHA_NAME(s2s_get_config)(const MHA_NAME(s2s) *m, mha_s2s_config *cfg);
/* The largest batch the model was made for. */
MHA_API size_t MHA_NAME(s2s_max_batch)(const MHA_NAME(s2s) *m);

/* Tensors in the order of mha_s2s.h: 2 + 16·Le + 2 + 2 + 26·Ld + 2 (+ 1 untied). */
MHA_API size_t MHA_NAME(s2s_num_tensors)(const MHA_NAME(s2s) *m);
MHA_API int MHA_NAME(s2s_tensor)(MHA_NAME(s2s) *m, size_t i, mha_param_info *info,
                                 MHA_REAL **param, MHA_REAL **grad);
MHA_API int MHA_NAME(s2s_tensor_find)(const MHA_NAME(s2s) *m, const char *name, size_t *index);
MHA_API int MHA_NAME(s2s_param_count)(const MHA_NAME(s2s) *m, size_t *count);
/* GPT-2 initialisation of every tensor (the model's own from PCG32(seed,
 * MHA_PCG32_STREAM_GPT_INIT) in tensor order, each block from mha_s2s_block_seed);
 * output projections into the residual stream use 0.02/√(2·(Le + Ld)). */
MHA_API int MHA_NAME(s2s_reset_parameters)(MHA_NAME(s2s) *m, uint64_t seed);
MHA_API int MHA_NAME(s2s_zero_grad)(MHA_NAME(s2s) *m);
/* The parameters as one array (the model's arena): the tensors in s2s_tensor order, each
 * right after the one before, *count (if not NULL) = s2s_param_count; s2s_tensor's
 * pointers and the blocks' are views into it. Borrowed: valid until s2s_destroy. NULL
 * when m is NULL or laid out for decoding (s2s_decode_only, as s2s_tensor refuses then). */
MHA_API MHA_REAL *MHA_NAME(s2s_params)(MHA_NAME(s2s) *m, size_t *count);
/* The gradients as one array, laid out as s2s_params (NULL only when m is NULL). */
MHA_API MHA_REAL *MHA_NAME(s2s_grads)(MHA_NAME(s2s) *m, size_t *count);
/* Encoder block l, decoder block l (borrowed; NULL out of range). */
MHA_API MHA_NAME(block) *MHA_NAME(s2s_encoder_block)(MHA_NAME(s2s) *m, size_t l);
MHA_API MHA_NAME(decoder_block) *MHA_NAME(s2s_decoder_block)(MHA_NAME(s2s) *m, size_t l);

/* Forward of B pairs: src [B, S] ids in [0, Vs) with src_len [B] in 1 .. S (positions
 * past a source's length are padding: any valid id), tgt_in [B, T] ids in [0, Vt) (the
 * decoder's input, e.g. <s> y₁ … y_{n−1}), targets [B, T] in [0, Vt) or −1 (not scored),
 * or NULL (no loss). All four are copied. *loss (may be NULL): the mean label-smoothed
 * cross-entropy over scored positions (0 when none or targets NULL). Training applies
 * dropout and advances the call counter. MHA_EINVAL (NULL, a bad id, length or target),
 * MHA_ESHAPE (B > max_batch, S > src_context, T > tgt_context, a size 0). */
MHA_API int MHA_NAME(s2s_forward)(MHA_NAME(s2s) *m, int training, size_t B, size_t S,
                                  const int32_t *src, const size_t *src_len, size_t T,
                                  const int32_t *tgt_in, const int32_t *targets, double *loss);
/* s2s_forward whose loss has a distillation term (knowledge distillation from a teacher,
 * e.g. an ensemble's softmax on the same pairs): each scored position's target
 * distribution is (1 − w)·(the label-smoothed one) + w·soft[b, t, :] (xent_distill_forward
 * of mha_layers_api.h), w = weight in [0, 1]. soft [B, T, Vt] is copied (for backward);
 * its rows at unscored positions are not read. weight 0 is s2s_forward exactly (soft may be
 * NULL). Errors as s2s_forward, and MHA_EINVAL for weight outside [0, 1], soft or targets
 * NULL with weight > 0, a negative or non-finite element of a scored row; MHA_ENOMEM (the
 * first call allocates the copy's buffer, [max_batch, tgt_context, Vt]). */
MHA_API int MHA_NAME(s2s_forward_distill)(MHA_NAME(s2s) *m, int training, size_t B, size_t S,
                                          const int32_t *src, const size_t *src_len, size_t T,
                                          const int32_t *tgt_in, const int32_t *targets,
                                          const MHA_REAL *soft, double weight, double *loss);
/* Gradients of the last forward's mean loss, accumulated into every parameter's gradient.
 * One backward per forward with targets (MHA_ESTATE otherwise). */
MHA_API int MHA_NAME(s2s_backward)(MHA_NAME(s2s) *m);
/* Number of scored positions of the last forward. */
MHA_API size_t MHA_NAME(s2s_scored)(const MHA_NAME(s2s) *m);

/* Saved activations of the last forward (borrowed, valid until the next forward or
 * decoding call): logits [B, T, Vt]; the encoder output mem [B, S, C]. NULL before any. */
MHA_API const MHA_REAL *MHA_NAME(s2s_logits)(const MHA_NAME(s2s) *m, size_t shape[3]);
MHA_API const MHA_REAL *MHA_NAME(s2s_memory)(const MHA_NAME(s2s) *m, size_t shape[3]);
/* Cross-attention weights P [B, H, T, S] of decoder block l in the last forward (STORED
 * mode only; MHA_EUNSUPPORTED otherwise): the letter × phone alignment. */
MHA_API int MHA_NAME(s2s_cross_attention)(const MHA_NAME(s2s) *m, size_t l,
                                          const MHA_REAL **weights, size_t shape[4]);

/* Dropout call counter of the whole model (all blocks and embeddings advance together). */
MHA_API int MHA_NAME(s2s_get_call_index)(const MHA_NAME(s2s) *m, uint64_t *n);
MHA_API int MHA_NAME(s2s_set_call_index)(MHA_NAME(s2s) *m, uint64_t n);
/* The next batches are pairs [first, first + B) of a larger batch (data parallelism):
 * every dropout draws those pairs' masks. Errors as gpt_set_dropout_batch_offset. */
MHA_API int MHA_NAME(s2s_set_dropout_batch_offset)(MHA_NAME(s2s) *m, uint64_t first);

/* ==== Decoding with key/value caches ====================================================== */

/* Caches for decoding up to `rows` hypotheses at once (words × beam width) of up to
 * max_len target positions (<= tgt_context), for sources of up to max_src positions:
 * per decoder block the self-attention's key/value cache and the cross-attention's keys
 * and values of each source (computed once per source by s2s_infer_encode), the
 * encoder's forward buffers for min(max_batch, rows, 16) sources of max_src positions, and
 * a copy of the weights laid out for decoding (s2s_infer_encode; none when the model is
 * decode-only: s2s_decode_only). Owned; free
 * with MHA_NAME(s2s_infer_destroy). MHA_EINVAL, MHA_ESHAPE (max_len > tgt_context or
 * max_src > src_context), MHA_EOVERFLOW, MHA_ENOMEM. */
typedef struct MHA_NAME(s2s_infer) MHA_NAME(s2s_infer);
MHA_API int MHA_NAME(s2s_infer_create)(MHA_NAME(s2s_infer) **out, MHA_NAME(s2s) *m,
                                       size_t rows, size_t max_src, size_t max_len);
MHA_API void MHA_NAME(s2s_infer_destroy)(MHA_NAME(s2s_infer) *s);
/* A second decoding state of from's model and sizes (max_src, max_len), with caches of its
 * own for `rows` hypotheses, that reads from's copy of the weights instead of making one (a
 * state's copy is most of its memory). Made for decoding on several threads, one state
 * each: from and the new state may then be used at the same time (on distinct threads).
 * The copy is made now, and from this call on neither state copies the weights again at
 * s2s_infer_encode: the model's weights must not change while they are in use (a step
 * would mix the copy with the new weights it reads directly; make new states instead).
 * from must outlive every state shared from it (destroy those first). Decoding on a
 * shared state gives the bits it gives on a state of its own. MHA_EINVAL, MHA_EOVERFLOW,
 * MHA_ENOMEM. */
MHA_API int MHA_NAME(s2s_infer_share)(MHA_NAME(s2s_infer) **out, MHA_NAME(s2s_infer) *from,
                                      size_t rows);
/* Make m a model that only decodes, once its weights are final: its matrices are laid out
 * for decoding in place (each block's MLP weights and attention projections transposed,
 * as a decoding state's copy has them), and its decoding states (s2s_infer_create, _share;
 * greedy, beam, score, ensembles) read them there instead of each making a copy: the
 * weights are in memory once, not twice (the copy is as many elements as the blocks'
 * matrices). Decoding gives the same bits as before the call. One way: afterwards
 * s2s_forward, s2s_reset_parameters and s2s_tensor asked for a parameter pointer refuse
 * with MHA_ESTATE (the weights cannot change any more, so states are never stale). A state
 * made before the call keeps decoding correctly only if it was shared (its copy is frozen):
 * any other refuses to encode, or to be shared, with MHA_ESTATE. MHA_OK (also when m is
 * decode-only already), MHA_EINVAL, MHA_ENOMEM (m unchanged). */
MHA_API int MHA_NAME(s2s_decode_only)(MHA_NAME(s2s) *m);
/* The bytes a decoding state of these sizes would allocate: shared = 0, one of
 * MHA_NAME(s2s_infer_create) on m as it is now (with the copy of the weights, none once m
 * is decode-only); 1, one of MHA_NAME(s2s_infer_share) (no copy); 2, one of
 * s2s_infer_create once m is decode-only, whether it is yet or not. What a program adds to
 * the model's own memory to decode, known before it allocates. Nothing is allocated.
 * MHA_EINVAL (NULL, a size 0, shared not 0, 1 or 2), MHA_ESHAPE, MHA_EOVERFLOW as
 * s2s_infer_create. */
MHA_API int MHA_NAME(s2s_infer_bytes)(const MHA_NAME(s2s) *m, size_t rows, size_t max_src,
                                      size_t max_len, int shared, size_t *bytes);

/* Run the encoder (evaluation mode) on B sources (B <= rows; they go through the encoder
 * min(the model's max_batch, rows, 16) at a time, so a model made for small batches decodes
 * many rows at once, and a model made for large ones does not make decoding large) and
 * compute every decoder block's cross-attention keys and
 * values from its output; the decoder caches are emptied and row b decodes source b. The
 * state's own buffers serve (the model's activations are not touched: a pending backward
 * stays valid). The state takes a copy of the weights, laid out for decoding (each
 * product's weight transposed, as many elements as the blocks' matrices and the
 * read-out): the steps that follow read that copy, so weights changed after an encode
 * reach the decoding at the next encode. A shared state, or one of a decode-only model,
 * copies nothing here (MHA_ESTATE for a state made before s2s_decode_only, unshared). */
MHA_API int MHA_NAME(s2s_infer_encode)(MHA_NAME(s2s) *m, MHA_NAME(s2s_infer) *s, size_t B,
                                       size_t S, const int32_t *src, const size_t *src_len);
/* Keep rows from[0 .. n): new row r continues old row from[r] (its source and its decoded
 * positions); n may be smaller (drop finished rows) or larger (one row per beam) than the
 * current number of rows, up to `rows`. MHA_EINVAL for from[r] out of range. */
MHA_API int MHA_NAME(s2s_infer_select)(MHA_NAME(s2s_infer) *s, size_t n, const size_t *from);
/* Number of rows and decoded positions. */
MHA_API int MHA_NAME(s2s_infer_shape)(const MHA_NAME(s2s_infer) *s, size_t *rows, size_t *len);
/* Feed one token per row (tokens [rows], ids in [0, Vt)) at the next position and write
 * logits [rows, Vt] for the position after it: equal, up to rounding, to the logits of
 * MHA_NAME(s2s_forward) (evaluation mode) at that position. MHA_ESHAPE past max_len. */
MHA_API int MHA_NAME(s2s_infer_step)(MHA_NAME(s2s) *m, MHA_NAME(s2s_infer) *s,
                                     const int32_t *tokens, MHA_REAL *logits);

/* Greedy decoding of B sources (B <= rows of s): start from token bos,
 * take the most likely token (lowest id on ties) until eos or max_len tokens. out
 * [B, max_len] gets the tokens before eos, len [B] their number, logprob [B] (may be
 * NULL) Σ log P of the chosen tokens including eos when it was reached. max_len <= the
 * cache's max_len − 1 is not required: at most the cache's max_len positions are fed.
 * Lengths: max_len counts the tokens before eos (eos is never stored); the cache's max_len
 * M counts fed positions (bos and each chosen token but the last), so at most M tokens are
 * chosen (eos included). A row finished (chose eos) exactly when len[b] < min(max_len, M);
 * otherwise it was cut, and its logprob has no eos term. */
MHA_API int MHA_NAME(s2s_greedy)(MHA_NAME(s2s) *m, MHA_NAME(s2s_infer) *s, size_t B, size_t S,
                                 const int32_t *src, const size_t *src_len, int32_t bos,
                                 int32_t eos, size_t max_len, int32_t *out, size_t *len,
                                 double *logprob);
/* Beam search of width K for B sources (B·K <= rows of s): K hypotheses
 * per source grow one token at a time from bos; a hypothesis that takes eos is finished.
 * A source stops when K hypotheses are finished or max_len tokens are reached (the live
 * ones then count, unfinished). The nbest (<= K) best by score = logprob / (len + 1)^alpha
 * (alpha 0: plain log-probability; 1: per token) are written for each source b:
 * hyps [B, nbest], tokens [B, nbest, max_len]. Ties keep the lower token id / earlier
 * hypothesis. MHA_EINVAL (K or nbest 0, nbest > K, alpha < 0 or not finite).
 * The pruning rule, per source and step: the 2K best continuations of its live hypotheses
 * by logprob (not by score) are walked best first; an eos continuation is finished (len =
 * the tokens before it, its logprob with the eos term); another becomes live until K are
 * live, except that one reaching max_len tokens, or the cache's last position, is finished
 * cut (finished = 0, no eos term); the walk stops when K are live or K are finished. Once
 * K are finished the source stops, even if a live one might have scored better later.
 * Fewer than nbest hypotheses (K > the continuations there are): the rest have len 0 and
 * logprob = score = −inf. */
MHA_API int MHA_NAME(s2s_beam)(MHA_NAME(s2s) *m, MHA_NAME(s2s_infer) *s, size_t B, size_t S,
                               const int32_t *src, const size_t *src_len, int32_t bos,
                               int32_t eos, size_t max_len, size_t K, size_t nbest,
                               double alpha, mha_s2s_hyp *hyps, int32_t *tokens);

/* Ensembles: n models decode as one. At each step every model (its own state s[i], made
 * for m[i]) is fed the same tokens, and the choice is made on the mean over the models of
 * their log-probabilities (log softmax of each one's logits, in double): greedy takes the
 * best mean, beam search ranks candidates by the running sum of the means, and logprob
 * is Σ over the tokens (and eos when reached) of the mean log-probability. Everything
 * else is as s2s_greedy / s2s_beam, which are these functions with n = 1 (bit for bit).
 * The models must share the vocabularies' sizes (and, for a meaning, the symbols: the
 * library cannot check those) — MHA_EMISMATCH otherwise, or when s[i] is not m[i]'s; the
 * states must be distinct (MHA_EINVAL), of one cache length (max_len of infer_create) and
 * each with room for the rows (MHA_ESHAPE). The models may differ in every other size.
 * Each state's caches hold its model's activations, so memory and time grow with n. */
MHA_API int MHA_NAME(s2s_ensemble_greedy)(size_t n, MHA_NAME(s2s) *const *m,
                                          MHA_NAME(s2s_infer) *const *s, size_t B, size_t S,
                                          const int32_t *src, const size_t *src_len,
                                          int32_t bos, int32_t eos, size_t max_len,
                                          int32_t *out, size_t *len, double *logprob);
MHA_API int MHA_NAME(s2s_ensemble_beam)(size_t n, MHA_NAME(s2s) *const *m,
                                        MHA_NAME(s2s_infer) *const *s, size_t B, size_t S,
                                        const int32_t *src, const size_t *src_len, int32_t bos,
                                        int32_t eos, size_t max_len, size_t K, size_t nbest,
                                        double alpha, mha_s2s_hyp *hyps, int32_t *tokens);

/* Forced decoding: the log-probability the model gives each of B given targets. Row b
 * (B <= rows of s) reads source b (src [B, S], src_len) and its target tgt [B, max_len]:
 * the tgt_len[b] (<= max_len) tokens after bos, without eos; logprob [B] gets
 * Σ_t log P(tgt_t | bos, tgt_<t, source) + log P(eos | bos, the whole target, source) —
 * what s2s_greedy reports for a row that finished with those tokens (equal up to rounding:
 * here every row is fed at every step). Ensembles: the mean over the models of their
 * log-probabilities at each position, as s2s_ensemble_greedy. Needs tgt_len[b] + 1 <= the
 * cache's max_len (MHA_ESHAPE). MHA_EINVAL: NULL, B = 0, a token outside [0, Vt), a length
 * above max_len; the rest as s2s_ensemble_greedy. The caches are overwritten. */
MHA_API int MHA_NAME(s2s_score)(MHA_NAME(s2s) *m, MHA_NAME(s2s_infer) *s, size_t B, size_t S,
                                const int32_t *src, const size_t *src_len, int32_t bos,
                                int32_t eos, const int32_t *tgt, size_t max_len,
                                const size_t *tgt_len, double *logprob);
MHA_API int MHA_NAME(s2s_ensemble_score)(size_t n, MHA_NAME(s2s) *const *m,
                                         MHA_NAME(s2s_infer) *const *s, size_t B, size_t S,
                                         const int32_t *src, const size_t *src_len,
                                         int32_t bos, int32_t eos, const int32_t *tgt,
                                         size_t max_len, const size_t *tgt_len,
                                         double *logprob);
