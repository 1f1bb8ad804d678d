/*
 * model_io.c — a model's parameters saved to and loaded from a safetensors file under
 * their PyTorch state_dict names: mha_gpt_save / mha_gpt_load (mha_gpt.h) and
 * mha_s2s_save / mha_s2s_load (mha_s2s.h), float32 models only.
 *
 * The names, shapes and order come from the models' own tensor lists (mha_gpt_tensor,
 * mha_s2s_tensor: the one place they are defined); here they are gathered into a list of
 * (info, param) pairs, and one save and one load serve both models.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mha_internal.h"
#include "st_internal.h"

/* One parameter tensor of a model: its name and shape (info, borrowed from the model) and
 * its values p [info.numel] (borrowed). */
typedef struct model_tensor {
    mha_param_info info;
    float *p;
} model_tensor;

/* A model's tensor list: t[n] owned (free), total = Σ numel. */
typedef struct model_list {
    model_tensor *t;
    size_t n, total;
} model_list;

static int list_alloc(model_list *l, size_t n, char *err, size_t errlen)
{
    l->t = calloc(n ? n : 1, sizeof *l->t);
    l->n = n;
    l->total = 0;
    if (l->t == NULL) {
        mha__st_set_err(err, errlen, "out of memory for a list of %zu tensors", n);
        return MHA_ENOMEM;
    }
    return MHA_OK;
}

/* The tensors of a GPT g or an encoder–decoder m (one non-NULL), in the model's order, for
 * the call fn on path (MHA_EINVAL when the model or path is NULL). The models' tensor
 * functions take a non-const model but only read it when asked for no gradient. l->t is
 * owned (free) whatever the result. */
static int model_list_of(const mha_gpt *g, const mha_s2s *m, const char *fn, const char *path,
                         model_list *l, char *err, size_t errlen)
{
    l->t = NULL;
    if ((g == NULL && m == NULL) || path == NULL) {
        mha__st_set_err(err, errlen, "%s: model and path must not be NULL", fn);
        return MHA_EINVAL;
    }
    int rc = list_alloc(l, g ? mha_gpt_num_tensors(g) : mha_s2s_num_tensors(m), err, errlen);
    for (size_t i = 0; rc == MHA_OK && i < l->n; i++) {
        model_tensor *t = &l->t[i];
        rc = g ? mha_gpt_tensor((mha_gpt *)g, i, &t->info, &t->p, NULL)
               : mha_s2s_tensor((mha_s2s *)m, i, &t->info, &t->p, NULL);
        l->total += t->info.numel;
    }
    return rc;
}

static const model_tensor *list_find(const model_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->t[i].info.name, name) == 0)
            return &l->t[i];
    return NULL;
}

/* ---- saving ------------------------------------------------------------------------------ */

static int save_list(const model_list *l, const char *path, mha_st_dtype dtype,
                     const char *const *meta_keys, const char *const *meta_values,
                     size_t n_meta, char *err, size_t errlen)
{
    if (dtype != MHA_ST_F32 && dtype != MHA_ST_BF16 && dtype != MHA_ST_F16) {
        mha__st_set_err(err, errlen, "a model is saved as F32, BF16 or F16, not dtype %d",
                        (int)dtype);
        return MHA_EINVAL;
    }
    mha_st_tensor *st = calloc(l->n ? l->n : 1, sizeof *st);
    uint16_t *half = NULL; /* [total] the 16-bit values, tensor after tensor */
    if (st != NULL && dtype != MHA_ST_F32)
        half = malloc((l->total ? l->total : 1) * sizeof *half);
    if (st == NULL || (dtype != MHA_ST_F32 && half == NULL)) {
        free(st);
        mha__st_set_err(err, errlen, "out of memory for %zu parameters", l->total);
        return MHA_ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < l->n; i++) {
        const mha_param_info *in = &l->t[i].info;
        st[i] = (mha_st_tensor){.name = in->name, .dtype = dtype, .ndim = in->ndim,
                                .shape = {in->shape[0], in->ndim == 2 ? in->shape[1] : 0}};
        if (half == NULL) {
            st[i].data = l->t[i].p;
        } else {
            mha_st_from_f32(dtype, l->t[i].p, half + off, in->numel);
            st[i].data = half + off;
        }
        off += in->numel;
    }
    int rc = mha_st_save(path, st, l->n, meta_keys, meta_values, n_meta, err, errlen);
    free(half);
    free(st);
    return rc;
}

/* mha_gpt_save (g) and mha_s2s_save (m): exactly one model non-NULL; fn names the call. */
static int save_model(const mha_gpt *g, const mha_s2s *m, const char *fn, const char *path,
                      mha_st_dtype dtype, const char *const *meta_keys,
                      const char *const *meta_values, size_t n_meta, char *err, size_t errlen)
{
    model_list l;
    int rc = model_list_of(g, m, fn, path, &l, err, errlen);
    if (rc == MHA_OK)
        rc = save_list(&l, path, dtype, meta_keys, meta_values, n_meta, err, errlen);
    free(l.t);
    return rc;
}

int mha_gpt_save(const mha_gpt *g, const char *path, mha_st_dtype dtype,
                 const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                 char *err, size_t errlen)
{
    return save_model(g, NULL, "mha_gpt_save", path, dtype, meta_keys, meta_values, n_meta,
                      err, errlen);
}

int mha_s2s_save(const mha_s2s *m, const char *path, mha_st_dtype dtype,
                 const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                 char *err, size_t errlen)
{
    return save_model(NULL, m, "mha_s2s_save", path, dtype, meta_keys, meta_values, n_meta,
                      err, errlen);
}

/* ---- loading ----------------------------------------------------------------------------- */

/* Every tensor of l from f into staging[total] (l's order), checked: present, exactly its
 * shape, a float dtype, every value finite; and no tensor in f that l does not name. */
static int read_list(const model_list *l, const mha_st_file *f, float *staging, char *err,
                     size_t errlen)
{
    char q[ST_QUOTE];
    size_t off = 0;
    for (size_t i = 0; i < l->n; i++) {
        const mha_param_info *in = &l->t[i].info;
        float *v = staging + off;
        int rc = mha_st_get_f32(f, in->name, in->ndim, in->shape, v, err, errlen);
        if (rc != MHA_OK)
            return rc;
        for (size_t k = 0; k < in->numel; k++) {
            if (!isfinite(v[k])) {
                mha__st_set_err(err, errlen, "tensor '%s': element %zu is %s",
                                mha__st_quote(q, in->name), k, isnan(v[k]) ? "NaN" : "infinite");
                return MHA_ENONFINITE;
            }
        }
        off += in->numel;
    }
    for (size_t i = 0; i < mha_st_count(f); i++) {
        const char *name = mha_st_name(f, i);
        if (list_find(l, name) == NULL) {
            mha__st_set_err(err, errlen, "tensor '%s' in the file is no parameter of this model",
                            mha__st_quote(q, name));
            return MHA_EFORMAT;
        }
    }
    return MHA_OK;
}

static int load_list(const model_list *l, const char *path, char *err, size_t errlen)
{
    mha_st_file *f = NULL;
    int rc = mha_st_load(path, &f, err, errlen);
    if (rc != MHA_OK)
        return rc;
    float *staging = malloc((l->total ? l->total : 1) * sizeof *staging);
    if (staging == NULL) {
        mha_st_free(f);
        mha__st_set_err(err, errlen, "out of memory for %zu parameters", l->total);
        return MHA_ENOMEM;
    }
    rc = read_list(l, f, staging, err, errlen);
    if (rc == MHA_OK) { /* everything valid: only now the model changes */
        size_t off = 0;
        for (size_t i = 0; i < l->n; i++) {
            memcpy(l->t[i].p, staging + off, l->t[i].info.numel * sizeof *staging);
            off += l->t[i].info.numel;
        }
    }
    free(staging);
    mha_st_free(f);
    return rc;
}

/* mha_gpt_load (g) and mha_s2s_load (m): exactly one model non-NULL; fn names the call. */
static int load_model(mha_gpt *g, mha_s2s *m, const char *fn, const char *path, char *err,
                      size_t errlen)
{
    model_list l;
    int rc = model_list_of(g, m, fn, path, &l, err, errlen);
    if (rc == MHA_OK)
        rc = load_list(&l, path, err, errlen);
    free(l.t);
    return rc;
}

int mha_gpt_load(mha_gpt *g, const char *path, char *err, size_t errlen)
{
    return load_model(g, NULL, "mha_gpt_load", path, err, errlen);
}

int mha_s2s_load(mha_s2s *m, const char *path, char *err, size_t errlen)
{
    return load_model(NULL, m, "mha_s2s_load", path, err, errlen);
}
