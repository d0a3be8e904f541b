//! Reductions. Sums and means are computed in f64 (the GPU's order differs, so compare with a
//! tolerance scaled by `Σ|x|`); maxima and the i32 sum are exact.

use crate::{Compute, Element};

/// `Σ x` in f64 (0 for empty).
pub fn sum<T: Element>(x: &[T]) -> f64 {
    x.iter().map(|v| v.to_f64()).sum()
}

/// `Σ x` of i32 values in i64: exactly what `sum::<i32>` gives.
pub fn sum_i32(x: &[i32]) -> i64 {
    x.iter().map(|&v| i64::from(v)).sum()
}

/// `Σ x / n` in f64 (NaN for empty).
pub fn mean<T: Element>(x: &[T]) -> f64 {
    sum(x) / x.len() as f64
}

/// The kernels' max in the compute type: NaN if any element is NaN, -inf (`i32::MIN`) for empty.
pub fn max<T: Element>(x: &[T]) -> T::Scalar {
    x.iter()
        .fold(<T::Scalar as Compute>::max_identity(), |acc, v| {
            Compute::max_nan(acc, v.to_scalar())
        })
}

/// Row sums of a row-major `[rows, cols]` array, in f64.
pub fn rows_sum<T: Element>(x: &[T], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| sum(&x[r * cols..(r + 1) * cols]))
        .collect()
}

/// Row maxima of a row-major `[rows, cols]` array (exact).
pub fn rows_max<T: Element>(x: &[T], rows: usize, cols: usize) -> Vec<T::Scalar> {
    (0..rows)
        .map(|r| max(&x[r * cols..(r + 1) * cols]))
        .collect()
}
