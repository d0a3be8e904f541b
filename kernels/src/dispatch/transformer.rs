//! Dispatch of the transformer's non-attention kernels (LayerNorm, GELU, the fused classifier,
//! embedding, dropout, global-norm clipping): one `family!` per kernel family, as in the parent
//! module. Statistics, losses and partial sums are `Scalar<T>` (f32 for f32/f16/bf16, f64 for
//! f64).

#[cfg(test)]
use super::field_type;
use super::{cast, unsupported, In, Out, Scalar};
use crate::{DType, Element, Kernels, Result};
use cuda_stack_driver::Kernel;

/// `layer_norm_fwd(x, w, b, y, mean, rstd, rows, C, eps)`.
pub(crate) type LayerNormFwd<T> = Kernel<(
    In<T>,
    In<T>,
    In<T>,
    Out<T>,
    Out<Scalar<T>>,
    Out<Scalar<T>>,
    i32,
    i32,
    Scalar<T>,
)>;
/// `layer_norm_fwd_add(x, res, sum, w, b, y, mean, rstd, rows, C, eps)`.
pub(crate) type LayerNormFwdAdd<T> = Kernel<(
    In<T>,
    In<T>,
    Out<T>,
    In<T>,
    In<T>,
    Out<T>,
    Out<Scalar<T>>,
    Out<Scalar<T>>,
    i32,
    i32,
    Scalar<T>,
)>;
/// `layer_norm_bwd_dx(x, w, mean, rstd, dy, res, add_res, dx, rows, C)`.
pub(crate) type LayerNormBwdDx<T> = Kernel<(
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    In<T>,
    In<T>,
    i32,
    Out<T>,
    i32,
    i32,
)>;
/// `layer_norm_bwd_fused(x, w, mean, rstd, dy, res, add_res, dx, partial_w, partial_b, rows, C,
/// chunk)`.
pub(crate) type LayerNormBwdFused<T> = Kernel<(
    In<T>,
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    In<T>,
    In<T>,
    i32,
    Out<T>,
    Out<Scalar<T>>,
    Out<Scalar<T>>,
    i32,
    i32,
    i32,
)>;
/// `layer_norm_bwd_params(x, mean, rstd, dy, partial_w, partial_b, rows, C, chunk)`.
pub(crate) type LayerNormBwdParams<T> = Kernel<(
    In<T>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    In<T>,
    Out<Scalar<T>>,
    Out<Scalar<T>>,
    i32,
    i32,
    i32,
)>;
/// `layer_norm_bwd_params_reduce(partial_w, partial_b, dw, db, parts, C)`.
pub(crate) type LayerNormBwdReduce<T> =
    Kernel<(In<Scalar<T>>, In<Scalar<T>>, Out<T>, Out<T>, i32, i32)>;
/// `gelu_fwd(x, y, n)`.
pub(crate) type GeluFwd<T> = Kernel<(In<T>, Out<T>, u64)>;
/// `gelu_bwd(x, dy, dx, n)`.
pub(crate) type GeluBwd<T> = Kernel<(In<T>, In<T>, Out<T>, u64)>;
/// `classifier_loss(logits, targets, loss, rows, V)`.
pub(crate) type ClassifierLoss<T> = Kernel<(In<T>, In<i32>, Out<Scalar<T>>, i32, i32)>;
/// `classifier_loss_lse(logits, targets, loss, lse, rows, V)`.
pub(crate) type ClassifierLossLse<T> =
    Kernel<(In<T>, In<i32>, Out<Scalar<T>>, Out<Scalar<T>>, i32, i32)>;
/// `classifier_grad_lse_inplace(logits, targets, lse, g, rows, V, scale)`.
pub(crate) type ClassifierGradLse<T> = Kernel<(
    Out<T>,
    In<i32>,
    In<Scalar<T>>,
    In<Scalar<T>>,
    i32,
    i32,
    Scalar<T>,
)>;
/// `fused_classifier(logits, targets, g, loss, dlogits, rows, V, scale)`.
pub(crate) type FusedClassifier<T> = Kernel<(
    In<T>,
    In<i32>,
    In<Scalar<T>>,
    Out<Scalar<T>>,
    Out<T>,
    i32,
    i32,
    Scalar<T>,
)>;
/// `fused_classifier_inplace(logits, targets, g, loss, rows, V, scale)`.
pub(crate) type FusedClassifierInplace<T> = Kernel<(
    Out<T>,
    In<i32>,
    In<Scalar<T>>,
    Out<Scalar<T>>,
    i32,
    i32,
    Scalar<T>,
)>;
/// `embedding_fwd(weight, idx, out, N, V, C)`.
pub(crate) type EmbeddingFwd<T> = Kernel<(In<T>, In<i32>, Out<T>, i32, i32, i32)>;
/// `embedding_bwd_sum(order, offsets, dy, dweight, V, C, col_tile)`.
pub(crate) type EmbeddingBwdSum<T> = Kernel<(In<i32>, In<i32>, In<T>, Out<T>, i32, i32, i32)>;
/// `dropout(x, out, n, p, scale, seed, offset)`.
pub(crate) type Dropout<T> = Kernel<(In<T>, Out<T>, u64, f32, Scalar<T>, u64, u64)>;
/// `sumsq_partial(x, n, partial)`.
pub(crate) type SumSq<T> = Kernel<(In<T>, u64, Out<T>)>;
/// `clip_coef(partial, num, max_norm, norm, scale)`.
pub(crate) type ClipCoef<T> = Kernel<(In<T>, u32, Scalar<T>, Out<T>, Out<T>)>;
/// `scale_by_device(x, n, scale)`.
pub(crate) type ScaleByDevice<T> = Kernel<(Out<T>, u64, In<T>)>;

const WHY_FLOAT: &str = "this kernel exists for f32, f64, f16 and bf16";
const WHY_TRAIN: &str = "clipping kernels exist for f32 and f64 (the training dtypes)";

family!(layer_norm_fwd -> LayerNormFwd<T>; "layer_norm", WHY_FLOAT;
    F32 => layer_norm_fwd_f32, F64 => layer_norm_fwd_f64,
    F16 => layer_norm_fwd_f16, BF16 => layer_norm_fwd_bf16);
family!(layer_norm_fwd_block -> LayerNormFwd<T>; "layer_norm", WHY_FLOAT;
    F32 => layer_norm_fwd_block_f32, F64 => layer_norm_fwd_block_f64,
    F16 => layer_norm_fwd_block_f16, BF16 => layer_norm_fwd_block_bf16);
family!(layer_norm_bwd_dx_block -> LayerNormBwdDx<T>; "layer_norm_backward", WHY_FLOAT;
    F32 => layer_norm_bwd_dx_block_f32, F64 => layer_norm_bwd_dx_block_f64,
    F16 => layer_norm_bwd_dx_block_f16, BF16 => layer_norm_bwd_dx_block_bf16);
family!(layer_norm_fwd_add -> LayerNormFwdAdd<T>; "add_layer_norm", WHY_FLOAT;
    F32 => layer_norm_fwd_add_f32, F64 => layer_norm_fwd_add_f64,
    F16 => layer_norm_fwd_add_f16, BF16 => layer_norm_fwd_add_bf16);
family!(layer_norm_fwd_add_block -> LayerNormFwdAdd<T>; "add_layer_norm", WHY_FLOAT;
    F32 => layer_norm_fwd_add_block_f32, F64 => layer_norm_fwd_add_block_f64,
    F16 => layer_norm_fwd_add_block_f16, BF16 => layer_norm_fwd_add_block_bf16);
family!(layer_norm_bwd_fused -> LayerNormBwdFused<T>; "layer_norm_backward", WHY_FLOAT;
    F32 => layer_norm_bwd_fused_f32, F64 => layer_norm_bwd_fused_f64,
    F16 => layer_norm_bwd_fused_f16, BF16 => layer_norm_bwd_fused_bf16);
family!(layer_norm_bwd_params -> LayerNormBwdParams<T>; "layer_norm_backward", WHY_FLOAT;
    F32 => layer_norm_bwd_params_f32, F64 => layer_norm_bwd_params_f64,
    F16 => layer_norm_bwd_params_f16, BF16 => layer_norm_bwd_params_bf16);
family!(layer_norm_bwd_reduce -> LayerNormBwdReduce<T>; "layer_norm_backward", WHY_FLOAT;
    F32 => layer_norm_bwd_params_reduce_f32, F64 => layer_norm_bwd_params_reduce_f64,
    F16 => layer_norm_bwd_params_reduce_f16, BF16 => layer_norm_bwd_params_reduce_bf16);
family!(gelu_fwd -> GeluFwd<T>; "gelu", WHY_FLOAT;
    F32 => gelu_fwd_f32, F64 => gelu_fwd_f64, F16 => gelu_fwd_f16, BF16 => gelu_fwd_bf16);
family!(gelu_bwd -> GeluBwd<T>; "gelu_backward", WHY_FLOAT;
    F32 => gelu_bwd_f32, F64 => gelu_bwd_f64, F16 => gelu_bwd_f16, BF16 => gelu_bwd_bf16);
family!(classifier_loss -> ClassifierLoss<T>; "classifier_loss", WHY_FLOAT;
    F32 => classifier_loss_f32, F64 => classifier_loss_f64,
    F16 => classifier_loss_f16, BF16 => classifier_loss_bf16);
family!(classifier_loss_lse -> ClassifierLossLse<T>; "classifier_loss_lse", WHY_FLOAT;
    F32 => classifier_loss_lse_f32, F64 => classifier_loss_lse_f64,
    F16 => classifier_loss_lse_f16, BF16 => classifier_loss_lse_bf16);
family!(classifier_grad_lse -> ClassifierGradLse<T>; "classifier_grad_lse", WHY_FLOAT;
    F32 => classifier_grad_lse_inplace_f32, F64 => classifier_grad_lse_inplace_f64,
    F16 => classifier_grad_lse_inplace_f16, BF16 => classifier_grad_lse_inplace_bf16);
family!(fused_classifier -> FusedClassifier<T>; "fused_classifier", WHY_FLOAT;
    F32 => fused_classifier_f32, F64 => fused_classifier_f64,
    F16 => fused_classifier_f16, BF16 => fused_classifier_bf16);
family!(fused_classifier_inplace -> FusedClassifierInplace<T>; "fused_classifier_inplace", WHY_FLOAT;
    F32 => fused_classifier_inplace_f32, F64 => fused_classifier_inplace_f64,
    F16 => fused_classifier_inplace_f16, BF16 => fused_classifier_inplace_bf16);
family!(embedding_fwd -> EmbeddingFwd<T>; "embedding", WHY_FLOAT;
    F32 => embedding_fwd_f32, F64 => embedding_fwd_f64,
    F16 => embedding_fwd_f16, BF16 => embedding_fwd_bf16);
family!(embedding_bwd_sum -> EmbeddingBwdSum<T>; "embedding_backward", WHY_FLOAT;
    F32 => embedding_bwd_sum_f32, F64 => embedding_bwd_sum_f64,
    F16 => embedding_bwd_sum_f16, BF16 => embedding_bwd_sum_bf16);
family!(dropout -> Dropout<T>; "dropout", WHY_FLOAT;
    F32 => dropout_f32, F64 => dropout_f64, F16 => dropout_f16, BF16 => dropout_bf16);
family!(sumsq_partial -> SumSq<T>; "clip_grad_norm", WHY_TRAIN;
    F32 => sumsq_partial_f32, F64 => sumsq_partial_f64);
family!(clip_coef -> ClipCoef<T>; "clip_grad_norm", WHY_TRAIN;
    F32 => clip_coef_f32, F64 => clip_coef_f64);
family!(scale_by_device -> ScaleByDevice<T>; "clip_grad_norm", WHY_TRAIN;
    F32 => scale_by_device_f32, F64 => scale_by_device_f64);
