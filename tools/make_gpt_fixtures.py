#!/usr/bin/python3
"""Write tests/fixtures/gpt_parity.safetensors for tests/test_gpt_parity.c.

Run from anywhere with the system Python (torch 1.13 + numpy on Debian 12):

    /usr/bin/python3 tools/make_gpt_fixtures.py [--out FILE]

The model is tools/gpt_torch.py's GPT (the model of include/mha_gpt.h) in float64 with
dropout 0. The output is deterministic; CI never needs torch (the file is committed):
rerun this script only when the configuration below changes.

What is computed (config CFG below; every float tensor float64, tokens/targets int64):
  1. parameters: drawn from torch.manual_seed(SEED) with scales that make every term
     matter (GPT-2's own init — biases 0, LayerNorm 1/0, std 0.02 — would leave bias and
     LayerNorm paths untested and the attention nearly uniform):
       wte, wpe ~ N(0, 0.5²); Linear weights ~ N(0, 1/fan_in); biases, LayerNorm biases
       ~ N(0, 0.1²); LayerNorm weights ~ 1 + N(0, 0.1²)
  2. case "full" (T = context): tokens, targets [B,T] (two targets are −1, not scored),
     forward → logits [B,T,V], loss (scalar), backward → grad.<name> for every parameter;
  3. case "short" (T = SHORT_T < context): short.tokens, short.targets, short.logits,
     short.loss, short.grad.<name> — same parameters, gradients zeroed first;
  4. 5 training steps from the parameters of 1: step k (k = 0..4) zeroes the gradients,
     runs forward/backward on its own batch step<k>.tokens / step<k>.targets (step 2 has
     T = SHORT_T, the others T = context), clips the global gradient norm at CLIP
     (torch.nn.utils.clip_grad_norm_ over all parameters), sets lr = lr_at(k) and takes
     one torch.optim.AdamW step; two groups: weight decay WD on decaying tensors
     (gpt_torch.decays: the 2-D Linear weights), 0 on the rest. Stored: step<k>.loss and
     step<k>.grad_norm (before clipping), and after5.<name> for every parameter.

File layout (safetensors, written by hand below; train/common/st.h's reader accepts it):
  8-byte little-endian header size N (a multiple of 8), a JSON header padded with spaces,
  then the data; tensors in header order, their ranges tiling the data section.
  "__metadata__" (all values strings):
     format        "mha-gpt-parity 1"
     vocab context layers heads dim mlp_dim ln_eps batch   the model (mha_gpt_config)
     seq_len short_seq_len                                  T of "full" and "short"
     param_names   the parameter names in the C model's order, comma-separated
     steps base_lr min_lr warmup total_steps               the mha_lr_schedule
     lr0 .. lr4    the learning rate of each step (%.17g)
     beta1 beta2 eps weight_decay clip                      AdamW and clipping
     step_seq_len  T of each step, comma-separated
     seed          the seed drawn from (see "Seed" below)
  tensors (state_dict names, [out, in] for Linear weights):
     <name>, grad.<name>, short.grad.<name>, after5.<name>        F64, the parameter's shape
     tokens targets [B,T] I64; logits [B,T,V] F64; loss [] F64
     short.tokens short.targets [B,SHORT_T] I64; short.logits; short.loss
     step<k>.tokens step<k>.targets [B,T_k] I64; step<k>.loss, step<k>.grad_norm [] F64

Errors are measured against each tensor's largest |element|, except for the gradient
of attn.w_k.bias, which is 0 in exact arithmetic (adding q·b_k to every score of a row
leaves the softmax unchanged): its reference is rounding noise, measured against the
largest |element| of the same block's attn.w_k.weight gradient. After 5 steps w_k.bias
cannot be compared across precisions at all: AdamW divides that noise by √v + eps and
moves the element by up to ~lr per step in float32 (not in float64).

Seed: every draw is rerun in float32 from the same parameters. A draw where some
element's step-0 gradient is comparable to eps = 1e-8 is ill-conditioned (AdamW's update
then depends on the gradient's last bits, so no float32 implementation follows float64
there), so the script takes the first seed from SEED whose float32 replay in torch stays
10x inside test_gpt_parity.c's float32 tolerances (1e-5 for logits, losses and gradients;
1e-6 for the parameters after 5 steps), prints those margins, and records the seed in
the metadata ("seed").
"""
import argparse
import copy
import json
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt_torch  # noqa: E402

CFG = dict(vocab=11, context=8, layers=2, heads=2, dim=16, mlp_dim=64)
BATCH = 3
SHORT_T = 5
SEED = 20261130
STEPS = 5
BASE_LR, MIN_LR, WARMUP, TOTAL = 1e-2, 1e-3, 2, 5
BETAS, EPS, WD, CLIP = (0.9, 0.99), 1e-8, 0.1, 1.0
STEP_T = [8, 8, SHORT_T, 8, 8]
F32_MARGIN, F32_AFTER5_MARGIN = 1e-5, 1e-6  # 10x inside test_gpt_parity.c's float32 checks
OUT = os.path.join(HERE, "..", "tests", "fixtures", "gpt_parity.safetensors")


def c_order_names(model):
    """Parameter names in the order of mha_gpt.h: wte, wpe, each block's 16, ln_f."""
    names = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["wte.weight", "wpe.weight"] and names[-2:] == ["ln_f.weight",
                                                                         "ln_f.bias"]
    block = ["ln1.weight", "ln1.bias"]
    for w in ("w_q", "w_k", "w_v", "w_o"):
        block += ["attn.%s.weight" % w, "attn.%s.bias" % w]
    block += ["ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight",
              "mlp.proj.bias"]
    order = ["wte.weight", "wpe.weight"]
    for l in range(model.layers):
        order += ["blocks.%d.%s" % (l, b) for b in block]
    order += ["ln_f.weight", "ln_f.bias"]
    assert sorted(order) == sorted(names) and len(order) == len(names)
    assert list(model.state_dict().keys()) == names  # no buffers in the state_dict
    return order


@torch.no_grad()
def draw_parameters(model):
    for name, p in model.named_parameters():
        kind = gpt_torch.param_kind(name)
        if kind == "embedding":
            p.normal_(0.0, 0.5)
        elif kind in ("weight", "resid_weight"):
            p.normal_(0.0, 1.0 / p.shape[1] ** 0.5)
        elif kind == "norm_weight":
            p.normal_(1.0, 0.1)
        else:
            p.normal_(0.0, 0.1)


def draw_batch(gen, B, T, V, holes=()):
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    for b, t in holes:
        targets[b, t] = -1
    return tokens, targets


def forward_backward(model, tokens, targets):
    model.zero_grad(set_to_none=False)
    logits, loss = model(tokens, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach().clone(), loss.detach().clone(), grads


def run(model, batches):
    """Everything the fixture holds, computed with `model` (float64 or float32)."""
    out = {}
    full, short = batches["full"], batches["short"]
    out["logits"], out["loss"], g = forward_backward(model, *full)
    out.update({"grad." + n: v for n, v in g.items()})
    out["short.logits"], out["short.loss"], g = forward_backward(model, *short)
    out.update({"short.grad." + n: v for n, v in g.items()})
    trained = copy.deepcopy(model)
    opt = gpt_torch.make_optimizer(trained, BASE_LR, WD, betas=BETAS, eps=EPS)
    for k in range(STEPS):
        lr = gpt_torch.lr_at(k, BASE_LR, MIN_LR, WARMUP, TOTAL)
        loss, norm = gpt_torch.train_step(trained, opt, *batches["step%d" % k], lr, CLIP)
        out["step%d.loss" % k] = loss.detach().clone()
        out["step%d.grad_norm" % k] = norm.detach().clone()
    out.update({"after5." + n: p.detach().clone() for n, p in trained.named_parameters()})
    return out


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, numpy array) in file order; metadata: dict of strings."""
    header = {"__metadata__": metadata}
    offset, blobs = 0, []
    for name, a in tensors:
        a = np.array(a, order="C")  # (ascontiguousarray would make a scalar [1])
        dtype = {np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}[a.dtype]
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return 8 + len(h) + offset


def zero_in_exact_arithmetic(name):
    """attn.w_k.bias: adding q·b_k to every score of a row leaves its softmax unchanged,
    so dL/db_k = Σ_t dK[t] = 0 exactly; what a backward returns is rounding noise."""
    return name.endswith("attn.w_k.bias")


def scale_of(key, ref):
    """The magnitude a tensor's error is measured against: its largest |element|, or for
    a gradient that is 0 in exact arithmetic, the largest |element| of the gradient of
    the same projection's weight (the size of the terms whose sum cancels)."""
    if zero_in_exact_arithmetic(key) and "grad." in key:
        key = key[: -len("bias")] + "weight"
    return ref[key].abs().max().item()


def draw(seed):
    torch.manual_seed(seed)
    model = gpt_torch.GPT(**CFG).double()
    draw_parameters(model)
    model.eval()  # dropout is 0 anyway
    gen = torch.Generator().manual_seed(seed + 1)
    B, T, V = BATCH, CFG["context"], CFG["vocab"]
    batches = {"full": draw_batch(gen, B, T, V, holes=[(0, 2), (2, T - 1)]),
               "short": draw_batch(gen, B, SHORT_T, V, holes=[(1, 0)])}
    for k in range(STEPS):
        batches["step%d" % k] = draw_batch(gen, B, STEP_T[k], V,
                                           holes=[(k % B, k % STEP_T[k])])
    return model, batches


def float32_margins(ref, f32):
    """max |f32 − ref| / scale per group of keys, and the worst key of each group."""
    worst = {}
    for key, v in ref.items():
        if key.startswith("after5.") and zero_in_exact_arithmetic(key):
            continue  # moved by amplified rounding noise in float32: no precision matches
        group = key.split(".")[0]
        if group == "short":
            group = "short." + key.split(".")[1]
        group = "step<k>" if group.startswith("step") else group
        err = (f32[key].double() - v).abs().max().item() / max(scale_of(key, ref), 1e-300)
        if err >= worst.get(group, (-1.0, ""))[0]:
            worst[group] = (err, key)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help="output file (default %(default)s)")
    args = ap.parse_args()

    # Conditioning: an element whose step-0 gradient is comparable to eps (1e-8) makes
    # AdamW's update depend on the gradient's last bits, so float32 cannot follow float64
    # there whatever the implementation. Take the first seed whose float32 replay in
    # torch stays 10x inside the C test's tolerances (after 5 steps 1e-6, the rest 1e-5).
    for seed in range(SEED, SEED + 100):
        model, batches = draw(seed)
        ref = run(model, batches)
        f32 = run(copy.deepcopy(model).float(), batches)
        worst = float32_margins(ref, f32)
        ok = all(err <= (F32_AFTER5_MARGIN if g == "after5" else F32_MARGIN)
                 for g, (err, _) in worst.items())
        print("seed %d: float32 replay %s" % (seed, "within margins" if ok else
              "outside margins (%s), next seed" % ", ".join(
                  "%s %.1e" % (k, e) for g, (e, k) in worst.items()
                  if e > (F32_AFTER5_MARGIN if g == "after5" else F32_MARGIN))))
        if ok:
            break
    else:
        sys.exit("make_gpt_fixtures: no seed within margins")
    for group, (err, key) in sorted(worst.items()):
        print("  float32 vs float64 %-12s max |diff| / scale = %.2e  (%s)" % (group, err, key))

    names = c_order_names(model)
    params = dict(model.named_parameters())
    B, T = BATCH, CFG["context"]
    tensors = []
    for n in names:
        tensors.append((n, params[n].detach().numpy()))
    for key, (tok, tgt) in batches.items():
        prefix = "" if key == "full" else key + "."
        tensors.append((prefix + "tokens", tok.numpy().astype("<i8")))
        tensors.append((prefix + "targets", tgt.numpy().astype("<i8")))
    for key in ["logits", "loss", "short.logits", "short.loss"]:
        tensors.append((key, ref[key].numpy()))
    for prefix in ("grad.", "short.grad.", "after5."):
        for n in names:
            tensors.append((prefix + n, ref[prefix + n].numpy()))
    for k in range(STEPS):
        tensors.append(("step%d.loss" % k, ref["step%d.loss" % k].numpy()))
        tensors.append(("step%d.grad_norm" % k, ref["step%d.grad_norm" % k].numpy()))

    meta = {"format": "mha-gpt-parity 1", "batch": str(B), "seq_len": str(T),
            "short_seq_len": str(SHORT_T), "ln_eps": "%.17g" % gpt_torch.LN_EPS,
            "param_names": ",".join(names), "steps": str(STEPS),
            "base_lr": "%.17g" % BASE_LR, "min_lr": "%.17g" % MIN_LR, "warmup": str(WARMUP),
            "total_steps": str(TOTAL), "beta1": "%.17g" % BETAS[0], "beta2": "%.17g" % BETAS[1],
            "eps": "%.17g" % EPS, "weight_decay": "%.17g" % WD, "clip": "%.17g" % CLIP,
            "step_seq_len": ",".join(str(t) for t in STEP_T), "seed": str(seed),
            "generator": "tools/make_gpt_fixtures.py (torch %s)" % torch.__version__}
    meta.update({k: str(v) for k, v in CFG.items()})
    for k in range(STEPS):
        meta["lr%d" % k] = "%.17g" % gpt_torch.lr_at(k, BASE_LR, MIN_LR, WARMUP, TOTAL)
    size = write_safetensors(args.out, tensors, meta)
    print("wrote %s: %d tensors, %d bytes; loss %.6f, short loss %.6f, losses of the 5 steps %s"
          % (os.path.relpath(args.out), len(tensors), size, ref["loss"].item(),
             ref["short.loss"].item(),
             " ".join("%.6f" % ref["step%d.loss" % k].item() for k in range(STEPS))))


if __name__ == "__main__":
    main()
