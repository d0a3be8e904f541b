//! The crate's error type: every failure names the kernel and what was wrong with the call.

use cuda_stack_runtime::DType;

/// Every failure of this crate. Argument checks come before any compile, allocation or launch.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum JitError {
    /// A parameter list, type name or kernel name could not be parsed.
    #[error("kernel `{kernel}`: cannot parse {what} `{text}`: {problem}")]
    Parse {
        /// The kernel's name.
        kernel: String,
        /// Which part (`in_params`, `out_params`, `name`, `reduce_type`, …).
        what: &'static str,
        /// The text in question.
        text: String,
        /// What is wrong, and what is accepted.
        problem: String,
    },

    /// NVRTC rejected the generated (or raw) source. Line numbers in `log` are mapped to the
    /// part of the definition they come from (`operation line 1`, `preamble line 3`, …).
    #[error(
        "kernel `{kernel}` failed to compile (NVRTC, options {options:?}):\n{log}\n(the whole \
         generated source: {hint})"
    )]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// The NVRTC options used.
        options: Vec<String>,
        /// NVRTC's log, with line numbers mapped to the user's code.
        log: String,
        /// How to see the generated source.
        hint: String,
    },

    /// The call passed a different number of arguments than the kernel has parameters.
    #[error("kernel `{kernel}` takes {expected} {what} ({params}) but the call passed {found}")]
    ArgCount {
        /// The kernel's name.
        kernel: String,
        /// `"inputs"` or `"outputs"`.
        what: &'static str,
        /// How many it declares.
        expected: usize,
        /// How many were passed.
        found: usize,
        /// The declared parameter list.
        params: String,
    },

    /// A tensor of another dtype than a parameter's concrete type, or a placeholder type bound
    /// to two different dtypes.
    #[error(
        "kernel `{kernel}`, parameter `{param}`: expected {expected}, found a {found} tensor{why}"
    )]
    DTypeMismatch {
        /// The kernel's name.
        kernel: String,
        /// The parameter.
        param: String,
        /// The type it needs (`float32`, or `T = float32 (from x)`).
        expected: String,
        /// The dtype passed.
        found: DType,
        /// More context (empty, or `: …`).
        why: String,
    },

    /// A placeholder type (`T`) whose dtype nothing in the call determines.
    #[error(
        "kernel `{kernel}`: the type `{placeholder}` of output `{param}` cannot be determined \
         from the inputs; pass the outputs (call_into), or give the parameter a concrete type"
    )]
    UnresolvedType {
        /// The kernel's name.
        kernel: String,
        /// The placeholder.
        placeholder: String,
        /// The output that needs it.
        param: String,
    },

    /// The arguments' shapes do not broadcast together, or an output has the wrong shape.
    #[error("kernel `{kernel}`: {problem} (shapes: {shapes})")]
    Shape {
        /// The kernel's name.
        kernel: String,
        /// What does not fit.
        problem: String,
        /// Each argument and its shape.
        shapes: String,
    },

    /// A scalar passed where the kernel needs a tensor (an output or a `raw` parameter), or a
    /// tensor where it needs a scalar.
    #[error("kernel `{kernel}`, parameter `{param}`: {problem}")]
    ArgKind {
        /// The kernel's name.
        kernel: String,
        /// The parameter.
        param: String,
        /// What was passed and what is needed.
        problem: String,
    },

    /// Tensors on different devices.
    #[error(
        "kernel `{kernel}`: parameter `{param}` is on cuda:{found} but the call runs on \
         cuda:{expected} (the first tensor's device); move it with .to_device(..)"
    )]
    DeviceMismatch {
        /// The kernel's name.
        kernel: String,
        /// The parameter.
        param: String,
        /// The device of the call.
        expected: usize,
        /// The tensor's device.
        found: usize,
    },

    /// A reduction axis outside the broadcast shape, or repeated.
    #[error("kernel `{kernel}`: axis {axis} is invalid for shape {shape:?}: {problem}")]
    Axis {
        /// The kernel's name.
        kernel: String,
        /// The axis asked for.
        axis: isize,
        /// The broadcast shape of the inputs.
        shape: Vec<usize>,
        /// Why.
        problem: String,
    },

    /// A limit of this implementation (parameter count, dimensions).
    #[error("kernel `{kernel}`: {problem}")]
    Limit {
        /// The kernel's name.
        kernel: String,
        /// Which limit, and what to do.
        problem: String,
    },

    /// NVRTC cannot target this GPU.
    #[error(
        "NVRTC {nvrtc} cannot compile for compute capability {arch} or any lower one it knows \
         ({supported:?}); install a newer NVRTC (pip install nvidia-cuda-nvrtc) or set \
         CUDA_NVRTC_PATH"
    )]
    Target {
        /// The device's architecture, as `major * 10 + minor`.
        arch: u32,
        /// NVRTC's version.
        nvrtc: String,
        /// The architectures NVRTC supports.
        supported: Vec<u32>,
    },

    /// A tensor-layer error (allocation, copy, shape).
    #[error(transparent)]
    Tensor(#[from] cuda_stack_runtime::TensorError),

    /// A runtime error (device, allocator).
    #[error(transparent)]
    Runtime(#[from] cuda_stack_runtime::Error),

    /// A driver or NVRTC error.
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),
}

/// `Result` with [`JitError`].
pub type Result<T, E = JitError> = std::result::Result<T, E>;

cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum JitError);
