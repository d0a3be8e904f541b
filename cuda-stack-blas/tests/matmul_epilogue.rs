//! `Blas::matmul` (cuBLASLt) against the CPU: every epilogue (none, ReLU, bias, bias+ReLU,
//! GELU, bias+GELU) for f32, TF32, f16 and bf16, odd shapes, transposes, batches; the
//! heuristic asked once per problem; and each error. Ignored without a GPU or cuBLAS (12 or 13).
//!
//! Tolerances, × (|alpha|·Σ|a·b| + |beta·c| + |bias|): f32 1e-5, TF32 2e-3, 16-bit inputs with
//! f32 accumulation 1e-4, plus the output type's rounding (f16/bf16 1e-2), plus 1e-3 for GELU.

mod common;

use common::*;
use cuda_stack_blas::{Blas, BlasError, Epilogue, Gemm, Math, Transpose};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, Stream};
use cuda_tests::{ensure, gpu_cublas, run};

const EPILOGUES: [Epilogue; 6] = [
    Epilogue::None,
    Epilogue::Relu,
    Epilogue::Bias,
    Epilogue::BiasRelu,
    Epilogue::Gelu,
    Epilogue::BiasGelu,
];

fn setup() -> Result<(Context, Stream, Blas), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::get(&ctx)?;
    Ok((ctx, stream, blas))
}

fn check<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
    epilogue: Epilogue,
    acc_tol: f64,
) -> TestResult {
    let (la, lb, lc) = lens(g);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let c0: Vec<C> = random(rng, lc);
    let bias: Vec<C> = random(rng, g.n);
    let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let dbias = stream.clone_htod(&bias)?;
    let mut dc = stream.clone_htod(&c0)?;
    let with_bias = epilogue.has_bias().then_some(&*dbias);
    blas.matmul(stream, g, epilogue, &da, &db, with_bias, &mut dc)?;
    let got = to_f64(&stream.clone_dtoh(&dc)?);
    let bias64 = to_f64(&bias);
    let (want, scale) = reference(
        g,
        epilogue,
        &to_f64(&a),
        &to_f64(&b),
        epilogue.has_bias().then_some(&bias64[..]),
        &to_f64(&c0),
    );
    let what = format!("{epilogue:?} {:?} -> {:?} {g:?}", A::DTYPE, C::DTYPE);
    // cuBLASLt's GELU is the tanh approximation, possibly with the GPU's fast tanh (~2^-11
    // relative error): allow 1e-3 of the scale more there.
    let gelu = matches!(epilogue, Epilogue::Gelu | Epilogue::BiasGelu);
    let tol = acc_tol + C::OUT_TOL + if gelu { 1e-3 } else { 0.0 };
    compare(&what, rng.seed, &got, &want, &scale, tol)
}

const SHAPES: &[(usize, usize, usize)] = &[(1, 8, 8), (13, 24, 40), (64, 128, 96), (127, 72, 200)];

fn every_epilogue<A: TestElem, C: TestElem>(math: Math, acc_tol: f64) -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for &(m, n, k) in SHAPES {
        for epilogue in EPILOGUES {
            // x·Wᵀ (nn.Linear's layout) and a plain x·W.
            for tb in [Transpose::Yes, Transpose::No] {
                let g = Gemm::new(m, n, k).trans_b(tb).math(math);
                check::<A, C>(&mut rng, &stream, &blas, &g, epilogue, acc_tol)?;
            }
        }
    }
    Ok(())
}

fn f32_epilogues() -> TestResult {
    every_epilogue::<f32, f32>(Math::Default, 1e-5)
}
fn tf32_epilogues() -> TestResult {
    every_epilogue::<f32, f32>(Math::Tf32, 2e-3)
}
fn f16_epilogues() -> TestResult {
    every_epilogue::<f16, f16>(Math::Default, 1e-4)
}
fn bf16_epilogues() -> TestResult {
    every_epilogue::<bf16, bf16>(Math::Default, 1e-4)
}
fn f16_to_f32_epilogues() -> TestResult {
    every_epilogue::<f16, f32>(Math::Default, 1e-4)
}

/// Odd shapes (m, n, k not multiples of 4 or 8), transposed A, alpha/beta, and a batch
/// sharing one bias.
fn odd_shapes_scales_and_batches() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for &(m, n, k) in &[(5, 7, 3), (33, 17, 9), (61, 53, 47)] {
        for ta in [Transpose::No, Transpose::Yes] {
            let g = Gemm::new(m, n, k).trans_a(ta).scale(0.5, 2.0);
            for epilogue in [Epilogue::BiasRelu, Epilogue::Gelu] {
                check::<f32, f32>(&mut rng, &stream, &blas, &g, epilogue, 1e-5)?;
                // 16-bit operands with odd leading dimensions may have no cuBLASLt algorithm:
                // that is a typed error, never a wrong answer.
                match check::<bf16, f32>(&mut rng, &stream, &blas, &g, epilogue, 1e-4) {
                    Ok(()) => {}
                    Err(e) if e.to_string().contains("has no algorithm") => {
                        eprintln!("note: {e}")
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let g = Gemm::new(m, n, k).batched(3, m * k + 1, k * n + 3, m * n + 2);
        check::<f32, f32>(&mut rng, &stream, &blas, &g, Epilogue::BiasGelu, 1e-5)?;
    }
    Ok(())
}

fn the_heuristic_is_asked_once_per_problem() -> TestResult {
    let (ctx, stream, _) = setup()?;
    // A handle of its own, so other tests' problems do not count.
    let blas = Blas::new(&ctx)?;
    let mut rng = Rng::fresh();
    let g = Gemm::new(48, 40, 32).trans_b(Transpose::Yes);
    ensure!(blas.heuristic_queries() == 0, "fresh handle");
    for _ in 0..5 {
        check::<f32, f32>(&mut rng, &stream, &blas, &g, Epilogue::BiasRelu, 1e-5)?;
    }
    ensure!(
        blas.heuristic_queries() == 1 && blas.cached_algorithms() == 1,
        "5 calls of one problem asked the heuristic {} times",
        blas.heuristic_queries()
    );
    check::<f32, f32>(&mut rng, &stream, &blas, &g, Epilogue::Relu, 1e-5)?;
    check::<f32, f32>(
        &mut rng,
        &stream,
        &blas,
        &Gemm::new(48, 40, 33),
        Epilogue::Relu,
        1e-5,
    )?;
    ensure!(
        blas.heuristic_queries() == 3,
        "another epilogue and another k are new problems: {} queries",
        blas.heuristic_queries()
    );
    Ok(())
}

fn epilogue_errors() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let g = Gemm::new(4, 8, 4);
    let a = stream.clone_htod(&[1.0f32; 16])?;
    let b = stream.clone_htod(&[1.0f32; 32])?;
    let bias = stream.clone_htod(&[1.0f32; 9])?;
    let mut c = stream.clone_htod(&[3.0f32; 32])?;
    match blas.matmul(&stream, &g, Epilogue::BiasRelu, &a, &b, None, &mut c) {
        Err(BlasError::Epilogue { .. }) => {}
        other => return Err(format!("missing bias: {other:?}").into()),
    }
    match blas.matmul(&stream, &g, Epilogue::Relu, &a, &b, Some(&bias), &mut c) {
        Err(BlasError::Epilogue { .. }) => {}
        other => return Err(format!("unexpected bias: {other:?}").into()),
    }
    let short = bias.slice(..7)?;
    match blas.matmul(&stream, &g, Epilogue::Bias, &a, &b, Some(&short), &mut c) {
        Err(BlasError::Length {
            operand: "bias",
            found: 7,
            ..
        }) => {}
        other => return Err(format!("short bias: {other:?}").into()),
    }
    // A view one f32 into the buffer starts 4-byte aligned: refused, not faulted.
    let off = bias.slice(1..)?;
    match blas.matmul(&stream, &g, Epilogue::Bias, &a, &b, Some(&off), &mut c) {
        Err(BlasError::Misaligned {
            operand: "bias",
            found: 4,
            required: 16,
            ..
        }) => {}
        other => return Err(format!("misaligned bias: {other:?}").into()),
    }
    let h = stream.clone_htod(&[f16::ONE; 32])?;
    let mut cb = stream.clone_htod(&[bf16::ONE; 32])?;
    match blas.matmul::<f16, bf16>(&stream, &g, Epilogue::Relu, &h, &h, None, &mut cb) {
        Err(BlasError::UnsupportedTypes { .. }) => {}
        other => return Err(format!("f16 -> bf16: {other:?}").into()),
    }
    ensure!(
        stream.clone_dtoh(&c)? == [3.0f32; 32],
        "c changed by a refused call"
    );
    blas.matmul(&stream, &g, Epilogue::BiasRelu, &a, &b, Some(&bias), &mut c)?;
    ensure!(stream.clone_dtoh(&c)? == [5.0f32; 32], "relu(1·1·4 + 1)");
    Ok(())
}

fn main() {
    run(vec![
        gpu_cublas("f32_epilogues", f32_epilogues),
        gpu_cublas("tf32_epilogues", tf32_epilogues),
        gpu_cublas("f16_epilogues", f16_epilogues),
        gpu_cublas("bf16_epilogues", bf16_epilogues),
        gpu_cublas("f16_to_f32_epilogues", f16_to_f32_epilogues),
        gpu_cublas(
            "odd_shapes_scales_and_batches",
            odd_shapes_scales_and_batches,
        ),
        gpu_cublas(
            "the_heuristic_is_asked_once_per_problem",
            the_heuristic_is_asked_once_per_problem,
        ),
        gpu_cublas("epilogue_errors", epilogue_errors),
    ])
}
