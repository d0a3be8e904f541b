//! `nn.LayerNorm` over the last dimension.

use super::Module;
use crate::error::{NnError, Result};
use crate::{init, Var};
use cuda_stack_runtime::GradElement;

/// LayerNorm over the last dimension of size `dim` (`nn.LayerNorm(dim, eps)`), with a learned
/// `weight` (γ, initialised to 1) and `bias` (β, initialised to 0), both `[dim]`.
pub struct LayerNorm<T: GradElement> {
    weight: Var<T>,
    bias: Var<T>,
    dim: usize,
    eps: f64,
}

impl<T: GradElement> LayerNorm<T> {
    /// A layer over a last dimension of `dim` with `eps` added to the variance (torch's
    /// default is `1e-5`).
    pub fn new(dim: usize, eps: f64) -> Result<LayerNorm<T>> {
        if dim == 0 || eps.is_nan() || eps < 0.0 {
            return Err(NnError::Invalid {
                what: "LayerNorm",
                problem: format!("dim = {dim}, eps = {eps}: dim must be >= 1 and eps >= 0"),
            });
        }
        Ok(LayerNorm {
            weight: Var::parameter(init::constant(&[dim], 1.0)?),
            bias: Var::parameter(init::constant(&[dim], 0.0)?),
            dim,
            eps,
        })
    }

    /// γ, `[dim]`.
    pub fn weight(&self) -> &Var<T> {
        &self.weight
    }

    /// β, `[dim]`.
    pub fn bias(&self) -> &Var<T> {
        &self.bias
    }
}

impl<T: GradElement> Module<T> for LayerNorm<T> {
    /// One fused kernel forward, two kernels (plus the deterministic column sums) backward.
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        x.layer_norm(&self.weight, &self.bias, self.eps)
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        vec![
            ("weight".to_string(), self.weight.clone()),
            ("bias".to_string(), self.bias.clone()),
        ]
    }

    fn describe(&self) -> String {
        format!(
            "LayerNorm(({},), eps={:e}, elementwise_affine=True)",
            self.dim, self.eps
        )
    }
}
