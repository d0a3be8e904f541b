//! FP8 (OCP e4m3 / e5m2) casts with per-tensor scales, amax, and delayed scaling's scale update
//! (`cuda/fp8.cu`, compute capability 8.9 or newer).
//!
//! # Scale convention
//! As in NVIDIA's Transformer Engine: a wide tensor `x` (f32, f16 or bf16) is stored as
//! `q = fp8(x · scale)` and read back as `x ≈ f32(q) · inv_scale`, `inv_scale = 1 / scale`. The
//! conversion rounds to nearest even and saturates to the largest finite value ([`Fp8::MAX`]:
//! 448 for e4m3, 57344 for e5m2; ±inf saturates too); NaN stays NaN. Both scales are one `f32` in
//! device memory (element 0 of a slice), so they can be computed on the GPU without a host round
//! trip and a training step stays capturable in a CUDA graph:
//!
//! * **current scaling**: [`fp8_amax`] of `x`, then `scale = Q::MAX / amax` ([`fp8_scale_update`]
//!   with a history of one);
//! * **delayed scaling** (Transformer Engine's default): [`fp8_quantize`] records the amax of what
//!   it converts in the same pass, into a slot of an amax history; the next step's scale is
//!   computed from the history's maximum by [`fp8_scale_update`], so no pass over `x` is spent on
//!   its amax before the cast.
//!
//! amax outputs are **max-accumulated** (an atomic max): zero the slot first for a fresh maximum,
//! or leave it to fold several tensors into one. A NaN anywhere makes amax NaN (which
//! [`fp8_scale_update`] then ignores, keeping the previous scale).
//!
//! GPUs below compute capability 8.9 have no FP8 conversions: every op here returns
//! [`Error::UnsupportedDevice`] there, before anything is loaded or launched.

use crate::dispatch::cast;
use crate::launch::{check_len, grid, sms, to_i32, BLOCK};
use crate::{DType, Element, Error, Kernels, Result};
use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{ComputeCapability, DeviceRepr, DeviceSlice, Kernel, LaunchConfig, Stream};
use std::fmt::Debug;

/// The oldest compute capability with FP8 conversions and FP8 tensor cores (Ada, sm_89).
pub const FP8_MIN_CC: ComputeCapability = ComputeCapability { major: 8, minor: 9 };

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::F8E4M3 {}
    impl Sealed for super::F8E5M2 {}
    pub trait WideSealed {}
    impl WideSealed for f32 {}
    impl WideSealed for super::f16 {}
    impl WideSealed for super::bf16 {}
}

/// An FP8 element type: [`F8E4M3`] or [`F8E5M2`] (the `float8` crate's, re-exported by
/// `cuda_stack_driver::float8`). Sealed.
pub trait Fp8: DeviceRepr + Copy + Debug + PartialEq + sealed::Sealed + 'static {
    /// The runtime tag.
    const DTYPE: DType;
    /// The largest finite value: 448 (e4m3), 57344 (e5m2). What a scale maps amax to.
    const MAX: f32;
    /// `v` rounded to nearest even, saturated to ±[`Fp8::MAX`], NaN kept: the kernels'
    /// conversion (`cvt.rn.satfinite`), bit for bit.
    fn from_f32(v: f32) -> Self;
    /// The value as f32 (exact).
    fn to_f32(self) -> f32;
    /// The raw bits.
    fn to_bits(self) -> u8;
}

impl Fp8 for F8E4M3 {
    const DTYPE: DType = DType::F8E4M3;
    const MAX: f32 = 448.0;
    fn from_f32(v: f32) -> Self {
        F8E4M3::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        F8E4M3::to_f32(&self)
    }
    fn to_bits(self) -> u8 {
        F8E4M3::to_bits(&self)
    }
}

impl Fp8 for F8E5M2 {
    const DTYPE: DType = DType::F8E5M2;
    const MAX: f32 = 57344.0;
    fn from_f32(v: f32) -> Self {
        F8E5M2::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        F8E5M2::to_f32(&self)
    }
    fn to_bits(self) -> u8 {
        F8E5M2::to_bits(&self)
    }
}

/// A wide type the FP8 casts read and write: `f32`, `f16`, `bf16`. Sealed.
pub trait Fp8Wide: Element<Scalar = f32> + sealed::WideSealed {}
impl Fp8Wide for f32 {}
impl Fp8Wide for f16 {}
impl Fp8Wide for bf16 {}

/// Whether a device of compute capability `cc` runs the FP8 casts and cuBLASLt's FP8 GEMM
/// (8.9 or newer).
pub fn fp8_supported(cc: ComputeCapability) -> bool {
    cc >= FP8_MIN_CC
}

/// `Ok` on a GPU with FP8 (compute capability 8.9 or newer), else [`Error::UnsupportedDevice`].
pub(crate) fn check_fp8_device(op: &'static str, s: &Stream, dtype: DType) -> Result<()> {
    let device = s.context().limits().compute_capability;
    if fp8_supported(device) {
        return Ok(());
    }
    Err(Error::UnsupportedDevice {
        op,
        dtype,
        device,
        needed: FP8_MIN_CC,
        exact: "",
        why: "FP8 conversions and tensor cores exist from Ada (8.9) and Hopper (9.0) on; keep \
              the tensor in bf16 or f16 on this GPU",
    })
}

type QuantKernel<S> = Kernel<(
    &'static DeviceSlice<S>,
    &'static mut DeviceSlice<u8>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u64,
)>;
type DequantKernel<D> = Kernel<(
    &'static DeviceSlice<u8>,
    &'static mut DeviceSlice<D>,
    &'static DeviceSlice<f32>,
    u64,
)>;
type AmaxKernel<S> = Kernel<(&'static DeviceSlice<S>, &'static mut DeviceSlice<f32>, u64)>;

fn quant_kernel<S: Fp8Wide, Q: Fp8>(k: &Kernels) -> Result<&QuantKernel<S>> {
    let f = k.fp8_kernels()?;
    match (S::DTYPE, Q::DTYPE) {
        (DType::F32, DType::F8E4M3) => cast(&f.fp8_quant_f32_e4m3),
        (DType::F32, _) => cast(&f.fp8_quant_f32_e5m2),
        (DType::F16, DType::F8E4M3) => cast(&f.fp8_quant_f16_e4m3),
        (DType::F16, _) => cast(&f.fp8_quant_f16_e5m2),
        (_, DType::F8E4M3) => cast(&f.fp8_quant_bf16_e4m3),
        _ => cast(&f.fp8_quant_bf16_e5m2),
    }
}

fn dequant_kernel<Q: Fp8, D: Fp8Wide>(k: &Kernels) -> Result<&DequantKernel<D>> {
    let f = k.fp8_kernels()?;
    match (Q::DTYPE, D::DTYPE) {
        (DType::F8E4M3, DType::F32) => cast(&f.fp8_dequant_e4m3_f32),
        (DType::F8E4M3, DType::F16) => cast(&f.fp8_dequant_e4m3_f16),
        (DType::F8E4M3, _) => cast(&f.fp8_dequant_e4m3_bf16),
        (_, DType::F32) => cast(&f.fp8_dequant_e5m2_f32),
        (_, DType::F16) => cast(&f.fp8_dequant_e5m2_f16),
        _ => cast(&f.fp8_dequant_e5m2_bf16),
    }
}

fn amax_kernel<S: Fp8Wide>(k: &Kernels) -> Result<&AmaxKernel<S>> {
    let f = k.fp8_kernels()?;
    match S::DTYPE {
        DType::F32 => cast(&f.fp8_amax_f32),
        DType::F16 => cast(&f.fp8_amax_f16),
        _ => cast(&f.fp8_amax_bf16),
    }
}

/// Blocks of 256 threads, 4 elements per thread per step, at most 8 blocks per SM (each block
/// ends with one atomic on the amax word; more blocks only add contention there).
fn cast_config(s: &Stream, n: usize) -> LaunchConfig {
    let threads = (n as u64).div_ceil(4);
    LaunchConfig::new(grid(threads, BLOCK as u64, sms(s) * 8), BLOCK)
}

/// A one-element argument (a scale or an amax slot): at least one element, element 0 is used.
fn check_scalar(op: &'static str, what: &'static str, len: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::Length {
            op,
            what,
            expected: 1,
            found: 0,
        });
    }
    Ok(())
}

/// `q[i] = fp8(x[i] · scale[0])` (round to nearest even, saturating, NaN kept) and
/// `amax[0] = max(amax[0], max_i |x[i]|)` in the same pass (see the module docs: zero `amax[0]`
/// first for a fresh maximum). `x` and `q` have the same length; `scale` and `amax` at least one
/// element. Vector loads and 4-byte stores where `x` and `q` are aligned to 4 elements, one
/// element per step otherwise.
pub fn fp8_quantize<S: Fp8Wide, Q: Fp8>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<S>,
    q: &mut DeviceSlice<Q>,
    scale: &DeviceSlice<f32>,
    amax: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "fp8_quantize";
    check_fp8_device(OP, s, Q::DTYPE)?;
    let n = x.len();
    check_len(OP, "q", q.len(), n)?;
    check_scalar(OP, "scale", scale.len())?;
    check_scalar(OP, "amax", amax.len())?;
    let kern = quant_kernel::<S, Q>(k)?;
    if n == 0 {
        return Ok(());
    }
    let mut bytes = q.cast_mut::<u8>()?;
    // SAFETY: the kernel reads x[i] and writes q[i] for i < n (n is both lengths, checked), reads
    // scale[0] and atomically updates amax[0] (both non-empty, checked); vector accesses are used
    // only where the kernel found both pointers aligned to them. Block 256 is what its block
    // reduction is written for; any grid is correct (grid-stride loops).
    unsafe { kern.launch(s, &cast_config(s, n), x, &mut bytes, scale, amax, n as u64) }?;
    Ok(())
}

/// `out[i] = f32(q[i]) · inv_scale[0]`, rounded once to `D`. `q` and `out` have the same length;
/// `inv_scale` at least one element.
pub fn fp8_dequantize<Q: Fp8, D: Fp8Wide>(
    k: &Kernels,
    s: &Stream,
    q: &DeviceSlice<Q>,
    out: &mut DeviceSlice<D>,
    inv_scale: &DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "fp8_dequantize";
    check_fp8_device(OP, s, Q::DTYPE)?;
    let n = q.len();
    check_len(OP, "out", out.len(), n)?;
    check_scalar(OP, "inv_scale", inv_scale.len())?;
    let kern = dequant_kernel::<Q, D>(k)?;
    if n == 0 {
        return Ok(());
    }
    let bytes = q.cast::<u8>()?;
    // SAFETY: reads q[i] and writes out[i] for i < n (both of length n, checked) and reads
    // inv_scale[0] (non-empty, checked); vector accesses only where aligned (the kernel checks).
    unsafe { kern.launch(s, &cast_config(s, n), &bytes, out, inv_scale, n as u64) }?;
    Ok(())
}

/// `amax[0] = max(amax[0], max_i |x[i]|)` (NaN if any element is NaN). Zero `amax[0]` first for
/// the amax of `x` alone. Needs compute capability 8.9 like the casts it serves.
pub fn fp8_amax<S: Fp8Wide>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<S>,
    amax: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "fp8_amax";
    check_fp8_device(OP, s, DType::F8E4M3)?;
    check_scalar(OP, "amax", amax.len())?;
    let kern = amax_kernel::<S>(k)?;
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: reads x[i] for i < n = x.len() and atomically updates amax[0] (non-empty, checked).
    unsafe { kern.launch(s, &cast_config(s, n), x, amax, n as u64) }?;
    Ok(())
}

/// Delayed scaling's update, on the GPU (Transformer Engine's rule): `a = max(history)` (NaN
/// entries ignored); when `a` is finite and positive, `scale[0] = Q::MAX / a / 2^margin`,
/// otherwise `scale[0]` keeps its value; then `inv_scale[0] = 1 / scale[0]`. `history` holds the
/// amax of the last steps (one element: current scaling); `margin` (usually 0) leaves headroom
/// for growth between steps.
pub fn fp8_scale_update<Q: Fp8>(
    k: &Kernels,
    s: &Stream,
    history: &DeviceSlice<f32>,
    scale: &mut DeviceSlice<f32>,
    inv_scale: &mut DeviceSlice<f32>,
    margin: i32,
) -> Result<()> {
    const OP: &str = "fp8_scale_update";
    check_fp8_device(OP, s, Q::DTYPE)?;
    check_scalar(OP, "history", history.len())?;
    check_scalar(OP, "scale", scale.len())?;
    check_scalar(OP, "inv_scale", inv_scale.len())?;
    let len = to_i32(OP, "history length", history.len())?;
    let kern = k.fp8_scale_update()?;
    // SAFETY: one thread reads history[0..len) (len = its length) and scale[0], and writes
    // scale[0] and inv_scale[0] (both non-empty, checked).
    unsafe {
        kern.launch(
            s,
            &LaunchConfig::new(1, 1),
            history,
            len,
            scale,
            inv_scale,
            Q::MAX,
            margin,
        )
    }?;
    Ok(())
}

/// CPU twin of [`fp8_quantize`]: `(q, amax)`, bit-exact (the `float8` crate's conversion is the
/// kernels' `cvt.rn.satfinite`; `x · scale` is one f32 multiply on both sides). amax is NaN when
/// any element is.
pub fn fp8_quantize_cpu<S: Fp8Wide, Q: Fp8>(x: &[S], scale: f32) -> (Vec<Q>, f32) {
    let mut amax = 0.0f32;
    let q = x
        .iter()
        .map(|v| {
            let f = v.to_scalar();
            if f.is_nan() || amax.is_nan() {
                amax = f32::NAN;
            } else {
                amax = amax.max(f.abs());
            }
            Q::from_f32(f * scale)
        })
        .collect();
    (q, amax)
}

/// CPU twin of [`fp8_dequantize`], bit-exact.
pub fn fp8_dequantize_cpu<Q: Fp8, D: Fp8Wide>(q: &[Q], inv_scale: f32) -> Vec<D> {
    q.iter()
        .map(|v| D::from_scalar(v.to_f32() * inv_scale))
        .collect()
}
