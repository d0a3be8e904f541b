//! `linear_cross_entropy`: a classifier layer and its loss as one op, `mean CE(x · Wᵀ + b, t)`,
//! so that the logits are never a value of the graph: the op's backward closure owns them
//! alone, and the backward writes their gradient over them (llm.c's in-place fused
//! classifier). Autograd's own rule — a backward never writes what it was given — would need a
//! second `[N, V]` buffer for the logits' gradient while the logits are still alive; for a
//! language model's vocabulary that buffer is the largest of the step (GPT-2 at 16 × 1024
//! tokens: 1.5 GiB in bf16).

use crate::error::{NnError, Result};
use crate::lock::lock;
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor, TensorError};
use std::sync::Mutex;

const OP: &str = "linear_cross_entropy";

/// What [`NnError::SavedTensorConsumed`] suggests instead.
const INSTEAD: &str = "compute `x.linear(w, b)?.fused_cross_entropy(targets)` (which keeps the \
                       logits and allocates their gradient) to differentiate more than once";

/// Checks that `targets` is on `x`'s device and has `x`'s shape less its last dimension (one
/// class index per row), before anything is launched. A rank-0 `x` is left to `linear`, which
/// refuses it.
fn check_targets<T: GradElement>(x: &Tensor<T>, targets: &Tensor<i32>) -> Result<()> {
    if targets.device() != x.device() {
        return Err(TensorError::DeviceMismatch {
            op: OP,
            lhs_device: x.device(),
            rhs_device: targets.device(),
            lhs_shape: x.shape().to_vec(),
            rhs_shape: targets.shape().to_vec(),
        }
        .into());
    }
    if let Some((_, lead)) = x.shape().split_last() {
        if targets.shape() != lead {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: x.shape().to_vec(),
                rhs: targets.shape().to_vec(),
                why: format!(
                    "targets must be {lead:?}: one class index per row of the input (the \
                     input's shape less its last dimension)"
                ),
            }
            .into());
        }
    }
    Ok(())
}

impl<T: GradElement> Var<T> {
    /// The mean cross-entropy of the logits `self · weightᵀ (+ bias)` against class indices
    /// `targets`, with the logits kept out of the graph: `self` `[…, in]`, `weight`
    /// `[classes, in]` (as [`Var::linear`]'s), `bias` `[classes]`, `targets` (i32, e.g. from
    /// [`crate::class_targets`]) of `self`'s shape less its last dimension (`[N]` for
    /// `[N, in]`, `[B, T]` for `[B, T, in]`); a 0-d value. The same value and gradients as
    /// `self.linear(weight, bias)?` (reshaped to `[N, classes]`, `N` the rows) followed by
    /// [`Var::fused_cross_entropy`] against the targets flattened to `[N]` — the same `Tensor`
    /// ops in the same order (a GPU test checks them bit for bit) — with one `[N, classes]`
    /// buffer fewer at the backward's peak.
    ///
    /// Forward: [`Tensor::linear`] (the logits), [`Tensor::classifier_loss_lse`] (the loss rows
    /// and each row's log-sum-exp) and a mean. The logits are saved by the backward closure
    /// **alone** — no `Var` holds them — so when the backward runs,
    /// [`Tensor::classifier_grad_lse_`] writes `(softmax − onehot) · g / N` over them in place,
    /// reading each element once ([`Tensor::is_exclusive`] holds: nothing else has a handle). Then, with that
    /// gradient `G` `[N, classes]` and `x` flattened to `[N, in]`, [`Var::linear`]'s backward:
    /// `dx = G · W`, `dW = Gᵀ · x`, `db = Σ_rows G` (each only when its input requires grad),
    /// and `G` is freed. Saves `x`, `W`, the targets and the logits.
    ///
    /// A target outside `0..classes` gives NaN (as [`Var::fused_cross_entropy`]). Shape and
    /// device mismatches are [`NnError::Tensor`], returned before anything is launched. The
    /// backward runs **once**: it consumes the logits, so a second backward through a retained
    /// graph is [`NnError::SavedTensorConsumed`] (use the unfused chain above to differentiate
    /// twice). Without grad (under [`crate::no_grad`], or no input requiring it) the logits are
    /// freed when the forward returns.
    pub fn linear_cross_entropy(
        &self,
        weight: &Var<T>,
        bias: Option<&Var<T>>,
        targets: &Tensor<i32>,
    ) -> Result<Var<T>> {
        let (x, w) = (self.value(), weight.value());
        let b = bias.map(Var::value);
        check_targets(&x, targets)?;
        let in_f = x.shape().last().copied().unwrap_or(0);
        let rows: usize = x.shape().iter().rev().skip(1).product();
        let classes = weight.shape().first().copied().unwrap_or(0);
        // `linear` checks the weight and bias before it launches; its result is `[…, classes]`,
        // contiguous, and this handle is the only one of its storage once the temporary of the
        // statement is dropped.
        let logits = x.linear(&w, b.as_ref())?.reshape(&[rows, classes])?;
        let t = targets.contiguous()?.reshape(&[rows])?;
        // As `fused_cross_entropy`: the rows in the statistics dtype, their mean rounded once.
        let (loss_rows, lse) = logits.classifier_loss_lse(&t)?;
        let value = loss_rows.mean_all()?.to_dtype::<T>()?;
        let inv = 1.0 / rows.max(1) as f64;
        let (nx, nw) = (self.requires_grad(), weight.requires_grad());
        let nb = bias.is_some_and(Var::requires_grad);
        let mut inputs = vec![self, weight];
        if let Some(b) = bias {
            inputs.push(b);
        }
        let has_bias = bias.is_some();
        let saved = Mutex::new(Some(logits));
        Ok(Var::from_op(value, OP, &inputs, move |g| {
            let mut g2 = lock(&saved).take().ok_or(NnError::SavedTensorConsumed {
                op: OP,
                instead: INSTEAD,
            })?;
            // The logits become their gradient `[rows, classes]`, in place (this closure held
            // the only handle); then `linear`'s backward with it as the incoming gradient, op
            // for op. It is freed when the closure returns.
            g2.classifier_grad_lse_(&t, &lse, &g.to_dtype::<T::Stat>()?, inv)?;
            let gx = if nx {
                Some(g2.matmul(&w)?.reshape(x.shape())?)
            } else {
                None
            };
            let gw = if nw {
                Some(g2.t()?.matmul(&x.contiguous()?.reshape(&[rows, in_f])?)?)
            } else {
                None
            };
            let mut grads = vec![gx, gw];
            if has_bias {
                grads.push(if nb { Some(g2.sum(0)?) } else { None });
            }
            Ok(grads)
        }))
    }
}
