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

/// What [`Tensor::add_layer_norm`] returns: `(sum, y, mean, rstd)`.
pub type AddLayerNorm<T> = (
    Tensor<T>,
    Tensor<T>,
    Tensor<<T as FloatElement>::Stat>,
    Tensor<<T as FloatElement>::Stat>,
);

/// The forward kernels' results: the sum (with a residual), y, mean and rstd.
type ForwardOut<T> = (
    Option<Tensor<T>>,
    Tensor<T>,
    Tensor<<T as FloatElement>::Stat>,
    Tensor<<T as FloatElement>::Stat>,
);

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
        let (_, y, mean, rstd) = self.layer_norm_forward("layer_norm", None, weight, bias, eps)?;
        Ok((y, mean, rstd))
    }

    /// The residual stream of a pre-LayerNorm transformer in one kernel: `sum = self + res`
    /// and the LayerNorm of `sum` ([`Tensor::layer_norm`]), returned as `(sum, y, mean, rstd)`.
    /// `res` has `self`'s shape (no broadcasting). `sum` is rounded to `T` exactly as `+`
    /// rounds it and `y` is computed from the rounded sum: the same bits as `&self + res`
    /// followed by `layer_norm`, reading each row once instead of three times.
    pub fn add_layer_norm(
        &self,
        res: &Tensor<T>,
        weight: &Tensor<T>,
        bias: &Tensor<T>,
        eps: f64,
    ) -> Result<AddLayerNorm<T>> {
        const OP: &str = "add_layer_norm";
        self.same_device(OP, res)?;
        if res.shape() != self.shape() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: res.shape().to_vec(),
                why: "the residual must have the input's shape (add_layer_norm does not \
                      broadcast)"
                    .into(),
            });
        }
        let (sum, y, mean, rstd) = self.layer_norm_forward(OP, Some(res), weight, bias, eps)?;
        let sum = sum.ok_or_else(|| TensorError::InvalidArgument {
            op: OP,
            problem: "internal error: no sum".into(),
        })?;
        Ok((sum, y, mean, rstd))
    }

    /// The forward kernels: of `self`, or of `self + res` (whose sum comes back) when `res`.
    fn layer_norm_forward(
        &self,
        op: &'static str,
        res: Option<&Tensor<T>>,
        weight: &Tensor<T>,
        bias: &Tensor<T>,
        eps: f64,
    ) -> Result<ForwardOut<T>> {
        let (rows, cols) = ln_shape(op, self, weight, "weight")?;
        ln_shape(op, self, bias, "bias")?;
        let (x, w, b) = (self.contiguous()?, weight.contiguous()?, bias.contiguous()?);
        let r = res.map(Tensor::contiguous).transpose()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, wv, bv) = (x.dense()?, w.dense()?, b.dense()?);
        let rv = r.as_ref().map(Tensor::dense).transpose()?;
        let n = x.numel();
        let (mut y, mut sum) = (None, None);
        // SAFETY: the kernel writes the mean and rstd of each of the `rows` rows and (inner
        // storages) every element of y and, with a residual, of sum; an error returns before
        // anything is read.
        let (mean, rstd) = unsafe {
            exec.storage_pair_with(rows, rows, |m, rs| {
                match &rv {
                    None => {
                        y = Some(exec.storage_with(n, |yv| {
                            T::layer_norm_fwd(
                                &k,
                                exec.stream(),
                                &xv,
                                None,
                                &wv,
                                &bv,
                                yv,
                                m,
                                rs,
                                rows,
                                cols,
                                eps,
                            )
                        })?)
                    }
                    Some(rv) => {
                        sum = Some(exec.storage_with(n, |sv| {
                            y = Some(exec.storage_with(n, |yv| {
                                T::layer_norm_fwd(
                                    &k,
                                    exec.stream(),
                                    &xv,
                                    Some((rv, &mut *sv)),
                                    &wv,
                                    &bv,
                                    yv,
                                    m,
                                    rs,
                                    rows,
                                    cols,
                                    eps,
                                )
                            })?);
                            Ok(())
                        })?)
                    }
                }
                Ok(())
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        let y = y.ok_or_else(|| TensorError::InvalidArgument {
            op,
            problem: "internal error: no output".into(),
        })?;
        let sum = sum
            .map(|s| Tensor::from_storage(s, self.shape()))
            .transpose()?;
        Ok((
            sum,
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
        self.layer_norm_backward_impl("layer_norm_backward", weight, mean, rstd, grad, None)
    }

    /// [`Tensor::layer_norm_backward`] with a gradient already owed to the input folded in:
    /// `dx = pending + (the LayerNorm's dx)`, added in the compute type (f32 for f16/bf16) and
    /// rounded once, in the `dx` kernel itself. `pending` has the input's shape. Autograd uses
    /// it for the residual stream, whose gradient is the sum of the stream's and the
    /// LayerNorm's (one kernel instead of the `dx` kernel and an add).
    pub fn layer_norm_backward_add(
        &self,
        weight: &Tensor<T>,
        mean: &Tensor<T::Stat>,
        rstd: &Tensor<T::Stat>,
        grad: &Tensor<T>,
        pending: &Tensor<T>,
    ) -> Result<(Tensor<T>, Tensor<T>, Tensor<T>)> {
        const OP: &str = "layer_norm_backward_add";
        self.same_device(OP, pending)?;
        if pending.shape() != self.shape() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: pending.shape().to_vec(),
                why: "the pending gradient must have the input's shape".into(),
            });
        }
        self.layer_norm_backward_impl(OP, weight, mean, rstd, grad, Some(pending))
    }

    fn layer_norm_backward_impl(
        &self,
        op: &'static str,
        weight: &Tensor<T>,
        mean: &Tensor<T::Stat>,
        rstd: &Tensor<T::Stat>,
        grad: &Tensor<T>,
        pending: Option<&Tensor<T>>,
    ) -> Result<(Tensor<T>, Tensor<T>, Tensor<T>)> {
        let (rows, cols) = ln_shape(op, self, weight, "weight")?;
        check_grad_shape(op, self, grad)?;
        for (t, what) in [(mean, "mean"), (rstd, "rstd")] {
            self.same_device(op, t)?;
            if t.shape() != [rows] {
                return Err(TensorError::ShapeMismatch {
                    op,
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
        let p = pending.map(Tensor::contiguous).transpose()?;
        let pv = p.as_ref().map(Tensor::dense).transpose()?;
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
                    pv.as_deref(),
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
