//! What cuBLASLt applies after the product (bias, ReLU, GELU, and GELU's training pair: the
//! forward that keeps its pre-activation and the backward that reads it), and the checks of the
//! bias vector, the auxiliary matrix and operand addresses that the fused path needs.
//!
//! ## The auxiliary matrix and the bias gradient, row-major
//! cuBLASLt describes both in its column-major terms: the auxiliary ("GELU input") matrix has
//! the shape of `D` with its own leading dimension (`CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD`, at
//! least `D`'s rows and a multiple of 8), and the bias (or bias gradient) has one element per row
//! of `D`. This crate computes a row-major `C[m, n]` as the column-major `Cᵀ[n, m]` (see
//! [`Gemm`](crate::Gemm)), so in the row-major view: the auxiliary matrix is a row-major `[m, n]`
//! matrix (the shape of `C`) whose row stride is the auxiliary leading dimension (`≥ n`, a
//! multiple of 8), and the bias gradient has one element per **column** of `C` (`n`), the sum
//! over the `m` rows — exactly `db` of a linear layer `x·Wᵀ + b` whose output gradient is `C`.
//!
//! ## The bias gradient of an operand (`BGRADA` / `BGRADB`), row-major
//! cuBLASLt's `CUBLASLT_EPILOGUE_BGRADA` reduces its `A` over the GEMM's `k` (one element per
//! row of its `D`) and `BGRADB` its `B` (one per column of `D`). This crate hands cuBLASLt our
//! `B` as its `A` and our `A` as its `B` (see [`Gemm`](crate::Gemm)), so the names swap:
//! [`Epilogue::BGradA`] — the sums over `k` of our `op(A)`, one per **row** of `C` (`m`) — is
//! cuBLASLt's `BGRADB`, and [`Epilogue::BGradB`] — the sums over `k` of our `op(B)`, one per
//! **column** of `C` (`n`) — is its `BGRADA`. A linear layer's weight gradient
//! `dW[out, in] = dYᵀ · X` (`op(A) = dYᵀ`, `k` = the rows) with [`Epilogue::BGradA`] gives
//! `db[out] = Σ_rows dY` too (the configuration PyTorch's, Transformer Engine's and llm.c's
//! cuBLASLt weight-gradient GEMMs use).

use crate::element::DataType;
use crate::error::{BlasError, Result};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::cublasLtEpilogue_t;

/// What cuBLASLt applies to `x = alpha·op(A)·op(B) + beta·C` before writing `C`. The bias is a
/// vector of `n` elements (one per output column, the `b` of `x·W + b`) added to every row;
/// GELU is the tanh approximation, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
///
/// The bias-gradient epilogues ([`Epilogue::BGradA`], [`Epilogue::BGradB`]) write `C` as
/// [`Epilogue::None`] does and also the sums over `k` of one input operand
/// ([`Blas::matmul_bgrad`]); [`Blas::matmul`] refuses them.
///
/// The four GELU training epilogues use an **auxiliary matrix** `aux` of `C`'s shape (row-major `[m, n]`, its own
/// leading dimension): the GELU forward writes its input there ([`Blas::matmul_gelu_aux`]) and
/// the GELU backward reads it ([`Blas::matmul_dgelu`]); [`Blas::matmul`] refuses them.
///
/// [`Blas::matmul`]: crate::Blas::matmul
/// [`Blas::matmul_gelu_aux`]: crate::Blas::matmul_gelu_aux
/// [`Blas::matmul_dgelu`]: crate::Blas::matmul_dgelu
/// [`Blas::matmul_bgrad`]: crate::Blas::matmul_bgrad
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
    /// `gelu(x)`, and `x` written to `aux` (`CUBLASLT_EPILOGUE_GELU_AUX`).
    GeluAux,
    /// `gelu(x + bias)`, and the pre-activation `x + bias` written to `aux`
    /// (`CUBLASLT_EPILOGUE_GELU_AUX_BIAS`): a linear layer followed by GELU, keeping what the
    /// backward needs.
    GeluAuxBias,
    /// `x · gelu'(aux)`, elementwise (`CUBLASLT_EPILOGUE_DGELU`): with `x = dY · W` of the next
    /// layer, the gradient of GELU's input.
    DGelu,
    /// `x · gelu'(aux)`, and its column sums (one per column of `C`, summed over the `m` rows)
    /// written to the bias-gradient vector (`CUBLASLT_EPILOGUE_DGELU_BGRAD`): the gradient of
    /// GELU's input and of the bias of the linear layer before it, in one GEMM.
    DGeluBGrad,
    /// `x`, and the sums over `k` of `op(A)` — one per **row** of `C` (`m` elements,
    /// `Σ_p op(A)[i, p]`) — written to the bias-gradient vector (cuBLASLt's
    /// `CUBLASLT_EPILOGUE_BGRADB`: our `A` is its `B`). With `op(A) = dYᵀ` of a linear layer
    /// (`C = dW = dYᵀ·X`), the vector is `db = Σ_rows dY`.
    BGradA,
    /// `x`, and the sums over `k` of `op(B)` — one per **column** of `C` (`n` elements,
    /// `Σ_p op(B)[p, j]`) — written to the bias-gradient vector (cuBLASLt's
    /// `CUBLASLT_EPILOGUE_BGRADA`: our `B` is its `A`). With `op(B) = dY` (`C = dWᵀ = Xᵀ·dY`,
    /// a weight stored `[in, out]`), the vector is `db = Σ_rows dY`.
    BGradB,
}

/// How an epilogue uses the auxiliary matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum AuxUse {
    /// The epilogue writes it (GELU's forward).
    Write,
    /// The epilogue reads it (GELU's backward).
    Read,
}

impl Epilogue {
    /// Whether it adds a bias vector (read).
    pub fn has_bias(self) -> bool {
        matches!(
            self,
            Epilogue::Bias | Epilogue::BiasRelu | Epilogue::BiasGelu | Epilogue::GeluAuxBias
        )
    }

    /// Whether it writes a bias gradient (the column sums of its result, or the sums over `k`
    /// of an input operand).
    pub fn has_bias_grad(self) -> bool {
        matches!(
            self,
            Epilogue::DGeluBGrad | Epilogue::BGradA | Epilogue::BGradB
        )
    }

    /// How many elements its bias gradient has for a row-major `C[m, n]`: `m` for
    /// [`Epilogue::BGradA`] (one per row), `n` for the others that write one (one per column);
    /// `None` for those that write none.
    pub fn bias_grad_len(self, m: usize, n: usize) -> Option<usize> {
        match self {
            Epilogue::BGradA => Some(m),
            Epilogue::BGradB | Epilogue::DGeluBGrad => Some(n),
            _ => None,
        }
    }

    /// Whether it uses an auxiliary matrix (written by the GELU forward, read by its backward).
    pub fn has_aux(self) -> bool {
        self.aux().is_some()
    }

    pub(crate) fn aux(self) -> Option<AuxUse> {
        match self {
            Epilogue::GeluAux | Epilogue::GeluAuxBias => Some(AuxUse::Write),
            Epilogue::DGelu | Epilogue::DGeluBGrad => Some(AuxUse::Read),
            _ => None,
        }
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
            Epilogue::GeluAux => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_AUX,
            Epilogue::GeluAuxBias => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
            Epilogue::DGelu => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DGELU,
            Epilogue::DGeluBGrad => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DGELU_BGRAD,
            // Swapped on purpose: cuBLASLt's A is our B and its B our A (see the module docs).
            Epilogue::BGradA => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BGRADB,
            Epilogue::BGradB => cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BGRADA,
        }
    }
}

/// The alignment the bias vector needs: cuBLASLt's epilogue kernels read it in 16-byte pieces
/// (as PyTorch's and Marian's cuBLASLt paths also require).
pub const BIAS_ALIGNMENT: usize = 16;

/// The alignment the auxiliary matrix and the bias gradient need: the same 16 bytes as the bias
/// (cuBLASLt's epilogues move them in 16-byte pieces; the heuristic reads their addresses to
/// choose a kernel).
pub const AUX_ALIGNMENT: usize = 16;

/// The auxiliary matrix's leading dimension must be a multiple of this many elements
/// (cuBLASLt's rule for `CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD` with the GELU epilogues, the
/// same in cuBLAS 12.0 to 13.1).
pub const AUX_LD_MULTIPLE: usize = 8;

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
                 Epilogue::Bias, BiasRelu, BiasGelu or GeluAuxBias"
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

/// Checks the auxiliary matrix: given exactly when the epilogue uses one; a row-major `[m, n]`
/// matrix (the shape of `C`) with leading dimension `ld` of at least `n`, a multiple of
/// [`AUX_LD_MULTIPLE`], in a buffer long enough and [`AUX_ALIGNMENT`]-aligned. `aux` is
/// `(len, address, ld)`.
pub(crate) fn check_aux(
    op: &'static str,
    epilogue: Epilogue,
    aux: Option<(usize, u64, usize)>,
    m: usize,
    n: usize,
) -> Result<()> {
    let (len, addr, ld) = match (epilogue.has_aux(), aux) {
        (false, None) => return Ok(()),
        (true, None) => {
            return Err(BlasError::Epilogue {
                op,
                problem: format!(
                    "the {epilogue:?} epilogue uses an auxiliary (pre-activation) matrix, but \
                     none was given; use Blas::matmul_gelu_aux or Blas::matmul_dgelu"
                ),
            })
        }
        (false, Some(_)) => {
            return Err(BlasError::Epilogue {
                op,
                problem: format!(
                    "an auxiliary matrix was given, but the {epilogue:?} epilogue uses none"
                ),
            })
        }
        (true, Some(a)) => a,
    };
    if ld < n.max(1) {
        return Err(BlasError::LeadingDimension {
            op,
            operand: "aux",
            ld,
            min: n.max(1),
        });
    }
    if ld as u128 > i64::MAX as u128 {
        return Err(BlasError::TooLarge {
            op,
            what: "the auxiliary matrix's leading dimension",
            value: ld as u128,
            max: i64::MAX as u128,
        });
    }
    if ld % AUX_LD_MULTIPLE != 0 {
        return Err(BlasError::AuxLeadingDimension {
            op,
            ld,
            multiple: AUX_LD_MULTIPLE,
            suggested: ld.div_ceil(AUX_LD_MULTIPLE) * AUX_LD_MULTIPLE,
        });
    }
    let span = if m == 0 || n == 0 {
        0
    } else {
        (m as u128 - 1) * ld as u128 + n as u128
    };
    if (len as u128) < span {
        return Err(BlasError::Length {
            op,
            operand: "aux",
            expected: format!(
                "a [{m}, {n}] matrix (the shape of c) with row stride {ld} ({span} elements)"
            ),
            found: len,
        });
    }
    let found = alignment(addr) as usize;
    if found < AUX_ALIGNMENT {
        return Err(BlasError::Misaligned {
            op,
            operand: "aux",
            path: "cuBLASLt's GELU auxiliary matrix",
            found,
            required: AUX_ALIGNMENT,
        });
    }
    Ok(())
}

/// Checks the bias-gradient vector: given exactly when the epilogue writes one, at least
/// [`Epilogue::bias_grad_len`] elements (`m` or `n`), [`AUX_ALIGNMENT`]-aligned. `grad` is
/// `(len, address)`.
pub(crate) fn check_bias_grad(
    op: &'static str,
    epilogue: Epilogue,
    grad: Option<(usize, u64)>,
    m: usize,
    n: usize,
) -> Result<()> {
    match (epilogue.bias_grad_len(m, n), grad) {
        (None, None) => Ok(()),
        (Some(_), None) => Err(BlasError::Epilogue {
            op,
            problem: format!(
                "the {epilogue:?} epilogue writes a bias gradient, but no vector was given"
            ),
        }),
        (None, Some(_)) => Err(BlasError::Epilogue {
            op,
            problem: format!(
                "a bias-gradient vector was given, but the {epilogue:?} epilogue writes none; \
                 use Epilogue::DGeluBGrad, BGradA or BGradB"
            ),
        }),
        (Some(need), Some((len, addr))) => {
            if len < need {
                let per = if epilogue == Epilogue::BGradA {
                    "output row"
                } else {
                    "output column"
                };
                return Err(BlasError::Length {
                    op,
                    operand: "bias_grad",
                    expected: format!("one value per {per} ({need} elements)"),
                    found: len,
                });
            }
            let found = alignment(addr) as usize;
            if found < AUX_ALIGNMENT {
                return Err(BlasError::Misaligned {
                    op,
                    operand: "bias_grad",
                    path: "cuBLASLt's bias-gradient epilogue",
                    found,
                    required: AUX_ALIGNMENT,
                });
            }
            Ok(())
        }
    }
}

/// The element types the GELU auxiliary and the bias-gradient epilogues run on: f32 (also
/// TF32), f16 and bf16 outputs (cuBLASLt has no f64 kernels with these epilogues).
pub(crate) fn check_aux_types(
    op: &'static str,
    epilogue: Epilogue,
    output: DataType,
) -> Result<()> {
    if (epilogue.has_aux() || epilogue.has_bias_grad())
        && !matches!(output, DataType::F32 | DataType::F16 | DataType::BF16)
    {
        let instead = if epilogue.has_aux() {
            "a separate GELU"
        } else {
            "a separate reduction"
        };
        return Err(BlasError::Epilogue {
            op,
            problem: format!(
                "the {epilogue:?} epilogue runs on f32, f16 and bf16 outputs, not {output:?}; \
                 use Blas::gemm and {instead} for {output:?}"
            ),
        });
    }
    Ok(())
}

/// The rules of the bias-gradient epilogues of an input operand ([`Epilogue::BGradA`],
/// [`Epilogue::BGradB`]) beyond the vector's: `alpha = 1` (cuBLASLt does not document whether
/// alpha scales the reduction; `beta` does not enter it), and a non-empty product (`m`, `n`,
/// `k` > 0: with an empty `C` cuBLASLt runs nothing, and with `k = 0` no kernel, so the sums —
/// zeros, or those of an operand — would not be written).
pub(crate) fn check_bgrad_operand(
    op: &'static str,
    epilogue: Epilogue,
    alpha: f64,
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    if !matches!(epilogue, Epilogue::BGradA | Epilogue::BGradB) {
        return Ok(());
    }
    if alpha != 1.0 {
        return Err(BlasError::Epilogue {
            op,
            problem: format!(
                "the {epilogue:?} epilogue is supported with alpha = 1 only (alpha is {alpha}): \
                 cuBLASLt does not document whether alpha scales the operand's sums; scale the \
                 result and the vector afterwards"
            ),
        });
    }
    if m == 0 || n == 0 || k == 0 {
        return Err(BlasError::Epilogue {
            op,
            problem: format!(
                "the {epilogue:?} epilogue needs a non-empty product (m, n, k = {m}, {n}, {k}): \
                 cuBLASLt would write no sums; reduce the operand separately"
            ),
        });
    }
    Ok(())
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
        let e = check_bias("t", Epilogue::GeluAuxBias, None, 8).unwrap_err();
        assert!(matches!(e, BlasError::Epilogue { .. }), "{e}");
        assert!(check_bias("t", Epilogue::DGeluBGrad, None, 8).is_ok());
        match check_bias("t", Epilogue::Bias, Some((8, 0x1004)), 8) {
            Err(BlasError::Misaligned {
                found, required, ..
            }) => assert_eq!((found, required), (4, 16)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_aux_epilogues_and_their_values() {
        use cublasLtEpilogue_t as E;
        for (e, lt, aux, bias, grad) in [
            (
                Epilogue::GeluAux,
                E::CUBLASLT_EPILOGUE_GELU_AUX,
                Some(AuxUse::Write),
                false,
                false,
            ),
            (
                Epilogue::GeluAuxBias,
                E::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                Some(AuxUse::Write),
                true,
                false,
            ),
            (
                Epilogue::DGelu,
                E::CUBLASLT_EPILOGUE_DGELU,
                Some(AuxUse::Read),
                false,
                false,
            ),
            (
                Epilogue::DGeluBGrad,
                E::CUBLASLT_EPILOGUE_DGELU_BGRAD,
                Some(AuxUse::Read),
                false,
                true,
            ),
            (
                Epilogue::BiasGelu,
                E::CUBLASLT_EPILOGUE_GELU_BIAS,
                None,
                true,
                false,
            ),
        ] {
            assert_eq!(
                (e.lt(), e.aux(), e.has_bias(), e.has_bias_grad()),
                (lt, aux, bias, grad)
            );
            assert_eq!(e.has_aux(), aux.is_some());
        }
        // cublasLt.h (12.0 to 13.1): GELU_AUX = GELU | 128, GELU_AUX_BIAS = GELU_AUX | BIAS,
        // DGELU = 64 | 128, DGELU_BGRAD = DGELU | 16.
        assert_eq!(
            [
                E::CUBLASLT_EPILOGUE_GELU_AUX.0,
                E::CUBLASLT_EPILOGUE_GELU_AUX_BIAS.0
            ],
            [160, 164]
        );
        assert_eq!(
            [
                E::CUBLASLT_EPILOGUE_DGELU.0,
                E::CUBLASLT_EPILOGUE_DGELU_BGRAD.0
            ],
            [192, 208]
        );
    }

    #[test]
    fn the_aux_matrix_rules() {
        let ok = Some((5 * 16, 0x1000, 16));
        assert!(check_aux("t", Epilogue::GeluAuxBias, ok, 5, 12).is_ok());
        assert!(check_aux("t", Epilogue::Bias, None, 5, 12).is_ok());
        // Exactly (m - 1)·ld + n elements are enough.
        assert!(check_aux("t", Epilogue::DGelu, Some((4 * 16 + 12, 0x1000, 16)), 5, 12).is_ok());
        match check_aux("t", Epilogue::DGelu, None, 5, 12) {
            Err(BlasError::Epilogue { problem, .. }) => assert!(problem.contains("none was given")),
            other => panic!("{other:?}"),
        }
        match check_aux("t", Epilogue::BiasGelu, ok, 5, 12) {
            Err(BlasError::Epilogue { problem, .. }) => assert!(problem.contains("uses none")),
            other => panic!("{other:?}"),
        }
        match check_aux("t", Epilogue::GeluAux, Some((80, 0x1000, 8)), 5, 12) {
            Err(BlasError::LeadingDimension {
                operand, ld, min, ..
            }) => {
                assert_eq!((operand, ld, min), ("aux", 8, 12))
            }
            other => panic!("{other:?}"),
        }
        match check_aux("t", Epilogue::GeluAux, Some((100, 0x1000, 13)), 5, 12) {
            Err(e @ BlasError::AuxLeadingDimension { .. }) => {
                let BlasError::AuxLeadingDimension {
                    ld,
                    multiple,
                    suggested,
                    ..
                } = e
                else {
                    unreachable!()
                };
                assert_eq!((ld, multiple, suggested), (13, 8, 16));
            }
            other => panic!("{other:?}"),
        }
        match check_aux(
            "t",
            Epilogue::DGeluBGrad,
            Some((4 * 16 + 11, 0x1000, 16)),
            5,
            12,
        ) {
            Err(BlasError::Length { operand, found, .. }) => {
                assert_eq!((operand, found), ("aux", 75))
            }
            other => panic!("{other:?}"),
        }
        match check_aux("t", Epilogue::DGelu, Some((80, 0x1008, 16)), 5, 12) {
            Err(BlasError::Misaligned {
                operand,
                found,
                required,
                ..
            }) => {
                assert_eq!((operand, found, required), ("aux", 8, 16))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_bias_gradient_and_type_rules() {
        assert!(check_bias_grad("t", Epilogue::DGeluBGrad, Some((12, 0x1000)), 5, 12).is_ok());
        assert!(check_bias_grad("t", Epilogue::DGelu, None, 5, 12).is_ok());
        assert!(matches!(
            check_bias_grad("t", Epilogue::DGeluBGrad, None, 5, 12),
            Err(BlasError::Epilogue { .. })
        ));
        assert!(matches!(
            check_bias_grad("t", Epilogue::DGelu, Some((12, 0x1000)), 5, 12),
            Err(BlasError::Epilogue { .. })
        ));
        assert!(matches!(
            check_bias_grad("t", Epilogue::DGeluBGrad, Some((11, 0x1000)), 5, 12),
            Err(BlasError::Length {
                operand: "bias_grad",
                found: 11,
                ..
            })
        ));
        assert!(matches!(
            check_bias_grad("t", Epilogue::DGeluBGrad, Some((12, 0x1002)), 5, 12),
            Err(BlasError::Misaligned {
                operand: "bias_grad",
                found: 2,
                ..
            })
        ));
        for t in [DataType::F32, DataType::F16, DataType::BF16] {
            assert!(check_aux_types("t", Epilogue::DGeluBGrad, t).is_ok());
        }
        assert!(matches!(
            check_aux_types("t", Epilogue::GeluAuxBias, DataType::F64),
            Err(BlasError::Epilogue { .. })
        ));
        assert!(check_aux_types("t", Epilogue::BiasGelu, DataType::F64).is_ok());
    }

    #[test]
    fn the_operand_bias_gradients() {
        use cublasLtEpilogue_t as E;
        // Swapped: our A is cuBLASLt's B. cublasLt.h (11.4 to 13.1): BGRADA = 256, BGRADB = 512.
        assert_eq!(Epilogue::BGradA.lt(), E::CUBLASLT_EPILOGUE_BGRADB);
        assert_eq!(Epilogue::BGradB.lt(), E::CUBLASLT_EPILOGUE_BGRADA);
        assert_eq!(
            [E::CUBLASLT_EPILOGUE_BGRADA.0, E::CUBLASLT_EPILOGUE_BGRADB.0],
            [256, 512]
        );
        for e in [Epilogue::BGradA, Epilogue::BGradB] {
            assert!(e.has_bias_grad() && !e.has_bias() && !e.has_aux(), "{e:?}");
        }
        assert_eq!(Epilogue::BGradA.bias_grad_len(5, 12), Some(5));
        assert_eq!(Epilogue::BGradB.bias_grad_len(5, 12), Some(12));
        assert_eq!(Epilogue::DGeluBGrad.bias_grad_len(5, 12), Some(12));
        assert_eq!(Epilogue::Bias.bias_grad_len(5, 12), None);
        // BGradA: one per row (m = 5); BGradB: one per column (n = 12).
        assert!(check_bias_grad("t", Epilogue::BGradA, Some((5, 0x1000)), 5, 12).is_ok());
        match check_bias_grad("t", Epilogue::BGradA, Some((4, 0x1000)), 5, 12) {
            Err(BlasError::Length {
                operand: "bias_grad",
                found: 4,
                expected,
                ..
            }) => assert!(
                expected.contains("row") && expected.contains('5'),
                "{expected}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(check_bias_grad("t", Epilogue::BGradB, Some((12, 0x1000)), 5, 12).is_ok());
        assert!(matches!(
            check_bias_grad("t", Epilogue::BGradB, Some((11, 0x1000)), 5, 12),
            Err(BlasError::Length { found: 11, .. })
        ));
        assert!(matches!(
            check_bias_grad("t", Epilogue::BGradB, None, 5, 12),
            Err(BlasError::Epilogue { .. })
        ));
        assert!(matches!(
            check_bias_grad("t", Epilogue::BGradA, Some((8, 0x1008)), 5, 12),
            Err(BlasError::Misaligned { found: 8, .. })
        ));
        assert!(matches!(
            check_aux_types("t", Epilogue::BGradA, DataType::F64),
            Err(BlasError::Epilogue { .. })
        ));
        assert!(check_aux_types("t", Epilogue::BGradB, DataType::BF16).is_ok());
        assert!(check_bgrad_operand("t", Epilogue::BGradA, 1.0, (5, 12, 3)).is_ok());
        assert!(check_bgrad_operand("t", Epilogue::DGeluBGrad, 2.0, (0, 12, 3)).is_ok());
        for (alpha, mnk) in [(0.5, (5, 12, 3)), (1.0, (0, 12, 3)), (1.0, (5, 12, 0))] {
            match check_bgrad_operand("t", Epilogue::BGradB, alpha, mnk) {
                Err(BlasError::Epilogue { .. }) => {}
                other => panic!("alpha {alpha}, {mnk:?}: {other:?}"),
            }
        }
    }
}
