//! `nn.MultiheadAttention`-style self-attention with a fused QKV projection and the fused
//! attention kernels.

use super::{Linear, Module};
use crate::error::{NnError, Result};
use crate::ops::packed_qkv_attention;
use crate::Var;
use cuda_stack_runtime::{AttentionElement, GradElement};

/// Multi-head self-attention on `[B, N, C]`: one projection `C → 3C` (q, k, v packed as
/// `[B, N, 3, H, D]`), the fused scaled-dot-product attention reading q, k, v as strided views
/// of that projection (no copy; scale `1/√D`, optionally causal), and an output projection
/// `C → C`. Both projections are [`Linear`] layers with biases (PyTorch's default
/// initialisation). `D = C / H` must be at most 256.
pub struct MultiHeadAttention<T: GradElement + AttentionElement> {
    qkv: Linear<T>,
    proj: Linear<T>,
    embed_dim: usize,
    heads: usize,
    causal: bool,
}

impl<T: GradElement + AttentionElement> MultiHeadAttention<T> {
    /// A layer of width `embed_dim` with `heads` heads (`embed_dim % heads == 0`,
    /// `1 <= embed_dim / heads <= 256`), causal or not, initialised from `seed`.
    pub fn new(
        embed_dim: usize,
        heads: usize,
        causal: bool,
        seed: u64,
    ) -> Result<MultiHeadAttention<T>> {
        if heads == 0 || embed_dim == 0 || embed_dim % heads != 0 || embed_dim / heads > 256 {
            return Err(NnError::Invalid {
                what: "MultiHeadAttention",
                problem: format!(
                    "embed_dim = {embed_dim}, heads = {heads}: embed_dim must be a positive \
                     multiple of heads with a head dimension embed_dim / heads of at most 256"
                ),
            });
        }
        let qkv = Linear::new(embed_dim, 3 * embed_dim, seed)?;
        let proj = Linear::new(embed_dim, embed_dim, seed ^ 0x5851_f42d_4c95_7f2d)?;
        Ok(MultiHeadAttention {
            qkv,
            proj,
            embed_dim,
            heads,
            causal,
        })
    }

    /// The fused q, k, v projection (`C → 3C`; output columns `[q | k | v]`, heads contiguous
    /// inside each).
    pub fn qkv(&self) -> &Linear<T> {
        &self.qkv
    }

    /// The output projection (`C → C`).
    pub fn proj(&self) -> &Linear<T> {
        &self.proj
    }

    /// The number of heads.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// Whether the attention is causal.
    pub fn causal(&self) -> bool {
        self.causal
    }
}

impl<T: GradElement + AttentionElement> Module<T> for MultiHeadAttention<T> {
    /// `proj(attention(qkv(x)))` for `x` of shape `[B, N, C]`.
    fn forward(&self, x: &Var<T>) -> Result<Var<T>> {
        let shape = x.value().shape().to_vec();
        if shape.len() != 3 || shape[2] != self.embed_dim {
            return Err(NnError::Invalid {
                what: "MultiHeadAttention",
                problem: format!(
                    "input of shape {shape:?}: it must be [batch, tokens, {}]",
                    self.embed_dim
                ),
            });
        }
        let qkv = self.qkv.forward(x)?;
        let attn = packed_qkv_attention(&qkv, self.heads, self.causal)?;
        self.proj.forward(&attn)
    }

    fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        let mut v = Vec::new();
        for (prefix, layer) in [("qkv", &self.qkv), ("proj", &self.proj)] {
            for (name, p) in layer.named_parameters() {
                v.push((format!("{prefix}.{name}"), p));
            }
        }
        v
    }

    fn describe(&self) -> String {
        format!(
            "MultiHeadAttention(embed_dim={}, num_heads={}, causal={})",
            self.embed_dim,
            self.heads,
            if self.causal { "True" } else { "False" }
        )
    }
}
