#!/usr/bin/env python3
"""PyTorch's side of `dp_train`'s throughput phase: the same model, batch and optimizer under DDP.

The model is dp_train's: `--layers` x (Linear(width, width) + ReLU), then Linear(width, 16), f32
(TF32 off, as ours, unless --tf32), cross-entropy over 16 classes, a fixed random batch of
`--batch` rows per GPU, `torch.optim` SGD (lr 1e-4, no momentum: `--optimizer sgd`, dp_train's
throughput phase; `momentum` and `adamw` match its ZeRO-1 phase), zero_grad(set_to_none=True).

Three runs, each in processes of its own (torch.multiprocessing, spawn):
  plain  one GPU, no DDP;
  ddp1   DistributedDataParallel at one rank;
  ddp    DistributedDataParallel at --gpus ranks, one process per GPU (skipped below 2 GPUs).
DDP: NCCL backend, NCCL_NVLS_ENABLE=0 (set before torch loads; the workers inherit it),
bucket_cap_mb 25 (--bucket-mb), gradient_as_bucket_view as --bucket-view says (DDP's default:
off). Each run takes --warmup untimed steps, synchronizes (and a barrier), then times --steps
steps on the host clock ending with loss.item(), as dp_train does; the slowest rank's time
counts. samples/s = ranks x batch x steps / seconds.

Prints one JSON line on stdout ({"torch", "nccl", "device", "gpus", "width", "layers", "batch",
"steps", "warmup", "optimizer", "lr", "bucket_cap_mb", "bucket_view", "tf32",
"plain_samples_per_s", "ddp1_samples_per_s", "ddp_samples_per_s", "speedup"}; a run not made
is null) and a line for people on stderr. `dp_train --torch` runs it with its own settings.

    python3 tools/torch_ddp.py [--width 4096] [--layers 4] [--batch 1024] [--steps 30] [--gpus N]
"""
import argparse
import json
import os
import socket
import sys
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"  # before torch (and NCCL) load; inherited by the workers

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

CLASSES = 16


def mlp(width, layers):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    mods.append(nn.Linear(width, CLASSES))
    return nn.Sequential(*mods)


def optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, args, port, ddp, queue):
    torch.cuda.set_device(rank)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    dev = torch.device("cuda", rank)
    if ddp:
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, device_id=dev)
    seed = 7 + rank  # dp_train's seeds
    torch.manual_seed(seed)
    model = mlp(args.width, args.layers).to(dev)
    if ddp:
        model = DDP(model, device_ids=[rank], bucket_cap_mb=args.bucket_mb,
                    gradient_as_bucket_view=args.bucket_view)
    opt = optimizer(args.optimizer, model.parameters(), args.lr)
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.tensor([(i * 5 + seed) % CLASSES for i in range(args.batch)], device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    if ddp:
        dist.barrier(device_ids=[rank])
        torch.cuda.synchronize()
    t = time.perf_counter()
    loss = None
    for _ in range(args.steps):
        loss = step()
    last = loss.item()  # waits for every step
    secs = time.perf_counter() - t
    if ddp:
        s = torch.tensor([secs], device=dev, dtype=torch.float64)
        dist.all_reduce(s, op=dist.ReduceOp.MAX)
        secs = s.item()
    if rank == 0:
        queue.put({"secs": secs, "loss": last})
    if ddp:
        dist.destroy_process_group()


def run(args, world, ddp):
    """samples/s of one run at `world` ranks (fresh processes)."""
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(world, args, free_port(), ddp, queue), nprocs=world, join=True)
    got = queue.get()
    if not (got["loss"] == got["loss"]):  # NaN
        raise SystemExit("torch_ddp: the loss is NaN")
    return world * args.batch * args.steps / got["secs"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=1024, help="samples per GPU per step")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--gpus", type=int, default=None, help="ranks of the DDP run (default: all)")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adamw"], default="sgd")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--bucket-view", action="store_true", help="gradient_as_bucket_view=True")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in f32 matmuls")
    p.add_argument("--skip-ddp1", action="store_true", help="no DDP run at one rank")
    args = p.parse_args()
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        sys.exit("torch_ddp: no GPU")
    gpus = args.gpus or torch.cuda.device_count()
    if gpus > torch.cuda.device_count():
        sys.exit(f"torch_ddp: --gpus {gpus}, but {torch.cuda.device_count()} GPU(s)")
    plain = run(args, 1, ddp=False)
    ddp1 = None if args.skip_ddp1 else run(args, 1, ddp=True)
    ddpn = run(args, gpus, ddp=True) if gpus >= 2 else None
    nccl = torch.cuda.nccl.version()
    doc = {
        "torch": torch.__version__,
        "nccl": ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl),
        "device": torch.cuda.get_device_name(0),
        "gpus": gpus,
        "width": args.width,
        "layers": args.layers,
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "optimizer": args.optimizer,
        "lr": args.lr,
        "bucket_cap_mb": args.bucket_mb,
        "bucket_view": args.bucket_view,
        "tf32": args.tf32,
        "nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
        "plain_samples_per_s": plain,
        "ddp1_samples_per_s": ddp1,
        "ddp_samples_per_s": ddpn,
        "speedup": ddpn / plain if ddpn else None,
    }
    line = f"torch_ddp ({torch.__version__}, {doc['device']}): plain 1 GPU {plain:.0f} samples/s"
    if ddp1:
        line += f"; DDP 1 rank {ddp1:.0f} ({ddp1 / plain:.2f}x plain)"
    if ddpn:
        line += f"; DDP {gpus} ranks {ddpn:.0f} ({ddpn / plain:.2f}x plain)"
    print(line, file=sys.stderr)
    print(json.dumps(doc), flush=True)


if __name__ == "__main__":
    main()
