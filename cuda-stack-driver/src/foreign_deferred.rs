//! Foreign work queued later than the call that describes it: the two halves of
//! [`Stream::enqueue_foreign`], for libraries that batch work and queue it at a later call.
//!
//! NCCL is the case in point: between `ncclGroupStart` and `ncclGroupEnd`, a collective call only
//! records the operation; the kernels are queued, on every stream of the group, by
//! `ncclGroupEnd`. Ordering a buffer after its earlier uses must happen before that (the waits
//! are queued on the stream ahead of the kernels), and recording the use must happen after it
//! (the after-use event must follow the kernels). [`Stream::begin_foreign`] is the first half,
//! [`Stream::end_foreign`] the second; `enqueue_foreign` is both around one closure.
//!
//! Between the halves the buffers must stay borrowed: a safe wrapper holds the borrows in a guard
//! that ends the group (and then calls `end_foreign`) when it is dropped, as `cuda-stack-nccl`'s group
//! guard does.

use crate::foreign::ForeignUse;
use crate::{Error, Result, Stream};

impl Stream {
    /// Checks the buffers' devices and orders each buffer in `uses` after its earlier uses on
    /// other streams (the first half of [`Stream::enqueue_foreign`]). Call it before the library
    /// call that will queue work using them, then [`Stream::end_foreign`] once that work is
    /// queued.
    ///
    /// Refused on a stream made for a graph capture ([`Error::Unsupported`]): a graph would have
    /// to own what the deferred work uses, which only [`Stream::enqueue_foreign`] arranges.
    ///
    /// # Safety
    /// The contract of [`Stream::enqueue_foreign`] holds for the work queued on this stream
    /// between this call and the matching `end_foreign`, and in addition:
    /// - the borrows in `uses` are held until `end_foreign` has returned, or, if the work is
    ///   never queued, for as long as it still could be;
    /// - `end_foreign` is called on this stream with the same buffers right after the work is
    ///   queued (before the borrows end), so that later frees and other streams wait for it.
    pub unsafe fn begin_foreign(&self, uses: &[ForeignUse<'_>]) -> Result<()> {
        if crate::host_callback::active() {
            return Err(crate::host_callback::refused());
        }
        if self.is_capture_stream() {
            return Err(Error::Unsupported {
                what: "deferred foreign work (Stream::begin_foreign) on a capture stream",
                why: "a graph would have to own the buffers of work queued after the call that \
                      describes it; queue it outside the capture"
                    .into(),
            });
        }
        for u in uses {
            let home = &u.slice().home().ctx;
            if !home.same_as(self.context()) {
                return Err(Error::DeviceMismatch {
                    what: "a buffer used by foreign work",
                    expected: self.context().device().ordinal() as i32,
                    found: home.device().ordinal() as i32,
                });
            }
        }
        self.context().bind_cached()?;
        let _gate = self.inner.enter();
        for u in uses {
            u.slice().before_use(&self.inner)?;
        }
        Ok(())
    }

    /// Records that work using `uses` was just queued on this stream (the second half of
    /// [`Stream::enqueue_foreign`]): later work on the buffers, on any stream, and their frees
    /// wait for it. Every buffer is recorded even when one fails (a failure settles the stream,
    /// so the work is finished before the error returns); the first error is returned.
    ///
    /// The current context may have been changed by the library that queued the work; this
    /// binds the stream's own context first.
    pub fn end_foreign(&self, uses: &[ForeignUse<'_>]) -> Result<()> {
        if crate::host_callback::active() {
            return Err(crate::host_callback::refused());
        }
        crate::context::invalidate_bind_cache();
        let bound = self.context().bind();
        let _gate = self.inner.enter();
        let mut first_err = bound;
        for u in uses {
            if let Err(e) = u.slice().after_use(&self.inner) {
                if first_err.is_ok() {
                    first_err = Err(e);
                }
            }
        }
        first_err
    }
}
