//! Reinterpreting device memory as another element type: the device counterpart of
//! `bytemuck::cast_slice`, and typed views of raw byte buffers.
//!
//! Two shapes of the same idea:
//! - **Borrowed**: [`DeviceSlice::cast`] / [`DeviceSlice::cast_mut`] view a slice of `T`s as a
//!   slice of `U`s ([`CastView`] / [`CastViewMut`], which deref to `DeviceSlice<U>`). The view
//!   borrows the source, exactly like [`DeviceSlice::slice`] does, so it cannot outlive it and a
//!   mutable view is exclusive.
//! - **Owned**: [`DeviceBuffer::into_typed`] turns a byte buffer into a [`TypedBytes<T>`]
//!   (which derefs to `DeviceSlice<T>`) covering its first `len` elements, and
//!   [`TypedBytes::into_bytes`] gives the whole byte buffer back. This is what a caching allocator
//!   needs: it keeps untyped blocks and hands them out as typed memory.
//!
//! Both check what makes the reinterpretation meaningful: the device address is aligned to
//! `align_of::<U>()`, the byte length is a whole number of `U`s (or, owned, the `len` elements
//! fit), and `U` is not zero-sized. Since every [`DeviceRepr`] is `bytemuck::Pod`, any bytes are a
//! valid `U`: no other check is needed. The views stay in the same allocation, so the
//! cross-stream ordering of the [module docs](crate::memory) applies to them unchanged.

use super::slice::SliceRaw;
use super::{DeviceBuffer, DeviceSlice};
use crate::{DeviceRepr, Error, Result, Stream};
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ops::{Deref, DerefMut};

/// Checks that `bytes` bytes at device address `ptr` can be read as `U`s, returning how many.
fn check_cast<U>(op: &'static str, ptr: u64, bytes: usize) -> Result<usize> {
    let size = size_of::<U>();
    let align = align_of::<U>();
    if size == 0 {
        return Err(Error::Unsupported {
            what: op,
            why: format!(
                "`{}` is zero-sized, so device memory cannot hold it; cast to a sized type",
                std::any::type_name::<U>()
            ),
        });
    }
    if ptr % align as u64 != 0 {
        return Err(Error::Unsupported {
            what: op,
            why: format!(
                "the device address {ptr:#x} is not aligned to {align} bytes, the alignment of \
                 `{}`; cast a sub-slice that starts at a multiple of {align} bytes",
                std::any::type_name::<U>()
            ),
        });
    }
    if bytes % size != 0 {
        return Err(Error::Unsupported {
            what: op,
            why: format!(
                "the slice has {bytes} bytes, not a whole number of `{}` ({size} bytes each); \
                 cast a sub-slice whose length is a multiple of {size} bytes",
                std::any::type_name::<U>()
            ),
        });
    }
    Ok(bytes / size)
}

/// A read-only view of device memory reinterpreted as `U`s; derefs to `&DeviceSlice<U>`. Made by
/// [`DeviceSlice::cast`]; it borrows the source, so it cannot outlive it.
pub struct CastView<'a, U> {
    raw: SliceRaw,
    _borrow: PhantomData<&'a DeviceSlice<U>>,
}

/// A writable view of device memory reinterpreted as `U`s; derefs to `&mut DeviceSlice<U>`. Made
/// by [`DeviceSlice::cast_mut`]; it borrows the source mutably, so nothing else can view the same
/// memory while it lives.
pub struct CastViewMut<'a, U> {
    raw: SliceRaw,
    _borrow: PhantomData<&'a mut DeviceSlice<U>>,
}

// SAFETY: the views are borrows of `DeviceSlice`s, which are Send + Sync for `DeviceRepr` types
// (a device address plus a pointer to a Send + Sync `Allocation`).
unsafe impl<U: DeviceRepr> Send for CastView<'_, U> {}
// SAFETY: as above.
unsafe impl<U: DeviceRepr> Sync for CastView<'_, U> {}
// SAFETY: as above; the mutable view is exclusive by construction (it holds a `&mut` borrow).
unsafe impl<U: DeviceRepr> Send for CastViewMut<'_, U> {}
// SAFETY: as above.
unsafe impl<U: DeviceRepr> Sync for CastViewMut<'_, U> {}

impl<U> Deref for CastView<'_, U> {
    type Target = DeviceSlice<U>;
    fn deref(&self) -> &DeviceSlice<U> {
        // SAFETY: `raw` lies inside the source slice's live allocation (the view borrows the
        // source for its lifetime), is aligned for `U` and holds `raw.len` whole `U`s
        // (`check_cast`).
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<U> Deref for CastViewMut<'_, U> {
    type Target = DeviceSlice<U>;
    fn deref(&self) -> &DeviceSlice<U> {
        // SAFETY: as for `CastView`.
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<U> DerefMut for CastViewMut<'_, U> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<U> {
        // SAFETY: as for `CastView`, and the view holds the source's exclusive borrow.
        unsafe { DeviceSlice::from_raw_mut(&mut self.raw) }
    }
}

impl<T: DeviceRepr> DeviceSlice<T> {
    fn cast_raw<U: DeviceRepr>(&self, op: &'static str) -> Result<SliceRaw> {
        let raw = self.raw_parts();
        let len = check_cast::<U>(op, raw.ptr, self.num_bytes())?;
        Ok(SliceRaw {
            ptr: raw.ptr,
            len,
            alloc: raw.alloc,
        })
    }

    /// Views these bytes as `U`s (read-only), like `bytemuck::cast_slice`.
    ///
    /// Fails, copying and changing nothing, when the address is not aligned to `align_of::<U>()`,
    /// the byte length is not a multiple of `size_of::<U>()`, or `U` is zero-sized. An empty slice
    /// casts to an empty slice.
    pub fn cast<U: DeviceRepr>(&self) -> Result<CastView<'_, U>> {
        Ok(CastView {
            raw: self.cast_raw::<U>("DeviceSlice::cast")?,
            _borrow: PhantomData,
        })
    }

    /// Views these bytes as `U`s (writable), like `bytemuck::cast_slice_mut`. Fails as
    /// [`DeviceSlice::cast`] does.
    pub fn cast_mut<U: DeviceRepr>(&mut self) -> Result<CastViewMut<'_, U>> {
        Ok(CastViewMut {
            raw: self.cast_raw::<U>("DeviceSlice::cast_mut")?,
            _borrow: PhantomData,
        })
    }
}

/// A byte buffer handed out as `len` elements of `T`: derefs to [`DeviceSlice<T>`] (made by
/// [`DeviceBuffer::into_typed`]).
///
/// It owns the byte buffer, so it is used exactly like a [`DeviceBuffer<T>`]: kernels take
/// `&`/`&mut` of it, copies and cross-stream ordering work the same. The elements cover the first
/// `len * size_of::<T>()` bytes; the rest of the buffer (if any) is unreachable until
/// [`TypedBytes::into_bytes`] gives the whole buffer back. Dropping it frees the buffer as
/// dropping the byte buffer would.
pub struct TypedBytes<T: DeviceRepr> {
    bytes: DeviceBuffer<u8>,
    raw: SliceRaw,
    _elem: PhantomData<T>,
}

// SAFETY: it owns a `DeviceBuffer<u8>` (Send + Sync) and a description of part of that buffer's
// memory; `T: DeviceRepr` is Send + Sync.
unsafe impl<T: DeviceRepr> Send for TypedBytes<T> {}
// SAFETY: as above; shared access only reads the description.
unsafe impl<T: DeviceRepr> Sync for TypedBytes<T> {}

impl DeviceBuffer<u8> {
    /// Reinterprets the start of this byte buffer as `len` elements of `T`, keeping the memory
    /// (no copy, no allocation). The contents are whatever the bytes hold (valid `T`s: `T: Pod`).
    ///
    /// Fails when `len` elements do not fit in the buffer, `T` is zero-sized or the buffer's
    /// address is not aligned to `align_of::<T>()` (device allocations are aligned to at least
    /// 256 bytes, so that does not happen for buffers from `cuMemAlloc`); the error hands the
    /// buffer back ([`IntoTypedError::into_buffer`]).
    pub fn into_typed<T: DeviceRepr>(self, len: usize) -> Result<TypedBytes<T>, IntoTypedError> {
        const OP: &str = "DeviceBuffer::into_typed";
        let raw = DeviceSlice::raw_parts(&*self);
        // Every caching-allocator hit comes through here: the errors are built only when needed.
        let checked = match len.checked_mul(size_of::<T>()) {
            None => Err(Error::SizeOverflow {
                op: OP,
                count: len,
                elem_size: size_of::<T>(),
            }),
            Some(bytes) if bytes > raw.len => Err(Error::OutOfBounds {
                op: OP,
                start: 0,
                end: bytes,
                len: raw.len,
            }),
            Some(bytes) => check_cast::<T>(OP, raw.ptr, bytes),
        };
        match checked {
            Ok(n) => Ok(TypedBytes {
                raw: SliceRaw {
                    ptr: raw.ptr,
                    len: n,
                    alloc: raw.alloc,
                },
                bytes: self,
                _elem: PhantomData,
            }),
            Err(error) => Err(IntoTypedError {
                error: Box::new(error),
                buffer: self,
            }),
        }
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Whether something besides this buffer keeps its memory alive: a [`crate::Graph`] (or a
    /// capture in progress) that recorded work using it. Such memory is freed only when the graph
    /// is dropped, and a graph launch may still write it, so a caching allocator must not hand it
    /// out again (it should drop the buffer instead of caching it).
    pub fn is_held_by_graph(&self) -> bool {
        self.allocation_owners() > 1
    }
}

impl<T: DeviceRepr> TypedBytes<T> {
    /// Gives back the whole byte buffer (all its bytes, not only the typed prefix).
    pub fn into_bytes(self) -> DeviceBuffer<u8> {
        self.bytes
    }

    /// Size in bytes of the underlying byte buffer (at least `len() * size_of::<T>()`).
    pub fn buffer_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The stream the byte buffer was allocated on (its home; see [`DeviceBuffer::home_stream`]).
    pub fn home_stream(&self) -> Stream {
        self.bytes.home_stream()
    }

    /// See [`DeviceBuffer::is_held_by_graph`].
    pub fn is_held_by_graph(&self) -> bool {
        self.bytes.is_held_by_graph()
    }
}

impl<T: DeviceRepr> Deref for TypedBytes<T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: `raw` describes the first `raw.len` `T`s of `self.bytes`, which this value owns
        // (so the allocation is live), aligned and in bounds (checked in `into_typed`).
        unsafe { DeviceSlice::from_raw(&self.raw) }
    }
}

impl<T: DeviceRepr> DerefMut for TypedBytes<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: as above; `&mut self` is exclusive, and `self.bytes` is never reachable from
        // outside while `self` lives.
        unsafe { DeviceSlice::from_raw_mut(&mut self.raw) }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for TypedBytes<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TypedBytes<{}>{{ ptr: {:#x}, len: {}, buffer_bytes: {} }}",
            std::any::type_name::<T>(),
            self.raw.ptr,
            self.raw.len,
            self.bytes.len()
        )
    }
}

/// [`DeviceBuffer::into_typed`] failed: the reason, and the buffer, unchanged.
pub struct IntoTypedError {
    error: Box<Error>,
    buffer: DeviceBuffer<u8>,
}

impl IntoTypedError {
    /// Why the conversion failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The buffer, unchanged.
    pub fn into_buffer(self) -> DeviceBuffer<u8> {
        self.buffer
    }

    /// The reason and the buffer.
    pub fn into_parts(self) -> (Error, DeviceBuffer<u8>) {
        (*self.error, self.buffer)
    }
}

impl std::fmt::Display for IntoTypedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

cuda_stack_sys::debug_as_display!(struct IntoTypedError);

impl std::error::Error for IntoTypedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

impl From<IntoTypedError> for Error {
    fn from(e: IntoTypedError) -> Error {
        *e.error
    }
}

#[cfg(test)]
mod tests {
    use super::check_cast;

    #[test]
    fn aligned_whole_casts_pass() {
        assert_eq!(check_cast::<f32>("t", 0x1000, 16).unwrap(), 4);
        assert_eq!(check_cast::<f64>("t", 0x1008, 0).unwrap(), 0);
        assert_eq!(check_cast::<u8>("t", 0x1001, 7).unwrap(), 7);
        assert_eq!(check_cast::<[f32; 3]>("t", 0x1004, 24).unwrap(), 2);
    }

    #[test]
    fn misaligned_address_is_an_error() {
        let e = check_cast::<f32>("DeviceSlice::cast", 0x1002, 8).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("0x1002") && msg.contains("aligned to 4"),
            "{msg}"
        );
    }

    #[test]
    fn partial_element_is_an_error() {
        let e = check_cast::<f64>("DeviceSlice::cast", 0x1000, 12).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("12 bytes") && msg.contains("8 bytes each"),
            "{msg}"
        );
    }

    #[test]
    fn zero_sized_is_an_error() {
        assert!(check_cast::<()>("t", 0x1000, 0).is_err());
    }
}
