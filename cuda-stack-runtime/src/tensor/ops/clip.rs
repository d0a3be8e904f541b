//! Global-norm gradient clipping on tensors (f32, f64), with no host round trip, in a few
//! launches whatever the number of tensors (the multi-tensor kernels).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{GradElement, Tensor};
use cuda_stack_driver::DeviceSlice;
use cuda_stack_kernels::ops;

/// The global 2-norm of `grads` and the clipping scale `min(1, max_norm / (norm + 1e-6))`,
/// both as 0-d **device** tensors, without touching the gradients: for an optimizer that
/// applies the scale as it reads them (`cuda_stack_runtime::adam_many_`'s `grad_scale`). The
/// sum of squares runs as one launch per 192 tensors, with the per-tensor kernels' blocks
/// and order (each tensor's fixed partial sums, tensor by tensor in the order given, then one
/// block adding them in index order), so the norm is bit-identical to what they gave, on every
/// run. A NaN gradient gives a NaN norm and scale; an inf one an inf norm and a 0 scale. Every
/// tensor must be on one device; an empty list gives a zero norm on the current device.
pub fn clip_grad_scale<T: GradElement>(
    grads: &[&Tensor<T>],
    max_norm: f64,
) -> Result<(Tensor<T>, Tensor<T>)> {
    const OP: &str = "clip_grad_norm_";
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(TensorError::InvalidArgument {
            op: OP,
            problem: format!("max_norm = {max_norm}: must be a number >= 0"),
        });
    }
    let device = match grads.first() {
        Some(g) => g.device(),
        None => crate::current_device()?,
    };
    for g in grads.iter() {
        if g.device() != device {
            return Err(TensorError::DeviceMismatch {
                op: OP,
                lhs_device: device,
                rhs_device: g.device(),
                lhs_shape: Vec::new(),
                rhs_shape: g.shape().to_vec(),
            });
        }
    }
    let exec = Exec::on(device)?;
    let k = exec.kernels()?;
    let s = exec.stream();
    let dense: Vec<Tensor<T>> = grads
        .iter()
        .map(|g| g.contiguous())
        .collect::<Result<_>>()?;
    let views = dense
        .iter()
        .map(|g| g.dense())
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&DeviceSlice<T>> = views.iter().map(|v| &**v).collect();
    let lens: Vec<usize> = refs.iter().map(|r| r.len()).collect();
    let total = ops::sumsq_parts_many(&lens);
    let partial = if total == 0 {
        Tensor::from_storage(exec.zeros(1)?, &[1])?
    } else {
        // SAFETY: every tensor has at least one block and every block writes its partial, so
        // the sum of squares writes all `total` elements (the op checks the length).
        let st = unsafe {
            exec.storage_with::<T>(total, |pv| T::sumsq_partials_many(&k, s, &refs, pv))?
        };
        Tensor::from_storage(st, &[total])?
    };
    let pv = partial.dense()?;
    // SAFETY: clip_coef writes both one-element outputs.
    let (norm, scale) = unsafe {
        exec.storage_pair_with::<T, T>(1, 1, |nv, sv| T::clip_coef(&k, s, &pv, max_norm, nv, sv))?
    };
    Ok((
        Tensor::from_storage(norm, &[])?,
        Tensor::from_storage(scale, &[])?,
    ))
}

/// Scales `grads` in place so that their global 2-norm is at most `max_norm`
/// (`torch.nn.utils.clip_grad_norm_`): [`clip_grad_scale`] (the norm and `scale = min(1,
/// max_norm / (norm + 1e-6))` computed **on the device**), then every tensor multiplied by
/// `scale` in place (one launch per 192 tensors) — nothing is read back, so a training step
/// with clipping can be one CUDA graph. Returns the norm before clipping as a 0-d device
/// tensor. A NaN gradient gives a NaN norm and scales every tensor by NaN; an inf gradient
/// gives an inf norm and the scale `max_norm / inf = 0`, so finite elements become 0 and inf
/// ones NaN (as torch does without `error_if_nonfinite`). Every tensor must be on one device;
/// an empty list gives a zero norm on the current device. Bit-identical norms on every run.
pub fn clip_grad_norm_<T: GradElement>(
    grads: &mut [&mut Tensor<T>],
    max_norm: f64,
) -> Result<Tensor<T>> {
    let (norm, scale) = {
        let refs: Vec<&Tensor<T>> = grads.iter().map(|g| &**g).collect();
        clip_grad_scale(&refs, max_norm)?
    };
    let Some(first) = grads.first() else {
        return Ok(norm);
    };
    let exec = first.exec()?;
    let k = exec.kernels()?;
    let sv = scale.dense()?;
    let mut slices = Vec::with_capacity(grads.len());
    for g in grads.iter_mut() {
        let (_, gv) = g.exclusive_mut()?;
        slices.push(gv);
    }
    T::scale_many(&k, exec.stream(), &mut slices, &sv)?;
    Ok(norm)
}
