/* What both precisions of the GEMM module share (src/gemm.h): libxsmm's one-time
 * initialisation, the per-thread scratch, and the OpenBLAS build's threading kind. */
#include <pthread.h>
#include <stdlib.h>

#include <cblas.h>

#include "gemm.h"

#ifdef MHA_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

/* ---- libxsmm ---------------------------------------------------------------
 * Initialised once (pthread_once); verbosity 0 so that libxsmm never prints, whatever
 * LIBXSMM_VERBOSE says (the library never prints). LIBXSMM_TARGET (e.g. hsw) still picks
 * the instruction set of the generated code. Dispatch is thread-safe in libxsmm 1.17. */
static pthread_once_t xsmm_once = PTHREAD_ONCE_INIT;
static int xsmm_ok;
#ifdef MHA_HAVE_LIBXSMM
static int xsmm_avx; /* libxsmm generates AVX (or wider) code */
#endif

static void xsmm_init(void)
{
#ifdef MHA_HAVE_LIBXSMM
    libxsmm_init();
    libxsmm_set_verbosity(0);
    xsmm_ok = 1;
    xsmm_avx = libxsmm_get_target_archid() >= LIBXSMM_X86_AVX;
#else
    xsmm_ok = 0;
#endif
}

/* libxsmm 1.17's generated kernels return with the upper halves of the vector registers
 * dirty (no vzeroupper); the next legacy-SSE instruction of our baseline x86-64 code
 * then stalls (measured: ~150 ns per call on an AVX-512 Xeon, six times a 10×8×10
 * kernel). Clear them after every kernel when it may have used AVX. */
void mha__xsmm_after_kernel(void)
{
#if defined(MHA_HAVE_LIBXSMM) && defined(__x86_64__)
    if (xsmm_avx)
        __asm__ volatile("vzeroupper" ::: "memory");
#endif
}

int mha__gemm_have_xsmm(void)
{
    if (pthread_once(&xsmm_once, xsmm_init) != 0)
        return 0;
    return xsmm_ok;
}

/* ---- per-thread scratch ------------------------------------------------------
 * One block per thread, owned through a pthread key whose destructor frees it when the
 * thread exits (the main thread's block is still reachable at process exit). */
typedef struct scratch_block {
    size_t bytes; /* usable bytes after the header */
} scratch_block;
#define SCRATCH_HEADER 64 /* keeps the usable part 64-byte aligned */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, free) == 0; }

void *mha__gemm_scratch(size_t bytes)
{
    if (pthread_once(&scratch_once, scratch_init) != 0 || !scratch_key_ok)
        return NULL;
    scratch_block *b = pthread_getspecific(scratch_key);
    if (b != NULL && b->bytes >= bytes)
        return (unsigned char *)b + SCRATCH_HEADER;
    size_t want = bytes < 4096 ? 4096 : bytes, total;
    if (want > (size_t)-1 / 2 - SCRATCH_HEADER)
        return NULL;
    want += want / 2; /* grow by half again, so growing row counts do not reallocate each time */
    total = (SCRATCH_HEADER + want + 63) & ~(size_t)63;
    scratch_block *nb = aligned_alloc(64, total);
    if (nb == NULL)
        return NULL;
    if (pthread_setspecific(scratch_key, nb) != 0) {
        free(nb);
        return NULL;
    }
    free(b);
    nb->bytes = total - SCRATCH_HEADER;
    return (unsigned char *)nb + SCRATCH_HEADER;
}

/* ---- OpenBLAS ------------------------------------------------------------------ */
int mha__blas_kind(void)
{
    static int kind = -1; /* a benign race: every thread computes the same value */
    int k = __atomic_load_n(&kind, __ATOMIC_RELAXED);
    if (k < 0) {
        k = openblas_get_parallel();
        __atomic_store_n(&kind, k, __ATOMIC_RELAXED);
    }
    return k;
}
