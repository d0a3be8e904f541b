#!/usr/bin/env python3
"""CuPy's side of `cupy_bench`: the same four measurements, the same way, on the same body.

    python3 tools/cupy_bench.py [--n 5000000] [--device 0] [--quick] > cupy.json
    .gpu/bin/cupy_bench --cupy cupy.json          # or: cupy_bench --cupy-script tools/cupy_bench.py
    python3 tools/cupy_bench.py --serve           # paired blocks on demand (cupy_bench drives it)

Prints one JSON line:
  cold_ms      first call of a new ElementwiseKernel in a new process with an empty
               CUPY_CACHE_DIR (define, compile, load, launch, synchronize; after device init)
  warm_ms      the same in a second new process on that folder (a disk-cache load)
  warm_nvrtc_loaded_before  whether libnvrtc was already mapped when that timer started
  overhead_us  host time of one call on 1 element (time.perf_counter before the call and when
               it returns), median over many calls, synchronizing after each one
  batch_us     per call, 1000 back-to-back calls on 1 element, then one synchronize
  gpu_us       GPU time per call at N elements: CUDA events around back-to-back calls, median
"""
import argparse, json, math, os, shutil, statistics, subprocess, sys, tempfile, time

BODY = "y = tanhf(x) * 2.0f + 1.0f;"


def define(cp):
    return cp.ElementwiseKernel("float32 x", "float32 y", BODY, "tanh2p1")


def child(device):
    import cupy as cp
    cp.cuda.Device(device).use()
    x = cp.ones(1024, dtype=cp.float32)
    cp.cuda.get_current_stream().synchronize()
    with open("/proc/self/maps") as f:
        nvrtc_before = "libnvrtc" in f.read()
    t = time.perf_counter()
    k = define(cp)
    y = k(x)
    cp.cuda.get_current_stream().synchronize()
    ms = (time.perf_counter() - t) * 1e3
    want = 2.0 * math.tanh(1.0) + 1.0
    assert abs(float(y[0]) - want) < 1e-5, (float(y[0]), want)
    print(json.dumps({"first_call_ms": ms, "nvrtc_loaded_before": nvrtc_before}))


def first_call_in_new_process(cache_dir, device):
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, __file__, "--child", "--device", str(device)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def warmed_up(cp, device):
    """The kernel, a 1-element input and the current stream, after 100 calls."""
    cp.cuda.Device(device).use()
    stream = cp.cuda.get_current_stream()
    k = define(cp)
    x1 = cp.ones(1, dtype=cp.float32)
    for _ in range(100):
        k(x1)
    stream.synchronize()
    return k, x1, stream


def per_call_us(k, x1, stream, calls):
    """Host time of each of `calls` calls on 1 element (time.perf_counter before the call and
    when it returns, the previous output freed inside), synchronizing after each."""
    host = []
    y = None
    for _ in range(calls):
        t = time.perf_counter()
        y = k(x1)
        host.append((time.perf_counter() - t) * 1e6)
        stream.synchronize()
    del y
    return host


def serve(device):
    """Paired measurement: after printing `ready`, each line `overhead N` on stdin measures N
    calls on 1 element the same way as `overhead_us` (synchronizing after each) and answers one
    JSON line with their median; `quit` (or end of input) ends. `cupy_bench` alternates these
    blocks with its own, so both sides are measured in the same seconds of the same run."""
    import cupy as cp
    k, x1, stream = warmed_up(cp, device)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        host = per_call_us(k, x1, stream, int(words[1]))
        print(json.dumps({"overhead_us": statistics.median(host)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5_000_000)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(a.device)
    if a.serve:
        return serve(a.device)
    import cupy as cp
    n = min(a.n, 1_000_000) if a.quick else a.n
    calls = 300 if a.quick else 3000
    reps, inner = (5, 5) if a.quick else (21, 20)

    d = tempfile.mkdtemp(prefix="cupy-bench-cache-")
    try:
        cold = first_call_in_new_process(d, a.device)
        warm = first_call_in_new_process(d, a.device)
    finally:
        shutil.rmtree(d, ignore_errors=True)

    k, x1, stream = warmed_up(cp, a.device)
    host = per_call_us(k, x1, stream, calls)
    per_batch = []
    for _ in range(3 if a.quick else 10):
        t = time.perf_counter()
        for _ in range(1000):
            k(x1)
        per_batch.append((time.perf_counter() - t) * 1e6 / 1000)
        stream.synchronize()

    x = ((cp.arange(n, dtype=cp.int64) % 2001).astype(cp.float32) - 1000.0) / 250.0
    k(x)
    stream.synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    gpu = []
    for _ in range(reps):
        start.record(stream)
        for _ in range(inner):
            k(x)
        end.record(stream)
        end.synchronize()
        gpu.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / inner)

    print(json.dumps({
        "cupy_version": cp.__version__,
        "device": cp.cuda.runtime.getDeviceProperties(a.device)["name"].decode(),
        "n": n,
        "cold_ms": cold["first_call_ms"],
        "warm_ms": warm["first_call_ms"],
        "warm_nvrtc_loaded_before": warm["nvrtc_loaded_before"],
        "overhead_us": statistics.median(host),
        "batch_us": statistics.median(per_batch),
        "gpu_us": statistics.median(gpu),
    }))


if __name__ == "__main__":
    main()
