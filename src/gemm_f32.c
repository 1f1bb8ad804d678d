/* float32 instantiation of src/gemm_core.inc: mha__sgemm* symbols. */
#define REAL float
#define PRIV(name) mha__s##name
#define CBLAS_GEMM cblas_sgemm
#define XSMM_DISPATCH libxsmm_smmdispatch
#define XSMM_FN libxsmm_smmfunction
#include "gemm_core.inc"
