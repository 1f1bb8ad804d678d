#!/usr/bin/python3
"""Development check: a GPT saved by mha_gpt_save (include/mha_gpt.h) loads into the PyTorch
GPT of tools/gpt_torch.py with load_state_dict(strict=True), and gives the C model's loss.

    /usr/bin/python3 tools/load_gpt_in_torch.py FILE [--heads H]

FILE is a safetensors file of mha_gpt_save, F32, BF16 or F16 (examples/gpt_train_save
writes one: build/gpt_small.safetensors when ctest ran). The file is read with the standard
library and torch (tools/check_checkpoint_torch.py's reader: Debian has no
python3-safetensors).
The configuration comes from the tensors' shapes (V, C from wte.weight, context from
wpe.weight, L from the blocks, F from mlp.fc.weight) and the number of heads, which shapes
do not tell, from the metadata key "heads" or --heads. When the metadata holds
"eval_windows" (B windows of T + 1 token ids: ids separated by ",", windows by ";") and "eval_loss" (the C
model's mean cross-entropy on them), as examples/gpt_train_save.c writes, the loss is
recomputed in float32 and float64 and compared. Exit status 0 when the file loads and the
losses agree to 1e-5 relative (or there is nothing to compare), 1 otherwise.
Needs python3-torch (development only; CI never runs it).
"""
import argparse
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_checkpoint_torch import load_safetensors  # noqa: E402
from gpt_torch import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--heads", type=int, help="attention heads (default: metadata 'heads')")
    args = ap.parse_args()
    tensors, meta = load_safetensors(args.file)
    heads = args.heads or int(meta.get("heads", 0))
    if heads <= 0:
        sys.exit(f"{args.file}: no 'heads' in the metadata: give --heads")
    V, C = tensors["wte.weight"].shape
    context = tensors["wpe.weight"].shape[0]
    L = len({m.group(1) for k in tensors if (m := re.match(r"blocks\.(\d+)\.", k))})
    F_ = tensors["blocks.0.mlp.fc.weight"].shape[0]
    dtypes = sorted({str(t.dtype)[6:] for t in tensors.values()})
    model = GPT(V, context, L, heads, C, F_)
    model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()}, strict=True)
    model.eval()
    n_par = sum(p.numel() for p in model.parameters())
    print(f"{args.file}: {len(tensors)} tensors ({', '.join(dtypes)}), {n_par} parameters: "
          f"GPT(vocab {V}, context {context}, layers {L}, heads {heads}, dim {C}, mlp {F_}) "
          f"load_state_dict(strict=True) ok")
    if "eval_windows" not in meta or "eval_loss" not in meta:
        return 0
    w = torch.tensor([[int(x) for x in win.split(",")] for win in meta["eval_windows"].split(";")])
    c_loss = float(meta["eval_loss"])
    ok = True
    for dt in (torch.float32, torch.float64):
        with torch.no_grad():
            _, loss = model.to(dt)(w[:, :-1], w[:, 1:])
        rel = abs(loss.item() - c_loss) / abs(c_loss)
        ok = ok and rel <= 1e-5
        print(f"  torch {str(dt)[6:]} loss {loss.item():.9f}, C loss {c_loss:.9f}: "
              f"relative difference {rel:.2e} {'ok' if rel <= 1e-5 else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
