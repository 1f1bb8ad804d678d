/*
 * The precision of a template unit, FFTW's way: src/gemm_core.c, mha_core.c, layers_core.c,
 * gpt_core.c, s2s_core.c and optim_core.c are each compiled twice (CMakeLists.txt: the object
 * libraries mha_obj and mha_obj_f64), as float and, with -DMHA_DOUBLE, as double. Each
 * includes this header first; it includes every header of the library, then defines
 *   REAL        float          | double
 *   X(name)     mha_name       | mhad_name     public type names and the calls of the
 *                                              templates (a public function is defined
 *                                              under its float name: names_f64.h renames
 *                                              it in the double unit)
 *   PRIV(name)  mha__sname     | mha__dname    internal functions (mha_internal.h,
 *                                              gpt_shared.inc)
 * A family's own precision-dependent macros (the exp of the softmax, the BLAS and libxsmm
 * entry points, GELU's tanh) follow it in the family's file.
 */
#ifndef MHA_REAL_H
#define MHA_REAL_H

#include "mha_internal.h" /* first: mha.h and every public header (the renames come after) */

#ifdef MHA_DOUBLE
#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name
#include "names_f64.h"
#else
#define REAL float
#define X(name) mha_##name
#define PRIV(name) mha__s##name
#endif

#endif /* MHA_REAL_H */
