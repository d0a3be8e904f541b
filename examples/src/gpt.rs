//! A GPT-2 model on the crates' layers (issue 33's `train_gpt` builds on it): nanoGPT's
//! architecture, parameter names and initialisation, so a checkpoint moves between this model
//! and nanoGPT's `GPT` in both directions ([`cuda_stack_nn::checkpoint`]).
//!
//! ```text
//! idx [B, T] ─ wte ─┐
//!        arange(T) ─ wpe ─ + ─ dropout ─ n_layer × block ─ ln_f ─ · wteᵀ (tied) ─ logits [B, T, V]
//! block:  x + c_proj(attn(ln_1(x)))  then  x + c_proj(gelu(c_fc(ln_2(x))))   (pre-LayerNorm)
//! ```
//!
//! Names (`named_parameters`) are nanoGPT's `state_dict` keys: `transformer.wte.weight`,
//! `transformer.wpe.weight`, `transformer.h.{i}.ln_1.{weight,bias}`,
//! `transformer.h.{i}.attn.c_attn.{weight,bias}` (the fused q|k|v projection, nanoGPT's column
//! order), `…attn.c_proj`, `…ln_2`, `…mlp.c_fc`, `…mlp.c_proj`, `transformer.ln_f.{weight,bias}`.
//! The classifier is tied to `wte` (nanoGPT's `lm_head.weight` is the same tensor, so it is not
//! listed twice). Initialisation as nanoGPT's `_init_weights`: every Linear and embedding weight
//! N(0, 0.02²), biases 0, LayerNorms 1 and 0, and each residual projection (`c_proj`)
//! N(0, (0.02/√(2·n_layer))²).

use cuda_stack_nn::{
    init, Dropout, Embedding, GradElement, LayerNorm, Linear, Module, MultiHeadAttention, NnError,
    Result, Var,
};
use cuda_stack_runtime::{AttentionElement, Tensor};

/// A model's shape and regularisation (nanoGPT's `GPTConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GptConfig {
    /// Vocabulary size (GPT-2's 50257 padded to 50304 for the GEMMs).
    pub vocab: usize,
    /// Context length.
    pub block_size: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block.
    pub n_head: usize,
    /// Width.
    pub n_embd: usize,
    /// Dropout probability (0 for evaluation and parity checks).
    pub dropout: f64,
}

impl GptConfig {
    /// nanoGPT's `shakespeare_char`: 6 layers, 6 heads, 384 wide, context 256, dropout 0.2.
    pub fn shakespeare_char(vocab: usize) -> GptConfig {
        GptConfig {
            vocab,
            block_size: 256,
            n_layer: 6,
            n_head: 6,
            n_embd: 384,
            dropout: 0.2,
        }
    }

    /// GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024, vocabulary 50257 padded to
    /// 50304.
    pub fn gpt2_124m() -> GptConfig {
        GptConfig {
            vocab: 50304,
            block_size: 1024,
            n_layer: 12,
            n_head: 12,
            n_embd: 768,
            dropout: 0.0,
        }
    }

    /// Parameters in the model (the tied classifier counted once).
    pub fn parameter_count(&self) -> usize {
        let c = self.n_embd;
        let per_block =
            2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
        self.vocab * c + self.block_size * c + self.n_layer * per_block + 2 * c
    }

    fn check(&self) -> Result<()> {
        let ok = self.vocab > 0
            && self.block_size > 0
            && self.n_layer > 0
            && self.n_head > 0
            && self.n_embd % self.n_head == 0
            && (0.0..1.0).contains(&self.dropout);
        if ok {
            Ok(())
        } else {
            Err(NnError::Invalid {
                what: "GptConfig",
                problem: format!(
                    "{self:?}: every size must be positive, n_embd a multiple of n_head and \
                     dropout in [0, 1)"
                ),
            })
        }
    }
}

/// One pre-LayerNorm transformer block.
pub struct Block<T: GradElement + AttentionElement> {
    ln_1: LayerNorm<T>,
    attn: MultiHeadAttention<T>,
    ln_2: LayerNorm<T>,
    c_fc: Linear<T>,
    c_proj: Linear<T>,
    drop: Dropout,
}

/// nanoGPT's GPT: see the module documentation.
pub struct Gpt<T: GradElement + AttentionElement> {
    config: GptConfig,
    wte: Embedding<T>,
    wpe: Embedding<T>,
    drop: Dropout,
    blocks: Vec<Block<T>>,
    ln_f: LayerNorm<T>,
}

/// Sets `v` to N(0, std²) drawn from `seed`.
fn normal_<T: GradElement>(v: &Var<T>, std: f64, seed: u64) -> Result<()> {
    v.copy_from_(&init::normal::<T>(&v.shape(), std, seed)?)
}

/// Sets `v` to zeros.
fn zeros_<T: GradElement>(v: &Var<T>) -> Result<()> {
    v.copy_from_(&init::constant::<T>(&v.shape(), 0.0)?)
}

impl<T: GradElement + AttentionElement> Gpt<T> {
    /// A model of `config` initialised from `seed` as nanoGPT initialises one (the values
    /// differ from PyTorch's generator: load a checkpoint for identical weights).
    pub fn new(config: GptConfig, seed: u64) -> Result<Gpt<T>> {
        config.check()?;
        let c = config.n_embd;
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s
        };
        let wte = Embedding::new(config.vocab, c, next())?;
        let wpe = Embedding::new(config.block_size, c, next())?;
        let proj_std = 0.02 / ((2 * config.n_layer) as f64).sqrt();
        let mut blocks = Vec::with_capacity(config.n_layer);
        for _ in 0..config.n_layer {
            let attn = MultiHeadAttention::new(c, config.n_head, true, next())?;
            let c_fc = Linear::new(c, 4 * c, next())?;
            let c_proj = Linear::new(4 * c, c, next())?;
            for (lin, std) in [
                (attn.qkv(), 0.02),
                (attn.proj(), proj_std),
                (&c_fc, 0.02),
                (&c_proj, proj_std),
            ] {
                normal_(lin.weight(), std, next())?;
                if let Some(b) = lin.bias() {
                    zeros_(b)?;
                }
            }
            blocks.push(Block {
                ln_1: LayerNorm::new(c, 1e-5)?,
                attn,
                ln_2: LayerNorm::new(c, 1e-5)?,
                c_fc,
                c_proj,
                drop: Dropout::new(config.dropout, next())?,
            });
        }
        Ok(Gpt {
            config,
            wte,
            wpe,
            drop: Dropout::new(config.dropout, next())?,
            blocks,
            ln_f: LayerNorm::new(c, 1e-5)?,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// Training mode on (dropout active) or off.
    pub fn set_training(&self, training: bool) {
        self.drop.set_training(training);
        for b in &self.blocks {
            b.drop.set_training(training);
        }
    }

    /// The logits `[B, T, vocab]` for token ids `idx` (`[B, T]`, `T ≤ block_size`).
    pub fn forward(&self, idx: &Tensor<i32>) -> Result<Var<T>> {
        let &[_, t] = idx.shape() else {
            return Err(NnError::Invalid {
                what: "Gpt::forward",
                problem: format!("token ids of shape {:?}: they must be [B, T]", idx.shape()),
            });
        };
        if t == 0 || t > self.config.block_size {
            return Err(NnError::Invalid {
                what: "Gpt::forward",
                problem: format!(
                    "a sequence of {t} tokens: between 1 and block_size = {}",
                    self.config.block_size
                ),
            });
        }
        let positions: Vec<i32> = (0..t as i32).collect();
        let pos = Tensor::from_slice_on(idx.device(), &positions, &[t])?;
        let x = self
            .wte
            .forward_ids(idx)?
            .add(&self.wpe.forward_ids(&pos)?)?;
        let mut x = self.drop.forward(&x)?;
        for b in &self.blocks {
            let a = b.attn.forward(&b.ln_1.forward(&x)?)?;
            x = x.add(&b.drop.forward(&a)?)?;
            let h = b.c_fc.forward(&b.ln_2.forward(&x)?)?.gelu()?;
            let m = b.c_proj.forward(&h)?;
            x = x.add(&b.drop.forward(&m)?)?;
        }
        let x = self.ln_f.forward(&x)?;
        x.linear(self.wte.weight(), None)
    }

    /// The mean cross-entropy of the next-token predictions: `forward(idx)` against `targets`
    /// (`[B, T]`), through the fused classifier.
    pub fn loss(&self, idx: &Tensor<i32>, targets: &Tensor<i32>) -> Result<Var<T>> {
        let logits = self.forward(idx)?;
        let (b, t) = (idx.shape()[0], idx.shape()[1]);
        if targets.shape() != [b, t] {
            return Err(NnError::Invalid {
                what: "Gpt::loss",
                problem: format!(
                    "targets of shape {:?} for ids of shape [{b}, {t}]",
                    targets.shape()
                ),
            });
        }
        logits
            .reshape(&[b * t, self.config.vocab])?
            .fused_cross_entropy(&targets.reshape(&[b * t])?)
    }

    /// Every parameter under nanoGPT's name (see the module documentation).
    pub fn named_parameters(&self) -> Vec<(String, Var<T>)> {
        let mut v = vec![
            (
                "transformer.wte.weight".to_string(),
                self.wte.weight().clone(),
            ),
            (
                "transformer.wpe.weight".to_string(),
                self.wpe.weight().clone(),
            ),
        ];
        let mut put = |prefix: String, m: &dyn Module<T>| {
            for (n, p) in m.named_parameters() {
                v.push((format!("{prefix}.{n}"), p));
            }
        };
        for (i, b) in self.blocks.iter().enumerate() {
            let h = format!("transformer.h.{i}");
            put(format!("{h}.ln_1"), &b.ln_1);
            put(format!("{h}.attn.c_attn"), b.attn.qkv());
            put(format!("{h}.attn.c_proj"), b.attn.proj());
            put(format!("{h}.ln_2"), &b.ln_2);
            put(format!("{h}.mlp.c_fc"), &b.c_fc);
            put(format!("{h}.mlp.c_proj"), &b.c_proj);
        }
        put("transformer.ln_f".to_string(), &self.ln_f);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_and_counts() {
        // nanoGPT prints "number of parameters: 123.69M" for GPT-2 124M, excluding wpe
        // (its get_num_params(non_embedding=True)); with wpe: 124.48M at vocab 50304.
        let c = GptConfig::gpt2_124m();
        let n = c.parameter_count();
        assert_eq!(
            n - c.block_size * c.n_embd,
            123_653_376 + (50304 - 50257) * 768
        );
        assert!(c.check().is_ok());
        let s = GptConfig::shakespeare_char(65);
        assert_eq!(s.n_embd / s.n_head, 64);
        assert!(GptConfig { n_head: 5, ..s }.check().is_err());
        assert!(GptConfig { dropout: 1.0, ..s }.check().is_err());
    }
}
