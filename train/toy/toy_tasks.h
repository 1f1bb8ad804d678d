/*
 * Toy sequence tasks for mha-train, generated on the fly from PCG32.
 *
 *   reverse  tokens a₀..a_{n−1} ∈ [0,V);  target at i: a_{n−1−i}   (all scored,
 *            bidirectional self-attention).  Model S = n, vocab_in = vocab_out = V.
 *   copy     tokens a₀..a_{n−1} SEP a₀..a_{n−2}  (SEP = V), next-token targets under
 *            the causal mask, scored on the second half: target at n+k is a_k
 *            (k = 0..n−1), positions 0..n−1 unscored.  S = 2n, vocab_in = V+1, out V.
 *   lookup   context: `pairs` (key, value) pairs, keys distinct in [0,V), values in
 *            [0,V); queries: n keys drawn from the context's keys; target: each
 *            query's value (cross-attention, Sk = pairs ≠ S = n). vocab_in = out = V.
 *
 * Held-out split: every example has a 64-bit hash (FNV-1a over the task kind and all
 * its tokens, then a splitmix64 finaliser); examples with hash % 8 == 0 belong to the
 * evaluation split and are never produced for training (and vice versa), so the
 * evaluation set cannot appear in training, whatever their sizes.
 */
#ifndef TRAIN_TOY_TASKS_H
#define TRAIN_TOY_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "toy_model.h"

typedef enum task_kind { TASK_REVERSE = 0, TASK_COPY = 1, TASK_LOOKUP = 2 } task_kind;
typedef enum task_split { TASK_TRAIN = 0, TASK_EVAL = 1 } task_split;

/* PCG32 streams of the two generators (seeded with the run's seed). */
enum { TASK_STREAM_TRAIN = 21, TASK_STREAM_EVAL = 22 };

/* Limits of a spec: vocabulary and n. */
enum { TASK_MAX_VOCAB = 4096, TASK_MAX_LEN = 4096 };

typedef struct task_spec {
    task_kind kind;
    size_t n;     /* reverse: sequence length; copy: length of the copied part;
                     lookup: number of queries                                      */
    size_t vocab; /* V >= 2                                                          */
    size_t pairs; /* lookup: context pairs (V >= pairs >= 1); ignored otherwise       */
} task_spec;

/* "reverse", "copy", "lookup"; NULL for another value. */
const char *task_name(task_kind kind);
/* Parse a task name; MHA_EINVAL if unknown. */
int task_parse(const char *name, task_kind *kind);

/* Check the spec and fill the data-dependent fields of *cfg: vocab_in, vocab_out,
 * seq_len, ctx_len, causal (other fields untouched). MHA_EINVAL if the spec is unusable
 * (V < 2 or > TASK_MAX_VOCAB, n == 0 or > TASK_MAX_LEN, lookup with
 * pairs == 0 or pairs > V). */
int task_model_shape(const task_spec *t, tm_config *cfg);

/* 64-bit hash of one example (tokens [S], ctx [Sk,2] or NULL) of task t. */
uint64_t task_hash(const task_spec *t, const int32_t *tokens, const int32_t *ctx);

/* Draw one example of the given split into tokens [S], ctx [Sk,2] (lookup only; may be
 * NULL otherwise) and targets [S], rejecting examples of the other split (≤ 10000
 * tries; MHA_EINVAL if none fits, i.e. a space too small to split). Consumes rng. */
int task_sample(const task_spec *t, mha_pcg32 *rng, task_split split, int32_t *tokens,
                int32_t *ctx, int32_t *targets);

/* Buffers for `cap` examples: tokens [cap,S], ctx [cap,Sk,2] (NULL if Sk = 0),
 * targets [cap,S]. Owned: free with task_buffer_free. */
typedef struct task_buffer {
    size_t cap, S, Sk;
    int32_t *tokens, *ctx, *targets;
} task_buffer;

int task_buffer_init(task_buffer *buf, const task_spec *t, size_t cap);
void task_buffer_free(task_buffer *buf);

/* Fill examples [first, first+count) of buf with task_sample. */
int task_fill(const task_spec *t, mha_pcg32 *rng, task_split split, task_buffer *buf,
              size_t first, size_t count);

/* A tm_batch view of examples [first, first+count) of buf (borrowed pointers). */
tm_batch task_view(const task_buffer *buf, size_t first, size_t count);

#endif
