/* Checksums of checkpoints (the format: ckpt.h): the pieces ckpt_save writes with and
 * ckpt_verify checks with. Kept apart from ckpt.c (which needs the option tables of cli.h)
 * so that a reader with no training code — the G2P library, libmha_g2p — verifies a file
 * the same way. Nothing here prints, exits or aborts. */
#ifndef TRAIN_COMMON_CKPT_CRC_H
#define TRAIN_COMMON_CKPT_CRC_H

#include <stddef.h>
#include <stdint.h>

#include "mha_safetensors.h"
#include "util.h" /* util_set_err: the checkpoint code's one-line messages */

/* Bytes of a tensor name a checkpoint layout holds (ckpt.h). */
enum { CKPT_NAME_CAP = 128 };

#define CRC_PREFIX "crc32c."
#define CRC_META_KEY CRC_PREFIX "__metadata__"

/* 1 if k is a checksum key ("crc32c." …). */
int ckpt_is_crc_key(const char *k);
/* The CRC-32C of the pairs keys[i] → vals[i] that are not crc32c.* keys, sorted by key,
 * each as key NUL value NUL. MHA_ENOMEM. */
int ckpt_meta_crc(const char *const *keys, const char *const *vals, size_t n, uint32_t *out);
/* Bytes of a tensor's data as stored. */
size_t ckpt_tensor_bytes(const mha_st_tensor *t);
/* 1 if f holds checksums (any "crc32c." key), 0 for a file from before them: the loaders
 * then say so in a line, as its bytes cannot be verified. */
int ckpt_has_checksums(const mha_st_file *f);
/* Check every checksum a file holds (none: MHA_OK, a file from before checksums); the
 * first mismatch is MHA_EFORMAT with a message naming the tensor or the metadata. */
int ckpt_verify(const mha_st_file *f, char *err, size_t errlen);

#endif /* TRAIN_COMMON_CKPT_CRC_H */
