#!/usr/bin/python3
"""torch_train.py — training throughput of mha-train's model, written in PyTorch.

The same model as train/toy/toy_model.h for a self-attention task such as `reverse`:
    x0 = tok_emb[tokens] + pos_emb[position]           [B,S,D]
    x_{l+1} = x_l + MHA_l(x_l, x_l, mask)   l < L       (the seed's module)
    logits = x_L·W_outᵀ + b_out                          [B,S,V]
    loss = cross-entropy over scored positions (mean)
trained as mha-train trains it: Adam (torch.optim.Adam), linear learning-rate
warm-up then cosine decay to min-lr, global gradient-norm clipping, float32,
one batch drawn per step from torch's generator (the data only has to have the
right shape: throughput does not depend on the task's answers).

A step = draw batch, zero_grad, forward, loss.backward(), clip, set lr,
optimizer.step(). Timing stops after --steps steps or --max-time seconds.
bench/run.sh runs it twice: as installed, and with glibc malloc keeping its heap
(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2^40; see torch_bench.py).
Steps/s = timed steps / their wall time, after warm-up steps; for each thread
count (torch.set_num_threads(t), OpenBLAS matched to t through ctypes, as in
torch_bench.py) and the best is reported, as the issue defines PyTorch's time.

The sizes come from the command line, or from --config, a JSON object with
mha-train's config (e.g. its summary.json; keys looked up: seq_len, vocab /
vocab_in / vocab_out, model_dim, num_heads / heads, layers, batch, lr, min-lr,
warmup, clip, dropout, causal; '-' and '_' spellings), so the two sides train
the same model.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from torch_bench import MultiHeadAttention, SEED_SOURCE, find_openblas, set_threads  # noqa: E402


class TinyAttentionModel(nn.Module):
    """Embedding + positional embedding → L residual seed-MHA layers → read-out."""

    def __init__(self, vocab_in, vocab_out, seq_len, model_dim, num_heads, layers, dropout):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_in, model_dim)
        self.pos_emb = nn.Embedding(seq_len, model_dim)
        self.layers = nn.ModuleList(
            [MultiHeadAttention(model_dim, num_heads, dropout) for _ in range(layers)])
        self.readout = nn.Linear(model_dim, vocab_out)
        self.register_buffer("positions", torch.arange(seq_len))

    def forward(self, tokens, mask=None):
        x = self.tok_emb(tokens) + self.pos_emb(self.positions[: tokens.size(1)])
        for layer in self.layers:
            x = x + layer(x, x, mask)
        return self.readout(x)


def pick(cfg, *names, default=None):
    """First of names found in cfg or in any dict nested one level down."""
    for n in names:
        if n in cfg:
            return cfg[n]
    for v in cfg.values():
        if isinstance(v, dict):
            for n in names:
                if n in v:
                    return v[n]
    return default


def lr_at(step, args, total):
    """Linear warm-up to lr over lr_warmup steps, then cosine down to min_lr."""
    if step < args.lr_warmup:
        return args.lr * (step + 1) / args.lr_warmup
    t = (step - args.lr_warmup) / max(1, total - args.lr_warmup)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * min(t, 1.0)))


def steps_per_second(model, opt, args, mask):
    B, S = args.batch, args.seq_len
    total = args.warmup + args.steps
    counter = [0]

    def step():
        tokens = torch.randint(0, args.vocab_in, (B, S))
        targets = torch.randint(0, args.vocab_out, (B, S))
        opt.zero_grad(set_to_none=False)
        logits = model(tokens, mask)
        loss = F.cross_entropy(logits.reshape(B * S, -1), targets.reshape(-1))
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(counter[0], args, total)
        opt.step()
        counter[0] += 1
        return loss

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    done, dt = 0, 0.0
    while done < args.steps:
        loss = step()
        done += 1
        dt = time.perf_counter() - t0
        if dt > args.max_time and done >= 10:
            break  # oversubscribed runs crawl: the rate is known well enough
    if not math.isfinite(loss.item()):
        raise RuntimeError("non-finite loss")
    return done / dt, done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", help="JSON file with mha-train's config (e.g. summary.json)")
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--vocab-in", type=int, default=16)
    ap.add_argument("--vocab-out", type=int, default=16)
    ap.add_argument("--model-dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3, help="peak lr (default 3e-3)")
    ap.add_argument("--min-lr", type=float, default=3e-5, help="default 3e-5")
    ap.add_argument("--lr-warmup", type=int, default=100, help="lr warm-up steps (default 100)")
    ap.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip, 0 = off")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--causal", type=int, default=0, help="1 = causal mask (default 0)")
    ap.add_argument("--steps", type=int, default=200, help="timed steps (default 200)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps (default 10)")
    ap.add_argument("--max-time", type=float, default=10.0,
                    help="stop timing after this many seconds, once 10 steps are done "
                         "(default 10)")
    ap.add_argument("--threads", default="1,0", help="comma list, 0 = all cores (default 1,0)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", help="write the result to this file")
    args = ap.parse_args()

    if args.config:
        with open(args.config) as f:
            cfg = json.load(f)
        args.seq_len = int(pick(cfg, "seq_len", "seq-len", default=args.seq_len))
        v = pick(cfg, "vocab", default=None)
        args.vocab_in = int(pick(cfg, "vocab_in", default=v if v is not None else args.vocab_in))
        args.vocab_out = int(pick(cfg, "vocab_out", default=v if v is not None else args.vocab_out))
        args.model_dim = int(pick(cfg, "model_dim", "model-dim", default=args.model_dim))
        args.heads = int(pick(cfg, "num_heads", "heads", default=args.heads))
        args.layers = int(pick(cfg, "layers", default=args.layers))
        args.batch = int(pick(cfg, "batch", "batch_size", default=args.batch))
        args.lr = float(pick(cfg, "lr", default=args.lr))
        args.min_lr = float(pick(cfg, "min-lr", "min_lr", default=args.min_lr))
        args.lr_warmup = int(pick(cfg, "warmup", "lr_warmup", default=args.lr_warmup))
        args.clip = float(pick(cfg, "clip", default=args.clip))
        args.dropout = float(pick(cfg, "dropout", default=args.dropout))
        args.causal = int(pick(cfg, "causal", default=args.causal))

    torch.manual_seed(args.seed)
    blas = find_openblas()
    cores = os.cpu_count() or 1
    mask = None
    if args.causal:
        mask = torch.tril(torch.ones(args.seq_len, args.seq_len, dtype=torch.uint8)).view(
            1, 1, args.seq_len, args.seq_len)
    result = {"model": {k: getattr(args, k) for k in (
        "seq_len", "vocab_in", "vocab_out", "model_dim", "heads", "layers", "batch", "lr",
        "dropout", "causal", "min_lr", "lr_warmup", "clip")}, "optimizer": "torch.optim.Adam", "seed_module": SEED_SOURCE,
        "steps": args.steps, "steps_per_s_by_threads": {}}
    for t in [int(x) or cores for x in args.threads.split(",")]:
        set_threads(t, blas, "match")
        torch.manual_seed(args.seed)
        model = TinyAttentionModel(args.vocab_in, args.vocab_out, args.seq_len, args.model_dim,
                                   args.heads, args.layers, args.dropout)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        sps, done = steps_per_second(model, opt, args, mask)
        result["steps_per_s_by_threads"][str(t)] = sps
        print("torch_train: %d thread%s: %.1f steps/s (%d steps, B=%d S=%d D=%d H=%d L=%d V=%d)"
              % (t, "" if t == 1 else "s", sps, done, args.batch, args.seq_len,
                 args.model_dim, args.heads, args.layers, args.vocab_out), flush=True)
    result["steps_per_s"] = max(result["steps_per_s_by_threads"].values())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
