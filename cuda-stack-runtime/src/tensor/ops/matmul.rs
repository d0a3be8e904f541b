//! `matmul`: 2-D `[m, k] · [k, n]`, and batched 3-D: on cuBLAS (one strided-batched call, see
//! `matmul_cublas.rs`) or on the kernels (a loop over the batch with views), as the
//! [`MatmulBackend`](crate::tensor::MatmulBackend) setting picks.

use super::gemm_operand::{gemm_operand, operand_slice};
use super::matmul_cublas::{choose, matmul_cublas, Chosen};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::DeviceSlice;
use cuda_stack_kernels::ops::Transpose;
use cuda_stack_kernels::Kernels;

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
