#!/usr/bin/env python3
"""PyTorch's side of `cold_start`: the first ops of a fresh process, each timed to completion.

Prints one JSON object on stdout:
  {"import_ms": .., "context_ms": .., "add_ms": .., "sum_ms": .., "softmax_ms": ..,
   "matmul_ms": .., "to_half_ms": .., "torch": "2.x", "device": "..."}
`context_ms` is the first tensor on the GPU (CUDA initialisation, context, caching allocator);
each op after it is its first call in the process, including whatever it loads (kernel images,
cuBLAS), until `torch.cuda.synchronize()` returns. Run it with CUDA_CACHE_DISABLE=1 for the same
conditions as ours (PyTorch ships SASS for common GPUs, so it should not care).
"""
import json
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

import_ms = (time.perf_counter() - t0) * 1e3
dev = int(os.environ.get("COLD_START_DEVICE", "0"))


def timed(f):
    t = time.perf_counter()
    r = f()
    torch.cuda.synchronize(dev)
    return r, (time.perf_counter() - t) * 1e3


n = 4096
a, context_ms = timed(lambda: torch.ones(n, device=f"cuda:{dev}"))
b = torch.full((n,), 2.0, device=f"cuda:{dev}")
torch.cuda.synchronize(dev)
c, add_ms = timed(lambda: a + b)
assert bool((c == 3.0).all())
_, sum_ms = timed(lambda: c.sum())
m = torch.ones(64, 64, device=f"cuda:{dev}")
torch.cuda.synchronize(dev)
_, softmax_ms = timed(lambda: torch.softmax(m, dim=1))
_, matmul_ms = timed(lambda: m @ m)
_, to_half_ms = timed(lambda: c.half())
out = {
    "import_ms": import_ms,
    "context_ms": context_ms,
    "add_ms": add_ms,
    "sum_ms": sum_ms,
    "softmax_ms": softmax_ms,
    "matmul_ms": matmul_ms,
    "to_half_ms": to_half_ms,
    "torch": torch.__version__,
    "device": torch.cuda.get_device_name(dev),
}
print(json.dumps(out))
print(
    f"torch {torch.__version__}: import {import_ms:.0f} ms, first tensor {context_ms:.1f} ms, "
    f"first add {add_ms:.2f} ms",
    file=sys.stderr,
)
