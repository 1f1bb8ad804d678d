/*
 * mha-train — train a tiny attention-only transformer (toy_model.h) built from the mha
 * module on a toy task (toy_tasks.h), with SGD / Adam / AdamW from the library.
 *
 *   mha-train                      # reverse, length 16, vocabulary 16, defaults
 *   mha-train --task copy --out runs/copy
 *   mha-train --resume runs/reverse/checkpoint.safetensors
 *
 * Writes into --out DIR: train_log.csv (one row per step, plus step 0: the held-out
 * accuracy before training), checkpoint.safetensors (every --ckpt-every steps and at
 * the end; atomic), summary.json, loss.svg, attention_layer<l>.svg (heat maps of every
 * head for one held-out example) and example.json (that example with the model's
 * activations; tools/check_checkpoint_torch.py compares them with PyTorch).
 *
 * Checkpoint layout (safetensors, all little-endian):
 *   tok_emb.weight, pos_emb.weight, val_emb.weight (lookup), readout.weight/.bias  F32
 *   layers.<l>.w_q.weight … layers.<l>.w_o.bias (the seed's state_dict names)      F32
 *   optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name> (Adam/AdamW) or
 *   optimizer.momentum_buffer.<name> (SGD with momentum)                          F32
 *   train.step, optimizer.step (U64 scalars), data.rng [2] (PCG32 state, inc),
 *   dropout.call_index [L] (U64); __metadata__: format = "mha-train/1" and every
 *   option that defines the run (task, seq-len, …, seed), as text.
 * Resuming restores all of it, so a single-thread run continues bit for bit.
 *
 * Exit status: 0 done; 1 runtime error (I/O, library); 2 bad option or a checkpoint
 * that does not fit; 3 training stopped on a non-finite loss or gradient; 130 / 143
 * stopped by SIGINT / SIGTERM after finishing its step (checkpoint and reports written).
 *
 * Options, checkpoint I/O, logs, JSON, pictures and the progress line are the modules
 * mha-gpt shares (cli.h, ckpt.h, report.h). This file is the outline; each step is a
 * file of its own (toy_run.h lists them).
 */
#include "report.h"
#include "toy_run.h"

int main(int argc, char **argv)
{
    const double t_start = report_now();
    cli_start_program("mha-train");
    run_config cfg;
    resume_info ri;
    int n_threads = 0;
    if (!toy_configure(argc, argv, &cfg, &ri, &n_threads))
        return 0;
    run_state rs;
    const size_t n_params = toy_build(&rs, &cfg, &ri, t_start, n_threads);
    const int status = toy_train(&rs, &ri, n_params);
    toy_run_free(&rs);
    return status;
}
