//! What a training step costs: the device memory it needs (estimated before anything is
//! allocated, so a configuration that does not fit is refused with the figure) and the model
//! FLOPs per token (for MFU).

use super::config::GptConfig;

/// An estimate of the device memory one training step needs, by consumer (bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryEstimate {
    /// f32 master weights.
    pub parameters: usize,
    /// f32 gradients.
    pub gradients: usize,
    /// AdamW's two f32 moments.
    pub optimizer: usize,
    /// The weights cast to the compute dtype, and their gradients there (none in f32).
    pub compute_copies: usize,
    /// What the forward keeps for the backward: per layer and token about 17·C values (the
    /// block's input, LayerNorm outputs, q|k|v, the attention's output before and after its
    /// transpose, the residual between, the MLP's 4C hidden before and after GELU) plus the
    /// embeddings' and the final LayerNorm's, in the compute dtype.
    pub activations: usize,
    /// The logits (`[B·T, vocab]`, compute dtype), counted once: their gradient is written
    /// over them ([`cuda_stack_nn::Var::linear_cross_entropy`] in [`super::Gpt::loss_with`]).
    pub logits: usize,
    /// Temporaries of the backward (a few `[B·T, 4C]` gradients at a time) and GEMM workspace.
    pub workspace: usize,
}

impl MemoryEstimate {
    /// The estimate for `config` at `batch` sequences of `block_size` tokens, computing in a
    /// dtype of `compute_bytes` bytes per element (4 for f32, 2 for bf16).
    pub fn new(config: &GptConfig, batch: usize, compute_bytes: usize) -> MemoryEstimate {
        let p = config.parameter_count();
        let (c, v) = (config.n_embd, config.vocab);
        let tokens = batch * config.block_size;
        let half = compute_bytes < 4;
        MemoryEstimate {
            parameters: 4 * p,
            gradients: 4 * p,
            optimizer: 8 * p,
            compute_copies: if half { 2 * 2 * p } else { 0 },
            activations: tokens * (config.n_layer * 17 * c + 4 * c) * compute_bytes,
            logits: tokens * v * compute_bytes,
            workspace: 4 * tokens * 4 * c * compute_bytes + (256 << 20),
        }
    }

    /// The sum, with 10 % for the caching allocator's rounding to its size classes.
    pub fn total(&self) -> usize {
        let sum = self.parameters
            + self.gradients
            + self.optimizer
            + self.compute_copies
            + self.activations
            + self.logits
            + self.workspace;
        sum + sum / 10
    }
}

/// Model FLOPs of one training token (forward and backward), nanoGPT's `estimate_mfu` (after
/// PaLM's appendix B): `6·N + 12·L·C·T`, with `N` the parameters less the position table
/// (the embedding lookups multiply nothing; the tied classifier's GEMM is counted through
/// `wte`) and the attention's `QKᵀ` and `PV` counted over the whole `T × T` square (not halved
/// for the causal mask, as nanoGPT and PaLM count).
pub fn flops_per_token(config: &GptConfig) -> f64 {
    let n = (config.parameter_count() - config.block_size * config.n_embd) as f64;
    6.0 * n + 12.0 * (config.n_layer * config.n_embd * config.block_size) as f64
}

/// The dense bf16 tensor-core peak (FLOP/s) of a GPU of compute capability `major.minor` with
/// `sms` multiprocessors, from NVIDIA's data sheets: H100 SXM and H200 (9.0, 132 SMs) 989.4
/// TFLOP/s; H100 PCIe (9.0, 114 SMs) 756.5; A100 (8.0, 108 SMs) 312. `None` for others (pass
/// the figure yourself).
pub fn bf16_dense_peak(major: i32, minor: i32, sms: u32) -> Option<f64> {
    match (major, minor, sms) {
        (9, 0, 132) => Some(989.4e12),
        (9, 0, 114) => Some(756.5e12),
        (8, 0, 108) => Some(312e12),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_figures() {
        let c = GptConfig::gpt2_124m();
        // nanoGPT: N = 123.69M at vocab 50257 (124.04M at 50304), 12·12·768·1024 for attention.
        let f = flops_per_token(&c);
        let n = 123_653_376.0 + 47.0 * 768.0;
        assert_eq!(f, 6.0 * n + 12.0 * 12.0 * 768.0 * 1024.0);
        let m = MemoryEstimate::new(&c, 16, 2);
        let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
        // Parameters, gradients and moments: 16 bytes per parameter, about 1.86 GiB.
        assert!((gib(m.parameters + m.gradients + m.optimizer) - 1.855).abs() < 0.01);
        // The logits at batch 16 (their gradient written over them): 16384 · 50304 · 2 bytes
        // = 1.54 GiB.
        assert!((gib(m.logits) - 1.535).abs() < 0.01);
        // The whole step lands between torch.compile's 8.5 GiB and eager's 14.5 GiB peak.
        assert!(gib(m.total()) > 8.5 && gib(m.total()) < 15.0, "{m:?}");
        // Half the batch, less memory; f32 compute, more.
        assert!(MemoryEstimate::new(&c, 8, 2).total() < m.total());
        assert!(MemoryEstimate::new(&c, 16, 4).total() > m.total());
        assert_eq!(bf16_dense_peak(9, 0, 132), Some(989.4e12));
        assert_eq!(bf16_dense_peak(7, 5, 40), None);
    }
}
