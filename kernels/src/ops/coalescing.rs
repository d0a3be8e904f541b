//! Memory-coalescing demonstrations: a coalesced copy, a strided gather, and three transposes.

use crate::launch::{blocks, check_len, check_matrix, grid, packet_grid, sms, to_i32, BLOCK};
use crate::{Error, Kernels, Result};
use cuda_driver::{DeviceSlice, LaunchConfig, Stream};

/// `dst = src` with `copy_coalesced` (float4 when both are 16-byte aligned): the bandwidth
/// ceiling. Block 256, `ceil(n / 1024)` blocks (one float4 per thread).
pub fn copy_coalesced(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<f32>,
    dst: &mut DeviceSlice<f32>,
) -> Result<()> {
    let n = dst.len();
    check_len("copy_coalesced", "src", src.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(packet_grid::<f32>(n), BLOCK);
    // SAFETY: the kernel guards every index with the element counts / extents it is
    // passed, which were checked against both buffers above.
    unsafe { k.copy_coalesced.launch(s, &cfg, src, dst, n as u64) }?;
    Ok(())
}

/// `dst[i] = src[i * stride]` for `i < dst.len()` (`copy_strided`): reads waste more of every
/// 32-byte sector as the stride grows. `src` must hold `(dst.len() - 1) · stride + 1` elements.
pub fn copy_strided(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<f32>,
    dst: &mut DeviceSlice<f32>,
    stride: usize,
) -> Result<()> {
    const OP: &str = "copy_strided";
    let n = dst.len();
    if n == 0 {
        return Ok(());
    }
    let need = (n - 1)
        .checked_mul(stride)
        .and_then(|v| v.checked_add(1))
        .ok_or(Error::TooLarge {
            op: OP,
            what: "(dst.len() - 1) * stride",
            value: (n - 1) as u128 * stride as u128,
            max: usize::MAX as u128,
        })?;
    if src.len() < need {
        return Err(Error::Shape {
            op: OP,
            what: "src",
            expected: format!("{n} elements at stride {stride} ({need} elements)"),
            found: format!("{} elements", src.len()),
        });
    }
    let cfg = LaunchConfig::new(grid(n as u64, BLOCK as u64, 32 * sms(s)), BLOCK);
    // SAFETY: the kernel guards every index with the element counts / extents it is
    // passed, which were checked against both buffers above.
    unsafe {
        k.copy_strided
            .launch(s, &cfg, src, dst, n as u64, stride as u64)
    }?;
    Ok(())
}

/// Which transpose kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransposeAlgo {
    /// `transpose_naive`: coalesced reads, strided writes.
    Naive,
    /// `transpose_tiled`: a 64×64 shared-memory tile (32-way bank conflicts on purpose).
    Tiled,
    /// `transpose_tiled_padded`: a 64×65 tile, conflict-free.
    TiledPadded,
    /// `transpose_skinny`: one output element per step, outputs in order (for shapes with a
    /// side shorter than a tile).
    Skinny,
    /// Picked by shape ([`transpose_choice`]).
    Auto,
}

/// The transpose [`TransposeAlgo::Auto`] picks: [`TransposeAlgo::Skinny`] when either side is
/// shorter than 64 (a tile would leave most of its threads idle), else
/// [`TransposeAlgo::TiledPadded`].
pub fn transpose_choice(rows: usize, cols: usize) -> TransposeAlgo {
    if rows < 64 || cols < 64 {
        TransposeAlgo::Skinny
    } else {
        TransposeAlgo::TiledPadded
    }
}

/// `out[c][r] = x[r][c]`: `x` is row-major `[rows, cols]`, `out` is `[cols, rows]`. Block
/// (32, 8); grid `(ceil(cols / 32), ceil(rows / 32))` for the naive kernel and
/// `(ceil(cols / 64), ceil(rows / 64))` for the tiled ones (so `rows <= 65535 · 32`).
#[allow(clippy::too_many_arguments)]
pub fn transpose(
    k: &Kernels,
    s: &Stream,
    algo: TransposeAlgo,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "transpose";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), cols, rows)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let algo = match algo {
        TransposeAlgo::Auto => transpose_choice(rows, cols),
        other => other,
    };
    if algo == TransposeAlgo::Skinny {
        let cfg = LaunchConfig::new(grid((rows * cols) as u64, 4 * 256, 32 * sms(s)), 256);
        // SAFETY: reads x[r·cols + c] and writes out[c·rows + r] only for r < rows, c < cols
        // (element e < rows·cols); both buffers were checked to hold rows·cols floats.
        unsafe { k.transpose_skinny.launch(s, &cfg, x, out, r, c) }?;
        return Ok(());
    }
    let tile = if algo == TransposeAlgo::Naive { 32 } else { 64 };
    let cfg = LaunchConfig::new((blocks(cols, tile), blocks(rows, tile)), (32, 8));
    let kernel = match algo {
        TransposeAlgo::Naive => &k.transpose_naive,
        TransposeAlgo::Tiled => &k.transpose_tiled,
        _ => &k.transpose_tiled_padded,
    };
    // SAFETY: the kernel guards every index with the element counts / extents it is
    // passed, which were checked against both buffers above.
    unsafe { kernel.launch(s, &cfg, x, out, r, c) }?;
    Ok(())
}
