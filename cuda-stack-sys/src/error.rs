//! The errors of the checked-call stratum.

use crate::cublas_types::cublasStatus_t;
use crate::nccl_types::ncclResult_t;
use crate::{nvrtcResult, CUresult};
use std::path::PathBuf;

/// An entry point the loaded library does not export (an older driver, or a library that is not
/// the one expected). Returned by the call instead of a panic; loading itself never fails for it.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{symbol}` is not exported by {} ({version}); it needs a newer {what}, or the file is not {what}",
    library.display()
)]
pub struct MissingSymbol {
    /// The symbol looked up, e.g. `cuMemAlloc_v2`.
    pub symbol: &'static str,
    /// The library file it was looked up in.
    pub library: PathBuf,
    /// The library's version as it reports it (`cuDriverGetVersion`, `nvrtcVersion`,
    /// `cublasGetProperty`, `cublasLtGetVersion`, `ncclGetVersion`), or
    /// `"version unknown"` when it cannot say.
    pub version: String,
    /// `"CUDA driver"`, `"NVRTC"`, `"cuBLAS"`, `"cuBLASLt"` or `"NCCL"`.
    pub what: &'static str,
}

/// A failed CUDA driver API call.
#[derive(Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
pub enum DriverError {
    /// The driver returned an error status.
    #[error("{call} failed with {name} ({}): {description}", code.0)]
    Call {
        /// The entry point called, e.g. `cuMemAlloc_v2`.
        call: &'static str,
        /// The status returned.
        code: CUresult,
        /// Its name (`cuGetErrorName`, or the header's name when the driver cannot say).
        name: String,
        /// Its description (`cuGetErrorString`).
        description: String,
    },
    /// The entry point is not in the loaded driver.
    #[error(transparent)]
    MissingSymbol(#[from] MissingSymbol),
}

impl DriverError {
    /// The status code, if the driver returned one.
    pub fn code(&self) -> Option<CUresult> {
        match self {
            DriverError::Call { code, .. } => Some(*code),
            DriverError::MissingSymbol(_) => None,
        }
    }

    /// The entry point that failed or was missing.
    pub fn call(&self) -> &'static str {
        match self {
            DriverError::Call { call, .. } => call,
            DriverError::MissingSymbol(m) => m.symbol,
        }
    }
}

/// A failed NVRTC call.
#[derive(Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
pub enum NvrtcError {
    /// NVRTC returned an error status.
    #[error("{call} failed with {name} ({}): {description}", code.0)]
    Call {
        /// The entry point called, e.g. `nvrtcCompileProgram`.
        call: &'static str,
        /// The status returned.
        code: nvrtcResult,
        /// Its name in `nvrtc.h`.
        name: String,
        /// Its description (`nvrtcGetErrorString`).
        description: String,
    },
    /// The entry point is not in the loaded NVRTC.
    #[error(transparent)]
    MissingSymbol(#[from] MissingSymbol),
}

impl NvrtcError {
    /// The status code, if NVRTC returned one.
    pub fn code(&self) -> Option<nvrtcResult> {
        match self {
            NvrtcError::Call { code, .. } => Some(*code),
            NvrtcError::MissingSymbol(_) => None,
        }
    }
}

/// A failed cuBLAS or cuBLASLt call (both return `cublasStatus_t`).
#[derive(Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
pub enum CublasError {
    /// The library returned a status other than `CUBLAS_STATUS_SUCCESS`.
    #[error("{call} failed with {name} ({}): {description}", code.0)]
    Call {
        /// The entry point called, e.g. `cublasGemmEx` or `cublasLtMatmul`.
        call: &'static str,
        /// The status returned.
        code: cublasStatus_t,
        /// Its name (`cublasGetStatusName`, or the header's name).
        name: String,
        /// Its description (`cublasGetStatusString`, or this crate's summary of the header's
        /// documentation when the library cannot say).
        description: String,
    },
    /// The entry point is not in the loaded library.
    #[error(transparent)]
    MissingSymbol(#[from] MissingSymbol),
}

impl CublasError {
    /// The status code, if the library returned one.
    pub fn code(&self) -> Option<cublasStatus_t> {
        match self {
            CublasError::Call { code, .. } => Some(*code),
            CublasError::MissingSymbol(_) => None,
        }
    }

    /// The entry point that failed or was missing.
    pub fn call(&self) -> &'static str {
        match self {
            CublasError::Call { call, .. } => call,
            CublasError::MissingSymbol(m) => m.symbol,
        }
    }
}

/// What each `cublasStatus_t` means, for when the library's own `cublasGetStatusString` is not
/// at hand (cuBLASLt has none): a summary of the cuBLAS documentation's table.
pub(crate) fn cublas_status_summary(code: cublasStatus_t) -> &'static str {
    match code.0 {
        0 => "the operation completed successfully",
        1 => "the cuBLAS library was not initialized (no handle, or cublasCreate failed)",
        3 => "resource allocation failed inside the cuBLAS library",
        7 => "an unsupported value or parameter was passed to the function",
        8 => "the function requires a feature absent from the device architecture",
        11 => "an access to GPU memory space failed",
        13 => "the GPU program failed to execute",
        14 => "an internal cuBLAS operation failed",
        15 => "the functionality requested is not supported",
        16 => "the functionality requested requires some license",
        _ => "a status this version of the header does not know",
    }
}

/// A failed NCCL call.
#[derive(Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
pub enum NcclError {
    /// NCCL returned a result other than `ncclSuccess`.
    #[error("{call} failed with {name} ({}): {description}", code.0)]
    Call {
        /// The entry point called, e.g. `ncclAllReduce`.
        call: &'static str,
        /// The result returned.
        code: ncclResult_t,
        /// Its name in `nccl.h` (`ncclUnhandledCudaError`, …).
        name: String,
        /// Its description (`ncclGetErrorString`).
        description: String,
    },
    /// The entry point is not in the loaded NCCL.
    #[error(transparent)]
    MissingSymbol(#[from] MissingSymbol),
}

impl NcclError {
    /// The result code, if NCCL returned one.
    pub fn code(&self) -> Option<ncclResult_t> {
        match self {
            NcclError::Call { code, .. } => Some(*code),
            NcclError::MissingSymbol(_) => None,
        }
    }

    /// The entry point that failed or was missing.
    pub fn call(&self) -> &'static str {
        match self {
            NcclError::Call { call, .. } => call,
            NcclError::MissingSymbol(m) => m.symbol,
        }
    }
}

// `Debug` says what `Display` says (see `debug_display`).
crate::debug_as_display!(struct MissingSymbol);
crate::debug_as_display!(enum DriverError);
crate::debug_as_display!(enum NvrtcError);
crate::debug_as_display!(enum CublasError);
crate::debug_as_display!(enum NcclError);
