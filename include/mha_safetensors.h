/*
 * Safetensors files: a reader, an atomic writer, and conversions between float and the
 * 16-bit float formats (bfloat16, IEEE half). The library's models save and load their
 * parameters in this format under their PyTorch state_dict names (mha_gpt_save,
 * mha_s2s_save in mha_gpt.h, mha_s2s.h). These functions are the library's only file I/O.
 *
 * File layout (https://github.com/huggingface/safetensors, "Format"):
 *   bytes [0, 8)          N: unsigned 64-bit little-endian size of the header
 *   bytes [8, 8+N)        UTF-8 JSON object, starting with '{', optionally padded at the end
 *                         with spaces (0x20):
 *                           { "__metadata__": {"key": "value", ...},        (optional, strings only)
 *                             "<name>": {"dtype": "F32", "shape": [d0, d1, ...],
 *                                        "data_offsets": [begin, end]}, ... }
 *   bytes [8+N, size)     the data section; tensor <name> occupies [8+N+begin, 8+N+end),
 *                         little-endian, row-major ('C' order). The ranges tile the data
 *                         section exactly: no overlap, no hole, nothing after the last one.
 *   end − begin = product(shape) · element size; shape [] is a scalar (1 element), a 0 in the
 *   shape is an empty tensor (0 bytes).
 *
 * What mha_st_save writes, beyond the format's rules:
 *   - N is a multiple of 8 (header padded with spaces), so the data section starts at an
 *     8-byte aligned file offset;
 *   - tensors are laid out in the data section by decreasing element size (8-byte dtypes,
 *     then 4-byte (F32, I32), then 2-byte (BF16, F16), then U8; caller order within a
 *     size), so every tensor starts at a file
 *     offset that is a multiple of its element size: a reader can mmap the file and use the
 *     tensors in place;
 *   - header keys are in caller order, "__metadata__" first when n_meta > 0.
 *
 * What mha_st_load accepts: any file that follows the format with dtypes from mha_st_dtype
 * and at most 4 dimensions, with header entries in any order and with or without padding.
 *
 * Errors: every function that can fail returns MHA_OK (0) or a negative MHA_ status from
 * <mha.h>, and writes a one-line human message (no newline) to err[errlen] when err != NULL
 * and errlen > 0 (truncated to fit; err is left untouched on success).
 * Nothing here prints, exits or aborts. Handles may be used from several threads at once
 * for reading. One caveat on threads: cJSON writes a static error pointer on every parse,
 * so mha_st_load calls running at the same time race on it (this code never reads it;
 * harmless in practice, but ThreadSanitizer would report it).
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_SAFETENSORS_H
#define MHA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, as the file spells them. Other safetensors dtypes (I8, I16, U16, U32, BOOL,
 * F8_*, ...) are refused by mha_st_load and mha_st_save. Values are little-endian (the
 * native order: big-endian hosts are refused). */
typedef enum mha_st_dtype {
    MHA_ST_F32,  /* "F32"  float, 4 bytes                                              */
    MHA_ST_F64,  /* "F64"  double, 8 bytes                                             */
    MHA_ST_I64,  /* "I64"  int64_t, 8 bytes                                            */
    MHA_ST_U64,  /* "U64"  uint64_t, 8 bytes                                           */
    MHA_ST_U8,   /* "U8"   uint8_t, 1 byte                                             */
    MHA_ST_BF16, /* "BF16" bfloat16 (float's top 16 bits: 1 sign, 8 exponent, 7 fraction),
                    stored as uint16_t, 2 bytes                                         */
    MHA_ST_F16,  /* "F16"  IEEE 754 binary16 (1 sign, 5 exponent, 10 fraction), stored as
                    uint16_t, 2 bytes                                                   */
    MHA_ST_I32   /* "I32"  int32_t, 4 bytes                                             */
} mha_st_dtype;

/* Most dimensions a tensor may have (the size of mha_st_tensor.shape). */
enum { MHA_ST_MAX_NDIM = 4 };

/* One tensor to save, or the description of a loaded one (mha_st_tensor_at).
 *   name   NUL-terminated UTF-8, not "__metadata__", unique within a file
 *   shape  shape[0..ndim) used, ndim <= 4; ndim == 0 is a scalar
 *   data   product(shape) elements of dtype, row-major, native (= little-endian) order;
 *          may be NULL only when that product is 0 */
typedef struct mha_st_tensor {
    const char *name;
    mha_st_dtype dtype;
    size_t ndim;
    size_t shape[MHA_ST_MAX_NDIM];
    const void *data;
} mha_st_tensor;

/* "F32", "F64", "I64", "U64", "U8", "BF16", "F16", "I32"; NULL for a value outside
 * mha_st_dtype. Static storage. */
MHA_API const char *mha_st_dtype_name(mha_st_dtype dtype);
/* Bytes per element (4, 8, 8, 8, 1, 2, 2, 4); 0 for a value outside mha_st_dtype. */
MHA_API size_t mha_st_dtype_size(mha_st_dtype dtype);

/* Write tensors[0..n) and the metadata pairs (meta_keys[i] → meta_values[i], i < n_meta;
 * both arrays may be NULL when n_meta == 0) to `path`, atomically:
 *   1. validate everything (names valid UTF-8, unique, not "__metadata__"; dtype known;
 *      ndim <= 4; data non-NULL unless empty; metadata keys unique and valid UTF-8;
 *      byte counts product(shape)·size and their sum fit in size_t and in 2^53);
 *   2. write 8 + N + Σ bytes to "<path>.tmp.<pid>" (created O_EXCL, mode 0666 & ~umask),
 *      fflush + fsync + fclose;
 *   3. rename it over `path`; 4. fsync the directory containing `path`.
 * On any failure in 1–3 the previous file at `path` (if any) is untouched and the temporary
 * is removed. A failure in 4 returns MHA_EIO although the new file is already in place
 * (its durability across a power loss is then unknown; the message says so).
 * Returns MHA_OK; MHA_EINVAL (bad argument, big-endian host), MHA_EOVERFLOW (sizes),
 * MHA_ENOMEM, MHA_EIO (open/write/fsync/rename failed: errno text in err).
 * Nothing is retained: the caller keeps ownership of every pointer passed in.
 * Like any rename-based save: the new file gets a fresh mode (0666 & ~umask), a symlink at
 * `path` is replaced rather than followed, and two threads of one process must not save to
 * the same path at the same time (they would share the temporary's name; separate
 * processes are fine, the last rename wins). */
MHA_API int mha_st_save(const char *path, const mha_st_tensor *tensors, size_t n,
                        const char *const *meta_keys, const char *const *meta_values,
                        size_t n_meta, char *err, size_t errlen);

/* A loaded file: the whole file in memory, validated. Opaque. */
typedef struct mha_st_file mha_st_file;

/* Read the whole file at `path` into memory and validate it (see the layout above):
 * size field vs file size (header at most 100,000,000 bytes, as the reference reader),
 * header is UTF-8 JSON starting with '{' followed only by whitespace, holding only objects,
 * arrays, strings and integers, no "\u0000" in any string, no duplicate key at any level;
 * every tensor entry has exactly the keys dtype (a mha_st_dtype name), shape (0..4 integers
 * >= 0) and data_offsets (2 integers, begin <= end) with end − begin == product(shape) ·
 * element size (overflow-checked); the ranges tile the data section exactly;
 * "__metadata__", if present, is an object of strings.
 * On success *out is an owned handle (free with mha_st_free) and MHA_OK is returned.
 * Errors (*out set to NULL): MHA_EIO (cannot open or read: errno text in err),
 * MHA_EFORMAT (anything wrong with the contents, including truncation: err names the
 * problem and the tensor), MHA_ENOMEM, MHA_EINVAL (path or out NULL).
 * The header is read and validated first, against the file's size: a malformed file is
 * refused after reading at most 8 bytes + the header (<= 100 MB), however large it is;
 * the data section is read only when the header's tensors account for it exactly. A path
 * that is not a regular file (a FIFO, a device, a directory) is refused without waiting
 * for a writer (MHA_EIO).
 * Tensor data pointers are always aligned for their dtype: the data section is read into
 * its own allocation (malloc's alignment), and a tensor whose offset is not a multiple of
 * its element size (possible only in files from other writers) is copied once, at load,
 * into its own aligned allocation. */
MHA_API int mha_st_load(const char *path, mha_st_file **out, char *err, size_t errlen);

/* Free a handle from mha_st_load and everything borrowed from it. NULL is a no-op. */
MHA_API void mha_st_free(mha_st_file *f);

/* Find tensor `name` and check it is exactly dtype with shape[0..ndim) (ndim <= 4; shape
 * may be NULL when ndim == 0). On success *data (when data != NULL) receives a borrowed
 * pointer to its product(shape) elements — read-only, aligned for dtype, valid until
 * mha_st_free(f) — and MHA_OK is returned. Errors, with *data untouched:
 * MHA_ENOTFOUND (no such name), MHA_EFORMAT (the file has another dtype),
 * MHA_ESHAPE (same dtype, other shape), MHA_EINVAL (f or name NULL, ndim > 4, dtype
 * outside mha_st_dtype, shape NULL with ndim > 0). err shows the file's and the expected
 * dtype and shape. */
MHA_API int mha_st_get(const mha_st_file *f, const char *name, mha_st_dtype dtype, size_t ndim,
                       const size_t *shape, const void **data, char *err, size_t errlen);

/* Tensor `name` as float: it must have exactly shape[0..ndim) and one of the float dtypes
 * F32, F64, BF16, F16; its product(shape) elements are converted (mha_st_to_f32) into
 * out[product(shape)] (out may be NULL only when that product is 0). MHA_OK; errors, with
 * out untouched: MHA_ENOTFOUND, MHA_ESHAPE (another shape), MHA_EFORMAT (an integer
 * dtype), MHA_EINVAL (as mha_st_get). Values are not checked: a NaN stays NaN, an F64 beyond
 * float's range becomes ±inf. */
MHA_API int mha_st_get_f32(const mha_st_file *f, const char *name, size_t ndim,
                           const size_t *shape, float *out, char *err, size_t errlen);

/* Value of metadata key `key`, or NULL if the file has no such key (or f/key is NULL).
 * Borrowed: valid until mha_st_free(f). */
MHA_API const char *mha_st_meta(const mha_st_file *f, const char *key);

/* Number of metadata pairs (0 for f == NULL or a file without "__metadata__"). */
MHA_API size_t mha_st_meta_count(const mha_st_file *f);
/* Metadata pair i (< mha_st_meta_count(f)), in the header's order, into *key and *value
 * (borrowed: valid until mha_st_free(f)). MHA_EINVAL if i is out of range or an argument
 * is NULL. */
MHA_API int mha_st_meta_at(const mha_st_file *f, size_t i, const char **key, const char **value);

/* Number of tensors (0 for f == NULL). */
MHA_API size_t mha_st_count(const mha_st_file *f);
/* Name of tensor i, 0 <= i < mha_st_count(f), in the order of the JSON header (for files
 * from mha_st_save: the caller's order); NULL when i is out of range or f is NULL. Borrowed:
 * valid until mha_st_free(f). */
MHA_API const char *mha_st_name(const mha_st_file *f, size_t i);
/* Description of tensor i (same order as mha_st_name) into *out: name, dtype, ndim, shape
 * (shape[ndim..4) set to 0) and data (borrowed, aligned, valid until mha_st_free(f)).
 * MHA_EINVAL if f or out is NULL or i >= mha_st_count(f). */
MHA_API int mha_st_tensor_at(const mha_st_file *f, size_t i, mha_st_tensor *out);

/* ---- Conversions between float and the stored float formats --------------------------
 * mha_st_to_f32: src[n] of dtype F32, F64, BF16 or F16 → dst[n] float.
 *   BF16 and F16 widen exactly (F16 subnormals included); F64 rounds to nearest, ties to
 *   even, beyond float's range to ±inf; NaN stays NaN, ±inf stays ±inf.
 * mha_st_from_f32: src[n] float → dst[n] of dtype F32, F64, BF16 or F16.
 *   F32 copies, F64 widens exactly; BF16 and F16 round to nearest, ties to even (never
 *   truncate): a value beyond the largest finite one (after rounding) becomes ±inf
 *   (F16: |x| >= 65520; BF16: e.g. FLT_MAX), F16 subnormals (multiples of 2^-24 below
 *   2^-14) are rounded exactly, smaller values to ±0; float subnormals become BF16
 *   subnormals (as torch's .to(torch.bfloat16)); NaN stays a quiet NaN of the same sign.
 *   BF16 and F16 elements are uint16_t bit patterns (the file's little-endian bytes).
 * src and dst must not overlap. Both return MHA_OK, or MHA_EINVAL (another dtype, or a NULL
 * pointer with n > 0) with nothing written. */
MHA_API int mha_st_to_f32(mha_st_dtype dtype, const void *src, float *dst, size_t n);
MHA_API int mha_st_from_f32(mha_st_dtype dtype, const float *src, void *dst, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* MHA_SAFETENSORS_H */
