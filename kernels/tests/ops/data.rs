//! Test data (xorshift64* values per dtype), uploads with poisoned fronts, and the comparisons
//! (exact, bitwise, ulps, relative) every op test uses.

use super::*;

/// xorshift64*: deterministic test data without a dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }
}

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

/// `data` on the device behind `off` extra elements (view it with `.slice(off..)`).
pub(crate) fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut v: Vec<T> = vec![T::zeroed(); off];
    v.extend_from_slice(data);
    Ok(s.clone_htod(&v)?)
}

/// `off + n` elements of 0xFF bytes (NaN for floats).
pub(crate) fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

/// The view's elements, after checking that the `off` elements in front are still poison.
pub(crate) fn download<T: DeviceRepr>(s: &Stream, buf: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(buf)?;
    let front: &[u8] = bytemuck_bytes(&all[..off]);
    ensure!(
        front.iter().all(|&b| b == 0xFF),
        "an element in front of the output view was overwritten"
    );
    Ok(all[off..].to_vec())
}

pub(crate) fn bytemuck_bytes<T: DeviceRepr>(v: &[T]) -> &[u8] {
    cuda_stack_driver::bytemuck::cast_slice(v)
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

/// One unit in the last place of `x` in `dtype`.
pub(crate) fn ulp(dtype: DType, x: f64) -> f64 {
    let (mant, emin) = match dtype {
        DType::F32 => (23, -126),
        DType::F64 => (52, -1022),
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        DType::F8E4M3 => (3, -6),
        DType::F8E5M2 => (2, -14),
        DType::I32 => return 1.0,
    };
    let e = if x == 0.0 {
        emin
    } else {
        (x.abs().log2().floor() as i32).max(emin)
    };
    2f64.powi(e - mant)
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
