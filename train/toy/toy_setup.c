/*
 * mha-train's run state: the checks and the memory plan made before the model is built,
 * then the model, the optimizer (one group for the model's own tensors, one per
 * attention layer) and the table of named tensors that checkpoints read and write.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "mha.h"
#include "mha_optim.h"
#include "toy_run.h"

enum { EVAL_CHUNK = 250 };                 /* examples per evaluation forward, at most */
#define EVAL_BUDGET (256.0 * 1024 * 1024) /* activation bytes an evaluation chunk may use
                                             beyond the training batch's               */

/* ---- checks before the model is built -------------------------------------------------- */

/* Exit 2 unless the task can give both held-out and training examples: an example is
 * held out when its hash is 0 mod 8, so a task with very few distinct examples (say
 * --seq-len 1 --vocab 2: two) may have none in one split. */
static void check_splits(const task_spec *spec)
{
    task_buffer one;
    cli_check(task_buffer_init(&one, spec, 1), "task");
    for (int split = 0; split < 2; split++) {
        mha_pcg32 r;
        mha_pcg32_seed(&r, 1, 99);
        if (task_fill(spec, &r, (task_split)split, &one, 0, 1) != MHA_OK) {
            task_buffer_free(&one);
            cli_die_usage("invalid task size (--seq-len %zu, --vocab %zu%s): no %s example in "
                          "10000 draws; the task has too few distinct examples to hold 1 in 8 "
                          "out for evaluation (by hash). Use a larger --seq-len or --vocab",
                          spec->n, spec->vocab, spec->kind == TASK_LOOKUP ? ", --pairs" : "",
                          split == TASK_EVAL ? "held-out" : "training");
        }
    }
    task_buffer_free(&one);
}

/* Activation bytes one example takes in the model (float; a lower bound: the model's
 * buffers and every layer's cache, without per-thread scratch): xs [(L+1), S, D], logits
 * and their gradient [S, V] each, two [S, D] work buffers, the context [Sk, D] twice; per
 * layer Q, K, V and the merged context, and in stored mode the attention weights
 * [H, S, Sk] (and their dropout bits), in recompute mode one log-sum-exp per (h, row). */
static double example_bytes(const run_config *c, const tm_config *m)
{
    const double S = (double)m->seq_len, Sk = m->ctx_len ? (double)m->ctx_len : S;
    const double D = (double)m->model_dim, H = (double)m->num_heads, L = (double)m->layers;
    const double V = (double)m->vocab_out;
    double own = (L + 1) * S * D + 2 * S * V + 2 * S * D + (m->ctx_len ? 2 * Sk * D : 0);
    double layer = 2 * S * D + 2 * Sk * D;
    if (c->attention == MHA_ATTN_STORED)
        layer += H * S * Sk * (1 + (c->dropout > 0 ? 1.0 / 32 : 0));
    else
        layer += H * S;
    return 4 * (own + L * layer) + 4.0 * (S + 2 * (double)m->ctx_len + 1); /* + its tokens */
}

/* The evaluation chunk (examples per evaluation forward): at most EVAL_CHUNK and
 * --eval-size, and no more than the training batch unless EVAL_BUDGET bytes hold it.
 * Exit 2 with the bytes needed when the model's activations for max(batch, chunk)
 * examples and the evaluation set cannot fit in this machine's memory. */
static size_t plan_memory(const run_config *c, const tm_config *m)
{
    const double per = example_bytes(c, m);
    double fit = floor(EVAL_BUDGET / per);
    size_t chunk = c->eval_size < EVAL_CHUNK ? c->eval_size : EVAL_CHUNK;
    if ((double)chunk > fit)
        chunk = fit > (double)c->batch ? (size_t)fit : c->batch;
    if (chunk > c->eval_size)
        chunk = c->eval_size;
    if (chunk == 0)
        chunk = 1;
    const size_t max_b = c->batch > chunk ? c->batch : chunk;
    const double need = per * (double)max_b +
                        4.0 * (double)c->eval_size * (double)(m->seq_len + 2 * m->ctx_len + 1);
    const double have = (double)cli_memory_limit();
    if (need > have) {
        char a[32], b[32];
        cli_bytes_text(need, a, sizeof a);
        cli_bytes_text(have, b, sizeof b);
        cli_die_usage("--seq-len %zu --batch %zu --attention %s needs at least %s of memory "
                      "(%zu examples of activations%s), more than the %s this process may use; "
                      "use a smaller --batch or --seq-len%s", c->seq_len, c->batch,
                      CLI_ATTN_NAMES[c->attention], a, max_b,
                      c->attention == MHA_ATTN_STORED ? ", with the attention weights" : "", b,
                      c->attention == MHA_ATTN_STORED ? ", or --attention recompute" : "");
    }
    return chunk;
}

/* Register the optimizer groups and build the tensor table. */
static void setup_tensors(run_state *rs)
{
    tm_model *m = rs->model;
    size_t n_own;
    float *own = tm_params(m, &n_own);
    cli_check(mha_optim_add(rs->opt, "own", own, tm_grads(m, NULL), n_own), "optimizer");
    for (size_t l = 0; l < rs->mcfg.layers; l++) {
        char g[32];
        size_t n;
        snprintf(g, sizeof g, "layers.%zu", l);
        float *p = mha_params(tm_layer(m, l), &n);
        cli_check(mha_optim_add(rs->opt, g, p, mha_grads(tm_layer(m, l), NULL), n), "optimizer");
    }
    rs->n_pt = 0;
    for (size_t gi = 0; gi <= rs->mcfg.layers; gi++) {
        float *gm = NULL, *gv = NULL;
        cli_check(mha_optim_group(rs->opt, gi, NULL, NULL, &gm, &gv), "optimizer");
        size_t count = gi == 0 ? TM_NUM_OWN_TENSORS : MHA_NUM_TENSORS;
        float *base = gi == 0 ? own : mha_params(tm_layer(m, gi - 1), NULL);
        for (size_t k = 0; k < count; k++) {
            mha_tensor_info ti;
            if (gi == 0)
                cli_check(tm_tensor_info_at(&rs->mcfg, k, &ti), "layout");
            else
                cli_check(mha_tensor_info_at(rs->mcfg.model_dim, k, &ti), "layout");
            if (ti.numel == 0)
                continue;
            ckpt_tensor *t = &rs->pt[rs->n_pt++];
            if (gi == 0)
                snprintf(t->name, sizeof t->name, "%s", ti.name);
            else
                snprintf(t->name, sizeof t->name, "layers.%zu.%s", gi - 1, ti.name);
            t->p = base + ti.offset;
            t->m = gm ? gm + ti.offset : NULL;
            t->v = gv ? gv + ti.offset : NULL;
            t->ndim = ti.ndim;
            t->shape[0] = ti.shape[0];
            t->shape[1] = ti.shape[1];
            t->numel = ti.numel;
        }
    }
}

size_t toy_build(run_state *rs, const run_config *cfg, resume_info *ri, double t_start,
                 int n_threads)
{
    memset(rs, 0, sizeof *rs);
    rs->cfg = *cfg;
    rs->t_start = t_start;
    rs->elapsed0 = ri->elapsed;
    rs->n_threads = n_threads;
    rs->spec = (task_spec){.kind = (task_kind)cfg->task, .n = cfg->seq_len,
                           .vocab = cfg->vocab, .pairs = cfg->pairs};
    rs->mcfg = (tm_config){.model_dim = cfg->model_dim, .num_heads = cfg->heads,
                           .layers = cfg->layers, .dropout = cfg->dropout, .seed = cfg->seed,
                           .threads = cfg->threads, .attn_mode = (mha_attn_mode)cfg->attention,
                           .pos_sinusoidal = cfg->pos_init};
    if (task_model_shape(&rs->spec, &rs->mcfg) != MHA_OK)
        cli_die_usage("invalid task shape (--seq-len %zu, --vocab %zu, --pairs %zu)",
                      cfg->seq_len, cfg->vocab, cfg->pairs);
    check_splits(&rs->spec);
    rs->eval_chunk = plan_memory(cfg, &rs->mcfg);
    /* one run per directory: no other process in it, no other run's checkpoint; the run's
     * id is its checkpoint's (one from before run ids gets a new one) */
    rundir_start(cfg->out, cfg->resume, ri->run_id, cfg->force, 1, rs->run_id);
    report_history_init(&rs->hist, H_COLS);
    openblas_set_num_threads(n_threads);

    size_t max_b = cfg->batch > rs->eval_chunk ? cfg->batch : rs->eval_chunk;
    cli_check(tm_create(&rs->model, &rs->mcfg, max_b), "cannot create the model");
    mha_optim_config oc;
    cli_check(mha_optim_default_config((mha_optim_kind)cfg->optimizer, &oc), "optimizer");
    oc.weight_decay = cfg->weight_decay;
    if (cfg->optimizer == MHA_OPTIM_SGD)
        oc.momentum = cfg->momentum;
    cli_check(mha_optim_create(&rs->opt, &oc), "cannot create the optimizer");
    setup_tensors(rs);
    size_t n_params = 0;
    for (size_t i = 0; i < rs->n_pt; i++)
        n_params += rs->pt[i].numel;
    mha_pcg32_seed(&rs->data_rng, cfg->seed, TASK_STREAM_TRAIN);
    if (ri->ck) {
        load_checkpoint(rs, ri->ck);
        ri->ck = NULL;
    }
    return n_params;
}

void toy_run_free(run_state *rs)
{
    mha_optim_destroy(rs->opt);
    tm_destroy(rs->model);
    report_history_free(&rs->hist);
}
