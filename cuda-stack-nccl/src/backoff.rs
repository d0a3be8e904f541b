//! The pause between two polls of NCCL (`ncclCommGetAsyncError`) while a call is in progress.

use std::time::Duration;

/// Polls spent spinning before the first yield.
const SPINS: u32 = 256;
/// Polls spent yielding before the first sleep: a non-blocking communicator's call is usually
/// ready within tens of microseconds (NCCL launches it on a thread of its own), and a sleep
/// costs at least the timer's slack (about 50 µs), so the wait yields for a while first.
const YIELDS: u32 = 4096;

/// Waits a little between polls: spins first, then yields (letting NCCL's launch thread run if
/// it shares the core), then sleeps from 10 µs, growing by 10 µs per poll up to a millisecond.
pub(crate) fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    match *round {
        r if r <= SPINS => std::hint::spin_loop(),
        r if r <= SPINS + YIELDS => std::thread::yield_now(),
        r => {
            let slept = u64::from(r - SPINS - YIELDS);
            std::thread::sleep(Duration::from_micros((slept * 10).clamp(10, 1000)))
        }
    }
}
