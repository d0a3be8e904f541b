//! Memory-coalescing demonstrations: a coalesced copy, a strided gather, and three transposes.

use crate::launch::{
    blocks, check_len, check_matrix, check_operand, grid, packet_grid, sms, to_i32, BLOCK,
};
use crate::{dispatch, Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

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
    unsafe { k.copy_coalesced()?.launch(s, &cfg, src, dst, n as u64) }?;
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
        .ok_or_else(|| Error::TooLarge {
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
        k.copy_strided()?
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
    /// `transpose_skinny`: a sub-matrix of all the short side through shared memory, for
    /// shapes with fewer than 64 rows or columns.
    Skinny,
    /// `transpose_skinny_v4`: the skinny shapes with every load of a block in flight at once and
    /// float4 both ways; `x` and `out` 16-byte aligned and the long side a multiple of 4
    /// ([`skinny_v4_fits`]).
    SkinnyV4,
    /// `transpose_tiled_aligned`: a 64-column tile whose output rows are cut on 32-byte sector
    /// boundaries and whose lanes follow the 128-byte lines, for rows that do not start on one
    /// (widths or heights not a multiple of 32); at most 65535 × 64 columns.
    Aligned,
    /// Picked by shape ([`transpose_choice`]).
    Auto,
}

/// The transpose [`TransposeAlgo::Auto`] picks for `x: [rows, cols]` at device address `addr`
/// (measurements: kernels/TUNING.md, round 3):
/// - a side shorter than 64: [`TransposeAlgo::Skinny`] ([`transpose`] runs it as
///   [`TransposeAlgo::SkinnyV4`] where [`skinny_v4_fits`]);
/// - rows or columns not a multiple of 32, or `x` not on a 128-byte line:
///   [`TransposeAlgo::Aligned`] (its grid's y counts column tiles: up to 65535 of them);
/// - else [`TransposeAlgo::TiledPadded`].
pub fn transpose_choice(rows: usize, cols: usize, addr: u64) -> TransposeAlgo {
    if rows < 64 || cols < 64 {
        TransposeAlgo::Skinny
    } else if (rows % 32 != 0 || cols % 32 != 0 || addr % 128 != 0) && cols.div_ceil(64) <= 65_535 {
        TransposeAlgo::Aligned
    } else {
        TransposeAlgo::TiledPadded
    }
}

/// Whether `transpose_skinny_v4` takes `x: [rows, cols]` at `x_addr` into `out` at `out_addr`:
/// a side shorter than 64, both addresses 16-byte aligned, and the long side (the rows when the
/// columns are fewer than 64, else the columns) a multiple of 4. [`TransposeAlgo::Auto`] runs
/// [`TransposeAlgo::Skinny`]'s shapes on it when it fits.
pub fn skinny_v4_fits(rows: usize, cols: usize, x_addr: u64, out_addr: u64) -> bool {
    let long = if cols < 64 { rows } else { cols };
    (rows < 64 || cols < 64) && x_addr % 16 == 0 && out_addr % 16 == 0 && long % 4 == 0
}

/// Rows per block of `transpose_skinny` for a tall matrix of `short` (< 64) columns:
/// `8192 / short` rounded down to a power of two (as the kernel computes it).
fn skinny_strip(short: usize) -> usize {
    let fit = 8192 / short.clamp(1, 63);
    1usize << fit.ilog2()
}

/// `out[c][r] = x[r][c]`: `x` is row-major `[rows, cols]`, `out` is `[cols, rows]`. Block
/// (32, 8); grid `(ceil(cols / 32), ceil(rows / 32))` for the naive kernel,
/// `(ceil(cols / 64), ceil(rows / 64))` for the tiled ones and `(ceil(rows / 64),
/// ceil(cols / 64))` for the aligned one (grid y is at most 65535); the skinny kernel: block
/// 256, one block per strip of rows (tall) or per 1024 outputs (wide); its float4 form: one block
/// per strip of rows (tall) or of columns (wide). [`TransposeAlgo::Auto`] picks by shape
/// ([`transpose_choice`]), and runs the skinny shapes in float4 where [`skinny_v4_fits`].
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
    transpose_any(k, s, algo, x, out, rows, cols)
}

/// [`transpose`] for any 4-byte element (`.contiguous()` of a transposed view uses it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn transpose_any<T: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    algo: TransposeAlgo,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
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
    let v4 = skinny_v4_fits(rows, cols, x.as_raw_ptr(), out.as_raw_ptr());
    let algo = match algo {
        TransposeAlgo::Auto => match transpose_choice(rows, cols, x.as_raw_ptr()) {
            TransposeAlgo::Skinny if v4 => TransposeAlgo::SkinnyV4,
            other => other,
        },
        TransposeAlgo::SkinnyV4 if !v4 => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the float4 skinny transpose takes a side shorter than 64, 16-byte aligned x and out and a long side that is a multiple of 4 ({rows} x {cols}, x at {:#x}, out at {:#x}); use TransposeAlgo::Auto",
                    x.as_raw_ptr(),
                    out.as_raw_ptr()
                ),
            })
        }
        TransposeAlgo::Skinny if rows >= 64 && cols >= 64 => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the skinny transpose takes shapes with fewer than 64 rows or columns ({rows} x {cols}); use TransposeAlgo::Auto"
                ),
            })
        }
        other => other,
    };
    let kernel = dispatch::transpose_bits::<T>(k, algo)?;
    let cfg = match algo {
        TransposeAlgo::Skinny if cols < 64 => {
            LaunchConfig::new(blocks(rows, skinny_strip(cols)), 256)
        }
        TransposeAlgo::Skinny => LaunchConfig::new(blocks(rows * cols, 1024), 256),
        TransposeAlgo::SkinnyV4 if cols < 64 => {
            LaunchConfig::new(blocks(rows, skinny_strip(cols)), 256)
        }
        TransposeAlgo::SkinnyV4 => LaunchConfig::new(blocks(cols, skinny_strip(rows)), 256),
        TransposeAlgo::Naive => LaunchConfig::new((blocks(cols, 32), blocks(rows, 32)), (32, 8)),
        TransposeAlgo::Aligned => LaunchConfig::new((blocks(rows, 64), blocks(cols, 64)), (32, 8)),
        _ => LaunchConfig::new((blocks(cols, 64), blocks(rows, 64)), (32, 8)),
    };
    // SAFETY: every kernel reads x[r·cols + c] and writes out[c·rows + r] only for r < rows,
    // c < cols (each guards its indices against the extents it is passed); both buffers were
    // checked to hold rows·cols elements.
    unsafe { kernel.launch(s, &cfg, x, out, r, c) }?;
    Ok(())
}

/// `out[c·ldo + r] = x[r·cols + c]`: `x` is row-major `[rows, cols]`, `out` is `[cols, rows]`
/// with row stride `ldo >= rows` (`transpose_tiled_aligned_ld`; columns `rows..ldo` of `out` are
/// not touched). `out` must hold `(cols - 1)·ldo + rows` elements and `cols` at most
/// 65535 · 64. `sgemm` relayouts a transposed B with it into rows that start on 16-byte
/// boundaries. Block (32, 8), grid `(ceil(rows / 64), ceil(cols / 64))`.
#[allow(clippy::too_many_arguments)]
pub fn transpose_ld(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    ldo: usize,
) -> Result<()> {
    const OP: &str = "transpose_ld";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_operand(OP, "out", out.len(), cols, rows, ldo)?;
    let (r, c, l) = (
        to_i32(OP, "rows", rows)?,
        to_i32(OP, "cols", cols)?,
        to_i32(OP, "ldo", ldo)?,
    );
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    if cols.div_ceil(64) > 65_535 {
        return Err(Error::TooLarge {
            op: OP,
            what: "cols",
            value: cols as u128,
            max: 65_535 * 64,
        });
    }
    let cfg = LaunchConfig::new((blocks(rows, 64), blocks(cols, 64)), (32, 8));
    // SAFETY: the kernel reads x[r·cols + c] and writes out[c·ldo + r] only for r < rows,
    // c < cols; x holds rows·cols elements and out spans a [cols, rows] matrix with row stride
    // ldo (both checked above); the grid's y (column tiles) is within 65535.
    unsafe {
        k.transpose_tiled_aligned_ld()?
            .launch(s, &cfg, x, out, r, c, l)
    }?;
    Ok(())
}
