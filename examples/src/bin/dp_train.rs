//! `dp_train`: data-parallel training on every GPU of the machine with `cuda_stack_nn::DataParallel`
//! (gradients all-reduced over NCCL in buckets, overlapped with the backward pass), in both
//! layouts — one process with one thread per GPU, and one process per GPU (this program starts
//! its own children; rank 0 hands NCCL's unique id to the others over TCP,
//! `cuda_stack_nccl::tcp::exchange_unique_id`).
//!
//! 1. **Same global batch, same loss curve.** A small classifier trained for some steps on one
//!    GPU with the whole global batch, and on N GPUs with each rank on its share: the global
//!    loss (mean over ranks) must follow the one-GPU curve within floating-point tolerance. On
//!    one GPU the data-parallel run has one rank and must match plain training (all-reducing one
//!    rank changes nothing).
//! 2. **Step throughput.** A compute-dominated MLP (`layers` × `Linear(width, width)` + ReLU,
//!    f32, a fixed batch per GPU): samples per second of plain training on one GPU, and of
//!    data-parallel training on 1 and N GPUs in each layout; the speed-up of N GPUs over one
//!    (weak scaling: each GPU keeps its batch). Target (issue 12): ≥ 1.8× at 2 GPUs. On one GPU
//!    only the one-GPU figures can be measured, and the program says so instead of inventing
//!    the others.
//! 3. **PyTorch DDP in the same run** (`--torch`): `tools/torch_ddp.py` trains the same model,
//!    batch, optimizer and step count under `DistributedDataParallel` (one process per GPU,
//!    25 MiB buckets) after the throughput phase; its samples/s stand beside ours in the table,
//!    with the ratio ours ÷ torch (targets, issue 31: ≥ 1.0× torch DDP at 2 GPUs; data-parallel
//!    at one rank ≥ 0.98× plain training). Without python3 or torch the program says so and
//!    goes on.
//! 4. **ZeRO-1** (`--zero`): `cuda_stack_nn::ShardedOptimizer` (gradients reduce-scattered,
//!    each rank updates its part of the parameters with its part of the optimizer state, then
//!    the parameters are all-gathered) against plain data-parallel training with the same
//!    optimizer (`--zero-optimizer momentum,adamw`), in each layout: the loss curves (targets:
//!    within 1e-5 relative — an error beyond), the optimizer state per GPU (1/N of plain's) and
//!    the throughput of the throughput model (≥ 0.95× plain data-parallel).
//!
//! Every process runs with `NCCL_NVLS_ENABLE=0` (set first thing in `main`, and passed to the
//! children explicitly).
//!
//! Run: `cargo run --release -p cuda-examples --bin dp_train` (`--quick`: small model, few
//! steps; `--layout threads|processes|both`; `--torch`; `--zero`).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::run;
use cuda_examples::output::Out;
use cuda_stack_nccl::CommGroup;
use cuda_stack_runtime::set_device;
use serde_json::{json, Value};
use std::error::Error;
use std::process::{Command, ExitCode, Stdio};

#[path = "../dp_train/mod.rs"]
mod dp;

use dp::layouts::*;
use dp::training::*;
use dp::Res;

/// Data-parallel training on every GPU: loss curves and step throughput.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// The priority of `DataParallel`'s communication stream (`DataParallelConfig::
    /// high_priority_stream`): `high` (the default) or `normal` (PyTorch DDP's default).
    #[arg(long, value_enum, default_value_t = CommPriority::High)]
    comm_priority: CommPriority,
    /// `DataParallel`'s bucket size in MiB (`DataParallelConfig::bucket_bytes`; PyTorch's
    /// `bucket_cap_mb`, 25 by default there and here; the PyTorch run keeps its default).
    #[arg(long, default_value_t = 25)]
    bucket_mb: usize,
    /// Which layouts to run: `threads`, `processes` or `both`.
    #[arg(long, default_value = "both")]
    layout: String,
    /// Width of the throughput model's layers (default 4096; `--quick`: 512).
    #[arg(long)]
    width: Option<usize>,
    /// Hidden layers of the throughput model.
    #[arg(long, default_value_t = 4)]
    layers: usize,
    /// Samples per GPU per step (default 1024; `--quick`: 64).
    #[arg(long)]
    batch: Option<usize>,
    /// Timed steps (default 30; `--quick`: 5).
    #[arg(long)]
    steps: Option<usize>,
    /// Also run `tools/torch_ddp.py` (PyTorch DDP on the same model, batch, optimizer and step
    /// count) after the throughput phase, and print its samples/s beside ours.
    #[arg(long)]
    torch: bool,
    /// The PyTorch script `--torch` runs.
    #[arg(long, default_value = "tools/torch_ddp.py")]
    torch_script: String,
    /// Also train with ZeRO-1 (`ShardedOptimizer`) against plain data-parallel training: loss
    /// curves, optimizer memory per GPU and throughput.
    #[arg(long)]
    zero: bool,
    /// The optimizers of the `--zero` phase (comma-separated): `momentum` (SGD, momentum 0.9),
    /// `adamw` (AdamW, weight decay 0.01), `sgd` (no state).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Opt::Momentum, Opt::Adamw])]
    zero_optimizer: Vec<Opt>,
    /// Internal: the optimizer of a worker's run.
    #[arg(long, hide = true, value_enum, default_value_t = Opt::Sgd)]
    opt: Opt,
    /// Internal: a worker trains with ZeRO-1.
    #[arg(long, hide = true)]
    sharded: bool,
    /// Internal: run as rank RANK of a one-process-per-GPU run.
    #[arg(long, hide = true)]
    worker: Option<usize>,
    /// Internal: the number of ranks of that run.
    #[arg(long, hide = true)]
    world: Option<usize>,
    /// Internal: rank 0's address for the unique id.
    #[arg(long, hide = true)]
    addr: Option<String>,
}

fn main() -> ExitCode {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    let args = Args::parse();
    COMM_PRIORITY_HIGH.store(
        args.comm_priority == CommPriority::High,
        std::sync::atomic::Ordering::Relaxed,
    );
    BUCKET_BYTES.store(
        args.bucket_mb.saturating_mul(1 << 20).max(1),
        std::sync::atomic::Ordering::Relaxed,
    );
    if let (Some(rank), Some(world), Some(addr)) = (args.worker, args.world, args.addr.clone()) {
        return run("dp_train worker", || {
            worker(&args, rank, world, &addr).map_err(|e| -> Box<dyn Error> { e })
        });
    }
    run("dp_train", || {
        body(&args).map_err(|e| -> Box<dyn Error> { e })
    })
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y).abs() / y.abs().max(1.0)) as f64)
        .fold(0.0, f64::max)
}

fn body(args: &Args) -> Res<()> {
    let c = &args.common;
    let mut out = Out::new(c.json);
    let p = Plan::of(args);
    let n = cuda_stack_driver::Device::count()?;
    let (threads, processes) = match args.layout.as_str() {
        "threads" => (true, false),
        "processes" => (false, true),
        "both" => (true, true),
        other => return Err(format!("--layout {other}: threads, processes or both").into()),
    };
    out.say(format!(
        "dp_train: {n} GPU(s); layouts: {}{}",
        if threads { "one thread per GPU " } else { "" },
        if processes { "one process per GPU" } else { "" }
    ));
    // 1. Loss curves.
    let rows = p.curve_rows * n;
    let one = curve_plain(p, rows)?;
    let mut curves = vec![("one GPU, whole batch".to_string(), one.clone())];
    if threads {
        let comms = CommGroup::all(&comm_config())?.into_comms();
        let job = Job::plain(Opt::Momentum);
        let got = on_threads(comms, move |c| curve_rank(p, c, rows, job))?;
        curves.push((format!("{n} GPU(s), threads"), got[0].clone()));
    }
    if processes {
        let got = on_processes(args, n, "curve", Job::plain(Opt::Momentum))?;
        let c0: Vec<f32> = serde_json::from_value(got[0]["curve"].clone())?;
        curves.push((format!("{n} GPU(s), processes"), c0));
    }
    let tol = if n == 1 { 1e-6 } else { 1e-4 };
    let mut table = Table::new(&[
        "run",
        "loss at step 0",
        "at the end",
        "max rel. diff vs one GPU",
    ]);
    let mut worst: f64 = 0.0;
    for (name, cv) in &curves {
        let d = max_rel_diff(cv, &one);
        worst = worst.max(d);
        table.row(&[
            name.clone(),
            format!("{:.6}", cv[0]),
            format!("{:.6}", cv[cv.len() - 1]),
            format!("{d:.2e}"),
        ]);
    }
    if !out.is_json() {
        table.print();
    }
    out.say(format!(
        "global batch {rows} rows, {} steps: worst relative difference {worst:.2e} (tolerance {tol:.0e}){}",
        p.curve_steps,
        if n == 1 { "; one GPU: the data-parallel run has one rank" } else { "" }
    ));
    if worst > tol {
        return Err(
            format!("the data-parallel loss curve left the one-GPU curve ({worst:.2e})").into(),
        );
    }
    out.put(
        "curves",
        json!(curves
            .iter()
            .map(|(k, v)| json!({"run": k, "loss": v}))
            .collect::<Vec<_>>()),
    );
    out.put("curve_max_rel_diff", json!(worst));

    // 2. Throughput.
    out.say(format!(
        "throughput: {} x Linear({w}, {w}) + ReLU, Linear({w}, 16), batch {} per GPU, {} timed \
         steps; communication stream priority {:?}, buckets of {} MiB",
        p.layers,
        p.batch,
        p.steps,
        args.comm_priority,
        args.bucket_mb,
        w = p.width
    ));
    let sgd = Job::plain(Opt::Sgd);
    set_device(0)?;
    let plain = rate(p, 1, &[throughput_run(p, None, 7, sgd)?]);
    let single = CommGroup::new(&[0], &comm_config())?.into_comms();
    let ddp1 = rate(
        p,
        1,
        &on_threads(single, move |c| throughput_run(p, Some(c), 7, sgd))?,
    );
    // (run, GPUs, samples/s, which of torch_ddp.py's figures it compares with)
    let mut results = vec![
        (
            "plain, one GPU".to_string(),
            1,
            plain,
            "plain_samples_per_s",
        ),
        (
            "data-parallel, 1 rank".to_string(),
            1,
            ddp1,
            "ddp1_samples_per_s",
        ),
    ];
    if n >= 2 {
        if threads {
            let secs = throughput_on_threads(p, sgd)?;
            results.push((
                format!("data-parallel, {n} threads"),
                n,
                rate(p, n, &secs),
                "ddp_samples_per_s",
            ));
        }
        if processes {
            let secs = throughput_on_processes(args, n, sgd)?;
            results.push((
                format!("data-parallel, {n} processes"),
                n,
                rate(p, n, &secs),
                "ddp_samples_per_s",
            ));
        }
    } else if processes {
        // One GPU: the one-process-per-GPU path still runs (one child, TCP id exchange).
        let secs = throughput_on_processes(args, 1, sgd)?;
        results.push((
            "data-parallel, 1 process".to_string(),
            1,
            rate(p, 1, &secs),
            "ddp1_samples_per_s",
        ));
    }
    // The best N-GPU layout's samples/s.
    let best = results
        .iter()
        .filter(|(_, g, _, _)| *g == n)
        .map(|(_, _, r, _)| *r)
        .fold(0.0, f64::max);
    // 3. PyTorch DDP, same run.
    let torch = if args.torch {
        match torch_ddp(args, p, n, Opt::Sgd) {
            Ok(v) => Some(v),
            Err(e) => {
                out.say(format!("PyTorch DDP not measured: {e}"));
                out.put("torch_ddp_error", json!(e.to_string()));
                None
            }
        }
    } else {
        None
    };
    let theirs = |key: &str| torch.as_ref().and_then(|t| t[key].as_f64());
    let mut headers = vec!["run", "GPUs", "samples/s", "vs one GPU plain"];
    if torch.is_some() {
        headers.extend(["torch samples/s", "ours / torch"]);
    }
    let mut table = Table::new(&headers);
    for (name, g, r, key) in &results {
        let mut row = vec![
            name.clone(),
            g.to_string(),
            format!("{r:.0}"),
            format!("{:.2}x", r / plain),
        ];
        if torch.is_some() {
            row.push(theirs(key).map_or("-".into(), |t| format!("{t:.0}")));
            row.push(theirs(key).map_or("-".into(), |t| format!("{:.2}x", r / t)));
        }
        table.row(&row);
    }
    if !out.is_json() {
        table.print();
    }
    if let Some(t) = &torch {
        out.say(format!(
            "PyTorch {} DDP (same model, batch, SGD, {} + {} steps; one process per GPU, 25 MiB \
             buckets), {}:",
            t["torch"].as_str().unwrap_or("?"),
            t["warmup"],
            t["steps"],
            t["device"].as_str().unwrap_or("?")
        ));
        if let Some(tp) = theirs("plain_samples_per_s") {
            out.say(format!(
                "  one GPU: ours {:.2}x torch (plain); data-parallel at one rank {:.2}x our \
                 plain (target >= 0.98x), torch DDP at one rank {}",
                plain / tp,
                ddp1 / plain,
                theirs("ddp1_samples_per_s")
                    .map_or("-".into(), |d| format!("{:.2}x its plain", d / tp))
            ));
        }
        if let Some(td) = theirs("ddp_samples_per_s") {
            out.say(format!(
                "  {n} GPUs: ours {:.2}x torch DDP (best layout; target at 2 GPUs: >= 1.0x)",
                best / td
            ));
            out.put("vs_torch_ddp", json!(best / td));
        }
        out.put(
            "vs_torch_plain",
            json!(theirs("plain_samples_per_s").map(|tp| plain / tp)),
        );
        out.put("torch_ddp", t.clone());
    }
    out.put("ddp1_vs_plain", json!(ddp1 / plain));
    if n >= 2 {
        out.say(format!(
            "scaling: {:.2}x at {n} GPUs over one GPU (target at 2 GPUs: >= 1.8x)",
            best / plain
        ));
        out.put("speedup", json!(best / plain));
    } else {
        out.say(
            "One GPU: the N-GPU throughput and the speed-up cannot be measured here; run on a \
             machine with two or more GPUs. Measured: plain training and the one-rank \
             data-parallel overhead.",
        );
        out.put("speedup", Value::Null);
    }
    out.put("gpus", json!(n));
    out.put(
        "throughput",
        json!(results
            .iter()
            .map(|(k, g, r, key)| json!({
                "run": k, "gpus": g, "samples_per_s": r,
                "torch_samples_per_s": theirs(key),
                "vs_torch": theirs(key).map(|t| r / t),
            }))
            .collect::<Vec<_>>()),
    );
    // 4. ZeRO-1.
    if args.zero {
        zero_phase(args, p, n, (threads, processes), &mut out)?;
    }
    out.finish();
    Ok(())
}

/// Runs `tools/torch_ddp.py` (`--torch-script`) with this run's model, batch, step count,
/// GPUs and optimizer `opt`, and returns the JSON it prints. An error says why it could not
/// (no python3, no torch, no GPU for torch, …).
fn torch_ddp(args: &Args, p: Plan, n: usize, opt: Opt) -> Res<Value> {
    let mut cmd = Command::new("python3");
    cmd.arg(&args.torch_script)
        .args(["--width", &p.width.to_string()])
        .args(["--layers", &p.layers.to_string()])
        .args(["--batch", &p.batch.to_string()])
        .args(["--steps", &p.steps.to_string()])
        .args(["--warmup", "3"]) // ours: two warm-up steps and a third waited for
        .args(["--gpus", &n.to_string()])
        .args(["--optimizer", opt.torch_name()])
        .args(["--lr", &THROUGHPUT_LR.to_string()])
        .env(cuda_stack_nccl::NVLS_VAR, "0")
        .stdin(Stdio::null());
    if cuda_stack_runtime::tensor::allow_tf32() {
        cmd.arg("--tf32");
    }
    let o = cmd
        .output()
        .map_err(|e| format!("could not run python3 {}: {e}", args.torch_script))?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    if !o.status.success() {
        return Err(format!(
            "python3 {} failed ({}): {}",
            args.torch_script,
            o.status,
            tail.join(" | ")
        )
        .into());
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("python3 {} printed no JSON", args.torch_script))?;
    Ok(serde_json::from_str(line)?)
}

/// Bytes as MiB, for people.
fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// ZeRO-1 against plain data-parallel training, for each optimizer of `--zero-optimizer` and
/// each layout: loss curves, optimizer state per GPU and throughput.
fn zero_phase(
    args: &Args,
    p: Plan,
    n: usize,
    (threads, processes): (bool, bool),
    out: &mut Out,
) -> Res<()> {
    const LOSS_TOL: f64 = 1e-5;
    out.say(format!(
        "ZeRO-1 (ShardedOptimizer) vs plain data-parallel training on {n} GPU(s): the loss \
         curves ({} steps of the classifier), and optimizer state and samples/s of the \
         throughput model",
        p.curve_steps
    ));
    let rows = p.curve_rows * n;
    let layouts: Vec<&str> = [("threads", threads), ("processes", processes)]
        .into_iter()
        .filter(|l| l.1)
        .map(|l| l.0)
        .collect();
    let mut table = Table::new(&[
        "optimizer",
        "layout",
        "loss: max rel. diff",
        "state/GPU plain",
        "state/GPU ZeRO-1",
        "ZeRO-1/plain",
        "samples/s plain",
        "samples/s ZeRO-1",
        "ZeRO-1/plain",
    ]);
    let mut docs = Vec::new();
    let mut worst_loss: f64 = 0.0;
    for &opt in &args.zero_optimizer {
        for &layout in &layouts {
            let job = |sharded| Job { opt, sharded };
            let curve = |sharded: bool| -> Res<Vec<f32>> {
                let job = job(sharded);
                if layout == "threads" {
                    let comms = CommGroup::all(&comm_config())?.into_comms();
                    let got = on_threads(comms, move |c| curve_rank(p, c, rows, job))?;
                    Ok(got.into_iter().next().unwrap_or_default())
                } else {
                    let got = on_processes(args, n, "curve", job)?;
                    Ok(serde_json::from_value(got[0]["curve"].clone())?)
                }
            };
            let timed = |sharded: bool| -> Res<Vec<Timed>> {
                if layout == "threads" {
                    throughput_on_threads(p, job(sharded))
                } else {
                    throughput_on_processes(args, n, job(sharded))
                }
            };
            let (plain_curve, zero_curve) = (curve(false)?, curve(true)?);
            let diff = max_rel_diff(&zero_curve, &plain_curve);
            worst_loss = worst_loss.max(diff);
            let (plain_t, zero_t) = (timed(false)?, timed(true)?);
            let (plain_rate, zero_rate) = (rate(p, n, &plain_t), rate(p, n, &zero_t));
            let (plain_mem, zero_mem) = (state_per_gpu(&plain_t), state_per_gpu(&zero_t));
            let mem_ratio = if plain_mem == 0 {
                None
            } else {
                Some(zero_mem as f64 / plain_mem as f64)
            };
            table.row(&[
                opt.name().to_string(),
                layout.to_string(),
                format!("{diff:.2e}"),
                mib(plain_mem),
                mib(zero_mem),
                mem_ratio.map_or("-".into(), |r| format!("{r:.3}")),
                format!("{plain_rate:.0}"),
                format!("{zero_rate:.0}"),
                format!("{:.3}x", zero_rate / plain_rate),
            ]);
            docs.push(json!({
                "optimizer": opt.torch_name(), "layout": layout, "gpus": n,
                "loss_max_rel_diff": diff,
                "loss_plain": plain_curve, "loss_zero1": zero_curve,
                "state_bytes_per_gpu_plain": plain_mem, "state_bytes_per_gpu_zero1": zero_mem,
                "state_ratio": mem_ratio,
                "samples_per_s_plain": plain_rate, "samples_per_s_zero1": zero_rate,
                "throughput_ratio": zero_rate / plain_rate,
            }));
        }
    }
    if !out.is_json() {
        table.print();
    }
    out.say(format!(
        "targets: loss within {LOSS_TOL:.0e} relative (worst {worst_loss:.2e}); optimizer state \
         per GPU 1/{n} of plain's ({:.3}; padding and Adam's step counters add a few bytes); \
         throughput >= 0.95x plain data-parallel",
        1.0 / n as f64
    ));
    out.put("zero1", json!(docs));
    out.put("zero1_loss_max_rel_diff", json!(worst_loss));
    if worst_loss > LOSS_TOL {
        return Err(format!(
            "the ZeRO-1 loss curve left plain data-parallel training's ({worst_loss:.2e} > \
             {LOSS_TOL:.0e})"
        )
        .into());
    }
    Ok(())
}
