//! GELU in the tanh form GPT-2 uses, forward and backward (`cuda/gelu.cu`): f32, f64, f16 and
//! bf16, 16-byte packets where every pointer is 16-byte aligned.

use crate::dispatch;
use crate::launch::{check_len, grid, BLOCK};
use crate::{Element, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Two 16-byte packets per thread: the grid that covers `n` elements in one step of the kernels'
/// loops (each thread loads both packets before it computes).
fn gelu_grid<T>(n: usize) -> u32 {
    let per_thread = 2 * (16 / std::mem::size_of::<T>().max(1)).max(1) as u64;
    grid(n as u64, u64::from(BLOCK) * per_thread, i32::MAX as u64)
}

/// `y = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, elementwise.
pub fn gelu_fwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    y: &mut DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "gelu";
    let kernel = dispatch::gelu_fwd::<T>(k)?;
    let n = x.len();
    check_len(OP, "y", y.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(gelu_grid::<T>(n), BLOCK);
    // SAFETY: the kernel reads x[i] and writes y[i] for i < n only (grid-stride), and both
    // slices hold n elements.
    unsafe { kernel.launch(s, &cfg, x, y, n as u64) }?;
    Ok(())
}

/// The gradient of [`gelu_fwd`] from its input `x` and the output's gradient `dy`:
/// `dx = dy · (0.5 · (1 + t) + 0.5 · x · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 · x²))` with
/// `t = tanh(√(2/π) · (x + 0.044715 · x³))`.
pub fn gelu_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    dy: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "gelu_backward";
    let kernel = dispatch::gelu_bwd::<T>(k)?;
    let n = x.len();
    check_len(OP, "dy", dy.len(), n)?;
    check_len(OP, "dx", dx.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(gelu_grid::<T>(n), BLOCK);
    // SAFETY: element i < n of each of the three n-element slices only.
    unsafe { kernel.launch(s, &cfg, x, dy, dx, n as u64) }?;
    Ok(())
}
