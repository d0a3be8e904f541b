//! `transfer_cost`: seed 001, Exercise 2 ("Cost of host–device transfers") and the pinned-memory
//! section, made runnable.
//!
//! Copies 256 MiB (`--quick`: 16 MiB) of f32 host → device and device → host three ways:
//!
//! - **pageable**: from/to an ordinary `Vec` through the driver (`cuMemcpyHtoD`/`DtoH`; the
//!   driver stages through its own small pinned buffers, one CPU thread) — `x_cpu.to("cuda")`;
//! - **pinned**: from/to page-locked memory (`PinnedBuffer`) with `copy_htod_async` /
//!   `copy_dtoh_async` — `pin_memory=True` + `non_blocking=True`;
//! - **staged**: from/to the same pageable `Vec` through `cuda-stack-runtime`'s staging pool
//!   (`copy_htod_pageable`: pinned buffers, pipelined, several threads).
//!
//! Each is timed with the host clock around a call that returns when the copy is complete, and
//! compared with the GPU time of one elementwise op (`x * x`) on the same data. Every copy is
//! verified (the destination is cleared first and compared with the source afterwards). With
//! `--torch FILE` (the output of `anchors/torch_baseline.py` from the same machine) PyTorch's
//! pageable and pinned figures are printed alongside, with the staged / PyTorch-pageable ratio
//! (the runtime's target: ≥ 2×).
//!
//! Run: `cargo run --release -p cuda-examples --bin transfer_cost [-- --quick] [--torch FILE] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_examples::timing::gpu_time;
use cuda_examples::torch::TorchFlag;
use cuda_examples::verify::same_bits;
use cuda_stack_driver::PinnedBuffer;
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::Kernels;
use cuda_stack_runtime::{self as rt, Runtime};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Seed 001 exercise 2: host-device transfer cost, pageable vs pinned vs staged")]
struct Args {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    torch: TorchFlag,
}

fn main() -> ExitCode {
    exit::run("transfer_cost", || body(Args::parse()))
}

/// Median milliseconds of `reps` calls of `f`, after one warm-up call.
fn time_ms(
    reps: usize,
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    f()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&v))
}

/// The copy `got` equals its source `want` bit for bit.
fn same(what: &str, got: &[f32], want: &[f32]) -> ProgramResult {
    Ok(same_bits(
        &format!("{what}: the copy vs its source"),
        got,
        want,
    )?)
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let mib: usize = args.common.pick(16, 256);
    let n = (mib << 20) / 4;
    let bytes = (n * 4) as f64;
    let reps = args.common.pick(3, 5);
    let torch = args.torch.load()?;
    rt::set_device(args.common.device)?;
    let runtime = Runtime::current()?;
    let (ctx, s) = (runtime.context(), runtime.default_stream());
    let staging = runtime.staging_config();
    say!(
        q,
        "transfer_cost on {}: {mib} MiB of f32, median of {reps} (after 1 warm-up)\nstaging: \
         {} MiB chunks, {} threads",
        runtime.device().name()?,
        staging.chunk_bytes >> 20,
        staging.threads
    );

    let host: Vec<f32> = (0..n).map(|i| (i % 1_000_003) as f32 - 500_000.0).collect();
    let mut back = vec![0.0f32; n];
    let mut d = s.alloc_zeros::<f32>(n)?;
    let t = Instant::now();
    let pinned_in = PinnedBuffer::from_slice(ctx, &host)?;
    let mut pinned_out = PinnedBuffer::<f32>::zeroed(ctx, n)?;
    let t_pin = t.elapsed().as_secs_f64() * 1e3;
    say!(
        q,
        "allocating 2 × {mib} MiB of pinned memory (cuMemHostAlloc) and filling one: {t_pin:.1} ms"
    );

    let mut results: Vec<(&str, &str, f64)> = Vec::new();

    // Pageable, through the driver.
    s.memset_zeros(&mut d)?;
    let ms = time_ms(reps, || Ok(s.memcpy_htod(&host, &mut d)?))?;
    same("pageable H2D", &rt::clone_dtoh(&d)?, &host)?;
    results.push(("pageable (driver)", "H2D", ms));
    back.fill(0.0);
    let ms = time_ms(reps, || Ok(s.memcpy_dtoh(&d, &mut back)?))?;
    same("pageable D2H", &back, &host)?;
    results.push(("pageable (driver)", "D2H", ms));

    // Pinned, asynchronous copies waited for.
    s.memset_zeros(&mut d)?;
    let ms = time_ms(reps, || {
        Ok(s.copy_htod_async(&pinned_in, &mut d)?.wait()?)
    })?;
    same("pinned H2D", &rt::clone_dtoh(&d)?, &host)?;
    results.push(("pinned", "H2D", ms));
    pinned_out.fill(0.0);
    let ms = time_ms(reps, || {
        Ok(s.copy_dtoh_async(&d, &mut pinned_out)?.wait()?)
    })?;
    same("pinned D2H", &pinned_out, &host)?;
    results.push(("pinned", "D2H", ms));

    // Pageable, staged by the runtime.
    s.memset_zeros(&mut d)?;
    let ms = time_ms(reps, || Ok(rt::copy_htod_pageable(s, &host, &mut d)?))?;
    same("staged H2D", &s.clone_dtoh(&d)?, &host)?;
    results.push(("staged pageable (runtime)", "H2D", ms));
    back.fill(0.0);
    let ms = time_ms(reps, || Ok(rt::copy_dtoh_pageable(s, &d, &mut back)?))?;
    same("staged D2H", &back, &host)?;
    results.push(("staged pageable (runtime)", "D2H", ms));

    // One elementwise op on the same data, for scale.
    let k = Kernels::get(ctx)?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    // One warm-up call, then the median of `reps.max(5)` event-timed calls.
    let compute_ms = gpu_time(ctx, s, reps.max(5), 1, |s| {
        ops::binary(&k, s, BinaryOp::Mul, &d, &d, &mut y)
    })? * 1e3;
    let y_host = rt::clone_dtoh(&y)?;
    if y_host
        .iter()
        .zip(&host)
        .any(|(g, x)| g.to_bits() != (x * x).to_bits())
    {
        return Err("x * x on the GPU differs from the CPU".into());
    }

    let gbs = |ms: f64| bytes / (ms * 1e-3) / 1e9;
    let torch_key = |path: &str, dir: &str| match (path, dir) {
        ("pageable (driver)", "H2D") => torch.get("h2d_pageable"),
        ("pinned", "H2D") => torch.get("h2d_pinned"),
        ("pinned", "D2H") => torch.get("d2h_pinned"),
        _ => None,
    };
    let staged_h2d = results
        .iter()
        .find(|r| r.0.starts_with("staged") && r.1 == "H2D")
        .map_or(f64::NAN, |r| gbs(r.2));
    let torch_pageable = torch.get("h2d_pageable");

    if q {
        let rows: Vec<_> = results
            .iter()
            .map(|(p, d, ms)| {
                serde_json::json!({"path": p, "dir": d, "ms": ms, "gbs": gbs(*ms),
                    "torch_gbs": torch_key(p, d)})
            })
            .collect();
        let j = serde_json::json!({
            "program": "transfer_cost",
            "mib": mib,
            "copies": rows,
            "elementwise_ms": compute_ms,
            "pin_alloc_ms": t_pin,
            "staged_over_torch_pageable": torch_pageable.map(|t| staged_h2d / t),
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    let mut t = Table::new(&["path", "dir", "ms", "GB/s", "PyTorch GB/s", "× one x*x op"]);
    for (p, d, ms) in &results {
        t.row(&[
            p.to_string(),
            d.to_string(),
            format!("{ms:.2}"),
            format!("{:.1}", gbs(*ms)),
            torch_key(p, d).map_or("-".into(), |v| format!("{v:.1}")),
            format!("{:.0}×", ms / compute_ms),
        ]);
    }
    println!();
    t.print();
    println!(
        "one elementwise op on the same data (x * x, read {mib} MiB + write {mib} MiB on the \
         device): {compute_ms:.3} ms ({:.0} GB/s)",
        2.0 * bytes / (compute_ms * 1e-3) / 1e9
    );
    println!(
        "moving the data across the link costs far more than computing on it: move it once, \
         keep it on the GPU."
    );
    match torch_pageable {
        Some(tp) => {
            let ratio = staged_h2d / tp;
            println!(
                "\nstaged pageable H2D {staged_h2d:.1} GB/s vs PyTorch pageable {tp:.1} GB/s: \
                 {ratio:.2}× (target ≥ 2×: {}){}",
                if ratio >= 2.0 { "met" } else { "NOT met" },
                if mib == 256 {
                    ""
                } else {
                    " — note: PyTorch measured 256 MiB, this run --quick 16 MiB"
                }
            );
        }
        None => println!("\n(pass --torch FILE with torch_baseline.py's output to compare)"),
    }
    println!("all copies verified against their source.");
    Ok(())
}
