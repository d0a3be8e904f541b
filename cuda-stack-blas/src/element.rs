//! Element types cuBLAS multiplies, and `alpha`/`beta` in the bytes cuBLAS reads them as.

use cuda_stack_driver::cuda_stack_sys::cublas_types::cudaDataType_t;
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::DeviceRepr;

/// An element type of a GEMM operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `f32` (`CUDA_R_32F`).
    F32,
    /// `f64` (`CUDA_R_64F`).
    F64,
    /// IEEE half, `half::f16` (`CUDA_R_16F`).
    F16,
    /// bfloat16, `half::bf16` (`CUDA_R_16BF`).
    BF16,
    /// FP8 e4m3, `float8::F8E4M3` (`CUDA_R_8F_E4M3`): operands of [`crate::Blas::matmul_fp8`].
    F8E4M3,
    /// FP8 e5m2, `float8::F8E5M2` (`CUDA_R_8F_E5M2`): operands of [`crate::Blas::matmul_fp8`].
    F8E5M2,
}

impl DataType {
    /// cuBLAS's name for it.
    pub(crate) fn cuda(self) -> cudaDataType_t {
        match self {
            DataType::F32 => cudaDataType_t::CUDA_R_32F,
            DataType::F64 => cudaDataType_t::CUDA_R_64F,
            DataType::F16 => cudaDataType_t::CUDA_R_16F,
            DataType::BF16 => cudaDataType_t::CUDA_R_16BF,
            DataType::F8E4M3 => cudaDataType_t::CUDA_R_8F_E4M3,
            DataType::F8E5M2 => cudaDataType_t::CUDA_R_8F_E5M2,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::F32 => 4,
            DataType::F64 => 8,
            DataType::F16 | DataType::BF16 => 2,
            DataType::F8E4M3 | DataType::F8E5M2 => 1,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
}

/// A Rust type cuBLAS can multiply: `f32`, `f64`, `half::f16`, `half::bf16`.
pub trait Element: DeviceRepr + sealed::Sealed {
    /// Its [`DataType`].
    const DTYPE: DataType;
}

impl Element for f32 {
    const DTYPE: DataType = DataType::F32;
}
impl Element for f64 {
    const DTYPE: DataType = DataType::F64;
}
impl Element for f16 {
    const DTYPE: DataType = DataType::F16;
}
impl Element for bf16 {
    const DTYPE: DataType = DataType::BF16;
}

/// `alpha` and `beta` as the bytes of the scale type, for host-pointer mode.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scalars {
    F32([f32; 2]),
    F64([f64; 2]),
}

impl Scalars {
    pub(crate) fn new(scale: DataType, alpha: f64, beta: f64) -> Scalars {
        match scale {
            DataType::F64 => Scalars::F64([alpha, beta]),
            _ => Scalars::F32([alpha as f32, beta as f32]),
        }
    }

    /// Pointers to `alpha` and `beta`, valid while `self` is.
    pub(crate) fn ptrs(&self) -> (*const std::ffi::c_void, *const std::ffi::c_void) {
        match self {
            Scalars::F32(v) => ((&v[0] as *const f32).cast(), (&v[1] as *const f32).cast()),
            Scalars::F64(v) => ((&v[0] as *const f64).cast(), (&v[1] as *const f64).cast()),
        }
    }
}
