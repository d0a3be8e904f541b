//! Streams: ordered queues of GPU work.

use crate::{driver, Context, Error, Event, Result};
use cuda_sys::{CUresult, CUstream};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What kind of stream to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Synchronizes with the legacy default (NULL) stream, like `cudaStreamCreate`.
    Blocking,
    /// Runs independently of the default stream (`CU_STREAM_NON_BLOCKING`).
    NonBlocking,
}

/// A stream: work queued on one stream runs in order; work on different streams may overlap.
///
/// `Stream` is a cheap, clonable handle (an `Arc`); the stream is destroyed when the last handle
/// and the last buffer allocated on it are gone. Device memory is allocated *on* a stream
/// ([`Stream::alloc_zeros`], [`Stream::clone_htod`]); see [`crate::DeviceBuffer`] for how buffers
/// stay correct when used on other streams.
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

pub(crate) struct StreamInner {
    pub(crate) raw: CUstream,
    pub(crate) ctx: Context,
    owned: bool,
    /// While a graph capture is in progress, the allocations its work uses (kept alive by the
    /// graph).
    pub(crate) capturing: AtomicBool,
    pub(crate) captured: Mutex<Vec<Arc<crate::memory::Allocation>>>,
}

// SAFETY: a CUstream may be used from any thread; the driver serialises submissions.
unsafe impl Send for StreamInner {}
// SAFETY: as above; shared access only passes the handle to thread-safe driver calls.
unsafe impl Sync for StreamInner {}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.inner.raw)
            .finish()
    }
}

impl Stream {
    /// A new stream of `kind` with `priority` (lower numbers are higher priority; see
    /// [`Stream::priority_range`]).
    pub fn new(ctx: &Context, kind: StreamKind, priority: i32) -> Result<Stream> {
        ctx.bind()?;
        let flags = match kind {
            StreamKind::Blocking => 0,
            StreamKind::NonBlocking => cuda_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed when the last handle drops.
        unsafe { driver()?.cuStreamCreateWithPriority(&mut raw, flags, priority)? };
        Ok(Self::wrap(ctx.clone(), raw, true))
    }

    pub(crate) fn null(ctx: Context) -> Stream {
        Self::wrap(ctx, std::ptr::null_mut(), false)
    }

    fn wrap(ctx: Context, raw: CUstream, owned: bool) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                raw,
                ctx,
                owned,
                capturing: AtomicBool::new(false),
                captured: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The (least, greatest) priority values: `greatest` is the highest priority and is
    /// numerically smallest.
    pub fn priority_range(ctx: &Context) -> Result<(i32, i32)> {
        ctx.bind()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: out-pointers to locals.
        unsafe { driver()?.cuCtxGetStreamPriorityRange(&mut least, &mut greatest)? };
        Ok((least, greatest))
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The raw `CUstream` (escape hatch; null for the default stream).
    pub fn as_raw(&self) -> CUstream {
        self.inner.raw
    }

    /// Whether two handles are the same stream.
    pub fn same_as(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Blocks until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }

    /// Whether all work queued so far has finished (without blocking).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: live handle.
        match unsafe { driver()?.cuStreamQuery(self.inner.raw) } {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(CUresult::CUDA_ERROR_NOT_READY) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes later work on this stream wait for `event`'s last record.
    ///
    /// An event recorded during a graph capture can only be waited on by a stream in the same
    /// capture: otherwise the waiting stream would silently join the capture, and the buffers it
    /// uses would escape the graph's bookkeeping. That case is refused.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        if event.recorded_in_capture() && !self.inner.is_capturing() {
            return Err(Error::Unsupported {
                what: "waiting on an event recorded during a graph capture",
                why: "the waiting stream would join the capture; capture on one stream, or wait after end_capture".into(),
            });
        }
        self.inner.wait_raw(event.as_raw())
    }

    /// Whether the driver says this stream is capturing (`cuStreamIsCapturing`).
    pub fn is_capturing(&self) -> Result<bool> {
        let mut status = cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: out-pointer to a local; live stream.
        unsafe { driver()?.cuStreamIsCapturing(self.inner.raw, &mut status)? };
        Ok(status != cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Fails when the stream is capturing: for operations that hand the driver host memory or
    /// host code whose lifetime a graph could not keep.
    pub(crate) fn refuse_capture(&self, what: &'static str) -> Result<()> {
        if self.inner.is_capturing() || self.is_capturing()? {
            return Err(Error::Unsupported {
                what,
                why: "not allowed while the stream is captured into a graph: the graph would keep \
                      using host memory or a callback after this call returns"
                    .into(),
            });
        }
        Ok(())
    }

    /// Records a new (non-timing) event at the current end of the queue.
    pub fn record_event(&self) -> Result<Event> {
        let e = Event::new(&self.inner.ctx, false)?;
        e.record(self)?;
        Ok(e)
    }

    /// Queues `f` to run on a driver thread once the work queued before it has finished.
    ///
    /// `f` must be `'static + Send`: it runs later, on another thread. A panic in `f` is caught
    /// (it must not unwind into the driver) and logged. `f` must not call CUDA itself (a driver
    /// rule for host functions).
    ///
    /// Refused while the stream is being captured into a graph: a graph would run the callback
    /// at every replay, but an `FnOnce` can run only once.
    pub fn launch_host_func<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        self.refuse_capture("launch_host_func")?;
        extern "C" fn trampoline<F: FnOnce() + Send + 'static>(data: *mut c_void) {
            // SAFETY: `data` is the Box<F> leaked below; the driver calls this exactly once.
            let f = unsafe { Box::from_raw(data.cast::<F>()) };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                log::error!("cuda-driver: a stream host callback panicked; the panic was caught");
            }
        }
        let data = Box::into_raw(Box::new(f)).cast::<c_void>();
        // SAFETY: the trampoline matches CUhostFn and takes back ownership of `data`.
        let r = unsafe { driver()?.cuLaunchHostFunc(self.inner.raw, Some(trampoline::<F>), data) };
        if let Err(e) = r {
            // SAFETY: the driver did not take the callback, so we still own `data`.
            drop(unsafe { Box::from_raw(data.cast::<F>()) });
            return Err(e.into());
        }
        Ok(())
    }

    /// Runs `f` (which queues work on this stream) between two timing events and returns its
    /// result and the GPU time of the work it queued. Blocks until that work is done.
    pub fn time<R>(&self, f: impl FnOnce(&Stream) -> Result<R>) -> Result<(R, Duration)> {
        let start = Event::new(&self.inner.ctx, true)?;
        let end = Event::new(&self.inner.ctx, true)?;
        start.record(self)?;
        let r = f(self)?;
        end.record(self)?;
        end.synchronize()?;
        Ok((r, start.elapsed(&end)?))
    }
}

impl StreamInner {
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: live handle.
        unsafe { driver()?.cuStreamSynchronize(self.raw)? };
        Ok(())
    }

    pub(crate) fn wait_raw(&self, event: cuda_sys::CUevent) -> Result<()> {
        // SAFETY: live handles.
        unsafe { driver()?.cuStreamWaitEvent(self.raw, event, 0)? };
        Ok(())
    }

    pub(crate) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Acquire)
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Ok(drv) = driver() {
            // SAFETY: the handle is live and unused from now on. Work still queued completes;
            // the driver releases the stream afterwards.
            if let Err(e) = unsafe { drv.cuStreamDestroy_v2(self.raw) } {
                self.ctx
                    .report_drop_error("cuStreamDestroy", Error::from(e));
            }
        }
    }
}
