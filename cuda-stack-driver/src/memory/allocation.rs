//! One device allocation and the stream-ordering bookkeeping that keeps it safe.

use crate::stream::StreamInner;
use crate::{driver, Error, Result};
use cuda_stack_sys::{CUdeviceptr, CUevent};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A device allocation, freed in stream order on its home stream when the last owner (the
/// buffer, or a graph that captured work using it) drops it.
pub(crate) struct Allocation {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) bytes: usize,
    pub(crate) home: Arc<StreamInner>,
    pooled: bool,
    freed: bool,
    /// Memory another library owns ([`super::ExternalSlice`]): never freed here; dropping waits
    /// for its uses instead, and graphs may not capture it.
    external: bool,
    /// Fast path: false while no stream other than `home` has used the allocation since the
    /// home stream last caught up with them.
    has_foreign: AtomicBool,
    /// Streams other than `home` that used the allocation, with an event recorded after their
    /// last use.
    foreign: Mutex<Vec<ForeignUse>>,
}

struct ForeignUse {
    stream: Arc<StreamInner>,
    event: CUevent,
}

// SAFETY: the pointer is a device address (never dereferenced on the host); the events are
// driver handles usable from any thread; the mutable state is behind a Mutex and an atomic.
unsafe impl Send for Allocation {}
// SAFETY: as above.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// Allocates `bytes` (at least 1) on `stream`.
    pub(crate) fn new(stream: &Arc<StreamInner>, bytes: usize) -> Result<Allocation> {
        let ctx = &stream.ctx;
        let _gate = stream.enter();
        ctx.bind()?;
        let drv = driver()?;
        // On a capturing stream a stream-ordered allocation would become a graph node that
        // allocates (and possibly frees) at every replay, behind the buffer's back. `cuMemAlloc`
        // (allowed in the relaxed capture mode `begin_capture` uses) is not captured: the memory
        // exists from now until this record is dropped, and every graph whose work uses it
        // keeps the record alive (see `before_use`), so a replay never touches freed memory.
        let pooled = ctx.limits().memory_pools && !stream.is_capturing();
        let mut ptr = 0;
        let size = bytes.max(1);
        // SAFETY: out-pointer to a local; freed exactly once in Drop.
        let r = unsafe {
            if pooled {
                drv.cuMemAllocAsync(&mut ptr, size, stream.raw)
            } else {
                drv.cuMemAlloc_v2(&mut ptr, size)
            }
        };
        if let Err(e) = r {
            if e.code() == Some(cuda_stack_sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
                let (free, total) = ctx.mem_get_info().unwrap_or((0, 0));
                return Err(Error::OutOfMemory {
                    call: if pooled {
                        "cuMemAllocAsync"
                    } else {
                        "cuMemAlloc_v2"
                    },
                    requested: bytes,
                    free,
                    total,
                });
            }
            return Err(e.into());
        }
        Ok(Allocation {
            ptr,
            bytes,
            home: stream.clone(),
            pooled,
            freed: false,
            external: false,
            has_foreign: AtomicBool::new(false),
            foreign: Mutex::new(Vec::new()),
        })
    }

    /// The record for external memory at `ptr` (see [`super::ExternalSlice`]).
    pub(crate) fn external(
        stream: &Arc<StreamInner>,
        ptr: CUdeviceptr,
        bytes: usize,
    ) -> Allocation {
        Allocation {
            ptr,
            bytes,
            home: stream.clone(),
            pooled: false,
            freed: true,
            external: true,
            has_foreign: AtomicBool::new(false),
            foreign: Mutex::new(Vec::new()),
        }
    }

    /// For external memory: waits until every use queued on any stream has finished.
    pub(crate) fn settle_external(&self) -> Result<()> {
        let home = self.home.clone();
        let _gate = home.enter();
        home.ctx.bind()?;
        let r = self.order_before(&home).and_then(|()| home.synchronize());
        if r.is_err() {
            home.settle();
        }
        r
    }

    fn refuse_external_capture(&self) -> Result<()> {
        if self.external {
            return Err(Error::Unsupported {
                what: "using borrowed external memory (ExternalSlice) in a graph capture",
                why: "the graph would use the memory after the borrow ends; copy it into a \
                      DeviceBuffer first"
                    .into(),
            });
        }
        Ok(())
    }

    /// Orders `stream` after every earlier use of this allocation. Call before queuing work that
    /// uses it on `stream`, and [`Allocation::after_use`] after.
    #[inline]
    pub(crate) fn before_use(self: &Arc<Self>, stream: &Arc<StreamInner>) -> Result<()> {
        if stream.is_capturing() {
            self.refuse_external_capture()?;
            // A graph keeps what it uses alive, and orders it when replayed (see graph.rs).
            stream
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .hold(Arc::as_ptr(self), || self.clone());
            return Ok(());
        }
        self.order_before(stream)
    }

    /// [`Allocation::before_use`] for a caller that does not hold an `Arc` (a slice).
    ///
    /// # Safety
    /// `this` must point to an allocation owned by an `Arc` that is alive for the call.
    #[inline]
    pub(crate) unsafe fn before_use_ptr(
        this: *const Allocation,
        stream: &Arc<StreamInner>,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        let a = unsafe { &*this };
        if stream.is_capturing() {
            a.refuse_external_capture()?;
            stream
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .hold(this, || {
                    // SAFETY: `this` came from `Arc::as_ptr` of a live Arc (caller's contract),
                    // so taking one more strong reference is valid.
                    unsafe {
                        Arc::increment_strong_count(this);
                        Arc::from_raw(this)
                    }
                });
            return Ok(());
        }
        a.order_before(stream)
    }

    fn order_before(&self, stream: &Arc<StreamInner>) -> Result<()> {
        let at_home = Arc::ptr_eq(stream, &self.home);
        if at_home && !self.has_foreign.load(Ordering::Acquire) {
            return Ok(());
        }
        let drv = driver()?;
        let mut foreign = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if at_home {
            // Every foreign use must end up ordered before what follows on the home stream: by a
            // queued wait, or, if queuing it fails, by waiting for that stream on the host.
            let mut first_err = Ok(());
            for u in foreign.iter() {
                // SAFETY: live handles.
                if let Err(e) = unsafe { drv.cuStreamWaitEvent(stream.raw, u.event, 0) } {
                    u.stream.settle();
                    if first_err.is_ok() {
                        first_err = Err(e.into());
                    }
                }
            }
            for u in foreign.drain(..) {
                // SAFETY: our event; the waits above were queued (the driver keeps an event until
                // the waits on it resolve) or the stream was settled. A failure only leaks it.
                if let Err(e) = unsafe { drv.cuEventDestroy_v2(u.event) } {
                    self.home.ctx.report_drop_error("cuEventDestroy", e.into());
                }
            }
            self.has_foreign.store(false, Ordering::Release);
            return first_err;
        }
        // A foreign stream: wait for everything queued on the home stream so far …
        if self.home.is_capturing() {
            // Recording an event on a capturing stream and waiting on it here would pull this
            // stream into the capture without the graph knowing about its buffers.
            return Err(Error::Unsupported {
                what: "using a buffer on another stream while its home stream is captured into a graph",
                why: "use it on the capturing stream, or after the capture ends".into(),
            });
        }
        // The event is recorded on the home stream, so it is made in the home's context (which
        // differs from `stream`'s for a peer copy).
        let ev = new_event_in(&self.home.ctx)?;
        // SAFETY: live handles; the event is ours and destroyed on every path (allowed while a
        // wait on it is queued). A stream may wait on an event of another context. (A home on
        // another device's NULL stream cannot record it: the driver resolves NULL through the
        // current context, so the record fails and the use is refused with that error.)
        unsafe {
            let waited = drv
                .cuEventRecord(ev, self.home.raw)
                .and_then(|()| drv.cuStreamWaitEvent(stream.raw, ev, 0));
            if let Err(e) = drv.cuEventDestroy_v2(ev) {
                self.home.ctx.report_drop_error("cuEventDestroy", e.into());
            }
            waited?;
        }
        // … and for the other foreign streams' last uses.
        for u in foreign.iter().filter(|u| !Arc::ptr_eq(&u.stream, stream)) {
            // SAFETY: live handles.
            unsafe { drv.cuStreamWaitEvent(stream.raw, u.event, 0)? };
        }
        Ok(())
    }

    /// Records that work using this allocation was queued on `stream`. Call right after the
    /// work was queued, with the stream's enqueue guard still held.
    ///
    /// If recording fails, the work is already queued but would be untracked (a later free could
    /// overtake it), so the stream is settled first (see `StreamInner::settle`): the error is
    /// returned with the work finished.
    #[inline]
    pub(crate) fn after_use(&self, stream: &Arc<StreamInner>) -> Result<()> {
        if Arc::ptr_eq(stream, &self.home) || stream.is_capturing() {
            return Ok(());
        }
        let r = self.track_foreign(stream);
        if r.is_err() {
            stream.settle();
        }
        r
    }

    fn track_foreign(&self, stream: &Arc<StreamInner>) -> Result<()> {
        let drv = driver()?;
        let ev = new_event_in(&stream.ctx)?;
        // SAFETY: live handles.
        if let Err(e) = unsafe { drv.cuEventRecord(ev, stream.raw) } {
            // SAFETY: our event, never recorded.
            let _ = unsafe { drv.cuEventDestroy_v2(ev) };
            return Err(e.into());
        }
        let mut foreign = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = foreign.iter_mut().find(|u| Arc::ptr_eq(&u.stream, stream)) {
            let old = std::mem::replace(&mut u.event, ev);
            // SAFETY: the old event is ours and no longer referenced. A failure only leaks it.
            if let Err(e) = unsafe { drv.cuEventDestroy_v2(old) } {
                self.home.ctx.report_drop_error("cuEventDestroy", e.into());
            }
        } else {
            foreign.push(ForeignUse {
                stream: stream.clone(),
                event: ev,
            });
        }
        self.has_foreign.store(true, Ordering::Release);
        Ok(())
    }

    /// [`Allocation::after_use`] through a raw pointer.
    ///
    /// # Safety
    /// As for [`Allocation::before_use_ptr`].
    #[inline]
    pub(crate) unsafe fn after_use_ptr(
        this: *const Allocation,
        stream: &Arc<StreamInner>,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { &*this }.after_use(stream)
    }

    fn free(&mut self) -> Result<()> {
        let drv = driver()?;
        // The free names its stream, so binding matters only for `cuMemFree` without pools and
        // for a home on the NULL stream (checked again right before the free): a bind failure
        // here is reported, not a reason to keep the memory.
        if let Err(e) = self.home.ctx.bind() {
            self.home
                .ctx
                .report_drop_error("binding the context to free device memory", e);
        }
        let home = self.home.clone();
        // Make the home stream wait for the other streams' uses, then free in its order. The
        // waits may be tried again (a transient failure should not leak the memory); the free
        // itself is called once whatever it returns (see `host_callback::release_on_drop`).
        if let Err(e) = self.order_before(&home) {
            self.home
                .ctx
                .report_drop_error("ordering a free after its uses", e);
            self.order_before(&home)?;
        }
        // The NULL stream is the current context's: waiting on other streams may have made
        // another context current, and a free on another context's NULL stream would not be
        // ordered after this one's work. If the home context cannot be made current, the
        // memory is leaked (the error says so), never freed out of order.
        if home.raw.is_null() {
            self.home.ctx.bind()?;
        }
        // SAFETY: the pointer came from the matching allocation call and is freed once (callers
        // never call `free` twice); every use queued on any stream is ordered before the free,
        // on the home stream of the home context (current, for the NULL stream: above).
        unsafe {
            if self.pooled {
                drv.cuMemFreeAsync(self.ptr, home.raw)?;
            } else {
                home.synchronize()?;
                drv.cuMemFree_v2(self.ptr)?;
            }
        }
        Ok(())
    }
}

/// A new (non-timing) event in the current context.
fn new_event() -> Result<CUevent> {
    let mut ev = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    unsafe {
        driver()?.cuEventCreate(
            &mut ev,
            cuda_stack_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0,
        )?
    };
    Ok(ev)
}

/// A new (non-timing) event in `ctx`, whatever context is current: an event can only be
/// recorded on a stream of its own context, and a buffer used on another device's stream (a
/// peer copy) has its events recorded in two contexts. The calling thread's current context is
/// left as it was. Costs nothing extra when `ctx` is the one this thread has bound.
fn new_event_in(ctx: &crate::Context) -> Result<CUevent> {
    let raw = ctx.as_raw();
    if crate::context::is_bound_cached(raw) {
        return new_event();
    }
    let drv = driver()?;
    let mut cur = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    unsafe { drv.cuCtxGetCurrent(&mut cur)? };
    if cur == raw {
        return new_event();
    }
    // SAFETY: a retained, live context, popped again below on this same thread.
    unsafe { drv.cuCtxPushCurrent_v2(raw)? };
    let made = new_event();
    let mut popped = std::ptr::null_mut();
    // SAFETY: pops what was pushed above.
    let popped_ok = unsafe { drv.cuCtxPopCurrent_v2(&mut popped) };
    crate::context::invalidate_bind_cache();
    match (made, popped_ok) {
        (Ok(ev), Ok(())) => Ok(ev),
        (Ok(ev), Err(e)) => {
            // SAFETY: our event, never recorded.
            let _ = unsafe { drv.cuEventDestroy_v2(ev) };
            Err(e.into())
        }
        (Err(e), _) => Err(e),
    }
}

impl Allocation {
    /// Frees now, returning the error instead of reporting it.
    pub(crate) fn close(mut self) -> Result<()> {
        self.freed = true;
        self.free()
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if crate::host_callback::active() {
            // Inside a host function no CUDA call may be made: hand the memory to the reaper
            // thread, as a twin that owns the same pointer and bookkeeping.
            let twin = Allocation {
                ptr: self.ptr,
                bytes: self.bytes,
                home: self.home.clone(),
                pooled: self.pooled,
                freed: self.freed,
                external: self.external,
                has_foreign: AtomicBool::new(self.has_foreign.load(Ordering::Acquire)),
                foreign: Mutex::new(std::mem::take(
                    self.foreign.get_mut().unwrap_or_else(|p| p.into_inner()),
                )),
            };
            self.freed = true;
            crate::host_callback::defer(move || drop(twin));
            return;
        }
        if self.external {
            if let Err(e) = self.settle_external() {
                self.home
                    .ctx
                    .report_drop_error("waiting for uses of external memory", e);
            }
        } else if !self.freed {
            // On failure the memory is leaked, never freed twice.
            if let Err(e) = self.free() {
                self.home.ctx.report_drop_error("freeing device memory", e);
            }
        }
        let foreign = std::mem::take(self.foreign.get_mut().unwrap_or_else(|p| p.into_inner()));
        if let Ok(drv) = driver() {
            for u in foreign {
                // SAFETY: our events, no longer referenced.
                let _ = unsafe { drv.cuEventDestroy_v2(u.event) };
            }
        }
    }
}
