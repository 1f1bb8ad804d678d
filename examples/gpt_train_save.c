/*
 * gpt_train_save — build a small character-level GPT from the library (mha_gpt.h), train it
 * a few AdamW steps on a built-in text, save it with mha_gpt_save under its PyTorch
 * state_dict names, load the file into a fresh model with mha_gpt_load, and check that the
 * loaded model gives the same loss bit for bit.
 *
 *     gpt_train_save [FILE]        (default gpt_small.safetensors in the current directory)
 *
 * The file loads into tools/gpt_torch.py's GPT (tools/load_gpt_in_torch.py FILE). Its
 * metadata holds the configuration, which the tensors' shapes alone do not tell (heads),
 * the evaluation batch (B windows of T + 1 ids, ";" between windows: tokens and their
 * next-character targets) and this model's loss on it, so that PyTorch can recompute the
 * loss and compare.
 * Exit status 0 when the losses agree, 1 otherwise.
 *
 * Letters: B windows per batch, T characters per window, V vocabulary.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha.h"

enum { B = 4, T = 16, STEPS = 60 };

static const char TEXT[] =
    "the quick brown fox jumps over the lazy dog. "
    "a small model learns the next character of a short text. "
    "attention looks back at every earlier character and picks what helps. ";

/* Stop with a message when a library call fails. */
static void check(int st, const char *what, const char *err)
{
    if (st != MHA_OK) {
        fprintf(stderr, "gpt_train_save: %s: %s%s%s\n", what, mha_strerror(st),
                err && err[0] ? ": " : "", err ? err : "");
        exit(1);
    }
}

/* The vocabulary: the distinct bytes of TEXT in increasing order; ids[n] the text as ids. */
static size_t make_vocab(char vocab[256], int32_t *ids, size_t n)
{
    int used[256] = {0}, id_of[256];
    size_t V = 0;
    for (size_t i = 0; i < n; i++)
        used[(unsigned char)TEXT[i]] = 1;
    for (int c = 0; c < 256; c++)
        if (used[c]) {
            id_of[c] = (int)V;
            vocab[V++] = (char)c;
        }
    for (size_t i = 0; i < n; i++)
        ids[i] = id_of[(unsigned char)TEXT[i]];
    return V;
}

/* Batch k: B windows of T ids at fixed starts, targets the next ids. tok, tgt [B,T]. */
static void batch(const int32_t *ids, size_t n, size_t k, int32_t *tok, int32_t *tgt)
{
    for (size_t b = 0; b < B; b++) {
        size_t start = ((k * B + b) * 37) % (n - T - 1);
        for (size_t t = 0; t < T; t++) {
            tok[b * T + t] = ids[start + t];
            tgt[b * T + t] = ids[start + t + 1];
        }
    }
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "gpt_small.safetensors";
    char err[256] = "", vocab[256];
    const size_t n = sizeof TEXT - 1;
    int32_t ids[sizeof TEXT], tok[B * T], tgt[B * T];
    const size_t V = make_vocab(vocab, ids, n);

    mha_gpt_config cfg = {.vocab = V, .context = T, .layers = 2, .heads = 2, .dim = 32,
                          .seed = 1, .threads = 1};
    mha_gpt *g = NULL;
    check(mha_gpt_create(&g, &cfg, B), "create the model", NULL);

    /* AdamW over the model's parameter arena as one group, weight decay on the matmul
     * weights only: tensor i ends at end[i] in the arena (the tensors lie end to end in
     * mha_gpt_tensor's order) */
    mha_optim_config oc;
    check(mha_optim_default_config(MHA_OPTIM_ADAMW, &oc), "optimizer config", NULL);
    mha_optimizer *opt = NULL;
    check(mha_optim_create(&opt, &oc), "create the optimizer", NULL);
    const size_t nt = mha_gpt_num_tensors(g);
    size_t *end = malloc(nt * sizeof *end), n_params = 0;
    double *decay = malloc(nt * sizeof *decay);
    if (!end || !decay)
        check(MHA_ENOMEM, "tensor table", NULL);
    for (size_t i = 0; i < nt; i++) {
        mha_param_info in;
        float *p, *grad;
        check(mha_gpt_tensor(g, i, &in, &p, &grad), "tensor", NULL);
        end[i] = n_params += in.numel;
        decay[i] = in.decay ? 0.01 : 0.0;
    }
    size_t arena_n;
    float *params = mha_gpt_params(g, &arena_n);
    check(mha_optim_add_segments(opt, "model", params, mha_gpt_grads(g, NULL), arena_n, nt,
                                 end, decay), "optimizer group", NULL);
    free(end);
    free(decay);
    double loss = 0;
    for (size_t step = 0; step < STEPS; step++) {
        batch(ids, n, step, tok, tgt);
        check(mha_gpt_zero_grad(g), "zero_grad", NULL);
        check(mha_gpt_forward(g, 1, B, T, tok, tgt, &loss), "forward", NULL);
        check(mha_gpt_backward(g), "backward", NULL);
        check(mha_optim_clip_grad_norm(opt, 1.0, NULL), "clip", NULL);
        check(mha_optim_step(opt, 3e-3), "step", NULL);
        if (step % 15 == 0 || step == STEPS - 1)
            printf("step %2zu  loss %.4f\n", step, loss);
    }

    /* the evaluation batch (batch 0, as B windows of T + 1 ids) and its loss */
    double l1, l2;
    batch(ids, n, 0, tok, tgt);
    check(mha_gpt_forward(g, 0, B, T, tok, tgt, &l1), "forward", NULL);
    char s_windows[B * (T + 1) * 4 + 1], s_loss[32];
    size_t len = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t <= T; t++)
            len += (size_t)snprintf(s_windows + len, sizeof s_windows - len, "%s%d",
                                    t ? "," : b ? ";" : "",
                                    t < T ? tok[b * T + t] : tgt[b * T + T - 1]);
    snprintf(s_loss, sizeof s_loss, "%.9g", l1);

    /* save: the configuration and the batch as metadata, the parameters as float32 */
    char s_vocab[8], s_context[8], s_layers[8], s_heads[8], s_dim[8];
    snprintf(s_vocab, sizeof s_vocab, "%zu", V);
    snprintf(s_context, sizeof s_context, "%zu", cfg.context);
    snprintf(s_layers, sizeof s_layers, "%zu", cfg.layers);
    snprintf(s_heads, sizeof s_heads, "%zu", cfg.heads);
    snprintf(s_dim, sizeof s_dim, "%zu", cfg.dim);
    char s_chars[257];
    memcpy(s_chars, vocab, V);
    s_chars[V] = '\0';
    const char *keys[] = {"vocab", "context", "layers", "heads", "dim", "chars",
                          "eval_windows", "eval_loss"};
    const char *vals[] = {s_vocab, s_context, s_layers, s_heads, s_dim, s_chars,
                          s_windows, s_loss};
    check(mha_gpt_save(g, path, MHA_ST_F32, keys, vals, 8, err, sizeof err), "save", err);

    /* a fresh model (another seed: other weights) takes the file's parameters */
    mha_gpt_config cfg2 = cfg;
    cfg2.seed = 2;
    mha_gpt *g2 = NULL;
    check(mha_gpt_create(&g2, &cfg2, B), "create the second model", NULL);
    check(mha_gpt_load(g2, path, err, sizeof err), "load", err);

    check(mha_gpt_forward(g2, 0, B, T, tok, tgt, &l2), "forward", NULL);
    printf("saved %s: %zu tensors; evaluation loss %.6f, after loading %.6f: %s\n", path,
           mha_gpt_num_tensors(g), l1, l2, l1 == l2 ? "equal" : "DIFFERENT");
    mha_optim_destroy(opt);
    mha_gpt_destroy(g);
    mha_gpt_destroy(g2);
    return l1 == l2 ? 0 : 1;
}
