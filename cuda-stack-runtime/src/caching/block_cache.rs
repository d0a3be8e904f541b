//! The cache itself: per-stream, per-size-class free lists of driver blocks, and the counters
//! `torch.cuda` reports. The allocator's handles allocate through it; a live buffer gives its
//! block back to it when dropped.

use super::size_class::Pool;
use super::stats::MemoryStats;
use crate::Result;
use cuda_stack_driver::{Context, DeviceBuffer, MemoryCache, Stream};
use rustc_hash::FxHashMap;
use std::sync::{Mutex, MutexGuard};

/// The cache of one device: shared by the allocator handles and the live buffers (which give
/// their blocks back to it).
pub(crate) struct BlockCache {
    pub(crate) ctx: Context,
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

impl BlockInfo {
    /// A block of `class` bytes in `pool` for a request of `requested` bytes on `stream`.
    pub(crate) fn new(stream: &Stream, class: usize, pool: Pool, requested: usize) -> BlockInfo {
        BlockInfo {
            key: BlockKey {
                stream: stream.as_raw() as usize,
                class,
            },
            pool,
            requested,
        }
    }
}

impl MemoryCache for BlockCache {
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

impl BlockCache {
    /// An empty cache for the device of `ctx`.
    pub(crate) fn new(ctx: &Context) -> BlockCache {
        BlockCache {
            ctx: ctx.clone(),
            state: Mutex::new(State {
                free: FxHashMap::default(),
                stats: MemoryStats {
                    device: ctx.device().ordinal(),
                    ..MemoryStats::default()
                },
            }),
        }
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    /// Sets the peaks to the current values.
    pub(crate) fn reset_peak_stats(&self) {
        self.lock().stats.reset_peaks();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that matters
        // more than refusing service, so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pops a cached block for `info`, counting the hit.
    pub(crate) fn take_cached(&self, info: &BlockInfo) -> Option<DeviceBuffer<u8>> {
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
    pub(crate) fn alloc_block(
        &self,
        stream: &Stream,
        info: &BlockInfo,
    ) -> Result<DeviceBuffer<u8>> {
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

    pub(crate) fn empty_cache(&self) -> Result<()> {
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
