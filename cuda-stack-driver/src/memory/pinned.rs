//! Pinned (page-locked) host memory: what asynchronous copies need.

use super::PinnedHost;
use crate::{driver, Context, DeviceRepr, Error, Event, Result};
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

bitflags::bitflags! {
    /// Flags for [`PinnedBuffer`] (`cuMemHostAlloc`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostAllocFlags: u32 {
        /// Pinned for every context, not only the allocating one (`CU_MEMHOSTALLOC_PORTABLE`).
        const PORTABLE = 0x01;
        /// Mapped into the device's address space (`CU_MEMHOSTALLOC_DEVICEMAP`).
        const DEVICE_MAP = 0x02;
        /// Write-combined: faster for the device to read over PCIe, but very slow for the CPU to
        /// read. Only for buffers the host writes and never reads (`CU_MEMHOSTALLOC_WRITECOMBINED`).
        const WRITE_COMBINED = 0x04;
    }
}

pub trait Sealed {}

/// Events of the asynchronous copies that may still use a pinned buffer. Host access waits for
/// all of them first, so even a leaked [`super::PendingCopy`] cannot let the host race the DMA
/// engine, and two threads copying from one shared buffer cannot hide each other's copy.
#[derive(Default)]
pub struct PendingSlot(Mutex<Vec<Event>>);

impl PendingSlot {
    pub(crate) fn add(&self, e: Event) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    }

    /// Waits for every pending copy. When waiting on a copy's event fails (twice), polls the
    /// event until it completes, or, when the driver cannot say, waits for the whole context
    /// (if that fails too, the context has a sticky error and runs no more work; while a graph
    /// capture forbids it, it polls on), so when this returns, with or without an error, no
    /// copy uses the memory any more, except inside a host callback, where nothing can be
    /// waited for: then the copies stay pending and [`Error::InHostCallback`] is returned.
    pub(crate) fn wait(&self) -> Result<()> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_empty() {
            return Ok(());
        }
        if crate::host_callback::active() {
            return Err(crate::host_callback::refused());
        }
        let mut first_err = Ok(());
        while let Some(e) = g.last() {
            if let Err(err) = e.synchronize() {
                // Once more, then the last resort (see the docs above).
                if e.synchronize().is_err() {
                    e.context()
                        .inner
                        .wait_until_idle(|| e.query().map_err(|_| ()));
                }
                if first_err.is_ok() {
                    first_err = Err(err);
                }
            }
            g.pop();
        }
        first_err
    }

    /// Waits, reporting a failure (the memory is idle all the same; see [`PendingSlot::wait`]).
    pub(crate) fn wait_or_report(&self, ctx: &Context) {
        if let Err(e) = self.wait() {
            ctx.report_drop_error("waiting for an async copy", e);
        }
    }

    /// Waits before host access through `Deref`, which cannot return an error.
    ///
    /// # Panics
    /// Inside a host callback when a copy is still pending: the memory may be in use by the DMA
    /// engine and cannot be waited for there (the trampoline catches the panic).
    fn wait_for_host_access(&self, ctx: &Context) {
        match self.wait() {
            Ok(()) => {}
            Err(Error::InHostCallback) => panic!(
                "cuda-stack-driver: a pinned buffer with an asynchronous copy in flight was accessed \
                 inside a stream host callback, where the copy cannot be waited for"
            ),
            Err(e) => ctx.report_drop_error("waiting for an async copy", e),
        }
    }
}

/// An array of `T` in pinned host memory (`cuMemHostAlloc`), zero-initialised. Derefs to `[T]`.
///
/// The default flags are none (not write-combined: that is slow for CPU reads). Pinned memory
/// makes host↔device copies faster and lets them run asynchronously
/// ([`crate::Stream::copy_htod_async`]); it is a scarce resource, so allocate it once and reuse it.
pub struct PinnedBuffer<T: DeviceRepr> {
    ptr: *mut T,
    len: usize,
    flags: HostAllocFlags,
    ctx: Context,
    pending: PendingSlot,
}

// SAFETY: the buffer owns its memory exclusively (like a Box<[T]>), and `T: Send + Sync`.
unsafe impl<T: DeviceRepr> Send for PinnedBuffer<T> {}
// SAFETY: shared access only reads, after waiting for pending copies under a Mutex.
unsafe impl<T: DeviceRepr> Sync for PinnedBuffer<T> {}

impl<T: DeviceRepr> PinnedBuffer<T> {
    /// Allocates `len` zeroed elements with the default flags.
    pub fn zeroed(ctx: &Context, len: usize) -> Result<PinnedBuffer<T>> {
        Self::with_flags(ctx, len, HostAllocFlags::empty())
    }

    /// Allocates `len` zeroed elements with `flags`.
    pub fn with_flags(ctx: &Context, len: usize, flags: HostAllocFlags) -> Result<PinnedBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::SizeOverflow {
                op: "PinnedBuffer allocation",
                count: len,
                elem_size: std::mem::size_of::<T>(),
            })?;
        // `cuMemHostAlloc` returns page-aligned memory (4 KiB at least); a `Pod` type may ask
        // for more (`#[repr(align(8192))]`), and a misaligned `&[T]` would be undefined.
        const HOST_ALIGN: usize = 4096;
        if std::mem::align_of::<T>() > HOST_ALIGN {
            return Err(Error::Unsupported {
                what: "PinnedBuffer of a type aligned to more than 4096 bytes",
                why: format!(
                    "the type needs {}-byte alignment, but pinned allocations are only \
                     guaranteed 4096",
                    std::mem::align_of::<T>()
                ),
            });
        }
        ctx.bind()?;
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; freed with cuMemFreeHost in Drop.
        unsafe { driver()?.cuMemHostAlloc(&mut p, bytes.max(1), flags.bits())? };
        if (p as usize) % std::mem::align_of::<T>() != 0 {
            // SAFETY: the allocation just made, freed once.
            let _ = unsafe { driver()?.cuMemFreeHost(p) };
            return Err(Error::Unsupported {
                what: "PinnedBuffer allocation",
                why: format!(
                    "the driver returned memory aligned to less than the {} bytes the type needs",
                    std::mem::align_of::<T>()
                ),
            });
        }
        // SAFETY: `p` points to at least `bytes` writable bytes; zero is a valid `T` (Pod).
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            ptr: p.cast(),
            len,
            flags,
            ctx: ctx.clone(),
            pending: PendingSlot::default(),
        })
    }

    /// Allocates and copies `data` in.
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut b = Self::zeroed(ctx, data.len())?;
        b.copy_from_slice(data);
        Ok(b)
    }

    /// The flags it was allocated with.
    pub fn flags(&self) -> HostAllocFlags {
        self.flags
    }

    /// Waits for any asynchronous copy still using this buffer. Host access does this itself;
    /// call it to see the error, if any.
    pub fn wait(&self) -> Result<()> {
        self.pending.wait()
    }

    /// Frees the buffer, returning the driver's error if any.
    pub fn free(mut self) -> Result<()> {
        self.pending.wait()?;
        // From here `Drop` sees a null pointer and frees nothing (a failure below leaks).
        let p = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        self.len = 0;
        // SAFETY: allocated by cuMemHostAlloc, no copy pending, freed once.
        unsafe { driver()?.cuMemFreeHost(p.cast())? };
        Ok(())
    }
}

impl<T: DeviceRepr> Sealed for PinnedBuffer<T> {}
impl<T: DeviceRepr> PinnedHost<T> for PinnedBuffer<T> {
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

impl<T: DeviceRepr> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.pending.wait_for_host_access(&self.ctx);
        // SAFETY: `ptr` is valid for `len` initialised `T`s, and no DMA writes it any more.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: DeviceRepr> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.pending.wait_for_host_access(&self.ctx);
        // SAFETY: as above, with exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceRepr> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        let ptr = self.ptr as usize;
        if ptr == 0 {
            return; // freed by `free`
        }
        let ctx = self.ctx.clone();
        let pending = std::mem::take(&mut self.pending);
        crate::host_callback::release_on_drop(self.ctx.clone(), "cuMemFreeHost", move || {
            // The memory is idle once this returns, with or without an error (see `wait`).
            pending.wait_or_report(&ctx);
            // SAFETY: allocated by cuMemHostAlloc, no copy pending, freed once (a failed free
            // leaves it allocated).
            unsafe { driver()?.cuMemFreeHost(ptr as *mut std::ffi::c_void)? };
            Ok(())
        });
    }
}
