//! The cache itself: per-stream, per-size-class free lists of driver blocks, and the counters
//! `torch.cuda` reports. The allocator's handles allocate through it; a live buffer gives its
//! block back to it when dropped.

use super::size_class::Pool;
use super::stats::MemoryStats;
use crate::Result;
use cuda_stack_driver::{CaptureState, CaptureTicket, Context, DeviceBuffer, MemoryCache, Stream};
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
    /// Graph-private pools: per capture in progress, the blocks it freed that only it holds,
    /// reusable by that capture's later allocations and by nothing else (see the module docs).
    private: Vec<PrivatePool>,
    stats: MemoryStats,
}

/// The blocks one capture in progress freed (see [`BlockCache::release`]).
struct PrivatePool {
    ticket: CaptureTicket,
    free: FxHashMap<BlockKey, Vec<DeviceBuffer<u8>>>,
}

impl PrivatePool {
    fn is_live(&self) -> bool {
        self.ticket.state() == CaptureState::Capturing
    }
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
                private: Vec::new(),
                stats: MemoryStats {
                    device: ctx.device().ordinal(),
                    ..MemoryStats::default()
                },
            }),
        }
    }

    /// A snapshot of the counters (after the pools of finished captures are given up).
    pub(crate) fn stats(&self) -> MemoryStats {
        let mut st = self.lock();
        let stale = Self::take_finished_pools(&mut st);
        let stats = st.stats;
        drop(st);
        drop(stale);
        stats
    }

    /// Removes the private pools of captures that are no longer in progress, counting their
    /// blocks as given back (the graph holds them, and frees them when it is dropped; for a
    /// discarded capture, dropping them frees them now). Drop what it returns outside the lock:
    /// dropping a block may call the driver.
    fn take_finished_pools(st: &mut State) -> Vec<DeviceBuffer<u8>> {
        if st.private.iter().all(PrivatePool::is_live) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let (live, finished): (Vec<_>, Vec<_>) = std::mem::take(&mut st.private)
            .into_iter()
            .partition(PrivatePool::is_live);
        st.private = live;
        for pool in finished {
            for (key, list) in pool.free {
                let p = st.stats.pool_mut(Pool::for_request(key.class));
                p.cached_blocks = p.cached_blocks.saturating_sub(list.len());
                p.reserved_bytes = p.reserved_bytes.saturating_sub(key.class * list.len());
                p.driver_frees += list.len() as u64;
                out.extend(list);
            }
        }
        out
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

    /// Pops a cached block for `info` on `stream`, counting the hit: while `stream` is being
    /// captured, a block of its capture's private pool first (one the same capture freed), else
    /// one of the general cache.
    pub(crate) fn take_cached(
        &self,
        stream: &Stream,
        info: &BlockInfo,
    ) -> Option<DeviceBuffer<u8>> {
        // The stream's capture state is read before the cache's lock is taken (the two locks are
        // never held together).
        let ticket = stream.capture_ticket();
        let mut st = self.lock();
        let stale = Self::take_finished_pools(&mut st);
        let private = ticket.and_then(|t| {
            st.private
                .iter_mut()
                // Checked under the cache's lock: a pool whose capture has ended is never
                // drawn from, whatever the ticket said a moment ago.
                .find(|p| p.ticket.same_capture(&t) && p.is_live())?
                .free
                .get_mut(&info.key)?
                .pop()
        });
        let block = match private {
            Some(b) => Some(b),
            None => st.free.get_mut(&info.key).and_then(Vec::pop),
        };
        if block.is_some() {
            let p = st.stats.pool_mut(info.pool);
            p.cache_hits += 1;
            p.cached_blocks = p.cached_blocks.saturating_sub(1);
            Self::count_alloc(&mut st.stats, info);
        }
        drop(st);
        drop(stale);
        block
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
    pub(crate) fn release(&self, mut block: DeviceBuffer<u8>, info: &BlockInfo) {
        // A block that only the capture in progress on its home stream holds goes to that
        // capture's private pool: its later allocations on the stream are recorded after every
        // use of the block so far, in every replay (see the module docs).
        let capture = block.held_only_by_capture();
        // Any other graph or capture that recorded work on the block may still write it when
        // launched: never hand such a block out again. Dropping it frees it when the graph is
        // dropped.
        let held_by_graph = capture.is_some() || block.is_held_by_graph();
        let mut st = self.lock();
        let stale = Self::take_finished_pools(&mut st);
        let p = st.stats.pool_mut(info.pool);
        p.frees += 1;
        p.active_blocks = p.active_blocks.saturating_sub(1);
        p.allocated_bytes = p.allocated_bytes.saturating_sub(info.key.class);
        p.requested_bytes = p.requested_bytes.saturating_sub(info.requested);
        // Checked under the cache's lock, like `take_cached`'s draw: a capture that has ended
        // by now gets no pool (and an ended capture's pool is never drawn from).
        let capture = capture.filter(|t| t.state() == CaptureState::Capturing);
        let block = if let Some(t) = capture {
            p.cached_blocks += 1;
            let i = match st.private.iter().position(|p| p.ticket.same_capture(&t)) {
                Some(i) => i,
                None => {
                    st.private.push(PrivatePool {
                        ticket: t,
                        free: FxHashMap::default(),
                    });
                    st.private.len() - 1
                }
            };
            st.private[i].free.entry(info.key).or_default().push(block);
            None
        } else if held_by_graph {
            p.reserved_bytes = p.reserved_bytes.saturating_sub(info.key.class);
            p.driver_frees += 1;
            Some(block)
        } else {
            p.cached_blocks += 1;
            st.free.entry(info.key).or_default().push(block);
            None
        };
        drop(st);
        drop(stale);
        drop(block);
    }

    pub(crate) fn empty_cache(&self) -> Result<()> {
        let blocks: Vec<DeviceBuffer<u8>> = {
            let mut st = self.lock();
            let free = std::mem::take(&mut st.free);
            // The pools of captures in progress stay: their blocks are held by the capture, so
            // dropping them would give nothing back, only lose the reuse.
            let mut out = Self::take_finished_pools(&mut st);
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
