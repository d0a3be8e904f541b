//! The crate's error type.

use crate::DType;
use cuda_stack_driver::ComputeCapability;

/// Every failure of this crate: driver errors, plus argument checks that say what was asked.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum Error {
    /// A `cuda-stack-driver` call failed (allocation, launch validation, module load, …).
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),

    /// A buffer's length does not match what the other arguments imply; nothing was launched.
    #[error("{op}: `{what}` has {found} elements but must have {expected}; nothing was launched")]
    Length {
        /// The operation.
        op: &'static str,
        /// Which argument.
        what: &'static str,
        /// The length the other arguments imply.
        expected: usize,
        /// The length given.
        found: usize,
    },

    /// A buffer is too small for the shape (or leading dimension) it is used with.
    #[error("{op}: `{what}` must hold {expected}, but has {found}; nothing was launched")]
    Shape {
        /// The operation.
        op: &'static str,
        /// Which argument.
        what: &'static str,
        /// What the shape needs, e.g. "a [17, 9] matrix with row stride 9 (153 elements)".
        expected: String,
        /// What was given, e.g. "100 elements".
        found: String,
    },

    /// An argument is invalid on its own (e.g. a leading dimension smaller than a row).
    #[error("{op}: {problem}")]
    Invalid {
        /// The operation.
        op: &'static str,
        /// What is wrong and what is allowed.
        problem: String,
    },

    /// A size does not fit the kernel's parameter type (most 2-D kernels take `int` sizes).
    #[error("{op}: `{what}` = {value} exceeds the kernel's limit of {max}; split the work")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// Which size.
        what: &'static str,
        /// The value asked for.
        value: u128,
        /// The largest value the kernel takes.
        max: u128,
    },

    /// There is no kernel for this dtype (or algorithm and dtype).
    #[error("{op} is not available for {dtype}: {why}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The element type asked for.
        dtype: DType,
        /// Which dtypes are supported, or what to use instead.
        why: &'static str,
    },

    /// The op needs a newer GPU than this one (FP8: compute capability 8.9 or newer; the wgmma
    /// FP8 GEMM: exactly 9.0); nothing was launched.
    #[error(
        "{op} on {dtype} needs a GPU of compute capability {needed}{exact}; this device is \
         {device}: {why}"
    )]
    UnsupportedDevice {
        /// The operation.
        op: &'static str,
        /// The element type asked for.
        dtype: DType,
        /// The device's compute capability.
        device: ComputeCapability,
        /// The compute capability the op needs.
        needed: ComputeCapability,
        /// `""` when newer ones also run it, `" exactly"` for an architecture-specific kernel.
        exact: &'static str,
        /// What to use instead.
        why: &'static str,
    },

    /// The crate has no PTX old enough for this device.
    #[error(
        "no PTX in `{file}` for compute capability {device}: the oldest target is {oldest}; \
         these kernels need a GPU of compute capability {oldest} or newer (an architecture-specific \
         target such as compute_90a runs on that compute capability only)"
    )]
    NoPtxForDevice {
        /// The PTX file (without directory).
        file: &'static str,
        /// The device's compute capability.
        device: ComputeCapability,
        /// The oldest compute capability the file has PTX for.
        oldest: ComputeCapability,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum Error);
