//! `Storage<T>`: the flat device buffer tensors view (seed 003's `Storage`), and the per-device
//! execution context ops use (the runtime's default stream, caching allocator and kernels).

use super::error::{Result, TensorError};
use super::TensorElement;
use crate::{CachedBuffer, Runtime};
use cuda_stack_driver::{CaptureState, CaptureTicket, DeviceSlice, Stream};
use cuda_stack_kernels::Kernels;
use std::ops::Range;
use std::sync::Arc;

/// A flat buffer of `T` on one device, from that device's caching allocator (so
/// `memory_allocated()` counts it). Shared by every view of it through an `Arc`; never written
/// after the op that created it finished queuing its work, except by the in-place ops, which
/// write only through the one handle of a storage nobody else shares (`Arc::get_mut`).
///
/// A storage written by work queued on a capturing stream holds nothing until the graph runs:
/// it carries that capture's ticket, and reading it ([`Storage::range`], [`Storage::readable`],
/// [`Storage::slice_mut`]) is refused with [`TensorError::NotYetComputed`] until the graph has
/// been launched, except by work of the same capture.
pub(crate) struct Storage<T: TensorElement> {
    buf: CachedBuffer<T>,
    device: usize,
    produced_by: Option<CaptureTicket>,
}

impl<T: TensorElement> Storage<T> {
    /// A storage over `buf`, which lives on device `device`, written by work queued on `stream`
    /// (a capture's work, when `stream` is capturing).
    pub(crate) fn new(buf: CachedBuffer<T>, device: usize, stream: &Stream) -> Self {
        Storage {
            buf,
            device,
            produced_by: stream.capture_ticket(),
        }
    }

    /// Ok when the contents may be read now: always, unless the storage was produced by a
    /// capture whose graph has not been launched yet and the calling thread is not queuing work
    /// into that same capture.
    #[inline]
    fn ready(&self) -> Result<()> {
        match &self.produced_by {
            None => Ok(()),
            Some(t) if t.has_run() => Ok(()),
            Some(t) => {
                let same_capture = crate::stream_for(self.device)
                    .ok()
                    .and_then(|s| s.capture_ticket())
                    .is_some_and(|c| c.same_capture(t));
                if same_capture {
                    Ok(())
                } else {
                    Err(TensorError::NotYetComputed {
                        discarded: t.state() == CaptureState::Discarded,
                    })
                }
            }
        }
    }

    /// Number of elements in the buffer.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The device ordinal.
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    /// The whole buffer, for its address only (no read: see [`Storage::readable`]).
    pub(crate) fn slice(&self) -> &DeviceSlice<T> {
        &self.buf
    }

    /// The whole buffer, to read (refused before a capture's graph has produced it).
    pub(crate) fn readable(&self) -> Result<&DeviceSlice<T>> {
        self.ready()?;
        Ok(&self.buf)
    }

    /// The whole buffer, mutably (only reachable through `Arc::get_mut`: no other handle);
    /// refused, like a read, before a capture's graph has produced it (in-place ops read it too).
    pub(crate) fn slice_mut(&mut self) -> Result<&mut DeviceSlice<T>> {
        self.ready()?;
        Ok(&mut self.buf)
    }

    /// The elements in `range` (a view: no copy), to read. Fails, rather than panicking, if the
    /// range were outside the buffer, and before a capture's graph has produced it.
    pub(crate) fn range(
        &self,
        range: Range<usize>,
    ) -> Result<cuda_stack_driver::DeviceView<'_, T>> {
        self.ready()?;
        Ok(self.buf.slice(range)?)
    }
}

/// Two new storages (the outputs of a two-output op).
pub(crate) type StoragePair<A, B> = (Arc<Storage<A>>, Arc<Storage<B>>);

/// Where a tensor op runs: the device's runtime (context, caching allocator) and the calling
/// thread's **current stream** for the device ([`crate::use_stream`]; the runtime's default
/// stream unless one is set), so ops on one thread run in issue order and the host only waits
/// in `to_vec()` (and `Display`).
#[derive(Clone)]
pub(crate) struct Exec {
    rt: &'static Runtime,
    stream: Stream,
}

impl Exec {
    /// The runtime of device `ordinal`, with its context made current on the calling thread
    /// (one `cuCtxGetCurrent` when it already is): `cuda-stack-driver` binds contexts for launches
    /// and allocations, but its stream copies use whatever context is current, and a tensor may
    /// be used on a thread that never touched its device.
    pub(crate) fn on(ordinal: usize) -> Result<Exec> {
        let rt = Runtime::get(ordinal)?;
        rt.context().bind()?;
        Ok(Exec::with_runtime(rt))
    }

    fn with_runtime(rt: &'static Runtime) -> Exec {
        Exec {
            rt,
            stream: rt.current_stream(),
        }
    }

    /// The runtime of the calling thread's current device.
    pub(crate) fn current() -> Result<Exec> {
        Ok(Exec::with_runtime(Runtime::current()?))
    }

    pub(crate) fn runtime(&self) -> &'static Runtime {
        self.rt
    }

    pub(crate) fn device(&self) -> usize {
        self.rt.ordinal()
    }

    pub(crate) fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The kernels, loaded into the device's context on first use.
    pub(crate) fn kernels(&self) -> Result<Arc<Kernels>> {
        Ok(Kernels::get(self.rt.context())?)
    }

    /// A new storage of `len` elements whose contents are written by `init` (queued on the
    /// default stream). If `init` fails, the buffer is dropped unread.
    ///
    /// # Safety
    /// `init` must write every element (or fail): the buffer comes from the caching allocator
    /// uninitialised, and a reused block holds its previous user's data (valid `T`s, since
    /// `T: Pod`, but stale), as for [`crate::CachingAllocator::alloc`].
    pub(crate) unsafe fn storage_with<T: TensorElement>(
        &self,
        len: usize,
        init: impl FnOnce(&mut DeviceSlice<T>) -> Result<()>,
    ) -> Result<Arc<Storage<T>>> {
        // SAFETY: forwarded to the caller: `init` writes every element (on the default stream,
        // before any later use on it), and nothing else reads the buffer before it is returned.
        let mut buf = unsafe { self.rt.allocator().alloc::<T>(self.stream(), len)? };
        init(&mut buf)?;
        Ok(Arc::new(Storage::new(buf, self.device(), self.stream())))
    }

    /// Two new storages written by one `init` (for ops with two outputs).
    ///
    /// # Safety
    /// As for [`Exec::storage_with`]: `init` must write every element of both.
    pub(crate) unsafe fn storage_pair_with<A: TensorElement, B: TensorElement>(
        &self,
        len_a: usize,
        len_b: usize,
        init: impl FnOnce(&mut DeviceSlice<A>, &mut DeviceSlice<B>) -> Result<()>,
    ) -> Result<StoragePair<A, B>> {
        // SAFETY: forwarded to the caller: `init` writes every element of both.
        let mut a = unsafe { self.rt.allocator().alloc::<A>(self.stream(), len_a)? };
        // SAFETY: as above.
        let mut b = unsafe { self.rt.allocator().alloc::<B>(self.stream(), len_b)? };
        init(&mut a, &mut b)?;
        let device = self.device();
        Ok((
            Arc::new(Storage::new(a, device, self.stream())),
            Arc::new(Storage::new(b, device, self.stream())),
        ))
    }

    /// New storages of the given lengths written by one `init` (the multi-tensor ops: one
    /// launch fills many outputs).
    ///
    /// # Safety
    /// As for [`Exec::storage_with`]: `init` must write every element of every buffer (or fail).
    pub(crate) unsafe fn storages_with<T: TensorElement>(
        &self,
        lens: &[usize],
        init: impl FnOnce(&mut [&mut DeviceSlice<T>]) -> Result<()>,
    ) -> Result<Vec<Arc<Storage<T>>>> {
        let mut bufs = Vec::with_capacity(lens.len());
        for &n in lens {
            // SAFETY: forwarded to the caller: `init` writes every element on this stream
            // before any later use, and nothing reads the buffers before they are returned.
            bufs.push(unsafe { self.rt.allocator().alloc::<T>(self.stream(), n)? });
        }
        {
            let mut outs: Vec<&mut DeviceSlice<T>> = bufs.iter_mut().map(|b| &mut **b).collect();
            init(&mut outs)?;
        }
        let device = self.device();
        Ok(bufs
            .into_iter()
            .map(|b| Arc::new(Storage::new(b, device, self.stream())))
            .collect())
    }

    /// A new zero-filled storage (`cudaMemsetAsync` on the default stream).
    pub(crate) fn zeros<T: TensorElement>(&self, len: usize) -> Result<Arc<Storage<T>>> {
        let buf = self.rt.allocator().alloc_zeros::<T>(self.stream(), len)?;
        Ok(Arc::new(Storage::new(buf, self.device(), self.stream())))
    }
}
