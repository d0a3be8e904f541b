#!/usr/bin/env python3
"""PyTorch's side of `transformer_ops_bench`: the same ops and shapes, one `name seconds` line
each (median of 20 timed calls after a warm-up, CUDA events), for `--torch FILE`.

    python3 tools/torch_transformer_ops.py > torch_ops.txt
    .gpu/bin/transformer_ops_bench --torch torch_ops.txt

The fused classifier is compared with `F.cross_entropy(logits, t)` forward + backward (what it
replaces), its loss-only kernel with the forward alone; LayerNorm/GELU backward with
`torch.autograd.grad` of the op alone; the embedding backward with the gradient of
`F.embedding` with respect to the table.
"""
import statistics
import torch
import torch.nn.functional as F

dev = "cuda"


def timed(f, reps=20, inner=5):
    for _ in range(inner):
        f()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(inner):
            f()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / 1e3 / inner)
    return statistics.median(out)


def name(dt):
    return {torch.float32: "f32", torch.bfloat16: "bf16"}[dt]


def layer_norm(rows, cols, dt):
    x = (torch.rand(rows, cols, device=dev, dtype=dt) * 4 - 2).requires_grad_()
    w = torch.rand(cols, device=dev, dtype=dt).requires_grad_()
    b = torch.rand(cols, device=dev, dtype=dt).requires_grad_()
    dy = torch.randn(rows, cols, device=dev, dtype=dt)
    with torch.no_grad():
        t = timed(lambda: F.layer_norm(x, (cols,), w, b, 1e-5))
    print(f"layer_norm_fwd_{name(dt)}_{rows}x{cols} {t:.9f}")
    y = F.layer_norm(x, (cols,), w, b, 1e-5)
    t = timed(lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True))
    print(f"layer_norm_bwd_{name(dt)}_{rows}x{cols} {t:.9f}")


def gelu(n, dt):
    x = (torch.rand(n, device=dev, dtype=dt) * 8 - 4).requires_grad_()
    dy = torch.randn(n, device=dev, dtype=dt)
    with torch.no_grad():
        t = timed(lambda: F.gelu(x, approximate="tanh"))
        print(f"gelu_fwd_{name(dt)}_{n} {t:.9f}")
        t = timed(lambda: F.dropout(x, 0.1, training=True))
        print(f"dropout_{name(dt)}_{n} {t:.9f}")
    y = F.gelu(x, approximate="tanh")
    t = timed(lambda: torch.autograd.grad(y, x, dy, retain_graph=True))
    print(f"gelu_bwd_{name(dt)}_{n} {t:.9f}")


def classifier(rows, vocab):
    x = (torch.rand(rows, vocab, device=dev) * 8 - 4).requires_grad_()
    t = torch.randint(0, vocab, (rows,), device=dev)

    def fb():
        loss = F.cross_entropy(x, t)
        torch.autograd.grad(loss, x)

    print(f"fused_classifier_f32_{rows}x{vocab} {timed(fb, inner=3):.9f}")
    with torch.no_grad():
        s = timed(lambda: F.cross_entropy(x, t, reduction="none"), inner=3)
    print(f"classifier_loss_f32_{rows}x{vocab} {s:.9f}")


def embedding(vocab, cols, tokens):
    w = (torch.randn(vocab, cols, device=dev) * 0.02).requires_grad_()
    ids = torch.randint(0, vocab, (tokens,), device=dev)
    with torch.no_grad():
        t = timed(lambda: F.embedding(ids, w))
    print(f"embedding_fwd_f32_V{vocab}_C{cols}_N{tokens} {t:.9f}")
    y = F.embedding(ids, w)
    dy = torch.randn_like(y)
    t = timed(lambda: torch.autograd.grad(y, w, dy, retain_graph=True), inner=3)
    print(f"embedding_bwd_f32_V{vocab}_C{cols}_N{tokens} {t:.9f}")


layer_norm(8192, 768, torch.float32)
layer_norm(8192, 768, torch.bfloat16)
layer_norm(4096, 4096, torch.float32)
gelu(8192 * 3072, torch.float32)
gelu(8192 * 3072, torch.bfloat16)
classifier(8192, 50257)
embedding(50304, 768, 8192)
embedding(65, 384, 16384)
