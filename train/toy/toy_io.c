/* mha-train's files: checkpoints, loss.svg, attention heat maps, example.json and
 * summary.json (toy_run.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "mha_safetensors.h"
#include "toy_run.h"

static void check_st(int st, const char *what)
{
    cli_check(st, what);
}

/* ---- checkpoints ------------------------------------------------------------------ */

/* The state values a checkpoint holds besides the tensors. */
typedef struct run_ckpt_state {
    uint64_t step, optim_t, rng[2], calls[TM_MAX_LAYERS];
    ckpt_state s[4];
} run_ckpt_state;

/* The checkpoint layout of this run: parameters, the optimizer's moments (torch's
 * names), train.step, optimizer.step, data.rng, dropout.call_index. */
static ckpt_layout run_layout(const run_state *rs, run_ckpt_state *cs)
{
    cs->s[0] = (ckpt_state){"train.step", MHA_ST_U64, 0, 0, &cs->step};
    cs->s[1] = (ckpt_state){"optimizer.step", MHA_ST_U64, 0, 0, &cs->optim_t};
    cs->s[2] = (ckpt_state){"data.rng", MHA_ST_U64, 1, 2, cs->rng};
    cs->s[3] = (ckpt_state){"dropout.call_index", MHA_ST_U64, 1, rs->mcfg.layers, cs->calls};
    ckpt_layout c = {rs->pt, rs->n_pt, {NULL, NULL}, cs->s, 4,
                     "(a checkpoint of another task, layer count or optimizer?)"};
    if (rs->cfg.optimizer == MHA_OPTIM_SGD) {
        c.moment[0] = "momentum_buffer";
    } else {
        c.moment[0] = "exp_avg";
        c.moment[1] = "exp_avg_sq";
    }
    return c;
}

int save_checkpoint(run_state *rs, const char *path)
{
    run_ckpt_state cs;
    ckpt_layout c = run_layout(rs, &cs);
    cs.step = rs->step;
    cs.rng[0] = rs->data_rng.state;
    cs.rng[1] = rs->data_rng.inc;
    check_st(mha_optim_get_step(rs->opt, &cs.optim_t), "optimizer");
    check_st(tm_get_call_indices(rs->model, cs.calls), "model");
    return train_save_checkpoint(path, &c, CKPT_FORMAT, TRAIN_OPTS, TRAIN_N_OPTS, &rs->cfg, NULL,
                                 rs->elapsed0 + (report_now() - rs->t_start), rs->run_id);
}

/* The parameter tensors must have the shapes of cfg before a model of that config is
 * allocated: a corrupt value (say seq-len 4096) is refused as a mismatch here (exit 2), not
 * by an allocation failure (exit 1) or after gigabytes of model. */
static void check_shapes(const mha_st_file *f, const run_config *cfg, const char *prefix)
{
    task_spec spec = {.kind = (task_kind)cfg->task, .n = cfg->seq_len, .vocab = cfg->vocab,
                      .pairs = cfg->pairs};
    tm_config mc = {.model_dim = cfg->model_dim, .num_heads = cfg->heads, .layers = cfg->layers};
    if (task_model_shape(&spec, &mc) != MHA_OK) /* refused by main's checks */
        return;
    train_shape need[TM_NUM_OWN_TENSORS + TM_MAX_LAYERS * MHA_NUM_TENSORS];
    size_t n = 0;
    for (size_t gi = 0; gi <= mc.layers; gi++) {
        for (size_t k = 0; k < (gi == 0 ? TM_NUM_OWN_TENSORS : MHA_NUM_TENSORS); k++) {
            mha_tensor_info ti;
            if ((gi == 0 ? tm_tensor_info_at(&mc, k, &ti)
                         : mha_tensor_info_at(mc.model_dim, k, &ti)) != MHA_OK ||
                ti.numel == 0)
                continue;
            train_shape *t = &need[n++];
            if (gi == 0)
                snprintf(t->name, sizeof t->name, "%s", ti.name);
            else
                snprintf(t->name, sizeof t->name, "layers.%zu.%s", gi - 1, ti.name);
            t->ndim = ti.ndim;
            t->shape[0] = ti.shape[0];
            t->shape[1] = ti.ndim == 2 ? ti.shape[1] : 0;
        }
    }
    train_require_tensors(f, prefix, need, n);
}

/* Take the configuration stored in checkpoint `path` into *cfg: fields with ckpt == 1
 * always (an explicitly given option that differs is refused: exit 2 with both values),
 * fields with ckpt == 2 unless given on the command line; its run state is read and checked
 * before a model is built, so that a finished run or a corrupt state is told as such. Any
 * unreadable, corrupt or foreign file is refused (exit 2). */
void resume_config(const char *path, const int *explicit_opt, run_config *cfg,
                   resume_info *info)
{
    char prefix[CLI_PATH_CAP + 32];
    snprintf(prefix, sizeof prefix, "cannot resume from %s", path);
    mha_st_file *f = train_open_checkpoint(path, prefix, CKPT_FORMAT, NULL, TRAIN_OPTS,
                                           TRAIN_N_OPTS, explicit_opt, cfg, sizeof *cfg);
    const char *id = mha_st_meta(f, "run_id");
    if (rundir_id_valid(id))
        snprintf(info->run_id, sizeof info->run_id, "%s", id);
    /* every completed step made exactly one optimizer step; no best value */
    const train_state_rules rules = {1, 0, NULL, 0, NULL};
    train_state_read st;
    train_read_state(f, prefix, TRAIN_OPTS, TRAIN_N_OPTS, sizeof *cfg, &rules, &st);
    info->steps = st.made;
    info->step = st.step;
    info->elapsed = st.elapsed;
    check_shapes(f, cfg, prefix);
    info->ck = f;
}

/* Load tensors and state from the checkpoint resume_config read (its state checked there),
 * then close it. */
void load_checkpoint(run_state *rs, mha_st_file *f)
{
    char err[512] = "";
    run_ckpt_state cs;
    ckpt_layout c = run_layout(rs, &cs);
    if (ckpt_load(f, &c, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "cannot resume from %s: %s", rs->cfg.resume, err);
    rs->step = cs.step;
    rs->data_rng.state = cs.rng[0];
    rs->data_rng.inc = cs.rng[1];
    check_st(mha_optim_set_step(rs->opt, cs.optim_t), "optimizer");
    check_st(tm_set_call_indices(rs->model, cs.calls), "model");
    mha_st_free(f);
}


/* ---- pictures and summary ------------------------------------------------------------ */


void write_loss_svg(const run_state *rs, const char *path)
{
    char title[160];
    snprintf(title, sizeof title, "%s: training loss (cross-entropy, log scale)",
             task_name((task_kind)rs->cfg.task));
    const train_panel p[2] = {
        {title, "loss", 1, 0, 0,
         {{"loss", "#9ecae1", H_LOSS, 1, 0},
          {"loss (smoothed)", "#08519c", TRAIN_CURVE_SMOOTH + H_LOSS, 1, 0}}},
        {"held-out accuracy (%)", "accuracy %", 0, 0, 100,
         {{"token acc.", "#d94801", H_TOK, 100, 1}, {"sequence acc.", "#238b45", H_SEQ, 100, 1}}}};
    train_write_curves(&rs->hist, path, p, 2);
}


void write_attention_svgs(run_state *rs, const task_buffer *ev, char paths[][CLI_PATH_CAP + 64],
                                 const char *dir)
{
    tm_batch b = task_view(ev, 0, 1);
    check_st(tm_forward(rs->model, &b, 0, NULL), "evaluation forward");
    const size_t S = rs->mcfg.seq_len, Sk = rs->mcfg.ctx_len ? rs->mcfg.ctx_len : S;
    char(*rl)[24] = calloc(S, sizeof *rl);
    char(*cl)[24] = calloc(Sk, sizeof *cl);
    const char **rlp = calloc(S, sizeof *rlp), **clp = calloc(Sk, sizeof *clp);
    if (!rl || !cl || !rlp || !clp)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t i = 0; i < S; i++) {
        int32_t t = b.tokens[i];
        if (rs->cfg.task == TASK_COPY && (size_t)t == rs->cfg.vocab)
            snprintf(rl[i], sizeof rl[i], "|");
        else
            snprintf(rl[i], sizeof rl[i], "%d", (int)t);
        rlp[i] = rl[i];
    }
    for (size_t j = 0; j < Sk; j++) {
        if (rs->mcfg.ctx_len)
            snprintf(cl[j], sizeof cl[j], "%d:%d", (int)b.ctx[2 * j], (int)b.ctx[2 * j + 1]);
        else
            snprintf(cl[j], sizeof cl[j], "%s", rl[j]);
        clp[j] = cl[j];
    }
    for (size_t l = 0; l < rs->mcfg.layers; l++) {
        const float *w;
        size_t shape[4];
        check_st(tm_attention(rs->model, l, &w, shape), "attention weights");
        snprintf(paths[l], CLI_PATH_CAP + 64, "%s/attention_layer%zu.svg", dir, l);
        char title[200];
        snprintf(title, sizeof title,
                 "%s, layer %zu: attention weights for one held-out example (labels: tokens%s)",
                 task_name((task_kind)rs->cfg.task), l,
                 rs->mcfg.ctx_len ? "; columns key:value" : "");
        report_heatmaps(paths[l], title, shape[1], shape[2], shape[3], w, rlp, clp);
    }
    UTIL_FREE_ALL(rl, cl, rlp, clp);
}


/* cJSON array of n floats. */
static cJSON *json_floats(const float *x, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)x[i]));
    return a;
}

/* example.json: held-out example 0 with the model's activations, for inspection and for
 * tools/check_checkpoint_torch.py (which recomputes them with the seed's PyTorch module
 * from checkpoint.safetensors): tokens, ctx (key, value pairs), targets, predictions,
 * x[l] = residual stream before layer l (l = 0..L; x[L] feeds the read-out), ctx_embedded,
 * logits; matrices as row-major nested lists. */
void write_example_json(run_state *rs, const task_buffer *ev, const char *path)
{
    tm_batch b = task_view(ev, 0, 1);
    check_st(tm_forward(rs->model, &b, 0, NULL), "evaluation forward");
    const size_t S = rs->mcfg.seq_len, Sk = rs->mcfg.ctx_len, D = rs->mcfg.model_dim;
    const size_t V = rs->mcfg.vocab_out;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "task", task_name((task_kind)rs->cfg.task));
    cJSON_AddBoolToObject(root, "causal", rs->mcfg.causal);
    cJSON_AddNumberToObject(root, "step", (double)rs->step);
    cJSON *tok = cJSON_AddArrayToObject(root, "tokens");
    cJSON *tgt = cJSON_AddArrayToObject(root, "targets");
    cJSON *pred = cJSON_AddArrayToObject(root, "predictions");
    const float *logits = tm_logits(rs->model);
    for (size_t i = 0; i < S; i++) {
        cJSON_AddItemToArray(tok, cJSON_CreateNumber(b.tokens[i]));
        cJSON_AddItemToArray(tgt, cJSON_CreateNumber(b.targets[i]));
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (logits[i * V + v] > logits[i * V + best])
                best = v;
        cJSON_AddItemToArray(pred, cJSON_CreateNumber(b.targets[i] < 0 ? -1.0 : (double)best));
    }
    if (Sk) {
        cJSON *ctx = cJSON_AddArrayToObject(root, "ctx");
        cJSON *ce = cJSON_AddArrayToObject(root, "ctx_embedded");
        for (size_t j = 0; j < Sk; j++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(b.ctx[2 * j]));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(b.ctx[2 * j + 1]));
            cJSON_AddItemToArray(ctx, pair);
            cJSON_AddItemToArray(ce, json_floats(tm_context(rs->model) + j * D, D));
        }
    }
    cJSON *xs = cJSON_AddArrayToObject(root, "x");
    for (size_t l = 0; l <= rs->mcfg.layers; l++) {
        cJSON *xl = cJSON_CreateArray();
        for (size_t i = 0; i < S; i++)
            cJSON_AddItemToArray(xl, json_floats(tm_activation(rs->model, l) + i * D, D));
        cJSON_AddItemToArray(xs, xl);
    }
    cJSON *lg = cJSON_AddArrayToObject(root, "logits");
    for (size_t i = 0; i < S; i++)
        cJSON_AddItemToArray(lg, json_floats(logits + i * V, V));
    report_write_json(root, path, 0);
}



void write_summary(const run_state *rs, const char *path, double wall, double tok,
                          double seq, double eval_loss, double final_loss, size_t n_params,
                          int stopped_early)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "task", task_name((task_kind)rs->cfg.task));
    cJSON_AddNumberToObject(root, "steps", (double)rs->step);
    cJSON_AddBoolToObject(root, "completed", !stopped_early);
    cJSON_AddNumberToObject(root, "wall_seconds", wall);
    /* this process's training steps (evaluations excluded): their mean time, and their
     * model FLOPs over that time as a share of the measured peak (toy_train.c) */
    const train_loop *L = &rs->loop;
    if (L->steps_done > 0 && L->train_s > 0)
        cJSON_AddNumberToObject(root, "step_ms", 1e3 * L->train_s / (double)L->steps_done);
    train_loop_mfu_json(L, root, rs->peak, rs->peak_src.measured);
    cJSON_AddNumberToObject(root, "token_accuracy", tok);
    cJSON_AddNumberToObject(root, "sequence_accuracy", seq);
    cJSON_AddNumberToObject(root, "eval_loss", eval_loss);
    cJSON_AddNumberToObject(root, "final_train_loss", final_loss);
    cJSON_AddNumberToObject(root, "eval_examples", (double)rs->cfg.eval_size);
    cJSON_AddNumberToObject(root, "parameters", (double)n_params);
    cJSON_AddItemToObject(root, "config", report_config_json(TRAIN_OPTS, TRAIN_N_OPTS, &rs->cfg));
    report_write_json(root, path, 1);
}

