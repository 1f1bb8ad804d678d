/*
 * libmha_g2p: pronunciations as a library (include/mha_g2p.h). A model of mha-g2p train
 * (its configuration, vocabularies and checksums in the file's metadata) decoded with the
 * encoder–decoder's caches (mha_s2s_infer), and lexicons read by the trainer's own
 * dictionary reader (g2p_data.h), looked up through a hash of their words.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <omp.h>

#include "ckpt_crc.h"
#include "g2p_lib.h"
#include "mha_safetensors.h"

#define G2P_FORMAT "mha-g2p/1"

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
/* 1 when every tensor of m is in f as float32 of its shape, all finite: then the copy
 * (copy_weights) can wait and cannot fail. 0 when one is not (another type, shape or name:
 * the copy, at once, converts it or gives the error). A float32 tensor with a value that is
 * not finite: MHA_EFORMAT (negative) with the copy's message. */
static int weights_ready_to_copy(mha_s2s *m, const mha_st_file *f, const char *path,
                                 char *err, size_t errlen)
{
    const size_t nt = mha_s2s_num_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *p;
        mha_s2s_tensor(m, i, &in, &p, NULL);
        const void *d = NULL;
        if (mha_st_get(f, in.name, MHA_ST_F32, in.ndim, in.shape, &d, NULL, 0) != MHA_OK)
            return 0;
        const float *v = d;
        for (size_t k = 0; k < in.numel; k++)
            if (!isfinite(v[k])) {
                set_err(err, errlen, "%s: tensor %s[%zu] is %g", path, in.name, k, (double)v[k]);
                return MHA_EFORMAT;
            }
    }
    return 1;
}

/* Every tensor of m from f (converted to float), each checked finite. */
static int copy_weights(mha_s2s *m, const mha_st_file *f, const char *path, char *err,
                        size_t errlen)
{
    const size_t nt = mha_s2s_num_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *p;
        mha_s2s_tensor(m, i, &in, &p, NULL);
        char e2[512];
        int st;
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
    return MHA_OK;
}

/* A model's data (vocabularies src and tgt, word sizes sc and tc, direction): the first
 * model's become the handle's (src and tgt taken); a later one (another of the ensemble, a
 * rescorer) must have the same and its kind's direction (src and tgt freed). */
static int take_data(mha_g2p *g, const mha_st_file *f, const char *path, int rescorer,
                     size_t slot, g2p_vocab *src, g2p_vocab *tgt, size_t sc, size_t tc,
                     int reverse, char *err, size_t errlen)
{
    if (!rescorer && slot == 0) {
        const char *data = mha_st_meta(f, "data");
        snprintf(g->data, sizeof g->data, "%s", data ? data : "");
        g->src = *src;
        g->tgt = *tgt;
        g->max_src = sc;
        g->max_tgt = tc;
        return MHA_OK;
    }
    const int same = g2p_vocab_equal(src, &g->src) && g2p_vocab_equal(tgt, &g->tgt);
    g2p_vocab_free(src);
    g2p_vocab_free(tgt);
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
    return MHA_OK;
}

/* The model of file *fp into the next slot of g (of the rescoring models when rescorer).
 * Its weights are copied now, or — when they are float32 and verified finite in the file —
 * at the first word the model answers (g2p__ready): the file is then g's (*fp = NULL). */
static int load_model(mha_g2p *g, mha_st_file **fp, const char *path, int threads,
                      int rescorer, char *err, size_t errlen)
{
    const mha_st_file *f = *fp;
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
    if ((st = take_data(g, f, path, rescorer, slot, &src, &tgt, sc, tc, reverse, err,
                        errlen)) != MHA_OK)
        return st;
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
    const int ready = weights_ready_to_copy(m, f, path, err, errlen);
    if (ready < 0)
        return ready;
    if (!ready) /* now: converted, or its error seen when the file is opened */
        return copy_weights(m, f, path, err, errlen);
    if (rescorer)
        g->rfile[slot] = *fp;
    else
        g->file[slot] = *fp;
    *fp = NULL;
    return MHA_OK;
}

int g2p__ready(mha_g2p *g, char *err, size_t errlen)
{
    int st = MHA_OK;
    for (size_t i = 0; i < g->n_models && st == MHA_OK; i++) {
        if (g->file[i]) { /* verified when opened: only memory can fail here */
            st = copy_weights(g->m[i], g->file[i], "model", err, errlen);
            mha_st_free(g->file[i]);
            g->file[i] = NULL;
        }
        /* the model only decodes from now on: its matrices laid out for decoding in place,
         * read there by every stream (the weights in memory once, not twice) */
        if (st == MHA_OK && (st = mha_s2s_decode_only(g->m[i])) != MHA_OK)
            set_err(err, errlen, "model: %s", mha_strerror(st));
        /* stream 0's caches (the others' when a call has batches for them: g2p__streams) */
        if (st == MHA_OK && !g->str[0].inf[i] &&
            (st = mha_s2s_infer_create(&g->str[0].inf[i], g->m[i], g->cap0, g->max_src,
                                       g->max_tgt)) != MHA_OK)
            set_err(err, errlen, "decoder caches: %s", mha_strerror(st));
    }
    for (size_t i = 0; i < g->n_rm && st == MHA_OK; i++) {
        if (g->rfile[i]) {
            st = copy_weights(g->rm[i], g->rfile[i], "rescoring model", err, errlen);
            mha_st_free(g->rfile[i]);
            g->rfile[i] = NULL;
        }
        if (st == MHA_OK && (st = mha_s2s_decode_only(g->rm[i])) != MHA_OK)
            set_err(err, errlen, "rescoring model: %s", mha_strerror(st));
    }
    if (st == MHA_OK && g->resc_stale) { /* caches for the whole list, made again */
        g2p_rescorer next;
        st = g2p_rescorer_init(&next, g->n_rm, g->rm, g->rm_reverse, g->rweight, DECODE_ROWS,
                               g->max_src, g->max_tgt);
        if (st == MHA_OK) {
            g2p_rescorer_free(&g->resc);
            g->resc = next;
            g->resc_stale = 0;
        } else {
            set_err(err, errlen, "rescoring caches: %s", mha_strerror(st));
        }
    }
    return st;
}

void g2p__widen(mha_g2p *g, size_t K)
{
    if (K <= g->cap0)
        return;
    for (size_t i = 0; i < g->n_models; i++)
        for (size_t k = g->n_str; k-- > 0;) { /* the sharing ones first */
            mha_s2s_infer_destroy(g->str[k].inf[i]);
            g->str[k].inf[i] = NULL;
        }
    g->cap0 = K;
}

int g2p__streams(mha_g2p *g)
{
    int st = MHA_OK;
    for (size_t i = 0; i < g->n_models && st == MHA_OK; i++)
        for (size_t k = 1; k < g->n_str && st == MHA_OK; k++)
            if (!g->str[k].inf[i])
                st = mha_s2s_infer_share(&g->str[k].inf[i], g->str[0].inf[i], g->cap0);
    return st;
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
    else {
        const int unverified = !ckpt_has_checksums(f);
        if ((st = load_model(g, &f, path, g->threads, rescorer, err, errlen)) == MHA_OK &&
            unverified)
            g->unverified = 1;
    }
    mha_st_free(f); /* NULL when load_model kept it */
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
            for (size_t k = g->n_str; k-- > 0;) { /* the sharing ones first */
                mha_s2s_infer_destroy(g->str[k].inf[i]);
                g->str[k].inf[i] = NULL;
            }
            mha_s2s_destroy(g->m[i]);
            mha_st_free(g->file[i]);
            g->m[i] = NULL;
            g->file[i] = NULL;
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
    /* a stream per thread, up to DECODE_STREAMS, each of DECODE_ROWS / DECODE_STREAMS
     * hypotheses whatever the thread count: the batches, and so the answers to their last
     * bit, do not depend on it */
    const int t = threads > 0 ? threads : omp_get_num_procs();
    g->n_str = t < 1 ? 1 : (size_t)t < DECODE_STREAMS ? (size_t)t : DECODE_STREAMS;
    g->rows = g->cap0 = DECODE_ROWS / DECODE_STREAMS;
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
        for (size_t k = DECODE_STREAMS; k-- > 0;) /* the sharing ones first */
            mha_s2s_infer_destroy(g->str[k].inf[i]);
        mha_s2s_destroy(g->m[i]);
        mha_s2s_destroy(g->rm[i]);
        mha_st_free(g->file[i]);
        mha_st_free(g->rfile[i]);
    }
    free(g->perm);
    g2p_vocab_free(&g->src);
    g2p_vocab_free(&g->tgt);
    for (size_t i = 0; i < g->n_lex; i++)
        g2p_dict_free(&g->lex[i].d);
    UTIL_FREE_ALL(g->lex, g->arena, g->ans, g->ids, g->ids_off, g->ids_len, g->order);
    for (size_t k = 0; k < DECODE_STREAMS; k++) {
        g2p_stream *s = &g->str[k];
        UTIL_FREE_ALL(s->srcbuf, s->tok, s->lens, s->tlen, s->lp, s->hyps);
    }
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
    const int reverse = g->rm_reverse;
    const int st = open_file(g, model_path, 1, err, errlen);
    if (st == MHA_OK) {
        g->resc_stale = 1; /* the caches of the list, made again by g2p__ready */
        return MHA_OK;
    }
    for (size_t i = n; i < g->n_rm; i++) { /* nothing added */
        mha_s2s_destroy(g->rm[i]);
        mha_st_free(g->rfile[i]);
        g->rm[i] = NULL;
        g->rfile[i] = NULL;
    }
    g->n_rm = n;
    g->rm_reverse = reverse;
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

int mha_g2p_memory(const mha_g2p *g, size_t *bytes)
{
    if (!g || !bytes)
        return MHA_EINVAL;
    /* each stream's rows: g2p__widen makes them the widest beam (or n-best) asked for */
    const size_t rows = g->beam > g->cap0 ? g->beam : g->cap0;
    size_t total = 0, b;
    int st = MHA_OK;
    for (size_t i = 0; i < g->n_models + g->n_rm && st == MHA_OK; i++) {
        const int resc = i >= g->n_models;
        const mha_s2s *m = resc ? g->rm[i - g->n_models] : g->m[i];
        size_t n = 0;
        (void)mha_s2s_param_count(m, &n); /* cannot fail: m is made */
        total += n * sizeof(float);
        /* a model's first state (laid out as decode-only makes it), the others shared; a
         * rescoring model has one state of DECODE_ROWS rows (g2p__ready) */
        for (size_t k = 0; k < (resc ? 1 : g->n_str) && st == MHA_OK; k++)
            if ((st = mha_s2s_infer_bytes(m, resc ? DECODE_ROWS : rows, g->max_src, g->max_tgt,
                                          k == 0 ? 2 : 1, &b)) == MHA_OK)
                total += b;
    }
    for (size_t i = 0; i < g->n_lex; i++)
        total += g2p_dict_bytes(&g->lex[i].d);
    if (st == MHA_OK)
        *bytes = total;
    return st;
}

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
