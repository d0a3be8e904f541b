//! `CachedBuffer<T>`: device memory from the caching allocator, returned to it on drop.

use super::block_cache::{BlockCache, BlockInfo};
use super::size_class::Pool;
use cuda_stack_driver::memory::cast::TypedBytes;
use cuda_stack_driver::{DeviceRepr, DeviceSlice, Stream};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// `len` elements of `T` in a block from a [`super::CachingAllocator`]: the cached counterpart of
/// [`cuda_stack_driver::DeviceBuffer<T>`], used the same way (it derefs to [`DeviceSlice<T>`], so
/// kernels, copies and views take `&buf` / `&mut buf`).
///
/// Dropping it (or [`CachedBuffer::free`]) returns the block to the cache instead of to the
/// driver; it never panics. The block stays tied to the stream it was allocated for (its home):
/// use on other streams is ordered by `cuda-stack-driver`'s per-allocation events, exactly as for a
/// `DeviceBuffer`, and those events also order the block's next user after this one's work.
pub struct CachedBuffer<T: DeviceRepr> {
    /// Taken out only in `Drop`.
    block: ManuallyDrop<TypedBytes<T>>,
    owner: Arc<BlockCache>,
    info: BlockInfo,
}

impl<T: DeviceRepr> CachedBuffer<T> {
    pub(crate) fn new(block: TypedBytes<T>, owner: Arc<BlockCache>, info: BlockInfo) -> Self {
        CachedBuffer {
            block: ManuallyDrop::new(block),
            owner,
            info,
        }
    }

    /// The size of the block in bytes: the request rounded up to its size class (what
    /// `memory_allocated` counts for this buffer).
    pub fn block_bytes(&self) -> usize {
        self.info.key.class
    }

    /// The pool the block belongs to.
    pub fn pool(&self) -> Pool {
        self.info.pool
    }

    /// The stream the buffer was allocated for (the block's home; see the type docs).
    pub fn stream(&self) -> Stream {
        self.block.home_stream()
    }

    /// Returns the block to the cache now (`cudaFree` through the cache; dropping does the same).
    pub fn free(self) {
        drop(self)
    }
}

impl<T: DeviceRepr> Deref for CachedBuffer<T> {
    type Target = DeviceSlice<T>;
    fn deref(&self) -> &DeviceSlice<T> {
        &self.block
    }
}

impl<T: DeviceRepr> DerefMut for CachedBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        &mut self.block
    }
}

impl<T: DeviceRepr> Drop for CachedBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `block` is taken exactly once, here, and `self` is not used afterwards.
        let block = unsafe { ManuallyDrop::take(&mut self.block) };
        self.owner.release(block.into_bytes(), &self.info);
    }
}

impl<T: DeviceRepr> std::fmt::Debug for CachedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CachedBuffer<{}>{{ ptr: {:#x}, len: {}, block_bytes: {} }}",
            std::any::type_name::<T>(),
            self.as_raw_ptr(),
            self.len(),
            self.info.key.class
        )
    }
}
