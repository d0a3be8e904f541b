//! Which cuBLAS: loading cuBLAS and cuBLASLt, and checking that they are one major version that
//! this crate's calls are correct for.
//!
//! ## cuBLAS 12 and 13
//! The declarations in `cuda-stack-sys` are generated from cuBLAS 13.1's headers. Generating
//! them again from the headers of cuBLAS 12.0, 12.1, 12.4, 12.6, 12.8 and 12.9 (the
//! `nvidia-cublas-cu12` wheels) and comparing shows, for everything this crate calls:
//!
//! | what | 12.x vs 13.x |
//! |---|---|
//! | entry points: `cublasCreate_v2`, `cublasDestroy_v2`, `cublasSetMathMode`, `cublasSetStream_v2`, `cublasSetWorkspace_v2`, `cublasGemmEx`, `cublasGemmStridedBatchedEx`, `cublasGetProperty`, `cublasLtCreate`/`Destroy`, `cublasLtMatmulDesc*`, `cublasLtMatrixLayout*`, `cublasLtMatmulPreference*`, `cublasLtMatmulAlgoGetHeuristic`, `cublasLtMatmul`, `cublasLtGetVersion` | exported by every 12.x, same signatures (the 32-bit `int` forms; the `_64` forms are not used) |
//! | enums: compute types (`CUBLAS_COMPUTE_32F` 68, `_32F_FAST_TF32` 77, `_64F` 70), data types (`CUDA_R_32F` 0, `_64F` 1, `_16F` 2, `_16BF` 14), operations, `CUBLAS_DEFAULT_MATH`, `CUBLAS_GEMM_DEFAULT`, epilogues (`DEFAULT` 1, `RELU` 2, `BIAS` 4, `RELU_BIAS` 6, `GELU` 32, `GELU_BIAS` 36, `GELU_AUX` 160, `GELU_AUX_BIAS` 164, `DGELU` 192, `DGELU_BGRAD` 208), descriptor, layout and preference attributes, status codes | same values |
//! | attribute value types: `TRANSA`/`TRANSB` `int32_t`, `EPILOGUE` `uint32_t`, `BIAS_POINTER` and `EPILOGUE_AUX_POINTER` pointers, `EPILOGUE_AUX_LD` `int64_t` (a multiple of 8 for GELU's auxiliary matrix), `BATCH_COUNT` `int32_t`, `STRIDED_BATCH_OFFSET` `int64_t`, `MAX_WORKSPACE_BYTES` `uint64_t`, `MIN_ALIGNMENT_*` `uint32_t` | same (and the library refuses a value of the wrong size) |
//! | `cublasLtMatmulAlgo_t` (64 bytes), `cublasLtMatmulHeuristicResult_t` (96 bytes) | same layout |
//! | `cublasLtGetVersion` | `major·10000 + minor·100 + patch` in both |
//!
//! What differs does not reach this crate: 13 adds floating-point emulation (entry points,
//! `CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT`, `CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR`),
//! `CUBLAS_GEMM_AUTOTUNE` and a stage count; 12.4 to 12.9 have the atomic-synchronisation
//! attributes 13 dropped; `cublasLtMatmulDescOpaque_t` is smaller in 12.0 and 12.1 (descriptors
//! here are made by `cublasLtMatmulDescCreate`, never in memory of ours). So one code path
//! serves both majors, with no branch on the version; the test below pins every value above, so
//! that bindings regenerated from a later cuBLAS that changed one would fail it rather than pass
//! a cuBLAS 12 a value it reads differently. Outside the ABI: CUDA 13 dropped GPUs before Turing
//! (compute capability 7.5), so cuBLAS 12 is also the one for Volta and older.

use crate::error::{BlasError, Result};
use cuda_stack_driver::cuda_stack_sys::{Cublas, CublasLt};

/// The major versions of cuBLAS and cuBLASLt this crate runs on (see the module docs).
pub(crate) const SUPPORTED_MAJORS: [i32; 2] = [13, 12];

/// A library's `(major, minor, patch)`.
type Version = (i32, i32, i32);

/// Loads cuBLAS and cuBLASLt (once per process) and checks their versions ([`check_pair`]).
pub(crate) fn libraries() -> Result<(&'static Cublas, &'static CublasLt)> {
    let cublas = Cublas::get()?;
    let lt = CublasLt::get()?;
    check_pair(cublas, lt)?;
    Ok((cublas, lt))
}

/// The major version `cublas` and `lt` share, or [`BlasError::Version`] when either is not one
/// of [`SUPPORTED_MAJORS`] (or cannot say), or [`BlasError::VersionMismatch`] when they differ.
pub(crate) fn check_pair(cublas: &Cublas, lt: &CublasLt) -> Result<i32> {
    check_versions(cublas.version(), lt.version())
}

fn check_versions(cublas: Option<Version>, lt: Option<Version>) -> Result<i32> {
    let text = |v: Option<Version>| v.map_or("unknown".into(), |(a, b, c)| format!("{a}.{b}.{c}"));
    let mut majors = [0; 2];
    for (slot, (library, v)) in majors
        .iter_mut()
        .zip([("cuBLAS", cublas), ("cuBLASLt", lt)])
    {
        match v {
            Some((major, _, _)) if SUPPORTED_MAJORS.contains(&major) => *slot = major,
            _ => {
                return Err(BlasError::Version {
                    library,
                    found: text(v),
                })
            }
        }
    }
    if majors[0] != majors[1] {
        return Err(BlasError::VersionMismatch {
            cublas: text(cublas),
            cublas_lt: text(lt),
        });
    }
    Ok(majors[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_stack_driver::cuda_stack_sys::cublas_types::{
        cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasMath_t, cublasOperation_t,
        cublasStatus_t, cudaDataType_t as Data,
    };
    use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
        cublasLtEpilogue_t as Epi, cublasLtMatmulAlgo_t, cublasLtMatmulDescAttributes_t as Desc,
        cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t as Pref,
        cublasLtMatrixLayoutAttribute_t as Layout,
    };

    #[test]
    fn majors_12_and_13_are_accepted_when_both_libraries_agree() {
        assert_eq!(
            check_versions(Some((13, 1, 0)), Some((13, 1, 0))).unwrap(),
            13
        );
        assert_eq!(
            check_versions(Some((12, 9, 1)), Some((12, 9, 1))).unwrap(),
            12
        );
        assert_eq!(
            check_versions(Some((12, 1, 3)), Some((12, 1, 3))).unwrap(),
            12
        );
    }

    #[test]
    fn other_majors_unknown_versions_and_mixed_pairs_are_refused() {
        for (cublas, lt, library, found) in [
            (Some((11, 11, 3)), Some((11, 11, 3)), "cuBLAS", "11.11.3"),
            (Some((14, 0, 0)), Some((14, 0, 0)), "cuBLAS", "14.0.0"),
            (None, Some((13, 1, 0)), "cuBLAS", "unknown"),
            (Some((13, 1, 0)), None, "cuBLASLt", "unknown"),
            (Some((12, 9, 1)), Some((11, 0, 0)), "cuBLASLt", "11.0.0"),
        ] {
            match check_versions(cublas, lt) {
                Err(e @ BlasError::Version { .. }) => {
                    let BlasError::Version {
                        library: l,
                        found: f,
                    } = &e
                    else {
                        unreachable!()
                    };
                    assert_eq!((*l, f.as_str()), (library, found));
                    let text = e.to_string();
                    assert!(
                        text.contains("12 and 13") && text.contains("nvidia-cublas-cu12"),
                        "{text}"
                    );
                }
                other => panic!("{cublas:?} / {lt:?}: {other:?}"),
            }
        }
        match check_versions(Some((13, 1, 0)), Some((12, 9, 1))) {
            Err(e @ BlasError::VersionMismatch { .. }) => {
                let text = e.to_string();
                assert!(text.contains("13.1.0") && text.contains("12.9.1"), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every enum value this crate passes, as cuBLAS 12.0 to 12.9 declare it (their headers;
    /// `CUDA_R_*` from CUDA 12's `library_types.h`), against the generated (13.1) bindings.
    #[test]
    fn every_value_this_crate_passes_is_cublas_12s_too() {
        let ints: [(&str, i64, i64); 42] = [
            ("CUBLAS_OP_N", cublasOperation_t::CUBLAS_OP_N.0 as i64, 0),
            ("CUBLAS_OP_T", cublasOperation_t::CUBLAS_OP_T.0 as i64, 1),
            (
                "CUBLAS_DEFAULT_MATH",
                cublasMath_t::CUBLAS_DEFAULT_MATH.0 as i64,
                0,
            ),
            (
                "CUBLAS_GEMM_DEFAULT",
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT.0 as i64,
                -1,
            ),
            (
                "CUBLAS_COMPUTE_32F",
                Compute::CUBLAS_COMPUTE_32F.0 as i64,
                68,
            ),
            (
                "CUBLAS_COMPUTE_32F_FAST_TF32",
                Compute::CUBLAS_COMPUTE_32F_FAST_TF32.0 as i64,
                77,
            ),
            (
                "CUBLAS_COMPUTE_64F",
                Compute::CUBLAS_COMPUTE_64F.0 as i64,
                70,
            ),
            ("CUDA_R_32F", Data::CUDA_R_32F.0 as i64, 0),
            ("CUDA_R_64F", Data::CUDA_R_64F.0 as i64, 1),
            ("CUDA_R_16F", Data::CUDA_R_16F.0 as i64, 2),
            ("CUDA_R_16BF", Data::CUDA_R_16BF.0 as i64, 14),
            (
                "CUBLAS_STATUS_SUCCESS",
                cublasStatus_t::CUBLAS_STATUS_SUCCESS.0 as i64,
                0,
            ),
            (
                "CUBLAS_STATUS_NOT_SUPPORTED",
                cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED.0 as i64,
                15,
            ),
            (
                "CUBLASLT_EPILOGUE_DEFAULT",
                Epi::CUBLASLT_EPILOGUE_DEFAULT.0 as i64,
                1,
            ),
            (
                "CUBLASLT_EPILOGUE_RELU",
                Epi::CUBLASLT_EPILOGUE_RELU.0 as i64,
                2,
            ),
            (
                "CUBLASLT_EPILOGUE_BIAS",
                Epi::CUBLASLT_EPILOGUE_BIAS.0 as i64,
                4,
            ),
            (
                "CUBLASLT_EPILOGUE_RELU_BIAS",
                Epi::CUBLASLT_EPILOGUE_RELU_BIAS.0 as i64,
                6,
            ),
            (
                "CUBLASLT_EPILOGUE_GELU",
                Epi::CUBLASLT_EPILOGUE_GELU.0 as i64,
                32,
            ),
            (
                "CUBLASLT_EPILOGUE_GELU_BIAS",
                Epi::CUBLASLT_EPILOGUE_GELU_BIAS.0 as i64,
                36,
            ),
            (
                "CUBLASLT_EPILOGUE_GELU_AUX",
                Epi::CUBLASLT_EPILOGUE_GELU_AUX.0 as i64,
                160,
            ),
            (
                "CUBLASLT_EPILOGUE_GELU_AUX_BIAS",
                Epi::CUBLASLT_EPILOGUE_GELU_AUX_BIAS.0 as i64,
                164,
            ),
            (
                "CUBLASLT_EPILOGUE_DGELU",
                Epi::CUBLASLT_EPILOGUE_DGELU.0 as i64,
                192,
            ),
            (
                "CUBLASLT_EPILOGUE_DGELU_BGRAD",
                Epi::CUBLASLT_EPILOGUE_DGELU_BGRAD.0 as i64,
                208,
            ),
            (
                "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER",
                Desc::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER.0 as i64,
                11,
            ),
            (
                "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD",
                Desc::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD.0 as i64,
                12,
            ),
            (
                "CUBLASLT_MATMUL_DESC_TRANSA",
                Desc::CUBLASLT_MATMUL_DESC_TRANSA.0 as i64,
                3,
            ),
            (
                "CUBLASLT_MATMUL_DESC_TRANSB",
                Desc::CUBLASLT_MATMUL_DESC_TRANSB.0 as i64,
                4,
            ),
            (
                "CUBLASLT_MATMUL_DESC_EPILOGUE",
                Desc::CUBLASLT_MATMUL_DESC_EPILOGUE.0 as i64,
                7,
            ),
            (
                "CUBLASLT_MATMUL_DESC_BIAS_POINTER",
                Desc::CUBLASLT_MATMUL_DESC_BIAS_POINTER.0 as i64,
                8,
            ),
            (
                "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT",
                Layout::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT.0 as i64,
                5,
            ),
            (
                "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET",
                Layout::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET.0 as i64,
                6,
            ),
            (
                "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES",
                Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES.0 as i64,
                1,
            ),
            (
                "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES",
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES.0 as i64,
                5,
            ),
            (
                "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES.0 as i64,
                6,
            ),
            (
                "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES",
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES.0 as i64,
                7,
            ),
            (
                "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES",
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES.0 as i64,
                8,
            ),
            (
                "sizeof(cublasLtMatmulAlgo_t)",
                size_of::<cublasLtMatmulAlgo_t>() as i64,
                64,
            ),
            (
                "alignof(cublasLtMatmulAlgo_t)",
                align_of::<cublasLtMatmulAlgo_t>() as i64,
                8,
            ),
            (
                "sizeof(cublasLtMatmulHeuristicResult_t)",
                size_of::<cublasLtMatmulHeuristicResult_t>() as i64,
                96,
            ),
            (
                "offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize)",
                std::mem::offset_of!(cublasLtMatmulHeuristicResult_t, workspaceSize) as i64,
                64,
            ),
            (
                "offsetof(cublasLtMatmulHeuristicResult_t, state)",
                std::mem::offset_of!(cublasLtMatmulHeuristicResult_t, state) as i64,
                72,
            ),
            (
                "offsetof(cublasLtMatmulHeuristicResult_t, wavesCount)",
                std::mem::offset_of!(cublasLtMatmulHeuristicResult_t, wavesCount) as i64,
                76,
            ),
        ];
        for (name, ours, cublas12) in ints {
            assert_eq!(
                ours, cublas12,
                "{name}: the bindings say {ours}, cuBLAS 12 {cublas12}"
            );
        }
    }
}
