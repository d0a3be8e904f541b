//! The TMA tensor maps the Hopper GEMMs read their operands through (`gemm_wgmma_*`, `gemm_wgx_*`).

use super::tc_element::TensorCoreElement;
use super::Transpose;
use crate::Result;
use cuda_stack_driver::{DeviceSlice, TensorMap, TensorMapElement, TensorMapSwizzle};

/// [`operand_map`] for a tile of `box_mn` rows of A or columns of B (`gemm_wgx_*`): K-major
/// operands in boxes of 64 k by `box_mn` rows, M/N-major ones in boxes of 64 × 64.
#[allow(clippy::too_many_arguments)]
pub(super) fn tma_map_box<T: TensorCoreElement>(
    x: &DeviceSlice<T>,
    t: Transpose,
    is_a: bool,
    rows: usize,
    cols: usize,
    ld: usize,
    box_mn: u32,
) -> Result<TensorMap> {
    tma_map_sized(x, T::TMA, t, is_a, rows, cols, ld, box_mn)
}

/// The tensor map of an operand stored `[rows, cols]` with row stride `ld`, in 128-byte swizzled
/// boxes: K-major operands (A untransposed, B transposed) in boxes of 128 bytes of k by `box_mn`
/// rows, M/N-major ones in boxes of 64 columns by 128 bytes' worth of k rows.
#[allow(clippy::too_many_arguments)]
pub(super) fn tma_map_sized<T: cuda_stack_driver::DeviceRepr>(
    x: &DeviceSlice<T>,
    elem: TensorMapElement,
    t: Transpose,
    is_a: bool,
    rows: usize,
    cols: usize,
    ld: usize,
    box_mn: u32,
) -> Result<TensorMap> {
    let bk = (128 / std::mem::size_of::<T>()) as u32; // k per 128-byte box row
    let k_major = (is_a && t == Transpose::NoTrans) || (!is_a && t == Transpose::Trans);
    let (box_rows, box_cols) = if k_major { (box_mn, bk) } else { (bk, 64) };
    Ok(TensorMap::tiled_2d(
        x,
        elem,
        rows as u64,
        cols as u64,
        ld as u64,
        box_rows,
        box_cols,
        TensorMapSwizzle::B128,
    )?)
}
