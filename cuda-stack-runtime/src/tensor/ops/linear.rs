//! `linear`: `x · Wᵀ + b` (`torch.nn.functional.linear`), on cuBLAS as one GEMM with the bias
//! added by cuBLASLt's epilogue (as PyTorch's `addmm` does), otherwise a matmul and a
//! broadcasting add.

use super::matmul_cublas::{choose, Chosen};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::matmul_backend::allow_tf32;
use crate::tensor::{DType, Tensor, TensorElement};
use cuda_stack_blas::{Gemm, Math, Transpose, BIAS_ALIGNMENT};

impl<T: TensorElement> Tensor<T> {
    /// `self · weightᵀ (+ bias)` over the last dimension (`F.linear(x, W, b)`): `self`
    /// `[…, in]`, `weight` `[out, in]`, `bias` `[out]`; the result is `[…, out]`, contiguous.
    ///
    /// With cuBLAS as the matmul backend (see [`Tensor::matmul`]) and a bias, this is one GEMM
    /// whose epilogue adds the bias (cuBLASLt, the algorithm cached per shape), so the product is
    /// written once; otherwise — other backends, no bias, a bias that is not 16-byte aligned,
    /// or a shape cuBLASLt has no algorithm for — a matmul and a broadcasting add. Both add the
    /// bias to the f32 (f64) accumulator or to its rounded product: results agree to a rounding.
    pub fn linear(&self, weight: &Tensor<T>, bias: Option<&Tensor<T>>) -> Result<Tensor<T>> {
        let (rows, in_f, out_f, out_shape) = self.linear_dims("linear", weight, bias)?;
        if let Some(b) = bias {
            if let Some(y) = self.linear_fused(weight, b, rows, in_f, out_f)? {
                return y.reshape(&out_shape);
            }
        }
        let x2 = self.contiguous()?.reshape(&[rows, in_f])?;
        let y = x2.matmul(&weight.t()?)?;
        let y = match bias {
            Some(b) => y.add(b)?,
            None => y,
        };
        y.reshape(&out_shape)
    }

    /// Checks `F.linear`'s shapes (`self` `[…, in]`, `weight` `[out, in]`, `bias` `[out]`, one
    /// device) and returns `(rows, in, out, out_shape)`, `out_shape` being `[…, out]`.
    pub(crate) fn linear_dims(
        &self,
        op: &'static str,
        weight: &Tensor<T>,
        bias: Option<&Tensor<T>>,
    ) -> Result<(usize, usize, usize, Vec<usize>)> {
        self.same_device(op, weight)?;
        let mismatch = |rhs: &[usize], why: String| TensorError::ShapeMismatch {
            op,
            lhs: self.shape().to_vec(),
            rhs: rhs.to_vec(),
            why,
        };
        let &[out_f, in_f] = weight.shape() else {
            return Err(mismatch(
                weight.shape(),
                "the weight must be [out_features, in_features]".into(),
            ));
        };
        if self.rank() == 0 || self.shape()[self.rank() - 1] != in_f {
            return Err(mismatch(
                weight.shape(),
                format!("the input's last dimension must be in_features = {in_f}"),
            ));
        }
        if let Some(b) = bias {
            self.same_device(op, b)?;
            if b.shape() != [out_f] {
                return Err(mismatch(
                    b.shape(),
                    format!("the bias must be [out_features] = [{out_f}]"),
                ));
            }
        }
        let mut out_shape = self.shape().to_vec();
        if let Some(last) = out_shape.last_mut() {
            *last = out_f;
        }
        let rows: usize = self.shape()[..self.rank() - 1].iter().product();
        Ok((rows, in_f, out_f, out_shape))
    }

    /// The one-GEMM path of [`Tensor::linear`] (`[rows, out]`), or `None` where it does not
    /// apply (not cuBLAS, an empty product, a misaligned bias, no cuBLASLt algorithm): the
    /// caller then takes the two-op path. An error is returned only for what the other path
    /// would fail on too (the device, memory).
    fn linear_fused(
        &self,
        weight: &Tensor<T>,
        bias: &Tensor<T>,
        rows: usize,
        in_f: usize,
        out_f: usize,
    ) -> Result<Option<Tensor<T>>> {
        if !T::CUBLAS_GEMM || rows == 0 || in_f == 0 || out_f == 0 {
            return Ok(None);
        }
        let exec = self.exec()?;
        let Chosen::Cublas(blas) = choose::<T>(&exec)? else {
            return Ok(None);
        };
        let (x, w, b) = (
            self.contiguous()?.reshape(&[rows, in_f])?,
            weight.contiguous()?,
            bias.contiguous()?,
        );
        let (xv, wv, bv) = (x.dense()?, w.dense()?, b.dense()?);
        if bv.as_raw_ptr() % BIAS_ALIGNMENT as u64 != 0 {
            return Ok(None);
        }
        let math = if T::DTYPE == DType::F32 && allow_tf32() {
            Math::Tf32
        } else {
            Math::Default
        };
        // Row-major: [rows, in] · ([out, in] read transposed) = [rows, out].
        let g = Gemm::new(rows, out_f, in_f)
            .trans_a(Transpose::No)
            .trans_b(Transpose::Yes)
            .leading_dims(in_f, in_f, out_f)
            .math(math);
        // SAFETY: with k = in_f > 0 and beta = 0, the GEMM writes every element of the
        // [rows, out_f] result (or fails, and the storage is dropped unread).
        let fused = unsafe {
            exec.storage_with(rows * out_f, |out| {
                T::gemm_bias_cublas(&blas, exec.stream(), &g, &xv, &wv, &bv, out)
            })
        };
        match fused {
            Ok(storage) => Ok(Some(Tensor::from_storage(storage, &[rows, out_f])?)),
            // No algorithm for this problem, a library without the epilogue, …: the two-op
            // path computes the same (and reports any error that is not the epilogue's).
            Err(_) => Ok(None),
        }
    }
}
