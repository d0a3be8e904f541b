//! `DeviceBuffer<T>`: owned device memory, the device counterpart of `Vec<T>`.

use super::allocation::Allocation;
use super::slice::{DeviceSlice, SliceRaw};
use crate::{DeviceRepr, Error, Result, Stream};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// An owned array of `T` in device memory, allocated on a stream (see the [module
/// docs](crate::memory) for the safety model). Derefs to [`DeviceSlice<T>`].
///
/// Create one with [`Stream::alloc_zeros`], [`Stream::clone_htod`] or (uninitialised, `unsafe`)
/// [`Stream::alloc`]. Dropping it frees the memory in stream order: work already queued that
/// uses it finishes first, on every stream.
pub struct DeviceBuffer<T: DeviceRepr> {
    raw: SliceRaw,
    alloc: Arc<Allocation>,
    _elem: PhantomData<T>,
}

// SAFETY: the buffer owns an `Allocation` (Send + Sync) and `T: DeviceRepr` is Send + Sync.
unsafe impl<T: DeviceRepr> Send for DeviceBuffer<T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for DeviceBuffer<T> {}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Allocates `len` uninitialised elements on `stream`.
    ///
    /// # Safety
    /// The contents are unspecified until written; reading them back gives arbitrary (but, since
    /// `T: Pod`, valid) values. Safe in the memory sense, `unsafe` because it is easy to misuse.
    pub(crate) unsafe fn uninit(stream: &Stream, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::SizeOverflow {
                op: "DeviceBuffer allocation",
                count: len,
                elem_size: std::mem::size_of::<T>(),
            })?;
        let alloc = Arc::new(Allocation::new(&stream.inner, bytes)?);
        Ok(DeviceBuffer {
            raw: SliceRaw {
                ptr: alloc.ptr,
                len,
                alloc: Arc::as_ptr(&alloc),
            },
            alloc,
            _elem: PhantomData,
        })
    }

    /// The stream the buffer was allocated on (and is freed on).
    pub fn home_stream(&self) -> Stream {
        Stream {
            inner: self.alloc.home.clone(),
        }
    }

    /// How many owners the allocation has: this buffer, plus each graph that captured work on it.
    pub(super) fn allocation_owners(&self) -> usize {
        Arc::strong_count(&self.alloc)
    }

    /// The capture in progress on this buffer's home stream, when that capture is the only
    /// owner of the memory besides this buffer: it recorded work using the buffer, and no other
    /// graph and no other capture did. `None` otherwise (no capture on the home stream, the
    /// capture never used the buffer, or something else holds it too).
    ///
    /// This is what a caching allocator needs to reuse a capture's temporary *within the same
    /// capture* (a graph-private pool): a capture records the work of its stream as one chain
    /// (work queued later on the stream runs after the earlier work in every replay, and no
    /// other stream's work can join the graph — see [`crate::graph`]), so a later user of the
    /// memory recorded on the same capture is ordered after every earlier use, in every replay.
    /// `&mut self` because the answer holds only while nobody can queue more work on the buffer;
    /// it can turn stale only towards `None` (a graph dropping its hold), never the other way.
    pub fn held_only_by_capture(&mut self) -> Option<crate::CaptureTicket> {
        let home = &self.alloc.home;
        if !home.is_capturing() {
            return None;
        }
        let captured = home.captured.lock().unwrap_or_else(|p| p.into_inner());
        let ticket = captured
            .ticket
            .as_ref()
            .filter(|t| t.state() == crate::CaptureState::Capturing)?;
        // This buffer and the capture's single hold: no other graph or capture (each would hold
        // a reference of its own).
        let only = captured.held.contains(&(Arc::as_ptr(&self.alloc) as usize))
            && Arc::strong_count(&self.alloc) == 2;
        only.then(|| ticket.clone())
    }

    /// Bytes allocated.
    pub fn allocated_bytes(&self) -> usize {
        self.alloc.bytes
    }

    /// Frees the buffer now and returns any error (dropping it does the same, reporting errors
    /// through [`crate::Context::take_drop_errors`]). If a graph still uses the memory, it is
    /// freed when the graph is dropped.
    pub fn free(self) -> Result<()> {
        let DeviceBuffer { alloc, .. } = self;
        match Arc::try_unwrap(alloc) {
            Ok(a) => a.close(),
            Err(_shared_with_a_graph) => Ok(()),
        }
    }
}

impl<T: DeviceRepr> Deref for DeviceBuffer<T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: `raw` describes this buffer's own live allocation.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<T: DeviceRepr> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: as above; `&mut self` is exclusive.
        unsafe { DeviceSlice::from_raw_mut(&mut self.raw) }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>{{ ptr: {:#x}, len: {} }}",
            std::any::type_name::<T>(),
            self.raw.ptr,
            self.raw.len
        )
    }
}
