//! `softmax(dim)`: the row kernel on the last dimension; other dimensions are moved last with a
//! transpose and made contiguous, and moved back afterwards.

use super::rows_except;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};

impl<T: TensorElement> Tensor<T> {
    /// `exp(x - max) / Σ exp(x - max)` along dimension `dim` (`torch.softmax(x, dim)`): f32 (the
    /// fast kernels of `softmax.cu`), f64, f16 and bf16 (one warp per row; f16/bf16 computed in
    /// f32 and rounded once).
    /// The result is contiguous with `self`'s shape. Along the last dimension of a contiguous
    /// tensor it is one kernel; along another dimension, `transpose(dim, -1).contiguous()`, the
    /// kernel, and the transpose back made contiguous (two extra copies). A row of all -inf gives
    /// NaN.
    pub fn softmax(&self, dim: isize) -> Result<Tensor<T>> {
        const OP: &str = "softmax";
        if self.rank() == 0 {
            if dim != 0 && dim != -1 {
                return Err(TensorError::DimOutOfRange {
                    op: OP,
                    dim,
                    rank: 0,
                    shape: Vec::new(),
                });
            }
            return self.unsqueeze(0)?.softmax(0)?.squeeze(0);
        }
        let d = self.layout.dim(OP, dim)?;
        let last = self.rank() - 1;
        let x = if d == last {
            self.contiguous()?
        } else {
            self.transpose(d as isize, last as isize)?.contiguous()?
        };
        let cols = x.shape()[last];
        let rows = rows_except(x.shape(), last);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the softmax kernels write every element of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::softmax_rows(&k, exec.stream(), &xv, out, rows, cols)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        let y = Tensor::from_storage(storage, x.shape())?;
        if d == last {
            Ok(y)
        } else {
            y.transpose(d as isize, last as isize)?.contiguous()
        }
    }
}
