//! `linear_gelu` and `matmul_dgelu`: an MLP's `gelu(x · Wᵀ + b)` with the GELU fused into the
//! GEMM that feeds it, and GELU's backward fused into the GEMM that produces its output's
//! gradient — cuBLASLt's `GELU_AUX_BIAS` and `DGELU` epilogues (`DGELU_BGRAD` opted in: see
//! [`Tensor::matmul_dgelu`]), as PyTorch's fused MLPs, Transformer Engine and llm.c use them.
//!
//! ## When the epilogues are used (the rule)
//! Both ops take the fused path only for **bf16 and f16**, on the **cuBLAS** matmul backend
//! ([`MatmulBackend`](crate::tensor::MatmulBackend)), when the hidden width (the GELU's row length) is a
//! multiple of 8 (cuBLASLt's rule for the auxiliary matrix's leading dimension) and the bias
//! and buffers are 16-byte aligned, and cuBLASLt has an algorithm for the problem. Everywhere
//! else — f32 and f64 (whose results must match the separate kernels, and PyTorch, to their own
//! precision: the epilogue's GELU is the tanh form but computed with the GPU's fast
//! transcendentals), the kernels backend, other widths — they are exactly the unfused ops:
//! [`Tensor::linear`] then [`Tensor::gelu`]; [`Tensor::matmul`], [`Tensor::gelu_backward`] and a
//! column sum.
//!
//! ## What differs on the fused path
//! The GELU is applied to the f32 accumulator (pre-activation plus bias) before rounding, not to
//! its bf16 rounding, and the backward's product `dY · W` is multiplied by `gelu'(pre)` before
//! rounding once: both are a rounding closer to the exact result than the unfused ops, and agree
//! with them to the 16-bit type's rounding.

use super::linear_grad::{linear_bias_grad, LinearBiasGrad};
use super::matmul_cublas::{choose, Chosen};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{DType, FloatElement, GradElement, Tensor};
use cuda_stack_blas::{Gemm, Transpose, AUX_ALIGNMENT, AUX_LD_MULTIPLE, BIAS_ALIGNMENT};

/// Whether dtype `T` may take the epilogues (see the module docs).
fn fused_dtype<T: FloatElement>() -> bool {
    T::CUBLAS_GEMM && matches!(T::DTYPE, DType::BF16 | DType::F16)
}

/// `d(pre)` and, when asked for, the bias gradient.
type DgeluGrads<T> = (Tensor<T>, Option<Tensor<T>>);

fn aligned(addr: u64, to: usize) -> bool {
    addr % to as u64 == 0
}

impl<T: FloatElement> Tensor<T> {
    /// `gelu(self · weightᵀ + bias)` and the pre-activation `self · weightᵀ + bias`:
    /// `F.gelu(F.linear(x, W, b), approximate='tanh')` keeping what its backward needs
    /// ([`Tensor::matmul_dgelu`]). `self` `[…, in]`, `weight` `[out, in]`, `bias` `[out]`; both
    /// results `[…, out]`, contiguous. Returns `(output, pre)`.
    ///
    /// For bf16/f16 on cuBLAS this is one GEMM whose epilogue adds the bias, writes the
    /// pre-activation and applies GELU (`CUBLASLT_EPILOGUE_GELU_AUX_BIAS`); otherwise
    /// [`Tensor::linear`] then [`Tensor::gelu`]. **The rule**: the epilogue is used only for
    /// bf16 and f16, on the cuBLAS matmul backend ([`crate::tensor::MatmulBackend`]), with `out` a
    /// multiple of 8 (cuBLASLt's rule for the pre-activation's leading dimension), 16-byte
    /// aligned buffers and an algorithm from cuBLASLt's heuristic; f32 and f64 always take the
    /// exact unfused ops, so their results match the separate kernels (and PyTorch) to their
    /// own precision. On the fused path GELU reads the f32 accumulator rather than its 16-bit
    /// rounding: the two paths agree to the type's rounding.
    pub fn linear_gelu(
        &self,
        weight: &Tensor<T>,
        bias: Option<&Tensor<T>>,
    ) -> Result<(Tensor<T>, Tensor<T>)> {
        let (rows, in_f, out_f, out_shape) = self.linear_dims("linear_gelu", weight, bias)?;
        if let Some((y, pre)) = self.linear_gelu_fused(weight, bias, rows, in_f, out_f)? {
            return Ok((y.reshape(&out_shape)?, pre.reshape(&out_shape)?));
        }
        let pre = self.linear(weight, bias)?;
        let y = pre.gelu()?;
        Ok((y, pre))
    }

    /// The one-GEMM path of [`Tensor::linear_gelu`] (`[rows, out]` twice), or `None` where it
    /// does not apply; the caller then takes the unfused ops, which report any real error.
    fn linear_gelu_fused(
        &self,
        weight: &Tensor<T>,
        bias: Option<&Tensor<T>>,
        rows: usize,
        in_f: usize,
        out_f: usize,
    ) -> Result<Option<(Tensor<T>, Tensor<T>)>> {
        if !fused_dtype::<T>() || rows == 0 || in_f == 0 || out_f % AUX_LD_MULTIPLE != 0 {
            return Ok(None);
        }
        let exec = self.exec()?;
        let Chosen::Cublas(blas) = choose::<T>(&exec)? else {
            return Ok(None);
        };
        let (x, w) = (
            self.contiguous()?.reshape(&[rows, in_f])?,
            weight.contiguous()?,
        );
        let b = bias.map(Tensor::contiguous).transpose()?;
        let (xv, wv) = (x.dense()?, w.dense()?);
        let bv = b.as_ref().map(Tensor::dense).transpose()?;
        if bv
            .as_ref()
            .is_some_and(|b| !aligned(b.as_raw_ptr(), BIAS_ALIGNMENT))
        {
            return Ok(None);
        }
        // Row-major: [rows, in] · ([out, in] read transposed) = [rows, out]; the pre-activation
        // is the same [rows, out], dense (its leading dimension out is a multiple of 8).
        let g = Gemm::new(rows, out_f, in_f)
            .trans_a(Transpose::No)
            .trans_b(Transpose::Yes)
            .leading_dims(in_f, in_f, out_f);
        let n = rows * out_f;
        // SAFETY: with k = in_f > 0 and beta = 0, the GEMM writes every element of the output
        // and of the auxiliary matrix (dense: ld = out_f), or fails and both are dropped unread.
        let fused = unsafe {
            exec.storage_pair_with(n, n, |y, pre| {
                if !aligned(pre.as_raw_ptr(), AUX_ALIGNMENT) {
                    return Err(TensorError::InvalidArgument {
                        op: "linear_gelu",
                        problem: "the pre-activation's buffer is not 16-byte aligned".into(),
                    });
                }
                T::gemm_gelu_aux_cublas(
                    &blas,
                    exec.stream(),
                    &g,
                    &xv,
                    &wv,
                    bv.as_deref(),
                    y,
                    pre,
                    out_f,
                )
            })
        };
        match fused {
            Ok((y, pre)) => Ok(Some((
                Tensor::from_storage(y, &[rows, out_f])?,
                Tensor::from_storage(pre, &[rows, out_f])?,
            ))),
            // No algorithm, a misaligned buffer, …: the unfused ops compute the same.
            Err(_) => Ok(None),
        }
    }
}

impl<T: GradElement> Tensor<T> {
    /// GELU's backward through the linear layer after it: with `self` = `dY` `[…, out]` (the
    /// gradient of `linear(gelu(pre), weight, b)`), `weight` `[out, hidden]` and `pre`
    /// `[…, hidden]` (from [`Tensor::linear_gelu`]), returns `d(pre) = (dY · weight) ⊙
    /// gelu'(pre)` (`pre`'s shape, contiguous) and, when `bias_grad`, its column sums `[hidden]`
    /// — the gradient of the bias of the linear layer that made `pre`.
    ///
    /// For bf16/f16 on cuBLAS this is one GEMM with GELU's derivative in its epilogue
    /// (`CUBLASLT_EPILOGUE_DGELU`) and the bias gradient a column sum of `d(pre)`
    /// ([`Tensor::sum`]); with [`LINEAR_BGRAD_VAR`](crate::tensor::LINEAR_BGRAD_VAR) set to
    /// `fused` (see [`linear_bias_grad`]) the column sums
    /// come from the epilogue too (`DGELU_BGRAD`). That is opt-in because it measured slower:
    /// on an H200 cuBLASLt runs `DGELU_BGRAD` as the GEMM plus a separate epilogue kernel of
    /// ~320 µs for GPT-2's `[16384, 3072]` (12 of them, 3.85 ms a step), where the column sum
    /// takes ~13 µs. Otherwise [`Tensor::matmul`], [`Tensor::gelu_backward`] and
    /// [`Tensor::sum`] (the rule: see [`Tensor::linear_gelu`]).
    pub fn matmul_dgelu(
        &self,
        weight: &Tensor<T>,
        pre: &Tensor<T>,
        bias_grad: bool,
    ) -> Result<DgeluGrads<T>> {
        const OP: &str = "matmul_dgelu";
        self.same_device(OP, weight)?;
        self.same_device(OP, pre)?;
        let mismatch = |rhs: &[usize], why: String| TensorError::ShapeMismatch {
            op: OP,
            lhs: self.shape().to_vec(),
            rhs: rhs.to_vec(),
            why,
        };
        let &[out_f, hidden] = weight.shape() else {
            return Err(mismatch(
                weight.shape(),
                "the weight must be [out_features, hidden]".into(),
            ));
        };
        if self.rank() == 0 || self.shape()[self.rank() - 1] != out_f {
            return Err(mismatch(
                weight.shape(),
                format!("the gradient's last dimension must be out_features = {out_f}"),
            ));
        }
        let lead = &self.shape()[..self.rank() - 1];
        if pre.rank() != self.rank()
            || &pre.shape()[..pre.rank() - 1] != lead
            || pre.shape()[pre.rank() - 1] != hidden
        {
            return Err(mismatch(
                pre.shape(),
                format!(
                    "the pre-activation must be [{}{hidden}] (the gradient's leading dimensions \
                     and the weight's hidden = {hidden})",
                    lead.iter().map(|d| format!("{d}, ")).collect::<String>()
                ),
            ));
        }
        let rows: usize = lead.iter().product();
        let g2 = self.contiguous()?.reshape(&[rows, out_f])?;
        let pre2 = pre.contiguous()?.reshape(&[rows, hidden])?;
        if let Some((dpre, db)) =
            g2.matmul_dgelu_fused(weight, &pre2, rows, out_f, hidden, bias_grad)?
        {
            return Ok((dpre.reshape(pre.shape())?, db));
        }
        let h = g2.matmul(weight)?;
        let dpre = pre2.gelu_backward(&h)?;
        let db = if bias_grad { Some(dpre.sum(0)?) } else { None };
        Ok((dpre.reshape(pre.shape())?, db))
    }

    /// The fused path of [`Tensor::matmul_dgelu`] on `[rows, out]` and `[rows, hidden]`, or
    /// `None` where it does not apply. `DGELU` and a column sum, or (opted in, see
    /// [`Tensor::matmul_dgelu`]) `DGELU_BGRAD` first.
    fn matmul_dgelu_fused(
        &self,
        weight: &Tensor<T>,
        pre: &Tensor<T>,
        rows: usize,
        out_f: usize,
        hidden: usize,
        bias_grad: bool,
    ) -> Result<Option<DgeluGrads<T>>> {
        if !fused_dtype::<T>() || rows == 0 || out_f == 0 || hidden % AUX_LD_MULTIPLE != 0 {
            return Ok(None);
        }
        let exec = self.exec()?;
        let Chosen::Cublas(blas) = choose::<T>(&exec)? else {
            return Ok(None);
        };
        let w = weight.contiguous()?;
        let (gv, wv, pv) = (self.dense()?, w.dense()?, pre.dense()?);
        if !aligned(pv.as_raw_ptr(), AUX_ALIGNMENT) {
            return Ok(None);
        }
        // Row-major: [rows, out] · [out, hidden] = [rows, hidden], the shape of pre.
        let g = Gemm::new(rows, hidden, out_f).leading_dims(out_f, hidden, hidden);
        let n = rows * hidden;
        if bias_grad && linear_bias_grad() == LinearBiasGrad::Fused {
            // SAFETY: with k = out_f > 0 and beta = 0, the GEMM writes every element of d(pre),
            // and the epilogue every one of the `hidden` column sums (or it fails, and both
            // are dropped unread).
            let both = unsafe {
                exec.storage_pair_with(n, hidden, |dpre, db| {
                    if !aligned(db.as_raw_ptr(), AUX_ALIGNMENT) {
                        return Err(TensorError::InvalidArgument {
                            op: "matmul_dgelu",
                            problem: "the bias gradient's buffer is not 16-byte aligned".into(),
                        });
                    }
                    T::gemm_dgelu_cublas(
                        &blas,
                        exec.stream(),
                        &g,
                        &gv,
                        &wv,
                        &pv,
                        hidden,
                        Some(db),
                        dpre,
                    )
                })
            };
            if let Ok((dpre, db)) = both {
                return Ok(Some((
                    Tensor::from_storage(dpre, &[rows, hidden])?,
                    Some(Tensor::from_storage(db, &[hidden])?),
                )));
            }
        }
        // SAFETY: as above, for d(pre) alone.
        let dpre = unsafe {
            exec.storage_with(n, |dpre| {
                T::gemm_dgelu_cublas(&blas, exec.stream(), &g, &gv, &wv, &pv, hidden, None, dpre)
            })
        };
        match dpre {
            Ok(dpre) => {
                let dpre = Tensor::from_storage(dpre, &[rows, hidden])?;
                let db = if bias_grad { Some(dpre.sum(0)?) } else { None };
                Ok(Some((dpre, db)))
            }
            Err(_) => Ok(None),
        }
    }
}
