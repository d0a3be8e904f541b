//! What cuBLASLt applies after the product (bias, ReLU, GELU), and the checks of the bias vector
//! and of operand addresses that the fused path needs.

use crate::error::{BlasError, Result};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::cublasLtEpilogue_t;

/// What cuBLASLt applies to `alpha·op(A)·op(B) + beta·C` before writing `C`. The bias is a
/// vector of `n` elements (one per output column, the `b` of `x·W + b`) added to every row;
/// GELU is the tanh approximation, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// Nothing: a plain GEMM through cuBLASLt.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x + bias`.
    Bias,
    /// `max(x + bias, 0)`: seed 004's fused layer.
    BiasRelu,
    /// `gelu(x)`.
    Gelu,
    /// `gelu(x + bias)`.
    BiasGelu,
}

impl Epilogue {
    /// Whether it adds a bias vector.
    pub fn has_bias(self) -> bool {
        matches!(
            self,
            Epilogue::Bias | Epilogue::BiasRelu | Epilogue::BiasGelu
        )
    }

    /// cuBLASLt's value (the same in cuBLAS 12 and 13).
    pub(crate) fn lt(self) -> cublasLtEpilogue_t {
        match self {
            Epilogue::None => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            Epilogue::Relu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            Epilogue::Bias => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            Epilogue::BiasRelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
            Epilogue::Gelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
            Epilogue::BiasGelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
        }
    }
}

/// The alignment the bias vector needs: cuBLASLt's epilogue kernels read it in 16-byte pieces
/// (as PyTorch's and Marian's cuBLASLt paths also require).
pub const BIAS_ALIGNMENT: usize = 16;

/// The largest power of two (at most 256) that divides `addr`: what cuBLASLt's
/// `MIN_ALIGNMENT` preferences and its bias loads care about.
pub(crate) fn alignment(addr: u64) -> u32 {
    if addr == 0 {
        256
    } else {
        1u32 << addr.trailing_zeros().min(8)
    }
}

/// Checks that a bias is given exactly when the epilogue adds one, covers `n` elements and is
/// aligned for the epilogue's loads. `bias` is `(len, address)`.
pub(crate) fn check_bias(
    op: &'static str,
    epilogue: Epilogue,
    bias: Option<(usize, u64)>,
    n: usize,
) -> Result<()> {
    match (epilogue.has_bias(), bias) {
        (true, None) => Err(BlasError::Epilogue {
            op,
            problem: format!("the {epilogue:?} epilogue adds a bias vector, but none was given"),
        }),
        (false, Some(_)) => Err(BlasError::Epilogue {
            op,
            problem: format!(
                "a bias vector was given, but the {epilogue:?} epilogue adds none; use \
                 Epilogue::Bias, BiasRelu or BiasGelu"
            ),
        }),
        (true, Some((len, addr))) => {
            if len < n {
                return Err(BlasError::Length {
                    op,
                    operand: "bias",
                    expected: format!("one value per output column ({n} elements)"),
                    found: len,
                });
            }
            let found = alignment(addr) as usize;
            if found < BIAS_ALIGNMENT {
                return Err(BlasError::Misaligned {
                    op,
                    operand: "bias",
                    path: "cuBLASLt's bias epilogue",
                    found,
                    required: BIAS_ALIGNMENT,
                });
            }
            Ok(())
        }
        (false, None) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_largest_power_of_two_up_to_256() {
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0010), 16);
        assert_eq!(alignment(0x7f00_0000_0002), 2);
        assert_eq!(alignment(0x7f00_0000_0001), 1);
        assert_eq!(alignment(0x7f00_0000_0180), 128);
    }

    #[test]
    fn a_bias_goes_with_a_bias_epilogue_only() {
        let aligned = Some((8, 0x1000));
        assert!(check_bias("t", Epilogue::BiasRelu, aligned, 8).is_ok());
        assert!(check_bias("t", Epilogue::Relu, None, 8).is_ok());
        let e = check_bias("t", Epilogue::BiasGelu, None, 8).unwrap_err();
        assert!(matches!(e, BlasError::Epilogue { .. }), "{e}");
        let e = check_bias("t", Epilogue::Gelu, aligned, 8).unwrap_err();
        assert!(e.to_string().contains("adds none"), "{e}");
        match check_bias("t", Epilogue::Bias, Some((7, 0x1000)), 8) {
            Err(BlasError::Length { operand, found, .. }) => {
                assert_eq!((operand, found), ("bias", 7))
            }
            other => panic!("{other:?}"),
        }
        match check_bias("t", Epilogue::Bias, Some((8, 0x1004)), 8) {
            Err(BlasError::Misaligned {
                found, required, ..
            }) => assert_eq!((found, required), (4, 16)),
            other => panic!("{other:?}"),
        }
    }
}
