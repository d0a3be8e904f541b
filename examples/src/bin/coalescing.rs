//! `coalescing`: seed 003, "Ch. 5: Memory Hierarchy" (Coalescing, Shared Memory Tiling Pattern),
//! made runnable.
//!
//! 1. The stride sweep: `dst[i] = src[i * stride]` (`ops::copy_strided`) for strides 1, 2, 4, 8,
//!    16, 32 over a large buffer, in useful GB/s (bytes the program asked to read and write) and
//!    as a % of the coalesced copy (`ops::copy_coalesced`). A warp reads whole 32-byte sectors,
//!    so at stride `s` only `1 / min(s, 8)` of each sector read is used.
//! 2. The transpose: naive (coalesced reads, strided writes), a 32×32 shared-memory tile (both
//!    coalesced, but 32-way bank conflicts reading the tile's columns) and the padded 32×33 tile
//!    (conflict-free), in GB/s (2 × bytes / time).
//!
//! Every result is checked bit for bit against the CPU reference (`reference::copy_strided`,
//! `reference::transpose`). GPU times are CUDA events, median of several samples.
//! With `--torch FILE` (the output of `anchors/torch_baseline.py` from the same machine) PyTorch's
//! `strided_N` and `transpose` figures are printed beside ours.
//!
//! Run: `cargo run --release -p cuda-examples --bin coalescing [-- --torch torch.txt]`
//! (`--quick` for small sizes; `--transpose-n N` for the matrix size).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::torch::{TorchBaseline, TorchFlag};
use cuda_examples::verify::same_bits;
use cuda_stack_driver::Context;
use cuda_stack_kernels::ops::{self, TransposeAlgo};
use cuda_stack_kernels::{reference, Kernels};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::process::ExitCode;

/// Seed 003's coalescing and bank-conflict lessons, measured.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    torch: TorchFlag,
    /// Transpose an N×N f32 matrix (default 8192; 1024 with --quick).
    #[arg(long)]
    transpose_n: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("coalescing", || body(&args))
}

fn torch_cell(torch: &TorchBaseline, key: &str) -> String {
    torch.cell(key, |v| format!("{v:.0} GB/s"))
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let torch = args.torch.load()?;
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let peak = dev.peak_memory_bandwidth()? / 1e9;
    out.say(format!(
        "coalescing on {} ({} SMs, theoretical DRAM peak {peak:.0} GB/s)\n",
        dev.name()?,
        ctx.limits().sm_count
    ));
    out.put("device", json!(dev.name()?));
    out.put("peak_gbps", json!(peak));

    // --- 1. Stride sweep -------------------------------------------------------------------
    const STRIDES: [usize; 6] = [1, 2, 4, 8, 16, 32];
    let n: usize = q.pick(1 << 20, 1 << 23);
    let (reps, inner) = (q.pick(5, 15), q.pick(2, 5));
    let src_len = (n - 1) * 32 + 1;
    let mut src = s.alloc_zeros::<f32>(src_len)?;
    ops::fill_uniform(&k, &s, &mut src, 3, 0)?;
    let src_host = s.clone_dtoh(&src)?;
    let mut dst = s.alloc_zeros::<f32>(n)?;
    let useful = 2.0 * 4.0 * n as f64;

    let head = src.slice(..n)?;
    let t_coal = gpu_time(&ctx, &s, reps, inner, |s| {
        ops::copy_coalesced(&k, s, &head, &mut dst)
    })?;
    same_bits("copy_coalesced", &s.clone_dtoh(&dst)?, &src_host[..n])?;
    let coal = useful / t_coal / 1e9;
    out.say(format!(
        "1. Stride sweep: dst[i] = src[i * stride], {n} f32 ({} MiB) read and written; \
         useful GB/s = 2 x 4 B x {n} / time.",
        (n * 4) >> 20
    ));
    let mut t = Table::new(&[
        "access",
        "time",
        "useful GB/s",
        "% of coalesced",
        "sector bytes used",
        "PyTorch",
    ]);
    t.row(&[
        "coalesced copy (float4)".into(),
        format!("{:.1} µs", t_coal * 1e6),
        format!("{coal:.0}"),
        "100%".into(),
        "32 of 32".into(),
        torch_cell(&torch, "d2d"),
    ]);
    let mut sweep = Vec::new();
    for &stride in &STRIDES {
        let tm = gpu_time(&ctx, &s, reps, inner, |s| {
            ops::copy_strided(&k, s, &src, &mut dst, stride)
        })?;
        same_bits(
            &format!("copy_strided stride {stride}"),
            &s.clone_dtoh(&dst)?,
            &reference::copy_strided(&src_host, stride, n),
        )?;
        let gbps = useful / tm / 1e9;
        let used = 32 / stride.min(8);
        t.row(&[
            format!("stride {stride}"),
            format!("{:.1} µs", tm * 1e6),
            format!("{gbps:.0}"),
            format!("{:.0}%", 100.0 * gbps / coal),
            format!("{used} of 32"),
            torch_cell(&torch, &format!("strided_{stride}")),
        ]);
        sweep.push(
            json!({"stride": stride, "us": tm * 1e6, "useful_gbps": gbps,
                          "pct_of_coalesced": 100.0 * gbps / coal}),
        );
    }
    out.say(t.render());
    out.say(
        "Every copy above matches the CPU reference bit for bit. Threads of a warp reading \
         neighbouring floats\nshare 32-byte sectors; at stride >= 8 every float costs a whole \
         sector: the\nhardware moves 32 bytes to deliver 4.\n",
    );
    out.put("coalesced_gbps", json!(coal));
    out.put("stride_sweep", Value::Array(sweep));
    drop(src);
    drop(src_host);
    drop(dst);

    // --- 2. Transpose ----------------------------------------------------------------------
    let tn = args.transpose_n.unwrap_or(q.pick(1024, 8192));
    if tn == 0 {
        return Err("--transpose-n must be at least 1".into());
    }
    let mut x = s.alloc_zeros::<f32>(tn * tn)?;
    ops::fill_uniform(&k, &s, &mut x, 4, 0)?;
    let x_host = s.clone_dtoh(&x)?;
    let want = reference::transpose(&x_host, tn, tn);
    drop(x_host);
    let mut y = s.alloc_zeros::<f32>(tn * tn)?;
    let bytes = 2.0 * 4.0 * (tn * tn) as f64;
    out.say(format!(
        "2. Transpose of a {tn}x{tn} f32 matrix ({} MiB), block (32, 8), GB/s = 2 x bytes / time.",
        (tn * tn * 4) >> 20
    ));
    let mut t = Table::new(&["kernel", "time", "GB/s", "% of coalesced copy", "PyTorch"]);
    let mut tr = Vec::new();
    let mut gb = HashMap::new();
    for (algo, name, what) in [
        (
            TransposeAlgo::Naive,
            "naive",
            "coalesced reads, writes strided by N",
        ),
        (
            TransposeAlgo::Tiled,
            "tiled 32x32",
            "shared tile, 32-way bank conflicts",
        ),
        (
            TransposeAlgo::TiledPadded,
            "tiled 32x33 (padded)",
            "shared tile, conflict-free",
        ),
    ] {
        let tm = gpu_time(&ctx, &s, reps, inner.min(3), |s| {
            ops::transpose(&k, s, algo, &x, &mut y, tn, tn)
        })?;
        same_bits(&format!("transpose {name}"), &s.clone_dtoh(&y)?, &want)?;
        s.memset_zeros(&mut y)?;
        let g = bytes / tm / 1e9;
        gb.insert(name, g);
        t.row(&[
            format!("{name} ({what})"),
            format!("{:.1} µs", tm * 1e6),
            format!("{g:.0}"),
            format!("{:.0}%", 100.0 * g / coal),
            if algo == TransposeAlgo::TiledPadded {
                torch.cell("transpose", |v| format!("{v:.0} GB/s (16384²)"))
            } else {
                String::new()
            },
        ]);
        tr.push(json!({"kernel": name, "us": tm * 1e6, "gbps": g}));
    }
    out.say(t.render());
    let (tiled, padded, naive) = (gb["tiled 32x32"], gb["tiled 32x33 (padded)"], gb["naive"]);
    out.say(format!(
        "All three match the CPU reference bit for bit. Padding the tile by one column moves each \
         row of the\ntile to a different bank, so reading a tile column hits 32 banks instead of \
         one: padded is {:.2}x the\nconflicted tile and {:.2}x the naive transpose.",
        padded / tiled,
        padded / naive
    ));
    out.put("transpose_n", json!(tn));
    out.put("transpose", Value::Array(tr));
    if !torch.is_empty() {
        out.put("torch", json!(torch.figures()));
    }
    out.finish();
    Ok(())
}
