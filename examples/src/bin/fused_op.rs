//! `fused_op`: seed 004, "Kernel Fusion" and "Performance Comparison" (the `fused_op_forward`
//! of the PyTorch-extension chapter, `relu(x * scale + bias)`), made runnable without PyTorch.
//!
//! At the seed's benchmark size (1024 × 2048, scale 2.0) it runs:
//! - **fused**: one kernel, `ops::bias_relu_fwd` (`fmaf(x, scale, bias[c])`, then ReLU);
//! - **unfused, 4 launches**: `ops::scale` → materialise the broadcast bias with
//!   `ops::strided_copy` (stride 0 over rows) → `ops::binary(Add)` → `ops::relu`;
//! - **unfused, 3 launches**: the same with the broadcast bias materialised once beforehand
//!   (what PyTorch's `torch.relu(x * 2.0 + bias)` launches: mul, broadcast add, relu);
//! - **backward**: `ops::bias_relu_bwd` (`grad_x`, and `grad_bias` summed over rows).
//!
//! Correctness as in the seed's test: the maximum difference of each variant from the CPU
//! reference (`reference::bias_relu_fwd` / `reference::bias_relu_bwd`) is printed, and the
//! program fails above 1e-5. Timing: GPU time by CUDA events (median of samples of 10
//! back-to-back calls) and, as the seed measures, host wall-clock time over 100 iterations
//! followed by a synchronize. With `--torch FILE` (the output of `anchors/torch_baseline.py`
//! from the same machine) PyTorch's `relu_unfused_us` and `relu_fwd_bwd_us` are printed beside.
//!
//! Run: `cargo run --release -p cuda-examples --bin fused_op [-- --torch torch.txt]`
//! (`--quick` for fewer repetitions).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::torch::TorchFlag;
use cuda_examples::verify::{bit_identical, max_abs_diff, same_bits, within, Mismatch};
use cuda_stack_driver::{Context, DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::{reference, Kernels, StridedLayout};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The largest difference from the CPU reference any variant may have.
const TOL: f32 = 1e-5;

/// Seed 004's fused op against its unfused form and PyTorch.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    torch: TorchFlag,
    /// Rows of x (the seed's batch size).
    #[arg(long, default_value_t = 1024)]
    rows: usize,
    /// Columns of x (the seed's features).
    #[arg(long, default_value_t = 2048)]
    cols: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("fused_op", || body(&args))
}

/// The seed's benchmark: host clock over `iters` calls, then a synchronize; seconds per call.
fn host_time(
    s: &Stream,
    iters: usize,
    mut f: impl FnMut(&Stream) -> BoxResult<()>,
) -> BoxResult<f64> {
    for _ in 0..10 {
        f(s)?;
    }
    s.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        f(s)?;
    }
    s.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / iters as f64)
}

/// `(max |got − want|, bit-identical)`; NaN anywhere counts as infinitely far.
fn max_diff(got: &[f32], want: &[f32]) -> (f32, bool) {
    (max_abs_diff(got, want), bit_identical(got, want))
}

fn check(what: &str, d: f32) -> Result<(), Mismatch> {
    within(
        &format!("{what}: max difference from the CPU reference"),
        f64::from(d),
        f64::from(TOL),
    )
}

fn normal(k: &Kernels, s: &Stream, n: usize, seed: u64) -> BoxResult<DeviceBuffer<f32>> {
    let mut b = s.alloc_zeros::<f32>(n)?;
    ops::fill_normal(k, s, &mut b, seed, 0)?;
    Ok(b)
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let torch = args.torch.load()?;
    let (rows, cols, scale) = (args.rows, args.cols, 2.0f32);
    let n = rows
        .checked_mul(cols)
        .filter(|&n| n > 0)
        .ok_or("--rows and --cols must be positive and their product must fit in memory")?;
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let (reps, inner, iters) = (q.pick(5, 30), 10, q.pick(20, 100));
    out.say(format!(
        "fused_op on {} ({} SMs): relu(x * {scale} + bias), x [{rows}, {cols}] f32, bias [{cols}]\n",
        dev.name()?,
        ctx.limits().sm_count
    ));
    out.put("device", json!(dev.name()?));
    out.put("shape", json!([rows, cols]));

    let x = normal(&k, &s, n, 1)?;
    let bias = normal(&k, &s, cols, 2)?;
    let (x_h, bias_h) = (s.clone_dtoh(&x)?, s.clone_dtoh(&bias)?);
    let want = reference::bias_relu_fwd(&x_h, &bias_h, scale, rows, cols);

    // Fused.
    let mut out_f = s.alloc_zeros::<f32>(n)?;
    ops::bias_relu_fwd(&k, &s, &x, &bias, scale, &mut out_f, rows, cols)?;
    let (d_fused, same_fused) = max_diff(&s.clone_dtoh(&out_f)?, &want);
    check("fused", d_fused)?;

    // Unfused: scale, broadcast bias, add, relu.
    let mut t1 = s.alloc_zeros::<f32>(n)?;
    let mut bias_full = s.alloc_zeros::<f32>(n)?;
    let mut t2 = s.alloc_zeros::<f32>(n)?;
    let mut out_u = s.alloc_zeros::<f32>(n)?;
    let bcast = StridedLayout::new(&[rows, cols], &[0, 1], 0)
        .ok_or("the broadcast layout does not fit a StridedLayout")?;
    let unfused4 = |s: &Stream,
                    t1: &mut DeviceBuffer<f32>,
                    bias_full: &mut DeviceBuffer<f32>,
                    t2: &mut DeviceBuffer<f32>,
                    o: &mut DeviceBuffer<f32>|
     -> BoxResult<()> {
        ops::scale(&k, s, &x, t1, scale)?;
        ops::strided_copy(&k, s, &bias, &bcast, bias_full)?;
        ops::binary(&k, s, BinaryOp::Add, t1, bias_full, t2)?;
        ops::relu(&k, s, t2, o)?;
        Ok(())
    };
    unfused4(&s, &mut t1, &mut bias_full, &mut t2, &mut out_u)?;
    let (d_unfused, same_unfused) = max_diff(&s.clone_dtoh(&out_u)?, &want);
    check("unfused", d_unfused)?;
    same_bits(
        "the broadcast bias (strided_copy with stride 0)",
        &s.clone_dtoh(&bias_full)?,
        &bias_h.repeat(rows),
    )?;

    out.say("Correctness (as in the seed's test_fused_op_forward), against the CPU reference:");
    let bits = |b: bool| if b { " (bit-identical)" } else { "" };
    out.say(format!(
        "  fused   max difference {d_fused:.2e}{}\n  unfused max difference {d_unfused:.2e}{}  \
         (x * 2 is exact, so one rounding either way)\n",
        bits(same_fused),
        bits(same_unfused)
    ));

    // Timing.
    let g_fused = gpu_time(&ctx, &s, reps, inner, |s| {
        ops::bias_relu_fwd(&k, s, &x, &bias, scale, &mut out_f, rows, cols)
    })?;
    let h_fused = host_time(&s, iters, |s| {
        Ok(ops::bias_relu_fwd(
            &k, s, &x, &bias, scale, &mut out_f, rows, cols,
        )?)
    })?;
    let g_un4 = gpu_time(&ctx, &s, reps, inner, |s| {
        unfused4(s, &mut t1, &mut bias_full, &mut t2, &mut out_u)
    })?;
    let h_un4 = host_time(&s, iters, |s| {
        unfused4(s, &mut t1, &mut bias_full, &mut t2, &mut out_u)
    })?;
    let mut unfused3 = |s: &Stream| -> BoxResult<()> {
        ops::scale(&k, s, &x, &mut t1, scale)?;
        ops::binary(&k, s, BinaryOp::Add, &t1, &bias_full, &mut t2)?;
        ops::relu(&k, s, &t2, &mut out_u)?;
        Ok(())
    };
    let g_un3 = gpu_time(&ctx, &s, reps, inner, &mut unfused3)?;
    let h_un3 = host_time(&s, iters, &mut unfused3)?;
    let (d3, _) = max_diff(&s.clone_dtoh(&out_u)?, &want);
    check("unfused (3 launches)", d3)?;

    // Backward.
    let grad_out = normal(&k, &s, n, 3)?;
    let mut grad_x = s.alloc_zeros::<f32>(n)?;
    let mut grad_b = s.alloc_zeros::<f32>(cols)?;
    ops::bias_relu_bwd(
        &k,
        &s,
        &x,
        &bias,
        scale,
        &grad_out,
        &mut grad_x,
        &mut grad_b,
        rows,
        cols,
    )?;
    let parts = ops::bias_relu_bwd_parts(rows, cols, ctx.limits().sm_count);
    let (want_gx, want_gb) = reference::bias_relu_bwd(
        &x_h,
        &bias_h,
        scale,
        &s.clone_dtoh(&grad_out)?,
        rows,
        cols,
        parts,
    );
    let (d_gx, same_gx) = max_diff(&s.clone_dtoh(&grad_x)?, &want_gx);
    let (d_gb, same_gb) = max_diff(&s.clone_dtoh(&grad_b)?, &want_gb);
    check("backward grad_x", d_gx)?;
    // grad_bias sums `rows` terms: compare relative to the largest column sum.
    let gb_scale = want_gb.iter().fold(1f32, |m, v| m.max(v.abs()));
    check("backward grad_bias (relative)", d_gb / gb_scale)?;
    let mut bwd = |s: &Stream| -> BoxResult<()> {
        ops::bias_relu_bwd(
            &k,
            s,
            &x,
            &bias,
            scale,
            &grad_out,
            &mut grad_x,
            &mut grad_b,
            rows,
            cols,
        )?;
        Ok(())
    };
    let g_bwd = gpu_time(&ctx, &s, reps, inner, &mut bwd)?;
    let h_bwd = host_time(&s, iters, &mut bwd)?;
    out.say(format!(
        "Backward (grad_x = g * scale, grad_bias = sum over rows of g, g = grad_out where pre > \
         0; {parts} row chunks):\n  grad_x max difference {d_gx:.2e}{}, grad_bias max difference \
         {d_gb:.2e}{}\n",
        bits(same_gx),
        bits(same_gb)
    ));

    // Report.
    let bytes_fused = (2 * n + cols) as f64 * 4.0;
    let mut t = Table::new(&[
        "variant",
        "launches",
        "GPU time (events)",
        "host clock /iter (seed method)",
        "fused speedup",
        "PyTorch (same machine)",
    ]);
    let us = |v: f64| format!("{:.1} µs", v * 1e6);
    let torch_unfused = torch.get("relu_unfused_us");
    let torch_fb = torch.get("relu_fwd_bwd_us");
    t.row(&[
        "fused bias_relu_fwd".into(),
        "1".into(),
        format!("{} ({:.0} GB/s)", us(g_fused), bytes_fused / g_fused / 1e9),
        us(h_fused),
        "1.00x".into(),
        String::new(),
    ]);
    t.row(&[
        "unfused: scale, broadcast, add, relu".into(),
        "4".into(),
        us(g_un4),
        us(h_un4),
        format!("{:.2}x", g_un4 / g_fused),
        String::new(),
    ]);
    t.row(&[
        "unfused: scale, add, relu".into(),
        "3".into(),
        us(g_un3),
        us(h_un3),
        format!("{:.2}x", g_un3 / g_fused),
        torch_unfused.map_or("-".into(), |v| {
            format!(
                "torch.relu(x*2+b): {v:.1} µs ({:.2}x ours fused)",
                v * 1e-6 / g_fused
            )
        }),
    ]);
    t.row(&[
        "backward bias_relu_bwd".into(),
        if parts == 1 { "1" } else { "2" }.into(),
        us(g_bwd),
        us(h_bwd),
        String::new(),
        String::new(),
    ]);
    t.row(&[
        "forward + backward (fused)".into(),
        String::new(),
        us(g_fused + g_bwd),
        us(h_fused + h_bwd),
        String::new(),
        torch_fb.map_or("-".into(), |v| {
            format!(
                "autograd fwd+bwd: {v:.1} µs ({:.2}x ours)",
                v * 1e-6 / (g_fused + g_bwd)
            )
        }),
    ]);
    out.say(t.render());
    out.say(format!(
        "Fusion reads x once and writes the output once ({:.1} MiB); the 3-launch version \
         reads or writes\na full array 7 times (x*2: 2, + bias: 3, relu: 2; {:.1} MiB, {:.1}x the \
         traffic) and launches 3 kernels.",
        bytes_fused / (1 << 20) as f64,
        (7 * n) as f64 * 4.0 / (1 << 20) as f64,
        (7 * n) as f64 * 4.0 / bytes_fused
    ));
    if torch.is_empty() {
        out.say("(pass --torch FILE with the output of anchors/torch_baseline.py for PyTorch's figures)");
    }
    out.put(
        "max_diff",
        json!({"fused": d_fused, "unfused": d_unfused, "grad_x": d_gx, "grad_bias": d_gb}),
    );
    out.put(
        "gpu_us",
        json!({"fused": g_fused * 1e6, "unfused4": g_un4 * 1e6, "unfused3": g_un3 * 1e6,
               "backward": g_bwd * 1e6}),
    );
    out.put(
        "host_us",
        json!({"fused": h_fused * 1e6, "unfused4": h_un4 * 1e6, "unfused3": h_un3 * 1e6,
               "backward": h_bwd * 1e6}),
    );
    if !torch.is_empty() {
        out.put(
            "torch_us",
            json!({"relu_unfused": torch_unfused, "relu_fwd_bwd": torch_fb}),
        );
    }
    out.finish();
    Ok(())
}
