//! An optional per-call trace of the checked-call stratum.
//!
//! When a hook is installed with [`set_hook`], every entry point called through [`crate::Driver`],
//! [`crate::Nvrtc`], [`crate::Cublas`], [`crate::CublasLt`] or [`crate::Nccl`] reports a [`CallEvent`]: its name, its status and how long it took. This is
//! how a program can show the driver calls a high-level operation turns into, from the calls
//! themselves. With no hook installed the cost is one relaxed atomic load per call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// One traced call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallEvent {
    /// `"driver"`, `"nvrtc"`, `"cublas"`, `"cublasLt"` or `"nccl"`.
    pub library: &'static str,
    /// The entry point, e.g. `cuLaunchKernel`.
    pub call: &'static str,
    /// The raw status it returned (`CUresult`, `nvrtcResult`, `cublasStatus_t` or
    /// `ncclResult_t` value; 0 is success).
    pub status: u32,
    /// Wall-clock time spent inside the call.
    pub elapsed: Duration,
}

/// A trace hook: called on the calling thread, right after each call returns.
pub type Hook = Arc<dyn Fn(&CallEvent) + Send + Sync>;

static ENABLED: AtomicBool = AtomicBool::new(false);
static HOOK: RwLock<Option<Hook>> = RwLock::new(None);

/// Installs `hook` (replacing any other) or, with `None`, turns tracing off.
/// Returns the hook that was installed before.
pub fn set_hook(hook: Option<Hook>) -> Option<Hook> {
    let mut slot = HOOK.write().unwrap_or_else(|p| p.into_inner());
    ENABLED.store(hook.is_some(), Ordering::Release);
    std::mem::replace(&mut *slot, hook)
}

/// Runs `f`, reporting it to the hook if one is installed.
#[inline]
pub(crate) fn run(library: &'static str, call: &'static str, f: impl FnOnce() -> u32) -> u32 {
    if !ENABLED.load(Ordering::Relaxed) {
        return f();
    }
    let start = Instant::now();
    let status = f();
    let elapsed = start.elapsed();
    let hook = HOOK.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(h) = hook {
        h(&CallEvent {
            library,
            call,
            status,
            elapsed,
        });
    }
    status
}
