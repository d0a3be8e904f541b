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
        // `self` drops with an empty Vec afterwards, which unregisters nothing.
        if !self.data.is_empty() && std::mem::size_of::<T>() > 0 {
            // SAFETY: registered in `new`; no copy is pending. On failure the Vec stays in
            // `self`, whose `Drop` tries again (freeing registered memory would break later
            // registrations at that address).
            unsafe { driver()?.cuMemHostUnregister(self.data.as_mut_ptr().cast())? };
        }
        Ok(std::mem::take(&mut self.data))
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
        if self.data.is_empty() || std::mem::size_of::<T>() == 0 {
            return; // nothing was registered (`new` registers only a non-empty buffer)
        }
        let mut data = LeakUnlessUnregistered(Some(std::mem::take(&mut self.data)));
        let ctx = self.ctx.clone();
        let pending = std::mem::take(&mut self.pending);
        // The closure owns the Vec: it is freed only after its copies are over and it is
        // unregistered; if unregistering fails, it is leaked (freeing registered memory would
        // make later registrations of that address fail).
        crate::host_callback::release_on_drop(self.ctx.clone(), "cuMemHostUnregister", move || {
            pending.wait_or_report(&ctx);
            // SAFETY: registered in `new`; no copy is pending; unregistered once (on failure the
            // Vec is leaked, still registered).
            unsafe { driver()?.cuMemHostUnregister(data.vec().as_mut_ptr().cast())? };
            data.release();
            Ok(())
        });
    }
}

/// A registered `Vec` on its way out: freed by [`LeakUnlessUnregistered::release`] once it is
/// unregistered, leaked if it is dropped still registered.
struct LeakUnlessUnregistered<T>(Option<Vec<T>>);

impl<T> LeakUnlessUnregistered<T> {
    fn vec(&mut self) -> &mut Vec<T> {
        self.0.get_or_insert_with(Vec::new)
    }

    fn release(&mut self) {
        drop(self.0.take());
    }
}

impl<T> Drop for LeakUnlessUnregistered<T> {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            std::mem::forget(v);
        }
    }
}
