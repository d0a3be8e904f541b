//! The split-K workspace of [`gemm_half`](super::gemm_half), kept between calls on a stream.
//!
//! A split-K plan's slices leave f32 partial tiles in a workspace that the reduce then sums. A
//! stream-ordered allocation and free for it on every call cost about 1.4 µs of host time on an
//! H200 (kernels/TUNING.md, session 54), more than a tenth of a skinny GEMM whose host side is
//! what an eager caller waits on. So a workspace of at most [`SPLIT_WORKSPACE_CACHED_MAX_BYTES`] is kept after a
//! call, for the next call on the same stream.
//!
//! Why this is sound and ordered:
//! * a call *takes* the cached buffer out of the cache for as long as it enqueues work on it
//!   ([`WorkspaceLease`]), so two threads enqueueing on one stream never interleave their
//!   launches on one workspace (the second finds none and allocates its own);
//! * it is reused only on its home stream, where the previous call's reduce precedes the next
//!   call's product in stream order (the product launched with a programmatic dependency still
//!   waits for that reduce in its `griddepcontrol.wait` before writing);
//! * the buffer is a [`DeviceBuffer`] like any other: a graph that captured work on it keeps it
//!   alive, and a use from another stream would be ordered by the safe layer. Capture streams
//!   get a fresh allocation (a node of their graph), as before.
//!
//! The cache holds at most [`SPLIT_WORKSPACE_CACHED_STREAMS`] buffers (the streams used last), each of which keeps
//! its home stream alive until it is evicted or [`release_split_workspaces`] drops it.

use crate::Result;
use cuda_stack_driver::{DeviceBuffer, Stream};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// The largest workspace kept between calls (bytes); larger ones are allocated per call.
pub const SPLIT_WORKSPACE_CACHED_MAX_BYTES: usize = 32 << 20;

/// How many streams' workspaces are kept at once (the most recently returned ones).
pub const SPLIT_WORKSPACE_CACHED_STREAMS: usize = 4;

/// The cached workspaces, most recently returned last.
static CACHE: Mutex<Vec<DeviceBuffer<f32>>> = Mutex::new(Vec::new());

fn cache() -> std::sync::MutexGuard<'static, Vec<DeviceBuffer<f32>>> {
    // Nothing panics while the lock is held, so a poisoned lock still holds a consistent Vec.
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A workspace of at least the asked length, exclusively the caller's until dropped; then it
/// goes back to the cache (when small enough), else it is freed in stream order.
pub(crate) struct WorkspaceLease {
    /// Taken out only in `drop`.
    buf: ManuallyDrop<DeviceBuffer<f32>>,
    cache: bool,
}

impl WorkspaceLease {
    /// A workspace of at least `len` f32 elements for work on `s`: the cached one of `s` when it
    /// is large enough, else a new stream-ordered allocation.
    ///
    /// # Safety
    /// The contents are arbitrary (a previous call's partials, or uninitialised): every element
    /// read must be written first, in stream order, by the caller's own work.
    pub(crate) unsafe fn take(s: &Stream, len: usize) -> Result<WorkspaceLease> {
        let cache_it =
            len.saturating_mul(4) <= SPLIT_WORKSPACE_CACHED_MAX_BYTES && !s.is_capture_stream();
        if cache_it {
            let mut c = cache();
            if let Some(i) = c.iter().position(|b| b.home_stream().same_as(s)) {
                let b = c.remove(i);
                drop(c);
                if b.len() >= len {
                    return Ok(WorkspaceLease {
                        buf: ManuallyDrop::new(b),
                        cache: true,
                    });
                }
                // Too small: freed (in stream order, after the work that used it) and replaced.
                drop(b);
            }
        }
        // SAFETY: forwarded to the caller.
        let b = unsafe { s.alloc::<f32>(len)? };
        Ok(WorkspaceLease {
            buf: ManuallyDrop::new(b),
            cache: cache_it,
        })
    }
}

impl Deref for WorkspaceLease {
    type Target = DeviceBuffer<f32>;
    fn deref(&self) -> &DeviceBuffer<f32> {
        &self.buf
    }
}

impl DerefMut for WorkspaceLease {
    fn deref_mut(&mut self) -> &mut DeviceBuffer<f32> {
        &mut self.buf
    }
}

impl Drop for WorkspaceLease {
    fn drop(&mut self) {
        // SAFETY: `buf` is taken exactly once, here, and never used again.
        let b = unsafe { ManuallyDrop::take(&mut self.buf) };
        if !self.cache {
            return;
        }
        let evicted = {
            let mut c = cache();
            // One buffer per stream: a second lease on the same stream (another thread) that
            // returns later replaces the first.
            let same = c
                .iter()
                .position(|o| o.home_stream().same_as(&b.home_stream()));
            let old = same.map(|i| c.remove(i));
            c.push(b);
            let over = (c.len() > SPLIT_WORKSPACE_CACHED_STREAMS).then(|| c.remove(0));
            (old, over)
        };
        // Freed outside the lock (a free may wait on the driver).
        drop(evicted);
    }
}

/// Frees the split-K workspaces [`gemm_half`](super::gemm_half) keeps between calls (at most
/// [`SPLIT_WORKSPACE_CACHED_STREAMS`] buffers of at most [`SPLIT_WORKSPACE_CACHED_MAX_BYTES`] each), and with them the last
/// references they hold to their streams. Each is freed in stream order, after the work that used
/// it. The next split-K call allocates again.
pub fn release_split_workspaces() {
    let all = std::mem::take(&mut *cache());
    drop(all);
}
