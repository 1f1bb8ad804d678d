/*
 * mha-g2p-bench — the G2P encoder–decoder (include/mha_s2s.h) in C: one training step
 * (zero_grad, forward, backward, global-norm clip, AdamW step) on synthetic batches, the
 * same step and batches as bench/torch_g2p.py times in PyTorch; then greedy and beam
 * decoding speed of random words.
 *
 *   mha-g2p-bench [--src-vocab 30 --tgt-vocab 72 --src-context 36 --tgt-context 36]
 *                 [--enc-layers 3 --dec-layers 3 --heads 4 --dim 192 --mlp-dim 768]
 *                 [--dropout 0.1 --label-smoothing 0.1 --batch 128 --src-len 10
 *                  --tgt-len 10] [--steps 30 --warmup 5] [--threads 1,2]
 *                 [--lr 1e-3 --weight-decay 0.1 --beta2 0.99 --clip 1.0 --seed 1]
 *                 [--decode-words 2000 --beam 4] [--precision fp32] [--json FILE]
 *   mha-g2p-bench --check-precision LIST
 *
 * --precision fp32, bf16 or fp32,bf16: the training step is timed in each (the model's
 * mha_s2s_config.precision; bf16 = bfloat16 operands with float32 sums in the blocks'
 * projections, the MLPs and the read-out); a precision this CPU cannot run: a message
 * naming the missing CPU feature, exit status 2. Decoding is timed in float32 only.
 *
 * Model: float32 mha_s2s, tied read-out, attention STORED (as mha-g2p), dropout p on the
 * attention weights and on the embeddings/residual branches, label-smoothed loss.
 * Optimizer: AdamW (β1 0.9, β2 --beta2, eps 1e-8, constant --lr), decoupled decay
 * --weight-decay on the matmul weights only (mha_param_info.decay, as mha-g2p's
 * g2p_run_create and torch_g2p's decay group), global gradient norm clipped to --clip.
 *
 * Batches (synthetic, drawn once from PCG32(--seed) before the first thread count, so
 * every count sees the same ones): B rows of padded widths S = --src-len, T = --tgt-len;
 * row b's source length uniform in [⌊S/2⌋, S] (ids uniform in [1, Vs), 0 after it); its
 * target length n uniform in [⌊T/2⌋, T]: tgt_in = [BOS = 1, y_1 … y_{n−1}, 0 …],
 * targets = [y_1 … y_{n−1}, EOS = 2, −1 …], y uniform in [3, Vt) — torch_g2p.py's rule
 * (its own generator, so not the same numbers; the same distribution).
 *
 * Per thread count N (the model's config.threads, and omp_set_num_threads(N) around the
 * whole step, so that the optimizer — which runs on the caller's OpenMP threads — uses N
 * as well, as torch.set_num_threads(N) does for PyTorch's): the model and optimizer are
 * made afresh from --seed, --warmup untimed steps, then --steps timed ones; reported: the
 * median and min ms of a whole step, the medians of forward (zero_grad included),
 * backward and optimizer (clip + AdamW), and words (pairs) per second = B / median.
 *
 * Decoding (--decode-words W, 0 = skip): W random words (length uniform in [⌊S/2⌋, S],
 * ids in [1, Vs)), sorted by length as mha-g2p does, decoded in batches of 256 with
 * mha_s2s_greedy and with mha_s2s_beam (width --beam, 1 best, alpha 1), BOS 1, EOS 2,
 * max_len = tgt_context, on a fresh untrained model (max_batch 256) per thread count;
 * words/s = W / wall time (one untimed batch first). WORST CASE: an untrained model
 * almost never emits EOS, so every hypothesis runs to max_len (the JSON's
 * mean_out_len / eos_fraction show it); a trained model's rate is what `mha-g2p eval`
 * reports (bench/run_g2p.sh runs it when a model exists).
 * The bench prints; the library does not. bench/run_g2p.sh runs it beside PyTorch.
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

enum { MAX_THREADS = 8, DECODE_BATCH = 256, BOS = 1, EOS = 2, PAD = 0 };

typedef struct opts {
    const char *json;
    int threads[MAX_THREADS];
    size_t n_threads;
    size_t src_vocab, tgt_vocab, src_context, tgt_context, enc_layers, dec_layers, heads, dim,
        mlp_dim, batch, src_len, tgt_len, steps, warmup, decode_words, beam;
    double dropout, label_smoothing, lr, weight_decay, beta2, clip;
    uint64_t seed;
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

/* Median of x[0..n) (sorts x). */
static double median(double *x, size_t n)
{
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void die(const char *msg, int st)
{
    fprintf(stderr, "mha-g2p-bench: %s: %s\n", msg, mha_strerror(st));
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "mha-g2p-bench: out of memory\n");
        exit(1);
    }
    return p;
}

/* Uniform in [lo, hi] (lo <= hi < 2^32). */
static uint32_t draw(mha_pcg32 *rng, uint32_t lo, uint32_t hi)
{
    uint32_t r = 0;
    mha_pcg32_bounded(rng, hi - lo + 1, &r);
    return lo + r;
}

static void usage(void)
{
    puts("usage: mha-g2p-bench [--src-vocab N] [--tgt-vocab N] [--src-context N]\n"
         "         [--tgt-context N] [--enc-layers N] [--dec-layers N] [--heads N] [--dim N]\n"
         "         [--mlp-dim N] [--dropout P] [--label-smoothing E] [--batch N]\n"
         "         [--src-len S] [--tgt-len T] [--steps N] [--warmup N] [--threads LIST]\n"
         "         [--lr X] [--weight-decay X] [--beta2 X] [--clip X] [--seed N]\n"
         "         [--decode-words N] [--beam K] [--precision LIST] [--json FILE]\n"
         "       mha-g2p-bench --check-precision LIST\n"
         "defaults: --src-vocab 30 --tgt-vocab 72 --src-context 36 --tgt-context 36\n"
         "          --enc-layers 3 --dec-layers 3 --heads 4 --dim 192 --mlp-dim 768\n"
         "          --dropout 0.1 --label-smoothing 0.1 --batch 128 --src-len 10 --tgt-len 10\n"
         "          --steps 30 --warmup 5 --threads 1,2 --lr 1e-3 --weight-decay 0.1\n"
         "          --beta2 0.99 --clip 1.0 --seed 1 --decode-words 2000 --beam 4\n"
         "          --precision fp32\n"
         "--precision: fp32, bf16 (bfloat16 products, float32 sums; needs AVX512_BF16) or\n"
         "  fp32,bf16: the training step is timed in each (decoding: float32); a precision\n"
         "  this CPU lacks: a message, exit status 2. --check-precision LIST: say whether\n"
         "  each runs here and exit (0 all available, 2 not).\n"
         "(--warmup-steps is --warmup, as bench/torch_g2p.py spells it; --mlp-dim 0 = 4·dim;\n"
         " --decode-words 0 skips decoding)");
}

/* A non-negative integer (positive unless allow_zero). */
static size_t parse_size(const char *opt, const char *v, int allow_zero)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-' || (x == 0 && !allow_zero) ||
        x > (unsigned long long)INT32_MAX) {
        fprintf(stderr, "mha-g2p-bench: %s: expected a %s integer, got '%s'\n", opt,
                allow_zero ? "non-negative" : "positive", v);
        exit(2);
    }
    return (size_t)x;
}

static double parse_double(const char *opt, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "mha-g2p-bench: %s: expected a number in [%g, %g], got '%s'\n", opt,
                lo, hi, v);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, opts *o)
{
    *o = (opts){.threads = {1, 2}, .n_threads = 2, .src_vocab = 30, .tgt_vocab = 72,
                .src_context = 36, .tgt_context = 36, .enc_layers = 3, .dec_layers = 3,
                .heads = 4, .dim = 192, .mlp_dim = 768, .batch = 128, .src_len = 10,
                .tgt_len = 10, .steps = 30, .warmup = 5, .decode_words = 2000, .beam = 4,
                .dropout = 0.1, .label_smoothing = 0.1, .lr = 1e-3, .weight_decay = 0.1,
                .beta2 = 0.99, .clip = 1.0, .seed = 1,
                .precisions = {MHA_PRECISION_FP32}, .n_precisions = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mha-g2p-bench: %s needs a value\n", a);
            exit(2);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--src-vocab")) o->src_vocab = parse_size(a, v, 0);
        else if (!strcmp(a, "--tgt-vocab")) o->tgt_vocab = parse_size(a, v, 0);
        else if (!strcmp(a, "--src-context")) o->src_context = parse_size(a, v, 0);
        else if (!strcmp(a, "--tgt-context")) o->tgt_context = parse_size(a, v, 0);
        else if (!strcmp(a, "--enc-layers")) o->enc_layers = parse_size(a, v, 0);
        else if (!strcmp(a, "--dec-layers")) o->dec_layers = parse_size(a, v, 0);
        else if (!strcmp(a, "--heads")) o->heads = parse_size(a, v, 0);
        else if (!strcmp(a, "--dim")) o->dim = parse_size(a, v, 0);
        else if (!strcmp(a, "--mlp-dim")) o->mlp_dim = parse_size(a, v, 1);
        else if (!strcmp(a, "--batch")) o->batch = parse_size(a, v, 0);
        else if (!strcmp(a, "--src-len")) o->src_len = parse_size(a, v, 0);
        else if (!strcmp(a, "--tgt-len")) o->tgt_len = parse_size(a, v, 0);
        else if (!strcmp(a, "--steps")) o->steps = parse_size(a, v, 0);
        else if (!strcmp(a, "--warmup") || !strcmp(a, "--warmup-steps"))
            o->warmup = parse_size(a, v, 1);
        else if (!strcmp(a, "--decode-words")) o->decode_words = parse_size(a, v, 1);
        else if (!strcmp(a, "--beam")) o->beam = parse_size(a, v, 0);
        else if (!strcmp(a, "--dropout")) o->dropout = parse_double(a, v, 0, 0.99);
        else if (!strcmp(a, "--label-smoothing")) o->label_smoothing = parse_double(a, v, 0, 0.99);
        else if (!strcmp(a, "--lr")) o->lr = parse_double(a, v, 0, 1e6);
        else if (!strcmp(a, "--weight-decay")) o->weight_decay = parse_double(a, v, 0, 1e3);
        else if (!strcmp(a, "--beta2")) o->beta2 = parse_double(a, v, 0, 0.999999);
        else if (!strcmp(a, "--clip")) o->clip = parse_double(a, v, 0, 1e12);
        else if (!strcmp(a, "--seed")) o->seed = (uint64_t)parse_size(a, v, 1);
        else if (!strcmp(a, "--precision"))
            o->n_precisions = bench_precision_parse("mha-g2p-bench", v, o->precisions);
        else if (!strcmp(a, "--check-precision"))
            bench_precision_check_and_exit("mha-g2p-bench", v);
        else if (!strcmp(a, "--threads")) {
            o->n_threads = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                if (o->n_threads == MAX_THREADS) {
                    fprintf(stderr, "mha-g2p-bench: --threads: at most %d counts\n",
                            MAX_THREADS);
                    exit(2);
                }
                o->threads[o->n_threads++] = (int)parse_size(a, t, 0);
            }
            if (o->n_threads == 0) {
                fprintf(stderr, "mha-g2p-bench: --threads: empty list\n");
                exit(2);
            }
        } else {
            fprintf(stderr, "mha-g2p-bench: unknown option %s (try --help)\n", a);
            exit(2);
        }
    }
    if (o->src_len > o->src_context || o->tgt_len > o->tgt_context) {
        fprintf(stderr, "mha-g2p-bench: need --src-len <= --src-context and --tgt-len <= "
                        "--tgt-context\n");
        exit(2);
    }
    if (o->src_vocab < 2 || o->tgt_vocab < 4) {
        fprintf(stderr, "mha-g2p-bench: need --src-vocab >= 2 (padding + a letter) and "
                        "--tgt-vocab >= 4 (padding, BOS, EOS + a phone)\n");
        exit(2);
    }
    if (o->dim % o->heads) {
        fprintf(stderr, "mha-g2p-bench: --heads must divide --dim\n");
        exit(2);
    }
    bench_precision_require("mha-g2p-bench", o->precisions, o->n_precisions);
}

static mha_s2s_config model_config(const opts *o, int threads, mha_precision prec)
{
    return (mha_s2s_config){.src_vocab = o->src_vocab, .tgt_vocab = o->tgt_vocab,
                            .src_context = o->src_context, .tgt_context = o->tgt_context,
                            .enc_layers = o->enc_layers, .dec_layers = o->dec_layers,
                            .heads = o->heads, .dim = o->dim, .mlp_dim = o->mlp_dim,
                            .attn_dropout = o->dropout, .resid_dropout = o->dropout,
                            .label_smoothing = o->label_smoothing, .seed = o->seed,
                            .threads = threads, .attn_mode = MHA_ATTN_STORED,
                            .precision = prec};
}

/* ---- training step -------------------------------------------------------------------- */

/* All warmup + steps batches, drawn once (see the top of the file). */
typedef struct batches {
    size_t n, B, S, T;
    int32_t *src, *tin, *tout; /* [n, B, S], [n, B, T], [n, B, T] */
    size_t *slen;              /* [n, B] */
    double mean_src_tokens, mean_scored;
} batches;

static void draw_batches(const opts *o, batches *bt)
{
    const size_t n = o->warmup + o->steps, B = o->batch, S = o->src_len, T = o->tgt_len;
    *bt = (batches){.n = n, .B = B, .S = S, .T = T};
    bt->src = xcalloc(n * B * S, sizeof *bt->src);
    bt->tin = xcalloc(n * B * T, sizeof *bt->tin);
    bt->tout = xcalloc(n * B * T, sizeof *bt->tout);
    bt->slen = xcalloc(n * B, sizeof *bt->slen);
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, o->seed, 11);
    size_t src_tok = 0, scored = 0;
    const uint32_t s_lo = S / 2 > 0 ? (uint32_t)(S / 2) : 1, t_lo = T / 2 > 0 ? (uint32_t)(T / 2) : 1;
    for (size_t r = 0; r < n * B; r++) {
        const size_t ls = draw(&rng, s_lo, (uint32_t)S), lt = draw(&rng, t_lo, (uint32_t)T);
        int32_t *src = bt->src + r * S, *tin = bt->tin + r * T, *tout = bt->tout + r * T;
        bt->slen[r] = ls;
        for (size_t s = 0; s < S; s++)
            src[s] = s < ls ? (int32_t)draw(&rng, 1, (uint32_t)o->src_vocab - 1) : PAD;
        for (size_t t = 0; t < T; t++) {
            tin[t] = PAD;
            tout[t] = -1;
        }
        tin[0] = BOS;
        for (size_t t = 0; t + 1 < lt; t++) {
            const int32_t y = (int32_t)draw(&rng, 3, (uint32_t)o->tgt_vocab - 1);
            tout[t] = y;
            tin[t + 1] = y;
        }
        tout[lt - 1] = EOS;
        src_tok += ls;
        scored += lt;
    }
    bt->mean_src_tokens = (double)src_tok / (double)n;
    bt->mean_scored = (double)scored / (double)n;
}

static void free_batches(batches *bt)
{
    free(bt->src);
    free(bt->tin);
    free(bt->tout);
    free(bt->slen);
}

typedef struct train_result {
    int threads;
    mha_precision precision;
    double ms, min_ms, mean_ms, fwd_ms, bwd_ms, opt_ms, words_per_s, last_loss;
} train_result;

static train_result time_training(const opts *o, const batches *bt, int threads,
                                  mha_precision prec, size_t *n_params)
{
    const mha_s2s_config mc = model_config(o, threads, prec);
    mha_s2s *m;
    mha_optimizer *opt;
    mha_optim_config oc;
    int st;
    const int caller = omp_get_max_threads();
    omp_set_num_threads(threads); /* the optimizer's threads (the model sets its own) */
    if ((st = mha_s2s_create(&m, &mc, o->batch)))
        die("mha_s2s_create", st);
    if ((st = mha_s2s_param_count(m, n_params)))
        die("mha_s2s_param_count", st);
    mha_optim_default_config(MHA_OPTIM_ADAMW, &oc);
    oc.beta1 = 0.9;
    oc.beta2 = o->beta2;
    oc.eps = 1e-8;
    oc.weight_decay = o->weight_decay;
    if ((st = mha_optim_create(&opt, &oc)))
        die("mha_optim_create", st);
    for (size_t i = 0; i < mha_s2s_num_tensors(m); i++) {
        mha_param_info in;
        float *p, *gr;
        if ((st = mha_s2s_tensor(m, i, &in, &p, &gr)))
            die("mha_s2s_tensor", st);
        if ((st = mha_optim_add_decay(opt, in.name, p, gr, in.numel,
                                      in.decay ? o->weight_decay : 0.0)))
            die("mha_optim_add_decay", st);
    }
    const size_t B = bt->B, S = bt->S, T = bt->T, total = bt->n;
    double *t_all = xcalloc(4 * total, sizeof(double)), *t_f = t_all + total,
           *t_b = t_f + total, *t_o = t_b + total;
    double loss = 0;
    const double clip = o->clip > 0 ? o->clip : INFINITY;
    for (size_t s = 0; s < total; s++) {
        const double t0 = now();
        if ((st = mha_s2s_zero_grad(m)))
            die("zero_grad", st);
        if ((st = mha_s2s_forward(m, 1, B, S, bt->src + s * B * S, bt->slen + s * B, T,
                                  bt->tin + s * B * T, bt->tout + s * B * T, &loss)))
            die("forward", st);
        const double t1 = now();
        if ((st = mha_s2s_backward(m)))
            die("backward", st);
        const double t2 = now();
        if ((st = mha_optim_clip_grad_norm(opt, clip, NULL)))
            die("clip_grad_norm", st);
        if ((st = mha_optim_step(opt, o->lr)))
            die("optimizer step", st);
        const double t3 = now();
        t_all[s] = t3 - t0;
        t_f[s] = t1 - t0;
        t_b[s] = t2 - t1;
        t_o[s] = t3 - t2;
    }
    if (!isfinite(loss)) {
        fprintf(stderr, "mha-g2p-bench: non-finite loss\n");
        exit(1);
    }
    const size_t w = o->warmup, n = o->steps;
    train_result r = {.threads = threads, .precision = prec, .last_loss = loss};
    double mn = t_all[w], sum = 0;
    for (size_t s = w; s < total; s++) {
        mn = fmin(mn, t_all[s]);
        sum += t_all[s];
    }
    r.mean_ms = 1e3 * sum / (double)n; /* before the median sorts t_all */
    r.ms = 1e3 * median(t_all + w, n);
    r.min_ms = 1e3 * mn;
    r.fwd_ms = 1e3 * median(t_f + w, n);
    r.bwd_ms = 1e3 * median(t_b + w, n);
    r.opt_ms = 1e3 * median(t_o + w, n);
    r.words_per_s = (double)B / (r.ms * 1e-3);
    free(t_all);
    mha_optim_destroy(opt);
    mha_s2s_destroy(m);
    omp_set_num_threads(caller);
    return r;
}

/* ---- decoding --------------------------------------------------------------------------- */

typedef struct decode_result {
    int threads;
    size_t beam;            /* 1 = greedy */
    double words_per_s, seconds, mean_out_len, eos_fraction;
    long checksum;          /* Σ of the best hypotheses' tokens (same words, same model) */
} decode_result;

/* Random words, sorted by length: ids [n, S], lens [n]. */
static void draw_words(const opts *o, size_t n, int32_t *ids, size_t *lens)
{
    const size_t S = o->src_len;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, o->seed, 12);
    const uint32_t lo = S / 2 > 0 ? (uint32_t)(S / 2) : 1;
    size_t *tmp_len = xcalloc(n, sizeof *tmp_len);
    int32_t *tmp = xcalloc(n * S, sizeof *tmp);
    for (size_t i = 0; i < n; i++) {
        tmp_len[i] = draw(&rng, lo, (uint32_t)S);
        for (size_t s = 0; s < S; s++)
            tmp[i * S + s] = s < tmp_len[i] ? (int32_t)draw(&rng, 1, (uint32_t)o->src_vocab - 1)
                                            : PAD;
    }
    size_t k = 0; /* stable sort by length: one sweep per length */
    for (size_t len = 1; len <= S; len++)
        for (size_t i = 0; i < n; i++)
            if (tmp_len[i] == len) {
                memcpy(ids + k * S, tmp + i * S, S * sizeof *ids);
                lens[k++] = len;
            }
    free(tmp_len);
    free(tmp);
}

static decode_result time_decoding(const opts *o, const int32_t *ids, const size_t *lens,
                                   size_t n, size_t K, int threads)
{
    const mha_s2s_config mc = model_config(o, threads, MHA_PRECISION_FP32);
    const size_t S = o->src_len, L = o->tgt_context, DB = DECODE_BATCH;
    mha_s2s *m;
    mha_s2s_infer *inf;
    int st;
    const int caller = omp_get_max_threads();
    omp_set_num_threads(threads);
    if ((st = mha_s2s_create(&m, &mc, DB)))
        die("mha_s2s_create", st);
    if ((st = mha_s2s_infer_create(&inf, m, DB * K, o->src_context, L)))
        die("mha_s2s_infer_create", st);
    int32_t *src = xcalloc(DB * S, sizeof *src), *out = xcalloc(DB * K * L, sizeof *out);
    size_t *slen = xcalloc(DB, sizeof *slen), *olen = xcalloc(DB, sizeof *olen);
    mha_s2s_hyp *hyps = xcalloc(DB, sizeof *hyps);
    decode_result r = {.threads = threads, .beam = K};
    size_t out_tokens = 0, finished = 0;
    /* pass 0: the first batch, untimed; pass 1: every word, timed */
    double t0 = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            t0 = now();
        const size_t end = pass == 0 ? (n < DB ? n : DB) : n;
        for (size_t b0 = 0; b0 < end; b0 += DB) {
            const size_t B = end - b0 < DB ? end - b0 : DB;
            size_t w = 1; /* the batch's width: its longest word */
            for (size_t b = 0; b < B; b++)
                w = lens[b0 + b] > w ? lens[b0 + b] : w;
            for (size_t b = 0; b < B; b++) {
                memcpy(src + b * w, ids + (b0 + b) * S, w * sizeof *src);
                slen[b] = lens[b0 + b];
            }
            if (K == 1)
                st = mha_s2s_greedy(m, inf, B, w, src, slen, BOS, EOS, L, out, olen, NULL);
            else
                st = mha_s2s_beam(m, inf, B, w, src, slen, BOS, EOS, L, K, 1, 1.0, hyps, out);
            if (st)
                die(K == 1 ? "mha_s2s_greedy" : "mha_s2s_beam", st);
            if (pass == 0)
                continue;
            for (size_t b = 0; b < B; b++) {
                const size_t len = K == 1 ? olen[b] : hyps[b].len;
                const int fin = K == 1 ? len < L : hyps[b].finished;
                out_tokens += len;
                finished += (size_t)fin;
                for (size_t t = 0; t < len; t++)
                    r.checksum += out[b * L + t];
            }
        }
    }
    r.seconds = now() - t0;
    r.words_per_s = (double)n / r.seconds;
    r.mean_out_len = (double)out_tokens / (double)n;
    r.eos_fraction = (double)finished / (double)n;
    free(src);
    free(out);
    free(slen);
    free(olen);
    free(hyps);
    mha_s2s_infer_destroy(inf);
    mha_s2s_destroy(m);
    omp_set_num_threads(caller);
    return r;
}

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, &o);
    batches bt;
    draw_batches(&o, &bt);
    const size_t F = o.mlp_dim ? o.mlp_dim : 4 * o.dim;
    printf("G2P encoder-decoder: Le %zu Ld %zu H %zu C %zu F %zu, Vs %zu Vt %zu, contexts "
           "%zu/%zu, B %zu, S %zu T %zu (mean %.1f source tokens, %.1f scored targets per "
           "batch), dropout %g, label smoothing %g; %zu steps after %zu warm-up\n",
           o.enc_layers, o.dec_layers, o.heads, o.dim, F, o.src_vocab, o.tgt_vocab,
           o.src_context, o.tgt_context, o.batch, o.src_len, o.tgt_len, bt.mean_src_tokens,
           bt.mean_scored, o.dropout, o.label_smoothing, o.steps, o.warmup);
    train_result res[MAX_THREADS * BENCH_MAX_PRECISIONS];
    size_t n_params = 0, n_res = 0;
    for (size_t k = 0; k < o.n_precisions; k++)
        for (size_t i = 0; i < o.n_threads; i++) {
            train_result *r = &res[n_res++];
            *r = time_training(&o, &bt, o.threads[i], o.precisions[k], &n_params);
            printf("%s, threads %d: step %.2f ms (min %.2f; forward %.2f, backward %.2f, "
                   "optimizer %.2f), %.0f words/s, last loss %.4f\n",
                   mha_precision_name(r->precision), r->threads, r->ms, r->min_ms, r->fwd_ms,
                   r->bwd_ms, r->opt_ms, r->words_per_s, r->last_loss);
        }
    printf("parameters: %zu (%.2f M)\n", n_params, (double)n_params / 1e6);
    free_batches(&bt);

    const size_t W = o.decode_words;
    decode_result dec[2 * MAX_THREADS];
    size_t n_dec = 0;
    if (W > 0) {
        int32_t *ids = xcalloc(W * o.src_len, sizeof *ids);
        size_t *lens = xcalloc(W, sizeof *lens);
        draw_words(&o, W, ids, lens);
        printf("decoding (fp32) %zu random words (length %zu..%zu), batches of %d, max_len %zu, "
               "untrained model: WORST CASE, every hypothesis runs to max length\n", W,
               o.src_len / 2 > 0 ? o.src_len / 2 : 1, o.src_len, DECODE_BATCH, o.tgt_context);
        const size_t widths[2] = {1, o.beam};
        for (size_t k = 0; k < (o.beam > 1 ? 2u : 1u); k++)
            for (size_t i = 0; i < o.n_threads; i++) {
                decode_result *d = &dec[n_dec++];
                *d = time_decoding(&o, ids, lens, W, widths[k], o.threads[i]);
                char name[32];
                if (widths[k] == 1)
                    snprintf(name, sizeof name, "greedy");
                else
                    snprintf(name, sizeof name, "beam %zu", widths[k]);
                printf("  %-7s threads %d: %.0f words/s (%.2f s; mean output %.1f tokens, "
                       "%.0f%% ended with EOS)\n", name, d->threads, d->words_per_s,
                       d->seconds, d->mean_out_len, 100 * d->eos_fraction);
            }
        free(ids);
        free(lens);
    }

    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "mha-g2p-bench: cannot write %s: %s\n", o.json, strerror(errno));
            return 1;
        }
        fprintf(f, "{\"config\": {\"src_vocab\": %zu, \"tgt_vocab\": %zu, \"src_context\": %zu, "
                   "\"tgt_context\": %zu, \"enc_layers\": %zu, \"dec_layers\": %zu, "
                   "\"heads\": %zu, \"dim\": %zu, \"mlp_dim\": %zu, \"untied\": false, "
                   "\"attn_dropout\": %g, \"resid_dropout\": %g, \"label_smoothing\": %g, "
                   "\"batch\": %zu, \"src_len\": %zu, \"tgt_len\": %zu, "
                   "\"mean_src_tokens\": %.2f, \"mean_scored_targets\": %.2f, \"lr\": %g, "
                   "\"weight_decay\": %g, \"betas\": [0.9, %g], \"eps\": 1e-08, \"clip\": %g, "
                   "\"warmup_steps\": %zu, \"seed\": %llu},\n \"params\": %zu, \"steps\": %zu, "
                   "\"precisions\": [",
                o.src_vocab, o.tgt_vocab, o.src_context, o.tgt_context, o.enc_layers,
                o.dec_layers, o.heads, o.dim, F, o.dropout, o.dropout, o.label_smoothing,
                o.batch, o.src_len, o.tgt_len, bt.mean_src_tokens, bt.mean_scored, o.lr,
                o.weight_decay, o.beta2, o.clip, o.warmup, (unsigned long long)o.seed, n_params,
                o.steps);
        for (size_t k = 0; k < o.n_precisions; k++)
            fprintf(f, "%s\"%s\"", k ? ", " : "", mha_precision_name(o.precisions[k]));
        fprintf(f, "], \"train\": [");
        for (size_t i = 0; i < n_res; i++)
            fprintf(f, "%s\n  {\"precision\": \"%s\", \"threads\": %d, \"ms\": %.4f, \"min_ms\": %.4f, "
                       "\"mean_ms\": %.4f, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"opt_ms\": %.4f, "
                       "\"words_per_s\": %.1f, \"last_loss\": %.6f}",
                    i ? "," : "", mha_precision_name(res[i].precision), res[i].threads,
                    res[i].ms, res[i].min_ms, res[i].mean_ms, res[i].fwd_ms,
                    res[i].bwd_ms, res[i].opt_ms, res[i].words_per_s, res[i].last_loss);
        fprintf(f, "],\n \"decode\": {\"words\": %zu, \"batch\": %d, \"max_len\": %zu, "
                   "\"model\": \"untrained\", \"precision\": \"fp32\", \"note\": \"worst case: every hypothesis runs "
                   "to max length\", \"runs\": [", W, DECODE_BATCH, o.tgt_context);
        for (size_t i = 0; i < n_dec; i++)
            fprintf(f, "%s\n  {\"beam\": %zu, \"threads\": %d, \"words_per_s\": %.1f, "
                       "\"seconds\": %.4f, \"mean_out_len\": %.3f, \"eos_fraction\": %.4f, "
                       "\"checksum\": %ld}",
                    i ? "," : "", dec[i].beam, dec[i].threads, dec[i].words_per_s,
                    dec[i].seconds, dec[i].mean_out_len, dec[i].eos_fraction, dec[i].checksum);
        fprintf(f, "]}}\n");
        if (fclose(f) != 0) {
            fprintf(stderr, "mha-g2p-bench: cannot write %s\n", o.json);
            return 1;
        }
    }
    return 0;
}
