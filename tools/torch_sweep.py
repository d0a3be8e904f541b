#!/usr/bin/env python3
"""torch_sweep.py: PyTorch's side of `kernels_bench --sweep`, on exactly the same cases.

Usage (on the GPU machine, in the same command as the benchmark):
    kernels_bench --sweep-cases > cases.json
    python3 tools/torch_sweep.py cases.json > torch_sweep.json
    kernels_bench --sweep --torch-sweep torch_sweep.json

Timing is the method kernels_bench uses on its side: one warm-up call, for the GEMM cases the
case's `settle_s` seconds of untimed calls (the clock a GPU at its power limit holds for this
kernel, not for the case before), R back-to-back calls
between two CUDA events on one stream (R chosen so a trial lasts ~10 ms, at most 1000), median
of 5 trials, the same tensors every call. Each case is also replayed from a CUDA graph of R
calls (same events, same trials): the graph time is PyTorch's GPU time without its host-side
launch cost, reported beside the eager time so host-bound cases can be told apart.
TF32 is off for matmuls (cuBLAS FP32, like the sgemm it is compared with); bf16/f16 matmuls
(`hgemm`) run with torch's defaults.
Output: JSON {"header": ..., "cases": {id: {"eager_s": s, "graph_s": s or null}}}.
"""
import json
import math
import sys

import torch

TRIALS, TARGET_S, MAX_REPS = 5, 0.010, 1000


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
    trials, target, max_reps = (3, 0.002, 50) if quick else (TRIALS, TARGET_S, MAX_REPS)
    fn()
    torch.cuda.synchronize()
    one = events_time(fn)
    reps = max(1, min(max_reps, int(target / max(one, 1e-7))))
    if settle_s > 0:
        for _ in range(max(1, math.ceil(settle_s / max(one, 1e-7)))):
            fn()
        torch.cuda.synchronize()

    def loop():
        for _ in range(reps):
            fn()

    eager = median([events_time(loop) / reps for _ in range(trials)])
    graph_s = None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        g.replay()
        torch.cuda.synchronize()
        graph_s = median([events_time(g.replay) / reps for _ in range(trials)])
        del g
    except Exception as e:  # a case PyTorch cannot capture keeps its eager time only
        print(f"torch_sweep: {fn.__name__}: no graph ({e})", file=sys.stderr)
    return eager, graph_s


def case_fn(c, dev):
    op = c["op"]
    r = lambda *shape: torch.rand(*shape, device=dev) * 2 - 1  # noqa: E731
    if op in ("add", "relu"):
        n, off = c["n"], c["off"]
        a, b = r(n + off), r(n + off)
        av, bv = a[off:off + n], b[off:off + n]
        if op == "add":
            out = torch.empty(n, device=dev)
            return lambda: torch.add(av, bv, out=out)
        return lambda: torch.relu(av)
    if op == "sum":
        x = r(c["n"])
        return lambda: torch.sum(x)
    if op in ("rows_sum", "cols_sum"):
        x = r(c["rows"], c["cols"])
        dim = 1 if op == "rows_sum" else 0
        out = torch.empty(x.shape[1 - dim], device=dev)
        return lambda: torch.sum(x, dim=dim, out=out)
    if op == "transpose":
        x = r(c["rows"], c["cols"])
        y = torch.empty(c["cols"], c["rows"], device=dev)
        return lambda: y.copy_(x.t())
    if op == "softmax":
        x = r(c["rows"], c["cols"])
        return lambda: torch.softmax(x, dim=-1)
    if op == "sgemm":
        m, n, k = c["m"], c["n"], c["k"]
        a = r(k, m).t() if c["ta"] else r(m, k)
        b = r(n, k).t() if c["tb"] else r(k, n)
        out = torch.empty(m, n, device=dev)
        return lambda: torch.mm(a, b, out=out)
    if op == "hgemm":
        # bf16 / f16 GEMM on cuBLAS (torch's defaults, f32 accumulation), the stored layouts
        # as on our side: a transposed operand is the transpose of a dense [k, m] / [n, k].
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
        m, n, k = c["m"], c["n"], c["k"]
        a = r(k, m).to(dt).t() if c["ta"] else r(m, k).to(dt)
        b = r(n, k).to(dt).t() if c["tb"] else r(k, n).to(dt)
        out = torch.empty(m, n, device=dev, dtype=dt)
        return lambda: torch.mm(a, b, out=out)
    if op in ("bias_relu_fwd", "bias_relu_bwd"):
        rows, cols = c["rows"], c["cols"]
        x, bias = r(rows, cols), r(cols)
        if op == "bias_relu_fwd":
            # PyTorch eager has no fused op: what a PyTorch user writes (three kernels).
            return lambda: torch.relu(x * 2.0 + bias)
        g = r(rows, cols)

        def bwd():
            # the backward autograd runs for relu(x * s + b): mask, scale, column sum
            gx = torch.where(x * 2.0 + bias > 0, g, 0.0)
            return gx * 2.0, gx.sum(0)
        return bwd
    if op == "bcast":
        # Tensor's broadcasting ops: a new output each call, as on our side.
        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
        a = r(*c["a"]).to(dt)
        if c["bt"]:
            stored = list(c["b"])
            stored[-1], stored[-2] = stored[-2], stored[-1]
            b = r(*stored).to(dt).transpose(-2, -1)
        else:
            b = r(*c["b"]).to(dt)
        f = torch.add if c["fn"] == "add" else torch.mul
        return lambda: f(a, b)
    if op == "jit_addcmul":
        # cuda-jit's `z = x * y + x`: PyTorch's equivalent op, a new output each call.
        n, off = c["n"], c["off"]
        x, y = r(n + off), r(n + off)
        xv, yv = x[off:off + n], y[off:off + n]
        return lambda: torch.addcmul(xv, xv, yv)
    if op == "contiguous":
        base = r(*c["base"]).permute(*c["perm"])
        view = base[..., ::c["step"]]
        out = torch.empty(view.shape, device=dev)
        return lambda: out.copy_(view)
    raise ValueError(f"unknown op {op}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cases = json.load(open(sys.argv[1]))
    quick = "--quick" in sys.argv
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    header = f"torch {torch.__version__} {torch.cuda.get_device_name(0)}"
    out = {}
    for i, c in enumerate(cases):
        fn = case_fn(c, dev)
        fn.__name__ = c["id"]
        eager, graph_s = measure(fn, quick, c.get("settle_s", 0.0))
        out[c["id"]] = {"eager_s": eager, "graph_s": graph_s}
        print(f"[{i + 1}/{len(cases)}] {c['id']}: eager {eager * 1e6:.2f} us, graph "
              f"{graph_s * 1e6 if graph_s else float('nan'):.2f} us", file=sys.stderr)
        del fn
        torch.cuda.empty_cache()
    json.dump({"header": header, "cases": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
