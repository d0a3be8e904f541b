//! `elementwise_timing`: seed 001, Exercise 1 ("Basic CPU vs GPU timing for a tensor op"), made
//! runnable.
//!
//! `y = x * x` on the CPU (one thread, and all threads) and on the GPU, at 1M and 10M elements
//! (and 100M without `--quick`). As in the exercise, the GPU input is moved once, the op is warmed
//! up, and the GPU is timed *compute only*: host clock around the op plus `synchronize()`, and
//! also with CUDA events. The very first (cold) GPU call is timed too, to show what the warm-up is
//! for. Every GPU result is compared bit for bit with the CPU's (an f32 product is exact IEEE on
//! both).
//!
//! Run: `cargo run --release -p cuda-examples --bin elementwise_timing [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_examples::timing::GpuTimer;
use cuda_examples::verify::same_bits;
use cuda_stack_driver::{Context, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::Kernels;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Seed 001 exercise 1: x * x on the CPU vs the GPU")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("elementwise_timing", || body(Args::parse()))
}

/// `x * x` on `threads` CPU threads into a new Vec (like `x_cpu * x_cpu`, which allocates).
fn cpu_square(x: &[f32], threads: usize) -> Vec<f32> {
    if threads <= 1 {
        return x.iter().map(|v| v * v).collect();
    }
    let mut y = vec![0.0f32; x.len()];
    let chunk = x.len().div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        for (xs, ys) in x.chunks(chunk).zip(y.chunks_mut(chunk)) {
            sc.spawn(move || {
                for (o, v) in ys.iter_mut().zip(xs) {
                    *o = v * v;
                }
            });
        }
    });
    y
}

fn gpu_square(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    y: &mut DeviceSlice<f32>,
) -> cuda_stack_kernels::Result<()> {
    ops::binary(k, s, BinaryOp::Mul, x, x, y)
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let sizes: Vec<usize> = if args.common.quick {
        vec![1_000_000, 10_000_000]
    } else {
        vec![1_000_000, 10_000_000, 100_000_000]
    };
    let reps = args.common.pick(3, 10);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let t = Instant::now();
    let k = Kernels::get(&ctx)?;
    let t_load = t.elapsed();
    say!(
        q,
        "elementwise_timing on {}: y = x * x, f32; kernels loaded (PTX JIT) in {:.1} ms; \
         CPU: {threads} threads",
        ctx.device().name()?,
        t_load.as_secs_f64() * 1e3
    );
    let timer = GpuTimer::new(&ctx)?;
    let mut table = Table::new(&[
        "N",
        "CPU 1 thread",
        &format!("CPU {threads} threads"),
        "GPU host clock + sync",
        "GPU events",
        "GPU GB/s",
        "speedup",
    ]);
    let mut rows = Vec::new();
    let mut cold_ms = None;
    for &n in &sizes {
        // x = randn(N), generated on the GPU and copied to the host once (the CPU's input).
        let mut x = s.alloc_zeros::<f32>(n)?;
        ops::fill_normal(&k, &s, &mut x, 7, 0)?;
        let x_cpu = s.clone_dtoh(&x)?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        s.synchronize()?;

        if cold_ms.is_none() {
            // The first call of this kernel in the process (what the warm-up absorbs).
            let t = Instant::now();
            gpu_square(&k, &s, &x, &mut y)?;
            s.synchronize()?;
            cold_ms = Some(t.elapsed().as_secs_f64() * 1e3);
        }
        gpu_square(&k, &s, &x, &mut y)?;
        s.synchronize()?;

        let (mut c1, mut cn, mut gh, mut ge) = (vec![], vec![], vec![], vec![]);
        let mut y_cpu = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            y_cpu = cpu_square(&x_cpu, 1);
            c1.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let y_par = cpu_square(&x_cpu, threads);
            cn.push(t.elapsed().as_secs_f64() * 1e3);
            if y_par != y_cpu {
                return Err(
                    "the multi-threaded CPU result differs from the single-threaded".into(),
                );
            }

            let t = Instant::now();
            gpu_square(&k, &s, &x, &mut y)?;
            s.synchronize()?;
            gh.push(t.elapsed().as_secs_f64() * 1e3);

            let gpu = timer.time(&s, |s| gpu_square(&k, s, &x, &mut y))?;
            ge.push(gpu.as_secs_f64() * 1e3);
        }
        same_bits(
            &format!("N = {n}: GPU vs the CPU's x * x"),
            &s.clone_dtoh(&y)?,
            &y_cpu,
        )?;
        let (c1, cn, gh, ge) = (median(&c1), median(&cn), median(&gh), median(&ge));
        let gbs = 8.0 * n as f64 / (ge * 1e-3) / 1e9;
        table.row(&[
            n.to_string(),
            format!("{c1:.3} ms"),
            format!("{cn:.3} ms"),
            format!("{gh:.3} ms"),
            format!("{ge:.3} ms"),
            format!("{gbs:.0}"),
            format!("{:.1}× / {:.1}×", c1 / gh, cn / gh),
        ]);
        rows.push(serde_json::json!({
            "n": n, "cpu_1t_ms": c1, "cpu_mt_ms": cn, "gpu_sync_ms": gh,
            "gpu_events_ms": ge, "gpu_gbs": gbs,
        }));
    }
    if q {
        let j = serde_json::json!({
            "program": "elementwise_timing",
            "cpu_threads": threads,
            "kernel_load_ms": t_load.as_secs_f64() * 1e3,
            "cold_first_call_ms": cold_ms,
            "sizes": rows,
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    println!();
    table.print();
    println!(
        "Medians of {reps} runs. speedup = CPU (1 thread / {threads} threads) ÷ GPU host clock + \
         sync.\nGB/s counts 8 bytes per element (read x, write y). The CPU times include \
         allocating y,\nas `x_cpu * x_cpu` does; the GPU's y is allocated once (PyTorch's caching \
         allocator reuses it).\nFirst GPU call (cold, before warm-up): {:.3} ms. All GPU results \
         equal the CPU's bit for bit.",
        cold_ms.unwrap_or(f64::NAN)
    );
    Ok(())
}
