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
//!
//! Every process runs with `NCCL_NVLS_ENABLE=0` (set first thing in `main`, and passed to the
//! children explicitly).
//!
//! Run: `cargo run --release -p cuda-examples --bin dp_train` (`--quick`: small model, few
//! steps; `--layout threads|processes|both`).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::run;
use cuda_examples::output::Out;
use cuda_stack_nccl::{CommConfig, CommGroup, Communicator};
use cuda_stack_nn::{
    class_targets, DataParallel, DataParallelConfig, Linear, Module, Optimizer, Relu, Sequential,
    Sgd, SgdConfig, Var,
};
use cuda_stack_runtime::{set_device, Tensor};
use serde_json::{json, Value};
use std::error::Error;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Data-parallel training on every GPU: loss curves and step throughput.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
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
    if let (Some(rank), Some(world), Some(addr)) = (args.worker, args.world, args.addr.clone()) {
        return run("dp_train worker", || {
            worker(&args, rank, world, &addr).map_err(|e| -> Box<dyn Error> { e })
        });
    }
    run("dp_train", || {
        body(&args).map_err(|e| -> Box<dyn Error> { e })
    })
}

/// The settings a run uses (the children get the same through their arguments).
#[derive(Debug, Clone, Copy)]
struct Plan {
    curve_steps: usize,
    curve_rows: usize,
    width: usize,
    layers: usize,
    batch: usize,
    steps: usize,
}

impl Plan {
    fn of(args: &Args) -> Plan {
        let c = &args.common;
        Plan {
            curve_steps: c.pick(8, 30),
            curve_rows: 64,
            width: args.width.unwrap_or(c.pick(512, 4096)),
            layers: args.layers,
            batch: args.batch.unwrap_or(c.pick(64, 1024)),
            steps: args.steps.unwrap_or(c.pick(5, 30)),
        }
    }
}

const IN: usize = 32;
const CLASSES: usize = 10;

fn classifier(seed: u64) -> cuda_stack_nn::Result<Sequential<f32>> {
    Ok(Sequential::new()
        .append(Linear::new(IN, 64, seed)?)
        .append(Relu)
        .append(Linear::new(64, CLASSES, seed + 1)?))
}

/// Rows `lo..hi` of step `step`'s global batch (deterministic, so every layout sees the same).
fn batch(step: usize, lo: usize, hi: usize) -> cuda_stack_nn::Result<(Var<f32>, Tensor<i32>)> {
    let mut x = Vec::with_capacity((hi - lo) * IN);
    let mut labels = Vec::with_capacity(hi - lo);
    for i in lo..hi {
        for j in 0..IN {
            let h = (step as u64 * 1_000_003 + i as u64 * 7919 + j as u64)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x.push(((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
        }
        labels.push((i * 7 + step * 3) % CLASSES);
    }
    Ok((
        Var::constant(Tensor::from_vec(x, &[hi - lo, IN])?),
        class_targets(&labels, CLASSES)?,
    ))
}

fn optimizer(params: Vec<Var<f32>>) -> cuda_stack_nn::Result<Sgd<f32>> {
    Sgd::new(
        params,
        SgdConfig {
            momentum: 0.9,
            ..SgdConfig::new(0.05)
        },
    )
}

/// The loss curve of plain training on device 0 with the whole batch.
fn curve_plain(p: Plan, rows: usize) -> Res<Vec<f32>> {
    set_device(0)?;
    let m = classifier(11)?;
    let mut opt = optimizer(m.parameters())?;
    let mut out = Vec::new();
    for step in 0..p.curve_steps {
        let (x, y) = batch(step, 0, rows)?;
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        out.push(loss.value().item()?);
    }
    Ok(out)
}

/// Rank `comm.rank()`'s part of the data-parallel run: the global loss (mean over ranks).
fn curve_rank(p: Plan, comm: Communicator, rows: usize) -> Res<Vec<f32>> {
    set_device(comm.device())?;
    let (r, n) = (comm.rank(), comm.size());
    let share = rows / n;
    let m = classifier(11 + r as u64)?; // rank 0's values are broadcast to the others
    let ddp = DataParallel::new(m.parameters(), comm, DataParallelConfig::default())?;
    let mut opt = optimizer(m.parameters())?;
    let mut out = Vec::new();
    for step in 0..p.curve_steps {
        let (x, y) = batch(step, r * share, (r + 1) * share)?;
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        ddp.finish_gradients()?;
        opt.step()?;
        out.push(ddp.mean_over_ranks(&loss.value())?.item()?);
    }
    Ok(out)
}

/// The throughput model: `layers` × (Linear(width, width) + ReLU), then Linear(width, 16).
fn mlp(p: Plan) -> cuda_stack_nn::Result<Sequential<f32>> {
    let mut m = Sequential::new();
    for l in 0..p.layers {
        m = m
            .append(Linear::new(p.width, p.width, 100 + l as u64)?)
            .append(Relu);
    }
    Ok(m.append(Linear::new(p.width, 16, 99)?))
}

/// Timed training steps of the throughput model on the current device: seconds for
/// `p.steps` steps after two warm-up steps (host clock, one synchronize at the end, as
/// PyTorch's timing loops do), with or without data parallelism.
fn throughput_run(p: Plan, comm: Option<Communicator>, seed: u64) -> Res<f64> {
    let m = mlp(p)?;
    let ddp = comm
        .map(|c| DataParallel::new(m.parameters(), c, DataParallelConfig::default()))
        .transpose()?;
    let mut opt = Sgd::new(m.parameters(), SgdConfig::new(1e-4))?;
    let x = Var::constant(Tensor::randn(&[p.batch, p.width], seed)?);
    let labels: Vec<usize> = (0..p.batch).map(|i| (i * 5 + seed as usize) % 16).collect();
    let y = class_targets(&labels, 16)?;
    let mut step = || -> Res<Var<f32>> {
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        if let Some(d) = &ddp {
            d.finish_gradients()?;
        }
        opt.step()?;
        Ok(loss)
    };
    for _ in 0..2 {
        step()?;
    }
    let last = step()?;
    last.value().item()?; // everything before is done
    let t = Instant::now();
    let mut loss = last;
    for _ in 0..p.steps {
        loss = step()?;
    }
    let l = loss.value().item()?;
    if !l.is_finite() {
        return Err(format!("the loss is {l}").into());
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Samples per second of `ranks` ranks, each of which took `secs` for the timed steps.
fn rate(p: Plan, ranks: usize, secs: &[f64]) -> f64 {
    let slowest = secs.iter().copied().fold(0.0, f64::max);
    (ranks * p.batch * p.steps) as f64 / slowest
}

/// One thread per GPU, each with its communicator and with that GPU as its current device (a
/// thread's current device is its own and starts at 0: without this, every rank's tensors would
/// be made on GPU 0); `f` is a rank's work. Every rank's result is collected: the first error
/// that is not a timeout is returned (a rank that failed on its own makes the others wait for
/// it until their timeout, and the first error is the one that says why).
fn on_threads<R: Send + 'static>(
    comms: Vec<Communicator>,
    f: impl Fn(Communicator) -> Res<R> + Send + Sync + Copy + 'static,
) -> Res<Vec<R>> {
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<R, String> {
                set_device(c.device()).map_err(|e| e.to_string())?;
                let rank = c.rank();
                f(c).map_err(|e| format!("rank {rank}: {e}"))
            })
        })
        .collect();
    let results: Vec<Result<R, String>> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a rank's thread panicked".into()))
        })
        .collect();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if let Some(first) = errors
        .iter()
        .find(|e| !e.contains("did not finish within"))
        .or(errors.first())
    {
        return Err(first.to_string().into());
    }
    Ok(results.into_iter().filter_map(Result::ok).collect())
}

fn comm_config() -> CommConfig {
    CommConfig::with_timeout(Some(Duration::from_secs(120)))
}

/// Starts one child per GPU (this program with `--worker`), collects the JSON each prints.
fn on_processes(args: &Args, n: usize, task: &str) -> Res<Vec<Value>> {
    let exe = std::env::current_exe()?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let addr = format!("127.0.0.1:{port}");
    let p = Plan::of(args);
    let mut children = Vec::new();
    for rank in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.env(cuda_stack_nccl::NVLS_VAR, "0")
            .args(["--worker", &rank.to_string(), "--world", &n.to_string()])
            .args(["--addr", &addr, "--layout", task])
            .args([
                "--width",
                &p.width.to_string(),
                "--layers",
                &p.layers.to_string(),
            ])
            .args([
                "--batch",
                &p.batch.to_string(),
                "--steps",
                &p.steps.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if args.common.quick {
            cmd.arg("--quick");
        }
        children.push(cmd.spawn()?);
    }
    // Each child's output is read on a thread of its own (a full pipe must never stall it).
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for (rank, ch) in children.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((rank, ch.wait_with_output()));
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut outs = vec![Value::Null; n];
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((rank, o)) = rx.recv_timeout(left) else {
            for pid in &pids {
                // Only the children this run started, by id.
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
            return Err("a worker process did not finish within 15 minutes".into());
        };
        let o = o?;
        if !o.status.success() {
            return Err(format!("worker {rank} failed ({})", o.status).into());
        }
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text.lines().last().unwrap_or("");
        outs[rank] = serde_json::from_str(line)
            .map_err(|e| format!("worker {rank} output {line:?}: {e}"))?;
    }
    Ok(outs)
}

/// A child: rank `rank` of `world`, one GPU; prints one JSON line.
fn worker(args: &Args, rank: usize, world: usize, addr: &str) -> Res<()> {
    let p = Plan::of(args);
    let id = cuda_stack_nccl::tcp::exchange_unique_id(addr, rank, world, Duration::from_secs(120))?;
    let comm = Communicator::init_rank(&id, rank, world, rank, &comm_config())?;
    set_device(rank)?;
    let doc = match args.layout.as_str() {
        "curve" => json!({"rank": rank, "curve": curve_rank(p, comm, p.curve_rows * world)?}),
        _ => json!({"rank": rank, "secs": throughput_run(p, Some(comm), 7 + rank as u64)?}),
    };
    println!("{doc}");
    Ok(())
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
        let got = on_threads(comms, move |c| curve_rank(p, c, rows))?;
        curves.push((format!("{n} GPU(s), threads"), got[0].clone()));
    }
    if processes {
        let got = on_processes(args, n, "curve")?;
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
        "throughput: {} x Linear({w}, {w}) + ReLU, Linear({w}, 16), batch {} per GPU, {} timed steps",
        p.layers,
        p.batch,
        p.steps,
        w = p.width
    ));
    set_device(0)?;
    let plain = rate(p, 1, &[throughput_run(p, None, 7)?]);
    let single = CommGroup::new(&[0], &comm_config())?.into_comms();
    let ddp1 = rate(
        p,
        1,
        &on_threads(single, move |c| throughput_run(p, Some(c), 7))?,
    );
    let mut table = Table::new(&["run", "GPUs", "samples/s", "vs one GPU plain"]);
    let mut results = vec![
        ("plain, one GPU".to_string(), 1, plain),
        ("data-parallel, 1 rank".to_string(), 1, ddp1),
    ];
    if n >= 2 {
        if threads {
            let comms = CommGroup::all(&comm_config())?.into_comms();
            let secs = on_threads(comms, move |c| {
                let seed = 7 + c.rank() as u64;
                throughput_run(p, Some(c), seed)
            })?;
            results.push((format!("data-parallel, {n} threads"), n, rate(p, n, &secs)));
        }
        if processes {
            let got = on_processes(args, n, "throughput")?;
            let secs: Vec<f64> = got.iter().filter_map(|v| v["secs"].as_f64()).collect();
            results.push((
                format!("data-parallel, {n} processes"),
                n,
                rate(p, n, &secs),
            ));
        }
    } else if processes {
        // One GPU: the one-process-per-GPU path still runs (one child, TCP id exchange).
        let got = on_processes(args, 1, "throughput")?;
        let secs: Vec<f64> = got.iter().filter_map(|v| v["secs"].as_f64()).collect();
        results.push(("data-parallel, 1 process".to_string(), 1, rate(p, 1, &secs)));
    }
    for (name, g, r) in &results {
        table.row(&[
            name.clone(),
            g.to_string(),
            format!("{r:.0}"),
            format!("{:.2}x", r / plain),
        ]);
    }
    if !out.is_json() {
        table.print();
    }
    if n >= 2 {
        let best = results
            .iter()
            .filter(|(_, g, _)| *g == n)
            .map(|(_, _, r)| *r)
            .fold(0.0, f64::max);
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
            .map(|(k, g, r)| json!({"run": k, "gpus": g, "samples_per_s": r}))
            .collect::<Vec<_>>()),
    );
    out.finish();
    Ok(())
}
