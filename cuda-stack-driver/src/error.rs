//! The crate's one error type.

use cuda_stack_sys::{CUresult, DriverError, LoadError, NvrtcError};

/// Every failure `cuda-stack-driver` reports. Each variant says what was asked, what the limit or
/// problem was, and (in its message) what to do about it.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
pub enum Error {
    /// The driver library could not be loaded (lists every place tried).
    #[error(transparent)]
    Load(#[from] LoadError),

    /// A driver call failed (names the call, the error and its description).
    #[error(transparent)]
    Driver(#[from] DriverError),

    /// An NVRTC call failed outside compilation itself.
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),

    /// NVRTC rejected the source; `log` is its compile log.
    #[error("NVRTC could not compile `{name}` (options: {options:?}):\n{log}")]
    Compile {
        /// The program name given to NVRTC.
        name: String,
        /// The options passed.
        options: Vec<String>,
        /// NVRTC's log.
        log: String,
    },

    /// A device allocation did not fit.
    #[error(
        "out of device memory: asked for {requested} bytes, {free} of {total} bytes are free; \
         free buffers (or empty caches) and retry, or allocate less ({call} failed)"
    )]
    OutOfMemory {
        /// The allocation call that failed (`cuMemAllocAsync` or `cuMemAlloc_v2`).
        call: &'static str,
        /// Bytes asked for.
        requested: usize,
        /// Free bytes on the device at the time (`cuMemGetInfo`).
        free: usize,
        /// Total bytes on the device.
        total: usize,
    },

    /// A launch configuration exceeds a device limit; checked before the launch.
    #[error("invalid launch configuration for `{kernel}`: {problem}")]
    LaunchConfig {
        /// The kernel being launched.
        kernel: String,
        /// Which limit, e.g. "block has 2048 threads; this device allows 1024".
        problem: String,
    },

    /// The PTX targets a newer PTX ISA than this driver can JIT.
    #[error(
        "the PTX uses ISA version {ptx_isa}, newer than this driver ({driver}) can compile; \
         update the NVIDIA driver, or generate PTX with an older NVRTC/nvcc"
    )]
    PtxTooNew {
        /// The `.version` of the PTX.
        ptx_isa: String,
        /// The driver's CUDA version, e.g. "CUDA 12.4".
        driver: String,
    },

    /// The JIT compiler (or loader) rejected a module image; `log` is its error log.
    #[error("loading the module failed: {source}\nJIT log:\n{log}")]
    ModuleLoad {
        /// The driver error.
        source: DriverError,
        /// The JIT error log (may be empty for non-PTX images).
        log: String,
    },

    /// A kernel name not in the module.
    #[error("no kernel named `{name}` in the module; it has: {}", available.join(", "))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The kernels the module does have.
        available: Vec<String>,
    },

    /// A module-scope global not in the module, or of another size.
    #[error("global `{name}`: {problem}")]
    Global {
        /// The global's name.
        name: String,
        /// What went wrong.
        problem: String,
    },

    /// A typed kernel handle's Rust signature does not match the kernel's parameters.
    #[error(
        "kernel `{kernel}` takes parameters of {found:?} bytes (as cuFuncGetParamInfo or the \
         module's PTX lists them), but the Rust signature has {expected:?} bytes; fix the \
         signature to match the CUDA declaration"
    )]
    SignatureMismatch {
        /// The kernel.
        kernel: String,
        /// Byte sizes of the Rust parameter types.
        expected: Vec<usize>,
        /// Byte sizes of the kernel's parameters.
        found: Vec<usize>,
    },

    /// A typed kernel handle whose Rust parameter is of another kind than the PTX declares:
    /// an `f32` where the kernel takes an integer, or the reverse (same size, so the size check
    /// cannot see it).
    #[error(
        "kernel `{kernel}`: parameter {index} is {rust} in the Rust signature, but the PTX \
         declares `{ptx}`; fix the signature to match the CUDA declaration"
    )]
    SignatureKindMismatch {
        /// The kernel.
        kernel: String,
        /// The parameter's position (0-based).
        index: usize,
        /// The Rust parameter's kind.
        rust: crate::launch::param_kind::ParamKind,
        /// The PTX type, e.g. `.u32`.
        ptx: String,
    },

    /// A binary module image (cubin or fatbin) is not what it claims to be, or declares data
    /// beyond the end of the slice (checked before the driver, which trusts the image's own
    /// headers, reads it).
    #[error(
        "invalid {kind} image: {problem}; pass the file nvcc (-cubin / -fatbin) or NVRTC wrote, \
         whole (PTX text goes through ModuleImage::Ptx)"
    )]
    InvalidImage {
        /// "cubin" or "fatbin".
        kind: &'static str,
        /// What is wrong with it.
        problem: String,
    },

    /// A TMA tensor map could not be encoded from these arguments (checked before the driver call).
    #[error("tensor map: {problem}")]
    TensorMap {
        /// Which rule the arguments break.
        problem: String,
    },

    /// Source and destination lengths differ; nothing was copied.
    #[error("{op}: source has {src} elements but destination has {dst}; nothing was copied")]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// Source length.
        src: usize,
        /// Destination length.
        dst: usize,
    },

    /// An index or range outside a buffer.
    #[error("{op}: range {start}..{end} is out of bounds for length {len}")]
    OutOfBounds {
        /// The operation.
        op: &'static str,
        /// Range start.
        start: usize,
        /// Range end.
        end: usize,
        /// The length.
        len: usize,
    },

    /// Something this device or driver does not support.
    #[error("{what} is not supported: {why}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// Why not, and what would be needed.
        why: String,
    },

    /// Objects from two different contexts (devices) were used together.
    #[error("{what} belongs to device {found}, but this operation is on device {expected}")]
    DeviceMismatch {
        /// The object.
        what: &'static str,
        /// The device of the operation.
        expected: i32,
        /// The object's device.
        found: i32,
    },

    /// A size computation overflowed (element count × element size).
    #[error("{op}: {count} elements of {elem_size} bytes overflow the address space")]
    SizeOverflow {
        /// The operation.
        op: &'static str,
        /// Elements asked for.
        count: usize,
        /// Bytes per element.
        elem_size: usize,
    },

    /// A CUDA call was made from inside a stream host function, which the driver forbids.
    #[error(
        "CUDA was called from inside a stream host function (Stream::launch_host_func), which the \
         driver forbids; do the work after the callback (e.g. signal a channel from the callback \
         and call CUDA from the receiving thread)"
    )]
    InHostCallback,

    /// A call into another library, made through this crate's hooks for foreign work
    /// ([`crate::Stream::enqueue_foreign`], [`crate::Context::release_foreign_on_drop`]), failed.
    #[error("{library}: {message}")]
    Foreign {
        /// The library, e.g. `"cuBLAS"`.
        library: &'static str,
        /// Its error, as text.
        message: String,
    },
}

impl Error {
    /// The driver's status code, when the error came from a driver call.
    pub fn driver_code(&self) -> Option<CUresult> {
        match self {
            Error::Driver(e) | Error::ModuleLoad { source: e, .. } => e.code(),
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

cuda_stack_sys::debug_as_display!(enum Error);
