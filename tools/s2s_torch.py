#!/usr/bin/python3
"""s2s_torch.py — the encoder–decoder Transformer of the C library, written in PyTorch
(development only).

Imported by tools/make_s2s_fixtures.py (parity fixtures of the C tests) and by
bench/torch_g2p.py (the PyTorch side of the G2P training-step benchmark). Needs Debian's
python3-torch (1.13); CI never runs it. As a program it loads a C-written checkpoint:

    /usr/bin/python3 tools/s2s_torch.py FILE.safetensors [--heads H] [--src-vocab ...]

reads the state dict (F32 or F64, the names below) into this model with
load_state_dict(strict=True) and prints the configuration and the parameter count
(a checkpoint's other entries, optimizer.<moment>.<name> and training state, are listed
and not read);
sizes not given on the command line are read from the file's metadata, or else from
the tensors' shapes (--heads must come from one of the two: no shape shows it).

The model ("the original Transformer", pre-LayerNorm), letters: B batch, S source length
<= Ts (src_context), T target length <= Tt (tgt_context), C dim, H heads, F mlp_dim,
Vs/Vt vocabularies, Le/Ld layers, ε label smoothing:
    E1  xs0 = drop(src_emb[src] + src_pos[t])                              [B,S,C]
    E2  encoder block l:  x = x + drop(attn(ln1(x), None, mask_src))        not causal
                          x = x + drop(mlp(ln2(x)))
    E3  mem = enc_ln(xs_Le)                                                 [B,S,C]
    D1  xt0 = drop(tgt_emb[tgt_in] + tgt_pos[t])                           [B,T,C]
    D2  decoder block l:  x = x + drop(self_attn(ln1(x), None, causal))
                          x = x + drop(cross_attn(ln2(x), mem, mask_src))
                          x = x + drop(mlp(ln3(x)))
    D3  logits = dec_ln(xt_Ld) · tgt_embᵀ   (tied; untied: · out.weightᵀ), no bias  [B,T,Vt]
    D4  loss = cross_entropy(logits, targets, ignore_index=-1, label_smoothing=ε)
        = mean over the scored positions (targets != −1) of
          (1 − ε)·(−log p[y]) + ε·(1/Vt)·Σ_c (−log p[c])
Every attention is the seed's MultiHeadAttention (tools/seed_mha.py, imported, not
copied): scores QKᵀ/√hd, masked_fill(mask == 0, −1e9), softmax, nn.Dropout on the
weights, ·V, merge, w_o. Masks: mask_src [B,1,1,S], 1 where j < src_len[b] (broadcast
over heads and queries: the same as [B,1,Sq,S]); causal [1,1,T,T], 1 where j <= i. The
target needs no padding mask: its padding comes after its tokens, and the causal mask
already hides later positions; padded targets are −1 (not scored).
Padding semantics: source positions j >= src_len[b] are computed (their queries attend to
the valid keys) but nothing downstream reads them, so d loss / d xs0 there is exactly 0.
mlp: fc Linear(C,F) → GELU(tanh) → proj Linear(F,C). LayerNorm(C, eps=ln_eps), affine.

state_dict keys, in this order (the order of named_parameters() and of the C model):
    src_emb.weight [Vs,C], src_pos.weight [Ts,C],
    encoder.<l>.{ln1.weight, ln1.bias, attn.w_q.weight [C,C], attn.w_q.bias [C],
                 attn.w_k.*, attn.w_v.*, attn.w_o.*, ln2.weight, ln2.bias,
                 mlp.fc.weight [F,C], mlp.fc.bias [F], mlp.proj.weight [C,F], mlp.proj.bias},
    enc_ln.weight, enc_ln.bias, tgt_emb.weight [Vt,C], tgt_pos.weight [Tt,C],
    decoder.<l>.{ln1.*, self_attn.w_q.weight ... self_attn.w_o.bias (8), ln2.*,
                 cross_attn.w_q.weight ... cross_attn.w_o.bias (8), ln3.*, mlp.fc.*, mlp.proj.*},
    dec_ln.weight, dec_ln.bias, and only when untied out.weight [Vt,C].
Every Linear weight is [out, in] as PyTorch stores it.

Initialisation (GPT-2, as tools/gpt_torch.py): Linear weights (out.weight included) and
embeddings normal(0, 0.02), the residual output projections (attn.w_o, self_attn.w_o,
cross_attn.w_o, mlp.proj weights) normal(0, 0.02/√(2·(Le+Ld))), biases 0, LayerNorm 1/0.
The C side draws its own numbers; only the distribution is the same.

Training (make_optimizer, train_step; lr_at is gpt_torch's mha_lr_at): AdamW, default
betas (0.9, 0.99), eps 1e-8, two groups — weight decay on the 2-D Linear weights (the
attentions' w_q/w_k/w_v/w_o, mlp fc/proj, and out.weight when untied), none on biases,
LayerNorm and the four embeddings — and optional clip_grad_norm_ over all parameters.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_mha import MultiHeadAttention  # noqa: E402  the seed's module, tools/seed_mha.py
from gpt_torch import MLP, lr_at  # noqa: E402,F401  fc → GELU(tanh) → proj; mha_lr_at

INIT_STD = 0.02
LN_EPS = 1e-5
PAD_ID, BOS_ID = 0, 1  # the conventions of the fixtures and the benchmark (not the model's)


class EncoderBlock(nn.Module):
    """Pre-LN: x += drop(attn(ln1(x), None, mask_src)); x += drop(mlp(ln2(x)))."""

    def __init__(self, dim, heads, mlp_dim, attn_dropout=0.0, resid_dropout=0.0, ln_eps=LN_EPS):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=ln_eps)
        self.attn = MultiHeadAttention(dim, heads, dropout_p=attn_dropout)
        self.ln2 = nn.LayerNorm(dim, eps=ln_eps)
        self.mlp = MLP(dim, mlp_dim)
        self.drop = nn.Dropout(resid_dropout)

    def forward(self, x, src_mask):                # x [B,S,C], src_mask [B,1,1,S] → [B,S,C]
        x = x + self.drop(self.attn(self.ln1(x), None, src_mask))
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x


class DecoderBlock(nn.Module):
    """Pre-LN: x += drop(self_attn(ln1(x), None, causal));
    x += drop(cross_attn(ln2(x), mem, mask_src)); x += drop(mlp(ln3(x)))."""

    def __init__(self, dim, heads, mlp_dim, attn_dropout=0.0, resid_dropout=0.0, ln_eps=LN_EPS):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=ln_eps)
        self.self_attn = MultiHeadAttention(dim, heads, dropout_p=attn_dropout)
        self.ln2 = nn.LayerNorm(dim, eps=ln_eps)
        self.cross_attn = MultiHeadAttention(dim, heads, dropout_p=attn_dropout)
        self.ln3 = nn.LayerNorm(dim, eps=ln_eps)
        self.mlp = MLP(dim, mlp_dim)
        self.drop = nn.Dropout(resid_dropout)

    def forward(self, x, mem, causal, src_mask):
        """x [B,T,C], mem [B,S,C], causal [1,1,T,T], src_mask [B,1,1,S] → [B,T,C]."""
        x = x + self.drop(self.self_attn(self.ln1(x), None, causal))
        x = x + self.drop(self.cross_attn(self.ln2(x), mem, src_mask))
        x = x + self.drop(self.mlp(self.ln3(x)))
        return x


def source_mask(src_len, S):
    """mask_src [B,1,1,S]: 1 where key position j < src_len[b], else 0."""
    pos = torch.arange(S, device=src_len.device)
    return (pos.view(1, S) < src_len.view(-1, 1)).to(torch.uint8).view(-1, 1, 1, S)


class Seq2Seq(nn.Module):
    """Embeddings, Le encoder blocks, enc_ln, Ld decoder blocks, dec_ln, read-out tied to
    tgt_emb (or out.weight when untied). Modules are defined in the C tensor order."""

    def __init__(self, src_vocab, tgt_vocab, src_context, tgt_context, enc_layers, dec_layers,
                 heads, dim, mlp_dim=0, attn_dropout=0.0, resid_dropout=0.0, ln_eps=LN_EPS,
                 untied=False, label_smoothing=0.0):
        super().__init__()
        mlp_dim = mlp_dim or 4 * dim
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_context, self.tgt_context = src_context, tgt_context
        self.enc_layers, self.dec_layers = enc_layers, dec_layers
        self.heads, self.dim, self.mlp_dim = heads, dim, mlp_dim
        self.untied, self.label_smoothing = bool(untied), label_smoothing
        self.src_emb = nn.Embedding(src_vocab, dim)
        self.src_pos = nn.Embedding(src_context, dim)
        self.encoder = nn.ModuleList([EncoderBlock(dim, heads, mlp_dim, attn_dropout,
                                                   resid_dropout, ln_eps)
                                      for _ in range(enc_layers)])
        self.enc_ln = nn.LayerNorm(dim, eps=ln_eps)
        self.tgt_emb = nn.Embedding(tgt_vocab, dim)
        self.tgt_pos = nn.Embedding(tgt_context, dim)
        self.decoder = nn.ModuleList([DecoderBlock(dim, heads, mlp_dim, attn_dropout,
                                                   resid_dropout, ln_eps)
                                      for _ in range(dec_layers)])
        self.dec_ln = nn.LayerNorm(dim, eps=ln_eps)
        if self.untied:
            self.out = nn.Linear(dim, tgt_vocab, bias=False)
        self.drop = nn.Dropout(resid_dropout)
        self.register_buffer("causal", torch.tril(torch.ones(tgt_context, tgt_context)).view(
            1, 1, tgt_context, tgt_context), persistent=False)  # not in the state_dict
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """GPT-2 init (uses torch's global generator; seed it with torch.manual_seed)."""
        resid_std = INIT_STD / math.sqrt(2 * (self.enc_layers + self.dec_layers))
        for name, p in self.named_parameters():
            kind = param_kind(name)
            if kind == "norm_weight":
                p.fill_(1.0)
            elif kind in ("bias", "norm_bias"):
                p.zero_()
            elif kind == "resid_weight":
                p.normal_(0.0, resid_std)
            else:  # weight, embedding
                p.normal_(0.0, INIT_STD)

    # ---- the pieces (Annotated Transformer names: embed, encode, decode, generator) ----

    def embed_src(self, src):                      # src [B,S] → xs0 [B,S,C]   (E1)
        S = src.shape[1]
        assert S <= self.src_context
        return self.drop(self.src_emb(src) + self.src_pos(torch.arange(S, device=src.device)))

    def encode_embedded(self, xs0, src_mask):      # xs0 [B,S,C] → mem [B,S,C]  (E2, E3)
        x = xs0
        for blk in self.encoder:
            x = blk(x, src_mask)
        return self.enc_ln(x)

    def encode(self, src, src_len):
        """src [B,S] int64, src_len [B] in 1..S → mem [B,S,C] (after enc_ln)."""
        return self.encode_embedded(self.embed_src(src), source_mask(src_len, src.shape[1]))

    def decode(self, tgt_in, mem, src_len):
        """tgt_in [B,T] int64, mem [B,S,C], src_len [B] → logits [B,T,Vt]   (D1–D3)."""
        T = tgt_in.shape[1]
        assert T <= self.tgt_context
        pos = torch.arange(T, device=tgt_in.device)
        x = self.drop(self.tgt_emb(tgt_in) + self.tgt_pos(pos))      # [B,T,C]
        causal = self.causal[:, :, :T, :T]                             # [1,1,T,T]
        src_mask = source_mask(src_len, mem.shape[1])                  # [B,1,1,S]
        for blk in self.decoder:
            x = blk(x, mem, causal, src_mask)
        w = self.out.weight if self.untied else self.tgt_emb.weight   # [Vt,C]
        return self.dec_ln(x) @ w.t()                                  # [B,T,C]·[C,Vt]

    def loss(self, logits, targets, label_smoothing=None):
        """D4: mean over targets != −1 of the label-smoothed cross-entropy."""
        eps = self.label_smoothing if label_smoothing is None else label_smoothing
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1, label_smoothing=eps)

    def forward(self, src, src_len, tgt_in, targets=None, label_smoothing=None):
        """src [B,S], src_len [B], tgt_in [B,T], targets [B,T] in [0,Vt) or −1, or None.
        Returns logits [B,T,Vt] and the mean loss (None without targets)."""
        logits = self.decode(tgt_in, self.encode(src, src_len), src_len)
        loss = None if targets is None else self.loss(logits, targets, label_smoothing)
        return logits, loss

    @torch.no_grad()
    def greedy_decode(self, src, src_len, max_len, bos=BOS_ID):
        """Encode once, then decode position by position taking the argmax (no cache;
        the whole prefix is rerun). Returns [B, max_len] ids, BOS first."""
        mem = self.encode(src, src_len)
        ys = torch.full((src.shape[0], 1), bos, dtype=torch.int64, device=src.device)
        for _ in range(max_len - 1):
            nxt = self.decode(ys, mem, src_len)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], dim=1)
        return ys


def param_names(enc_layers, dec_layers, untied=False):
    """The parameter names in the C model's order (= named_parameters() of Seq2Seq)."""
    def attn(prefix):
        return ["%s.%s.%s" % (prefix, w, k) for w in ("w_q", "w_k", "w_v", "w_o")
                for k in ("weight", "bias")]

    def ln(n):
        return [n + ".weight", n + ".bias"]

    mlp = ["mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"]
    names = ["src_emb.weight", "src_pos.weight"]
    for l in range(enc_layers):
        names += ["encoder.%d.%s" % (l, n) for n in ln("ln1") + attn("attn") + ln("ln2") + mlp]
    names += ln("enc_ln") + ["tgt_emb.weight", "tgt_pos.weight"]
    for l in range(dec_layers):
        names += ["decoder.%d.%s" % (l, n) for n in ln("ln1") + attn("self_attn") + ln("ln2")
                  + attn("cross_attn") + ln("ln3") + mlp]
    names += ln("dec_ln") + (["out.weight"] if untied else [])
    return names


def param_kind(name):
    """Role of a parameter by its state_dict name: embedding, norm_weight, norm_bias, bias,
    resid_weight (the residual output projections) or weight (the other Linear weights)."""
    if name in ("src_emb.weight", "src_pos.weight", "tgt_emb.weight", "tgt_pos.weight"):
        return "embedding"
    if ".ln" in name or name.startswith(("enc_ln.", "dec_ln.")):
        return "norm_weight" if name.endswith(".weight") else "norm_bias"
    if name.endswith(".bias"):
        return "bias"
    if name.endswith("attn.w_o.weight") or name.endswith("mlp.proj.weight"):
        return "resid_weight"
    return "weight"  # w_q/w_k/w_v, mlp.fc, out


def decays(name):
    """1 for the 2-D Linear weights AdamW decays, else 0."""
    return param_kind(name) in ("weight", "resid_weight")


def make_optimizer(model, lr, weight_decay, betas=(0.9, 0.99), eps=1e-8):
    """AdamW with a decay group (2-D Linear weights) and a no-decay group (the rest)."""
    decay = [p for n, p in model.named_parameters() if decays(n)]
    no_decay = [p for n, p in model.named_parameters() if not decays(n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)


def train_step(model, opt, src, src_len, tgt_in, targets, lr, clip=1.0, label_smoothing=None):
    """zero_grad, forward, backward, clip_grad_norm_(clip) over every parameter (skipped
    when clip is None), set lr, AdamW step. Returns the loss (a tensor) and the gradient
    norm before clipping (None without clipping)."""
    opt.zero_grad(set_to_none=False)
    _, loss = model(src, src_len, tgt_in, targets, label_smoothing)
    loss.backward()
    norm = None
    if clip is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    return loss, norm


# ---- safetensors (torch 1.13 has no safetensors package) ----------------------------------

ST_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "U64": "<u8", "U8": "u1"}


def load_safetensors(path):
    """{name: numpy array} (file order), {metadata} of a safetensors file: 8-byte
    little-endian header size N, N bytes of JSON, then the raw little-endian data."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: shorter than a safetensors header" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError("%s: header size %d past the end of the file" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if info["dtype"] not in ST_DTYPES:
            raise ValueError("%s: tensor %s has dtype %s (reads %s)"
                             % (path, name, info["dtype"], ", ".join(ST_DTYPES)))
        dt = np.dtype(ST_DTYPES[info["dtype"]])
        b, e = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if not 0 <= b <= e <= len(data) or e - b != count * dt.itemsize:
            raise ValueError("%s: tensor %s: data_offsets %s do not fit shape %s %s"
                             % (path, name, info["data_offsets"], info["shape"], info["dtype"]))
        out[name] = np.frombuffer(data[b:e], dtype=dt, count=count).reshape(info["shape"]).copy()
    return out, meta


def load_state(model, tensors):
    """Copy the model's parameters from a {name: array} dict (F32 or F64, converted to the
    model's dtype) with load_state_dict(strict=True): every parameter name must be there
    with its shape. Other entries (a checkpoint's optimizer.<moment>.<name> tensors, its
    training state) are not read; their names are returned."""
    params = dict(model.named_parameters())
    missing = [n for n in params if n not in tensors]
    if missing:
        raise ValueError("no tensor %s (and %d more missing)" % (missing[0], len(missing) - 1))
    sd = {}
    for name, p in params.items():
        a = tensors[name]
        if a.dtype.kind != "f":
            raise ValueError("tensor %s is %s, not a float" % (name, a.dtype))
        sd[name] = torch.from_numpy(np.ascontiguousarray(a)).to(p.dtype)
    model.load_state_dict(sd, strict=True)  # raises on a shape mismatch
    return [n for n in tensors if n not in params]


def config_from_file(tensors, meta, given):
    """The Seq2Seq kwargs: `given` (non-None values) first, then the metadata, then the
    tensors' shapes."""
    def meta_int(*keys):
        for k in keys:
            if k in meta and meta[k].strip().isdigit():
                return int(meta[k])
        return None

    def layers(prefix):
        ids = {int(n.split(".")[1]) for n in tensors if n.startswith(prefix + ".")}
        return max(ids) + 1 if ids else 0

    shape = {n: a.shape for n, a in tensors.items()}
    inferred = dict(src_vocab=shape["src_emb.weight"][0], tgt_vocab=shape["tgt_emb.weight"][0],
                    src_context=shape["src_pos.weight"][0],
                    tgt_context=shape["tgt_pos.weight"][0],
                    enc_layers=layers("encoder"), dec_layers=layers("decoder"),
                    heads=None, dim=shape["src_emb.weight"][1],
                    mlp_dim=shape["encoder.0.mlp.fc.weight"][0]
                    if "encoder.0.mlp.fc.weight" in shape else shape["decoder.0.mlp.fc.weight"][0],
                    untied="out.weight" in tensors)
    cfg = {}
    for k, v in inferred.items():
        if given.get(k) is not None:
            cfg[k] = given[k]
        elif k == "untied":
            cfg[k] = v
        else:
            m = meta_int(k, k.replace("_", "-"))
            cfg[k] = m if m is not None else v
    if cfg["heads"] is None:
        raise SystemExit("s2s_torch: the number of heads is neither in the metadata nor "
                         "given: pass --heads H")
    if "ln_eps" in meta and given.get("ln_eps") is None:
        cfg["ln_eps"] = float(meta["ln_eps"])
    elif given.get("ln_eps") is not None:
        cfg["ln_eps"] = given["ln_eps"]
    return cfg


def main():
    ap = argparse.ArgumentParser(description="Load a C-written encoder–decoder state dict "
                                 "(safetensors, F32 or F64) into the PyTorch model and print "
                                 "its parameter count.")
    ap.add_argument("file", help="safetensors file with the state_dict names of this model")
    for k in ("src-vocab", "tgt-vocab", "src-context", "tgt-context", "enc-layers",
              "dec-layers", "heads", "dim", "mlp-dim"):
        ap.add_argument("--" + k, type=int, help="(default: the file's metadata or shapes)")
    ap.add_argument("--ln-eps", type=float, help="(default: metadata ln_eps, else %g)" % LN_EPS)
    args = ap.parse_args()
    tensors, meta = load_safetensors(args.file)
    given = {k: v for k, v in vars(args).items() if k != "file"}
    cfg = config_from_file(tensors, meta, given)
    names = param_names(cfg["enc_layers"], cfg["dec_layers"], cfg["untied"])
    dtypes = sorted({str(tensors[n].dtype) for n in names if n in tensors})
    model = Seq2Seq(**cfg).double()
    other = load_state(model, tensors)
    n = sum(p.numel() for p in model.parameters())
    print("%s: %d parameter tensors (%s) loaded with strict=True%s"
          % (args.file, len(tensors) - len(other), ", ".join(dtypes),
             "; %d other tensors not read (%s%s)" % (len(other), ", ".join(other[:3]),
                                                     ", …" if len(other) > 3 else "")
             if other else ""))
    print("config: " + ", ".join("%s %s" % (k, v) for k, v in cfg.items()))
    print("parameters: %d" % n)


if __name__ == "__main__":
    main()
