/*
 * mha-g2p's internal interface: the run configuration and option tables, the model with
 * its optimizer and checkpoint layout, opening a checkpoint (configuration and both
 * vocabularies), and batched decoding of many words. Shared by g2p_main.c and g2p_use.c
 * (commands pronounce and eval), g2p_train.c (train); implemented in g2p_common.c and
 * g2p_decode.c.
 */
#ifndef TRAIN_G2P_PROG_H
#define TRAIN_G2P_PROG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "cli.h"
#include "g2p_data.h"
#include "g2p_rescore.h"
#include "g2p_score.h"
#include "mha.h"
#include "mha_optim.h"
#include "mha_s2s.h"

#define G2P_CKPT_FORMAT "mha-g2p/1"
enum { G2P_MAX_POS = 256 };     /* most source / target positions a model may have      */
/* Decoding (pronounce, eval): the model is made for G2P_ENCODE_BATCH words (its encoder
 * takes the words of a batch that many at a time), and G2P_DECODE_ROWS hypotheses are
 * decoded at once (G2P_DECODE_ROWS / beam words): they size the memory of decoding. */
enum { G2P_ENCODE_BATCH = 16, G2P_DECODE_ROWS = 128 };
enum { G2P_MAX_MODELS = 8 };     /* models of one ensemble (--model + --ensemble)          */
enum { G2P_MAX_LEXICONS = 16 };  /* pronounce --lexicon files                             */
/* --precision auto (g2p_config.precision), the default of train: bf16 where the CPU has
 * AVX512_BF16 and its measured bf16 peak is at least G2P_AUTO_BF16_RATIO times the float32
 * one, else fp32. The options' names are G2P_PRECISION_NAMES (fp32, bf16, auto). */
enum { G2P_PRECISION_AUTO = 2 };
#define G2P_AUTO_BF16_RATIO 1.25
extern const char *const G2P_PRECISION_NAMES[];

/* Everything a run is made of (see the tables in g2p_common.c for ranges, defaults and
 * which options are stored in checkpoints). */
typedef struct g2p_config {
    /* train */
    char data[CLI_PATH_CAP];
    int format;                  /* enum g2p_format                                     */
    size_t enc_layers, dec_layers, heads, dim, mlp_dim, batch;
    uint64_t steps;
    double lr, min_lr;
    uint64_t warmup;
    double beta2, weight_decay, clip, dropout, label_smoothing;
    int reverse;                 /* --reverse: a right-to-left model (it writes each
                                    pronunciation last token first)                     */
    char distill[CLI_PATH_CAP];  /* --distill: teacher models, ':'-separated ("" none)  */
    double distill_weight;       /* --distill-weight: their share of each target         */
    uint64_t seed, eval_every, ckpt_every, stop_after;
    size_t keep_checkpoints;     /* --keep-checkpoints: numbered copies kept              */
    size_t eval_words;
    int threads;
    int precision;               /* mha_precision of training's products, or
                                    G2P_PRECISION_AUTO until train resolves it          */
    char out[CLI_PATH_CAP];
    char resume[CLI_PATH_CAP];
    int force;                   /* --force: replace another run's checkpoints in --out */
    int progress;                /* --progress: REPORT_PROGRESS_* (report.h)            */
    char run_id[24];             /* the run's id (rundir.h), kept across --resume        */
    size_t src_context, tgt_context; /* derived from the data (stored in checkpoints)   */
    double elapsed;              /* training seconds of a checkpoint (its metadata)      */
    uint64_t ck_step;            /* train.step of a checkpoint                          */
    /* pronounce / eval */
    char model[CLI_PATH_CAP];
    char ensemble[CLI_PATH_CAP]; /* --ensemble: more models, ':'-separated                */
    char rescore[CLI_PATH_CAP];  /* eval --rescore: models that rescore the beam's list     */
    double rescore_weight;       /* eval --rescore-weight                                 */
    char lexicon[CLI_PATH_CAP];  /* pronounce --lexicon: dictionaries, ':'-separated       */
    int no_lexicon, no_stress, show_source; /* pronounce's flags                        */
    size_t beam, nbest;
    double alpha;
    char dict[CLI_PATH_CAP];
    char eval_out[CLI_PATH_CAP];
    int eval_split;              /* eval --words: 0 test, 1 validation                    */
    int run_threads;
    /* average */
    char average_out[CLI_PATH_CAP];
} g2p_config;

extern const cli_opt G2P_TRAIN_OPTS[];
extern const size_t G2P_N_TRAIN_OPTS;
extern const cli_opt G2P_PRONOUNCE_OPTS[];
extern const size_t G2P_N_PRONOUNCE_OPTS;
extern const cli_opt G2P_EVAL_OPTS[];
extern const size_t G2P_N_EVAL_OPTS;
extern const cli_opt G2P_AVERAGE_OPTS[];
extern const size_t G2P_N_AVERAGE_OPTS;

/* The paths of a ':'-separated list (an option's value, e.g. --ensemble) into paths[max];
 * exit 2 for an empty name or more than max. Returns how many. */
size_t g2p_split_list(const char *value, const char *opt, char (*paths)[CLI_PATH_CAP],
                      size_t max);
/* The defaults of every option. */
void g2p_defaults(g2p_config *c);
/* A default path of the source tree ("data/cmudict.dict"), found as cli_default_path
 * finds it (working directory, source tree, installed data), so the program finds its
 * data and model from anywhere. */
void g2p_default_path(char *out, size_t cap, const char *rel);

/* The model, its optimizer (NULL for pronounce/eval), the vocabularies and the checkpoint
 * layout. */
typedef struct g2p_run {
    mha_s2s *m;
    mha_optimizer *opt;
    g2p_vocab src, tgt;
    ckpt_tensor *pt;        /* [n_pt] every model tensor and its AdamW moments           */
    size_t n_pt;
    float *scratch;         /* pronounce/eval: where the moments of a checkpoint go       */
    /* state entries of a checkpoint */
    uint64_t step, optim_t, rng[2], epoch, batch_in_epoch, call_index, best_step;
    double best_wer, elapsed; /* elapsed: training seconds so far (metadata)     */
    const char *averaged_from; /* g2p_save: metadata "averaged_from" when not NULL      */
    ckpt_state s[10];
} g2p_run;

/* The memory a training run of cfg needs with Vs source and Vt target symbols (and `other`
 * bytes of data: the teachers' distributions of --distill), estimated before the model is
 * allocated; exit 2 naming the bytes and the options that drive them
 * when it is more than this process may use (physical memory, RLIMIT_AS). Returns it. */
double g2p_check_memory(const g2p_config *cfg, size_t Vs, size_t Vt, double other);
/* That estimate alone, in bytes: parameters with their gradients and AdamW's moments, and
 * the activations of a batch (see g2p_common.c). */
void g2p_memory_estimate(const g2p_config *cfg, size_t Vs, size_t Vt, double *params,
                         double *acts);

/* Create the model of cfg for the vocabularies (copied) and batches of max_batch, and,
 * when with_optimizer, AdamW as mha-gpt's (β1 0.9, β2 cfg->beta2, eps 1e-8, decay on
 * matmul weights); without it (a model to load: g2p_load_model) the weights are not
 * drawn (mha_s2s_config.no_init). Exit 1 on failure. */
void g2p_run_create(g2p_run *r, const g2p_config *cfg, const g2p_vocab *src,
                    const g2p_vocab *tgt, size_t max_batch, int with_optimizer);
void g2p_run_destroy(g2p_run *r);
/* The checkpoint layout: with_moments 0 writes/reads the weights and state only (the
 * best model, the committed model). */
ckpt_layout g2p_run_layout(g2p_run *r, int with_moments);
/* Save checkpoint `path` (atomic) with the run's options and vocabularies. MHA_OK, or the
 * mha_st_save status after a message on stderr (the file it was to replace is untouched).
 * Exit 1 when out of memory. */
int g2p_save(g2p_run *r, const g2p_config *cfg, const char *path, int with_moments);

/* Open checkpoint `path`: take its configuration into cfg (train options stored with
 * ckpt != 0; explicit_opt may be NULL), refuse anything that is not an mha-g2p checkpoint
 * or whose tensors do not have that configuration's shapes, and read both vocabularies
 * into *src, *tgt (owned). `what` starts every message. Exit 2. Returns the file
 * (mha_st_free it). */
mha_st_file *g2p_open_checkpoint(const char *path, const char *what, const int *explicit_opt,
                                 g2p_config *cfg, g2p_vocab *src, g2p_vocab *tgt);
/* Build the model of an opened checkpoint and load it (moments too when present, into
 * scratch). Exit 2 on a bad file. */
void g2p_load_model(g2p_run *r, const g2p_config *cfg, mha_st_file *f, const char *what,
                    const g2p_vocab *src, const g2p_vocab *tgt, size_t max_batch);

/* ---- decoding many words (g2p_decode.c) ---------------------------------------------- */

/* Decoder state for words of up to max_src symbols with beam width beam (1: greedy), of
 * one model or an ensemble of n_models (their log-probabilities averaged at each step). */
typedef struct g2p_decoder {
    size_t n_models;
    mha_s2s *m[G2P_MAX_MODELS];
    mha_s2s_infer *inf[G2P_MAX_MODELS];
    size_t beam, nbest, max_src, max_tgt;
    int reverse;            /* right-to-left models: hypotheses are turned around (set
                               after g2p_decoder_init; every model must be one)        */
    size_t batch;           /* words decoded at once: max(1, G2P_DECODE_ROWS / beam)   */
    double alpha;
    int32_t *src;           /* [batch, max_src] */
    size_t *len;            /* [batch]          */
    int32_t *out;           /* [batch, kdec, max_tgt] */
    size_t *out_len;        /* [batch, kdec]    */
    double *logprob, *score;/* [batch, kdec]    */
    mha_s2s_hyp *hyps;
    size_t kdec;            /* hypotheses the beam returns per word: nbest, or beam when
                               rescoring                                               */
    g2p_rescorer resc;      /* n-best rescoring (g2p_decoder_rescore), when resc.n > 0  */
} g2p_decoder;

/* n_models (1 .. G2P_MAX_MODELS) models of the same vocabularies and contexts (and of one
 * direction: d->reverse says which). */
void g2p_decoder_init(g2p_decoder *d, size_t n_models, mha_s2s *const *models, size_t beam,
                      size_t nbest, double alpha);
void g2p_decoder_free(g2p_decoder *d);
/* Rescore the beam's list (beam > 1; greedy is not rescored): each word's `beam` best
 * hypotheses are ranked again as g2p_rescore.h says, by the n models (of the decoder's
 * vocabularies and contexts, writing right to left when reverse); a hypothesis' score
 * becomes the combined one, its logprob stays the decoder's. Exit 1 on failure. */
void g2p_decoder_rescore(g2p_decoder *d, size_t n, mha_s2s *const *models, int reverse,
                         double weight);
/* Decode words ids[i] (srcs[i][0 .. lens[i])) for i < n, in batches of words of similar
 * length; results for word i: hypothesis k (< nbest) has tokens out_tok[(i·nbest + k) ·
 * max_tgt ..] of length out_len[i·nbest + k], and logprob/score. Output arrays are the
 * caller's, sized n·nbest (·max_tgt for tokens). Exit 1 on a library error. */
void g2p_decode_words(g2p_decoder *d, size_t n, const int32_t *const *srcs, const size_t *lens,
                      int32_t *out_tok, size_t *out_len, double *logprob, double *score);

/* Score the usable words of split `split` of set s (or every usable word when split < 0),
 * greedy (beam 1) or with a beam, into the two tallies (with and without stress; map from
 * g2p_stress_map). wrong (may be NULL) gets, per word of the split in order, 1 if wrong;
 * hyp_tok/hyp_len (may be NULL) its best hypothesis (caller-sized). Returns the number of
 * words scored. nonfinite (may be NULL: not checked) gets SIZE_MAX, or the position in the
 * split of the first word whose best hypothesis has a log-probability or score that is not
 * finite (the model's arithmetic overflowed: its tokens mean nothing); then nothing is
 * scored (the tallies, wrong and hyp_* are not written) and 0 is returned. */
size_t g2p_score_split(g2p_decoder *d, const g2p_set *s, int split, const int32_t *map,
                       size_t map_n, g2p_tally *stress, g2p_tally *nostress, size_t limit,
                       unsigned char *wrong, int32_t *hyp_tok, size_t *hyp_len,
                       size_t *nonfinite);

/* The average command (g2p_average.c): the element-wise mean of the weights of checkpoints
 * paths[0..n) of one model (same sizes and vocabularies, else exit 2 naming the file),
 * summed in double in the given order and rounded once, saved weights-only to `out`
 * (atomic; an existing file only with force; never one of the inputs) with metadata
 * "averaged_from" (the files and their steps) and an unevaluated state (best.step 0).
 * Returns 0; exits 2 on bad input, 1 on a write error. */
int g2p_average_main(const char *const *paths, size_t n, const char *out, int force);

/* The train command (argv[first..argc) are its options). Returns the exit status. */
int g2p_train_main(int argc, char **argv, int first);
/* The pronounce and eval commands (g2p_use.c; argv[2..argc) are their options and words).
 * Return the exit status; exit 2 on bad options or input. */
int g2p_pronounce_main(int argc, char **argv);
int g2p_eval_main(int argc, char **argv);
/* A command's options (argv[2..argc)) into cfg, from its defaults; exit 2 on a bad one.
 * Positional arguments (pronounce's words, average's files) into *words / *n_words when
 * words != NULL (free *words). (g2p_main.c) */
void g2p_parse(const cli_opt *opts, size_t n, int argc, char **argv, g2p_config *cfg,
               char ***words, size_t *n_words);

#endif /* TRAIN_G2P_PROG_H */
