//! # custom-kernels-aot: your own CUDA kernel, compiled when your crate is built
//!
//! Seed 004's **Method 1** ("Build and Install"), in Rust. The seed's project is
//! `setup.py` + `custom_kernels.cu` + `custom_ops.cpp` (the pybind11 layer) + tests; here it is
//!
//! | seed 004 | this crate |
//! |---|---|
//! | `setup.py` with `CUDAExtension`, `extra_compile_args={'nvcc': ['-O3']}` | `build.rs` with [`cuda_stack_build::Build`](https://docs.rs/cuda-stack-build) and `.option("-O3")` |
//! | `custom_kernels.cu` | `kernels/custom_kernels.cu` (+ `kernels/fused_common.cuh`) |
//! | `custom_ops.cpp`: `TORCH_CHECK`s, launch, pybind11 | [`op`]: checked wrappers around the generated typed handles |
//! | `torch.autograd.Function` with `forward`/`backward` | [`fused_op`] / [`FusedOpExt::fused_op`] on [`Var`], through [`Var::custom_op`] |
//! | `FusedOpLayer(nn.Module)` | [`AotFusedLayer`] ([`cuda_stack_nn::Module`]) |
//! | `test_custom_ops.py` | `tests/fused_op.rs` (GPU results against [`reference`], the CPU twin) |
//!
//! The build script compiles the kernels to PTX (nvcc if one is found, else NVRTC) at the
//! family's PTX ISA floor, 8.4, so the binary loads on every driver from R550 on, and
//! `cuda-stack-build` writes typed handles for the three kernels to `$OUT_DIR/kernels.rs`, included
//! in [`kernels`]. Launching a handle is `unsafe`; the [`op`] functions are the safe surface:
//! they check every shape against the real buffers, then launch.

pub mod autograd;
pub mod op;
pub mod reference;

/// The typed handles `cuda-stack-build` generated from `kernels/custom_kernels.cu` (see the
/// [`Kernels`](kernels::Kernels) table).
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

pub use autograd::{fused_op, AotFusedLayer};
pub use cuda_stack_nn::Var;
pub use cuda_stack_runtime::{Tensor, TensorError};
pub use op::{fused_op_backward, fused_op_forward, FusedOpExt};

/// The compiler that built the kernels, e.g. `"nvcc 13.0 at … (found by …)"` or
/// `"NVRTC 12.4 at …"`.
pub const BUILT_WITH: &str = env!("CUSTOM_KERNELS_COMPILER");

/// The PTX ISA floor the build checked the kernels against, e.g. `"8.4"`.
pub const PTX_ISA_FLOOR: &str = env!("CUSTOM_KERNELS_PTX_ISA_FLOOR");
