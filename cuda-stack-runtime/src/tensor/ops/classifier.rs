//! The fused classifier (llm.c's): per-row cross-entropy and the logits' gradient in one
//! kernel that never stores the softmax, on tensors (f32, f64, f16, bf16 logits; losses in
//! [`FloatElement::Stat`]).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{FloatElement, Tensor};

/// `(rows, classes)` of logits `[N, V]` against targets `[N]`.
fn logits_shape<T: FloatElement>(
    op: &'static str,
    logits: &Tensor<T>,
    targets: &Tensor<i32>,
) -> Result<(usize, usize)> {
    logits.same_device(op, targets)?;
    let &[rows, classes] = logits.shape() else {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: logits.shape().to_vec(),
            rhs: targets.shape().to_vec(),
            why: "logits must be [batch, classes] (reshape other shapes first)".into(),
        });
    };
    if targets.shape() != [rows] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: logits.shape().to_vec(),
            rhs: targets.shape().to_vec(),
            why: format!("targets must be [{rows}]: one class index per row of the logits"),
        });
    }
    Ok((rows, classes))
}

/// `grad` must be one element on the logits' device.
fn check_upstream<T: FloatElement>(
    op: &'static str,
    logits: &Tensor<T>,
    grad: &Tensor<T::Stat>,
) -> Result<()> {
    logits.same_device(op, grad)?;
    if grad.numel() != 1 {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: logits.shape().to_vec(),
            rhs: grad.shape().to_vec(),
            why: "grad is the gradient of the reduced loss: one element".into(),
        });
    }
    Ok(())
}

impl<T: FloatElement> Tensor<T> {
    /// Per-row cross-entropy of logits `self` (`[N, V]`) against class indices `targets`
    /// (`[N]`): `logsumexp(self[r]) − self[r][targets[r]]`, shape `[N]`, one pass over the
    /// logits (one block per row). A target outside `0..V` gives NaN for its row.
    pub fn classifier_loss(&self, targets: &Tensor<i32>) -> Result<Tensor<T::Stat>> {
        const OP: &str = "classifier_loss";
        let (rows, classes) = logits_shape(OP, self, targets)?;
        let (x, t) = (self.contiguous()?, targets.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, tv) = (x.dense()?, t.dense()?);
        // SAFETY: the kernel writes the loss of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(rows, |loss| {
                T::classifier_loss(&k, exec.stream(), &xv, &tv, loss, rows, classes)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, &[rows])
    }

    /// llm.c's fused classifier: the per-row losses (as [`Tensor::classifier_loss`]) **and**
    /// the gradient of `scale · Σ_r loss[r]` times the one-element upstream gradient `grad`
    /// with respect to the logits, `(softmax(self[r]) − onehot(targets[r])) · grad · scale`,
    /// in one kernel that reads each row twice and never stores the softmax. `scale = 1/N`
    /// for a mean. `grad` stays on the device. Returns `(loss_rows, dlogits)`.
    pub fn fused_classifier(
        &self,
        targets: &Tensor<i32>,
        grad: &Tensor<T::Stat>,
        scale: f64,
    ) -> Result<(Tensor<T::Stat>, Tensor<T>)> {
        const OP: &str = "fused_classifier";
        let (rows, classes) = logits_shape(OP, self, targets)?;
        check_upstream(OP, self, grad)?;
        let (x, t, g) = (
            self.contiguous()?,
            targets.contiguous()?,
            grad.contiguous()?,
        );
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, tv, gv) = (x.dense()?, t.dense()?, g.dense()?);
        // SAFETY: the kernel writes the loss of every row and every element of dlogits.
        let (loss, dl) = unsafe {
            exec.storage_pair_with(rows, x.numel(), |loss, dl| {
                T::fused_classifier(
                    &k,
                    exec.stream(),
                    &xv,
                    &tv,
                    &gv,
                    loss,
                    dl,
                    rows,
                    classes,
                    scale,
                )
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(loss, &[rows])?,
            Tensor::from_storage(dl, self.shape())?,
        ))
    }

    /// [`Tensor::fused_classifier`] writing the gradient **over the logits** (llm.c's way: no
    /// second `[N, V]` buffer): afterwards `self` holds `dlogits`; returns the loss rows
    /// (computed from the original logits). In place when [`Tensor::is_exclusive`]; a shared
    /// tensor or a view first becomes a private copy, as for every in-place op.
    pub fn fused_classifier_(
        &mut self,
        targets: &Tensor<i32>,
        grad: &Tensor<T::Stat>,
        scale: f64,
    ) -> Result<Tensor<T::Stat>> {
        const OP: &str = "fused_classifier_";
        let (rows, classes) = logits_shape(OP, self, targets)?;
        check_upstream(OP, self, grad)?;
        let shape = self.shape().to_vec();
        let (t, g) = (targets.contiguous()?, grad.contiguous()?);
        let (tv, gv) = (t.dense()?, g.dense()?);
        let (exec, logits) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        // SAFETY: the kernel writes the loss of each of the `rows` rows.
        let loss = unsafe {
            exec.storage_with(rows, |loss| {
                T::fused_classifier_inplace(
                    &k,
                    exec.stream(),
                    logits,
                    &tv,
                    &gv,
                    loss,
                    rows,
                    classes,
                    scale,
                )
            })
        }
        .map_err(|e| e.with_shape(&shape))?;
        Tensor::from_storage(loss, &[rows])
    }

    /// [`Tensor::classifier_loss`] (the same losses) and each row's log-sum-exp
    /// `logsumexp(self[r])`, both `[N]` in [`FloatElement::Stat`]: the forward of a
    /// cross-entropy whose backward is [`Tensor::classifier_grad_lse_`]. One pass over the logits.
    #[allow(clippy::type_complexity)] // (loss rows, lse): both documented above
    pub fn classifier_loss_lse(
        &self,
        targets: &Tensor<i32>,
    ) -> Result<(Tensor<T::Stat>, Tensor<T::Stat>)> {
        const OP: &str = "classifier_loss_lse";
        let (rows, classes) = logits_shape(OP, self, targets)?;
        let (x, t) = (self.contiguous()?, targets.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, tv) = (x.dense()?, t.dense()?);
        // SAFETY: the kernel writes the loss and the log-sum-exp of each of the `rows` rows.
        let (loss, lse) = unsafe {
            exec.storage_pair_with(rows, rows, |loss, lse| {
                T::classifier_loss_lse(&k, exec.stream(), &xv, &tv, loss, lse, rows, classes)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(loss, &[rows])?,
            Tensor::from_storage(lse, &[rows])?,
        ))
    }

    /// The gradient of `scale · Σ_r loss[r]` times the one-element upstream gradient `grad`
    /// with respect to the logits `self`, written **over** them:
    /// `(exp(self[r] − lse[r]) − onehot(targets[r])) · grad · scale`, from the log-sum-exps
    /// [`Tensor::classifier_loss_lse`] returned — each element read and written once (the
    /// fused classifier reads each row twice). In place when [`Tensor::is_exclusive`]; a shared
    /// tensor or a view first becomes a private copy, as for every in-place op.
    pub fn classifier_grad_lse_(
        &mut self,
        targets: &Tensor<i32>,
        lse: &Tensor<T::Stat>,
        grad: &Tensor<T::Stat>,
        scale: f64,
    ) -> Result<()> {
        const OP: &str = "classifier_grad_lse_";
        let (rows, classes) = logits_shape(OP, self, targets)?;
        check_upstream(OP, self, grad)?;
        self.same_device(OP, lse)?;
        if lse.shape() != [rows] {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: lse.shape().to_vec(),
                why: format!("lse must be [{rows}]: one value per row, from classifier_loss_lse"),
            });
        }
        let shape = self.shape().to_vec();
        let (t, l, g) = (targets.contiguous()?, lse.contiguous()?, grad.contiguous()?);
        let (tv, lv, gv) = (t.dense()?, l.dense()?, g.dense()?);
        let (exec, logits) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        T::classifier_grad_lse_inplace(
            &k,
            exec.stream(),
            logits,
            &tv,
            &lv,
            &gv,
            rows,
            classes,
            scale,
        )
        .map_err(|e| e.with_shape(&shape))
    }
}
