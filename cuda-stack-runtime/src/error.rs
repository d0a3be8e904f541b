//! The crate's error type.

/// Every failure `cuda-stack-runtime` reports: a driver-layer error, or a runtime-specific one.
/// Each message says what was asked, what the limit was, and what to do.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum Error {
    /// A `cuda-stack-driver` call failed (out of memory, length mismatch, driver error …).
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),

    /// A device ordinal outside `0..count` (`cudaErrorInvalidDevice`).
    #[error(
        "device ordinal {ordinal} is out of range: this machine has {count} CUDA device(s), so \
         valid ordinals are 0..{count}; pick one of those (`nvidia-smi -L` lists them, \
         CUDA_VISIBLE_DEVICES chooses which are visible)"
    )]
    InvalidDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices there are.
        count: usize,
    },

    /// The driver loaded but reports no device (`cudaErrorNoDevice`).
    #[error(
        "no CUDA device is visible: the driver reports 0 devices; check `nvidia-smi` and that \
         CUDA_VISIBLE_DEVICES is not empty or wrong"
    )]
    NoDevice,

    /// A staging configuration outside its limits.
    #[error("invalid staging configuration: {problem}")]
    InvalidStagingConfig {
        /// Which field, its value and the allowed range.
        problem: String,
    },

    /// A worker thread of a staged copy panicked (a bug): the copy's result is unspecified.
    #[error(
        "worker thread {worker} of a staged {direction} copy panicked; the destination's contents \
         are unspecified: retry, and report the bug"
    )]
    StagingWorkerPanicked {
        /// Which worker (1-based: worker 0 is the calling thread).
        worker: usize,
        /// `"host-to-device"` or `"device-to-host"`.
        direction: &'static str,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn invalid_device_message_names_ordinal_and_count() {
        let msg = Error::InvalidDevice {
            ordinal: 3,
            count: 2,
        }
        .to_string();
        assert!(
            msg.contains("ordinal 3") && msg.contains("2 CUDA device(s)") && msg.contains("0..2")
        );
    }

    #[test]
    fn driver_errors_convert_transparently() {
        let d = cuda_stack_driver::Error::LengthMismatch {
            op: "memcpy_htod",
            src: 3,
            dst: 4,
        };
        let e: Error = d.clone().into();
        assert_eq!(e.to_string(), d.to_string());
    }
}

cuda_stack_driver::cuda_stack_sys::debug_as_display!(enum Error);
