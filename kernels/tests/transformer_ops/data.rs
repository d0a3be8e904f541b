//! Test data, uploads with poisoned fronts, downloads and the comparisons (ulps, bits).

use super::*;

/// xorshift64*: deterministic test data.
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

pub(crate) fn data<T: Element>(seed: u64, n: usize, scale: f64) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::from_f64(scale * rng.unit())).collect()
}

pub(crate) fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut v: Vec<T> = vec![T::zeroed(); off];
    v.extend_from_slice(data);
    Ok(s.clone_htod(&v)?)
}

pub(crate) fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

pub(crate) fn download<T: DeviceRepr>(s: &Stream, buf: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(buf)?;
    let front: &[u8] = cuda_stack_driver::bytemuck::cast_slice(&all[..off]);
    ensure!(
        front.iter().all(|&b| b == 0xFF),
        "an element in front of the output view was overwritten"
    );
    Ok(all[off..].to_vec())
}

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
