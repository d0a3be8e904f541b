//! [`Communicator`]: one rank of an NCCL communicator, and how it fails without hanging.

use crate::backoff::backoff;
use crate::config::CommConfig;
use crate::error::{AbortReason, Error, Result};
use crate::raw_comm::RawComm;
use crate::teardown::{self, Teardown};
use crate::watchdog::{self, Watched};
use crate::{env, open_group, UniqueId};
use cuda_stack_driver::{Context, Event, Stream};
use cuda_stack_sys::nccl_types::{ncclComm_t, ncclResult_t};
use cuda_stack_sys::Nccl;
use std::collections::VecDeque;
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// How long an abort is waited for before the caller goes on (see `CommInner::abort_locked`).
const ABORT_GRACE: Duration = Duration::from_secs(10);

/// Where a communicator is in its life.
pub(crate) enum CommState {
    /// Usable.
    Live(RawComm),
    /// Aborted (the handle went to a teardown thread); every later call reports why.
    Aborted(AbortReason),
    /// Handed to a teardown thread by `Drop`.
    Gone,
    /// Lent to a [`crate::Group`] open on some thread: NCCL holds operations of this
    /// communicator that it queues only at the group's end. Every other call is refused with
    /// [`Error::CommInGroup`] (never blocked: a group leaked with `mem::forget` never ends), the
    /// watchdog leaves it alone, and a drop leaks the handle rather than destroy what NCCL's
    /// group still refers to.
    Grouped(RawComm),
}

/// Events recorded after this communicator's operations, oldest first, for the watchdog; and
/// finished ones kept for reuse.
#[derive(Default)]
pub(crate) struct Watch {
    pending: VecDeque<(Event, Instant, &'static str)>,
    spare: Vec<Event>,
}

impl Watch {
    /// Drops finished operations from the front (an event whose query fails is treated as
    /// finished: its context is broken and runs nothing more).
    fn retire_finished(&mut self) {
        while let Some((ev, _, _)) = self.pending.front() {
            if matches!(ev.query(), Ok(false)) {
                break;
            }
            if let Some((ev, _, _)) = self.pending.pop_front() {
                if self.spare.len() < 32 {
                    self.spare.push(ev);
                }
            }
        }
    }
}

/// What every handle of one communicator shares.
pub(crate) struct CommInner {
    pub(crate) nccl: &'static Nccl,
    pub(crate) ctx: Context,
    pub(crate) rank: usize,
    pub(crate) nranks: usize,
    pub(crate) blocking: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) state: Mutex<CommState>,
    watch: Mutex<Watch>,
}

/// One rank of an NCCL communicator: its device, its rank among `size()` ranks, and the
/// operations ([`Communicator::all_reduce`] and the others, see the crate docs) it queues on
/// streams of its device.
///
/// Made by [`Communicator::init_rank`] (one rank per process or per thread, with a
/// [`UniqueId`] the caller shares), or several at once for GPUs of one process by
/// [`crate::CommGroup`]. `Send + Sync`: calls on one communicator are serialised by a lock (NCCL
/// allows one call at a time per communicator).
///
/// ## When a peer dies
/// Communicators made here are **non-blocking** NCCL communicators (`ncclConfig_t.blocking =
/// 0`, except those of [`crate::CommGroup::init_all`] and those asked for with
/// [`CommConfig::blocking`], see the crate docs): no NCCL call blocks the host inside NCCL;
/// this crate polls `ncclCommGetAsyncError` instead, with the [`CommConfig::timeout`]. A
/// process-wide watchdog thread also checks every communicator with a timeout every 50 ms: an
/// asynchronous error NCCL reports, or an operation still unfinished on the GPU after the timeout
/// (a collective waiting for a peer that died), aborts the communicator (`ncclCommAbort`, which
/// makes the waiting kernels exit). From then on every call returns [`Error::Aborted`] with the
/// reason; [`Communicator::check`] and [`Communicator::synchronize`] report it too. The data of
/// operations in flight at the abort is undefined (but every buffer keeps valid values of its
/// type, and no memory is touched after it is freed: the kernels have exited).
///
/// ## Drop
/// Never panics, and never blocks for long on peers: the handle goes to a short-lived teardown
/// thread that finalizes it (`ncclCommFinalize`, which in recent NCCL versions waits for the
/// other ranks to finalize theirs) and destroys it, or aborts it when that fails or the timeout
/// passes. The drop waits for that thread at most 5 s — normally the other ranks end theirs at
/// the same time and it takes milliseconds — so that a program that ends right after its
/// communicators does not exit in the middle of NCCL's teardown. Ranks of one process are best
/// dropped together: from their own threads, or as a [`crate::CommGroup`] (whose drop ends all
/// its ranks at once); dropped one after another on one thread, each may wait out the 5 s.
#[derive(Clone)]
pub struct Communicator {
    pub(crate) inner: Arc<CommInner>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.nranks)
            .field("device", &self.device())
            .field("blocking", &self.inner.blocking)
            .finish()
    }
}

impl Communicator {
    /// Rank `rank` of a communicator of `nranks` ranks identified by `id`, on GPU `device`
    /// (`ncclCommInitRankConfig`, non-blocking). Every rank must call this with the same `id` and
    /// `nranks` — from other processes, or from other threads of this one — and it returns when
    /// all have joined, or fails with [`Error::Aborted`] ([`AbortReason::Timeout`]) when they do
    /// not within the [`CommConfig::timeout`].
    ///
    /// Several ranks in one process should come from [`crate::CommGroup`] (one thread can then
    /// drive them all, and peer access between their GPUs is enabled first); with one
    /// `init_rank` per thread, enable peer access between the GPUs first
    /// ([`cuda_stack_driver::Context::enable_peer_access`]), since NCCL may read a peer's buffers
    /// directly when both ranks share a process.
    pub fn init_rank(
        id: &UniqueId,
        rank: usize,
        nranks: usize,
        device: usize,
        config: &CommConfig,
    ) -> Result<Communicator> {
        env::check_nvls_disabled()?;
        open_group::refuse_if_open("Communicator::init_rank")?;
        check_rank("init_rank", "rank", rank, nranks)?;
        let nccl = Nccl::get()?;
        let ctx = Context::new(device)?;
        if config.blocking {
            return init_blocking(nccl, &ctx, id, rank, nranks, config);
        }
        let name = config.name.as_deref().map(c_string);
        let mut cfg = config.raw(name.as_deref());
        let mut raw: ncclComm_t = std::ptr::null_mut();
        ctx.bind()?;
        // SAFETY: out-pointer to a local; `cfg` (and the name it points to) outlive the call;
        // the id is 128 plain bytes; rank and nranks were checked. NCCL uses the device of the
        // current context, bound above.
        let called = unsafe {
            nccl.ncclCommInitRankConfig(&mut raw, to_int(nranks)?, id.raw, to_int(rank)?, &mut cfg)
        };
        finish_init(nccl, &ctx, raw, rank, nranks, false, config, called)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.inner.nranks
    }

    /// The GPU (ordinal) this rank uses.
    pub fn device(&self) -> usize {
        self.inner.ctx.device().ordinal()
    }

    /// The context of that GPU (streams for this communicator's operations come from it).
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Whether this is a blocking NCCL communicator ([`crate::CommGroup::init_all`]): NCCL may
    /// then block inside a call, and only GPU-side hangs are caught by the timeout.
    pub fn is_blocking(&self) -> bool {
        self.inner.blocking
    }

    /// The timeout after which a stuck operation aborts the communicator (`None`: never).
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.timeout
    }

    /// Why the communicator was aborted, or `None` while it is usable.
    pub fn abort_reason(&self) -> Option<AbortReason> {
        match &*self.inner.lock() {
            CommState::Aborted(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// Ok while the communicator is healthy; otherwise the error that says why not: an
    /// asynchronous error NCCL reports now (the communicator is then aborted) or an earlier
    /// abort. Does not wait for anything.
    pub fn check(&self) -> Result<()> {
        open_group::refuse_if_open("Communicator::check")?;
        let mut state = self.inner.lock();
        self.inner.poll_async_error(&mut state)
    }

    /// Waits for the work queued on `stream` so far, then [`Communicator::check`]s: the way to
    /// learn that an operation did not complete (a timeout aborted it, its kernels exited early,
    /// and the stream's work "finished" with undefined data). Without a timeout, waits as long
    /// as the GPU does.
    pub fn synchronize(&self, stream: &Stream) -> Result<()> {
        self.check_stream(stream)?;
        stream.synchronize()?;
        self.check()
    }

    /// Aborts the communicator now (`ncclCommAbort`, run on a teardown thread): kernels of its
    /// operations still running exit, and every later call returns [`Error::Aborted`]
    /// ([`AbortReason::Requested`]). The other ranks should abort theirs too (recent NCCL versions
    /// wait for every rank of a node in the abort). Aborting twice is harmless.
    pub fn abort(&self) -> Result<()> {
        open_group::refuse_if_open("Communicator::abort")?;
        let mut state = self.inner.lock();
        match &*state {
            CommState::Live(_) => self.inner.abort_locked(&mut state, AbortReason::Requested),
            // NCCL holds operations of it that it has not queued: aborting now would let the
            // group's end launch work on a destroyed communicator.
            CommState::Grouped(_) => {
                self.inner.live(&state)?;
            }
            CommState::Aborted(_) | CommState::Gone => {}
        }
        Ok(())
    }

    /// Runs `f` with the raw `ncclComm_t` (escape hatch for NCCL calls this crate does not
    /// wrap), holding the communicator's lock so that no other call and no abort runs meanwhile.
    ///
    /// # Safety
    /// `f` must not destroy, finalize or abort the communicator, nor keep the handle; work it
    /// queues must follow the rules of [`cuda_stack_driver::Stream::enqueue_foreign`] (which it should
    /// use for any buffer it hands to NCCL).
    pub unsafe fn with_raw<R>(&self, f: impl FnOnce(ncclComm_t) -> R) -> Result<R> {
        open_group::refuse_if_open("Communicator::with_raw")?;
        let state = self.inner.lock();
        let raw = self.inner.live(&state)?;
        Ok(f(raw))
    }

    /// [`Error::DeviceMismatch`] unless `stream` is on this communicator's device.
    pub(crate) fn check_stream(&self, stream: &Stream) -> Result<()> {
        if stream.context().same_as(&self.inner.ctx) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what: "the stream",
                rank: self.inner.rank,
                expected: self.device(),
                found: stream.context().device().ordinal(),
            })
        }
    }

    /// Whether two handles are the same communicator.
    pub fn same_as(&self, other: &Communicator) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A blocking communicator's `ncclCommInitRankConfig`, on a thread of its own so that the
/// caller waits at most `config.timeout`: NCCL blocks inside the call until every rank has
/// joined. When the caller has given up, the thread ends whatever NCCL makes (on a teardown
/// thread) and nothing else ever sees it.
fn init_blocking(
    nccl: &'static Nccl,
    ctx: &Context,
    id: &UniqueId,
    rank: usize,
    nranks: usize,
    config: &CommConfig,
) -> Result<Communicator> {
    let (n, r) = (to_int(nranks)?, to_int(rank)?);
    let raw_id = id.raw;
    let name = config.name.clone();
    let thread_config = config.clone();
    let thread_ctx = ctx.clone();
    // The thread's answer, or the caller's giving up: whichever comes first decides, under
    // the lock, who ends the communicator.
    let slot = Arc::new((Mutex::new(InitSlot::Waiting), std::sync::Condvar::new()));
    let thread_slot = Arc::clone(&slot);
    let work = move || {
        let name = name.as_deref().map(c_string);
        let mut cfg = thread_config.raw(name.as_deref());
        let mut raw: ncclComm_t = std::ptr::null_mut();
        let called = thread_ctx.bind().map_err(Error::from).map(|()| {
            // SAFETY: out-pointer to a local; `cfg` (and the name it points to) outlive the
            // call; the id is 128 plain bytes; rank and nranks were checked by the caller. NCCL
            // uses the device of the current context, bound just above on this thread.
            unsafe { nccl.ncclCommInitRankConfig(&mut raw, n, raw_id, r, &mut cfg) }
        });
        let (lock, cv) = &*thread_slot;
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*st, InitSlot::GaveUp) {
            // The caller stopped waiting: end what NCCL made, if anything.
            if !raw.is_null() {
                teardown::spawn(nccl, thread_ctx, RawComm(raw), Teardown::Abort);
            }
        } else {
            *st = InitSlot::Done(RawComm(raw), called);
            cv.notify_all();
        }
    };
    std::thread::Builder::new()
        .name("cuda-stack-nccl-init".into())
        .spawn(work)
        .map_err(|e| Error::Invalid {
            what: "communicator initialisation",
            problem: format!("cannot start the thread that waits inside NCCL: {e}"),
        })?;
    let start = Instant::now();
    let (lock, cv) = &*slot;
    let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
    while matches!(*st, InitSlot::Waiting) {
        match config.timeout {
            None => st = cv.wait(st).unwrap_or_else(|p| p.into_inner()),
            Some(t) => {
                let left = t.saturating_sub(start.elapsed());
                if left.is_zero() {
                    *st = InitSlot::GaveUp;
                    return Err(Error::Aborted {
                        rank,
                        nranks,
                        reason: AbortReason::Timeout {
                            what: "communicator initialisation",
                            waited: start.elapsed(),
                        },
                    });
                }
                st = cv
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
    let InitSlot::Done(RawComm(raw), called) = std::mem::replace(&mut *st, InitSlot::GaveUp) else {
        return Err(Error::Invalid {
            what: "communicator initialisation",
            problem: "internal: the init thread left no result".into(),
        });
    };
    drop(st);
    match called {
        Ok(called) => finish_init(nccl, ctx, raw, rank, nranks, true, config, called),
        Err(e) => {
            if !raw.is_null() {
                teardown::spawn(nccl, ctx.clone(), RawComm(raw), Teardown::Abort);
            }
            Err(e)
        }
    }
}

/// Where a blocking initialisation's thread and its caller meet.
enum InitSlot {
    /// Neither has finished.
    Waiting,
    /// The caller stopped waiting (timeout); the thread ends what it made.
    GaveUp,
    /// The thread's result, for the caller.
    Done(
        RawComm,
        Result<std::result::Result<(), cuda_stack_sys::NcclError>>,
    ),
}

/// The end of every initialisation: wraps `raw` (when NCCL made one), waits until it is ready
/// (non-blocking communicators) and registers it with the watchdog.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_init(
    nccl: &'static Nccl,
    ctx: &Context,
    raw: ncclComm_t,
    rank: usize,
    nranks: usize,
    blocking: bool,
    config: &CommConfig,
    called: std::result::Result<(), cuda_stack_sys::NcclError>,
) -> Result<Communicator> {
    let in_progress = match &called {
        Ok(()) => false,
        Err(e) if e.code() == Some(ncclResult_t::ncclInProgress) => true,
        Err(_) => false,
    };
    if let Err(e) = called.as_ref() {
        if !in_progress {
            let last_error = if raw.is_null() {
                String::new()
            } else {
                // SAFETY: a handle NCCL returned; aborted right after.
                let s = unsafe { last_error(nccl, raw) };
                teardown::spawn(nccl, ctx.clone(), RawComm(raw), Teardown::Abort);
                s
            };
            return Err(Error::Call {
                source: e.clone(),
                last_error,
            });
        }
    }
    if raw.is_null() {
        return Err(Error::Invalid {
            what: "communicator initialisation",
            problem: "NCCL returned success but no communicator".into(),
        });
    }
    let comm = Communicator::wrap(nccl, ctx, raw, rank, nranks, blocking, config.timeout);
    if in_progress || !blocking {
        let mut state = comm.inner.lock();
        comm.inner
            .wait_ready(&mut state, "communicator initialisation")?;
    }
    Ok(comm)
}

impl Communicator {
    /// The handle for a communicator NCCL just made (registered with the watchdog when it has a
    /// timeout).
    pub(crate) fn wrap(
        nccl: &'static Nccl,
        ctx: &Context,
        raw: ncclComm_t,
        rank: usize,
        nranks: usize,
        blocking: bool,
        timeout: Option<Duration>,
    ) -> Communicator {
        let inner = Arc::new(CommInner {
            nccl,
            ctx: ctx.clone(),
            rank,
            nranks,
            blocking,
            timeout,
            state: Mutex::new(CommState::Live(RawComm(raw))),
            watch: Mutex::new(Watch::default()),
        });
        if timeout.is_some() {
            watchdog::register(&inner);
        }
        Communicator { inner }
    }
}

impl CommInner {
    /// The state, locked (a poisoned lock still holds a consistent state: every critical section
    /// replaces it whole).
    pub(crate) fn lock(&self) -> MutexGuard<'_, CommState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_watch(&self) -> MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The raw handle of a live communicator, or the error that says why there is none.
    pub(crate) fn live(&self, state: &CommState) -> Result<ncclComm_t> {
        match state {
            CommState::Live(raw) => Ok(raw.0),
            CommState::Aborted(reason) => Err(self.aborted(reason.clone())),
            CommState::Gone => Err(self.aborted(AbortReason::Requested)),
            CommState::Grouped(_) => Err(Error::CommInGroup {
                rank: self.rank,
                nranks: self.nranks,
            }),
        }
    }

    fn aborted(&self, reason: AbortReason) -> Error {
        Error::Aborted {
            rank: self.rank,
            nranks: self.nranks,
            reason,
        }
    }

    /// Marks the communicator aborted with `reason` and hands its handle to a teardown thread
    /// that calls `ncclCommAbort` (which may wait for the other ranks of the node, so it never
    /// runs on the caller's thread). The caller holds the state lock.
    pub(crate) fn abort_locked(&self, state: &mut CommState, reason: AbortReason) {
        log::error!(
            "cuda-stack-nccl: aborting rank {} of {} (device {}): {reason}",
            self.rank,
            self.nranks,
            self.ctx.device().ordinal()
        );
        let old = std::mem::replace(state, CommState::Aborted(reason));
        self.lock_watch().pending.clear();
        if let CommState::Live(raw) = old {
            let done = teardown::spawn(self.nccl, self.ctx.clone(), raw, Teardown::Abort);
            // Once the abort has returned, NCCL has stopped every launch of this communicator
            // (its kernels exit, and a launch still in progress on NCCL's own thread queues
            // nothing more), so the caller can record its buffers' uses behind it. An abort
            // that waits for other ranks longer than this finishes on its own.
            if done.recv_timeout(ABORT_GRACE).is_err() {
                log::warn!(
                    "cuda-stack-nccl: ncclCommAbort of rank {} has not returned after {} s; going on",
                    self.rank,
                    ABORT_GRACE.as_secs()
                );
            }
        }
    }

    /// Asks NCCL for an asynchronous error (`ncclCommGetAsyncError`); an error aborts the
    /// communicator and is returned. `ncclInProgress` counts as healthy.
    pub(crate) fn poll_async_error(&self, state: &mut CommState) -> Result<()> {
        let raw = self.live(state)?;
        match self.async_state(raw) {
            Ok(st) if st == ncclResult_t::ncclSuccess || st == ncclResult_t::ncclInProgress => {
                Ok(())
            }
            other => {
                let reason = self.async_reason(raw, other);
                self.abort_locked(state, reason.clone());
                Err(self.aborted(reason))
            }
        }
    }

    /// `ncclCommGetAsyncError` of a live handle (the caller holds the lock).
    fn async_state(
        &self,
        raw: ncclComm_t,
    ) -> std::result::Result<ncclResult_t, cuda_stack_sys::NcclError> {
        let mut st = ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator, used under its lock; out-pointer to a local.
        unsafe { self.nccl.ncclCommGetAsyncError(raw, &mut st)? };
        Ok(st)
    }

    /// The abort reason for an asynchronous error (or a failed query of it).
    fn async_reason(
        &self,
        raw: ncclComm_t,
        st: std::result::Result<ncclResult_t, cuda_stack_sys::NcclError>,
    ) -> AbortReason {
        match st {
            Ok(code) => {
                let name = code
                    .name()
                    .map_or_else(|| format!("ncclResult_t {}", code.0), str::to_string);
                // SAFETY: returns a static string (or null) for any result.
                let desc = unsafe { self.nccl.ncclGetErrorString(code) }
                    .ok()
                    .and_then(|p| unsafe { c_str(p) })
                    .unwrap_or_default();
                // SAFETY: a live handle, under the lock.
                let last = unsafe { last_error(self.nccl, raw) };
                let message = if last.is_empty() {
                    format!("{name}: {desc}")
                } else {
                    format!("{name}: {desc} ({last})")
                };
                AbortReason::AsyncError { code, message }
            }
            Err(e) => AbortReason::AsyncError {
                code: e.code().unwrap_or(ncclResult_t::ncclInternalError),
                message: format!("ncclCommGetAsyncError itself failed: {e}"),
            },
        }
    }

    /// Polls `ncclCommGetAsyncError` until the communicator is no longer `ncclInProgress`: Ok
    /// when it became ready, [`Error::Aborted`] (after aborting it) on an error or when the
    /// timeout passes. The caller holds the state lock.
    pub(crate) fn wait_ready(&self, state: &mut CommState, what: &'static str) -> Result<()> {
        let raw = self.live(state)?;
        let start = Instant::now();
        let mut round = 0u32;
        loop {
            match self.async_state(raw) {
                Ok(st) if st == ncclResult_t::ncclSuccess => return Ok(()),
                Ok(st) if st == ncclResult_t::ncclInProgress => {}
                other => {
                    let reason = self.async_reason(raw, other);
                    self.abort_locked(state, reason.clone());
                    return Err(self.aborted(reason));
                }
            }
            if let Some(t) = self.timeout {
                let waited = start.elapsed();
                if waited > t {
                    let reason = AbortReason::Timeout { what, waited };
                    self.abort_locked(state, reason.clone());
                    return Err(self.aborted(reason));
                }
            }
            backoff(&mut round);
        }
    }

    /// Turns what an NCCL call on this communicator returned into the crate's result: waits
    /// while it is in progress (non-blocking communicators); for an error, adds NCCL's last-error
    /// message, and aborts the communicator if NCCL reports it broken.
    pub(crate) fn settle(
        &self,
        state: &mut CommState,
        what: &'static str,
        called: std::result::Result<(), cuda_stack_sys::NcclError>,
    ) -> Result<()> {
        match called {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ncclResult_t::ncclInProgress) => {
                self.wait_ready(state, what)
            }
            Err(e) => {
                let raw = self.live(state)?;
                // SAFETY: a live handle, under the lock.
                let last_error = unsafe { last_error(self.nccl, raw) };
                // An argument error leaves the communicator usable; a broken one is aborted.
                let _ = self.poll_async_error(state);
                Err(Error::Call {
                    source: e,
                    last_error,
                })
            }
        }
    }

    /// Records an event after work just queued on `stream`, so the watchdog can see whether it
    /// finishes in time. Failing to record only loses the watch (logged), never the work.
    pub(crate) fn track(&self, stream: &Stream, what: &'static str) {
        if self.timeout.is_none() {
            return;
        }
        let mut w = self.lock_watch();
        w.retire_finished();
        let ev = match w.spare.pop() {
            Some(e) => e,
            None => match Event::new(&self.ctx, false) {
                Ok(e) => e,
                Err(e) => {
                    log::warn!("cuda-stack-nccl: cannot watch {what} for the timeout: {e}");
                    return;
                }
            },
        };
        match ev.record(stream) {
            Ok(()) => w.pending.push_back((ev, Instant::now(), what)),
            Err(e) => log::warn!("cuda-stack-nccl: cannot watch {what} for the timeout: {e}"),
        }
    }
}

impl Watched for CommInner {
    /// The watchdog's look at this communicator: skipped while another thread uses it; aborts it
    /// on an asynchronous error or when its oldest unfinished operation is older than the
    /// timeout.
    fn watchdog_check(&self) {
        let mut state = match self.state.try_lock() {
            Ok(s) => s,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if !matches!(&*state, CommState::Live(_)) {
            return;
        }
        if self.poll_async_error(&mut state).is_err() {
            return;
        }
        let Some(timeout) = self.timeout else { return };
        let expired = {
            let mut w = self.lock_watch();
            w.retire_finished();
            w.pending
                .front()
                .map(|(_, t0, what)| (*what, t0.elapsed()))
                .filter(|(_, waited)| *waited > timeout)
        };
        if let Some((what, waited)) = expired {
            self.abort_locked(&mut state, AbortReason::Timeout { what, waited });
        }
    }
}

impl CommInner {
    /// Hands a live communicator to a teardown thread (finalize, destroy) and marks it gone;
    /// the receiver hears when the teardown is over. `None` when there was nothing to end.
    pub(crate) fn start_teardown(&self) -> Option<std::sync::mpsc::Receiver<()>> {
        let state = std::mem::replace(&mut *self.lock(), CommState::Gone);
        match state {
            CommState::Live(raw) => {
                let how = Teardown::Finalize {
                    blocking: self.blocking,
                    timeout: self.timeout,
                };
                Some(teardown::spawn(self.nccl, self.ctx.clone(), raw, how))
            }
            CommState::Grouped(_) => {
                // Only a group leaked with `mem::forget` can still hold it when the last
                // handle goes: NCCL's group state on that thread refers to the communicator
                // (and never ends), so destroying it could let NCCL touch freed memory. Leak it.
                log::error!(
                    "cuda-stack-nccl: rank {} of {} was dropped while a leaked cuda_stack_nccl::Group \
                     still holds it; its NCCL handle is leaked",
                    self.rank,
                    self.nranks
                );
                None
            }
            _ => None,
        }
    }
}

impl Drop for CommInner {
    fn drop(&mut self) {
        if let Some(done) = self.start_teardown() {
            // Finalizing waits for the other ranks (recent NCCL versions): usually they end
            // theirs at the same time, on their own threads or processes, and this takes
            // milliseconds. The wait is bounded, so a rank whose peers are gone, or are dropped
            // later on this same thread, does not block here; the teardown then finishes (or
            // aborts at the timeout) on its own thread.
            if done.recv_timeout(teardown::DROP_GRACE).is_err() {
                log::info!(
                    "cuda-stack-nccl: rank {} of {} is still finalizing after {} s; it ends in the                      background",
                    self.rank,
                    self.nranks,
                    teardown::DROP_GRACE.as_secs()
                );
            }
        }
    }
}

/// `ncclGetLastError`'s message for `raw` (empty when there is none).
///
/// # Safety
/// `raw` is a live communicator, not used by another call meanwhile.
pub(crate) unsafe fn last_error(nccl: &Nccl, raw: ncclComm_t) -> String {
    // SAFETY: forwarded; NCCL returns a string it owns (or null), copied at once.
    unsafe { nccl.ncclGetLastError(raw) }
        .ok()
        .and_then(|p| unsafe { c_str(p) })
        .unwrap_or_default()
}

/// Copies a C string, or `None` for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
unsafe fn c_str(p: *const c_char) -> Option<String> {
    // SAFETY: forwarded to the caller.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A name for NCCL's logs, without interior NULs.
fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// `n` as a C `int`, or an error.
pub(crate) fn to_int(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::Invalid {
        what: "NCCL call",
        problem: format!("{n} does not fit NCCL's int"),
    })
}

/// [`Error::InvalidRank`] unless `rank < nranks` (and `nranks >= 1`).
pub(crate) fn check_rank(
    op: &'static str,
    what: &'static str,
    rank: usize,
    nranks: usize,
) -> Result<()> {
    if rank < nranks {
        Ok(())
    } else {
        Err(Error::InvalidRank {
            op,
            what,
            rank,
            nranks,
        })
    }
}
