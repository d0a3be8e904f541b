//! Numerically stable row-wise softmax (online max and sum).

use crate::launch::{blocks, check_matrix, to_i32};
use crate::{Error, Kernels, Result};
use cuda_driver::{DeviceSlice, LaunchConfig, Stream};

/// Which softmax kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgo {
    /// [`SoftmaxAlgo::Registers`] where it fits, else [`SoftmaxAlgo::Warp`] for rows of at most
    /// 1024 columns and [`SoftmaxAlgo::Block`] beyond.
    Auto,
    /// `softmax_warp_f32`: one warp per row (block 128 = 4 rows, grid `ceil(rows / 4)`).
    Warp,
    /// `softmax_block_f32`: one block of 256 threads per row (grid `rows`).
    Block,
    /// `softmax_rows_regs_f32`: one block per row with the row in registers (4 float4 per
    /// thread, block `ceil(cols / 16)` rounded up to a warp); needs `cols % 4 == 0`, 16-byte
    /// aligned `x` and `out`, and `cols <= 16384`.
    Registers,
}

/// The column count up to which [`SoftmaxAlgo::Auto`] picks the warp-per-row kernel (a warp
/// keeps up to 32 × 32 floats of its row in registers between the two passes).
pub const WARP_MAX_COLS: usize = 1024;

/// The longest row [`SoftmaxAlgo::Registers`] holds in registers (4 float4 × 1024 threads).
pub const REGISTERS_MAX_COLS: usize = 16384;

/// Whether [`SoftmaxAlgo::Registers`] can run on this shape and these buffers.
fn registers_fit(x: &DeviceSlice<f32>, out: &DeviceSlice<f32>, cols: usize) -> bool {
    cols % 4 == 0
        && cols <= REGISTERS_MAX_COLS
        && x.as_raw_ptr() % 16 == 0
        && out.as_raw_ptr() % 16 == 0
}

/// The kernel [`SoftmaxAlgo::Auto`] (and so [`softmax_rows`]) picks for rows of `cols` floats in
/// these buffers: [`SoftmaxAlgo::Registers`] where it fits (on an H200 it beat warp-per-row at
/// every width from 256 to 1024 columns by 1.4x, and block-per-row beyond; kernels/TUNING.md),
/// else [`SoftmaxAlgo::Warp`] up to [`WARP_MAX_COLS`], else [`SoftmaxAlgo::Block`].
pub fn softmax_choice(x: &DeviceSlice<f32>, out: &DeviceSlice<f32>, cols: usize) -> SoftmaxAlgo {
    if registers_fit(x, out, cols) {
        SoftmaxAlgo::Registers
    } else if cols <= WARP_MAX_COLS {
        SoftmaxAlgo::Warp
    } else {
        SoftmaxAlgo::Block
    }
}

/// `out[r] = softmax(x[r])` for each row of a row-major `[rows, cols]` f32 array:
/// `exp(x − max) · (1 / Σ exp(x − max))`; a row of all -inf gives NaN. Picks the registers
/// kernel where it fits (`cols % 4 == 0`, aligned, `cols <= 16384`), else warp-per-row for
/// `cols <= 1024` and block-per-row beyond.
pub fn softmax_rows(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    softmax_rows_with(k, s, SoftmaxAlgo::Auto, x, out, rows, cols)
}

/// [`softmax_rows`] with a chosen kernel (`Warp` and `Block` are correct for every shape;
/// `Registers` returns [`crate::Error::Invalid`] for a shape or alignment it cannot take).
#[allow(clippy::too_many_arguments)]
pub fn softmax_rows_with(
    k: &Kernels,
    s: &Stream,
    algo: SoftmaxAlgo,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "softmax_rows";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), rows, cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let algo = match algo {
        SoftmaxAlgo::Auto => softmax_choice(x, out, cols),
        SoftmaxAlgo::Registers if !registers_fit(x, out, cols) => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the registers kernel needs cols % 4 == 0, cols <= {REGISTERS_MAX_COLS} and 16-byte aligned buffers (cols = {cols}); use SoftmaxAlgo::Block"
                ),
            })
        }
        other => other,
    };
    match algo {
        SoftmaxAlgo::Warp => {
            let cfg = LaunchConfig::new(blocks(rows, 4), 128);
            // SAFETY: each kernel handles rows r < rows and columns c < cols of x and out, both
            // checked above to be dense [rows, cols] matrices.
            unsafe { k.softmax_warp_f32.launch(s, &cfg, x, out, r, c) }?;
        }
        SoftmaxAlgo::Registers => {
            let threads = (cols / 4).div_ceil(4).div_ceil(32).clamp(1, 32) as u32 * 32;
            let cfg = LaunchConfig::new(rows as u32, threads);
            // SAFETY: each kernel handles rows r < rows and columns c < cols of x and out, both
            // checked above to be dense [rows, cols] matrices.
            unsafe { k.softmax_rows_regs_f32.launch(s, &cfg, x, out, r, c) }?;
        }
        _ => {
            let cfg = LaunchConfig::new(rows as u32, 256);
            // SAFETY: each kernel handles rows r < rows and columns c < cols of x and out, both
            // checked above to be dense [rows, cols] matrices.
            unsafe { k.softmax_block_f32.launch(s, &cfg, x, out, r, c) }?;
        }
    }
    Ok(())
}
