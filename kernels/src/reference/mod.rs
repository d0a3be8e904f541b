//! CPU twins of every op, following "Exact semantics" in the crate README: the tests compare each
//! GPU result with these.
//!
//! Most are **bit-exact** (copies, integer ops, `+ - * /`, scale, axpy, relu, fill, the fused
//! bias/ReLU forward and backward, matmul and sgemm — FMA in increasing k —, max reductions,
//! Philox words and uniform floats). The others compute in f64 and state how far the GPU may
//! be: `tanh` (CUDA `tanhf`, ≤ 2 ulp), sums and means (summation order), softmax (`expf`) and
//! `fill_normal` (`logf`, `sincospif`).

mod attention;
mod bias_relu;
mod classifier;
mod copy;
mod dropout;
mod elementwise;
mod embedding;
mod gelu;
mod grad_norm;
mod introspect;
mod layer_norm;
mod matmul;
mod random;
mod reduce;
mod softmax;

pub use attention::{attention_bwd, attention_fwd, AttentionDims};
pub use bias_relu::{bias_relu_bwd, bias_relu_fwd};
pub use classifier::fused_classifier;
pub use copy::{copy_strided, strided_copy, transpose};
pub use dropout::dropout;
pub use elementwise::{
    axpy, binary, binary_broadcast, binary_one, binary_strided, fill, relu, scale, tanh, vector_add,
};
pub use embedding::{embedding, embedding_bwd};
pub use gelu::{gelu, gelu_bwd, gelu_grad_one, gelu_one};
pub use grad_norm::clip_grad_norm;
pub use introspect::{thread_hierarchy, SMID_WORD};
pub use layer_norm::{layer_norm, layer_norm_bwd};
pub use matmul::{gemm_f64, matmul, sgemm, sgemm_dot, sgemm_planned};
pub use random::{fill_normal, fill_uniform, philox4x32_10, philox_u32};
pub use reduce::{max, mean, rows_max, rows_sum, sum, sum_i32};
pub use softmax::softmax_rows;
