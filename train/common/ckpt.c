/* Training checkpoints on top of the library's safetensors files (ckpt.h). */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "ckpt_crc.h"
#include "crc32c.h"
#include "mha.h"


/* ---- metadata ------------------------------------------------------------------------ */

int ckpt_meta_add(ckpt_meta *m, const char *key, const char *val)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 32;
        const char **k = realloc(m->keys, cap * sizeof *k);
        if (!k)
            return MHA_ENOMEM;
        m->keys = k;
        char **v = realloc(m->vals, cap * sizeof *v);
        if (!v)
            return MHA_ENOMEM;
        m->vals = v;
        m->cap = cap;
    }
    char *copy = malloc(strlen(val) + 1);
    if (!copy)
        return MHA_ENOMEM;
    strcpy(copy, val);
    m->keys[m->n] = key;
    m->vals[m->n] = copy;
    m->n++;
    return MHA_OK;
}

int ckpt_meta_init(ckpt_meta *m, const char *format, const cli_opt *opts, size_t n,
                   const void *cfg)
{
    int st = ckpt_meta_add(m, "format", format);
    for (size_t i = 0; st == MHA_OK && i < n; i++) {
        if (!opts[i].ckpt)
            continue;
        char v[2 * CLI_PATH_CAP];
        cli_format(&opts[i], cfg, v, sizeof v);
        st = ckpt_meta_add(m, opts[i].name, v);
    }
    return st;
}

void ckpt_meta_free(ckpt_meta *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->vals[i]);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- save ---------------------------------------------------------------------------- */

size_t ckpt_remove_stale(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) > 0 ? (int)(slash - path) : 1,
                 path);
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    const size_t blen = strlen(base);
    size_t removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0)
            continue;
        const char *digits = n + blen + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (*digits < '0' || *digits > '9' || *end != '\0' || errno || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to judge): leave it */
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, n);
        if (unlink(full) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

int ckpt_save(const char *path, const ckpt_layout *c, const ckpt_meta *meta, char *err,
              size_t errlen)
{
    const size_t cap = 3 * c->n_t + c->n_s;
    mha_st_tensor *ts = calloc(cap ? cap : 1, sizeof *ts);
    char(*names)[CKPT_NAME_CAP + 64] = calloc(2 * c->n_t + 1, sizeof *names);
    if (!ts || !names) {
        UTIL_FREE_ALL(ts, names);
        return util_fail(MHA_ENOMEM, err, errlen, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < c->n_t; i++) {
        const ckpt_tensor *t = &c->t[i];
        ts[n++] = (mha_st_tensor){t->name, MHA_ST_F32, t->ndim, {t->shape[0], t->shape[1]}, t->p};
    }
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < c->n_t; i++) {
            const ckpt_tensor *t = &c->t[i];
            const float *data = w == 0 ? t->m : t->v;
            if (!c->moment[w] || !data)
                continue;
            char *nm = names[(size_t)w * c->n_t + i];
            snprintf(nm, CKPT_NAME_CAP + 64, "optimizer.%s.%s", c->moment[w], t->name);
            ts[n++] = (mha_st_tensor){nm, MHA_ST_F32, t->ndim, {t->shape[0], t->shape[1]}, data};
        }
    }
    for (size_t i = 0; i < c->n_s; i++) {
        const ckpt_state *s = &c->s[i];
        ts[n++] = (mha_st_tensor){s->name, s->dtype, s->ndim, {s->ndim ? s->len : 0}, s->data};
    }
    const size_t n_meta = meta ? meta->n : 0;
    const int cks = meta && meta->checksums;
    const char **keys = NULL, **vals = NULL;
    char (*ck)[CKPT_NAME_CAP + 80] = NULL, (*cv)[12] = NULL;
    size_t nk = n_meta;
    int st = MHA_OK;
    if (cks) { /* crc32c.<name> per tensor, then crc32c.__metadata__ (see ckpt.h) */
        keys = malloc((n_meta + n + 1) * sizeof *keys);
        vals = malloc((n_meta + n + 1) * sizeof *vals);
        ck = malloc((n + 1) * sizeof *ck);
        cv = malloc((n + 1) * sizeof *cv);
        if (!keys || !vals || !ck || !cv) {
            st = MHA_ENOMEM;
            util_set_err(err, errlen, "out of memory");
        }
        for (size_t i = 0; st == MHA_OK && i < n_meta; i++) {
            keys[i] = meta->keys[i];
            vals[i] = meta->vals[i];
        }
        uint32_t mc = 0;
        if (st == MHA_OK && (st = ckpt_meta_crc(keys, vals, n_meta, &mc)) != MHA_OK)
            util_set_err(err, errlen, "out of memory");
        for (size_t i = 0; st == MHA_OK && i <= n; i++) {
            if (i < n) {
                snprintf(ck[i], sizeof ck[i], CRC_PREFIX "%s", ts[i].name);
                snprintf(cv[i], sizeof cv[i], "%08x", (unsigned)crc32c(0, ts[i].data,
                                                                       ckpt_tensor_bytes(&ts[i])));
            } else {
                snprintf(ck[i], sizeof ck[i], "%s", CRC_META_KEY);
                snprintf(cv[i], sizeof cv[i], "%08x", (unsigned)mc);
            }
            keys[nk] = ck[i];
            vals[nk++] = cv[i];
        }
    }
    if (st == MHA_OK)
        st = mha_st_save(path, ts, n, cks ? keys : meta ? meta->keys : NULL,
                         cks ? vals : meta ? (const char *const *)meta->vals : NULL, nk,
                         err, errlen);
    UTIL_FREE_ALL(keys, vals, ck, cv, ts, names);
    return st;
}

/* ---- load ---------------------------------------------------------------------------- */

/* 1 if `name` is an entry of the layout. */
static int expected(const ckpt_layout *c, const char *name)
{
    for (size_t i = 0; i < c->n_s; i++)
        if (strcmp(name, c->s[i].name) == 0)
            return 1;
    for (size_t i = 0; i < c->n_t; i++) {
        const ckpt_tensor *t = &c->t[i];
        if (strcmp(name, t->name) == 0)
            return 1;
        for (int w = 0; w < 2; w++) {
            char full[CKPT_NAME_CAP + 64];
            if (!c->moment[w] || !(w == 0 ? t->m : t->v))
                continue;
            snprintf(full, sizeof full, "optimizer.%s.%s", c->moment[w], t->name);
            if (strcmp(name, full) == 0)
                return 1;
        }
    }
    return 0;
}

int ckpt_load(const mha_st_file *f, const ckpt_layout *c, char *err, size_t errlen)
{
    const void **src = calloc(3 * c->n_t + c->n_s + 1, sizeof *src);
    if (!src) {
        util_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    /* 0. the bytes are the ones written (when the file has checksums) */
    int st = ckpt_verify(f, err, errlen);
    /* 1. every entry present, with its dtype and shape */
    for (size_t i = 0; st == MHA_OK && i < c->n_t; i++) {
        const ckpt_tensor *t = &c->t[i];
        st = mha_st_get(f, t->name, MHA_ST_F32, t->ndim, t->shape, &src[3 * i], err, errlen);
        for (int w = 0; st == MHA_OK && w < 2; w++) {
            if (!c->moment[w] || !(w == 0 ? t->m : t->v))
                continue;
            char name[CKPT_NAME_CAP + 64];
            snprintf(name, sizeof name, "optimizer.%s.%s", c->moment[w], t->name);
            st = mha_st_get(f, name, MHA_ST_F32, t->ndim, t->shape, &src[3 * i + 1 + (size_t)w],
                            err, errlen);
        }
    }
    for (size_t i = 0; st == MHA_OK && i < c->n_s; i++) {
        const ckpt_state *s = &c->s[i];
        st = mha_st_get(f, s->name, s->dtype, s->ndim, &s->len, &src[3 * c->n_t + i], err, errlen);
    }
    /* 2. weights and moments finite, second moments >= 0 */
    for (size_t i = 0; st == MHA_OK && i < c->n_t; i++) {
        const ckpt_tensor *t = &c->t[i];
        for (int w = 0; st == MHA_OK && w < 3; w++) {
            const float *d = src[3 * i + (size_t)w];
            if (!d)
                continue;
            for (size_t k = 0; k < t->numel; k++) {
                if (isfinite(d[k]) && (w < 2 || d[k] >= 0))
                    continue;
                util_set_err(err, errlen, "tensor %s%s%s%s[%zu] holds %g (weights and optimizer "
                        "moments are finite, second moments >= 0)", w ? "optimizer." : "",
                        w ? c->moment[w - 1] : "", w ? "." : "", t->name, k, (double)d[k]);
                st = MHA_EFORMAT;
                break;
            }
        }
    }
    for (size_t i = 0; st == MHA_OK && i < c->n_s; i++) {
        const ckpt_state *s = &c->s[i];
        if (s->dtype != MHA_ST_F64)
            continue;
        const double *d = src[3 * c->n_t + i];
        for (size_t k = 0; k < (s->ndim ? s->len : 1); k++)
            if (isnan(d[k])) {
                util_set_err(err, errlen, "state %s[%zu] is NaN", s->name, k);
                st = MHA_EFORMAT;
                break;
            }
    }
    /* 3. nothing else */
    for (size_t i = 0; st == MHA_OK && i < mha_st_count(f); i++)
        if (!expected(c, mha_st_name(f, i))) {
            util_set_err(err, errlen, "tensor '%.80s' is not part of this run%s%s",
                          mha_st_name(f, i), c->extra_hint ? " " : "",
                          c->extra_hint ? c->extra_hint : "");
            st = MHA_EFORMAT;
        }
    /* 4. copy */
    for (size_t i = 0; st == MHA_OK && i < c->n_t; i++) {
        const ckpt_tensor *t = &c->t[i];
        float *dst[3] = {t->p, t->m, t->v};
        for (int w = 0; w < 3; w++)
            if (src[3 * i + (size_t)w])
                memcpy(dst[w], src[3 * i + (size_t)w], t->numel * sizeof(float));
    }
    for (size_t i = 0; st == MHA_OK && i < c->n_s; i++) {
        const ckpt_state *s = &c->s[i];
        memcpy(s->data, src[3 * c->n_t + i], (s->ndim ? s->len : 1) * mha_st_dtype_size(s->dtype));
    }
    free(src);
    return st;
}

/* ---- a model's tensor table ---------------------------------------------------------- */

/* Register the table t[n] (Σ numel = sum; tensor i's weight decay wd[i]) with opt and point
 * t[i].m, t[i].v at its moments: one group of segments when the tensors lie end to end in
 * one arena, parameters and gradients alike (mha_gpt's and mha_s2s's do: one moment buffer
 * each), else a group per tensor — the same bits either way (mha_optim_add_segments).
 * end: scratch [n]. */
static int optimize_tensors(mha_optimizer *opt, ckpt_tensor *t, size_t n, size_t sum,
                            const double *wd, size_t *end, char *err, size_t errlen)
{
    int arena = n > 0 && t[0].p && t[0].g;
    for (size_t i = 1; arena && i < n; i++)
        arena = t[i].p == t[i - 1].p + t[i - 1].numel && t[i].g &&
                t[i].g == t[i - 1].g + t[i - 1].numel;
    const size_t g0 = mha_optim_num_groups(opt);
    int st = MHA_OK;
    if (arena) {
        for (size_t i = 0, e = 0; i < n; i++)
            end[i] = e += t[i].numel;
        float *m = NULL, *v = NULL;
        st = mha_optim_add_segments(opt, "model", t[0].p, t[0].g, sum, n, end, wd);
        if (st == MHA_OK)
            st = mha_optim_group(opt, g0, NULL, NULL, &m, &v);
        for (size_t i = 0; st == MHA_OK && i < n; i++) {
            t[i].m = m ? m + (end[i] - t[i].numel) : NULL;
            t[i].v = v ? v + (end[i] - t[i].numel) : NULL;
        }
        if (st != MHA_OK)
            util_set_err(err, errlen, "optimizer: %s", mha_strerror(st));
        return st;
    }
    for (size_t i = 0; st == MHA_OK && i < n; i++) {
        st = mha_optim_add_decay(opt, t[i].name, t[i].p, t[i].g, t[i].numel, wd[i]);
        if (st == MHA_OK)
            st = mha_optim_group(opt, g0 + i, NULL, NULL, &t[i].m, &t[i].v);
        if (st != MHA_OK)
            util_set_err(err, errlen, "optimizer %zu: %s", i, mha_strerror(st));
    }
    return st;
}

int ckpt_tensors_of_model(void *model, size_t n, ckpt_model_tensor_fn tensor,
                          mha_optimizer *opt, double decay, int decay_all, ckpt_tensor **out,
                          float **scratch, size_t *total, char *err, size_t errlen)
{
    *out = NULL;
    *scratch = NULL;
    if (total)
        *total = 0;
    ckpt_tensor *t = calloc(n ? n : 1, sizeof *t);
    double *wd = calloc(n ? n : 1, sizeof *wd);
    size_t *end = calloc(n ? n : 1, sizeof *end);
    if (!t || !wd || !end) {
        UTIL_FREE_ALL(t, wd, end);
        util_set_err(err, errlen, "out of memory for the table of %zu tensors", n);
        return MHA_ENOMEM;
    }
    size_t sum = 0;
    int st = MHA_OK;
    for (size_t i = 0; st == MHA_OK && i < n; i++) {
        mha_param_info info;
        float *p, *grad;
        st = tensor(model, i, &info, &p, &grad);
        if (st != MHA_OK) {
            util_set_err(err, errlen, "model tensor %zu: %s", i, mha_strerror(st));
            break;
        }
        snprintf(t[i].name, sizeof t[i].name, "%s", info.name);
        t[i].p = p;
        t[i].g = grad;
        t[i].ndim = info.ndim;
        t[i].shape[0] = info.shape[0];
        t[i].shape[1] = info.ndim == 2 ? info.shape[1] : 0;
        t[i].numel = info.numel;
        wd[i] = (info.decay || decay_all) ? decay : 0.0;
        sum += info.numel;
    }
    if (st == MHA_OK && opt)
        st = optimize_tensors(opt, t, n, sum, wd, end, err, errlen);
    float *sc = NULL;
    if (st == MHA_OK && !opt) { /* the moments are read (and validated) but not used */
        sc = calloc(2 * sum + 1, sizeof(float));
        if (!sc) {
            util_set_err(err, errlen, "out of memory for %zu moments", 2 * sum);
            st = MHA_ENOMEM;
        }
        for (size_t i = 0, off = 0; sc && i < n; off += t[i].numel, i++) {
            t[i].m = sc + off;
            t[i].v = sc + sum + off;
        }
    }
    UTIL_FREE_ALL(wd, end);
    if (st != MHA_OK) {
        free(t);
        return st;
    }
    *out = t;
    *scratch = sc;
    if (total)
        *total = sum;
    return MHA_OK;
}

/* ---- configuration from metadata ------------------------------------------------------ */

int ckpt_config_from_meta(const mha_st_file *f, const char *path, const char *prefix,
                          const char *format, const cli_opt *opts, size_t n,
                          const int *explicit_opt, void *cfg, size_t cfg_size, char *err,
                          size_t errlen)
{
    const char *fmt = mha_st_meta(f, "format");
    if (!fmt || strcmp(fmt, format) != 0) {
        util_set_err(err, errlen, "%s: not an %s checkpoint (metadata \"format\" is %s)", prefix,
                format, fmt ? fmt : "missing");
        return MHA_EFORMAT;
    }
    void *ck = malloc(cfg_size);
    if (!ck) {
        util_set_err(err, errlen, "out of memory");
        return MHA_ENOMEM;
    }
    memcpy(ck, cfg, cfg_size);
    int st = MHA_OK;
    for (size_t i = 0; st == MHA_OK && i < n; i++) {
        const cli_opt *o = &opts[i];
        if (!o->ckpt)
            continue;
        const char *v = mha_st_meta(f, o->name);
        if (!v && cli_former_name(o->name)) /* written before the option was renamed */
            v = mha_st_meta(f, cli_former_name(o->name));
        if (!v && o->ckpt == 3)
            continue; /* older than the option: the default stays */
        if (!v && o->ckpt == 4 && !explicit_opt[i])
            continue; /* older than the option: made with its default, which cfg holds */
        if (!v && o->ckpt == 4) {
            util_set_err(err, errlen, "checkpoint %s does not fit this run: it was made "
                          "before --%s existed (without it), this run gives it", path, o->name);
            st = MHA_ESHAPE;
            break;
        }
        if (!v) {
            util_set_err(err, errlen, "%s: its metadata has no \"%s\"", prefix, o->name);
            st = MHA_EFORMAT;
            break;
        }
        const char *e = cli_parse(o, v, ck);
        if (e) {
            util_set_err(err, errlen, "%s: metadata %s = \"%.200s\" %s", prefix, o->name, v, e);
            st = MHA_EFORMAT;
            break;
        }
        char mine[2 * CLI_PATH_CAP], theirs[2 * CLI_PATH_CAP];
        cli_format(o, cfg, mine, sizeof mine);
        cli_format(o, ck, theirs, sizeof theirs);
        if ((o->ckpt == 1 || o->ckpt == 4) && explicit_opt[i] && strcmp(mine, theirs) != 0) {
            util_set_err(err, errlen, "checkpoint %s does not fit this run: it was made with --%s "
                    "%.200s, this run asks for --%s %.200s", path, o->name, theirs, o->name,
                    mine);
            st = MHA_ESHAPE;
        }
    }
    if (st == MHA_OK)
        for (size_t i = 0; i < n; i++)
            if (opts[i].ckpt == 1 || opts[i].ckpt == 4 ||
                (opts[i].ckpt >= 2 && !explicit_opt[i]))
                cli_copy_field(&opts[i], cfg, ck);
    free(ck);
    return st;
}
