//! `sync_in_loop_pitfall`: seed 001, "Common performance pitfalls" 3 ("Synchronization points in
//! tight loops"), made runnable.
//!
//! A training-like loop of 1000 steps (`--quick`: 100) on 65,536 f32: each step updates
//! `x = x - lr * g` (one `axpy` launch) and computes `loss = sum(x)` (a two-launch reduction).
//!
//! - **sync every step**: the loss is read back to the host every iteration — a 1-element
//!   device-to-host copy, which waits for the GPU to finish the step, exactly what
//!   `loss.item()` does in a PyTorch loop;
//! - **on the device**: each step's loss is written into slot `i` of a device array, and the host
//!   reads the whole array once at the end (`torch.stack(losses).cpu()`), so the host never waits
//!   inside the loop and keeps the launch queue full.
//!
//! Both totals are measured with the host clock (the second including its final copy). The two
//! runs must produce the same losses bit for bit, and every loss is checked against a CPU
//! simulation (same `fma` updates, f64 sum).
//!
//! Run: `cargo run --release -p cuda-examples --bin sync_in_loop_pitfall [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_examples::verify::{same_bits, within};
use cuda_stack_driver::{Context, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, ReduceAlgo};
use cuda_stack_kernels::Kernels;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Seed 001 pitfall 3: reading a scalar back every iteration vs once at the end")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("sync_in_loop_pitfall", || body(Args::parse()))
}

const LR: f32 = 1e-4;

/// One step: `x = -LR * g + x`, then `loss = sum(x)`.
fn step(
    k: &Kernels,
    s: &Stream,
    g: &DeviceSlice<f32>,
    x: &mut DeviceSlice<f32>,
    loss: &mut DeviceSlice<f32>,
) -> cuda_stack_kernels::Result<()> {
    ops::axpy(k, s, -LR, g, x)?;
    ops::sum(k, s, ReduceAlgo::Fast, x, loss)
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let n = 1usize << 16;
    let iters: usize = args.common.pick(100, 1000);
    let reps = args.common.pick(1, 3);
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    say!(
        q,
        "sync_in_loop_pitfall on {}: {iters} steps of x -= {LR} * g; loss = sum(x), on {n} f32",
        ctx.device().name()?
    );
    let x0 = cuda_stack_kernels::reference::fill_uniform(n, 21, 0);
    let g_host = cuda_stack_kernels::reference::fill_uniform(n, 22, 0);
    let g = s.clone_htod(&g_host)?;
    let mut x = s.clone_htod(&x0)?;
    let mut loss = s.alloc_zeros::<f32>(1)?;
    let mut losses = s.alloc_zeros::<f32>(iters)?;

    // Warm-up.
    for _ in 0..5 {
        step(&k, &s, &g, &mut x, &mut loss)?;
    }
    s.synchronize()?;

    // The .item() loop: one blocking 1-element D2H copy per step.
    let mut synced = Vec::new();
    let mut t_sync = Vec::new();
    for _ in 0..reps {
        s.memcpy_htod(&x0, &mut x)?;
        synced.clear();
        let mut one = [0.0f32];
        let t = Instant::now();
        for _ in 0..iters {
            step(&k, &s, &g, &mut x, &mut loss)?;
            s.memcpy_dtoh(&loss, &mut one)?; // loss.item()
            synced.push(one[0]);
        }
        t_sync.push(t.elapsed().as_secs_f64() * 1e3);
    }

    // On the device: write loss i into slot i; read all of them once.
    let mut on_device = Vec::new();
    let mut t_dev = Vec::new();
    for _ in 0..reps {
        s.memcpy_htod(&x0, &mut x)?;
        let t = Instant::now();
        for i in 0..iters {
            let mut slot = losses.slice_mut(i..i + 1)?;
            step(&k, &s, &g, &mut x, &mut slot)?;
        }
        on_device = s.clone_dtoh(&losses)?;
        t_dev.push(t.elapsed().as_secs_f64() * 1e3);
    }

    // Checks: identical losses, and agreement with a CPU simulation.
    same_bits(
        "the losses kept on the device vs those read every step",
        &on_device,
        &synced,
    )?;
    let mut xc = x0.clone();
    let mut worst = 0.0f64;
    for (i, &got) in synced.iter().enumerate() {
        for (v, gv) in xc.iter_mut().zip(&g_host) {
            *v = (-LR).mul_add(*gv, *v);
        }
        let want: f64 = xc.iter().map(|&v| f64::from(v)).sum();
        let err = (f64::from(got) - want).abs() / want.abs();
        worst = worst.max(err);
        within(
            &format!("step {i}: GPU loss {got} vs CPU {want}: relative error"),
            err,
            1e-5,
        )?;
    }

    let (ms_sync, ms_dev) = (median(&t_sync), median(&t_dev));
    let per = |ms: f64| ms * 1e3 / iters as f64;
    if q {
        let j = serde_json::json!({
            "program": "sync_in_loop_pitfall",
            "n": n,
            "iters": iters,
            "sync_every_step_ms": ms_sync,
            "on_device_ms": ms_dev,
            "speedup": ms_sync / ms_dev,
            "max_rel_error": worst,
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    let mut t = Table::new(&["loop", "host waits", "total ms", "µs per step"]);
    t.row(&[
        "loss.item() every step".into(),
        iters.to_string(),
        format!("{ms_sync:.2}"),
        format!("{:.2}", per(ms_sync)),
    ]);
    t.row(&[
        "losses kept on the GPU, read once".into(),
        "1".into(),
        format!("{ms_dev:.2}"),
        format!("{:.2}", per(ms_dev)),
    ]);
    println!();
    t.print();
    println!(
        "Reading the scalar every step makes the host wait for the GPU {iters} times, so the GPU \
         idles while\nthe host queues the next step: {:.1}× slower here. Both loops computed the \
         same {iters} losses bit for bit;\nthey match a CPU simulation (worst relative error \
         {worst:.1e}). Last loss: {}.",
        ms_sync / ms_dev,
        synced.last().copied().unwrap_or(f32::NAN)
    );
    Ok(())
}
