//! Elementwise ops for every dtype: `+ - * /`, scale, axpy, relu, tanh, fill.

use crate::launch::{check_len, packet_grid, BLOCK};
use crate::{dispatch, Element, Float, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// A binary elementwise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b` (i32 wraps).
    Add,
    /// `a - b` (i32 wraps).
    Sub,
    /// `a * b` (i32 wraps).
    Mul,
    /// `a / b` (i32: truncating, `x / 0 == 0`, `i32::MIN / -1 == i32::MIN`).
    Div,
}

/// The launch for `n` elements of `T`: block 256, one 16-byte packet per thread
/// ([`crate::launch::packet_grid`]).
fn config<T>(_s: &Stream, n: usize) -> LaunchConfig {
    LaunchConfig::new(packet_grid::<T>(n), BLOCK)
}

/// `out = a op b` elementwise (f16/bf16 computed in f32 and rounded once). All three must have
/// the same length.
pub fn binary<T: Element>(
    k: &Kernels,
    s: &Stream,
    op: BinaryOp,
    a: &DeviceSlice<T>,
    b: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::binary::<T>(k, op)?;
    let n = out.len();
    check_len("binary", "a", a.len(), n)?;
    check_len("binary", "b", b.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), a, b, out, n as u64) }?;
    Ok(())
}

/// `out = x * alpha` (i32 wraps).
pub fn scale<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
    alpha: T::Scalar,
) -> Result<()> {
    let kernel = dispatch::scale::<T>(k)?;
    let n = out.len();
    check_len("scale", "x", x.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), x, out, alpha, n as u64) }?;
    Ok(())
}

/// `y = fma(alpha, x, y)` in place (one rounding; i32 wraps).
pub fn axpy<T: Element>(
    k: &Kernels,
    s: &Stream,
    alpha: T::Scalar,
    x: &DeviceSlice<T>,
    y: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::axpy::<T>(k)?;
    let n = y.len();
    check_len("axpy", "x", x.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), alpha, x, y, n as u64) }?;
    Ok(())
}

/// `out = x < 0 ? 0 : x` (NaN and -0.0 pass through).
pub fn relu<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::relu::<T>(k)?;
    let n = out.len();
    check_len("relu", "x", x.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), x, out, n as u64) }?;
    Ok(())
}

/// `out = tanh(x)` (CUDA `tanhf`/`tanh`, within 2 ulp of the exact result).
pub fn tanh<T: Float>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    let kernel = dispatch::tanh::<T>(k)?;
    let n = out.len();
    check_len("tanh", "x", x.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), x, out, n as u64) }?;
    Ok(())
}

/// Every element of `out` = `value` (rounded to `T` for f16/bf16).
pub fn fill<T: Element>(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<T>,
    value: T::Scalar,
) -> Result<()> {
    let kernel = dispatch::fill::<T>(k)?;
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: every kernel of this family touches elements i < n only (grid-stride loop and
    // tail guard), and n is the length of every buffer argument (checked above).
    unsafe { kernel.launch(s, &config::<T>(s, n), out, value, n as u64) }?;
    Ok(())
}
