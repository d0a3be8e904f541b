//! `train_bench`: what one training step costs, ours against PyTorch's in the same session —
//! seed 001 exercise 3's step (`Linear(784, 512) → ReLU → Linear(512, 10)`, batch 256,
//! cross-entropy, SGD) and seed 004's network step (`Linear(512, 256) → FusedOpLayer(256, 2) →
//! Linear(256, 10)`, batch 32, `loss = output.sum()`, Adam).
//!
//! For each: wall-clock µs per step (host clock over many steps, one synchronize at the end,
//! as PyTorch's script measures), host µs spent issuing a step, and the kernel launches and
//! driver calls one step makes (`cuda_stack_sys::trace`); then the same step captured whole into one
//! CUDA graph (`cuda_stack_nn::CapturedStep`) and replayed: µs per replay and kernels in the graph.
//! PyTorch's eager and CUDA-graph figures come from `tools/torch_train.py` run on the same
//! machine (`--torch-train FILE`). Targets (issue 10): eager step ≤ 0.5 × PyTorch's eager step;
//! graph-captured step ≤ 1.0 × PyTorch's `torch.cuda.graph`-captured step.
//!
//! Run: `python3 tools/torch_train.py > t.json; cargo run --release -p cuda-examples --bin
//! train_bench -- --torch-train t.json` (`--quick`: fewer steps).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::trace_log::CallRecorder;
use cuda_stack_nn::{
    class_targets, Adam, AdamConfig, CapturedStep, FusedOpLayer, Linear, Module, Optimizer, Relu,
    Sequential, Sgd, SgdConfig, Var,
};
use cuda_stack_runtime::Tensor;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Training-step cost against PyTorch.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Timed steps per workload.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// The JSON printed by `tools/torch_train.py` on this machine.
    #[arg(long)]
    torch_train: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("train_bench", || body(&args))
}

type Step<'a> = Box<dyn FnMut() -> Result<(), Box<dyn std::error::Error>> + 'a>;

/// One workload's measurements.
struct Measured {
    wall_us: f64,
    host_us: f64,
    launches: usize,
    driver_calls: usize,
    /// µs per replay of the captured step, host µs per replay call, and kernels in its graph.
    graph: Option<(f64, f64, usize)>,
}

/// µs per replay (host clock over `steps` replays, one synchronize at the end), host µs spent
/// in each `replay` call, and the graph's kernel count.
fn time_graph(
    g: &CapturedStep,
    steps: usize,
) -> Result<(f64, f64, usize), Box<dyn std::error::Error>> {
    for _ in 0..20 {
        g.replay()?;
    }
    g.synchronize()?;
    let mut host = 0.0;
    let t = Instant::now();
    for _ in 0..steps {
        let s = Instant::now();
        g.replay()?;
        host += s.elapsed().as_secs_f64();
    }
    g.synchronize()?;
    let n = steps as f64;
    Ok((
        t.elapsed().as_secs_f64() / n * 1e6,
        host / n * 1e6,
        g.kernel_count()?,
    ))
}

fn measure(
    mut step: Step<'_>,
    steps: usize,
    sync: &Tensor<f32>,
) -> Result<Measured, Box<dyn std::error::Error>> {
    for _ in 0..20 {
        step()?;
    }
    sync.synchronize()?;
    // Launches and driver calls of one step.
    let rec = CallRecorder::start();
    step()?;
    let calls = rec.take();
    drop(rec);
    let launches = calls
        .iter()
        .filter(|c| c.call == "cuLaunchKernel" || c.call == "cuLaunchKernelEx")
        .count();
    sync.synchronize()?;
    let mut host = 0.0;
    let t = Instant::now();
    for _ in 0..steps {
        let s = Instant::now();
        step()?;
        host += s.elapsed().as_secs_f64();
    }
    sync.synchronize()?;
    Ok(Measured {
        wall_us: t.elapsed().as_secs_f64() / steps as f64 * 1e6,
        host_us: host / steps as f64 * 1e6,
        launches,
        driver_calls: calls.len(),
        graph: None,
    })
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    cuda_stack_runtime::set_device(q.device)?;
    let steps = q.pick(20, args.steps.max(1));
    let torch: Value = match &args.torch_train {
        Some(p) => serde_json::from_str(
            &std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))?,
        )?,
        None => Value::Null,
    };
    let sync = Tensor::<f32>::zeros(&[1])?;

    // Seed 001 exercise 3.
    let m1 = Sequential::<f32>::new()
        .append(Linear::new(784, 512, 1)?)
        .append(Relu)
        .append(Linear::new(512, 10, 2)?);
    let mut o1 = Sgd::new(m1.parameters(), SgdConfig::new(0.1))?;
    let x1 = Var::constant(Tensor::<f32>::randn(&[256, 784], 3)?);
    let labels: Vec<usize> = (0..256).map(|i| (i * 7) % 10).collect();
    let y1 = class_targets(&labels, 10)?;
    let s1: Step<'_> = Box::new(|| {
        o1.zero_grad();
        m1.forward(&x1)?.cross_entropy(&y1)?.backward()?;
        o1.step()?;
        Ok(())
    });
    let mut r1 = measure(s1, steps, &sync)?;
    let (g1, _) = CapturedStep::capture(&mut o1, |o| {
        o.zero_grad();
        m1.forward(&x1)?.cross_entropy(&y1)?.backward()?;
        o.step()
    })?;
    r1.graph = Some(time_graph(&g1, steps)?);

    // Seed 004's network.
    let m2 = Sequential::<f32>::new()
        .append(Linear::new(512, 256, 4)?)
        .append(FusedOpLayer::new(256, 2.0)?)
        .append(Linear::new(256, 10, 5)?);
    let mut o2 = Adam::new(m2.parameters(), AdamConfig::new(1e-3))?;
    let x2 = Var::constant(Tensor::<f32>::randn(&[32, 512], 6)?);
    let s2: Step<'_> = Box::new(|| {
        o2.zero_grad();
        m2.forward(&x2)?.sum_all()?.backward()?;
        o2.step()?;
        Ok(())
    });
    let mut r2 = measure(s2, steps, &sync)?;
    let (g2, _) = CapturedStep::capture(&mut o2, |o| {
        o.zero_grad();
        m2.forward(&x2)?.sum_all()?.backward()?;
        o.step()
    })?;
    r2.graph = Some(time_graph(&g2, steps)?);

    let mut table = Table::new(&[
        "workload",
        "ours eager µs",
        "host µs",
        "launches",
        "driver calls",
        "torch eager µs",
        "torch kernels",
        "ours / torch eager",
        "ours graph µs",
        "graph host µs",
        "graph kernels",
        "torch graph µs",
        "ours / torch graph",
    ]);
    let mut rows = Vec::new();
    for (name, r) in [("seed001_mlp", &r1), ("seed004_fused", &r2)] {
        let te = torch[format!("{name}_eager_us")].as_f64();
        let tk = torch[format!("{name}_kernels")].as_f64();
        let tg = torch[format!("{name}_graph_us")].as_f64();
        let fmt = |v: Option<f64>, d: usize| v.map_or("—".to_string(), |v| format!("{v:.d$}"));
        let ratio = te.map(|t| r.wall_us / t);
        let gus = r.graph.map(|g| g.0);
        let ghost = r.graph.map(|g| g.1);
        let gk = r.graph.map(|g| g.2);
        let gratio = gus.zip(tg).map(|(o, t)| o / t);
        table.row(&[
            name.to_string(),
            format!("{:.1}", r.wall_us),
            format!("{:.1}", r.host_us),
            r.launches.to_string(),
            r.driver_calls.to_string(),
            fmt(te, 1),
            fmt(tk, 0),
            ratio.map_or("—".into(), |v| {
                format!(
                    "{v:.2} ({})",
                    if v <= 0.5 {
                        "PASS ≤ 0.5"
                    } else {
                        "MISS > 0.5"
                    }
                )
            }),
            fmt(gus, 1),
            fmt(ghost, 1),
            gk.map_or("—".into(), |k| k.to_string()),
            fmt(tg, 1),
            gratio.map_or("—".into(), |v| {
                format!(
                    "{v:.2} ({})",
                    if v <= 1.0 {
                        "PASS ≤ 1.0"
                    } else {
                        "MISS > 1.0"
                    }
                )
            }),
        ]);
        rows.push(json!({
            "workload": name, "ours_eager_us": r.wall_us, "ours_host_us": r.host_us,
            "launches": r.launches, "driver_calls": r.driver_calls, "torch_eager_us": te,
            "torch_kernels": tk, "ratio_eager": ratio, "torch_graph_us": tg,
            "ours_graph_us": gus, "ours_graph_host_us": ghost, "graph_kernels": gk,
            "ratio_graph": gratio,
        }));
    }
    out.say(format!(
        "train_bench: one training step (zero_grad, forward, backward, optimizer step), {steps} \
         steps timed{}\n",
        if torch.is_null() {
            " (no --torch-train file: PyTorch's columns are empty)"
        } else {
            ", PyTorch from tools/torch_train.py on this machine"
        }
    ));
    out.say(table.render());
    out.put("rows", json!(rows));
    out.finish();
    Ok(())
}
