//! Elementwise ops, computed exactly as the kernels do (f16/bf16 in f32, rounded once).

use crate::ops::BinaryOp;
use crate::{Compute, Element, Float};

/// `a + b` (seed 000's vector add).
pub fn vector_add(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// One element of [`binary`].
pub fn binary_one<T: Element>(op: BinaryOp, a: T, b: T) -> T {
    let (a, b) = (a.to_scalar(), b.to_scalar());
    T::from_scalar(match op {
        BinaryOp::Add => Compute::add(a, b),
        BinaryOp::Sub => Compute::sub(a, b),
        BinaryOp::Mul => Compute::mul(a, b),
        BinaryOp::Div => Compute::div(a, b),
    })
}

/// `a op b` elementwise.
pub fn binary<T: Element>(op: BinaryOp, a: &[T], b: &[T]) -> Vec<T> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| binary_one(op, x, y))
        .collect()
}

/// `x * alpha`.
pub fn scale<T: Element>(x: &[T], alpha: T::Scalar) -> Vec<T> {
    x.iter()
        .map(|&v| T::from_scalar(Compute::mul(v.to_scalar(), alpha)))
        .collect()
}

/// `fma(alpha, x, y)`.
pub fn axpy<T: Element>(alpha: T::Scalar, x: &[T], y: &[T]) -> Vec<T> {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| T::from_scalar(Compute::fma(alpha, a.to_scalar(), b.to_scalar())))
        .collect()
}

/// `x < 0 ? 0 : x`.
pub fn relu<T: Element>(x: &[T]) -> Vec<T> {
    x.iter()
        .map(|&v| T::from_scalar(Compute::relu(v.to_scalar())))
        .collect()
}

/// `tanh(x)` in the compute type, rounded to `T` (the GPU is within 2 ulp of the compute type,
/// so within 1 ulp of `T` for f16/bf16 and a few ulp for f32/f64).
pub fn tanh<T: Float>(x: &[T]) -> Vec<T> {
    x.iter().map(|&v| v.tanh_cpu()).collect()
}

/// `n` copies of `value` rounded to `T`.
pub fn fill<T: Element>(value: T::Scalar, n: usize) -> Vec<T> {
    vec![T::from_scalar(value); n]
}

/// [`crate::ops::binary_broadcast`]: `out[r][c] = a(r, c) op b(r, c)` over `[outer, inner]`.
pub fn binary_broadcast<T: Element>(
    op: BinaryOp,
    a: &[T],
    a_read: crate::ops::BroadcastOperand,
    b: &[T],
    b_read: crate::ops::BroadcastOperand,
    outer: usize,
    inner: usize,
) -> Vec<T> {
    let at = |x: &[T], m: crate::ops::BroadcastOperand, r: usize, c: usize| {
        x[r * m.outer_stride + c * m.inner_stride]
    };
    (0..outer)
        .flat_map(|r| (0..inner).map(move |c| (r, c)))
        .map(|(r, c)| binary_one(op, at(a, a_read, r, c), at(b, b_read, r, c)))
        .collect()
}

/// [`crate::ops::binary_strided`]: `a[a_view(i)] op b[b_view(i)]` for every element `i` of the
/// views' common shape, row-major; `None` when a view is invalid or reaches outside its slice.
pub fn binary_strided<T: Element>(
    op: BinaryOp,
    a: &[T],
    a_view: &crate::StridedLayout,
    b: &[T],
    b_view: &crate::StridedLayout,
) -> Option<Vec<T>> {
    if a_view.dims()? != b_view.dims()? {
        return None;
    }
    let (x, y) = (
        super::strided_copy(a, a_view)?,
        super::strided_copy(b, b_view)?,
    );
    Some(binary(op, &x, &y))
}
