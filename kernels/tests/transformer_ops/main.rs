//! The transformer's non-attention ops (LayerNorm, GELU, the fused classifier, embedding,
//! dropout, global-norm clipping) against their CPU twins in `cuda_stack_kernels::reference`.
//!
//! GPU tests are ignored where there is no GPU. Inputs are uploaded at element offset 0 and 1
//! of their buffers (misaligned views: the 16-byte paths must fall back), outputs are poisoned
//! (0xFF bytes: NaN) and the poisoned element in front of each output view is checked.
//! The CPU tests check the references themselves against finite differences.
//!
//! Tolerances (the reference computes in f64):
//! - LayerNorm `y`: f32 `2e-5·(1 + |y|)`, f64 `1e-12·(1 + |y|)`, f16/bf16 1 ulp + `1e-5`;
//!   `mean`/`rstd` `1e-5` relative (f64 `1e-12`); `dx`: f32 `1e-4·(1 + |dx|)`, f64 `1e-10`,
//!   f16/bf16 2 ulp + `1e-3`; `dweight`/`dbias`: `2e-5·Σ|terms|` (f64 `1e-12`) + 1 ulp of the
//!   dtype; **bit-identical** across two runs.
//! - GELU (x in [-5, 5); f32 through `sigmoid(2u)` (ex2/rcp.approx), f64 `tanh` within 2 ulp): f32 8 ulp
//!   + `2e-6`, f64 8 ulp + `1e-14`, f16/bf16 1 ulp + `2e-6`; backward (dy in [-2, 2)) f32 16 ulp
//!   + `2e-5`, f64 16 ulp + `1e-13`, f16/bf16 1 ulp + `2e-5`.
//! - Classifier: loss f32 `2e-5·(1 + |loss|)` (f64 `1e-12`); `dlogits` f32 `1e-5·|d| +
//!   1e-7·|gs|` (f64 `1e-12`), f16/bf16 1 ulp + `1e-5·|d|`; the loss-only kernel vs the fused
//!   loss (dlogits at the other 16-byte phase than the logits) and in-place vs out-of-place
//!   (the same code, separately compiled): losses `1e-6` relative (f64 `1e-14`), gradients
//!   2 ulp (in practice identical).
//! - Embedding forward and backward, dropout: **exact** (the references follow the kernels'
//!   order); embedding backward also bit-identical across two runs.
//! - Clipping: norm `1e-5` relative (f64 `1e-12`), the scaled tensors exactly `x · scale` of the
//!   device's scale; the norm bit-identical across two runs.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, DeviceRepr, LaunchConfig};
use cuda_stack_kernels::{ops, reference, Compute, DType, Element};
use cuda_tests::{cpu, ensure, gpu, TestResult};

#[path = "../op_support/mod.rs"]
mod op_support;
use op_support::*;

const OFFSETS: &[usize] = &[0, 1];

mod classifier;
mod clipping;
mod data;
mod dropout;
mod embedding;
mod gelu;
mod layer_norm;
mod references;

use classifier::*;
use clipping::*;
use data::*;
use dropout::*;
use embedding::*;
use gelu::*;
use layer_norm::*;
use references::*;

fn main() {
    cuda_tests::run(vec![
        cpu("reference_gelu_grad", reference_gelu_grad),
        cpu("reference_layer_norm_grad", reference_layer_norm_grad),
        cpu("reference_classifier_grad", reference_classifier_grad),
        cpu("reference_embedding_sums", reference_embedding_sums),
        gpu("layer_norm_f32", layer_norm_all::<f32>),
        gpu("layer_norm_f64", layer_norm_all::<f64>),
        gpu("layer_norm_f16", layer_norm_all::<f16>),
        gpu("layer_norm_bf16", layer_norm_all::<bf16>),
        gpu("layer_norm_one_pass_equals_two_pass_f32", ln_one_pass_f32),
        gpu("layer_norm_one_pass_equals_two_pass_f64", ln_one_pass_f64),
        gpu("layer_norm_one_pass_equals_two_pass_f16", ln_one_pass_f16),
        gpu("layer_norm_one_pass_equals_two_pass_bf16", ln_one_pass_bf16),
        gpu("add_layer_norm_f32", layer_norm_add_all::<f32>),
        gpu("add_layer_norm_f64", layer_norm_add_all::<f64>),
        gpu("add_layer_norm_f16", layer_norm_add_all::<f16>),
        gpu("add_layer_norm_bf16", layer_norm_add_all::<bf16>),
        gpu("gelu_f32", gelu_all::<f32>),
        gpu("gelu_f64", gelu_all::<f64>),
        gpu("gelu_f16", gelu_all::<f16>),
        gpu("gelu_bf16", gelu_all::<bf16>),
        gpu("fused_classifier_f32", classifier_all::<f32>),
        gpu("fused_classifier_f64", classifier_all::<f64>),
        gpu("fused_classifier_f16", classifier_all::<f16>),
        gpu("fused_classifier_bf16", classifier_all::<bf16>),
        gpu("embedding_f32", embedding_all::<f32>),
        gpu("embedding_f64", embedding_all::<f64>),
        gpu("embedding_f16", embedding_all::<f16>),
        gpu("embedding_bf16", embedding_all::<bf16>),
        gpu("dropout_f32", dropout_all::<f32>),
        gpu("dropout_f64", dropout_all::<f64>),
        gpu("dropout_f16", dropout_all::<f16>),
        gpu("dropout_bf16", dropout_all::<bf16>),
        gpu("clip_grad_norm_f32", clip_all::<f32>),
        gpu("clip_grad_norm_f64", clip_all::<f64>),
    ])
}
