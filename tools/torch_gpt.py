#!/usr/bin/env python3
"""torch_gpt.py: PyTorch's side of `train_gpt --check` (llm.c's test_gpt2 idea).

Builds nanoGPT's GPT (the same architecture, names and initialisation as
`cuda_examples::gpt`), writes its initial weights and a batch, runs `--steps` AdamW steps in
f32 and writes what each step computed, so the Rust model can be compared step for step:

    python3 tools/torch_gpt.py --out DIR [--config tiny|shakespeare|gpt2] [--batch 4]
                               [--seq 64] [--steps 20] [--lr 1e-3] [--seed 1337]
                               [--device cuda|cpu]
    train_gpt --check DIR

DIR receives:
  model.safetensors   the initial state_dict in nanoGPT's names (lm_head.weight left out: it
                      is transformer.wte.weight), f32;
  batch.safetensors   "x" and "y": int32 [batch, seq] token ids and next-token targets;
  grads.safetensors   the step-0 gradient of every parameter, same names, f32;
  expected.json       {"config": {...}, "lr", "betas", "eps", "weight_decay", "steps",
                       "losses": [loss before each step]}.
Dropout is 0 (the check is deterministic); TF32 is off; AdamW(betas=(0.9, 0.95), eps=1e-8,
weight_decay=0.0) on every parameter, so the update rule is plain Adam with nanoGPT's betas.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_model import CONFIGS, GPT  # noqa: E402  (the model, shared with torch_gpt_bench.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cuda",
                    help="cuda (default) or cpu: the committed test fixture was written on the CPU")
    a = ap.parse_args()
    from safetensors.torch import save_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    c = CONFIGS[a.config]
    if a.seq > c["block_size"]:
        raise SystemExit(f"--seq {a.seq} exceeds the config's block_size {c['block_size']}")
    dev = a.device
    model = GPT(c).to(dev)
    os.makedirs(a.out, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()},
              os.path.join(a.out, "model.safetensors"))
    g = torch.Generator().manual_seed(a.seed + 1)
    data = torch.randint(0, c["vocab"], (a.batch, a.seq + 1), generator=g, dtype=torch.int32)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    save_file({"x": x, "y": y}, os.path.join(a.out, "batch.safetensors"))
    x, y = x.to(dev), y.to(dev)
    betas, eps = (0.9, 0.95), 1e-8
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=betas, eps=eps, weight_decay=0.0)
    losses = []
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        if step == 0:
            save_file({n: p.grad.detach().contiguous() for n, p in model.named_parameters()},
                      os.path.join(a.out, "grads.safetensors"))
        losses.append(loss.item())
        opt.step()
    with open(os.path.join(a.out, "expected.json"), "w") as f:
        json.dump(dict(config=c, batch=a.batch, seq=a.seq, lr=a.lr, betas=betas, eps=eps,
                       weight_decay=0.0, steps=a.steps, losses=losses,
                       torch=torch.__version__,
                       device=torch.cuda.get_device_name() if dev.startswith("cuda") else dev),
                  f, indent=1)
    print(f"torch_gpt: {a.config}, {a.steps} steps, losses {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
