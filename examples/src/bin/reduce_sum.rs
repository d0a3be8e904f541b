//! `reduce_sum`: seed 004, "Shared Memory: used in the reduction kernel" (the extension's
//! `reduce_sum` op and its test), made runnable.
//!
//! Sums f32 arrays of 1M and 2^28 elements (`--quick`: 64K and 4M) with
//! - `ReduceAlgo::Tree`: the shared-memory tree as taught (Mark Harris's reduction: one element
//!   per thread, halving the active threads each step, one partial per 256-element block), and
//! - `ReduceAlgo::Fast`: grid-stride loops with 16-byte loads, warp shuffles, one partial per
//!   block of a grid sized to the GPU,
//!
//! both finished on the GPU by a one-block pass over the partials (`ops::sum`). It prints GPU
//! time (CUDA events, median), GB/s (4 bytes per element read) and the % of the device-to-device
//! copy bandwidth (`Stream::memcpy_dtod` of the same array in the same run, 2 × 4 bytes per
//! element), checks each result against the CPU sum in f64 (tolerance 1e-5 · Σ|x|), and shows
//! that each reduction is deterministic: two runs give the same bits.
//!
//! Run: `cargo run --release -p cuda-examples --bin reduce_sum` (`--quick` for small sizes).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::verify::within;
use cuda_stack_driver::Context;
use cuda_stack_kernels::ops::{self, ReduceAlgo};
use cuda_stack_kernels::{reference, Kernels};
use serde_json::{json, Value};
use std::process::ExitCode;

/// Allowed |GPU − CPU| relative to Σ|x| (f32 accumulation over up to 2^28 terms).
const REL_TOL: f64 = 1e-5;

/// The shared-memory tree reduction against the fast one and the copy bandwidth.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("reduce_sum", || body(&args))
}

fn pretty(n: usize) -> String {
    if n.is_power_of_two() && n >= 1 << 20 {
        format!("2^{} ({}M)", n.trailing_zeros(), n >> 20)
    } else if n.is_power_of_two() && n >= 1 << 10 {
        format!("2^{} ({}K)", n.trailing_zeros(), n >> 10)
    } else {
        n.to_string()
    }
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let sms = ctx.limits().sm_count;
    let sizes: Vec<usize> = if q.quick {
        vec![1 << 16, 1 << 22]
    } else {
        vec![1 << 20, 1 << 28]
    };
    let reps = q.pick(5, 15);
    out.say(format!(
        "reduce_sum on {} ({sms} SMs, theoretical DRAM peak {:.0} GB/s)\n",
        dev.name()?,
        dev.peak_memory_bandwidth()? / 1e9
    ));
    out.say(
        "Tree (Mark Harris): each block loads 256 elements into shared memory, then \
         for (s = 128; s > 0; s >>= 1)\n  if (tid < s) sdata[tid] += sdata[tid + s]; \
         __syncthreads();  -> one partial per block.\nFast: each thread sums many elements \
         with 16-byte loads (grid-stride), then __shfl_down_sync within warps,\n  one partial \
         per block of a grid of at most 4 x SMs blocks. Both: a second one-block kernel adds \
         the partials.\n",
    );
    out.put("device", json!(dev.name()?));
    let mut t = Table::new(&[
        "n",
        "kernel",
        "partials",
        "GPU time",
        "GB/s",
        "% of D2D copy",
        "sum (GPU)",
        "|GPU - CPU| / sum|x|",
        "same bits twice",
    ]);
    let mut rows = Vec::new();
    for &n in &sizes {
        let inner = if n >= 1 << 24 { 1 } else { 10 };
        let mut x = s.alloc_zeros::<f32>(n)?;
        ops::fill_uniform(&k, &s, &mut x, 7 + n as u64, 0)?;
        let host = s.clone_dtoh(&x)?;
        let cpu = reference::sum(&host);
        let abs: f64 = host.iter().map(|v| f64::from(v.abs())).sum();
        drop(host);

        // The copy ceiling, same array, same run.
        let mut y = s.alloc_zeros::<f32>(n)?;
        let t_copy = gpu_time(&ctx, &s, reps, inner, |s| s.memcpy_dtod(&x, &mut y))?;
        drop(y);
        let copy_gbps = 8.0 * n as f64 / t_copy / 1e9;
        t.row(&[
            pretty(n),
            "memcpy_dtod (ceiling)".into(),
            String::new(),
            format!("{:.1} µs", t_copy * 1e6),
            format!("{copy_gbps:.0} (2 x 4 B/elem)"),
            "100%".into(),
            String::new(),
            String::new(),
            String::new(),
        ]);

        let mut d_out = s.alloc_zeros::<f32>(1)?;
        for (algo, name) in [(ReduceAlgo::Tree, "tree"), (ReduceAlgo::Fast, "fast")] {
            ops::sum(&k, &s, algo, &x, &mut d_out)?;
            let first = s.clone_dtoh(&d_out)?[0];
            s.memset_zeros(&mut d_out)?;
            ops::sum(&k, &s, algo, &x, &mut d_out)?;
            let second = s.clone_dtoh(&d_out)?[0];
            let same = first.to_bits() == second.to_bits();
            let err = (f64::from(first) - cpu).abs() / abs.max(f64::MIN_POSITIVE);
            within(
                &format!("{name} sum of {n} elements: GPU {first}, CPU {cpu}: relative error"),
                err,
                REL_TOL,
            )?;
            if !same {
                return Err(format!(
                    "{name} sum of {n} elements is not deterministic: {first} ({:#010x}) then \
                     {second} ({:#010x})",
                    first.to_bits(),
                    second.to_bits()
                )
                .into());
            }
            let tm = gpu_time(&ctx, &s, reps, inner, |s| {
                ops::sum(&k, s, algo, &x, &mut d_out)
            })?;
            let gbps = 4.0 * n as f64 / tm / 1e9;
            let partials = ops::reduce_partials(algo, n, sms);
            t.row(&[
                pretty(n),
                name.into(),
                partials.to_string(),
                format!("{:.1} µs", tm * 1e6),
                format!("{gbps:.0}"),
                format!("{:.0}%", 100.0 * gbps / copy_gbps),
                format!("{first}"),
                format!("{err:.1e}"),
                format!("yes ({:#010x})", first.to_bits()),
            ]);
            rows.push(
                json!({"n": n, "algo": name, "partials": partials, "us": tm * 1e6,
                             "gbps": gbps, "pct_of_copy": 100.0 * gbps / copy_gbps,
                             "gpu_sum": first, "cpu_sum": cpu, "rel_err": err,
                             "deterministic": same, "copy_gbps": copy_gbps}),
            );
        }
    }
    out.say(t.render());
    out.say(format!(
        "CPU reference: the f64 sum of the same array. Tolerance {REL_TOL:e} x sum|x|. GB/s counts \
         the 4 bytes read per element;\nthe copy reads and writes, so a reduction at 100% of the \
         copy figure moves bytes as fast as the copy.\nThe summation order is fixed for a given \
         size and GPU (no atomics), so the same input gives the same bits.",
    ));
    out.put("results", Value::Array(rows));
    out.finish();
    Ok(())
}
