//! Test data (from `op_support`'s xorshift64*) and the comparisons (tolerances, bits).

use super::*;

pub(crate) fn data<T: Element>(seed: u64, n: usize, scale: f64) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::from_f64(scale * rng.unit())).collect()
}

/// `|got − want| <= tol(i, want)` (NaN matches NaN).
pub(crate) fn check<T: Element>(
    what: &str,
    got: &[T],
    want: &[T],
    tol: impl Fn(usize, f64) -> f64,
) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    for i in 0..got.len() {
        let (g, w) = (got[i].to_f64(), want[i].to_f64());
        if g.is_nan() && w.is_nan() {
            continue;
        }
        let t = tol(i, w);
        ensure!(
            (g - w).abs() <= t,
            "{what}: at {i}: got {g}, expected {w} (tolerance {t:e})"
        );
    }
    Ok(())
}

/// Bit-for-bit equality of two runs (or of two kernels).
pub(crate) fn check_bits<T: DeviceRepr>(what: &str, a: &[T], b: &[T]) -> TestResult {
    let (x, y): (&[u8], &[u8]) = (
        cuda_stack_driver::bytemuck::cast_slice(a),
        cuda_stack_driver::bytemuck::cast_slice(b),
    );
    ensure!(x == y, "{what}: not bit-identical");
    Ok(())
}

pub(crate) fn scalars_f64<S: Compute>(v: &[S]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}
