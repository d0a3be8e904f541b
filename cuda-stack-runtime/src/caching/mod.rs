//! A caching device-memory allocator, like PyTorch's `CUDACachingAllocator` (simplified).
//!
//! Allocating from the driver is slow (and `cuMemFree` may synchronize), so frameworks keep
//! freed blocks and hand them out again. That is why `torch.cuda.memory_reserved()` (what the
//! process holds from the driver) is usually larger than `torch.cuda.memory_allocated()` (what
//! live tensors use), and why `nvidia-smi` does not go down when a tensor is dropped — until
//! `torch.cuda.empty_cache()`.
//!
//! ## The rules
//! - **Size classes** ([`size_class`]): requests up to 1 MiB go to the *small* pool rounded up
//!   to a multiple of 512 B; larger ones go to the *large* pool rounded up to a multiple of
//!   2 MiB. Each block is one driver allocation (`stream.alloc::<u8>(class)`) of exactly its
//!   class size, and is reused only for requests of the same class (no splitting or merging).
//! - **Blocks are untyped**: the cache holds `DeviceBuffer<u8>` blocks, and hands them out as
//!   typed memory through `cuda-stack-driver`'s [`cuda_stack_driver::memory::cast`] (a
//!   [`CachedBuffer<T>`] derefs to `DeviceSlice<T>`), so one cache serves every element type.
//! - **Stream-aware reuse**: every block belongs to the stream it was first allocated on. A block
//!   returned to the cache is reused **only by allocations for that same stream**; an allocation
//!   for another stream never takes it (it takes a block of its own stream, or a new one). This
//!   is PyTorch's rule, and it is what makes reuse free of synchronization: on its home stream,
//!   the new user's work is queued after the old user's. What the old user queued on *other*
//!   streams is covered by `cuda-stack-driver`: each allocation records an event after every use on a
//!   stream other than its home, and the next use on the home stream waits for those events (the
//!   automatic equivalent of PyTorch's `tensor.record_stream(s)`). So data written through one
//!   stream is never overwritten by a later user of the block, and a later user never reads the
//!   block before the earlier work is done.
//! - **Graphs**: a block that a CUDA graph captured work on is not cached when returned (a graph
//!   launch might still write it); it is freed when the graph is dropped.
//! - **Graph-private pools** (reuse *within* a capture, PyTorch's `graph_pool_handle`): a block
//!   returned while a capture is in progress on its home stream, and held by that capture and by
//!   nothing else (no other graph, no other capture:
//!   [`cuda_stack_driver::DeviceBuffer::held_only_by_capture`]), goes to a free list private to
//!   that capture. Later allocations for that stream **during the same capture** take it (same
//!   size class, counted as cache hits) before the general cache. This is sound because a capture
//!   records its stream's work as one chain: `cuda-stack-driver` refuses event records and
//!   cross-stream use of a capturing stream's buffers, and foreign libraries must queue on the
//!   stream they are given, so in every replay the new user's nodes run after every node of the
//!   old user (and consecutive replays are ordered through the blocks' own stream tracking).
//!   So a captured step needs the *peak* of its temporaries, not their sum. When the capture ends
//!   (or is abandoned), its private list is given up (counted as driver frees): those blocks are
//!   held by the graph, never handed out again, and freed when the graph is dropped (at once for
//!   an abandoned capture). Whenever a condition cannot be established — the block is used by
//!   another graph or capture, its home stream is not the capturing one, the capture has ended —
//!   the block is handled by the rule above (not reused). A buffer allocated during a capture and
//!   kept after it may share its memory with the capture's temporaries, so replays rewrite it —
//!   as they rewrite every buffer the captured work writes: read what a capture produced as an
//!   output of the graph, after a replay.
//! - **Out of memory**: when the driver cannot allocate, the cache is emptied, the device
//!   synchronized, and the allocation retried once.
//!
//! ## Statistics
//! [`MemoryStats`] counts, per pool: allocated, reserved, requested bytes (current and peak),
//! live and cached blocks, allocations, frees, cache hits and misses, and blocks given back to the
//! driver. [`CachingAllocator::memory_summary`] prints them as a table.

mod allocator;
mod block_cache;
mod buffer;
mod size_class;
mod stats;

pub use allocator::CachingAllocator;
pub use buffer::CachedBuffer;
pub use size_class::{size_class, Pool, LARGE_ROUND, SMALL_LIMIT, SMALL_ROUND};
pub use stats::{format_bytes, MemoryStats, PoolStats};
