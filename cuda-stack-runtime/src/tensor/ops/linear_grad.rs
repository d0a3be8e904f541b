//! `linear_weight_grad`: the weight and bias gradients of `F.linear` — `dW = dYᵀ · X` and
//! `db = Σ_rows dY` — either as one GEMM whose cuBLASLt epilogue also writes the bias gradient
//! (`CUBLASLT_EPILOGUE_BGRADB`, [`Epilogue::BGradA`](cuda_stack_blas::Epilogue::BGradA) in
//! `cuda-stack-blas`' row-major terms, as PyTorch's, Transformer Engine's and llm.c's weight
//! gradients use it), or as the GEMM and a separate column sum.
//!
//! ## Which path runs (the one place: [`linear_bias_grad`])
//! The fused GEMM is tried only for **bf16 and f16**, on the **cuBLAS** matmul backend, with a
//! non-empty product, when [`LINEAR_BGRAD_VAR`] (`CUDA_STACK_LINEAR_BGRAD`) is `fused`; if
//! cuBLASLt has no algorithm for the problem (odd 16-bit widths, say) the separate path runs.
//! The default is **separate**: the epilogue saves the column sum's re-read of `dY` and its
//! three small kernels, but cuBLASLt chooses another (not split-K) kernel for the GEMM with the
//! epilogue. Measured on an H200 (2026-11-28, `transformer_ops_bench --filter linear`, GPT-2's
//! shapes at 16384 rows): alone, the fused path is 4–6 % faster for 768 → 768 and 768 → 3072
//! and even for 3072 → 768 (53.8 / 154.5 / 137.9 µs against 57.5 / 163.1 / 137.0); inside a
//! GPT-2 training step it is slower (33.42 and 33.36 ms a step against 33.25 and 33.26, same
//! run), so it stays opt-in.
//!
//! ## What differs on the fused path
//! The separate column sum accumulates in f32 and rounds once; so does cuBLASLt's bf16 epilogue,
//! so the two agree to the 16-bit rounding but are not the same bits (another summation order).
//! cuBLASLt's f16 epilogue rounds its partial sums to f16 on the way (measured, session 60: a
//! column of 39 rows came out 3.1e-3 off the exact sum where `Σ|dY|` was 19; the column sum was
//! within one rounding), so for f16 the separate path is the more accurate. `dW` is the same
//! product on another cuBLAS entry point (cuBLASLt rather than `cublasGemmEx`), equal to its
//! rounding.

use super::matmul_cublas::{choose, Chosen};
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{DType, GradElement, Tensor};
use cuda_stack_blas::{Gemm, Transpose, AUX_ALIGNMENT};

/// The environment variable [`linear_bias_grad`] reads: `fused` (or `epilogue`) picks
/// [`LinearBiasGrad::Fused`], `separate` [`LinearBiasGrad::Separate`] (case-insensitive; other
/// values, or none, give the default, [`LinearBiasGrad::Separate`]). Read at every call, so a
/// benchmark can flip it between runs of the same program.
pub const LINEAR_BGRAD_VAR: &str = "CUDA_STACK_LINEAR_BGRAD";

/// How [`Tensor::linear_weight_grad`] (and [`Tensor::matmul_dgelu`], whose `DGELU_BGRAD`
/// epilogue is the same kind of column sum) computes the bias gradient ([`linear_bias_grad`]
/// chooses; the default is [`LinearBiasGrad::Separate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinearBiasGrad {
    /// In the weight gradient's GEMM (cuBLASLt's bias-gradient epilogue, `BGRADB`), where it
    /// applies — bf16/f16 on the cuBLAS matmul backend, a non-empty product, cuBLASLt has an
    /// algorithm (odd 16-bit widths may not) — and the separate path elsewhere. The epilogue
    /// saves the column sum's re-read of `dY` and its kernels, but cuBLASLt may choose another
    /// (not split-K) kernel for the GEMM with the epilogue: measure
    /// (`transformer_ops_bench --filter linear`). For bf16 the bias gradient is accumulated in
    /// f32 and rounded once, as the column sum does: the two agree to the 16-bit rounding, not
    /// bit for bit (another summation order). For f16 cuBLASLt rounds its partial sums to f16
    /// on the way, so `db` can be off by a few f16 roundings of sums as large as `Σ|dY|` (the
    /// module docs have the measured case). `dW` is the same product on cuBLASLt instead of
    /// `cublasGemmEx`, equal to its rounding.
    Fused,
    /// The weight-gradient GEMM, then a column sum of `dY` (`Tensor::sum(0)`).
    Separate,
}

/// The choice [`Tensor::linear_weight_grad`] makes: [`LINEAR_BGRAD_VAR`] when set to a known
/// value, else [`LinearBiasGrad::Separate`] (the fused path is not yet measured faster; see
/// [`LinearBiasGrad::Fused`]). This is the one place the rule lives.
pub fn linear_bias_grad() -> LinearBiasGrad {
    match std::env::var(LINEAR_BGRAD_VAR) {
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "fused" | "epilogue" => LinearBiasGrad::Fused,
            _ => LinearBiasGrad::Separate,
        },
        Err(_) => LinearBiasGrad::Separate,
    }
}

/// The weight gradient and, when asked for, the bias gradient.
type WeightGrads<T> = (Tensor<T>, Option<Tensor<T>>);

impl<T: GradElement> Tensor<T> {
    /// The weight and bias gradients of [`Tensor::linear`]: with `self` = `dY` `[…, out]` (the
    /// gradient of `linear(x, W, b)`) and `x` `[…, in]` (the same leading dimensions), returns
    /// `dW = dYᵀ · x` (`[out, in]`, contiguous) and, when `bias_grad`, `db = Σ_rows dY`
    /// (`[out]`).
    ///
    /// For bf16/f16 on cuBLAS with [`linear_bias_grad`] = [`LinearBiasGrad::Fused`] (the
    /// environment variable [`LINEAR_BGRAD_VAR`]), both come from one GEMM whose epilogue sums
    /// `dY` as it reads it; otherwise, and wherever cuBLASLt has no algorithm, [`Tensor::matmul`]
    /// and [`Tensor::sum`] — the same ops as before this op existed, bit for bit. See
    /// [`LinearBiasGrad::Fused`] for what differs on the fused path.
    pub fn linear_weight_grad(&self, x: &Tensor<T>, bias_grad: bool) -> Result<WeightGrads<T>> {
        self.linear_weight_grad_with(x, bias_grad, linear_bias_grad())
    }

    /// [`Tensor::linear_weight_grad`] with the path chosen by the caller instead of
    /// [`linear_bias_grad`] (for tests and benchmarks): [`LinearBiasGrad::Fused`] still takes
    /// the separate path where the fused one does not apply.
    pub fn linear_weight_grad_with(
        &self,
        x: &Tensor<T>,
        bias_grad: bool,
        how: LinearBiasGrad,
    ) -> Result<WeightGrads<T>> {
        const OP: &str = "linear_weight_grad";
        self.same_device(OP, x)?;
        let (rank, xr) = (self.rank(), x.rank());
        if rank == 0 || xr != rank || self.shape()[..rank - 1] != x.shape()[..xr - 1] {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: x.shape().to_vec(),
                why: "the gradient [.., out] and the input [.., in] must have the same leading \
                      dimensions"
                    .into(),
            });
        }
        let (out_f, in_f) = (self.shape()[rank - 1], x.shape()[xr - 1]);
        let rows: usize = self.shape()[..rank - 1].iter().product();
        let g2 = self.contiguous()?.reshape(&[rows, out_f])?;
        let x2 = x.contiguous()?.reshape(&[rows, in_f])?;
        if bias_grad && how == LinearBiasGrad::Fused {
            if let Some((dw, db)) = g2.weight_grad_fused(&x2, rows, in_f, out_f)? {
                return Ok((dw, Some(db)));
            }
        }
        let dw = g2.t()?.matmul(&x2)?;
        let db = if bias_grad { Some(g2.sum(0)?) } else { None };
        Ok((dw, db))
    }

    /// The one-GEMM path on `[rows, out]` and `[rows, in]`: `(dW, db)`, or `None` where it does
    /// not apply (not bf16/f16 on cuBLAS, an empty product, a misaligned vector, no cuBLASLt
    /// algorithm); the caller then takes the separate path. An error is returned only for what
    /// that path would fail on too (the device, memory).
    fn weight_grad_fused(
        &self,
        x: &Tensor<T>,
        rows: usize,
        in_f: usize,
        out_f: usize,
    ) -> Result<Option<(Tensor<T>, Tensor<T>)>> {
        let fused_dtype = T::CUBLAS_GEMM && matches!(T::DTYPE, DType::BF16 | DType::F16);
        if !fused_dtype || rows == 0 || in_f == 0 || out_f == 0 {
            return Ok(None);
        }
        let exec = self.exec()?;
        let Chosen::Cublas(blas) = choose::<T>(&exec)? else {
            return Ok(None);
        };
        let (gv, xv) = (self.dense()?, x.dense()?);
        // Row-major: dW [out, in] = ([rows, out] read transposed) · [rows, in], k = rows; the
        // epilogue's sums over k of op(A) = dYᵀ are one per row of dW: db [out].
        let g = Gemm::new(out_f, in_f, rows)
            .trans_a(Transpose::Yes)
            .trans_b(Transpose::No)
            .leading_dims(out_f, in_f, in_f);
        // SAFETY: with k = rows > 0 and beta = 0, the GEMM writes every element of dW [out, in]
        // and the epilogue every one of the `out` sums (or it fails, and both are dropped
        // unread).
        let both = unsafe {
            exec.storage_pair_with(out_f * in_f, out_f, |dw, db| {
                if db.as_raw_ptr() % AUX_ALIGNMENT as u64 != 0 {
                    return Err(TensorError::InvalidArgument {
                        op: "linear_weight_grad",
                        problem: "the bias gradient's buffer is not 16-byte aligned".into(),
                    });
                }
                T::gemm_bgrad_a_cublas(&blas, exec.stream(), &g, &gv, &xv, db, dw)
            })
        };
        match both {
            Ok((dw, db)) => Ok(Some((
                Tensor::from_storage(dw, &[out_f, in_f])?,
                Tensor::from_storage(db, &[out_f])?,
            ))),
            // No algorithm for this problem, a library without the epilogue, …: the separate
            // path computes the same (and reports any error that is not the epilogue's).
            Err(_) => Ok(None),
        }
    }
}
