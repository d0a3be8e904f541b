//! Optimizer steps on tensors (PyTorch's SGD and Adam/AdamW update rules), **in place** on the
//! parameter and its state (see `in_place.rs` for when "in place" needs a private copy first),
//! so a whole training step can be captured into a CUDA graph and replayed.

use super::activation_grad::check_grad_shape;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{GradElement, Tensor};
pub use cuda_stack_kernels::ops::{AdamParams, SgdParams};
use std::ops::Range;

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

/// Optimizer steps on one part of a tensor: elements `offset .. offset + grad.numel()` of its
/// row-major order, the others untouched — one rank's part of a flat parameter buffer under
/// ZeRO-1 (`cuda_stack_nn::ShardedOptimizer`). The gradient and the state tensors cover the
/// part only (each of the gradient's shape). In place when [`Tensor::is_exclusive`]; a shared
/// tensor or a view first becomes a private copy, as for every in-place op.
impl<T: GradElement> Tensor<T> {
    /// The range `offset .. offset + grad.numel()` of this tensor's elements, checked.
    fn part(&self, op: &'static str, offset: usize, grad: &Tensor<T>) -> Result<Range<usize>> {
        self.same_device(op, grad)?;
        match offset.checked_add(grad.numel()) {
            Some(end) if end <= self.numel() => Ok(offset..end),
            _ => Err(TensorError::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: grad.shape().to_vec(),
                why: format!(
                    "a part of {} elements from element {offset} does not fit in {} elements",
                    grad.numel(),
                    self.numel()
                ),
            }),
        }
    }

    /// [`Tensor::sgd_`] on elements `offset .. offset + grad.numel()`.
    pub fn sgd_at_(
        &mut self,
        offset: usize,
        grad: &Tensor<T>,
        lr: f64,
        weight_decay: f64,
    ) -> Result<()> {
        let range = self.part("sgd_at_", offset, grad)?;
        let g = grad.contiguous()?;
        let gv = g.dense()?;
        let (exec, p) = self.exclusive_mut()?;
        let mut part = p.slice_mut(range)?;
        let k = exec.kernels()?;
        T::sgd(&k, exec.stream(), &mut part, &gv, lr, weight_decay)
    }

    /// [`Tensor::sgd_momentum_`] on elements `offset .. offset + grad.numel()`, with the part's
    /// momentum buffer (the gradient's shape).
    pub fn sgd_momentum_at_(
        &mut self,
        offset: usize,
        grad: &Tensor<T>,
        momentum_buffer: &mut Tensor<T>,
        params: SgdParams<f64>,
        first: bool,
    ) -> Result<()> {
        const OP: &str = "sgd_momentum_at_";
        let range = self.part(OP, offset, grad)?;
        check_grad_shape(OP, grad, momentum_buffer)?;
        let g = grad.contiguous()?;
        let gv = g.dense()?;
        let (_, b) = momentum_buffer.exclusive_mut()?;
        let (exec, p) = self.exclusive_mut()?;
        let mut part = p.slice_mut(range)?;
        let k = exec.kernels()?;
        T::sgd_momentum(&k, exec.stream(), &mut part, &gv, b, params, first)
    }

    /// [`Tensor::adam_`] on elements `offset .. offset + grad.numel()`, with the part's moments
    /// (the gradient's shape) and its step count `steps[index]`.
    #[allow(clippy::too_many_arguments)]
    pub fn adam_at_(
        &mut self,
        offset: usize,
        grad: &Tensor<T>,
        exp_avg: &mut Tensor<T>,
        exp_avg_sq: &mut Tensor<T>,
        steps: &Tensor<i32>,
        index: usize,
        params: AdamParams<f64>,
    ) -> Result<()> {
        const OP: &str = "adam_at_";
        let range = self.part(OP, offset, grad)?;
        check_grad_shape(OP, grad, exp_avg)?;
        check_grad_shape(OP, grad, exp_avg_sq)?;
        self.same_device(OP, steps)?;
        let (g, st) = (grad.contiguous()?, steps.contiguous()?);
        let (gv, sv) = (g.dense()?, st.dense()?);
        let (_, m) = exp_avg.exclusive_mut()?;
        let (_, v) = exp_avg_sq.exclusive_mut()?;
        let (exec, p) = self.exclusive_mut()?;
        let mut part = p.slice_mut(range)?;
        let k = exec.kernels()?;
        T::adam(&k, exec.stream(), &mut part, &gv, m, v, &sv, index, params)
    }
}

/// Exclusive mutable slices of four tensors (each made exclusive first, see `in_place.rs`), and
/// where to queue work (the first one's device and stream).
fn exclusive4<T: GradElement>(
    t: [&mut Tensor<T>; 4],
) -> Result<(
    crate::tensor::storage::Exec,
    [&mut cuda_stack_driver::DeviceSlice<T>; 4],
)> {
    let [a, b, c, d] = t;
    let (exec, a) = a.exclusive_mut()?;
    let (_, b) = b.exclusive_mut()?;
    let (_, c) = c.exclusive_mut()?;
    let (_, d) = d.exclusive_mut()?;
    Ok((exec, [a, b, c, d]))
}

/// Checks four (tensor, gradient-like) pairs for shape and device.
fn check4<T: GradElement>(
    op: &'static str,
    p: &[&mut Tensor<T>; 4],
    o: [&Tensor<T>; 4],
) -> Result<()> {
    for (p, o) in p.iter().zip(o) {
        check_grad_shape(op, p, o)?;
    }
    Ok(())
}

/// The four gradients made contiguous.
fn contiguous4<T: GradElement>(g: [&Tensor<T>; 4]) -> Result<[Tensor<T>; 4]> {
    Ok([
        g[0].contiguous()?,
        g[1].contiguous()?,
        g[2].contiguous()?,
        g[3].contiguous()?,
    ])
}

/// [`Tensor::sgd_`] for four parameters in **one launch** (PyTorch's `foreach` / multi-tensor
/// update): `params[j] ← params[j] − lr · (grads[j] + weight_decay · params[j])`.
pub fn sgd4_<T: GradElement>(
    params: [&mut Tensor<T>; 4],
    grads: [&Tensor<T>; 4],
    lr: f64,
    weight_decay: f64,
) -> Result<()> {
    check4("sgd4_", &params, grads)?;
    same_device4("sgd4_", &params)?;
    let g = contiguous4(grads)?;
    let gv = [g[0].dense()?, g[1].dense()?, g[2].dense()?, g[3].dense()?];
    let (exec, p) = exclusive4(params)?;
    let k = exec.kernels()?;
    T::sgd4(
        &k,
        exec.stream(),
        p,
        [&gv[0], &gv[1], &gv[2], &gv[3]],
        lr,
        weight_decay,
    )
}

/// [`Tensor::sgd_momentum_`] for four parameters and their momentum buffers in one launch.
pub fn sgd_momentum4_<T: GradElement>(
    params: [&mut Tensor<T>; 4],
    grads: [&Tensor<T>; 4],
    buffers: [&mut Tensor<T>; 4],
    hyper: SgdParams<f64>,
    first: bool,
) -> Result<()> {
    check4("sgd_momentum4_", &params, grads)?;
    same_device4("sgd_momentum4_", &params)?;
    for (p, b) in params.iter().zip(buffers.iter()) {
        check_grad_shape("sgd_momentum4_", p, b)?;
    }
    let g = contiguous4(grads)?;
    let gv = [g[0].dense()?, g[1].dense()?, g[2].dense()?, g[3].dense()?];
    let (_, b) = exclusive4(buffers)?;
    let (exec, p) = exclusive4(params)?;
    let k = exec.kernels()?;
    T::sgd_momentum4(
        &k,
        exec.stream(),
        p,
        [&gv[0], &gv[1], &gv[2], &gv[3]],
        b,
        hyper,
        first,
    )
}

/// [`Tensor::adam_`] for four parameters in one launch; parameter j's step count is
/// `steps[first_step + j]`.
#[allow(clippy::too_many_arguments)]
pub fn adam4_<T: GradElement>(
    params: [&mut Tensor<T>; 4],
    grads: [&Tensor<T>; 4],
    exp_avgs: [&mut Tensor<T>; 4],
    exp_avg_sqs: [&mut Tensor<T>; 4],
    steps: &Tensor<i32>,
    first_step: usize,
    hyper: AdamParams<f64>,
) -> Result<()> {
    const OP: &str = "adam4_";
    check4(OP, &params, grads)?;
    same_device4(OP, &params)?;
    for ((p, m), v) in params.iter().zip(exp_avgs.iter()).zip(exp_avg_sqs.iter()) {
        check_grad_shape(OP, p, m)?;
        check_grad_shape(OP, p, v)?;
    }
    params[0].same_device(OP, steps)?;
    let g = contiguous4(grads)?;
    let gv = [g[0].dense()?, g[1].dense()?, g[2].dense()?, g[3].dense()?];
    let st = steps.contiguous()?;
    let sv = st.dense()?;
    let four = first_step
        .checked_add(4)
        .filter(|&end| end <= sv.len())
        .ok_or_else(|| crate::tensor::error::TensorError::InvalidArgument {
            op: OP,
            problem: format!("step counters {first_step}..+4 of {} counters", sv.len()),
        })?;
    let sv4 = sv.slice(first_step..four)?;
    let (_, m) = exclusive4(exp_avgs)?;
    let (_, v) = exclusive4(exp_avg_sqs)?;
    let (exec, p) = exclusive4(params)?;
    let k = exec.kernels()?;
    T::adam4(
        &k,
        exec.stream(),
        p,
        [&gv[0], &gv[1], &gv[2], &gv[3]],
        m,
        v,
        &sv4,
        hyper,
    )
}

/// All four on one device.
fn same_device4<T: GradElement>(op: &'static str, p: &[&mut Tensor<T>; 4]) -> Result<()> {
    for t in &p[1..] {
        p[0].same_device(op, t)?;
    }
    Ok(())
}
