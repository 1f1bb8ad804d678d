/* float32 instantiation of src/mha_core.inc: mha_* and mha__s* symbols. */
#include <cblas.h>
#include <math.h>

#define REAL float
#define X(name) mha_##name           /* public names  */
#define PRIV(name) mha__s##name         /* internal names */
#define REAL_EXP expf
#define REAL_EXP_ZERO (-110.0) /* expf(x) == 0 for x < −103.98 */
#include "mha_core.inc"
