//! The checked-call stratum: the one place where a raw status becomes a `Result`.
//!
//! Every generated entry-point method of [`Driver`] and [`Nvrtc`] calls `Driver::checked` /
//! `Nvrtc::checked`, so every call made through this crate (and the crates above it) passes
//! through here: the fault-injection hook (feature `fault-injection`), the trace hook
//! ([`crate::trace`]), and the conversion of a `CUresult` / `nvrtcResult` into
//! [`DriverError`] / [`NvrtcError`] with the call's name, the status's name and its description.

use crate::{nvrtcResult, CUresult, Driver, DriverError, MissingSymbol, Nvrtc, NvrtcError};
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
