/* The double instantiation of the tiny model (tmd_*), for gradient checks. */
#include "toy_model.h"

#define TM_REAL double
#define TM_NAME(n) tmd_##n
#define TM_MHA(n) mhad_##n
#define TM_GEMM(...) mha__dgemm(1, __VA_ARGS__, NULL)
#include "toy_model_impl.inc"
