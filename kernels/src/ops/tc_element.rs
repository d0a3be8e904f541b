//! The element types of the tensor-core GEMMs (f16, bf16) and the kernel entries each has: the
//! signatures of the `gemm_wgmma_*`, `gemm_mma_*` and `gemm_wgx_*` entries, picked by transposes
//! and tile, and of the matrix-vector entries `gemv_half_*` that `gemm_half` runs at M = 1 or
//! N = 1.

use super::gemm_half_plan::HalfTile;
use super::Transpose;
use crate::generated::handles::{
    GemmMmaKernels, GemmWgmmaKernels, GemmWgmmaTilesKernels, GemvHalfKernels,
};
use crate::Element;
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Kernel, TensorMap, TensorMapElement};

/// The element types the tensor-core GEMMs take (f32 accumulation, output of the same type).
pub trait TensorCoreElement: Element + sealed::Sealed {
    /// How the TMA engine sees it.
    const TMA: TensorMapElement;
    /// The `gemm_wgmma_*` entry for these transposes.
    fn wgmma(k: &GemmWgmmaKernels, ta: Transpose, tb: Transpose) -> &WgmmaKernel<Self>;
    /// The `gemm_mma_*` entry for these transposes.
    fn mma(k: &GemmMmaKernels, ta: Transpose, tb: Transpose) -> &MmaKernel<Self>;
    /// The `gemm_wgx_<tile>_*` entry for this tile shape and these transposes.
    fn wgx(
        k: &GemmWgmmaTilesKernels,
        tile: HalfTile,
        ta: Transpose,
        tb: Transpose,
    ) -> &WgxKernel<Self>;
    /// The `gemm_wgx_reduce_*` entry (split-K slabs summed in order, rounded to this type).
    fn wgx_reduce(k: &GemmWgmmaTilesKernels) -> &WgxReduceKernel<Self>;
    /// The `gemv_half_rows_*` entry (a matrix with rows contiguous in k times a vector).
    fn gemv_rows(k: &GemvHalfKernels) -> &GemvRowsKernel<Self>;
    /// The `gemv_half_cols_*` entry (a vector times a matrix with rows contiguous in the output).
    fn gemv_cols(k: &GemvHalfKernels) -> &GemvColsKernel<Self>;
}

/// 0..4 for nn, nt, tn, tt (the order of the entries in the macro below).
fn layout_index(ta: Transpose, tb: Transpose) -> usize {
    2 * usize::from(ta == Transpose::Trans) + usize::from(tb == Transpose::Trans)
}

/// The signature of a `gemm_wgmma_*` entry (tensor maps of A and B, then A, B, C, M, N, K, ldc).
pub type WgmmaKernel<T> = Kernel<(
    TensorMap,
    TensorMap,
    &'static DeviceSlice<T>,
    &'static DeviceSlice<T>,
    &'static mut DeviceSlice<T>,
    i32,
    i32,
    i32,
    i32,
)>;

/// The signature of a `gemm_mma_*` entry (A, B, C, M, N, K, lda, ldb, ldc).
pub type MmaKernel<T> = Kernel<(
    &'static DeviceSlice<T>,
    &'static DeviceSlice<T>,
    &'static mut DeviceSlice<T>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
)>;

/// The signature of a `gemm_wgx_*` entry (tensor maps of A and B, then A, B, the output — C, or
/// the f32 split-K workspace — as bytes, M, N, K, ldc, splits, k tiles per slice).
pub type WgxKernel<T> = Kernel<(
    TensorMap,
    TensorMap,
    &'static DeviceSlice<T>,
    &'static DeviceSlice<T>,
    &'static mut DeviceSlice<u8>,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
)>;

/// The signature of `gemm_wgx_reduce_*` (workspace, splits, M, N, C, ldc).
pub type WgxReduceKernel<T> = Kernel<(
    &'static DeviceSlice<f32>,
    i32,
    i32,
    i32,
    &'static mut DeviceSlice<T>,
    i32,
)>;

/// The signature of `gemv_half_rows_*` (matrix, ld, x, incx, y, incy, R, K, warps per row).
pub type GemvRowsKernel<T> = Kernel<(
    &'static DeviceSlice<T>,
    i32,
    &'static DeviceSlice<T>,
    i32,
    &'static mut DeviceSlice<T>,
    i32,
    i32,
    i32,
    i32,
)>;

/// The signature of `gemv_half_cols_*` (matrix, ld, x, incx, y, incy, C, K).
pub type GemvColsKernel<T> = Kernel<(
    &'static DeviceSlice<T>,
    i32,
    &'static DeviceSlice<T>,
    i32,
    &'static mut DeviceSlice<T>,
    i32,
    i32,
    i32,
)>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
}

macro_rules! tc_element {
    ($t:ty, $tma:ident, $nn:ident, $nt:ident, $tn:ident, $tt:ident,
     $mnn:ident, $mnt:ident, $mtn:ident, $mtt:ident,
     [$($w256:ident),+], [$($w192:ident),+], [$($w128:ident),+], [$($w64:ident),+], [$($wn64:ident),+],
     [$($wp64:ident),+], [$($w6464:ident),+], $reduce:ident, $gemv_rows:ident, $gemv_cols:ident) => {
        impl TensorCoreElement for $t {
            const TMA: TensorMapElement = TensorMapElement::$tma;
            fn wgmma(k: &GemmWgmmaKernels, ta: Transpose, tb: Transpose) -> &WgmmaKernel<Self> {
                match (ta, tb) {
                    (Transpose::NoTrans, Transpose::NoTrans) => &k.$nn,
                    (Transpose::NoTrans, Transpose::Trans) => &k.$nt,
                    (Transpose::Trans, Transpose::NoTrans) => &k.$tn,
                    (Transpose::Trans, Transpose::Trans) => &k.$tt,
                }
            }
            fn mma(k: &GemmMmaKernels, ta: Transpose, tb: Transpose) -> &MmaKernel<Self> {
                match (ta, tb) {
                    (Transpose::NoTrans, Transpose::NoTrans) => &k.$mnn,
                    (Transpose::NoTrans, Transpose::Trans) => &k.$mnt,
                    (Transpose::Trans, Transpose::NoTrans) => &k.$mtn,
                    (Transpose::Trans, Transpose::Trans) => &k.$mtt,
                }
            }
            fn wgx(
                k: &GemmWgmmaTilesKernels,
                tile: HalfTile,
                ta: Transpose,
                tb: Transpose,
            ) -> &WgxKernel<Self> {
                let i = layout_index(ta, tb);
                match tile {
                    HalfTile::T128x256 => [$(&k.$w256),+][i],
                    HalfTile::T128x192 => [$(&k.$w192),+][i],
                    HalfTile::T128x128 => [$(&k.$w128),+][i],
                    HalfTile::T64x128 => [$(&k.$w64),+][i],
                    HalfTile::T128x64 => [$(&k.$wn64),+][i],
                    HalfTile::T64x64 => [$(&k.$w6464),+][i],
                    HalfTile::T128x64Pair => [$(&k.$wp64),+][i],
                }
            }
            fn wgx_reduce(k: &GemmWgmmaTilesKernels) -> &WgxReduceKernel<Self> {
                &k.$reduce
            }
            fn gemv_rows(k: &GemvHalfKernels) -> &GemvRowsKernel<Self> {
                &k.$gemv_rows
            }
            fn gemv_cols(k: &GemvHalfKernels) -> &GemvColsKernel<Self> {
                &k.$gemv_cols
            }
        }
    };
}
tc_element!(
    bf16,
    BF16,
    gemm_wgmma_bf16_nn,
    gemm_wgmma_bf16_nt,
    gemm_wgmma_bf16_tn,
    gemm_wgmma_bf16_tt,
    gemm_mma_bf16_nn,
    gemm_mma_bf16_nt,
    gemm_mma_bf16_tn,
    gemm_mma_bf16_tt,
    [
        gemm_wgx_128x256_bf16_nn,
        gemm_wgx_128x256_bf16_nt,
        gemm_wgx_128x256_bf16_tn,
        gemm_wgx_128x256_bf16_tt
    ],
    [
        gemm_wgx_128x192_bf16_nn,
        gemm_wgx_128x192_bf16_nt,
        gemm_wgx_128x192_bf16_tn,
        gemm_wgx_128x192_bf16_tt
    ],
    [
        gemm_wgx_128x128_bf16_nn,
        gemm_wgx_128x128_bf16_nt,
        gemm_wgx_128x128_bf16_tn,
        gemm_wgx_128x128_bf16_tt
    ],
    [
        gemm_wgx_64x128_bf16_nn,
        gemm_wgx_64x128_bf16_nt,
        gemm_wgx_64x128_bf16_tn,
        gemm_wgx_64x128_bf16_tt
    ],
    [
        gemm_wgx_128x64_bf16_nn,
        gemm_wgx_128x64_bf16_nt,
        gemm_wgx_128x64_bf16_tn,
        gemm_wgx_128x64_bf16_tt
    ],
    [
        gemm_wgx_128x64x2_bf16_nn,
        gemm_wgx_128x64x2_bf16_nt,
        gemm_wgx_128x64x2_bf16_tn,
        gemm_wgx_128x64x2_bf16_tt
    ],
    [
        gemm_wgx_64x64_bf16_nn,
        gemm_wgx_64x64_bf16_nt,
        gemm_wgx_64x64_bf16_tn,
        gemm_wgx_64x64_bf16_tt
    ],
    gemm_wgx_reduce_bf16,
    gemv_half_rows_bf16,
    gemv_half_cols_bf16
);
tc_element!(
    f16,
    F16,
    gemm_wgmma_f16_nn,
    gemm_wgmma_f16_nt,
    gemm_wgmma_f16_tn,
    gemm_wgmma_f16_tt,
    gemm_mma_f16_nn,
    gemm_mma_f16_nt,
    gemm_mma_f16_tn,
    gemm_mma_f16_tt,
    [
        gemm_wgx_128x256_f16_nn,
        gemm_wgx_128x256_f16_nt,
        gemm_wgx_128x256_f16_tn,
        gemm_wgx_128x256_f16_tt
    ],
    [
        gemm_wgx_128x192_f16_nn,
        gemm_wgx_128x192_f16_nt,
        gemm_wgx_128x192_f16_tn,
        gemm_wgx_128x192_f16_tt
    ],
    [
        gemm_wgx_128x128_f16_nn,
        gemm_wgx_128x128_f16_nt,
        gemm_wgx_128x128_f16_tn,
        gemm_wgx_128x128_f16_tt
    ],
    [
        gemm_wgx_64x128_f16_nn,
        gemm_wgx_64x128_f16_nt,
        gemm_wgx_64x128_f16_tn,
        gemm_wgx_64x128_f16_tt
    ],
    [
        gemm_wgx_128x64_f16_nn,
        gemm_wgx_128x64_f16_nt,
        gemm_wgx_128x64_f16_tn,
        gemm_wgx_128x64_f16_tt
    ],
    [
        gemm_wgx_128x64x2_f16_nn,
        gemm_wgx_128x64x2_f16_nt,
        gemm_wgx_128x64x2_f16_tn,
        gemm_wgx_128x64x2_f16_tt
    ],
    [
        gemm_wgx_64x64_f16_nn,
        gemm_wgx_64x64_f16_nt,
        gemm_wgx_64x64_f16_tn,
        gemm_wgx_64x64_f16_tt
    ],
    gemm_wgx_reduce_f16,
    gemv_half_rows_f16,
    gemv_half_cols_f16
);
