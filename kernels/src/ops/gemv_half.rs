//! Launching the matrix-vector kernels (`gemv_half_rows_*`, `gemv_half_cols_*` in
//! `cuda/gemv_half.cu`) for [`gemm_half`](super::gemm_half) under
//! [`HalfPlan::Gemv`](super::HalfPlan::Gemv): a product with one output row (M = 1) or one output
//! column (N = 1), read at the memory's rate on the CUDA cores instead of a 64-fold padded
//! tensor-core tile.

use super::tc_element::TensorCoreElement;
use super::Transpose;
use crate::launch::to_i32;
use crate::{Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Warps the row kernel should have in flight over the GPU before it splits a row between warps.
const ROW_WARPS_WANTED: usize = 2048;

/// Columns per block of the column kernel (`GEMV_COLS_WIDTH`) and its block size.
const COLS_WIDTH: usize = 32;
const COLS_THREADS: u32 = 1024;

/// Warps per matrix row for `rows` rows: 1 when there are [`ROW_WARPS_WANTED`] rows or more,
/// else the power of two that brings the warps to about that many, at most 8 (one block).
pub(crate) fn warps_per_row(rows: usize) -> usize {
    ROW_WARPS_WANTED
        .div_ceil(rows.max(1))
        .next_power_of_two()
        .clamp(1, 8)
}

/// Whether [`gemm_half`](super::gemm_half) with [`TcAlgo::Auto`](super::TcAlgo::Auto) runs
/// `C = op(A) · op(B)` as a matrix times a vector
/// ([`HalfPlan::Gemv`](super::HalfPlan::Gemv), `gemv_half_rows_*`) instead of its tile plan: one
/// output column (`n == 1`) with A not transposed, or one output row (`m == 1`) with B
/// transposed — the matrix's rows contiguous in k — at least
/// [`GEMV_MIN_OUTPUTS`](super::GEMV_MIN_OUTPUTS) outputs, and `k >= 1`. On an H200 (CUDA-graph
/// replays, session 56) it ran 4096 × 1 × 4096 in 7.2 µs against 12.9 µs for the tiles' plan,
/// 8192 × 1 × 8192 in 34.6 against 40.5. The other layouts (the matrix's rows along the outputs)
/// keep the tiles, which measured faster than `gemv_half_cols_*` there.
pub fn gemv_half_fits(ta: Transpose, tb: Transpose, m: usize, n: usize, k: usize) -> bool {
    let rows_form =
        (n == 1 && ta == Transpose::NoTrans) || (m == 1 && n > 1 && tb == Transpose::Trans);
    rows_form && m.max(n) >= super::GEMV_MIN_OUTPUTS && k > 0
}

/// `C = op(A) · op(B)` for `m == 1` or `n == 1` (`k >= 1`). `a` and `b` are the operands
/// `gemm_half` prepared (16-byte aligned starts, row strides `lda` / `ldb` multiples of 16 bytes),
/// stored `[m, k]` / `[k, m]` and `[k, n]` / `[n, k]` as `ta` / `tb` say and checked to span
/// them; C spans `[m, n]` with `ldc` (checked).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv_half<T: TensorCoreElement>(
    k: &Kernels,
    s: &Stream,
    (ta, tb): (Transpose, Transpose),
    (m, n, kdim): (usize, usize, usize),
    (a, lda): (&DeviceSlice<T>, usize),
    (b, ldb): (&DeviceSlice<T>, usize),
    c: &mut DeviceSlice<T>,
    ldc: usize,
) -> Result<()> {
    const OP: &str = "gemm (tensor cores)";
    // (matrix, its row stride, rows contiguous in k?, x, incx, incy, outputs).
    let (mat, ld, rows_form, x, incx, incy, outs) = if n == 1 {
        // y[i] = C[i·ldc] = Σ_k op(A)[i, k] · op(B)[k, 0].
        let incx = if tb == Transpose::NoTrans { ldb } else { 1 };
        (a, lda, ta == Transpose::NoTrans, b, incx, ldc, m)
    } else if m == 1 {
        // y[j] = C[j] = Σ_k op(A)[0, k] · op(B)[k, j].
        let incx = if ta == Transpose::NoTrans { 1 } else { lda };
        (b, ldb, tb == Transpose::Trans, a, incx, 1, n)
    } else {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "HalfPlan::Gemv multiplies a matrix by a vector: m or n must be 1, not {m} x {n}"
            ),
        });
    };
    let kernels = k.gemv_half_kernels()?;
    let (ldi, incxi, incyi, outi, ki) = (
        to_i32(OP, "leading dimension", ld)?,
        to_i32(OP, "vector stride", incx)?,
        to_i32(OP, "ldc", incy)?,
        to_i32(OP, "outputs", outs)?,
        to_i32(OP, "k", kdim)?,
    );
    if rows_form {
        let w = warps_per_row(outs);
        let grid = outs.div_ceil(8 / w).min(u32::MAX as usize) as u32;
        let cfg = LaunchConfig::new(grid, 256);
        // SAFETY: the kernel reads mat[r·ld + kk] for r < outs, kk < kdim (inside the stored
        // operand, checked by gemm_half to span it; 16-byte packets only within a row, whose
        // start is 16-byte aligned: `aligned`), x[kk·incx] for kk < kdim (the vector operand's
        // stored elements) and writes y[r·incy] for r < outs: C's elements (i, 0) or (0, j)
        // inside `c`. Block 256 with w in {1, 2, 4, 8} warps per row and grid
        // ceil(outs / (8 / w)), as the kernel requires.
        unsafe {
            T::gemv_rows(kernels).launch(s, &cfg, mat, ldi, x, incxi, c, incyi, outi, ki, w as i32)
        }?;
    } else {
        let grid = outs.div_ceil(COLS_WIDTH).min(u32::MAX as usize) as u32;
        let cfg = LaunchConfig::new(grid, COLS_THREADS);
        // SAFETY: the kernel reads mat[kk·ld + j] for kk < kdim, j < outs (whole 16-byte
        // packets only where all 8 columns are inside, from 16-byte aligned rows), x[kk·incx]
        // for kk < kdim and writes y[j·incy] for j < outs: inside the checked operands and C, as
        // above. Block 1024, grid ceil(outs / 32), as the kernel requires.
        unsafe { T::gemv_cols(kernels).launch(s, &cfg, mat, ldi, x, incxi, c, incyi, outi, ki) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rows_contiguous_in_k_and_enough_outputs() {
        let (nt, tr) = (Transpose::NoTrans, Transpose::Trans);
        let g = crate::ops::GEMV_MIN_OUTPUTS;
        assert!(gemv_half_fits(nt, nt, g, 1, 64));
        assert!(gemv_half_fits(nt, tr, 4096, 1, 64));
        assert!(gemv_half_fits(nt, tr, 1, 4096, 64));
        assert!(gemv_half_fits(tr, tr, 1, g, 64));
        // The matrix's rows along the outputs, too few outputs, k = 0, not a vector.
        assert!(!gemv_half_fits(tr, nt, 4096, 1, 64));
        assert!(!gemv_half_fits(nt, nt, 1, 4096, 64));
        assert!(!gemv_half_fits(nt, nt, g - 1, 1, 64));
        assert!(!gemv_half_fits(nt, nt, 4096, 1, 0));
        assert!(!gemv_half_fits(nt, tr, 2, 4096, 64));
    }

    #[test]
    fn rows_split_only_when_few() {
        assert_eq!(warps_per_row(4096), 1);
        assert_eq!(warps_per_row(2048), 1);
        assert_eq!(warps_per_row(2047), 2);
        assert_eq!(warps_per_row(1000), 4);
        assert_eq!(warps_per_row(256), 8);
        assert_eq!(warps_per_row(1), 8);
        assert_eq!(warps_per_row(0), 8);
    }
}
