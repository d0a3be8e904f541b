//! Inference with a key/value cache: each new token runs the model on its own position only,
//! attending to the keys and values the earlier positions left in the cache.
//!
//! The fused attention aligns its causal mask bottom-right (query `i` of `Nq` sees key `j` of
//! `Nk` iff `j <= i + Nk − Nq`), so queries for positions `past .. past + T` against the cache's
//! `past + T` keys are exactly the last `T` rows of a full causal pass: one query against the
//! whole cache is a decode step, a whole prompt at once is the prefill.
//!
//! Each layer's cache is one `[capacity, B, H, D]` tensor for K and one for V, position-major,
//! so appending `T` positions is one contiguous copy at offset `past · B·H·D`; the attention
//! reads the first `past + T` positions through a permuted view `[B, H, past + T, D]` (no
//! copy). Forward only: no graph is recorded (run it under [`cuda_stack_nn::no_grad`] with
//! weights made there).

use super::config::LN_EPS;
use super::forward::GptWeights;
use super::model::Gpt;
use cuda_stack_nn::{GradElement, NnError, Result};
use cuda_stack_runtime::{AttentionElement, Tensor};

/// Per-layer keys and values of the positions seen so far (see the module documentation).
pub struct KvCache<U: AttentionElement> {
    k: Vec<Tensor<U>>,
    v: Vec<Tensor<U>>,
    len: usize,
    batch: usize,
    capacity: usize,
}

impl<U: GradElement + AttentionElement> KvCache<U> {
    /// An empty cache for `batch` sequences of a model of `config`, holding up to
    /// `config.block_size` positions (the learned position table's length); allocated now, on
    /// the current device.
    pub fn new(config: &super::GptConfig, batch: usize) -> Result<KvCache<U>> {
        config.check()?;
        if batch == 0 {
            return Err(NnError::Invalid {
                what: "KvCache",
                problem: "a batch of 0 sequences".into(),
            });
        }
        let shape = [config.block_size, batch, config.n_head, config.head_dim()];
        let zeros = || Tensor::<U>::zeros(&shape);
        let k = (0..config.n_layer)
            .map(|_| zeros())
            .collect::<std::result::Result<_, _>>()?;
        let v = (0..config.n_layer)
            .map(|_| zeros())
            .collect::<std::result::Result<_, _>>()?;
        Ok(KvCache {
            k,
            v,
            len: 0,
            batch,
            capacity: config.block_size,
        })
    }

    /// Positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the cache can hold (the model's `block_size`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets every position (the memory is kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<T: GradElement + AttentionElement + 'static> Gpt<T> {
    /// Runs the model on `idx` (`[B, T]`) as positions `cache.len() .. cache.len() + T`,
    /// appending their keys and values to `cache`, and returns the logits of the **last**
    /// position, `[B, vocab]`: a prompt's prefill (T > 1) or one decode step (T = 1). The same
    /// values as the last position of [`Gpt::forward_with`] on the whole sequence, up to the
    /// rounding of GEMMs of other shapes. Dropout is not applied (evaluation). An error if
    /// `cache.len() + T` exceeds the cache's capacity or the batch differs from the cache's.
    pub fn forward_cached<U: GradElement + AttentionElement>(
        &self,
        w: &GptWeights<U>,
        idx: &Tensor<i32>,
        cache: &mut KvCache<U>,
    ) -> Result<Tensor<U>> {
        let (b, t) = self.check_ids("Gpt::forward_cached", idx)?;
        let past = cache.len;
        if b != cache.batch || past + t > cache.capacity || cache.k.len() != self.blocks.len() {
            return Err(NnError::Invalid {
                what: "Gpt::forward_cached",
                problem: format!(
                    "{t} new positions of a batch of {b} after {past} cached: the cache holds \
                     {} positions of a batch of {} for {} layers",
                    cache.capacity,
                    cache.batch,
                    cache.k.len()
                ),
            });
        }
        let cfg = &self.config;
        let (c, heads, d) = (cfg.n_embd, cfg.n_head, cfg.head_dim());
        let positions: Vec<i32> = (past as i32..(past + t) as i32).collect();
        let pos = Tensor::from_slice_on(idx.device(), &positions, &[t])?;
        let mut x = (&w.wte.value().embedding(idx)? + &w.wpe.value().embedding(&pos)?)?;
        let linear = |x: &Tensor<U>, a: &super::forward::Affine<U>| -> Result<Tensor<U>> {
            Ok(x.linear(&a.weight.value(), Some(&a.bias.value()))?)
        };
        let norm = |x: &Tensor<U>, a: &super::forward::Affine<U>| -> Result<Tensor<U>> {
            Ok(x.layer_norm(&a.weight.value(), &a.bias.value(), LN_EPS)?.0)
        };
        let at = past * b * heads * d;
        for (layer, bw) in w.blocks.iter().enumerate() {
            let qkv = linear(&norm(&x, &bw.ln_1)?, &bw.c_attn)?.reshape(&[b, t, 3, heads, d])?;
            // The new keys and values, position-major ([T, B, H, D]), appended to the cache.
            for (slot, cache_t) in [(1, &mut cache.k[layer]), (2, &mut cache.v[layer])] {
                let new = qkv.select(2, slot)?.permute(&[1, 0, 2, 3])?;
                cache_t.copy_from_at_(at, &new)?;
            }
            let q = qkv.select(2, 0)?.permute(&[0, 2, 1, 3])?;
            let view = |t_: &Tensor<U>| -> Result<Tensor<U>> {
                Ok(t_.narrow(0, 0, past + t)?.permute(&[1, 2, 0, 3])?)
            };
            let (k, v) = (view(&cache.k[layer])?, view(&cache.v[layer])?);
            let (out, _lse) = q.scaled_dot_product_attention_forward(&k, &v, true, None)?;
            drop((k, v)); // the views go before the next append, which is then in place
            let a = out
                .permute(&[0, 2, 1, 3])?
                .contiguous()?
                .reshape(&[b, t, c])?;
            x = (&x + &linear(&a, &bw.attn_proj)?)?;
            let hn = norm(&x, &bw.ln_2)?;
            // As the full forward computes it (Gpt::set_fused_mlp), so the decode's logits
            // match its last position.
            let h = if self.fused_mlp() {
                let (wf, bf) = (bw.c_fc.weight.value(), bw.c_fc.bias.value());
                hn.linear_gelu(&wf, Some(&bf))?.0
            } else {
                linear(&hn, &bw.c_fc)?.gelu()?
            };
            x = (&x + &linear(&h, &bw.c_proj)?)?;
        }
        cache.len = past + t;
        let last = x.narrow(1, t - 1, 1)?.contiguous()?;
        let h = last
            .layer_norm(&w.ln_f.weight.value(), &w.ln_f.bias.value(), LN_EPS)?
            .0;
        Ok(h.linear(&w.wte.value(), None)?.reshape(&[b, cfg.vocab])?)
    }
}
