//! Page-locking existing host memory (`cuMemHostRegister`).

use super::pinned::{PendingSlot, Sealed};
use super::PinnedHost;
use crate::{driver, Context, DeviceRepr, Result};

/// A `Vec<T>` you already have, page-locked for fast and asynchronous copies while this value
/// owns it; unregistered (after waiting for pending copies) when dropped or turned back into the
/// `Vec` with [`HostRegistration::into_inner`].
///
/// It takes the `Vec` by value on purpose: were it only to borrow it, leaking the registration and
/// a pending copy with `mem::forget` would end the borrow while the DMA engine still used the
/// memory. Owning it, a leak can only leak the memory.
pub struct HostRegistration<T: DeviceRepr> {
    data: Vec<T>,
    ctx: Context,
    pending: PendingSlot,
}

impl<T: DeviceRepr> HostRegistration<T> {
    /// Page-locks `data`'s buffer (`cuMemHostRegister` with `CU_MEMHOSTREGISTER_PORTABLE`).
    pub fn new(ctx: &Context, mut data: Vec<T>) -> Result<HostRegistration<T>> {
        ctx.bind()?;
        let bytes = std::mem::size_of_val(data.as_slice());
        if bytes > 0 {
            // SAFETY: the range is the Vec's live heap buffer, which we own until unregistered
            // and never reallocate (no method of this type changes the Vec's length).
            unsafe { driver()?.cuMemHostRegister_v2(data.as_mut_ptr().cast(), bytes, 0x01)? };
        }
        Ok(HostRegistration {
            data,
            ctx: ctx.clone(),
            pending: PendingSlot::default(),
        })
    }

    /// The memory, after waiting for any asynchronous copy using it.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.pending.wait()?;
        Ok(&self.data)
    }

    /// The memory, mutably, after waiting for any asynchronous copy using it.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.pending.wait()?;
        Ok(&mut self.data)
    }

    /// Waits for pending copies, unregisters, and gives the `Vec` back.
    pub fn into_inner(mut self) -> Result<Vec<T>> {
        self.pending.wait()?;
        let data = std::mem::take(&mut self.data);
        let ctx = self.ctx.clone();
        std::mem::forget(self);
        if !data.is_empty() && std::mem::size_of::<T>() > 0 {
            // SAFETY: registered in `new`; no copy is pending.
            unsafe { driver()?.cuMemHostUnregister(data.as_ptr() as *mut _)? };
        }
        drop(ctx);
        Ok(data)
    }
}

impl<T: DeviceRepr> Sealed for HostRegistration<T> {}
impl<T: DeviceRepr> PinnedHost<T> for HostRegistration<T> {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn pending(&self) -> &PendingSlot {
        &self.pending
    }
    fn host_ptr(&self) -> *mut T {
        self.data.as_ptr() as *mut T
    }
}

impl<T: DeviceRepr> Drop for HostRegistration<T> {
    fn drop(&mut self) {
        self.pending.wait_or_report(&self.ctx);
        if self.data.is_empty() || std::mem::size_of::<T>() == 0 {
            return;
        }
        if let Ok(drv) = driver() {
            // SAFETY: registered in `new`; no copy is pending.
            if let Err(e) = unsafe { drv.cuMemHostUnregister(self.data.as_mut_ptr().cast()) } {
                self.ctx.report_drop_error("cuMemHostUnregister", e.into());
            }
        }
    }
}
