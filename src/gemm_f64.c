/* float64 instantiation of src/gemm_core.inc: mha__dgemm* symbols. */
#define REAL double
#define PRIV(name) mha__d##name
#define CBLAS_GEMM cblas_dgemm
#define XSMM_DISPATCH libxsmm_dmmdispatch
#define XSMM_FN libxsmm_dmmfunction
#include "gemm_core.inc"
