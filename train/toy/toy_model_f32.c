/* The float instantiation of the tiny model (tm_*), plus the untyped helpers
 * declared in toy_model.h (tensor layout, config check, layer seeds). */
#include "toy_model.h"

#include <string.h>

static const char *const tm_own_names[TM_NUM_OWN_TENSORS] = {
    "tok_emb.weight", "pos_emb.weight", "val_emb.weight", "readout.weight", "readout.bias"};

int tm_config_check(const tm_config *cfg)
{
    if (!cfg || cfg->vocab_in == 0 || cfg->vocab_out == 0 || cfg->seq_len == 0 ||
        cfg->model_dim == 0 || cfg->num_heads == 0 || cfg->model_dim % cfg->num_heads != 0 ||
        cfg->layers == 0 || cfg->layers > TM_MAX_LAYERS || !(cfg->dropout >= 0.0) ||
        !(cfg->dropout <= 1.0) || cfg->threads < 0 || cfg->vocab_in > INT32_MAX ||
        cfg->vocab_out > INT32_MAX)
        return MHA_EINVAL;
    return MHA_OK;
}

int tm_tensor_info_at(const tm_config *cfg, size_t index, mha_tensor_info *info)
{
    if (!cfg || !info || index >= TM_NUM_OWN_TENSORS || tm_config_check(cfg) != MHA_OK)
        return MHA_EINVAL;
    const size_t D = cfg->model_dim;
    /* rows of each tensor; the bias is 1-D */
    const size_t rows[TM_NUM_OWN_TENSORS] = {cfg->vocab_in, cfg->seq_len,
                                             cfg->ctx_len ? cfg->vocab_in : 0, cfg->vocab_out,
                                             cfg->vocab_out};
    size_t offset = 0;
    for (size_t t = 0; t <= index; t++) {
        size_t numel;
        if (t == 4) {
            numel = rows[t];
        } else {
            if (rows[t] != 0 && D > SIZE_MAX / rows[t])
                return MHA_EOVERFLOW;
            numel = rows[t] * D;
        }
        if (t == index) {
            info->name = tm_own_names[t];
            info->offset = offset;
            info->numel = numel;
            info->ndim = (t == 4) ? 1 : 2;
            info->shape[0] = rows[t];
            info->shape[1] = (t == 4) ? 0 : D;
            return MHA_OK;
        }
        if (offset > SIZE_MAX - numel)
            return MHA_EOVERFLOW;
        offset += numel;
    }
    return MHA_EINVAL; /* unreachable */
}

int tm_own_param_count(const tm_config *cfg, size_t *count)
{
    mha_tensor_info last;
    int st = tm_tensor_info_at(cfg, TM_NUM_OWN_TENSORS - 1, &last);
    if (st != MHA_OK)
        return st;
    if (!count)
        return MHA_EINVAL;
    *count = last.offset + last.numel;
    return MHA_OK;
}

uint64_t tm_layer_seed(uint64_t seed, size_t layer)
{
    return mha_gpt_block_seed(seed, layer); /* the library's splitmix64 of seed and layer */
}

#define TM_REAL float
#define TM_NAME(n) tm_##n
#define TM_MHA(n) mha_##n
#include "toy_model_impl.inc"
