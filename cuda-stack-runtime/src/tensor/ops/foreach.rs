//! Multi-tensor ("foreach") ops on tensors: one kernel launch per table of tensors
//! (`cuda_stack_kernels::ops::multi_tensor`) where the per-tensor ops would launch once per
//! tensor — PyTorch's `torch._foreach_*` and fused `Adam(foreach=True)`. A model's weights
//! cast to bf16 ([`to_dtype_many`]), its optimizer state made ([`zeros_like_many`]) and its
//! Adam step ([`adam_many_`]) each cost one or a few launches instead of one per parameter.
//!
//! Every tensor of one call must be on one device ([`TensorError::DeviceMismatch`] otherwise,
//! before anything is queued); the work is queued on that device's current stream, and the
//! kernel launch orders each buffer after its uses on other streams, as every op does.

use super::activation_grad::check_grad_shape;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{DType, GradElement, Tensor, TensorElement};
use cuda_stack_driver::DeviceSlice;
use cuda_stack_kernels::ops::{self, AdamParams, AdamTensor};

/// The kernel [`adam_many_`] launches for `T` on device `ordinal`, and the index of its
/// learning-rate parameter (a `T::Scalar`: `f32` for f32, `f64` for f64). The rate only
/// scales the update (no memory access depends on it), so a CUDA graph that captured the update
/// can be given another rate for its later replays
/// ([`cuda_stack_driver::GraphExec::set_kernel_param`] on its nodes that launch this kernel):
/// how a captured training step follows a learning-rate schedule.
pub fn adam_many_lr_param<T: GradElement>(
    ordinal: usize,
) -> Result<(cuda_stack_driver::Function, usize)> {
    let exec = crate::tensor::storage::Exec::on(ordinal)?;
    let k = exec.kernels()?;
    let f = T::adam_many_kernel(&k)?.clone();
    Ok((f, ops::ADAM_MANY_LR_PARAM))
}

/// [`TensorError::DeviceMismatch`] unless every tensor is on `xs[0]`'s device.
fn one_device<T: TensorElement>(op: &'static str, xs: &[&Tensor<T>]) -> Result<()> {
    if let Some((first, rest)) = xs.split_first() {
        for x in rest {
            first.same_device(op, x)?;
        }
    }
    Ok(())
}

/// [`Tensor::to_dtype`] of every tensor of `xs`: f32 → bf16 / f16 and bf16 / f16 → f32 in one
/// launch per table (136 tensors; the mixed-precision casts of a whole model's weights, or of
/// their gradients back), each element rounded once exactly as `to_dtype` rounds it; other
/// dtype pairs (and `T == U`, which returns the tensors themselves) tensor by tensor.
pub fn to_dtype_many<T: TensorElement, U: TensorElement>(
    xs: &[&Tensor<T>],
) -> Result<Vec<Tensor<U>>> {
    const OP: &str = "to_dtype_many";
    use DType::{BF16, F16, F32};
    one_device(OP, xs)?;
    let Some(first) = xs.first() else {
        return Ok(Vec::new());
    };
    if !matches!(
        (T::DTYPE, U::DTYPE),
        (F32, BF16) | (BF16, F32) | (F32, F16) | (F16, F32)
    ) {
        return xs.iter().map(|x| x.to_dtype::<U>()).collect();
    }
    let exec = first.exec()?;
    let k = exec.kernels()?;
    let src: Vec<Tensor<T>> = xs.iter().map(|x| x.contiguous()).collect::<Result<_>>()?;
    let views = src.iter().map(|x| x.dense()).collect::<Result<Vec<_>>>()?;
    let refs: Vec<&DeviceSlice<T>> = views.iter().map(|v| &**v).collect();
    let lens: Vec<usize> = xs.iter().map(|x| x.numel()).collect();
    // SAFETY: the cast writes every element of every output (same lengths, checked by it).
    let storages = unsafe {
        exec.storages_with::<U>(&lens, |outs| {
            Ok(ops::cast_many::<T, U>(&k, exec.stream(), &refs, outs)?)
        })?
    };
    storages
        .into_iter()
        .zip(xs)
        .map(|(s, x)| Tensor::from_storage(s, x.shape()))
        .collect()
}

/// A new zero tensor of each tensor's shape, on their device (optimizer state): one launch
/// per table of 192 tensors for f32 and f64, [`Tensor::full_like`] per tensor otherwise.
pub fn zeros_like_many<T: GradElement>(xs: &[&Tensor<T>]) -> Result<Vec<Tensor<T>>> {
    const OP: &str = "zeros_like_many";
    one_device(OP, xs)?;
    let Some(first) = xs.first() else {
        return Ok(Vec::new());
    };
    if !matches!(T::DTYPE, DType::F32 | DType::F64) {
        return xs
            .iter()
            .map(|x| x.full_like(x.shape(), T::from_f64(0.0)))
            .collect();
    }
    let exec = first.exec()?;
    let k = exec.kernels()?;
    let lens: Vec<usize> = xs.iter().map(|x| x.numel()).collect();
    // SAFETY: the fill writes every element of every buffer.
    let storages = unsafe {
        exec.storages_with::<T>(&lens, |outs| T::fill_many(&k, exec.stream(), outs, 0.0))?
    };
    storages
        .into_iter()
        .zip(xs)
        .map(|(s, x)| Tensor::from_storage(s, x.shape()))
        .collect()
}

/// One parameter of [`adam_many_`]: the parameter, its gradient and moments (one shape), its
/// step counter and weight decay.
pub struct AdamSlot<'a, T: GradElement> {
    /// The parameter, updated in place.
    pub param: &'a mut Tensor<T>,
    /// Its gradient.
    pub grad: &'a Tensor<T>,
    /// The first moment (`exp_avg`), updated in place.
    pub exp_avg: &'a mut Tensor<T>,
    /// The second moment (`exp_avg_sq`), updated in place.
    pub exp_avg_sq: &'a mut Tensor<T>,
    /// `steps[step_index]` is this parameter's step number (already advanced for this step).
    pub step_index: usize,
    /// This parameter's weight decay (in place of `hyper.weight_decay`).
    pub weight_decay: f64,
}

/// [`Tensor::adam_`] of every slot — one launch per table of 64 parameters, each with its own
/// step counter and weight decay — and, with `grad_scale` (a one-element tensor on the device,
/// e.g. the clip coefficient of [`crate::clip_grad_scale`]), every gradient multiplied by
/// `grad_scale` as it is read (rounded once: the same bits as scaling the gradients in place
/// first, without that pass over them or a host round trip). In place like `adam_` (a shared
/// tensor is first given a private copy). f32 and f64.
pub fn adam_many_<T: GradElement>(
    slots: &mut [AdamSlot<'_, T>],
    steps: &Tensor<i32>,
    grad_scale: Option<&Tensor<T>>,
    hyper: AdamParams<f64>,
) -> Result<()> {
    const OP: &str = "adam_many_";
    for s in slots.iter() {
        check_grad_shape(OP, s.param, s.grad)?;
        check_grad_shape(OP, s.param, s.exp_avg)?;
        check_grad_shape(OP, s.param, s.exp_avg_sq)?;
        steps.same_device(OP, s.param)?;
    }
    if let Some(g) = grad_scale {
        steps.same_device(OP, g)?;
        if g.numel() != 1 {
            return Err(TensorError::InvalidArgument {
                op: OP,
                problem: format!("grad_scale of shape {:?}: one element", g.shape()),
            });
        }
    }
    let exec = steps.exec()?;
    let k = exec.kernels()?;
    let grads: Vec<Tensor<T>> = slots
        .iter()
        .map(|s| s.grad.contiguous())
        .collect::<Result<_>>()?;
    let gviews = grads
        .iter()
        .map(|g| g.dense())
        .collect::<Result<Vec<_>>>()?;
    let st = steps.contiguous()?;
    let sv = st.dense()?;
    let sc = grad_scale.map(|g| g.contiguous()).transpose()?;
    let scv = sc.as_ref().map(|g| g.dense()).transpose()?;
    let mut tensors = Vec::with_capacity(slots.len());
    for (s, g) in slots.iter_mut().zip(&gviews) {
        let (_, m) = s.exp_avg.exclusive_mut()?;
        let (_, v) = s.exp_avg_sq.exclusive_mut()?;
        let (_, p) = s.param.exclusive_mut()?;
        tensors.push(AdamTensor {
            p,
            g: &**g,
            m,
            v,
            step_index: s.step_index,
            weight_decay: s.weight_decay,
        });
    }
    T::adam_many(&k, exec.stream(), &mut tensors, &sv, scv.as_deref(), hyper)
}
