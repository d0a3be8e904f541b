//! The calling thread's current device (`cudaSetDevice` / `cudaGetDevice`).

use crate::runtime::{invalid_device, Runtime};
use crate::Result;
use std::cell::Cell;

pub use crate::runtime::device_count;

thread_local! {
    /// The ordinal `set_device` chose on this thread; `None` means device 0 (the CUDA default).
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Makes device `ordinal` current for the calling thread (`cudaSetDevice`): later runtime calls
/// on this thread (`malloc`, `memcpy_*`, `synchronize`, the memory statistics …) use it. Each
/// thread has its own current device, device 0 until it calls this.
///
/// Like `cudaSetDevice` since CUDA 12, it initialises the device's runtime (primary context,
/// default stream) right away and makes the context current on the thread, so the first real
/// call does not pay for it.
///
/// Fails with [`crate::Error::InvalidDevice`] (naming the device count) for an ordinal out of
/// range, and leaves the current device unchanged.
pub fn set_device(ordinal: usize) -> Result<()> {
    let rt = Runtime::get(ordinal)?;
    rt.context().bind()?;
    CURRENT.with(|c| c.set(Some(ordinal)));
    Ok(())
}

/// The calling thread's current device ordinal (`cudaGetDevice`): the last [`set_device`] on this
/// thread, else 0. Fails when there is no device at all. Initialises nothing.
pub fn current_device() -> Result<usize> {
    match CURRENT.with(Cell::get) {
        Some(o) => Ok(o),
        None => {
            let count = device_count()?;
            if count == 0 {
                Err(invalid_device(0, 0))
            } else {
                Ok(0)
            }
        }
    }
}

impl Runtime {
    /// The runtime of the calling thread's current device ([`crate::current_device`]), with its
    /// context made current on this thread (as every runtime call does).
    pub fn current() -> Result<&'static Runtime> {
        let rt = Runtime::get(current_device()?)?;
        rt.context().bind()?;
        Ok(rt)
    }
}

/// Waits until all work queued on the current device, on every stream, has finished
/// (`cudaDeviceSynchronize` / `torch.cuda.synchronize()`).
pub fn synchronize() -> Result<()> {
    Runtime::current()?.synchronize()
}
