//! Dispatch of the attention kernels (the warp-a-row and tiled SIMT families, mma.sync, wgmma,
//! the backward's delta, dq and dk/dv kernels and the fused one-pass backward): one `family!`
//! per kernel family, as in the parent module.

#[cfg(test)]
use super::field_type;
use super::{cast, unsupported, In, Out, Scalar};
use crate::{DType, Element, Kernels, Result};
use cuda_stack_driver::Kernel;

/// `attn_fwd(q, k, v, out, lse, B, H, Nq, Nk, D, strides…, scale, causal)`.
pub(crate) type AttnFwd<T> = Kernel<(
    In<T>,
    In<T>,
    In<T>,
    Out<T>,
    Out<Scalar<T>>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
family!(attn_fwd_mma_d64 -> AttnFwd<T>; "scaled_dot_product_attention (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_fwd_mma_d64_f16, BF16 => attn_fwd_mma_d64_bf16);
family!(attn_fwd_mma_d128 -> AttnFwd<T>; "scaled_dot_product_attention (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_fwd_mma_d128_f16, BF16 => attn_fwd_mma_d128_bf16);
/// `attn_fwd_wgmma(tmQ, tmK, tmV, q, k, v, out, lse, B, H, Nq, Nk, out strides (batch, head,
/// row), scale, causal)`.
pub(crate) type AttnFwdWgmma<T> = Kernel<(
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    In<T>,
    In<T>,
    In<T>,
    Out<T>,
    Out<Scalar<T>>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
family!(attn_fwd_wgmma_d64 -> AttnFwdWgmma<T>; "scaled_dot_product_attention (wgmma)",
    "the wgmma attention kernels exist for f16 and bf16";
    F16 => attn_fwd_wgmma_d64_f16, BF16 => attn_fwd_wgmma_d64_bf16);
family!(attn_fwd_wgmma_d64_m192 -> AttnFwdWgmma<T>; "scaled_dot_product_attention (wgmma)",
    "the wgmma attention kernels exist for f16 and bf16";
    F16 => attn_fwd_wgmma_d64_m192_f16, BF16 => attn_fwd_wgmma_d64_m192_bf16);
family!(attn_fwd_wgmma_d128 -> AttnFwdWgmma<T>; "scaled_dot_product_attention (wgmma)",
    "the wgmma attention kernels exist for f16 and bf16";
    F16 => attn_fwd_wgmma_d128_f16, BF16 => attn_fwd_wgmma_d128_bf16);
/// `attn_bwd_dq_wgmma(tmQ, tmK, tmV, tmdO, q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, dq
/// strides (batch, head, row), scale, causal)`.
pub(crate) type AttnDqWgmma<T> = Kernel<(
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
/// `attn_bwd_dkdv_wgmma(tmQ, tmK, tmV, tmdO, q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk,
/// dk strides, dv strides (batch, head, row), dv_at, scale, causal)`.
pub(crate) type AttnDkDvWgmma<T> = Kernel<(
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<T>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
const WHY_WGMMA_BWD: &str = "the wgmma attention kernels exist for f16 and bf16";
family!(attn_bwd_dq_wgmma_d64 -> AttnDqWgmma<T>;
    "scaled_dot_product_attention_backward (wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_dq_wgmma_d64_f16, BF16 => attn_bwd_dq_wgmma_d64_bf16);
family!(attn_bwd_dq_wgmma_d128 -> AttnDqWgmma<T>;
    "scaled_dot_product_attention_backward (wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_dq_wgmma_d128_f16, BF16 => attn_bwd_dq_wgmma_d128_bf16);
family!(attn_bwd_dkdv_wgmma_d64 -> AttnDkDvWgmma<T>;
    "scaled_dot_product_attention_backward (wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_dkdv_wgmma_d64_f16, BF16 => attn_bwd_dkdv_wgmma_d64_bf16);
family!(attn_bwd_dkdv_wgmma_d128 -> AttnDkDvWgmma<T>;
    "scaled_dot_product_attention_backward (wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_dkdv_wgmma_d128_f16, BF16 => attn_bwd_dkdv_wgmma_d128_bf16);
/// `attn_bwd_fused_wgmma(tmQ, tmK, tmV, tmdO, q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H,
/// Nq, Nk, dk strides, dv strides (batch, head, row), dv_at, scale, causal)`.
pub(crate) type AttnFusedWgmma<T> = Kernel<(
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<f32>,
    Out<T>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
family!(attn_bwd_fused_wgmma_d64 -> AttnFusedWgmma<T>;
    "scaled_dot_product_attention_backward (fused, wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_fused_wgmma_d64_f16, BF16 => attn_bwd_fused_wgmma_d64_bf16);
family!(attn_bwd_fused_wgmma_d128 -> AttnFusedWgmma<T>;
    "scaled_dot_product_attention_backward (fused, wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_fused_wgmma_d128_f16, BF16 => attn_bwd_fused_wgmma_d128_bf16);
/// `attn_bwd_fused_ord_wgmma(..., scale, causal, order_words, kt_major)`: [`AttnFusedWgmma`]'s
/// arguments, then the tile and turn counters (32-bit words, zeroed) and the tile order.
pub(crate) type AttnFusedOrdWgmma<T> = Kernel<(
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    cuda_stack_driver::TensorMap,
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<f32>,
    Out<T>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
    Out<f32>,
    i32,
)>;
family!(attn_bwd_fused_ord_wgmma_d64 -> AttnFusedOrdWgmma<T>;
    "scaled_dot_product_attention_backward (ordered one pass, wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_fused_ord_wgmma_d64_f16, BF16 => attn_bwd_fused_ord_wgmma_d64_bf16);
family!(attn_bwd_fused_ord_wgmma_d128 -> AttnFusedOrdWgmma<T>;
    "scaled_dot_product_attention_backward (ordered one pass, wgmma)", WHY_WGMMA_BWD;
    F16 => attn_bwd_fused_ord_wgmma_d128_f16, BF16 => attn_bwd_fused_ord_wgmma_d128_bf16);
family!(attn_bwd_dq_mma_d64 -> AttnDq<T>; "scaled_dot_product_attention_backward (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_dq_mma_d64_f16, BF16 => attn_bwd_dq_mma_d64_bf16);
family!(attn_bwd_dkdv_mma_d64 -> AttnDkDv<T>; "scaled_dot_product_attention_backward (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_dkdv_mma_d64_f16, BF16 => attn_bwd_dkdv_mma_d64_bf16);
family!(attn_bwd_dq_mma_d128 -> AttnDq<T>; "scaled_dot_product_attention_backward (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_dq_mma_d128_f16, BF16 => attn_bwd_dq_mma_d128_bf16);
family!(attn_bwd_dkdv_mma_d128 -> AttnDkDv<T>; "scaled_dot_product_attention_backward (tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_dkdv_mma_d128_f16, BF16 => attn_bwd_dkdv_mma_d128_bf16);
/// `attn_bwd_delta(out, dout, delta, B, H, N, D, out strides, dout strides (batch, head, row))`.
pub(crate) type AttnDelta<T> = Kernel<(
    In<T>,
    In<T>,
    Out<Scalar<T>>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
)>;
/// `attn_bwd_dq(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, strides of q, k, v, dout, dq…,
/// scale, causal)`.
pub(crate) type AttnDq<T> = Kernel<(
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
/// `attn_bwd_dkdv(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, strides of q, k, v, dout,
/// dk, dv…, dv_at, scale, causal)`.
pub(crate) type AttnDkDv<T> = Kernel<(
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<T>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
/// `attn_bwd_fused_mma(q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, D, strides of q,
/// k, v, dout, dk, dv…, dv_at, scale, causal)`.
pub(crate) type AttnFused<T> = Kernel<(
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    Out<f32>,
    Out<T>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Scalar<T>,
    i32,
)>;
family!(attn_bwd_fused_mma_d64 -> AttnFused<T>; "scaled_dot_product_attention_backward (fused, tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_fused_mma_d64_f16, BF16 => attn_bwd_fused_mma_d64_bf16);
family!(attn_bwd_fused_mma_d128 -> AttnFused<T>; "scaled_dot_product_attention_backward (fused, tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_fused_mma_d128_f16, BF16 => attn_bwd_fused_mma_d128_bf16);
/// `attn_bwd_dq_convert(acc, dq, B, H, Nq, D, dq strides (batch, head, row), scale)`.
pub(crate) type AttnDqConvert<T> = Kernel<(
    In<f32>,
    Out<T>,
    i32,
    i32,
    i32,
    i32,
    i64,
    i64,
    i64,
    Scalar<T>,
)>;
family!(attn_bwd_dq_convert -> AttnDqConvert<T>; "scaled_dot_product_attention_backward (fused, tensor cores)",
    "the tensor-core attention kernels exist for f16 and bf16";
    F16 => attn_bwd_dq_convert_f16, BF16 => attn_bwd_dq_convert_bf16);
const WHY_ATTN: &str = "attention kernels exist for f32, f64, f16 and bf16";
family!(attn_fwd -> AttnFwd<T>; "scaled_dot_product_attention", WHY_ATTN;
    F32 => attn_fwd_f32, F64 => attn_fwd_f64, F16 => attn_fwd_f16, BF16 => attn_fwd_bf16);
family!(attn_fwd_tiled_d64 -> AttnFwd<T>; "scaled_dot_product_attention (tiled SIMT)",
    "the tiled SIMT attention forward exists for f32, f16 and bf16";
    F32 => attn_fwd_tiled_d64_f32, F16 => attn_fwd_tiled_d64_f16, BF16 => attn_fwd_tiled_d64_bf16);
family!(attn_fwd_tiled_d128 -> AttnFwd<T>; "scaled_dot_product_attention (tiled SIMT)",
    "the tiled SIMT attention forward exists for f32, f16 and bf16";
    F32 => attn_fwd_tiled_d128_f32, F16 => attn_fwd_tiled_d128_f16, BF16 => attn_fwd_tiled_d128_bf16);
family!(attn_bwd_delta -> AttnDelta<T>; "scaled_dot_product_attention_backward", WHY_ATTN;
    F32 => attn_bwd_delta_f32, F64 => attn_bwd_delta_f64, F16 => attn_bwd_delta_f16,
    BF16 => attn_bwd_delta_bf16);
family!(attn_bwd_dq -> AttnDq<T>; "scaled_dot_product_attention_backward", WHY_ATTN;
    F32 => attn_bwd_dq_f32, F64 => attn_bwd_dq_f64, F16 => attn_bwd_dq_f16, BF16 => attn_bwd_dq_bf16);
family!(attn_bwd_dkdv -> AttnDkDv<T>; "scaled_dot_product_attention_backward", WHY_ATTN;
    F32 => attn_bwd_dkdv_f32, F64 => attn_bwd_dkdv_f64, F16 => attn_bwd_dkdv_f16,
    BF16 => attn_bwd_dkdv_bf16);
family!(attn_bwd_dq_tiled_d64 -> AttnDq<T>; "scaled_dot_product_attention_backward (tiled SIMT)",
    "the tiled SIMT attention backward exists for f32, f16 and bf16";
    F32 => attn_bwd_dq_tiled_d64_f32, F16 => attn_bwd_dq_tiled_d64_f16,
    BF16 => attn_bwd_dq_tiled_d64_bf16);
family!(attn_bwd_dq_tiled_d128 -> AttnDq<T>; "scaled_dot_product_attention_backward (tiled SIMT)",
    "the tiled SIMT attention backward exists for f32, f16 and bf16";
    F32 => attn_bwd_dq_tiled_d128_f32, F16 => attn_bwd_dq_tiled_d128_f16,
    BF16 => attn_bwd_dq_tiled_d128_bf16);
family!(attn_bwd_dkdv_tiled_d64 -> AttnDkDv<T>; "scaled_dot_product_attention_backward (tiled SIMT)",
    "the tiled SIMT attention backward exists for f32, f16 and bf16";
    F32 => attn_bwd_dkdv_tiled_d64_f32, F16 => attn_bwd_dkdv_tiled_d64_f16,
    BF16 => attn_bwd_dkdv_tiled_d64_bf16);
family!(attn_bwd_dkdv_tiled_d128 -> AttnDkDv<T>; "scaled_dot_product_attention_backward (tiled SIMT)",
    "the tiled SIMT attention backward exists for f32, f16 and bf16";
    F32 => attn_bwd_dkdv_tiled_d128_f32, F16 => attn_bwd_dkdv_tiled_d128_f16,
    BF16 => attn_bwd_dkdv_tiled_d128_bf16);
