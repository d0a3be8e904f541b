//! How a product is computed: the math asked for ([`Math`]) and, for each combination of
//! element types, cuBLAS's compute type and the type of `alpha` and `beta` ([`compute_for`]).

use crate::element::DataType;
use crate::error::{BlasError, Result};
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasComputeType_t;

/// The math f32 products use. Off by default, like PyTorch's
/// `torch.backends.cuda.matmul.allow_tf32 = False`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Math {
    /// Full precision of the element type (for f16/bf16 inputs: f32 accumulation).
    #[default]
    Default,
    /// f32 inputs rounded to TF32 (10-bit mantissa) on the tensor cores, f32 accumulation
    /// (`CUBLAS_COMPUTE_32F_FAST_TF32`): about 1e-3 relative error, many times faster.
    Tf32,
}

impl Math {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Math::Default => "default math",
            Math::Tf32 => "TF32 math",
        }
    }
}

/// How a supported combination is computed: cuBLAS's compute type, and the type of `alpha` and
/// `beta` (the scale type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Compute {
    pub(crate) compute: cublasComputeType_t,
    pub(crate) scale: DataType,
}

/// The compute mode for inputs of `input` and an output of `output`, or
/// [`BlasError::UnsupportedTypes`]:
///
/// | a, b | c | math | compute |
/// |---|---|---|---|
/// | f32 | f32 | default | `CUBLAS_COMPUTE_32F` (no TF32) |
/// | f32 | f32 | TF32 | `CUBLAS_COMPUTE_32F_FAST_TF32` |
/// | f64 | f64 | default | `CUBLAS_COMPUTE_64F` |
/// | f16 | f16 or f32 | default | `CUBLAS_COMPUTE_32F` (f32 accumulation) |
/// | bf16 | bf16 or f32 | default | `CUBLAS_COMPUTE_32F` (f32 accumulation) |
pub(crate) fn compute_for(
    op: &'static str,
    input: DataType,
    output: DataType,
    math: Math,
) -> Result<Compute> {
    use DataType::*;
    let f32_scale = |compute| Compute {
        compute,
        scale: F32,
    };
    match (input, output, math) {
        (F32, F32, Math::Default) => Ok(f32_scale(cublasComputeType_t::CUBLAS_COMPUTE_32F)),
        (F32, F32, Math::Tf32) => Ok(f32_scale(cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32)),
        (F64, F64, Math::Default) => Ok(Compute {
            compute: cublasComputeType_t::CUBLAS_COMPUTE_64F,
            scale: F64,
        }),
        (F16, F16 | F32, Math::Default) | (BF16, BF16 | F32, Math::Default) => {
            Ok(f32_scale(cublasComputeType_t::CUBLAS_COMPUTE_32F))
        }
        _ => Err(BlasError::UnsupportedTypes {
            op,
            input,
            output,
            math: math.describe(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_combination_is_decided() {
        use DataType::*;
        let all = [F32, F64, F16, BF16];
        let mut ok = Vec::new();
        for a in all {
            for c in all {
                for m in [Math::Default, Math::Tf32] {
                    match compute_for("t", a, c, m) {
                        Ok(_) => ok.push((a, c, m)),
                        Err(BlasError::UnsupportedTypes { input, output, .. }) => {
                            assert_eq!((input, output), (a, c))
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }
        assert_eq!(
            ok,
            [
                (F32, F32, Math::Default),
                (F32, F32, Math::Tf32),
                (F64, F64, Math::Default),
                (F16, F32, Math::Default),
                (F16, F16, Math::Default),
                (BF16, F32, Math::Default),
                (BF16, BF16, Math::Default),
            ]
        );
        let e = compute_for("gemm", F16, F32, Math::Tf32).unwrap_err();
        assert!(e.to_string().contains("TF32"), "{e}");
    }
}
