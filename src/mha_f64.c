/* float64 instantiation of src/mha_core.inc: mhad_* and mha__d* symbols. */
#include <cblas.h>
#include <math.h>

#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name
#define REAL_EXP exp
#define REAL_EXP_ZERO (-750.0) /* exp(x) == 0 for x < −745.14 */
#include "mha_internal.h" /* every header first: then the float64 names */
#include "names_f64.h"
#include "mha_core.inc"
