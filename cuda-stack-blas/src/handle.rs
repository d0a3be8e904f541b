//! `Blas`: a cuBLAS handle and a cuBLASLt handle for one context, with their workspaces.

use crate::algo_cache::AlgoCache;
use crate::error::{BlasError, Result};
use crate::libraries::{check_pair, libraries};
use cuda_stack_driver::cuda_stack_sys::cublas_types::{cublasHandle_t, cublasMath_t};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::cublasLtHandle_t;
use cuda_stack_driver::cuda_stack_sys::{CUstream, Cublas, CublasLt};
use cuda_stack_driver::{Context, DeviceBuffer, MemoryCache, Stream};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError, Weak};

/// How many streams keep a workspace of their own at once; the least recently used one is
/// dropped (freed in its stream's order) when another stream comes.
const WORKSPACE_STREAMS: usize = 8;

/// cuBLAS and cuBLASLt for one device: the safe entry point of this crate.
///
/// A `Blas` owns one cuBLAS handle and one cuBLASLt handle, created in the device's primary
/// context, and a **workspace per stream** it is used on (cuBLAS's recommended size: 32 MiB on
/// compute capability 9.x and newer, 4 MiB before; [`Blas::with_workspace`] picks another).
/// Every operation takes the [`Stream`] to queue on, like a kernel launch: the handle is pointed
/// at that stream (`cublasSetStream`) and at that stream's workspace (`cublasSetWorkspace`)
/// under a lock, so one `Blas` can be shared by threads and streams (calls are serialised only
/// while they are queued). The operand buffers and the workspace are ordered and tracked through
/// `cuda-stack-driver`'s [`Stream::enqueue_foreign`], exactly as kernel launches order theirs: a
/// buffer written on another stream is waited for, a free waits for the GEMM, and a graph
/// capture keeps the buffers, the workspace and the handles alive.
///
/// `Drop` destroys the handles (never panics; a failure is reported through
/// [`Context::take_drop_errors`]). [`Blas::get`] gives the process-wide handle of a device.
#[derive(Clone)]
pub struct Blas {
    pub(crate) inner: Arc<BlasInner>,
}

impl std::fmt::Debug for Blas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blas")
            .field("device", &self.inner.ctx.device().ordinal())
            .field("cublas", &self.inner.cublas.version_string())
            .field("cublas_lt", &self.inner.lt.version_string())
            .field("workspace_bytes", &self.inner.workspace_bytes)
            .finish()
    }
}

pub(crate) struct BlasInner {
    pub(crate) ctx: Context,
    pub(crate) cublas: &'static Cublas,
    pub(crate) lt: &'static CublasLt,
    pub(crate) workspace_bytes: usize,
    pub(crate) state: Mutex<State>,
    /// The algorithms cuBLASLt's heuristic chose for this handle's products.
    pub(crate) algos: AlgoCache,
}

/// What a call changes: the handles' stream and workspace, and the workspaces themselves.
pub(crate) struct State {
    pub(crate) handle: cublasHandle_t,
    pub(crate) lt_handle: cublasLtHandle_t,
    /// The stream and workspace address the cuBLAS handle was last given (`None`: unknown).
    pub(crate) bound: Option<(usize, u64)>,
    /// Workspaces by stream, most recently used last.
    workspaces: Vec<(Stream, DeviceBuffer<u8>)>,
}

// SAFETY: the handles are opaque pointers that cuBLAS allows to be used from any thread, one
// thread at a time: every use goes through the `Mutex<State>`.
unsafe impl Send for State {}

/// The handles and this stream's workspace, borrowed from the locked [`State`] for one call.
pub(crate) struct ForStream<'a> {
    pub(crate) handle: cublasHandle_t,
    pub(crate) lt_handle: cublasLtHandle_t,
    /// See [`State::bound`].
    pub(crate) bound: &'a mut Option<(usize, u64)>,
    pub(crate) workspace: &'a mut DeviceBuffer<u8>,
}

impl State {
    /// The workspace for `stream`, allocated on it (its home) on first use, so that the GEMMs
    /// on one stream take `cuda-stack-driver`'s same-stream fast path.
    pub(crate) fn workspace_for(&mut self, stream: &Stream, bytes: usize) -> Result<ForStream<'_>> {
        let i = match self.workspaces.iter().position(|(s, _)| s.same_as(stream)) {
            Some(i) => i,
            None => {
                if self.workspaces.len() >= WORKSPACE_STREAMS {
                    // Freed in its stream's order, after every use (tracked like any buffer).
                    self.workspaces.remove(0);
                }
                // SAFETY: a workspace is scratch memory cuBLAS writes before it reads.
                let buf = unsafe { stream.alloc::<u8>(bytes)? };
                self.workspaces.push((stream.clone(), buf));
                self.workspaces.len() - 1
            }
        };
        let entry = self.workspaces.remove(i);
        self.workspaces.push(entry);
        let last = self.workspaces.last_mut().expect("just pushed");
        Ok(ForStream {
            handle: self.handle,
            lt_handle: self.lt_handle,
            bound: &mut self.bound,
            workspace: &mut last.1,
        })
    }
}

impl MemoryCache for BlasInner {
    /// Frees every stream's workspace (in its stream's order, after the work that uses it; a
    /// graph that captured work with one keeps that memory until it is dropped). The next call
    /// on a stream allocates its workspace again. Skipped while another thread queues work
    /// through the handle.
    fn release_cached(&self) -> cuda_stack_driver::Result<()> {
        let Some(mut st) = lock_unless_busy(&self.state) else {
            return Ok(());
        };
        st.workspaces.clear();
        st.bound = None;
        Ok(())
    }
}

/// `m` locked, or `None` while another thread holds it (a cache that is busy skips a release;
/// a poisoned lock holds a consistent state here: every critical section replaces whole values).
fn lock_unless_busy<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The process-wide handle of one device ([`Blas::get`]), made on first use.
struct ProcessHandle {
    blas: Mutex<Option<Blas>>,
}

impl MemoryCache for ProcessHandle {
    /// Drops the process-wide handle when nothing else holds it: its drop destroys the cuBLAS
    /// and cuBLASLt handles (freeing what the libraries allocated for themselves) and its
    /// workspaces. Skipped while another thread is getting it.
    fn release_cached(&self) -> cuda_stack_driver::Result<()> {
        let Some(mut slot) = lock_unless_busy(&self.blas) else {
            return Ok(());
        };
        if slot
            .as_ref()
            .is_some_and(|b| Arc::strong_count(&b.inner) == 1)
        {
            *slot = None;
        }
        Ok(())
    }
}

/// Refuses a workspace no allocation can have.
fn check_workspace(bytes: usize) -> Result<()> {
    if bytes > isize::MAX as usize {
        return Err(BlasError::Workspace {
            bytes,
            why: "larger than any allocation can be",
        });
    }
    Ok(())
}

/// The recommended workspace for a device of compute capability `major` (the same advice for
/// cuBLAS 12 and 13).
fn default_workspace(ctx: &Context) -> usize {
    let major = ctx
        .device()
        .compute_capability()
        .map(|c| c.major)
        .unwrap_or(0);
    if major >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

impl Blas {
    /// A new handle pair for `ctx`'s device with the recommended workspace per stream.
    /// Fails with [`BlasError::Load`] when cuBLAS is not installed (never a panic).
    pub fn new(ctx: &Context) -> Result<Blas> {
        Self::with_workspace(ctx, default_workspace(ctx))
    }

    /// A new handle pair whose workspaces (one per stream) have `bytes` bytes each. Less than
    /// the recommended size limits which algorithms cuBLAS may pick (0 allows only those that
    /// need none); cuBLASLt products that need more fail with [`BlasError::NoAlgorithm`].
    pub fn with_workspace(ctx: &Context, bytes: usize) -> Result<Blas> {
        check_workspace(bytes)?;
        let (cublas, lt) = libraries()?;
        Self::with_libraries(ctx, cublas, lt, bytes)
    }

    /// A new handle pair on the given cuBLAS and cuBLASLt instead of the process-wide ones
    /// ([`Cublas::get`]), with workspaces of `bytes` bytes: to use a particular library, e.g. one
    /// loaded with [`Cublas::load_from`] and [`CublasLt::load_from`] (leaked or kept in a
    /// `static`, as the handle refers to them for its whole life), or one of each major version
    /// side by side. They must be one supported major version, 12 or 13
    /// ([`BlasError::Version`], [`BlasError::VersionMismatch`]).
    pub fn with_libraries(
        ctx: &Context,
        cublas: &'static Cublas,
        lt: &'static CublasLt,
        bytes: usize,
    ) -> Result<Blas> {
        check_workspace(bytes)?;
        check_pair(cublas, lt)?;
        ctx.bind()?;
        let mut handle: cublasHandle_t = std::ptr::null_mut();
        let mut lt_handle: cublasLtHandle_t = std::ptr::null_mut();
        // SAFETY: out-pointers to locals; the context is current. Each handle is destroyed on
        // every path below (or by `Drop` once it is owned).
        unsafe {
            cublas.cublasCreate_v2(&mut handle)?;
            // Explicitly no TF32 unless a call asks for it through its compute type.
            let made = cublas
                .cublasSetMathMode(handle, cublasMath_t::CUBLAS_DEFAULT_MATH)
                .and_then(|()| lt.cublasLtCreate(&mut lt_handle));
            if let Err(e) = made {
                let _ = cublas.cublasDestroy_v2(handle);
                return Err(e.into());
            }
        }
        let blas = Blas {
            inner: Arc::new(BlasInner {
                ctx: ctx.clone(),
                cublas,
                lt,
                workspace_bytes: bytes,
                state: Mutex::new(State {
                    handle,
                    lt_handle,
                    bound: None,
                    workspaces: Vec::new(),
                }),
                algos: AlgoCache::default(),
            }),
        };
        // The workspaces are memory kept for reuse: `Context::release_memory_caches` (and so
        // `cuda_stack_runtime::empty_cache`) frees them, so a process that drops everything and
        // empties the caches holds no device memory at exit.
        let weak: Weak<dyn MemoryCache> = Arc::downgrade(&blas.inner) as Weak<BlasInner>;
        ctx.register_memory_cache(weak);
        Ok(blas)
    }

    /// The process-wide `Blas` of `ctx`'s device (made with [`Blas::new`] on first use and
    /// kept, like the kernel cache). Contexts are primary contexts, one per device, so the cache
    /// is keyed by device ordinal. The handle counts as memory kept for reuse: while no one
    /// else holds it, [`Context::release_memory_caches`] (and so
    /// `cuda_stack_runtime::empty_cache`) destroys it, freeing what cuBLAS allocated for itself,
    /// and the next call makes a new one.
    pub fn get(ctx: &Context) -> Result<Blas> {
        static CACHE: OnceLock<Mutex<HashMap<usize, Arc<ProcessHandle>>>> = OnceLock::new();
        let ordinal = ctx.device().ordinal();
        let slot = {
            let mut map = CACHE
                .get_or_init(|| Mutex::new(HashMap::new()))
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            map.entry(ordinal)
                .or_insert_with(|| {
                    let slot = Arc::new(ProcessHandle {
                        blas: Mutex::new(None),
                    });
                    let weak: Weak<dyn MemoryCache> = Arc::downgrade(&slot) as Weak<ProcessHandle>;
                    ctx.register_memory_cache(weak);
                    slot
                })
                .clone()
        };
        let mut blas = slot.blas.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = &*blas {
            return Ok(b.clone());
        }
        let b = Blas::new(ctx)?;
        *blas = Some(b.clone());
        Ok(b)
    }

    /// Whether cuBLAS and cuBLASLt of a supported major version (13 or 12, one release) can be
    /// loaded here (they need no GPU to load); the error lists every place tried, or says which
    /// versions were found.
    pub fn available() -> Result<()> {
        libraries().map(|_| ())
    }

    /// The context the handles belong to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Bytes of each stream's workspace.
    pub fn workspace_bytes(&self) -> usize {
        self.inner.workspace_bytes
    }

    /// The loaded cuBLAS (path, version).
    pub fn cublas(&self) -> &'static Cublas {
        self.inner.cublas
    }

    /// The loaded cuBLASLt.
    pub fn cublas_lt(&self) -> &'static CublasLt {
        self.inner.lt
    }

    /// The raw cuBLAS handle (escape hatch). Using it is `unsafe` in any case (every cuBLAS
    /// call is): the caller must not use it while this `Blas` queues work from another thread,
    /// and must order the buffers it passes itself. This crate sets the handle's stream and
    /// workspace before each of its own calls.
    pub fn as_raw(&self) -> cublasHandle_t {
        self.lock().handle
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The locked state, for queuing `op` on `stream`: refused with
    /// [`BlasError::DeviceMismatch`] unless the stream is on this handle's device (the buffers
    /// are checked against the stream by [`Stream::enqueue_foreign`]).
    pub(crate) fn lock_for(
        &self,
        op: &'static str,
        stream: &Stream,
    ) -> Result<MutexGuard<'_, State>> {
        if !stream.context().same_as(&self.inner.ctx) {
            return Err(BlasError::DeviceMismatch {
                op,
                handle_device: self.inner.ctx.device().ordinal(),
                stream_device: stream.context().device().ordinal(),
            });
        }
        Ok(self.lock())
    }

    /// What a graph capturing this handle's work must keep alive: the handles.
    pub(crate) fn keep_alive(&self) -> Arc<dyn Any + Send + Sync> {
        self.inner.clone()
    }
}

/// Points the cuBLAS handle at `stream` and its workspace, unless it already is.
///
/// # Safety
/// `handle` is live and locked by the caller; `workspace` is a device buffer of `bytes` bytes
/// that stays allocated while work queued with it may run.
pub(crate) unsafe fn bind_stream(
    cublas: &Cublas,
    handle: cublasHandle_t,
    bound: &mut Option<(usize, u64)>,
    stream: CUstream,
    workspace: u64,
    bytes: usize,
) -> std::result::Result<(), cuda_stack_driver::cuda_stack_sys::CublasError> {
    if *bound == Some((stream as usize, workspace)) {
        return Ok(());
    }
    *bound = None;
    // SAFETY: forwarded to the caller. `cublasSetStream` resets the workspace to cuBLAS's own
    // pool, so the workspace is set after it, every time.
    unsafe {
        cublas.cublasSetStream_v2(handle, stream)?;
        cublas.cublasSetWorkspace_v2(handle, workspace as *mut std::ffi::c_void, bytes)?;
    }
    *bound = Some((stream as usize, workspace));
    Ok(())
}

impl Drop for BlasInner {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let (handle, lt_handle) = (st.handle as usize, st.lt_handle as usize);
        let (cublas, lt) = (self.cublas, self.lt);
        // The workspaces are freed by their own `Drop`, in their streams' order after every
        // use; the handles queue nothing more once this runs.
        self.ctx
            .release_foreign_on_drop("cublasDestroy / cublasLtDestroy", move || {
                // SAFETY: the handles are ours, live, and never used again.
                let r = unsafe {
                    let a = cublas.cublasDestroy_v2(handle as cublasHandle_t);
                    let b = lt.cublasLtDestroy(lt_handle as cublasLtHandle_t);
                    a.and(b)
                };
                r.map_err(|e| cuda_stack_driver::Error::Foreign {
                    library: "cuBLAS",
                    message: e.to_string(),
                })
            });
    }
}
