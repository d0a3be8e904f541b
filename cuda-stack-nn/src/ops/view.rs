//! Views: reshape, transpose, narrow (no copy forward; the backward of narrow pads with zeros).

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// The same elements in a new shape (a view when the value is contiguous, a copy
    /// otherwise, like `torch.reshape`). Backward: the gradient reshaped back.
    pub fn reshape(&self, shape: &[usize]) -> Result<Var<T>> {
        let x = self.value();
        let value = if x.is_contiguous() {
            x.reshape(shape)?
        } else {
            x.contiguous()?.reshape(shape)?
        };
        let back = x.shape().to_vec();
        Ok(Var::from_op(value, "reshape", &[self], move |g| {
            Ok(vec![Some(g.contiguous()?.reshape(&back)?)])
        }))
    }

    /// Dimensions `d0` and `d1` swapped (a view). Backward: the gradient swapped back.
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Var<T>> {
        let value = self.value().transpose(d0, d1)?;
        Ok(Var::from_op(value, "transpose", &[self], move |g| {
            Ok(vec![Some(g.transpose(d0, d1)?)])
        }))
    }

    /// The transpose of a 2-D value (a view).
    pub fn t(&self) -> Result<Var<T>> {
        self.transpose(0, 1)
    }

    /// Elements `start .. start + len` along `dim` (a view). Backward: the gradient placed in
    /// zeros of the input's shape (`Tensor::zero_pad`).
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Var<T>> {
        let x = self.value();
        let value = x.narrow(dim, start, len)?;
        let d = x.layout().dim("narrow", dim)?;
        let after = x.shape()[d] - start - len;
        Ok(Var::from_op(value, "narrow", &[self], move |g| {
            Ok(vec![Some(g.zero_pad(d as isize, start, after)?)])
        }))
    }
}
