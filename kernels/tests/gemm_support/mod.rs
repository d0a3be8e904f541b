//! What the tensor-core GEMM tests share: deterministic data, uploads behind an offset, and the
//! entry-wise check against `reference::gemm_f64` (tolerances in `gemm_tc.rs`'s header).

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use cuda_stack_driver::{DeviceBuffer, DeviceRepr, Stream};
use cuda_stack_kernels::{DType, Element};
use cuda_tests::{ensure, TestResult};

/// What setup steps return.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// xorshift64* in [-1, 1).
pub struct Rng(pub u64);
impl Rng {
    /// The next value in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// `n` values in [-1, 1) from `seed`, as `T`.
pub fn data<T: Element>(seed: u64, n: usize) -> Vec<T> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| T::from_f64(r.unit())).collect()
}

/// `v` on the device behind `off` zeroed elements.
pub fn upload<T: DeviceRepr>(s: &Stream, v: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut all = vec![T::zeroed(); off];
    all.extend_from_slice(v);
    Ok(s.clone_htod(&all)?)
}

/// (output rounding, accumulation) tolerances of `T`.
pub fn eps<T: Element>() -> (f64, f64) {
    match T::DTYPE {
        DType::BF16 => (1.0 / 256.0, 1.0 / (1 << 20) as f64),
        DType::F16 => (1.0 / 2048.0, 1.0 / (1 << 20) as f64),
        _ => (0.0, 1.0 / 512.0),
    }
}

/// Checks C (`[m, n]`, row stride ldc, behind `off` elements) against the reference; the
/// elements between rows and in front must still be the NaN poison.
#[allow(clippy::too_many_arguments)]
pub fn check<T: Element>(
    what: &str,
    all: &[T],
    off: usize,
    m: usize,
    n: usize,
    ldc: usize,
    want: &[f64],
    bound: &[f64],
) -> TestResult {
    let (eo, ea) = eps::<T>();
    for (i, v) in all.iter().enumerate() {
        let inside = i >= off && (i - off) % ldc < n && (i - off) / ldc < m;
        if !inside {
            ensure!(
                v.to_f64().is_nan(),
                "{what}: element {i} outside C was written"
            );
            continue;
        }
        let (r, c) = ((i - off) / ldc, (i - off) % ldc);
        let (g, w) = (v.to_f64(), want[r * n + c]);
        let tol = eo * w.abs() + ea * bound[r * n + c] + 1e-30;
        ensure!(
            (g - w).abs() <= tol,
            "{what}: C[{r}, {c}] = {g}, expected {w} (tolerance {tol:e})"
        );
    }
    Ok(())
}
