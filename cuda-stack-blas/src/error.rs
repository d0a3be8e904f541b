//! The crate's one error type.

use crate::element::DataType;
use cuda_stack_driver::cuda_stack_sys::{CublasError, LoadError};

/// Every failure `cuda-stack-blas` reports. Checks run before any library call, so a shape, length,
/// type or alignment problem never reaches cuBLAS; each message says what was asked, what the
/// limit was, and what to do.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
pub enum BlasError {
    /// cuBLAS or cuBLASLt could not be loaded (lists every place tried).
    #[error("cuBLAS is not available: {0}")]
    Load(#[from] LoadError),

    /// The loaded cuBLAS or cuBLASLt is not a major version this crate supports (12 or 13).
    #[error(
        "{library} is version {found}, but cuda-stack-blas supports cuBLAS 12 and 13 only; \
         install one (`pip install nvidia-cublas` for CUDA 13, `pip install nvidia-cublas-cu12` \
         for CUDA 12) or point CUDA_CUBLAS_PATH / CUDA_CUBLASLT_PATH at a libcublas.so.13 / \
         libcublasLt.so.13 or a libcublas.so.12 / libcublasLt.so.12"
    )]
    Version {
        /// `"cuBLAS"` or `"cuBLASLt"`.
        library: &'static str,
        /// The version the library reported, e.g. `"11.11.3"` or `"unknown"`.
        found: String,
    },

    /// cuBLAS and cuBLASLt loaded, but of different major versions (one handle uses both, so
    /// they must come from one release).
    #[error(
        "cuBLAS is version {cublas} but cuBLASLt is version {cublas_lt}; cuda-stack-blas uses them \
         together, so they must be of one major version: point CUDA_CUBLASLT_PATH at the \
         libcublasLt beside the libcublas that loaded (or CUDA_CUBLAS_PATH at the libcublas \
         beside the libcublasLt)"
    )]
    VersionMismatch {
        /// The version of cuBLAS, e.g. `"13.1.0"`.
        cublas: String,
        /// The version of cuBLASLt, e.g. `"12.9.1"`.
        cublas_lt: String,
    },

    /// A cuBLAS or cuBLASLt call returned an error status (names the call and the status).
    #[error(transparent)]
    Cublas(#[from] CublasError),

    /// A `cuda-stack-driver` operation failed (allocation, ordering, context, …).
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),

    /// A buffer is shorter than the matrix (or batch of matrices) the shape describes.
    #[error("{op}: `{operand}` must hold {expected}, but the buffer has {found} elements")]
    Length {
        /// The operation, e.g. `"gemm"`.
        op: &'static str,
        /// `"a"`, `"b"`, `"c"` or `"bias"`.
        operand: &'static str,
        /// What the shape needs, in words and elements.
        expected: String,
        /// The buffer's length.
        found: usize,
    },

    /// A leading dimension is smaller than the stored rows it must step over.
    #[error(
        "{op}: the leading dimension of `{operand}` is {ld}, but its stored (row-major) rows \
         have {min} elements; the leading dimension must be at least {min}"
    )]
    LeadingDimension {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// The leading dimension given.
        ld: usize,
        /// The smallest valid one.
        min: usize,
    },

    /// A size does not fit the library's integer type.
    #[error("{op}: {what} is {value}, more than cuBLAS accepts ({max})")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// What was too large (`"m"`, `"ldb"`, `"the span of b"`, …).
        what: &'static str,
        /// Its value.
        value: u128,
        /// The limit.
        max: u128,
    },

    /// The matrices of a strided batch's output overlap, so batches would write each other's
    /// elements.
    #[error(
        "{op}: the {count} output matrices overlap: the batch stride of c is {stride}, but one \
         matrix spans {span} elements; use a stride of at least {span}"
    )]
    BatchOverlap {
        /// The operation.
        op: &'static str,
        /// Batch count.
        count: usize,
        /// The output batch stride given.
        stride: usize,
        /// Elements one output matrix spans.
        span: usize,
    },

    /// cuBLAS has no GEMM for this combination of element types and compute mode.
    #[error(
        "{op}: inputs of {input:?} with output {output:?} and {math} are not supported; \
         supported: f32 -> f32 (default or TF32), f64 -> f64 (default), \
         f16 -> f16 or f32 and bf16 -> bf16 or f32 (f32 accumulation, default math)"
    )]
    UnsupportedTypes {
        /// The operation.
        op: &'static str,
        /// Element type of `a` and `b`.
        input: DataType,
        /// Element type of `c`.
        output: DataType,
        /// The requested math, e.g. `"TF32 math"`.
        math: &'static str,
    },

    /// An epilogue and the bias argument disagree (a bias epilogue without a bias, or a bias
    /// without a bias epilogue).
    #[error("{op}: {problem}")]
    Epilogue {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        problem: String,
    },

    /// An operand's address is less aligned than the path needs.
    #[error(
        "{op}: `{operand}` starts at an address aligned to {found} bytes, but {path} needs \
         {required}-byte alignment; start the view at a multiple of {required} bytes (or copy \
         it into its own buffer), or use `Blas::gemm` plus a separate elementwise op"
    )]
    Misaligned {
        /// The operation.
        op: &'static str,
        /// The operand.
        operand: &'static str,
        /// The path that needs it.
        path: &'static str,
        /// The address's alignment.
        found: usize,
        /// What the path needs.
        required: usize,
    },

    /// The leading dimension of a GELU epilogue's auxiliary matrix is not a multiple of what
    /// cuBLASLt requires (8 elements).
    #[error(
        "{op}: the auxiliary (pre-activation) matrix has leading dimension {ld}, but cuBLASLt's \
         GELU epilogues need a multiple of {multiple} elements; store it with a row stride of \
         {suggested} (or use Blas::gemm and a separate GELU)"
    )]
    AuxLeadingDimension {
        /// The operation.
        op: &'static str,
        /// The leading dimension given.
        ld: usize,
        /// What it must be a multiple of.
        multiple: usize,
        /// The next valid leading dimension.
        suggested: usize,
    },

    /// The handle's workspace is smaller than the chosen algorithm needs.
    #[error(
        "{op}: the algorithm chosen needs a workspace of {needed} bytes, but the handle has \
         {available}; make the handle with `Blas::with_workspace` and at least {needed} bytes"
    )]
    WorkspaceTooSmall {
        /// The operation.
        op: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes the handle owns.
        available: usize,
    },

    /// A workspace size that cuBLAS cannot use.
    #[error("a workspace of {bytes} bytes is not usable: {why}")]
    Workspace {
        /// The size asked for.
        bytes: usize,
        /// Why not.
        why: &'static str,
    },

    /// The stream belongs to another device than the handle: cuBLAS does not define work queued
    /// through a handle of one device on another device's stream. Use [`crate::Blas::get`] with
    /// the stream's context (one handle per device).
    #[error(
        "{op}: the stream is on device {stream_device}, but this Blas handle was made for device \
         {handle_device}; use the handle of the stream's device (Blas::get(stream.context()))"
    )]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// The handle's device.
        handle_device: usize,
        /// The stream's device.
        stream_device: usize,
    },

    /// The GPU is too old for the operation (FP8 needs compute capability 8.9 or newer).
    #[error("{op} needs a GPU of compute capability {needed}; this one is {device}")]
    UnsupportedDevice {
        /// The operation.
        op: &'static str,
        /// The device's compute capability, e.g. `"8.0"`.
        device: String,
        /// What it needs.
        needed: &'static str,
    },

    /// An FP8 product cuBLASLt does not run as asked: a type pairing it lacks (e5m2 x e5m2),
    /// leading dimensions that are not multiples of 16, or k = 0.
    #[error("{op}: {problem}")]
    Fp8 {
        /// The operation.
        op: &'static str,
        /// What is wrong and what to do.
        problem: String,
    },

    /// cuBLASLt's heuristic found no algorithm for the problem.
    #[error(
        "{op}: cuBLASLt has no algorithm for {problem} within a workspace of {workspace} bytes; \
         try another epilogue or alignment, a larger workspace, or `Blas::gemm`"
    )]
    NoAlgorithm {
        /// The operation.
        op: &'static str,
        /// The problem: shape, types, transposes, epilogue, alignments.
        problem: String,
        /// The workspace the search was limited to.
        workspace: usize,
    },
}

/// `Result` with [`BlasError`].
pub type Result<T, E = BlasError> = std::result::Result<T, E>;

cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum BlasError);
