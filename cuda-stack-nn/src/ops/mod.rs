//! Differentiable ops on [`Var`](crate::Var): each computes its value with a `Tensor` op and
//! records a backward closure built from `Tensor` ops (and the backward kernels of
//! `cuda-stack-kernels`), one concept per file.

mod activation;
mod arith;
mod attention;
mod cast;
mod dropout;
mod embedding;
mod layer_norm;
mod linear;
mod linear_cross_entropy;
mod loss;
mod matmul;
mod mlp;
mod reduce;
mod softmax;
mod view;

pub(crate) use attention::packed_qkv_attention;
pub use embedding::token_ids;
pub use loss::class_targets;

use crate::error::Result;
use cuda_stack_runtime::{GradElement, Tensor};

/// Sums a broadcast gradient back to an operand's `shape` (NumPy broadcasting in reverse):
/// leading dimensions the operand lacks are summed away, and dimensions where it had size 1
/// are summed with `keepdim`.
pub(crate) fn sum_to<T: GradElement>(g: &Tensor<T>, shape: &[usize]) -> Result<Tensor<T>> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let mut t = g.clone();
    while t.rank() > shape.len() {
        t = t.sum(0)?;
    }
    for (i, &s) in shape.iter().enumerate() {
        if s == 1 && t.shape()[i] != 1 {
            t = t.sum_keepdim(i as isize)?;
        }
    }
    Ok(t)
}
