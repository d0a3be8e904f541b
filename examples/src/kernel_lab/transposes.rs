//! Issue 9's remaining transpose misses (kernels/TUNING.md, round 4), each beside our D2D copy of
//! the same bytes measured here, as the sweep does:
//!
//! - **small squares** (512², 1024²: 4.3–4.4 µs, where an elementwise kernel of the same bytes
//!   takes ~3.3): the host side. `ops::transpose` builds its typed handle per call with
//!   `Kernel::from_function`, which asks the driver for every parameter's size
//!   (`cuFuncGetParamInfo` once per parameter plus one failing call). Measured: the library call,
//!   the same kernel launched through the handle checked at load, and the host's cost per call of
//!   each; plus the tile variants of round 2 at these sizes.
//! - **skinny** ([3, 2^20], [2^20, 3]): `kernels/tuning/transpose_v2.cu`'s `tsv_tall` /
//!   `tsv_wide` (every load of a block in flight at once, float4 both ways).
//! - **large odd shapes** (0.849–0.86x): output rows cut on 64- or 128-byte units instead of
//!   32-byte sectors (`tal_cut16`, `tal_cut32`; `tal_cut8` is the library kernel compiled here).

use super::common::{same, time_auto, Lab, Res, Unit};
use super::rounds::{variants, TwoD};
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig, Stream};
use cuda_stack_kernels::ops::{self, TransposeAlgo};
use std::time::Instant;

const TRANSPOSE_V2: &str = include_str!("../../../kernels/tuning/transpose_v2.cu");
/// GPU seconds per timing trial.
const TRIAL: f64 = 0.005;

/// The library kernel `ops::transpose` picks for `[rows, cols]` at `x`, and its launch.
fn library_launch<'k>(
    k: &'k cuda_stack_kernels::Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Res<(&'static str, LaunchConfig, TwoDRef<'k>)> {
    let b = |n: usize, d: usize| n.div_ceil(d) as u32;
    Ok(match ops::transpose_choice(rows, cols, x.as_raw_ptr()) {
        TransposeAlgo::Skinny if cols < 64 => {
            let strip = 1usize << (8192 / cols.clamp(1, 63)).ilog2();
            (
                "transpose_skinny (tall)",
                LaunchConfig::new(b(rows, strip), 256),
                k.transpose_skinny()?,
            )
        }
        TransposeAlgo::Skinny => (
            "transpose_skinny (wide)",
            LaunchConfig::new(b(rows * cols, 1024), 256),
            k.transpose_skinny()?,
        ),
        TransposeAlgo::Aligned => {
            // The op has run this shape before (ops::transpose raises the large tile's shared
            // memory limit); the tile as it picks it.
            let sms = s.context().limits().sm_count;
            let tile = ops::transpose_aligned_tile(rows, cols, sms);
            let cfg = tile.launch_config_on(rows, cols, sms);
            match tile {
                ops::AlignedTile::T128x64 => (
                    "transpose_tiled_aligned_128x64",
                    cfg,
                    k.transpose_tiled_aligned_128x64()?,
                ),
                ops::AlignedTile::T128x128 => (
                    "transpose_tiled_aligned_128x128",
                    cfg,
                    k.transpose_tiled_aligned_128x128()?,
                ),
            }
        }
        _ => (
            "transpose_tiled_padded",
            LaunchConfig::new((b(cols, 64), b(rows, 64)), (32, 8)),
            k.transpose_tiled_padded()?,
        ),
    })
}
type TwoDRef<'a> = &'a Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
    i32,
)>;

/// Host microseconds per call of `f` (`n` calls back to back, then one synchronize, not counted).
fn host_us(s: &Stream, n: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    f()?;
    s.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..n {
        f()?;
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    s.synchronize()?;
    Ok(us)
}

/// Times one candidate kernel on `[rows, cols]` after checking it against `want`.
#[allow(clippy::too_many_arguments)]
fn candidate(
    lab: &mut Lab,
    group: &str,
    name: &str,
    kern: TwoDRef<'_>,
    cfg: LaunchConfig,
    x: &DeviceSlice<f32>,
    y: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    want: &[f32],
    d2d: f64,
) -> Res<()> {
    let s = lab.s.clone();
    let (r, c) = (rows as i32, cols as i32);
    s.memset_bytes(y, 0xFF)?;
    // SAFETY: every transpose variant reads x[r·cols + c] and writes y[c·rows + r] only for
    // r < rows, c < cols (guards on the extents passed), and x, y hold rows·cols floats; the
    // grids are the ones each variant's comment gives.
    unsafe { kern.launch(&s, &cfg, x, y, r, c) }?;
    let check = same(&s.clone_dtoh(y)?, want);
    // SAFETY: as above.
    let t = time_auto(&s, TRIAL, |s| {
        Ok(unsafe { kern.launch(s, &cfg, x, y, r, c) }?)
    })?;
    lab.rel(
        group,
        name,
        t,
        8.0 * (rows * cols) as f64,
        Unit::Bytes,
        Some(d2d),
        &check,
    );
    Ok(())
}

/// Small and skinny shapes: host costs, tiles, the skinny candidates.
pub fn small(lab: &mut Lab) -> Res<()> {
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let v = variants(lab)?;
    let v2 = lab.compile("transpose_v2.cu", TRANSPOSE_V2)?;
    let shapes: &[(usize, usize)] = if lab.quick {
        &[(512, 512), (3, 1 << 16), (1 << 16, 3)]
    } else {
        &[(512, 512), (1024, 1024), (3, 1 << 20), (1 << 20, 3)]
    };
    let f = k.transpose_tiled_padded()?.function().clone();
    let drv = cuda_stack_driver::cuda_stack_sys::Driver::get()?;
    let raw = f.as_raw();
    let us = host_us(&s, 2000, || {
        // What `Kernel::from_function` asked the driver on every call before its answer was
        // cached: each parameter's size, until the failing call past the last one.
        for i in 0.. {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: out-pointers to locals; a live function handle; an index past the end is
            // an error, which ends the loop.
            if unsafe { drv.cuFuncGetParamInfo(raw, i, &mut off, &mut size) }.is_err() {
                break;
            }
        }
        Ok(())
    })?;
    lab.note(
        "host",
        "cuFuncGetParamInfo for every parameter + the failing one (uncached)",
        format!("{us:.2} us/call"),
    );
    let us = host_us(&s, 2000, || {
        // SAFETY: transpose_tiled_padded's own signature (the handle's); never launched here.
        let h: TwoD = unsafe { Kernel::from_function(f.clone())? };
        drop(h);
        Ok(())
    })?;
    lab.note(
        "host",
        "Kernel::from_function (the per-call handle of ops::transpose)",
        format!("{us:.2} us/call"),
    );
    for &(rows, cols) in shapes {
        let group = format!("transpose {rows}x{cols}");
        let n = rows * cols;
        let mut x = s.alloc_zeros::<f32>(n)?;
        ops::fill_uniform(&k, &s, &mut x, 51, 0)?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        let mut copy = s.alloc_zeros::<f32>(n)?;
        let d2d = time_auto(&s, TRIAL, |s| Ok(s.memcpy_dtod(&x, &mut copy)?))?;
        lab.rel(
            &group,
            "D2D copy of the same bytes (reference)",
            d2d,
            8.0 * n as f64,
            Unit::Bytes,
            Some(d2d),
            "",
        );
        ops::transpose(&k, &s, TransposeAlgo::Auto, &x, &mut y, rows, cols)?;
        let want = s.clone_dtoh(&y)?;
        let t = time_auto(&s, TRIAL, |s| {
            Ok(ops::transpose(
                &k,
                s,
                TransposeAlgo::Auto,
                &x,
                &mut y,
                rows,
                cols,
            )?)
        })?;
        lab.rel(
            &group,
            "library ops::transpose (Auto)",
            t,
            8.0 * n as f64,
            Unit::Bytes,
            Some(d2d),
            "",
        );
        let (kname, cfg, kern) = library_launch(&k, &s, &x, rows, cols)?;
        candidate(
            lab,
            &group,
            &format!("{kname}, handle checked at load"),
            kern,
            cfg,
            &x,
            &mut y,
            rows,
            cols,
            &want,
            d2d,
        )?;
        let lib_us = host_us(&s, 2000, || {
            Ok(ops::transpose(
                &k,
                &s,
                TransposeAlgo::Auto,
                &x,
                &mut y,
                rows,
                cols,
            )?)
        })?;
        // SAFETY: as in `candidate`.
        let direct_us = host_us(&s, 2000, || {
            Ok(unsafe { kern.launch(&s, &cfg, &x, &mut y, rows as i32, cols as i32) }?)
        })?;
        lab.note(
            "host",
            &format!("{group}: enqueue per call, library / handle checked at load"),
            format!("{lib_us:.2} / {direct_us:.2} us"),
        );
        if rows >= 64 && cols >= 64 {
            for (name, th, tw, by) in [
                ("tq_32x32_b8", 32u32, 32u32, 8u32),
                ("tq_32x32_b4", 32, 32, 4),
                ("tq_32x64_b8", 32, 64, 8),
                ("tq_64x32_b8", 64, 32, 8),
                ("tq_64x64_b8", 64, 64, 8),
                ("tq_64x64_b16", 64, 64, 16),
            ] {
                // SAFETY: (const float* in, float* out, int rows, int cols), bounds-checked tiles.
                let kern: TwoD = unsafe { v.kernel(name)? };
                let cfg = LaunchConfig::new(
                    ((cols as u32).div_ceil(tw), (rows as u32).div_ceil(th)),
                    (32, by),
                );
                candidate(
                    lab, &group, name, &kern, cfg, &x, &mut y, rows, cols, &want, d2d,
                )?;
            }
        }
        let aligned = x.as_raw_ptr() % 16 == 0 && y.as_raw_ptr() % 16 == 0;
        if cols < 64 && rows % 4 == 0 && aligned {
            // SAFETY: tsv_tall(const float* in, float* out, int rows, int cols).
            let kern: TwoD = unsafe { v2.kernel("tsv_tall")? };
            let strip = 1usize << (8192 / cols).ilog2();
            let cfg = LaunchConfig::new(rows.div_ceil(strip) as u32, 256);
            candidate(
                lab,
                &group,
                &format!("tsv_tall ({strip} rows per block, float4)"),
                &kern,
                cfg,
                &x,
                &mut y,
                rows,
                cols,
                &want,
                d2d,
            )?;
        }
        if rows < 64 && cols >= 64 && cols % 4 == 0 && aligned {
            // SAFETY: tsv_wide(const float* in, float* out, int rows, int cols).
            let kern: TwoD = unsafe { v2.kernel("tsv_wide")? };
            let q = 1usize << (8192 / rows).ilog2();
            let cfg = LaunchConfig::new(cols.div_ceil(q) as u32, 256);
            candidate(
                lab,
                &group,
                &format!("tsv_wide ({q} columns per block, float4)"),
                &kern,
                cfg,
                &x,
                &mut y,
                rows,
                cols,
                &want,
                d2d,
            )?;
        }
    }
    Ok(())
}

/// Large odd shapes: the sector cut against 64- and 128-byte cuts.
pub fn odd(lab: &mut Lab) -> Res<()> {
    let (k, s) = (lab.k.clone(), lab.s.clone());
    let v2 = lab.compile("transpose_v2.cu", TRANSPOSE_V2)?;
    let shapes: &[(usize, usize)] = if lab.quick {
        &[(1234, 679), (1023, 511)]
    } else {
        &[(12345, 6789), (16383, 8191), (8191, 16385)]
    };
    for &(rows, cols) in shapes {
        let group = format!("transpose {rows}x{cols}");
        let n = rows * cols;
        let mut x = s.alloc_zeros::<f32>(n)?;
        ops::fill_uniform(&k, &s, &mut x, 52, 0)?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        let d2d = {
            let mut copy = s.alloc_zeros::<f32>(n)?;
            time_auto(&s, TRIAL, |s| Ok(s.memcpy_dtod(&x, &mut copy)?))?
        };
        lab.rel(
            &group,
            "D2D copy of the same bytes (reference)",
            d2d,
            8.0 * n as f64,
            Unit::Bytes,
            Some(d2d),
            "",
        );
        ops::transpose(&k, &s, TransposeAlgo::Auto, &x, &mut y, rows, cols)?;
        let want = s.clone_dtoh(&y)?;
        let t = time_auto(&s, TRIAL, |s| {
            Ok(ops::transpose(
                &k,
                s,
                TransposeAlgo::Auto,
                &x,
                &mut y,
                rows,
                cols,
            )?)
        })?;
        lab.rel(
            &group,
            "library ops::transpose (Auto)",
            t,
            8.0 * n as f64,
            Unit::Bytes,
            Some(d2d),
            "",
        );
        let cfg = LaunchConfig::new(
            (rows.div_ceil(64) as u32, cols.div_ceil(64) as u32),
            (32, 8),
        );
        for (name, what) in [
            (
                "tal_cut8",
                "32-byte sector cut (the library kernel, compiled here)",
            ),
            ("tal_cut16", "64-byte cut (80 input rows per tile)"),
            ("tal_cut32", "128-byte line cut (96 input rows per tile)"),
        ] {
            // SAFETY: tal_cut*(const float* in, float* out, int rows, int cols).
            let kern: TwoD = unsafe { v2.kernel(name)? };
            candidate(
                lab,
                &group,
                &format!("{name}: {what}"),
                &kern,
                cfg,
                &x,
                &mut y,
                rows,
                cols,
                &want,
                d2d,
            )?;
        }
    }
    Ok(())
}
