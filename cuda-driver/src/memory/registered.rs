//! Page-locking existing host memory (`cuMemHostRegister`).

use super::pinned::{PendingSlot, Sealed};
use super::PinnedHost;
use crate::{driver, Context, DeviceRepr, Result};
use std::marker::PhantomData;

/// Host memory you already own, page-locked for fast and asynchronous copies for as long as this
/// value lives; unregistered on drop. It borrows the slice mutably, so the memory can be neither
/// freed nor touched except through it.
pub struct HostRegistration<'a, T: DeviceRepr> {
    ptr: *mut T,
    len: usize,
    ctx: Context,
    pending: PendingSlot,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: it is a mutable borrow of `[T]` with `T: Send + Sync`.
unsafe impl<T: DeviceRepr> Send for HostRegistration<'_, T> {}
// SAFETY: shared access only reads, after waiting for pending copies.
unsafe impl<T: DeviceRepr> Sync for HostRegistration<'_, T> {}

impl<'a, T: DeviceRepr> HostRegistration<'a, T> {
    /// Page-locks `data` (`cuMemHostRegister` with `CU_MEMHOSTREGISTER_PORTABLE`).
    pub fn new(ctx: &Context, data: &'a mut [T]) -> Result<HostRegistration<'a, T>> {
        ctx.bind()?;
        let bytes = std::mem::size_of_val(data);
        if bytes > 0 {
            // SAFETY: the range is a live allocation we borrow mutably until unregistered.
            unsafe {
                driver()?.cuMemHostRegister_v2(data.as_mut_ptr().cast(), bytes, 0x01)?;
            }
        }
        Ok(HostRegistration {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            ctx: ctx.clone(),
            pending: PendingSlot::default(),
            _borrow: PhantomData,
        })
    }

    /// The memory, after waiting for any asynchronous copy using it.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.pending.wait()?;
        // SAFETY: we hold the borrow of these `len` elements; no copy is pending.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The memory, mutably, after waiting for any asynchronous copy using it.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.pending.wait()?;
        // SAFETY: as above, exclusively.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Unregisters now, returning the driver's error if any.
    pub fn unregister(self) -> Result<()> {
        self.pending.wait()?;
        let (p, len) = (self.ptr, self.len);
        std::mem::forget(self);
        if len > 0 {
            // SAFETY: registered in `new`, no copy pending.
            unsafe { driver()?.cuMemHostUnregister(p.cast())? };
        }
        Ok(())
    }
}

impl<T: DeviceRepr> Sealed for HostRegistration<'_, T> {}
impl<T: DeviceRepr> PinnedHost<T> for HostRegistration<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn pending(&self) -> &PendingSlot {
        &self.pending
    }
    fn host_ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T: DeviceRepr> Drop for HostRegistration<'_, T> {
    fn drop(&mut self) {
        self.pending.wait_or_report(&self.ctx);
        if self.len == 0 {
            return;
        }
        if let Ok(drv) = driver() {
            // SAFETY: registered in `new`, no copy pending.
            if let Err(e) = unsafe { drv.cuMemHostUnregister(self.ptr.cast()) } {
                self.ctx.report_drop_error("cuMemHostUnregister", e.into());
            }
        }
    }
}
