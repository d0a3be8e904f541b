//! Seed 004's fused `relu(x * scale + bias)` and its backward pass, on tensors.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};

impl<T: TensorElement> Tensor<T> {
    /// The row count and column count of `self` as a `[rows, cols]` matrix whose `cols` is the
    /// last dimension, after checking `bias` is `[cols]`.
    fn bias_shape(&self, op: &'static str, bias: &Tensor<T>) -> Result<(usize, usize)> {
        self.same_device(op, bias)?;
        let Some(&cols) = self.shape().last() else {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: Vec::new(),
                rhs: bias.shape().to_vec(),
                why: "x must have at least one dimension (its last is the bias dimension)".into(),
            });
        };
        if bias.shape() != [cols] {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: bias.shape().to_vec(),
                why: format!("bias must have shape [{cols}] (the last dimension of x)"),
            });
        }
        Ok((super::rows_except(self.shape(), self.rank() - 1), cols))
    }

    /// `relu(x * scale + bias)` in one kernel (seed 004's fused op; f32): `bias` has shape
    /// `[cols]` where `cols` is the last dimension of `self`, and is added to every row.
    /// Computed as `max(fmaf(x, scale, bias), 0)` (NaN → 0).
    pub fn bias_relu(&self, bias: &Tensor<T>, scale: T::Scalar) -> Result<Tensor<T>> {
        const OP: &str = "bias_relu";
        let (rows, cols) = self.bias_shape(OP, bias)?;
        let (x, b) = (self.contiguous()?, bias.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, bv) = (x.dense()?, b.dense()?);
        // SAFETY: `bias_relu_fwd` writes every element of the `[rows, cols]` output.
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::bias_relu_fwd(&k, exec.stream(), &xv, &bv, scale, out, rows, cols)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// The backward pass of [`Tensor::bias_relu`] at `self` (the forward's input `x`), given
    /// the gradient of the output: returns `(grad_x, grad_bias)` with
    /// `g = (x·scale + bias > 0) ? grad_out : 0`, `grad_x = g · scale` and
    /// `grad_bias[c] = Σ_rows g` (deterministic order, no atomics). f32.
    pub fn bias_relu_backward(
        &self,
        bias: &Tensor<T>,
        scale: T::Scalar,
        grad_out: &Tensor<T>,
    ) -> Result<(Tensor<T>, Tensor<T>)> {
        const OP: &str = "bias_relu_backward";
        let (rows, cols) = self.bias_shape(OP, bias)?;
        self.same_device(OP, grad_out)?;
        if grad_out.shape() != self.shape() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: grad_out.shape().to_vec(),
                why: "grad_out must have the shape of x".into(),
            });
        }
        let (x, b, g) = (
            self.contiguous()?,
            bias.contiguous()?,
            grad_out.contiguous()?,
        );
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, bv, gv) = (x.dense()?, b.dense()?, g.dense()?);
        // SAFETY: `bias_relu_bwd` writes every element of `grad_x` ([rows, cols]) and of
        // `grad_bias` ([cols]; zeros when rows == 0).
        let (gx, gb) = unsafe {
            exec.storage_pair_with(x.numel(), cols, |grad_x, grad_bias| {
                T::bias_relu_bwd(
                    &k,
                    exec.stream(),
                    &xv,
                    &bv,
                    scale,
                    &gv,
                    grad_x,
                    grad_bias,
                    rows,
                    cols,
                )
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(gx, self.shape())?,
            Tensor::from_storage(gb, &[cols])?,
        ))
    }
}
