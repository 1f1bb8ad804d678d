/* float64 instantiation of src/layers_core.inc: the mhad_* layers of include/mha_layers.h. */
#define REAL double
#define X(name) mhad_##name
#define PRIV(name) mha__d##name
#define GELU_TANH(u) tanh(u)
#include "mha_internal.h" /* every header first: then the float64 names */
#include "names_f64.h"
#include "layers_core.inc"
