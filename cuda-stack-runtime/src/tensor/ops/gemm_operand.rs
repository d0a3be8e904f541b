//! How a matrix operand is handed to a GEMM as it is stored (row-major, or a transposed
//! row-major matrix, with its leading dimension), and the storage it spans: shared by the
//! kernels' strided GEMM (`matmul.rs`) and cuBLAS (`matmul_cublas.rs`).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_kernels::ops::Transpose;

/// How a 2-D view `[rows, cols]` with strides `(s0, s1)` can be handed to a GEMM as stored:
/// `(NoTrans, ld, span)` when element `(i, j)` is at `i·ld + j` (row-major, `ld >= cols`),
/// `(Trans, ld, span)` when it is at `j·ld + i` (a transposed row-major `[cols, rows]`,
/// `ld >= rows`), relative to the view's offset; `span` is the number of elements from the offset
/// the GEMM reads. `None` when neither holds (e.g. broadcast rows, or both strides > 1): the
/// operand must be made contiguous first.
pub(crate) fn gemm_operand(
    shape: &[usize],
    strides: &[isize],
) -> Option<(Transpose, usize, usize)> {
    let (&[rows, cols], &[s0, s1]) = (shape, strides) else {
        return None;
    };
    if rows == 0 || cols == 0 {
        return Some((Transpose::NoTrans, cols.max(1), 0));
    }
    let span =
        |outer: usize, inner: usize, ld: usize| (outer - 1).checked_mul(ld)?.checked_add(inner);
    let as_ld = |s: isize| usize::try_from(s).ok();
    // Row-major: the column step is 1 (or irrelevant) and the row step is at least a row.
    if cols == 1 || s1 == 1 {
        let ld = if rows == 1 {
            Some(cols)
        } else {
            as_ld(s0).filter(|&l| l >= cols)
        };
        if let Some(ld) = ld {
            return Some((Transpose::NoTrans, ld, span(rows, cols, ld)?));
        }
    }
    // Column-major (a transposed row-major matrix).
    if rows == 1 || s0 == 1 {
        let ld = if cols == 1 {
            Some(rows)
        } else {
            as_ld(s1).filter(|&l| l >= rows)
        };
        if let Some(ld) = ld {
            return Some((Transpose::Trans, ld, span(cols, rows, ld)?));
        }
    }
    None
}

/// The `span` storage elements from `t`'s offset (none when `span == 0`).
pub(super) fn operand_slice<T: TensorElement>(
    t: &Tensor<T>,
    span: usize,
) -> Result<cuda_stack_driver::DeviceView<'_, T>> {
    if span == 0 {
        return t.storage.range(0..0);
    }
    let end = t
        .offset()
        .checked_add(span)
        .ok_or_else(|| TensorError::SizeOverflow {
            op: "matmul",
            shape: t.shape().to_vec(),
        })?;
    t.storage.range(t.offset()..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;

    fn op(l: &Layout) -> Option<(Transpose, usize, usize)> {
        gemm_operand(l.shape(), l.strides())
    }

    #[test]
    fn row_major_and_transposed_views_need_no_copy() {
        let a = Layout::contiguous(&[3, 5]).unwrap();
        assert_eq!(op(&a), Some((Transpose::NoTrans, 5, 15)));
        // The transpose of a [5, 3] matrix is stored [5, 3]: Trans with ld 3.
        let t = Layout::contiguous(&[5, 3])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        assert_eq!(t.shape(), &[3, 5]);
        assert_eq!(op(&t), Some((Transpose::Trans, 3, 15)));
        // Columns 2..6 of an [4, 10] matrix: row-major with ld 10, spanning 3·10 + 4.
        let n = Layout::contiguous(&[4, 10])
            .unwrap()
            .narrow(1, 2, 4)
            .unwrap();
        assert_eq!(op(&n), Some((Transpose::NoTrans, 10, 34)));
    }

    #[test]
    fn degenerate_shapes() {
        let row = Layout::contiguous(&[1, 7]).unwrap();
        assert_eq!(op(&row), Some((Transpose::NoTrans, 7, 7)));
        let col = Layout::contiguous(&[7, 1]).unwrap();
        assert_eq!(op(&col), Some((Transpose::NoTrans, 1, 7)));
        assert_eq!(
            op(&Layout::contiguous(&[0, 4]).unwrap()),
            Some((Transpose::NoTrans, 4, 0))
        );
        assert_eq!(
            op(&Layout::contiguous(&[4, 0]).unwrap()),
            Some((Transpose::NoTrans, 1, 0))
        );
    }

    #[test]
    fn broadcast_and_doubly_strided_views_are_copied() {
        // Rows repeated with stride 0.
        let e = Layout::contiguous(&[1, 6])
            .unwrap()
            .expand(&[4, 6])
            .unwrap();
        assert_eq!(op(&e), None);
        // Every other row and column.
        let x = Layout::contiguous(&[8, 8]).unwrap();
        let p = x
            .reshape("t", &[4, 2, 4, 2])
            .unwrap()
            .select(1, 0)
            .unwrap()
            .select(2, 0)
            .unwrap();
        assert_eq!((p.shape(), p.strides()), (&[4, 4][..], &[16, 2][..]));
        assert_eq!(op(&p), None);
        // Not 2-D.
        assert_eq!(op(&Layout::contiguous(&[2, 2, 2]).unwrap()), None);
    }
}
