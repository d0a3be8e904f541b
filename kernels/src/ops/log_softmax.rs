//! Row softmax / log-softmax in f32, f64, f16 and bf16 (f16/bf16 computed in f32, each result
//! rounded once), their backward passes, and the fused cross-entropy
//! loss (`cuda/log_softmax.cu`: one warp per row, 8 rows per block of 256).

use crate::dispatch;
use crate::launch::{check_len, check_matrix, to_i32};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Rows handled by one block of 256 threads (one warp each).
const ROWS_PER_BLOCK: usize = 8;

/// Blocks of 8 rows, capped at 65535 (the kernels loop over rows for any grid).
fn config(rows: usize) -> LaunchConfig {
    let blocks = rows.div_ceil(ROWS_PER_BLOCK).clamp(1, 65535) as u32;
    LaunchConfig::new(blocks, 256)
}

/// `y = softmax(x)` (`log == false`) or `y = log_softmax(x) = x − max − log Σ exp(x − max)`
/// (`log == true`) along each row of the row-major `[rows, cols]` array `x`. f32, f64, f16 and
/// bf16 (the f32 softmax of [`crate::ops::softmax_rows`] is faster; this one serves the other
/// dtypes and the log form).
pub fn row_softmax<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    y: &mut DeviceSlice<T>,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    const OP: &str = "row_softmax";
    let kernel = dispatch::row_softmax::<T>(k)?;
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "y", y.len(), rows, cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: the kernel reads and writes row r < rows, column c < cols of x and y only; both
    // were checked to hold rows · cols elements.
    unsafe { kernel.launch(s, &config(rows), x, y, r, c, i32::from(log)) }?;
    Ok(())
}

/// The backward pass of [`row_softmax`] given its output `y` and the output's gradient `dy`:
/// `dx = y · (dy − Σ dy·y)` for softmax, `dx = dy − exp(y) · Σ dy` for log-softmax (sums per
/// row).
#[allow(clippy::too_many_arguments)]
pub fn row_softmax_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    y: &DeviceSlice<T>,
    dy: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
    rows: usize,
    cols: usize,
    log: bool,
) -> Result<()> {
    const OP: &str = "row_softmax_backward";
    let kernel = dispatch::row_softmax_bwd::<T>(k)?;
    check_matrix(OP, "y", y.len(), rows, cols)?;
    check_matrix(OP, "dy", dy.len(), rows, cols)?;
    check_matrix(OP, "dx", dx.len(), rows, cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: as in `row_softmax`: rows · cols elements of each buffer, checked above.
    unsafe { kernel.launch(s, &config(rows), y, dy, dx, r, c, i32::from(log)) }?;
    Ok(())
}

/// The per-row cross-entropy of logits `x` (`[rows, cols]`) against class indices `targets`
/// (`[rows]`): `loss[r] = log Σ_c exp(x[r][c]) − x[r][targets[r]]` (computed with the row
/// maximum subtracted, so it does not overflow). A target outside `0..cols` gives a NaN loss
/// for its row (the device cannot return an error without a host round trip; check targets on
/// the host where they come from).
pub fn cross_entropy_fwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    loss: &mut DeviceSlice<T>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "cross_entropy";
    let kernel = dispatch::cross_entropy_fwd::<T>(k)?;
    check_matrix(OP, "logits", x.len(), rows, cols)?;
    check_len(OP, "targets", targets.len(), rows)?;
    check_len(OP, "loss", loss.len(), rows)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 {
        return Ok(());
    }
    if cols == 0 {
        return Err(Error::Invalid {
            op: OP,
            problem: format!("{rows} rows of 0 classes: every target is out of range"),
        });
    }
    // SAFETY: the kernel reads rows · cols logits, `rows` targets (each used as a column index
    // only after the check 0 <= t < cols) and writes `rows` losses; lengths checked above.
    unsafe { kernel.launch(s, &config(rows), x, targets, loss, r, c) }?;
    Ok(())
}

/// The gradient of a reduced cross-entropy with respect to the logits:
/// `dx[r][c] = (softmax(x[r])[c] − [c == targets[r]]) · g[0] · scale`, where `g` (one element,
/// on the device) is the gradient of the reduced loss and `scale` is `1 / rows` for a mean
/// (`1` for a sum). A target outside `0..cols` gives a NaN row.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    g: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
    rows: usize,
    cols: usize,
    scale: T::Scalar,
) -> Result<()> {
    const OP: &str = "cross_entropy_backward";
    let kernel = dispatch::cross_entropy_bwd::<T>(k)?;
    check_matrix(OP, "logits", x.len(), rows, cols)?;
    check_matrix(OP, "dx", dx.len(), rows, cols)?;
    check_len(OP, "targets", targets.len(), rows)?;
    check_len(OP, "g", g.len(), 1)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: rows · cols logits and gradients, `rows` targets (bounds-checked in the kernel
    // before use as an index), one element of g; lengths checked above.
    unsafe { kernel.launch(s, &config(rows), x, targets, g, dx, r, c, scale) }?;
    Ok(())
}
