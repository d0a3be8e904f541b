//! Test values per dtype (`Gen`, from `op_support`'s xorshift64*) and the comparisons (exact,
//! bitwise, ulps, relative) every op test uses.

use super::*;

/// Test values per dtype.
pub(crate) trait Gen: Element {
    /// A random value: floats in [-4, 4), i32 over its whole range.
    fn gen(rng: &mut Rng) -> Self;
    /// A small random value: floats in [-1, 1), i32 in [-1000, 1000].
    fn small(rng: &mut Rng) -> Self;
    /// An f64 as the kernels' scalar type.
    fn scalar(v: f64) -> Self::Scalar;
    /// The accumulator value as f64.
    fn acc_f64(v: Self::SumAcc) -> f64;
}

macro_rules! gen_float {
    ($t:ty, $scalar:ty) => {
        impl Gen for $t {
            fn gen(rng: &mut Rng) -> Self {
                <$t>::from_f64(4.0 * rng.unit())
            }
            fn small(rng: &mut Rng) -> Self {
                <$t>::from_f64(rng.unit())
            }
            fn scalar(v: f64) -> $scalar {
                v as $scalar
            }
            fn acc_f64(v: Self::SumAcc) -> f64 {
                v as f64
            }
        }
    };
}
gen_float!(f32, f32);
gen_float!(f64, f64);
gen_float!(f16, f32);
gen_float!(bf16, f32);

impl Gen for i32 {
    fn gen(rng: &mut Rng) -> Self {
        rng.next_u64() as i32
    }
    fn small(rng: &mut Rng) -> Self {
        (rng.next_u64() % 2001) as i32 - 1000
    }
    fn scalar(v: f64) -> i32 {
        v as i32
    }
    fn acc_f64(v: i64) -> f64 {
        v as f64
    }
}

pub(crate) fn data<T: Gen>(seed: u64, n: usize) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::gen(&mut rng)).collect()
}

pub(crate) fn small_data<T: Gen>(seed: u64, n: usize) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::small(&mut rng)).collect()
}

pub(crate) fn same<T: Element>(a: T, b: T) -> bool {
    let (x, y) = (a.to_f64(), b.to_f64());
    x == y || (x.is_nan() && y.is_nan())
}

/// Exact equality (NaN matches NaN, -0 matches +0).
pub(crate) fn check_exact<T: Element>(what: &str, got: &[T], want: &[T]) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !same(got[i], want[i])).collect();
    if let Some(&i) = bad.first() {
        return Err(format!(
            "{what}: {} of {} differ; first at {i}: got {:?}, expected {:?}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        )
        .into());
    }
    Ok(())
}

/// Exact equality for plain bit types (u32 and the like).
pub(crate) fn check_bits<T: DeviceRepr + PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(format!(
            "{what}: first difference at {i}: got {:?}, expected {:?}",
            got[i], want[i]
        )
        .into());
    }
    Ok(())
}

/// Within `ulps` units in the last place of `T` (NaN matches NaN).
pub(crate) fn check_ulps<T: Element>(what: &str, got: &[T], want: &[T], ulps: f64) -> TestResult {
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
        let tol = ulps * ulp(T::DTYPE, w);
        ensure!(
            (g - w).abs() <= tol,
            "{what}: at {i}: got {g}, expected {w} (tolerance {ulps} ulp = {tol:e})"
        );
    }
    Ok(())
}

/// `|got - want| <= tol(i)` (NaN matches NaN).
pub(crate) fn check_close(
    what: &str,
    got: &[f64],
    want: &[f64],
    tol: impl Fn(usize) -> f64,
) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} results, expected {}",
        got.len(),
        want.len()
    );
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        if g.is_nan() && w.is_nan() {
            continue;
        }
        ensure!(
            (g - w).abs() <= tol(i),
            "{what}: at {i}: got {g}, expected {w} (tolerance {:e})",
            tol(i)
        );
    }
    Ok(())
}
