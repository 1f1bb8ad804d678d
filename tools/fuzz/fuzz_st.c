/* tools/fuzz (run.sh), libFuzzer: mha_st_load of arbitrary bytes, then every accessor and
 * conversion on what it accepts. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mha.h"
#include "mha_safetensors.h"

static char path[64];
static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        snprintf(path, sizeof path, "/dev/shm/fuzz_st_%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    mha_st_file *st = NULL;
    char err[256];
    if (mha_st_load(path, &st, err, sizeof err) != MHA_OK)
        return 0;
    for (size_t i = 0; i < mha_st_meta_count(st); i++) {
        const char *k, *v;
        assert(mha_st_meta_at(st, i, &k, &v) == MHA_OK && k && v);
        assert(mha_st_meta(st, k) != NULL);
    }
    for (size_t i = 0; i < mha_st_count(st); i++) {
        mha_st_tensor t;
        assert(mha_st_tensor_at(st, i, &t) == MHA_OK);
        assert(mha_st_name(st, i) != NULL);
        size_t n = 1;
        for (size_t d = 0; d < t.ndim; d++)
            n *= t.shape[d];
        if (n > 0 && n < (1u << 20)) {
            float *out = malloc(n * sizeof *out);
            if (mha_st_to_f32(t.dtype, t.data, out, n) == MHA_OK)
                sink = out[n - 1];
            free(out);
        }
        size_t shape[8] = {0};
        for (size_t d = 0; d < t.ndim && d < 8; d++)
            shape[d] = t.shape[d];
        if (t.ndim <= 8)
            (void)mha_st_get(st, t.name, t.dtype, t.ndim, shape, NULL, err, sizeof err);
    }
    mha_st_free(st);
    return 0;
}
