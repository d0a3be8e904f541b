//! The FP8 wgmma GEMM (`ops::gemm_fp8`) against an f64 CPU reference computed from the FP8
//! inputs themselves (`ops::gemm_fp8_cpu`: the products of FP8 values are exact, so the only
//! differences are the tensor cores' accumulation and the one rounding of C).
//!
//! Tolerance per entry: `|got - ref| <= eps_out · |ref| + eps_acc · Σ_k |alpha · a · b|`, with
//! eps_out the output rounding (2^-8 for bf16, 2^-22 for f32) and eps_acc = 2^-9: Hopper's FP8
//! MMA adds its products with fewer than f32's bits (about 14, as DeepSeek-V3's report
//! measured), so the bound is TF32-like, not f32-like. A layout or indexing bug is off by O(1).
//!
//! Shapes: single elements, tile edges (128 × 256), k tails (k a multiple of 16, not of the
//! 128-wide stage), row strides wider than k, C with a wider row stride whose padding must come
//! back untouched, and every FP8 pairing with both outputs. Bad input: k not a multiple of 16
//! (dense), a misaligned start, short buffers, missing scales; a GPU other than 9.0 must give
//! `Error::UnsupportedDevice`.

use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{ComputeCapability, DeviceRepr, Stream};
use cuda_stack_kernels::ops::{self, Fp8, Fp8GemmOut};
use cuda_stack_kernels::{DType, Element, Error, Kernels};
use cuda_tests::{ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 16),
    (7, 9, 48),
    (128, 256, 128),
    (129, 257, 144),
    (333, 517, 208),
    (64, 300, 1024),
    (300, 8, 16),
    (256, 512, 2000),
];

/// More tiles (17 x 17 of 128 x 256, ragged at both edges) than an H100 or H200 has SMs: each
/// persistent block takes two or three tiles, so the stage ring and its phases carry over from
/// one tile to the next.
const PERSISTENT: (usize, usize, usize) = (2100, 4100, 64);

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// FP8 values spread over a few binades (what a scaled tensor looks like).
fn data<Q: Fp8>(seed: u64, n: usize) -> Vec<Q> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n)
        .map(|_| Q::from_f32((r.unit() * 8.0) as f32))
        .collect()
}

fn upload<T: DeviceRepr>(
    s: &Stream,
    v: &[T],
    off: usize,
) -> Res<cuda_stack_driver::DeviceBuffer<T>> {
    let mut all = vec![T::zeroed(); off];
    all.extend_from_slice(v);
    Ok(s.clone_htod(&all)?)
}

fn eps_out<C: Fp8GemmOut>() -> f64 {
    if <C as Fp8GemmOut>::DTYPE == DType::BF16 {
        1.0 / 256.0
    } else {
        1.0 / (1u64 << 22) as f64
    }
}
const EPS_ACC: f64 = 1.0 / 512.0;

fn on_hopper(s: &Stream) -> bool {
    s.context().limits().compute_capability == (ComputeCapability { major: 9, minor: 0 })
}

#[allow(clippy::too_many_arguments)]
fn one<A: Fp8, B: Fp8, C: Fp8GemmOut + Element>(
    k: &Kernels,
    s: &Stream,
    m: usize,
    n: usize,
    kd: usize,
    pad: usize,
    seed: u64,
    worst: &mut f64,
) -> TestResult {
    let (lda, ldb, ldc) = (kd + pad, kd + pad, n + 3);
    let a: Vec<A> = data(seed, m * lda);
    let b: Vec<B> = data(seed + 1, n * ldb);
    let (a_inv, b_inv) = (0.5f32, 0.25f32);
    let (want, bound) = ops::gemm_fp8_cpu(m, n, kd, &a, lda, &b, ldb, f64::from(a_inv * b_inv));
    let (da, db) = (upload(s, &a, 0)?, upload(s, &b, 0)?);
    let scales = s.clone_htod(&[a_inv, b_inv])?;
    let mut dc = s.alloc_zeros::<C>(m * ldc)?;
    s.memset_bytes(&mut dc, 0xFF)?; // NaN poison
    ops::gemm_fp8(
        k,
        s,
        m,
        n,
        kd,
        &da,
        lda,
        &db,
        ldb,
        &scales.slice(0..1)?,
        &scales.slice(1..2)?,
        &mut dc,
        ldc,
    )?;
    let got = s.clone_dtoh(&dc)?;
    let what = format!(
        "{:?}x{:?}->{:?} {m}x{n}x{kd} pad={pad}",
        A::DTYPE,
        B::DTYPE,
        <C as Fp8GemmOut>::DTYPE
    );
    let eo = eps_out::<C>();
    for (i, v) in got.iter().enumerate() {
        let (r, c) = (i / ldc, i % ldc);
        if c >= n {
            ensure!(
                v.to_f64().is_nan(),
                "{what}: padding C[{r}, {c}] was written"
            );
            continue;
        }
        let (g, w) = (v.to_f64(), want[r * n + c]);
        let tol = eo * w.abs() + EPS_ACC * bound[r * n + c] + 1e-30;
        ensure!(
            (g - w).abs() <= tol,
            "{what}: C[{r}, {c}] = {g}, expected {w} (tolerance {tol:e})"
        );
        if bound[r * n + c] > 0.0 {
            *worst = worst.max((g - w).abs() / bound[r * n + c]);
        }
    }
    Ok(())
}

fn all_pairings<C: Fp8GemmOut + Element>(k: &Kernels, s: &Stream) -> TestResult {
    let mut seed = 3;
    let mut worst = 0.0f64;
    for &(m, n, kd) in SHAPES {
        for pad in [0usize, 16] {
            seed += 2;
            one::<F8E4M3, F8E4M3, C>(k, s, m, n, kd, pad, seed, &mut worst)?;
            one::<F8E4M3, F8E5M2, C>(k, s, m, n, kd, pad, seed, &mut worst)?;
            one::<F8E5M2, F8E4M3, C>(k, s, m, n, kd, pad, seed, &mut worst)?;
            one::<F8E5M2, F8E5M2, C>(k, s, m, n, kd, pad, seed, &mut worst)?;
        }
    }
    let (m, n, kd) = PERSISTENT;
    for pad in [0usize, 16] {
        seed += 2;
        one::<F8E4M3, F8E4M3, C>(k, s, m, n, kd, pad, seed, &mut worst)?;
    }
    println!(
        "gemm_fp8 -> {:?}: worst |got - ref| / Σ|a·b| = {worst:.3e} (bound {EPS_ACC:.3e} + output rounding)",
        <C as Fp8GemmOut>::DTYPE
    );
    Ok(())
}

fn gemm() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !on_hopper(&s) {
        let a = s.alloc_zeros::<F8E4M3>(16)?;
        let sc = s.clone_htod(&[1.0f32])?;
        let mut c = s.alloc_zeros::<bf16>(1)?;
        let r = ops::gemm_fp8(&k, &s, 1, 1, 16, &a, 16, &a, 16, &sc, &sc, &mut c, 1);
        ensure!(
            matches!(r, Err(Error::UnsupportedDevice { .. })),
            "not 9.0: {r:?}"
        );
        return Ok(());
    }
    all_pairings::<bf16>(&k, &s)?;
    all_pairings::<f32>(&k, &s)
}

/// k = 0 writes zeros (and only the product's entries); m = 0 or n = 0 does nothing.
fn empty_k() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !on_hopper(&s) {
        return Ok(());
    }
    let a = s.alloc_zeros::<F8E4M3>(16)?;
    let sc = s.clone_htod(&[1.0f32])?;
    let mut c = s.alloc_zeros::<f32>(3 * 5)?;
    s.memset_bytes(&mut c, 0xFF)?;
    ops::gemm_fp8(&k, &s, 3, 4, 0, &a, 16, &a, 16, &sc, &sc, &mut c, 5)?;
    let got = s.clone_dtoh(&c)?;
    for (i, v) in got.iter().enumerate() {
        if i % 5 < 4 {
            ensure!(*v == 0.0, "C[{i}] = {v}, expected 0");
        } else {
            ensure!(v.is_nan(), "padding C[{i}] was written");
        }
    }
    Ok(())
}

fn bad_input() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !on_hopper(&s) {
        return Ok(());
    }
    let a = s.alloc_zeros::<F8E4M3>(64 * 64)?;
    let sc = s.clone_htod(&[1.0f32])?;
    let none = s.alloc_zeros::<f32>(0)?;
    let mut c = s.alloc_zeros::<bf16>(64 * 64)?;
    // Dense k = 40: rows of 40 bytes are not 16-byte multiples.
    let r = ops::gemm_fp8(&k, &s, 8, 8, 40, &a, 40, &a, 40, &sc, &sc, &mut c, 8);
    ensure!(
        matches!(&r, Err(Error::Invalid { problem, .. }) if problem.contains("multiple of 16")),
        "k = 40: {r:?}"
    );
    // A view one byte into the buffer.
    let r = ops::gemm_fp8(
        &k,
        &s,
        8,
        8,
        32,
        &a.slice(1..)?,
        32,
        &a,
        32,
        &sc,
        &sc,
        &mut c,
        8,
    );
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "misaligned a: {r:?}"
    );
    // A too short for [64, 64].
    let r = ops::gemm_fp8(
        &k,
        &s,
        64,
        8,
        64,
        &a.slice(1..)?,
        64,
        &a,
        64,
        &sc,
        &sc,
        &mut c,
        8,
    );
    ensure!(matches!(r, Err(Error::Shape { .. })), "short a: {r:?}");
    // lda < k.
    let r = ops::gemm_fp8(&k, &s, 8, 8, 64, &a, 32, &a, 64, &sc, &sc, &mut c, 8);
    ensure!(matches!(r, Err(Error::Invalid { .. })), "lda < k: {r:?}");
    // No scale.
    let r = ops::gemm_fp8(&k, &s, 8, 8, 64, &a, 64, &a, 64, &none, &sc, &mut c, 8);
    ensure!(matches!(r, Err(Error::Length { .. })), "no scale: {r:?}");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("gemm_all_pairings", gemm),
        gpu("empty_k", empty_k),
        gpu("bad_input", bad_input),
    ]);
}
