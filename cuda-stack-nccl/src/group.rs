//! [`Group`]: NCCL's group calls (`ncclGroupStart` … `ncclGroupEnd`) as a guard.

use crate::comm::{last_error, CommState, Communicator};
use crate::open_group::{refuse_if_open, set_open};
use crate::ops::{self, OpCall};
use crate::{Error, NcclType, ReduceOp, Result};
use cuda_stack_driver::{DeviceSlice, ForeignUse, Stream};
use cuda_stack_sys::nccl_types::ncclComm_t;
use cuda_stack_sys::nccl_types::ncclResult_t;
use cuda_stack_sys::Nccl;
use std::marker::PhantomData;

/// An operation added to a group, waiting for `ncclGroupEnd`.
struct Added<'a> {
    comm: usize,
    stream: Stream,
    what: &'static str,
    uses: Vec<ForeignUse<'a>>,
}

/// An open NCCL group (`ncclGroupStart`); its operations are queued together when it ends
/// ([`Group::end`], or drop).
///
/// Inside a group NCCL only records operations; `ncclGroupEnd` queues them all, on every stream
/// involved, as one launch. That is how one thread drives several GPUs (one communicator per
/// GPU, a collective on each, launched together — without the group, the first collective would
/// wait for ranks the thread has not reached yet), how a rank sends to and receives from peers
/// (or itself) without deadlocking, and how many small operations share one launch.
///
/// ## How the guard keeps it sound
/// - The guard **borrows every buffer** handed to it until it ends, so none can be freed or
///   written by the host before NCCL has queued the work that uses it; each buffer is ordered
///   after its earlier uses when the operation is added (the waits go on the stream ahead of the
///   work) and its use is recorded after `ncclGroupEnd` (see
///   [`cuda_stack_driver::Stream::begin_foreign`]).
/// - It **takes every communicator** it uses until it ends (the communicator's state says it
///   is lent to a group), so a call on one from another thread, the watchdog and
///   [`crate::Communicator::abort`] cannot use or abort one whose operations NCCL holds but has
///   not launched: such calls are refused at once with [`crate::Error::CommInGroup`], never
///   blocked.
/// - NCCL's group state belongs to the thread, so the guard is `!Send`, and while it is open
///   every NCCL call on the thread that does not go through it is refused
///   ([`crate::Error::GroupOpen`]): NCCL would defer that call to the group's end, after its
///   borrows had ended. Groups do not nest (a second one is refused the same way).
/// - Leaking the guard (`mem::forget`) leaves NCCL's group open for good: NCCL then never queues
///   its operations (so nothing touches the buffers once their borrows end), every later NCCL call
///   on that thread is refused ([`crate::Error::GroupOpen`]), and its communicators stay lent to
///   it: every call on them, from any thread, is refused with [`crate::Error::CommInGroup`], and
///   dropping the last handle of one leaks its NCCL handle instead of destroying it. Nothing
///   blocks.
/// - A communicator is lent to one group at a time: a second thread's group that adds an
///   operation on it gets [`crate::Error::CommInGroup`]. Use each communicator from one thread,
///   as NCCL expects anyway.
///
/// ```no_run
/// # fn main() -> cuda_stack_nccl::Result<()> {
/// use cuda_stack_nccl::{CommConfig, CommGroup, Group, ReduceOp};
/// let comms = CommGroup::new(&[0, 1], &CommConfig::default())?;   // one process, two GPUs
/// let streams = comms.iter().map(|c| c.context().new_stream()).collect::<Result<Vec<_>, _>>()?;
/// let mut bufs = streams.iter().map(|s| s.clone_htod(&[1.0f32; 1024])).collect::<Result<Vec<_>, _>>()?;
/// let mut g = Group::new()?;
/// for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
///     g.all_reduce_in_place(c, b, ReduceOp::Sum, s)?;
/// }
/// g.end()?;                                            // both launched together
/// assert_eq!(streams[1].clone_dtoh(&bufs[1])?[0], 2.0);
/// # Ok(()) }
/// ```
pub struct Group<'a> {
    nccl: &'static Nccl,
    /// The communicators lent to this group (their state is [`CommState::Grouped`] until it
    /// ends), with their raw handles.
    lent: Vec<(&'a Communicator, ncclComm_t)>,
    added: Vec<Added<'a>>,
    ended: bool,
    _not_send: PhantomData<*const ()>,
}

impl<'a> Group<'a> {
    /// Opens a group on this thread (`ncclGroupStart`). Refused when one is open already.
    pub fn new() -> Result<Group<'a>> {
        refuse_if_open("Group::new")?;
        let nccl = Nccl::get()?;
        // SAFETY: no arguments; the matching ncclGroupEnd is in `finish`, on this thread (the
        // guard is !Send).
        unsafe { nccl.ncclGroupStart()? };
        set_open(true);
        Ok(Group {
            nccl,
            lent: Vec::new(),
            added: Vec::new(),
            ended: false,
            _not_send: PhantomData,
        })
    }

    /// The index of `comm` among the communicators lent to this group, taking it first if
    /// needed (refused unless it is live and in no other group).
    fn lend(&mut self, comm: &'a Communicator) -> Result<usize> {
        if let Some(i) = self.lent.iter().position(|(c, _)| c.same_as(comm)) {
            return Ok(i);
        }
        let mut state = comm.inner.lock();
        let raw = comm.inner.live(&state)?;
        if let CommState::Live(r) = std::mem::replace(&mut *state, CommState::Gone) {
            *state = CommState::Grouped(r);
        }
        self.lent.push((comm, raw));
        Ok(self.lent.len() - 1)
    }

    /// Adds one checked operation: orders its buffers on `stream`, hands it to NCCL (which
    /// records it) and keeps its borrows until the end.
    fn add(&mut self, comm: &'a Communicator, stream: &Stream, op: OpCall<'a>) -> Result<()> {
        if self.ended {
            return Err(Error::Invalid {
                what: "Group",
                problem: "the group has ended".into(),
            });
        }
        comm.check_stream(stream)?;
        let i = self.lend(comm)?;
        let raw = self.lent[i].1;
        // SAFETY: the group keeps the borrows in `op.uses` until it has ended, and records them
        // with `end_foreign` right after `ncclGroupEnd` queued the work; a leaked group never
        // ends, and then NCCL never queues the work (see the module docs).
        unsafe { stream.begin_foreign(&op.uses)? };
        match (op.call)(self.nccl, raw, stream.as_raw()) {
            Ok(()) => {}
            Err(e) if e.code() == Some(ncclResult_t::ncclInProgress) => {}
            Err(e) => {
                // NCCL keeps the error for ncclGroupEnd, which then launches nothing.
                // SAFETY: a live handle, lent to this group (no other caller may use it meanwhile).
                let last_error = unsafe { last_error(self.nccl, raw) };
                return Err(Error::Call {
                    source: e,
                    last_error,
                });
            }
        }
        self.added.push(Added {
            comm: i,
            stream: stream.clone(),
            what: op.what,
            uses: op.uses,
        });
        Ok(())
    }

    /// Ends the group (`ncclGroupEnd`): NCCL queues every operation added; for non-blocking
    /// communicators this waits (with each one's timeout) until they are queued. Returns the
    /// first error: NCCL's, a communicator aborted meanwhile, or a buffer's bookkeeping.
    pub fn end(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        // SAFETY: ends the group this guard started, on the same thread.
        let called = unsafe { self.nccl.ncclGroupEnd() };
        set_open(false);
        let in_progress =
            matches!(&called, Err(e) if e.code() == Some(ncclResult_t::ncclInProgress));
        let mut first: Result<()> = match called {
            Ok(()) => Ok(()),
            Err(_) if in_progress => Ok(()),
            Err(e) => Err(e.into()),
        };
        let mut states = Vec::with_capacity(self.lent.len());
        for (comm, _) in &self.lent {
            // Back from the group: live again (nothing else can have changed a lent state).
            let mut state = comm.inner.lock();
            if let CommState::Grouped(r) = std::mem::replace(&mut *state, CommState::Gone) {
                *state = CommState::Live(r);
            }
            states.push(state);
        }
        for ((comm, _), state) in self.lent.iter().zip(&mut states) {
            let r = if first.is_err() {
                // A failed group launched nothing; a communicator NCCL reports broken is aborted.
                comm.inner.poll_async_error(state)
            } else if in_progress || !comm.inner.blocking {
                comm.inner.wait_ready(state, "ncclGroupEnd")
            } else {
                Ok(())
            };
            if first.is_ok() {
                first = r;
            }
        }
        let ok = first.is_ok();
        for a in &self.added {
            let r = a.stream.end_foreign(&a.uses).map_err(Error::from);
            if ok && r.is_ok() {
                self.lent[a.comm].0.inner.track(&a.stream, a.what);
            }
            if first.is_ok() {
                first = r;
            }
        }
        self.added.clear();
        drop(states);
        self.lent.clear();
        first
    }

    /// [`Communicator::all_reduce`] in this group.
    pub fn all_reduce<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::all_reduce(send, recv, op)?)
    }

    /// [`Communicator::all_reduce_in_place`] in this group.
    pub fn all_reduce_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::all_reduce_in_place(buf, op)?)
    }

    /// [`Communicator::broadcast`] in this group.
    pub fn broadcast<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::broadcast(comm, send, recv, root)?)
    }

    /// [`Communicator::broadcast_in_place`] in this group.
    pub fn broadcast_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::broadcast_in_place(comm, buf, root)?)
    }

    /// [`Communicator::reduce`] in this group.
    pub fn reduce<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::reduce(comm, send, recv, op, root)?)
    }

    /// [`Communicator::reduce_in_place`] in this group.
    pub fn reduce_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::reduce_in_place(comm, buf, op, root)?)
    }

    /// [`Communicator::all_gather`] in this group.
    pub fn all_gather<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::all_gather(comm, send, recv)?)
    }

    /// [`Communicator::all_gather_in_place`] in this group.
    pub fn all_gather_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::all_gather_in_place(comm, buf)?)
    }

    /// [`Communicator::reduce_scatter`] in this group.
    pub fn reduce_scatter<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::reduce_scatter(comm, send, recv, op)?)
    }

    /// [`Communicator::reduce_scatter_in_place`] in this group.
    pub fn reduce_scatter_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::reduce_scatter_in_place(comm, buf, op)?)
    }

    /// [`Communicator::send`] in this group (a send to this rank itself, or to a peer that
    /// sends back, needs its receive in the same group).
    pub fn send<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::send(comm, buf, peer)?)
    }

    /// [`Communicator::recv`] in this group.
    pub fn recv<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.add(comm, stream, ops::recv(comm, buf, peer)?)
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            log::error!(
                "cuda-stack-nccl: ending a group in Drop failed: {e} (call Group::end to get it)"
            );
        }
    }
}
