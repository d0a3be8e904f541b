//! The multi-tensor ops (`ops::multi_tensor`, `cuda/multi_tensor.cu`) against CPU references
//! and against the per-tensor kernels they replace.
//!
//! Every test uses many tensors of odd lengths — 0 and 1 elements among them — and more
//! tensors than one launch's table holds (so the ops take several launches), some of them
//! views that start one element into their buffer (not 16-byte aligned), each with a poisoned
//! element in front that must stay untouched.
//!
//! Tolerances:
//! - exact (bits): fill, scale (`x · s` rounded once), casts (each element rounded once, as
//!   `half`'s `from_f32` / `to_f32`), the partial sums of squares (bit-identical to the
//!   per-tensor `sumsq_partials`, so the clip norm is too);
//! - the clip norm against the f64 CPU reference: 1e-5 relative (f32), 1e-12 (f64);
//! - Adam against the f64 CPU rule: 1e-5 · (1 + |p|) for f32 (a few roundings of the update
//!   and `powf`), 1e-12 · (1 + |p|) for f64; against the per-tensor `ops::adam` kernel (after
//!   an in-place `scale_by_device` where the multi-tensor step scales as it reads): 64 ulp of
//!   |p before| + |p after| (the same formula per element, but the two kernels' compilers
//!   contract the moment updates and `p - a·b` into FMAs differently, and each keeps its own
//!   moments, so the last-bit differences compound over the steps: in f64, 8 ulp of
//!   |p before| + |p after| seen on an H200 at step 2, 21 ulp on an H100; the f64 CPU rule at
//!   1e-12 is the check of the values).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, DeviceRepr, DeviceSlice, Stream};
use cuda_stack_kernels::ops::multi_tensor::{MT1_CAP, MT2_CAP, MTA_CAP};
use cuda_stack_kernels::ops::{self, AdamParams, AdamTensor};
use cuda_stack_kernels::{reference, Compute, DType, Element, Error, Kernels};
use cuda_tests::{ensure, gpu, gpu2, TestResult};
use std::sync::Arc;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Odd lengths, cycled over the tensors of a test (0 and 1 included; block edges; one long).
const LENS: &[usize] = &[
    0, 1, 2, 3, 31, 255, 257, 2047, 2048, 2049, 4095, 4097, 8193, 65537, 1,
];
const LONG: usize = (1 << 20) + 3;

fn lens(count: usize) -> Vec<usize> {
    (0..count)
        .map(|i| if i == 7 { LONG } else { LENS[i % LENS.len()] })
        .collect()
}

/// Tensor i starts at element `i % 2` of its buffer (odd ones misaligned).
fn off(i: usize) -> usize {
    i % 2
}

fn setup() -> Res<(cuda_stack_driver::Context, Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// xorshift64*: deterministic test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (u >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }
}

fn data<T: Element>(seed: u64, n: usize, scale: f64) -> Vec<T> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| T::from_f64(scale * rng.unit())).collect()
}

/// A buffer holding `off` poison elements (0xFF bytes), then `data`.
fn upload<T: DeviceRepr>(s: &Stream, data: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut b = s.alloc_zeros::<T>(data.len() + off)?;
    s.memset_bytes(&mut b, 0xFF)?;
    if !data.is_empty() {
        s.memcpy_htod(data, &mut b.slice_mut(off..)?)?;
    }
    Ok(b)
}

/// The elements after the poison, checking the poison is intact.
fn download<T: DeviceRepr>(s: &Stream, b: &DeviceSlice<T>, off: usize) -> Res<Vec<T>> {
    let all = s.clone_dtoh(b)?;
    let poison: &[u8] = cuda_stack_driver::bytemuck::cast_slice(&all[..off]);
    ensure!(
        poison.iter().all(|&x| x == 0xFF),
        "the element in front was written"
    );
    Ok(all[off..].to_vec())
}

fn check_bits<T: DeviceRepr>(what: &str, a: &[T], b: &[T]) -> TestResult {
    let (x, y): (&[u8], &[u8]) = (
        cuda_stack_driver::bytemuck::cast_slice(a),
        cuda_stack_driver::bytemuck::cast_slice(b),
    );
    ensure!(a.len() == b.len() && x == y, "{what}: not bit-identical");
    Ok(())
}

/// Buffers for `host` (tensor i at offset `off(i)`).
fn uploads<T: DeviceRepr>(s: &Stream, host: &[Vec<T>]) -> Res<Vec<DeviceBuffer<T>>> {
    host.iter()
        .enumerate()
        .map(|(i, v)| upload(s, v, off(i)))
        .collect()
}

// ---------------------------------------------------------------------------------------------

fn fill_and_scale<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let n = lens(MT1_CAP + 9);
    let host: Vec<Vec<T>> = n
        .iter()
        .enumerate()
        .map(|(i, &l)| data(i as u64, l, 3.0))
        .collect();
    // fill
    let mut bufs = uploads(&s, &host)?;
    {
        let mut views: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| b.slice_mut(off(i)..))
            .collect::<Result<_, _>>()?;
        let mut refs: Vec<&mut DeviceSlice<T>> = views.iter_mut().map(|v| &mut **v).collect();
        ops::fill_many::<T>(&k, &s, &mut refs, <T::Scalar as Compute>::of_f64(-2.5))?;
    }
    for (i, b) in bufs.iter().enumerate() {
        check_bits(
            "fill",
            &download(&s, b, off(i))?,
            &vec![T::from_f64(-2.5); n[i]],
        )?;
    }
    // scale by a device scalar
    let mut bufs = uploads(&s, &host)?;
    let sc = T::from_f64(0.3);
    let scale = s.clone_htod(&[sc])?;
    {
        let mut views: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| b.slice_mut(off(i)..))
            .collect::<Result<_, _>>()?;
        let mut refs: Vec<&mut DeviceSlice<T>> = views.iter_mut().map(|v| &mut **v).collect();
        ops::scale_many::<T>(&k, &s, &mut refs, &scale)?;
    }
    for (i, b) in bufs.iter().enumerate() {
        let want: Vec<T> = host[i]
            .iter()
            .map(|x| T::from_scalar(Compute::mul(x.to_scalar(), sc.to_scalar())))
            .collect();
        check_bits("scale", &download(&s, b, off(i))?, &want)?;
    }
    // Lengths are checked before anything runs.
    let mut two = s.alloc_zeros::<T>(2)?;
    let e = ops::scale_many::<T>(&k, &s, &mut [&mut two], &s.alloc_zeros::<T>(2)?).err();
    ensure!(matches!(e, Some(Error::Length { .. })), "{e:?}");
    Ok(())
}

fn sumsq<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let n = lens(MT1_CAP * 2 + 5);
    let host: Vec<Vec<T>> = n
        .iter()
        .enumerate()
        .map(|(i, &l)| data(100 + i as u64, l, 0.01))
        .collect();
    let bufs = uploads(&s, &host)?;
    let views: Vec<_> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.slice(off(i)..))
        .collect::<Result<_, _>>()?;
    let refs: Vec<&DeviceSlice<T>> = views.iter().map(|v| &**v).collect();
    let total = ops::sumsq_parts_many(&n);
    ensure!(total >= n.len(), "at least one partial per tensor");
    let mut many = upload::<T>(&s, &vec![T::from_f64(0.0); total], 1)?;
    ops::sumsq_partials_many::<T>(&k, &s, &refs, &mut many.slice_mut(1..)?)?;
    // The per-tensor kernel, tensor by tensor, into the same layout.
    let mut single = s.alloc_zeros::<T>(total)?;
    let mut at = 0;
    for (r, &l) in refs.iter().zip(&n) {
        let p = ops::sumsq_parts(l);
        ops::sumsq_partials::<T>(&k, &s, r, &mut single.slice_mut(at..at + p)?)?;
        at += p;
    }
    check_bits(
        "partials vs per-tensor",
        &download(&s, &many, 1)?,
        &s.clone_dtoh(&single)?,
    )?;
    // The norm from them, against the f64 reference.
    let (mut norm, mut scale) = (s.alloc_zeros::<T>(1)?, s.alloc_zeros::<T>(1)?);
    ops::clip_coef::<T>(&k, &s, &many.slice(1..)?, 1.0, &mut norm, &mut scale)?;
    let slices: Vec<&[T]> = host.iter().map(|v| v.as_slice()).collect();
    let (want, _) = reference::clip_grad_norm(&slices, 1.0);
    let got = s.clone_dtoh(&norm)?[0].to_f64();
    let rel = if T::DTYPE == DType::F64 { 1e-12 } else { 1e-5 };
    ensure!((got - want).abs() <= rel * want, "norm {got} vs {want}");
    // A wrong partial length is refused.
    let mut short = s.alloc_zeros::<T>(total - 1)?;
    let e = ops::sumsq_partials_many::<T>(&k, &s, &refs, &mut short).err();
    ensure!(matches!(e, Some(Error::Length { .. })), "{e:?}");
    Ok(())
}

fn casts<H: Element>(to_half: fn(f32) -> H, to_f32: fn(H) -> f32) -> TestResult {
    let (_ctx, s, k) = setup()?;
    // Destinations at the other offset than their sources (shift 1: every pair misaligned, the
    // scalar path), then at the same one (shift 0: even tensors 16-byte aligned, the packet path).
    for shift in [1usize, 0] {
        let n = lens(MT2_CAP + 11);
        let host: Vec<Vec<f32>> = n
            .iter()
            .enumerate()
            .map(|(i, &l)| data(200 + i as u64, l, 70.0))
            .collect();
        // f32 -> half
        let src = uploads(&s, &host)?;
        let mut dst: Vec<DeviceBuffer<H>> = n
            .iter()
            .enumerate()
            .map(|(i, &l)| upload(&s, &vec![H::from_f64(0.0); l], off(i + shift)))
            .collect::<Res<_>>()?;
        {
            let sv: Vec<_> = src
                .iter()
                .enumerate()
                .map(|(i, b)| b.slice(off(i)..))
                .collect::<Result<_, _>>()?;
            let sr: Vec<&DeviceSlice<f32>> = sv.iter().map(|v| &**v).collect();
            let mut dv: Vec<_> = dst
                .iter_mut()
                .enumerate()
                .map(|(i, b)| b.slice_mut(off(i + shift)..))
                .collect::<Result<_, _>>()?;
            let mut dr: Vec<&mut DeviceSlice<H>> = dv.iter_mut().map(|v| &mut **v).collect();
            ops::cast_many::<f32, H>(&k, &s, &sr, &mut dr)?;
        }
        let mut halves = Vec::new();
        for (i, b) in dst.iter().enumerate() {
            let want: Vec<H> = host[i].iter().map(|&x| to_half(x)).collect();
            let got = download(&s, b, off(i + shift))?;
            check_bits(&format!("f32 -> {}", H::DTYPE), &got, &want)?;
            halves.push(got);
        }
        // half -> f32 (exact)
        let src = uploads(&s, &halves)?;
        let mut back: Vec<DeviceBuffer<f32>> = n
            .iter()
            .enumerate()
            .map(|(i, &l)| upload(&s, &vec![0.0f32; l], off(i + shift)))
            .collect::<Res<_>>()?;
        {
            let sv: Vec<_> = src
                .iter()
                .enumerate()
                .map(|(i, b)| b.slice(off(i)..))
                .collect::<Result<_, _>>()?;
            let sr: Vec<&DeviceSlice<H>> = sv.iter().map(|v| &**v).collect();
            let mut dv: Vec<_> = back
                .iter_mut()
                .enumerate()
                .map(|(i, b)| b.slice_mut(off(i + shift)..))
                .collect::<Result<_, _>>()?;
            let mut dr: Vec<&mut DeviceSlice<f32>> = dv.iter_mut().map(|v| &mut **v).collect();
            ops::cast_many::<H, f32>(&k, &s, &sr, &mut dr)?;
        }
        for (i, b) in back.iter().enumerate() {
            let want: Vec<f32> = halves[i].iter().map(|&x| to_f32(x)).collect();
            check_bits(
                &format!("{} -> f32", H::DTYPE),
                &download(&s, b, off(i + shift))?,
                &want,
            )?;
        }
    }
    // Unsupported pairs and length mismatches are errors.
    let a = s.alloc_zeros::<f64>(3)?;
    let mut b = s.alloc_zeros::<f32>(3)?;
    ensure!(
        ops::cast_many::<f64, f32>(&k, &s, &[&a], &mut [&mut b]).is_err(),
        "f64 -> f32"
    );
    let c = s.alloc_zeros::<f32>(4)?;
    let mut d = s.alloc_zeros::<H>(3)?;
    let e = ops::cast_many::<f32, H>(&k, &s, &[&c], &mut [&mut d]).err();
    ensure!(matches!(e, Some(Error::Length { .. })), "{e:?}");
    Ok(())
}

fn casts_bf16() -> TestResult {
    casts::<bf16>(bf16::from_f32, bf16::to_f32)
}

fn casts_f16() -> TestResult {
    casts::<f16>(f16::from_f32, f16::to_f32)
}

/// One tensor's Adam state on the host.
struct HostAdam {
    p: Vec<f64>,
    m: Vec<f64>,
    v: Vec<f64>,
}

#[allow(clippy::needless_range_loop)] // tensors and elements indexed side by side
fn adam<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let n = lens(MTA_CAP * 2 + 3);
    let count = n.len();
    let (lr, b1, b2, eps) = (0.01, 0.9, 0.95, 1e-8);
    let wd = |i: usize| if i % 3 == 0 { 0.0 } else { 0.1 };
    let to = <T::Scalar as Compute>::of_f64;
    for (decoupled, clip) in [(true, true), (true, false), (false, true)] {
        let params = AdamParams {
            lr: to(lr),
            beta1: to(b1),
            beta2: to(b2),
            eps: to(eps),
            weight_decay: to(0.0),
            decoupled,
        };
        let p0: Vec<Vec<T>> = n
            .iter()
            .enumerate()
            .map(|(i, &l)| data(300 + i as u64, l, 1.0))
            .collect();
        let mut host: Vec<HostAdam> = p0
            .iter()
            .map(|p| HostAdam {
                p: p.iter().map(|x| x.to_f64()).collect(),
                m: vec![0.0; p.len()],
                v: vec![0.0; p.len()],
            })
            .collect();
        let zeros = |i: usize| vec![T::from_f64(0.0); n[i]];
        // Multi-tensor buffers and per-tensor twins.
        let mut p = uploads(&s, &p0)?;
        let mut m: Vec<_> = (0..count)
            .map(|i| upload(&s, &zeros(i), off(i)))
            .collect::<Res<_>>()?;
        let mut v: Vec<_> = (0..count)
            .map(|i| upload(&s, &zeros(i), off(i)))
            .collect::<Res<_>>()?;
        let mut sp: Vec<_> = p0
            .iter()
            .map(|x| s.clone_htod(x))
            .collect::<Result<_, _>>()?;
        let mut sm: Vec<_> = (0..count)
            .map(|i| s.clone_htod(&zeros(i)))
            .collect::<Result<_, _>>()?;
        let mut sv: Vec<_> = (0..count)
            .map(|i| s.clone_htod(&zeros(i)))
            .collect::<Result<_, _>>()?;
        // Step counters: tensor i uses counter count - 1 - i (any order works).
        for step in 1..=3i32 {
            let steps = s.clone_htod(&vec![step; count])?;
            let g: Vec<Vec<T>> = n
                .iter()
                .enumerate()
                .map(|(i, &l)| data(1000 * step as u64 + i as u64, l, 2.0))
                .collect();
            let gb = uploads(&s, &g)?;
            let gs = if clip { 0.37 } else { 1.0 };
            let scale = s.clone_htod(&[T::from_f64(gs)])?;
            {
                let gv: Vec<_> = gb
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b.slice(off(i)..))
                    .collect::<Result<_, _>>()?;
                let mut pv: Vec<_> = p
                    .iter_mut()
                    .enumerate()
                    .map(|(i, b)| b.slice_mut(off(i)..))
                    .collect::<Result<_, _>>()?;
                let mut mv: Vec<_> = m
                    .iter_mut()
                    .enumerate()
                    .map(|(i, b)| b.slice_mut(off(i)..))
                    .collect::<Result<_, _>>()?;
                let mut vv: Vec<_> = v
                    .iter_mut()
                    .enumerate()
                    .map(|(i, b)| b.slice_mut(off(i)..))
                    .collect::<Result<_, _>>()?;
                let mut tensors: Vec<AdamTensor<'_, T>> = pv
                    .iter_mut()
                    .zip(&gv)
                    .zip(mv.iter_mut().zip(vv.iter_mut()))
                    .enumerate()
                    .map(|(i, ((p, g), (m, v)))| AdamTensor {
                        p: &mut **p,
                        g: &**g,
                        m: &mut **m,
                        v: &mut **v,
                        step_index: count - 1 - i,
                        weight_decay: wd(i),
                    })
                    .collect();
                ops::adam_many::<T>(
                    &k,
                    &s,
                    &mut tensors,
                    &steps,
                    clip.then_some(&*scale),
                    params,
                )?;
            }
            // Per-tensor: scale the gradient in place, then ops::adam.
            for i in 0..count {
                let mut gi = s.clone_htod(&g[i])?;
                if clip {
                    ops::scale_by_device::<T>(&k, &s, &mut gi, &scale)?;
                }
                let pi = AdamParams {
                    weight_decay: to(wd(i)),
                    ..params
                };
                ops::adam::<T>(
                    &k,
                    &s,
                    &mut sp[i],
                    &gi,
                    &mut sm[i],
                    &mut sv[i],
                    &steps,
                    count - 1 - i,
                    pi,
                )?;
            }
            // The CPU rule in f64 (on the gradient as the GPU sees it: scaled, rounded to T).
            let (bc1, bc2) = (1.0 - b1.powi(step), 1.0 - b2.powi(step));
            // Each parameter before the step: the kernels may contract `p - a·b` differently
            // (FMA), so they agree to a few ulp of the operands, not of a result that cancels.
            let before: Vec<Vec<f64>> = host.iter().map(|h| h.p.clone()).collect();
            for (i, h) in host.iter_mut().enumerate() {
                for e in 0..n[i] {
                    let gt = T::from_scalar(Compute::mul(g[i][e].to_scalar(), to(gs)));
                    let mut gi = gt.to_f64();
                    if decoupled {
                        h.p[e] *= 1.0 - lr * wd(i);
                    } else {
                        gi += wd(i) * h.p[e];
                    }
                    h.m[e] = b1 * h.m[e] + (1.0 - b1) * gi;
                    h.v[e] = b2 * h.v[e] + (1.0 - b2) * gi * gi;
                    h.p[e] -= (lr / bc1) * h.m[e] / (h.v[e].sqrt() / bc2.sqrt() + eps);
                }
            }
            let (tol, ulps) = if T::DTYPE == DType::F64 {
                (1e-12, 64.0 * f64::EPSILON)
            } else {
                (1e-5, 64.0 * f32::EPSILON as f64)
            };
            for i in 0..count {
                let what = format!(
                    "adam {} decoupled={decoupled} clip={clip} step {step} tensor {i}",
                    T::DTYPE
                );
                let got = download(&s, &p[i], off(i))?;
                let single = s.clone_dtoh(&sp[i])?;
                for e in 0..n[i] {
                    let (x, c, y) = (got[e].to_f64(), host[i].p[e], single[e].to_f64());
                    ensure!(
                        (x - c).abs() <= tol * (1.0 + c.abs()),
                        "{what}[{e}]: {x} vs cpu {c}"
                    );
                    ensure!(
                        (x - y).abs() <= ulps * (y.abs() + before[i][e].abs()),
                        "{what}[{e}]: {x} vs per-tensor {y} (before the step {})",
                        before[i][e]
                    );
                }
                // Keep the CPU state on the GPU's values, so errors do not compound.
                host[i].p = got.iter().map(|x| x.to_f64()).collect();
                download(&s, &m[i], off(i))?;
                download(&s, &v[i], off(i))?;
            }
        }
    }
    Ok(())
}

/// Buffers of two devices in one launch: refused with the driver's device mismatch, nothing
/// queued.
fn two_devices() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let other = cuda_stack_driver::Context::new(1)?.new_stream()?;
    let mut a = s.alloc_zeros::<f32>(5)?;
    let mut b = other.alloc_zeros::<f32>(5)?;
    let e = ops::fill_many::<f32>(&k, &s, &mut [&mut a, &mut b], 1.0).err();
    ensure!(
        matches!(
            e,
            Some(Error::Driver(
                cuda_stack_driver::Error::DeviceMismatch { .. }
            ))
        ),
        "{e:?}"
    );
    ensure!(s.clone_dtoh(&a)? == [0.0; 5], "nothing ran");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("mt_fill_and_scale_f32", fill_and_scale::<f32>),
        gpu("mt_fill_and_scale_f64", fill_and_scale::<f64>),
        gpu("mt_sumsq_f32", sumsq::<f32>),
        gpu("mt_sumsq_f64", sumsq::<f64>),
        gpu("mt_cast_bf16", casts_bf16),
        gpu("mt_cast_f16", casts_f16),
        gpu("mt_adam_f32", adam::<f32>),
        gpu("mt_adam_f64", adam::<f64>),
        gpu2("mt_buffers_of_two_devices_are_refused", two_devices),
    ])
}
