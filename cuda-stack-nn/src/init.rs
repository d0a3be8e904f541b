//! Parameter initialisation on the host from a seed (reproducible run to run), uploaded once.

use crate::error::Result;
use cuda_stack_runtime::{GradElement, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// `shape` filled with `U(−bound, bound)` from a xoshiro256++ stream seeded by `seed`.
/// PyTorch's `nn.Linear` default (`kaiming_uniform_(a=√5)` for the weight, and the bias rule)
/// is this with `bound = 1 / √fan_in`.
pub fn uniform<T: GradElement>(shape: &[usize], bound: f64, seed: u64) -> Result<Tensor<T>> {
    let n: usize = shape.iter().product();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let data: Vec<T> = (0..n)
        .map(|_| T::from_f64(rng.random_range(-bound..=bound)))
        .collect();
    Ok(Tensor::from_vec(data, shape)?)
}

/// `shape` filled with `N(0, std²)` from a xoshiro256++ stream seeded by `seed` (Box–Muller
/// on pairs of uniforms in f64). GPT-2 initialises its embeddings and linear weights with
/// `std = 0.02`.
pub fn normal<T: GradElement>(shape: &[usize], std: f64, seed: u64) -> Result<Tensor<T>> {
    let n: usize = shape.iter().product();
    Ok(Tensor::from_vec(normal_host(n, std, seed), shape)?)
}

/// [`normal`]'s `n` values on the host.
fn normal_host<T: GradElement>(n: usize, std: f64, seed: u64) -> Vec<T> {
    let pairs = n.div_ceil(2);
    // The stream is drawn in order (cheap), but the transform (ln, sqrt, sin_cos: most of the
    // time) runs on every core: the generator's state is kept at each chunk's start, and each
    // chunk replays its draws from there. The values are those of one sequential pass.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut starts = Vec::with_capacity(pairs.div_ceil(NORMAL_CHUNK_PAIRS));
    for c in 0..pairs.div_ceil(NORMAL_CHUNK_PAIRS) {
        starts.push(rng.clone());
        let len = NORMAL_CHUNK_PAIRS.min(pairs - c * NORMAL_CHUNK_PAIRS);
        for _ in 0..2 * len {
            let _: f64 = rng.random();
        }
    }
    let mut data: Vec<T> = vec![T::from_f64(0.0); 2 * pairs];
    data.par_chunks_mut(2 * NORMAL_CHUNK_PAIRS)
        .zip(starts.into_par_iter())
        .for_each(|(out, mut rng)| {
            for pair in out.chunks_exact_mut(2) {
                // u1 in (0, 1] so that ln(u1) is finite.
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random::<f64>();
                let r = (-2.0 * u1.ln()).sqrt();
                let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
                pair[0] = T::from_f64(std * r * c);
                pair[1] = T::from_f64(std * r * s);
            }
        });
    data.truncate(n);
    data
}

/// Pairs of normal values per parallel chunk of [`normal`].
const NORMAL_CHUNK_PAIRS: usize = 1 << 16;

/// `shape` filled with `value` (LayerNorm's `γ = 1`, `β = 0`).
pub fn constant<T: GradElement>(shape: &[usize], value: f64) -> Result<Tensor<T>> {
    let n: usize = shape.iter().product();
    Ok(Tensor::from_vec(vec![T::from_f64(value); n], shape)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel chunks give the values of one sequential Box–Muller pass, at lengths
    /// around the chunk boundaries (odd lengths too).
    #[test]
    fn normal_in_chunks_equals_one_sequential_pass() {
        for n in [
            0,
            1,
            2,
            3,
            2 * NORMAL_CHUNK_PAIRS - 1,
            2 * NORMAL_CHUNK_PAIRS + 1,
            5 * NORMAL_CHUNK_PAIRS + 3,
        ] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
            let mut want: Vec<f32> = Vec::with_capacity(n + 1);
            while want.len() < n {
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random::<f64>();
                let r = (-2.0 * u1.ln()).sqrt();
                let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
                want.push((0.02 * r * c) as f32);
                want.push((0.02 * r * s) as f32);
            }
            want.truncate(n);
            let got: Vec<f32> = normal_host(n, 0.02, 7);
            assert_eq!(got.len(), n);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "n = {n}: the chunked values differ from the sequential pass"
            );
        }
    }
}
