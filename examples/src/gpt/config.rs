//! The model's shape: nanoGPT's `GPTConfig`, and the parameter list it implies.

use cuda_stack_nn::{NnError, Result};

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

/// LayerNorm's ε (PyTorch's default, which nanoGPT keeps).
pub const LN_EPS: f64 = 1e-5;

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
        self.parameter_shapes()
            .iter()
            .map(|(_, s)| s.iter().product::<usize>())
            .sum()
    }

    /// Every parameter's nanoGPT name and shape, in the order of
    /// [`Gpt::named_parameters`](super::Gpt::named_parameters) (see the module documentation).
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let c = self.n_embd;
        let mut v = vec![
            ("transformer.wte.weight".to_string(), vec![self.vocab, c]),
            (
                "transformer.wpe.weight".to_string(),
                vec![self.block_size, c],
            ),
        ];
        let mut put = |name: String, shape: Vec<usize>| v.push((name, shape));
        for i in 0..self.n_layer {
            let h = format!("transformer.h.{i}");
            for (layer, inp, out) in [
                ("ln_1", 0, c),
                ("attn.c_attn", c, 3 * c),
                ("attn.c_proj", c, c),
                ("ln_2", 0, c),
                ("mlp.c_fc", c, 4 * c),
                ("mlp.c_proj", 4 * c, c),
            ] {
                // LayerNorms have a [C] weight; Linear layers a [out, in] one (PyTorch's layout).
                let weight = if inp == 0 { vec![out] } else { vec![out, inp] };
                put(format!("{h}.{layer}.weight"), weight);
                put(format!("{h}.{layer}.bias"), vec![out]);
            }
        }
        put("transformer.ln_f.weight".to_string(), vec![c]);
        put("transformer.ln_f.bias".to_string(), vec![c]);
        v
    }

    /// The head dimension `n_embd / n_head`.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head.max(1)
    }

    /// Checks every size is positive, `n_embd` a multiple of `n_head` with a head dimension of
    /// at most 256 (the fused attention's limit) and dropout in `[0, 1)`.
    pub fn check(&self) -> Result<()> {
        let ok = self.vocab > 0
            && self.block_size > 0
            && self.n_layer > 0
            && self.n_head > 0
            && self.n_embd % self.n_head == 0
            && self.n_embd > 0
            && self.head_dim() <= 256
            && (0.0..1.0).contains(&self.dropout);
        if ok {
            Ok(())
        } else {
            Err(NnError::Invalid {
                what: "GptConfig",
                problem: format!(
                    "{self:?}: every size must be positive, n_embd a multiple of n_head with \
                     n_embd / n_head <= 256, and dropout in [0, 1)"
                ),
            })
        }
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
        assert_eq!(s.head_dim(), 64);
        // 6 layers of 12·384² + 13·384, two embeddings, ln_f.
        assert_eq!(
            s.parameter_count(),
            65 * 384 + 256 * 384 + 6 * (12 * 384 * 384 + 13 * 384) + 2 * 384
        );
        assert!(GptConfig { n_head: 5, ..s }.check().is_err());
        assert!(GptConfig { dropout: 1.0, ..s }.check().is_err());
        assert!(GptConfig { vocab: 0, ..s }.check().is_err());
        assert!(GptConfig {
            n_head: 1,
            n_embd: 512,
            ..s
        }
        .check()
        .is_err());
    }

    #[test]
    fn shapes_use_nanogpt_names() {
        let s = GptConfig::shakespeare_char(65).parameter_shapes();
        assert_eq!(s.len(), 2 + 6 * 12 + 2);
        assert_eq!(s[0], ("transformer.wte.weight".into(), vec![65, 384]));
        let find = |n: &str| s.iter().find(|(m, _)| m == n).map(|(_, v)| v.clone());
        assert_eq!(
            find("transformer.h.5.attn.c_attn.weight"),
            Some(vec![1152, 384])
        );
        assert_eq!(
            find("transformer.h.0.mlp.c_proj.weight"),
            Some(vec![384, 1536])
        );
        assert_eq!(find("transformer.h.0.ln_2.bias"), Some(vec![384]));
        assert_eq!(
            s.last().map(|p| p.0.as_str()),
            Some("transformer.ln_f.bias")
        );
    }
}
