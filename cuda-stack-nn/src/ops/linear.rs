//! `linear`: `x · Wᵀ + b` as one op (`F.linear`), so the forward can be one GEMM with the bias
//! in its epilogue ([`cuda_stack_runtime::Tensor::linear`]).

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `self · weightᵀ (+ bias)`: `self` `[…, in]`, `weight` `[out, in]`, `bias` `[out]` →
    /// `[…, out]` (`torch.nn.functional.linear`). Forward: [`cuda_stack_runtime::Tensor::linear`]
    /// (one GEMM with the bias in cuBLASLt's epilogue where it can). Backward, with `g` and `x`
    /// flattened to `[rows, out]` and `[rows, in]`: `dx = g · W`, and `dW = gᵀ · x` (contiguous
    /// `[out, in]`, no transpose kernel) with `db = Σ_rows g` from
    /// [`cuda_stack_runtime::Tensor::linear_weight_grad`] (one GEMM with the bias gradient in its
    /// epilogue when `CUDA_STACK_LINEAR_BGRAD=fused`, bf16/f16 on cuBLAS; else the GEMM and a
    /// column sum) — each only when its input requires grad. Saves `x` and `W`.
    pub fn linear(&self, weight: &Var<T>, bias: Option<&Var<T>>) -> Result<Var<T>> {
        let (x, w) = (self.value(), weight.value());
        let value = x.linear(&w, bias.map(|b| b.value()).as_ref())?;
        let (nx, nw) = (self.requires_grad(), weight.requires_grad());
        let nb = bias.is_some_and(|b| b.requires_grad());
        let mut inputs = vec![self, weight];
        if let Some(b) = bias {
            inputs.push(b);
        }
        let has_bias = bias.is_some();
        Ok(Var::from_op(value, "linear", &inputs, move |g| {
            let (out_f, in_f) = (w.shape()[0], w.shape()[1]);
            let rows: usize = x.shape()[..x.rank() - 1].iter().product();
            // The incoming gradient may be any view (an expanded scalar from sum_all, say).
            let g2 = g.contiguous()?.reshape(&[rows, out_f])?;
            let gx = if nx {
                Some(g2.matmul(&w)?.reshape(x.shape())?)
            } else {
                None
            };
            let (gw, gb) = if nw {
                let x2 = x.contiguous()?.reshape(&[rows, in_f])?;
                let (gw, gb) = g2.linear_weight_grad(&x2, nb)?;
                (Some(gw), gb)
            } else if nb {
                (None, Some(g2.sum(0)?))
            } else {
                (None, None)
            };
            let mut grads = vec![gx, gw];
            if has_bias {
                grads.push(gb);
            }
            Ok(grads)
        }))
    }
}
