//! Copies: strided gather, transpose, and the N-d strided view copy (all exact).

use crate::StridedLayout;

/// `dst[i] = src[i * stride]` for `i < n`.
pub fn copy_strided<T: Copy>(src: &[T], stride: usize, n: usize) -> Vec<T> {
    (0..n).map(|i| src[i * stride]).collect()
}

/// `out[c][r] = x[r][c]` for a row-major `[rows, cols]` `x`.
pub fn transpose<T: Copy>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    for c in 0..cols {
        for r in 0..rows {
            out.push(x[r * cols + c]);
        }
    }
    out
}

/// The elements of the view `layout` of `src` in row-major order; `None` if the layout is
/// invalid or reaches outside `src`.
pub fn strided_copy<T: Copy>(src: &[T], layout: &StridedLayout) -> Option<Vec<T>> {
    let dims = layout.dims()?;
    let n = layout.numel()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut rem = i as u64;
        let mut off = layout.offset;
        for d in (0..dims.len()).rev() {
            let s = dims[d] as u64;
            off += (rem % s) as i64 * layout.strides[d];
            rem /= s;
        }
        out.push(*src.get(usize::try_from(off).ok()?)?);
    }
    Some(out)
}
