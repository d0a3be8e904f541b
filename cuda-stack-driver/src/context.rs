//! The primary context of a device: retained on creation, released when the last handle goes.

use crate::{driver, Device, DeviceLimits, Error, Result, Stream};
use cuda_stack_sys::{CUcontext, CUlimit};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The process-wide handles: one per device ordinal, held weakly so the context is still released
/// when its last handle goes. [`Context::new`] hands out the live one if there is one.
static REGISTRY: crate::registry::WeakRegistry<ContextInner> = crate::registry::WeakRegistry::new();

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
/// ## One device, one handle
/// The driver has one primary context per device, and so does this crate: every
/// [`Context::new`] of the same ordinal, from any thread, in any crate, returns the same
/// process-wide handle while one is alive ([`Context::same_as`] is true), so buffers, kernels,
/// streams and events made through any of them work together, and the per-context state (drop
/// errors, graph captures in progress, deferred module unloads) is shared. After the last handle
/// is dropped the context is released; the next `Context::new` retains it again.
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
    /// Held while a capture begins and while a context-wide synchronize (or module unload)
    /// runs, so neither can slip in between the other's check and its driver call.
    pub(crate) sync_gate: Mutex<()>,
    /// Modules whose unload waits for the end of every capture (see `Module`'s drop).
    pub(crate) deferred_unloads: Mutex<Vec<cuda_stack_sys::CUmodule>>,
    /// The peer contexts this context has enabled access to (see [`Context::enable_peer_access`]).
    pub(crate) peers: Mutex<crate::peer_record::PeerRecord<ContextInner>>,
    /// Caches of device memory other crates registered (see [`crate::MemoryCache`]).
    pub(crate) memory_caches: Mutex<Vec<std::sync::Weak<dyn crate::MemoryCache>>>,
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
    /// The primary context of device `ordinal` (initialising the driver and retaining the
    /// context if needed): the process-wide handle, shared with every other caller.
    pub fn new(ordinal: usize) -> Result<Context> {
        let drv = driver()?;
        let device = Device::get(ordinal)?;
        let inner = REGISTRY.get_or_try_insert(ordinal, || -> Result<Arc<ContextInner>> {
            let limits = device.limits()?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: out-pointer to a local; released when the ContextInner drops.
            unsafe { drv.cuDevicePrimaryCtxRetain(&mut raw, device.as_raw())? };
            Ok(Arc::new(ContextInner {
                raw,
                device,
                limits,
                drop_errors: Mutex::new(Vec::new()),
                captures: AtomicUsize::new(0),
                sync_gate: Mutex::new(()),
                deferred_unloads: Mutex::new(Vec::new()),
                peers: Mutex::new(Default::default()),
                memory_caches: Mutex::new(Vec::new()),
            }))
        })?;
        let ctx = Context { inner };
        ctx.bind()?;
        Ok(ctx)
    }

    /// The handle for a context another library made current or handed over (PyTorch's
    /// `torch.cuda.current_context`, CuPy, the CUDA runtime, another Rust crate): the same
    /// process-wide handle [`Context::new`] gives for its device. This crate takes its own
    /// retain; the caller's retain is not used after this call returns.
    ///
    /// Only primary contexts are accepted (the runtime and the frameworks use them); any other
    /// context gives [`Error::Unsupported`].
    ///
    /// # Safety
    /// `raw` must be a live context handle (not destroyed, not reset) for the duration of this
    /// call.
    pub unsafe fn from_raw(raw: CUcontext) -> Result<Context> {
        let drv = driver()?;
        let mut dev = 0;
        let mut popped = std::ptr::null_mut();
        // SAFETY: `raw` is live (caller's promise); out-pointers to locals.
        unsafe { drv.cuCtxPushCurrent_v2(raw)? };
        // From here the current context may differ from what the bind cache says, whatever
        // fails below: forget the cache on every path.
        invalidate_bind_cache();
        // SAFETY: as above; pushed just now on this thread, so the pop (when it succeeds)
        // leaves the thread's context stack as it was.
        let got = unsafe { drv.cuCtxGetDevice(&mut dev) };
        // SAFETY: as above.
        let popped_ok = unsafe { drv.cuCtxPopCurrent_v2(&mut popped) };
        invalidate_bind_cache();
        popped_ok?;
        got?;
        let ordinal = Device::all()?
            .iter()
            .position(|d| d.as_raw() == dev)
            .ok_or_else(|| Error::Unsupported {
                what: "Context::from_raw",
                why: format!("the context's device {dev} is not among the driver's devices"),
            })?;
        let ctx = Context::new(ordinal)?;
        if ctx.as_raw() != raw {
            return Err(Error::Unsupported {
                what: "Context::from_raw with a context that is not the device's primary context",
                why: "this crate works in primary contexts only (one per device, shared with the \
                      CUDA runtime and the frameworks); create the other library's work in the \
                      primary context"
                    .into(),
            });
        }
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
        self.inner.bind()
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
    ///
    /// Refused with [`Error::Unsupported`] while a graph capture is in progress on a stream of
    /// this context: the driver would fail the call *and* invalidate the capture (another
    /// thread's). Synchronize the streams you use instead.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .while_no_capture("synchronizing the whole context", || Ok(()))
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

    /// The device's default memory pool, or [`Error::Unsupported`] where the device has none.
    fn default_pool(&self) -> Result<cuda_stack_sys::CUmemoryPool> {
        if !self.inner.limits.memory_pools {
            return Err(Error::Unsupported {
                what: "memory pools",
                why: "this device does not support cuMemAllocAsync; allocations use cuMemAlloc"
                    .into(),
            });
        }
        let mut pool = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the device handle is this live context's.
        unsafe { driver()?.cuDeviceGetDefaultMemPool(&mut pool, self.inner.device.as_raw())? };
        Ok(pool)
    }

    /// Reads a u64 attribute of the device's default memory pool.
    fn pool_attribute(&self, attr: cuda_stack_sys::CUmemPool_attribute) -> Result<u64> {
        let pool = self.default_pool()?;
        let mut value = 0u64;
        // SAFETY: the pool is the device's default (never destroyed); callers pass attributes
        // whose value is one u64, written to a local.
        unsafe { driver()?.cuMemPoolGetAttribute(pool, attr, (&mut value as *mut u64).cast())? };
        Ok(value)
    }

    /// Sets how many bytes the device's default memory pool keeps cached after a synchronize
    /// before returning memory to the system (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`). The driver's
    /// default is 0 (return everything at each synchronize); `u64::MAX` keeps everything.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        let pool = self.default_pool()?;
        let mut value = bytes;
        // SAFETY: the pool is the device's default; the attribute takes a pointer to a u64,
        // here a local.
        unsafe {
            driver()?.cuMemPoolSetAttribute(
                pool,
                cuda_stack_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )?
        };
        Ok(())
    }

    /// How much of the device's default memory pool this process holds: `reserved` bytes taken
    /// from the device (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`) and `used` bytes of them in live
    /// allocations (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`). Every allocation of this crate comes
    /// from that pool where the device has one, so unlike [`Context::mem_get_info`] (the whole
    /// device, every process) this is this process's own allocated memory.
    pub fn pool_usage(&self) -> Result<PoolUsage> {
        use cuda_stack_sys::CUmemPool_attribute as A;
        Ok(PoolUsage {
            reserved: self.pool_attribute(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            used: self.pool_attribute(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
        })
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

/// Forgets which context this thread has bound, so the next `bind_cached` asks the driver
/// (after code that changed the current context behind the cache's back).
pub(crate) fn invalidate_bind_cache() {
    BOUND.with(|b| b.set((std::ptr::null_mut(), u64::MAX)));
}

/// Whether this thread's bind cache says `ctx` is current (no driver call; `false` means
/// "ask the driver", not "it is not current").
pub(crate) fn is_bound_cached(ctx: CUcontext) -> bool {
    let (raw, gen) = BOUND.with(Cell::get);
    raw == ctx && gen == RELEASES.load(Ordering::Acquire)
}

/// Notes that `ctx` is now current on this thread (after a push).
pub(crate) fn note_bound(ctx: CUcontext) {
    BOUND.with(|b| b.set((ctx, RELEASES.load(Ordering::Acquire))));
}

impl ContextInner {
    /// See [`Context::bind`].
    pub(crate) fn bind(&self) -> Result<()> {
        let drv = driver()?;
        let mut cur = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; setting a retained, live context.
        unsafe {
            drv.cuCtxGetCurrent(&mut cur)?;
            if cur != self.raw {
                drv.cuCtxSetCurrent(self.raw)?;
            }
        }
        note_bound(self.raw);
        Ok(())
    }

    /// Runs `then` after a context-wide synchronize, with no capture able to begin in between
    /// (both take `sync_gate`). Refused while a capture is in progress: the driver would fail
    /// the synchronize and invalidate the capture.
    pub(crate) fn while_no_capture<R>(
        &self,
        what: &'static str,
        then: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let _gate = self.sync_gate.lock().unwrap_or_else(|p| p.into_inner());
        if self.captures.load(Ordering::Acquire) > 0 {
            return Err(Error::Unsupported {
                what,
                why: "a graph capture is in progress on a stream of this context, and a \
                      context-wide synchronize would invalidate it; synchronize streams instead"
                    .into(),
            });
        }
        self.bind()?;
        // SAFETY: no arguments; this context is current (above).
        unsafe { driver()?.cuCtxSynchronize()? };
        then()
    }

    /// The last resort after a failed wait (rule 4): returns only once the work `poll` watches
    /// is known not to run any more. `poll` says `Ok(true)` when it is done, `Ok(false)` while it
    /// runs, `Err(())` when the driver cannot tell; then a context-wide synchronize decides (if
    /// that fails too, the context has a sticky error and runs no more work: the crate's
    /// documented assumption). While a graph capture forbids that synchronize, it keeps
    /// polling: returning earlier would let the host, or a free, overtake work still running.
    /// Waits no longer than the GPU takes, as a synchronize would.
    pub(crate) fn wait_until_idle(&self, mut poll: impl FnMut() -> std::result::Result<bool, ()>) {
        let mut pause = Duration::from_micros(50);
        loop {
            match poll() {
                Ok(true) => return,
                Ok(false) => {}
                Err(()) => match self.while_no_capture("waiting after a failed wait", || Ok(())) {
                    Ok(()) => return,
                    Err(Error::Unsupported { .. }) => {} // a capture: poll on
                    Err(_) => return,                    // sticky error: nothing runs
                },
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// Runs `then` with no capture able to begin meanwhile (it holds `sync_gate`); refused when
    /// a capture is in progress. For calls that may synchronize the context behind our back.
    pub(crate) fn while_no_capture_then<R>(
        &self,
        what: &'static str,
        then: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let _gate = self.sync_gate.lock().unwrap_or_else(|p| p.into_inner());
        if self.captures.load(Ordering::Acquire) > 0 {
            return Err(Error::Unsupported {
                what,
                why: "a graph capture is in progress on a stream of this context, and the call                       may synchronize the whole context, which would invalidate it; the object                       is leaked instead"
                    .into(),
            });
        }
        then()
    }

    pub(crate) fn report_drop_error(&self, what: &str, e: Error) {
        log::warn!("cuda-stack-driver: {what} failed in Drop: {e}");
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
        if self
            .deferred_unloads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            return Ok(());
        }
        self.while_no_capture("unloading modules", || {
            let pending = std::mem::take(
                &mut *self
                    .deferred_unloads
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            unload_modules(pending)
        })
    }
}

/// Unloads `modules` (in a context made current and synchronized by the caller), each once: a
/// module whose unload fails is leaked (the call may have taken effect and returned an earlier
/// asynchronous error), and the first error is returned.
fn unload_modules(modules: Vec<cuda_stack_sys::CUmodule>) -> Result<()> {
    let drv = driver()?;
    let mut first_err = Ok(());
    for m in modules {
        // SAFETY: the context is current and synchronized, so no kernel of `m` is queued or
        // running, and no Function of it is alive (it was deferred when its last one dropped);
        // each module leaves the deferred list before this and is unloaded once.
        if let Err(e) = unsafe { drv.cuModuleUnload(m) } {
            if first_err.is_ok() {
                first_err = Err(e.into());
            }
        }
    }
    first_err
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        let raw = self.raw as usize;
        let device = self.device;
        let modules: Vec<usize> = std::mem::take(
            self.deferred_unloads
                .get_mut()
                .unwrap_or_else(|p| p.into_inner()),
        )
        .into_iter()
        .map(|m| m as usize)
        .collect();
        let release = move || {
            let raw = raw as CUcontext;
            let modules: Vec<cuda_stack_sys::CUmodule> = modules
                .into_iter()
                .map(|m| m as cuda_stack_sys::CUmodule)
                .collect();
            if !modules.is_empty() {
                // No capture can be in progress: every capture stream holds this context.
                let synced = driver().and_then(|drv| {
                    // SAFETY: the context is still retained (released below).
                    unsafe {
                        drv.cuCtxSetCurrent(raw)?;
                        drv.cuCtxSynchronize()?;
                    }
                    Ok(())
                });
                invalidate_bind_cache();
                let r = synced.and_then(|()| unload_modules(modules));
                if let Err(e) = r {
                    log::warn!("cuda-stack-driver: unloading deferred modules failed in Drop: {e}");
                }
            }
            RELEASES.fetch_add(1, Ordering::AcqRel);
            if let Ok(drv) = driver() {
                // SAFETY: releases the retain taken in `Context::new`; nothing made in this
                // context is alive any more (they all hold a `Context`).
                if let Err(e) = unsafe { drv.cuDevicePrimaryCtxRelease_v2(device.as_raw()) } {
                    log::warn!(
                        "cuda-stack-driver: releasing the primary context failed in Drop: {e}"
                    );
                }
            }
        };
        if crate::host_callback::active() {
            crate::host_callback::defer(release);
        } else {
            release();
        }
    }
}

/// This process's share of a device's default memory pool ([`Context::pool_usage`]), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUsage {
    /// Taken from the device by the pool (live allocations plus what the pool keeps cached).
    pub reserved: u64,
    /// In live allocations.
    pub used: u64,
}
