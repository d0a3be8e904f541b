# PyTorch's side of train_bench: the training steps of seed 001 exercise 3 and seed 004's
# network, eager and captured whole into one CUDA graph (static tensors, as PyTorch's docs
# show), on the same machine in the same session. Prints one JSON object.
# Run: python3 tools/torch_train.py [--steps N] > torch_train.json
import argparse, json, time
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
args = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False  # FP32 as ours (no tensor cores)
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"


class FusedOpLayer(nn.Module):
    # Seed 004's layer; without its compiled extension, PyTorch runs relu(x * scale + bias)
    # as three eager kernels (mul, add, relu).
    def __init__(self, features, scale=1.0):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.scale = scale

    def forward(self, x):
        return torch.relu(x * self.scale + self.bias)


def workloads():
    torch.manual_seed(0)
    m1 = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
    x1 = torch.randn(256, 784, device=dev)
    y1 = torch.randint(0, 10, (256,), device=dev)
    lf = nn.CrossEntropyLoss()
    o1 = lambda cap: torch.optim.SGD(m1.parameters(), lr=0.1)
    yield "seed001_mlp", m1, o1, lambda: lf(m1(x1), y1)
    m2 = nn.Sequential(nn.Linear(512, 256), FusedOpLayer(256, 2.0), nn.Linear(256, 10)).to(dev)
    x2 = torch.randn(32, 512, device=dev)
    o2 = lambda cap: torch.optim.Adam(m2.parameters(), lr=1e-3, capturable=cap)
    yield "seed004_fused", m2, o2, lambda: m2(x2).sum()


def eager(model, make_opt, loss_fn, steps):
    opt = make_opt(False)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn().backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return wall, kernels


def graphed(model, make_opt, loss_fn, steps):
    opt = make_opt(True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = loss_fn()
        loss.backward()
        opt.step()
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps


out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
for name, model, make_opt, loss_fn in workloads():
    wall, kernels = eager(model, make_opt, loss_fn, args.steps)
    out[f"{name}_eager_us"] = wall * 1e6
    out[f"{name}_kernels"] = kernels
    out[f"{name}_graph_us"] = graphed(model, make_opt, loss_fn, args.steps) * 1e6
print(json.dumps(out, indent=1))
