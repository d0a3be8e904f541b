//! What the op tests (`ops`, `transformer_ops`) share: the context, stream and kernels of a
//! test, deterministic data, uploads behind an offset, poisoned outputs whose front is checked on
//! download, and one ulp of a dtype.

use cuda_stack_driver::{Context, DeviceBuffer, DeviceRepr, DeviceSlice, Stream};
use cuda_stack_kernels::{DType, Kernels};
use cuda_tests::ensure;
use std::sync::Arc;

/// What setup steps return.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The test GPU's context, a stream on it and its kernels.
pub fn setup() -> Res<(Context, Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// xorshift64*: deterministic test data without a dependency.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }
}

/// `data` on the device behind `off` extra elements (view it with `.slice(off..)`).
pub fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut v: Vec<T> = vec![T::zeroed(); off];
    v.extend_from_slice(data);
    Ok(s.clone_htod(&v)?)
}

/// `off + n` elements of 0xFF bytes (NaN for floats).
pub fn poisoned<T: DeviceRepr>(s: &Stream, n: usize, off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(n + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    Ok(b)
}

/// The view's elements, after checking that the `off` elements in front are still poison.
pub fn download<T: DeviceRepr>(s: &Stream, buf: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(buf)?;
    let front: &[u8] = cuda_stack_driver::bytemuck::cast_slice(&all[..off]);
    ensure!(
        front.iter().all(|&b| b == 0xFF),
        "an element in front of the output view was overwritten"
    );
    Ok(all[off..].to_vec())
}

/// One unit in the last place of `x` in `dtype`.
pub fn ulp(dtype: DType, x: f64) -> f64 {
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
