//! LayerNorm over the last dimension, forward and backward, on tensors (f32, f64, f16, bf16;
//! statistics in [`FloatElement::Stat`]).

use super::activation_grad::check_grad_shape;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{FloatElement, Tensor, TensorElement};
use cuda_stack_kernels::ops::layer_norm_workspace_len;

/// `(rows, cols)` of `x` seen as `[rows, last dim]`, with `param` of shape `[cols]`.
fn ln_shape<T: FloatElement>(
    op: &'static str,
    x: &Tensor<T>,
    param: &Tensor<T>,
    what: &str,
) -> Result<(usize, usize)> {
    x.same_device(op, param)?;
    let Some(&cols) = x.shape().last() else {
        return Err(TensorError::InvalidArgument {
            op,
            problem: "LayerNorm needs a tensor of rank 1 or more (it normalizes the last \
                      dimension)"
                .into(),
        });
    };
    if param.shape() != [cols] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: x.shape().to_vec(),
            rhs: param.shape().to_vec(),
            why: format!("{what} must be [{cols}]: one value per element of the last dimension"),
        });
    }
    let rows = x.shape()[..x.rank() - 1].iter().product();
    Ok((rows, cols))
}

/// A zero-filled contiguous tensor (workspaces and small outputs).
fn zeros_on<U: TensorElement>(like_device: usize, shape: &[usize]) -> Result<Tensor<U>> {
    let exec = crate::tensor::storage::Exec::on(like_device)?;
    Tensor::from_storage(exec.zeros(shape.iter().product())?, shape)
}

impl<T: FloatElement> Tensor<T> {
    /// LayerNorm over the last dimension (`F.layer_norm(x, (C,), weight, bias, eps)`):
    /// `y = (x − mean) · rstd · weight + bias` with `rstd = 1 / sqrt(var + eps)` (biased
    /// variance), `weight` and `bias` of shape `[C]` (required: pass ones and zeros for none).
    /// Returns `(y, mean, rstd)`, the statistics of shape `[rows]` (all but the last dimension
    /// flattened) in [`FloatElement::Stat`] — what [`Tensor::layer_norm_backward`] needs.
    /// One fused kernel: a warp per row up to 1024 columns (f64: 512), a block of 256 per row
    /// beyond (rows in registers up to 4096 columns, f64: 2048).
    #[allow(clippy::type_complexity)] // (y, mean, rstd): the three are documented above
    pub fn layer_norm(
        &self,
        weight: &Tensor<T>,
        bias: &Tensor<T>,
        eps: f64,
    ) -> Result<(Tensor<T>, Tensor<T::Stat>, Tensor<T::Stat>)> {
        const OP: &str = "layer_norm";
        let (rows, cols) = ln_shape(OP, self, weight, "weight")?;
        ln_shape(OP, self, bias, "bias")?;
        let (x, w, b) = (self.contiguous()?, weight.contiguous()?, bias.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, wv, bv) = (x.dense()?, w.dense()?, b.dense()?);
        let mut y = None;
        // SAFETY: the kernel writes the mean and rstd of each of the `rows` rows and (inner
        // storage) every element of y; an error returns before anything is read.
        let (mean, rstd) = unsafe {
            exec.storage_pair_with(rows, rows, |m, r| {
                y = Some(exec.storage_with(x.numel(), |yv| {
                    T::layer_norm_fwd(&k, exec.stream(), &xv, &wv, &bv, yv, m, r, rows, cols, eps)
                })?);
                Ok(())
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        let y = y.ok_or_else(|| TensorError::InvalidArgument {
            op: OP,
            problem: "internal error: no output".into(),
        })?;
        Ok((
            Tensor::from_storage(y, self.shape())?,
            Tensor::from_storage(mean, &[rows])?,
            Tensor::from_storage(rstd, &[rows])?,
        ))
    }

    /// The backward pass of [`Tensor::layer_norm`] from its input `self`, `weight`, the saved
    /// `mean` and `rstd`, and the output's gradient `grad`: `(dx, dweight, dbias)`. `dx` per row;
    /// `dweight`, `dbias` summed over the rows deterministically (per-chunk partial sums, then
    /// the chunks in order): bit-identical on every run.
    pub fn layer_norm_backward(
        &self,
        weight: &Tensor<T>,
        mean: &Tensor<T::Stat>,
        rstd: &Tensor<T::Stat>,
        grad: &Tensor<T>,
    ) -> Result<(Tensor<T>, Tensor<T>, Tensor<T>)> {
        const OP: &str = "layer_norm_backward";
        let (rows, cols) = ln_shape(OP, self, weight, "weight")?;
        check_grad_shape(OP, self, grad)?;
        for (t, what) in [(mean, "mean"), (rstd, "rstd")] {
            self.same_device(OP, t)?;
            if t.shape() != [rows] {
                return Err(TensorError::ShapeMismatch {
                    op: OP,
                    lhs: self.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                    why: format!("{what} must be [{rows}]: one value per row, from layer_norm"),
                });
            }
        }
        let (x, w, m, r, g) = (
            self.contiguous()?,
            weight.contiguous()?,
            mean.contiguous()?,
            rstd.contiguous()?,
            grad.contiguous()?,
        );
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let ws = layer_norm_workspace_len(rows, cols)?;
        let dev = self.device();
        let mut pw = zeros_on::<T::Stat>(dev, &[ws])?;
        let mut pb = zeros_on::<T::Stat>(dev, &[ws])?;
        let mut dw = zeros_on::<T>(dev, &[cols])?;
        let mut db = zeros_on::<T>(dev, &[cols])?;
        let (xv, wv, mv, rv, gv) = (x.dense()?, w.dense()?, m.dense()?, r.dense()?, g.dense()?);
        let (_, pwv) = pw.exclusive_mut()?;
        let (_, pbv) = pb.exclusive_mut()?;
        let (_, dwv) = dw.exclusive_mut()?;
        let (_, dbv) = db.exclusive_mut()?;
        // SAFETY: the dx kernel writes every element of each of the `rows` rows.
        let dx = unsafe {
            exec.storage_with(x.numel(), |dxv| {
                T::layer_norm_bwd(
                    &k,
                    exec.stream(),
                    &xv,
                    &wv,
                    &mv,
                    &rv,
                    &gv,
                    dxv,
                    dwv,
                    dbv,
                    pwv,
                    pbv,
                    rows,
                    cols,
                )
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((Tensor::from_storage(dx, self.shape())?, dw, db))
    }
}
