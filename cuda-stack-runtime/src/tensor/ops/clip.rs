//! Global-norm gradient clipping on tensors (f32, f64), with no host round trip.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{GradElement, Tensor};
use cuda_stack_kernels::ops;

/// Scales `grads` in place so that their global 2-norm is at most `max_norm`
/// (`torch.nn.utils.clip_grad_norm_`): the sum of squares of every element of every tensor
/// (fixed order: tensor by tensor, fixed per-tensor grids chosen from the sizes), `norm =
/// sqrt(sum)` and `scale = min(1, max_norm / (norm + 1e-6))` computed **on the device**, then
/// every tensor multiplied by `scale` in place — nothing is read back, so a training step with
/// clipping can be one CUDA graph. Returns the norm before clipping as a 0-d device tensor.
/// A NaN gradient gives a NaN norm and scales every tensor by NaN; an inf gradient gives an
/// inf norm and the scale `max_norm / inf = 0`, so finite elements become 0 and inf ones NaN
/// (as torch does without `error_if_nonfinite`). Every tensor must be on one device; an empty list gives a
/// zero norm on the current device. Bit-identical norms on every run.
pub fn clip_grad_norm_<T: GradElement>(
    grads: &mut [&mut Tensor<T>],
    max_norm: f64,
) -> Result<Tensor<T>> {
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
    let parts: Vec<usize> = grads.iter().map(|g| ops::sumsq_parts(g.numel())).collect();
    let total: usize = parts.iter().sum::<usize>().max(1);
    let zeros = |n: usize, shape: &[usize]| -> Result<Tensor<T>> {
        Tensor::from_storage(exec.zeros(n)?, shape)
    };
    let mut partial = zeros(total, &[total])?;
    let mut norm = zeros(1, &[])?;
    let mut scale = zeros(1, &[])?;
    {
        let (_, pv) = partial.exclusive_mut()?;
        let mut at = 0;
        for (g, &p) in grads.iter().zip(&parts) {
            let gc = g.contiguous()?;
            let gv = gc.dense()?;
            T::sumsq_partials(&k, s, &gv, &mut pv.slice_mut(at..at + p)?)?;
            at += p;
        }
    }
    {
        let pv = partial.dense()?;
        let (_, nv) = norm.exclusive_mut()?;
        let (_, sv) = scale.exclusive_mut()?;
        T::clip_coef(&k, s, &pv, max_norm, nv, sv)?;
    }
    let sv = scale.dense()?;
    for g in grads.iter_mut() {
        let (_, gv) = g.exclusive_mut()?;
        T::scale_by_device(&k, s, gv, &sv)?;
    }
    Ok(norm)
}
