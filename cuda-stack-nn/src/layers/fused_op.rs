//! Seed 004's `FusedOpLayer`: the fused `relu(x · scale + bias)` as a layer.

use super::Module;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// `relu(x · scale + bias)` with a learned `bias` of shape `[features]`, initialised to zeros
/// (seed 004's `FusedOpLayer(features, scale)`); forward and backward are one kernel each.
pub struct FusedOpLayer<T: GradElement> {
    bias: Var<T>,
    scale: f64,
}

impl<T: GradElement> FusedOpLayer<T> {
    /// A layer over `features` columns with the given `scale`.
    pub fn new(features: usize, scale: f64) -> Result<FusedOpLayer<T>> {
        Ok(FusedOpLayer {
            bias: Var::parameter(Tensor::zeros(&[features])?),
            scale,
        })
    }

    /// The bias `[features]`.
    pub fn bias(&self) -> &Var<T> {
        &self.bias
    }
}

impl<T: GradElement> Module<T> for FusedOpLayer<T> {
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        x.bias_relu(&self.bias, self.scale)
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        vec![("bias".to_string(), self.bias.clone())]
    }

    fn describe(&self) -> String {
        format!(
            "FusedOpLayer(features={}, scale={})",
            self.bias.numel(),
            self.scale
        )
    }
}
