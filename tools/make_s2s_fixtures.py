#!/usr/bin/python3
"""Write tests/fixtures/s2s_parity.safetensors and s2s_parity_untied.safetensors, the
parity fixtures of the C encoder–decoder.

Run from anywhere with the system Python (torch 1.13 + numpy on Debian 12):

    /usr/bin/python3 tools/make_s2s_fixtures.py [--out-dir DIR]

The model is tools/s2s_torch.py's Seq2Seq in float64 with dropout 0. The output is
deterministic (a rerun writes bit-identical files); CI never needs torch (the files are
committed): rerun this script only when the configuration below changes.

What is computed (config CFG below, batch B = 3; floats F64, ids I64):
  1. parameters: drawn from torch.manual_seed(seed) in named_parameters() order, with
     scales that make every term matter (GPT-2's own init — biases 0, LayerNorm 1/0,
     std 0.02 — would leave the bias and LayerNorm paths untested and the attention
     nearly uniform), as tools/make_gpt_fixtures.py does:
       embeddings ~ N(0, 0.5²); Linear weights (out.weight too) ~ N(0, 1/fan_in);
       biases, LayerNorm biases ~ N(0, 0.1²); LayerNorm weights ~ 1 + N(0, 0.1²).
     The untied file's model is drawn from the same seed: its parameters are the tied
     file's, plus out.weight (drawn last).
  2. per case k: ids k.src, k.src_len, k.tgt_in, k.targets; forward → k.memory (after
     enc_ln), k.logits, k.loss; backward → k.grad.<name> for every parameter (gradients
     zeroed before each case). Ids: 0 = padding (source positions >= src_len, and the
     target input after the target's length), 1 = BOS; source tokens are drawn from
     [1, Vs) so that id 0 occurs only at padding; target tokens y from [2, Vt);
     tgt_in = [BOS, y_0, …, y_{n−2}, 0 …], targets = [y_0, …, y_{n−1}, −1 …] for a row
     of target length n.
       case "a": S 6, T 5 (source longer than the target), src_len [6,3,1], target
                 lengths [5,4,2], and targets[0,2] = −1 as well; label_smoothing 0.1
       case "b": S 3, T 5 (source shorter than the target), src_len [3,2,3], target
                 lengths [5,4,5] (every target scored except row 1's last);
                 label_smoothing 0
     s2s_parity.safetensors (tied) holds cases a and b; s2s_parity_untied.safetensors
     holds case a only (the same ids).

File layout (safetensors, written by make_gpt_fixtures.write_safetensors: 8-byte
little-endian header size N, a multiple of 8; the JSON header padded with spaces; the
tensors in header order tiling the data section):
  "__metadata__" (all values strings):
     format         "mha-s2s-parity 1"
     src_vocab tgt_vocab src_context tgt_context enc_layers dec_layers heads dim mlp_dim
     ln_eps batch   the model and the batch size
     untied         "0" (logits · tgt_embᵀ) or "1" (logits · out.weightᵀ)
     cases          "a,b" (tied) or "a" (untied)
     <k>.label_smoothing  ε of case k (%.17g); <k>.src_seq_len, <k>.tgt_seq_len  S, T
     param_names    the parameter names in the C model's order, comma-separated
     seed, generator
  tensors, in this order:
     <name>                                 F64, every parameter, in param_names order
     then for each case k:
     k.src [B,S] I64, k.src_len [B] I64, k.tgt_in [B,T] I64, k.targets [B,T] I64,
     k.memory [B,S,C] F64, k.logits [B,T,Vt] F64, k.loss [] F64,
     k.grad.<name> F64 for every parameter, in param_names order
  k.memory holds the padded source rows too (their queries attend to the valid keys);
  nothing downstream reads them, so a C model may leave them out of its comparison.

The loss is F.cross_entropy(logits.view(−1,Vt), targets.view(−1), ignore_index=−1,
label_smoothing=ε) = the mean over scored positions of (1−ε)(−log p[y]) + (ε/Vt)Σ_c(−log p[c])
(checked below against that formula). As in the GPT fixture, the gradient of every
attention's w_k.bias (attn, self_attn, cross_attn) is 0 in exact arithmetic — adding q·b_k
to all the scores of a row leaves its softmax unchanged, masked scores included — so its
reference is rounding noise: measure it against the same attention's w_k.weight gradient.

Self-checks before writing (the script fails if any does not hold):
  - named_parameters() and state_dict() order = s2s_torch.param_names (the C order);
  - the loss equals the label-smoothing formula above (rel 1e-13);
  - gradients: central finite differences in float64 for the largest-|grad| element of
    several tensors on every path, and along one random direction over all parameters,
    rel err < 1e-6;
  - padding: d loss / d xs0 is exactly 0 at every padded source position (and not at the
    others), the gradient of src_emb row 0 (used only at padding) is exactly 0, and
    changing the padded source ids leaves memory's valid rows, the logits and the loss
    bit-identical;
  - the float32 replay in torch is 10x inside a 1e-4 tolerance (1e-5 of each tensor's
    scale): the script takes the first seed from SEED for which it is, and records it;
  - the written files read back (s2s_torch.load_safetensors) to the same tensors, and a
    model loaded from them (s2s_torch.load_state) reproduces the losses.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s2s_torch  # noqa: E402
from make_gpt_fixtures import scale_of, write_safetensors  # noqa: E402

CFG = dict(src_vocab=7, tgt_vocab=9, src_context=6, tgt_context=5, enc_layers=2,
           dec_layers=2, heads=2, dim=8, mlp_dim=12)
LN_EPS = 1e-5
BATCH = 3
SEED = 20261201
# name: (S, T, src_len, target lengths, extra unscored (b, t), label_smoothing)
CASES = {"a": (6, 5, [6, 3, 1], [5, 4, 2], [(0, 2)], 0.1),
         "b": (3, 5, [3, 2, 3], [5, 4, 5], [], 0.0)}
UNTIED_CASES = ["a"]
F32_MARGIN = 1e-5   # 10x inside a float32 tolerance of 1e-4
FD_STEP, FD_RTOL = 1e-5, 1e-6
FD_TENSORS = ["src_emb.weight", "src_pos.weight", "encoder.0.attn.w_v.weight",
              "encoder.1.ln2.weight", "enc_ln.bias", "tgt_emb.weight",
              "decoder.0.self_attn.w_q.bias", "decoder.1.cross_attn.w_k.weight",
              "decoder.1.mlp.fc.bias", "dec_ln.weight"]
OUT_DIR = os.path.join(HERE, "..", "tests", "fixtures")
FILES = {False: "s2s_parity.safetensors", True: "s2s_parity_untied.safetensors"}


def c_order_names(model):
    names = [n for n, _ in model.named_parameters()]
    order = s2s_torch.param_names(model.enc_layers, model.dec_layers, model.untied)
    assert names == order, "named_parameters() is not in the C order"
    assert list(model.state_dict().keys()) == order  # no buffers in the state_dict
    return order


@torch.no_grad()
def draw_parameters(model):
    for name, p in model.named_parameters():
        kind = s2s_torch.param_kind(name)
        if kind == "embedding":
            p.normal_(0.0, 0.5)
        elif kind in ("weight", "resid_weight"):
            p.normal_(0.0, 1.0 / p.shape[1] ** 0.5)
        elif kind == "norm_weight":
            p.normal_(1.0, 0.1)
        else:
            p.normal_(0.0, 0.1)


def draw_case(gen, S, T, src_len, tgt_len, holes):
    B, Vs, Vt = BATCH, CFG["src_vocab"], CFG["tgt_vocab"]
    src = torch.randint(1, Vs, (B, S), generator=gen)
    y = torch.randint(2, Vt, (B, T), generator=gen)
    tgt_in = torch.cat([torch.full((B, 1), s2s_torch.BOS_ID, dtype=torch.int64), y[:, :-1]], 1)
    targets = y.clone()
    for b in range(B):
        src[b, src_len[b]:] = s2s_torch.PAD_ID
        tgt_in[b, tgt_len[b]:] = s2s_torch.PAD_ID
        targets[b, tgt_len[b]:] = -1
    for b, t in holes:
        targets[b, t] = -1
    return dict(src=src, src_len=torch.tensor(src_len, dtype=torch.int64), tgt_in=tgt_in,
                targets=targets)


def draw(seed, untied):
    model = s2s_torch.Seq2Seq(**CFG, ln_eps=LN_EPS, untied=untied).double()
    torch.manual_seed(seed)  # after the constructor's own init, so tied and untied share
    draw_parameters(model)
    model.eval()  # dropout is 0 anyway
    gen = torch.Generator().manual_seed(seed + 1)
    cases = {}
    for k, (S, T, src_len, tgt_len, holes, eps) in CASES.items():
        cases[k] = draw_case(gen, S, T, src_len, tgt_len, holes)
        cases[k]["label_smoothing"] = eps
    if untied:
        cases = {k: cases[k] for k in UNTIED_CASES}
    return model, cases


def loss_of(model, c):
    mem = model.encode(c["src"], c["src_len"])
    logits = model.decode(c["tgt_in"], mem, c["src_len"])
    return mem, logits, model.loss(logits, c["targets"], c["label_smoothing"])


def run(model, cases):
    """Everything the fixture holds, computed with `model` (float64 or float32)."""
    out = {}
    for k, c in cases.items():
        model.zero_grad(set_to_none=False)
        mem, logits, loss = loss_of(model, c)
        loss.backward()
        out[k + ".memory"], out[k + ".logits"] = mem.detach().clone(), logits.detach().clone()
        out[k + ".loss"] = loss.detach().clone()
        out.update({"%s.grad.%s" % (k, n): p.grad.detach().clone()
                    for n, p in model.named_parameters()})
    model.zero_grad(set_to_none=False)
    return out


def float32_margins(ref, f32):
    """max |f32 − ref| / scale per kind of tensor (memory, logits, loss, grad)."""
    worst = {}
    for key, v in ref.items():
        group = key.split(".")[1]
        err = (f32[key].double() - v).abs().max().item() / max(scale_of(key, ref), 1e-300)
        if err >= worst.get(group, (-1.0, ""))[0]:
            worst[group] = (err, key)
    return worst


# ---- self-checks -------------------------------------------------------------------------

def check_loss_formula(model, c, loss):
    """D4 written out: mean over scored of (1−ε)(−log p[y]) + (ε/V)Σ_c(−log p[c])."""
    eps = c["label_smoothing"]
    with torch.no_grad():
        logp = torch.log_softmax(loss_of(model, c)[1], dim=-1).reshape(-1, CFG["tgt_vocab"])
        t = c["targets"].reshape(-1)
        keep = t != -1
        nll = -logp[keep].gather(1, t[keep].view(-1, 1)).squeeze(1)
        manual = ((1 - eps) * nll - eps * logp[keep].mean(1)).mean().item()
    err = abs(manual - loss) / abs(loss)
    assert err < 1e-13, "loss %.17g vs the label-smoothing formula %.17g" % (loss, manual)
    return err


@torch.no_grad()
def loss_at(model, c, p, idx, value):
    old = p[idx].item()
    p[idx] = value
    loss = loss_of(model, c)[2].item()
    p[idx] = old
    return loss


def check_finite_differences(model, k, c, ref):
    """Central differences for the largest-|grad| element of FD_TENSORS (+ out.weight),
    and the directional derivative along one random direction over all parameters."""
    params = dict(model.named_parameters())
    worst = (0.0, "")
    names = FD_TENSORS + (["out.weight"] if model.untied else [])
    for name in names:
        g = ref["%s.grad.%s" % (k, name)]
        idx = np.unravel_index(g.abs().argmax().item(), tuple(g.shape))
        p, x = params[name], params[name][idx].item()
        h = FD_STEP * max(1.0, abs(x))
        fd = (loss_at(model, c, p, idx, x + h) - loss_at(model, c, p, idx, x - h)) / (2 * h)
        err = abs(fd - g[idx].item()) / abs(g[idx].item())
        assert err < FD_RTOL, "case %s: d loss / d %s%s: autograd %.12g, FD %.12g, rel %.2e" % (
            k, name, list(idx), g[idx].item(), fd, err)
        worst = max(worst, (err, "%s%s" % (name, list(idx))))
    # along a random unit direction r (fixed seed): (L(θ + h r) − L(θ − h r)) / 2h vs g·r
    gen = torch.Generator().manual_seed(7)
    r = {n: torch.randn(p.shape, generator=gen, dtype=torch.float64) for n, p in params.items()}
    norm = sum((v * v).sum() for v in r.values()).sqrt()
    r = {n: v / norm for n, v in r.items()}
    dot = sum((ref["%s.grad.%s" % (k, n)] * r[n]).sum() for n in params).item()
    saved = {n: p.detach().clone() for n, p in params.items()}
    fd_l = []
    with torch.no_grad():
        for sign in (1.0, -1.0):
            for n, p in params.items():
                p.copy_(saved[n] + sign * FD_STEP * r[n])
            fd_l.append(loss_of(model, c)[2].item())
        for n, p in params.items():
            p.copy_(saved[n])
    fd = (fd_l[0] - fd_l[1]) / (2 * FD_STEP)
    err_dir = abs(fd - dot) / abs(dot)
    assert err_dir < FD_RTOL, "case %s: directional derivative autograd %.12g FD %.12g" % (
        k, dot, fd)
    return worst, err_dir


def check_padding(model, k, c, ref):
    """d loss / d xs0 is exactly 0 at the padded source positions (and not elsewhere);
    src_emb row 0 (only at padding) has gradient exactly 0; other ids at the padded
    positions change nothing, bit for bit."""
    src, src_len = c["src"], c["src_len"]
    S = src.shape[1]
    xs0 = model.embed_src(src).detach().requires_grad_(True)
    mem = model.encode_embedded(xs0, s2s_torch.source_mask(src_len, S))
    loss = model.loss(model.decode(c["tgt_in"], mem, src_len), c["targets"],
                      c["label_smoothing"])
    (g,) = torch.autograd.grad(loss, xs0)
    n_pad = 0
    for b in range(BATCH):
        n = src_len[b].item()
        assert torch.all(g[b, n:] == 0), "case %s row %d: d loss / d xs0 != 0 at padding" % (k, b)
        assert torch.all(g[b, :n].abs().sum(-1) > 0), "case %s row %d: a valid position " \
            "has no gradient" % (k, b)
        n_pad += S - n
    assert torch.all(ref[k + ".grad.src_emb.weight"][s2s_torch.PAD_ID] == 0)
    other = src.clone()
    for b in range(BATCH):
        other[b, src_len[b]:] = torch.arange(S - src_len[b].item()) % (CFG["src_vocab"] - 1) + 1
    with torch.no_grad():
        c2 = dict(c, src=other)
        mem2, logits2, loss2 = loss_of(model, c2)
    for b in range(BATCH):
        n = src_len[b].item()
        assert torch.equal(mem2[b, :n], ref[k + ".memory"][b, :n])
    assert torch.equal(logits2, ref[k + ".logits"]) and torch.equal(loss2, ref[k + ".loss"])
    return n_pad


def fixture_tensors(model, cases, ref):
    names = c_order_names(model)
    params = dict(model.named_parameters())
    tensors = [(n, params[n].detach().numpy()) for n in names]
    for k, c in cases.items():
        for key in ("src", "src_len", "tgt_in", "targets"):
            tensors.append(("%s.%s" % (k, key), c[key].numpy().astype("<i8")))
        for key in ("memory", "logits", "loss"):
            tensors.append(("%s.%s" % (k, key), ref["%s.%s" % (k, key)].numpy()))
        for n in names:
            tensors.append(("%s.grad.%s" % (k, n), ref["%s.grad.%s" % (k, n)].numpy()))
    return tensors


def metadata(model, cases, seed):
    meta = {"format": "mha-s2s-parity 1"}
    meta.update({k: str(v) for k, v in CFG.items()})
    meta.update({"ln_eps": "%.17g" % LN_EPS, "batch": str(BATCH),
                 "untied": "1" if model.untied else "0", "cases": ",".join(cases)})
    for k, c in cases.items():
        meta[k + ".label_smoothing"] = "%.17g" % c["label_smoothing"]
        meta[k + ".src_seq_len"] = str(c["src"].shape[1])
        meta[k + ".tgt_seq_len"] = str(c["tgt_in"].shape[1])
    meta["param_names"] = ",".join(c_order_names(model))
    meta["seed"] = str(seed)
    meta["generator"] = "tools/make_s2s_fixtures.py (torch %s)" % torch.__version__
    return meta


def check_read_back(path, tensors, untied, cases, ref):
    got, meta = s2s_torch.load_safetensors(path)
    assert list(got) == [n for n, _ in tensors]
    for n, a in tensors:
        assert got[n].dtype == a.dtype and got[n].shape == a.shape and np.array_equal(got[n], a)
    model = s2s_torch.Seq2Seq(**CFG, ln_eps=float(meta["ln_eps"]), untied=untied).double()
    s2s_torch.load_state(model, {n: got[n] for n in c_order_names(model)})
    for k, c in cases.items():
        with torch.no_grad():
            assert torch.equal(loss_of(model, c)[2], ref[k + ".loss"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=OUT_DIR, help="output directory (default %(default)s)")
    args = ap.parse_args()

    for seed in range(SEED, SEED + 100):
        drawn = {u: draw(seed, u) for u in (False, True)}
        refs, worst_all = {}, {}
        for u, (model, cases) in drawn.items():
            refs[u] = run(model, cases)
            worst_all[u] = float32_margins(refs[u], run(copy.deepcopy(model).float(), cases))
        bad = ["%s %s %.1e" % (FILES[u], key, e) for u, w in worst_all.items()
               for (e, key) in w.values() if e > F32_MARGIN]
        print("seed %d: float32 replay %s" % (seed, "outside margins (%s), next seed"
                                              % ", ".join(bad) if bad else "within margins"))
        if not bad:
            break
    else:
        sys.exit("make_s2s_fixtures: no seed within margins")
    shared = dict(drawn[False][0].named_parameters())
    for n, p in drawn[True][0].named_parameters():
        assert n == "out.weight" or torch.equal(p, shared[n]), n

    for u, (model, cases) in drawn.items():
        ref = refs[u]
        print("%s:" % FILES[u])
        for group, (err, key) in sorted(worst_all[u].items()):
            print("  float32 vs float64 %-7s max |diff| / scale = %.2e  (%s)" % (group, err, key))
        for k, c in cases.items():
            lerr = check_loss_formula(model, c, ref[k + ".loss"].item())
            (fd_err, fd_at), dir_err = check_finite_differences(model, k, c, ref)
            n_pad = check_padding(model, k, c, ref)
            print("  case %s: loss %.12f (ε %g; formula rel err %.1e); FD rel err max %.1e "
                  "(%s), random direction %.1e; d loss/d xs0 exactly 0 at all %d padded "
                  "positions, src_emb row 0 gradient 0, padding ids change nothing"
                  % (k, ref[k + ".loss"].item(), c["label_smoothing"], lerr, fd_err, fd_at,
                     dir_err, n_pad))
        tensors = fixture_tensors(model, cases, ref)
        path = os.path.join(args.out_dir, FILES[u])
        size = write_safetensors(path, tensors, metadata(model, cases, seed))
        check_read_back(path, tensors, u, cases, ref)
        print("wrote %s: %d tensors, %d bytes (read back: identical)"
              % (os.path.relpath(path), len(tensors), size))


if __name__ == "__main__":
    main()
