//! # cuda-stack-blas
//!
//! Safe matrix products over NVIDIA's cuBLAS and cuBLASLt, on `cuda-stack-driver`. The libraries are
//! **loaded at run time** (`cuda-stack-sys`'s [`Cublas`](cuda_stack_driver::cuda_stack_sys::Cublas) and
//! [`CublasLt`](cuda_stack_driver::cuda_stack_sys::CublasLt): the toolkit, or pip's `nvidia-cublas` wheel),
//! never linked: without them [`Blas::new`] returns [`BlasError::Load`] listing every place
//! tried, and nothing panics.
//!
//! | what | here |
//! |---|---|
//! | a cuBLAS + cuBLASLt handle, workspaces, algorithm cache | [`Blas`] (per device: [`Blas::get`]) |
//! | `C = αAB + βC`, transposes, leading dimensions, strided batches | [`Blas::gemm`] with a [`Gemm`] |
//! | f32 (TF32 off or on), f64, f16/bf16 → f16/bf16/f32 with f32 accumulation | [`Element`], [`Math`] |
//! | the fused `relu(x·W + b)` of seed 004, and bias/ReLU/GELU epilogues | [`Blas::matmul`] with an [`Epilogue`] |
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

#![warn(missing_docs)]

mod element;
mod error;
mod gemm;
mod handle;
mod lt_desc;
mod matmul;
mod shape;

pub use element::{DataType, Element};
pub use error::{BlasError, Result};
pub use handle::Blas;
pub use matmul::{Epilogue, BIAS_ALIGNMENT};
pub use shape::{Batch, Gemm, Math, Transpose};
