//! The backward passes of the pointwise activations (`relu`, `tanh`), for autograd.

use crate::dispatch;
use crate::launch::{check_len, grid, BLOCK};
use crate::{Element, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// One thread per element, block 256 (the kernels loop over any grid).
fn config(n: usize) -> LaunchConfig {
    LaunchConfig::new(grid(n as u64, BLOCK as u64, i32::MAX as u64), BLOCK)
}

/// `dx = x > 0 ? dy : 0` (the gradient of `relu` at its input `x`; 0 at `x == 0`, as PyTorch).
/// f32, f64, f16 and bf16 (f16/bf16: `dy` passed through unchanged); all three slices have the
/// same length.
pub fn relu_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    dy: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::relu_bwd::<T>(k)?;
    let n = dx.len();
    check_len("relu_backward", "x", x.len(), n)?;
    check_len("relu_backward", "dy", dy.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: the kernel touches elements i < n of each buffer (grid-stride loop), and n is the
    // length of every buffer (checked above).
    unsafe { kernel.launch(s, &config(n), x, dy, dx, n as u64) }?;
    Ok(())
}

/// `dx = dy · (1 − y²)` where `y = tanh(x)` is the forward's output. f32, f64, f16 and bf16
/// (f16/bf16 computed in f32, rounded once).
pub fn tanh_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    y: &DeviceSlice<T>,
    dy: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::tanh_bwd::<T>(k)?;
    let n = dx.len();
    check_len("tanh_backward", "y", y.len(), n)?;
    check_len("tanh_backward", "dy", dy.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: as in `relu_bwd`: elements i < n only, n checked for every buffer.
    unsafe { kernel.launch(s, &config(n), y, dy, dx, n as u64) }?;
    Ok(())
}
