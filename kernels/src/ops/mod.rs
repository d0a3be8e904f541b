//! Safe operations on device buffers, one concept per file.
//!
//! Every op takes the loaded [`Kernels`](crate::Kernels), the [`Stream`](cuda_stack_driver::Stream) to
//! queue work on, and device slices; it checks lengths and shapes (returning
//! [`Error`](crate::Error) with the shapes involved, before anything is queued), picks the launch
//! configuration the kernel is designed for (see the crate README), skips the launch when there
//! is nothing to do, and returns as soon as the work is queued (nothing synchronizes).
//!
//! Scalars (`alpha`, fill values) are taken as [`Element::Scalar`](crate::Element::Scalar), the
//! type the kernel computes in (`f32` for f32/f16/bf16, `f64` for f64, `i32` for i32), so
//! nothing is rounded on the way to the kernel.
//!
//! The exact CPU twin of each op is in [`crate::reference`].

mod activation_grad;
mod attention;
mod bias_relu;
mod binary_strided;
mod cast;
mod classifier;
mod coalescing;
mod dropout;
mod elementwise;
mod embedding;
mod fp8;
mod gelu;
mod gemm_fp8;
mod gemm_half_plan;
mod gemm_tc;
mod gemm_wgx;
mod gemv_half;
mod grad_norm;
mod introspect;
mod layer_norm;
mod log_softmax;
mod matmul;
pub mod multi_tensor;
mod optim;
mod random;
mod reduce;
mod reduce_dim;
mod sgemm;
mod softmax;
mod split_workspace;
mod strided_copy;
mod tc_algo;
mod tc_element;
mod tma_operand;
mod vector_add;

pub use activation_grad::{relu_bwd, tanh_bwd};
pub use attention::{
    attention_bwd, attention_bwd_dq_choice, attention_bwd_dq_plan, attention_bwd_dq_plan_strided,
    attention_bwd_dq_workspace_len, attention_bwd_strided, attention_bwd_tc_fits,
    attention_bwd_with, attention_bwd_with_dq, attention_fwd, attention_fwd_strided,
    attention_fwd_wgmma_rows, attention_fwd_with, attention_tc_fits, AttentionAlgo, AttentionBwdDq,
    AttentionElement, AttentionGrads, AttentionInput, AttentionOutput, AttentionShape, HeadStrides,
    ATTENTION_BWD_DQ_ENV, ATTENTION_BWD_ENV, ATTENTION_BWD_ORDERED_MIN_KEYS_D128,
    ATTENTION_BWD_ORDERED_MIN_KEYS_D64, ATTENTION_FWD_ENV, ATTENTION_FWD_ROWS_ENV,
    ATTENTION_MAX_HEAD_DIM,
};
pub use bias_relu::{
    bias_relu_bwd, bias_relu_bwd_f64, bias_relu_bwd_parts, bias_relu_fwd, bias_relu_fwd_f64,
};
pub use binary_strided::{binary_strided, binary_strided_fits};
pub use cast::cast;
pub use classifier::{
    classifier_grad_lse_inplace, classifier_loss, classifier_loss_lse, fused_classifier,
    fused_classifier_inplace, CLASSIFIER_THREADS,
};
pub use coalescing::{
    copy_coalesced, copy_strided, skinny_v4_fits, transpose, transpose_aligned_tile,
    transpose_choice, transpose_ld, transpose_ld_with, AlignedTile, TransposeAlgo,
};
pub use dropout::dropout;
pub use elementwise::{
    axpy, binary, binary_broadcast, fill, relu, scale, tanh, BinaryOp, BroadcastOperand,
};
pub use embedding::{embedding_bwd, embedding_fwd, embedding_workspace_len};
pub use fp8::{
    fp8_amax, fp8_dequantize, fp8_dequantize_cpu, fp8_quantize, fp8_quantize_cpu, fp8_scale_update,
    fp8_supported, Fp8, Fp8Wide, FP8_MIN_CC,
};
pub use gelu::{gelu_bwd, gelu_fwd};
pub use gemm_fp8::{gemm_fp8, gemm_fp8_cpu, Fp8GemmOut, FP8_WGMMA_CC};
pub use gemm_half_plan::{
    gemm_half_plan, half_plan_cost, half_split, reduce_block, HalfPlan, HalfTile, GEMV_MIN_OUTPUTS,
    HALF_KTILE, HALF_MAX_SPLITS, HALF_MAX_WORKSPACE,
};
pub use gemm_tc::{gemm_half, gemm_half_with_plan, gemm_tf32};
pub use gemv_half::gemv_half_fits;
pub use grad_norm::{clip_coef, scale_by_device, sumsq_partials, sumsq_parts};
pub use introspect::{thread_hierarchy, THREAD_RECORD_WORDS};
pub use layer_norm::{
    layer_norm_bwd, layer_norm_bwd_add, layer_norm_fwd, layer_norm_fwd_add, layer_norm_parts,
    layer_norm_workspace_len,
};
pub use log_softmax::{cross_entropy_bwd, cross_entropy_fwd, row_softmax, row_softmax_bwd};
pub use matmul::{matmul, MatmulAlgo};
pub use multi_tensor::{
    adam_many, adam_many_kernel, cast_many, fill_many, scale_many, sumsq_partials_many,
    sumsq_parts_many, AdamTensor, ADAM_MANY_LR_PARAM,
};
pub use optim::{
    adam, adam4, increment_counters, sgd, sgd4, sgd_momentum, sgd_momentum4, AdamParams, SgdParams,
    MULTI_TENSOR,
};
pub use random::{fill_normal, fill_uniform, philox_u32};
pub use reduce::{max, mean, reduce_partials, sum, ReduceAlgo, SINGLE_BLOCK_MAX};
pub use reduce_dim::{
    col16_parts, col_parts, cols_sum, max_dim, row_parts, rows_max, rows_sum, sum_dim,
    COLS_BLOCKS_PER_SM, ROW_SPLIT_MIN_COLS,
};
pub use sgemm::{
    sgemm, sgemm_plan, sgemm_tile_plan, sgemm_with_plan, SgemmPlan, Transpose, MAX_SPLITS,
    STRIP_MAX_COLS, STRIP_SLICES,
};
pub use softmax::{
    narrow_shape, shared_max_cols, softmax_choice, softmax_rows, softmax_rows_with, split_shape,
    SoftmaxAlgo, NARROW_MAX_COLS, REGISTERS_MAX_COLS, SPLIT_MAX_ROWS, WARP_MAX_COLS,
};
pub use split_workspace::{
    release_split_workspaces, SPLIT_WORKSPACE_CACHED_MAX_BYTES, SPLIT_WORKSPACE_CACHED_STREAMS,
};
pub use strided_copy::strided_copy;
pub use tc_algo::{tc_choice, TcAlgo};
pub use tc_element::{
    GemvColsKernel, GemvRowsKernel, MmaKernel, TensorCoreElement, WgmmaKernel, WgxKernel,
    WgxReduceKernel,
};
pub use vector_add::{vector_add, vector_add_seed};
