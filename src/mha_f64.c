/* float64 instantiation of src/mha_core.inc: mhad_* and mha__d* symbols. */
#include <cblas.h>
#include <math.h>

#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name
#define REAL_EXP exp
#define CBLAS_GEMM cblas_dgemm
#include "mha_core.inc"
