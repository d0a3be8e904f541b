//! # cuda-stack-runtime
//!
//! The CUDA **Runtime** API's conveniences, built on the driver-API layer `cuda-stack-driver` — the
//! way `libcudart` is built on `libcuda` (seed 000, layer 3 on top of layer 4) — plus the
//! `torch.cuda` memory tools that PyTorch's caching allocator offers on top of that.
//!
//! | CUDA Runtime / PyTorch | here |
//! |---|---|
//! | `cudaGetDeviceCount` | [`device_count`] |
//! | `cudaSetDevice` / `cudaGetDevice` (per thread) | [`set_device`] / [`current_device`] |
//! | the primary context, initialised lazily | [`Runtime::get`] / [`Runtime::current`] (one per device, per process) |
//! | the default stream | [`Runtime::default_stream`] (a non-blocking stream, see [`Runtime`]) |
//! | `cudaMalloc` | [`malloc`] (uninitialised, `unsafe`), [`malloc_zeros`] → [`CachedBuffer<T>`] |
//! | `cudaFree` | [`free`], or dropping the [`CachedBuffer`] (the block goes back to the cache) |
//! | `cudaMemcpy` H→D / D→H / D→D | [`memcpy_htod`] / [`memcpy_dtoh`] / [`memcpy_dtod`] (source first) |
//! | `cudaMemset` | [`memset`] |
//! | `cudaDeviceSynchronize`, `torch.cuda.synchronize()` | [`synchronize`] |
//! | PyTorch's `CUDACachingAllocator` | [`CachingAllocator`] (see [`caching`]) |
//! | `torch.cuda.memory_allocated()` | [`memory_allocated`] |
//! | `torch.cuda.memory_reserved()` | [`memory_reserved`] |
//! | `torch.cuda.max_memory_allocated()` / `reset_peak_memory_stats()` | [`max_memory_allocated`] / [`reset_peak_stats`] |
//! | `torch.cuda.empty_cache()` | [`empty_cache`] |
//! | `torch.cuda.memory_summary()` / `memory_stats()` | [`memory_summary`] / [`memory_stats`] |
//! | `cudaMemcpy` from pageable memory (driver-staged) | [`copy_htod_pageable`] / [`copy_dtoh_pageable`]: staged through pinned buffers, pipelined, multi-threaded ([`staging`]) |
//!
//! ```no_run
//! use cuda_stack_runtime as rt;
//! # fn main() -> rt::Result<()> {
//! rt::set_device(0)?;
//! let host: Vec<f32> = (0..1_000_000).map(|i| i as f32).collect();
//! let mut a = rt::malloc_zeros::<f32>(host.len())?;   // cudaMalloc + cudaMemset
//! rt::memcpy_htod(&host, &mut a)?;                     // cudaMemcpy(HostToDevice)
//! let back = rt::clone_dtoh(&a)?;                      // cudaMemcpy(DeviceToHost)
//! assert_eq!(back, host);
//! println!("allocated {} B, reserved {} B", rt::memory_allocated()?, rt::memory_reserved()?);
//! drop(a);                                             // back to the cache, not to the driver
//! assert_eq!(rt::memory_allocated()?, 0);              // (if nothing else is live)
//! rt::empty_cache()?;                                  // now reserved drops too
//! print!("{}", rt::memory_summary()?);
//! # Ok(()) }
//! ```
//!
//! ## How it relates to `cuda-stack-driver`
//! Everything here is `cuda-stack-driver` underneath: a [`CachedBuffer<T>`] derefs to
//! [`cuda_stack_driver::DeviceSlice<T>`], so typed kernels, views and copies of `cuda-stack-driver` take it
//! directly; and the explicit-stream APIs ([`CachingAllocator::alloc`],
//! [`StagingPool::copy_htod`]) are there for code that manages its own streams. The safety model
//! is `cuda-stack-driver`'s: frees are stream-ordered, and a buffer used on several streams is ordered
//! with events.
//!
//! ## Errors
//! [`Error`] wraps [`cuda_stack_driver::Error`] and adds the runtime's own cases (invalid device
//! ordinal, no device, invalid staging settings). Nothing here panics on bad input or driver
//! failure.
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it.
//!
//! ```text
//! error                        leaf
//! caching  staging             the allocator, the pinned staging pool   -> error
//! runtime                      the per-device registry (Runtime)        -> caching, staging
//! device                       the thread's current device              -> runtime
//! stream_scope  memory_stats   the thread's current stream; statistics  -> runtime, device
//! memory  tensor               cudaMalloc/cudaMemcpy; Tensor            -> all of the above
//! ```

#![warn(missing_docs)]

pub mod caching;
mod device;
mod error;
mod memory;
mod memory_stats;
mod runtime;
pub mod staging;
mod stream_scope;
// tensor-lite (`Tensor<T>`: storage + layout, views, ops on cuda-stack-kernels) will live in
// `src/tensor/` and be declared here:
pub mod tensor;
pub use tensor::{
    adam4_, adam_many_, adam_many_lr_param, clip_grad_norm_, clip_grad_scale, sgd4_,
    sgd_momentum4_, to_dtype_many, zeros_like_many, AdamParams, AdamSlot, AttentionElement, DType,
    FloatElement, GradElement, Layout, SgdParams, Tensor, TensorElement, TensorError,
};

pub use caching::{CachedBuffer, CachingAllocator, MemoryStats, Pool, PoolStats};
pub use device::{current_device, device_count, set_device, synchronize};
pub use error::{Error, Result};
pub use memory::{
    clone_dtoh, clone_htod, copy_dtoh_pageable, copy_htod_pageable, free, malloc, malloc_zeros,
    memcpy_dtod, memcpy_dtoh, memcpy_htod, memset,
};
pub use memory_stats::{
    empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_peak_stats,
};
pub use runtime::Runtime;
pub use staging::{StagingConfig, StagingPool};
pub use stream_scope::{
    current_stream, reset_current_streams, stream_for, use_stream, with_stream, StreamGuard,
};

/// Re-exported so users need not depend on them directly.
pub use {cuda_stack_driver, cuda_stack_nccl};

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
