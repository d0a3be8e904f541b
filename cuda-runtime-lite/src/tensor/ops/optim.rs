//! Optimizer steps on tensors (PyTorch's SGD and Adam/AdamW update rules), out of place: each
//! step returns new parameter and state tensors, and the old ones go back to the caching
//! allocator when dropped.

use super::activation_grad::check_grad_shape;
use crate::tensor::error::Result;
use crate::tensor::{GradElement, Tensor};
pub use cuda_kernels::ops::{AdamParams, SgdParams};

impl<T: GradElement> Tensor<T> {
    /// `self − lr · (grad + weight_decay · self)`: one plain SGD step of parameter `self`.
    pub fn sgd_step(&self, grad: &Tensor<T>, lr: f64, weight_decay: f64) -> Result<Tensor<T>> {
        const OP: &str = "sgd_step";
        check_grad_shape(OP, self, grad)?;
        let (p, g) = (self.contiguous()?, grad.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (pv, gv) = (p.dense()?, g.dense()?);
        // SAFETY: the sgd kernel writes every element of its output.
        let storage = unsafe {
            exec.storage_with(p.numel(), |out| {
                T::sgd(&k, exec.stream(), &pv, &gv, out, lr, weight_decay)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// One SGD-with-momentum step of parameter `self`: returns `(new parameter, new momentum
    /// buffer)`. `momentum_buffer` is `None` on the first step (the buffer starts as the
    /// gradient, as in PyTorch).
    pub fn sgd_momentum_step(
        &self,
        grad: &Tensor<T>,
        momentum_buffer: Option<&Tensor<T>>,
        params: SgdParams<f64>,
    ) -> Result<(Tensor<T>, Tensor<T>)> {
        const OP: &str = "sgd_momentum_step";
        check_grad_shape(OP, self, grad)?;
        if let Some(b) = momentum_buffer {
            check_grad_shape(OP, self, b)?;
        }
        let (p, g) = (self.contiguous()?, grad.contiguous()?);
        let b = match momentum_buffer {
            Some(b) => b.contiguous()?,
            None => g.clone(), // not read on the first step
        };
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (pv, gv, bv) = (p.dense()?, g.dense()?, b.dense()?);
        let first = momentum_buffer.is_none();
        // SAFETY: the kernel writes every element of both outputs.
        let (np, nb) = unsafe {
            exec.storage_pair_with(p.numel(), p.numel(), |p_out, b_out| {
                T::sgd_momentum(
                    &k,
                    exec.stream(),
                    &pv,
                    &gv,
                    &bv,
                    p_out,
                    b_out,
                    params,
                    first,
                )
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(np, self.shape())?,
            Tensor::from_storage(nb, self.shape())?,
        ))
    }

    /// One Adam (or AdamW) step of parameter `self` with state `exp_avg` (m) and `exp_avg_sq`
    /// (v): returns `(new parameter, new m, new v)`. Start m and v at zeros; the bias
    /// corrections for step `t` are in `params`.
    pub fn adam_step(
        &self,
        grad: &Tensor<T>,
        exp_avg: &Tensor<T>,
        exp_avg_sq: &Tensor<T>,
        params: AdamParams<f64>,
    ) -> Result<(Tensor<T>, Tensor<T>, Tensor<T>)> {
        const OP: &str = "adam_step";
        for t in [grad, exp_avg, exp_avg_sq] {
            check_grad_shape(OP, self, t)?;
        }
        let (p, g, m, v) = (
            self.contiguous()?,
            grad.contiguous()?,
            exp_avg.contiguous()?,
            exp_avg_sq.contiguous()?,
        );
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (pv, gv, mv, vv) = (p.dense()?, g.dense()?, m.dense()?, v.dense()?);
        // SAFETY: the kernel writes every element of all three outputs.
        let [np, nm, nv] = unsafe {
            exec.storage_triple_with(p.numel(), |p_out, m_out, v_out| {
                T::adam(
                    &k,
                    exec.stream(),
                    &pv,
                    &gv,
                    &mv,
                    &vv,
                    p_out,
                    m_out,
                    v_out,
                    params,
                )
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(np, self.shape())?,
            Tensor::from_storage(nm, self.shape())?,
            Tensor::from_storage(nv, self.shape())?,
        ))
    }
}
