//! The caching allocator: per-stream, per-size-class free lists of driver blocks, and the
//! statistics `torch.cuda` reports.

use super::buffer::CachedBuffer;
use super::size_class::{size_class, Pool};
use super::stats::MemoryStats;
use crate::Result;
use cuda_stack_driver::{Context, DeviceBuffer, DeviceRepr, MemoryCache, Stream};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A caching device-memory allocator for one device, like PyTorch's `CUDACachingAllocator`
/// (simplified; see the [module docs](crate::caching) for the rules).
///
/// Cloning gives another handle to the same cache. Buffers it hands out ([`CachedBuffer`]) keep
/// it alive and return their block to it when dropped.
#[derive(Clone)]
pub struct CachingAllocator {
    shared: Arc<Shared>,
}

/// The state shared by the allocator handles and the live buffers.
pub(crate) struct Shared {
    ctx: Context,
    state: Mutex<State>,
}

struct State {
    /// Cached blocks by (home stream, size class); each list is used LIFO (the most recently
    /// returned block is the likeliest to still be in L2).
    free: FxHashMap<BlockKey, Vec<DeviceBuffer<u8>>>,
    stats: MemoryStats,
}

/// Where a block belongs in the cache: the stream it was allocated on (its raw handle, unique
/// among live streams; every block keeps its stream alive) and its size class in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BlockKey {
    stream: usize,
    pub(crate) class: usize,
}

/// What a live buffer remembers in order to give its block back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockInfo {
    pub(crate) key: BlockKey,
    pub(crate) pool: Pool,
    requested: usize,
}

impl CachingAllocator {
    /// An empty cache for the device of `ctx`.
    pub fn new(ctx: &Context) -> CachingAllocator {
        let a = CachingAllocator {
            shared: Arc::new(Shared {
                ctx: ctx.clone(),
                state: Mutex::new(State {
                    free: FxHashMap::default(),
                    stats: MemoryStats {
                        device: ctx.device().ordinal(),
                        ..MemoryStats::default()
                    },
                }),
            }),
        };
        // Its free blocks are memory kept for reuse: `Context::release_memory_caches` (what
        // `crate::empty_cache` calls) gives them back with every other crate's caches.
        let weak: Weak<dyn MemoryCache> = Arc::downgrade(&a.shared) as Weak<Shared>;
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
        let info = BlockInfo {
            key: BlockKey {
                stream: stream.as_raw() as usize,
                class,
            },
            pool,
            requested,
        };
        let block = match self.shared.take_cached(&info) {
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
        self.shared.lock().stats
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
        self.shared.lock().stats.reset_peaks();
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

impl MemoryCache for Shared {
    fn release_cached(&self) -> cuda_stack_driver::Result<()> {
        self.empty_cache().map_err(|e| match e {
            crate::Error::Driver(d) => d,
            other => cuda_stack_driver::Error::Unsupported {
                what: "releasing the caching allocator's blocks",
                why: other.to_string(),
            },
        })
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that matters
        // more than refusing service, so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pops a cached block for `info`, counting the hit.
    fn take_cached(&self, info: &BlockInfo) -> Option<DeviceBuffer<u8>> {
        let mut st = self.lock();
        let block = st.free.get_mut(&info.key)?.pop()?;
        let p = st.stats.pool_mut(info.pool);
        p.cache_hits += 1;
        p.cached_blocks = p.cached_blocks.saturating_sub(1);
        Self::count_alloc(&mut st.stats, info);
        Some(block)
    }

    /// Allocates a new block from the driver, counting the miss; on out-of-memory, empties the
    /// cache, synchronizes and retries once.
    fn alloc_block(&self, stream: &Stream, info: &BlockInfo) -> Result<DeviceBuffer<u8>> {
        let class = info.key.class;
        // SAFETY: the block's contents are never read by the allocator; whoever gets it is told
        // (by `CachingAllocator::alloc`'s contract) that they are arbitrary.
        let block = match unsafe { stream.alloc::<u8>(class) } {
            Ok(b) => b,
            Err(cuda_stack_driver::Error::OutOfMemory { .. }) => {
                // Like PyTorch: give the cached blocks back (and every other cache of the
                // device: library workspaces), wait for the frees, try again.
                self.ctx.release_memory_caches()?;
                self.ctx.synchronize()?;
                self.lock().stats.oom_retries += 1;
                // SAFETY: as above.
                unsafe { stream.alloc::<u8>(class)? }
            }
            Err(e) => return Err(e.into()),
        };
        let mut st = self.lock();
        let p = st.stats.pool_mut(info.pool);
        p.cache_misses += 1;
        p.reserved_bytes += class;
        Self::count_alloc(&mut st.stats, info);
        Ok(block)
    }

    fn count_alloc(stats: &mut MemoryStats, info: &BlockInfo) {
        let p = stats.pool_mut(info.pool);
        p.allocs += 1;
        p.active_blocks += 1;
        p.allocated_bytes += info.key.class;
        p.requested_bytes += info.requested;
        stats.update_peaks(info.pool);
    }

    /// Takes back a block from a buffer being dropped. Never panics.
    pub(crate) fn release(&self, block: DeviceBuffer<u8>, info: &BlockInfo) {
        // A graph that captured work on the block may still write it when launched: never hand
        // such a block out again. Dropping it frees it when the graph is dropped.
        let held_by_graph = block.is_held_by_graph();
        let mut st = self.lock();
        let p = st.stats.pool_mut(info.pool);
        p.frees += 1;
        p.active_blocks = p.active_blocks.saturating_sub(1);
        p.allocated_bytes = p.allocated_bytes.saturating_sub(info.key.class);
        p.requested_bytes = p.requested_bytes.saturating_sub(info.requested);
        if held_by_graph {
            p.reserved_bytes = p.reserved_bytes.saturating_sub(info.key.class);
            p.driver_frees += 1;
            drop(st);
            drop(block);
        } else {
            p.cached_blocks += 1;
            st.free.entry(info.key).or_default().push(block);
        }
    }

    fn empty_cache(&self) -> Result<()> {
        let blocks: Vec<DeviceBuffer<u8>> = {
            let mut st = self.lock();
            let free = std::mem::take(&mut st.free);
            let mut out = Vec::new();
            for (key, list) in free {
                let p = st.stats.pool_mut(Pool::for_request(key.class));
                p.cached_blocks = p.cached_blocks.saturating_sub(list.len());
                p.reserved_bytes = p.reserved_bytes.saturating_sub(key.class * list.len());
                p.driver_frees += list.len() as u64;
                out.extend(list);
            }
            out
        };
        // Free outside the lock: these are driver calls.
        let mut first_error = None;
        for b in blocks {
            if let Err(e) = b.free() {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}
