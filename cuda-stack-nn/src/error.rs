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

    /// A second backward through an op whose first backward wrote its gradient over the tensor
    /// it had saved (in place, to save a buffer of that size), so it cannot run again — not
    /// even through a retained graph ([`Var::backward_retain_graph`](crate::Var::backward_retain_graph)).
    #[error(
        "backward through `{op}` a second time: its first backward wrote the gradient over the \
         tensor it saved (in place, to save a buffer of that size), so it runs once, even in a \
         retained graph; {instead}"
    )]
    SavedTensorConsumed {
        /// The op whose saved tensor is gone.
        op: &'static str,
        /// What to use instead to differentiate more than once.
        instead: &'static str,
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

    /// ZeRO-1 ([`crate::ShardedOptimizer`]) could not shard, or its ranks disagree.
    #[error(transparent)]
    Sharding(#[from] ShardingError),
}

/// What can go wrong in ZeRO-1 training ([`crate::ShardedOptimizer`]): an optimizer that cannot
/// be sharded, ranks whose parameter lists differ, and a step whose gradients are incomplete.
/// (Bad arguments that do not involve other ranks, such as a parameter listed twice or on the
/// wrong GPU, are [`NnError::Invalid`], as for [`crate::DataParallel`].)
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum ShardingError {
    /// The optimizer has already taken steps: its state (momentum, moments) is per whole
    /// parameter on every rank, and a sharded optimizer keeps only its rank's part of it.
    #[error(
        "ShardedOptimizer: {optimizer} has taken {steps} step(s), so its state is per whole \
         parameter; wrap the optimizer before its first step"
    )]
    OptimizerHasState {
        /// The optimizer ("SGD", "Adam").
        optimizer: &'static str,
        /// The steps it has taken.
        steps: u64,
    },

    /// Another rank refused its own arguments (its own error says why), so no rank can train.
    #[error(
        "ShardedOptimizer: rank {rank} refused its parameter list (its own error says why), so \
         no rank can train; fix that rank"
    )]
    RankRefused {
        /// The first rank that refused.
        rank: usize,
    },

    /// The ranks' parameter lists differ (every rank must wrap the same model, parameters in the
    /// same order): the shards would not line up.
    #[error(
        "ShardedOptimizer: rank {rank} has {parameters} parameters with {elements} elements, \
         rank {this_rank} has {this_parameters} with {this_elements}{}; every rank must wrap the \
         same model, parameters in the same order",
        same_counts_note((.parameters, .elements), (.this_parameters, .this_elements))
    )]
    ParametersDiffer {
        /// The first rank whose list differs from this rank's.
        rank: usize,
        /// Its parameter count.
        parameters: u64,
        /// Its total element count.
        elements: u64,
        /// This rank.
        this_rank: usize,
        /// This rank's parameter count.
        this_parameters: u64,
        /// This rank's total element count.
        this_elements: u64,
    },

    /// A step where some parameters received a gradient and this one did not: every parameter
    /// must take part in the loss on every rank (the ranks would disagree on which buckets to
    /// reduce).
    #[error(
        "ShardedOptimizer::step: parameter {index} (shape {shape:?}) received no gradient in \
         this backward pass; every parameter must take part in the loss on every rank"
    )]
    MissingGradient {
        /// The parameter's index in the optimizer's list.
        index: usize,
        /// Its shape.
        shape: Vec<usize>,
    },

    /// A gradient that arrived after its bucket was reduce-scattered: a second backward pass
    /// before the step.
    #[error(
        "ShardedOptimizer: parameter {index}'s gradient arrived after its bucket was \
         reduce-scattered: a second backward before step(); call step() after each backward \
         (accumulate micro-batches in the loss instead)"
    )]
    LateGradient {
        /// The parameter's index in the optimizer's list.
        index: usize,
    },
}

/// What [`ShardingError::ParametersDiffer`] adds when the counts agree: the shapes differ.
fn same_counts_note(theirs: (&u64, &u64), ours: (&u64, &u64)) -> &'static str {
    if theirs == ours {
        " (the same counts, but other shapes)"
    } else {
        ""
    }
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
cuda_stack_runtime::cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum ShardingError);
