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
