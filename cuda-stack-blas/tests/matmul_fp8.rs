//! `Blas::matmul_fp8` (cuBLASLt's FP8 GEMM) against an f64 CPU reference computed from the FP8
//! inputs themselves (products of FP8 values are exact, so the differences are cuBLASLt's
//! accumulation and the one rounding of C): e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3, bf16 and f32
//! outputs, fast accumulation on and off, odd m, n a multiple of 8 but not of any tile, k a
//! multiple of 16 but not of any tile, padded leading dimensions; and each error (e5m2 x e5m2,
//! lda not a multiple of 16, n not a multiple of 8, a misaligned start or scale, a short
//! buffer, a GPU below 8.9). Ignored without a GPU or cuBLAS.
//!
//! Tolerance per entry: `|got - ref| <= eps_out · |ref| + 2^-9 · alpha · Σ|a·b|` (eps_out 2^-8
//! for bf16, 2^-22 for f32; 2^-9 covers the FP8 tensor cores' reduced-precision accumulation
//! with fast accumulation on).

use cuda_stack_blas::{Blas, BlasError, Fp8Element, Fp8Gemm, Fp8Output};
use cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{ComputeCapability, Context, DeviceRepr, Stream};
use cuda_tests::{ensure, gpu_cublas, run, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn setup() -> Res<(Context, Stream, Blas)> {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::get(&ctx)?;
    Ok((ctx, stream, blas))
}

fn fp8_gpu(s: &Stream) -> bool {
    s.context().limits().compute_capability >= ComputeCapability { major: 8, minor: 9 }
}

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32) * 2.0
            - 1.0
    }
}

/// Test operand types: the FP8 value as f32.
trait Q: Fp8Element + Copy {
    fn from(v: f32) -> Self;
    fn get(self) -> f64;
}
impl Q for F8E4M3 {
    fn from(v: f32) -> Self {
        F8E4M3::from_f32(v)
    }
    fn get(self) -> f64 {
        self.to_f64()
    }
}
impl Q for F8E5M2 {
    fn from(v: f32) -> Self {
        F8E5M2::from_f32(v)
    }
    fn get(self) -> f64 {
        self.to_f64()
    }
}
trait Out: Fp8Output + Copy {
    fn get(self) -> f64;
    const EPS: f64;
}
impl Out for f32 {
    fn get(self) -> f64 {
        f64::from(self)
    }
    const EPS: f64 = 1.0 / (1u64 << 22) as f64;
}
impl Out for bf16 {
    fn get(self) -> f64 {
        self.to_f64()
    }
    const EPS: f64 = 1.0 / 256.0;
}

fn data<T: Q>(seed: u64, n: usize) -> Vec<T> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| T::from(r.unit() * 8.0)).collect()
}

fn upload<T: DeviceRepr>(s: &Stream, v: &[T]) -> Res<cuda_stack_driver::DeviceBuffer<T>> {
    Ok(s.clone_htod(v)?)
}

fn check<A: Q, B: Q, C: Out>(s: &Stream, blas: &Blas, g: Fp8Gemm, seed: u64) -> TestResult {
    let (m, n, k) = (g.m, g.n, g.k);
    let a: Vec<A> = data(seed, m * g.lda);
    let b: Vec<B> = data(seed + 1, n * g.ldb);
    let (a_inv, b_inv) = (0.5f32, 0.125f32);
    let alpha = f64::from(a_inv) * f64::from(b_inv);
    let (da, db) = (upload(s, &a)?, upload(s, &b)?);
    // 16-byte aligned scales (cuBLASLt refuses others at launch).
    let scales = upload(s, &[a_inv, 0.0, 0.0, 0.0, b_inv])?;
    let mut dc = s.alloc_zeros::<C>(m * g.ldc)?;
    s.memset_bytes(&mut dc, 0xFF)?;
    blas.matmul_fp8(
        s,
        &g,
        &da,
        &db,
        &scales.slice(0..1)?,
        &scales.slice(4..5)?,
        &mut dc,
    )?;
    let got = s.clone_dtoh(&dc)?;
    let what = format!(
        "{:?} x {:?} -> {:?}, {m}x{n}x{k}, lds {} {} {}, fast {}",
        A::DTYPE,
        B::DTYPE,
        C::DTYPE,
        g.lda,
        g.ldb,
        g.ldc,
        g.fast_accum
    );
    for i in 0..m {
        for j in 0..g.ldc {
            let v = got[i * g.ldc + j].get();
            if j >= n {
                ensure!(v.is_nan(), "{what}: padding C[{i}, {j}] was written");
                continue;
            }
            let (mut want, mut bound) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = a[i * g.lda + p].get() * b[j * g.ldb + p].get();
                want += x;
                bound += x.abs();
            }
            let (want, bound) = (alpha * want, alpha * bound);
            let tol = C::EPS * want.abs() + bound / 512.0 + 1e-30;
            ensure!(
                (v - want).abs() <= tol,
                "{what}: C[{i}, {j}] = {v}, expected {want} (tolerance {tol:e})"
            );
        }
    }
    Ok(())
}

fn products() -> TestResult {
    let (_ctx, s, blas) = setup()?;
    if !fp8_gpu(&s) {
        let a = s.alloc_zeros::<F8E4M3>(16)?;
        let sc = s.clone_htod(&[1.0f32])?;
        let mut c = s.alloc_zeros::<f32>(1)?;
        let r = blas.matmul_fp8(&s, &Fp8Gemm::new(1, 8, 16), &a, &a, &sc, &sc, &mut c);
        ensure!(
            matches!(r, Err(BlasError::UnsupportedDevice { .. })),
            "below 8.9: {r:?}"
        );
        return Ok(());
    }
    // n and ldc multiples of 8 (cuBLASLt's rule, see Blas::matmul_fp8); m and k free of it.
    let shapes = [
        Fp8Gemm::new(1, 8, 16),
        Fp8Gemm::new(7, 16, 48),
        Fp8Gemm::new(129, 264, 144),
        Fp8Gemm::new(64, 296, 1024).leading_dims(1040, 1056, 304),
        Fp8Gemm::new(333, 40, 208),
    ];
    let mut seed = 5;
    for g in shapes {
        for fast in [false, true] {
            let g = g.fast_accum(fast);
            seed += 2;
            check::<F8E4M3, F8E4M3, bf16>(&s, &blas, g, seed)?;
            check::<F8E4M3, F8E4M3, f32>(&s, &blas, g, seed)?;
            check::<F8E4M3, F8E5M2, bf16>(&s, &blas, g, seed)?;
            check::<F8E5M2, F8E4M3, f32>(&s, &blas, g, seed)?;
        }
    }
    Ok(())
}

fn errors() -> TestResult {
    let (_ctx, s, blas) = setup()?;
    if !fp8_gpu(&s) {
        return Ok(());
    }
    let a4 = s.alloc_zeros::<F8E4M3>(64 * 64)?;
    let a5 = s.alloc_zeros::<F8E5M2>(64 * 64)?;
    let sc = s.clone_htod(&[1.0f32])?;
    let mut c = s.alloc_zeros::<bf16>(64 * 64)?;
    let g = Fp8Gemm::new(8, 8, 32);
    let r = blas.matmul_fp8(&s, &g, &a5, &a5, &sc, &sc, &mut c);
    ensure!(
        matches!(r, Err(BlasError::Fp8 { .. })),
        "e5m2 x e5m2: {r:?}"
    );
    let r = blas.matmul_fp8(&s, &Fp8Gemm::new(8, 8, 40), &a4, &a4, &sc, &sc, &mut c);
    ensure!(matches!(r, Err(BlasError::Fp8 { .. })), "k = 40: {r:?}");
    let r = blas.matmul_fp8(&s, &g, &a4.slice(1..)?, &a4, &sc, &sc, &mut c);
    ensure!(
        matches!(r, Err(BlasError::Misaligned { .. })),
        "misaligned a: {r:?}"
    );
    let r = blas.matmul_fp8(
        &s,
        &Fp8Gemm::new(64, 64, 64),
        &a4.slice(16..)?,
        &a4,
        &sc,
        &sc,
        &mut c,
    );
    ensure!(matches!(r, Err(BlasError::Length { .. })), "short a: {r:?}");
    let r = blas.matmul_fp8(&s, &g.leading_dims(16, 32, 8), &a4, &a4, &sc, &sc, &mut c);
    ensure!(
        matches!(r, Err(BlasError::LeadingDimension { .. })),
        "lda < k: {r:?}"
    );
    let r = blas.matmul_fp8(&s, &Fp8Gemm::new(8, 9, 32), &a4, &a4, &sc, &sc, &mut c);
    ensure!(matches!(r, Err(BlasError::Fp8 { .. })), "n = 9: {r:?}");
    let sc2 = s.clone_htod(&[1.0f32, 1.0])?;
    let r = blas.matmul_fp8(&s, &g, &a4, &a4, &sc2.slice(1..2)?, &sc, &mut c);
    ensure!(
        matches!(r, Err(BlasError::Misaligned { .. })),
        "scale at 4 bytes: {r:?}"
    );
    Ok(())
}

fn main() {
    run(vec![
        gpu_cublas("fp8_products", products),
        gpu_cublas("fp8_errors", errors),
    ]);
}
