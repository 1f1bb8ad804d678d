/* Toy tasks for mha-train: see toy_tasks.h. */
#include "toy_tasks.h"

#include <stdlib.h>
#include <string.h>

static const char *const task_names[] = {"reverse", "copy", "lookup"};

const char *task_name(task_kind kind)
{
    return ((unsigned)kind < 3) ? task_names[kind] : NULL;
}

int task_parse(const char *name, task_kind *kind)
{
    if (!name || !kind)
        return MHA_EINVAL;
    for (unsigned k = 0; k < 3; k++)
        if (strcmp(name, task_names[k]) == 0) {
            *kind = (task_kind)k;
            return MHA_OK;
        }
    return MHA_EINVAL;
}

/* Sequence length S and context length Sk of a spec. */
static void task_lengths(const task_spec *t, size_t *S, size_t *Sk)
{
    *S = (t->kind == TASK_COPY) ? 2 * t->n : t->n;
    *Sk = (t->kind == TASK_LOOKUP) ? t->pairs : 0;
}

int task_model_shape(const task_spec *t, tm_config *cfg)
{
    if (!t || !cfg || (unsigned)t->kind > 2 || t->vocab < 2 || t->n == 0 ||
        t->vocab > TASK_MAX_VOCAB || t->n > TASK_MAX_LEN)
        return MHA_EINVAL;
    if (t->kind == TASK_LOOKUP && (t->pairs == 0 || t->pairs > t->vocab))
        return MHA_EINVAL;
    size_t S, Sk;
    task_lengths(t, &S, &Sk);
    cfg->vocab_in = (t->kind == TASK_COPY) ? t->vocab + 1 : t->vocab;
    cfg->vocab_out = t->vocab;
    cfg->seq_len = S;
    cfg->ctx_len = Sk;
    cfg->causal = (t->kind == TASK_COPY);
    return MHA_OK;
}

/* FNV-1a 64 over 32-bit words, byte by byte. */
static uint64_t fnv_words(uint64_t h, const int32_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)w[i];
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

uint64_t task_hash(const task_spec *t, const int32_t *tokens, const int32_t *ctx)
{
    size_t S, Sk;
    task_lengths(t, &S, &Sk);
    int32_t kind = (int32_t)t->kind;
    uint64_t h = fnv_words(0xCBF29CE484222325ull, &kind, 1);
    h = fnv_words(h, tokens, S);
    if (Sk && ctx)
        h = fnv_words(h, ctx, 2 * Sk);
    /* splitmix64 finaliser, so that h % 8 uses well-mixed bits */
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

static int32_t draw(mha_pcg32 *rng, size_t bound)
{
    uint32_t r = 0;
    mha_pcg32_bounded(rng, (uint32_t)bound, &r);
    return (int32_t)r;
}

/* One example of any split (no rejection). */
static void task_draw(const task_spec *t, mha_pcg32 *rng, int32_t *tokens, int32_t *ctx,
                      int32_t *targets)
{
    const size_t n = t->n, V = t->vocab;
    switch (t->kind) {
    case TASK_REVERSE:
        for (size_t i = 0; i < n; i++)
            tokens[i] = draw(rng, V);
        for (size_t i = 0; i < n; i++)
            targets[i] = tokens[n - 1 - i];
        break;
    case TASK_COPY:
        /* tokens: a₀..a_{n−1} SEP a₀..a_{n−2}; targets: −1 ×n, a₀..a_{n−1} */
        for (size_t i = 0; i < n; i++)
            tokens[i] = draw(rng, V);
        tokens[n] = (int32_t)V;
        for (size_t k = 0; k + 1 < n; k++)
            tokens[n + 1 + k] = tokens[k];
        for (size_t i = 0; i < n; i++) {
            targets[i] = -1;
            targets[n + i] = tokens[i];
        }
        break;
    case TASK_LOOKUP: {
        /* distinct keys: the first `pairs` of a partial Fisher–Yates shuffle of [0,V) */
        const size_t P = t->pairs;
        int32_t pool[TASK_MAX_VOCAB];
        for (size_t v = 0; v < V; v++)
            pool[v] = (int32_t)v;
        for (size_t j = 0; j < P; j++) {
            size_t r = j + (size_t)draw(rng, V - j);
            int32_t tmp = pool[j];
            pool[j] = pool[r];
            pool[r] = tmp;
            ctx[2 * j] = pool[j];         /* key   */
            ctx[2 * j + 1] = draw(rng, V); /* value */
        }
        for (size_t i = 0; i < n; i++) {
            size_t j = (size_t)draw(rng, P);
            tokens[i] = ctx[2 * j];
            targets[i] = ctx[2 * j + 1];
        }
        break;
    }
    }
}

int task_sample(const task_spec *t, mha_pcg32 *rng, task_split split, int32_t *tokens,
                int32_t *ctx, int32_t *targets)
{
    tm_config shape;
    if (!rng || !tokens || !targets || task_model_shape(t, &shape) != MHA_OK ||
        (t->kind == TASK_LOOKUP && !ctx))
        return MHA_EINVAL;
    for (int tries = 0; tries < 10000; tries++) {
        task_draw(t, rng, tokens, ctx, targets);
        int is_eval = (task_hash(t, tokens, ctx) % 8u) == 0;
        if (is_eval == (split == TASK_EVAL))
            return MHA_OK;
    }
    return MHA_EINVAL;
}

int task_buffer_init(task_buffer *buf, const task_spec *t, size_t cap)
{
    tm_config shape;
    if (!buf || cap == 0 || task_model_shape(t, &shape) != MHA_OK)
        return MHA_EINVAL;
    memset(buf, 0, sizeof *buf);
    buf->cap = cap;
    buf->S = shape.seq_len;
    buf->Sk = shape.ctx_len;
    if (cap > SIZE_MAX / sizeof(int32_t) / (buf->S + 2 * buf->Sk + 1))
        return MHA_EOVERFLOW;
    buf->tokens = calloc(cap * buf->S, sizeof(int32_t));
    buf->targets = calloc(cap * buf->S, sizeof(int32_t));
    if (buf->Sk)
        buf->ctx = calloc(cap * buf->Sk * 2, sizeof(int32_t));
    if (!buf->tokens || !buf->targets || (buf->Sk && !buf->ctx)) {
        task_buffer_free(buf);
        return MHA_ENOMEM;
    }
    return MHA_OK;
}

void task_buffer_free(task_buffer *buf)
{
    if (!buf)
        return;
    free(buf->tokens);
    free(buf->targets);
    free(buf->ctx);
    memset(buf, 0, sizeof *buf);
}

int task_fill(const task_spec *t, mha_pcg32 *rng, task_split split, task_buffer *buf,
              size_t first, size_t count)
{
    if (!buf || first > buf->cap || count > buf->cap - first)
        return MHA_EINVAL;
    for (size_t i = first; i < first + count; i++) {
        int st = task_sample(t, rng, split, buf->tokens + i * buf->S,
                             buf->ctx ? buf->ctx + i * buf->Sk * 2 : NULL,
                             buf->targets + i * buf->S);
        if (st != MHA_OK)
            return st;
    }
    return MHA_OK;
}

tm_batch task_view(const task_buffer *buf, size_t first, size_t count)
{
    tm_batch b = {.batch = count,
                  .tokens = buf->tokens + first * buf->S,
                  .ctx = buf->ctx ? buf->ctx + first * buf->Sk * 2 : NULL,
                  .targets = buf->targets + first * buf->S};
    return b;
}
