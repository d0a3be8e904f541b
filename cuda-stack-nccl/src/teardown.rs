//! Ending a communicator off the caller's thread: `ncclCommFinalize` + `ncclCommDestroy`, or
//! `ncclCommAbort`.
//!
//! Recent NCCL versions synchronise the ranks of a node in both (a rank's resources may be in
//! use by its peers until they let go), so either can wait for other ranks — forever, if one
//! died or is dropped later on the same thread. Neither ever runs on the caller's thread: each
//! communicator ends on a short-lived thread of its own, which the caller waits for only a
//! bounded time, so ranks dropped one after another by one thread still finalize together.

use crate::backoff::backoff;
use crate::raw_comm::RawComm;
use cuda_stack_driver::Context;
use cuda_stack_sys::nccl_types::{ncclComm_t, ncclResult_t};
use cuda_stack_sys::Nccl;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a drop waits for its communicator's teardown (see `Communicator`'s docs).
pub(crate) const DROP_GRACE: Duration = Duration::from_secs(5);

/// How to end a communicator.
pub(crate) enum Teardown {
    /// `ncclCommAbort`: stops its kernels; for a communicator that failed or timed out.
    Abort,
    /// `ncclCommFinalize` (waiting for the other ranks, up to `timeout` for a non-blocking
    /// communicator), then `ncclCommDestroy`; an abort when finalizing fails or times out.
    Finalize {
        /// Whether the communicator is a blocking one (its finalize blocks inside NCCL).
        blocking: bool,
        /// How long to wait for the finalize of a non-blocking one.
        timeout: Option<Duration>,
    },
}

/// Ends `raw` on a new thread; the receiver hears when it is done (or is disconnected when the
/// thread could not start, in which case the communicator is leaked, never used again).
pub(crate) fn spawn(
    nccl: &'static Nccl,
    ctx: Context,
    raw: RawComm,
    how: Teardown,
) -> mpsc::Receiver<()> {
    let (done, heard) = mpsc::channel();
    let work = move || {
        let raw = raw;
        run(nccl, &ctx, raw.0, how);
        let _ = done.send(());
    };
    if let Err(e) = std::thread::Builder::new()
        .name("cuda-stack-nccl-teardown".into())
        .spawn(work)
    {
        log::error!(
            "cuda-stack-nccl: cannot start a thread to end a communicator ({e}); it is leaked"
        );
    }
    heard
}

fn run(nccl: &Nccl, ctx: &Context, raw: ncclComm_t, how: Teardown) {
    // NCCL switches to the communicator's device itself; binding first keeps the runtime's
    // notion of the current device on this thread consistent with it.
    if let Err(e) = ctx.bind() {
        log::warn!("cuda-stack-nccl: binding the context to end a communicator: {e}");
    }
    match how {
        Teardown::Abort => abort(nccl, raw),
        Teardown::Finalize { blocking, timeout } => {
            // SAFETY: a live communicator handed to this thread alone; no other call uses it.
            let finalized = match unsafe { nccl.ncclCommFinalize(raw) } {
                Ok(()) if blocking => true,
                Ok(()) => wait_quiet(nccl, raw, timeout),
                Err(e) if e.code() == Some(ncclResult_t::ncclInProgress) => {
                    wait_quiet(nccl, raw, timeout)
                }
                Err(e) => {
                    log::warn!("cuda-stack-nccl: ncclCommFinalize failed ({e}); aborting instead");
                    false
                }
            };
            if !finalized {
                abort(nccl, raw);
                return;
            }
            // SAFETY: finalized, and used by nothing else; destroyed once.
            if let Err(e) = unsafe { nccl.ncclCommDestroy(raw) } {
                log::warn!(
                    "cuda-stack-nccl: ncclCommDestroy failed: {e} (the communicator is leaked)"
                );
            }
        }
    }
}

fn abort(nccl: &Nccl, raw: ncclComm_t) {
    // SAFETY: a communicator handed to this thread alone; aborted once.
    if let Err(e) = unsafe { nccl.ncclCommAbort(raw) } {
        log::warn!("cuda-stack-nccl: ncclCommAbort failed: {e}");
    }
}

/// Polls until a finalizing non-blocking communicator is quiet: true when it is, false on an
/// error or after `timeout`.
fn wait_quiet(nccl: &Nccl, raw: ncclComm_t, timeout: Option<Duration>) -> bool {
    let start = Instant::now();
    let mut round = 0u32;
    loop {
        let mut st = ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator used by this thread alone; out-pointer to a local.
        match unsafe { nccl.ncclCommGetAsyncError(raw, &mut st) } {
            Ok(()) if st == ncclResult_t::ncclSuccess => return true,
            Ok(()) if st == ncclResult_t::ncclInProgress => {}
            Ok(()) => {
                log::warn!(
                    "cuda-stack-nccl: finalizing a communicator failed ({st:?}); aborting it"
                );
                return false;
            }
            Err(e) => {
                log::warn!("cuda-stack-nccl: finalizing a communicator: {e}; aborting it");
                return false;
            }
        }
        if timeout.is_some_and(|t| start.elapsed() > t) {
            log::warn!(
                "cuda-stack-nccl: a communicator did not finalize within {:.1} s (the other ranks did \
                 not end theirs); aborting it",
                start.elapsed().as_secs_f64()
            );
            return false;
        }
        backoff(&mut round);
    }
}
