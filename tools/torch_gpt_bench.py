#!/usr/bin/env python3
"""torch_gpt_bench.py: PyTorch's side of `train_gpt`'s speed comparisons (issue 33).

nanoGPT's GPT (tools/torch_gpt_model.py: the model `train_gpt --check` compares with) trained on
synthetic tokens the way nanoGPT's train.py does, in PyTorch eager and under torch.compile, on one
GPU, so `train_gpt --torch-run` (or `--torch FILE`) can print its figures beside ours:

    python3 tools/torch_gpt_bench.py [--config gpt2|shakespeare] [--batch N] [--steps 10]
                                     [--warmup 3] [--modes eager,compile] [--gpus N] [--json]

  --config gpt2         12 layers, 12 heads, 768 wide, context 1024, vocabulary 50304, no
                        dropout; batch 16 x 1024 tokens uniform over GPT-2's 50257; AdamW lr 6e-4,
                        betas (0.9, 0.95).
  --config shakespeare  6 layers, 6 heads, 384 wide, context 256, vocabulary 65, dropout 0.2
                        (where nanoGPT has it, attention probabilities included unless
                        --no-attn-dropout); batch 64 x 256
                        random tokens (the corpus does not change the time); AdamW lr 1e-3,
                        betas (0.9, 0.99). projected_5000_s = the mean iteration x 5000.
Both: bf16 autocast (--dtype f32: none), fused AdamW (weight decay 0.1 on parameters of 2+
dimensions, none on biases and LayerNorms, eps 1e-8, constant lr), clip_grad_norm_ 1.0,
zero_grad(set_to_none=True), TF32 allowed for f32 matmuls and cuDNN as nanoGPT sets it
(--no-tf32: not). --grad-accum k: k micro-batches per step, each loss / k.

Each mode (eager: the module itself; compile: torch.compile(model), default options) starts from
freed memory (the previous mode's model, optimizer and compiled code deleted, gc.collect(),
torch._dynamo.reset(), empty_cache(), reset_peak_memory_stats()). Per mode:
  first_step_s          from building the model to the end of the first step (compile included;
                        the process's CUDA start-up, cuda_init_s, comes before and is not);
  step_ms, tokens_per_s --steps timed steps after --warmup untimed ones: synchronize, the host
                        clock over all of them, synchronize (as train_gpt times its own);
  step_ms_median        the median of the timed steps' CUDA-event times (no host wait between
                        steps, so none adds a bubble);
  peak_allocated_bytes  torch.cuda.max_memory_allocated() over the whole mode (first, warm-up and
                        timed steps); peak_reserved_bytes likewise;
  loss_first, loss_last the loss of the first and of the last timed step.
A mode that fails (torch.compile without Triton or a C compiler, out of memory, ...) reports
{"error": "..."} and the next one still runs; the exit status is 0 whenever torch and a GPU were
there. --json: one JSON object on stdout ({"torch", "gpu", "config", "batch", ..., "modes":
{"eager": {...}, "compile": {...}}}), progress on stderr; without it, a table.

--gpus N (N >= 2): DistributedDataParallel on GPUs --device .. --device+N-1, as `train_gpt --gpus N
--torch-run` compares with: per mode, N fresh processes (torch.multiprocessing, spawn), one per
GPU, NCCL backend (NCCL_NVLS_ENABLE=0, set before torch loads; the workers inherit it), DDP's
defaults (bucket_cap_mb 25, gradient_as_bucket_view off); compile wraps the DDP module in
torch.compile. --batch sequences per rank (the global batch is N x batch), each rank its own
random tokens (generator seed + 1 + 1000 x rank), the same initial weights (seed; DDP also
broadcasts rank 0's). Clipping sees the averaged gradients (DDP finishes its all-reduce in
backward). After the warm-up every rank synchronizes and meets at a barrier, then times its steps;
step_ms is the slowest rank's, tokens_per_s = N x batch x seq x steps / the slowest rank's seconds,
peak_allocated_bytes the largest rank's (per_rank_peak_allocated_bytes: each), loss_first and
loss_last the mean over the ranks, first_step_s and cuda_init_s rank 0's. The document has
"gpus": N (1 without --gpus).
"""
import argparse
import gc
import importlib
import json
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Never NVLink SHARP multicast: set before torch (and NCCL) load; --gpus's workers inherit it.
os.environ["NCCL_NVLS_ENABLE"] = "0"

BENCH = {
    "gpt2": dict(batch=16, dropout=0.0, lr=6e-4, betas=(0.9, 0.95), token_vocab=50257),
    "shakespeare": dict(batch=64, dropout=0.2, lr=1e-3, betas=(0.9, 0.99), token_vocab=65),
}
MODES = ("eager", "compile")
PROJECT_ITERS = 5000


def log(msg):
    print(f"torch_gpt_bench: {msg}", file=sys.stderr, flush=True)


def short_error(e):
    """The exception's first lines, at most 600 characters (compile errors run long)."""
    lines = [ln.strip() for ln in f"{type(e).__name__}: {e}".splitlines() if ln.strip()]
    text = " | ".join(lines[:4])
    return text if len(text) <= 600 else text[:597] + "..."


def free(torch, dev, compiled):
    """Gives back what a mode left (the caller has dropped its references) and resets the peak."""
    try:
        gc.collect()
        if compiled:
            importlib.import_module("torch._dynamo").reset()  # the compiled code and its caches
            gc.collect()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    except Exception as e:  # noqa: BLE001 — a broken context shows in the next mode's error
        log(f"freeing after a mode: {short_error(e)}")


def run_mode(mode, a, spec, torch, GPT, cfg):
    dev = torch.device("cuda", a.device)
    res = {}
    model = fwd = opt = data = loss = params = decay = no_decay = None
    free(torch, dev, compiled=False)
    try:
        torch.manual_seed(a.seed)
        g = torch.Generator(device=dev).manual_seed(a.seed + 1)
        t = cfg["block_size"]
        data = []
        for _ in range(4):
            d = torch.randint(0, spec["token_vocab"], (a.batch, t + 1), generator=g, device=dev)
            data.append((d[:, :-1].contiguous(), d[:, 1:].contiguous()))
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        attn_dropout = 0.0 if a.no_attn_dropout else spec["dropout"]
        model = GPT(cfg, spec["dropout"], attn_dropout).to(dev)
        model.train()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW(
            [dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)],
            lr=spec["lr"], betas=spec["betas"], eps=1e-8, fused=True)
        fwd = torch.compile(model) if mode == "compile" else model
        params = list(model.parameters())
        accum = a.grad_accum

        def step(i):
            last = None
            for j in range(accum):
                x, y = data[(i * accum + j) % len(data)]
                if a.dtype == "bf16":
                    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                        last = fwd(x, y)
                else:
                    last = fwd(x, y)
                (last / accum).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return last.detach()

        if mode == "compile":
            log(f"{a.config} {mode}: compiling (the first step) ...")
        loss_first = step(0).item()  # waits for the step
        first = time.perf_counter() - t0
        for i in range(a.warmup):
            step(1 + i)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        torch.cuda.synchronize(dev)
        t1 = time.perf_counter()
        for i in range(a.steps):
            starts[i].record()
            loss = step(1 + a.warmup + i)
            ends[i].record()
        torch.cuda.synchronize(dev)
        secs = time.perf_counter() - t1
        ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        step_ms = secs * 1e3 / a.steps
        res = dict(
            first_step_s=first,
            step_ms=step_ms,
            step_ms_median=statistics.median(ms),
            tokens_per_s=a.batch * accum * t * a.steps / secs,
            peak_allocated_bytes=torch.cuda.max_memory_allocated(dev),
            peak_reserved_bytes=torch.cuda.max_memory_reserved(dev),
            loss_first=loss_first,
            loss_last=loss.item(),
        )
        if a.config == "shakespeare":
            res["projected_5000_s"] = step_ms * PROJECT_ITERS / 1e3
        log(f"{a.config} {mode}: first step {first:.2f} s, {step_ms:.2f} ms/step, "
            f"{res['tokens_per_s']:.0f} tokens/s, peak {res['peak_allocated_bytes'] / 2**30:.2f} GiB")
    except Exception as e:  # noqa: BLE001 — any failure of one mode is reported, not fatal
        res = dict(error=short_error(e))
        log(f"{a.config} {mode} failed: {res['error']}")
    finally:
        model = fwd = opt = data = loss = params = decay = no_decay = step = None  # noqa: F841
        free(torch, dev, compiled=mode == "compile")
    return res


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank, world, mode, a, spec, cfg, port, queue):
    """Rank `rank` of a DDP run of `mode`: puts (rank, figures or {"error"}) on `queue`."""
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch_gpt_model import GPT

    res = {}
    try:
        index = a.device + rank
        torch.cuda.set_device(index)
        torch.backends.cuda.matmul.allow_tf32 = not a.no_tf32
        torch.backends.cudnn.allow_tf32 = not a.no_tf32
        dev = torch.device("cuda", index)
        t = time.perf_counter()
        torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)
        cuda_init_s = time.perf_counter() - t
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, device_id=dev,
                                timeout=datetime.timedelta(seconds=120))
        torch.manual_seed(a.seed)
        g = torch.Generator(device=dev).manual_seed(a.seed + 1 + 1000 * rank)
        seq = cfg["block_size"]
        data = []
        for _ in range(4):
            d = torch.randint(0, spec["token_vocab"], (a.batch, seq + 1), generator=g, device=dev)
            data.append((d[:, :-1].contiguous(), d[:, 1:].contiguous()))
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        attn_dropout = 0.0 if a.no_attn_dropout else spec["dropout"]
        model = GPT(cfg, spec["dropout"], attn_dropout).to(dev)
        model.train()
        ddp = DDP(model, device_ids=[index])  # bucket_cap_mb 25, DDP's defaults
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW(
            [dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)],
            lr=spec["lr"], betas=spec["betas"], eps=1e-8, fused=True)
        fwd = torch.compile(ddp) if mode == "compile" else ddp
        params = list(model.parameters())

        def step(i):
            x, y = data[i % len(data)]
            if a.dtype == "bf16":
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    loss = fwd(x, y)
            else:
                loss = fwd(x, y)
            loss.backward()  # DDP's all-reduce ends here: clipping sees averaged gradients
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        def mean(v):
            x = torch.tensor([float(v)], device=dev, dtype=torch.float64)
            dist.all_reduce(x)
            return x.item() / world

        if mode == "compile" and rank == 0:
            log(f"{a.config} DDP {mode}: compiling (the first step) ...")
        loss_first = step(0).item()
        first = time.perf_counter() - t0
        for i in range(a.warmup):
            step(1 + i)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        torch.cuda.synchronize(dev)
        dist.barrier(device_ids=[index])
        torch.cuda.synchronize(dev)
        t1 = time.perf_counter()
        loss = None
        for i in range(a.steps):
            starts[i].record()
            loss = step(1 + a.warmup + i)
            ends[i].record()
        torch.cuda.synchronize(dev)
        secs = time.perf_counter() - t1
        ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        res = dict(
            gpu=torch.cuda.get_device_name(dev),
            cuda_init_s=cuda_init_s,
            first_step_s=first,
            secs=secs,
            step_ms_median=statistics.median(ms),
            peak_allocated_bytes=torch.cuda.max_memory_allocated(dev),
            peak_reserved_bytes=torch.cuda.max_memory_reserved(dev),
            loss_first=mean(loss_first),
            loss_last=mean(loss.item()),
        )
    except Exception as e:  # noqa: BLE001 — reported to the parent, which reports the mode
        res = dict(error=short_error(e))
    finally:
        queue.put((rank, res))
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 — the process ends next
            pass


def run_ddp(mode, a, spec, cfg):
    """One mode under DDP on a.gpus processes: the global figures, or {"error": ...}."""
    import torch.multiprocessing as mp

    world = a.gpus
    queue = mp.get_context("spawn").SimpleQueue()
    died = None
    try:
        mp.spawn(ddp_worker, args=(world, mode, a, spec, cfg, free_port(), queue), nprocs=world,
                 join=True)
    except Exception as e:  # noqa: BLE001 — a worker that died (its report may still be there)
        died = short_error(e)
    got = {}
    while not queue.empty():
        rank, res = queue.get()
        got[rank] = res
    errors = [f"rank {r}: {v['error']}" for r, v in sorted(got.items()) if "error" in v]
    if died:
        errors.append(died)
    if errors or len(got) != world:
        return dict(error="; ".join(errors) or f"{len(got)} of {world} ranks reported")
    ranks = [got[r] for r in range(world)]
    slowest = max(r["secs"] for r in ranks)
    seq = cfg["block_size"]
    res = dict(
        gpu=ranks[0]["gpu"],
        cuda_init_s=ranks[0]["cuda_init_s"],
        first_step_s=ranks[0]["first_step_s"],
        step_ms=slowest * 1e3 / a.steps,
        step_ms_median=max(r["step_ms_median"] for r in ranks),
        tokens_per_s=world * a.batch * seq * a.steps / slowest,
        peak_allocated_bytes=max(r["peak_allocated_bytes"] for r in ranks),
        peak_reserved_bytes=max(r["peak_reserved_bytes"] for r in ranks),
        per_rank_peak_allocated_bytes=[r["peak_allocated_bytes"] for r in ranks],
        per_rank_secs=[r["secs"] for r in ranks],
        loss_first=ranks[0]["loss_first"],
        loss_last=ranks[0]["loss_last"],
    )
    log(f"{a.config} DDP {mode} on {world} GPUs: first step {res['first_step_s']:.2f} s, "
        f"{res['step_ms']:.2f} ms/step, {res['tokens_per_s']:.0f} tokens/s, peak "
        f"{res['peak_allocated_bytes'] / 2**30:.2f} GiB (largest GPU)")
    return res


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def table(doc):
    gpus = doc.get("gpus", 1)
    on = doc["gpu"]
    if gpus > 1:
        on = f"{gpus} x {on} (DistributedDataParallel, batch per GPU)"
    print(f"PyTorch {doc['torch']} on {on}: {doc['config']}, batch {doc['batch']} x "
          f"{doc['grad_accum']} x {doc['seq']}, {doc['dtype']}"
          f"{' autocast' if doc['dtype'] == 'bf16' else ''}, TF32 "
          f"{'allowed' if doc['tf32'] else 'off'}, dropout {doc['dropout']}, fused AdamW, "
          f"clip 1.0; {doc['warmup']} warm-up + {doc['steps']} timed steps; CUDA start-up "
          f"{doc['cuda_init_s']:.2f} s")
    head = ["mode", "first step", "step ms (mean)", "step ms (median)", "tokens/s",
            "peak allocated", "loss (last)"]
    if doc["config"] == "shakespeare":
        head.append(f"{PROJECT_ITERS} iterations")
    rows, failed = [head], []
    for name, m in doc["modes"].items():
        if "error" in m:
            failed.append(f"{name}: failed: {m['error']}")
            continue
        row = [name, f"{m['first_step_s']:.2f} s", f"{m['step_ms']:.2f}",
               f"{m['step_ms_median']:.2f}", f"{m['tokens_per_s']:.0f}",
               gib(m["peak_allocated_bytes"]), f"{m['loss_last']:.4f}"]
        if "projected_5000_s" in m:
            row.append(f"{m['projected_5000_s']:.1f} s")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(r, widths))))
    for line in failed:
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="gpt2", choices=sorted(BENCH))
    ap.add_argument("--batch", type=int, help="sequences per micro-batch (gpt2 16, "
                    "shakespeare 64)")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    ap.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"],
                    help="bf16: autocast (nanoGPT's); f32: none")
    ap.add_argument("--no-tf32", action="store_true", help="forbid TF32 (allowed by default)")
    ap.add_argument("--no-attn-dropout", action="store_true",
                    help="no dropout on the attention probabilities (nanoGPT has it)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--gpus", type=int, default=1,
                    help="N >= 2: DistributedDataParallel on N GPUs, --batch per GPU")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = ap.parse_args()
    spec = BENCH[a.config]
    a.batch = a.batch or spec["batch"]
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        ap.error(f"--modes: {bad or 'none'}; choose from {', '.join(MODES)}")
    if a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.grad_accum < 1 or a.gpus < 1:
        ap.error("--batch, --steps, --grad-accum and --gpus must be at least 1, --warmup at "
                 "least 0")
    if a.gpus > 1 and a.grad_accum != 1:
        ap.error("--gpus N > 1 runs one micro-batch per step (--grad-accum 1)")

    t_import = time.perf_counter()
    try:
        import torch
    except ImportError as e:
        sys.exit(f"torch_gpt_bench: PyTorch is not installed for {sys.executable} ({e})")
    from torch_gpt_model import CONFIGS, GPT

    if not torch.cuda.is_available():
        sys.exit(f"torch_gpt_bench: PyTorch {torch.__version__} sees no CUDA GPU")
    import_s = time.perf_counter() - t_import
    if a.gpus > 1:
        main_ddp(a, spec, modes, torch, import_s)
        return
    tf32 = not a.no_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    t = time.perf_counter()
    torch.zeros(1, device=dev)
    torch.cuda.synchronize(dev)
    cuda_init_s = time.perf_counter() - t
    cfg = CONFIGS[a.config]
    doc = dict(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        gpu=torch.cuda.get_device_name(dev),
        config=a.config,
        model=cfg,
        batch=a.batch,
        grad_accum=a.grad_accum,
        seq=cfg["block_size"],
        dtype=a.dtype,
        tf32=tf32,
        dropout=spec["dropout"],
        attn_dropout=0.0 if a.no_attn_dropout else spec["dropout"],
        optimizer=dict(name="AdamW", fused=True, lr=spec["lr"], betas=spec["betas"], eps=1e-8,
                       weight_decay=0.1, weight_decay_on="parameters of 2+ dimensions"),
        grad_clip=1.0,
        steps=a.steps,
        warmup=a.warmup,
        import_s=import_s,
        cuda_init_s=cuda_init_s,
        modes={},
    )
    for mode in modes:
        log(f"{a.config} {mode}: batch {a.batch} x {a.grad_accum} x {cfg['block_size']}, "
            f"{a.warmup} + {a.steps} steps ...")
        doc["modes"][mode] = run_mode(mode, a, spec, torch, GPT, cfg)
    if a.json:
        print(json.dumps(doc))
    else:
        table(doc)


def main_ddp(a, spec, modes, torch, import_s):
    """--gpus N: each mode under DDP in N fresh processes; this process makes no CUDA context."""
    from torch_gpt_model import CONFIGS

    count = torch.cuda.device_count()
    if a.device + a.gpus > count:
        sys.exit(f"torch_gpt_bench: --gpus {a.gpus} from --device {a.device}, but PyTorch sees "
                 f"{count} GPU(s)")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        sys.exit(f"torch_gpt_bench: PyTorch {torch.__version__} has no NCCL backend")
    cfg = CONFIGS[a.config]
    nccl = torch.cuda.nccl.version()
    doc = dict(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        nccl=".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl),
        gpu="?",
        gpus=a.gpus,
        ddp=dict(backend="nccl", bucket_cap_mb=25, gradient_as_bucket_view=False,
                 processes=a.gpus, nvls_enable=os.environ.get("NCCL_NVLS_ENABLE")),
        config=a.config,
        model=cfg,
        batch=a.batch,
        grad_accum=1,
        seq=cfg["block_size"],
        dtype=a.dtype,
        tf32=not a.no_tf32,
        dropout=spec["dropout"],
        attn_dropout=0.0 if a.no_attn_dropout else spec["dropout"],
        optimizer=dict(name="AdamW", fused=True, lr=spec["lr"], betas=spec["betas"], eps=1e-8,
                       weight_decay=0.1, weight_decay_on="parameters of 2+ dimensions"),
        grad_clip=1.0,
        steps=a.steps,
        warmup=a.warmup,
        import_s=import_s,
        cuda_init_s=0.0,
        modes={},
    )
    for mode in modes:
        log(f"{a.config} DDP {mode}: {a.gpus} processes, batch {a.batch} x {cfg['block_size']} "
            f"per GPU, {a.warmup} + {a.steps} steps ...")
        res = run_ddp(mode, a, spec, cfg)
        if "gpu" in res:
            doc["gpu"] = res.pop("gpu")
            doc["cuda_init_s"] = res.pop("cuda_init_s")
        else:
            log(f"{a.config} DDP {mode} failed: {res['error']}")
        doc["modes"][mode] = res
    if a.json:
        print(json.dumps(doc))
    else:
        table(doc)


if __name__ == "__main__":
    main()
