//! `mlp_gelu`: a transformer's MLP, `gelu(x · W_fcᵀ + b_fc) · W_projᵀ + b_proj`, as one op, so
//! that GELU can live in the epilogues of the GEMMs around it — forward in `c_fc`'s
//! (`GELU_AUX_BIAS`), backward in the `dH = dY · W_proj` GEMM of `c_proj`'s backward
//! (`DGELU`; `c_fc`'s bias gradient is a column sum of its result). GELU's backward needs the
//! gradient of GELU's **output**, which only the next layer's backward produces: an op for `c_fc`
//! alone could not fuse it without reaching across the autograd graph; one op for the pair
//! keeps autograd's contract (each op's backward sees only its own output's gradient).

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `gelu(self · w_fcᵀ + b_fc) · w_projᵀ + b_proj` (nanoGPT's `MLP` without its dropout):
    /// `self` `[…, in]`, `w_fc` `[hidden, in]`, `b_fc` `[hidden]`, `w_proj` `[out, hidden]`,
    /// `b_proj` `[out]` → `[…, out]`; GELU is the tanh form.
    ///
    /// Forward: [`cuda_stack_runtime::Tensor::linear_gelu`] (GELU and the bias in `c_fc`'s
    /// epilogue, keeping the pre-activation) then [`cuda_stack_runtime::Tensor::linear`].
    /// Backward, with `g` `[rows, out]`: `dW_proj = gᵀ · h` and `db_proj = Σ_rows g`
    /// ([`cuda_stack_runtime::Tensor::linear_weight_grad`]: one GEMM with
    /// `CUDA_STACK_LINEAR_BGRAD=fused`), then
    /// [`cuda_stack_runtime::Tensor::matmul_dgelu`] — `d(pre) = (g · W_proj) ⊙ gelu'(pre)` in
    /// one GEMM, `db_fc = Σ_rows d(pre)` — then `dx = d(pre) · W_fc`, `dW_fc = d(pre)ᵀ · x`;
    /// each only when its input requires grad. Saves `x`, the pre-activation, `h = gelu(pre)`
    /// and both weights (what `linear`, `gelu`, `linear` save).
    ///
    /// **When it is fused** (the rule of `linear_gelu` / `matmul_dgelu`): bf16 and f16 on the
    /// cuBLAS matmul backend, hidden a multiple of 8. Everywhere else — f32, f64, the kernels
    /// backend — it runs exactly the ops of `self.linear(w_fc, b_fc)?.gelu()?.linear(w_proj,
    /// b_proj)` and their backward, so its values and gradients are those of the chain, bit for
    /// bit. Fused, GELU reads the f32 accumulator instead of its rounding and its derivative
    /// multiplies `g · W_proj` before that is rounded: the two agree to the 16-bit rounding.
    pub fn mlp_gelu(
        &self,
        w_fc: &Var<T>,
        b_fc: Option<&Var<T>>,
        w_proj: &Var<T>,
        b_proj: Option<&Var<T>>,
    ) -> Result<Var<T>> {
        let (x, wf, wp) = (self.value(), w_fc.value(), w_proj.value());
        let (bf, bp) = (b_fc.map(Var::value), b_proj.map(Var::value));
        let (h, pre) = x.linear_gelu(&wf, bf.as_ref())?;
        let value = h.linear(&wp, bp.as_ref())?;
        let (nx, nwf, nwp) = (
            self.requires_grad(),
            w_fc.requires_grad(),
            w_proj.requires_grad(),
        );
        let nbf = b_fc.is_some_and(Var::requires_grad);
        let nbp = b_proj.is_some_and(Var::requires_grad);
        let mut inputs = vec![self, w_fc];
        if let Some(b) = b_fc {
            inputs.push(b);
        }
        inputs.push(w_proj);
        if let Some(b) = b_proj {
            inputs.push(b);
        }
        let (has_bf, has_bp) = (b_fc.is_some(), b_proj.is_some());
        Ok(Var::from_op(value, "mlp_gelu", &inputs, move |g| {
            let (hidden, in_f) = (wf.shape()[0], wf.shape()[1]);
            let out_f = wp.shape()[0];
            let rows: usize = x.shape()[..x.rank() - 1].iter().product();
            // The incoming gradient may be any view (an expanded scalar from sum_all, say).
            let g2 = g.contiguous()?.reshape(&[rows, out_f])?;
            let (gwp, gbp) = if nwp {
                let (gw, gb) = g2.linear_weight_grad(&h.reshape(&[rows, hidden])?, nbp)?;
                (Some(gw), gb)
            } else if nbp {
                (None, Some(g2.sum(0)?))
            } else {
                (None, None)
            };
            let (mut gx, mut gwf, mut gbf) = (None, None, None);
            if nx || nwf || nbf {
                let pre2 = pre.reshape(&[rows, hidden])?;
                let (dpre, db) = g2.matmul_dgelu(&wp, &pre2, nbf)?;
                gbf = db;
                if nx {
                    gx = Some(dpre.matmul(&wf)?.reshape(x.shape())?);
                }
                if nwf {
                    let x2 = x.contiguous()?.reshape(&[rows, in_f])?;
                    gwf = Some(dpre.t()?.matmul(&x2)?);
                }
            }
            let mut grads = vec![gx, gwf];
            if has_bf {
                grads.push(gbf);
            }
            grads.push(gwp);
            if has_bp {
                grads.push(gbp);
            }
            Ok(grads)
        }))
    }
}
