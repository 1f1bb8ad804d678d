/* The one symbol of the numerical library that src/status.c needs and the fuzzed parsers
 * never reach (mha_precision_available asks whether the CPU runs bf16): the harnesses link
 * the parsers' own sources, not libmha, whose GEMM kernels are GCC-only. */
int mha__bf16_available(void);
int mha__bf16_available(void) { return 0; }
