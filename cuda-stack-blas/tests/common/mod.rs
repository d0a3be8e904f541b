//! Shared by the cuda-stack-blas test binaries: fresh random data, the CPU reference GEMM (f64, with
//! the same row-major transposes, leading dimensions, batches and epilogues), and comparisons
//! with a per-element error bound.

#![allow(dead_code)]

use cuda_stack_blas::{Element, Epilogue, Gemm, Transpose};
use cuda_stack_driver::half::{bf16, f16};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// xorshift64*; seeded from the clock so every run multiplies fresh numbers (the seed is in
/// every failure message, to replay it).
pub struct Rng {
    state: u64,
    pub seed: u64,
}

impl Rng {
    pub fn fresh() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x1234_5678);
        let seed = std::env::var("CUDA_BLAS_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(t);
        Rng {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            seed,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) * 2.0 - 1.0
    }
}

/// Test element types: conversion to and from f64, and the tolerance of their products
/// relative to the sum of |terms| (f32 ~1e-5, f16/bf16 ~1e-2 as outputs).
pub trait TestElem: Element + Copy {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// Relative error allowed in an output of this type (on top of the accumulation's).
    const OUT_TOL: f64;
}

impl TestElem for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    const OUT_TOL: f64 = 1e-5;
}
impl TestElem for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    const OUT_TOL: f64 = 1e-12;
}
impl TestElem for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    const OUT_TOL: f64 = 1e-2;
}
impl TestElem for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    const OUT_TOL: f64 = 1e-2;
}

/// `n` random values of `T` in [-1, 1) (never all zero: a zero draw is nudged).
pub fn random<T: TestElem>(rng: &mut Rng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| {
            let v = rng.unit();
            T::from_f64(if v == 0.0 { 0.5 } else { v })
        })
        .collect()
}

pub fn to_f64<T: TestElem>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// Buffer lengths a GEMM's operands need (tight for the strides and leading dims given).
pub fn lens(g: &Gemm) -> (usize, usize, usize) {
    let span = |(r, c): (usize, usize), ld: usize| {
        if r == 0 || c == 0 {
            0
        } else {
            (r - 1) * ld + c
        }
    };
    let (sa, sb, sc) = (
        span(g.a_stored(), g.lda()),
        span(g.b_stored(), g.ldb()),
        span((g.m, g.n), g.ldc()),
    );
    match g.batch {
        None => (sa, sb, sc),
        Some(b) if b.count == 0 => (0, 0, 0),
        Some(b) => (
            (b.count - 1) * b.stride_a + sa,
            (b.count - 1) * b.stride_b + sb,
            (b.count - 1) * b.stride_c + sc,
        ),
    }
}

pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// The derivative of [`gelu`] (the tanh form's own derivative, as PyTorch's
/// `gelu_backward(approximate='tanh')`).
pub fn gelu_grad(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let t = (c * (x + 0.044715 * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)
}

/// The CPU reference, in f64: returns the expected `c` and, per element, the error scale
/// `|alpha|·Σ|a·b| + |beta·c| + |bias|` that tolerances multiply. Elements of `c` outside the
/// matrices (gaps of a leading dimension or a batch stride) must keep `c0`'s values (scale 0).
pub fn reference(
    g: &Gemm,
    epilogue: Epilogue,
    a: &[f64],
    b: &[f64],
    bias: Option<&[f64]>,
    c0: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let mut c = c0.to_vec();
    let mut scale = vec![0.0; c0.len()];
    let (count, sa, sb, sc) = match g.batch {
        None => (1, 0, 0, 0),
        Some(bt) => (bt.count, bt.stride_a, bt.stride_b, bt.stride_c),
    };
    for bi in 0..count {
        for i in 0..g.m {
            for j in 0..g.n {
                let (mut sum, mut abs) = (0.0, 0.0);
                for p in 0..g.k {
                    let av = match g.trans_a {
                        Transpose::No => a[bi * sa + i * g.lda() + p],
                        Transpose::Yes => a[bi * sa + p * g.lda() + i],
                    };
                    let bv = match g.trans_b {
                        Transpose::No => b[bi * sb + p * g.ldb() + j],
                        Transpose::Yes => b[bi * sb + j * g.ldb() + p],
                    };
                    sum += av * bv;
                    abs += (av * bv).abs();
                }
                let at = bi * sc + i * g.ldc() + j;
                let old = if g.beta == 0.0 { 0.0 } else { g.beta * c0[at] };
                let bv = bias.map_or(0.0, |b| b[j]);
                let x = g.alpha * sum + old + bv;
                c[at] = match epilogue {
                    Epilogue::Relu | Epilogue::BiasRelu => x.max(0.0),
                    Epilogue::Gelu
                    | Epilogue::BiasGelu
                    | Epilogue::GeluAux
                    | Epilogue::GeluAuxBias => gelu(x),
                    // The product only: the caller multiplies by gelu'(aux) (matmul_gelu_aux.rs).
                    Epilogue::None
                    | Epilogue::Bias
                    | Epilogue::DGelu
                    | Epilogue::DGeluBGrad
                    | Epilogue::BGradA
                    | Epilogue::BGradB => x,
                };
                scale[at] = g.alpha.abs() * abs + old.abs() + bv.abs();
            }
        }
    }
    (c, scale)
}

/// Fails unless every `got[i]` is within `tol·scale[i]` of `want[i]`; where the scale is 0
/// (elements outside the matrices, which must be untouched) it must be exactly `want[i]`.
pub fn compare(
    what: &str,
    seed: u64,
    got: &[f64],
    want: &[f64],
    scale: &[f64],
    tol: f64,
) -> TestResult {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    for i in 0..got.len() {
        let err = (got[i] - want[i]).abs();
        // Written so that a NaN result fails too.
        let within = err <= tol * scale[i];
        if !within {
            return Err(format!(
                "{what} (seed {seed}; rerun with CUDA_BLAS_TEST_SEED={seed}): element {i} is {}, \
                 expected {} (error {err:.3e}, allowed {:.3e})",
                got[i],
                want[i],
                tol * scale[i]
            )
            .into());
        }
    }
    Ok(())
}
