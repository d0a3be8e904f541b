//! # cuda-stack-build: your `.cu` files in your crate, compiled by its build script
//!
//! Seed 004's **Method 1** ("Build and Install", `setup.py` with `CUDAExtension`) compiles a
//! project's `custom_kernels.cu` with nvcc when the project is built. This crate is that step
//! for a Rust crate: add it under `[build-dependencies]` and call it from `build.rs`:
//!
//! ```no_run
//! // build.rs, in `fn main()`:
//! cuda_stack_build::Build::new()
//!     .file("kernels/custom_kernels.cu")   // more with .file(..) / .files(..)
//!     .include("kernels")                  // -I
//!     .option("-O3")                       // like setup.py's extra_compile_args
//!     .compile_or_exit();                  // prints the error and exits 1 on failure
//! ```
//!
//! and in the crate, the typed handles it wrote:
//!
//! ```ignore
//! mod kernels {
//!     include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
//! }
//! let k = kernels::Kernels::get(&ctx)?;   // loads the PTX once per device, checked
//! // SAFETY: (your checked wrapper's reason why the launch stays inside the buffers)
//! unsafe { k.fused_op_forward.launch(&stream, &cfg, &x, &bias, scale, &mut out, n)? };
//! ```
//!
//! ## What it does
//! - **Finds a compiler** the way Rust users expect: nvcc through the `cc` crate's CUDA
//!   support (`NVCC`, and cc's `-ccbin` host compiler), then `$CUDA_PATH/bin`,
//!   `$CUDA_HOME/bin`, `PATH`, `/usr/local/cuda/bin`, and the `nvidia-cuda-nvcc` pip wheel in
//!   every Python site-packages folder; with no nvcc, **NVRTC**, found exactly as `cuda-stack-sys`
//!   finds it at run time (`CUDA_NVRTC_PATH`, the sonames, `CUDA_HOME`, pip's folders). An
//!   explicit `NVCC` is authoritative (a wrong one is an error, never replaced silently).
//!   `CUDA_BUILD_COMPILER=nvcc|nvrtc` forces one.
//! - **Compiles every file to PTX** for each target architecture (default `compute_75`), in
//!   parallel (`NUM_JOBS` threads), with `-std=c++17` and your options and include folders;
//!   optionally to **SASS** for named architectures ([`Build::fatbin`]): with nvcc a fatbin
//!   (SASS plus the PTX fallback), with NVRTC one cubin per architecture, which the handles load
//!   where it fits the device. A file can ask for its own targets: `// cuda-stack-build: archs=80,90a`.
//! - **Checks the PTX ISA against a floor** (default 8.4, the project's, which drivers from
//!   R550 on load): a newer compiler's PTX would not load on older drivers, so it is an error
//!   that says so, not a surprise on a user's machine. `.ptx_isa_floor("9.0")` or
//!   `CUDA_BUILD_PTX_ISA_FLOOR` raises it.
//! - **Generates typed handles**: each `extern "C" __global__` declaration becomes a
//!   [`Kernel<(…)>`](https://docs.rs/cuda-stack-driver) field of `Kernels` (`const T*` →
//!   `&DeviceSlice<T>`, other pointers `&mut DeviceSlice<T>` unless named in a
//!   `// @readonly: a, b` comment above the declaration, scalars by value). The declarations
//!   are checked against the PTX `.entry` parameters when built, and again when loaded
//!   (`Kernels::check_ptx`, then the driver). Launching stays `unsafe` (whether a grid stays
//!   inside the buffers is a fact about each call): wrap each kernel in a function that checks
//!   lengths and then launches.
//! - **Tells cargo when to rerun**: `cargo:rerun-if-changed` for every source and every header
//!   it includes (from nvcc's `-MD`, or a scan of `#include` lines for NVRTC), and
//!   `cargo:rerun-if-env-changed` for every variable it read.
//!
//! ## Errors that say what to do
//! [`BuildError`]: no compiler found (every place looked, and how to install one), an
//! unsupported GPU architecture (the known ones and how to find yours), a compile error at
//! `file:line` with the compiler's log, a PTX ISA above the floor (which drivers would refuse it
//! and the two ways out), a declaration no handle can express.
//!
//! `cuda-stack-kernels` builds its committed PTX and handles through this crate too
//! (`kernels/tools/gen-ptx`, `gen-handles`): one mechanism for the project and its users.
//!
//! ## Module map
//! Lower modules first; each uses only modules on the lines above it.
//!
//! ```text
//! env  isa  known_archs  diagnostics  includes  ptx_entries   leaves
//! error                     BuildError                  -> isa, known_archs
//! arch  discover  signature names, compilers, decls     -> error, known_archs, env
//! job                       one file's compile job      -> arch
//! nvcc                      compiling with nvcc         -> job, discover, diagnostics, includes
//! nvrtc  handles            NVRTC; the typed handles    -> nvcc, job, signature
//! builder                   Build, the build script API -> all of the above
//! ```

#![warn(missing_docs)]
// `BuildError` carries the compiler's whole log and command so its message can say what to do;
// it is returned at most once per build, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

mod arch;
mod builder;
mod diagnostics;
mod directives;
mod discover;
mod env;
mod error;
pub mod handles;
mod includes;
mod isa;
mod job;
mod known_archs;
mod nvcc;
mod nvrtc;
mod parallel;
pub mod ptx_entries;
mod signature;

pub use arch::{Arch, Variant, DEFAULT_ARCH};
pub use builder::{Build, CompiledCubin, CompiledFile, CompiledPtx, Output};
pub use directives::directives;
pub use discover::{Compiler, CompilerInfo};
pub use error::{BuildError, Place};
pub use isa::{IsaVersion, DEFAULT_FLOOR};
pub use known_archs::KNOWN;
pub use signature::{parse_kernels, KernelDecl, Param, ParamKind, RustType, TypeMap};

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
