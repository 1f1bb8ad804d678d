/*
 * mha-gpt-bench — times the baby GPT of the "tiny GPT" issue in C: one training step
 * (zero_grad, forward, backward, global-norm clip, AdamW step) on random windows of a
 * text, and generation with and without the key/value cache.
 *
 *   mha-gpt-bench [--data FILE] [--threads 1,2] [--precision fp32] [--steps 60]
 *                 [--warmup 10] [--layers 4 --heads 4 --dim 128 --context 64 --batch 12]
 *                 [--gen-chars 2000] [--json FILE] [--check-precision LIST]
 *
 * Per precision (--precision fp32, bf16 or fp32,bf16: the model's mha_gpt_config.precision;
 * bf16 = bfloat16 operands with float32 sums in the projections, the MLP and the read-out)
 * and thread count it reports the median (and min) milliseconds of a whole step and
 * the medians of its three parts (forward, backward, optimizer), and tokens/s; and the
 * median of an evaluation forward (training = 0, with the loss, as mha-gpt train's
 * evaluation runs it) over min(--steps, 20) batches. A precision this CPU cannot run: a
 * message naming the missing CPU feature, exit status 2. Then,
 * with one thread, characters/s of generation: with the cache (each character costs
 * one row per block; when the window is full the last context/2 characters are fed
 * again) and without it (a forward over the whole window per character), sampling the
 * argmax so both produce the same text. Generation always runs in float32, as `mha-gpt
 * sample` does.
 * The bench prints; the library does not. bench/run_gpt.sh runs it beside PyTorch.
 */
#include <errno.h>
#include <math.h>
#include <mha.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_precision.h"

typedef struct opts {
    const char *data, *json;
    int threads[8];
    size_t n_threads;
    long steps, warmup, gen_chars;
    size_t layers, heads, dim, context, batch;
    mha_precision precisions[BENCH_MAX_PRECISIONS];
    size_t n_precisions;
} opts;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, long n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void die(const char *msg, int st)
{
    fprintf(stderr, "mha-gpt-bench: %s: %s\n", msg, mha_strerror(st));
    exit(1);
}

/* The text as ids of its sorted distinct bytes; *V gets the vocabulary size. */
static int32_t *load_text(const char *path, size_t *n, size_t *V)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "mha-gpt-bench: cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf || len < 1000) {
        fprintf(stderr, "mha-gpt-bench: %s is too short\n", path);
        exit(2);
    }
    int32_t map[256];
    int seen[256] = {0};
    for (size_t i = 0; i < len; i++)
        seen[buf[i]] = 1;
    int32_t v = 0;
    for (int c = 0; c < 256; c++)
        map[c] = seen[c] ? v++ : -1;
    int32_t *ids = malloc(len * sizeof *ids);
    for (size_t i = 0; i < len; i++)
        ids[i] = map[buf[i]];
    free(buf);
    *n = len;
    *V = (size_t)v;
    return ids;
}

static void usage(void)
{
    puts("usage: mha-gpt-bench [--data FILE] [--threads LIST] [--precision LIST] [--steps N]\n"
         "                     [--warmup N] [--layers N] [--heads N] [--dim N] [--context N]\n"
         "                     [--batch N] [--gen-chars N] [--json FILE]\n"
         "       mha-gpt-bench --check-precision LIST\n"
         "defaults: --data data/tinyshakespeare.txt --threads 1,2 --precision fp32 --steps 60\n"
         "          --warmup 10 --layers 4 --heads 4 --dim 128 --context 64 --batch 12\n"
         "          --gen-chars 2000\n"
         "--precision: fp32, bf16 (bfloat16 products, float32 sums; needs AVX512_BF16) or\n"
         "  fp32,bf16: the training step is timed in each (generation: float32). A precision\n"
         "  this CPU lacks: a message, exit status 2. --check-precision LIST: say whether each\n"
         "  runs here and exit (0 all available, 2 not).");
}

static size_t parse_size(const char *opt, const char *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-' || x == 0) {
        fprintf(stderr, "mha-gpt-bench: %s: expected a positive integer, got '%s'\n", opt, v);
        exit(2);
    }
    return (size_t)x;
}

static void parse(int argc, char **argv, opts *o)
{
    *o = (opts){.data = "data/tinyshakespeare.txt", .threads = {1, 2}, .n_threads = 2,
                .steps = 60, .warmup = 10, .gen_chars = 2000, .layers = 4, .heads = 4,
                .dim = 128, .context = 64, .batch = 12,
                .precisions = {MHA_PRECISION_FP32}, .n_precisions = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mha-gpt-bench: %s needs a value\n", a);
            exit(2);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--steps")) o->steps = (long)parse_size(a, v);
        else if (!strcmp(a, "--warmup")) o->warmup = (long)parse_size(a, v);
        else if (!strcmp(a, "--gen-chars")) o->gen_chars = (long)parse_size(a, v);
        else if (!strcmp(a, "--layers")) o->layers = parse_size(a, v);
        else if (!strcmp(a, "--heads")) o->heads = parse_size(a, v);
        else if (!strcmp(a, "--dim")) o->dim = parse_size(a, v);
        else if (!strcmp(a, "--context")) o->context = parse_size(a, v);
        else if (!strcmp(a, "--batch")) o->batch = parse_size(a, v);
        else if (!strcmp(a, "--precision"))
            o->n_precisions = bench_precision_parse("mha-gpt-bench", v, o->precisions);
        else if (!strcmp(a, "--check-precision"))
            bench_precision_check_and_exit("mha-gpt-bench", v);
        else if (!strcmp(a, "--threads")) {
            o->n_threads = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t && o->n_threads < 8; t = strtok(NULL, ","))
                o->threads[o->n_threads++] = (int)parse_size(a, t);
        } else {
            fprintf(stderr, "mha-gpt-bench: unknown option %s (try --help)\n", a);
            exit(2);
        }
    }
    bench_precision_require("mha-gpt-bench", o->precisions, o->n_precisions);
}

typedef struct train_result {
    int threads;
    mha_precision precision;
    double ms, min_ms, mean_ms, fwd_ms, bwd_ms, opt_ms, tokens_per_s, loss, eval_ms;
    long eval_batches;
} train_result;

static train_result time_training(const opts *o, const int32_t *ids, size_t n, size_t V,
                                  int threads, mha_precision prec)
{
    mha_gpt_config c = {.vocab = V, .context = o->context, .layers = o->layers,
                        .heads = o->heads, .dim = o->dim, .seed = 1337, .threads = threads,
                        .precision = prec};
    mha_gpt *g;
    mha_optimizer *opt;
    mha_optim_config oc;
    int st;
    if ((st = mha_gpt_create(&g, &c, o->batch)))
        die("mha_gpt_create", st);
    mha_optim_default_config(MHA_OPTIM_ADAMW, &oc);
    oc.beta2 = 0.99;
    /* the optimizer and clipping run on the caller's OpenMP setting (the model sets its
     * own around each call): one thread means one thread for the whole step, as in
     * mha-gpt train --threads */
    omp_set_num_threads(threads);
    if ((st = mha_optim_create(&opt, &oc)))
        die("mha_optim_create", st);
    for (size_t i = 0; i < mha_gpt_num_tensors(g); i++) {
        mha_param_info in;
        float *p, *gr;
        mha_gpt_tensor(g, i, &in, &p, &gr);
        if ((st = mha_optim_add_decay(opt, in.name, p, gr, in.numel, in.decay ? 0.1 : 0.0)))
            die("mha_optim_add_decay", st);
    }
    const size_t B = o->batch, T = o->context;
    int32_t *tok = malloc(B * T * sizeof *tok), *tgt = malloc(B * T * sizeof *tgt);
    const long total = o->warmup + o->steps;
    double *t_all = malloc((size_t)total * sizeof(double) * 4), *t_f = t_all + total,
           *t_b = t_f + total, *t_o = t_b + total;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 1, 7);
    double loss = 0;
    for (long s = 0; s < total; s++) {
        for (size_t b = 0; b < B; b++) {
            uint32_t off;
            mha_pcg32_bounded(&rng, (uint32_t)(n - T - 1), &off);
            memcpy(tok + b * T, ids + off, T * sizeof *tok);
            memcpy(tgt + b * T, ids + off + 1, T * sizeof *tgt);
        }
        double t0 = now();
        mha_gpt_zero_grad(g);
        if ((st = mha_gpt_forward(g, 1, B, T, tok, tgt, &loss)))
            die("forward", st);
        double t1 = now();
        if ((st = mha_gpt_backward(g)))
            die("backward", st);
        double t2 = now();
        mha_optim_clip_grad_norm(opt, 1.0, NULL);
        mha_optim_step(opt, 1e-3);
        double t3 = now();
        t_all[s] = t3 - t0;
        t_f[s] = t1 - t0;
        t_b[s] = t2 - t1;
        t_o[s] = t3 - t2;
    }
    /* evaluation forwards (training = 0, loss on the targets), as mha-gpt train evaluates:
     * min(steps, 20) random batches, after one untimed */
    const long n_eval = o->steps < 20 ? o->steps : 20;
    double *t_ev = malloc((size_t)(n_eval + 1) * sizeof *t_ev);
    for (long s = 0; s <= n_eval; s++) {
        for (size_t b = 0; b < B; b++) {
            uint32_t off;
            mha_pcg32_bounded(&rng, (uint32_t)(n - T - 1), &off);
            memcpy(tok + b * T, ids + off, T * sizeof *tok);
            memcpy(tgt + b * T, ids + off + 1, T * sizeof *tgt);
        }
        double el, t0 = now();
        if ((st = mha_gpt_forward(g, 0, B, T, tok, tgt, &el)))
            die("evaluation forward", st);
        t_ev[s] = now() - t0;
    }
    train_result r = {.threads = threads, .precision = prec, .loss = loss,
                      .eval_batches = n_eval};
    r.eval_ms = 1e3 * median(t_ev + 1, n_eval);
    free(t_ev);
    double mn = t_all[o->warmup], sum = 0;
    for (long s = o->warmup; s < total; s++) {
        mn = fmin(mn, t_all[s]);
        sum += t_all[s];
    }
    /* the mean too: what a training run's own step time (mha-gpt train's step_ms) is */
    r.mean_ms = 1e3 * sum / (double)o->steps;
    r.ms = 1e3 * median(t_all + o->warmup, o->steps);
    r.min_ms = 1e3 * mn;
    r.fwd_ms = 1e3 * median(t_f + o->warmup, o->steps);
    r.bwd_ms = 1e3 * median(t_b + o->warmup, o->steps);
    r.opt_ms = 1e3 * median(t_o + o->warmup, o->steps);
    r.tokens_per_s = (double)(B * T) / (r.ms * 1e-3);
    free(t_all);
    free(tok);
    free(tgt);
    mha_optim_destroy(opt);
    mha_gpt_destroy(g);
    return r;
}

/* Characters per second of greedy generation from "\n"-like id 0, with (cached = 1) or
 * without the key/value cache; one thread. *checksum: sum of the ids generated. */
static double time_generation(const opts *o, size_t V, int cached, long chars, long *checksum)
{
    mha_gpt_config c = {.vocab = V, .context = o->context, .layers = o->layers,
                        .heads = o->heads, .dim = o->dim, .seed = 1337, .threads = 1};
    mha_gpt *g;
    mha_gpt_infer *s = NULL;
    int st;
    if ((st = mha_gpt_create(&g, &c, 1)))
        die("mha_gpt_create", st);
    const size_t T = o->context;
    if (cached && (st = mha_gpt_infer_create(&s, g, 1, T)))
        die("mha_gpt_infer_create", st);
    int32_t *hist = malloc((size_t)(chars + 1) * sizeof *hist);
    float *logits = malloc(V * sizeof *logits);
    hist[0] = 0;
    size_t len = 1;
    long sum = 0;
    double t0 = now();
    if (cached && (st = mha_gpt_infer_step(g, s, 1, 1, hist, logits)))
        die("infer", st);
    for (long k = 0; k < chars; k++) {
        const float *z = logits;
        if (!cached) { /* forward over the last min(len, T) characters */
            size_t w = len < T ? len : T;
            if ((st = mha_gpt_forward(g, 0, 1, w, hist + len - w, NULL, NULL)))
                die("forward", st);
            z = mha_gpt_logits(g, NULL) + (w - 1) * V;
        }
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (z[v] > z[best])
                best = v;
        hist[len++] = (int32_t)best;
        sum += (long)best;
        if (cached) {
            size_t have;
            mha_gpt_infer_length(s, &have);
            if (have == T) { /* slide: feed the last T/2 characters again */
                mha_gpt_infer_reset(s);
                size_t keep = T / 2;
                st = mha_gpt_infer_step(g, s, 1, keep, hist + len - keep, logits);
            } else {
                st = mha_gpt_infer_step(g, s, 1, 1, hist + len - 1, logits);
            }
            if (st)
                die("infer", st);
        }
    }
    double dt = now() - t0;
    *checksum = sum;
    free(hist);
    free(logits);
    mha_gpt_infer_destroy(s);
    mha_gpt_destroy(g);
    return (double)chars / dt;
}

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, &o);
    size_t n, V;
    int32_t *ids = load_text(o.data, &n, &V);
    if (n < 2 * (o.context + 1)) {
        fprintf(stderr, "mha-gpt-bench: the text is shorter than two windows\n");
        return 2;
    }
    printf("baby GPT: L%zu H%zu C%zu context %zu batch %zu, V %zu, %ld steps after %ld "
           "warm-up\n", o.layers, o.heads, o.dim, o.context, o.batch, V, o.steps, o.warmup);
    train_result res[8 * BENCH_MAX_PRECISIONS];
    size_t n_res = 0;
    for (size_t k = 0; k < o.n_precisions; k++)
        for (size_t i = 0; i < o.n_threads; i++) {
            train_result *r = &res[n_res++];
            *r = time_training(&o, ids, n, V, o.threads[i], o.precisions[k]);
            printf("%s, threads %d: step %.2f ms (min %.2f, mean %.2f; forward %.2f, backward "
                   "%.2f, optimizer %.2f), %.0f tokens/s; evaluation forward %.2f ms\n",
                   mha_precision_name(r->precision), r->threads, r->ms, r->min_ms, r->mean_ms,
                   r->fwd_ms, r->bwd_ms, r->opt_ms, r->tokens_per_s, r->eval_ms);
        }
    long ck_cached, ck_full;
    double cps = time_generation(&o, V, 1, o.gen_chars, &ck_cached);
    double cps_full = time_generation(&o, V, 0, o.gen_chars, &ck_full);
    (void)ck_cached;
    (void)ck_full;
    printf("generation, fp32, 1 thread: %.0f chars/s with the cache, %.0f chars/s without (%.1fx)\n",
           cps, cps_full, cps / cps_full);
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "mha-gpt-bench: cannot write %s: %s\n", o.json, strerror(errno));
            return 1;
        }
        fprintf(f, "{\"layers\": %zu, \"heads\": %zu, \"dim\": %zu, \"context\": %zu, "
                   "\"batch\": %zu, \"vocab\": %zu, \"steps\": %ld, \"precisions\": [",
                o.layers, o.heads, o.dim, o.context, o.batch, V, o.steps);
        for (size_t k = 0; k < o.n_precisions; k++)
            fprintf(f, "%s\"%s\"", k ? ", " : "", mha_precision_name(o.precisions[k]));
        fprintf(f, "], \"train\": [");
        for (size_t i = 0; i < n_res; i++)
            fprintf(f, "%s{\"precision\": \"%s\", \"threads\": %d, \"ms\": %.4f, "
                       "\"min_ms\": %.4f, \"mean_ms\": %.4f, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, "
                       "\"opt_ms\": %.4f, \"tokens_per_s\": %.1f, \"eval_fwd_ms\": %.4f, "
                       "\"eval_batches\": %ld}",
                    i ? ", " : "", mha_precision_name(res[i].precision), res[i].threads,
                    res[i].ms, res[i].min_ms, res[i].mean_ms, res[i].fwd_ms, res[i].bwd_ms,
                    res[i].opt_ms,
                    res[i].tokens_per_s, res[i].eval_ms, res[i].eval_batches);
        fprintf(f, "], \"gen_precision\": \"fp32\", \"gen_chars_per_s\": %.1f, "
                   "\"gen_chars_per_s_no_cache\": %.1f}\n", cps, cps_full);
        fclose(f);
    }
    free(ids);
    return 0;
}
