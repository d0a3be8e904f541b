//! Global-norm clipping in f64.

use crate::Element;

/// `(norm, scale)`: the 2-norm of all the tensors' elements together, and
/// `min(1, max_norm / (norm + 1e-6))` (NaN for a NaN norm).
pub fn clip_grad_norm<T: Element>(tensors: &[&[T]], max_norm: f64) -> (f64, f64) {
    let ss: f64 = tensors
        .iter()
        .flat_map(|t| t.iter())
        .map(|v| v.to_f64() * v.to_f64())
        .sum();
    let norm = ss.sqrt();
    let c = max_norm / (norm + 1e-6);
    (norm, if c < 1.0 || c.is_nan() { c } else { 1.0 })
}
