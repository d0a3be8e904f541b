"""torch_gpt_model.py: nanoGPT's GPT in PyTorch, shared by tools/torch_gpt.py (the step-for-step
check) and tools/torch_gpt_bench.py (the speed comparison).

The same architecture, parameter names and initialisation as `cuda_examples::gpt`: pre-LayerNorm
blocks, causal attention through F.scaled_dot_product_attention, GELU (tanh) MLP, learned
positions, the token embedding tied to the classifier (no separate lm_head.weight). `dropout`
(default 0) is applied where nanoGPT applies it: after the embeddings, on the attention
probabilities (SDPA's dropout_p; `attn_dropout` sets that one apart, default the same), after
the attention's and the MLP's output projections; with 0 no dropout op runs at all.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(vocab=37, block_size=64, n_layer=2, n_head=2, n_embd=64),
    "shakespeare": dict(vocab=65, block_size=256, n_layer=6, n_head=6, n_embd=384),
    "gpt2": dict(vocab=50304, block_size=1024, n_layer=12, n_head=12, n_embd=768),
}


def _drop(x, p, training):
    return F.dropout(x, p, training) if p > 0 and training else x


class Block(nn.Module):
    def __init__(self, c, dropout=0.0, attn_dropout=None):
        super().__init__()
        e = c["n_embd"]
        self.n_head = c["n_head"]
        self.dropout = dropout
        self.attn_dropout = dropout if attn_dropout is None else attn_dropout
        self.ln_1 = nn.LayerNorm(e)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(e, 3 * e)
        self.attn.c_proj = nn.Linear(e, e)
        self.ln_2 = nn.LayerNorm(e)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(e, 4 * e)
        self.mlp.c_proj = nn.Linear(4 * e, e)

    def attention(self, x):
        b, t, e = x.shape
        q, k, v = self.attn.c_attn(x).split(e, dim=2)
        q, k, v = (z.view(b, t, self.n_head, e // self.n_head).transpose(1, 2) for z in (q, k, v))
        p = self.attn_dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = self.attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, e))
        return _drop(y, self.dropout, self.training)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        m = self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + _drop(m, self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, c, dropout=0.0, attn_dropout=None):
        super().__init__()
        self.dropout = dropout
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c, dropout, attn_dropout) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"]),
        ))
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        x = _drop(x, self.dropout, self.training)
        for block in self.transformer.h:
            x = block(x)
        logits = self.transformer.ln_f(x) @ self.transformer.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1).long())
