//! The Tensor calls each case makes, for any element type with the attention and row-op
//! kernels (the bench uses f32 and bf16).

use cuda_stack_runtime::{AttentionElement, FloatElement, Tensor, TensorElement};
use std::error::Error;

type Res<T> = Result<T, Box<dyn Error>>;

/// What a LayerNorm forward saves for its backward: mean and rstd.
pub type Saved<T> = (
    Tensor<<T as FloatElement>::Stat>,
    Tensor<<T as FloatElement>::Stat>,
);

/// Seed 002's chain: `softmax(q·kᵀ·scale)·v` as separate ops (`[b, h, n, d]` reshaped to
/// `[b·h, n, d]` for the batched matmuls), the `b·h·n²` scores written and read back.
pub fn chain<T: TensorElement>(q: &Tensor<T>, k: &Tensor<T>, v: &Tensor<T>, scale: f64) -> Res<()> {
    let s = q.shape().to_vec();
    let bh = s[0] * s[1];
    let (q3, k3, v3) = (
        q.reshape(&[bh, s[2], s[3]])?,
        k.reshape(&[bh, s[2], s[3]])?,
        v.reshape(&[bh, s[2], s[3]])?,
    );
    let scores = q3
        .matmul(&k3.transpose(1, 2)?)?
        .scale(T::scalar_from_f64(scale))?;
    scores.softmax(-1)?.matmul(&v3)?;
    Ok(())
}

/// The fused attention forward.
pub fn sdpa_fwd<T: AttentionElement>(
    q: &Tensor<T>,
    k: &Tensor<T>,
    v: &Tensor<T>,
    causal: bool,
) -> Res<()> {
    q.scaled_dot_product_attention(k, v, causal, None)?;
    Ok(())
}

/// The fused attention forward, then its backward.
pub fn sdpa_fwd_bwd<T: AttentionElement>(
    q: &Tensor<T>,
    k: &Tensor<T>,
    v: &Tensor<T>,
    dout: &Tensor<T>,
    causal: bool,
) -> Res<()> {
    let (o, lse) = q.scaled_dot_product_attention_forward(k, v, causal, None)?;
    q.scaled_dot_product_attention_backward(k, v, &o, &lse, dout, causal, None)?;
    Ok(())
}

/// LayerNorm forward (eps 1e-5, as PyTorch's default), returning mean and rstd.
pub fn layer_norm_fwd<T: FloatElement>(
    x: &Tensor<T>,
    w: &Tensor<T>,
    b: &Tensor<T>,
) -> Res<Saved<T>> {
    let (_, mean, rstd) = x.layer_norm(w, b, 1e-5)?;
    Ok((mean, rstd))
}

/// LayerNorm backward: dx, dw, db.
pub fn layer_norm_bwd<T: FloatElement>(
    x: &Tensor<T>,
    w: &Tensor<T>,
    saved: &Saved<T>,
    dy: &Tensor<T>,
) -> Res<()> {
    x.layer_norm_backward(w, &saved.0, &saved.1, dy)?;
    Ok(())
}

/// GELU (tanh form).
pub fn gelu_fwd<T: FloatElement>(x: &Tensor<T>) -> Res<()> {
    x.gelu()?;
    Ok(())
}

/// GELU's backward.
pub fn gelu_bwd<T: FloatElement>(x: &Tensor<T>, dy: &Tensor<T>) -> Res<()> {
    x.gelu_backward(dy)?;
    Ok(())
}

/// The fused classifier: loss rows and dlogits in one kernel, then the mean loss (as
/// `F.cross_entropy` and its gradient), upstream gradient 1 on the device.
pub fn classifier<T: FloatElement>(
    logits: &Tensor<T>,
    targets: &Tensor<i32>,
    one: &Tensor<T::Stat>,
) -> Res<()> {
    let n = logits.shape()[0].max(1);
    let (loss, _dlogits) = logits.fused_classifier(targets, one, 1.0 / n as f64)?;
    loss.sum_all()?;
    Ok(())
}

/// Embedding lookup.
pub fn embedding_fwd<T: FloatElement>(table: &Tensor<T>, idx: &Tensor<i32>) -> Res<()> {
    table.embedding(idx)?;
    Ok(())
}

/// Embedding backward into a `[vocab, c]` gradient (deterministic).
pub fn embedding_bwd<T: FloatElement>(idx: &Tensor<i32>, dy: &Tensor<T>, vocab: usize) -> Res<()> {
    dy.embedding_backward(idx, vocab)?;
    Ok(())
}
