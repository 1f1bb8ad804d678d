/*
 * libmha_g2p: pronunciations as a library (include/mha_g2p.h). A model of mha-g2p train
 * (its configuration, vocabularies and checksums in the file's metadata) decoded with the
 * encoder–decoder's caches (mha_s2s_infer), and lexicons read by the trainer's own
 * dictionary reader (g2p_data.h), looked up through a hash of their words.
 */
#include "mha_g2p.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ckpt_crc.h"
#include "g2p_data.h"
#include "g2p_internal.h"
#include "g2p_rescore.h"
#include "mha.h"
#include "mha_s2s.h"
#include "mha_safetensors.h"

#define G2P_FORMAT "mha-g2p/1"
/* The sizes that set the memory of decoding (the key/value caches hold DECODE_ROWS rows,
 * the encoder's activations ENCODE_BATCH words); a build may choose others. Chosen with
 * bench/g2p_rows.sh (pronounce, 12,362 words, 2 threads): 128/16 ran greedy at 1,944 words/s
 * in 93 MiB, 64/8 at 1,673 in 62 MiB (beam 4: 779 → 709 words/s, 94 → 63 MiB), 32/8 at
 * 1,633 in 50 MiB (beam 4 620): 64/8 keeps both under 64 MiB for the least speed. */
#ifndef MHA_G2P_ENCODE_BATCH
#define MHA_G2P_ENCODE_BATCH 8
#endif
#ifndef MHA_G2P_DECODE_ROWS
#define MHA_G2P_DECODE_ROWS 64
#endif
enum {
    ENCODE_BATCH = MHA_G2P_ENCODE_BATCH, /* words the model's encoder takes at once       */
    DECODE_ROWS = MHA_G2P_DECODE_ROWS,   /* hypotheses decoded at once (/ beam: words)    */
    SHOWN_BYTES = 64,   /* of a word in a message                                         */
    MAX_MODELS = 8      /* of an ensemble                                                 */
};

typedef struct lexicon {
    g2p_dict d; /* looked up with g2p_dict_find: the table its parse made */
} lexicon;

/* One answer while a call runs: its phones are arena[off ..] (pointers are made at the
 * end, as the arena may move while it grows). */
typedef struct answer {
    size_t off, word_off;
    double logprob;
    int source, lexicon;
} answer;

struct mha_g2p {
    size_t n_models;
    mha_s2s *m[MAX_MODELS];      /* m[0] the model opened, the others its ensemble       */
    mha_s2s_infer *inf[MAX_MODELS];
    int threads;
    int unverified; /* a model without checksums was opened */
    int reverse;    /* the models write right to left (answers are turned around)       */
    mha_s2s *rm[MAX_MODELS];     /* rescoring models (mha_g2p_add_rescorer)               */
    size_t n_rm;
    int rm_reverse;              /* they write right to left                              */
    double rweight;              /* mha_g2p_set_rescore_weight                            */
    g2p_rescorer resc;           /* their caches, remade when one is added                */
    size_t *perm;                /* [DECODE_ROWS] the rescored order of a batch's lists   */
    g2p_vocab src, tgt;
    size_t max_src, max_tgt, beam;
    double alpha;
    char data[4096];
    lexicon *lex;
    size_t n_lex;
    char *arena; /* the strings of the answers of the last call                          */
    size_t arena_len, arena_cap;
    answer *ans;
    size_t n_ans, cap_ans;
    /* decoding scratch, grown as needed */
    int32_t *ids, *srcbuf, *tok;
    size_t *ids_off, *ids_len, *order, *lens, *tlen;
    double *lp;
    mha_s2s_hyp *hyps;
};

/* One-line messages: the g2p sources' formatter (g2p_internal.h). */
#define set_err(err, errlen, ...) ((void)g2p__fail(MHA_OK, (err), (errlen), __VA_ARGS__))

/* word[len] as a message shows it: quoted, a word of more than SHOWN_BYTES bytes cut after
 * its first SHOWN_BYTES (up to 3 fewer, to end on a whole UTF-8 character), followed by
 * "..." and its length, so a huge word gives a short message. */
static const char *shown(const char *word, char *buf, size_t cap)
{
    const size_t len = strlen(word);
    size_t keep = len;
    if (len > SHOWN_BYTES) {
        keep = SHOWN_BYTES;
        while (keep > SHOWN_BYTES - 3 && ((unsigned char)word[keep] & 0xC0) == 0x80)
            keep--;
    }
    if (keep < len)
        snprintf(buf, cap, "'%.*s...' (%zu bytes)", (int)keep, word, len);
    else
        snprintf(buf, cap, "'%s'", word);
    return buf;
}

/* ---- opening a model ------------------------------------------------------------------ */

/* Metadata key as a size in [lo, hi]. */
static int meta_size(const mha_st_file *f, const char *key, size_t lo, size_t hi, size_t *v,
                     const char *path, char *err, size_t errlen)
{
    const char *s = mha_st_meta(f, key);
    char *end = NULL;
    unsigned long long x = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!s || !end || *end != '\0' || x < lo || x > hi) {
        set_err(err, errlen, "%s: metadata \"%s\" is %s%s%s, not a number in [%zu, %zu] "
                "(not a model of mha-g2p?)", path, key, s ? "\"" : "", s ? s : "missing",
                s ? "\"" : "", lo, hi);
        return MHA_EFORMAT;
    }
    *v = (size_t)x;
    return MHA_OK;
}

/* Vocabulary of metadata key (a JSON array of strings). */
static int meta_vocab(const mha_st_file *f, const char *key, size_t n_special, g2p_vocab *v,
                      const char *path, char *err, size_t errlen)
{
    const char *s = mha_st_meta(f, key);
    cJSON *a = s ? cJSON_Parse(s) : NULL;
    const size_t n = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
    int st = MHA_OK;
    const char **sym = NULL;
    if (n <= n_special || n > 1000000) {
        set_err(err, errlen, "%s: metadata \"%s\" is not a vocabulary (not a model of "
                "mha-g2p?)", path, key);
        st = MHA_EFORMAT;
    } else if (!(sym = calloc(n, sizeof *sym))) {
        set_err(err, errlen, "out of memory");
        st = MHA_ENOMEM;
    }
    size_t i = 0;
    for (cJSON *e = st == MHA_OK ? a->child : NULL; e; e = e->next, i++) {
        if (!cJSON_IsString(e)) {
            set_err(err, errlen, "%s: metadata \"%s\": entry %zu is not a string", path, key,
                    i);
            st = MHA_EFORMAT;
            break;
        }
        sym[i] = e->valuestring;
    }
    char e2[256];
    if (st == MHA_OK && (st = g2p_vocab_make(v, sym, n, n_special, e2, sizeof e2)) != MHA_OK)
        set_err(err, errlen, "%s: metadata \"%s\": %s", path, key, e2);
    free(sym);
    cJSON_Delete(a);
    return st;
}

/* The training state a model of mha-g2p train carries (when it has one: a model saved by
 * mha_s2s_save with the metadata has none) is consistent, by the trainer's rule: train.step
 * within the --steps it was made with, best.step not past it, best.val_wer a rate in [0, 1]
 * or +inf (with best.step 0) before the first evaluation. A file failing it was damaged. */
static int check_state(const mha_st_file *f, const char *path, char *err, size_t errlen)
{
    char e2[512];
    const void *d;
    uint64_t step = 0, best = 0, made;
    double wer = 0.0;
    if (mha_st_get(f, "train.step", MHA_ST_U64, 0, NULL, &d, NULL, 0) == MHA_ENOTFOUND)
        return MHA_OK;
    const char *ms = mha_st_meta(f, "steps");
    char *end = NULL;
    made = ms && *ms >= '0' && *ms <= '9' ? strtoull(ms, &end, 10) : 0;
    if (!ms || !end || *end != '\0' || made == 0) {
        set_err(err, errlen, "%s: metadata steps is missing or not a step count", path);
        return MHA_EFORMAT;
    }
    static const char *const names[3] = {"train.step", "best.step", "best.val_wer"};
    for (int i = 0; i < 3; i++) {
        if (mha_st_get(f, names[i], i < 2 ? MHA_ST_U64 : MHA_ST_F64, 0, NULL, &d, e2,
                       sizeof e2) != MHA_OK) {
            set_err(err, errlen, "%s: %s", path, e2);
            return MHA_EFORMAT;
        }
        if (i == 0)
            memcpy(&step, d, sizeof step);
        else if (i == 1)
            memcpy(&best, d, sizeof best);
        else
            memcpy(&wer, d, sizeof wer);
    }
    if (step > made)
        set_err(err, errlen, "%s: inconsistent state: train.step %llu is past the --steps %llu "
                "it was made with", path, (unsigned long long)step, (unsigned long long)made);
    else if (best > step)
        set_err(err, errlen, "%s: inconsistent state: best.step %llu is past train.step %llu",
                path, (unsigned long long)best, (unsigned long long)step);
    else if (!(wer >= 0) || (isinf(wer) != (best == 0)) || (!isinf(wer) && wer > 1))
        set_err(err, errlen, "%s: inconsistent state: best.val_wer %g at best.step %llu (a word "
                "error rate is in [0, 1], or +inf before the first evaluation)", path, wer,
                (unsigned long long)best);
    else
        return MHA_OK;
    return MHA_EFORMAT;
}

/* Metadata "reverse": 1 for a right-to-left model, 0 (or absent: a model older than the
 * option) for the others. */
static int meta_reverse(const mha_st_file *f, const char *path, int *reverse, char *err,
                        size_t errlen)
{
    const char *s = mha_st_meta(f, "reverse");
    *reverse = s && strcmp(s, "1") == 0;
    if (s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0) {
        set_err(err, errlen, "%s: metadata \"reverse\" is '%.40s', not 0 or 1", path, s);
        return MHA_EFORMAT;
    }
    return MHA_OK;
}

/* The model of file f (configuration, vocabularies, weights) into g->m[g->n_models], or
 * into g->rm[g->n_rm] when rescorer (the vocabularies, sizes and direction into g for the
 * first; the others must have the same, and those of one list the same direction). */
static int load_model(mha_g2p *g, const mha_st_file *f, const char *path, int threads,
                      int rescorer, char *err, size_t errlen)
{
    const size_t slot = rescorer ? g->n_rm : g->n_models;
    g2p_vocab src = {0}, tgt = {0};
    const char *fmt = mha_st_meta(f, "format");
    if (!fmt || strcmp(fmt, G2P_FORMAT) != 0) {
        set_err(err, errlen, "%s is not a model of mha-g2p (its format is %s)", path,
                fmt ? fmt : "not given");
        return MHA_EFORMAT;
    }
    size_t le, ld, heads, dim, mlp, sc, tc;
    int st, reverse;
    if ((st = check_state(f, path, err, errlen)) ||
        (st = meta_reverse(f, path, &reverse, err, errlen)) ||
        (st = meta_size(f, "enc-layers", 1, 64, &le, path, err, errlen)) ||
        (st = meta_size(f, "dec-layers", 1, 64, &ld, path, err, errlen)) ||
        (st = meta_size(f, "heads", 1, 1024, &heads, path, err, errlen)) ||
        (st = meta_size(f, "dim", 1, 4096, &dim, path, err, errlen)) ||
        (st = meta_size(f, "mlp-dim", 0, 65536, &mlp, path, err, errlen)) ||
        (st = meta_size(f, "src-context", 1, 256, &sc, path, err, errlen)) ||
        (st = meta_size(f, "tgt-context", 2, 256, &tc, path, err, errlen)))
        return st;
    if (dim % heads != 0) {
        set_err(err, errlen, "%s: metadata heads %zu does not divide dim %zu", path, heads, dim);
        return MHA_EFORMAT;
    }
    if ((st = meta_vocab(f, "src_vocab", G2P_SRC_NSPECIAL, &src, path, err, errlen)) ||
        (st = meta_vocab(f, "tgt_vocab", G2P_NSPECIAL, &tgt, path, err, errlen))) {
        g2p_vocab_free(&src);
        return st;
    }
    if (!rescorer && slot == 0) {
        const char *data = mha_st_meta(f, "data");
        snprintf(g->data, sizeof g->data, "%s", data ? data : "");
        g->src = src;
        g->tgt = tgt;
        g->max_src = sc;
        g->max_tgt = tc;
    } else {
        const int same = g2p_vocab_equal(&src, &g->src) && g2p_vocab_equal(&tgt, &g->tgt);
        g2p_vocab_free(&src);
        g2p_vocab_free(&tgt);
        if (!same || sc != g->max_src || tc != g->max_tgt) {
            set_err(err, errlen, "%s: a model of other data than the first (%s)", path,
                    !same ? "other symbols" : "other word sizes");
            return MHA_EFORMAT;
        }
        const int want = rescorer ? g->rm_reverse : g->reverse;
        if ((!rescorer || g->n_rm > 0) && reverse != want) {
            set_err(err, errlen, "%s: it writes pronunciations %s, the %s %s", path,
                    reverse ? "right to left" : "left to right",
                    rescorer ? "other rescoring models" : "first model",
                    want ? "right to left" : "left to right");
            return MHA_EFORMAT;
        }
    }
    mha_s2s_config mc = {.src_vocab = g->src.n, .tgt_vocab = g->tgt.n, .src_context = sc,
                         .tgt_context = tc, .enc_layers = le, .dec_layers = ld,
                         .heads = heads, .dim = dim, .mlp_dim = mlp, .threads = threads,
                         .attn_mode = MHA_ATTN_STORED, .precision = MHA_PRECISION_FP32,
                         .no_init = 1}; /* every tensor is loaded below */
    mha_s2s *m = NULL;
    if ((st = mha_s2s_create(&m, &mc, ENCODE_BATCH)) != MHA_OK) {
        set_err(err, errlen, "%s: cannot make its model: %s", path, mha_strerror(st));
        return st;
    }
    if (rescorer) { /* owned by g from here: mha_g2p_close frees it */
        g->rm[slot] = m;
        g->n_rm = slot + 1;
        g->rm_reverse = reverse;
    } else {
        g->m[slot] = m;
        g->n_models = slot + 1;
        g->reverse = slot == 0 ? reverse : g->reverse;
    }
    const size_t nt = mha_s2s_num_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *p;
        mha_s2s_tensor(m, i, &in, &p, NULL);
        char e2[512];
        if ((st = mha_st_get_f32(f, in.name, in.ndim, in.shape, p, e2, sizeof e2)) != MHA_OK) {
            set_err(err, errlen, "%s: %s", path, e2);
            return st == MHA_ENOMEM ? st : MHA_EFORMAT;
        }
        for (size_t k = 0; k < in.numel; k++)
            if (!isfinite(p[k])) {
                set_err(err, errlen, "%s: tensor %s[%zu] is %g", path, in.name, k, (double)p[k]);
                return MHA_EFORMAT;
            }
    }
    if (!rescorer && (st = mha_s2s_infer_create(&g->inf[slot], m, DECODE_ROWS, sc, tc)) != MHA_OK) {
        set_err(err, errlen, "%s: decoder caches: %s", path, mha_strerror(st));
        return st;
    }
    return MHA_OK;
}

/* Read, verify and load a model file into the next slot of g (of the rescoring models
 * when rescorer). */
static int open_file(mha_g2p *g, const char *path, int rescorer, char *err, size_t errlen)
{
    mha_st_file *f = NULL;
    char e2[1024] = "";
    int st = mha_st_load(path, &f, e2, sizeof e2);
    if (st != MHA_OK && strstr(e2, path))
        set_err(err, errlen, "%s", e2);
    else if (st != MHA_OK) /* the reader names the file only when it cannot open it */
        set_err(err, errlen, "%s: %s", path, e2);
    else if ((st = ckpt_verify(f, e2, sizeof e2)) != MHA_OK)
        set_err(err, errlen, "%s: %s", path, e2);
    else if ((st = load_model(g, f, path, g->threads, rescorer, err, errlen)) == MHA_OK &&
             !ckpt_has_checksums(f))
        g->unverified = 1;
    mha_st_free(f);
    return st;
}

int mha_g2p_add_model(mha_g2p *g, const char *model_path, char *err, size_t errlen)
{
    if (!g || !model_path || g->n_models >= MAX_MODELS) {
        set_err(err, errlen, "mha_g2p_add_model: a NULL argument, or %d models already",
                MAX_MODELS);
        return MHA_EINVAL;
    }
    const size_t n = g->n_models;
    const int st = open_file(g, model_path, 0, err, errlen);
    if (st != MHA_OK) { /* nothing added */
        for (size_t i = n; i < g->n_models; i++) {
            mha_s2s_infer_destroy(g->inf[i]);
            mha_s2s_destroy(g->m[i]);
            g->inf[i] = NULL;
            g->m[i] = NULL;
        }
        g->n_models = n;
    }
    return st;
}

int mha_g2p_open(mha_g2p **out, const char *model_path, int threads, char *err, size_t errlen)
{
    if (out == NULL || model_path == NULL || threads < 0) {
        set_err(err, errlen, "mha_g2p_open: a NULL argument or a negative thread count");
        return MHA_EINVAL;
    }
    mha_g2p *g = calloc(1, sizeof *g);
    if (!g) {
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    g->beam = 1;
    g->alpha = 1.0;
    g->rweight = 1.0;
    g->threads = threads;
    const int st = open_file(g, model_path, 0, err, errlen);
    if (st != MHA_OK) {
        mha_g2p_close(g);
        return st;
    }
    *out = g;
    return MHA_OK;
}

void mha_g2p_close(mha_g2p *g)
{
    if (!g)
        return;
    g2p_rescorer_free(&g->resc);
    for (size_t i = 0; i < MAX_MODELS; i++) {
        mha_s2s_infer_destroy(g->inf[i]);
        mha_s2s_destroy(g->m[i]);
        mha_s2s_destroy(g->rm[i]);
    }
    free(g->perm);
    g2p_vocab_free(&g->src);
    g2p_vocab_free(&g->tgt);
    for (size_t i = 0; i < g->n_lex; i++)
        g2p_dict_free(&g->lex[i].d);
    free(g->lex);
    free(g->arena);
    free(g->ans);
    free(g->ids);
    free(g->srcbuf);
    free(g->tok);
    free(g->ids_off);
    free(g->ids_len);
    free(g->order);
    free(g->lens);
    free(g->tlen);
    free(g->lp);
    free(g->hyps);
    free(g);
}

int mha_g2p_add_rescorer(mha_g2p *g, const char *model_path, char *err, size_t errlen)
{
    if (!g || !model_path || g->n_rm >= MAX_MODELS) {
        set_err(err, errlen, "mha_g2p_add_rescorer: a NULL argument, or %d rescoring models "
                "already", MAX_MODELS);
        return MHA_EINVAL;
    }
    if (!g->perm && !(g->perm = calloc(DECODE_ROWS, sizeof *g->perm))) {
        set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    const size_t n = g->n_rm;
    int st = open_file(g, model_path, 1, err, errlen);
    if (st == MHA_OK) { /* caches for the whole list, made again */
        g2p_rescorer next;
        st = g2p_rescorer_init(&next, g->n_rm, g->rm, g->rm_reverse, g->rweight, DECODE_ROWS,
                               g->max_src, g->max_tgt);
        if (st == MHA_OK) {
            g2p_rescorer_free(&g->resc);
            g->resc = next;
        } else
            set_err(err, errlen, "%s: rescoring caches: %s", model_path, mha_strerror(st));
    }
    if (st != MHA_OK) { /* nothing added */
        for (size_t i = n; i < g->n_rm; i++) {
            mha_s2s_destroy(g->rm[i]);
            g->rm[i] = NULL;
        }
        g->n_rm = n;
        g->rm_reverse = n ? g->resc.reverse : 0;
    }
    return st;
}

int mha_g2p_set_rescore_weight(mha_g2p *g, double weight)
{
    if (!g || !(weight >= 0.0 && weight <= 100.0))
        return MHA_EINVAL;
    g->rweight = weight;
    g->resc.weight = weight;
    return MHA_OK;
}

const char *mha_g2p_model_data(const mha_g2p *g) { return g ? g->data : ""; }
size_t mha_g2p_max_letters(const mha_g2p *g) { return g ? g->max_src : 0; }
int mha_g2p_checksummed(const mha_g2p *g) { return g && !g->unverified; }

int mha_g2p_set_beam(mha_g2p *g, size_t beam, double alpha)
{
    if (!g || beam == 0 || beam > MHA_G2P_MAX_NBEST || !(alpha >= 0.0 && alpha <= 10.0))
        return MHA_EINVAL;
    g->beam = beam;
    g->alpha = alpha;
    return MHA_OK;
}

/* ---- lexicons ------------------------------------------------------------------------- */

int mha_g2p_add_lexicon(mha_g2p *g, const char *path, size_t *skipped, char *err,
                        size_t errlen)
{
    if (!g || !path) {
        set_err(err, errlen, "mha_g2p_add_lexicon: a NULL argument");
        return MHA_EINVAL;
    }
    lexicon lx;
    memset(&lx, 0, sizeof lx);
    int st = g2p_dict_read(path, G2P_FMT_AUTO, &lx.d, err, errlen);
    if (st != MHA_OK)
        return st;
    lexicon *grown = realloc(g->lex, (g->n_lex + 1) * sizeof *grown);
    if (grown)
        g->lex = grown;
    if (!grown) {
        g2p_dict_free(&lx.d);
        set_err(err, errlen, "out of memory for lexicon %s", path);
        return MHA_ENOMEM;
    }
    if (skipped)
        *skipped = lx.d.skipped;
    g->lex[g->n_lex++] = lx;
    return MHA_OK;
}

/* ---- answers -------------------------------------------------------------------------- */

/* Append s[0..n) and a NUL to the arena; its offset in *off. */
static int arena_put(mha_g2p *g, const char *s, size_t n, size_t *off)
{
    if (g->arena_len + n + 1 > g->arena_cap) {
        size_t cap = g->arena_cap ? 2 * g->arena_cap : 4096;
        while (cap < g->arena_len + n + 1)
            cap *= 2;
        char *a = realloc(g->arena, cap);
        if (!a)
            return MHA_ENOMEM;
        g->arena = a;
        g->arena_cap = cap;
    }
    memcpy(g->arena + g->arena_len, s, n);
    g->arena[g->arena_len + n] = '\0';
    *off = g->arena_len;
    g->arena_len += n + 1;
    return MHA_OK;
}

/* Append the symbols sym[0..n) joined by spaces (stress digits removed when no_stress). */
static int arena_join(mha_g2p *g, const char *const *sym, size_t n, int no_stress, size_t *off)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(sym[i]) + 1;
    char *buf = malloc(total + 1), *o = buf;
    if (!buf)
        return MHA_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *o++ = ' ';
        size_t l = strlen(sym[i]);
        memcpy(o, sym[i], l);
        if (no_stress)
            while (l > 1 && o[l - 1] >= '0' && o[l - 1] <= '9')
                l--;
        o += l;
    }
    const int st = arena_put(g, buf, (size_t)(o - buf), off);
    free(buf);
    return st;
}

static int add_answer(mha_g2p *g, size_t off, size_t word_off, double logprob, int source,
                      int lex)
{
    if (g->n_ans == g->cap_ans) {
        const size_t cap = g->cap_ans ? 2 * g->cap_ans : 64;
        answer *a = realloc(g->ans, cap * sizeof *a);
        if (!a)
            return MHA_ENOMEM;
        g->ans = a;
        g->cap_ans = cap;
    }
    g->ans[g->n_ans++] = (answer){.off = off, .word_off = word_off, .logprob = logprob,
                                  .source = source, .lexicon = lex};
    return MHA_OK;
}

/* ---- spelling ------------------------------------------------------------------------- */

/* The word with U+2019 read as an apostrophe, in a new string (NULL: out of memory). */
static char *normalised(const char *word)
{
    char *w = malloc(strlen(word) + 1), *o = w;
    if (!w)
        return NULL;
    for (const char *p = word; *p;) {
        if ((unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 &&
            (unsigned char)p[2] == 0x99) {
            *o++ = '\'';
            p += 3;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return w;
}

/* Spelling `pass` of w into buf (0 as is, 1 upper case, 2 lower case: ASCII letters). */
static void cased(const char *w, int pass, char *buf)
{
    size_t i = 0;
    for (; w[i]; i++) {
        const char c = w[i];
        buf[i] = pass == 1 && c >= 'a' && c <= 'z'   ? (char)(c - 32)
                 : pass == 2 && c >= 'A' && c <= 'Z' ? (char)(c + 32)
                                                     : c;
    }
    buf[i] = '\0';
}

/* Look word up in the lexicons (each spelling, each lexicon in order): the answers of the
 * first that lists it. *found 1 if one did. */
static int lookup(mha_g2p *g, const char *word, unsigned flags, size_t nbest, int *found)
{
    *found = 0;
    char *buf = malloc(strlen(word) + 1);
    if (!buf)
        return MHA_ENOMEM;
    int st = MHA_OK;
    for (size_t l = 0; l < g->n_lex && !*found; l++)
        for (int pass = 0; pass < 3 && !*found; pass++) {
            cased(word, pass, buf);
            const lexicon *lx = &g->lex[l];
            const size_t w = g2p_dict_find(&lx->d, buf);
            if (w == SIZE_MAX)
                continue;
            *found = 1;
            const g2p_word *gw = &lx->d.words[w];
            size_t woff;
            if ((st = arena_put(g, gw->text, strlen(gw->text), &woff)) != MHA_OK)
                break;
            for (size_t k = 0; k < gw->count && k < nbest && st == MHA_OK; k++) {
                const g2p_pron *p = &lx->d.prons[gw->first + k];
                size_t off;
                if ((st = arena_join(g, (const char *const *)lx->d.tokens + p->off, p->len,
                                     (flags & MHA_G2P_NO_STRESS) != 0, &off)) == MHA_OK)
                    st = add_answer(g, off, woff, 0.0, MHA_G2P_SOURCE_LEXICON, (int)l);
            }
        }
    free(buf);
    return st;
}

/* Source ids of word (as is, upper-, lower-cased: the first the alphabet spells) into ids
 * [max_src]; the length in *len, the spelling's arena offset in *woff. */
static int spell(mha_g2p *g, const char *word, const char *whole, int32_t *ids, size_t *len,
                 size_t *woff, char *err, size_t errlen)
{
    char sw[SHOWN_BYTES * 4 + 100], sp[SHOWN_BYTES * 2 + 40];
    if (whole) { /* a part of a hyphenated word: "'COVID-19' (part '19')" */
        char sh[SHOWN_BYTES * 2 + 40];
        snprintf(sw, sizeof sw, "%s (part %s)", shown(whole, sh, sizeof sh),
                 shown(word, sp, sizeof sp));
    } else {
        shown(word, sw, sizeof sw);
    }
    if (!word[0]) {
        set_err(err, errlen, "word %s: empty", sw);
        return MHA_EINVAL;
    }
    char *buf = malloc(strlen(word) + 1);
    if (!buf)
        return MHA_ENOMEM;
    size_t bad = 0, bad_best = 0;
    long n = -1;
    int bad_utf8 = 0;
    for (int pass = 0; pass < 3 && n < 0; pass++) {
        cased(word, pass, buf);
        n = g2p_encode_word(&g->src, buf, NULL, 0, &bad);
        if (n == G2P_ENC_BADUTF8) {
            bad_utf8 = 1;
            bad_best = bad;
            break;
        }
        if (n < 0 && bad > bad_best)
            bad_best = bad;
    }
    int st = MHA_OK;
    if (n < 0) {
        const unsigned char c = (unsigned char)word[bad_best];
        if (bad_utf8)
            set_err(err, errlen, "word %s: not UTF-8 (byte %zu)", sw, bad_best);
        else
            set_err(err, errlen, "word %s: character '%.*s' is not in the model's alphabet",
                    sw, 1 + (c >= 0xC0) + (c >= 0xE0) + (c >= 0xF0), word + bad_best);
        st = MHA_EINVAL;
    } else if ((size_t)n > g->max_src) {
        set_err(err, errlen, "word %s: too long (the model reads at most %zu)", sw,
                g->max_src);
        st = MHA_ESHAPE;
    } else if (g2p_encode_word(&g->src, buf, ids, g->max_src, NULL) != n) {
        st = MHA_EINVAL; /* cannot happen: the same spelling as above */
    } else {
        *len = (size_t)n;
        st = arena_put(g, buf, strlen(buf), woff);
    }
    free(buf);
    return st;
}

/* ---- the model ------------------------------------------------------------------------ */

/* Grow the decoding scratch for n words. */
static int scratch(mha_g2p *g, size_t n)
{
    const size_t S = g->max_src, L = g->max_tgt, K = MHA_G2P_MAX_NBEST;
    const size_t rows = DECODE_ROWS;
    free(g->ids);
    free(g->ids_off);
    free(g->ids_len);
    free(g->order);
    g->ids = calloc(n * S + 1, sizeof *g->ids);
    g->ids_off = calloc(n + 1, sizeof *g->ids_off);
    g->ids_len = calloc(n + 1, sizeof *g->ids_len);
    g->order = calloc(n + 1, sizeof *g->order);
    if (!g->srcbuf) {
        g->srcbuf = calloc(rows * S, sizeof *g->srcbuf);
        g->lens = calloc(rows, sizeof *g->lens);
        g->tok = calloc(rows * K * L, sizeof *g->tok);
        g->tlen = calloc(rows * K, sizeof *g->tlen);
        g->lp = calloc(rows * K, sizeof *g->lp);
        g->hyps = calloc(rows * K, sizeof *g->hyps);
    }
    return g->ids && g->ids_off && g->ids_len && g->order && g->srcbuf && g->lens && g->tok &&
                   g->tlen && g->lp && g->hyps
               ? MHA_OK
               : MHA_ENOMEM;
}

/* order[0..n) = the words by length, then index (a counting sort: lengths are at most
 * max_src <= 256; no global state, so handles in several threads never meet). */
static void sort_by_length(size_t n, const size_t *len, size_t max_len, size_t *order)
{
    size_t count[257] = {0};
    for (size_t j = 0; j < n; j++)
        count[len[j] <= max_len ? len[j] : max_len]++;
    size_t start = 0;
    for (size_t l = 0; l <= max_len && l < 257; l++) {
        const size_t c = count[l];
        count[l] = start;
        start += c;
    }
    for (size_t j = 0; j < n; j++)
        order[count[len[j] <= max_len ? len[j] : max_len]++] = j;
}

/* Decode the n words of ids (word j: g->ids[j·S ..] of length g->ids_len[j]) in batches of
 * similar length; word j's hypotheses go to res[j·nbest ..] (tokens [nbest, L]) with
 * res_len, res_lp. */
static int decode(mha_g2p *g, size_t n, size_t nbest, int32_t *res, size_t *res_len,
                  double *res_lp)
{
    const size_t S = g->max_src, L = g->max_tgt;
    const size_t K = g->beam > nbest ? g->beam : nbest;
    const int greedy = K == 1, resc = !greedy && g->resc.n > 0;
    const size_t KD = resc ? K : nbest; /* the beam's list: all of it when rescored */
    const size_t batch = DECODE_ROWS / K > 0 ? DECODE_ROWS / K : 1;
    sort_by_length(n, g->ids_len, S < 256 ? S : 256, g->order);
    for (size_t b0 = 0; b0 < n; b0 += batch) {
        const size_t B = n - b0 < batch ? n - b0 : batch;
        size_t Sb = 1;
        for (size_t b = 0; b < B; b++)
            Sb = g->ids_len[g->order[b0 + b]] > Sb ? g->ids_len[g->order[b0 + b]] : Sb;
        for (size_t b = 0; b < B; b++) {
            const size_t w = g->order[b0 + b];
            memset(g->srcbuf + b * Sb, 0, Sb * sizeof *g->srcbuf);
            memcpy(g->srcbuf + b * Sb, g->ids + w * S, g->ids_len[w] * sizeof *g->srcbuf);
            g->lens[b] = g->ids_len[w];
        }
        int st;
        if (greedy)
            st = mha_s2s_ensemble_greedy(g->n_models, g->m, g->inf, B, Sb, g->srcbuf, g->lens,
                                         G2P_BOS, G2P_EOS, L, g->tok, g->tlen, g->lp);
        else
            st = mha_s2s_ensemble_beam(g->n_models, g->m, g->inf, B, Sb, g->srcbuf, g->lens,
                                       G2P_BOS, G2P_EOS, L, K, KD, g->alpha, g->hyps, g->tok);
        if (st == MHA_OK && resc)
            st = g2p_rescore(&g->resc, B, KD, Sb, g->srcbuf, g->lens, g->tok, g->reverse,
                             g->alpha, g->hyps, g->perm);
        if (st != MHA_OK)
            return st;
        for (size_t b = 0; b < B; b++) {
            const size_t w = g->order[b0 + b];
            for (size_t k = 0; k < (greedy ? 1 : nbest); k++) {
                const size_t in = greedy ? b : b * KD + (resc ? g->perm[b * KD + k] : k);
                const size_t o = w * nbest + k;
                const size_t len = greedy ? g->tlen[b] : g->hyps[in].len;
                memcpy(res + o * L, g->tok + in * L, len * sizeof *res);
                if (g->reverse) /* into reading order */
                    for (size_t i = 0; i < len / 2; i++) {
                        const int32_t t = res[o * L + i];
                        res[o * L + i] = res[o * L + len - 1 - i];
                        res[o * L + len - 1 - i] = t;
                    }
                res_len[o] = len;
                res_lp[o] = greedy ? g->lp[b] : g->hyps[in].logprob;
            }
            for (size_t k = greedy ? 1 : nbest; k < nbest; k++) /* not written: none */
                res_lp[w * nbest + k] = -INFINITY;
        }
    }
    return MHA_OK;
}

/* ---- pronouncing ---------------------------------------------------------------------- */

/* What the batch call builds per word before the model runs. */
typedef struct pending {
    size_t first_ans, n_ans; /* its answers (lexicon, parts) so far                       */
    int status;
    int model;               /* 1: asks the model (word index in the model's list: slot)  */
    size_t slot, woff;
} pending;

/* The answers of the word (lexicon, or parts of a hyphenated word, or a model request). */
static int prepare(mha_g2p *g, const char *word, unsigned flags, size_t nbest, pending *pw,
                   size_t *n_model, char *err, size_t errlen);

/* Pronounce each part of a hyphenated word (lexicon or model, the best answer), joined. */
static int parts(mha_g2p *g, const char *word, unsigned flags, char *err, size_t errlen,
                 int *done)
{
    *done = 0;
    if (!strchr(word, '-') || word[0] == '-' || word[strlen(word) - 1] == '-' ||
        strstr(word, "--") || g2p_vocab_find(&g->src, "-") >= 0)
        return MHA_OK;
    char *w = malloc(strlen(word) + 1);
    if (!w)
        return MHA_ENOMEM;
    strcpy(w, word);
    size_t np = 1;
    for (char *p = w; *p; p++)
        np += *p == '-';
    const char **part = calloc(np, sizeof *part);
    char **ph = calloc(np, sizeof *ph);
    char **spelled = calloc(np, sizeof *spelled);
    int st = part && ph && spelled ? MHA_OK : MHA_ENOMEM;
    size_t k = 0;
    for (char *p = w, *q; st == MHA_OK && p; p = q) {
        q = strchr(p, '-');
        if (q)
            *q++ = '\0';
        part[k++] = p;
    }
    double lp = 0.0;
    for (size_t i = 0; st == MHA_OK && i < np; i++) {
        const size_t a0 = g->n_ans;
        pending pw;
        size_t nm = 0;
        if ((st = prepare(g, part[i], flags, 1, &pw, &nm, err, errlen)) != MHA_OK)
            break;
        if (pw.model) { /* the model, for this part alone */
            const size_t L = g->max_tgt;
            int32_t *tok = malloc(L * sizeof *tok);
            size_t tl = 0;
            double plp = 0.0;
            if (!tok || (st = scratch(g, 1)) != MHA_OK) {
                free(tok);
                st = MHA_ENOMEM;
                break;
            }
            size_t len;
            size_t woff;
            if ((st = spell(g, part[i], word, g->ids, &len, &woff, err, errlen)) == MHA_OK) {
                g->ids_len[0] = len;
                st = decode(g, 1, 1, tok, &tl, &plp);
            }
            if (st == MHA_OK) {
                const char **sym = calloc(tl + 1, sizeof *sym);
                size_t off;
                if (!sym) {
                    st = MHA_ENOMEM;
                } else {
                    for (size_t t = 0; t < tl; t++)
                        sym[t] = g->tgt.sym[tok[t]];
                    st = arena_join(g, sym, tl, (flags & MHA_G2P_NO_STRESS) != 0, &off);
                    free(sym);
                }
                if (st == MHA_OK && !(ph[i] = strdup(g->arena + off)))
                    st = MHA_ENOMEM;
                if (st == MHA_OK && !(spelled[i] = strdup(g->arena + woff)))
                    st = MHA_ENOMEM;
                lp += plp;
            }
            free(tok);
        } else {
            if (!(ph[i] = strdup(g->arena + g->ans[a0].off)) ||
                !(spelled[i] = strdup(g->arena + g->ans[a0].word_off)))
                st = MHA_ENOMEM;
            lp += g->ans[a0].logprob;
        }
        g->n_ans = a0; /* a part's answer is not the word's */
    }
    if (st == MHA_OK) {
        size_t total = 0, wtotal = 0;
        for (size_t i = 0; i < np; i++) {
            total += strlen(ph[i]) + 1;
            wtotal += strlen(spelled[i]) + 1;
        }
        char *joined = malloc(total + 1), *wj = malloc(wtotal + 1);
        if (!joined || !wj) {
            st = MHA_ENOMEM;
        } else {
            joined[0] = wj[0] = '\0';
            for (size_t i = 0; i < np; i++) {
                if (i) {
                    strcat(joined, " ");
                    strcat(wj, "-");
                }
                strcat(joined, ph[i]);
                strcat(wj, spelled[i]);
            }
            size_t off, woff;
            if ((st = arena_put(g, joined, strlen(joined), &off)) == MHA_OK &&
                (st = arena_put(g, wj, strlen(wj), &woff)) == MHA_OK)
                st = add_answer(g, off, woff, lp, MHA_G2P_SOURCE_PARTS, -1);
            *done = st == MHA_OK;
        }
        free(joined);
        free(wj);
    }
    for (size_t i = 0; i < np && ph && spelled; i++) {
        free(ph[i]);
        free(spelled[i]);
    }
    free(ph);
    free(spelled);
    free(part);
    free(w);
    return st;
}

static int prepare(mha_g2p *g, const char *word, unsigned flags, size_t nbest, pending *pw,
                   size_t *n_model, char *err, size_t errlen)
{
    memset(pw, 0, sizeof *pw);
    pw->first_ans = g->n_ans;
    int st = MHA_OK, found = 0;
    if (!(flags & MHA_G2P_NO_LEXICON) && (st = lookup(g, word, flags, nbest, &found)) != MHA_OK)
        return st;
    if (!found && (st = parts(g, word, flags, err, errlen, &found)) != MHA_OK)
        return st;
    if (found) {
        pw->n_ans = g->n_ans - pw->first_ans;
        return MHA_OK;
    }
    pw->model = 1;
    pw->slot = (*n_model)++;
    return MHA_OK;
}

/* A word failed with status s and message msg: its status, and the call's first failure
 * (status and message) when it is the first. */
static void word_failed(int *status, int s, const char *msg, int *first_bad, char *err,
                        size_t errlen)
{
    *status = s;
    if (*first_bad == MHA_OK) {
        *first_bad = s;
        set_err(err, errlen, "%s", msg);
    }
}

int mha_g2p_pronounce_batch(mha_g2p *g, size_t n_words, const char *const *words,
                            unsigned flags, size_t nbest, mha_g2p_pron *out, size_t *n_out,
                            int *status, char *err, size_t errlen)
{
    if (!g || (n_words && (!words || !out || !n_out || !status)) || nbest == 0 ||
        nbest > MHA_G2P_MAX_NBEST || (flags & ~(unsigned)(MHA_G2P_NO_STRESS |
                                                          MHA_G2P_NO_LEXICON))) {
        set_err(err, errlen, "mha_g2p_pronounce: a NULL argument, nbest %zu outside [1, %d] "
                "or unknown flags", nbest, MHA_G2P_MAX_NBEST);
        return MHA_EINVAL;
    }
    g->arena_len = 0;
    g->n_ans = 0;
    for (size_t i = 0; i < n_words; i++) {
        n_out[i] = 0;
        status[i] = MHA_OK;
    }
    pending *pw = calloc(n_words + 1, sizeof *pw);
    char **norm = calloc(n_words + 1, sizeof *norm);
    int st = pw && norm ? MHA_OK : MHA_ENOMEM;
    int first_bad = MHA_OK;
    size_t n_model = 0;
    /* 1. lexicons and hyphenated words; the rest is the model's */
    for (size_t i = 0; st == MHA_OK && i < n_words; i++) {
        if (!words[i]) {
            status[i] = MHA_EINVAL;
            if (first_bad == MHA_OK) {
                first_bad = MHA_EINVAL;
                set_err(err, errlen, "word %zu: NULL", i);
            }
            continue;
        }
        if (!(norm[i] = normalised(words[i]))) {
            st = MHA_ENOMEM;
            break;
        }
        char e2[512] = "";
        const int s = prepare(g, norm[i], flags, nbest, &pw[i], &n_model, e2, sizeof e2);
        if (s == MHA_ENOMEM) {
            st = s;
            break;
        }
        if (s != MHA_OK)
            word_failed(&status[i], s, e2, &first_bad, err, errlen);
    }
    /* 2. the model, for the words no lexicon answered, in batches */
    size_t n_dec = 0;
    int32_t *res = NULL;
    size_t *res_len = NULL, *dec_of = NULL;
    double *res_lp = NULL;
    if (st == MHA_OK && n_model > 0) {
        const size_t S = g->max_src, L = g->max_tgt;
        if ((st = scratch(g, n_model)) == MHA_OK) {
            res = calloc(n_model * nbest * L + 1, sizeof *res);
            res_len = calloc(n_model * nbest + 1, sizeof *res_len);
            res_lp = calloc(n_model * nbest + 1, sizeof *res_lp);
            dec_of = calloc(n_model + 1, sizeof *dec_of);
            if (!res || !res_len || !res_lp || !dec_of)
                st = MHA_ENOMEM;
        }
        for (size_t i = 0; st == MHA_OK && i < n_words; i++) {
            if (!pw[i].model || status[i] != MHA_OK)
                continue;
            size_t len = 0;
            char e2[512] = "";
            const int s = spell(g, norm[i], NULL, g->ids + n_dec * S, &len, &pw[i].woff, e2,
                                sizeof e2);
            if (s == MHA_ENOMEM) {
                st = s;
                break;
            }
            if (s != MHA_OK) {
                word_failed(&status[i], s, e2, &first_bad, err, errlen);
                continue;
            }
            g->ids_len[n_dec] = len;
            pw[i].slot = n_dec;
            dec_of[n_dec++] = i;
        }
        if (st == MHA_OK && n_dec > 0 && (st = decode(g, n_dec, nbest, res, res_len, res_lp)))
            set_err(err, errlen, "decoding: %s", mha_strerror(st));
        for (size_t j = 0; st == MHA_OK && j < n_dec; j++) {
            pending *p = &pw[dec_of[j]];
            p->first_ans = g->n_ans;
            for (size_t k = 0; k < nbest && st == MHA_OK; k++) {
                const size_t o = j * nbest + k;
                if (!isfinite(res_lp[o]))
                    break; /* fewer hypotheses than nbest */
                const char **sym = calloc(res_len[o] + 1, sizeof *sym);
                size_t off;
                if (!sym) {
                    st = MHA_ENOMEM;
                    break;
                }
                for (size_t t = 0; t < res_len[o]; t++)
                    sym[t] = g->tgt.sym[res[o * L + t]];
                st = arena_join(g, sym, res_len[o], (flags & MHA_G2P_NO_STRESS) != 0, &off);
                free(sym);
                if (st == MHA_OK)
                    st = add_answer(g, off, p->woff, res_lp[o], MHA_G2P_SOURCE_MODEL, -1);
            }
            p->n_ans = g->n_ans - p->first_ans;
        }
    }
    /* 3. pointers into the arena, now that it no longer moves */
    for (size_t i = 0; st == MHA_OK && i < n_words; i++) {
        if (status[i] != MHA_OK)
            continue;
        const size_t n = pw[i].n_ans < nbest ? pw[i].n_ans : nbest;
        for (size_t k = 0; k < n; k++) {
            const answer *a = &g->ans[pw[i].first_ans + k];
            out[i * nbest + k] = (mha_g2p_pron){.phones = g->arena + a->off,
                                                .word = g->arena + a->word_off,
                                                .logprob = a->logprob, .source = a->source,
                                                .lexicon = a->lexicon};
        }
        n_out[i] = n;
    }
    if (st != MHA_OK) {
        for (size_t i = 0; i < n_words; i++)
            n_out[i] = 0;
        if (st == MHA_ENOMEM)
            set_err(err, errlen, "out of memory");
    }
    for (size_t i = 0; norm && i < n_words; i++)
        free(norm[i]);
    free(norm);
    free(pw);
    free(res);
    free(res_len);
    free(res_lp);
    free(dec_of);
    return st != MHA_OK ? st : first_bad;
}

int mha_g2p_pronounce(mha_g2p *g, const char *word, unsigned flags, size_t nbest,
                      mha_g2p_pron *out, size_t *n, char *err, size_t errlen)
{
    if (!word || !n) {
        set_err(err, errlen, "mha_g2p_pronounce: a NULL argument");
        return MHA_EINVAL;
    }
    int status;
    return mha_g2p_pronounce_batch(g, 1, &word, flags, nbest, out, n, &status, err, errlen);
}
