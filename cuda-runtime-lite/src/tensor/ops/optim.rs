//! Optimizer steps on tensors (PyTorch's SGD and Adam/AdamW update rules), **in place** on the
//! parameter and its state (see `in_place.rs` for when "in place" needs a private copy first),
//! so a whole training step can be captured into a CUDA graph and replayed.

use super::activation_grad::check_grad_shape;
use crate::tensor::error::Result;
use crate::tensor::{GradElement, Tensor};
pub use cuda_kernels::ops::{AdamParams, SgdParams};

impl<T: GradElement> Tensor<T> {
    /// `self ← self − lr · (grad + weight_decay · self)`: one plain SGD step of parameter
    /// `self`, in place.
    pub fn sgd_(&mut self, grad: &Tensor<T>, lr: f64, weight_decay: f64) -> Result<()> {
        check_grad_shape("sgd_", self, grad)?;
        let g = grad.contiguous()?;
        let gv = g.dense()?;
        let (exec, p) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        T::sgd(&k, exec.stream(), p, &gv, lr, weight_decay)
    }

    /// One SGD-with-momentum step of parameter `self` and its momentum buffer, in place. With
    /// `first` (PyTorch's first step), the buffer is set to the gradient term without being read.
    pub fn sgd_momentum_(
        &mut self,
        grad: &Tensor<T>,
        momentum_buffer: &mut Tensor<T>,
        params: SgdParams<f64>,
        first: bool,
    ) -> Result<()> {
        const OP: &str = "sgd_momentum_";
        check_grad_shape(OP, self, grad)?;
        check_grad_shape(OP, self, momentum_buffer)?;
        let g = grad.contiguous()?;
        let gv = g.dense()?;
        let (_, b) = momentum_buffer.exclusive_mut()?;
        let (exec, p) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        T::sgd_momentum(&k, exec.stream(), p, &gv, b, params, first)
    }

    /// One Adam (or AdamW) step of parameter `self` with state `exp_avg` (m) and `exp_avg_sq`
    /// (v), all in place; the step number is `steps[index]` on the device (already advanced
    /// for this step, e.g. by [`Tensor::increment_`]), so nothing per-step comes from the host.
    pub fn adam_(
        &mut self,
        grad: &Tensor<T>,
        exp_avg: &mut Tensor<T>,
        exp_avg_sq: &mut Tensor<T>,
        steps: &Tensor<i32>,
        index: usize,
        params: AdamParams<f64>,
    ) -> Result<()> {
        const OP: &str = "adam_";
        check_grad_shape(OP, self, grad)?;
        check_grad_shape(OP, self, exp_avg)?;
        check_grad_shape(OP, self, exp_avg_sq)?;
        self.same_device(OP, steps)?;
        let (g, st) = (grad.contiguous()?, steps.contiguous()?);
        let (gv, sv) = (g.dense()?, st.dense()?);
        let (_, m) = exp_avg.exclusive_mut()?;
        let (_, v) = exp_avg_sq.exclusive_mut()?;
        let (exec, p) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        T::adam(&k, exec.stream(), p, &gv, m, v, &sv, index, params)
    }
}
