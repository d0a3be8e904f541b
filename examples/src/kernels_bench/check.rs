//! Correctness before speed: each kernel runs once on a small input and is compared with its
//! CPU twin in `cuda_stack_kernels::reference`; a mismatch prints FAIL and ends the program.

use super::timing::BenchResult;
use cuda_stack_driver::{DeviceBuffer, Stream};
use cuda_stack_kernels::{ops, Kernels};
use std::fmt;

/// A kernel gave a wrong result.
#[derive(Debug)]
pub struct Fail(pub String);

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FAIL {}", self.0)
    }
}

impl std::error::Error for Fail {}

/// `got == want` bit for bit (NaN matches NaN).
pub fn exact(what: &str, got: &[f32], want: &[f32]) -> BenchResult<()> {
    close(what, got, want, 0.0, 0.0)
}

/// `|got - want| <= abs + rel · |want|` elementwise (NaN matches NaN); the lengths must match.
pub fn close(what: &str, got: &[f32], want: &[f32], abs: f64, rel: f64) -> BenchResult<()> {
    if got.len() != want.len() {
        return fail(format!(
            "{what}: {} elements from the GPU, {} from the CPU reference",
            got.len(),
            want.len()
        ));
    }
    let bad = |g: f32, w: f32| {
        if g.is_nan() || w.is_nan() {
            return g.is_nan() != w.is_nan();
        }
        let (g, w) = (f64::from(g), f64::from(w));
        (g - w).abs() > abs + rel * w.abs()
    };
    let wrong: Vec<usize> = (0..got.len()).filter(|&i| bad(got[i], want[i])).collect();
    if let Some(&i) = wrong.first() {
        return fail(format!(
            "{what}: {} of {} elements differ from the CPU reference (tolerance {abs:e} + \
             {rel:e}·|want|); first at index {i}: GPU {} vs CPU {}",
            wrong.len(),
            got.len(),
            got[i],
            want[i]
        ));
    }
    Ok(())
}

/// A scalar result within `abs + rel · |want|`.
pub fn scalar(what: &str, got: f64, want: f64, abs: f64, rel: f64) -> BenchResult<()> {
    if (got - want).abs() <= abs + rel * want.abs() {
        Ok(())
    } else {
        fail(format!(
            "{what}: GPU {got} vs CPU reference {want} (tolerance {abs:e} + {rel:e}·|want|)"
        ))
    }
}

fn fail(msg: String) -> BenchResult<()> {
    let f = Fail(msg);
    println!("{f}");
    Err(Box::new(f))
}

/// `n` uniform floats in [0, 1) on the device (Philox stream `seed`) and their host copy.
pub fn uniform(
    k: &Kernels,
    s: &Stream,
    n: usize,
    seed: u64,
) -> BenchResult<(DeviceBuffer<f32>, Vec<f32>)> {
    let mut d = s.alloc_zeros::<f32>(n)?;
    ops::fill_uniform(k, s, &mut d, seed, 0)?;
    let h = s.clone_dtoh(&d)?;
    Ok((d, h))
}

/// `n` uniform floats in [-1, 1) (`2u - 1` by `fill` and `axpy`), so signs vary, and their
/// host copy.
pub fn signed(
    k: &Kernels,
    s: &Stream,
    n: usize,
    seed: u64,
) -> BenchResult<(DeviceBuffer<f32>, Vec<f32>)> {
    let (u, _) = uniform(k, s, n, seed)?;
    let mut d = s.alloc_zeros::<f32>(n)?;
    ops::fill(k, s, &mut d, -1.0)?;
    ops::axpy(k, s, 2.0, &u, &mut d)?;
    let h = s.clone_dtoh(&d)?;
    Ok((d, h))
}

/// A zeroed device buffer of `n` floats (outputs of checks).
pub fn zeros(s: &Stream, n: usize) -> BenchResult<DeviceBuffer<f32>> {
    Ok(s.alloc_zeros::<f32>(n)?)
}
