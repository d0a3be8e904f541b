//! Copies between devices: [`Stream::memcpy_peer`] (`cuMemcpyPeerAsync`).

use super::DeviceSlice;
use crate::{driver, DeviceRepr, Error, Result, Stream};

impl Stream {
    /// Queues a copy of `src` into `dst` where the two may live on **different devices**
    /// (`cuMemcpyPeerAsync`); on one device it is a device-to-device copy. The stream must belong
    /// to the source's or the destination's device.
    ///
    /// Ordering is the one every buffer has (see [`crate::memory`]), on both sides: the copy
    /// waits for the earlier work on each buffer, queued on any stream of either device, and
    /// later work on either buffer — and its free — waits for the copy. Nothing else is needed
    /// from the caller: no synchronize, no events.
    ///
    /// With peer access enabled ([`crate::Context::enable_peer_access`]) the copy goes over
    /// NVLink or PCIe peer-to-peer; without, the driver stages it through the host (correct, and
    /// slower). The lengths must match. Refused on a stream being captured into a graph (a graph
    /// of one device would have to own a buffer of another).
    pub fn memcpy_peer<T: DeviceRepr>(
        &self,
        src: &DeviceSlice<T>,
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::LengthMismatch {
                op: "memcpy_peer",
                src: src.len(),
                dst: dst.len(),
            });
        }
        let src_ctx = src.home().ctx.clone();
        let dst_ctx = dst.home().ctx.clone();
        if !self.context().same_as(&src_ctx) && !self.context().same_as(&dst_ctx) {
            return Err(Error::DeviceMismatch {
                what: "the stream of a peer copy (it must belong to the source's or the \
                       destination's device)",
                expected: dst_ctx.device().ordinal() as i32,
                found: self.context().device().ordinal() as i32,
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        let _gate = self.inner.enter();
        if self.inner.is_capturing() {
            return Err(Error::Unsupported {
                what: "memcpy_peer on a stream being captured into a graph",
                why: "the graph would have to keep a buffer of another device alive; copy \
                      between devices outside the capture"
                    .into(),
            });
        }
        self.context().bind_cached()?;
        src.before_use(&self.inner)?;
        dst.before_use(&self.inner)?;
        // SAFETY: both ranges are live device memory of `num_bytes` bytes in the contexts named
        // (each slice's allocation lives in its home stream's context), ordered by the tracking
        // above; `&`/`&mut` guarantee they do not overlap.
        unsafe {
            driver()?.cuMemcpyPeerAsync(
                dst.as_raw_ptr(),
                dst_ctx.as_raw(),
                src.as_raw_ptr(),
                src_ctx.as_raw(),
                src.num_bytes(),
                self.as_raw(),
            )?
        };
        // Each `after_use` settles the stream itself if it fails: both are always attempted.
        let a = src.after_use(&self.inner);
        let b = dst.after_use(&self.inner);
        a.and(b)
    }
}
