//! Numerically stable row-wise softmax (online max and sum).

use crate::launch::{blocks, check_matrix, to_i32};
use crate::{Kernels, Result};
use cuda_driver::{DeviceSlice, LaunchConfig, Stream};

/// Which softmax kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgo {
    /// [`SoftmaxAlgo::Warp`] for rows of at most 1024 columns, [`SoftmaxAlgo::Block`] beyond.
    Auto,
    /// `softmax_warp_f32`: one warp per row (block 128 = 4 rows, grid `ceil(rows / 4)`).
    Warp,
    /// `softmax_block_f32`: one block of 256 threads per row (grid `rows`).
    Block,
}

/// The column count up to which [`SoftmaxAlgo::Auto`] picks the warp-per-row kernel (a warp
/// keeps up to 32 × 32 floats of its row in registers between the two passes).
pub const WARP_MAX_COLS: usize = 1024;

/// `out[r] = softmax(x[r])` for each row of a row-major `[rows, cols]` f32 array:
/// `exp(x − max) · (1 / Σ exp(x − max))`; a row of all -inf gives NaN. Picks the warp-per-row
/// kernel for `cols <= 1024` and the block-per-row kernel otherwise.
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

/// [`softmax_rows`] with a chosen kernel (both are correct for every shape).
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
        SoftmaxAlgo::Auto if cols <= WARP_MAX_COLS => SoftmaxAlgo::Warp,
        SoftmaxAlgo::Auto => SoftmaxAlgo::Block,
        other => other,
    };
    if algo == SoftmaxAlgo::Warp {
        let cfg = LaunchConfig::new(blocks(rows, 4), 128);
        k.softmax_warp_f32.launch(s, &cfg, x, out, r, c)?;
    } else {
        let cfg = LaunchConfig::new(rows as u32, 256);
        k.softmax_block_f32.launch(s, &cfg, x, out, r, c)?;
    }
    Ok(())
}
