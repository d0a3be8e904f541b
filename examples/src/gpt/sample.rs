//! Text generation as nanoGPT's `sample.py` does it: the last position's logits divided by a
//! temperature, all but the `top_k` largest set to −∞, a softmax, one draw — with a
//! [`KvCache`], so each new token costs one position, not the whole prefix.

use super::forward::GptWeights;
use super::kv_cache::KvCache;
use super::model::Gpt;
use cuda_stack_nn::{no_grad, GradElement, NnError, Result};
use cuda_stack_runtime::{AttentionElement, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// How to sample (nanoGPT's `sample.py` defaults: 500 new tokens, temperature 0.8, top-k 200).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleConfig {
    /// New tokens to generate.
    pub tokens: usize,
    /// Keep the `top_k` largest logits (at least 1; more than the vocabulary keeps all).
    pub top_k: usize,
    /// Logits are divided by it; 0 takes the most likely token (greedy).
    pub temperature: f64,
    /// The draws' seed.
    pub seed: u64,
}

impl Default for SampleConfig {
    fn default() -> SampleConfig {
        SampleConfig {
            tokens: 500,
            top_k: 200,
            temperature: 0.8,
            seed: 1337,
        }
    }
}

/// One token drawn from `logits` (one position's, any length ≥ 1): nanoGPT's rule
/// (`logits / temperature`; values below the `top_k`-th largest set to −∞, so ties with it
/// stay; softmax; a multinomial draw), or the first largest when `temperature` is 0. An error
/// for no logits, `top_k` 0, a negative or non-finite temperature, or logits that are all NaN.
pub fn sample_top_k(
    logits: &[f32],
    top_k: usize,
    temperature: f64,
    rng: &mut impl Rng,
) -> std::result::Result<usize, String> {
    if logits.is_empty() || top_k == 0 || !(temperature >= 0.0 && temperature.is_finite()) {
        return Err(format!(
            "sampling from {} logits with top_k {top_k} and temperature {temperature}: need at \
             least one logit, top_k >= 1 and a finite temperature >= 0",
            logits.len()
        ));
    }
    let argmax = logits
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .fold(None, |best: Option<(usize, f32)>, (i, &v)| match best {
            Some((_, b)) if b >= v => best,
            _ => Some((i, v)),
        })
        .ok_or("every logit is NaN")?;
    if temperature == 0.0 {
        return Ok(argmax.0);
    }
    let mut sorted: Vec<f32> = logits.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let kth = sorted[top_k.min(sorted.len()) - 1];
    let max = f64::from(argmax.1);
    // Weights exp((l − max) / temperature) of the kept logits (the softmax's numerators).
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| {
            if l.is_nan() || l < kth {
                0.0
            } else {
                ((f64::from(l) - max) / temperature).exp()
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return Ok(i);
        }
        u -= w;
    }
    // Rounding left `u` past the last weight: the last kept token.
    Ok(weights.iter().rposition(|&w| w > 0.0).unwrap_or(argmax.0))
}

impl<T: GradElement + AttentionElement + 'static> Gpt<T> {
    /// `config.tokens` new tokens after `prompt` (at least one token), computed in `U`
    /// (dropout off for the duration; the model's training mode is restored). The prompt is
    /// prefilled in one pass; each new token is one decode step on the [`KvCache`]. When the
    /// cache is full (`block_size` positions), it is refilled from the last `block_size / 2`
    /// tokens (one prefill of half a context every half context), since the learned positions
    /// stop at `block_size` — where nanoGPT recomputes the last `block_size` tokens for every
    /// new one, this conditions on between half a context and a whole one.
    pub fn generate<U: GradElement + AttentionElement + 'static>(
        &self,
        prompt: &[i32],
        config: &SampleConfig,
        training_mode_after: bool,
    ) -> std::result::Result<Vec<i32>, Box<dyn std::error::Error>> {
        if prompt.is_empty() {
            return Err("generate: the prompt needs at least one token".into());
        }
        if let Some(bad) = prompt
            .iter()
            .find(|&&t| t < 0 || t as usize >= self.config.vocab)
        {
            return Err(format!(
                "generate: prompt token {bad} is outside the vocabulary of {}",
                self.config.vocab
            )
            .into());
        }
        self.set_training(false);
        let out = no_grad(|| self.generate_inner::<U>(prompt, config));
        self.set_training(training_mode_after);
        out
    }

    fn generate_inner<U: GradElement + AttentionElement + 'static>(
        &self,
        prompt: &[i32],
        config: &SampleConfig,
    ) -> std::result::Result<Vec<i32>, Box<dyn std::error::Error>> {
        let w: GptWeights<U> = self.weights_as::<U>()?;
        let block = self.config.block_size;
        let mut cache = KvCache::<U>::new(&self.config, 1)?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        let mut seq = prompt.to_vec();
        let mut out = Vec::with_capacity(config.tokens);
        let prefill = |seq: &[i32], keep: usize, cache: &mut KvCache<U>| -> Result<Tensor<U>> {
            cache.clear();
            let ctx = &seq[seq.len() - keep.min(seq.len())..];
            let ids = Tensor::from_slice(ctx, &[1, ctx.len()])?;
            self.forward_cached(&w, &ids, cache)
        };
        let mut logits = prefill(&seq, block, &mut cache)?;
        for _ in 0..config.tokens {
            let row = logits.to_dtype::<f32>()?.to_vec()?;
            let next = sample_top_k(&row, config.top_k, config.temperature, &mut rng)? as i32;
            seq.push(next);
            out.push(next);
            if out.len() == config.tokens {
                break;
            }
            logits = if cache.len() == cache.capacity() {
                prefill(&seq, (block / 2).max(1), &mut cache)?
            } else {
                let ids = Tensor::from_slice(&[next], &[1, 1])?;
                self.forward_cached(&w, &ids, &mut cache)?
            };
        }
        Ok(out)
    }
}

/// An error for a sampling request the model cannot serve.
pub fn check_sample_config(config: &SampleConfig) -> Result<()> {
    if config.top_k == 0 || !(config.temperature >= 0.0 && config.temperature.is_finite()) {
        return Err(NnError::Invalid {
            what: "SampleConfig",
            problem: format!("{config:?}: top_k must be >= 1 and temperature finite and >= 0"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_k_largest_and_greedy_takes_the_first_max() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let logits = [0.0, 5.0, 1.0, 5.0, -3.0, 4.0];
        assert_eq!(sample_top_k(&logits, 3, 0.0, &mut rng), Ok(1));
        // top-1: only the (tied) largest can come out.
        for _ in 0..200 {
            let i = sample_top_k(&logits, 1, 1.0, &mut rng).unwrap();
            assert!(i == 1 || i == 3, "{i}");
        }
        // top-3 keeps 5, 5 and 4; the others never come out, all three do.
        let mut seen = [0usize; 6];
        for _ in 0..3000 {
            seen[sample_top_k(&logits, 3, 1.0, &mut rng).unwrap()] += 1;
        }
        assert_eq!((seen[0], seen[2], seen[4]), (0, 0, 0), "{seen:?}");
        assert!(seen[1] > 0 && seen[3] > 0 && seen[5] > 0, "{seen:?}");
        // Frequencies follow the softmax: e^5 : e^5 : e^4, within sampling noise.
        let p4 = (4.0f64).exp() / (2.0 * (5.0f64).exp() + (4.0f64).exp());
        let f4 = seen[5] as f64 / 3000.0;
        assert!((f4 - p4).abs() < 0.03, "{f4} vs {p4}");
        // A k beyond the vocabulary keeps everything; a low temperature sharpens.
        let mut any_small = false;
        for _ in 0..3000 {
            any_small |= sample_top_k(&logits, 200, 1.0, &mut rng).unwrap() == 0;
        }
        assert!(any_small);
        for _ in 0..100 {
            let i = sample_top_k(&logits, 200, 0.01, &mut rng).unwrap();
            assert!(i == 1 || i == 3);
        }
    }

    #[test]
    fn same_seed_same_draws_and_bad_requests_are_errors() {
        let logits: Vec<f32> = (0..65).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let draw = |seed| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            (0..50)
                .map(|_| sample_top_k(&logits, 200, 0.8, &mut rng).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert!(sample_top_k(&[], 1, 1.0, &mut rng).is_err());
        assert!(sample_top_k(&[1.0], 0, 1.0, &mut rng).is_err());
        assert!(sample_top_k(&[1.0], 1, -1.0, &mut rng).is_err());
        assert!(sample_top_k(&[1.0], 1, f64::NAN, &mut rng).is_err());
        assert!(sample_top_k(&[f32::NAN, f32::NAN], 1, 1.0, &mut rng).is_err());
        assert!(check_sample_config(&SampleConfig::default()).is_ok());
        assert!(check_sample_config(&SampleConfig {
            top_k: 0,
            ..SampleConfig::default()
        })
        .is_err());
    }
}
