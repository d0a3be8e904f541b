//! The environment NCCL must run in here: NVLink multicast (NVLS) off.
//!
//! NCCL reads `NCCL_NVLS_ENABLE` once, when it initialises (the first unique id or
//! communicator in the process), and then calls `cuMulticastCreate` if NVLS is on and the
//! hardware has it. The project's rule is that NVLS stays off, so every function here that could
//! be NCCL's first call checks that the variable is exactly `"0"` and refuses otherwise with
//! [`Error::NvlsNotDisabled`].
//!
//! ## Why check instead of set
//! Setting the variable from a library would be the friendlier choice, but it is not a sound
//! one: `setenv` races with every other thread that reads the environment (`getenv` in C code —
//! the CUDA driver, NCCL's own threads, any library — is not synchronised with Rust's
//! environment lock), and a race is undefined behaviour. A library cannot know that no other
//! thread exists, so it checks. A program, which can know, sets the variable first thing in
//! `main` with [`disable_nvls_in_environment`] (an `unsafe fn` for exactly that reason), or is
//! started with `NCCL_NVLS_ENABLE=0` in its environment; children it starts inherit it (and the
//! project's programs also pass it to children explicitly).

use crate::{Error, Result};
use std::ffi::OsString;

/// The variable: `NCCL_NVLS_ENABLE`.
pub const NVLS_VAR: &str = "NCCL_NVLS_ENABLE";

/// Succeeds when `NCCL_NVLS_ENABLE` is `"0"` in this process's environment, and returns
/// [`Error::NvlsNotDisabled`] (with the value found) otherwise. Every communicator and unique id
/// is made after this check.
pub fn check_nvls_disabled() -> Result<()> {
    check_value(std::env::var_os(NVLS_VAR))
}

/// The check of [`check_nvls_disabled`] on a given value (`None`: unset).
pub(crate) fn check_value(value: Option<OsString>) -> Result<()> {
    match value {
        Some(v) if v == "0" => Ok(()),
        other => Err(Error::NvlsNotDisabled {
            found: other.map(|v| v.to_string_lossy().into_owned()),
        }),
    }
}

/// Sets `NCCL_NVLS_ENABLE=0` in this process's environment unless it already is `"0"` (a
/// different value is replaced, and logged). Children started afterwards inherit it.
///
/// # Safety
/// No other thread may read or write the environment during this call: call it at the start of
/// `main`, before any thread is spawned (and before anything that may spawn one, such as a CUDA or
/// NCCL call). See the [module docs](self) for why this is `unsafe`.
pub unsafe fn disable_nvls_in_environment() {
    match std::env::var_os(NVLS_VAR) {
        Some(v) if v == "0" => {}
        other => {
            if let Some(v) = other {
                log::warn!(
                    "cuda-stack-nccl: {NVLS_VAR} was {v:?}; setting it to \"0\" (NVLS stays off)"
                );
            }
            // The caller promises no other thread touches the environment meanwhile.
            std::env::set_var(NVLS_VAR, "0");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_zero_passes() {
        assert!(check_value(Some("0".into())).is_ok());
        for bad in [None, Some("1"), Some(""), Some(" 0"), Some("00")] {
            let e = check_value(bad.map(OsString::from)).unwrap_err();
            assert!(matches!(e, Error::NvlsNotDisabled { .. }), "{e}");
            assert!(e.to_string().contains("NCCL_NVLS_ENABLE"), "{e}");
        }
        let e = check_value(Some("1".into())).unwrap_err();
        assert!(e.to_string().contains("\"1\""), "{e}");
        let e = check_value(None).unwrap_err();
        assert!(e.to_string().contains("unset"), "{e}");
    }
}
