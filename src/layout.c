/* Parameter layout (shared by both precisions) and the dropout stream helpers. */
#include <stdlib.h>
#include <string.h>

#include "mha_internal.h"

/* The 8 tensors in PyTorch state_dict order. Tensor t belongs to linear layer
 * t / 2 (q, k, v, o); even t is the weight [D, D], odd t the bias [D]. Layer l
 * starts at l·(D² + D): weight first, then bias. */
static const char *const tensor_names[MHA_NUM_TENSORS] = {
    "w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias",
    "w_v.weight", "w_v.bias", "w_o.weight", "w_o.bias",
};

int mha_param_count(size_t model_dim, size_t *count)
{
    size_t d2, per_layer, total;
    if (count == NULL || model_dim == 0)
        return MHA_EINVAL;
    if (__builtin_mul_overflow(model_dim, model_dim, &d2) ||
        __builtin_add_overflow(d2, model_dim, &per_layer) ||
        __builtin_mul_overflow(per_layer, (size_t)4, &total))
        return MHA_EOVERFLOW;
    *count = total;
    return MHA_OK;
}

int mha_tensor_info_at(size_t model_dim, size_t index, mha_tensor_info *info)
{
    size_t total;
    if (info == NULL || index >= MHA_NUM_TENSORS)
        return MHA_EINVAL;
    int st = mha_param_count(model_dim, &total);
    if (st != MHA_OK)
        return st;
    size_t d = model_dim, layer = index / 2;
    int is_bias = (int)(index % 2);
    info->name = tensor_names[index];
    info->offset = layer * (d * d + d) + (is_bias ? d * d : 0);
    info->numel = is_bias ? d : d * d;
    info->ndim = is_bias ? 1 : 2;
    info->shape[0] = d;
    info->shape[1] = is_bias ? 0 : d;
    return MHA_OK;
}

int mha_tensor_info_find(size_t model_dim, const char *name, mha_tensor_info *info)
{
    if (name == NULL || info == NULL)
        return MHA_EINVAL;
    for (size_t t = 0; t < MHA_NUM_TENSORS; t++)
        if (strcmp(name, tensor_names[t]) == 0)
            return mha_tensor_info_at(model_dim, t, info);
    return MHA_ENOTFOUND;
}

uint64_t mha__dropout_threshold(double p)
{
    /* p·2^32 is exact in double; truncation toward zero; p = 1 gives 2^32,
     * above every 32-bit output, so everything is dropped. */
    return (uint64_t)(p * 4294967296.0);
}

int mha__tensor_find(const char *const *names, size_t n, const char *name, size_t *index)
{
    if (name == NULL || index == NULL)
        return MHA_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) {
            *index = i;
            return MHA_OK;
        }
    return MHA_ENOTFOUND;
}

int mha__get_u64(const uint64_t *field, uint64_t *out)
{
    return field != NULL && out != NULL ? (*out = *field, MHA_OK) : MHA_EINVAL;
}

int mha__get_size(const size_t *field, size_t *out)
{
    return field != NULL && out != NULL ? (*out = *field, MHA_OK) : MHA_EINVAL;
}

void mha__free_all(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}
