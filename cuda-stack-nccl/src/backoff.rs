//! The pause between two polls of NCCL (`ncclCommGetAsyncError`) while a call is in progress.

use std::time::Duration;

/// Waits a little between polls: spins first (a ready communicator is usually a few
/// microseconds away), then yields, then sleeps up to a millisecond.
pub(crate) fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    match *round {
        0..=64 => std::hint::spin_loop(),
        65..=256 => std::thread::yield_now(),
        r => std::thread::sleep(Duration::from_micros(u64::from(r.min(1000)))),
    }
}
