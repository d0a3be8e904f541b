//! `kernel_lab`: the tuning bench behind the fast kernels. It compiles candidate variants
//! (`kernels/tuning/variants.cu`, and the SGEMM with a grouped block order) with NVRTC at run time,
//! checks each against the library kernel's output, and times them beside the library kernel, the
//! device-to-device copy and PyTorch (`--torch FILE`, taken in the same run). Its findings are in
//! `kernels/TUNING.md`; the winners live in `kernels/cuda/`.
//!
//! Run: `cargo run --release -p cuda-examples --bin kernel_lab [-- --torch torch.txt] [--quick]`

use clap::Parser;
use cuda_driver::nvrtc::{compile_ptx, CompileOptions};
use cuda_driver::{Context, DeviceSlice, Kernel, LaunchConfig, Module, Stream};
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::torch::TorchBaseline;
use cuda_kernels::ops::{self, SoftmaxAlgo, Transpose, TransposeAlgo};
use cuda_kernels::Kernels;
use std::process::ExitCode;

const VARIANTS: &str = include_str!("../../../kernels/tuning/variants.cu");
const DTYPE: &str = include_str!("../../../kernels/cuda/dtype.cuh");
const SGEMM: &str = include_str!("../../../kernels/cuda/sgemm.cu");
const SWIZZLE: &str = include_str!("../../../kernels/tuning/sgemm_swizzle.cuh");

#[derive(Parser)]
#[command(about = "Candidate kernel variants, checked and timed against the library and PyTorch")]
struct Args {
    /// `torch_baseline.py` output from the same run.
    #[arg(long)]
    torch: Option<String>,
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("kernel_lab", body)
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;
type Bin = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u64,
)>;
type TwoD = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
    i32,
)>;
type Gemm = Kernel<(
    i32,
    i32,
    i32,
    f32,
    &'static DeviceSlice<f32>,
    i32,
    &'static DeviceSlice<f32>,
    i32,
    f32,
    &'static mut DeviceSlice<f32>,
    i32,
)>;

/// Median seconds per call over 5 trials of `reps` calls (after a warm-up), timed with events.
fn time(s: &Stream, reps: usize, mut f: impl FnMut(&Stream) -> Res<()>) -> Res<f64> {
    f(s)?;
    let mut v = Vec::new();
    for _ in 0..5 {
        let ((), d) = s.time(|s| {
            for _ in 0..reps {
                f(s).map_err(|e| cuda_driver::Error::Unsupported {
                    what: "lab step",
                    why: e.to_string(),
                })?;
            }
            Ok(())
        })?;
        v.push(d.as_secs_f64() / reps as f64);
    }
    Ok(median(&v))
}

fn compile(ctx: &Context, name: &str, src: &str) -> Res<Module> {
    let ptx = compile_ptx(
        name,
        src,
        &CompileOptions {
            std: Some("c++17".into()),
            ..CompileOptions::for_context(ctx)
        },
    )?;
    Ok(ctx.load_ptx(&ptx)?)
}

struct Report {
    table: Table,
    torch: TorchBaseline,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        group: &str,
        name: &str,
        secs: f64,
        rate: f64,
        unit: &str,
        reference: f64,
        torch_key: &str,
        check: &str,
    ) {
        let vs = self
            .torch
            .get(torch_key)
            .map(|t| format!("{:.3}x", rate / t))
            .unwrap_or_default();
        self.table.row(&[
            group.into(),
            name.into(),
            format!("{:.1} us", secs * 1e6),
            format!("{rate:.1} {unit}"),
            format!("{:.3}", rate / reference),
            vs,
            check.into(),
        ]);
    }
}

fn same(a: &[f32], b: &[f32]) -> String {
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.is_nan() != y.is_nan()) {
        "DIFFERENT".into()
    } else if worst == 0.0 {
        "bit-identical".into()
    } else {
        format!("max |diff| {worst:.1e}")
    }
}

fn body() -> ProgramResult {
    let args = Args::parse();
    let quick = args.common.quick;
    let torch = TorchBaseline::load(args.torch.as_ref())?;
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let sms = ctx.limits().sm_count as u64;
    let mut rep = Report {
        table: Table::new(&[
            "kernel",
            "variant",
            "time",
            "rate",
            "x ref",
            "vs torch",
            "check vs library",
        ]),
        torch,
    };
    let v = compile(&ctx, "variants.cu", VARIANTS)?;

    // Reference: the driver's device-to-device copy.
    let n: usize = if quick { 1 << 22 } else { 1 << 28 };
    let reps = if quick { 3 } else { 20 };
    let mut a = s.alloc_zeros::<f32>(n)?;
    let mut b = s.alloc_zeros::<f32>(n)?;
    ops::fill_uniform(&k, &s, &mut a, 1, 0)?;
    ops::fill_uniform(&k, &s, &mut b, 2, 0)?;
    let mut c = s.alloc_zeros::<f32>(n)?;
    let d2d_t = time(&s, reps, |s| Ok(s.memcpy_dtod(&a, &mut c)?))?;
    let d2d = 8.0 * n as f64 / d2d_t / 1e9;
    rep.row(
        "copy",
        "memcpy_dtod (reference)",
        d2d_t,
        d2d,
        "GB/s",
        d2d,
        "d2d",
        "",
    );

    // Vector add.
    ops::vector_add(&k, &s, &a, &b, &mut c)?;
    let want = s.clone_dtoh(&c)?;
    let t = time(&s, reps, |s| Ok(ops::vector_add(&k, s, &a, &b, &mut c)?))?;
    rep.row(
        "vector add",
        "library vector_add_fast",
        t,
        12.0 * n as f64 / t / 1e9,
        "GB/s",
        d2d,
        "add",
        "",
    );
    let n4 = (n / 4) as u64;
    for (name, per_thread, block, fixed_grid) in [
        ("va_x1", 1u64, 256u32, None),
        ("va_x2", 2, 256, None),
        ("va_x4", 4, 256, None),
        ("va_x2_cs", 2, 256, None),
        ("va_x4_cs", 4, 256, None),
        ("va_x1", 1, 128, None),
        ("va_x4", 4, 128, None),
        ("va_gs2", 1, 256, Some(sms * 8)),
        ("va_gs2", 1, 256, Some(sms * 16)),
    ] {
        // SAFETY: the variants take (const float*, const float*, float*, u64 packets) and write
        // packets < n4 of c only.
        let kern: Bin = unsafe { v.kernel(name)? };
        let grid = fixed_grid.unwrap_or_else(|| n4.div_ceil(block as u64 * per_thread)) as u32;
        let cfg = LaunchConfig::new(grid, block);
        s.memset_zeros(&mut c)?;
        // SAFETY: each variant writes packets < n4 of c and reads a, b there; all three hold n4 packets.
        unsafe { kern.launch(&s, &cfg, &a, &b, &mut c, n4) }?;
        let check = same(&s.clone_dtoh(&c)?, &want);
        let t = time(&s, reps, |s| {
            Ok(unsafe { kern.launch(s, &cfg, &a, &b, &mut c, n4) }?)
        })?;
        rep.row(
            "vector add",
            &format!("{name} b{block} g{grid}"),
            t,
            12.0 * n as f64 / t / 1e9,
            "GB/s",
            d2d,
            "add",
            &check,
        );
    }
    drop((a, b, c));

    // Transpose.
    let m: usize = if quick { 2048 } else { 16384 };
    let mut x = s.alloc_zeros::<f32>(m * m)?;
    ops::fill_uniform(&k, &s, &mut x, 3, 0)?;
    let mut y = s.alloc_zeros::<f32>(m * m)?;
    ops::transpose(&k, &s, TransposeAlgo::TiledPadded, &x, &mut y, m, m)?;
    let want = s.clone_dtoh(&y)?;
    let t = time(&s, reps, |s| {
        Ok(ops::transpose(
            &k,
            s,
            TransposeAlgo::TiledPadded,
            &x,
            &mut y,
            m,
            m,
        )?)
    })?;
    rep.row(
        "transpose",
        "library transpose_tiled_padded",
        t,
        8.0 * (m * m) as f64 / t / 1e9,
        "GB/s",
        d2d,
        "",
        "",
    );
    for (name, th, tw, by) in [
        ("tq_32x32_b8", 32u32, 32u32, 8u32),
        ("tq_32x32_b4", 32, 32, 4),
        ("tq_32x64_b8", 32, 64, 8),
        ("tq_32x64_b4", 32, 64, 4),
        ("tq_64x32_b8", 64, 32, 8),
        ("tq_64x64_b8", 64, 64, 8),
        ("tq_64x64_b16", 64, 64, 16),
    ] {
        // SAFETY: (const float* in, float* out, int rows, int cols), bounds-checked tiles.
        let kern: TwoD = unsafe { v.kernel(name)? };
        let cfg = LaunchConfig::new(((m as u32).div_ceil(tw), (m as u32).div_ceil(th)), (32, by));
        s.memset_zeros(&mut y)?;
        // SAFETY: the tile kernels guard r < m, c < m, and x and y are m x m.
        unsafe { kern.launch(&s, &cfg, &x, &mut y, m as i32, m as i32) }?;
        let check = same(&s.clone_dtoh(&y)?, &want);
        let t = time(&s, reps, |s| {
            Ok(unsafe { kern.launch(s, &cfg, &x, &mut y, m as i32, m as i32) }?)
        })?;
        rep.row(
            "transpose",
            name,
            t,
            8.0 * (m * m) as f64 / t / 1e9,
            "GB/s",
            d2d,
            "",
            &check,
        );
    }
    drop((x, y));

    // Softmax 4096 x 4096.
    let (rows, cols) = if quick {
        (512usize, 4096usize)
    } else {
        (4096, 4096)
    };
    let mut x = s.alloc_zeros::<f32>(rows * cols)?;
    ops::fill_uniform(&k, &s, &mut x, 4, 0)?;
    let mut y = s.alloc_zeros::<f32>(rows * cols)?;
    ops::softmax_rows(&k, &s, &x, &mut y, rows, cols)?;
    let want = s.clone_dtoh(&y)?;
    let t = time(&s, reps, |s| {
        Ok(ops::softmax_rows(&k, s, &x, &mut y, rows, cols)?)
    })?;
    rep.row(
        "softmax",
        "library softmax_rows",
        t,
        8.0 * (rows * cols) as f64 / t / 1e9,
        "GB/s",
        d2d,
        "softmax",
        "",
    );
    for (name, nt) in [("sm_256x4", 256u32), ("sm_256x4_exp2", 256)] {
        // SAFETY: (const float* in, float* out, int rows, int cols) with cols == NT * 4 * P.
        let kern: TwoD = unsafe { v.kernel(name)? };
        let cfg = LaunchConfig::new(rows as u32, nt);
        s.memset_zeros(&mut y)?;
        // SAFETY: one block per row r < rows, columns < cols; x and y are [rows, cols].
        unsafe { kern.launch(&s, &cfg, &x, &mut y, rows as i32, cols as i32) }?;
        let check = same(&s.clone_dtoh(&y)?, &want);
        let t = time(&s, reps, |s| {
            Ok(unsafe { kern.launch(s, &cfg, &x, &mut y, rows as i32, cols as i32) }?)
        })?;
        rep.row(
            "softmax",
            name,
            t,
            8.0 * (rows * cols) as f64 / t / 1e9,
            "GB/s",
            d2d,
            "softmax",
            &check,
        );
    }
    drop((x, y));
    // Where the registers kernel should take over from warp-per-row: 2^24 floats as rows of
    // different widths.
    for cols in [256usize, 512, 1024, 2048, 8192, 16384] {
        let rows = (if quick { 1usize << 20 } else { 1 << 24 }) / cols;
        let mut x = s.alloc_zeros::<f32>(rows * cols)?;
        ops::fill_uniform(&k, &s, &mut x, 7, 0)?;
        let mut y = s.alloc_zeros::<f32>(rows * cols)?;
        for algo in [
            SoftmaxAlgo::Warp,
            SoftmaxAlgo::Registers,
            SoftmaxAlgo::Block,
        ] {
            let t = time(&s, reps, |s| {
                Ok(ops::softmax_rows_with(&k, s, algo, &x, &mut y, rows, cols)?)
            })?;
            let name = format!("{algo:?} {rows}x{cols}");
            rep.row(
                "softmax width",
                &name,
                t,
                8.0 * (rows * cols) as f64 / t / 1e9,
                "GB/s",
                d2d,
                "",
                "",
            );
        }
    }

    // SGEMM 4096^3: tile depth, register budget and block order.
    let g: usize = if quick { 1024 } else { 4096 };
    let mut a = s.alloc_zeros::<f32>(g * g)?;
    let mut b = s.alloc_zeros::<f32>(g * g)?;
    ops::fill_uniform(&k, &s, &mut a, 5, 0)?;
    ops::fill_uniform(&k, &s, &mut b, 6, 0)?;
    let mut c = s.alloc_zeros::<f32>(g * g)?;
    let gi = g as i32;
    let nt = Transpose::NoTrans;
    ops::sgemm(&k, &s, nt, nt, g, g, g, 1.0, &a, g, &b, g, 0.0, &mut c, g)?;
    let want = s.clone_dtoh(&c)?;
    let greps = if quick { 2 } else { 10 };
    let flops = 2.0 * (g as f64).powi(3);
    let t = time(&s, greps, |s| {
        Ok(ops::sgemm(
            &k, s, nt, nt, g, g, g, 1.0, &a, g, &b, g, 0.0, &mut c, g,
        )?)
    })?;
    let tkey = format!("sgemm_{g}");
    let cublas = rep.torch.get(&tkey).unwrap_or(f64::NAN);
    rep.row(
        "sgemm",
        "library sgemm_nn",
        t,
        flops / t / 1e12,
        "TFLOP/s",
        cublas,
        &tkey,
        "",
    );
    let sgemm_text = SGEMM.replace("#include \"dtype.cuh\"", "");
    let dtype_text = DTYPE.replace("#pragma once", "");
    for (bk, min_blocks, group) in [
        (8u32, 2u32, 0u32),
        (8, 1, 0),
        (16, 2, 0),
        (16, 1, 0),
        (16, 2, 8),
    ] {
        let swizzle = if group > 0 {
            format!("#define SWZ_G {group}\n{SWIZZLE}")
        } else {
            String::new()
        };
        let src = format!("#define BK {bk}\n#define SGEMM_MIN_BLOCKS {min_blocks}\n{dtype_text}\n{swizzle}\n{sgemm_text}");
        let module = compile(&ctx, "sgemm_variant.cu", &src)?;
        // SAFETY: the library's sgemm_nn signature; only tile depth, register budget and block
        // order differ.
        let kern: Gemm = unsafe { module.kernel("sgemm_nn")? };
        let regs = kern.function().attributes()?.registers;
        let gb = (g as u32).div_ceil(128);
        let cfg = LaunchConfig::new((gb, gb), 256);
        s.memset_zeros(&mut c)?;
        // SAFETY: sgemm guards rows and columns < g, and a, b, c are g x g with leading dimension g.
        unsafe { kern.launch(&s, &cfg, gi, gi, gi, 1.0, &a, gi, &b, gi, 0.0, &mut c, gi) }?;
        let check = same(&s.clone_dtoh(&c)?, &want);
        let t = time(&s, greps, |s| {
            Ok(unsafe { kern.launch(s, &cfg, gi, gi, gi, 1.0, &a, gi, &b, gi, 0.0, &mut c, gi) }?)
        })?;
        let groups = if group > 0 {
            format!(", {group}-row groups")
        } else {
            String::new()
        };
        let name = format!("BK {bk}, {min_blocks} blocks/SM, {regs} regs{groups}");
        rep.row(
            "sgemm",
            &name,
            t,
            flops / t / 1e12,
            "TFLOP/s",
            cublas,
            &tkey,
            &check,
        );
    }
    println!(
        "x ref: multiple of the D2D copy (memory-bound rows) or of cuBLAS via PyTorch (sgemm)"
    );
    rep.table.print();
    Ok(())
}
