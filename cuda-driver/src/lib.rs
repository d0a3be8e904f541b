//! # cuda-driver
//!
//! A safe RAII layer over the CUDA driver API (`cuda-sys`): devices, the primary context,
//! modules and kernels, device memory, pinned host memory, streams, events, graphs, NVRTC, and
//! **typed kernel launches**.
//!
//! | CPU idea | here |
//! |---|---|
//! | `Vec<T>` | [`DeviceBuffer<T>`] (allocated on a [`Stream`]) |
//! | `&[T]` / `&mut [T]` | `&DeviceSlice<T>` / `&mut DeviceSlice<T>` ([`DeviceSlice`]) |
//! | `split_at_mut` | [`DeviceSlice::split_at_mut`] |
//! | calling a function | [`Kernel::launch`] with a [`LaunchConfig`] |
//! | a thread's work queue | [`Stream`] |
//!
//! ```no_run
//! use cuda_driver::{Context, DeviceSlice, LaunchConfig, nvrtc};
//! # fn main() -> cuda_driver::Result<()> {
//! let ctx = Context::new(0)?;
//! let stream = ctx.new_stream()?;
//! let src = r#"extern "C" __global__ void scale(const float* x, float* y, float a, unsigned n) {
//!     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) y[i] = a * x[i];
//! }"#;
//! let ptx = nvrtc::compile_ptx("scale.cu", src, &nvrtc::CompileOptions::for_context(&ctx))?;
//! let module = ctx.load_ptx(&ptx)?;
//! // SAFETY: the signature matches the CUDA declaration above.
//! let scale = unsafe {
//!     module.kernel::<(&DeviceSlice<f32>, &mut DeviceSlice<f32>, f32, u32)>("scale")?
//! };
//! let x = stream.clone_htod(&[1.0f32, 2.0, 3.0])?;
//! let mut y = stream.alloc_zeros::<f32>(3)?;
//! scale.launch(&stream, &LaunchConfig::for_num_elems(3), &x, &mut y, 2.0, 3)?;
//! assert_eq!(stream.clone_dtoh(&y)?, [2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```
//!
//! ## Safety model
//! - **Memory**: see [`memory`]: buffers are freed in stream order, and using a buffer on a stream
//!   other than the one it was allocated on is ordered automatically with events.
//! - **Launches**: a [`Kernel`]'s type is its signature; making one is `unsafe` (the promise that
//!   it matches the CUDA code, checked for parameter count and sizes), launching it is safe.
//!   [`Function::launch`] (untyped) is `unsafe`. Launch configurations are validated against the
//!   device before every launch.
//! - **Host memory in async copies** is borrowed by a [`PendingCopy`] until the copy completes.
//! - **`Drop` never panics**: failures are logged and stored in the [`Context`]
//!   ([`Context::take_drop_errors`]); fallible `free()`/`close()` exist where it matters.
//! - **Threads**: [`Context`], [`Stream`], [`DeviceBuffer`], [`Module`], [`Function`], [`Kernel`],
//!   [`Event`] are `Send + Sync` (the driver API is thread-safe and the context is bound per
//!   thread on use). [`CurrentContextGuard`] is not `Send`: it stands for this thread's context
//!   stack.

#![warn(missing_docs)]

mod context;
mod device;
mod error;
mod event;
mod function;
pub mod graph;
pub mod launch;
pub mod memory;
mod module;
pub mod nvrtc;
mod ptx_info;
mod stream;
mod thread_guard;

pub use context::{Context, Limit};
pub use device::{ComputeCapability, Device, DeviceLimits};
pub use error::{Error, Result};
pub use event::Event;
pub use function::{Function, FunctionAttributes};
pub use graph::{Graph, GraphExec};
pub use launch::{Dim3, Kernel, KernelArg, KernelLimits, KernelParam, LaunchConfig};
pub use memory::{
    DeviceBuffer, DeviceRepr, DeviceSlice, DeviceView, DeviceViewMut, HostAllocFlags,
    HostRegistration, PendingCopy, PinnedBuffer, PinnedHost,
};
pub use module::{DeviceGlobal, JitOptions, Module, ModuleImage};
pub use stream::{Stream, StreamKind};
pub use thread_guard::CurrentContextGuard;

/// Re-exported so users need not depend on these directly.
pub use {bytemuck, cuda_sys, half};

/// The process-wide driver, initialised (`cuInit`) once.
pub(crate) fn driver() -> Result<&'static cuda_sys::Driver> {
    use std::sync::OnceLock;
    static INIT: OnceLock<Result<(), Error>> = OnceLock::new();
    let drv = cuda_sys::Driver::get()?;
    INIT.get_or_init(|| {
        // SAFETY: cuInit takes no pointers.
        unsafe { drv.cuInit(0) }.map_err(Error::from)
    })
    .clone()?;
    Ok(drv)
}
