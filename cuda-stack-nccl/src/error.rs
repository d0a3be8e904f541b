//! [`Error`]: everything `cuda-stack-nccl` reports.

use cuda_stack_sys::nccl_types::ncclResult_t;
use std::time::Duration;

/// Why a communicator was aborted (it stays aborted: every later call on it returns
/// [`Error::Aborted`] with this reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortReason {
    /// An operation did not finish within the communicator's timeout (a peer died, hangs, or
    /// never made the matching call); the watchdog or the waiting call aborted it.
    Timeout {
        /// What was waited for, e.g. `"ncclAllReduce"` or `"communicator initialisation"`.
        what: &'static str,
        /// How long it was waited for.
        waited: Duration,
    },
    /// NCCL reported an asynchronous error (`ncclCommGetAsyncError`), e.g. a peer's network
    /// connection closed (`ncclRemoteError`).
    AsyncError {
        /// The result NCCL reported.
        code: ncclResult_t,
        /// Its name and NCCL's description, with `ncclGetLastError`'s message when there is one.
        message: String,
    },
    /// [`crate::Communicator::abort`] was called.
    Requested,
}

impl std::fmt::Display for AbortReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbortReason::Timeout { what, waited } => write!(
                f,
                "{what} did not finish within {:.1} s (a peer may have died, hung, or not made \
                 the matching call)",
                waited.as_secs_f64()
            ),
            AbortReason::AsyncError { message, .. } => {
                write!(f, "NCCL reported an asynchronous error: {message}")
            }
            AbortReason::Requested => write!(f, "abort() was called"),
        }
    }
}

/// A failure of `cuda-stack-nccl`. Each variant says what was asked, what went wrong, and what to do.
#[derive(Clone, thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum Error {
    /// libnccl could not be loaded (lists every place tried).
    #[error(transparent)]
    Load(#[from] cuda_stack_sys::LoadError),

    /// A driver-level failure (contexts, streams, events, buffer tracking).
    #[error(transparent)]
    Driver(#[from] cuda_stack_driver::Error),

    /// An NCCL call returned an error.
    #[error("{source}{}", if last_error.is_empty() { String::new() } else { format!(" (NCCL: {last_error})") })]
    Call {
        /// The call, its result, the result's name and description.
        source: cuda_stack_sys::NcclError,
        /// `ncclGetLastError`'s message for the communicator, empty when NCCL had none.
        last_error: String,
    },

    /// NVLink multicast (NVLS) is not switched off: `NCCL_NVLS_ENABLE` must be `"0"` in this
    /// process's environment before NCCL is used (the project's rule: NVLS can put a shared
    /// host's GPUs out of service).
    #[error(
        "NCCL_NVLS_ENABLE is {}, but must be \"0\": NVLink multicast stays off in this project. \
         Run the program with NCCL_NVLS_ENABLE=0 in its environment (or call \
         cuda_stack_nccl::disable_nvls_in_environment() first thing in main, before any thread starts)",
        found.as_deref().map_or("unset".to_string(), |v| format!("{v:?}"))
    )]
    NvlsNotDisabled {
        /// The variable's value, `None` when unset.
        found: Option<String>,
    },

    /// The communicator was aborted earlier, and can no longer be used.
    #[error(
        "the communicator (rank {rank} of {nranks}) was aborted: {reason}; make a new one \
         (every rank must), the data of operations in flight at the abort is undefined"
    )]
    Aborted {
        /// This communicator's rank.
        rank: usize,
        /// Ranks in the communicator.
        nranks: usize,
        /// Why.
        reason: AbortReason,
    },

    /// A buffer or stream is on another device than the communicator.
    #[error(
        "{what} is on device {found}, but the communicator (rank {rank}) uses device {expected}"
    )]
    DeviceMismatch {
        /// The object, e.g. "the stream".
        what: &'static str,
        /// The communicator's rank.
        rank: usize,
        /// The communicator's device.
        expected: usize,
        /// The object's device.
        found: usize,
    },

    /// Buffer lengths do not fit the operation; nothing was queued.
    #[error("{op}: {problem}; nothing was queued")]
    Length {
        /// The operation.
        op: &'static str,
        /// Which lengths, and what they must be.
        problem: String,
    },

    /// A rank (root or peer) outside the communicator.
    #[error("{op}: {what} {rank} is not a rank of this communicator (ranks 0..{nranks})")]
    InvalidRank {
        /// The operation.
        op: &'static str,
        /// "root" or "peer".
        what: &'static str,
        /// The rank given.
        rank: usize,
        /// Ranks in the communicator.
        nranks: usize,
    },

    /// A group ([`crate::Group`]) is open on this thread (or one was leaked with `mem::forget`):
    /// NCCL would defer this call to the group's end, after the borrows it was given have ended.
    #[error(
        "{what}: a cuda_stack_nccl::Group is open on this thread; queue the operation through the \
         group, or end the group first (a Group leaked with mem::forget leaves NCCL's group open \
         on its thread for good, and every later NCCL call there is refused)"
    )]
    GroupOpen {
        /// The refused call.
        what: &'static str,
    },

    /// The communicator is lent to a [`crate::Group`] open on another thread (or leaked there
    /// with `mem::forget`): NCCL holds operations of it that it queues only at that group's
    /// end, so no other call may use it meanwhile. Refused at once rather than waited for,
    /// since a leaked group never ends.
    #[error(
        "the communicator (rank {rank} of {nranks}) is in a cuda_stack_nccl::Group open on another \
         thread; end that group first, or use each communicator from one thread (a Group leaked \
         with mem::forget keeps its communicators for good)"
    )]
    CommInGroup {
        /// This communicator's rank.
        rank: usize,
        /// Ranks in the communicator.
        nranks: usize,
    },

    /// An argument that is wrong in itself (an empty device list, a device listed twice …).
    #[error("{what}: {problem}")]
    Invalid {
        /// The call.
        what: &'static str,
        /// What is wrong and what is allowed.
        problem: String,
    },

    /// The TCP exchange of a [`crate::UniqueId`] failed.
    #[error("exchanging the NCCL unique id over TCP ({what}): {message}")]
    Exchange {
        /// The step, e.g. "connecting to 10.0.0.1:29500".
        what: String,
        /// The I/O error, or what was wrong with the bytes received.
        message: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<cuda_stack_sys::NcclError> for Error {
    fn from(source: cuda_stack_sys::NcclError) -> Self {
        Error::Call {
            source,
            last_error: String::new(),
        }
    }
}

impl Error {
    /// The NCCL result, when the error came from an NCCL call or an asynchronous error.
    pub fn nccl_code(&self) -> Option<ncclResult_t> {
        match self {
            Error::Call { source, .. } => source.code(),
            Error::Aborted {
                reason: AbortReason::AsyncError { code, .. },
                ..
            } => Some(*code),
            _ => None,
        }
    }

    /// Whether this is the error of a communicator aborted after a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Error::Aborted {
                reason: AbortReason::Timeout { .. },
                ..
            }
        )
    }
}

cuda_stack_sys::debug_as_display!(enum Error);
