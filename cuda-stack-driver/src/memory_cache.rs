//! [`MemoryCache`]: device memory that a crate keeps only to reuse it (a caching allocator's free
//! blocks, a library handle's per-stream workspaces), registered with its context so that one
//! call gives all of it back ([`Context::release_memory_caches`], what `torch.cuda.empty_cache`
//! does). A process that drops everything and calls it holds no device memory of its own any
//! more: a leak checker (`compute-sanitizer --leak-check full`) finds nothing at exit, although
//! the caches themselves live in process-wide statics that are never dropped.

use crate::{Context, Result};
use std::sync::Weak;

/// Something holding device memory only for reuse. Registered with
/// [`Context::register_memory_cache`]; [`Context::release_memory_caches`] calls
/// [`MemoryCache::release_cached`] on every one still alive.
pub trait MemoryCache: Send + Sync {
    /// Frees the memory held only for reuse (memory in use stays). Frees must be
    /// stream-ordered (as every free of this crate is), so queued work that still uses the memory
    /// finishes first. Must not block on work of other threads for long: a cache that is busy
    /// may skip this call (it is released the next time).
    fn release_cached(&self) -> Result<()>;
}

impl Context {
    /// Registers `cache` with this context: [`Context::release_memory_caches`] releases it while
    /// it is alive (only a weak reference is kept).
    pub fn register_memory_cache(&self, cache: Weak<dyn MemoryCache>) {
        self.live_memory_caches().push(cache);
    }

    /// The registered caches, locked, with those already dropped removed.
    fn live_memory_caches(&self) -> std::sync::MutexGuard<'_, Vec<Weak<dyn MemoryCache>>> {
        let mut v = self
            .inner
            .memory_caches
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        v.retain(|c| c.strong_count() > 0);
        v
    }

    /// Gives back the memory every registered [`MemoryCache`] of this context holds only for
    /// reuse (the caching allocator's free blocks, cuBLAS workspaces …). Every cache is asked,
    /// even after one fails; the first error is returned.
    pub fn release_memory_caches(&self) -> Result<()> {
        // Called outside the lock: a cache may allocate, free or register while it releases.
        let registered: Vec<Weak<dyn MemoryCache>> = self.live_memory_caches().clone();
        // One at a time, each alive only while it is asked: a cache may be released by another's
        // release (a library handle dropped with its workspaces), and an upgraded handle held
        // meanwhile would count as a user and keep it.
        let mut first = Ok(());
        for weak in registered {
            let Some(cache) = weak.upgrade() else {
                continue;
            };
            let r = cache.release_cached();
            drop(cache);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
