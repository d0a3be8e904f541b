//! Helpers shared by the `tensor_*` test binaries: deterministic data, independent CPU
//! references for strided views and broadcasting, and comparisons that say where they failed.

#![allow(dead_code)]

use cuda_stack_runtime::tensor::TensorElement;
use std::error::Error;

/// Element counts every 1-D test covers: empty, one, around a warp, around a 1024-thread
/// block, and primes (31, 4099, 65537).
pub const SIZES: &[usize] = &[0, 1, 31, 32, 33, 1023, 1025, 4099, 65537];

/// A small xorshift generator (deterministic per seed).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An integer in `[-r, r]`.
    pub fn int(&mut self, r: u64) -> i64 {
        (self.next() % (2 * r + 1)) as i64 - r as i64
    }
}

/// `n` values for dtype `T`: integers in [-100, 100] for integer dtypes, multiples of 1/256 in
/// [-3.9, 3.9] for floating ones (exact in f16; rounded once for bf16).
pub fn values<T: TensorElement>(n: usize, seed: u64) -> Vec<T> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            if T::DTYPE.is_float() {
                T::from_f64(r.int(1000) as f64 / 256.0)
            } else {
                T::from_f64(r.int(100) as f64)
            }
        })
        .collect()
}

/// `v` as f64 (for comparisons), through `TensorElement` only.
pub fn f<T: TensorElement>(v: T) -> f64 {
    v.to_f64()
}

/// An f64 as `T`.
pub fn t<T: TensorElement>(v: f64) -> T {
    T::from_f64(v)
}

pub type TestResult = Result<(), Box<dyn Error>>;

/// Bit-for-bit equality (NaN equals any NaN; -0.0 differs from 0.0), reporting the first difference.
pub fn check_exact<T: TensorElement>(what: &str, got: &[T], want: &[T]) -> TestResult {
    if got.len() != want.len() {
        return Err(format!("{what}: got {} elements, want {}", got.len(), want.len()).into());
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (f(*g), f(*w));
        // Bits, so that -0.0 and 0.0 differ too.
        let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        if !same {
            return Err(format!("{what}: element {i}: got {g}, want {w} (exact)").into());
        }
    }
    Ok(())
}

/// `|got - want| <= tol[i]` for every element (NaN must match NaN), reporting the first
/// failure with its tolerance.
pub fn check_tol(what: &str, got: &[f64], want: &[f64], tol: impl Fn(usize) -> f64) -> TestResult {
    if got.len() != want.len() {
        return Err(format!("{what}: got {} elements, want {}", got.len(), want.len()).into());
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || w.is_nan() {
            if g.is_nan() != w.is_nan() {
                return Err(format!("{what}: element {i}: got {g}, want {w}").into());
            }
            continue;
        }
        if g == w {
            continue;
        }
        let tl = tol(i);
        if (g - w).abs() > tl {
            return Err(format!(
                "{what}: element {i}: got {g}, want {w} (|diff| {} > tolerance {tl})",
                (g - w).abs()
            )
            .into());
        }
    }
    Ok(())
}

/// Row-major strides of `shape`.
pub fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The multi-index of row-major position `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0usize; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
    }
    idx
}

/// Element at multi-index `idx` of the row-major array `data` of `shape`.
pub fn at<T: Copy>(data: &[T], shape: &[usize], idx: &[usize]) -> T {
    let s = row_major(shape);
    data[idx.iter().zip(&s).map(|(i, st)| i * st).sum::<usize>()]
}

/// `out[idx] = f(idx)` over `shape` in row-major order.
pub fn build<T>(shape: &[usize], mut f: impl FnMut(&[usize]) -> T) -> Vec<T> {
    let n: usize = shape.iter().product();
    (0..n).map(|i| f(&unravel(i, shape))).collect()
}

/// The CPU broadcast of `data` (of `shape`) to `to` (NumPy rules), row-major.
pub fn broadcast<T: Copy>(data: &[T], shape: &[usize], to: &[usize]) -> Vec<T> {
    let lead = to.len() - shape.len();
    build(to, |idx| {
        let src: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(d, &s)| if s == 1 { 0 } else { idx[d + lead] })
            .collect();
        at(data, shape, &src)
    })
}
