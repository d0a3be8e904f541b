//! `tiled_matmul`: seed 003, "Shared Memory Tiling Pattern" (the 16×16 `tile_A`/`tile_B` code),
//! made runnable.
//!
//! Three f32 matrix multiplies `C = A · B` (row-major, `ops::matmul`):
//! - `Naive`: one thread per output, every operand straight from global memory;
//! - `Tiled16`: seed 003's code, 16×16 tiles of A and B staged in shared memory;
//! - `Fast`: the project's SGEMM (128×128 block tiles, 8×8 outputs per thread, double buffering).
//!
//! For sizes 512, 1024, 2048 (and 4096 for tiled and fast; the naive kernel stops at 2048) it
//! prints GFLOP/s (2·n³ / GPU time, median of CUDA-event samples) and, with `--torch FILE`, the
//! % of cuBLAS (`sgemm_1024`, `sgemm_4096` from `anchors/torch_baseline.py`, same machine).
//! Correctness: each kernel against the CPU reference (`reference::matmul`, FMA in increasing k)
//! at small odd sizes, and the kernels against each other at the large sizes, with a normwise
//! relative tolerance `max|C − C_ref| / max|C_ref| ≤ 1e-4` (they are in fact designed to agree
//! bit for bit, which is reported too).
//!
//! Run: `cargo run --release -p cuda-examples --bin tiled_matmul [-- --torch torch.txt]`
//! (`--quick` for sizes 256 and 512).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::torch::TorchFlag;
use cuda_examples::verify::{bit_identical, normwise_rel_error, within};
use cuda_stack_driver::{Context, DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{self, MatmulAlgo};
use cuda_stack_kernels::{reference, Kernels};
use serde_json::{json, Value};
use std::process::ExitCode;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The normwise relative tolerance of every comparison.
const TOL: f64 = 1e-4;

/// Seed 003's tiled matrix multiply against the naive one, the fast SGEMM and cuBLAS.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    torch: TorchFlag,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("tiled_matmul", || body(&args))
}

/// `(max|got − want| / max|want|, bit-identical)`; `(∞, false)` when a value is not finite.
fn compare(got: &[f32], want: &[f32]) -> (f64, bool) {
    let rel = normwise_rel_error(got, want);
    (rel, rel.is_finite() && bit_identical(got, want))
}

fn name(a: MatmulAlgo) -> &'static str {
    match a {
        MatmulAlgo::Naive => "naive",
        MatmulAlgo::Tiled16 => "tiled 16x16 (seed 003)",
        MatmulAlgo::Fast => "fast sgemm",
    }
}

const ALGOS: [MatmulAlgo; 3] = [MatmulAlgo::Naive, MatmulAlgo::Tiled16, MatmulAlgo::Fast];

fn normal(k: &Kernels, s: &Stream, n: usize, seed: u64) -> BoxResult<DeviceBuffer<f32>> {
    let mut b = s.alloc_zeros::<f32>(n)?;
    ops::fill_normal(k, s, &mut b, seed, 0)?;
    Ok(b)
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let torch = args.torch.load()?;
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    out.say(format!(
        "tiled_matmul on {} ({} SMs)\n",
        dev.name()?,
        ctx.limits().sm_count
    ));
    out.put("device", json!(dev.name()?));

    // --- Correctness against the CPU at small, odd sizes (edges of every tile) -------------
    out.say(format!(
        "Check against the CPU reference (FMA in increasing k), normwise relative tolerance {TOL:e}:"
    ));
    let mut checks = Vec::new();
    for &(m, n, kd) in &[(131usize, 67usize, 93usize), (256, 192, 320)] {
        let a = normal(&k, &s, m * kd, 1)?;
        let b = normal(&k, &s, kd * n, 2)?;
        let want = reference::matmul(&s.clone_dtoh(&a)?, &s.clone_dtoh(&b)?, m, n, kd);
        for algo in ALGOS {
            let mut c = s.alloc_zeros::<f32>(m * n)?;
            ops::matmul(&k, &s, algo, &a, &b, &mut c, m, n, kd)?;
            let (rel, same) = compare(&s.clone_dtoh(&c)?, &want);
            out.say(format!(
                "  {m}x{kd} · {kd}x{n}  {:<24} rel. error {rel:.1e}{}",
                name(algo),
                if same { "  (bit-identical)" } else { "" }
            ));
            within(
                &format!("{} at {m}x{n}x{kd}: relative error", name(algo)),
                rel,
                TOL,
            )?;
            checks.push(
                json!({"m": m, "n": n, "k": kd, "algo": name(algo), "rel_err": rel,
                               "bit_identical": same}),
            );
        }
    }
    out.put("cpu_checks", Value::Array(checks));

    // --- Performance ------------------------------------------------------------------------
    let sizes: &[usize] = if q.quick {
        &[256, 512]
    } else {
        &[512, 1024, 2048, 4096]
    };
    let naive_max = if q.quick { 512 } else { 2048 };
    let reps = q.pick(3, 7);
    out.say(format!(
        "\nPerformance: square n x n, GFLOP/s = 2 n³ / GPU time (median of {reps} event-timed runs)."
    ));
    let mut t = Table::new(&[
        "n",
        "kernel",
        "time",
        "GFLOP/s",
        "vs naive",
        "% of cuBLAS",
        "check",
    ]);
    let mut perf = Vec::new();
    for &n in sizes {
        let a = normal(&k, &s, n * n, 10 + n as u64)?;
        let b = normal(&k, &s, n * n, 20 + n as u64)?;
        let flops = 2.0 * (n as f64).powi(3);
        let cublas = torch.get(&format!("sgemm_{n}"));
        let mut first: Option<(&'static str, Vec<f32>)> = None;
        let mut naive_gf = None;
        for algo in ALGOS {
            if algo == MatmulAlgo::Naive && n > naive_max {
                continue;
            }
            let mut c = s.alloc_zeros::<f32>(n * n)?;
            let tm = gpu_time(&ctx, &s, reps, 1, |s| {
                ops::matmul(&k, s, algo, &a, &b, &mut c, n, n, n)
            })?;
            let gf = flops / tm / 1e9;
            let got = s.clone_dtoh(&c)?;
            // Cross-check against the first kernel run at this size.
            let check = match &first {
                None => "reference for this size".to_string(),
                Some((ref_name, want)) => {
                    let (rel, same) = compare(&got, want);
                    within(
                        &format!(
                            "{} at n = {n} differs from {ref_name}: relative error",
                            name(algo)
                        ),
                        rel,
                        TOL,
                    )?;
                    format!(
                        "vs {ref_name}: {rel:.1e}{}",
                        if same { " (bit-identical)" } else { "" }
                    )
                }
            };
            if first.is_none() {
                first = Some((name(algo), got));
            }
            if algo == MatmulAlgo::Naive {
                naive_gf = Some(gf);
            }
            t.row(&[
                n.to_string(),
                name(algo).to_string(),
                format!("{:.3} ms", tm * 1e3),
                format!("{gf:.0}"),
                naive_gf.map_or("-".into(), |b| format!("{:.1}x", gf / b)),
                cublas.map_or("-".into(), |c| format!("{:.0}%", 100.0 * gf / (c * 1e3))),
                check,
            ]);
            perf.push(
                json!({"n": n, "algo": name(algo), "ms": tm * 1e3, "gflops": gf,
                             "cublas_tflops": cublas}),
            );
        }
    }
    out.say(t.render());
    if torch.is_empty() {
        out.say(
            "(pass --torch FILE with the output of anchors/torch_baseline.py for cuBLAS figures)",
        );
    } else {
        out.say(format!(
            "cuBLAS (torch, TF32 off): {} TFLOP/s at 1024, {} TFLOP/s at 4096.",
            torch.number("sgemm_1024", 1),
            torch.number("sgemm_4096", 1)
        ));
    }
    out.say(
        "The shared tile reads each element of A and B from global memory n/16 times instead of \
         n times;\nthe fast kernel also keeps an 8x8 block of C in registers per thread, so each \
         shared-memory load\nfeeds 8 FMAs.",
    );
    out.put("perf", Value::Array(perf));
    if !torch.is_empty() {
        out.put("torch", json!(torch.figures()));
    }
    out.finish();
    Ok(())
}
