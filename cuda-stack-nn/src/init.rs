//! Parameter initialisation on the host from a seed (reproducible run to run), uploaded once.

use crate::error::Result;
use cuda_stack_runtime::{GradElement, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

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
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut data: Vec<T> = Vec::with_capacity(n + 1);
    while data.len() < n {
        // u1 in (0, 1] so that ln(u1) is finite.
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        data.push(T::from_f64(std * r * c));
        data.push(T::from_f64(std * r * s));
    }
    data.truncate(n);
    Ok(Tensor::from_vec(data, shape)?)
}

/// `shape` filled with `value` (LayerNorm's `γ = 1`, `β = 0`).
pub fn constant<T: GradElement>(shape: &[usize], value: f64) -> Result<Tensor<T>> {
    let n: usize = shape.iter().product();
    Ok(Tensor::from_vec(vec![T::from_f64(value); n], shape)?)
}
