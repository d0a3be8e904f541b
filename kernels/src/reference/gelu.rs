//! GELU (tanh form) forward and backward in f64, rounded to the element type (the GPU uses
//! `sigmoid(2u)` with ex2.approx and rcp.approx in f32: compare within the tests' tolerances).

use crate::Element;

const K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
const A: f64 = 0.044715;

/// `0.5 · x · (1 + tanh(k · (x + a · x³)))` of one value.
pub fn gelu_one(x: f64) -> f64 {
    0.5 * x * (1.0 + (K * (x + A * x * x * x)).tanh())
}

/// The derivative of [`gelu_one`] at `x`.
pub fn gelu_grad_one(x: f64) -> f64 {
    let t = (K * (x + A * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K * (1.0 + 3.0 * A * x * x)
}

/// GELU of every element.
pub fn gelu<T: Element>(x: &[T]) -> Vec<T> {
    x.iter()
        .map(|v| T::from_f64(gelu_one(v.to_f64())))
        .collect()
}

/// `dy · gelu'(x)` elementwise.
pub fn gelu_bwd<T: Element>(x: &[T], dy: &[T]) -> Vec<T> {
    x.iter()
        .zip(dy)
        .map(|(v, d)| T::from_f64(d.to_f64() * gelu_grad_one(v.to_f64())))
        .collect()
}
