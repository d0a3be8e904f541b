# kernels/tuning/colsum_torch.py — torch.sum(x, dim=0) on transpose_h200_lab.cu's column-sum
# shapes, timed as the lab times its kernels (warm-up, R back-to-back calls between two CUDA events
# with R so a trial is ~1 ms, median of 7 trials). Prints "rows cols us" lines that the lab reads:
#   python3 kernels/tuning/colsum_torch.py > /tmp/colsum_torch.txt; /tmp/tlab /tmp/colsum_torch.txt
import torch

SHAPES = [(4096, 33), (65536, 128), (4096, 4096), (1024, 50257), (16384, 8191)]


def time_us(f):
    for _ in range(3):
        f()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    f()
    e1.record()
    e1.synchronize()
    reps = max(1, min(200, int(1.0 / max(e0.elapsed_time(e1), 1e-3))))
    t = []
    for _ in range(7):
        e0.record()
        for _ in range(reps):
            f()
        e1.record()
        e1.synchronize()
        t.append(1000.0 * e0.elapsed_time(e1) / reps)
    return sorted(t)[len(t) // 2]


print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}: rows cols us (torch.sum(x, dim=0), f32)")
for rows, cols in SHAPES:
    x = torch.rand(rows, cols, device="cuda", dtype=torch.float32) * 2 - 1
    out = torch.empty(cols, device="cuda", dtype=torch.float32)
    us = time_us(lambda: torch.sum(x, dim=0, out=out))
    print(f"{rows} {cols} {us:.3f}")
    del x, out
