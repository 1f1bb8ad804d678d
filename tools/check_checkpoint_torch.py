#!/usr/bin/python3
"""Development check: an mha-train checkpoint loads into the seed's PyTorch module
(tools/seed_mha.py) and gives the same outputs as the C model.

    /usr/bin/python3 tools/check_checkpoint_torch.py [RUN_DIR]      (default runs/reverse)

RUN_DIR is an mha-train output directory: checkpoint.safetensors (written at the end of
the run) and example.json (held-out example 0 with the C model's activations, written
from the same final weights). The script
  1. reads the safetensors file with nothing but the standard library and torch
     (8-byte little-endian header size, JSON header, raw little-endian data);
  2. rebuilds x_0 = tok_emb[tokens] + pos_emb (and, for lookup, the embedded context
     tok_emb[key] + val_emb[value]) from the checkpoint;
  3. for every layer l, loads layers.l.w_q.weight ... layers.l.w_o.bias into a fresh
     seed MultiHeadAttention with load_state_dict(strict=True) and computes
     x_{l+1} = x_l + MHA_l(x_l, ctx or None, causal mask for copy), feeding it the C
     model's own x_l so that each layer is compared on its exact input;
  4. computes the read-out logits from x_L;
and compares each with the C model's values from example.json. All in float64 from the
float32 weights; the C model runs in float32, so agreement is to ~1e-5 relative.
Exit status 0 when every comparison is within tolerance, 1 otherwise.
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_mha  # noqa: E402  (the seed's module, copied verbatim)

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64,
          "U64": torch.int64, "U8": torch.uint8,  # U64 read as int64 bits (unused here)
          "BF16": torch.bfloat16, "F16": torch.float16, "I32": torch.int32}


def load_safetensors(path):
    """{name: tensor}, {metadata} of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=DTYPES[info["dtype"]]) if e > b else \
            torch.zeros(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out, meta


def main():
    run_dir = sys.argv[1] if len(sys.argv) > 1 else "runs/reverse"
    tensors, meta = load_safetensors(os.path.join(run_dir, "checkpoint.safetensors"))
    with open(os.path.join(run_dir, "example.json")) as f:
        ex = json.load(f)
    if meta.get("format") != "mha-train/1":
        sys.exit("not an mha-train checkpoint")
    D, H, L = int(meta["model-dim"]), int(meta["heads"]), int(meta["layers"])
    f64 = {k: v.to(torch.float64) for k, v in tensors.items() if v.dtype == torch.float32}
    tokens = torch.tensor(ex["tokens"])
    S = tokens.numel()
    worst = 0.0
    ok = True

    def compare(what, mine, theirs):
        nonlocal worst, ok
        theirs = torch.tensor(theirs, dtype=torch.float64)
        err = (mine - theirs).abs().max().item()
        scale = max(1.0, theirs.abs().max().item())
        good = err <= 1e-4 * scale
        ok = ok and good
        worst = max(worst, err / scale)
        print(f"  {what:<34} max |torch - C| = {err:.3e}  {'ok' if good else 'MISMATCH'}")

    print(f"{run_dir}: task {ex['task']}, D {D}, H {H}, L {L}, step {ex['step']}")
    x0 = f64["tok_emb.weight"][tokens] + f64["pos_emb.weight"][:S]
    compare("embeddings x_0", x0, ex["x"][0])
    ctx = None
    if "ctx" in ex:
        pairs = torch.tensor(ex["ctx"])
        ctx = f64["tok_emb.weight"][pairs[:, 0]] + f64["val_emb.weight"][pairs[:, 1]]
        compare("embedded context", ctx, ex["ctx_embedded"])
        ctx = torch.tensor(ex["ctx_embedded"], dtype=torch.float64).unsqueeze(0)
    mask = None
    if ex["causal"]:
        mask = torch.tril(torch.ones(S, S)).reshape(1, 1, S, S)
    for l in range(L):
        mod = seed_mha.MultiHeadAttention(D, H, dropout_p=0.0).to(torch.float64).eval()
        prefix = f"layers.{l}."
        sd = {k[len(prefix):]: v for k, v in f64.items() if k.startswith(prefix)}
        mod.load_state_dict(sd, strict=True)
        x_in = torch.tensor(ex["x"][l], dtype=torch.float64).unsqueeze(0)
        with torch.no_grad():
            y = x_in + mod(x_in, ctx, mask)
        compare(f"layer {l}: x + MultiHeadAttention(x)", y[0], ex["x"][l + 1])
    xL = torch.tensor(ex["x"][L], dtype=torch.float64)
    logits = xL @ f64["readout.weight"].T + f64["readout.bias"]
    compare("read-out logits", logits, ex["logits"])
    pred = logits.argmax(-1)
    tgt = torch.tensor(ex["targets"])
    scored = tgt >= 0
    acc = (pred[scored] == tgt[scored]).double().mean().item()
    print(f"  torch predictions on this example: {100 * acc:.1f}% of scored tokens right")
    print("OK: the checkpoint's weights in the seed's PyTorch module reproduce the C model"
          if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
