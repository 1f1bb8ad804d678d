/*
 * The float64 instantiations' public names. The templates (src/<family>_core.c and their
 * .inc chapters) define each public function under its float32 name, so that
 * `grep -rn mha_s2s_beam src` finds its definition; in the double compilation of a template
 * (src/real.h with -DMHA_DOUBLE), every header is included first (mha_internal.h, which
 * includes mha.h) and then this file, so that the same definition makes mhad_s2s_beam there.
 * A template function missing here is a compile error in the float64 unit (its float32
 * prototype, already declared, conflicts).
 * Internal and static helpers keep the X(name) / PRIV(name) spellings.
 */
#ifndef MHA_NAMES_F64_H
#define MHA_NAMES_F64_H

/* src/gpt_block.inc */
#define mha_block_destroy mhad_block_destroy
#define mha_block_create mhad_block_create
#define mha_block_tensor mhad_block_tensor
#define mha_block_reset_parameters mhad_block_reset_parameters
#define mha_block_zero_grad mhad_block_zero_grad
#define mha_block_attention mhad_block_attention
#define mha_block_get_call_index mhad_block_get_call_index
#define mha_block_set_call_index mhad_block_set_call_index
#define mha_block_set_dropout_batch_offset mhad_block_set_dropout_batch_offset
#define mha_block_forward mhad_block_forward
#define mha_block_forward_lengths mhad_block_forward_lengths
#define mha_block_backward mhad_block_backward

/* src/gpt_core.c */
#define mha_gpt_destroy mhad_gpt_destroy
#define mha_gpt_create mhad_gpt_create
#define mha_gpt_get_config mhad_gpt_get_config
#define mha_gpt_num_tensors mhad_gpt_num_tensors
#define mha_gpt_tensor mhad_gpt_tensor
#define mha_gpt_tensor_find mhad_gpt_tensor_find
#define mha_gpt_param_count mhad_gpt_param_count
#define mha_gpt_reset_parameters mhad_gpt_reset_parameters
#define mha_gpt_zero_grad mhad_gpt_zero_grad
#define mha_gpt_params mhad_gpt_params
#define mha_gpt_grads mhad_gpt_grads
#define mha_gpt_block mhad_gpt_block
#define mha_gpt_get_call_index mhad_gpt_get_call_index
#define mha_gpt_set_call_index mhad_gpt_set_call_index
#define mha_gpt_set_dropout_batch_offset mhad_gpt_set_dropout_batch_offset

/* src/gpt_forward.inc */
#define mha_gpt_forward mhad_gpt_forward
#define mha_gpt_set_grad_hook mhad_gpt_set_grad_hook
#define mha_gpt_backward mhad_gpt_backward
#define mha_gpt_logits mhad_gpt_logits
#define mha_gpt_residual mhad_gpt_residual
#define mha_gpt_attention mhad_gpt_attention

/* src/gpt_infer.inc */
#define mha_gpt_infer_destroy mhad_gpt_infer_destroy
#define mha_gpt_infer_create mhad_gpt_infer_create
#define mha_gpt_infer_reset mhad_gpt_infer_reset
#define mha_gpt_infer_length mhad_gpt_infer_length
#define mha_gpt_infer_step mhad_gpt_infer_step

/* src/layers_core.c */
#define mha_layernorm_forward mhad_layernorm_forward
#define mha_layernorm_backward mhad_layernorm_backward
#define mha_gelu_forward mhad_gelu_forward
#define mha_gelu_backward mhad_gelu_backward
#define mha_embedding_forward mhad_embedding_forward
#define mha_embedding_backward mhad_embedding_backward
#define mha_dropout_forward mhad_dropout_forward
#define mha_dropout_forward_at mhad_dropout_forward_at
#define mha_dropout_backward mhad_dropout_backward

/* src/layers_linear.inc */
#define mha_linear_forward_prec mhad_linear_forward_prec
#define mha_linear_forward mhad_linear_forward
#define mha_linear_backward_prec mhad_linear_backward_prec
#define mha_linear_backward mhad_linear_backward
#define mha_mlp_forward_prec mhad_mlp_forward_prec
#define mha_mlp_forward mhad_mlp_forward
#define mha_mlp_backward_prec mhad_mlp_backward_prec
#define mha_mlp_backward mhad_mlp_backward

/* src/layers_xent.inc */
#define mha_xent_forward mhad_xent_forward
#define mha_xent_backward mhad_xent_backward
#define mha_xent_smooth_forward mhad_xent_smooth_forward
#define mha_xent_smooth_backward mhad_xent_smooth_backward
#define mha_xent_distill_forward mhad_xent_distill_forward
#define mha_xent_distill_backward mhad_xent_distill_backward

/* src/mha_cache.inc */
#define mha_cache_size_mode mhad_cache_size_mode
#define mha_cache_size mhad_cache_size
#define mha_cache_destroy mhad_cache_destroy
#define mha_cache_create_mode mhad_cache_create_mode
#define mha_cache_create mhad_cache_create
#define mha_cache_attention mhad_cache_attention

/* src/mha_core.c */
#define mha_create mhad_create
#define mha_destroy mhad_destroy
#define mha_get_config mhad_get_config
#define mha_reset_parameters mhad_reset_parameters
#define mha_params mhad_params
#define mha_grads mhad_grads
#define mha_zero_grad mhad_zero_grad
#define mha_get_call_index mhad_get_call_index
#define mha_set_call_index mhad_set_call_index
#define mha_set_dropout_batch_offset mhad_set_dropout_batch_offset
#define mha_forward mhad_forward
#define mha_backward mhad_backward

/* src/mha_kv.inc */
#define mha_kvcache_create mhad_kvcache_create
#define mha_kvcache_destroy mhad_kvcache_destroy
#define mha_kvcache_reset mhad_kvcache_reset
#define mha_kvcache_length mhad_kvcache_length
#define mha_forward_cached mhad_forward_cached
#define mha_kvcache_set_context mhad_kvcache_set_context
#define mha_kvcache_append_context mhad_kvcache_append_context
#define mha_forward_cross_cached mhad_forward_cross_cached
#define mha_kvcache_select mhad_kvcache_select

/* src/optim_core.c */
#define mha_optim_create mhad_optim_create
#define mha_optim_destroy mhad_optim_destroy
#define mha_optim_add mhad_optim_add
#define mha_optim_add_decay mhad_optim_add_decay
#define mha_optim_add_segments mhad_optim_add_segments
#define mha_optim_clip_grad_norm mhad_optim_clip_grad_norm
#define mha_optim_step mhad_optim_step
#define mha_optim_num_groups mhad_optim_num_groups
#define mha_optim_group mhad_optim_group
#define mha_optim_get_step mhad_optim_get_step
#define mha_optim_set_step mhad_optim_set_step

/* src/s2s_block.inc */
#define mha_decoder_block_destroy mhad_decoder_block_destroy
#define mha_decoder_block_create mhad_decoder_block_create
#define mha_decoder_block_tensor mhad_decoder_block_tensor
#define mha_decoder_block_reset_parameters mhad_decoder_block_reset_parameters
#define mha_decoder_block_zero_grad mhad_decoder_block_zero_grad
#define mha_decoder_block_attention mhad_decoder_block_attention
#define mha_decoder_block_get_call_index mhad_decoder_block_get_call_index
#define mha_decoder_block_set_call_index mhad_decoder_block_set_call_index
#define mha_decoder_block_set_dropout_batch_offset mhad_decoder_block_set_dropout_batch_offset
#define mha_decoder_block_forward mhad_decoder_block_forward
#define mha_decoder_block_backward mhad_decoder_block_backward

/* src/s2s_core.c */
#define mha_s2s_destroy mhad_s2s_destroy
#define mha_s2s_create mhad_s2s_create
#define mha_s2s_get_config mhad_s2s_get_config
#define mha_s2s_max_batch mhad_s2s_max_batch
#define mha_s2s_num_tensors mhad_s2s_num_tensors
#define mha_s2s_scored mhad_s2s_scored
#define mha_s2s_tensor mhad_s2s_tensor
#define mha_s2s_tensor_find mhad_s2s_tensor_find
#define mha_s2s_param_count mhad_s2s_param_count
#define mha_s2s_reset_parameters mhad_s2s_reset_parameters
#define mha_s2s_zero_grad mhad_s2s_zero_grad
#define mha_s2s_params mhad_s2s_params
#define mha_s2s_grads mhad_s2s_grads
#define mha_s2s_encoder_block mhad_s2s_encoder_block
#define mha_s2s_decoder_block mhad_s2s_decoder_block
#define mha_s2s_get_call_index mhad_s2s_get_call_index
#define mha_s2s_set_call_index mhad_s2s_set_call_index
#define mha_s2s_set_dropout_batch_offset mhad_s2s_set_dropout_batch_offset

/* src/s2s_decode.inc */
#define mha_s2s_greedy mhad_s2s_greedy
#define mha_s2s_ensemble_greedy mhad_s2s_ensemble_greedy
#define mha_s2s_beam mhad_s2s_beam
#define mha_s2s_ensemble_beam mhad_s2s_ensemble_beam
#define mha_s2s_score mhad_s2s_score
#define mha_s2s_ensemble_score mhad_s2s_ensemble_score

/* src/s2s_forward.inc */
#define mha_s2s_forward mhad_s2s_forward
#define mha_s2s_forward_distill mhad_s2s_forward_distill
#define mha_s2s_backward mhad_s2s_backward
#define mha_s2s_logits mhad_s2s_logits
#define mha_s2s_memory mhad_s2s_memory
#define mha_s2s_cross_attention mhad_s2s_cross_attention

/* src/s2s_infer.inc */
#define mha_s2s_infer_destroy mhad_s2s_infer_destroy
#define mha_s2s_infer_create mhad_s2s_infer_create
#define mha_s2s_infer_bytes mhad_s2s_infer_bytes
#define mha_s2s_infer_share mhad_s2s_infer_share
#define mha_s2s_decode_only mhad_s2s_decode_only
#define mha_s2s_infer_encode mhad_s2s_infer_encode
#define mha_s2s_infer_select mhad_s2s_infer_select
#define mha_s2s_infer_shape mhad_s2s_infer_shape
#define mha_s2s_infer_step mhad_s2s_infer_step

#endif /* MHA_NAMES_F64_H */
