#!/usr/bin/python3
"""gpt_torch.py — the GPT of include/mha_gpt.h, written in PyTorch (development only).

Imported by tools/make_gpt_fixtures.py (parity fixtures of tests/test_gpt_parity.c) and by
bench/torch_gpt.py (the PyTorch side of the baby-GPT benchmark). Needs Debian's
python3-torch (1.13); CI never runs it.

The model, letters as in mha_gpt.h (B batch, T length <= context, C dim, H heads,
F mlp_dim, V vocab, L layers):
    x0 = drop(wte[tokens] + wpe[t])                       [B,T,C]
    block l (pre-LayerNorm, GPT-2):
        x = x + drop(attn(ln1(x), causal))                attn: the seed's module
        x = x + drop(mlp(ln2(x)))                         mlp: fc → GELU(tanh) → proj
    logits = ln_f(x_L) · wteᵀ                              [B,T,V], tied, no bias
    loss = cross_entropy(logits, targets, ignore_index=-1) mean over scored positions
The attention is the seed's MultiHeadAttention (tools/seed_mha.py, imported, not copied),
called as attn(x, None, mask) with mask = tril(ones) [1,1,T,T]: scores where mask == 0
are filled with −1e9; its nn.Dropout(p) acts on the attention weights.

state_dict keys are exactly the C names (mha_gpt.h): wte.weight [V,C], wpe.weight
[context,C], blocks.<l>.ln1.weight/bias [C], blocks.<l>.attn.w_q.weight [C,C] …
blocks.<l>.attn.w_o.bias [C], blocks.<l>.ln2.weight/bias, blocks.<l>.mlp.fc.weight
[F,C], blocks.<l>.mlp.fc.bias [F], blocks.<l>.mlp.proj.weight [C,F], .mlp.proj.bias [C],
ln_f.weight/bias [C]. Every Linear weight is [out, in] as PyTorch stores it.

Initialisation (GPT-2): Linear weights and embeddings normal(0, 0.02), the two
residual output projections (attn.w_o.weight, mlp.proj.weight) normal(0, 0.02/√(2L)),
biases 0, LayerNorm weight 1 and bias 0. (The C side draws its own numbers from PCG32;
only the distribution is the same.)

Training (make_optimizer, lr_at, train_step): AdamW(betas (0.9, 0.99), eps 1e-8) with
two groups — weight decay on the 2-D weights of the Linear layers (attn w_q/w_k/w_v/w_o,
mlp fc/proj), none on biases, LayerNorm and the embeddings (mha_param_info.decay) —
clip_grad_norm_(1.0) over all parameters before each step, and the learning rate of
include/mha_optim.h's mha_lr_at (linear warm-up, cosine to min_lr).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_mha import MultiHeadAttention  # noqa: E402  the seed's module, tools/seed_mha.py

INIT_STD = 0.02
LN_EPS = 1e-5
MASKED_SCORE = -1e9  # what the seed module writes where mask == 0 (for the record)


class MLP(nn.Module):
    """fc: Linear(C, F) → GELU (tanh approximation, GPT-2) → proj: Linear(F, C)."""

    def __init__(self, dim, mlp_dim):
        super().__init__()
        self.fc = nn.Linear(dim, mlp_dim)
        self.proj = nn.Linear(mlp_dim, dim)

    def forward(self, x):                          # x [B,T,C] → [B,T,C]
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LayerNorm block: x += drop(attn(ln1(x))); x += drop(mlp(ln2(x)))."""

    def __init__(self, dim, heads, mlp_dim, attn_dropout=0.0, resid_dropout=0.0, ln_eps=LN_EPS):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=ln_eps)
        self.attn = MultiHeadAttention(dim, heads, dropout_p=attn_dropout)
        self.ln2 = nn.LayerNorm(dim, eps=ln_eps)
        self.mlp = MLP(dim, mlp_dim)
        self.drop = nn.Dropout(resid_dropout)

    def forward(self, x, mask):                    # x [B,T,C], mask [1,1,T,T] → [B,T,C]
        x = x + self.drop(self.attn(self.ln1(x), None, mask))
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x


class GPT(nn.Module):
    """Embeddings, L blocks, ln_f, read-out tied to wte (mha_gpt.h)."""

    def __init__(self, vocab, context, layers, heads, dim, mlp_dim=0, attn_dropout=0.0,
                 resid_dropout=0.0, ln_eps=LN_EPS):
        super().__init__()
        mlp_dim = mlp_dim or 4 * dim
        self.vocab, self.context, self.layers = vocab, context, layers
        self.heads, self.dim, self.mlp_dim = heads, dim, mlp_dim
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.drop = nn.Dropout(resid_dropout)
        self.blocks = nn.ModuleList([Block(dim, heads, mlp_dim, attn_dropout, resid_dropout,
                                           ln_eps) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim, eps=ln_eps)
        self.register_buffer("causal", torch.tril(torch.ones(context, context)).view(
            1, 1, context, context), persistent=False)  # not in the state_dict
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """GPT-2 init (uses torch's global generator; seed it with torch.manual_seed)."""
        resid_std = INIT_STD / math.sqrt(2 * self.layers)
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

    def forward(self, tokens, targets=None):
        """tokens [B,T] int64 in [0,V); targets [B,T] in [0,V) or −1 (not scored), or None.
        Returns logits [B,T,V] and the mean loss (None without targets)."""
        B, T = tokens.shape
        assert T <= self.context
        pos = torch.arange(T, device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(pos))            # [B,T,C]
        mask = self.causal[:, :, :T, :T]                            # [1,1,T,T]
        for blk in self.blocks:
            x = blk(x, mask)
        logits = self.ln_f(x) @ self.wte.weight.t()                 # [B,T,V] = [B,T,C]·[C,V]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1),
                                   ignore_index=-1)
        return logits, loss


def param_kind(name):
    """Role of a parameter by its state_dict name (mha_gpt.h's mha_tensor_role)."""
    if name in ("wte.weight", "wpe.weight"):
        return "embedding"
    if ".ln" in name or name.startswith("ln_f."):
        return "norm_weight" if name.endswith(".weight") else "norm_bias"
    if name.endswith(".bias"):
        return "bias"
    if name.endswith("attn.w_o.weight") or name.endswith("mlp.proj.weight"):
        return "resid_weight"
    return "weight"


def decays(name):
    """1 for the 2-D Linear weights AdamW decays (mha_param_info.decay), else 0."""
    return param_kind(name) in ("weight", "resid_weight")


def make_optimizer(model, lr, weight_decay, betas=(0.9, 0.99), eps=1e-8):
    """AdamW with a decay group (2-D Linear weights) and a no-decay group (the rest)."""
    decay = [p for n, p in model.named_parameters() if decays(n)]
    no_decay = [p for n, p in model.named_parameters() if not decays(n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)


def lr_at(step, base_lr, min_lr, warmup, total):
    """mha_lr_at (include/mha_optim.h): linear warm-up over `warmup` steps, then cosine
    from base_lr at step `warmup` to min_lr at step total − 1, then min_lr."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    if step >= total - 1:
        return min_lr
    q = (step - warmup) / (total - 1 - warmup)
    return min_lr + (base_lr - min_lr) * (1 + math.cos(math.pi * q)) / 2


def train_step(model, opt, tokens, targets, lr, clip=1.0):
    """zero_grad, forward, backward, clip_grad_norm_(clip) over every parameter, set lr,
    AdamW step. Returns the loss (a tensor) and the gradient norm before clipping."""
    opt.zero_grad(set_to_none=False)
    _, loss = model(tokens, targets)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    return loss, norm
