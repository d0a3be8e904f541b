//! `log_softmax(dim)` and the backward passes of `softmax` and `log_softmax` (for autograd),
//! on the row kernels of `cuda/log_softmax.cu`; a dimension other than the last is moved last
//! with a transpose made contiguous, and moved back after (as `softmax` does).

use super::activation_grad::check_grad_shape;
use super::rows_except;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{GradElement, Tensor};

/// `t` with dimension `d` moved last, contiguous (no copy when `d` is last and `t` contiguous).
fn dim_last<T: GradElement>(t: &Tensor<T>, d: usize) -> Result<Tensor<T>> {
    let last = t.rank() - 1;
    if d == last {
        t.contiguous()
    } else {
        t.transpose(d as isize, last as isize)?.contiguous()
    }
}

/// Undoes [`dim_last`] on a result.
fn dim_back<T: GradElement>(t: Tensor<T>, d: usize) -> Result<Tensor<T>> {
    let last = t.rank() - 1;
    if d == last {
        Ok(t)
    } else {
        t.transpose(d as isize, last as isize)?.contiguous()
    }
}

/// The dimension index, with a rank-0 tensor treated as one element along dim 0 / -1.
fn row_dim<T: GradElement>(op: &'static str, t: &Tensor<T>, dim: isize) -> Result<usize> {
    if t.rank() == 0 {
        return Err(TensorError::DimOutOfRange {
            op,
            dim,
            rank: 0,
            shape: Vec::new(),
        });
    }
    t.layout.dim(op, dim)
}

impl<T: GradElement> Tensor<T> {
    /// `x − max − log Σ exp(x − max)` along `dim` (`torch.log_softmax(x, dim)`), f32 and f64;
    /// contiguous, `self`'s shape. One kernel along the last dimension of a contiguous tensor.
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor<T>> {
        const OP: &str = "log_softmax";
        let d = row_dim(OP, self, dim)?;
        let x = dim_last(self, d)?;
        let cols = x.shape()[x.rank() - 1];
        let rows = rows_except(x.shape(), x.rank() - 1);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the row kernel writes every element of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::row_softmax(&k, exec.stream(), &xv, out, rows, cols, true)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        dim_back(Tensor::from_storage(storage, x.shape())?, d)
    }

    /// The gradient of `softmax(x, dim)` from its **output** `self` and the output's gradient:
    /// `self · (grad − Σ_dim grad·self)`.
    pub fn softmax_backward(&self, grad: &Tensor<T>, dim: isize) -> Result<Tensor<T>> {
        self.row_softmax_backward("softmax_backward", grad, dim, false)
    }

    /// The gradient of `log_softmax(x, dim)` from its **output** `self`:
    /// `grad − exp(self) · Σ_dim grad`.
    pub fn log_softmax_backward(&self, grad: &Tensor<T>, dim: isize) -> Result<Tensor<T>> {
        self.row_softmax_backward("log_softmax_backward", grad, dim, true)
    }

    fn row_softmax_backward(
        &self,
        op: &'static str,
        grad: &Tensor<T>,
        dim: isize,
        log: bool,
    ) -> Result<Tensor<T>> {
        check_grad_shape(op, self, grad)?;
        let d = row_dim(op, self, dim)?;
        let (y, g) = (dim_last(self, d)?, dim_last(grad, d)?);
        let cols = y.shape()[y.rank() - 1];
        let rows = rows_except(y.shape(), y.rank() - 1);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (yv, gv) = (y.dense()?, g.dense()?);
        // SAFETY: the row kernel writes every element of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(y.numel(), |out| {
                T::row_softmax_bwd(&k, exec.stream(), &yv, &gv, out, rows, cols, log)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        dim_back(Tensor::from_storage(storage, y.shape())?, d)
    }
}
