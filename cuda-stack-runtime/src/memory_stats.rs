//! `torch.cuda`-style memory statistics of the current device's caching allocator.

use crate::caching::MemoryStats;
use crate::{Result, Runtime};

/// Bytes in live buffers on the current device, rounded to their size classes
/// (`torch.cuda.memory_allocated()`).
pub fn memory_allocated() -> Result<usize> {
    Ok(Runtime::current()?.allocator().memory_allocated())
}

/// Bytes the current device's allocator holds from the driver: live plus cached blocks
/// (`torch.cuda.memory_reserved()`, formerly `memory_cached()`).
pub fn memory_reserved() -> Result<usize> {
    Ok(Runtime::current()?.allocator().memory_reserved())
}

/// The peak of [`memory_allocated`] since start or the last [`reset_peak_stats`]
/// (`torch.cuda.max_memory_allocated()`).
pub fn max_memory_allocated() -> Result<usize> {
    Ok(Runtime::current()?.allocator().max_memory_allocated())
}

/// The peak of [`memory_reserved`] since start or the last [`reset_peak_stats`]
/// (`torch.cuda.max_memory_reserved()`).
pub fn max_memory_reserved() -> Result<usize> {
    Ok(Runtime::current()?.allocator().max_memory_reserved())
}

/// Sets the peaks to the current values (`torch.cuda.reset_peak_memory_stats()`).
pub fn reset_peak_stats() -> Result<()> {
    Runtime::current()?.allocator().reset_peak_stats();
    Ok(())
}

/// Returns every cached block of the current device to the driver
/// (`torch.cuda.empty_cache()`): [`memory_reserved`] drops to what live buffers hold. The
/// device's other caches of memory kept for reuse go too (cuBLAS workspaces, any
/// [`cuda_stack_driver::MemoryCache`] registered with its context): a process that has dropped its
/// tensors and calls this holds no device memory of its own, so a leak checker finds none at
/// exit.
pub fn empty_cache() -> Result<()> {
    Ok(Runtime::current()?.context().release_memory_caches()?)
}

/// All the counters of the current device's allocator (`torch.cuda.memory_stats()`).
pub fn memory_stats() -> Result<MemoryStats> {
    Ok(Runtime::current()?.allocator().stats())
}

/// The counters as a table (`torch.cuda.memory_summary()`).
pub fn memory_summary() -> Result<String> {
    Ok(Runtime::current()?.allocator().memory_summary())
}
