"""cuBLAS's side of kernels/tuning/tc_lab.cu, through PyTorch, same shapes and timing method
(warm-up, then the median of 5 trials of R back-to-back calls between two CUDA events).

    python3 kernels/tuning/tc_lab_torch.py
"""
import torch

torch.backends.cuda.matmul.allow_tf32 = False


def bench(f, reps):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(5):
        s.record()
        for _ in range(reps):
            f()
        e.record()
        torch.cuda.synchronize()
        t.append(s.elapsed_time(e) * 1000 / reps)
    return sorted(t)[2]


def case(name, dt, ta, tb, M, N, K, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = (torch.rand(K, M, device="cuda") * 2 - 1).to(dt).t() if ta else (torch.rand(M, K, device="cuda") * 2 - 1).to(dt)
    b = (torch.rand(N, K, device="cuda") * 2 - 1).to(dt).t() if tb else (torch.rand(K, N, device="cuda") * 2 - 1).to(dt)
    out = torch.empty(M, N, device="cuda", dtype=dt)
    us = bench(lambda: torch.mm(a, b, out=out), 10 if M >= 8192 else 30)
    print(f"cublas {name:<18} {M:5d} {N:5d} {K:5d} | {us:9.1f} us | {2 * M * N * K / us / 1e6:7.1f} TFLOP/s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False


print(torch.__version__, torch.cuda.get_device_name())
for sz in (4096, 8192):
    for t, nm in enumerate(("nn", "nt", "tn", "tt")):
        case("bf16_" + nm, torch.bfloat16, t >> 1, t & 1, sz, sz, sz)
    case("f16_nn", torch.float16, 0, 0, sz, sz, sz)
    case("tf32_nt", torch.float32, 0, 1, sz, sz, sz, tf32=True)
    case("tf32_nn", torch.float32, 0, 0, sz, sz, sz, tf32=True)
    case("f32_nn (no tf32)", torch.float32, 0, 0, sz, sz, sz)
case("bf16_nn", torch.bfloat16, 0, 0, 4096, 4096, 4088)
case("bf16_nn", torch.bfloat16, 0, 0, 4095, 4097, 4096)
case("bf16_nn", torch.bfloat16, 0, 0, 4095, 4097, 4093)
case("bf16_nn", torch.bfloat16, 0, 0, 2048, 2048, 2048)
case("bf16_nn", torch.bfloat16, 0, 0, 1024, 1024, 1024)
