//! `matmul`: 2-D `[m, k] · [k, n]`, and batched 3-D: on cuBLAS (one strided-batched call, see
//! `matmul_cublas.rs`) or on the kernels (a loop over the batch with views), as the
//! [`MatmulBackend`](crate::tensor::MatmulBackend) setting picks.

use super::matmul_cublas::{choose, matmul_cublas, Chosen};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::DeviceSlice;
use cuda_stack_kernels::ops::Transpose;
use cuda_stack_kernels::Kernels;

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

/// Whether the device runs the f16/bf16 tensor-core kernels (compute capability 8.0 or newer).
fn has_tensor_core_kernels(exec: &Exec) -> bool {
    exec.runtime().context().limits().compute_capability
        >= cuda_stack_driver::ComputeCapability { major: 8, minor: 0 }
}

/// One `[m, k] · [k, n]` product of 2-D views into `c` (`m · n` elements).
#[allow(clippy::too_many_arguments)]
fn gemm_2d<T: TensorElement>(
    k: &Kernels,
    exec: &Exec,
    a: &Tensor<T>,
    b: &Tensor<T>,
    c: &mut DeviceSlice<T>,
    m: usize,
    n: usize,
    kdim: usize,
) -> Result<()> {
    let s = exec.stream();
    if !T::STRIDED_GEMM {
        let (a, b) = (a.contiguous()?, b.contiguous()?);
        return T::matmul_dense(k, s, &a.dense()?, &b.dense()?, c, m, n, kdim);
    }
    // Strided GEMM: pass views as they are stored when possible (a transposed operand is just
    // the Trans flag), else copy that operand.
    let prep = |t: &Tensor<T>| -> Result<(Tensor<T>, Transpose, usize, usize)> {
        if let Some((tr, ld, span)) = gemm_operand(t.shape(), t.strides()) {
            return Ok((t.clone(), tr, ld, span));
        }
        let t = t.contiguous()?;
        let (tr, ld, span) =
            gemm_operand(t.shape(), t.strides()).ok_or_else(|| TensorError::InvalidArgument {
                op: "matmul",
                problem: format!(
                    "internal error: contiguous operand of shape {:?} has strides {:?}",
                    t.shape(),
                    t.strides()
                ),
            })?;
        Ok((t, tr, ld, span))
    };
    let (a, ta, lda, a_span) = prep(a)?;
    let (b, tb, ldb, b_span) = prep(b)?;
    let a_view = operand_slice(&a, a_span)?;
    let b_view = operand_slice(&b, b_span)?;
    T::gemm_strided(k, s, ta, tb, m, n, kdim, &a_view, lda, &b_view, ldb, c)
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

impl<T: TensorElement> Tensor<T> {
    /// The matrix product (`a @ b`): `[m, k] · [k, n] → [m, n]`; batched
    /// `[b, m, k] · [b, k, n] → [b, m, n]`, where a batch of 1 (or a 2-D operand) is
    /// broadcast over the other's batch.
    ///
    /// **Backend** ([`MatmulBackend`](crate::tensor::MatmulBackend), default `Auto`): cuBLAS
    /// where it is installed, as PyTorch does — f32 (TF32 only if
    /// [`set_allow_tf32`](crate::tensor::set_allow_tf32)), f64, and f16/bf16 with f32
    /// accumulation, transposed or row-strided operands taken as they are stored, a batch in
    /// one strided-batched call — and the project's kernels otherwise: f32 on the fast sgemm
    /// kernel (also without copies for transposed or row-strided operands), f64 and i32
    /// (wrapping) on the 16×16 tiled kernel, f16/bf16 on the tensor-core kernels (wgmma on
    /// compute capability 9.0, mma.sync on 8.0+, f32 accumulation, one rounding; on older GPUs
    /// converted to f32, multiplied by sgemm and rounded back once). Force either with
    /// [`set_matmul_backend`](crate::tensor::set_matmul_backend),
    /// [`with_matmul_backend`](crate::tensor::with_matmul_backend) or
    /// `CUDA_RS_MATMUL_BACKEND=cublas|kernels`.
    pub fn matmul(&self, rhs: &Tensor<T>) -> Result<Tensor<T>> {
        let exec = self.exec()?;
        match choose::<T>(&exec)? {
            Chosen::Kernels if T::MATMUL_VIA_F32 && !has_tensor_core_kernels(&exec) => {
                let (a, b) = (self.to_dtype::<f32>()?, rhs.to_dtype::<f32>()?);
                a.matmul_on(&b, Chosen::Kernels)?.to_dtype::<T>()
            }
            chosen => self.matmul_on(rhs, chosen),
        }
    }

    /// [`Tensor::matmul`] on a chosen backend.
    fn matmul_on(&self, rhs: &Tensor<T>, backend: Chosen) -> Result<Tensor<T>> {
        const OP: &str = "matmul";
        self.same_device(OP, rhs)?;
        let mismatch = |why: String| TensorError::ShapeMismatch {
            op: OP,
            lhs: self.shape().to_vec(),
            rhs: rhs.shape().to_vec(),
            why,
        };
        let (ra, rb) = (self.rank(), rhs.rank());
        if !(2..=3).contains(&ra) || !(2..=3).contains(&rb) {
            return Err(mismatch(format!(
                "matmul takes 2-D or 3-D (batched) tensors, got {ra}-D and {rb}-D"
            )));
        }
        let a = if ra == 2 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if rb == 2 {
            rhs.unsqueeze(0)?
        } else {
            rhs.clone()
        };
        let (&[ba, m, ka], &[bb, kb, n]) = (a.shape(), b.shape()) else {
            return Err(mismatch("internal error: operands are not 3-D".into()));
        };
        if ka != kb {
            return Err(mismatch(format!(
                "the inner dimensions differ: {ka} (last of the first operand) vs {kb} \
                 (second-to-last of the second)"
            )));
        }
        let batch = if ba == bb || bb == 1 {
            ba
        } else if ba == 1 {
            bb
        } else {
            return Err(mismatch(format!(
                "the batch sizes {ba} and {bb} differ (and neither is 1)"
            )));
        };
        let out_shape: Vec<usize> = if ra == 2 && rb == 2 {
            vec![m, n]
        } else {
            vec![batch, m, n]
        };
        let overflow = || TensorError::SizeOverflow {
            op: OP,
            shape: out_shape.clone(),
        };
        let mn = m.checked_mul(n).ok_or_else(overflow)?;
        let total = mn.checked_mul(batch).ok_or_else(overflow)?;
        let exec = self.exec()?;
        if let Chosen::Cublas(blas) = &backend {
            let storage = matmul_cublas(blas, &exec, &a, &b, batch, m, n, ka)
                .map_err(|e| e.with_shape(self.shape()))?;
            return Tensor::from_storage(storage, &out_shape);
        }
        let k = exec.kernels()?;
        // SAFETY: each batch's GEMM writes all `m · n` elements of its part of `out` (the
        // kernels write C in full, zeros when k == 0), and the parts cover `out`; or it fails.
        let storage = unsafe {
            exec.storage_with(total, |out| {
                for i in 0..batch {
                    let ai = a.select(0, if ba == 1 { 0 } else { i })?;
                    let bi = b.select(0, if bb == 1 { 0 } else { i })?;
                    let mut ci = out.slice_mut(i * mn..(i + 1) * mn)?;
                    gemm_2d(&k, &exec, &ai, &bi, &mut ci, m, n, ka)?;
                }
                Ok(())
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, &out_shape)
    }
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
