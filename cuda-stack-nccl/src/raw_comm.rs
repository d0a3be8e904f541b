//! [`RawComm`]: the raw NCCL communicator handle, as it passes between the communicator's
//! users and the one teardown thread that ends it.

use cuda_stack_sys::nccl_types::ncclComm_t;

/// An `ncclComm_t` that may cross threads.
pub(crate) struct RawComm(pub(crate) ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time. This crate makes
// every call on it either with the communicator's mutex held (the watchdog too), or from the one
// `Group` its state is lent to (`CommState::Grouped`, set and cleared under that mutex), on the
// group's own thread, while every other caller is refused; and it hands the handle to exactly
// one teardown thread at the end (never while it is lent).
unsafe impl Send for RawComm {}
