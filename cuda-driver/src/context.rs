//! The primary context of a device: retained on creation, released when the last handle goes.

use crate::{driver, Device, DeviceLimits, Error, Result, Stream};
use cuda_sys::{CUcontext, CUlimit};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bumped whenever a context is released, so a thread's cached "current context" is re-checked.
static RELEASES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The context this thread last made (or found) current through `bind`, and the value of
    /// `RELEASES` then.
    static BOUND: Cell<(CUcontext, u64)> = const { Cell::new((std::ptr::null_mut(), u64::MAX)) };
}

/// A device's primary context (the one the CUDA runtime and PyTorch use too), shared through an
/// `Arc`: cloning is cheap, and the context is released when the last clone, and the last object
/// made in it (buffers, streams, modules hold a clone), is dropped.
///
/// Operations bind the context to the calling thread when it is not already current, so a
/// `Context` can be used from any thread.
///
/// ## Errors from `Drop`
/// `Drop` cannot return an error. When releasing a resource fails (a buffer's free, a stream's
/// destroy …), the error is logged with the `log` crate at `warn` level **and** kept in the
/// context (the last 64): [`Context::take_drop_errors`] returns them. Types also offer an explicit
/// fallible `free()`/`close()` for callers who want the error at the call.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) raw: CUcontext,
    pub(crate) device: Device,
    pub(crate) limits: DeviceLimits,
    drop_errors: Mutex<Vec<Error>>,
    /// Graph captures in progress on streams of this context.
    pub(crate) captures: AtomicUsize,
    /// Modules whose unload waits for the end of every capture (see `Module`'s drop).
    pub(crate) deferred_unloads: Mutex<Vec<cuda_sys::CUmodule>>,
}

// SAFETY: a CUcontext handle may be used from any thread (the driver API is thread-safe and we
// bind it per thread before use); the other fields are Send + Sync.
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared access only reads the handle or goes through the Mutex.
unsafe impl Sync for ContextInner {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.ordinal())
            .field("raw", &self.inner.raw)
            .finish()
    }
}

/// Context limits (`cuCtxSetLimit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Stack size per GPU thread, in bytes.
    StackSize,
    /// Size of the FIFO that device-side `printf` writes to, in bytes.
    PrintfFifoSize,
    /// Size of the heap device-side `malloc` uses, in bytes.
    MallocHeapSize,
}

impl Limit {
    fn raw(self) -> CUlimit {
        match self {
            Limit::StackSize => CUlimit::CU_LIMIT_STACK_SIZE,
            Limit::PrintfFifoSize => CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE,
            Limit::MallocHeapSize => CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE,
        }
    }
}

impl Context {
    /// Retains the primary context of device `ordinal` (initialising the driver if needed).
    pub fn new(ordinal: usize) -> Result<Context> {
        let drv = driver()?;
        let device = Device::get(ordinal)?;
        let limits = device.limits()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; released in Drop.
        unsafe { drv.cuDevicePrimaryCtxRetain(&mut raw, device.as_raw())? };
        let ctx = Context {
            inner: Arc::new(ContextInner {
                raw,
                device,
                limits,
                drop_errors: Mutex::new(Vec::new()),
                captures: AtomicUsize::new(0),
                deferred_unloads: Mutex::new(Vec::new()),
            }),
        };
        ctx.bind()?;
        Ok(ctx)
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The limits launches are validated against (read once, at creation).
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.limits
    }

    /// The raw `CUcontext` (escape hatch).
    pub fn as_raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// Makes this context current on the calling thread, unless it already is
    /// (`cuCtxGetCurrent`, then `cuCtxSetCurrent` only if needed).
    pub fn bind(&self) -> Result<()> {
        let drv = driver()?;
        let mut cur = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; setting a retained, live context.
        unsafe {
            drv.cuCtxGetCurrent(&mut cur)?;
            if cur != self.inner.raw {
                drv.cuCtxSetCurrent(self.inner.raw)?;
            }
        }
        BOUND.with(|b| b.set((self.inner.raw, RELEASES.load(Ordering::Acquire))));
        Ok(())
    }

    /// [`Context::bind`] for hot paths (launches): skips the driver call when this thread already
    /// bound this context through `bind` and no context was released since. Code that changes
    /// the current context with raw driver calls should call [`Context::bind`] afterwards.
    #[inline]
    pub(crate) fn bind_cached(&self) -> Result<()> {
        let (raw, gen) = BOUND.with(Cell::get);
        if raw == self.inner.raw && gen == RELEASES.load(Ordering::Acquire) {
            return Ok(());
        }
        self.bind()
    }

    /// Waits until all work queued in this context has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: no arguments.
        unsafe { driver()?.cuCtxSynchronize()? };
        Ok(())
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`).
    pub fn mem_get_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: out-pointers to locals.
        unsafe { driver()?.cuMemGetInfo_v2(&mut free, &mut total)? };
        Ok((free, total))
    }

    /// Sets a context limit.
    pub fn set_limit(&self, limit: Limit, value: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: plain values.
        unsafe { driver()?.cuCtxSetLimit(limit.raw(), value)? };
        Ok(())
    }

    /// Reads a context limit.
    pub fn limit(&self, limit: Limit) -> Result<usize> {
        self.bind()?;
        let mut v = 0;
        // SAFETY: out-pointer to a local.
        unsafe { driver()?.cuCtxGetLimit(&mut v, limit.raw())? };
        Ok(v)
    }

    /// Sets how many bytes the device's default memory pool keeps cached after a synchronize
    /// before returning memory to the system (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`). The driver's
    /// default is 0 (return everything at each synchronize); `u64::MAX` keeps everything.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        if !self.inner.limits.memory_pools {
            return Err(Error::Unsupported {
                what: "memory pools",
                why: "this device does not support cuMemAllocAsync; allocations use cuMemAlloc"
                    .into(),
            });
        }
        let drv = driver()?;
        let mut pool = std::ptr::null_mut();
        let mut value = bytes;
        // SAFETY: out-pointer to a local; the attribute takes a pointer to a u64.
        unsafe {
            drv.cuDeviceGetDefaultMemPool(&mut pool, self.inner.device.as_raw())?;
            drv.cuMemPoolSetAttribute(
                pool,
                cuda_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )?;
        }
        Ok(())
    }

    /// The legacy default stream (the NULL stream) of this context.
    pub fn default_stream(&self) -> Stream {
        Stream::null(self.clone())
    }

    /// A new stream that does not synchronize with the default stream.
    pub fn new_stream(&self) -> Result<Stream> {
        Stream::new(self, crate::StreamKind::NonBlocking, 0)
    }

    /// Errors that `Drop` implementations met in this context since the last call, oldest first.
    pub fn take_drop_errors(&self) -> Vec<Error> {
        std::mem::take(
            &mut *self
                .inner
                .drop_errors
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Records an error met in a `Drop` (see the type docs).
    pub(crate) fn report_drop_error(&self, what: &str, e: Error) {
        self.inner.report_drop_error(what, e)
    }

    /// Whether two handles are the same context.
    pub fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl ContextInner {
    pub(crate) fn report_drop_error(&self, what: &str, e: Error) {
        log::warn!("cuda-driver: {what} failed in Drop: {e}");
        let mut v = self.drop_errors.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() >= 64 {
            v.remove(0);
        }
        v.push(e);
    }
}

impl ContextInner {
    /// Unloads the modules whose unload was deferred, after synchronizing the context; only
    /// when no capture is in progress (a context-wide synchronize would invalidate it).
    pub(crate) fn unload_deferred(&self) -> Result<()> {
        let pending = std::mem::take(
            &mut *self
                .deferred_unloads
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        if pending.is_empty() {
            return Ok(());
        }
        let drv = driver()?;
        // SAFETY: makes this (live, retained) context current and waits for its work, so no
        // kernel of these modules is queued or running; each module is unloaded once.
        unsafe {
            drv.cuCtxSetCurrent(self.raw)?;
            drv.cuCtxSynchronize()?;
            for m in pending {
                drv.cuModuleUnload(m)?;
            }
        }
        Ok(())
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        RELEASES.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.unload_deferred() {
            log::warn!("cuda-driver: unloading deferred modules failed in Drop: {e}");
        }
        if let Ok(drv) = driver() {
            // SAFETY: releases the retain taken in `Context::new`; nothing made in this context
            // is alive any more (they all hold a `Context`).
            if let Err(e) = unsafe { drv.cuDevicePrimaryCtxRelease_v2(self.device.as_raw()) } {
                log::warn!("cuda-driver: releasing the primary context failed in Drop: {e}");
            }
        }
    }
}
