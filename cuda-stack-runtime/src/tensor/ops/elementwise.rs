//! Elementwise ops: `+ - * /` with broadcasting, `scale`, `relu`, `tanh`.

use crate::tensor::error::Result;
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::BinaryOp;
use cuda_stack_kernels::Kernels;

/// A dispatch entry for a one-input, same-shape op.
type Unary<T> = fn(&Kernels, &Stream, &DeviceSlice<T>, &mut DeviceSlice<T>) -> Result<()>;

impl<T: TensorElement> Tensor<T> {
    /// `self op rhs` elementwise with NumPy/PyTorch broadcasting. Operands whose shape differs
    /// from the result's are expanded (a stride-0 view) and materialised with `strided_copy`
    /// before the contiguous kernel runs; same-shape contiguous operands are used in place.
    fn binary(&self, name: &'static str, op: BinaryOp, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        self.same_device(name, rhs)?;
        let shape = broadcast_shapes(name, self.shape(), rhs.shape())?;
        let a = self.expand(&shape)?.contiguous()?;
        let b = rhs.expand(&shape)?.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (av, bv) = (a.dense()?, b.dense()?);
        // SAFETY: the binary kernels write every element of `out` (all three have `numel`
        // elements), or fail.
        let storage = unsafe {
            exec.storage_with(a.numel(), |out| {
                T::binary(&k, exec.stream(), op, &av, &bv, out)
            })
        }
        .map_err(|e| super::renamed(e.with_shape(self.shape()), name))?;
        Tensor::from_storage(storage, &shape)
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
