/*
 * mha-g2p train --distill: token-level knowledge distillation (Hinton et al. 2015; for
 * G2P, Sun et al. 2019). The teachers — models of mha-g2p of the same symbols and direction,
 * e.g. an ensemble's members — read every training pronunciation once, at the start, with
 * the reference as the decoder's input (teacher forcing, no dropout, float32); the mean of
 * their softmax at each target position is kept (float32, Vt numbers a position), and each
 * step's loss takes it as part of its target (mha_s2s_forward_distill). The teachers are
 * closed before the first step: the steps cost what they cost without them.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "g2p_train.h"

enum { G2P_MAX_TEACHERS = 8 };

/* Target positions of pronunciation p: its tokens and </s>. */
static size_t positions_of(const g2p_set *s, size_t p)
{
    return s->tgt_off[p + 1] - s->tgt_off[p] + 1;
}

double g2p_distill_bytes(const trainer *t, size_t Vt)
{
    if (!t->cfg.distill[0])
        return 0;
    const size_t *train = t->set.pron_idx + t->set.prons_off[G2P_TRAIN];
    double n = 0;
    for (size_t i = 0; i < t->n_train; i++)
        n += (double)positions_of(&t->set, train[i]);
    return n * (double)Vt * sizeof(float);
}

/* Teacher `path`: exit 2 unless it has the run's vocabularies (src, tgt) and direction and
 * room for the data's longest word and pronunciation; with r, loaded into it for batches of
 * --batch. */
static void open_teacher(const trainer *t, const char *path, const g2p_vocab *run_src,
                         const g2p_vocab *run_tgt, g2p_run *r)
{
    const g2p_config *c = &t->cfg;
    g2p_config tc;
    g2p_defaults(&tc);
    g2p_vocab src = {0}, tgt = {0};
    char what[CLI_PATH_CAP + 64];
    snprintf(what, sizeof what, "cannot distill from %s", path);
    mha_st_file *f = g2p_open_checkpoint(path, what, NULL, &tc, &src, &tgt);
    char why[CLI_PATH_CAP + 160] = "";
    if (!g2p_vocab_equal(&src, run_src) || !g2p_vocab_equal(&tgt, run_tgt))
        snprintf(why, sizeof why, "other symbols than %s's (a model of other data)", c->data);
    else if (tc.reverse != c->reverse)
        snprintf(why, sizeof why, "it writes pronunciations %s, this run %s",
                 tc.reverse ? "right to left" : "left to right",
                 c->reverse ? "right to left" : "left to right");
    else if (tc.src_context < t->set.max_src || tc.tgt_context < t->set.max_tgt + 1)
        snprintf(why, sizeof why, "it reads words of up to %zu symbols and writes up to %zu "
                 "tokens, %s has words of %zu and pronunciations of %zu", tc.src_context,
                 tc.tgt_context - 1, c->data, t->set.max_src, t->set.max_tgt);
    tc.run_threads = c->threads;
    if (r && !why[0])
        g2p_load_model(r, &tc, f, what, &src, &tgt, c->batch);
    mha_st_free(f); /* freed before a refusal too: nothing is left for the exit */
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
    if (why[0])
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, why);
}

/* Add share × the softmax of teacher m at every target position of the training
 * pronunciations order[0..n_train) into t->teach, in batches of --batch (the order groups
 * words of similar length). */
static void teacher_pass(trainer *t, mha_s2s *m, double share, const size_t *order)
{
    const size_t B = t->cfg.batch, n = t->n_train, V = t->r.tgt.n;
    char err[256];
    for (size_t i0 = 0; i0 < n; i0 += B) {
        const size_t rows = n - i0 < B ? n - i0 : B, *pr = order + i0;
        size_t S = 1, T = 2;
        for (size_t b = 0; b < rows; b++) {
            const size_t w = t->set.pron_word[pr[b]];
            t->slen[b] = t->set.src_off[w + 1] - t->set.src_off[w];
            S = t->slen[b] > S ? t->slen[b] : S;
            T = positions_of(&t->set, pr[b]) > T ? positions_of(&t->set, pr[b]) : T;
        }
        if (g2p_batch(&t->set, pr, rows, S, T, t->src, t->tin, t->tout, err, sizeof err) !=
            MHA_OK)
            cli_die(CLI_EXIT_RUNTIME, "the teachers' batch: %s", err);
        cli_check(mha_s2s_forward(m, 0, rows, S, t->src, t->slen, T, t->tin, NULL, NULL),
                  "the teacher's forward");
        const float *z = mha_s2s_logits(m, NULL);
        for (size_t b = 0; b < rows; b++)
            for (size_t j = 0; j < positions_of(&t->set, pr[b]); j++) {
                const float *zr = z + (b * T + j) * V; /* logits[b, j, :] */
                float *q = t->teach + (t->teach_off[pr[b]] + j) * V;
                double mx = zr[0], se = 0;
                for (size_t v = 1; v < V; v++)
                    mx = zr[v] > mx ? zr[v] : mx;
                for (size_t v = 0; v < V; v++)
                    se += exp((double)zr[v] - mx);
                for (size_t v = 0; v < V; v++)
                    q[v] += (float)(share * exp((double)zr[v] - mx) / se);
            }
    }
}

void g2p_distill_check(const trainer *t, const g2p_vocab *src, const g2p_vocab *tgt)
{
    if (!t->cfg.distill[0])
        return;
    char paths[G2P_MAX_TEACHERS][CLI_PATH_CAP];
    const size_t n = g2p_split_list(t->cfg.distill, "--distill", paths, G2P_MAX_TEACHERS);
    for (size_t k = 0; k < n; k++)
        open_teacher(t, paths[k], src, tgt, NULL);
}

void g2p_distill_setup(trainer *t)
{
    const g2p_config *c = &t->cfg;
    if (!c->distill[0])
        return;
    const double t0 = report_now();
    char paths[G2P_MAX_TEACHERS][CLI_PATH_CAP];
    t->n_teachers = g2p_split_list(c->distill, "--distill", paths, G2P_MAX_TEACHERS);
    const size_t n = t->n_train, V = t->r.tgt.n;
    const size_t *train = t->set.pron_idx + t->set.prons_off[G2P_TRAIN];
    size_t *len = calloc(n, sizeof *len), *by_len = calloc(n, sizeof *by_len);
    t->teach_off = malloc(t->set.n_prons * sizeof *t->teach_off);
    t->soft = calloc(c->batch * c->tgt_context * V, sizeof *t->soft);
    if (!len || !by_len || !t->teach_off || !t->soft)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t p = 0; p < t->set.n_prons; p++)
        t->teach_off[p] = SIZE_MAX;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t w = t->set.pron_word[train[i]];
        t->teach_off[train[i]] = pos;
        pos += positions_of(&t->set, train[i]);
        len[i] = t->set.src_off[w + 1] - t->set.src_off[w];
    }
    t->teach_positions = pos;
    if (!(t->teach = calloc(pos * V, sizeof *t->teach)))
        cli_die(CLI_EXIT_RUNTIME, "out of memory (the teachers' distributions: %zu positions)",
                pos);
    g2p_order_by_length(n, len, G2P_MAX_POS, by_len);
    for (size_t i = 0; i < n; i++)
        by_len[i] = train[by_len[i]];
    for (size_t k = 0; k < t->n_teachers; k++) {
        g2p_run r;
        open_teacher(t, paths[k], &t->r.src, &t->r.tgt, &r);
        teacher_pass(t, r.m, 1.0 / (double)t->n_teachers, by_len);
        g2p_run_destroy(&r);
    }
    UTIL_FREE_ALL(len, by_len);
    t->teach_seconds = report_now() - t0;
}

void g2p_distill_batch(trainer *t, const size_t *pr, size_t rows, size_t T)
{
    const size_t V = t->r.tgt.n;
    memset(t->soft, 0, rows * T * V * sizeof *t->soft);
    for (size_t b = 0; b < rows; b++)
        memcpy(t->soft + b * T * V, t->teach + t->teach_off[pr[b]] * V,
               positions_of(&t->set, pr[b]) * V * sizeof *t->soft);
}
