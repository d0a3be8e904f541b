//! The errors of the checked-call stratum.

use crate::{nvrtcResult, CUresult};
use std::path::PathBuf;

/// An entry point the loaded library does not export (an older driver, or a library that is not
/// the one expected). Returned by the call instead of a panic; loading itself never fails for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{symbol}` is not exported by {} ({version}); it needs a newer {what}, or the file is not {what}",
    library.display()
)]
pub struct MissingSymbol {
    /// The symbol looked up, e.g. `cuMemAlloc_v2`.
    pub symbol: &'static str,
    /// The library file it was looked up in.
    pub library: PathBuf,
    /// The library's version as it reports it (`cuDriverGetVersion`, `nvrtcVersion`), or
    /// `"version unknown"` when it cannot say.
    pub version: String,
    /// `"CUDA driver"` or `"NVRTC"`.
    pub what: &'static str,
}

/// A failed CUDA driver API call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
