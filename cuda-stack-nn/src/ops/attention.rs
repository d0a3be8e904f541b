//! Fused scaled-dot-product attention on [`Var`]s, and its packed-QKV form for
//! [`MultiHeadAttention`](crate::MultiHeadAttention).

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{AttentionElement, GradElement, Tensor};

impl<T: GradElement + AttentionElement> Var<T> {
    /// `softmax(scale · self · kᵀ) · v` with `self` the queries `[B, H, Nq, D]` and `k`, `v`
    /// `[B, H, Nk, D]` (`F.scaled_dot_product_attention(q, k, v, is_causal=causal,
    /// scale=scale)`), fused ([`Tensor::scaled_dot_product_attention_forward`]); `scale`
    /// defaults to `1/√D`, the causal mask is aligned bottom-right. Saves q, k, v, the output
    /// and the row log-sum-exp; the backward recomputes the probabilities from them
    /// ([`Tensor::scaled_dot_product_attention_backward`]).
    pub fn scaled_dot_product_attention(
        &self,
        k: &Var<T>,
        v: &Var<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Var<T>> {
        let (q, kt, vt) = (self.value(), k.value(), v.value());
        let (out, lse) = q.scaled_dot_product_attention_forward(&kt, &vt, causal, scale)?;
        let saved = out.clone();
        let needs = [self.requires_grad(), k.requires_grad(), v.requires_grad()];
        Ok(Var::from_op(
            out,
            "scaled_dot_product_attention",
            &[self, k, v],
            move |g| {
                let (dq, dk, dv) = q.scaled_dot_product_attention_backward(
                    &kt, &vt, &saved, &lse, g, causal, scale,
                )?;
                Ok(vec![
                    needs[0].then_some(dq),
                    needs[1].then_some(dk),
                    needs[2].then_some(dv),
                ])
            },
        ))
    }
}

impl<T: GradElement + AttentionElement> Var<T> {
    /// Multi-head self-attention over a packed projection: `self` is `[B, N, 3·C]` (q, k and v
    /// side by side, each `C = heads·D` wide with the heads contiguous inside, as
    /// [`MultiHeadAttention`](crate::MultiHeadAttention)'s `qkv` layer and nanoGPT's `c_attn`
    /// produce); q, k and v are read in place as strided views (no copy), and the result is
    /// `[B, N, C]` with the heads side by side (before the output projection). Scale `1/√D`,
    /// causal or not. What [`MultiHeadAttention`](crate::MultiHeadAttention) computes between
    /// its two projections, for a model that holds its projection weights itself (for example
    /// f32 master weights cast to bf16 for each forward). `D` must be at most 256.
    pub fn packed_qkv_attention(&self, heads: usize, causal: bool) -> Result<Var<T>> {
        let shape = self.shape();
        let ok = shape.len() == 3
            && heads > 0
            && shape[2] > 0
            && shape[2] % (3 * heads) == 0
            && shape[2] / (3 * heads) <= 256;
        if !ok {
            return Err(NnError::Invalid {
                what: "Var::packed_qkv_attention",
                problem: format!(
                    "a projection of shape {shape:?} with {heads} heads: it must be \
                     [batch, tokens, 3·heads·D] with 1 <= D <= 256"
                ),
            });
        }
        let packed = if self.value().is_contiguous() {
            self.clone()
        } else {
            self.reshape(&shape)?
        };
        packed_qkv_attention(&packed, heads, causal)
    }
}

/// q, k, v `[B, H, N, D]` as views of a packed `[B, N, 3·H·D]` projection (no copy).
fn packed_views<T: AttentionElement>(qkv: &Tensor<T>, heads: usize) -> Result<[Tensor<T>; 3]> {
    let (b, n, c3) = (qkv.shape()[0], qkv.shape()[1], qkv.shape()[2]);
    let d = c3 / 3 / heads;
    let packed = qkv.reshape(&[b, n, 3, heads, d])?;
    let view = |i: usize| -> Result<Tensor<T>> { Ok(packed.select(2, i)?.permute(&[0, 2, 1, 3])?) };
    Ok([view(0)?, view(1)?, view(2)?])
}

/// Multi-head attention over a packed projection `qkv` `[B, N, 3·C]` (q, k, v each `C = H·D`
/// wide, heads contiguous inside): q, k and v are read in place as strided views; the kernels
/// write the result token-major, so it is `[B, N, C]` with the heads side by side with no copy
/// (and the `[B, H, N, D]` view the backward reads shares its storage). Backward: the output
/// gradient is read in place as a `[B, H, N, D]` view, and the kernels write dq, dk and dv
/// straight into the packed `[B, N, 3, H, D]` layout of the projection's gradient (no copy; the
/// same values as the three-tensor backward, bit for bit). The caller checks the shapes
/// (contiguous `qkv`, `3·C` divisible by `3·heads`).
pub(crate) fn packed_qkv_attention<T: GradElement + AttentionElement>(
    qkv: &Var<T>,
    heads: usize,
    causal: bool,
) -> Result<Var<T>> {
    let x = qkv.value();
    let (b, n, c3) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    let (c, d) = (c3 / 3, c3 / 3 / heads);
    let [q, k, v] = packed_views(&x, heads)?;
    // out: contiguous [B, N, H, D]; [B, N, C] and the [B, H, N, D] view are free.
    let (out, lse) = q.scaled_dot_product_attention_forward_token_major(&k, &v, causal, None)?;
    let value = out.reshape(&[b, n, c])?;
    let out = out.permute(&[0, 2, 1, 3])?;
    Ok(Var::from_op(
        value,
        "multi_head_attention",
        &[qkv],
        move |g| {
            // [B, N, C] -> [B, N, H, D] -> a [B, H, N, D] view (no copy when g is contiguous).
            let g = g
                .contiguous()?
                .reshape(&[b, n, heads, d])?
                .permute(&[0, 2, 1, 3])?;
            // dq, dk, dv written by the kernels into one [B, N, 3, H, D] tensor: the packed
            // projection's gradient.
            let packed = q.scaled_dot_product_attention_backward_packed(
                &k, &v, &out, &lse, &g, causal, None,
            )?;
            Ok(vec![Some(packed.reshape(&[b, n, c3])?)])
        },
    ))
}
