//! Every op of `cuda_stack_kernels::ops` against its CPU twin in `cuda_stack_kernels::reference`.
//!
//! GPU tests are ignored where there is no GPU. Each test runs its op for the sizes in [`SIZES`]
//! (0, 1, warp edges, block edges, primes, and one large size), on slices that start at element
//! 0 and at element 1 of their buffer (so 16-byte vector paths must fall back), with every output
//! poisoned (0xFF bytes: NaN for floats) before the run, and checks that the poisoned element in
//! front of each output view is still untouched.
//!
//! Tolerances (stated again at each check):
//! - exact (NaN matches NaN): copies, transposes, strided copies, integer ops, `+ - * /`, scale,
//!   axpy, relu, fill (all dtypes: f16/bf16 are computed in f32 and rounded once, like the
//!   reference), bias_relu forward and backward, matmul and sgemm (FMA in increasing k), max
//!   reductions, i32 sums, Philox words and uniform floats;
//! - tanh: 4 ulp for f32/f64 (CUDA ≤ 2 ulp, CPU libm ≤ 1 ulp, plus rounding), 1 ulp for f16/bf16;
//! - sums and means: f32 (and f16/bf16 with f32 accumulation) within 1e-6 · Σ|x| of the f64
//!   reference, f64 within 1e-13 · Σ|x| (divided by n for means);
//! - softmax: 1e-6 absolute (outputs are ≤ 1);
//! - fill_normal: 4e-6 relative + 1e-6 absolute.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};
use cuda_stack_kernels::ops::{
    self, AlignedTile, BinaryOp, MatmulAlgo, ReduceAlgo, SoftmaxAlgo, Transpose, TransposeAlgo,
};
use cuda_stack_kernels::{reference, DType, Element, Error, Float, Kernels, StridedLayout};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::sync::Arc;

/// 1-D sizes every elementwise op and reduction runs.
const SIZES: &[usize] = &[0, 1, 31, 32, 33, 1023, 1025, 4099, 65537, (1 << 20) + 3];
/// View offsets: 0 (aligned, vector paths) and 1 (misaligned, scalar fallbacks).
const OFFSETS: &[usize] = &[0, 1];

#[path = "../op_support/mod.rs"]
mod op_support;
use op_support::*;

mod bias_relu;
mod copies;
mod data;
mod elementwise;
mod introspection;
mod loading;
mod matmul;
mod random;
mod reductions;
mod softmax;

use bias_relu::*;
use copies::*;
use data::*;
use elementwise::*;
use introspection::*;
use loading::*;
use matmul::*;
use random::*;
use reductions::*;
use softmax::*;

fn main() {
    cuda_tests::run(vec![
        cpu("philox_known_answer", philox_known_answer),
        cpu("manifest_and_ptx_table", manifest_and_ptx_table),
        cpu("layout_helpers", layout_helpers),
        gpu("kernels_cached_per_context", kernels_cached_per_context),
        gpu(
            "wrong_signature_fails_at_load",
            wrong_signature_fails_at_load,
        ),
        gpu("launch_bench_kernels", launch_bench_kernels),
        gpu("vector_add_seed_and_fast", vector_add_both),
        gpu("binary_f32", binary_all::<f32>),
        gpu("binary_f64", binary_all::<f64>),
        gpu("binary_i32", binary_all::<i32>),
        gpu("binary_f16", binary_all::<f16>),
        gpu("binary_bf16", binary_all::<bf16>),
        gpu("mixed_offsets_f32", elementwise_mixed_offsets::<f32>),
        gpu("mixed_offsets_f64", elementwise_mixed_offsets::<f64>),
        gpu("mixed_offsets_f16", elementwise_mixed_offsets::<f16>),
        gpu("mixed_offsets_bf16", elementwise_mixed_offsets::<bf16>),
        gpu("binary_broadcast_f32", binary_broadcast_all::<f32>),
        gpu("binary_broadcast_f64", binary_broadcast_all::<f64>),
        gpu("binary_broadcast_i32", binary_broadcast_all::<i32>),
        gpu("binary_broadcast_f16", binary_broadcast_all::<f16>),
        gpu("binary_broadcast_bf16", binary_broadcast_all::<bf16>),
        gpu("scale_axpy_relu_fill_f32", unary_all::<f32>),
        gpu("scale_axpy_relu_fill_f64", unary_all::<f64>),
        gpu("scale_axpy_relu_fill_i32", unary_all::<i32>),
        gpu("scale_axpy_relu_fill_f16", unary_all::<f16>),
        gpu("scale_axpy_relu_fill_bf16", unary_all::<bf16>),
        gpu("tanh_f32", tanh_all::<f32>),
        gpu("tanh_f64", tanh_all::<f64>),
        gpu("tanh_f16", tanh_all::<f16>),
        gpu("tanh_bf16", tanh_all::<bf16>),
        gpu("elementwise_special_values", elementwise_special_values),
        gpu("argument_errors", length_errors),
        gpu("bias_relu_fwd_bwd", bias_relu),
        gpu("matmul_f32", matmul_all::<f32>),
        gpu("matmul_f64", matmul_all::<f64>),
        gpu("matmul_i32", matmul_all::<i32>),
        gpu("sgemm_all_transposes", sgemm_all_transposes),
        gpu("sgemm_planned_rows", sgemm_planned_rows),
        gpu("sgemm_bounds_checks", sgemm_bounds_checks),
        gpu("reduce_f32", reduce_full::<f32>),
        gpu("reduce_f64", reduce_full::<f64>),
        gpu("reduce_i32", reduce_full::<i32>),
        gpu("reduce_f16", reduce_full::<f16>),
        gpu("reduce_bf16", reduce_full::<bf16>),
        gpu("reduce_max_nan_and_empty", reduce_max_nan_and_empty),
        gpu("reduce_deterministic", reduce_deterministic),
        gpu("reduce_rows_f32", reduce_rows::<f32>),
        gpu("reduce_rows_f64", reduce_rows::<f64>),
        gpu("reduce_rows_f16", reduce_rows::<f16>),
        gpu("reduce_rows_bf16", reduce_rows::<bf16>),
        gpu("reduce_dims_f32", reduce_dims::<f32>),
        gpu("reduce_dims_f64", reduce_dims::<f64>),
        gpu("reduce_dims_f16", reduce_dims::<f16>),
        gpu("reduce_dims_bf16", reduce_dims::<bf16>),
        gpu("copy_coalesced_and_strided", copies),
        gpu("transpose_all", transposes),
        gpu("strided_copy_f32", strided_copy_all::<f32>),
        gpu("strided_copy_f64", strided_copy_all::<f64>),
        gpu("strided_copy_i32", strided_copy_all::<i32>),
        gpu("strided_copy_f16", strided_copy_all::<f16>),
        gpu("strided_copy_bf16", strided_copy_all::<bf16>),
        gpu("softmax_rows", softmax),
        gpu("random_philox_uniform_normal", random),
        gpu("thread_hierarchy", thread_hierarchy),
    ]);
}
