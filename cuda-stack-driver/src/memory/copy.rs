//! Allocation and copies, as methods of [`Stream`]: every transfer is queued on a stream.

use super::{DeviceBuffer, DeviceSlice, PinnedHost};
use crate::{driver, DeviceRepr, Error, Result, Stream};
use std::marker::PhantomData;

/// An asynchronous copy between pinned host memory and the device, in flight.
///
/// It borrows the host buffer (shared for host→device, exclusive for device→host) until it is
/// dropped or [`PendingCopy::wait`]ed, so the host cannot touch memory the DMA engine is still
/// using; dropping it waits for the copy. (If it is leaked instead, the pinned buffer itself waits
/// before any host access or free.)
#[must_use = "dropping a PendingCopy waits for the copy; keep it to overlap work, then wait()"]
pub struct PendingCopy<'a> {
    slot: &'a super::pinned::PendingSlot,
    stream: Stream,
    waited: bool,
    _host: PhantomData<&'a mut ()>,
}

impl PendingCopy<'_> {
    /// Waits for the copy and returns its error, if any.
    pub fn wait(mut self) -> Result<()> {
        self.waited = true;
        self.slot.wait()
    }

    /// Whether the copy has finished (without blocking).
    pub fn is_complete(&self) -> Result<bool> {
        self.stream.query()
    }
}

impl Drop for PendingCopy<'_> {
    fn drop(&mut self) {
        if !self.waited {
            self.slot.wait_or_report(self.stream.context());
        }
    }
}

impl Stream {
    fn check_device<T>(&self, what: &'static str, s: &DeviceSlice<T>) -> Result<()> {
        let home = &s.home().ctx;
        if home.same_as(self.context()) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what,
                expected: self.context().device().ordinal() as i32,
                found: home.device().ordinal() as i32,
            })
        }
    }

    fn check_len(op: &'static str, src: usize, dst: usize) -> Result<()> {
        if src == dst {
            Ok(())
        } else {
            Err(Error::LengthMismatch { op, src, dst })
        }
    }

    /// Allocates `len` uninitialised elements on this stream.
    ///
    /// # Safety
    /// The contents are arbitrary until written (valid `T`s, since `T: Pod`, but garbage). Use
    /// [`Stream::alloc_zeros`] unless every element is written before it is read.
    pub unsafe fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: forwarded to the caller.
        unsafe { DeviceBuffer::uninit(self, len) }
    }

    /// Allocates `len` elements on this stream, zero-filled (in stream order).
    pub fn alloc_zeros<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: zero-filled right away, in stream order before any other use.
        let mut b = unsafe { DeviceBuffer::uninit(self, len)? };
        self.memset_zeros(&mut b)?;
        Ok(b)
    }

    /// Allocates a buffer on this stream holding a copy of `src` (`cudarc`'s `clone_htod`).
    /// Returns once the copy is done.
    pub fn clone_htod<T: DeviceRepr>(&self, src: &[T]) -> Result<DeviceBuffer<T>> {
        // SAFETY: fully written by the copy below before anyone can read it.
        let mut b = unsafe { DeviceBuffer::uninit(self, src.len())? };
        self.memcpy_htod(src, &mut b)?;
        Ok(b)
    }

    /// Copies `src` (any host memory) into `dst`; returns once the copy is done.
    /// The lengths must match: a mismatch is an error and nothing is copied.
    pub fn memcpy_htod<T: DeviceRepr>(&self, src: &[T], dst: &mut DeviceSlice<T>) -> Result<()> {
        Self::check_len("memcpy_htod", src.len(), dst.len())?;
        self.check_device("the destination buffer", dst)?;
        let _gate = self.inner.enter();
        self.refuse_capture("memcpy_htod")?;
        if src.is_empty() {
            return Ok(());
        }
        self.context().bind_cached()?;
        dst.before_use(&self.inner)?;
        // SAFETY: `src` is valid for `num_bytes` bytes and stays borrowed until the stream is
        // synchronized below; `dst` is device memory of the same size.
        unsafe {
            driver()?.cuMemcpyHtoDAsync_v2(
                dst.as_raw_ptr(),
                src.as_ptr().cast(),
                dst.num_bytes(),
                self.as_raw(),
            )?
        };
        self.finish_blocking_copy(dst.after_use(&self.inner))
    }

    /// Copies `src` into `dst` (any host memory); returns once the copy is done.
    pub fn memcpy_dtoh<T: DeviceRepr>(&self, src: &DeviceSlice<T>, dst: &mut [T]) -> Result<()> {
        Self::check_len("memcpy_dtoh", src.len(), dst.len())?;
        self.check_device("the source buffer", src)?;
        let _gate = self.inner.enter();
        self.refuse_capture("memcpy_dtoh")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.context().bind_cached()?;
        src.before_use(&self.inner)?;
        // SAFETY: `dst` is valid for writes of `num_bytes` bytes and stays borrowed until the
        // stream is synchronized below; any bytes are valid `T`s (Pod).
        unsafe {
            driver()?.cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr().cast(),
                src.as_raw_ptr(),
                src.num_bytes(),
                self.as_raw(),
            )?
        };
        self.finish_blocking_copy(src.after_use(&self.inner))
    }

    /// The end of a copy whose host side is only borrowed for the call: whatever failed, the
    /// copy is finished (or the context is dead) before the borrow ends.
    fn finish_blocking_copy(&self, tracked: Result<()>) -> Result<()> {
        let synced = self.synchronize();
        if synced.is_err() {
            self.inner.settle();
        }
        tracked.and(synced)
    }

    /// Copies `src` into a new `Vec`; returns once the copy is done.
    pub fn clone_dtoh<T: DeviceRepr>(&self, src: &DeviceSlice<T>) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); src.len()];
        self.memcpy_dtoh(src, &mut v)?;
        Ok(v)
    }

    /// Queues a device-to-device copy (asynchronous).
    pub fn memcpy_dtod<T: DeviceRepr>(
        &self,
        src: &DeviceSlice<T>,
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        Self::check_len("memcpy_dtod", src.len(), dst.len())?;
        self.check_device("the source buffer", src)?;
        self.check_device("the destination buffer", dst)?;
        if src.is_empty() {
            return Ok(());
        }
        let _gate = self.inner.enter();
        self.context().bind_cached()?;
        src.before_use(&self.inner)?;
        dst.before_use(&self.inner)?;
        // SAFETY: both ranges are live device memory of `num_bytes` bytes, ordered by the
        // tracking above; `&`/`&mut` guarantee they do not overlap.
        unsafe {
            driver()?.cuMemcpyDtoDAsync_v2(
                dst.as_raw_ptr(),
                src.as_raw_ptr(),
                src.num_bytes(),
                self.as_raw(),
            )?
        };
        // Each `after_use` settles the stream itself if it fails: both are always attempted.
        let a = src.after_use(&self.inner);
        let b = dst.after_use(&self.inner);
        a.and(b)
    }

    /// Allocates a buffer on this stream and queues a copy of `src` into it.
    pub fn clone_dtod<T: DeviceRepr>(&self, src: &DeviceSlice<T>) -> Result<DeviceBuffer<T>> {
        // SAFETY: fully written by the copy, in stream order before any other use.
        let mut b = unsafe { DeviceBuffer::uninit(self, src.len())? };
        self.memcpy_dtod(src, &mut b)?;
        Ok(b)
    }

    /// Queues setting every byte of `dst` to zero.
    pub fn memset_zeros<T: DeviceRepr>(&self, dst: &mut DeviceSlice<T>) -> Result<()> {
        self.memset_bytes(dst, 0)
    }

    /// Queues setting every byte of `dst` to `byte`.
    pub fn memset_bytes<T: DeviceRepr>(&self, dst: &mut DeviceSlice<T>, byte: u8) -> Result<()> {
        self.check_device("the destination buffer", dst)?;
        if dst.is_empty() {
            return Ok(());
        }
        let _gate = self.inner.enter();
        self.context().bind_cached()?;
        dst.before_use(&self.inner)?;
        // SAFETY: live device memory of `num_bytes` bytes; any bytes are valid `T`s (Pod).
        unsafe {
            driver()?.cuMemsetD8Async(dst.as_raw_ptr(), byte, dst.num_bytes(), self.as_raw())?
        };
        dst.after_use(&self.inner)
    }

    /// Queues an asynchronous copy from pinned host memory to the device. The returned guard
    /// borrows `src` until the copy is complete.
    pub fn copy_htod_async<'a, T: DeviceRepr, H: PinnedHost<T>>(
        &self,
        src: &'a H,
        dst: &mut DeviceSlice<T>,
    ) -> Result<PendingCopy<'a>> {
        Self::check_len("copy_htod_async", src.len(), dst.len())?;
        self.check_device("the destination buffer", dst)?;
        let _gate = self.inner.enter();
        self.refuse_capture("copy_htod_async")?;
        // Made before the copy is queued, so that nothing can fail between queuing the copy and
        // recording its completion but the record itself (which settles on failure).
        let done = crate::Event::new(self.context(), false)?;
        self.context().bind_cached()?;
        dst.before_use(&self.inner)?;
        if !dst.is_empty() {
            // SAFETY: `src` is pinned memory valid for `num_bytes`, borrowed by the returned guard
            // (and guarded by its pending slot) until the copy completes.
            unsafe {
                driver()?.cuMemcpyHtoDAsync_v2(
                    dst.as_raw_ptr(),
                    src.host_ptr().cast(),
                    dst.num_bytes(),
                    self.as_raw(),
                )?
            };
        }
        let tracked = dst.after_use(&self.inner);
        self.track_pending(src.pending(), done)?;
        tracked?;
        Ok(PendingCopy {
            slot: src.pending(),
            stream: self.clone(),
            waited: false,
            _host: PhantomData,
        })
    }

    /// Queues an asynchronous copy from the device to pinned host memory. The returned guard
    /// borrows `dst` exclusively until the copy is complete.
    pub fn copy_dtoh_async<'a, T: DeviceRepr, H: PinnedHost<T>>(
        &self,
        src: &DeviceSlice<T>,
        dst: &'a mut H,
    ) -> Result<PendingCopy<'a>> {
        Self::check_len("copy_dtoh_async", src.len(), dst.len())?;
        self.check_device("the source buffer", src)?;
        let _gate = self.inner.enter();
        self.refuse_capture("copy_dtoh_async")?;
        dst.pending().wait()?;
        let done = crate::Event::new(self.context(), false)?;
        self.context().bind_cached()?;
        src.before_use(&self.inner)?;
        if !src.is_empty() {
            // SAFETY: `dst` is pinned memory valid for writes of `num_bytes`, exclusively borrowed
            // by the returned guard until the copy completes; any bytes are valid `T`s.
            unsafe {
                driver()?.cuMemcpyDtoHAsync_v2(
                    dst.host_ptr().cast(),
                    src.as_raw_ptr(),
                    src.num_bytes(),
                    self.as_raw(),
                )?
            };
        }
        let tracked = src.after_use(&self.inner);
        let dst: &'a H = dst;
        self.track_pending(dst.pending(), done)?;
        tracked?;
        Ok(PendingCopy {
            slot: dst.pending(),
            stream: self.clone(),
            waited: false,
            _host: PhantomData,
        })
    }

    /// Records `done` after a queued async copy and hands it to the host buffer's pending slot;
    /// if the record fails, settles the stream so the copy is over before the error returns.
    fn track_pending(&self, slot: &super::pinned::PendingSlot, done: crate::Event) -> Result<()> {
        match done.record_entered(self) {
            Ok(()) => {
                slot.add(done);
                Ok(())
            }
            Err(e) => {
                self.inner.settle();
                Err(e)
            }
        }
    }
}
