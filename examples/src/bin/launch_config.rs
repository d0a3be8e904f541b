//! `launch_config`: seed 004, "Advanced Usage: Custom Block/Thread Configuration" (16×16 vs 32×8
//! threads for 2-D work; 512 threads for memory-bound and 128 for compute-bound 1-D work) and
//! "Maximize occupancy", made runnable.
//!
//! Seed 004's fused op `relu(x * scale + bias)` is compiled at run time with NVRTC in two forms,
//! so the block shape is free: `fused_2d` (one thread per (row, column), block (bx, by)) and
//! `fused_1d` (one thread per element, column = index % cols). Each block shape is timed (CUDA
//! events, median) on the seed's 1024 × 2048 array and on an 8192 × 8192 one, and its output is
//! checked bit for bit against the CPU reference (`reference::bias_relu_fwd`). For each choice
//! the program also asks the driver about occupancy: registers per thread
//! (`Function::attributes`), resident blocks per SM (`Function::max_active_blocks_per_sm`) and
//! the block size the driver would pick (`Function::max_potential_block_size`). The library's
//! float4 kernel (`ops::bias_relu_fwd`) is timed alongside as the reference point.
//!
//! Needs NVRTC (`libnvrtc`). Run: `cargo run --release -p cuda-examples --bin launch_config`
//! (`--quick` for the seed's size only).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::verify::same_bits;
use cuda_stack_driver::nvrtc::{self, CompileOptions};
use cuda_stack_driver::{Context, DeviceSlice, Function, Kernel, LaunchConfig};
use cuda_stack_kernels::{ops, reference, Kernels};
use cuda_stack_sys::CUdevice_attribute as A;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Instant;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Seed 004's fused op in a 2-D and a 1-D form (same arithmetic as the library kernel:
/// `fmaf(x, scale, bias[c])`, then `pre > 0 ? pre : 0`).
const SOURCE: &str = r#"
extern "C" __global__ void fused_2d(const float* __restrict__ x, const float* __restrict__ bias,
                                    float scale, float* __restrict__ out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        size_t i = (size_t)r * cols + c;
        float pre = fmaf(x[i], scale, bias[c]);
        out[i] = pre > 0.0f ? pre : 0.0f;
    }
}

extern "C" __global__ void fused_1d(const float* __restrict__ x, const float* __restrict__ bias,
                                    float scale, float* __restrict__ out, int rows, int cols) {
    unsigned int n = (unsigned int)rows * (unsigned int)cols;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float pre = fmaf(x[i], scale, bias[i % (unsigned int)cols]);
        out[i] = pre > 0.0f ? pre : 0.0f;
    }
}
"#;

/// Both kernels of `SOURCE`: `x`, `bias`, `scale`, `out`, `rows`, `cols`.
type FusedKernel = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    f32,
    &'static mut DeviceSlice<f32>,
    i32,
    i32,
)>;

/// Block shapes and sizes for seed 004's fused op, timed, with the driver's occupancy figures.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("launch_config", || body(&args))
}

/// Occupancy of `f` with blocks of `threads`: (blocks per SM, % of the SM's warp slots).
fn occupancy(f: &Function, threads: u32, max_threads_sm: u32) -> BoxResult<(u32, f64)> {
    let blocks = f.max_active_blocks_per_sm(threads, 0)?;
    let pct = 100.0 * f64::from(blocks * threads) / f64::from(max_threads_sm.max(1));
    Ok((blocks, pct))
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let max_threads_sm =
        dev.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)? as u32;
    let max_blocks_sm = dev.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?;
    let regs_sm = dev.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?;
    out.say(format!(
        "launch_config on {} ({} SMs; per SM: {max_threads_sm} threads, {max_blocks_sm} blocks, \
         {regs_sm} registers)\n",
        dev.name()?,
        ctx.limits().sm_count
    ));

    let opts = CompileOptions::for_context(&ctx);
    let t = Instant::now();
    let ptx = nvrtc::compile_ptx("fused_launch.cu", SOURCE, &opts)?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let module = ctx.load_ptx(&ptx)?;
    // SAFETY: both kernels are declared (const float*, const float*, float, float*, int, int) in
    // SOURCE; they read x[i], bias[c] and write out[i] only for r < rows, c < cols (i < rows ·
    // cols), and every launch passes rows, cols matching the slices' lengths (x, out: rows ·
    // cols; bias: cols).
    let k2: FusedKernel = unsafe { module.kernel("fused_2d")? };
    // SAFETY: as above.
    let k1: FusedKernel = unsafe { module.kernel("fused_1d")? };
    let (f2, f1) = (k2.function().clone(), k1.function().clone());
    let (a2, a1) = (f2.attributes()?, f1.attributes()?);
    let (pg2, pb2) = f2.max_potential_block_size(0)?;
    let (pg1, pb1) = f1.max_potential_block_size(0)?;
    out.say(format!(
        "Compiled fused_2d and fused_1d with NVRTC ({compile_ms:.1} ms). Driver's view:\n  \
         fused_2d: {} registers/thread, {} B local; occupancy-maximising block {pb2} threads \
         (min grid {pg2})\n  fused_1d: {} registers/thread, {} B local; occupancy-maximising \
         block {pb1} threads (min grid {pg1})\n",
        a2.registers, a2.local_bytes, a1.registers, a1.local_bytes
    ));
    out.put("device", json!(dev.name()?));
    out.put(
        "kernels",
        json!({"fused_2d": {"registers": a2.registers, "potential_block": pb2},
               "fused_1d": {"registers": a1.registers, "potential_block": pb1}}),
    );

    const SHAPES_2D: [(u32, u32); 4] = [(16, 16), (32, 8), (8, 32), (32, 32)];
    const SIZES_1D: [u32; 4] = [128, 256, 512, 1024];
    let sizes: Vec<(usize, usize)> = if q.quick {
        vec![(1024, 2048)]
    } else {
        vec![(1024, 2048), (8192, 8192)]
    };
    let reps = q.pick(5, 20);
    let scale = 2.0f32;
    let mut all = Vec::new();
    let mut occs: Vec<f64> = Vec::new();
    for &(rows, cols) in &sizes {
        let n = rows * cols;
        let (ri, ci) = (i32::try_from(rows)?, i32::try_from(cols)?);
        let inner = if n <= 1 << 22 { 20 } else { 3 };
        let mut x = s.alloc_zeros::<f32>(n)?;
        let mut bias = s.alloc_zeros::<f32>(cols)?;
        ops::fill_normal(&k, &s, &mut x, 11, 0)?;
        ops::fill_normal(&k, &s, &mut bias, 12, 0)?;
        let want =
            reference::bias_relu_fwd(&s.clone_dtoh(&x)?, &s.clone_dtoh(&bias)?, scale, rows, cols);
        let mut o = s.alloc_zeros::<f32>(n)?;
        let bytes = (2 * n + cols) as f64 * 4.0;
        out.say(format!(
            "relu(x * {scale} + bias) on [{rows}, {cols}] f32 ({} MiB in + out); every output \
             checked bit for bit against the CPU:",
            (2 * n * 4) >> 20
        ));
        let mut t = Table::new(&[
            "kernel",
            "block",
            "grid",
            "GPU time",
            "GB/s",
            "blocks/SM",
            "occupancy",
            "warp covers",
        ]);
        let mut configs: Vec<(String, LaunchConfig, bool, String)> = Vec::new();
        for (bx, by) in SHAPES_2D {
            let cfg = LaunchConfig::new(
                (
                    cols.div_ceil(bx as usize) as u32,
                    rows.div_ceil(by as usize) as u32,
                ),
                (bx, by),
            );
            let cover = if bx >= 32 {
                "1 row x 32 cols (128 B)".to_string()
            } else {
                format!("{} rows x {bx} cols ({} B each)", 32 / bx, bx * 4)
            };
            configs.push((format!("{bx}x{by}"), cfg, true, cover));
        }
        for b in SIZES_1D {
            let cfg = LaunchConfig::new(n.div_ceil(b as usize) as u32, b);
            configs.push((b.to_string(), cfg, false, "32 consecutive elements".into()));
        }
        for (label, cfg, two_d, cover) in &configs {
            let (kern, func, kname) = if *two_d {
                (&k2, &f2, "fused_2d")
            } else {
                (&k1, &f1, "fused_1d")
            };
            s.memset_zeros(&mut o)?;
            // SAFETY: both fused kernels guard r < rows and c < cols, and x and o are
            // [rows, cols], bias [cols] (allocated so above).
            unsafe { kern.launch(&s, cfg, &x, &bias, scale, &mut o, ri, ci) }?;
            same_bits(&format!("{kname} block {label}"), &s.clone_dtoh(&o)?, &want)?;
            let tm = gpu_time(&ctx, &s, reps, inner, |s| {
                // SAFETY: both fused kernels guard r < rows and c < cols, and x and o are
                // [rows, cols], bias [cols] (allocated so above).
                unsafe { kern.launch(s, cfg, &x, &bias, scale, &mut o, ri, ci) }
            })?;
            let threads = cfg.block().x * cfg.block().y;
            let (bps, occ) = occupancy(func, threads, max_threads_sm)?;
            occs.push(occ);
            let g = cfg.grid();
            t.row(&[
                kname.into(),
                label.clone(),
                if *two_d {
                    format!("{} x {}", g.x, g.y)
                } else {
                    g.x.to_string()
                },
                format!("{:.1} µs", tm * 1e6),
                format!("{:.0}", bytes / tm / 1e9),
                bps.to_string(),
                format!("{occ:.0}%"),
                cover.clone(),
            ]);
            all.push(
                json!({"rows": rows, "cols": cols, "kernel": kname, "block": label,
                            "us": tm * 1e6, "gbps": bytes / tm / 1e9, "blocks_per_sm": bps,
                            "occupancy_pct": occ}),
            );
        }
        // The library kernel as the reference point.
        s.memset_zeros(&mut o)?;
        ops::bias_relu_fwd(&k, &s, &x, &bias, scale, &mut o, rows, cols)?;
        same_bits("ops::bias_relu_fwd", &s.clone_dtoh(&o)?, &want)?;
        let tm = gpu_time(&ctx, &s, reps, inner, |s| {
            ops::bias_relu_fwd(&k, s, &x, &bias, scale, &mut o, rows, cols)
        })?;
        t.row(&[
            "ops::bias_relu_fwd".into(),
            "256".into(),
            format!("{} x {}", cols.div_ceil(1024), rows.min(65535)),
            format!("{:.1} µs", tm * 1e6),
            format!("{:.0}", bytes / tm / 1e9),
            String::new(),
            String::new(),
            "float4: 32 x 16 B".into(),
        ]);
        all.push(
            json!({"rows": rows, "cols": cols, "kernel": "ops::bias_relu_fwd",
                        "block": "256", "us": tm * 1e6, "gbps": bytes / tm / 1e9}),
        );
        out.say(t.render());
    }
    let (lo, hi) = occs
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
    out.say(format!(
        "Reading the tables: occupancy is the share of an SM's {max_threads_sm} thread slots \
         that resident blocks fill\n(the driver's cuOccupancyMaxActiveBlocksPerMultiprocessor); \
         here it ranged from {lo:.0}% to {hi:.0}%. Where it is\nequal, what separates the shapes \
         is coalescing: a warp whose 32 threads span one row reads one\n128-byte line, a warp \
         spread over several rows reads several shorter pieces."
    ));
    out.put("results", Value::Array(all));
    out.finish();
    Ok(())
}
