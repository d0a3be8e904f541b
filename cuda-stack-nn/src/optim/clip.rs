//! Global-norm gradient clipping (`torch.nn.utils.clip_grad_norm_`), on the device.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// Scales the gradients of `params` in place so that their global 2-norm is at most
/// `max_norm`, and returns the norm before clipping as a 0-d **device** tensor. Parameters
/// without a gradient are skipped. The sum of squares (in a fixed order: parameter by
/// parameter, in the order given), the norm and `scale = min(1, max_norm / (norm + 1e-6))` are
/// computed on the device and every gradient is multiplied by `scale` there: no host round
/// trip, so it fits a captured training step. A NaN/inf gradient gives a NaN/inf norm (read
/// it to decide to skip a step). Bit-identical norms on every run.
///
/// "In place": each gradient is taken from its parameter while it is scaled (so that the
/// parameter's handle is the only one and the storage is rewritten without a copy) and put
/// back; a gradient whose storage is shared elsewhere is copied first, as for every in-place
/// op.
pub fn clip_grad_norm<T: GradElement>(params: &[Var<T>], max_norm: f64) -> Result<Tensor<T>> {
    let mut taken: Vec<(usize, Tensor<T>)> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        if !p.requires_grad() {
            continue;
        }
        if let Some(g) = p.grad()? {
            p.zero_grad();
            taken.push((i, g));
        }
    }
    let result = {
        let mut refs: Vec<&mut Tensor<T>> = taken.iter_mut().map(|(_, g)| g).collect();
        cuda_stack_runtime::clip_grad_norm_(&mut refs, max_norm)
    };
    // Put every gradient back, scaled or (after an error) as it was.
    for (i, g) in taken {
        params[i].set_grad(Some(g))?;
    }
    Ok(result?)
}

/// The global 2-norm of the gradients of `params` and the clipping scale
/// `min(1, max_norm / (norm + 1e-6))`, as 0-d **device** tensors, leaving the gradients as
/// they are: hand the scale to [`crate::Adam::step_with_grad_scale`], which applies it as it
/// reads each gradient — the same parameters as [`clip_grad_norm`] then a step, without the
/// pass over the gradients. Parameters without a gradient are skipped; the norm is
/// bit-identical to [`clip_grad_norm`]'s.
pub fn clip_grad_scale<T: GradElement>(
    params: &[Var<T>],
    max_norm: f64,
) -> Result<(Tensor<T>, Tensor<T>)> {
    let mut grads = Vec::new();
    for p in params {
        if p.requires_grad() {
            if let Some(g) = p.grad()? {
                grads.push(g);
            }
        }
    }
    let refs: Vec<&Tensor<T>> = grads.iter().collect();
    Ok(cuda_stack_runtime::clip_grad_scale(&refs, max_norm)?)
}
