//! One device allocation and the stream-ordering bookkeeping that keeps it safe.

use crate::stream::StreamInner;
use crate::{driver, Error, Result};
use cuda_sys::{CUdeviceptr, CUevent};
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
        ctx.bind()?;
        let drv = driver()?;
        let pooled = ctx.limits().memory_pools;
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
            if e.code() == Some(cuda_sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
                let (free, total) = ctx.mem_get_info().unwrap_or((0, 0));
                return Err(Error::OutOfMemory {
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
            has_foreign: AtomicBool::new(false),
            foreign: Mutex::new(Vec::new()),
        })
    }

    /// Orders `stream` after every earlier use of this allocation. Call before queuing work that
    /// uses it on `stream`, and [`Allocation::after_use`] after.
    #[inline]
    pub(crate) fn before_use(self: &Arc<Self>, stream: &Arc<StreamInner>) -> Result<()> {
        if stream.is_capturing() {
            // A graph keeps what it uses alive, and orders it when replayed (see graph.rs).
            stream
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.clone());
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
            // SAFETY: `this` came from `Arc::as_ptr` of a live Arc (caller's contract), so taking
            // one more strong reference is valid.
            let arc = unsafe {
                Arc::increment_strong_count(this);
                Arc::from_raw(this)
            };
            stream
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(arc);
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
            for u in foreign.drain(..) {
                // SAFETY: live handles; the event is destroyed right after the wait is queued
                // (allowed: the driver keeps it until the wait resolves).
                unsafe {
                    drv.cuStreamWaitEvent(stream.raw, u.event, 0)?;
                    drv.cuEventDestroy_v2(u.event)?;
                }
            }
            self.has_foreign.store(false, Ordering::Release);
            return Ok(());
        }
        // A foreign stream: wait for everything queued on the home stream so far …
        if self.home.is_capturing() {
            // Recording an event on a capturing stream and waiting on it here would pull this
            // stream into the capture without the graph knowing about its buffers.
            return Err(Error::Unsupported {
                what: "using a buffer on another stream while its home stream is captured into a graph",
                why: "use it on the capturing stream, or after end_capture".into(),
            });
        }
        let ev = new_event()?;
        // SAFETY: live handles; the event is ours.
        unsafe {
            drv.cuEventRecord(ev, self.home.raw)?;
            let waited = drv.cuStreamWaitEvent(stream.raw, ev, 0);
            drv.cuEventDestroy_v2(ev)?;
            waited?;
        }
        // … and for the other foreign streams' last uses.
        for u in foreign.iter().filter(|u| !Arc::ptr_eq(&u.stream, stream)) {
            // SAFETY: live handles.
            unsafe { drv.cuStreamWaitEvent(stream.raw, u.event, 0)? };
        }
        Ok(())
    }

    /// Records that work using this allocation was queued on `stream`.
    #[inline]
    pub(crate) fn after_use(&self, stream: &Arc<StreamInner>) -> Result<()> {
        if Arc::ptr_eq(stream, &self.home) || stream.is_capturing() {
            return Ok(());
        }
        let drv = driver()?;
        let ev = new_event()?;
        // SAFETY: live handles.
        unsafe { drv.cuEventRecord(ev, stream.raw)? };
        let mut foreign = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = foreign.iter_mut().find(|u| Arc::ptr_eq(&u.stream, stream)) {
            let old = std::mem::replace(&mut u.event, ev);
            // SAFETY: the old event is ours and no longer referenced.
            unsafe { drv.cuEventDestroy_v2(old)? };
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
        self.home.ctx.bind()?;
        let home = self.home.clone();
        // Make the home stream wait for the other streams' uses, then free in its order.
        self.order_before(&home)?;
        // SAFETY: the pointer came from the matching allocation call and is freed once; every
        // use queued on any stream is ordered before the free (above).
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

fn new_event() -> Result<CUevent> {
    let mut ev = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    unsafe {
        driver()?.cuEventCreate(&mut ev, cuda_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0)?
    };
    Ok(ev)
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
        if !self.freed {
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
