//! Checking GPU results against CPU references: bit for bit, or within a tolerance, with an
//! error that says what differed and where.

use std::fmt;

/// A GPU result that is not what the CPU reference says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch(String);

impl Mismatch {
    /// A mismatch described by `message`.
    pub fn new(message: impl Into<String>) -> Mismatch {
        Mismatch(message.into())
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

/// Whether `got` and `want` have the same length and the same bits in every element.
pub fn bit_identical(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits())
}

/// `got == want` bit for bit (so `-0.0 != 0.0`, and a NaN matches only the same NaN); otherwise
/// an error naming `what`, the lengths or the first differing element (value and bits) and how
/// many elements differ.
pub fn same_bits(what: &str, got: &[f32], want: &[f32]) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        )));
    }
    let mut bad = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g.to_bits() != w.to_bits());
    let Some((i, _)) = bad.next() else {
        return Ok(());
    };
    Err(Mismatch(format!(
        "{what}: element {i} is {:e} ({:#010x}) but should be {:e} ({:#010x}); {} of {} \
         elements differ",
        got[i],
        got[i].to_bits(),
        want[i],
        want[i].to_bits(),
        1 + bad.count(),
        got.len()
    )))
}

/// The largest `|got − want|`, computed in f32, with a NaN difference counting as infinity
/// (lengths are not checked: pair them with [`bit_identical`] or [`same_bits`]).
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f32 {
    let mut d = 0f32;
    for (g, w) in got.iter().zip(want) {
        let e = (g - w).abs();
        d = if e.is_nan() { f32::INFINITY } else { d.max(e) };
    }
    d
}

/// The normwise relative error `max|got − want| / max|want|` in f64; infinity when any value
/// of either slice is not finite.
pub fn normwise_rel_error(got: &[f32], want: &[f32]) -> f64 {
    if got.iter().chain(want).any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let mut diff = 0f64;
    let mut scale = 0f64;
    for (g, w) in got.iter().zip(want) {
        diff = diff.max((f64::from(*g) - f64::from(*w)).abs());
        scale = scale.max(f64::from(*w).abs());
    }
    diff / scale.max(f64::MIN_POSITIVE)
}

/// `Ok` when `err ≤ tol`; an error `"{what} {err} exceeds {tol}"` when `err` is larger or NaN.
pub fn within(what: &str, err: f64, tol: f64) -> Result<(), Mismatch> {
    if err.is_nan() || err > tol {
        return Err(Mismatch(format!("{what} {err:e} exceeds {tol:e}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bits_names_the_first_difference_and_counts() {
        assert!(same_bits("x", &[1.0, f32::NAN], &[1.0, f32::NAN]).is_ok());
        let e = same_bits("relu", &[1.0, -0.0, 3.0, 5.0], &[1.0, 0.0, 3.0, 4.0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "relu: element 1 is -0e0 (0x80000000) but should be 0e0 (0x00000000); 2 of 4 \
             elements differ"
        );
        let e = same_bits("copy", &[1.0], &[1.0, 2.0]).unwrap_err();
        assert_eq!(e.to_string(), "copy: 1 elements, expected 2");
        assert!(bit_identical(&[0.5], &[0.5]));
        assert!(!bit_identical(&[0.0], &[-0.0]));
        assert!(!bit_identical(&[0.0], &[0.0, 0.0]));
    }

    #[test]
    fn differences_and_tolerances() {
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 2.0]), 0.5);
        assert_eq!(max_abs_diff(&[f32::NAN, 2.0], &[1.0, 2.0]), f32::INFINITY);
        assert_eq!(normwise_rel_error(&[1.0, 3.0], &[1.0, 4.0]), 0.25);
        assert_eq!(normwise_rel_error(&[f32::INFINITY], &[1.0]), f64::INFINITY);
        assert!(within("e", 1e-6, 1e-5).is_ok());
        assert!(within("e", f64::NAN, 1e-5).is_err());
        assert_eq!(
            within("fused: max difference", 0.5, 0.25)
                .unwrap_err()
                .to_string(),
            "fused: max difference 5e-1 exceeds 2.5e-1"
        );
    }
}
