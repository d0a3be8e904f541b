//! Dropout with the Philox mask (bit-exact with the kernel).

use super::random::philox_u32;
use crate::{Compute, Element};

/// `out[i] = u_i >= p ? x[i] · (1 / (1 − p)) : 0` with `u_i = (word >> 8) · 2^-24` of Philox
/// word `offset + i` under `seed`; `p` compared in f32, the scale rounded to the compute type.
pub fn dropout<T: Element>(x: &[T], p: f64, seed: u64, offset: u64) -> Vec<T> {
    let words = philox_u32(x.len(), seed, offset);
    let scale = <T::Scalar as Compute>::of_f64(1.0 / (1.0 - p));
    x.iter()
        .zip(words)
        .map(|(&v, w)| {
            let u = (w >> 8) as f32 * (1.0 / (1u32 << 24) as f32);
            if u >= p as f32 {
                T::from_scalar(Compute::mul(v.to_scalar(), scale))
            } else {
                T::from_scalar(T::Scalar::zero())
            }
        })
        .collect()
}
