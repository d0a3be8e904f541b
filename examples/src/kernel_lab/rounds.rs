//! Rounds 1 and 2 of kernels/TUNING.md: vector add, the 16384² transpose, softmax 4096² and
//! SGEMM 4096³, each beside the D2D copy (or cuBLAS) and PyTorch.

use super::common::{same, time, Lab, Res};
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig};
use cuda_stack_kernels::ops::{self, SoftmaxAlgo, Transpose, TransposeAlgo};

const VARIANTS: &str = include_str!("../../../kernels/tuning/variants.cu");
const DTYPE: &str = include_str!("../../../kernels/cuda/dtype.cuh");
const SGEMM: &str = include_str!("../../../kernels/cuda/sgemm.cu");
const SWIZZLE: &str = include_str!("../../../kernels/tuning/sgemm_swizzle.cuh");

type Bin = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u64,
)>;
/// `(const float* in, float* out, int rows, int cols)`.
pub type TwoD = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
    i32,
)>;
/// The library's `sgemm_*` signature.
pub type Gemm = Kernel<(
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

/// The variants of `kernels/tuning/variants.cu`, compiled for this GPU.
pub fn variants(lab: &Lab) -> Res<cuda_stack_driver::Module> {
    lab.compile("variants.cu", VARIANTS)
}

/// The driver's device-to-device copy of 2^28 floats (GB/s counting read + write): the
/// reference of the memory-bound rows.
pub fn d2d_reference(lab: &mut Lab) -> Res<f64> {
    let n: usize = if lab.quick { 1 << 22 } else { 1 << 28 };
    let reps = if lab.quick { 3 } else { 20 };
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let mut a = s.alloc_zeros::<f32>(n)?;
    ops::fill_uniform(&k, &s, &mut a, 1, 0)?;
    let mut c = s.alloc_zeros::<f32>(n)?;
    let t = time(&s, reps, |s| Ok(s.memcpy_dtod(&a, &mut c)?))?;
    let d2d = 8.0 * n as f64 / t / 1e9;
    lab.row(
        "copy",
        "memcpy_dtod (reference)",
        t,
        d2d,
        "GB/s",
        d2d,
        "d2d",
        "",
    );
    Ok(d2d)
}

/// Vector add 2^28: the library beside one-float4-per-thread, more packets per thread, `.cs`
/// streaming and grid-stride variants (round 1).
pub fn vector_add(lab: &mut Lab, d2d: f64) -> Res<()> {
    let n: usize = if lab.quick { 1 << 22 } else { 1 << 28 };
    let reps = if lab.quick { 3 } else { 20 };
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let sms = lab.ctx.limits().sm_count as u64;
    let v = variants(lab)?;
    let mut a = s.alloc_zeros::<f32>(n)?;
    let mut b = s.alloc_zeros::<f32>(n)?;
    ops::fill_uniform(&k, &s, &mut a, 1, 0)?;
    ops::fill_uniform(&k, &s, &mut b, 2, 0)?;
    let mut c = s.alloc_zeros::<f32>(n)?;
    ops::vector_add(&k, &s, &a, &b, &mut c)?;
    let want = s.clone_dtoh(&c)?;
    let t = time(&s, reps, |s| Ok(ops::vector_add(&k, s, &a, &b, &mut c)?))?;
    lab.row(
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
            // SAFETY: as above.
            Ok(unsafe { kern.launch(s, &cfg, &a, &b, &mut c, n4) }?)
        })?;
        let name = format!("{name} b{block} g{grid}");
        lab.row(
            "vector add",
            &name,
            t,
            12.0 * n as f64 / t / 1e9,
            "GB/s",
            d2d,
            "add",
            &check,
        );
    }
    Ok(())
}

/// The 16384² transpose: tile shapes and loads in flight per thread (round 2).
pub fn transpose_square(lab: &mut Lab, d2d: f64) -> Res<()> {
    let m: usize = if lab.quick { 2048 } else { 16384 };
    let reps = if lab.quick { 3 } else { 20 };
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let v = variants(lab)?;
    let mut x = s.alloc_zeros::<f32>(m * m)?;
    ops::fill_uniform(&k, &s, &mut x, 3, 0)?;
    let mut y = s.alloc_zeros::<f32>(m * m)?;
    let tp = TransposeAlgo::TiledPadded;
    ops::transpose(&k, &s, tp, &x, &mut y, m, m)?;
    let want = s.clone_dtoh(&y)?;
    let t = time(&s, reps, |s| {
        Ok(ops::transpose(&k, s, tp, &x, &mut y, m, m)?)
    })?;
    let rate = |t: f64| 8.0 * (m * m) as f64 / t / 1e9;
    lab.row(
        "transpose",
        "library transpose_tiled_padded",
        t,
        rate(t),
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
            // SAFETY: as above.
            Ok(unsafe { kern.launch(s, &cfg, &x, &mut y, m as i32, m as i32) }?)
        })?;
        lab.row("transpose", name, t, rate(t), "GB/s", d2d, "", &check);
    }
    Ok(())
}

/// Softmax 4096²: the registers kernel's variants, and where it should take over from
/// warp-per-row (round 2).
pub fn softmax(lab: &mut Lab, d2d: f64) -> Res<()> {
    let reps = if lab.quick { 3 } else { 20 };
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let v = variants(lab)?;
    let (rows, cols) = if lab.quick {
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
    let rate = |t: f64, n: usize| 8.0 * n as f64 / t / 1e9;
    lab.row(
        "softmax",
        "library softmax_rows",
        t,
        rate(t, rows * cols),
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
            // SAFETY: as above.
            Ok(unsafe { kern.launch(s, &cfg, &x, &mut y, rows as i32, cols as i32) }?)
        })?;
        lab.row(
            "softmax",
            name,
            t,
            rate(t, rows * cols),
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
        let rows = (if lab.quick { 1usize << 20 } else { 1 << 24 }) / cols;
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
            lab.row(
                "softmax width",
                &name,
                t,
                rate(t, rows * cols),
                "GB/s",
                d2d,
                "",
                "",
            );
        }
    }
    Ok(())
}

/// SGEMM 4096³: tile depth, register budget and block order (rounds 1 and 2).
pub fn sgemm_square(lab: &mut Lab) -> Res<()> {
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let g: usize = if lab.quick { 1024 } else { 4096 };
    let mut a = s.alloc_zeros::<f32>(g * g)?;
    let mut b = s.alloc_zeros::<f32>(g * g)?;
    ops::fill_uniform(&k, &s, &mut a, 5, 0)?;
    ops::fill_uniform(&k, &s, &mut b, 6, 0)?;
    let mut c = s.alloc_zeros::<f32>(g * g)?;
    let gi = g as i32;
    let nt = Transpose::NoTrans;
    ops::sgemm(&k, &s, nt, nt, g, g, g, 1.0, &a, g, &b, g, 0.0, &mut c, g)?;
    let want = s.clone_dtoh(&c)?;
    let greps = if lab.quick { 2 } else { 10 };
    let flops = 2.0 * (g as f64).powi(3);
    let t = time(&s, greps, |s| {
        Ok(ops::sgemm(
            &k, s, nt, nt, g, g, g, 1.0, &a, g, &b, g, 0.0, &mut c, g,
        )?)
    })?;
    let tkey = format!("sgemm_{g}");
    let cublas = lab.torch.get(&tkey).unwrap_or(f64::NAN);
    lab.row(
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
        let module = lab.compile("sgemm_variant.cu", &src)?;
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
            // SAFETY: as above.
            Ok(unsafe { kern.launch(s, &cfg, gi, gi, gi, 1.0, &a, gi, &b, gi, 0.0, &mut c, gi) }?)
        })?;
        let groups = if group > 0 {
            format!(", {group}-row groups")
        } else {
            String::new()
        };
        let name = format!("BK {bk}, {min_blocks} blocks/SM, {regs} regs{groups}");
        lab.row(
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
    Ok(())
}
