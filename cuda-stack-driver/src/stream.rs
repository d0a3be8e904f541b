//! Streams: ordered queues of GPU work.

use crate::{driver, Context, Error, Event, Result};
use cuda_stack_sys::{CUresult, CUstream};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
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
    /// Whether a graph capture is in progress. Only a stream made for a capture
    /// ([`Context::begin_capture`]) ever captures; its flag changes only under `gate`'s write
    /// lock, while every enqueue holds the read lock (see [`StreamInner::enter`]).
    pub(crate) capturing: AtomicBool,
    /// `Some` for a capture stream: readers are enqueues, the writer is the capture's start/end.
    gate: Option<RwLock<()>>,
    /// While a graph capture is in progress, what its work uses (kept alive by the graph).
    pub(crate) captured: Mutex<Captured>,
}

/// What the work captured into a graph references, so the graph can own it.
#[derive(Default)]
pub(crate) struct Captured {
    /// Device allocations read or written by captured work, each once (see `held`).
    pub(crate) allocations: Vec<Arc<crate::memory::Allocation>>,
    /// The addresses of the records in `allocations`: a capture holds one strong reference per
    /// allocation it used, however often it used it, so "held by this capture and nothing
    /// else" is a count ([`crate::DeviceBuffer::held_only_by_capture`]).
    pub(crate) held: std::collections::HashSet<usize>,
    /// Kernels (each keeps its module loaded).
    pub(crate) functions: Vec<crate::Function>,
    /// Objects other libraries' captured work needs (see [`Stream::enqueue_foreign`]).
    pub(crate) foreign: Vec<Arc<dyn std::any::Any + Send + Sync>>,
    /// Whether the captured work has run yet (see [`crate::CaptureTicket`]).
    pub(crate) ticket: Option<crate::CaptureTicket>,
}

impl Captured {
    /// Keeps the allocation at `ptr` alive for the graph (once): `arc` makes the strong
    /// reference, and is called only when the capture does not hold one yet.
    pub(crate) fn hold(
        &mut self,
        ptr: *const crate::memory::Allocation,
        arc: impl FnOnce() -> Arc<crate::memory::Allocation>,
    ) {
        if self.held.insert(ptr as usize) {
            self.allocations.push(arc());
        }
    }
}

/// Held for the duration of one enqueue (check, driver call, bookkeeping): while it lives, the
/// stream's capture state cannot change, so the check and the work it guards are one step for
/// every other thread.
pub(crate) struct EnqueueGuard<'a> {
    _read: Option<RwLockReadGuard<'a, ()>>,
    /// For a kernel launch: the read side of its module's globals lock.
    _module: Option<RwLockReadGuard<'a, ()>>,
}

impl<'a> EnqueueGuard<'a> {
    /// Also holds `module_lock` until the enqueue ends: for a kernel launch, the read side of its
    /// module's globals lock.
    pub(crate) fn also_holding(mut self, module_lock: RwLockReadGuard<'a, ()>) -> Self {
        self._module = Some(module_lock);
        self
    }
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
        Self::create(ctx, kind, priority, None)
    }

    /// Creates a stream this crate owns; `gate` is `Some` for a capture stream.
    fn create(
        ctx: &Context,
        kind: StreamKind,
        priority: i32,
        gate: Option<RwLock<()>>,
    ) -> Result<Stream> {
        ctx.bind()?;
        let flags = match kind {
            StreamKind::Blocking => 0,
            StreamKind::NonBlocking => cuda_stack_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; destroyed when the last handle drops.
        unsafe { driver()?.cuStreamCreateWithPriority(&mut raw, flags, priority)? };
        Ok(Self::wrap_with(ctx.clone(), raw, true, gate))
    }

    /// A handle for a stream another library owns (PyTorch's `torch.cuda.current_stream().cuda_stream`,
    /// CuPy, another Rust crate). The stream is borrowed: this crate never destroys it. Checks
    /// that it belongs to `ctx` (`cuStreamGetCtx`).
    ///
    /// # Safety
    /// - `raw` is a live stream, and stays live while the returned handle, any clone of it, any
    ///   buffer allocated on it (buffers are freed in their home stream's order) or any work
    ///   queued through them exists;
    /// - nobody begins a graph capture on it while this crate queues work on it (this crate
    ///   keeps the bookkeeping that makes captures sound only for its own capture streams).
    pub unsafe fn from_raw(ctx: &Context, raw: CUstream) -> Result<Stream> {
        // The special handles name a different queue depending on the calling thread
        // (`CU_STREAM_PER_THREAD`) or the default stream's mode (`CU_STREAM_LEGACY`), while a
        // `Stream` stands for one queue (buffers are freed in their home stream's order): use
        // `Context::default_stream` for the legacy NULL stream.
        if raw as usize == 0x1 || raw as usize == 0x2 {
            return Err(Error::Unsupported {
                what: "Stream::from_raw with CU_STREAM_LEGACY or CU_STREAM_PER_THREAD",
                why: "these handles name a different stream on each thread (or mode); pass a \
                      real stream, or use Context::default_stream() for the NULL stream"
                    .into(),
            });
        }
        ctx.bind()?;
        let mut owner = std::ptr::null_mut();
        // SAFETY: `raw` is live (caller's promise); out-pointer to a local.
        unsafe { driver()?.cuStreamGetCtx(raw, &mut owner)? };
        if owner != ctx.as_raw() {
            return Err(Error::Unsupported {
                what: "Stream::from_raw with a stream of another context",
                why: format!(
                    "the stream belongs to context {owner:?}, not device {}'s primary context",
                    ctx.device().ordinal()
                ),
            });
        }
        Ok(Self::wrap(ctx.clone(), raw, false))
    }

    pub(crate) fn null(ctx: Context) -> Stream {
        Self::wrap(ctx, std::ptr::null_mut(), false)
    }

    fn wrap(ctx: Context, raw: CUstream, owned: bool) -> Stream {
        Self::wrap_with(ctx, raw, owned, None)
    }

    fn wrap_with(ctx: Context, raw: CUstream, owned: bool, gate: Option<RwLock<()>>) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                raw,
                ctx,
                owned,
                capturing: AtomicBool::new(false),
                gate,
                captured: Mutex::new(Captured::default()),
            }),
        }
    }

    /// A new non-blocking stream that may be captured into a graph (see [`Context::begin_capture`]).
    pub(crate) fn new_capture_stream(ctx: &Context) -> Result<Stream> {
        Self::create(ctx, StreamKind::NonBlocking, 0, Some(RwLock::new(())))
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

    /// Whether this stream was made for a graph capture ([`Context::begin_capture`]).
    pub fn is_capture_stream(&self) -> bool {
        self.inner.gate.is_some()
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
    /// Events cannot be recorded during a graph capture (see [`Event::record`]), so a wait can
    /// never pull this stream into another stream's capture.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        if !event.context().same_as(self.context()) {
            return Err(Error::DeviceMismatch {
                what: "the event",
                expected: self.context().device().ordinal() as i32,
                found: event.context().device().ordinal() as i32,
            });
        }
        let _gate = self.inner.enter();
        self.inner.wait_raw(event.as_raw())
    }

    /// Whether the driver says this stream is capturing (`cuStreamIsCapturing`).
    pub fn is_capturing(&self) -> Result<bool> {
        let mut status = cuda_stack_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: out-pointer to a local; live stream.
        unsafe { driver()?.cuStreamIsCapturing(self.inner.raw, &mut status)? };
        Ok(status != cuda_stack_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Fails when the stream is capturing: for operations that hand the driver host memory or
    /// host code whose lifetime a graph could not keep. Call with an [`EnqueueGuard`] held.
    pub(crate) fn refuse_capture(&self, what: &'static str) -> Result<()> {
        if self.inner.is_capturing() {
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
    /// (it must not unwind into the driver) and logged. The driver forbids CUDA calls from a host
    /// function; here any call `f` makes through this crate returns
    /// [`Error::InHostCallback`] instead, and CUDA objects dropped inside `f` (a captured buffer
    /// or stream, say) are released later on another thread.
    ///
    /// Refused while the stream is being captured into a graph: a graph would run the callback
    /// at every replay, but an `FnOnce` can run only once.
    pub fn launch_host_func<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        let _gate = self.inner.enter();
        self.refuse_capture("launch_host_func")?;
        let data = Box::into_raw(Box::new(f)).cast::<c_void>();
        // SAFETY: the trampoline matches CUhostFn and takes back ownership of `data`.
        let r = unsafe {
            driver()?.cuLaunchHostFunc(
                self.inner.raw,
                Some(crate::host_callback::trampoline::<F>),
                data,
            )
        };
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
    /// Enters an enqueue: until the guard drops, the capture state of this stream is fixed
    /// (a capture cannot begin or end). Normal streams never capture and take no lock.
    #[inline]
    pub(crate) fn enter(&self) -> EnqueueGuard<'_> {
        EnqueueGuard {
            _read: self
                .gate
                .as_ref()
                .map(|g| g.read().unwrap_or_else(|p| p.into_inner())),
            _module: None,
        }
    }

    /// The capture gate's write side (capture start and end); `None` for normal streams.
    pub(crate) fn gate_write(&self) -> Option<std::sync::RwLockWriteGuard<'_, ()>> {
        self.gate
            .as_ref()
            .map(|g| g.write().unwrap_or_else(|p| p.into_inner()))
    }

    /// Makes sure the work queued on this stream so far is no longer running, after an error
    /// that left it untracked: synchronizes the stream (twice), or else waits until the stream
    /// reports idle, or, when it cannot say, until a context-wide synchronize succeeds or fails
    /// (then the context has a sticky error and runs no more work: the crate's documented
    /// assumption). See [`crate::context::ContextInner::wait_until_idle`].
    pub(crate) fn settle(&self) {
        // Twice: a transient failure should not cost a context-wide wait.
        if self.synchronize().is_ok() || self.synchronize().is_ok() {
            return;
        }
        let Ok(drv) = driver() else {
            return; // no driver, or inside a host callback: nothing can be waited for here
        };
        self.ctx.inner.wait_until_idle(|| {
            if self.raw.is_null() && self.ctx.bind().is_err() {
                return Err(());
            }
            // SAFETY: live handle (the NULL stream of the context made current just above).
            match unsafe { drv.cuStreamQuery(self.raw) } {
                Ok(()) => Ok(true),
                Err(e) if e.code() == Some(CUresult::CUDA_ERROR_NOT_READY) => Ok(false),
                Err(_) => Err(()),
            }
        });
    }

    /// The NULL stream is resolved through the calling thread's current context: make this
    /// stream's context current first, so it is this context's NULL stream that is meant.
    fn bind_if_null(&self) -> Result<()> {
        if self.raw.is_null() {
            self.ctx.bind_cached()?;
        }
        Ok(())
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind_if_null()?;
        // SAFETY: live handle (for the NULL stream, its context is current: above).
        unsafe { driver()?.cuStreamSynchronize(self.raw)? };
        Ok(())
    }

    pub(crate) fn wait_raw(&self, event: cuda_stack_sys::CUevent) -> Result<()> {
        self.bind_if_null()?;
        // SAFETY: live handles (for the NULL stream, its context is current: above).
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
        let raw = self.raw as usize;
        crate::host_callback::release_on_drop(self.ctx.clone(), "cuStreamDestroy", move || {
            // SAFETY: the handle is live and unused from now on (a failed destroy leaves it
            // live). Work still queued completes; the driver releases the stream afterwards.
            unsafe { driver()?.cuStreamDestroy_v2(raw as CUstream)? };
            Ok(())
        });
    }
}
