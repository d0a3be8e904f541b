//! Device memory and pinned host memory.
//!
//! ## The model: memory in use by queued work is never freed under it
//! Every [`DeviceBuffer`] is allocated **on a stream**, its *home*. It is freed on that stream in
//! stream order (`cuMemFreeAsync` from the device's pool, or, where pools are unsupported, after
//! synchronizing that stream), so work queued before the drop on the home stream always finishes
//! first.
//!
//! Using a buffer on another stream is safe without any user synchronization: each allocation
//! remembers the streams other than its home that used it, by an event recorded after each such
//! use. Before any operation on stream `S` the allocation makes `S` wait for
//! (a) an event recorded on the home stream, when `S` is not the home stream, and (b) the events of
//! the other streams that used it. Its free waits for all of them too. Operations on the home stream
//! alone pay one atomic load per buffer argument, nothing more. This is the scheme cudarc uses,
//! applied per allocation; reads and writes are ordered alike (conservative: two streams reading
//! the same buffer are serialised).
//!
//! Host memory handed to an asynchronous copy is borrowed by a [`PendingCopy`] until the copy is
//! known complete, and, should the guard be leaked with `mem::forget`, the pinned buffer itself
//! waits for the copy before the host can touch or free it.

mod allocation;
mod buffer;
pub mod cast;
mod copy;
mod external;
mod peer_copy;
mod pinned;
mod registered;
mod repr;
mod slice;

pub(crate) use allocation::Allocation;
pub use buffer::DeviceBuffer;
pub use copy::PendingCopy;
pub use external::ExternalSlice;
pub use pinned::{HostAllocFlags, PinnedBuffer};
pub use registered::HostRegistration;
pub use repr::DeviceRepr;
pub(crate) use slice::SliceRaw;
pub use slice::{DeviceSlice, DeviceView, DeviceViewMut};

/// Host memory the driver can copy to and from asynchronously (page-locked): implemented by
/// [`PinnedBuffer`] and [`HostRegistration`].
pub trait PinnedHost<T: DeviceRepr>: pinned::Sealed {
    /// Elements.
    fn len(&self) -> usize;
    /// Whether empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[doc(hidden)]
    fn pending(&self) -> &pinned::PendingSlot;
    #[doc(hidden)]
    fn host_ptr(&self) -> *mut T;
}
