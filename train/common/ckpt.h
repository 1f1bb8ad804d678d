/*
 * ckpt — training checkpoints of mha-train and mha-gpt on top of the library's safetensors
 * files (mha_safetensors.h): named float tensors with their optimizer moments, a few
 * integer / double state values, and text metadata (a format name and the run's options).
 *
 * Layout of a checkpoint file written by ckpt_save:
 *   <tensor name>                          F32 [shape]   every parameter tensor
 *   optimizer.<moment>.<tensor name>       F32 [shape]   per moment kind the optimizer has
 *                                                        (torch's state names: exp_avg,
 *                                                        exp_avg_sq, momentum_buffer)
 *   <state name>                           U64 / F64     scalars or vectors (step, RNG, ...)
 *   __metadata__: "format" first, then the options marked ckpt != 0 in the program's
 *   option table (cli.h), as cli_format text, then any extra keys.
 * Saving is atomic (mha_st_save: temporary file, fsync, rename): a failed save leaves the
 * previous file intact.
 *
 * Checksums (saves whose ckpt_meta has checksums != 0: mha-gpt's and mha-g2p's): the metadata also
 * holds, for every tensor, "crc32c.<tensor name>" = the CRC-32C (crc32c.h) of its bytes
 * as stored, 8 lower-case hex digits, and "crc32c.__metadata__" = the CRC-32C of every
 * other metadata pair (keys not starting with "crc32c."), in increasing byte order of the
 * keys, each as key, NUL, value, NUL (the options and the vocabulary). A file that holds
 * any "crc32c." key must hold them all and match them (ckpt_verify, called by ckpt_load);
 * a file with none — written before checksums existed, or by mha-train — is accepted
 * without a check.
 *
 * Loading is strict: every expected entry present with exactly its dtype and shape,
 * floats finite, second moments (moment index 1) >= 0, and no entry the layout does not
 * name. Nothing is copied unless everything is valid.
 *
 * Functions return MHA_OK or a negative MHA_ status with a one-line message in err; they
 * never print or exit (the programs do that).
 */
#ifndef TRAIN_CKPT_H
#define TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_crc.h"
#include "cli.h"
#include "mha.h"
#include "mha_optim.h"
#include "mha_safetensors.h"


/* One float parameter tensor and its optimizer moments. p, m, v borrowed [numel]. */
typedef struct ckpt_tensor {
    char name[CKPT_NAME_CAP];
    float *p;       /* values                                         */
    float *m, *v;   /* moments 0 and 1 (NULL when the optimizer keeps none) */
    float *g;       /* its gradient (NULL when none is kept: not in a file) */
    size_t ndim;    /* 1 or 2                                         */
    size_t shape[2];
    size_t numel;
} ckpt_tensor;

/* One state entry (not a parameter): U64 or F64, a scalar (ndim 0) or a vector. */
typedef struct ckpt_state {
    const char *name;
    mha_st_dtype dtype; /* MHA_ST_U64 or MHA_ST_F64                                   */
    size_t ndim;    /* 0 or 1                                             */
    size_t len;     /* elements when ndim == 1                            */
    void *data;     /* borrowed: 1 or len elements                        */
} ckpt_state;

typedef struct ckpt_layout {
    const ckpt_tensor *t;
    size_t n_t;
    const char *moment[2];   /* torch's names of the moments kept in ckpt_tensor.m / .v
                                (NULL: that moment is not stored)                       */
    const ckpt_state *s;
    size_t n_s;
    const char *extra_hint;  /* appended to the "not part of this run" message          */
} ckpt_layout;

/* Tensor i of a model (its name, shape and decay mark, its values and gradient), as
 * mha_gpt_tensor and mha_s2s_tensor give it. */
typedef int (*ckpt_model_tensor_fn)(void *model, size_t i, mha_param_info *info, float **p,
                                    float **grad);

/* A program's table of a model's n tensors, from tensor(model, i, ...): *out = t[n]
 * (owned, free) with each tensor's name, shape and values (borrowed from the model).
 *  - opt != NULL: the tensors are given to the optimizer with weight decay `decay` where
 *    the model marks a tensor for decay (on every tensor when decay_all) — as one group
 *    "model" of one segment per tensor when they lie end to end in one arena (parameters and
 *    gradients alike: mha_gpt's and mha_s2s's do), else a group per tensor under its name;
 *    the same bits either way (mha_optim_add_segments) — and t[i].m, t[i].v are its moments;
 *  - opt == NULL (a model to sample or decode with): t[i].m, t[i].v point into *scratch
 *    (owned, free; 2 · Σ numel floats), where a checkpoint's moments are read and validated
 *    but not used.
 * *total (when total != NULL) gets Σ numel. MHA_OK, or the first failing status with a message in err (nothing
 * to free then). */
int ckpt_tensors_of_model(void *model, size_t n, ckpt_model_tensor_fn tensor,
                          mha_optimizer *opt, double decay, int decay_all, ckpt_tensor **out,
                          float **scratch, size_t *total, char *err, size_t errlen);

/* Metadata being assembled for a save: keys and owned value copies. */
typedef struct ckpt_meta {
    size_t n, cap;
    const char **keys; /* static or option-table storage */
    char **vals;       /* owned                          */
    int checksums;     /* ckpt_save adds the crc32c.* keys (see the top) */
} ckpt_meta;

/* "format" = format, then every option of opts[n] with ckpt != 0 formatted from cfg.
 * *m must be zeroed first; free with ckpt_meta_free. MHA_ENOMEM. */
int ckpt_meta_init(ckpt_meta *m, const char *format, const cli_opt *opts, size_t n,
                   const void *cfg);
/* Append key = val (val copied). MHA_ENOMEM. */
int ckpt_meta_add(ckpt_meta *m, const char *key, const char *val);
void ckpt_meta_free(ckpt_meta *m);

/* Write the layout's tensors (values, then moment 0 of every tensor, then moment 1),
 * its state entries and the metadata to path, atomically. */
int ckpt_save(const char *path, const ckpt_layout *c, const ckpt_meta *meta, char *err,
              size_t errlen);

/* Remove the temporaries that killed saves of `path` left behind ("<path>.tmp.<pid>",
 * mha_st_save's names) whose process no longer exists; another live process's temporary is
 * left alone. Returns how many were removed. */
size_t ckpt_remove_stale(const char *path);

/* Check f's checksums (ckpt_verify), then f against the layout (see the top) and, if
 * everything is valid, copy every
 * tensor, moment and state entry into the layout's buffers. MHA_EFORMAT / MHA_ESHAPE /
 * MHA_ENOTFOUND with a message naming the tensor otherwise (nothing copied). */
int ckpt_load(const mha_st_file *f, const ckpt_layout *c, char *err, size_t errlen);

/* Check the checksums of a loaded file (see the top): MHA_OK when they all match or the
 * file has none; otherwise MHA_EFORMAT with a message naming the tensor (or the
 * metadata) whose bytes differ from their checksum, or the tensor without one. */
int ckpt_verify(const mha_st_file *f, char *err, size_t errlen);

/* Read the options of a checkpoint back into cfg (a config of opts' program, cfg_size
 * bytes):
 *   - the metadata "format" must equal `format`;
 *   - every option with ckpt != 0 must be present and parse (cli_parse), except that a
 *     checkpoint without an option of ckpt 3 or 4 (made before it existed) leaves cfg's
 *     value (the default unless given; for ckpt 4, giving it is refused, MHA_ESHAPE);
 *   - an option with ckpt == 1 or 4 given explicitly (explicit_opt[k]) with another value
 *     is refused (MHA_ESHAPE): "checkpoint <path> does not fit this run: it was made with
 *     --X a, this run asks for --X b";
 *   - then cfg takes every ckpt == 1 or 4 option it holds, and every ckpt == 2 or 3 option
 *     not given.
 * Other errors (MHA_EFORMAT) read "<prefix>: <what is wrong>". cfg is unchanged on error. */
int ckpt_config_from_meta(const mha_st_file *f, const char *path, const char *prefix,
                          const char *format, const cli_opt *opts, size_t n,
                          const int *explicit_opt, void *cfg, size_t cfg_size, char *err,
                          size_t errlen);

#endif /* TRAIN_CKPT_H */
