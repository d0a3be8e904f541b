//! Events: markers in a stream's queue, for ordering between streams and for timing.

use crate::{driver, Context, Result, Stream};
use cuda_stack_sys::{CUevent, CUevent_flags, CUresult};
use std::time::Duration;

/// A CUDA event. Record it on a stream to mark a point in the queue; other streams can wait on
/// it, the host can wait for it, and two timing events give the GPU time between them.
pub struct Event {
    raw: CUevent,
    ctx: Context,
    timing: bool,
}

// SAFETY: a CUevent may be recorded, waited on and queried from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` methods only pass the handle to thread-safe driver calls.
unsafe impl Sync for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("timing", &self.timing)
            .finish()
    }
}

impl Event {
    /// A new event; `timing` events can be used with [`Event::elapsed`], others are cheaper.
    pub fn new(ctx: &Context, timing: bool) -> Result<Event> {
        ctx.bind()?;
        let flags = if timing {
            CUevent_flags::CU_EVENT_DEFAULT
        } else {
            CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed in Drop.
        unsafe { driver()?.cuEventCreate(&mut raw, flags.0)? };
        Ok(Event {
            raw,
            ctx: ctx.clone(),
            timing,
        })
    }

    /// Records the event at the current end of `stream`'s queue.
    ///
    /// Refused on a stream that is being captured into a graph: the graph's record node would
    /// name this event, which the graph cannot own, and a stream waiting on it would silently
    /// join the capture.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        let _gate = stream.inner.enter();
        self.record_entered(stream)
    }

    /// [`Event::record`] for a caller that holds `stream`'s enqueue guard.
    pub(crate) fn record_entered(&self, stream: &Stream) -> Result<()> {
        if !stream.context().same_as(&self.ctx) {
            return Err(crate::Error::DeviceMismatch {
                what: "the stream",
                expected: self.ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            });
        }
        stream.refuse_capture("recording an event")?;
        if stream.as_raw().is_null() {
            // The NULL stream is the current context's: make it this one's.
            self.ctx.bind_cached()?;
        }
        // SAFETY: both handles are live and in one context (current, for the NULL stream).
        unsafe { driver()?.cuEventRecord(self.raw, stream.as_raw())? };
        Ok(())
    }

    /// The context the event was made in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Blocks the host until the work before the event's last record is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: live handle.
        unsafe { driver()?.cuEventSynchronize(self.raw)? };
        Ok(())
    }

    /// Whether the work before the event's last record is done (without blocking).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: live handle.
        match unsafe { driver()?.cuEventQuery(self.raw) } {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(CUresult::CUDA_ERROR_NOT_READY) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// GPU time from `self` to `end` (both recorded, both timing events, `end` completed).
    pub fn elapsed(&self, end: &Event) -> Result<Duration> {
        let mut ms = 0f32;
        // SAFETY: out-pointer to a local; live handles.
        unsafe { driver()?.cuEventElapsedTime_v2(&mut ms, self.raw, end.raw)? };
        Ok(Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3))
    }

    /// Whether this is a timing event.
    pub fn is_timing(&self) -> bool {
        self.timing
    }

    /// The raw `CUevent` (escape hatch).
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }

    /// Destroys the event, returning the driver's error if any.
    pub fn close(mut self) -> Result<()> {
        // From here `Drop` sees a null handle and destroys nothing (a failure below leaks).
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: the handle is live and not used again.
        unsafe { driver()?.cuEventDestroy_v2(raw)? };
        Ok(())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return; // destroyed by `close`
        }
        let raw = self.raw as usize;
        crate::host_callback::release_on_drop(self.ctx.clone(), "cuEventDestroy", move || {
            // SAFETY: the handle is live and not used again (a failed destroy leaves it live).
            // Destroying an event whose record is still pending is allowed: the driver frees it
            // once the work completes.
            unsafe { driver()?.cuEventDestroy_v2(raw as CUevent)? };
            Ok(())
        });
    }
}
