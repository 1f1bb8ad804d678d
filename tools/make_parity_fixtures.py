#!/usr/bin/python3
"""Write the PyTorch parity fixtures tests/fixtures/parity_*.txt for tests/test_parity.c.

Run from anywhere with the system Python (torch 1.13 + numpy on Debian 12):

    /usr/bin/python3 tools/make_parity_fixtures.py [--out DIR]

For each configuration of CONFIGS below the script builds the seed's own module
(tools/seed_mha.py, copied verbatim from the seed walk-through) in float64, sets its
8 parameters and the inputs from a fixed torch.Generator seed, runs the forward,
then out.backward(d_out) with a fixed random d_out, and writes what went in and
what came out. The C test feeds the same numbers to mhad_* / mha_* and compares.
CI never needs torch: the fixtures are committed; rerun this script only when a
configuration is added or changed (the output is deterministic).

Values drawn (all float64, uniform):
    weights and biases   U(-1/sqrt(D), 1/sqrt(D))   (nn.Linear's default range)
    x_query, x_context   U(-1, 1)
    d_out                U(-1, 1)

Dropout (configurations with training 1 and dropout_p > 0): the keep-mask is not
torch's; it is the library's normative dropout stream, computed here in Python:
    rng0 = PCG32 seeded with (initstate = seed, initseq = 2)
    weight (b, h, i, j) of the training forward with call index n is decided by
    r = next(advance(copy of rng0, pos)),  pos = n*2^40 + ((b*H + h)*Sq + i)*Sk + j
    (mod 2^64); dropped iff r < T, T = int(p * 4294967296.0); kept weights * 1/(1-p).
The seed module's nn.Dropout is replaced by a module that multiplies by
keep/(1 - p), so the math downstream is still the seed's. The Python PCG32 is
checked against the PCG authors' published outputs before anything is written.

File format (ASCII, line based; '#' lines and blank lines are comments):

    mha-parity-fixture 1                 first non-comment line, exactly
    config <key> <value>                 one per key, all keys below, any order
    tensor <name> <ndim> <d0> ... <dn-1> header, 1 <= ndim <= 4, every d >= 1,
    <values>                             then exactly d0*...*dn-1 numbers (%.17g),
                                         whitespace separated, over any number of
                                         lines, row-major (C order)
    end                                  last non-comment line, exactly

config keys:
    name            configuration name (also the file name parity_<name>.txt)
    batch seq_q seq_k model_dim num_heads      B, Sq, Sk, D, H
    self_attention  1: the C side passes x_context = NULL (torch: mha(x, None)),
                    seq_k == seq_q and there is no x_context tensor
    c_mask          how the C side expresses the mask torch used:
                    none | tensor | causal | causal+key_lengths
    training        0 or 1
    dropout_p       p (a double, %.17g)
    seed            mha_config.seed (decimal uint64; only the dropout stream uses it)
    call_index      the module's call counter n before the forward

tensors (names, shapes):
    w_q.weight [D,D]  w_q.bias [D]  ... w_o.weight [D,D]  w_o.bias [D]
                      state_dict names, [out, in] row-major as PyTorch stores them
    x_query [B,Sq,D]; x_context [B,Sk,D] (cross-attention only)
    mask [mb,mh,Sq,Sk]  0/1, exactly the tensor torch got (only when c_mask != none);
                        for c_mask causal / causal+key_lengths it is the expanded rule
    key_lengths [B]     (only for c_mask causal+key_lengths)
    keep [B,H,Sq,Sk]    0/1 dropout keep-mask of the stream above (only with dropout)
    d_out [B,Sq,D]      the upstream gradient given to backward
    attn [B,H,Sq,Sk]    expected softmax weights P (after mask, before dropout)
    out [B,Sq,D]        expected output
    grad.<param>        expected gradient of each of the 8 parameters
                        (grad.w_k.bias is zero in exact arithmetic: its values are
                        float64 roundoff, and tests/test_parity.c treats it so)
    grad.x_query [B,Sq,D]  (self-attention: the total through Q, K and V)
    grad.x_context [B,Sk,D]  (cross-attention only)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_mha import MultiHeadAttention  # noqa: E402  (the seed's module, unchanged)

MASK64 = (1 << 64) - 1
PCG32_MULT = 6364136223846793005
STREAM_DROPOUT = 2  # MHA_PCG32_STREAM_DROPOUT in include/mha_pcg32.h
PARAM_NAMES = ["w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias",
               "w_v.weight", "w_v.bias", "w_o.weight", "w_o.bias"]


# ---- PCG32 (PCG-XSH-RR 64/32), as /work/shared/reference/pcg32.md ------------------
class Pcg32:
    def __init__(self, initstate, initseq):
        """Seed as pcg32_srandom_r: state = 0, inc = (initseq << 1) | 1, step,
        state += initstate, step."""
        self.state = 0
        self.inc = ((initseq << 1) | 1) & MASK64
        self.next()
        self.state = (self.state + initstate) & MASK64
        self.next()

    def copy(self):
        c = Pcg32.__new__(Pcg32)
        c.state, c.inc = self.state, self.inc
        return c

    def next(self):
        """XSH-RR output of the old state; state = old * a + inc (mod 2^64)."""
        old = self.state
        self.state = (old * PCG32_MULT + self.inc) & MASK64
        x = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((x >> rot) | (x << ((-rot) & 31))) & 0xFFFFFFFF

    def advance(self, delta):
        """Jump ahead delta steps (mod 2^64) by squaring the affine step (Brown 1994)."""
        delta &= MASK64
        cur_mult, cur_plus = PCG32_MULT, self.inc
        acc_mult, acc_plus = 1, 0
        while delta > 0:
            if delta & 1:
                acc_mult = (acc_mult * cur_mult) & MASK64
                acc_plus = (acc_plus * cur_mult + cur_plus) & MASK64
            cur_plus = ((cur_mult + 1) * cur_plus) & MASK64
            cur_mult = (cur_mult * cur_mult) & MASK64
            delta >>= 1
        self.state = (acc_mult * self.state + acc_plus) & MASK64


def check_pcg32():
    """Refuse to write anything unless the Python PCG32 reproduces the published
    outputs (seed 42, sequence 54) and the documented seeding/advance facts."""
    rng = Pcg32(42, 54)
    assert (rng.state, rng.inc) == (0x185706B82C2E03F8, 0x6D), "pcg32 seeding"
    round1 = [rng.next() for _ in range(6)]
    assert round1 == [0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B,
                      0xCBED606E], "pcg32 round 1: %s" % [hex(v) for v in round1]
    rng.advance(-6)  # back 6 steps: the same six outputs again
    assert [rng.next() for _ in range(6)] == round1, "pcg32 advance(-6)"
    a = Pcg32(42, 54)
    a.advance(1 << 32)
    assert a.state == 0xBE1B96272C2E03F8 and a.next() == 0xEE687386, "pcg32 advance(2^32)"
    a, b = Pcg32(42, 54), Pcg32(42, 54)
    a.advance(1000)
    for _ in range(1000):
        b.next()
    assert a.state == b.state, "pcg32 advance(1000) != 1000 steps"


def dropout_keep(seed, n, p, B, H, Sq, Sk):
    """keep[b,h,i,j] (0/1) of the training forward with call index n (see docstring)."""
    rng0 = Pcg32(seed, STREAM_DROPOUT)
    T = int(p * 4294967296.0)  # p * 2^32 truncated; exact in double
    keep = torch.zeros(B, H, Sq, Sk, dtype=torch.uint8)
    for b in range(B):
        for h in range(H):
            for i in range(Sq):
                for j in range(Sk):
                    pos = ((n << 40) + ((b * H + h) * Sq + i) * Sk + j) & MASK64
                    r = rng0.copy()
                    r.advance(pos)
                    keep[b, h, i, j] = 0 if r.next() < T else 1
    return keep


class FixedMaskDropout(torch.nn.Module):
    """Stands in for the seed's nn.Dropout: y = x * keep / (1 - p) (p = 1: y = 0)."""

    def __init__(self, keep, p):
        super().__init__()
        scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
        self.factor = keep.to(torch.float64) * scale

    def forward(self, x):
        return x * self.factor


# ---- configurations -----------------------------------------------------------------
# (a) self-attention, no mask          (b) causal, tril [1,1,Sq,Sq] = C causal flag
# (c) broadcast mask [B,1,Sq,Sk] with one fully masked row
# (d) cross-attention Sk != Sq, per-head mask [1,H,Sq,Sk]
# (e) dropout p = 0.3, training, call index 3, cross-attention, 64-bit seed
# (f) causal + key padding (C key_lengths, one length 0 = fully masked batch item)
CONFIGS = [
    dict(name="self_nomask", B=2, Sq=5, Sk=5, D=12, H=3, self_attn=True, mask="none"),
    dict(name="causal", B=2, Sq=6, Sk=6, D=8, H=2, self_attn=True, mask="causal"),
    dict(name="bcast_mask", B=3, Sq=4, Sk=4, D=12, H=4, self_attn=True, mask="batch"),
    dict(name="cross_head_mask", B=2, Sq=5, Sk=7, D=12, H=3, self_attn=False, mask="head"),
    dict(name="dropout", B=2, Sq=4, Sk=6, D=12, H=3, self_attn=False, mask="none",
         p=0.3, seed=0x9E3779B97F4A7C15, call_index=3),
    dict(name="causal_keylen", B=3, Sq=5, Sk=5, D=8, H=2, self_attn=True,
         mask="causal+key_lengths", key_lengths=[5, 2, 0]),
]


def uniform(gen, shape, bound):
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2.0 - 1.0) * bound


def make_mask(cfg, gen):
    """The mask tensor torch gets (uint8 0/1) and the C side's description of it."""
    B, Sq, Sk, H, kind = cfg["B"], cfg["Sq"], cfg["Sk"], cfg["H"], cfg["mask"]
    if kind == "none":
        return None, "none"
    if kind == "causal":
        return torch.tril(torch.ones(1, 1, Sq, Sk, dtype=torch.uint8)), "causal"
    if kind == "causal+key_lengths":
        lens = torch.tensor(cfg["key_lengths"])
        j = torch.arange(Sk).view(1, 1, 1, Sk)
        pad = (j < lens.view(B, 1, 1, 1)).to(torch.uint8)  # [B,1,1,Sk]
        tril = torch.tril(torch.ones(1, 1, Sq, Sk, dtype=torch.uint8))
        return (pad * tril).to(torch.uint8), "causal+key_lengths"  # [B,1,Sq,Sk]
    shape = (B, 1, Sq, Sk) if kind == "batch" else (1, H, Sq, Sk)
    m = (torch.rand(shape, generator=gen, dtype=torch.float64) < 0.7).to(torch.uint8)
    m[..., 0][m.sum(-1) == 0] = 1  # no accidental fully masked rows ...
    if kind == "batch":
        m[1, 0, 2, :] = 0          # ... but exactly one on purpose: uniform weights
    return m, "tensor"


def fmt(v):
    return "%.17g" % v


def write_tensor(f, name, t):
    t = t.detach().contiguous()
    f.write("tensor %s %d %s\n" % (name, t.dim(), " ".join(str(d) for d in t.shape)))
    flat = t.reshape(-1).tolist()
    if t.dtype == torch.uint8:
        per = 32
        words = [str(int(v)) for v in flat]
    else:
        per = 4
        words = [fmt(v) for v in flat]
    for k in range(0, len(words), per):
        f.write(" ".join(words[k:k + per]) + "\n")


def run_config(cfg, out_dir, index):
    B, Sq, Sk, D, H = cfg["B"], cfg["Sq"], cfg["Sk"], cfg["D"], cfg["H"]
    self_attn = cfg["self_attn"]
    p = cfg.get("p", 0.0)
    seed = cfg.get("seed", 0)
    n = cfg.get("call_index", 0)
    training = p > 0.0
    assert not self_attn or Sk == Sq

    torch.manual_seed(1000 + index)  # only nn.Linear's default init, overwritten below
    gen = torch.Generator().manual_seed(20240 + index)
    mha = MultiHeadAttention(D, H, dropout_p=p).double()
    bound = 1.0 / D ** 0.5
    with torch.no_grad():
        for name, prm in mha.named_parameters():
            prm.copy_(uniform(gen, prm.shape, bound))
    assert [k for k, _ in mha.named_parameters()] == PARAM_NAMES

    xq = uniform(gen, (B, Sq, D), 1.0).requires_grad_(True)
    xc = None if self_attn else uniform(gen, (B, Sk, D), 1.0).requires_grad_(True)
    mask, c_mask = make_mask(cfg, gen)
    d_out = uniform(gen, (B, Sq, D), 1.0)

    keep = None
    if training:
        keep = dropout_keep(seed, n, p, B, H, Sq, Sk)
        assert 0 < int(keep.sum()) < keep.numel()
        mha.dropout = FixedMaskDropout(keep, p)
        mha.train()
    else:
        mha.eval()

    # the softmax weights P, captured from the seed's own forward (input of dropout)
    captured = {}
    drop = mha.dropout
    hook = drop.register_forward_hook(lambda mod, inp, outp: captured.__setitem__("P", inp[0]))
    out = mha(xq, xc, mask)  # self-attention: x_context = None, the seed's own path
    hook.remove()
    out.backward(d_out)
    # dL/db_k is identically zero (softmax is shift-invariant along a row; masked scores
    # are filled, not shifted): torch's value is roundoff, which the C test knows.
    gkb = float(mha.w_k.bias.grad.abs().max())
    gkw = float(mha.w_k.weight.grad.abs().max())
    assert gkw > 0.0 and gkb <= 1e-13 * gkw, "grad.w_k.bias should be ~0: %g vs %g" % (gkb, gkw)

    path = os.path.join(out_dir, "parity_%s.txt" % cfg["name"])
    with open(path, "w") as f:
        f.write("# mha parity fixture: written by tools/make_parity_fixtures.py from the seed's\n")
        f.write("# PyTorch module (tools/seed_mha.py), torch %s, float64. Do not edit.\n"
                % torch.__version__)
        f.write("mha-parity-fixture 1\n")
        conf = [("name", cfg["name"]), ("batch", B), ("seq_q", Sq), ("seq_k", Sk),
                ("model_dim", D), ("num_heads", H), ("self_attention", int(self_attn)),
                ("c_mask", c_mask), ("training", int(training)), ("dropout_p", fmt(p)),
                ("seed", seed), ("call_index", n)]
        for k, v in conf:
            f.write("config %s %s\n" % (k, v))
        for name, prm in mha.named_parameters():
            write_tensor(f, name, prm)
        write_tensor(f, "x_query", xq)
        if xc is not None:
            write_tensor(f, "x_context", xc)
        if mask is not None:
            write_tensor(f, "mask", mask)
        if c_mask == "causal+key_lengths":
            write_tensor(f, "key_lengths", torch.tensor(cfg["key_lengths"], dtype=torch.uint8))
        if keep is not None:
            write_tensor(f, "keep", keep)
        write_tensor(f, "d_out", d_out)
        write_tensor(f, "attn", captured["P"])
        write_tensor(f, "out", out)
        for name, prm in mha.named_parameters():
            write_tensor(f, "grad." + name, prm.grad)
        write_tensor(f, "grad.x_query", xq.grad)
        if xc is not None:
            write_tensor(f, "grad.x_context", xc.grad)
        f.write("end\n")
    return path


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures"),
                    help="output directory (default: tests/fixtures of this repo)")
    args = ap.parse_args()
    check_pcg32()
    torch.set_printoptions(precision=17)
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for index, cfg in enumerate(CONFIGS):
        path = run_config(cfg, args.out, index)
        size = os.path.getsize(path)
        total += size
        print("wrote %s (%d bytes)" % (os.path.normpath(path), size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
