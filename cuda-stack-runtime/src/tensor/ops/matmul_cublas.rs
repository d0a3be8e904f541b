//! `matmul` on cuBLAS: which backend a call uses, and the product as one (strided-batched)
//! `cublasGemmEx` call on the operands as they are stored.

use super::gemm_operand::{gemm_operand, operand_slice};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::matmul_backend::{allow_tf32, matmul_backend, MatmulBackend};
use crate::tensor::storage::{Exec, Storage};
use crate::tensor::{DType, Tensor, TensorElement};
use cuda_stack_blas::{Blas, Gemm, Math, Transpose};
use cuda_stack_kernels::ops::Transpose as KernelTranspose;
use std::sync::{Arc, OnceLock};

/// The backend a `matmul` call runs on.
pub(crate) enum Chosen {
    Cublas(Blas),
    Kernels,
}

/// Resolves the [`MatmulBackend`] setting for dtype `T` on `exec`'s device.
pub(crate) fn choose<T: TensorElement>(exec: &Exec) -> Result<Chosen> {
    let ctx = exec.runtime().context();
    match matmul_backend()? {
        MatmulBackend::Kernels => Ok(Chosen::Kernels),
        MatmulBackend::Cublas if !T::CUBLAS_GEMM => Err(TensorError::UnsupportedDType {
            op: "matmul",
            dtype: T::DTYPE,
            shape: Vec::new(),
            why: "MatmulBackend::Cublas is set, and cuBLAS multiplies f32, f64, f16 and bf16 \
                  only; use MatmulBackend::Auto or Kernels for this dtype"
                .into(),
        }),
        MatmulBackend::Cublas => Ok(Chosen::Cublas(Blas::get(ctx)?)),
        MatmulBackend::Auto => {
            // Whether the libraries load is decided once per process (it cannot change).
            static LOADS: OnceLock<bool> = OnceLock::new();
            if !T::CUBLAS_GEMM || !*LOADS.get_or_init(|| Blas::available().is_ok()) {
                return Ok(Chosen::Kernels);
            }
            // A handle that cannot be made (no memory, say) is not a reason to fail: the
            // kernels multiply too.
            Ok(Blas::get(ctx).map_or(Chosen::Kernels, Chosen::Cublas))
        }
    }
}

/// One 3-D operand `[batch or 1, rows, cols]` as cuBLAS takes it: the tensor (itself, or a
/// contiguous copy when its strides do not fit a GEMM), its transpose flag, leading dimension,
/// batch stride (0 when one matrix serves every product) and the elements spanned from its
/// offset.
fn stored<T: TensorElement>(
    t: &Tensor<T>,
    batch: usize,
) -> Result<(Tensor<T>, Transpose, usize, usize, usize)> {
    let fit = |t: &Tensor<T>| {
        let (tr, ld, span) = gemm_operand(&t.shape()[1..], &t.strides()[1..])?;
        let stride = if t.shape()[0] == 1 {
            0
        } else {
            usize::try_from(t.strides()[0]).ok()?
        };
        let total = if batch == 0 || span == 0 {
            0
        } else {
            (batch - 1).checked_mul(stride)?.checked_add(span)?
        };
        let tr = match tr {
            KernelTranspose::NoTrans => Transpose::No,
            KernelTranspose::Trans => Transpose::Yes,
        };
        Some((tr, ld, stride, total))
    };
    if let Some((tr, ld, stride, total)) = fit(t) {
        return Ok((t.clone(), tr, ld, stride, total));
    }
    let c = t.contiguous()?;
    let (tr, ld, stride, total) = fit(&c).ok_or_else(|| TensorError::InvalidArgument {
        op: "matmul",
        problem: format!(
            "internal error: contiguous operand of shape {:?} has strides {:?}",
            c.shape(),
            c.strides()
        ),
    })?;
    Ok((c, tr, ld, stride, total))
}

/// `[batch, m, k] · [batch, k, n]` (either operand may have a batch of 1, broadcast) into a new
/// contiguous `[batch, m, n]` storage, with one cuBLAS call.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_cublas<T: TensorElement>(
    blas: &Blas,
    exec: &Exec,
    a: &Tensor<T>,
    b: &Tensor<T>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
) -> Result<Arc<Storage<T>>> {
    let overflow = || TensorError::SizeOverflow {
        op: "matmul",
        shape: vec![batch, m, n],
    };
    let mn = m.checked_mul(n).ok_or_else(overflow)?;
    let total = mn.checked_mul(batch).ok_or_else(overflow)?;
    if k == 0 {
        // An empty sum: zeros, as PyTorch gives (no GEMM needed).
        return exec.zeros(total);
    }
    let (a, ta, lda, sa, a_span) = stored(a, batch)?;
    let (b, tb, ldb, sb, b_span) = stored(b, batch)?;
    let math = if T::DTYPE == DType::F32 && allow_tf32() {
        Math::Tf32
    } else {
        Math::Default
    };
    let mut g = Gemm::new(m, n, k)
        .trans_a(ta)
        .trans_b(tb)
        .leading_dims(lda, ldb, n.max(1))
        .math(math);
    if batch > 1 {
        g = g.batched(batch, sa, sb, mn);
    }
    let a_view = operand_slice(&a, a_span)?;
    let b_view = operand_slice(&b, b_span)?;
    // SAFETY: with k > 0 and beta = 0, cuBLAS writes every element of each of the `batch`
    // outputs of `m · n` elements, `mn` apart: all `total` elements (or the call fails).
    unsafe {
        exec.storage_with(total, |out| {
            T::gemm_cublas(blas, exec.stream(), &g, &a_view, &b_view, out)
        })
    }
}
