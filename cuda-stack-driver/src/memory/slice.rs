//! `DeviceSlice<T>`: the device counterpart of `[T]`, and views into it.

use super::allocation::Allocation;
use crate::stream::StreamInner;
use crate::{DeviceRepr, Error, Result};
use cuda_stack_sys::CUdeviceptr;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::Arc;

/// The raw parts of a slice: a device address, a length and the allocation it lies in.
#[derive(Clone, Copy)]
pub(crate) struct SliceRaw {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) len: usize,
    pub(crate) alloc: *const Allocation,
}

/// A run of `T`s in device memory: what `[T]` is to `Vec<T>`, this is to [`crate::DeviceBuffer`].
///
/// You only ever hold it by reference: `&DeviceSlice<T>` (read access, shareable) or
/// `&mut DeviceSlice<T>` (write access, exclusive), obtained from a buffer (`&buf`, `&mut buf`
/// through `Deref`) or a view ([`DeviceSlice::slice`], [`DeviceSlice::split_at_mut`]). The borrow
/// checker then guarantees what it guarantees for host slices: a view cannot outlive its buffer,
/// and two `&mut` views never overlap. Kernels take these references as arguments, so a kernel
/// that writes needs a `&mut`.
///
/// It is an unsized type (like `[T]`), so it cannot be moved out of or swapped behind a reference;
/// the reference points at host-side bookkeeping, never at device memory, so nothing dereferences a
/// device address on the host.
#[repr(C)]
pub struct DeviceSlice<T> {
    raw: SliceRaw,
    _elem: PhantomData<T>,
    _unsized: [()],
}

// SAFETY: the slice is a description of device memory plus a pointer to an `Allocation`, which
// is Send + Sync; `T: DeviceRepr` is Send + Sync.
unsafe impl<T: DeviceRepr> Send for DeviceSlice<T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for DeviceSlice<T> {}

impl<T> DeviceSlice<T> {
    /// # Safety
    /// `raw` must describe live memory of `T`s inside a live allocation, for as long as the
    /// returned reference lives.
    pub(crate) unsafe fn from_raw(raw: &SliceRaw) -> &DeviceSlice<T> {
        let p = std::ptr::slice_from_raw_parts(raw as *const SliceRaw as *const (), 0);
        // SAFETY: `DeviceSlice<T>` is `repr(C)` with `SliceRaw` first and a `[()]` tail, so a
        // pointer to a `SliceRaw` with tail length 0 is a valid pointer to it.
        unsafe { &*(p as *const DeviceSlice<T>) }
    }

    /// # Safety
    /// As for [`DeviceSlice::from_raw`], and the caller holds exclusive access to the memory.
    pub(crate) unsafe fn from_raw_mut(raw: &mut SliceRaw) -> &mut DeviceSlice<T> {
        let p = std::ptr::slice_from_raw_parts_mut(raw as *mut SliceRaw as *mut (), 0);
        // SAFETY: as in `from_raw`.
        unsafe { &mut *(p as *mut DeviceSlice<T>) }
    }

    /// The raw parts (address, length, allocation), for sibling modules.
    pub(crate) fn raw_parts(&self) -> SliceRaw {
        self.raw
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.raw.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.raw.len * std::mem::size_of::<T>()
    }

    /// The device address of the first element (escape hatch for raw calls). Using it after the
    /// buffer is dropped, or writing through it while others read, is up to the caller.
    pub fn as_raw_ptr(&self) -> CUdeviceptr {
        self.raw.ptr
    }

    /// The stream the underlying buffer was allocated on.
    pub(crate) fn home(&self) -> &Arc<StreamInner> {
        // SAFETY: the allocation outlives every slice of it (slices borrow the buffer).
        unsafe { &(*self.raw.alloc).home }
    }

    /// The allocation the slice lies in (kept alive by the buffer the slice borrows).
    pub(crate) fn allocation_ptr(&self) -> *const Allocation {
        self.raw.alloc
    }

    pub(crate) fn before_use(&self, stream: &Arc<StreamInner>) -> Result<()> {
        // SAFETY: the allocation is owned by a live Arc (the buffer this slice borrows).
        unsafe { Allocation::before_use_ptr(self.raw.alloc, stream) }
    }

    pub(crate) fn after_use(&self, stream: &Arc<StreamInner>) -> Result<()> {
        // SAFETY: as above.
        unsafe { Allocation::after_use_ptr(self.raw.alloc, stream) }
    }

    fn sub(&self, op: &'static str, range: impl RangeBounds<usize>) -> Result<SliceRaw> {
        let len = self.raw.len;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => len,
        };
        if start > end || end > len {
            return Err(Error::OutOfBounds {
                op,
                start,
                end,
                len,
            });
        }
        Ok(SliceRaw {
            ptr: self.raw.ptr + (start * std::mem::size_of::<T>()) as u64,
            len: end - start,
            alloc: self.raw.alloc,
        })
    }

    /// A read-only view of `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        Ok(DeviceView {
            raw: self.sub("DeviceSlice::slice", range)?,
            _borrow: PhantomData,
        })
    }

    /// A writable view of `range`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        Ok(DeviceViewMut {
            raw: self.sub("DeviceSlice::slice_mut", range)?,
            _borrow: PhantomData,
        })
    }

    /// Two disjoint writable views, `[0, mid)` and `[mid, len)`, like `<[T]>::split_at_mut`.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>)> {
        let a = self.sub("DeviceSlice::split_at_mut", ..mid)?;
        let b = self.sub("DeviceSlice::split_at_mut", mid..)?;
        Ok((
            DeviceViewMut {
                raw: a,
                _borrow: PhantomData,
            },
            DeviceViewMut {
                raw: b,
                _borrow: PhantomData,
            },
        ))
    }

    /// Two disjoint read-only views, `[0, mid)` and `[mid, len)`.
    pub fn split_at(&self, mid: usize) -> Result<(DeviceView<'_, T>, DeviceView<'_, T>)> {
        Ok((self.slice(..mid)?, self.slice(mid..)?))
    }
}

impl<T> std::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceSlice<{}>{{ ptr: {:#x}, len: {} }}",
            std::any::type_name::<T>(),
            self.raw.ptr,
            self.raw.len
        )
    }
}

/// A read-only view into a buffer; derefs to `&DeviceSlice<T>`. It borrows the buffer, so it
/// cannot outlive it.
pub struct DeviceView<'a, T> {
    raw: SliceRaw,
    _borrow: PhantomData<&'a DeviceSlice<T>>,
}

/// A writable view into a buffer; derefs to `&mut DeviceSlice<T>`. It borrows the buffer
/// mutably, so no other view of the same memory can exist alongside it.
pub struct DeviceViewMut<'a, T> {
    raw: SliceRaw,
    _borrow: PhantomData<&'a mut DeviceSlice<T>>,
}

// SAFETY: views are borrows of Send + Sync slices.
unsafe impl<T: DeviceRepr> Send for DeviceView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for DeviceView<'_, T> {}
// SAFETY: as above; the mutable view is exclusive by construction.
unsafe impl<T: DeviceRepr> Send for DeviceViewMut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for DeviceViewMut<'_, T> {}

impl<T> Deref for DeviceView<'_, T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: the view borrows a live buffer for its lifetime.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<T> Deref for DeviceViewMut<'_, T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: as above.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<T> DerefMut for DeviceViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: as above, and the view holds the buffer's mutable borrow.
        unsafe { DeviceSlice::from_raw_mut(&mut self.raw) }
    }
}
