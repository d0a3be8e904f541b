//! # cuda-stack-driver
//!
//! A safe RAII layer over the CUDA driver API (`cuda-stack-sys`): devices, the primary context,
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
//! use cuda_stack_driver::{Context, DeviceSlice, LaunchConfig, nvrtc};
//! # fn main() -> cuda_stack_driver::Result<()> {
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
//! let n = 3u32;
//! assert!(n as usize <= x.len() && n as usize <= y.len());
//! // SAFETY: the kernel touches x[i] and y[i] only for i < n, and n fits both buffers.
//! unsafe { scale.launch(&stream, &LaunchConfig::for_num_elems(3), &x, &mut y, 2.0, n)? };
//! assert_eq!(stream.clone_dtoh(&y)?, [2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```
//!
//! ## Soundness model
//! "Safe" means: **no program without the `unsafe` keyword can cause undefined behaviour**, on
//! the host or on the device, whatever it passes, in whatever order it drops things, however its
//! threads interleave, and whatever the driver returns. The rules that make it so, each guarded
//! by tests in `tests/tests/soundness/` and `tests/compile_fail/`:
//!
//! 1. **Kernels.** Making a typed [`Kernel`] is `unsafe` (the CUDA declaration matches the Rust
//!    signature; parameter count and sizes are checked). *Launching* one is `unsafe` too
//!    ([`Kernel::launch`]): only the caller knows which scalar is a length and whether the grid
//!    fits the buffers. Safe APIs that launch kernels (the ops of `cuda-stack-kernels`, the tensor
//!    layer) check every shape against the real buffers first. The same rule holds for your
//!    kernels: check, then launch in an `unsafe` block that says why it is in bounds.
//!    [`Function::launch`] (untyped) is `unsafe` as well.
//! 2. **Graphs own what their nodes reference**: the buffers captured work uses and the kernels
//!    (so the modules) it launches. No drop order can make a replay touch freed memory or
//!    unloaded code. What a graph cannot own is refused during capture; a buffer allocated on
//!    the capturing stream is an ordinary allocation made at capture time (not a graph node),
//!    owned by the graph like any other it uses.
//! 3. **A check and the enqueue it guards are one step for every other thread.** Captures run on
//!    a stream made for them ([`Context::begin_capture`]); each enqueue on it holds the stream's
//!    capture gate across its "is it capturing?" check, driver call and bookkeeping, and the
//!    capture's start and end take the gate exclusively. Ordinary streams never capture.
//!    A module's kernels are queued under a shared lock that [`DeviceGlobal`] access takes
//!    exclusively (after a context synchronize), so a global is never accessed under a kernel.
//! 4. **An error after work was queued leaves that work tracked or finished.** Events a copy
//!    needs are created before it is queued; if recording the after-use event still fails, the
//!    stream is synchronized (or, failing that, the context) before the error is returned. A
//!    failed wait on a pending host copy falls back to a context synchronize before the host
//!    touches the memory. *Assumption*: when both a stream and its context fail to synchronize,
//!    the context has a sticky error and the GPU runs no more of its work.
//! 5. **Memory in use is never freed under the GPU**: buffers are freed in their home stream's
//!    order after every other stream's use (see [`memory`]); host memory in an async copy is
//!    borrowed until the copy is known complete, and the pinned buffer itself waits if the
//!    borrow is leaked.
//! 6. **Host callbacks make no CUDA calls**: inside one, this crate's calls return
//!    [`Error::InHostCallback`] and CUDA objects dropped there are released later on a reaper
//!    thread; a panic is caught and its payload never dropped there.
//! 7. **One device, one context.** [`Context::new`] returns the process-wide handle of the
//!    device's primary context, so identity checks ([`Error::DeviceMismatch`]) compare devices,
//!    never handles of the same device. The per-thread bound-context cache is updated by every
//!    path that changes the current context ([`Context::bind`], [`Context::push_current`] and its
//!    guard's drop).
//! 8. **`Drop` never panics** and never loses an error silently: failures are logged and stored in
//!    the [`Context`] ([`Context::take_drop_errors`]). A release call that fails is never
//!    repeated (the driver may have done it and returned an error left by earlier asynchronous
//!    work): the resource is leaked, never released twice. Fallible `free()`/`close()` exist
//!    where it matters.
//! 9. **Threads**: [`Context`], [`Stream`], [`DeviceBuffer`], [`Module`], [`Function`], [`Kernel`],
//!    [`Event`] are `Send + Sync` (the driver API is thread-safe and the context is bound per
//!    thread on use). [`CurrentContextGuard`] is not `Send`: it stands for one thread's context
//!    stack.
//!
//! What `unsafe` callers promise is in each `# Safety` section; the escape hatches for other
//! libraries' objects are [`Context::from_raw`], [`Stream::from_raw`] and the `as_raw()` getters.
//! Work another library queues (cuBLAS, NCCL) goes through [`Stream::enqueue_foreign`], which
//! orders and tracks its buffers (rules 2–5) exactly as a launch does; work a library queues
//! later than the call that describes it (NCCL's group calls) uses its two halves,
//! [`Stream::begin_foreign`] and [`Stream::end_foreign`].
//!
//! ## Several devices
//! [`Device::can_access_peer`] and [`Context::enable_peer_access`] (once per ordered pair,
//! thread-safe, idempotent) turn on direct access between GPUs; [`Stream::memcpy_peer`] copies
//! between them. A buffer used on another device's stream is ordered like any other (rule 5 holds
//! across devices): the events that order it are made in the context of the stream they are
//! recorded on.
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it, except inside the core,
//! whose handles refer to each other (a stream holds its context and a context makes streams; a
//! buffer is ordered on streams and a capture keeps buffers and kernels).
//!
//! ```text
//! error  ptx_info  registry  peer_record       leaves
//! device  module_image                         -> error
//! context  stream  event  memory  module       the core handles     -> device, registry,
//!   function  launch  host_callback                                     module_image, ptx_info,
//!   capture_ticket  memory_cache                                        peer_record
//! peer  nvrtc  thread_guard  tensor_map        on the core          -> context, memory, ...
//! graph  foreign                               captured and foreign work -> the core
//! foreign_deferred                             -> foreign, the core
//! ```

#![warn(missing_docs)]

mod capture_ticket;
mod context;
mod device;
mod error;
mod event;
mod foreign;
mod foreign_deferred;
mod function;
pub mod graph;
mod host_callback;
pub mod launch;
pub mod memory;
mod memory_cache;
mod module;
mod module_image;
pub mod nvrtc;
mod peer;
mod peer_record;
pub mod ptx_info;
mod registry;
mod stream;
mod tensor_map;
mod thread_guard;

pub use capture_ticket::{CaptureState, CaptureTicket};
pub use context::{Context, Limit, PoolUsage};
pub use device::{ComputeCapability, Device, DeviceLimits};
pub use error::{Error, Result};
pub use event::Event;
pub use foreign::ForeignUse;
pub use function::{Function, FunctionAttributes};
pub use graph::{Graph, GraphExec};
pub use launch::{Dim3, Kernel, KernelArg, KernelLimits, KernelParam, LaunchConfig, ParamKind};
pub use memory::{
    DeviceBuffer, DeviceRepr, DeviceSlice, DeviceView, DeviceViewMut, ExternalSlice,
    HostAllocFlags, HostRegistration, PendingCopy, PinnedBuffer, PinnedHost,
};
pub use memory_cache::MemoryCache;
pub use module::{DeviceGlobal, JitOptions, Module, ModuleImage};
pub use stream::{Stream, StreamKind};
pub use tensor_map::{TensorMap, TensorMapElement, TensorMapSwizzle};
pub use thread_guard::CurrentContextGuard;

/// Re-exported so users need not depend on these directly (`float8`: the FP8 element types
/// `F8E4M3` / `F8E5M2`, device-storable like `half`'s through their `bytemuck::Pod` impls).
pub use {bytemuck, cuda_stack_sys, float8, half};

/// The process-wide driver, initialised (`cuInit`) once.
pub(crate) fn driver() -> Result<&'static cuda_stack_sys::Driver> {
    use std::sync::OnceLock;
    if host_callback::active() {
        return Err(host_callback::refused());
    }
    // Every launch path asks for the driver several times: after the first call this is one
    // atomic load and a match (no clone of a `Result`, no second `OnceLock`).
    static INIT: OnceLock<Result<&'static cuda_stack_sys::Driver, Error>> = OnceLock::new();
    match INIT.get_or_init(|| {
        let drv = cuda_stack_sys::Driver::get()?;
        // SAFETY: cuInit takes no pointers.
        unsafe { drv.cuInit(0) }?;
        Ok(drv)
    }) {
        Ok(drv) => Ok(drv),
        Err(e) => Err(e.clone()),
    }
}

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
