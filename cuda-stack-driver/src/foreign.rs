//! Work that another library queues on a stream (cuBLAS, cuBLASLt, NCCL, …), ordered and kept
//! alive exactly like a kernel launch.
//!
//! A library call such as `cublasGemmEx` queues kernels this crate never sees. What makes a
//! launch safe still has to happen around it, and [`Stream::enqueue_foreign`] does it in the same
//! order [`crate::Kernel::launch`] does:
//! 1. the buffers' devices are checked against the stream's, and the context is made current;
//! 2. the stream's enqueue guard is taken (a capture cannot begin or end meanwhile);
//! 3. every buffer is ordered after its earlier uses on other streams (or, during a graph
//!    capture, handed to the graph to keep alive), as [`crate::memory`] describes;
//! 4. the library queues its work on the raw stream;
//! 5. every buffer records this use, so a later free or another stream waits for it — whatever
//!    the library returned, since a failed call may still have queued part of its work.
//!
//! During a capture the graph also keeps an object of the caller's choice alive (the library
//! handle whose kernels and workspace the captured work uses).

use crate::memory::SliceRaw;
use crate::stream::StreamInner;
use crate::{Context, DeviceRepr, DeviceSlice, Error, Result, Stream};
use cuda_stack_sys::CUstream;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// One buffer that foreign work reads or writes, borrowed for the enqueue: built from a
/// `&DeviceSlice<T>` ([`ForeignUse::read`]) or a `&mut DeviceSlice<T>` ([`ForeignUse::write`]), so
/// the borrow checker rules out a buffer written while the host holds another view of it.
pub struct ForeignUse<'a> {
    raw: SliceRaw,
    write: bool,
    _borrow: PhantomData<&'a ()>,
}

impl std::fmt::Debug for ForeignUse<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForeignUse")
            .field("ptr", &self.raw.ptr)
            .field("bytes", &self.raw.len)
            .field("write", &self.write)
            .finish()
    }
}

impl<'a> ForeignUse<'a> {
    /// A buffer the work only reads.
    pub fn read<T: DeviceRepr>(slice: &'a DeviceSlice<T>) -> ForeignUse<'a> {
        ForeignUse {
            raw: slice.raw_parts(),
            write: false,
            _borrow: PhantomData,
        }
    }

    /// A buffer the work writes (and may read).
    pub fn write<T: DeviceRepr>(slice: &'a mut DeviceSlice<T>) -> ForeignUse<'a> {
        ForeignUse {
            raw: slice.raw_parts(),
            write: true,
            _borrow: PhantomData,
        }
    }

    /// Whether the work may write it.
    pub fn is_write(&self) -> bool {
        self.write
    }

    /// The device address of its first element.
    pub fn as_raw_ptr(&self) -> cuda_stack_sys::CUdeviceptr {
        self.raw.ptr
    }

    pub(crate) fn slice(&self) -> &DeviceSlice<u8> {
        // SAFETY: `raw` came from a live slice borrowed for `'a`, which outlives `self`; only its
        // bookkeeping (allocation, home stream) is read through this view, never its elements.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl Stream {
    /// Queues work that another library enqueues on this stream's raw handle, with the buffers
    /// it uses ordered and tracked like a kernel launch's: the buffers' devices are checked and
    /// the context made current; the stream's enqueue guard is held throughout (a capture
    /// cannot begin or end meanwhile); every buffer is ordered after its uses on other streams
    /// (or, during a capture, handed to the graph); the library queues its work; every buffer
    /// records the use, so a later free or another stream waits for it.
    ///
    /// `enqueue` is called once, with this context current and the raw stream; what it returns
    /// is passed back (a library status, typically). It is not called when a check or the
    /// ordering fails; the uses are recorded whatever it returns. When this stream is being
    /// captured into a graph, the graph keeps every buffer in `uses` and `keep_alive` alive.
    /// Refused inside a stream host function ([`Error::InHostCallback`]), like every CUDA call.
    ///
    /// # Safety
    /// The work `enqueue` queues must
    /// - be queued on the stream it is given and no other (it may not synchronize with or wait
    ///   on work this crate does not know about, and must leave the current context as it found it);
    /// - access device memory only inside the buffers in `uses`, writing only those given with
    ///   [`ForeignUse::write`], or memory owned by `keep_alive` (a library's workspace, say) or by
    ///   the library itself for as long as the library stays loaded;
    /// - keep no address of those buffers for work queued later;
    /// - touch no host memory asynchronously unless it outlives the work (when this stream is
    ///   capturing: every replay of the graph, which cannot own host memory).
    ///
    /// Every size and leading dimension the library derives its accesses from must have been
    /// checked against the buffers' lengths before the call (as the safe wrappers of `cuda-stack-blas`
    /// do); that check is what this function cannot make.
    pub unsafe fn enqueue_foreign<R>(
        &self,
        uses: &[ForeignUse<'_>],
        keep_alive: Option<&Arc<dyn Any + Send + Sync>>,
        enqueue: impl FnOnce(CUstream) -> R,
    ) -> Result<R> {
        if crate::host_callback::active() {
            return Err(crate::host_callback::refused());
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
        if let Some(keep) = keep_alive {
            keep_for_capture(&self.inner, keep);
        }
        // The uses are recorded even if `enqueue` unwinds after queuing work (a panic in a
        // wrapper's closure): the guard's drop records them, so no later free overtakes it.
        let mut record = RecordUses {
            stream: &self.inner,
            uses,
            done: false,
        };
        let r = enqueue(self.inner.raw);
        let recorded = record.record();
        recorded.map(|()| r)
    }
}

/// Records the uses of foreign work after it was queued: explicitly ([`RecordUses::record`]),
/// or from `Drop` when the closure that queued it unwinds.
struct RecordUses<'a, 'u> {
    stream: &'a Arc<StreamInner>,
    uses: &'a [ForeignUse<'u>],
    done: bool,
}

impl RecordUses<'_, '_> {
    fn record(&mut self) -> Result<()> {
        self.done = true;
        // The library may have changed the current context behind the bind cache's back.
        crate::context::invalidate_bind_cache();
        // After-use bookkeeping settles the stream itself if it fails, so an error here leaves
        // nothing untracked (as for launches).
        let mut first_err = Ok(());
        for u in self.uses {
            if let Err(e) = u.slice().after_use(self.stream) {
                if first_err.is_ok() {
                    first_err = Err(e);
                }
            }
        }
        first_err
    }
}

impl Drop for RecordUses<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.record() {
                self.stream
                    .ctx
                    .report_drop_error("recording foreign work's buffers after a panic", e);
            }
        }
    }
}

fn keep_for_capture(stream: &Arc<StreamInner>, keep: &Arc<dyn Any + Send + Sync>) {
    if stream.is_capturing() {
        stream
            .captured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .foreign
            .push(Arc::clone(keep));
    }
}

impl Context {
    /// Releases another library's object from a `Drop` the way this crate releases its own:
    /// `release` runs now, or, inside a stream host function (where CUDA calls are forbidden),
    /// later on the crate's reaper thread. A context-wide synchronize is something a library's
    /// destroy call may do (`cublasDestroy` does), and one during a graph capture would
    /// invalidate the capture: so no capture can begin while `release` runs, and if one is in
    /// progress the object is leaked (safe) rather than released. Failures and leaks are
    /// reported through [`Context::take_drop_errors`] and the log, never as a panic.
    pub fn release_foreign_on_drop(
        &self,
        what: &'static str,
        release: impl FnOnce() -> Result<()> + Send + 'static,
    ) {
        let ctx = self.clone();
        crate::host_callback::release_on_drop(self.clone(), what, move || {
            ctx.inner.while_no_capture_then(what, || {
                ctx.bind()?;
                release()
            })
        });
    }

    /// Records an error met in a `Drop` of another library's object, for
    /// [`Context::take_drop_errors`] (and the log).
    pub fn report_foreign_drop_error(&self, what: &str, e: Error) {
        self.report_drop_error(what, e)
    }
}
