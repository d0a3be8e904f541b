//! The dispatch of the training kernels (backward passes, losses, optimizer updates): the
//! second half of the dtype table in `dtype.rs`, for the dtypes autograd works in.
//!
//! [`GradElement`] is implemented for **f32** (training), **f64** (gradient checks, which
//! take finite differences in double precision) and **f16**/**bf16** (half-precision
//! activations: their backward and loss kernels compute in f32 and round once; the optimizer
//! kernels are f32/f64 only, so half-precision models keep f32 master weights — an optimizer
//! step on an f16/bf16 parameter is a typed `Unsupported` error). Tensor methods that need these kernels are
//! defined for `T: GradElement` only, so using them on another dtype is a compile error, not a
//! run-time one. Scalars come in as `f64` and are rounded to the dtype once, here.

use super::error::Result;
use super::{FloatElement, TensorElement};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, AdamParams, SgdParams};
use cuda_stack_kernels::Kernels;

/// Dtypes with backward and loss kernels: `f32`, `f64`, `f16` and `bf16` (optimizer kernels:
/// `f32` and `f64`). Sealed (through
/// [`TensorElement`]). The `#[doc(hidden)]` methods each queue one `cuda-stack-kernels` op.
pub trait GradElement: TensorElement<Sum = Self, Max = Self> + FloatElement {
    /// `dx = x > 0 ? dy : 0`.
    #[doc(hidden)]
    fn relu_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        dy: &DeviceSlice<Self>,
        dx: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// `dx = dy · (1 − y²)`.
    #[doc(hidden)]
    fn tanh_bwd(
        k: &Kernels,
        s: &Stream,
        y: &DeviceSlice<Self>,
        dy: &DeviceSlice<Self>,
        dx: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// Row softmax (`log == false`) or log-softmax.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn row_softmax(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        y: &mut DeviceSlice<Self>,
        rows: usize,
        cols: usize,
        log: bool,
    ) -> Result<()>;

    /// Backward of [`GradElement::row_softmax`] from its output.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn row_softmax_bwd(
        k: &Kernels,
        s: &Stream,
        y: &DeviceSlice<Self>,
        dy: &DeviceSlice<Self>,
        dx: &mut DeviceSlice<Self>,
        rows: usize,
        cols: usize,
        log: bool,
    ) -> Result<()>;

    /// Per-row cross-entropy.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_fwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        loss: &mut DeviceSlice<Self>,
        rows: usize,
        cols: usize,
    ) -> Result<()>;

    /// Gradient of a reduced cross-entropy.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_bwd(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        targets: &DeviceSlice<i32>,
        g: &DeviceSlice<Self>,
        dx: &mut DeviceSlice<Self>,
        rows: usize,
        cols: usize,
        scale: f64,
    ) -> Result<()>;

    /// Sums of squares of `x` into `partial` (global-norm clipping, step 1).
    #[doc(hidden)]
    fn sumsq_partials(
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<Self>,
        partial: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// The norm and the clipping scale from the partial sums (step 2).
    #[doc(hidden)]
    fn clip_coef(
        k: &Kernels,
        s: &Stream,
        partials: &DeviceSlice<Self>,
        max_norm: f64,
        norm: &mut DeviceSlice<Self>,
        scale: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// `x *= scale[0]` in place (step 3).
    #[doc(hidden)]
    fn scale_by_device(
        k: &Kernels,
        s: &Stream,
        x: &mut DeviceSlice<Self>,
        scale: &DeviceSlice<Self>,
    ) -> Result<()>;

    /// Plain SGD, in place.
    #[doc(hidden)]
    fn sgd(
        k: &Kernels,
        s: &Stream,
        p: &mut DeviceSlice<Self>,
        g: &DeviceSlice<Self>,
        lr: f64,
        weight_decay: f64,
    ) -> Result<()>;

    /// SGD with momentum, in place.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn sgd_momentum(
        k: &Kernels,
        s: &Stream,
        p: &mut DeviceSlice<Self>,
        g: &DeviceSlice<Self>,
        b: &mut DeviceSlice<Self>,
        params: SgdParams<f64>,
        first: bool,
    ) -> Result<()>;

    /// One Adam step, in place, with the step count `steps[index]` on the device.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn adam(
        k: &Kernels,
        s: &Stream,
        p: &mut DeviceSlice<Self>,
        g: &DeviceSlice<Self>,
        m: &mut DeviceSlice<Self>,
        v: &mut DeviceSlice<Self>,
        steps: &DeviceSlice<i32>,
        index: usize,
        params: AdamParams<f64>,
    ) -> Result<()>;

    /// Plain SGD of four tensors in one launch.
    #[doc(hidden)]
    fn sgd4(
        k: &Kernels,
        s: &Stream,
        p: [&mut DeviceSlice<Self>; 4],
        g: [&DeviceSlice<Self>; 4],
        lr: f64,
        weight_decay: f64,
    ) -> Result<()>;

    /// SGD with momentum of four tensors in one launch.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn sgd_momentum4(
        k: &Kernels,
        s: &Stream,
        p: [&mut DeviceSlice<Self>; 4],
        g: [&DeviceSlice<Self>; 4],
        b: [&mut DeviceSlice<Self>; 4],
        params: SgdParams<f64>,
        first: bool,
    ) -> Result<()>;

    /// Adam of four tensors in one launch (`steps` holds their four step counts).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn adam4(
        k: &Kernels,
        s: &Stream,
        p: [&mut DeviceSlice<Self>; 4],
        g: [&DeviceSlice<Self>; 4],
        m: [&mut DeviceSlice<Self>; 4],
        v: [&mut DeviceSlice<Self>; 4],
        steps: &DeviceSlice<i32>,
        params: AdamParams<f64>,
    ) -> Result<()>;

    /// Every element of every tensor set to `value`, in one launch per table (f32, f64).
    #[doc(hidden)]
    fn fill_many(
        k: &Kernels,
        s: &Stream,
        xs: &mut [&mut DeviceSlice<Self>],
        value: f64,
    ) -> Result<()>;

    /// Every tensor multiplied by `scale[0]` in place, one launch per table (f32, f64).
    #[doc(hidden)]
    fn scale_many(
        k: &Kernels,
        s: &Stream,
        xs: &mut [&mut DeviceSlice<Self>],
        scale: &DeviceSlice<Self>,
    ) -> Result<()>;

    /// The partial sums of squares of every tensor, in the per-tensor layout (f32, f64).
    #[doc(hidden)]
    fn sumsq_partials_many(
        k: &Kernels,
        s: &Stream,
        xs: &[&DeviceSlice<Self>],
        partial: &mut DeviceSlice<Self>,
    ) -> Result<()>;

    /// Adam of every tensor, one launch per table, optionally scaling each gradient by
    /// `grad_scale[0]` as it is read (f32, f64).
    #[doc(hidden)]
    fn adam_many(
        k: &Kernels,
        s: &Stream,
        tensors: &mut [ops::AdamTensor<'_, Self>],
        steps: &DeviceSlice<i32>,
        grad_scale: Option<&DeviceSlice<Self>>,
        params: AdamParams<f64>,
    ) -> Result<()>;

    /// The kernel [`GradElement::adam_many`] launches (see
    /// `cuda_stack_kernels::ops::adam_many_kernel`).
    #[doc(hidden)]
    fn adam_many_kernel(k: &Kernels) -> Result<&cuda_stack_driver::Function>;
}

macro_rules! grad_element {
    ($t:ty, $scalar:ty) => {
        impl GradElement for $t {
            fn relu_bwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                dy: &DeviceSlice<$t>,
                dx: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::relu_bwd::<$t>(k, s, x, dy, dx)?)
            }

            fn tanh_bwd(
                k: &Kernels,
                s: &Stream,
                y: &DeviceSlice<$t>,
                dy: &DeviceSlice<$t>,
                dx: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::tanh_bwd::<$t>(k, s, y, dy, dx)?)
            }

            fn row_softmax(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                y: &mut DeviceSlice<$t>,
                rows: usize,
                cols: usize,
                log: bool,
            ) -> Result<()> {
                Ok(ops::row_softmax::<$t>(k, s, x, y, rows, cols, log)?)
            }

            fn row_softmax_bwd(
                k: &Kernels,
                s: &Stream,
                y: &DeviceSlice<$t>,
                dy: &DeviceSlice<$t>,
                dx: &mut DeviceSlice<$t>,
                rows: usize,
                cols: usize,
                log: bool,
            ) -> Result<()> {
                Ok(ops::row_softmax_bwd::<$t>(
                    k, s, y, dy, dx, rows, cols, log,
                )?)
            }

            fn cross_entropy_fwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                loss: &mut DeviceSlice<$t>,
                rows: usize,
                cols: usize,
            ) -> Result<()> {
                Ok(ops::cross_entropy_fwd::<$t>(
                    k, s, x, targets, loss, rows, cols,
                )?)
            }

            fn cross_entropy_bwd(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                targets: &DeviceSlice<i32>,
                g: &DeviceSlice<$t>,
                dx: &mut DeviceSlice<$t>,
                rows: usize,
                cols: usize,
                scale: f64,
            ) -> Result<()> {
                Ok(ops::cross_entropy_bwd::<$t>(
                    k,
                    s,
                    x,
                    targets,
                    g,
                    dx,
                    rows,
                    cols,
                    scale as $scalar,
                )?)
            }

            fn sumsq_partials(
                k: &Kernels,
                s: &Stream,
                x: &DeviceSlice<$t>,
                partial: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::sumsq_partials::<$t>(k, s, x, partial)?)
            }

            fn clip_coef(
                k: &Kernels,
                s: &Stream,
                partials: &DeviceSlice<$t>,
                max_norm: f64,
                norm: &mut DeviceSlice<$t>,
                scale: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::clip_coef::<$t>(k, s, partials, max_norm, norm, scale)?)
            }

            fn scale_by_device(
                k: &Kernels,
                s: &Stream,
                x: &mut DeviceSlice<$t>,
                scale: &DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::scale_by_device::<$t>(k, s, x, scale)?)
            }

            fn sgd(
                k: &Kernels,
                s: &Stream,
                p: &mut DeviceSlice<$t>,
                g: &DeviceSlice<$t>,
                lr: f64,
                weight_decay: f64,
            ) -> Result<()> {
                Ok(ops::sgd::<$t>(
                    k,
                    s,
                    p,
                    g,
                    lr as $scalar,
                    weight_decay as $scalar,
                )?)
            }

            fn sgd_momentum(
                k: &Kernels,
                s: &Stream,
                p: &mut DeviceSlice<$t>,
                g: &DeviceSlice<$t>,
                b: &mut DeviceSlice<$t>,
                params: SgdParams<f64>,
                first: bool,
            ) -> Result<()> {
                let params = SgdParams {
                    lr: params.lr as $scalar,
                    momentum: params.momentum as $scalar,
                    dampening: params.dampening as $scalar,
                    weight_decay: params.weight_decay as $scalar,
                    nesterov: params.nesterov,
                };
                Ok(ops::sgd_momentum::<$t>(k, s, p, g, b, params, first)?)
            }

            fn adam(
                k: &Kernels,
                s: &Stream,
                p: &mut DeviceSlice<$t>,
                g: &DeviceSlice<$t>,
                m: &mut DeviceSlice<$t>,
                v: &mut DeviceSlice<$t>,
                steps: &DeviceSlice<i32>,
                index: usize,
                params: AdamParams<f64>,
            ) -> Result<()> {
                let params = AdamParams {
                    lr: params.lr as $scalar,
                    beta1: params.beta1 as $scalar,
                    beta2: params.beta2 as $scalar,
                    eps: params.eps as $scalar,
                    weight_decay: params.weight_decay as $scalar,
                    decoupled: params.decoupled,
                };
                Ok(ops::adam::<$t>(k, s, p, g, m, v, steps, index, params)?)
            }

            fn sgd4(
                k: &Kernels,
                s: &Stream,
                p: [&mut DeviceSlice<$t>; 4],
                g: [&DeviceSlice<$t>; 4],
                lr: f64,
                weight_decay: f64,
            ) -> Result<()> {
                Ok(ops::sgd4::<$t>(
                    k,
                    s,
                    p,
                    g,
                    lr as $scalar,
                    weight_decay as $scalar,
                )?)
            }

            fn sgd_momentum4(
                k: &Kernels,
                s: &Stream,
                p: [&mut DeviceSlice<$t>; 4],
                g: [&DeviceSlice<$t>; 4],
                b: [&mut DeviceSlice<$t>; 4],
                params: SgdParams<f64>,
                first: bool,
            ) -> Result<()> {
                let params = SgdParams {
                    lr: params.lr as $scalar,
                    momentum: params.momentum as $scalar,
                    dampening: params.dampening as $scalar,
                    weight_decay: params.weight_decay as $scalar,
                    nesterov: params.nesterov,
                };
                Ok(ops::sgd_momentum4::<$t>(k, s, p, g, b, params, first)?)
            }

            fn adam4(
                k: &Kernels,
                s: &Stream,
                p: [&mut DeviceSlice<$t>; 4],
                g: [&DeviceSlice<$t>; 4],
                m: [&mut DeviceSlice<$t>; 4],
                v: [&mut DeviceSlice<$t>; 4],
                steps: &DeviceSlice<i32>,
                params: AdamParams<f64>,
            ) -> Result<()> {
                let params = AdamParams {
                    lr: params.lr as $scalar,
                    beta1: params.beta1 as $scalar,
                    beta2: params.beta2 as $scalar,
                    eps: params.eps as $scalar,
                    weight_decay: params.weight_decay as $scalar,
                    decoupled: params.decoupled,
                };
                Ok(ops::adam4::<$t>(k, s, p, g, m, v, steps, params)?)
            }

            fn fill_many(
                k: &Kernels,
                s: &Stream,
                xs: &mut [&mut DeviceSlice<$t>],
                value: f64,
            ) -> Result<()> {
                Ok(ops::fill_many::<$t>(k, s, xs, value as $scalar)?)
            }

            fn scale_many(
                k: &Kernels,
                s: &Stream,
                xs: &mut [&mut DeviceSlice<$t>],
                scale: &DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::scale_many::<$t>(k, s, xs, scale)?)
            }

            fn sumsq_partials_many(
                k: &Kernels,
                s: &Stream,
                xs: &[&DeviceSlice<$t>],
                partial: &mut DeviceSlice<$t>,
            ) -> Result<()> {
                Ok(ops::sumsq_partials_many::<$t>(k, s, xs, partial)?)
            }

            fn adam_many(
                k: &Kernels,
                s: &Stream,
                tensors: &mut [ops::AdamTensor<'_, $t>],
                steps: &DeviceSlice<i32>,
                grad_scale: Option<&DeviceSlice<$t>>,
                params: AdamParams<f64>,
            ) -> Result<()> {
                let params = AdamParams {
                    lr: params.lr as $scalar,
                    beta1: params.beta1 as $scalar,
                    beta2: params.beta2 as $scalar,
                    eps: params.eps as $scalar,
                    weight_decay: params.weight_decay as $scalar,
                    decoupled: params.decoupled,
                };
                Ok(ops::adam_many::<$t>(
                    k, s, tensors, steps, grad_scale, params,
                )?)
            }

            fn adam_many_kernel(k: &Kernels) -> Result<&cuda_stack_driver::Function> {
                Ok(ops::adam_many_kernel::<$t>(k)?)
            }
        }
    };
}

grad_element!(f32, f32);
grad_element!(f64, f64);
grad_element!(f16, f32);
grad_element!(bf16, f32);
