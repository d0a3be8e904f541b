//! tensor-lite on the GPU, part 2: every op against a CPU reference, for every dtype it claims,
//! on sizes 0, 1, 31, 32, 33, 1023, 1025 and primes, and on non-contiguous inputs (transposed,
//! sliced, expanded). The tolerance of each op is stated where it is checked:
//!
//! | op | tolerance |
//! |---|---|
//! | `+ - * /`, `scale`, `relu`, `bias_relu` (+ backward), `max` | exact (the kernels' exact CPU twins in `cuda_stack_kernels::reference`) |
//! | `matmul` i32 | exact (wrapping) |
//! | `matmul` f32 / f64 | `1e-5` / `1e-13` × Σ_k \|a_ik·b_kj\| |
//! | `sum`, `mean` (f32, f16, bf16 accumulate in f32) | `1e-5` × Σ\|x\| (+ `1e-6`·\|want\| for mean's scaling) |
//! | `sum`, `mean` f64 | `1e-13` × Σ\|x\| |
//! | `tanh` | 4 ulp of the dtype × \|want\| (+ 1e-30) |
//! | `softmax` | `2e-6` absolute |

#[path = "../tensor_common/mod.rs"]
mod tensor_common;

use cuda_stack_kernels::ops::BinaryOp;
use cuda_stack_kernels::reference;
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{DType, Tensor, TensorElement, TensorError};
use cuda_tests::{ensure, gpu};
use tensor_common::*;

mod bias_relu;
mod casts;
mod elementwise;
mod errors;
mod matmul;
mod optimizer;
mod reductions;
mod softmax;
mod support;

use bias_relu::*;
use casts::*;
use elementwise::*;
use errors::*;
use matmul::*;
use optimizer::*;
use reductions::*;
use softmax::*;
use support::*;

fn main() {
    let two_gpus = cuda_tests::no_gpu_reason().is_none()
        && cuda_stack_runtime::device_count().unwrap_or(0) >= 2;
    cuda_tests::run(vec![
        gpu("binary_ops_every_dtype_and_size", binary_every_dtype),
        gpu("binary_ops_broadcast", broadcasting),
        gpu(
            "binary_ops_on_non_contiguous_operands",
            non_contiguous_binary,
        ),
        gpu("unary_relu_tanh_scale_every_dtype", unary),
        gpu("matmul_2d_every_dtype", matmul_2d),
        gpu("matmul_strided_and_transposed_operands", matmul_views),
        gpu("matmul_batched", matmul_batched),
        gpu("reductions_over_all_elements", reductions_all),
        gpu("reductions_over_a_dimension", reductions_dim),
        gpu("softmax_along_any_dimension", softmax),
        gpu("bias_relu_forward_and_backward", bias_relu),
        gpu("to_dtype_every_pair_rounds_once", to_dtype),
        gpu("errors_name_op_dtype_and_shapes", errors),
        gpu(
            "optimizer_steps_on_a_part_of_a_flat_buffer",
            optimizer_parts,
        ),
        gpu("device_mismatch_is_an_error", device_mismatch).with_ignored_flag(!two_gpus),
    ]);
}
