//! `nccl_bench`: NCCL collectives through `cuda-stack-nccl`, from 8 B to 1 GiB, beside PyTorch's
//! `torch.distributed` (NCCL backend) measured on the same machine in the same session.
//!
//! One rank per GPU; this process drives them all from one thread, each iteration one
//! `cuda_stack_nccl::Group` with one operation per rank (as `nccl-tests` runs by default). For each
//! operation — all-reduce (sum, in place, as `dist.all_reduce`), all-gather
//! (`all_gather_into_tensor`), reduce-scatter (`reduce_scatter_tensor`), all on f32 — and each
//! size: warm-up iterations, then GPU time between events on every rank's stream over many
//! iterations, the slowest rank's. Sizes, counts and bandwidths follow `nccl-tests`
//! (`PERFORMANCE.md`):
//!
//! - size: all-reduce, the buffer (count × 4 B); all-gather, the gathered buffer
//!   (count per rank × ranks × 4 B); reduce-scatter, the buffer reduced (the same);
//! - algorithm bandwidth = size / time;
//! - bus bandwidth = algbw × 2(n−1)/n (all-reduce), × (n−1)/n (all-gather, reduce-scatter):
//!   the traffic on the busiest link, comparable across rank counts.
//!
//! With one GPU there is one rank: NCCL's collectives are then local copies (an all-reduce in
//! place does nothing at all), the bus bandwidth is 0 by definition, and the program says so;
//! the time is NCCL's launch cost (and this crate's).
//!
//! PyTorch's side: `tools/torch_nccl_bench.py` (one process per GPU through
//! `torch.multiprocessing`, `NCCL_NVLS_ENABLE=0`) writes JSON that `--torch FILE` reads; the
//! table then shows the ratios against the targets (≥ 0.95 × PyTorch's bandwidth at every
//! size ≥ 1 MiB, ≤ 1.1 × its time for messages ≤ 64 KiB). Each operation's result is checked
//! against the CPU first.
//!
//! Run: `python3 tools/torch_nccl_bench.py --out torch_nccl.json; nccl_bench --torch
//! torch_nccl.json` (`--quick`: up to 1 MiB, few iterations, for both).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_driver::{DeviceBuffer, Event, Stream};
use cuda_stack_nccl::{CommConfig, CommGroup, Group, ReduceOp};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// NCCL collectives, bus bandwidth from 8 B to 1 GiB, beside PyTorch.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// JSON written by `tools/torch_nccl_bench.py` on this machine.
    #[arg(long)]
    torch: Option<PathBuf>,
    /// Smallest size in bytes.
    #[arg(long, default_value_t = 8)]
    min_bytes: usize,
    /// Largest size in bytes (default 1 GiB; `--quick`: 1 MiB).
    #[arg(long)]
    max_bytes: Option<usize>,
}

fn main() -> ExitCode {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    let args = Args::parse();
    run("nccl_bench", || body(&args))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
}

impl Op {
    const ALL: [Op; 3] = [Op::AllReduce, Op::AllGather, Op::ReduceScatter];

    fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
            Op::ReduceScatter => "reduce_scatter",
        }
    }

    /// (send elements, receive elements, size in bytes) for `bytes` on `n` ranks, as
    /// nccl-tests counts them; `None` when the size holds less than one element per rank.
    fn counts(self, bytes: usize, n: usize) -> Option<(usize, usize, usize)> {
        let elems = bytes / 4;
        match self {
            Op::AllReduce => (elems >= 1).then_some((elems, elems, elems * 4)),
            Op::AllGather => {
                let per = elems / n;
                (per >= 1).then_some((per, per * n, per * n * 4))
            }
            Op::ReduceScatter => {
                let per = elems / n;
                (per >= 1).then_some((per * n, per, per * n * 4))
            }
        }
    }

    /// nccl-tests' bus-bandwidth factor.
    fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather | Op::ReduceScatter => (n - 1.0) / n,
        }
    }
}

/// Iterations timed for a size (more for small messages, whose times are microseconds); the
/// PyTorch script uses the same rule.
fn iterations(bytes: usize, quick: bool) -> usize {
    let (lo, hi) = if quick { (5, 20) } else { (20, 200) };
    ((1usize << 28) / bytes.max(1)).clamp(lo, hi)
}

/// The sizes: powers of two from `min` to `max`.
fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = min.max(1).next_power_of_two();
    while s <= max {
        v.push(s);
        s *= 2;
    }
    v
}

struct Rank {
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
    start: Event,
    end: Event,
}

/// Queues one iteration of `op` with `send`/`recv` elements on every rank (one group).
fn once(op: Op, comms: &CommGroup, ranks: &mut [Rank], send: usize, recv: usize) -> ProgramResult {
    // The views first: the group borrows them until it ends.
    let mut views = ranks
        .iter_mut()
        .map(|r| {
            let Rank {
                stream,
                send: sb,
                recv: rb,
                ..
            } = r;
            Ok((&*stream, sb.slice(0..send)?, rb.slice_mut(0..recv)?))
        })
        .collect::<cuda_stack_driver::Result<Vec<_>>>()?;
    let mut g = Group::new()?;
    for (c, (s, sv, rv)) in comms.iter().zip(views.iter_mut()) {
        match op {
            Op::AllReduce => g.all_reduce_in_place(c, &mut **rv, ReduceOp::Sum, s)?,
            Op::AllGather => g.all_gather(c, &**sv, &mut **rv, s)?,
            Op::ReduceScatter => g.reduce_scatter(c, &**sv, &mut **rv, ReduceOp::Sum, s)?,
        }
    }
    g.end()?;
    Ok(())
}

/// Runs `op` once on rank-dependent data and checks every rank's result against the CPU.
fn check(op: Op, comms: &CommGroup, ranks: &mut [Rank], bytes: usize) -> ProgramResult {
    let n = ranks.len();
    let Some((send, recv, _)) = op.counts(bytes, n) else {
        return Ok(());
    };
    for (i, r) in ranks.iter_mut().enumerate() {
        let v = vec![(i + 1) as f32; send];
        let w = vec![(i + 1) as f32; recv];
        r.stream.memcpy_htod(&v, &mut r.send.slice_mut(0..send)?)?;
        r.stream.memcpy_htod(&w, &mut r.recv.slice_mut(0..recv)?)?;
    }
    once(op, comms, ranks, send, recv)?;
    let total = (n * (n + 1) / 2) as f32;
    for (i, r) in ranks.iter().enumerate() {
        let got = r.stream.clone_dtoh(&r.recv.slice(0..recv)?)?;
        let want = |j: usize| match op {
            Op::AllReduce | Op::ReduceScatter => total,
            Op::AllGather => (j / send + 1) as f32,
        };
        if let Some(j) = (0..recv).find(|&j| got[j] != want(j)) {
            return Err(format!(
                "{} on rank {i}: element {j} is {}, the CPU says {}",
                op.name(),
                got[j],
                want(j)
            )
            .into());
        }
    }
    Ok(())
}

/// GPU µs per iteration of `op` at `bytes`: the slowest rank's time between its events.
fn time(
    op: Op,
    comms: &CommGroup,
    ranks: &mut [Rank],
    send: usize,
    recv: usize,
    warmup: usize,
    iters: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    for _ in 0..warmup {
        once(op, comms, ranks, send, recv)?;
    }
    for r in ranks.iter() {
        r.stream.synchronize()?;
    }
    for r in ranks.iter() {
        r.start.record(&r.stream)?;
    }
    for _ in 0..iters {
        once(op, comms, ranks, send, recv)?;
    }
    let mut worst: f64 = 0.0;
    for r in ranks.iter() {
        r.end.record(&r.stream)?;
    }
    for (c, r) in comms.iter().zip(ranks.iter()) {
        r.end.synchronize()?;
        c.check()?;
        worst = worst.max(r.start.elapsed(&r.end)?.as_secs_f64());
    }
    Ok(worst / iters as f64 * 1e6)
}

/// PyTorch's run, from the script's JSON.
struct TorchRun {
    /// Its number of ranks.
    world: usize,
    /// (op, bytes) -> (µs, bus GB/s).
    rows: HashMap<(String, usize), (f64, f64)>,
    /// Versions and device.
    meta: Value,
}

fn load_torch(path: &PathBuf) -> Result<TorchRun, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading --torch {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--torch {}: not the JSON of tools/torch_nccl_bench.py: {e}",
            path.display()
        )
    })?;
    let world = v["world_size"].as_u64().unwrap_or(0) as usize;
    let mut rows = HashMap::new();
    for r in v["rows"].as_array().into_iter().flatten() {
        if let (Some(op), Some(b), Some(t), Some(bw)) = (
            r["op"].as_str(),
            r["bytes"].as_u64(),
            r["time_us"].as_f64(),
            r["busbw_gbps"].as_f64(),
        ) {
            rows.insert((op.to_string(), b as usize), (t, bw));
        }
    }
    let meta = json!({"torch": v["torch"], "nccl": v["nccl"], "device": v["device"]});
    Ok(TorchRun { world, rows, meta })
}

fn fmt_size(b: usize) -> String {
    match b {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn body(args: &Args) -> ProgramResult {
    let c = &args.common;
    let mut out = Out::new(c.json);
    let quick = c.quick;
    let max = args.max_bytes.unwrap_or(c.pick(1 << 20, 1 << 30));
    let sizes = sizes(args.min_bytes, max);
    let comms = CommGroup::all(&CommConfig::default())?;
    let n = comms.len();
    let version = cuda_stack_nccl::nccl_version()?;
    out.say(format!(
        "nccl_bench: {n} rank(s), one per GPU, driven from one thread (a group per iteration);          NCCL {version:?}; f32; sizes {} .. {}",
        fmt_size(sizes.first().copied().unwrap_or(0)),
        fmt_size(max)
    ));
    if n == 1 {
        out.say(
            "One GPU: one rank. Every collective is a local operation (an in-place all-reduce              moves nothing, all-gather and reduce-scatter copy their buffer); bus bandwidth is              0 by definition (factor (n-1)/n), so the algorithm bandwidth and the time — NCCL's              launch cost and this crate's — are what is measured.",
        );
    }
    let torch = args.torch.as_ref().map(load_torch).transpose()?;
    if let Some(TorchRun { world: w, meta, .. }) = &torch {
        out.say(format!("PyTorch (same machine): {meta}, {w} process(es)"));
        if *w != n {
            out.say(format!(
                "note: PyTorch ran {w} ranks and this run has {n}: no ratios are shown"
            ));
        }
        out.put("torch_meta", meta.clone());
    }
    let compare = torch.as_ref().filter(|t| t.world == n);
    // Buffers for the largest size of every op, per rank.
    let max_elems = max / 4 + n;
    let mut ranks = comms
        .iter()
        .map(|cm| -> Result<Rank, Box<dyn std::error::Error>> {
            let stream = cm.context().new_stream()?;
            Ok(Rank {
                send: stream.alloc_zeros::<f32>(max_elems)?,
                recv: stream.alloc_zeros::<f32>(max_elems)?,
                start: Event::new(cm.context(), true)?,
                end: Event::new(cm.context(), true)?,
                stream,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let warmup = c.pick(2, 5);
    let mut rows = Vec::new();
    let mut table = Table::new(&[
        "op",
        "size",
        "count",
        "iters",
        "time µs",
        "algbw GB/s",
        "busbw GB/s",
        "torch µs",
        "torch busbw",
        "ours/torch",
        "target",
    ]);
    let mut worst_bw: HashMap<Op, f64> = HashMap::new();
    let mut worst_lat: HashMap<Op, f64> = HashMap::new();
    for op in Op::ALL {
        check(op, &comms, &mut ranks, max.min(1 << 20))?;
        check(op, &comms, &mut ranks, 4 * n)?;
        for &bytes in &sizes {
            let Some((send, recv, size)) = op.counts(bytes, n) else {
                continue;
            };
            let iters = iterations(bytes, quick);
            let us = time(op, &comms, &mut ranks, send, recv, warmup, iters)?;
            let algbw = size as f64 / (us * 1e-6) / 1e9;
            let busbw = algbw * op.bus_factor(n);
            let theirs = compare.and_then(|t| t.rows.get(&(op.name().to_string(), bytes)).copied());
            // The speed ratio: PyTorch's time / ours (> 1: faster than PyTorch).
            let ratio = theirs.map(|(t_us, _)| t_us / us);
            let target = match ratio {
                Some(r) if size >= 1 << 20 => {
                    let w = worst_bw.entry(op).or_insert(f64::INFINITY);
                    *w = w.min(r);
                    if r >= 0.95 {
                        "ok (bw >= 0.95x)"
                    } else {
                        "BELOW 0.95x bw"
                    }
                }
                Some(r) if size <= 64 << 10 => {
                    let w = worst_lat.entry(op).or_insert(0.0);
                    *w = w.max(1.0 / r);
                    if 1.0 / r <= 1.1 {
                        "ok (lat <= 1.1x)"
                    } else {
                        "ABOVE 1.1x latency"
                    }
                }
                Some(_) => "-",
                None => "",
            };
            table.row(&[
                op.name().into(),
                fmt_size(size),
                recv.max(send).to_string(),
                iters.to_string(),
                format!("{us:.1}"),
                format!("{algbw:.2}"),
                format!("{busbw:.2}"),
                theirs.map_or("-".into(), |(t, _)| format!("{t:.1}")),
                theirs.map_or("-".into(), |(_, b)| format!("{b:.2}")),
                ratio.map_or("-".into(), |r| format!("{r:.2}")),
                target.into(),
            ]);
            rows.push(json!({
                "op": op.name(), "bytes": bytes, "size": size, "send_count": send,
                "recv_count": recv, "iters": iters, "time_us": us, "algbw_gbps": algbw,
                "busbw_gbps": busbw, "torch_time_us": theirs.map(|t| t.0),
                "torch_busbw_gbps": theirs.map(|t| t.1), "speed_vs_torch": ratio,
            }));
        }
    }
    if !out.is_json() {
        table.print();
    }
    for op in Op::ALL {
        if let Some(w) = worst_bw.get(&op) {
            out.say(format!(
                "{}: lowest bandwidth ratio at >= 1 MiB: {w:.3} (target >= 0.95)",
                op.name()
            ));
        }
        if let Some(w) = worst_lat.get(&op) {
            out.say(format!(
                "{}: highest latency ratio at <= 64 KiB: {w:.3} (target <= 1.1)",
                op.name()
            ));
        }
    }
    if compare.is_none() {
        out.say("(no PyTorch figures: run tools/torch_nccl_bench.py and pass --torch FILE)");
    }
    out.put("ranks", json!(n));
    out.put("nccl", json!(version));
    out.put("rows", json!(rows));
    out.put(
        "worst_bandwidth_ratio",
        json!(worst_bw
            .iter()
            .map(|(o, w)| (o.name(), *w))
            .collect::<HashMap<_, _>>()),
    );
    out.put(
        "worst_latency_ratio",
        json!(worst_lat
            .iter()
            .map(|(o, w)| (o.name(), *w))
            .collect::<HashMap<_, _>>()),
    );
    out.finish();
    Ok(())
}
