//! The checked-call stratum: the one place where a raw status becomes a `Result`.
//!
//! Every generated entry-point method of [`Driver`], [`Nvrtc`], [`Cublas`], [`CublasLt`] and
//! [`Nccl`] calls its owner's `checked`, so every call made through this crate (and the crates
//! above it) passes through here: the fault-injection hook (feature `fault-injection`), the
//! trace hook ([`crate::trace`]), and the conversion of a `CUresult` / `nvrtcResult` /
//! `cublasStatus_t` / `ncclResult_t` into [`DriverError`] / [`NvrtcError`] / [`CublasError`] /
//! [`NcclError`] with the call's name, the status's name and its description.

use crate::cublas_types::cublasStatus_t;
use crate::nccl_types::ncclResult_t;
use crate::{
    nvrtcResult, CUresult, Cublas, CublasError, CublasLt, Driver, DriverError, MissingSymbol, Nccl,
    NcclError, Nvrtc, NvrtcError,
};
use std::ffi::{c_char, CStr};

/// Copies a C string the library returned, or `None` for a null pointer.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid during the call.
unsafe fn c_str(p: *const c_char) -> Option<String> {
    // SAFETY: forwarded to the caller.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

impl Driver {
    /// Runs one raw call and converts its status. Used by every generated method.
    #[inline]
    pub(crate) fn checked(
        &self,
        call: &'static str,
        f: impl FnOnce() -> CUresult,
    ) -> Result<(), DriverError> {
        #[cfg(feature = "fault-injection")]
        if let Some(status) = crate::fault::intercept(call) {
            // Traced like a real call, so a trace shows where the injected failure landed.
            let status = crate::trace::run("driver", call, || status);
            return Err(self.error_for(call, CUresult(status)));
        }
        let status = crate::trace::run("driver", call, || f().0);
        if status == CUresult::CUDA_SUCCESS.0 {
            Ok(())
        } else {
            Err(self.error_for(call, CUresult(status)))
        }
    }

    /// The error for `call` having returned `code`: its name from `cuGetErrorName` (or the
    /// header, if the driver cannot say) and its description from `cuGetErrorString`.
    pub fn error_for(&self, call: &'static str, code: CUresult) -> DriverError {
        let mut p: *const c_char = std::ptr::null();
        let name = match self.table.cuGetErrorName {
            // SAFETY: writes a pointer to a static string (or fails for an unknown code).
            Some(f) if unsafe { f(code, &mut p) } == CUresult::CUDA_SUCCESS => {
                // SAFETY: the driver returned a static NUL-terminated string or null.
                unsafe { c_str(p) }
            }
            _ => None,
        };
        let name = name
            .or_else(|| code.name().map(str::to_string))
            .unwrap_or_else(|| format!("unknown CUresult {}", code.0));
        let mut p: *const c_char = std::ptr::null();
        let description = match self.table.cuGetErrorString {
            // SAFETY: as above.
            Some(f) if unsafe { f(code, &mut p) } == CUresult::CUDA_SUCCESS => unsafe { c_str(p) },
            _ => None,
        };
        DriverError::Call {
            call,
            code,
            name,
            description: description
                .unwrap_or_else(|| "no description (cuGetErrorString is unavailable)".into()),
        }
    }

    /// The error for an entry point this driver does not export.
    pub(crate) fn missing(&self, symbol: &'static str) -> MissingSymbol {
        MissingSymbol {
            symbol,
            library: self.path().to_path_buf(),
            version: self.version_string(),
            what: "CUDA driver",
        }
    }
}

impl Nvrtc {
    /// Runs one raw call and converts its status. Used by every generated method.
    #[inline]
    pub(crate) fn checked(
        &self,
        call: &'static str,
        f: impl FnOnce() -> nvrtcResult,
    ) -> Result<(), NvrtcError> {
        #[cfg(feature = "fault-injection")]
        if let Some(status) = crate::fault::intercept(call) {
            // Traced like a real call, so a trace shows where the injected failure landed.
            let status = crate::trace::run("nvrtc", call, || status);
            return Err(self.error_for(call, nvrtcResult(status)));
        }
        let status = crate::trace::run("nvrtc", call, || f().0);
        if status == nvrtcResult::NVRTC_SUCCESS.0 {
            Ok(())
        } else {
            Err(self.error_for(call, nvrtcResult(status)))
        }
    }

    /// The error for `call` having returned `code`, described by `nvrtcGetErrorString`.
    pub fn error_for(&self, call: &'static str, code: nvrtcResult) -> NvrtcError {
        let description = match self.table.nvrtcGetErrorString {
            // SAFETY: returns a static NUL-terminated string (or null).
            Some(f) => unsafe { c_str(f(code)) },
            None => None,
        };
        NvrtcError::Call {
            call,
            code,
            name: code
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("unknown nvrtcResult {}", code.0)),
            description: description
                .unwrap_or_else(|| "no description (nvrtcGetErrorString is unavailable)".into()),
        }
    }

    /// The error for an entry point this NVRTC does not export.
    pub(crate) fn missing(&self, symbol: &'static str) -> MissingSymbol {
        MissingSymbol {
            symbol,
            library: self.path().to_path_buf(),
            version: self.version_string(),
            what: "NVRTC",
        }
    }
}

/// Runs one raw call through the fault-injection and trace hooks; returns the raw status.
#[inline]
fn run_checked(library: &'static str, call: &'static str, f: impl FnOnce() -> u32) -> u32 {
    #[cfg(feature = "fault-injection")]
    if let Some(status) = crate::fault::intercept(call) {
        // Traced like a real call, so a trace shows where the injected failure landed.
        return crate::trace::run(library, call, || status);
    }
    crate::trace::run(library, call, f)
}

impl Cublas {
    /// Runs one raw call and converts its status. Used by every generated method.
    #[inline]
    pub(crate) fn checked(
        &self,
        call: &'static str,
        f: impl FnOnce() -> cublasStatus_t,
    ) -> Result<(), CublasError> {
        match run_checked("cublas", call, || f().0) {
            0 => Ok(()),
            status => Err(self.error_for(call, cublasStatus_t(status))),
        }
    }

    /// The error for `call` having returned `code`: its name from `cublasGetStatusName` and its
    /// description from `cublasGetStatusString` (the header's name and this crate's summary
    /// when the library cannot say).
    pub fn error_for(&self, call: &'static str, code: cublasStatus_t) -> CublasError {
        // SAFETY: both return a static NUL-terminated string (or null) for any status.
        let name = self
            .table
            .cublasGetStatusName
            .and_then(|f| unsafe { c_str(f(code)) });
        // SAFETY: as above.
        let description = self
            .table
            .cublasGetStatusString
            .and_then(|f| unsafe { c_str(f(code)) });
        cublas_error(call, code, name, description)
    }

    /// The error for an entry point this cuBLAS does not export.
    pub(crate) fn missing(&self, symbol: &'static str) -> MissingSymbol {
        MissingSymbol {
            symbol,
            library: self.path().to_path_buf(),
            version: self.version_string(),
            what: "cuBLAS",
        }
    }
}

fn cublas_error(
    call: &'static str,
    code: cublasStatus_t,
    name: Option<String>,
    description: Option<String>,
) -> CublasError {
    CublasError::Call {
        call,
        code,
        name: name
            .or_else(|| code.name().map(str::to_string))
            .unwrap_or_else(|| format!("unknown cublasStatus_t {}", code.0)),
        description: description
            .unwrap_or_else(|| crate::error::cublas_status_summary(code).to_string()),
    }
}

impl CublasLt {
    /// Runs one raw call and converts its status. Used by every generated method.
    #[inline]
    pub(crate) fn checked(
        &self,
        call: &'static str,
        f: impl FnOnce() -> cublasStatus_t,
    ) -> Result<(), CublasError> {
        match run_checked("cublasLt", call, || f().0) {
            0 => Ok(()),
            status => Err(self.error_for(call, cublasStatus_t(status))),
        }
    }

    /// The error for `call` having returned `code`. cuBLASLt has no status-string function:
    /// the name is the header's, the description this crate's summary of the documentation.
    pub fn error_for(&self, call: &'static str, code: cublasStatus_t) -> CublasError {
        cublas_error(call, code, None, None)
    }

    /// The error for an entry point this cuBLASLt does not export.
    pub(crate) fn missing(&self, symbol: &'static str) -> MissingSymbol {
        MissingSymbol {
            symbol,
            library: self.path().to_path_buf(),
            version: self.version_string(),
            what: "cuBLASLt",
        }
    }
}

impl Nccl {
    /// Runs one raw call and converts its result. Used by every generated method.
    #[inline]
    pub(crate) fn checked(
        &self,
        call: &'static str,
        f: impl FnOnce() -> ncclResult_t,
    ) -> Result<(), NcclError> {
        match run_checked("nccl", call, || f().0) {
            0 => Ok(()),
            status => Err(self.error_for(call, ncclResult_t(status))),
        }
    }

    /// The error for `call` having returned `code`, described by `ncclGetErrorString`.
    pub fn error_for(&self, call: &'static str, code: ncclResult_t) -> NcclError {
        // SAFETY: returns a static NUL-terminated string (or null) for any result.
        let description = self
            .table
            .ncclGetErrorString
            .and_then(|f| unsafe { c_str(f(code)) });
        NcclError::Call {
            call,
            code,
            name: code
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("unknown ncclResult_t {}", code.0)),
            description: description
                .unwrap_or_else(|| "no description (ncclGetErrorString is unavailable)".into()),
        }
    }

    /// The error for an entry point this NCCL does not export.
    pub(crate) fn missing(&self, symbol: &'static str) -> MissingSymbol {
        MissingSymbol {
            symbol,
            library: self.path().to_path_buf(),
            version: self.version_string(),
            what: "NCCL",
        }
    }
}
