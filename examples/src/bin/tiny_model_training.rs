//! `tiny_model_training`: seed 001, exercise 3, "Moving a tiny model to GPU" —
//! `Sequential(Linear(784, 512), ReLU, Linear(512, 10))`, batch 256, `CrossEntropyLoss`,
//! `SGD(lr=0.1)`: one forward + backward + step, seconds per step on the CPU and on the GPU.
//!
//! - **GPU**: `cuda-stack-nn` (autograd on `Tensor`, the sgemm and backward kernels), the seed's loop:
//!   `zero_grad`, forward, loss, backward, step; 5 warm-up steps, then 20 timed, then one
//!   synchronize (as the seed times it: host wall clock).
//! - **GPU, one graph**: the same step captured once into a CUDA graph (`cuda_stack_nn::CapturedStep`)
//!   and replayed: one launch per step instead of ~30.
//! - **CPU**: the same step done fairly — GEMMs on the `gemm` crate (vectorised micro-kernels
//!   on every core through rayon), elementwise parts as vectorised loops
//!   (`cuda_examples::cpu_mlp`).
//!
//! Both start from the same parameters and batch, and the first step is checked: the losses
//! and the updated parameters must agree within f32 rounding (the GPU's FMA order differs from
//! the CPU GEMM's). The seed's lesson shows in the output: at this size the step is so small
//! that the GPU's advantage is launch and host overhead, not arithmetic.
//!
//! Run: `cargo run --release -p cuda-examples --bin tiny_model_training` (`--quick`: fewer steps).

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::cpu_mlp::CpuMlp;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_nn::{
    class_targets, CapturedStep, Linear, Module, Optimizer, Relu, Sequential, Sgd, SgdConfig, Var,
};
use cuda_stack_runtime::Tensor;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

/// Seed 001 exercise 3 on the CPU and the GPU.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Batch size (the seed's 256).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Timed steps (the seed's 20).
    #[arg(long, default_value_t = 20)]
    iters: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("tiny_model_training", || body(&args))
}

const INPUT: usize = 784;
const HIDDEN: usize = 512;
const CLASSES: usize = 10;
const LR: f64 = 0.1;

/// The model's parameters on the host, in `CpuMlp`'s layout.
fn to_host(l1: &Linear<f32>, l2: &Linear<f32>) -> Result<CpuMlp, Box<dyn std::error::Error>> {
    let get = |v: Option<&Var<f32>>| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
        Ok(v.ok_or("a Linear without bias")?.value().to_vec()?)
    };
    Ok(CpuMlp {
        w1: l1.weight().value().to_vec()?,
        b1: get(l1.bias())?,
        w2: l2.weight().value().to_vec()?,
        b2: get(l2.bias())?,
        input: INPUT,
        hidden: HIDDEN,
        classes: CLASSES,
    })
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    cuda_stack_runtime::set_device(q.device)?;
    let batch = args.batch;
    if batch == 0 || args.iters == 0 {
        return Err("--batch and --iters must be at least 1".into());
    }
    let (warmup, iters) = (q.pick(2, 5), q.pick(3, args.iters));
    out.say(format!(
        "tiny_model_training (seed 001, exercise 3): Linear({INPUT}, {HIDDEN}) → ReLU → \
         Linear({HIDDEN}, {CLASSES}), batch {batch}, CrossEntropyLoss, SGD(lr={LR})\n"
    ));

    // The batch: x ~ N(0, 1), y uniform over the classes (the seed's randn / randint).
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let x_host: Vec<f32> = (0..batch * INPUT)
        .map(|_| rng.sample(StandardNormal))
        .collect();
    let labels: Vec<usize> = (0..batch).map(|_| rng.random_range(0..CLASSES)).collect();

    // GPU model and the CPU twin with the same parameters.
    let (l1, l2) = (
        Linear::<f32>::new(INPUT, HIDDEN, 11)?,
        Linear::new(HIDDEN, CLASSES, 12)?,
    );
    let mut cpu = to_host(&l1, &l2)?;
    let model = Sequential::new().append(l1).append(Relu).append(l2);
    let mut opt = Sgd::new(model.parameters(), SgdConfig::new(LR))?;
    let x = Var::constant(Tensor::from_vec(x_host.clone(), &[batch, INPUT])?);
    let y = class_targets(&labels, CLASSES)?;
    let step = |opt: &mut Sgd<f32>| -> Result<Var<f32>, Box<dyn std::error::Error>> {
        opt.zero_grad();
        let loss = model.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    };

    // One step each from the same start: the same loss and parameters.
    let gpu_loss = step(&mut opt)?.value().item()?;
    let cpu_loss = cpu.step(&x_host, &labels, LR as f32)?;
    let params = model.parameters();
    let gpu_after: Vec<Vec<f32>> = params
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    let cpu_after = [&cpu.w1, &cpu.b1, &cpu.w2, &cpu.b2];
    let pdiff = gpu_after
        .iter()
        .zip(cpu_after)
        .map(|(g, c)| max_diff(g, c))
        .fold(0.0, f32::max);
    out.say(format!(
        "first step from the same parameters: loss GPU {gpu_loss:.6}, CPU {cpu_loss:.6}; \
         updated parameters differ by at most {pdiff:.2e}"
    ));
    if (gpu_loss - cpu_loss).abs() > 1e-4 || pdiff > 1e-5 {
        return Err(format!(
            "GPU and CPU steps disagree: loss {gpu_loss} vs {cpu_loss}, parameters by {pdiff}"
        )
        .into());
    }

    // CPU timing.
    for _ in 0..warmup {
        cpu.step(&x_host, &labels, LR as f32)?;
    }
    let t = Instant::now();
    for _ in 0..iters {
        cpu.step(&x_host, &labels, LR as f32)?;
    }
    let cpu_s = t.elapsed().as_secs_f64() / iters as f64;

    // GPU timing, as the seed: host clock, synchronize at the end.
    for _ in 0..warmup {
        step(&mut opt)?;
    }
    x.value().synchronize()?;
    let t = Instant::now();
    let mut last = None;
    for _ in 0..iters {
        last = Some(step(&mut opt)?);
    }
    x.value().synchronize()?;
    let gpu_s = t.elapsed().as_secs_f64() / iters as f64;
    let final_loss = match last {
        Some(l) => l.value().item()?,
        None => gpu_loss,
    };

    // The same step captured once into a CUDA graph and replayed (`CapturedStep`).
    let (graph, _) = CapturedStep::capture(&mut opt, |o| {
        o.zero_grad();
        model.forward(&x)?.cross_entropy(&y)?.backward()?;
        o.step()
    })?;
    for _ in 0..warmup {
        graph.replay()?;
    }
    graph.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        graph.replay()?;
    }
    graph.synchronize()?;
    let graph_s = t.elapsed().as_secs_f64() / iters as f64;

    out.say(format!(
        "\n{:<48} {:>12}\n{:<48} {:>9.3} ms\n{:<48} {:>9.3} ms  ({:.1}× the CPU)\n{:<48} {:>9.3} ms  \
         ({:.1}× the CPU, {} kernels per replay)",
        "per training step (forward + backward + SGD)",
        "time",
        format!(
            "CPU: gemm crate + vectorised loops, {} threads",
            rayon::current_num_threads()
        ),
        cpu_s * 1e3,
        "GPU: cuda-stack-nn eager (every op a kernel launch)",
        gpu_s * 1e3,
        cpu_s / gpu_s,
        "GPU: the same step as one CUDA graph",
        graph_s * 1e3,
        cpu_s / graph_s,
        graph.kernel_count()?
    ));
    out.say(format!(
        "\nloss after {} GPU steps on the same batch: {final_loss:.4} (from {gpu_loss:.4})",
        1 + warmup + iters
    ));
    out.say(
        "Seed 001's note: for a model this small the GPU step is a few dozen tiny kernels; their \
         launch and the host's bookkeeping, not arithmetic, set its time (see train_bench and \
         small_kernels_pitfall).",
    );
    out.put("batch", json!(batch));
    out.put("cpu_step_ms", json!(cpu_s * 1e3));
    out.put("gpu_step_ms", json!(gpu_s * 1e3));
    out.put("speedup", json!(cpu_s / gpu_s));
    out.put("gpu_graph_step_ms", json!(graph_s * 1e3));
    out.put("first_loss_gpu", json!(gpu_loss));
    out.put("first_loss_cpu", json!(cpu_loss));
    out.put("param_max_diff", json!(pdiff));
    out.finish();
    Ok(())
}
