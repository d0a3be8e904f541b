//! # cuda-stack-blas
//!
//! Safe matrix products over NVIDIA's cuBLAS and cuBLASLt, on `cuda-stack-driver`. The libraries are
//! **loaded at run time** (`cuda-stack-sys`'s [`Cublas`](cuda_stack_driver::cuda_stack_sys::Cublas) and
//! [`CublasLt`](cuda_stack_driver::cuda_stack_sys::CublasLt): a CUDA toolkit's, or pip's
//! `nvidia-cublas` (CUDA 13) or `nvidia-cublas-cu12` (CUDA 12) wheel, as PyTorch installs them),
//! never linked: without them [`Blas::new`] returns [`BlasError::Load`] listing every place
//! tried, and nothing panics. cuBLAS **13 and 12** are both supported (see below).
//!
//! | what | here |
//! |---|---|
//! | a cuBLAS + cuBLASLt handle, workspaces, algorithm cache | [`Blas`] (per device: [`Blas::get`]) |
//! | `C = αAB + βC`, transposes, leading dimensions, strided batches | [`Blas::gemm`] with a [`Gemm`] |
//! | f32 (TF32 off or on), f64, f16/bf16 → f16/bf16/f32 with f32 accumulation | [`Element`], [`Math`] |
//! | the fused `relu(x·W + b)` of seed 004, and bias/ReLU/GELU epilogues | [`Blas::matmul`] with an [`Epilogue`] |
//! | GELU for training: the forward keeping its pre-activation, the backward reading it (with the bias gradient) | [`Blas::matmul_gelu_aux`], [`Blas::matmul_dgelu`] |
//! | a linear layer's weight gradient with its bias gradient (an operand's sums over `k`) in one GEMM | [`Blas::matmul_bgrad`] |
//!
//! ## Row-major
//! Everything here is **row-major**, like the project's tensors: a `[rows, cols]` matrix with a
//! leading dimension `ld` has element `(i, j)` at `i·ld + j`. cuBLAS is column-major; the
//! identity `Cᵀ = Bᵀ·Aᵀ` makes a row-major product one column-major call with the operands
//! swapped, at no cost (see [`Gemm`]). To multiply column-major data, describe its transpose:
//! a column-major `[m, n]` matrix is a row-major `[n, m]` one.
//!
//! ```no_run
//! use cuda_stack_blas::{Blas, Epilogue, Gemm, Math, Transpose};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = cuda_stack_driver::Context::new(0)?;
//! let stream = ctx.new_stream()?;
//! let blas = Blas::get(&ctx)?;
//! let (batch, inp, out) = (64, 784, 128);
//! let x = stream.alloc_zeros::<f32>(batch * inp)?;
//! let w = stream.alloc_zeros::<f32>(out * inp)?; // nn.Linear's [out, in]
//! let b = stream.alloc_zeros::<f32>(out)?;
//! let mut y = stream.alloc_zeros::<f32>(batch * out)?;
//! // y = relu(x · Wᵀ + b), in one cuBLASLt call, TF32 tensor cores.
//! let g = Gemm::new(batch, out, inp).trans_b(Transpose::Yes).math(Math::Tf32);
//! blas.matmul(&stream, &g, Epilogue::BiasRelu, &x, &w, Some(&b), &mut y)?;
//! # Ok(()) }
//! ```
//!
//! ## Ordering and safety
//! Operands are `&DeviceSlice` (read) and `&mut DeviceSlice` (written), so the borrow checker
//! rules out an output aliasing an input. Every shape, leading dimension, batch stride and
//! buffer length is checked before cuBLAS is called ([`Gemm::check`] runs the same checks on
//! the CPU). The call is queued through [`cuda_stack_driver::Stream::enqueue_foreign`], which orders
//! and records the buffers exactly as a kernel launch does: a buffer last written on another
//! stream is waited for, freeing a buffer waits for the GEMMs that use it, and a CUDA graph
//! capturing the call keeps its buffers, workspace and handles alive.

//!
//! ## cuBLAS 13 and 12
//! cuBLAS and cuBLASLt are looked for as major version 13 first, everywhere, then as 12 (the
//! sonames `libcublas.so.13` / `.12`, the toolkit's `lib64`, the wheels' `nvidia/cu13/lib` /
//! `nvidia/cublas/lib`; `CUDA_CUBLAS_PATH` and `CUDA_CUBLASLT_PATH` name a file instead). Both
//! must be one major version: another major (11, or a future 14) is [`BlasError::Version`], a
//! cuBLAS 13 with a cuBLASLt 12 (possible only when the two variables say so)
//! [`BlasError::VersionMismatch`]. [`Blas::cublas`] says which one loaded, and
//! [`Blas::with_libraries`] makes a handle on a library of your choice (both majors can live in
//! one process). For everything this crate calls, cuBLAS 12.0 to 12.9 and cuBLAS 13 agree: the
//! same entry points with the same signatures, the same enum values (compute types, data types,
//! epilogues, descriptor and preference attributes), the same attribute value types and the same
//! layouts of `cublasLtMatmulAlgo_t` and `cublasLtMatmulHeuristicResult_t` (checked by
//! regenerating the bindings from each cuBLAS 12 release's headers; a unit test pins every value,
//! and the `cublas_versions` tests check the real libraries). So no call branches on the version.
//! What differs lies outside this crate's calls: 13 adds floating-point emulation and an
//! autotuning algorithm, 12 has atomic-synchronisation attributes that 13 dropped, and CUDA 13
//! runs on Turing (compute capability 7.5) and newer only, so on a Volta or older GPU use cuBLAS 12.
//!
//! ## Module map
//! Dependencies point down only: a module uses those of lower layers, never one above it or
//! beside it (`lib.rs` only re-exports).
//!
//! ```text
//! layer  module         what                                            uses
//!   5    gemm.rs        Blas::gemm: cublasGemmEx, ...StridedBatchedEx   handle shape element error
//!   5    matmul.rs      Blas::matmul, matmul_gelu_aux, matmul_dgelu:    handle algo_cache lt_desc
//!                       cublasLtMatmul + epilogue
//!                                                                       epilogue shape element error
//!   4    handle.rs      Blas: the handle pair, workspace per stream     algo_cache libraries error
//!   3    algo_cache.rs  the heuristic's answers, per problem            shape epilogue element
//!   2    shape.rs       Gemm (row-major) -> the column-major call       compute element error
//!   1    compute.rs     Math; cuBLAS's compute type per element types   element error
//!   1    epilogue.rs    Epilogue; bias, aux and alignment checks        element error
//!   1    libraries.rs   which cuBLAS: load, check major 12 or 13        error
//!   1    lt_desc.rs     cuBLASLt's descriptors, owned                   error
//!   0    error.rs       BlasError                                       element
//!   0    element.rs     DataType, Element, Scalars                      -
//! ```

#![warn(missing_docs)]

mod algo_cache;
mod compute;
mod element;
mod epilogue;
mod error;
mod fp8;
mod gemm;
mod handle;
mod libraries;
mod lt_desc;
mod matmul;
mod shape;

pub use compute::Math;
pub use element::{DataType, Element};
pub use epilogue::{Epilogue, AUX_ALIGNMENT, AUX_LD_MULTIPLE, BIAS_ALIGNMENT};
pub use error::{BlasError, Result};
pub use fp8::{Fp8Element, Fp8Gemm, Fp8Output, FP8_MIN_CC};
pub use handle::Blas;
pub use shape::{Batch, Gemm, Transpose};

/// The README's examples, compiled as doctests (so the first thing a reader copies builds).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
