//! The FP8 GEMM on Hopper's tensor cores (`cuda/gemm_wgmma_fp8.cu`): `C = alpha · A · Bᵀ` with
//! `A [m, k]` and `B` stored `[n, k]` in FP8 (e4m3 or e5m2, any pairing), f32 accumulation, `C`
//! in bf16 or f32, `alpha = a_inv_scale[0] · b_inv_scale[0]` (the per-tensor scales of
//! [`super::fp8_quantize`], read on the GPU).
//!
//! **Layout.** FP8 `wgmma` reads both operands K-major (no transposed forms exist for 8-bit
//! types), so this is the only layout ("nt" in `gemm_tc.rs`' terms; "TN" in cuBLASLt's
//! column-major terms, which is also the only layout cuBLASLt's FP8 matmul takes). A `B` stored
//! `[k, n]` must be transposed first — in practice by quantizing the transposed wide tensor.
//!
//! **Alignment.** The TMA engine needs 16-byte aligned starts and row strides: `a`, `b` start on
//! 16 bytes and `lda`, `ldb` are multiples of 16 (dense operands: `k` a multiple of 16). Anything
//! else is [`Error::Invalid`] naming the rule, before anything is launched (pad k with zeros).
//!
//! **Where.** The kernel is built for `sm_90a` (compute capability 9.0 exactly: H100, H200);
//! elsewhere [`Error::UnsupportedDevice`] (cuBLASLt's FP8 matmul also runs on 8.9).

use super::fp8::Fp8;
use crate::dispatch::cast;
use crate::launch::{check_operand, to_i32};
use crate::{DType, Error, Kernels, Result};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{
    ComputeCapability, DeviceRepr, DeviceSlice, Kernel, LaunchConfig, Stream, TensorMap,
    TensorMapElement, TensorMapSwizzle,
};
use std::fmt::Debug;

const OP: &str = "gemm_fp8";
const THREADS: u32 = 384;
/// Bytes of one pipeline stage: a 128 × 128-byte A box and a 256 × 128-byte B box.
const STAGE_BYTES: u32 = (128 + 256) * 128;
/// One consumer warpgroup's bf16 epilogue buffer: 64 rows of 256 results, each row padded by 16 bytes.
const EPI_BYTES: u32 = 64 * (256 * 2 + 16);
const TILE_M: usize = 128;
const TILE_N: usize = 256;
/// fp8 values of k per 128-byte box row.
const BOX_K: u32 = 128;
/// The compute capability the kernels are built for (architecture-specific `sm_90a`).
pub const FP8_WGMMA_CC: ComputeCapability = ComputeCapability { major: 9, minor: 0 };

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::bf16 {}
}

/// An output type of the FP8 GEMMs: `bf16` or `f32`. Sealed.
pub trait Fp8GemmOut: DeviceRepr + Copy + Debug + sealed::Sealed + 'static {
    /// The runtime tag.
    const DTYPE: DType;
}
impl Fp8GemmOut for f32 {
    const DTYPE: DType = DType::F32;
}
impl Fp8GemmOut for bf16 {
    const DTYPE: DType = DType::BF16;
}

/// Dynamic shared memory of the kernels writing `out` (`Fp8Out<T>::SMEM` in gemm_wgmma_fp8.cu):
/// a bf16 C goes through two epilogue buffers beside 3 stages; an f32 C is stored from the
/// fragment, beside 4 stages.
fn smem_bytes(out: DType) -> u32 {
    if out == DType::BF16 {
        3 * STAGE_BYTES + 2 * EPI_BYTES + 1024 + 2 * 3 * 8
    } else {
        4 * STAGE_BYTES + 1024 + 2 * 4 * 8
    }
}

/// The signature of a `gemm_wgmma_fp8_*` entry.
type Fp8Kernel<C> = Kernel<(
    TensorMap,
    TensorMap,
    &'static DeviceSlice<u8>,
    &'static DeviceSlice<u8>,
    &'static mut DeviceSlice<C>,
    i32,
    i32,
    i32,
    i32,
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
)>;

fn kernel<A: Fp8, B: Fp8, C: Fp8GemmOut>(k: &Kernels) -> Result<&Fp8Kernel<C>> {
    let f = k.gemm_wgmma_fp8_kernels()?;
    let e5 = |d: DType| d == DType::F8E5M2;
    match (e5(A::DTYPE), e5(B::DTYPE), C::DTYPE == DType::F32) {
        (false, false, false) => cast(&f.gemm_wgmma_fp8_e4m3_e4m3_bf16),
        (false, false, true) => cast(&f.gemm_wgmma_fp8_e4m3_e4m3_f32),
        (false, true, false) => cast(&f.gemm_wgmma_fp8_e4m3_e5m2_bf16),
        (false, true, true) => cast(&f.gemm_wgmma_fp8_e4m3_e5m2_f32),
        (true, false, false) => cast(&f.gemm_wgmma_fp8_e5m2_e4m3_bf16),
        (true, false, true) => cast(&f.gemm_wgmma_fp8_e5m2_e4m3_f32),
        (true, true, false) => cast(&f.gemm_wgmma_fp8_e5m2_e5m2_bf16),
        (true, true, true) => cast(&f.gemm_wgmma_fp8_e5m2_e5m2_f32),
    }
}

/// `Ok` on compute capability 9.0, else [`Error::UnsupportedDevice`].
fn check_device(s: &Stream, dtype: DType) -> Result<()> {
    let device = s.context().limits().compute_capability;
    if device == FP8_WGMMA_CC {
        return Ok(());
    }
    Err(Error::UnsupportedDevice {
        op: OP,
        dtype,
        device,
        needed: FP8_WGMMA_CC,
        exact: " exactly",
        why: "the FP8 wgmma kernels are built for sm_90a (H100, H200); on 8.9 use cuBLASLt's \
              FP8 matmul (cuda-stack-blas), below it keep the operands in bf16",
    })
}

/// The TMA rules for an operand: 16-byte aligned start, row stride a multiple of 16 elements.
fn check_tma(what: &'static str, ptr: u64, ld: usize) -> Result<()> {
    if ptr % 16 != 0 || ld % 16 != 0 {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "`{what}` starts at {ptr:#x} with row stride {ld}: the TMA copy engine needs a \
                 16-byte aligned start and a row stride that is a multiple of 16 one-byte \
                 elements (for a dense operand, k a multiple of 16: pad k with zeros)"
            ),
        });
    }
    Ok(())
}

/// `C = (a_inv_scale[0] · b_inv_scale[0]) · A · Bᵀ`, row-major: `A` is `[m, kdim]` with row
/// stride `lda`, `B` is stored `[n, kdim]` with row stride `ldb`, `C` is `[m, n]` with row stride
/// `ldc >= n`; f32 accumulation, each output rounded once to `C`. Elements of `C` outside the
/// `[m, n]` product are untouched. `kdim == 0` writes zeros. See the module docs for the device
/// (9.0) and alignment (16 bytes) rules.
#[allow(clippy::too_many_arguments)]
pub fn gemm_fp8<A: Fp8, B: Fp8, C: Fp8GemmOut>(
    k: &Kernels,
    s: &Stream,
    m: usize,
    n: usize,
    kdim: usize,
    a: &DeviceSlice<A>,
    lda: usize,
    b: &DeviceSlice<B>,
    ldb: usize,
    a_inv_scale: &DeviceSlice<f32>,
    b_inv_scale: &DeviceSlice<f32>,
    c: &mut DeviceSlice<C>,
    ldc: usize,
) -> Result<()> {
    check_device(s, A::DTYPE)?;
    check_operand(OP, "a", a.len(), m, kdim, lda)?;
    check_operand(OP, "b", b.len(), n, kdim, ldb)?;
    check_operand(OP, "c", c.len(), m, n, ldc)?;
    for (what, len) in [
        ("a_inv_scale", a_inv_scale.len()),
        ("b_inv_scale", b_inv_scale.len()),
    ] {
        if len == 0 {
            return Err(Error::Length {
                op: OP,
                what,
                expected: 1,
                found: 0,
            });
        }
    }
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
    );
    let lc = to_i32(OP, "ldc", ldc)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if kdim == 0 {
        return zero_rows(s, c, m, n, ldc);
    }
    check_tma("a", a.as_raw_ptr(), lda)?;
    check_tma("b", b.as_raw_ptr(), ldb)?;
    let kern = kernel::<A, B, C>(k)?;
    let smem = smem_bytes(C::DTYPE);
    crate::launch::raise_smem(kern.function(), smem)?;
    let (m64, n64, k64) = (m as u64, n as u64, kdim as u64);
    let b128 = TensorMapSwizzle::B128;
    let u8e = TensorMapElement::U8;
    let map_a = TensorMap::tiled_2d(a, u8e, m64, k64, lda as u64, TILE_M as u32, BOX_K, b128)?;
    let map_b = TensorMap::tiled_2d(b, u8e, n64, k64, ldb as u64, TILE_N as u32, BOX_K, b128)?;
    // Persistent blocks: one per SM at most, each walking tiles b, b + grid, ... The kernel's
    // tile index is an int: the tile count must fit one.
    let tiles = m.div_ceil(TILE_M) as u128 * n.div_ceil(TILE_N) as u128;
    if tiles > i32::MAX as u128 {
        return Err(Error::TooLarge {
            op: OP,
            what: "tiles (ceil(m / 128) * ceil(n / 256))",
            value: tiles,
            max: i32::MAX as u128,
        });
    }
    let sms = u128::from(s.context().limits().sm_count.max(1));
    let grid = tiles.min(sms) as u32;
    let cfg = LaunchConfig::new(grid, THREADS).with_shared_mem(smem);
    let (ab, bb) = (a.cast::<u8>()?, b.cast::<u8>()?);
    // SAFETY: the maps address exactly A [m, k] and B [n, k] with their row strides (checked
    // against the slices by TensorMap::tiled_2d; the engine reads nothing outside and zero-fills
    // the rest); A and B are passed so the launch orders those buffers; the kernel writes
    // C[i·ldc + j] only for i < m, j < n, inside `c` (checked), and reads element 0 of the two
    // scales (non-empty, checked). Block 384 and `smem` bytes are what the kernel is written
    // for, and any 1-D grid covers every tile (grid-stride loop over `tiles`, an int); m, n and
    // k are at least 1 (the empty cases returned above: the k loop runs at least once); the
    // device is compute capability 9.0 (checked), which the sm_90a image needs.
    unsafe {
        kern.launch(
            s,
            &cfg,
            map_a,
            map_b,
            &ab,
            &bb,
            c,
            mi,
            ni,
            ki,
            lc,
            a_inv_scale,
            b_inv_scale,
        )
    }?;
    Ok(())
}

/// `C[i·ldc + j] = 0` for i < m, j < n (the product when k == 0), one memset per row unless
/// the rows are contiguous.
fn zero_rows<C: DeviceRepr>(
    s: &Stream,
    c: &mut DeviceSlice<C>,
    m: usize,
    n: usize,
    ldc: usize,
) -> Result<()> {
    if ldc == n {
        s.memset_zeros(&mut c.slice_mut(0..m * n)?)?;
        return Ok(());
    }
    for r in 0..m {
        s.memset_zeros(&mut c.slice_mut(r * ldc..r * ldc + n)?)?;
    }
    Ok(())
}

/// CPU reference of [`gemm_fp8`] in f64: `C[i][j] = alpha · Σ_k A[i][k] · B[j][k]` over the
/// FP8 values (exactly representable), plus `Σ_k |A[i][k] · B[j][k]|` per entry for a tolerance
/// bound. Both `[m, n]`, dense.
#[allow(clippy::too_many_arguments)]
pub fn gemm_fp8_cpu<A: Fp8, B: Fp8>(
    m: usize,
    n: usize,
    kdim: usize,
    a: &[A],
    lda: usize,
    b: &[B],
    ldb: usize,
    alpha: f64,
) -> (Vec<f64>, Vec<f64>) {
    let af: Vec<f64> = a.iter().map(|v| f64::from(v.to_f32())).collect();
    let bf: Vec<f64> = b.iter().map(|v| f64::from(v.to_f32())).collect();
    let mut want = vec![0.0; m * n];
    let mut bound = vec![0.0; m * n];
    for i in 0..m {
        let ar = &af[i * lda..i * lda + kdim];
        for j in 0..n {
            let br = &bf[j * ldb..j * ldb + kdim];
            let (mut acc, mut abs) = (0.0f64, 0.0f64);
            for (x, y) in ar.iter().zip(br) {
                acc += x * y;
                abs += (x * y).abs();
            }
            want[i * n + j] = alpha * acc;
            bound[i * n + j] = alpha.abs() * abs;
        }
    }
    (want, bound)
}

#[cfg(test)]
mod smem_tests {
    use super::*;

    #[test]
    fn shared_memory_matches_the_kernels_and_fits_one_block_per_sm() {
        // Fp8Out<bf16_t>::SMEM and Fp8Out<float>::SMEM in gemm_wgmma_fp8.cu.
        assert_eq!(smem_bytes(DType::BF16), 216_112);
        assert_eq!(smem_bytes(DType::F32), 197_696);
        for d in [DType::BF16, DType::F32] {
            assert!(smem_bytes(d) <= 227 * 1024, "{d:?}");
        }
    }
}
