#!/usr/bin/python3
"""torch_g2p.py — the G2P encoder–decoder's training step in PyTorch (the reference side of
the G2P benchmark; development only, Debian's python3-torch 1.13).

Model: tools/s2s_torch.py's Seq2Seq (the C library's encoder–decoder, attention = the
seed's module), float32, tied read-out, module in train() mode; --dropout p is both the
attention-weight dropout and the embedding/residual dropout (attn_dropout = resid_dropout).
Default sizes: the G2P vocabularies (30 source symbols, 87 target symbols) and contexts
(36), 3 encoder and 3 decoder layers, H 4, C 128, F 4·C.

Batches (synthetic, fixed seed): B rows, padded widths S = --src-len and T = --tgt-len.
Row b's source length is drawn in [⌊S/2⌋, S] (ids in [1, Vs), then 0 = padding); its
target length n in [⌊T/2⌋, T]: tgt_in = [BOS=1, y_1 … y_{n−1}, 0 …], targets =
[y_1 … y_{n−1}, EOS=2, −1 …] with y in [3, Vt). All warmup + steps batches are drawn up
front from torch.Generator().manual_seed(--seed), so every thread count sees the same ones.

A timed step = zero_grad, forward (loss: label-smoothed cross-entropy over the scored
positions, ε = --label-smoothing), loss.backward(), clip_grad_norm_(--clip), AdamW step
(s2s_torch.train_step; betas (0.9, 0.99), eps 1e-8, weight decay on the 2-D Linear
weights only, constant lr). ms_per_step = the median of the timed steps' wall times
(time.perf_counter) after --warmup-steps untimed ones; the model and optimizer are rebuilt
from --seed for each thread count.

Threads: for each count N of --threads (a list, e.g. 1,2): torch.set_num_threads(N) and
OpenBLAS (which torch 1.13 on Debian calls for float32 GEMMs) set to N through ctypes, as
bench/torch_bench.py does.

    /usr/bin/python3 bench/torch_g2p.py --threads 1,2                   # table on stdout
    /usr/bin/python3 bench/torch_g2p.py --threads 1,2 --json g2p.json   # + the JSON
    /usr/bin/python3 bench/torch_g2p.py --json -                        # JSON on stdout
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
import s2s_torch  # noqa: E402
from torch_bench import find_openblas, set_threads  # noqa: E402

EOS_ID = 2  # BOS and padding: s2s_torch.BOS_ID, s2s_torch.PAD_ID


def draw_batch(gen, B, S, T, Vs, Vt):
    """src [B,S], src_len [B], tgt_in [B,T], targets [B,T] (see the top of the file)."""
    src_len = torch.randint(max(1, S // 2), S + 1, (B,), generator=gen)
    tgt_len = torch.randint(max(1, T // 2), T + 1, (B,), generator=gen)
    src = torch.randint(1, Vs, (B, S), generator=gen)
    y = torch.randint(3, Vt, (B, T), generator=gen)
    tgt_in = torch.full((B, T), s2s_torch.PAD_ID, dtype=torch.int64)
    targets = torch.full((B, T), -1, dtype=torch.int64)
    for b in range(B):
        n = tgt_len[b].item()
        src[b, src_len[b]:] = s2s_torch.PAD_ID
        tgt_in[b, 0] = s2s_torch.BOS_ID
        tgt_in[b, 1:n] = y[b, :n - 1]
        targets[b, :n - 1] = y[b, :n - 1]
        targets[b, n - 1] = EOS_ID
    return src, src_len, tgt_in, targets


def time_threads(threads, args, batches, blas):
    set_threads(threads, blas, "match")
    torch.manual_seed(args.seed)
    model = s2s_torch.Seq2Seq(args.src_vocab, args.tgt_vocab, args.src_context,
                              args.tgt_context, args.enc_layers, args.dec_layers, args.heads,
                              args.dim, args.mlp_dim, attn_dropout=args.dropout,
                              resid_dropout=args.dropout, label_smoothing=args.label_smoothing)
    model.train()
    opt = s2s_torch.make_optimizer(model, args.lr, args.weight_decay, betas=args.betas,
                                   eps=args.eps)
    times, loss = [], float("nan")
    for step, batch in enumerate(batches):
        t0 = time.perf_counter()
        loss_t, _ = s2s_torch.train_step(model, opt, *batch, args.lr, args.clip)
        loss = loss_t.item()
        dt = time.perf_counter() - t0
        if step >= args.warmup_steps:
            times.append(dt)
    if not math.isfinite(loss):
        sys.exit("torch_g2p: non-finite loss")
    return {"threads": threads, "ms_per_step": 1e3 * statistics.median(times),
            "ms_per_step_mean": 1e3 * statistics.mean(times),
            "ms_per_step_min": 1e3 * min(times), "steps": len(times),
            "last_train_loss": loss}, sum(p.numel() for p in model.parameters())


def thread_list(s):
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError("want a comma-separated list of counts >= 1, e.g. 1,2")
    return out


def pair(s):
    try:
        a, b = (float(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("want two numbers, e.g. 0.9,0.99")
    return a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--src-vocab", type=int, default=30)
    ap.add_argument("--tgt-vocab", type=int, default=87)
    ap.add_argument("--src-context", type=int, default=36)
    ap.add_argument("--tgt-context", type=int, default=36)
    ap.add_argument("--enc-layers", type=int, default=3)
    ap.add_argument("--dec-layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--mlp-dim", type=int, default=0, help="0 means 4·dim")
    ap.add_argument("--dropout", type=float, default=0.1,
                    help="attention-weight and embedding/residual dropout")
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--src-len", type=int, default=16,
                    help="padded source width S; lengths drawn in [S/2, S]")
    ap.add_argument("--tgt-len", type=int, default=16,
                    help="padded target width T; lengths drawn in [T/2, T]")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first")
    ap.add_argument("--threads", type=thread_list, default=[1, 2],
                    help="thread counts to time, comma-separated")
    ap.add_argument("--lr", type=float, default=1e-3, help="constant learning rate")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--betas", type=pair, default=(0.9, 0.99), help="AdamW β1,β2")
    ap.add_argument("--eps", type=float, default=1e-8, help="AdamW eps")
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clip")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="FILE", help="also write the result as JSON ('-': stdout, "
                    "the table then goes to stderr)")
    args = ap.parse_args()
    if not (1 <= args.src_len <= args.src_context and 1 <= args.tgt_len <= args.tgt_context):
        sys.exit("torch_g2p: need 1 <= --src-len <= --src-context, 1 <= --tgt-len <= "
                 "--tgt-context")
    if args.steps < 1:
        sys.exit("torch_g2p: --steps must be >= 1")
    log = sys.stderr if args.json == "-" else sys.stdout

    gen = torch.Generator().manual_seed(args.seed)
    batches = [draw_batch(gen, args.batch, args.src_len, args.tgt_len, args.src_vocab,
                          args.tgt_vocab) for _ in range(args.warmup_steps + args.steps)]
    blas = find_openblas()
    runs, n_params = [], 0
    for t in args.threads:
        r, n_params = time_threads(t, args, batches, blas)
        runs.append(r)
    best = min(runs, key=lambda r: r["ms_per_step"])
    src_tok = sum(b[1].sum().item() for b in batches) / len(batches)
    tgt_tok = sum((b[3] != -1).sum().item() for b in batches) / len(batches)

    result = {"ms_per_step": best["ms_per_step"], "best_threads": best["threads"],
              "by_threads": runs, "params": n_params,
              "config": {"src_vocab": args.src_vocab, "tgt_vocab": args.tgt_vocab,
                         "src_context": args.src_context, "tgt_context": args.tgt_context,
                         "enc_layers": args.enc_layers, "dec_layers": args.dec_layers,
                         "heads": args.heads, "dim": args.dim,
                         "mlp_dim": args.mlp_dim or 4 * args.dim, "untied": False,
                         "attn_dropout": args.dropout, "resid_dropout": args.dropout,
                         "label_smoothing": args.label_smoothing, "batch": args.batch,
                         "src_len": args.src_len, "tgt_len": args.tgt_len,
                         "mean_src_tokens": src_tok, "mean_scored_targets": tgt_tok,
                         "lr": args.lr, "weight_decay": args.weight_decay,
                         "betas": list(args.betas), "eps": args.eps, "clip": args.clip,
                         "warmup_steps": args.warmup_steps, "seed": args.seed},
              "torch": torch.__version__,
              "openblas": blas[0] if blas else None,
              "openblas_core": blas[1].openblas_get_corename().decode() if blas else None}

    c = result["config"]
    print("torch_g2p: Le %d Ld %d H %d C %d F %d, Vs %d Vt %d, B %d, S %d T %d (mean %.1f "
          "source tokens, %.1f scored targets per batch), dropout %g, ε %g, %.2f M params, "
          "torch %s%s" % (c["enc_layers"], c["dec_layers"], c["heads"], c["dim"], c["mlp_dim"],
                          c["src_vocab"], c["tgt_vocab"], c["batch"], c["src_len"],
                          c["tgt_len"], src_tok, tgt_tok, args.dropout, args.label_smoothing,
                          n_params / 1e6, torch.__version__,
                          ", OpenBLAS %s" % result["openblas_core"] if blas else ""), file=log)
    print("  threads  ms/step median    mean     min  steps  last loss", file=log)
    for r in runs:
        print("  %7d  %14.2f  %6.2f  %6.2f  %5d  %9.4f" % (
            r["threads"], r["ms_per_step"], r["ms_per_step_mean"], r["ms_per_step_min"],
            r["steps"], r["last_train_loss"]), file=log)
    print("  best: %d thread%s, %.2f ms/step" % (best["threads"], "" if best["threads"] == 1
                                                 else "s", best["ms_per_step"]), file=log)
    if args.json == "-":
        print(json.dumps(result))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
