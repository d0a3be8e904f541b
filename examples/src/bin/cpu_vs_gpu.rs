//! `cpu_vs_gpu`: seed 000's "Complete Working Example" — `randn(size)` twice and an add, on the
//! CPU and on the GPU (with `torch.cuda.synchronize()`'s equivalent before stopping the clock),
//! and the speedup. The CPU side is a fair, optimised implementation (`cpu_baseline`: rand_distr's
//! normal sampler on every core with rayon, as a CPU library would do it), and the output says
//! so; the GPU's results are checked against its Philox twin. The first GPU run pays for start-up (context, module JIT, allocator), as the
//! seed's script does; the warm run shows the steady state.
//!
//! Run: `cargo run --release -p cuda-examples --bin cpu_vs_gpu [-- --size N --quick]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::cpu_baseline;
use cuda_examples::exit::{run, ProgramResult};
use cuda_stack_kernels::reference;
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Seed 000's benchmark_gpu_vs_cpu(), in Rust")]
struct Args {
    /// Elements per tensor (the seed uses 1,000,000).
    #[arg(long, default_value_t = 1_000_000)]
    size: usize,
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("cpu_vs_gpu", body)
}

fn body() -> ProgramResult {
    let args = Args::parse();
    let size = if args.common.quick {
        args.size.min(1 << 18)
    } else {
        args.size
    };
    rt::set_device(args.common.device)?;

    // CPU computation: a fair, optimised one (normal samples from rand_distr over xoshiro256++
    // and the add, on every core with rayon), warmed once so the thread pool exists.
    std::hint::black_box(cpu_baseline::randn_add(size.min(1 << 16)));
    let start = Instant::now();
    std::hint::black_box(cpu_baseline::randn_add(size));
    let cpu_time = start.elapsed().as_secs_f64();

    // GPU computation, timed like the seed: create, add, synchronize.
    let gpu = || -> Result<(f64, Tensor<f32>), Box<dyn std::error::Error>> {
        let start = Instant::now();
        let a_gpu = Tensor::<f32>::randn(&[size], 1)?;
        let b_gpu = Tensor::<f32>::randn(&[size], 2)?;
        let c_gpu = (&a_gpu + &b_gpu)?;
        c_gpu.synchronize()?; // torch.cuda.synchronize(): wait for GPU completion
        Ok((start.elapsed().as_secs_f64(), c_gpu))
    };
    let (cold, _) = gpu()?;
    let (gpu_time, c_gpu) = gpu()?;

    println!("size = {size}");
    println!("{}", cpu_baseline::describe());
    println!("CPU time: {:.3} ms", cpu_time * 1e3);
    println!(
        "GPU time: {:.3} ms   (first run, with start-up: {:.3} ms)",
        gpu_time * 1e3,
        cold * 1e3
    );
    println!(
        "Speedup: {:.1}x   (first run: {:.2}x)",
        cpu_time / gpu_time,
        cpu_time / cold
    );

    // The GPU's randn has a CPU twin (the same Philox generator, a scalar loop kept for checking
    // only, never timed): the results agree to a few ulp.
    let a_cpu = reference::fill_normal(size, 1, 0);
    let b_cpu = reference::fill_normal(size, 2, 0);
    let c_cpu: Vec<f32> = a_cpu.iter().zip(&b_cpu).map(|(a, b)| a + b).collect();
    let back = c_gpu.to_vec()?;
    let worst = back
        .iter()
        .zip(&c_cpu)
        .map(|(g, c)| (g - c).abs() / (1.0 + c.abs()))
        .fold(0f32, f32::max);
    println!("max relative difference GPU vs CPU: {worst:.2e}");
    if worst > 1e-5 {
        return Err(format!("GPU result differs from the CPU: {worst:e}").into());
    }
    Ok(())
}
