//! `ExternalSlice`: device memory another library owns (a PyTorch tensor's `data_ptr()`, a CuPy
//! array, another Rust crate's buffer), borrowed for a lifetime and used like a `DeviceSlice`.

use super::allocation::Allocation;
use super::slice::{DeviceSlice, SliceRaw};
use crate::{DeviceRepr, Error, Result, Stream};
use cuda_stack_sys::CUdeviceptr;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// `len` elements of `T` at a device address this crate did not allocate, borrowed for `'a`.
/// Derefs to [`DeviceSlice<T>`], so copies, kernels and views take it like any buffer, with the
/// same cross-stream ordering: its *home* is the stream it was borrowed on.
///
/// Dropping it never frees the memory; it **blocks until every use queued through it has
/// finished**, so when `'a` ends the owner gets the memory back idle. It cannot be used in a graph
/// capture (a graph would outlive the borrow): that is refused with [`Error::Unsupported`].
pub struct ExternalSlice<'a, T: DeviceRepr> {
    raw: SliceRaw,
    alloc: Arc<Allocation>,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: like `DeviceBuffer`: an `Allocation` (Send + Sync) and a description of device memory.
unsafe impl<T: DeviceRepr> Send for ExternalSlice<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for ExternalSlice<'_, T> {}

impl Stream {
    /// Borrows `len` elements of `T` at device address `ptr` for `'a` (see [`ExternalSlice`]).
    /// Work this crate queues on the memory is ordered after the work queued on this stream so
    /// far; pass the stream the owner last used it on (e.g. a borrowed
    /// [`Stream::from_raw`] of `torch.cuda.current_stream()`).
    ///
    /// # Safety
    /// - `ptr .. ptr + len * size_of::<T>()` is device memory of this stream's context, allocated
    ///   and aligned for `T`, and stays allocated for all of `'a`;
    /// - for all of `'a`, nothing outside this crate reads or writes it, except work ordered
    ///   before this call on this stream (or finished before it);
    /// - the borrow has a lifetime that really ends before the owner frees or reuses the memory
    ///   (a `'static` borrow promises the memory is never freed).
    pub unsafe fn borrow_external<'a, T: DeviceRepr>(
        &self,
        ptr: CUdeviceptr,
        len: usize,
    ) -> Result<ExternalSlice<'a, T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::SizeOverflow {
                op: "Stream::borrow_external",
                count: len,
                elem_size: std::mem::size_of::<T>(),
            })?;
        if ptr % std::mem::align_of::<T>() as u64 != 0 {
            return Err(Error::Unsupported {
                what: "borrowing external device memory at a misaligned address",
                why: format!(
                    "{ptr:#x} is not a multiple of {}, the alignment of {}",
                    std::mem::align_of::<T>(),
                    std::any::type_name::<T>()
                ),
            });
        }
        let alloc = Arc::new(Allocation::external(&self.inner, ptr, bytes));
        Ok(ExternalSlice {
            raw: SliceRaw {
                ptr,
                len,
                alloc: Arc::as_ptr(&alloc),
            },
            alloc,
            _borrow: PhantomData,
        })
    }
}

impl<T: DeviceRepr> ExternalSlice<'_, T> {
    /// Waits until every use queued through this borrow has finished and ends it, returning the
    /// error, if any (dropping does the same and reports the error instead).
    pub fn release(self) -> Result<()> {
        self.alloc.settle_external()
    }
}

impl<T: DeviceRepr> Deref for ExternalSlice<'_, T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: `raw` describes the borrowed memory (caller's promise at creation) and the
        // allocation record, owned by `self.alloc`.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<T: DeviceRepr> DerefMut for ExternalSlice<'_, T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: as above, and `&mut self` is exclusive.
        unsafe { DeviceSlice::from_raw_mut(&mut self.raw) }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for ExternalSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ExternalSlice<{}>{{ ptr: {:#x}, len: {} }}",
            std::any::type_name::<T>(),
            self.raw.ptr,
            self.raw.len
        )
    }
}
