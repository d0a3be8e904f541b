//! Tensor ops, one concept per file; each checks devices and shapes, makes operands contiguous
//! where its kernel needs it, allocates the output from the caching allocator and queues the
//! `cuda-stack-kernels` op chosen by the dtype dispatch ([`super::TensorElement`]) on the device's
//! default stream.

mod activation_grad;
mod arith;
mod attention;
mod bias_relu;
mod classifier;
mod clip;
mod collective;
mod cross_entropy;
mod dropout;
mod elementwise;
mod embedding;
mod foreach;
mod fp8;
mod gelu;
mod gemm_operand;
mod in_place;
mod layer_norm;
mod linear;
mod linear_gelu;
mod linear_grad;
mod log_softmax;
mod matmul;
mod matmul_cublas;
mod optim;
mod pad;
mod reduce;
mod softmax;
mod to_dtype;

pub use attention::AttentionElement;
pub use clip::{clip_grad_norm_, clip_grad_scale};
pub use foreach::{adam_many_, adam_many_lr_param, to_dtype_many, zeros_like_many, AdamSlot};
pub use fp8::Fp8Cast;
pub use layer_norm::AddLayerNorm;
pub use linear_grad::{linear_bias_grad, LinearBiasGrad, LINEAR_BGRAD_VAR};
pub use optim::{adam4_, sgd4_, sgd_momentum4_, AdamParams, SgdParams};

use super::error::TensorError;

/// Replaces the op name of an [`TensorError::UnsupportedDType`] (for ops composed of others).
pub(crate) fn renamed(e: TensorError, op: &'static str) -> TensorError {
    match e {
        TensorError::UnsupportedDType {
            dtype, shape, why, ..
        } => TensorError::UnsupportedDType {
            op,
            dtype,
            shape,
            why,
        },
        other => other,
    }
}

/// `Π shape` except dimension `skip` (the number of rows when `skip` becomes the row length).
pub(crate) fn rows_except(shape: &[usize], skip: usize) -> usize {
    shape
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != skip)
        .map(|(_, &s)| s)
        .product()
}
