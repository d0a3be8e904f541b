//! Elementwise ops: `+ - * /` with broadcasting, `scale`, `relu`, `tanh`.

use crate::tensor::error::Result;
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::storage::Exec;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, BinaryOp, BroadcastOperand};
use cuda_stack_kernels::{Kernels, StridedLayout};

/// A dispatch entry for a one-input, same-shape op.
type Unary<T> = fn(&Kernels, &Stream, &DeviceSlice<T>, &mut DeviceSlice<T>) -> Result<()>;

impl<T: TensorElement> Tensor<T> {
    /// `self op rhs` elementwise with NumPy/PyTorch broadcasting, never materialising an
    /// expanded or strided operand. Which kernel runs, in one place:
    /// 1. both contiguous, same shape: the contiguous kernel (`ops::binary`);
    /// 2. both contiguous, and the broadcast splits the result as `[outer, inner]` with each
    ///    operand a bias row, a per-row column, a scalar or full ([`broadcast_split`]): the
    ///    `[outer, inner]` kernel (`ops::binary_broadcast`);
    /// 3. otherwise (any other broadcast, transposed, sliced or other strided views): the
    ///    strided kernel (`ops::binary_strided`) reads both views where they lie (stride 0 where
    ///    broadcast), after collapsing their dimensions;
    /// 4. only when more than `MAX_BINARY_DIMS` (6) dimensions remain after collapsing, or the
    ///    rank exceeds 8: each operand is expanded and copied (`strided_copy`) first.
    fn binary(&self, name: &'static str, op: BinaryOp, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.same_device(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        let exec = self.exec()?;
        let contiguous = self.is_contiguous() && rhs.is_contiguous();
        if contiguous && self.shape() == rhs.shape() {
            return self.binary_dense(name, op, rhs, &exec);
        }
        if contiguous {
            if let Some((outer, inner, ra, rb)) = broadcast_split(self.shape(), rhs.shape(), &shape)
            {
                let k = exec.kernels()?;
                let (av, bv) = (self.dense()?, rhs.dense()?);
                // SAFETY: the broadcasting kernel writes every element of the `[outer, inner]`
                // result (outer · inner = the result's element count), or fails.
                let storage = unsafe {
                    exec.storage_with(outer * inner, |out| {
                        T::binary_broadcast(
                            &k,
                            exec.stream(),
                            op,
                            (&av, ra),
                            (&bv, rb),
                            out,
                            outer,
                            inner,
                        )
                    })
                }
                .map_err(|e| super::renamed(e.with_shape(self.shape()), name))?;
                return Tensor::from_storage(storage, &shape);
            }
        }
        let (a, b) = (self.expand(&shape)?, rhs.expand(&shape)?);
        if let (Some(av), Some(bv)) = (strided_view(&a), strided_view(&b)) {
            if ops::binary_strided_fits(&av, &bv) {
                let k = exec.kernels()?;
                let n = a.numel();
                // SAFETY: the strided kernel writes every element of `out` (`n`, the views'
                // common element count), or fails (it checks both views against their storage).
                let storage = unsafe {
                    exec.storage_with(n, |out| {
                        T::binary_strided(
                            &k,
                            exec.stream(),
                            op,
                            (a.storage.readable()?, &av),
                            (b.storage.readable()?, &bv),
                            out,
                        )
                    })
                }
                .map_err(|e| super::renamed(e.with_shape(self.shape()), name))?;
                return Tensor::from_storage(storage, &shape);
            }
        }
        a.contiguous()?
            .binary_dense(name, op, &b.contiguous()?, &exec)
    }

    /// `self op rhs` for contiguous operands of the same shape (the contiguous kernel).
    fn binary_dense(
        &self,
        name: &'static str,
        op: BinaryOp,
        rhs: &Tensor<T>,
        exec: &Exec,
    ) -> Result<Tensor<T>> {
        let k = exec.kernels()?;
        let (av, bv) = (self.dense()?, rhs.dense()?);
        // SAFETY: the binary kernels write every element of `out` (all three have `numel`
        // elements), or fail.
        let storage = unsafe {
            exec.storage_with(self.numel(), |out| {
                T::binary(&k, exec.stream(), op, &av, &bv, out)
            })
        }
        .map_err(|e| super::renamed(e.with_shape(self.shape()), name))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// `self + rhs`, broadcasting (i32 wraps; f16/bf16 computed in f32 and rounded once).
    pub fn add(&self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.binary("add", BinaryOp::Add, rhs)
    }

    /// `self - rhs`, broadcasting.
    pub fn sub(&self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.binary("sub", BinaryOp::Sub, rhs)
    }

    /// `self * rhs` elementwise, broadcasting.
    pub fn mul(&self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.binary("mul", BinaryOp::Mul, rhs)
    }

    /// `self / rhs` elementwise, broadcasting (i32: truncating, `x / 0 == 0`).
    pub fn div(&self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.binary("div", BinaryOp::Div, rhs)
    }

    fn unary(&self, name: &'static str, f: Unary<T>) -> Result<Tensor<T>> {
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the elementwise kernels write every element of `out` (same length as `x`).
        let storage = unsafe { exec.storage_with(x.numel(), |out| f(&k, exec.stream(), &xv, out)) }
            .map_err(|e| super::renamed(e.with_shape(self.shape()), name))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// `max(x, 0)` elementwise (`x < 0 ? 0 : x`: NaN and -0.0 pass through).
    pub fn relu(&self) -> Result<Tensor<T>> {
        self.unary("relu", T::relu)
    }

    /// `tanh(x)` elementwise (CUDA `tanhf`/`tanh`: within 2 ulp). Floating-point dtypes.
    pub fn tanh(&self) -> Result<Tensor<T>> {
        self.unary("tanh", T::tanh)
    }

    /// `x * alpha` elementwise (`alpha` in the kernels' compute type: f32 for f16/bf16; i32
    /// wraps).
    pub fn scale(&self, alpha: T::Scalar) -> Result<Tensor<T>> {
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the scale kernel writes every element of `out` (same length as `x`).
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::scale(&k, exec.stream(), &xv, out, alpha)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }
}

/// A tensor's view as the strided kernels take it (`None` above 8 dimensions).
fn strided_view<T: TensorElement>(t: &Tensor<T>) -> Option<StridedLayout> {
    StridedLayout::new(t.shape(), t.strides(), t.offset())
}

/// How a contiguous operand of shape `operand` reads at the split `[outer, inner]` of the
/// broadcast result `shape` at dimension `p`, if it reads as a [`BroadcastOperand`] there: its
/// dimensions after `p` are all the result's (one element per column) or all 1 (one per row),
/// and those before `p` likewise (a row per result row, or the same row for all).
fn operand_read(operand: &[usize], shape: &[usize], p: usize) -> Option<BroadcastOperand> {
    let pad = shape.len() - operand.len();
    let dim = |i: usize| if i < pad { 1 } else { operand[i - pad] };
    let inner: usize = shape[p..].iter().product();
    let inner_full = (p..shape.len()).all(|i| dim(i) == shape[i]);
    let inner_one = (p..shape.len()).all(|i| dim(i) == 1);
    let outer_full = (0..p).all(|i| dim(i) == shape[i]);
    let outer_one = (0..p).all(|i| dim(i) == 1);
    let inner_stride = if inner_full {
        1
    } else if inner_one {
        0
    } else {
        return None;
    };
    let outer_stride = if outer_one {
        0
    } else if outer_full {
        if inner_stride == 1 {
            inner
        } else {
            1
        }
    } else {
        return None;
    };
    Some(BroadcastOperand {
        outer_stride,
        inner_stride,
    })
}

/// The first split `[outer, inner]` of the broadcast result `shape` at which both operands read
/// in place ([`operand_read`]), with how each reads; `None` when there is none (e.g. `[B, 1, C]`
/// against `[B, T, C]`), and the strided kernel reads them instead.
fn broadcast_split(
    a: &[usize],
    b: &[usize],
    shape: &[usize],
) -> Option<(usize, usize, BroadcastOperand, BroadcastOperand)> {
    (0..=shape.len()).find_map(|p| {
        let (ra, rb) = (operand_read(a, shape, p)?, operand_read(b, shape, p)?);
        let outer = shape[..p].iter().product();
        Some((outer, shape[p..].iter().product(), ra, rb))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(a: &[usize], b: &[usize], shape: &[usize]) -> Option<(usize, usize, [usize; 4])> {
        broadcast_split(a, b, shape).map(|(o, i, ra, rb)| {
            (
                o,
                i,
                [
                    ra.outer_stride,
                    ra.inner_stride,
                    rb.outer_stride,
                    rb.inner_stride,
                ],
            )
        })
    }

    #[test]
    fn broadcasts_read_in_place_where_they_can() {
        // A bias over rows: [N, C] + [C].
        assert_eq!(split(&[4, 8], &[8], &[4, 8]), Some((4, 8, [8, 1, 0, 1])));
        // The same over [B, T, C].
        assert_eq!(
            split(&[2, 3, 8], &[8], &[2, 3, 8]),
            Some((6, 8, [8, 1, 0, 1]))
        );
        // A per-row scale: [N, C] * [N, 1].
        assert_eq!(split(&[4, 8], &[4, 1], &[4, 8]), Some((4, 8, [8, 1, 1, 0])));
        // A scalar either side.
        assert_eq!(split(&[1], &[4, 8], &[4, 8]), Some((1, 32, [0, 0, 0, 1])));
        assert_eq!(split(&[4, 8], &[], &[4, 8]), Some((1, 32, [0, 1, 0, 0])));
        // An outer product: [N, 1] op [1, C].
        assert_eq!(split(&[4, 1], &[1, 8], &[4, 8]), Some((4, 8, [1, 0, 0, 1])));
        // [B, 1, C] against [B, T, C] does not read in place.
        assert_eq!(split(&[2, 1, 8], &[2, 3, 8], &[2, 3, 8]), None);
    }
}
