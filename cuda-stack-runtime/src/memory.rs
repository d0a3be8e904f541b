//! `cudaMalloc`, `cudaMemcpy`, `cudaMemset`, `cudaFree` on the current device, through the
//! caching allocator and the calling thread's current stream ([`crate::use_stream`]; the
//! device's default stream unless one is set, as in the CUDA runtime and PyTorch).
//!
//! Argument order follows `cuda-stack-driver` (and Rust's `copy_from_slice` pairs): **source first,
//! destination second** — the reverse of `cudaMemcpy(dst, src, …)`.

use crate::caching::CachedBuffer;
use crate::{Result, Runtime};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, Stream};

/// Allocates `len` uninitialised elements of `T` on the current device (`cudaMalloc`), through
/// its caching allocator, for the calling thread's current stream.
///
/// # Safety
/// The contents are arbitrary until written (a reused block holds its previous user's data:
/// valid `T`s, since `T: Pod`, but stale). Memory-safe; `unsafe` for the same reason as
/// [`cuda_stack_driver::Stream::alloc`]. Use [`malloc_zeros`] unless every element is written before
/// it is read.
pub unsafe fn malloc<T: DeviceRepr>(len: usize) -> Result<CachedBuffer<T>> {
    let rt = Runtime::current()?;
    // SAFETY: forwarded to the caller.
    unsafe { rt.allocator().alloc(&crate::stream_for(rt.ordinal())?, len) }
}

/// Allocates `len` zeroed elements of `T` on the current device (`cudaMalloc` + `cudaMemset`
/// queued on the calling thread's current stream).
pub fn malloc_zeros<T: DeviceRepr>(len: usize) -> Result<CachedBuffer<T>> {
    let rt = Runtime::current()?;
    rt.allocator()
        .alloc_zeros(&crate::stream_for(rt.ordinal())?, len)
}

/// Allocates a buffer on the current device holding a copy of `src` (`cudaMalloc` +
/// [`memcpy_htod`]); returns when the copy is done.
pub fn clone_htod<T: DeviceRepr>(src: &[T]) -> Result<CachedBuffer<T>> {
    let rt = Runtime::current()?;
    let stream = crate::stream_for(rt.ordinal())?;
    // SAFETY: fully written by the copy below before anyone can read it (on failure the buffer
    // is dropped unread).
    let mut b = unsafe { rt.allocator().alloc::<T>(&stream, src.len())? };
    rt.copy_htod_pageable(&stream, src, &mut b)?;
    Ok(b)
}

/// Copies `src` into a new `Vec` ([`memcpy_dtoh`]).
pub fn clone_dtoh<T: DeviceRepr>(src: &DeviceSlice<T>) -> Result<Vec<T>> {
    let mut v = vec![T::zeroed(); src.len()];
    memcpy_dtoh(src, &mut v)?;
    Ok(v)
}

/// Copies host memory (pageable: any `&[T]`) to the device (`cudaMemcpy(…, HostToDevice)`), on
/// the current device's current stream; returns when the copy is complete. Copies of at least
/// one staging chunk (4 MiB by default) are staged through pinned buffers by several threads
/// ([`crate::staging`]); smaller ones go through the driver. Lengths must match.
pub fn memcpy_htod<T: DeviceRepr>(src: &[T], dst: &mut DeviceSlice<T>) -> Result<()> {
    let rt = Runtime::current()?;
    rt.copy_htod_pageable(&crate::stream_for(rt.ordinal())?, src, dst)
}

/// Copies device memory to host memory (`cudaMemcpy(…, DeviceToHost)`), on the calling thread's
/// current stream, after the work queued on it; returns when `dst` is written. Staged like
/// [`memcpy_htod`]. Lengths must match.
pub fn memcpy_dtoh<T: DeviceRepr>(src: &DeviceSlice<T>, dst: &mut [T]) -> Result<()> {
    let rt = Runtime::current()?;
    rt.copy_dtoh_pageable(&crate::stream_for(rt.ordinal())?, src, dst)
}

/// Queues a device-to-device copy on the current device's current stream
/// (`cudaMemcpy(…, DeviceToDevice)`, which is asynchronous with respect to the host too).
/// Lengths must match.
pub fn memcpy_dtod<T: DeviceRepr>(src: &DeviceSlice<T>, dst: &mut DeviceSlice<T>) -> Result<()> {
    let rt = Runtime::current()?;
    Ok(crate::stream_for(rt.ordinal())?.memcpy_dtod(src, dst)?)
}

/// Queues setting every byte of `dst` to `byte` on the current device's current stream
/// (`cudaMemset`).
pub fn memset<T: DeviceRepr>(dst: &mut DeviceSlice<T>, byte: u8) -> Result<()> {
    let rt = Runtime::current()?;
    Ok(crate::stream_for(rt.ordinal())?.memset_bytes(dst, byte)?)
}

/// Returns a buffer's block to its allocator's cache now (`cudaFree` through the cache; dropping
/// the buffer does the same).
pub fn free<T: DeviceRepr>(buf: CachedBuffer<T>) {
    buf.free()
}

/// Copies pageable host memory to the device on `stream` through the current device's staging
/// pool (see [`crate::staging`] and [`Runtime::copy_htod_pageable`]); returns when complete.
pub fn copy_htod_pageable<T: DeviceRepr>(
    stream: &Stream,
    src: &[T],
    dst: &mut DeviceSlice<T>,
) -> Result<()> {
    Runtime::current()?.copy_htod_pageable(stream, src, dst)
}

/// Copies device memory to pageable host memory on `stream` through the current device's
/// staging pool (see [`Runtime::copy_dtoh_pageable`]); returns when `dst` is written.
pub fn copy_dtoh_pageable<T: DeviceRepr>(
    stream: &Stream,
    src: &DeviceSlice<T>,
    dst: &mut [T],
) -> Result<()> {
    Runtime::current()?.copy_dtoh_pageable(stream, src, dst)
}
