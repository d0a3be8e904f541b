//! The fused cross-entropy loss (log-softmax + negative log-likelihood of class indices) and its
//! gradient, on tensors.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{GradElement, Tensor};

impl<T: GradElement> Tensor<T> {
    /// `(rows, classes)` of logits `self` (`[N, C]`) against `targets` (`[N]`).
    fn logits_shape(&self, op: &'static str, targets: &Tensor<i32>) -> Result<(usize, usize)> {
        self.same_device(op, targets)?;
        let &[rows, cols] = self.shape() else {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: targets.shape().to_vec(),
                why: "logits must be [batch, classes] (reshape other shapes first)".into(),
            });
        };
        if targets.shape() != [rows] {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: targets.shape().to_vec(),
                why: format!("targets must be [{rows}]: one class index per row of the logits"),
            });
        }
        if rows > 0 && cols == 0 {
            return Err(TensorError::InvalidArgument {
                op,
                problem: format!("logits {:?} have no classes", self.shape()),
            });
        }
        Ok((rows, cols))
    }

    /// Per-row cross-entropy of logits `self` (`[N, C]`) against class indices `targets`
    /// (`[N]`, i32): `loss[r] = logsumexp(self[r]) − self[r][targets[r]]`, shape `[N]`
    /// (`F.cross_entropy(x, t, reduction='none')`). A target outside `0..C` gives NaN for its
    /// row: the check would need the targets on the host (see `cuda-stack-nn`'s `cross_entropy`,
    /// which checks them where they come from the host).
    pub fn cross_entropy_rows(&self, targets: &Tensor<i32>) -> Result<Tensor<T>> {
        const OP: &str = "cross_entropy";
        let (rows, cols) = self.logits_shape(OP, targets)?;
        let (x, t) = (self.contiguous()?, targets.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, tv) = (x.dense()?, t.dense()?);
        // SAFETY: the kernel writes the loss of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(rows, |out| {
                T::cross_entropy_fwd(&k, exec.stream(), &xv, &tv, out, rows, cols)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, &[rows])
    }

    /// The gradient of `scale · Σ_r loss[r]` (from [`Tensor::cross_entropy_rows`]) with respect
    /// to the logits `self`, times the one-element upstream gradient `grad`:
    /// `(softmax(self[r]) − onehot(targets[r])) · grad · scale`. Use `scale = 1/N` for a mean.
    /// `grad` stays on the device: no host round trip.
    pub fn cross_entropy_backward(
        &self,
        targets: &Tensor<i32>,
        grad: &Tensor<T>,
        scale: f64,
    ) -> Result<Tensor<T>> {
        const OP: &str = "cross_entropy_backward";
        let (rows, cols) = self.logits_shape(OP, targets)?;
        self.same_device(OP, grad)?;
        if grad.numel() != 1 {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: grad.shape().to_vec(),
                why: "grad is the gradient of the reduced loss: one element".into(),
            });
        }
        let (x, t, g) = (
            self.contiguous()?,
            targets.contiguous()?,
            grad.contiguous()?,
        );
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, tv, gv) = (x.dense()?, t.dense()?, g.dense()?);
        // SAFETY: the kernel writes every element of each of the `rows` rows.
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::cross_entropy_bwd(&k, exec.stream(), &xv, &tv, &gv, out, rows, cols, scale)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }
}
