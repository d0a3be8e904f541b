//! Layers (`torch.nn` modules): the [`Module`] trait, [`Linear`], [`Relu`], [`Sequential`],
//! [`MultiHeadAttention`], seed 004's [`FusedOpLayer`], and the transformer's [`LayerNorm`],
//! [`Embedding`], [`Gelu`], [`Dropout`].

mod attention;
mod dropout;
mod embedding;
mod fused_op;
mod gelu;
mod layer_norm;
mod linear;
mod relu;
mod sequential;

pub use attention::MultiHeadAttention;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use fused_op::FusedOpLayer;
pub use gelu::Gelu;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use relu::Relu;
pub use sequential::Sequential;

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

/// A layer: a forward function and named parameters (`nn.Module`).
pub trait Module<T: GradElement>: Send + Sync {
    /// The layer applied to `x`.
    fn forward(&self, x: &Var<T>) -> Result<Var<T>>;

    /// Parameters with their names (`named_parameters()`: `"weight"`, `"0.bias"`, …).
    fn named_parameters(&self) -> Vec<(String, Var<T>)>;

    /// How PyTorch prints it, e.g. `Linear(in_features=784, out_features=512, bias=True)`.
    fn describe(&self) -> String;

    /// Parameters, in registration order (`parameters()`).
    fn parameters(&self) -> Vec<Var<T>> {
        self.named_parameters()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// The number of parameter elements (`sum(p.numel() for p in model.parameters())`).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(Var::numel).sum()
    }

    /// Drops every parameter's gradient (`zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.zero_grad();
        }
    }
}
