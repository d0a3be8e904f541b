//! [`CommConfig`]: how a communicator behaves when something goes wrong.

use cuda_stack_sys::nccl_types::ncclConfig_t;
use std::time::Duration;

/// The environment variable that overrides [`CommConfig::default`]'s timeout, in seconds
/// (`0` turns the watchdog off).
pub const TIMEOUT_VAR: &str = "CUDA_NCCL_TIMEOUT_SECS";

/// The environment variable that makes [`CommConfig::default`] blocking (`1`).
pub const BLOCKING_VAR: &str = "CUDA_NCCL_BLOCKING";

/// Settings of a communicator made by this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommConfig {
    /// How long an operation may stay unfinished — on the host (initialisation, connecting to
    /// peers, finalising) or on the GPU (a collective kernel waiting for a peer) — before the
    /// communicator is aborted and [`crate::Error::Aborted`] with
    /// [`crate::AbortReason::Timeout`] is reported. `None`: wait forever (no watchdog; a dead
    /// peer then hangs the program, as in plain NCCL). Default: 300 s, or
    /// `$CUDA_NCCL_TIMEOUT_SECS`.
    pub timeout: Option<Duration>,
    /// A name NCCL prints in its logs (`commName`), if any.
    pub name: Option<String>,
    /// Make a **blocking** NCCL communicator (`ncclConfig_t.blocking = 1`, PyTorch's default)
    /// in [`crate::Communicator::init_rank`]: NCCL then launches each operation on the calling
    /// thread. A non-blocking one (the default, `false`) returns from every call at once and
    /// NCCL finishes the launch on a thread it starts per call, which this crate waits for
    /// (tens of microseconds per operation, most of a small message's time).
    ///
    /// What changes with `true`: initialisation still ends within the timeout (it runs on a
    /// thread of its own; a rank whose peers never join gets [`crate::Error::Aborted`] with
    /// [`crate::AbortReason::Timeout`], and that thread ends the communicator if NCCL ever
    /// finishes making it), and an operation that hangs on the GPU (a dead peer) is still
    /// aborted by the watchdog. But a call that blocks *inside NCCL on the host* (connecting to
    /// a peer that died, on the first use of a transport) is not bounded by the timeout.
    /// Default: `false`, or `$CUDA_NCCL_BLOCKING=1`.
    pub blocking: bool,
}

impl Default for CommConfig {
    fn default() -> Self {
        let timeout = std::env::var(TIMEOUT_VAR)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Some(Duration::from_secs(300)), |s| {
                (s > 0.0).then(|| Duration::from_secs_f64(s))
            });
        let blocking = std::env::var(BLOCKING_VAR).is_ok_and(|v| v.trim() == "1");
        CommConfig {
            timeout,
            name: None,
            blocking,
        }
    }
}

impl CommConfig {
    /// The default settings with `timeout`.
    pub fn with_timeout(timeout: Option<Duration>) -> CommConfig {
        CommConfig {
            timeout,
            ..CommConfig::default()
        }
    }

    /// NCCL's config: for a **non-blocking** communicator (`blocking = 0`, unless
    /// [`CommConfig::blocking`]) every call returns at once, possibly with `ncclInProgress`,
    /// and this crate polls `ncclCommGetAsyncError` with the timeout instead of blocking inside
    /// NCCL. Every other field is left undefined (`NCCL_CONFIG_UNDEF_INT`), i.e. NCCL's
    /// defaults. `name` must outlive the call that uses the config.
    pub(crate) fn raw(&self, name: Option<&std::ffi::CStr>) -> ncclConfig_t {
        const UNDEF: i32 = i32::MIN; // NCCL_CONFIG_UNDEF_INT
        let n = cuda_stack_sys::nccl_types::NCCL_VERSION_CODE;
        ncclConfig_t {
            size: std::mem::size_of::<ncclConfig_t>(),
            magic: 0xcafe_beef,
            version: n,
            blocking: i32::from(self.blocking),
            cgaClusterSize: UNDEF,
            minCTAs: UNDEF,
            maxCTAs: UNDEF,
            netName: std::ptr::null(),
            splitShare: UNDEF,
            trafficClass: UNDEF,
            commName: name.map_or(std::ptr::null(), |c| c.as_ptr()),
            collnetEnable: UNDEF,
            CTAPolicy: UNDEF,
            shrinkShare: UNDEF,
            nvlsCTAs: UNDEF,
            nChannelsPerNetPeer: UNDEF,
            nvlinkCentricSched: UNDEF,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_config_is_non_blocking_with_nccl_defaults() {
        let c = CommConfig::with_timeout(None).raw(None);
        assert_eq!(c.size, 80);
        assert_eq!(c.magic, 0xcafe_beef);
        assert_eq!(c.version, 22809);
        assert_eq!(c.blocking, 0);
        assert_eq!(c.minCTAs, i32::MIN);
        assert!(c.commName.is_null());
    }
}
