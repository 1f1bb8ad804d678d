/*
 * mha-g2p train's state (the trainer), shared by the command (train/g2p/g2p_train.c: the
 * batches, the model's half of the loop of train/common/trainer.h; train/g2p/g2p_train_setup.c: options, data, model, precision) and its
 * files (train/g2p/g2p_train_io.c: checkpoints, pictures, summary, the ranks' shared state).
 * Private to those three files.
 */
#ifndef TRAIN_G2P_TRAIN_H
#define TRAIN_G2P_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dist.h"
#include "peak.h"
#include "g2p_prog.h"
#include "report.h"
#include "trainer.h"

/* History columns (one row per completed step, trainer.h's layout): the batch's loss, the
 * learning rate, the gradient norm; at evaluations, the validation error rates; the
 * seconds since the run started (earlier processes of a resumed run included) and the
 * step's pronunciations per second. */
enum { H_LOSS, H_LR, H_GN, H_WER, H_PER, H_WER_S, H_PER_S, H_TIME, H_WPS, H_COLS };

/* The MFU's denominator in GFLOP/s (0: none): the peak measured now (every rank's, summed)
 * or kept (one process). */
typedef struct g2p_clock {
    double peak;
    peak_best peak_src;
} g2p_clock;

typedef struct trainer {
    g2p_config cfg;
    g2p_run r;
    g2p_dict dict;
    g2p_set set;
    g2p_vocab reduced;         /* phones without stress                             */
    int32_t *map;              /* [tgt.n] target id → reduced id                     */
    size_t *order;             /* [n_train] this epoch's pronunciations, batched     */
    size_t n_train;
    uint64_t order_epoch;      /* the epoch `order` is for (UINT64_MAX: none yet)    */
    size_t *plen;              /* [n_prons] sort key: source length · 64 + target's  */
    int32_t *src, *tin, *tout; /* one batch [B, S], [B, T], [B, T]                   */
    size_t *slen;
    report_history hist;
    g2p_decoder dec;
    int rank0;                 /* this process writes files and prints (dist.h)      */
    dist_grads *dg;            /* sums the gradients across ranks                    */
    char ckpt_path[CLI_PATH_CAP + 64], best_path[CLI_PATH_CAP + 64];
    char csv_path[CLI_PATH_CAP + 64];
    size_t n_params;
    double mem_need;           /* bytes the run needs, estimated (g2p_check_memory)   */
    char precision_why[160];   /* how --precision auto chose ("" when it was given)  */
    g2p_clock clk;
    train_loop loop;           /* the loop (trainer.h): its clocks, last evaluation, stop */
    report_csv csv;            /* its log (open on rank 0)                              */
    report_progress prog;      /* its progress line                                    */
    double share;              /* this rank's share of the step's scored positions   */
    size_t rank_rows;          /* and its rows of the step's batch                   */
    /* --distill (train/g2p/g2p_distill.c) */
    float *teach;              /* [positions, Vt] the teachers' mean distribution at every
                                  target position of every training pronunciation     */
    size_t *teach_off;         /* [n_prons] pronunciation p's first position (training
                                  pronunciations only)                                 */
    size_t teach_positions, n_teachers;
    double teach_seconds;      /* the time their pass took                            */
    float *soft;               /* [B, T, Vt] the batch's                                */
} trainer;

/* ---- train/g2p/g2p_train_setup.c ---- */

/* The program's setup (train_program; ctx: the trainer): parse the options, read the data
 * (and a checkpoint), agree across ranks, choose the precision, claim --out, build the
 * model, open the log (t->csv), say what the run is. Returns 1 when a resumed run is
 * finished already (nothing to do: said on stdout). */
int g2p_train_setup(void *ctx, int argc, char **argv, int first);

/* ---- train/g2p/g2p_distill.c ---- */

/* Bytes of the teachers' distributions --distill keeps (0 without it), from the data and
 * the number of target symbols Vt. */
double g2p_distill_bytes(const trainer *t, size_t Vt);
/* With --distill, before anything is written: exit 2 unless every teacher is a model of
 * the run's vocabularies (src, tgt) and direction with room for the data's words. */
void g2p_distill_check(const trainer *t, const g2p_vocab *src, const g2p_vocab *tgt);
/* With --distill (after the model is built): open the teachers, keep their mean
 * distribution at every training position, close them. */
void g2p_distill_setup(trainer *t);
/* t->soft [rows, T, Vt] for the batch of pronunciations pr[0..rows) padded to T: each
 * row's positions from the kept distributions, zeros at the padding. */
void g2p_distill_batch(trainer *t, const size_t *pr, size_t rows, size_t T);

/* ---- train/g2p/g2p_train_io.c ---- */

/* Save a checkpoint (with the AdamW moments or not), or say whether the last one is
 * intact and exit 1. */
void g2p_save_or_stop(trainer *t, const char *path, int with_moments);
/* curves.svg: the batch loss and the validation error rates. */
void g2p_write_curves(const trainer *t, const char *path);
/* Cross-attention heat maps of a few validation words. Returns the files written. */
size_t g2p_write_alignments(trainer *t);
/* summary.json. */
void g2p_write_summary(const trainer *t, const char *path, double wall, int completed);
/* The gradient combiner; with several ranks every rank takes rank 0's weights, AdamW
 * moments and training state. */
void g2p_share_rank0_state(trainer *t);

#endif /* TRAIN_G2P_TRAIN_H */
