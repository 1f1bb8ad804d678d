#!/usr/bin/python3
"""torch_gpt.py — the baby-GPT training step on Tiny Shakespeare, in PyTorch (the reference
side of issue 8's speed target; development only, Debian's python3-torch 1.13).

Model: tools/gpt_torch.py's GPT (the model of include/mha_gpt.h, attention = the seed's
module), float32, dropout 0. Baby config by default: L 4, H 4, C 128, F 512, context 64,
batch 12. Training as the issue states it: AdamW (β 0.9/0.99, eps 1e-8, weight decay 0.1
on the 2-D Linear weights only), global-norm clipping at 1.0, lr 1e-3 with 100 linear
warm-up steps then cosine to 1e-4 at step 1,999 (mha_lr_at's schedule), 2,000 steps.

Data: data/tinyshakespeare.txt (or ../shared/data/tinyshakespeare.txt), read as UTF-8;
vocabulary = its sorted distinct characters (65); the first 90% (floor) for training,
the rest for validation. A batch is B random windows of T+1 characters of the training
split (inputs = the first T, targets = the last T), start positions from a seeded
torch.Generator. Validation loss = mean over VAL_BATCHES fixed batches of the validation
split (drawn once from their own seed), in eval mode.

A timed step = draw a batch, zero_grad, forward, loss.backward(), clip_grad_norm_, set lr,
AdamW step (gpt_torch.train_step). ms_per_step = the median of the timed steps' wall
times (time.perf_counter), after --warmup untimed steps.

Threads: torch.set_num_threads(N) and OpenBLAS (which torch 1.13 on Debian calls for
float32 GEMMs) set to N through ctypes, as bench/torch_bench.py does.

    /usr/bin/python3 bench/torch_gpt.py --threads 2              # 10 + 60 steps, a line
    /usr/bin/python3 bench/torch_gpt.py --threads 1 --json       # one JSON object on stdout
    /usr/bin/python3 bench/torch_gpt.py --threads 2 --full       # all 2,000 steps + val loss
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gpt_torch  # noqa: E402
from torch_bench import find_openblas, set_threads  # noqa: E402

DATA_CANDIDATES = [os.path.join(ROOT, "data", "tinyshakespeare.txt"),
                   os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")]
VAL_BATCHES = 200
VAL_SEED = 1234


def load_text(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.int64)
    n_train = int(0.9 * len(data))
    return chars, data[:n_train], data[n_train:]


class Batches:
    """Random windows of T+1 tokens of `data`, start positions from a seeded generator."""

    def __init__(self, data, B, T, seed):
        self.windows = data.unfold(0, T + 1, 1)   # [N−T, T+1], a view
        self.B = B
        self.gen = torch.Generator().manual_seed(seed)

    def next(self):
        starts = torch.randint(0, self.windows.size(0), (self.B,), generator=self.gen)
        w = self.windows[starts]                  # [B, T+1]
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()


@torch.no_grad()
def mean_loss(model, batches):
    model.eval()
    total = sum(model(x, y)[1].item() for x, y in batches)
    model.train()
    return total / len(batches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch and OpenBLAS threads (default 1)")
    ap.add_argument("--steps", type=int, default=60, help="timed steps (default 60)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--full", action="store_true",
                    help="run all --total steps, timing each, then the validation loss over "
                         "%d fixed batches" % VAL_BATCHES)
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument("--data", help="text file (default data/tinyshakespeare.txt)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--lr-warmup", type=int, default=100)
    ap.add_argument("--total", type=int, default=2000, help="steps of the schedule (default 2000)")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    log = sys.stderr if args.json else sys.stdout

    path = args.data or next((p for p in DATA_CANDIDATES if os.path.exists(p)), None)
    if path is None:
        sys.exit("torch_gpt: no data/tinyshakespeare.txt; pass --data FILE")
    chars, train, val = load_text(path)
    B, T = args.batch, args.context

    blas = find_openblas()
    set_threads(args.threads, blas, "match")
    torch.manual_seed(args.seed)
    model = gpt_torch.GPT(len(chars), T, args.layers, args.heads, args.dim)
    model.train()
    opt = gpt_torch.make_optimizer(model, args.lr, args.weight_decay)
    batches = Batches(train, B, T, args.seed)

    n_steps = args.total if args.full else args.warmup + args.steps
    first_timed = 0 if args.full else args.warmup
    times, loss = [], float("nan")
    t_start = time.perf_counter()
    for step in range(n_steps):
        t0 = time.perf_counter()
        x, y = batches.next()
        lr = gpt_torch.lr_at(step, args.lr, args.min_lr, args.lr_warmup, args.total)
        loss_t, _ = gpt_torch.train_step(model, opt, x, y, lr, args.clip)
        loss = loss_t.item()
        dt = time.perf_counter() - t0
        if step >= first_timed:
            times.append(dt)
        if args.full and (step % 200 == 0 or step == n_steps - 1):
            print("step %d/%d loss %.4f lr %.2e %.1f ms/step elapsed %.1fs"
                  % (step, n_steps, loss, lr, 1e3 * statistics.median(times),
                     time.perf_counter() - t_start), file=log, flush=True)
    train_wall = time.perf_counter() - t_start
    if not math.isfinite(loss):
        sys.exit("torch_gpt: non-finite loss")

    result = {"ms_per_step": 1e3 * statistics.median(times),
              "ms_per_step_mean": 1e3 * statistics.mean(times),
              "threads": args.threads, "steps": len(times),
              "last_train_loss": loss, "train_wall_s": train_wall,
              "config": {"layers": args.layers, "heads": args.heads, "dim": args.dim,
                         "mlp_dim": 4 * args.dim, "context": T, "batch": B,
                         "vocab": len(chars), "lr": args.lr, "min_lr": args.min_lr,
                         "lr_warmup": args.lr_warmup, "total_steps": args.total,
                         "betas": [0.9, 0.99], "weight_decay": args.weight_decay,
                         "clip": args.clip, "dropout": 0.0, "seed": args.seed},
              "data": os.path.relpath(path, ROOT), "torch": torch.__version__,
              "openblas": blas[0] if blas else None}
    if args.full:
        t0 = time.perf_counter()
        vb = Batches(val, B, T, VAL_SEED)
        result["val_loss"] = mean_loss(model, [vb.next() for _ in range(VAL_BATCHES)])
        result["eval_s"] = time.perf_counter() - t0
        result["wall_s"] = time.perf_counter() - t_start
        result["val_batches"] = VAL_BATCHES
    if args.json:
        print(json.dumps(result))
    else:
        print("torch_gpt: %d thread%s: %.2f ms/step median (mean %.2f, %d timed steps), "
              "last loss %.4f%s" % (args.threads, "" if args.threads == 1 else "s",
                                    result["ms_per_step"], result["ms_per_step_mean"],
                                    len(times), loss,
                                    ", val loss %.4f over %d batches, %.1f s wall"
                                    % (result["val_loss"], VAL_BATCHES, result["wall_s"])
                                    if args.full else ""))


if __name__ == "__main__":
    main()
