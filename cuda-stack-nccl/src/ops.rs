//! The operations — collectives and point-to-point — as checked descriptions ([`OpCall`]), and
//! as methods of [`Communicator`] that queue one at once.
//!
//! Every operation is checked before NCCL sees it: lengths against each other and against the
//! number of ranks, ranks against the communicator, the stream and buffers against the
//! communicator's device. What cannot be checked from one rank is the other ranks' calls:
//! every rank must make the same collectives in the same order with the same counts, and each
//! send must meet a receive of the same count (NCCL's contract, as MPI's). A mismatch makes the
//! ranks wait for each other — the timeout then aborts the communicator — or gives wrong
//! results; NCCL sizes every access to a rank's buffers by that rank's own arguments, which are
//! the ones checked here.

use crate::comm::{check_rank, to_int, Communicator};
use crate::{Error, NcclType, ReduceOp, Result};
use cuda_stack_driver::{DeviceSlice, ForeignUse, Stream};
use cuda_stack_sys::nccl_types::ncclComm_t;
use cuda_stack_sys::{CUstream, Nccl};
use std::ffi::c_void;

/// The NCCL call of one operation, given the library, the communicator and the raw stream.
type RawCall<'a> = Box<
    dyn FnOnce(&Nccl, ncclComm_t, CUstream) -> std::result::Result<(), cuda_stack_sys::NcclError>
        + 'a,
>;

/// One checked operation: the buffers it reads and writes (borrowed for `'a`) and the NCCL call
/// that queues it.
pub(crate) struct OpCall<'a> {
    pub(crate) what: &'static str,
    pub(crate) uses: Vec<ForeignUse<'a>>,
    pub(crate) call: RawCall<'a>,
}

fn same_len(op: &'static str, a: usize, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::Length {
            op,
            problem: format!(
                "the send buffer has {a} elements and the receive buffer {b}; they must be equal"
            ),
        })
    }
}

/// `small * nranks`, checked; `problem` describes the buffers for an error.
fn times_ranks(op: &'static str, small: usize, nranks: usize) -> Result<usize> {
    small.checked_mul(nranks).ok_or_else(|| Error::Length {
        op,
        problem: format!("{small} elements × {nranks} ranks overflows"),
    })
}

fn ptr<T>(s: &DeviceSlice<T>) -> u64 {
    s.as_raw_ptr()
}

/// Device address `base + elems * size_of::<T>()`.
fn offset<T>(base: u64, elems: usize) -> u64 {
    base + (elems * std::mem::size_of::<T>()) as u64
}

pub(crate) fn all_reduce<'a, T: NcclType>(
    send: &'a DeviceSlice<T>,
    recv: &'a mut DeviceSlice<T>,
    op: ReduceOp,
) -> Result<OpCall<'a>> {
    same_len("all_reduce", send.len(), recv.len())?;
    let (s, r, n) = (ptr(send), ptr(recv), send.len());
    Ok(OpCall {
        what: "ncclAllReduce",
        uses: vec![ForeignUse::read(send), ForeignUse::write(recv)],
        // SAFETY (of the call, made by the caller with the buffers ordered and borrowed): both
        // buffers hold `n` elements of `T`, which NCCL reads and writes as `T::DTYPE`.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclAllReduce(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn all_reduce_in_place<T: NcclType>(
    buf: &mut DeviceSlice<T>,
    op: ReduceOp,
) -> Result<OpCall<'_>> {
    let (b, n) = (ptr(buf), buf.len());
    Ok(OpCall {
        what: "ncclAllReduce",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: as in `all_reduce`, with send = receive (NCCL's in-place form).
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclAllReduce(
                b as *const c_void,
                b as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn broadcast<'a, T: NcclType>(
    c: &Communicator,
    send: &'a DeviceSlice<T>,
    recv: &'a mut DeviceSlice<T>,
    root: usize,
) -> Result<OpCall<'a>> {
    same_len("broadcast", send.len(), recv.len())?;
    check_rank("broadcast", "root", root, c.size())?;
    let (s, r, n, root) = (ptr(send), ptr(recv), send.len(), to_int(root)?);
    Ok(OpCall {
        what: "ncclBroadcast",
        uses: vec![ForeignUse::read(send), ForeignUse::write(recv)],
        // SAFETY: both buffers hold `n` elements; the root reads `send`, every rank writes `recv`.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclBroadcast(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                root,
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn broadcast_in_place<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a mut DeviceSlice<T>,
    root: usize,
) -> Result<OpCall<'a>> {
    check_rank("broadcast", "root", root, c.size())?;
    let (b, n, root) = (ptr(buf), buf.len(), to_int(root)?);
    Ok(OpCall {
        what: "ncclBroadcast",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: `buf` holds `n` elements, read on the root and written on the others.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclBroadcast(
                b as *const c_void,
                b as *mut c_void,
                n,
                T::DTYPE,
                root,
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn reduce<'a, T: NcclType>(
    c: &Communicator,
    send: &'a DeviceSlice<T>,
    recv: &'a mut DeviceSlice<T>,
    op: ReduceOp,
    root: usize,
) -> Result<OpCall<'a>> {
    same_len("reduce", send.len(), recv.len())?;
    check_rank("reduce", "root", root, c.size())?;
    let (s, r, n, root) = (ptr(send), ptr(recv), send.len(), to_int(root)?);
    Ok(OpCall {
        what: "ncclReduce",
        uses: vec![ForeignUse::read(send), ForeignUse::write(recv)],
        // SAFETY: both buffers hold `n` elements; `recv` is written on the root only.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclReduce(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                root,
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn reduce_in_place<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a mut DeviceSlice<T>,
    op: ReduceOp,
    root: usize,
) -> Result<OpCall<'a>> {
    check_rank("reduce", "root", root, c.size())?;
    let (b, n, root) = (ptr(buf), buf.len(), to_int(root)?);
    Ok(OpCall {
        what: "ncclReduce",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: `buf` holds `n` elements, read everywhere and written on the root.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclReduce(
                b as *const c_void,
                b as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                root,
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn all_gather<'a, T: NcclType>(
    c: &Communicator,
    send: &'a DeviceSlice<T>,
    recv: &'a mut DeviceSlice<T>,
) -> Result<OpCall<'a>> {
    let n = send.len();
    let total = times_ranks("all_gather", n, c.size())?;
    if recv.len() != total {
        return Err(Error::Length {
            op: "all_gather",
            problem: format!(
                "the receive buffer has {} elements; it must hold the send buffer's {n} from each \
                 of the {} ranks ({total})",
                recv.len(),
                c.size()
            ),
        });
    }
    let (s, r) = (ptr(send), ptr(recv));
    Ok(OpCall {
        what: "ncclAllGather",
        uses: vec![ForeignUse::read(send), ForeignUse::write(recv)],
        // SAFETY: `send` holds `n` elements and `recv` `n × nranks`.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclAllGather(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                comm,
                stream,
            )
        }),
    })
}

/// The per-rank chunk of an in-place gather or scatter over `buf`.
fn chunk(op: &'static str, len: usize, nranks: usize) -> Result<usize> {
    if len % nranks != 0 {
        return Err(Error::Length {
            op,
            problem: format!(
                "the buffer has {len} elements, which do not split into {nranks} equal chunks"
            ),
        });
    }
    Ok(len / nranks)
}

pub(crate) fn all_gather_in_place<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a mut DeviceSlice<T>,
) -> Result<OpCall<'a>> {
    let n = chunk("all_gather_in_place", buf.len(), c.size())?;
    let r = ptr(buf);
    let s = offset::<T>(r, n * c.rank());
    Ok(OpCall {
        what: "ncclAllGather",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: `buf` holds `n × nranks` elements; this rank's chunk starts at `rank × n`
        // (NCCL's in-place form).
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclAllGather(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn reduce_scatter<'a, T: NcclType>(
    c: &Communicator,
    send: &'a DeviceSlice<T>,
    recv: &'a mut DeviceSlice<T>,
    op: ReduceOp,
) -> Result<OpCall<'a>> {
    let n = recv.len();
    let total = times_ranks("reduce_scatter", n, c.size())?;
    if send.len() != total {
        return Err(Error::Length {
            op: "reduce_scatter",
            problem: format!(
                "the send buffer has {} elements; it must hold one receive buffer's {n} for each \
                 of the {} ranks ({total})",
                send.len(),
                c.size()
            ),
        });
    }
    let (s, r) = (ptr(send), ptr(recv));
    Ok(OpCall {
        what: "ncclReduceScatter",
        uses: vec![ForeignUse::read(send), ForeignUse::write(recv)],
        // SAFETY: `send` holds `n × nranks` elements and `recv` `n`.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclReduceScatter(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn reduce_scatter_in_place<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a mut DeviceSlice<T>,
    op: ReduceOp,
) -> Result<OpCall<'a>> {
    let n = chunk("reduce_scatter_in_place", buf.len(), c.size())?;
    let s = ptr(buf);
    let r = offset::<T>(s, n * c.rank());
    Ok(OpCall {
        what: "ncclReduceScatter",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: `buf` holds `n × nranks` elements; the result goes to this rank's chunk at
        // `rank × n` (NCCL's in-place form).
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclReduceScatter(
                s as *const c_void,
                r as *mut c_void,
                n,
                T::DTYPE,
                op.raw(),
                comm,
                stream,
            )
        }),
    })
}

pub(crate) fn send<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a DeviceSlice<T>,
    peer: usize,
) -> Result<OpCall<'a>> {
    check_rank("send", "peer", peer, c.size())?;
    let (b, n, peer) = (ptr(buf), buf.len(), to_int(peer)?);
    Ok(OpCall {
        what: "ncclSend",
        uses: vec![ForeignUse::read(buf)],
        // SAFETY: `buf` holds `n` elements, read.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclSend(b as *const c_void, n, T::DTYPE, peer, comm, stream)
        }),
    })
}

pub(crate) fn recv<'a, T: NcclType>(
    c: &Communicator,
    buf: &'a mut DeviceSlice<T>,
    peer: usize,
) -> Result<OpCall<'a>> {
    check_rank("recv", "peer", peer, c.size())?;
    let (b, n, peer) = (ptr(buf), buf.len(), to_int(peer)?);
    Ok(OpCall {
        what: "ncclRecv",
        uses: vec![ForeignUse::write(buf)],
        // SAFETY: `buf` holds `n` elements, written.
        call: Box::new(move |nccl, comm, stream| unsafe {
            nccl.ncclRecv(b as *mut c_void, n, T::DTYPE, peer, comm, stream)
        }),
    })
}

/// Collectives and point-to-point, queued at once on `stream` (a stream of this communicator's
/// device). Each returns when NCCL has queued its work (not when the work is done); the buffers
/// are ordered with every other use exactly as for a kernel launch (see
/// [`cuda_stack_driver::memory`]): no synchronisation is needed around them. Inside a [`crate::Group`],
/// use the group's methods instead (these refuse with [`Error::GroupOpen`]).
impl Communicator {
    /// Queues one operation: orders its buffers, calls NCCL, waits while a non-blocking call is
    /// in progress, records the buffers' use and watches the work for the timeout.
    pub(crate) fn run(&self, stream: &Stream, op: OpCall<'_>) -> Result<()> {
        crate::open_group::refuse_if_open(op.what)?;
        self.check_stream(stream)?;
        let mut state = self.inner.lock();
        let raw = self.inner.live(&state)?;
        // SAFETY: `op.uses` borrow the buffers for this whole call, and `end_foreign` records
        // them below on every path once NCCL has queued (or given up on) the work; the call
        // accesses only those buffers, sized as checked when `op` was made.
        unsafe { stream.begin_foreign(&op.uses)? };
        let called = (op.call)(self.inner.nccl, raw, stream.as_raw());
        let settled = self.inner.settle(&mut state, op.what, called);
        let ended = stream.end_foreign(&op.uses);
        if settled.is_ok() && ended.is_ok() {
            self.inner.track(stream, op.what);
        }
        drop(state);
        settled.and(ended.map_err(Error::from))
    }

    /// Element-wise reduction of every rank's `send` into every rank's `recv`
    /// (`ncclAllReduce`). The lengths must be equal.
    pub fn all_reduce<T: NcclType>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, all_reduce(send, recv, op)?)
    }

    /// [`Communicator::all_reduce`] in place: `buf` is sent and overwritten with the result.
    pub fn all_reduce_in_place<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, all_reduce_in_place(buf, op)?)
    }

    /// Copies the root's `send` into every rank's `recv` (`ncclBroadcast`). The lengths must be
    /// equal; `send` is read on the root only.
    pub fn broadcast<T: NcclType>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, broadcast(self, send, recv, root)?)
    }

    /// [`Communicator::broadcast`] in place: the root's `buf` is copied into every other rank's.
    pub fn broadcast_in_place<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, broadcast_in_place(self, buf, root)?)
    }

    /// Reduces every rank's `send` into the root's `recv` (`ncclReduce`); `recv` is written on
    /// the root only. The lengths must be equal.
    pub fn reduce<T: NcclType>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, reduce(self, send, recv, op, root)?)
    }

    /// [`Communicator::reduce`] in place: the result replaces the root's `buf`.
    pub fn reduce_in_place<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, reduce_in_place(self, buf, op, root)?)
    }

    /// Gathers every rank's `send` (n elements) into every rank's `recv` (n × size, rank `r`'s
    /// at `r × n`) (`ncclAllGather`).
    pub fn all_gather<T: NcclType>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, all_gather(self, send, recv)?)
    }

    /// [`Communicator::all_gather`] in place: `buf` holds n × size elements, and this rank's
    /// contribution is its own chunk, at `rank × n`.
    pub fn all_gather_in_place<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, all_gather_in_place(self, buf)?)
    }

    /// Reduces every rank's `send` (n × size elements) and leaves chunk `r` of the result
    /// (n elements) in rank `r`'s `recv` (`ncclReduceScatter`).
    pub fn reduce_scatter<T: NcclType>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, reduce_scatter(self, send, recv, op)?)
    }

    /// [`Communicator::reduce_scatter`] in place: `buf` holds n × size elements, and this rank's
    /// chunk of the result lands at `rank × n` (the rest of `buf` is left undefined).
    pub fn reduce_scatter_in_place<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, reduce_scatter_in_place(self, buf, op)?)
    }

    /// Sends `buf` to rank `peer` (`ncclSend`), which must post a [`Communicator::recv`] of the
    /// same length from this rank. Blocking on the GPU until it does: a send and a receive
    /// between the same two ranks, or to this rank itself, must go in one [`crate::Group`].
    pub fn send<T: NcclType>(
        &self,
        buf: &DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, send(self, buf, peer)?)
    }

    /// Receives `buf` from rank `peer` (`ncclRecv`); see [`Communicator::send`].
    pub fn recv<T: NcclType>(
        &self,
        buf: &mut DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.run(stream, recv(self, buf, peer)?)
    }
}
