//! The CPU side of a CPU-vs-GPU comparison, done the way a fast CPU library does it: normal
//! samples from a fast seedable generator (xoshiro256++) through `rand_distr`'s ziggurat
//! `StandardNormal`, and the add, both on every core with `rayon`, into preallocated buffers.
//!
//! It is not bit-identical to the GPU's `randn` (that is Philox 4×32-10 with Box–Muller; its CPU
//! twin, `cuda_stack_kernels::reference::fill_normal`, is kept for checking the GPU's numbers, and is
//! a scalar single-threaded loop that would make the GPU look thousands of times faster than
//! it is).

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// Elements each rayon task fills (large enough that scheduling costs nothing).
const CHUNK: usize = 1 << 16;

/// What the CPU side is, for the programs' output.
pub fn describe() -> String {
    format!(
        "CPU: rand_distr StandardNormal (ziggurat) over xoshiro256++ and the add, rayon on {} threads",
        rayon::current_num_threads()
    )
}

/// Fills `out` with standard normal samples; chunk `i` of 65536 elements has its own
/// generator seeded from `(seed, i)`, so the result does not depend on the thread count.
pub fn fill_normal(out: &mut [f32], seed: u64) {
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            for v in chunk {
                *v = rng.sample(StandardNormal);
            }
        });
}

/// `c = a + b` elementwise on every core (`a`, `b` and `c` of one length).
pub fn add(a: &[f32], b: &[f32], c: &mut [f32]) {
    c.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK)))
        .for_each(|(c, (a, b))| {
            for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
                *c = a + b;
            }
        });
}

/// Seed 000's CPU step: `a = randn(n)`, `b = randn(n)`, `c = a + b`, into fresh buffers.
pub fn randn_add(n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut a = vec![0f32; n];
    let mut b = vec![0f32; n];
    let mut c = vec![0f32; n];
    fill_normal(&mut a, 1);
    fill_normal(&mut b, 2);
    add(&a, &b, &mut c);
    (a, b, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_samples_look_normal_and_the_add_adds() {
        let n = 1 << 18;
        let (a, b, c) = randn_add(n);
        let mean = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        let var = a
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
        assert_ne!(a[..64], b[..64], "two seeds, two streams");
        assert!(c
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(c, (a, b))| *c == a + b));
        let mut again = vec![0f32; n];
        fill_normal(&mut again, 1);
        assert_eq!(again, a, "deterministic for a seed");
    }
}
