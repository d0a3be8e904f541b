#!/usr/bin/env python3
"""torch_attention.py: PyTorch's side of `attention_bench`, on exactly the same cases.

Usage (on the GPU machine, in the same command as the benchmark; `attention_bench --torch-run`
does these steps itself):
    attention_bench --cases > cases.json
    python3 tools/torch_attention.py cases.json > torch_attention.json
    attention_bench --torch torch_attention.json

Each case is one of (the `op` field):
  sdpa           torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
                 q/k/v [b, h, n, d]; `pass` "fwd" or "fwdbwd" (the forward, then
                 torch.autograd.grad of the output against q, k, v: fresh gradients, nothing
                 accumulated). The backend PyTorch used is read from the kernel names of one
                 profiled call (flash / cudnn / efficient / math) and reported per case.
  layer_norm     F.layer_norm over the last dim of [rows, c] with weight and bias, eps 1e-5.
  gelu           F.gelu(x, approximate="tanh") of n elements.
  embedding      F.embedding(indices [n], weight [v, c]); "fwdbwd" adds the dense weight gradient.
  cross_entropy  F.cross_entropy(logits [n, v], targets [n]) (mean), forward and its gradient
                 with respect to the logits.
  chain          seed 002's chain in eager PyTorch: softmax(q @ k^T * scale) @ v, [b, h, n, d].
Every case has `dtype` ("f32", "bf16", "f16") and `pass` ("fwd", "bwd" or "fwdbwd"; "bwd" times
the backward alone from saved forward results where PyTorch allows it: gelu and layer_norm).

Timing is the method attention_bench uses on its side: one warm-up call, then `settle_s` seconds
of untimed back-to-back calls (the case's field: 1 s for the attention cases, 0 for the row ops
and in quick runs; the GPU then runs at the clock its power cap sets for the work), R back-to-back
calls between two CUDA events on one stream (R chosen so a trial lasts ~20 ms, at most 200),
median of 5 trials (3 with "quick": true in a case). The sdpa cases are timed a second way: the
call captured once into a CUDA graph and replayed the same way ("graph_s"; null when capture
fails), PyTorch's GPU time without its host side, which at the small cases is most of an eager
fwd+bwd call and moves with the host (16 x 16 x 512 x 64 took 217 to 424 us eager between runs on
one H200). Output: JSON {"torch": version, "device": name, "cases": {id: {"s": seconds per call,
"backend": str|null, "graph_s": seconds per replayed call|null (sdpa only)}}}.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def events_time(run):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    run()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3


def measure(fn, quick, settle_s=0.0):
    trials, target, max_reps = (3, 0.005, 50) if quick else (5, 0.020, 200)
    fn()
    torch.cuda.synchronize()
    one = events_time(fn)
    reps = max(1, min(max_reps, int(target / max(one, 1e-7))))
    # settle_s of untimed back-to-back calls first (the case's "settle_s", as attention_bench
    # does on its side): the trials then run at the clock the GPU's power cap sets for this work.
    for _ in range(math.ceil(settle_s / max(one, 1e-7)) if settle_s > 0 else 0):
        fn()

    def loop():
        for _ in range(reps):
            fn()

    return median([events_time(loop) / reps for _ in range(trials)])


def graph_time(fn, quick, settle_s=0.0):
    """The same call captured once into a CUDA graph and replayed, timed as `measure` does: the
    GPU's time without PyTorch's host side (eager autograd's Python and dispatch cost, which at
    the small cases can exceed the kernels' time and varies with the host). None, with a message
    on stderr, when the call cannot be captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capturing stream, as torch.cuda.graph asks
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
    except Exception as e:  # noqa: BLE001 -- any capture failure only drops the graph figure
        print(f"torch_attention.py: CUDA-graph capture failed ({e}); eager time only", file=sys.stderr)
        return None
    t = measure(g.replay, quick, settle_s)
    del g
    return t


def backend_of(fn):
    """Which SDPA backend ran, from the CUDA kernel names of one profiled call."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = " ".join(e.key.lower() for e in prof.key_averages())
    for key, name in (("cudnn", "cudnn"), ("flash", "flash"), ("fmha", "efficient"),
                      ("efficient", "efficient"), ("mem_eff", "efficient")):
        if key in names:
            return name
    return "math"


def sdpa_case(c, dev):
    dt = DTYPES[c["dtype"]]
    shape = (c["b"], c["h"], c["n"], c["d"])
    need = c["pass"] != "fwd"
    q, k, v = (torch.randn(shape, device=dev, dtype=dt, requires_grad=need) for _ in range(3))
    causal = bool(c["causal"])
    if not need:
        def fn():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        do = torch.randn(shape, device=dev, dtype=dt)

        def fn():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(o, (q, k, v), do)
    return fn, backend_of(fn)


def chain_case(c, dev):
    dt = DTYPES[c["dtype"]]
    shape = (c["b"], c["h"], c["n"], c["d"])
    q, k, v = (torch.randn(shape, device=dev, dtype=dt) for _ in range(3))
    scale = 1.0 / math.sqrt(c["d"])

    def fn():
        torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v
    return fn, None


def layer_norm_case(c, dev):
    dt = DTYPES[c["dtype"]]
    rows, cols = c["rows"], c["c"]
    need = c["pass"] != "fwd"
    x = torch.randn(rows, cols, device=dev, dtype=dt, requires_grad=need)
    w = torch.randn(cols, device=dev, dtype=dt, requires_grad=need)
    b = torch.randn(cols, device=dev, dtype=dt, requires_grad=need)
    if not need:
        return (lambda: F.layer_norm(x, (cols,), w, b, 1e-5)), None
    dy = torch.randn(rows, cols, device=dev, dtype=dt)
    if c["pass"] == "bwd":
        y = F.layer_norm(x, (cols,), w, b, 1e-5)
        return (lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True)), None

    def fn():
        y = F.layer_norm(x, (cols,), w, b, 1e-5)
        torch.autograd.grad(y, (x, w, b), dy)
    return fn, None


def gelu_case(c, dev):
    dt = DTYPES[c["dtype"]]
    need = c["pass"] != "fwd"
    x = torch.randn(c["n"], device=dev, dtype=dt, requires_grad=need)
    if not need:
        return (lambda: F.gelu(x, approximate="tanh")), None
    dy = torch.randn(c["n"], device=dev, dtype=dt)
    if c["pass"] == "bwd":
        y = F.gelu(x, approximate="tanh")
        return (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), None

    def fn():
        torch.autograd.grad(F.gelu(x, approximate="tanh"), x, dy)
    return fn, None


def embedding_case(c, dev):
    dt = DTYPES[c["dtype"]]
    need = c["pass"] != "fwd"
    w = torch.randn(c["v"], c["c"], device=dev, dtype=dt, requires_grad=need)
    idx = torch.randint(0, c["v"], (c["n"],), device=dev)
    if not need:
        return (lambda: F.embedding(idx, w)), None
    dy = torch.randn(c["n"], c["c"], device=dev, dtype=dt)
    if c["pass"] == "bwd":
        y = F.embedding(idx, w)
        return (lambda: torch.autograd.grad(y, w, dy, retain_graph=True)), None

    def fn():
        torch.autograd.grad(F.embedding(idx, w), w, dy)
    return fn, None


def cross_entropy_case(c, dev):
    dt = DTYPES[c["dtype"]]
    logits = torch.randn(c["n"], c["v"], device=dev, dtype=dt, requires_grad=True)
    t = torch.randint(0, c["v"], (c["n"],), device=dev)

    def fn():
        loss = F.cross_entropy(logits, t)
        torch.autograd.grad(loss, logits)
    return fn, None


CASES = {"sdpa": sdpa_case, "chain": chain_case, "layer_norm": layer_norm_case,
         "gelu": gelu_case, "embedding": embedding_case, "cross_entropy": cross_entropy_case}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_attention.py cases.json  (from attention_bench --cases)")
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    dev = torch.device("cuda", int(cases[0].get("device", 0)) if cases else 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    out = {}
    for c in cases:
        make = CASES.get(c["op"])
        if make is None:
            sys.exit(f"torch_attention.py: unknown op {c['op']!r} in case {c['id']}")
        fn, backend = make(c, dev)
        quick, settle = c.get("quick", False), float(c.get("settle_s", 0.0))
        s = measure(fn, quick, settle)
        out[c["id"]] = {"s": s, "backend": backend}
        line = f"torch {c['id']}: {s * 1e6:.1f} us"
        if c["op"] == "sdpa":
            g = graph_time(fn, quick, settle)
            out[c["id"]]["graph_s"] = g
            if g is not None:
                line += f" (CUDA-graph replay {g * 1e6:.1f} us)"
        print(line, file=sys.stderr)
        torch.cuda.empty_cache()
    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(dev),
               "cases": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
