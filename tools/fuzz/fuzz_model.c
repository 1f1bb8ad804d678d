/*
 * tools/fuzz (run.sh model): damaged G2P model files against libmha_g2p, built with
 * AddressSanitizer and UndefinedBehaviorSanitizer (GCC: the library's kernels need it, so
 * this is a mutation loop, not libFuzzer). Each round takes the model's tensors and
 * metadata, drops the checksums (a file without them is opened, as older files are), and
 * makes one to three changes to the metadata — a value replaced by a hostile one ("", "-1",
 * "1e308", "nan", a 2^64, broken JSON, another format), a key dropped, bytes of a value
 * edited (the vocabularies' JSON too) — and, every other round, one to a tensor: its dims
 * swapped, a dim made 1, float32 data declared bfloat16 or float16 (finite values far beyond
 * any trained weight), or the tensor left out. The file is opened; when it opens, four
 * words (one hyphenated) are pronounced with two answers, then with a beam of 3.
 * A finding: a sanitizer report (the process stops, status 1), or an answer with a score
 * that is not finite (said, status 1). A refusal (a status and a message) is the expected
 * outcome of most rounds.
 *
 *   fuzz_model MODEL SECONDS SEED
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mha.h"
#include "mha_g2p.h"
#include "mha_safetensors.h"

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) /* xorshift64 */
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static const char *const HOSTILE[] = {
    "", "0", "-1", "1", "2", "3", "5", "7", "1e308", "nan", "inf", "-inf",
    "18446744073709551616", "4294967297", "2147483648", "65536", "256", "257", "4096",
    "1000000000", " 4", "4 ", "0x10", "1.5", "[", "]", "[]", "{}", "null", "\"x\"",
    "[\"<pad>\"]", "[\"<pad>\",\"<s>\",\"</s>\"]", "[1,2,3]", "[\"a\",\"a\"]",
    "[\"<pad>\",\"A\",\"A\"]", "auto", "tsv", "cmudict", "bf16", "fp32", "yes", "true",
    "\xff\xfe", "mha-g2p/1", "mha-g2p/2", "mha-gpt/1"};
enum { N_HOSTILE = sizeof HOSTILE / sizeof *HOSTILE, MAX_EDITS = 3 };

/* One to three changes to the metadata v[0 .. *n) (keys k); edited values in own[]. */
static void mutate_meta(const char **k, const char **v, size_t *n, char **own)
{
    const int edits = 1 + (int)(rnd() % MAX_EDITS);
    for (int m = 0; m < edits && *n > 0; m++) {
        const size_t i = rnd() % *n;
        const int op = (int)(rnd() % 4);
        if (op == 0) {
            v[i] = HOSTILE[rnd() % N_HOSTILE];
        } else if (op == 1 && *n > 1) { /* the key dropped */
            k[i] = k[*n - 1];
            v[i] = v[*n - 1];
            (*n)--;
        } else { /* bytes of the value edited */
            static const char pool[] = "\"[],:\\0123456789-eE.AaZ<>/ \x01\x7f\xc3\xa9";
            const size_t len = strlen(v[i]);
            char *b = malloc(len + 1);
            if (!b)
                exit(2);
            memcpy(b, v[i], len + 1);
            for (int e = 0; e < 3 && len > 0; e++)
                b[rnd() % len] = pool[rnd() % (sizeof pool - 1)];
            free(own[m]);
            own[m] = b;
            v[i] = b;
        }
    }
}

/* One change to one tensor of t[0 .. *n), or none every other round. */
static void mutate_tensor(mha_st_tensor *t, size_t *n)
{
    if (rnd() % 2 || *n == 0)
        return;
    const size_t i = rnd() % *n;
    switch (rnd() % 4) {
    case 0:
        if (t[i].ndim == 2) {
            const size_t a = t[i].shape[0];
            t[i].shape[0] = t[i].shape[1];
            t[i].shape[1] = a;
        }
        break;
    case 1:
        if (t[i].ndim > 0)
            t[i].shape[rnd() % t[i].ndim] = 1;
        break;
    case 2: /* its first half read as 16-bit floats */
        if (t[i].dtype == MHA_ST_F32)
            t[i].dtype = rnd() % 2 ? MHA_ST_BF16 : MHA_ST_F16;
        break;
    default:
        t[i] = t[*n - 1];
        (*n)--;
    }
}

/* Pronounce a few words with g; 1 when an answer's score is not finite. */
static int pronounce_some(mha_g2p *g, long round)
{
    static const char *const words[] = {"hello", "xylophone", "a-b", "zzz'q"};
    char err[512];
    int bad = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && mha_g2p_set_beam(g, 3, 1.0) != MHA_OK)
            break;
        for (int w = 0; w < 4; w++) {
            mha_g2p_pron out[2];
            size_t n = 0;
            if (mha_g2p_pronounce(g, words[w], MHA_G2P_NO_LEXICON, 2, out, &n, err,
                                  sizeof err) != MHA_OK)
                continue;
            for (size_t q = 0; q < n; q++)
                if (!(out[q].logprob <= 0)) {
                    printf("round %ld: %s answered '%s' with log-probability %g\n", round,
                           words[w], out[q].phones, out[q].logprob);
                    bad = 1;
                }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_model MODEL SECONDS SEED\n");
        return 2;
    }
    const double seconds = atof(argv[2]);
    rs ^= strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL;
    mha_st_file *f = NULL;
    char err[512], tmp[64];
    if (mha_st_load(argv[1], &f, err, sizeof err) != MHA_OK) {
        fprintf(stderr, "fuzz_model: %s\n", err);
        return 2;
    }
    const size_t nt = mha_st_count(f), nm0 = mha_st_meta_count(f);
    mha_st_tensor *t0 = calloc(nt, sizeof *t0), *t = calloc(nt, sizeof *t);
    const char **k0 = calloc(nm0 + 1, sizeof *k0), **v0 = calloc(nm0 + 1, sizeof *v0);
    const char **k = calloc(nm0 + 1, sizeof *k), **v = calloc(nm0 + 1, sizeof *v);
    char *own[MAX_EDITS] = {0};
    if (!t0 || !t || !k0 || !v0 || !k || !v)
        return 2;
    size_t nm = 0;
    for (size_t i = 0; i < nt; i++)
        mha_st_tensor_at(f, i, &t0[i]);
    for (size_t i = 0; i < nm0; i++) {
        const char *key, *val;
        mha_st_meta_at(f, i, &key, &val);
        if (strncmp(key, "crc32c.", 7) != 0) { /* the checksums dropped */
            k0[nm] = key;
            v0[nm++] = val;
        }
    }
    snprintf(tmp, sizeof tmp, "/dev/shm/fuzz_model_%d.safetensors", (int)getpid());
    long rounds = 0, opened = 0, findings = 0;
    const time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) {
        size_t n = nm, ntt = nt;
        memcpy(k, k0, nm * sizeof *k);
        memcpy(v, v0, nm * sizeof *v);
        memcpy(t, t0, nt * sizeof *t);
        mutate_meta(k, v, &n, own);
        mutate_tensor(t, &ntt);
        rounds++;
        if (mha_st_save(tmp, t, ntt, k, v, n, err, sizeof err) != MHA_OK)
            continue;
        mha_g2p *g = NULL;
        if (mha_g2p_open(&g, tmp, 1, err, sizeof err) != MHA_OK)
            continue;
        opened++;
        size_t bytes;
        (void)mha_g2p_memory(g, &bytes);
        findings += pronounce_some(g, rounds);
        mha_g2p_close(g);
    }
    unlink(tmp);
    printf("fuzz_model: %ld rounds, %ld files opened, %ld findings\n", rounds, opened, findings);
    for (int m = 0; m < MAX_EDITS; m++)
        free(own[m]);
    free(t0), free(t), free(k0), free(v0), free(k), free(v);
    mha_st_free(f);
    return findings ? 1 : 0;
}
