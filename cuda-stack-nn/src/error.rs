//! [`NnError`]: what can go wrong in autograd, layers and optimizers.

use cuda_stack_runtime::TensorError;

/// An autograd, layer or optimizer error. Tensor-level problems (shapes, devices, dtypes,
/// driver failures) arrive as [`NnError::Tensor`] with the op that failed.
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum NnError {
    /// A tensor op failed (shape or device mismatch, unsupported dtype, driver error …).
    #[error(transparent)]
    Tensor(#[from] TensorError),

    /// `backward()` without a gradient on a tensor with more than one element.
    #[error(
        "backward: the output has shape {shape:?}, not one element; pass its gradient with \
         `backward_with(grad)` (as `y.backward(gradient=...)` in PyTorch) or reduce it first \
         (e.g. `.sum()`)"
    )]
    NonScalarBackward {
        /// The output's shape.
        shape: Vec<usize>,
    },

    /// `backward()` on a value that does not depend on anything that requires grad.
    #[error(
        "backward: this {shape:?} value does not require grad (no input of it was created with \
         `requires_grad`, or it was computed under `no_grad`)"
    )]
    NoGradPath {
        /// The value's shape.
        shape: Vec<usize>,
    },

    /// A second `backward` through a graph whose saved tensors were freed by the first.
    #[error(
        "backward through `{op}` a second time: its saved tensors were freed after the first \
         backward; use `backward_retain_graph` the first time if you need to differentiate \
         twice"
    )]
    GraphFreed {
        /// The op whose saved tensors are gone.
        op: &'static str,
    },

    /// `grad()` of a tensor that does not require grad.
    #[error(
        "grad: this {shape:?} tensor does not require grad, so it never has one; create it with \
         `Var::parameter` / `requires_grad(true)`"
    )]
    NotRequiringGrad {
        /// The tensor's shape.
        shape: Vec<usize>,
    },

    /// A gradient given to `backward_with` whose shape is not the output's.
    #[error("backward_with: gradient of shape {grad:?} for an output of shape {output:?}")]
    GradShape {
        /// The output's shape.
        output: Vec<usize>,
        /// The gradient's shape.
        grad: Vec<usize>,
    },

    /// An optimizer built with no parameters.
    #[error("{optimizer}: got an empty parameter list; pass `model.parameters()`")]
    NoParameters {
        /// The optimizer.
        optimizer: &'static str,
    },

    /// A [`crate::CapturedStep::replay`] refused because it would write, in place, a value that
    /// is no longer the graph's alone (the tensor layer's rule: in-place only through an
    /// unshared handle). Nothing was queued.
    #[error("CapturedStep::replay: {target} (shape {shape:?}): {problem}; nothing was queued")]
    ReplayRefused {
        /// Which value, e.g. "parameter 3" or "output 0 of the step".
        target: String,
        /// Its shape.
        shape: Vec<usize>,
        /// What is wrong and what to do.
        problem: String,
    },

    /// An invalid hyper-parameter or argument.
    #[error("{what}: {problem}")]
    Invalid {
        /// What was given.
        what: &'static str,
        /// What is wrong and what is allowed.
        problem: String,
    },
}

/// `Result<T, NnError>`.
pub type Result<T> = std::result::Result<T, NnError>;

impl From<cuda_stack_runtime::Error> for NnError {
    /// A runtime error (device, allocator), as the tensor layer reports it.
    fn from(e: cuda_stack_runtime::Error) -> Self {
        NnError::Tensor(TensorError::Runtime(e))
    }
}

impl From<cuda_stack_runtime::cuda_stack_driver::Error> for NnError {
    /// A driver error (graph capture and launch), as the tensor layer reports it.
    fn from(e: cuda_stack_runtime::cuda_stack_driver::Error) -> Self {
        NnError::Tensor(TensorError::Driver(e))
    }
}

impl From<cuda_stack_runtime::cuda_stack_nccl::Error> for NnError {
    /// A collective (NCCL) error, as the tensor layer reports it.
    fn from(e: cuda_stack_runtime::cuda_stack_nccl::Error) -> Self {
        NnError::Tensor(TensorError::from(e))
    }
}

cuda_stack_runtime::cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum NnError);
