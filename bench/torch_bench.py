#!/usr/bin/python3
"""torch_bench.py — the seed's PyTorch MultiHeadAttention, timed like mha-bench.

One step = forward in training mode (self-attention: x_context = x, causal mask
[1,1,S,S] filled with -1e9 where 0, dropout p) + out.backward(dout), float32,
input x with requires_grad (so dL/dx is computed, as mha-bench's dx_query).
Gradients accumulate across steps, as in mha-bench. Median ms over the steps
after warm-up.

Threads: for each thread count t, torch.set_num_threads(t) AND OpenBLAS (which
torch 1.13 on Debian calls for every float32 GEMM, through libblas.so.3 ->
openblas-pthread) set to t threads with openblas_set_num_threads() through
ctypes, so torch is not oversubscribed by OpenBLAS's own thread pool. Pass
--openblas-threads default to leave OpenBLAS at its own count instead.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are inherited unchanged from the
environment (on this machine: Haswell / 512, set by the workplace), so torch and
mha-bench run the same OpenBLAS kernels; the JSON records the core name.

Memory: with glibc's default malloc, torch's large temporaries (scores, weights,
their gradients: B·H·S² floats each) are mmap'd and freed every step, and every
fresh page faults on first touch — costly in this VM. bench/run.sh therefore also
runs a "malloc-tuned" pass (MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2^40: the
heap is reused, nothing is returned to the kernel) and reports both.
"""
import argparse
import ctypes
import ctypes.util
import json
import math
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from seed_mha import MultiHeadAttention  # noqa: E402  the seed's module, tools/seed_mha.py

SEED_SOURCE = "tools/seed_mha.py"


SLOW_STEP = 0.25  # seconds
DEFAULT_CASES = [(2, 10, 64, 8), (16, 64, 128, 4), (8, 256, 256, 8), (1, 2048, 256, 4)]


def find_openblas():
    """The libopenblas already mapped into this process by torch (via libblas.so.3),
    found in /proc/self/maps; None if torch does not use OpenBLAS."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()
                     and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return p, lib
        except (OSError, AttributeError):
            continue
    return None


def set_threads(t, blas, mode):
    torch.set_num_threads(t)
    if blas is not None and mode == "match":
        blas[1].openblas_set_num_threads(t)


def time_case(B, S, D, H, p, args):
    torch.manual_seed(args.seed)
    m = MultiHeadAttention(D, H, dropout_p=p).float()
    m.train()
    x = torch.empty(B, S, D).uniform_(-1, 1).requires_grad_(True)
    dout = torch.empty(B, S, D).uniform_(-1.0 / D, 1.0 / D)
    mask = torch.tril(torch.ones(S, S, dtype=torch.uint8)).view(1, 1, S, S)

    def step():
        out = m(x, x, mask)
        out.backward(dout)

    # warm-up; a step slower than SLOW_STEP s is warm after one (keeps the run short)
    t_step = 0.0
    for _ in range(max(1, args.warmup)):
        t0 = time.perf_counter()
        step()
        t_step = time.perf_counter() - t0
        if t_step > SLOW_STEP:
            break
    reps = args.reps
    if reps <= 0:
        floor = 3 if t_step > SLOW_STEP else 5
        reps = min(args.max_reps, max(floor, math.ceil(args.min_time / max(t_step, 1e-9))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    if not torch.isfinite(x.grad).all():
        raise RuntimeError("non-finite gradient")
    return 1e3 * statistics.median(times), reps


def parse_cases(s):
    cases = []
    for tok in s.split(","):
        if "x" in tok:
            B, S, D, H = (int(v) for v in tok.split("x"))
            cases.append((B, S, D, H))
        else:
            cases.append(DEFAULT_CASES[int(tok) - 1])
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="1,2,3,4",
                    help="comma list: index 1..4 or BxSxDxH (default 1,2,3,4)")
    ap.add_argument("--threads", default="1,0",
                    help="comma list of thread counts, 0 = all cores (default 1,0)")
    ap.add_argument("--dropout", default="0,0.1", help="comma list (default 0,0.1)")
    ap.add_argument("--reps", type=int, default=0,
                    help="timed steps; 0 = enough for --min-time (default 0)")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds (default 0.3)")
    ap.add_argument("--max-reps", type=int, default=1000, help="default 1000")
    ap.add_argument("--warmup", type=int, default=3, help="default 3")
    ap.add_argument("--seed", type=int, default=42, help="default 42")
    ap.add_argument("--openblas-threads", choices=["match", "default"], default="match",
                    help="match: OpenBLAS threads = torch threads (default); "
                         "default: leave OpenBLAS's own count")
    ap.add_argument("--json", help="write results to this file")
    args = ap.parse_args()

    cores = os.cpu_count() or 1
    blas = find_openblas()
    info = {
        "torch_version": torch.__version__,
        "seed_module": SEED_SOURCE,
        "openblas_library": blas[0] if blas else None,
        "openblas_corename": blas[1].openblas_get_corename().decode() if blas else None,
        "openblas_config": blas[1].openblas_get_config().decode() if blas else None,
        "openblas_default_threads": blas[1].openblas_get_num_threads() if blas else None,
        "openblas_threads_mode": args.openblas_threads,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        # glibc malloc tuning, if the caller set any (run.sh's "malloc-tuned" pass)
        "malloc_env": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
        "cores": cores,
    }
    print("torch %s, seed module: %s; BLAS: %s (core %s, OPENBLAS_CORETYPE=%s), "
          "OpenBLAS threads: %s" % (info["torch_version"], SEED_SOURCE,
                                    info["openblas_config"], info["openblas_corename"],
                                    info["OPENBLAS_CORETYPE"], args.openblas_threads))
    print("%-16s %3s %4s %5s %10s" % ("B,S,D,H", "thr", "p", "reps", "ms"))
    threads = [int(t) or cores for t in args.threads.split(",")]
    dropouts = [float(p) for p in args.dropout.split(",")]
    records = []
    for (B, S, D, H) in parse_cases(args.cases):
        for p in dropouts:
            for t in threads:
                set_threads(t, blas, args.openblas_threads)
                ms, reps = time_case(B, S, D, H, p, args)
                records.append({"B": B, "S": S, "D": D, "H": H, "threads": t,
                                "dropout": p, "ms": ms, "reps": reps})
                print("%-16s %3d %4.2g %5d %10.4f" % ("%d,%d,%d,%d" % (B, S, D, H),
                                                       t, p, reps, ms), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"program": "torch_bench.py", "machine": info, "records": records},
                      f, indent=1)


if __name__ == "__main__":
    main()
