//! The fused op with autograd (seed 004's `torch.autograd.Function`), and the layer built on it
//! (seed 004's `FusedOpLayer`).

use crate::op::{fused_op_backward, fused_op_forward, FusedOpExt};
use cuda_stack_nn::{Module, NnError, Var};
use cuda_stack_runtime::Tensor;

/// `relu(x * scale + bias)` recorded for autograd: forward with this crate's forward kernel;
/// backward with its two backward kernels, from the saved `x` and `bias` (like `ctx.save_for_
/// backward(input, bias)`).
pub fn fused_op(x: &Var<f32>, bias: &Var<f32>, scale: f32) -> Result<Var<f32>, NnError> {
    let (xv, bv) = (x.value(), bias.value());
    let out = fused_op_forward(&xv, &bv, scale)?;
    let (need_x, need_b) = (x.requires_grad(), bias.requires_grad());
    Ok(Var::custom_op(
        out,
        "custom_kernels_aot::fused_op",
        &[x, bias],
        move |g| {
            let (gx, gb) = fused_op_backward(&xv, &bv, scale, g)?;
            Ok(vec![need_x.then_some(gx), need_b.then_some(gb)])
        },
    ))
}

impl FusedOpExt for Var<f32> {
    type Error = NnError;
    fn fused_op(&self, bias: &Self, scale: f32) -> Result<Self, NnError> {
        fused_op(self, bias, scale)
    }
}

/// Seed 004's `FusedOpLayer(features, scale)` on this crate's kernels: `relu(x · scale + bias)`
/// with a learned `bias` of shape `[features]`, initialised to zeros.
pub struct AotFusedLayer {
    bias: Var<f32>,
    scale: f32,
}

impl AotFusedLayer {
    /// A layer over `features` columns.
    pub fn new(features: usize, scale: f32) -> Result<AotFusedLayer, NnError> {
        Ok(AotFusedLayer {
            bias: Var::parameter(Tensor::zeros(&[features])?),
            scale,
        })
    }

    /// The bias.
    pub fn bias(&self) -> &Var<f32> {
        &self.bias
    }
}

impl Module<f32> for AotFusedLayer {
    fn forward(&self, x: &Var<f32>) -> Result<Var<f32>, NnError> {
        fused_op(x, &self.bias, self.scale)
    }

    fn named_parameters(&self) -> Vec<(String, Var<f32>)> {
        vec![("bias".into(), self.bias.clone())]
    }

    fn describe(&self) -> String {
        format!(
            "AotFusedLayer(features={}, scale={})",
            self.bias.numel(),
            self.scale
        )
    }
}
