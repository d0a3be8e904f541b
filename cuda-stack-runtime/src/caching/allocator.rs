//! [`CachingAllocator`]: the handle that allocates through the cache (`block_cache.rs`) and
//! reads its statistics the way `torch.cuda` reports them.

use super::block_cache::{BlockCache, BlockInfo};
use super::buffer::CachedBuffer;
use super::size_class::size_class;
use super::stats::MemoryStats;
use crate::Result;
use cuda_stack_driver::{Context, DeviceRepr, MemoryCache, Stream};
use std::sync::{Arc, Weak};

/// A caching device-memory allocator for one device, like PyTorch's `CUDACachingAllocator`
/// (simplified; see the [module docs](crate::caching) for the rules).
///
/// Cloning gives another handle to the same cache. Buffers it hands out ([`CachedBuffer`]) keep
/// it alive and return their block to it when dropped.
#[derive(Clone)]
pub struct CachingAllocator {
    shared: Arc<BlockCache>,
}

impl CachingAllocator {
    /// An empty cache for the device of `ctx`.
    pub fn new(ctx: &Context) -> CachingAllocator {
        let a = CachingAllocator {
            shared: Arc::new(BlockCache::new(ctx)),
        };
        // Its free blocks are memory kept for reuse: `Context::release_memory_caches` (what
        // `crate::empty_cache` calls) gives them back with every other crate's caches.
        let weak: Weak<dyn MemoryCache> = Arc::downgrade(&a.shared) as Weak<BlockCache>;
        ctx.register_memory_cache(weak);
        a
    }

    /// The context (device) it allocates in.
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }

    /// Allocates `len` uninitialised elements of `T` for use on `stream` (`cudaMalloc` through
    /// the cache): a cached block of the same size class allocated on the same `stream` if there
    /// is one (a *cache hit*), else a new block from the driver (a *miss*).
    ///
    /// When the driver runs out of memory, the cache is emptied, the device synchronized, and the
    /// allocation retried once before the error is returned.
    ///
    /// # Safety
    /// The contents are arbitrary until written: a reused block holds whatever its previous user
    /// left (valid `T`s, since `T: Pod`, but stale data). Memory-safe, `unsafe` for the same
    /// reason as [`Stream::alloc`]: use [`CachingAllocator::alloc_zeros`] unless every element is
    /// written before it is read.
    pub unsafe fn alloc<T: DeviceRepr>(
        &self,
        stream: &Stream,
        len: usize,
    ) -> Result<CachedBuffer<T>> {
        const OP: &str = "CachingAllocator::alloc";
        if !stream.context().same_as(&self.shared.ctx) {
            return Err(cuda_stack_driver::Error::DeviceMismatch {
                what: "the stream",
                expected: self.shared.ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            }
            .into());
        }
        let overflow = || cuda_stack_driver::Error::SizeOverflow {
            op: OP,
            count: len,
            elem_size: std::mem::size_of::<T>(),
        };
        let requested = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(overflow)?;
        let (class, pool) = size_class(requested).ok_or_else(overflow)?;
        let info = BlockInfo::new(stream, class, pool, requested);
        let block = match self.shared.take_cached(stream, &info) {
            Some(b) => b,
            None => self.shared.alloc_block(stream, &info)?,
        };
        match block.into_typed::<T>(len) {
            Ok(typed) => Ok(CachedBuffer::new(typed, self.shared.clone(), info)),
            Err(e) => {
                // Cannot happen (the class holds `requested` bytes and driver allocations are
                // 256-byte aligned), but if it did, the block goes back to the cache.
                let (error, block) = e.into_parts();
                self.shared.release(block, &info);
                Err(error.into())
            }
        }
    }

    /// Allocates `len` zeroed elements of `T` on `stream` (`cudaMalloc` + `cudaMemsetAsync`; the
    /// zeroing is queued on `stream`).
    pub fn alloc_zeros<T: DeviceRepr>(
        &self,
        stream: &Stream,
        len: usize,
    ) -> Result<CachedBuffer<T>> {
        // SAFETY: every byte is zeroed on `stream` before any other use on it (and uses on other
        // streams are ordered after it by cuda-stack-driver's per-allocation events).
        let mut b = unsafe { self.alloc::<T>(stream, len)? };
        stream.memset_zeros(&mut b)?;
        Ok(b)
    }

    /// Allocates a buffer on `stream` holding a copy of `src` (any host memory); returns when
    /// the copy is done.
    pub fn clone_htod<T: DeviceRepr>(&self, stream: &Stream, src: &[T]) -> Result<CachedBuffer<T>> {
        // SAFETY: fully written by the copy before anyone can read it.
        let mut b = unsafe { self.alloc::<T>(stream, src.len())? };
        stream.memcpy_htod(src, &mut b)?;
        Ok(b)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MemoryStats {
        self.shared.stats()
    }

    /// Bytes in live buffers, rounded to their size classes (`torch.cuda.memory_allocated`).
    pub fn memory_allocated(&self) -> usize {
        self.stats().allocated_bytes()
    }

    /// Bytes held from the driver, live and cached (`torch.cuda.memory_reserved`).
    pub fn memory_reserved(&self) -> usize {
        self.stats().reserved_bytes()
    }

    /// The highest [`CachingAllocator::memory_allocated`] since creation or the last
    /// [`CachingAllocator::reset_peak_stats`] (`torch.cuda.max_memory_allocated`).
    pub fn max_memory_allocated(&self) -> usize {
        self.stats().peak_allocated_bytes
    }

    /// The highest [`CachingAllocator::memory_reserved`] since creation or the last reset
    /// (`torch.cuda.max_memory_reserved`).
    pub fn max_memory_reserved(&self) -> usize {
        self.stats().peak_reserved_bytes
    }

    /// Sets the peaks to the current values (`torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peak_stats(&self) {
        self.shared.reset_peak_stats();
    }

    /// The counters as a table (`torch.cuda.memory_summary`); see [`MemoryStats::summary`].
    pub fn memory_summary(&self) -> String {
        self.stats().summary()
    }

    /// Returns every cached block of this allocator to the driver: reserved memory drops to what
    /// live buffers hold. ([`crate::empty_cache`] does this and also frees the other caches of
    /// the device, such as cuBLAS workspaces: [`Context::release_memory_caches`].) The frees are stream-ordered (`cuMemFreeAsync` on each
    /// block's stream), so work still queued on a block finishes first. Returns the first error
    /// a free reported (all blocks are released either way).
    pub fn empty_cache(&self) -> Result<()> {
        self.shared.empty_cache()
    }
}

impl std::fmt::Debug for CachingAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.stats();
        f.debug_struct("CachingAllocator")
            .field("device", &s.device)
            .field("allocated_bytes", &s.allocated_bytes())
            .field("reserved_bytes", &s.reserved_bytes())
            .finish()
    }
}
