//! The fused cross-entropy loss (`nn.CrossEntropyLoss()`: log-softmax + NLL, mean over the
//! batch) and class targets checked on the host.

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// Class indices `labels` as a device tensor of i32 targets, each checked to be in
/// `0..classes` first (the loss kernel cannot report a bad index without a host round trip;
/// it would give NaN).
pub fn class_targets(labels: &[usize], classes: usize) -> Result<Tensor<i32>> {
    let mut out = Vec::with_capacity(labels.len());
    for (i, &l) in labels.iter().enumerate() {
        if l >= classes || l > i32::MAX as usize {
            return Err(NnError::Invalid {
                what: "class_targets",
                problem: format!("label {l} at position {i} is not a class index in 0..{classes}"),
            });
        }
        out.push(l as i32);
    }
    Ok(Tensor::from_vec(out, &[labels.len()])?)
}

impl<T: GradElement> Var<T> {
    /// The mean cross-entropy of logits `self` (`[N, C]`) against class indices `targets`
    /// (`[N]`, e.g. from [`class_targets`]): `mean_r(logsumexp(x_r) − x_r[t_r])`, a 0-d value.
    /// Forward: one row kernel and a mean; backward: one kernel,
    /// `(softmax(x) − onehot(t)) · g / N`, reading `g` on the device (no host round trip).
    pub fn cross_entropy(&self, targets: &Tensor<i32>) -> Result<Var<T>> {
        let x = self.value();
        let rows = x.cross_entropy_rows(targets)?;
        let value = rows.mean_all()?;
        let t = targets.clone();
        let inv = 1.0 / x.shape()[0].max(1) as f64;
        Ok(Var::from_op(value, "cross_entropy", &[self], move |g| {
            Ok(vec![Some(x.cross_entropy_backward(&t, g, inv)?)])
        }))
    }
}

impl<T: GradElement> Var<T> {
    /// The mean cross-entropy of logits `self` (`[N, V]`) against class indices `targets`
    /// (`[N]`), computed with llm.c's fused classifier: the same value and gradient as
    /// [`Var::cross_entropy`], for large vocabularies. Forward: one pass over the logits (the
    /// loss kernel, a block per row, which also saves each row's log-sum-exp) and a mean.
    /// Backward: a copy of the logits (they belong to `self`), then **one** kernel that reads and
    /// writes each element once: `(exp(x − lse) − onehot) · g / N`, with the upstream gradient
    /// `g` read on the device — deferred to the backward pass (rather than run in the forward
    /// with `g = 1` and rescaled later) so that nothing `[N, V]`-sized is stored between the
    /// passes and no extra scaling pass is needed. [`Var::linear_cross_entropy`] skips the copy.
    pub fn fused_cross_entropy(&self, targets: &Tensor<i32>) -> Result<Var<T>> {
        let x = self.value();
        // The loss rows are in the statistics dtype (f32 for f16/bf16): the mean is taken there
        // and rounded once to `T` for the graph.
        let (rows, lse) = x.classifier_loss_lse(targets)?;
        let value = rows.mean_all()?.to_dtype::<T>()?;
        let t = targets.clone();
        let inv = 1.0 / x.shape()[0].max(1) as f64;
        Ok(Var::from_op(
            value,
            "fused_cross_entropy",
            &[self],
            move |g| {
                // A handle of `x` shares its storage: the in-place kernel works on a copy.
                let mut dlogits = x.clone();
                dlogits.classifier_grad_lse_(&t, &lse, &g.to_dtype::<T::Stat>()?, inv)?;
                Ok(vec![Some(dlogits)])
            },
        ))
    }
}
