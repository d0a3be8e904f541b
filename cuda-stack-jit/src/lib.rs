//! # cuda-stack-jit
//!
//! CuPy's kernel templates for Rust tensors, compiled at run time with NVRTC and cached on disk.
//! Seed 001 shows CuPy's `ElementwiseKernel("float32 x", "float32 y", "y = x * x;",
//! "square_kernel")`: you write one line of C for one element, and the library writes the
//! kernel, picks the launch configuration and handles the arrays. Here it is on
//! [`cuda_stack_runtime::Tensor`]s:
//!
//! | CuPy | here |
//! |---|---|
//! | `cp.ElementwiseKernel(in, out, op, name)` | [`ElementwiseKernel::new`] (the body is trusted code: `unsafe`, see below) |
//! | `kernel(x, y)`, `kernel(x, 2.0)` | [`ElementwiseKernel::call`]`(&[(&x).into(), 2.0f32.into()])` → outputs |
//! | `kernel(x, out=y)`, in-place | [`ElementwiseKernel::call_into`]`(&[(&x).into()], &mut [(&mut y).into()])` |
//! | `kernel(..., size=n)` | [`ElementwiseKernel::call_sized`] |
//! | `cp.ReductionKernel(in, out, map, reduce, post, identity, name)` | [`ReductionKernel::new`] |
//! | `kernel(x, axis=1, keepdims=True)` | [`ReductionKernel::call`]`(&args, &Axes::dims(&[1]).keepdims(true))` |
//! | `cp.RawModule(code=…)`, `cp.RawKernel(code, name)` | [`RawModule::new`], [`RawKernel::new`] (typed signature over tensors) |
//! | `$CUPY_CACHE_DIR` (`~/.cupy/kernel_cache`) | [`KernelCache`]: `$CUDA_RS_KERNEL_CACHE_DIR` (`~/.cache/cuda-rs/kernels`) |
//! | the generated source (`cupy.cuda.compiler`'s dump) | [`ElementwiseKernel::source_for`], [`ElementwiseKernel::launch_info`] |
//!
//! ```no_run
//! use cuda_stack_jit::ElementwiseKernel;
//! use cuda_stack_runtime::Tensor;
//! # fn main() -> cuda_stack_jit::Result<()> {
//! // SAFETY: the operation only reads x, y and writes z, its own elements.
//! let squared_diff = unsafe {
//!     ElementwiseKernel::new("T x, T y", "T z", "z = (x - y) * (x - y);", "squared_diff")?
//! };
//! let x = Tensor::<f32>::arange(0.0, 10.0, 1.0)?.reshape(&[2, 5])?;
//! let y = Tensor::<f32>::arange(0.0, 5.0, 1.0)?;             // broadcast along rows
//! let z = squared_diff.call1::<f32>(&[(&x).into(), (&y).into()])?;
//! assert_eq!(z.to_vec()?, [0., 0., 0., 0., 0., 25., 25., 25., 25., 25.]);
//! let w = squared_diff.call1::<f32>(&[(&x).into(), 5.0f32.into()])?; // a scalar, by value
//! # let _ = w; Ok(()) }
//! ```
//!
//! ## Safety
//! The code of an [`ElementwiseKernel`] or [`ReductionKernel`] is the library's — it indexes
//! every tensor inside its bounds by construction, and a `raw` parameter's `x[j]` traps on an
//! index outside the tensor — around the user's body, which is arbitrary CUDA C. Defining one
//! is therefore `unsafe`: the caller promises the body touches memory only through its
//! parameters (the rule `cuda-stack-driver` applies to making a typed kernel). Calls are safe: every
//! shape, dtype and device is checked before anything is queued, outputs are exclusive, and
//! the launch goes through `cuda-stack-driver`'s stream-ordered buffer tracking like any tensor op.
//! A [`RawKernel`]'s accesses depend on its grid and scalars, which only the caller knows, so
//! its launch is `unsafe` as in `cuda-stack-driver`.
//!
//! ## Errors
//! [`JitError`]: a syntax error reports NVRTC's log with lines of the user's body
//! (`operation line 1: error: …`), not of the generated wrapper; a dtype that does not match a
//! concrete parameter, a wrong number of arguments, shapes that do not broadcast, tensors on
//! different devices: typed errors before any work. Nothing panics.
//!
//! ## The cache
//! See [`cache`]: memory in front of disk, keyed by source, options, target and compiler (NVRTC's
//! library file and version); atomic writes, checksummed entries, bounded size with LRU
//! eviction, and a read-only or full folder degrading to memory-only with one warning. A warm
//! hit loads no NVRTC: the compiler is named from a record kept beside the entries.
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it.
//!
//! ```text
//! error  types  broadcast  source_map  prelude   leaves
//! args  params  cache                           -> error, types
//! buffers  loaded  options  raw  typing         -> args, params, cache, source_map
//! elementwise  reduction                        the two kernel templates -> all of the above
//! testing                                       -> elementwise, reduction
//! ```

#![warn(missing_docs)]

mod args;
mod broadcast;
mod buffers;
pub mod cache;
mod elementwise;
mod error;
mod loaded;
mod options;
mod params;
mod prelude;
mod raw;
mod reduction;
mod source_map;
#[doc(hidden)]
pub mod testing;
mod types;
mod typing;

pub use args::{AnyTensor, Arg, OutArg, Scalar, TensorRef};
pub use cache::{CacheStats, KernelCache, Origin, Target};
pub use elementwise::{ElementwiseKernel, LaunchInfo};
pub use error::{JitError, Result};
pub use options::KernelOptions;
pub use params::Param;
pub use raw::{In, Out, RawKernel, RawModule, RawParam, RawSignature};
pub use reduction::{Axes, ReductionKernel};
pub use types::{c_name, dtype_from_name, numpy_name, TypeSpec};

/// Re-exported for launch configurations of raw kernels.
pub use cuda_stack_driver::{Dim3, LaunchConfig};

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
