/* The double instantiation of the tiny model (tmd_*), for gradient checks. */
#include "toy_model.h"

#define TM_REAL double
#define TM_NAME(n) tmd_##n
#define TM_MHA(n) mhad_##n
#include "toy_model_impl.inc"
