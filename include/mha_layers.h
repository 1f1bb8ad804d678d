/*
 * The layers a small transformer is built from, each a forward and a hand-written
 * backward, in float32 (mha_NAME) and float64 (mhad_NAME) from one source — the same
 * contract as the attention module (mha.h):
 *
 *   - functions return MHA_OK (0) or a negative MHA_ status; on error nothing is written;
 *   - forward functions take the buffers their backward reads (saved activations) from
 *     the caller, who owns every buffer: nothing is allocated, nothing is hidden;
 *   - backward functions ACCUMULATE (+=) into every gradient they write (parameter and
 *     input gradients alike); a NULL gradient pointer skips that gradient;
 *   - threads: the loops run on as many threads as the calling thread's OpenMP setting
 *     (omp_get_max_threads(); the GPT model sets it from its config), the library's
 *     own (README, "Sharing the machine"). Every result is
 *     independent of the thread count except for BLAS's own summation order in GEMMs,
 *     and dropout masks do not depend on it at all;
 *   - nothing prints, exits or aborts.
 *
 * Letters: N rows (e.g. B·T), C features, F hidden features of the MLP (4C in GPT-2),
 * V vocabulary, B batch, T sequence length. Every tensor is dense and row-major.
 * Output buffers must not overlap inputs unless a comment says so.
 *
 * Part of <mha.h>; may be included on its own.
 */
#ifndef MHA_LAYERS_H
#define MHA_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "mha_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bit-packed keep mask of a dropout layer: bit i of word i/64 (i % 64 from the
 * least significant bit) is 1 when element i was kept. */
#define MHA_DROPOUT_WORDS(n) (((n) + 63) / 64)

#define MHA_REAL float
#define MHA_NAME(n) mha_##n
#include "mha_layers_api.h"
#undef MHA_REAL
#undef MHA_NAME

#define MHA_REAL double
#define MHA_NAME(n) mhad_##n
#include "mha_layers_api.h"
#undef MHA_REAL
#undef MHA_NAME

#ifdef __cplusplus
}
#endif

#endif /* MHA_LAYERS_H */
