#!/usr/bin/env python3
"""PyTorch's side of `nccl_bench`: torch.distributed collectives (NCCL backend) from 8 B to 1 GiB.

One process per GPU (torch.multiprocessing), NVLink multicast off (NCCL_NVLS_ENABLE=0 is set
before torch is imported, and the workers inherit it). For each operation - all_reduce (sum, in
place), all_gather_into_tensor, reduce_scatter_tensor, broadcast (from rank 0, in place, bus
factor 1), f32 - and each size: warm-up calls, then the GPU time between CUDA events on the
current stream over many calls (the same iteration rule as nccl_bench), the slowest rank's.
Sizes, counts and bandwidths are nccl-tests' (see nccl_bench's documentation), so the rows line
up with nccl_bench's.

Writes JSON ({"world_size", "torch", "nccl", "device", "rows": [{"op", "bytes", "size", "count",
"iters", "time_us", "algbw_gbps", "busbw_gbps"}]}) to --out (default: stdout), for
`nccl_bench --torch FILE`; `nccl_bench --torch-run` runs this script itself, with its own
sizes, --quick and GPUs.

    python3 tools/torch_nccl_bench.py --out torch_nccl.json [--quick] [--gpus N]
"""
import argparse
import json
import os
import sys

os.environ["NCCL_NVLS_ENABLE"] = "0"  # before torch (and NCCL) load; inherited by the workers

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]


def sizes(lo, hi):
    s = 1
    while s < max(lo, 1):
        s *= 2
    out = []
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def counts(op, nbytes, n):
    """(send elements, receive elements, size in bytes), as nccl_bench counts them."""
    elems = nbytes // 4
    if op in ("all_reduce", "broadcast"):
        return (elems, elems, elems * 4) if elems >= 1 else None
    per = elems // n
    if per < 1:
        return None
    if op == "all_gather":
        return (per, per * n, per * n * 4)
    return (per * n, per, per * n * 4)


def bus_factor(op, n):
    if op == "broadcast":
        return 1.0
    return 2.0 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def iterations(nbytes, quick):
    lo, hi = (5, 20) if quick else (20, 200)
    return max(lo, min(hi, (1 << 28) // max(nbytes, 1)))


def worker(rank, world, args, port, path):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=dev)
    warmup = 2 if args.quick else 5
    max_bytes = args.max_bytes or ((1 << 20) if args.quick else (1 << 30))
    rows = []
    for op in OPS:
        for nbytes in sizes(args.min_bytes, max_bytes):
            c = counts(op, nbytes, world)
            if c is None:
                continue
            send_n, recv_n, size = c
            send = torch.full((send_n,), float(rank + 1), device=dev, dtype=torch.float32)
            recv = torch.zeros(recv_n, device=dev, dtype=torch.float32)
            if op == "all_reduce":
                def call():
                    dist.all_reduce(recv, op=dist.ReduceOp.SUM)
            elif op == "all_gather":
                def call():
                    dist.all_gather_into_tensor(recv, send)
            elif op == "broadcast":
                def call():
                    dist.broadcast(recv, src=0)
            else:
                def call():
                    dist.reduce_scatter_tensor(recv, send, op=dist.ReduceOp.SUM)
            iters = iterations(nbytes, args.quick)
            for _ in range(warmup):
                call()
            torch.cuda.synchronize()
            dist.barrier(device_ids=[rank])
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                call()
            end.record()
            end.synchronize()
            us = torch.tensor([start.elapsed_time(end) * 1e3 / iters], device=dev)
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            t = us.item()
            algbw = size / (t * 1e-6) / 1e9
            rows.append({"op": op, "bytes": nbytes, "size": size, "count": max(send_n, recv_n),
                         "iters": iters, "time_us": t, "algbw_gbps": algbw,
                         "busbw_gbps": algbw * bus_factor(op, world)})
            del send, recv
    if rank == 0:
        nccl = torch.cuda.nccl.version()
        doc = {"world_size": world, "torch": torch.__version__,
               "nccl": ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl),
               "device": torch.cuda.get_device_name(rank), "quick": args.quick,
               "nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "rows": rows}
        text = json.dumps(doc)
        if path:
            with open(path, "w") as f:
                f.write(text + "\n")
        else:
            print(text)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="JSON file to write (default: stdout)")
    p.add_argument("--quick", action="store_true", help="up to 1 MiB, few iterations")
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count(),
                   help="ranks (one per GPU; default: every GPU)")
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=None)
    p.add_argument("--port", type=int, default=29531)
    args = p.parse_args()
    if args.gpus < 1:
        sys.exit("torch_nccl_bench: no GPU")
    mp.spawn(worker, args=(args.gpus, args, args.port, args.out), nprocs=args.gpus, join=True)


if __name__ == "__main__":
    main()
