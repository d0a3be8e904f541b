//! The dispatch of the transformer's non-attention kernels (LayerNorm, GELU, the fused
//! classifier, embedding, dropout): the third part of the dtype table in `dtype.rs`, for the
//! floating-point dtypes **f32, f64, f16 and bf16**.
//!
//! [`FloatElement::Stat`] is the dtype of the statistics and losses these ops return (LayerNorm's
//! mean and rstd, the classifier's per-row losses): f32 for f32, f16 and bf16, f64 for f64 —
//! half-precision inputs are computed in f32. Scalars come in as `f64` and are rounded to the
//! kernels' compute type once, here.

use super::error::Result;
use super::TensorElement;
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::{ops, Kernels};

/// Floating-point dtypes with the transformer kernels: `f32`, `f64`, `f16`, `bf16`. Sealed
/// (through [`TensorElement`]). The `#[doc(hidden)]` methods each queue one
/// `cuda-stack-kernels` op.
pub trait FloatElement: TensorElement {
    /// The dtype of statistics and losses: f32 (f64 for f64).
    type Stat: TensorElement;

    /// LayerNorm forward; of `x + res` (written to `sum`) when `add` is `(res, sum)`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn layer_norm_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        add: Option<(&DeviceSlice<Self>, &mut DeviceSlice<Self>)>,
        w: &DeviceSlice<Self>,
        b: &DeviceSlice<Self>,
        y: &mut DeviceSlice<Self>,
        mean: &mut DeviceSlice<Self::Stat>,
        rstd: &mut DeviceSlice<Self::Stat>,
        rows: usize,
        cols: usize,
        eps: f64,
    ) -> Result<()>;

    /// LayerNorm backward (with its two partial-sum workspaces); `pending` added into `dx`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        w: &DeviceSlice<Self>,
        mean: &DeviceSlice<Self::Stat>,
        rstd: &DeviceSlice<Self::Stat>,
        dy: &DeviceSlice<Self>,
        pending: Option<&DeviceSlice<Self>>,
        dx: &mut DeviceSlice<Self>,
        dw: &mut DeviceSlice<Self>,
        db: &mut DeviceSlice<Self>,
        partial_w: &mut DeviceSlice<Self::Stat>,
        partial_b: &mut DeviceSlice<Self::Stat>,
        rows: usize,
        cols: usize,
    ) -> Result<()>;

    /// GELU (tanh form).
    #[doc(hidden)]
    fn gelu_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        y: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// GELU backward from the input.
    #[doc(hidden)]
    fn gelu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        dy: &DeviceSlice<Self>,
        dx: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// Per-row cross-entropy (pass 1 of the fused classifier).
    #[doc(hidden)]
    fn classifier_loss(
        k: &Kernels,
        s: &Stream,
        logits: &DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        loss: &mut DeviceSlice<Self::Stat>,
        rows: usize,
        classes: usize,
    ) -> Result<()>;

    /// Per-row cross-entropy and log-sum-exp.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn classifier_loss_lse(
        k: &Kernels,
        s: &Stream,
        logits: &DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        loss: &mut DeviceSlice<Self::Stat>,
        lse: &mut DeviceSlice<Self::Stat>,
        rows: usize,
        classes: usize,
    ) -> Result<()>;

    /// The classifier's gradient from saved log-sum-exps, over the logits.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn classifier_grad_lse_inplace(
        k: &Kernels,
        s: &Stream,
        logits: &mut DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        lse: &DeviceSlice<Self::Stat>,
        g: &DeviceSlice<Self::Stat>,
        rows: usize,
        classes: usize,
        scale: f64,
    ) -> Result<()>;

    /// The fused classifier, into a new gradient buffer.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn fused_classifier(
        k: &Kernels,
        s: &Stream,
        logits: &DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        g: &DeviceSlice<Self::Stat>,
        loss: &mut DeviceSlice<Self::Stat>,
        dlogits: &mut DeviceSlice<Self>,
        rows: usize,
        classes: usize,
        scale: f64,
    ) -> Result<()>;

    /// The fused classifier, the gradient over the logits.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn fused_classifier_inplace(
        k: &Kernels,
        s: &Stream,
        logits: &mut DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        g: &DeviceSlice<Self::Stat>,
        loss: &mut DeviceSlice<Self::Stat>,
        rows: usize,
        classes: usize,
        scale: f64,
    ) -> Result<()>;

    /// Embedding lookup.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn embedding_fwd(
        k: &Kernels,
        s: &Stream,
        weight: &DeviceSlice<Self>,
        ids: &DeviceSlice<i32>,
        out: &mut DeviceSlice<Self>,
        n: usize,
        vocab: usize,
        cols: usize,
    ) -> Result<()>;

    /// Embedding backward (deterministic), with its i32 workspace.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn embedding_bwd(
        k: &Kernels,
        s: &Stream,
        ids: &DeviceSlice<i32>,
        dy: &DeviceSlice<Self>,
        dweight: &mut DeviceSlice<Self>,
        workspace: &mut DeviceSlice<i32>,
        n: usize,
        vocab: usize,
        cols: usize,
    ) -> Result<()>;

    /// Dropout with a Philox mask.
    #[doc(hidden)]
    fn dropout(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        out: &mut DeviceSlice<Self>,
        p: f64,
        seed: u64,
        offset: u64,
    ) -> Result<()>;
}

macro_rules! float_element {
    ($t:ty, $stat:ty) => {
        impl FloatElement for $t {
            type Stat = $stat;

            fn layer_norm_fwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                add: Option<(&DeviceSlice<$t>, &mut DeviceSlice<$t>)>,
                w: &DeviceSlice<$t>,
                b: &DeviceSlice<$t>,
                y: &mut DeviceSlice<$t>,
                mean: &mut DeviceSlice<$stat>,
                rstd: &mut DeviceSlice<$stat>,
                rows: usize,
                cols: usize,
                eps: f64,
            ) -> Result<()> {
                match add {
                    None => ops::layer_norm_fwd::<$t>(
                        k,
                        s,
                        x,
                        w,
                        b,
                        y,
                        mean,
                        rstd,
                        rows,
                        cols,
                        eps as $stat,
                    )?,
                    Some((res, sum)) => ops::layer_norm_fwd_add::<$t>(
                        k,
                        s,
                        x,
                        res,
                        sum,
                        w,
                        b,
                        y,
                        mean,
                        rstd,
                        rows,
                        cols,
                        eps as $stat,
                    )?,
                }
                Ok(())
            }

            fn layer_norm_bwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                w: &DeviceSlice<$t>,
                mean: &DeviceSlice<$stat>,
                rstd: &DeviceSlice<$stat>,
                dy: &DeviceSlice<$t>,
                pending: Option<&DeviceSlice<$t>>,
                dx: &mut DeviceSlice<$t>,
                dw: &mut DeviceSlice<$t>,
                db: &mut DeviceSlice<$t>,
                partial_w: &mut DeviceSlice<$stat>,
                partial_b: &mut DeviceSlice<$stat>,
                rows: usize,
                cols: usize,
            ) -> Result<()> {
                match pending {
                    None => ops::layer_norm_bwd::<$t>(
                        k, s, x, w, mean, rstd, dy, dx, dw, db, partial_w, partial_b, rows, cols,
                    )?,
                    Some(p) => ops::layer_norm_bwd_add::<$t>(
                        k, s, x, w, mean, rstd, dy, p, dx, dw, db, partial_w, partial_b, rows, cols,
                    )?,
                }
                Ok(())
            }

            fn gelu_fwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                y: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::gelu_fwd::<$t>(k, s, x, y)?)
            }

            fn gelu_bwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                dy: &DeviceSlice<$t>,
                dx: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::gelu_bwd::<$t>(k, s, x, dy, dx)?)
            }

            fn classifier_loss(
                k: &Kernels,
                s: &Stream,
                logits: &DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                loss: &mut DeviceSlice<$stat>,
                rows: usize,
                classes: usize,
            ) -> Result<()> {
                Ok(ops::classifier_loss::<$t>(
                    k, s, logits, targets, loss, rows, classes,
                )?)
            }

            fn fused_classifier(
                k: &Kernels,
                s: &Stream,
                logits: &DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                g: &DeviceSlice<$stat>,
                loss: &mut DeviceSlice<$stat>,
                dlogits: &mut DeviceSlice<$t>,
                rows: usize,
                classes: usize,
                scale: f64,
            ) -> Result<()> {
                Ok(ops::fused_classifier::<$t>(
                    k,
                    s,
                    logits,
                    targets,
                    g,
                    loss,
                    dlogits,
                    rows,
                    classes,
                    scale as $stat,
                )?)
            }

            fn classifier_loss_lse(
                k: &Kernels,
                s: &Stream,
                logits: &DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                loss: &mut DeviceSlice<$stat>,
                lse: &mut DeviceSlice<$stat>,
                rows: usize,
                classes: usize,
            ) -> Result<()> {
                Ok(ops::classifier_loss_lse::<$t>(
                    k, s, logits, targets, loss, lse, rows, classes,
                )?)
            }

            fn classifier_grad_lse_inplace(
                k: &Kernels,
                s: &Stream,
                logits: &mut DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                lse: &DeviceSlice<$stat>,
                g: &DeviceSlice<$stat>,
                rows: usize,
                classes: usize,
                scale: f64,
            ) -> Result<()> {
                Ok(ops::classifier_grad_lse_inplace::<$t>(
                    k,
                    s,
                    logits,
                    targets,
                    lse,
                    g,
                    rows,
                    classes,
                    scale as $stat,
                )?)
            }

            fn fused_classifier_inplace(
                k: &Kernels,
                s: &Stream,
                logits: &mut DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                g: &DeviceSlice<$stat>,
                loss: &mut DeviceSlice<$stat>,
                rows: usize,
                classes: usize,
                scale: f64,
            ) -> Result<()> {
                Ok(ops::fused_classifier_inplace::<$t>(
                    k,
                    s,
                    logits,
                    targets,
                    g,
                    loss,
                    rows,
                    classes,
                    scale as $stat,
                )?)
            }

            fn embedding_fwd(
                k: &Kernels,
                s: &Stream,
                weight: &DeviceSlice<$t>,
                ids: &DeviceSlice<i32>,
                out: &mut DeviceSlice<$t>,
                n: usize,
                vocab: usize,
                cols: usize,
            ) -> Result<()> {
                Ok(ops::embedding_fwd::<$t>(
                    k, s, weight, ids, out, n, vocab, cols,
                )?)
            }

            fn embedding_bwd(
                k: &Kernels,
                s: &Stream,
                ids: &DeviceSlice<i32>,
                dy: &DeviceSlice<$t>,
                dweight: &mut DeviceSlice<$t>,
                workspace: &mut DeviceSlice<i32>,
                n: usize,
                vocab: usize,
                cols: usize,
            ) -> Result<()> {
                Ok(ops::embedding_bwd::<$t>(
                    k, s, ids, dy, dweight, workspace, n, vocab, cols,
                )?)
            }

            fn dropout(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                out: &mut DeviceSlice<$t>,
                p: f64,
                seed: u64,
                offset: u64,
            ) -> Result<()> {
                Ok(ops::dropout::<$t>(k, s, x, out, p, seed, offset)?)
            }
        }
    };
}

float_element!(f32, f32);
float_element!(f64, f64);
float_element!(f16, f32);
float_element!(bf16, f32);
