//! Elementwise ops for every dtype: `+ - * /`, scale, axpy, relu, tanh, fill.

use crate::launch::{check_len, packet_grid, BLOCK};
use crate::{dispatch, Element, Error, Float, Kernels, Result};
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

/// How one operand of [`binary_broadcast`] is read: element `(r, c)` of the `[outer, inner]`
/// result reads `x[r · outer_stride + c · inner_stride]`, with `inner_stride` 0 or 1.
/// [`BroadcastOperand::full`], [`BroadcastOperand::row`], [`BroadcastOperand::column`] and
/// [`BroadcastOperand::scalar`] are the four shapes broadcasting gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BroadcastOperand {
    /// Elements between the starts of consecutive result rows (0: the same for every row).
    pub outer_stride: usize,
    /// 1: one element per result column; 0: one element for the whole row.
    pub inner_stride: usize,
}

impl BroadcastOperand {
    /// An operand of the result's own shape `[outer, inner]`.
    pub fn full(inner: usize) -> BroadcastOperand {
        BroadcastOperand {
            outer_stride: inner,
            inner_stride: 1,
        }
    }
    /// A row `[inner]` repeated for every result row (a bias).
    pub fn row() -> BroadcastOperand {
        BroadcastOperand {
            outer_stride: 0,
            inner_stride: 1,
        }
    }
    /// A column `[outer, 1]`: one value per result row.
    pub fn column() -> BroadcastOperand {
        BroadcastOperand {
            outer_stride: 1,
            inner_stride: 0,
        }
    }
    /// One value for every element.
    pub fn scalar() -> BroadcastOperand {
        BroadcastOperand {
            outer_stride: 0,
            inner_stride: 0,
        }
    }

    /// Checks that `len` elements hold every element this operand is read at.
    fn check(self, what: &'static str, len: usize, outer: usize, inner: usize) -> Result<()> {
        const OP: &str = "binary_broadcast";
        if self.inner_stride > 1 {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "`{what}` has inner_stride {}: it must be 0 (one value per row) or 1",
                    self.inner_stride
                ),
            });
        }
        if outer == 0 || inner == 0 {
            return Ok(());
        }
        let last = (outer - 1)
            .checked_mul(self.outer_stride)
            .and_then(|r| r.checked_add((inner - 1) * self.inner_stride));
        match last {
            Some(l) if l < len => Ok(()),
            _ => Err(Error::Shape {
                op: OP,
                what,
                expected: format!(
                    "element {} (row {} · outer_stride {} + column {} · inner_stride {})",
                    last.map_or_else(|| "past usize::MAX".to_string(), |l| l.to_string()),
                    outer - 1,
                    self.outer_stride,
                    inner - 1,
                    self.inner_stride
                ),
                found: format!("{len} elements"),
            }),
        }
    }
}

/// `out[r][c] = a(r, c) op b(r, c)` over a dense row-major `[outer, inner]` result, each operand
/// read as its [`BroadcastOperand`] says: broadcasting (a bias over rows, a per-row scale, a
/// scalar) without materialising the expanded operand. f16/bf16 computed in f32 and rounded
/// once, i32 as [`binary`]. Every element each operand is read at is checked to lie inside it.
#[allow(clippy::too_many_arguments)]
pub fn binary_broadcast<T: Element>(
    k: &Kernels,
    s: &Stream,
    op: BinaryOp,
    a: &DeviceSlice<T>,
    a_read: BroadcastOperand,
    b: &DeviceSlice<T>,
    b_read: BroadcastOperand,
    out: &mut DeviceSlice<T>,
    outer: usize,
    inner: usize,
) -> Result<()> {
    let kernel = dispatch::binary_broadcast::<T>(k, op)?;
    let n = outer.checked_mul(inner).ok_or_else(|| Error::Invalid {
        op: "binary_broadcast",
        problem: format!("[{outer}, {inner}] has more than usize::MAX elements"),
    })?;
    check_len("binary_broadcast", "out", out.len(), n)?;
    a_read.check("a", a.len(), outer, inner)?;
    b_read.check("b", b.len(), outer, inner)?;
    if n == 0 {
        return Ok(());
    }
    let w = |v: usize| v as u64;
    // SAFETY: the kernel writes out[r·inner + c] for r < outer, c < inner (n = outer·inner =
    // out.len()) and reads a[r·a_so + c·a_si], b[r·b_so + c·b_si] for the same r, c: the largest
    // such index was checked above to lie inside each operand (inner strides are 0 or 1).
    unsafe {
        kernel.launch(
            s,
            &config::<T>(s, n),
            a,
            b,
            out,
            w(outer),
            w(inner),
            w(a_read.outer_stride),
            w(a_read.inner_stride),
            w(b_read.outer_stride),
            w(b_read.inner_stride),
        )
    }?;
    Ok(())
}
