//! `Blas::matmul_bgrad` (cuBLASLt's `BGRADA` / `BGRADB`: a GEMM that also writes the sums over
//! `k` of one operand) against the CPU (f64): the product as `matmul_epilogue.rs` checks it,
//! and the vector — `Σ_p op(A)[i, p]` per row of `C` for `BGradA`, `Σ_p op(B)[p, j]` per column
//! for `BGradB` — for f32, TF32, f16 and bf16, every transpose pair, aligned and odd shapes, the
//! product against `Blas::gemm`'s, the linear layer's weight-gradient shapes, and every typed
//! error. Ignored without a GPU or cuBLAS (12 or 13).
//!
//! Which combinations must run: the linear layer's (`trans_a = Yes`, `trans_b = No`, `BGradA`,
//! the configuration PyTorch, Transformer Engine and llm.c use) at the aligned shapes, in f16
//! and bf16 (the types the runtime fuses). Every other combination, the odd shapes, and f32 /
//! TF32 may have no cuBLASLt kernel: that must be the typed `NoAlgorithm` (printed as a note
//! with a count per type), never a wrong answer.
//!
//! Tolerances: the product as in `matmul_epilogue.rs` (the accumulation's, `acc_tol`, plus the
//! output type's rounding, × Σ|a·b|); the vector within `acc_tol·Σ|x| + out_tol·|Σx|` — the
//! accumulation over `k` in the compute type (f32) plus one rounding to the output type
//! (bf16: 2⁻⁸ relative, `out_tol` 1e-2; f16 2⁻¹¹; f32 1e-5).

mod common;

use common::*;
use cuda_stack_blas::{Blas, BlasError, Epilogue, Gemm, Math, Transpose};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, Stream};
use cuda_tests::{ensure, gpu_cublas, run};

/// Poison for the output's gaps and the vector's tail: must survive.
const PAD: f64 = -7.0;

fn setup() -> Result<(Context, Stream, Blas), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::get(&ctx)?;
    Ok((ctx, stream, blas))
}

fn no_algorithm(e: &(dyn std::error::Error + 'static)) -> bool {
    e.to_string().contains("has no algorithm")
}

/// The expected vector and its error scale (Σ|x|): sums over k of op(A)'s rows (BGradA) or of
/// op(B)'s columns (BGradB), from the operands as stored (leading dimensions included).
fn operand_sums(g: &Gemm, epilogue: Epilogue, a: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let op_a = |i: usize, p: usize| match g.trans_a {
        Transpose::No => a[i * g.lda() + p],
        Transpose::Yes => a[p * g.lda() + i],
    };
    let op_b = |p: usize, j: usize| match g.trans_b {
        Transpose::No => b[p * g.ldb() + j],
        Transpose::Yes => b[j * g.ldb() + p],
    };
    let (len, at): (usize, Box<dyn Fn(usize, usize) -> f64>) = match epilogue {
        Epilogue::BGradA => (g.m, Box::new(op_a)),
        _ => (g.n, Box::new(move |j, p| op_b(p, j))),
    };
    let mut sum = vec![0.0; len];
    let mut abs = vec![0.0; len];
    for (i, (s, z)) in sum.iter_mut().zip(abs.iter_mut()).enumerate() {
        for p in 0..g.k {
            let v = at(i, p);
            *s += v;
            *z += v.abs();
        }
    }
    (sum, abs)
}

/// `matmul_bgrad` at `g` with `epilogue`: the product against the CPU and against
/// `Blas::gemm`'s, the vector against the CPU, the output's gaps and the vector's tail
/// untouched. Returns false when cuBLASLt had no algorithm.
fn check<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
    epilogue: Epilogue,
    acc_tol: f64,
) -> Result<bool, Box<dyn std::error::Error>> {
    let (la, lb, lc) = lens(g);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let c0: Vec<C> = vec![C::from_f64(PAD); lc];
    let len = epilogue.bias_grad_len(g.m, g.n).unwrap_or(0);
    let grad0: Vec<C> = vec![C::from_f64(PAD); len + 8];
    let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let (mut dc, mut dgrad) = (stream.clone_htod(&c0)?, stream.clone_htod(&grad0)?);
    let what = format!(
        "matmul_bgrad {epilogue:?} {:?} -> {:?} {g:?}",
        A::DTYPE,
        C::DTYPE
    );
    let r = {
        let mut view = dgrad.slice_mut(..len)?;
        blas.matmul_bgrad(stream, g, epilogue, &da, &db, &mut view, &mut dc)
    };
    match r {
        Err(e) if no_algorithm(&e) => {
            eprintln!("note: {what}: {e}");
            return Ok(false);
        }
        r => r?,
    }
    let got_c = to_f64(&stream.clone_dtoh(&dc)?);
    let (a64, b64) = (to_f64(&a), to_f64(&b));
    let (want_c, scale_c) = reference(g, Epilogue::None, &a64, &b64, None, &to_f64(&c0));
    let tol = acc_tol + C::OUT_TOL;
    compare(
        &format!("{what}: the product"),
        rng.seed,
        &got_c,
        &want_c,
        &scale_c,
        tol,
    )?;
    // The same product without the epilogue (cuBLAS's GEMM, maybe another kernel): equal to
    // the rounding of either.
    let mut plain = stream.clone_htod(&c0)?;
    blas.gemm(stream, g, &da, &db, &mut plain)?;
    let plain = to_f64(&stream.clone_dtoh(&plain)?);
    compare(
        &format!("{what}: the product against Blas::gemm's"),
        rng.seed,
        &got_c,
        &plain,
        &scale_c,
        2.0 * tol,
    )?;
    let got = to_f64(&stream.clone_dtoh(&dgrad)?);
    let (want, abs) = operand_sums(g, epilogue, &a64, &b64);
    for i in 0..len {
        let allowed = acc_tol * abs[i] + C::OUT_TOL * want[i].abs() + 1e-12;
        ensure!(
            (got[i] - want[i]).abs() <= allowed,
            "{what}: bias gradient [{i}] is {}, expected {} (allowed {allowed:.3e}; seed {}, rerun \
             with CUDA_BLAS_TEST_SEED={})",
            got[i],
            want[i],
            rng.seed,
            rng.seed
        );
    }
    ensure!(
        got[len..].iter().all(|&v| v == PAD),
        "{what}: the bias-gradient buffer was written past its {len} elements"
    );
    Ok(true)
}

/// Shapes (m, n, k): multiples of 8, then odd ones (16-bit types may have no algorithm).
const ALIGNED: &[(usize, usize, usize)] = &[(8, 8, 8), (64, 96, 40), (128, 256, 64), (48, 40, 512)];
const ODD: &[(usize, usize, usize)] = &[(1, 8, 8), (13, 24, 40), (33, 17, 9), (61, 53, 47)];

/// Every transpose pair and both epilogues at every shape. `linear_must_run`: whether the
/// linear layer's combination (trans_a = Yes, trans_b = No, BGradA) must have an algorithm at
/// the aligned shapes (the 16-bit types, which the runtime fuses); for f32 and TF32 a missing
/// one is printed as a note.
fn every_combination<A: TestElem, C: TestElem>(
    math: Math,
    acc_tol: f64,
    linear_must_run: bool,
) -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    let (mut ran, mut none) = (0, 0);
    for (shapes, aligned) in [(ALIGNED, true), (ODD, false)] {
        for &(m, n, k) in shapes {
            for ta in [Transpose::Yes, Transpose::No] {
                for tb in [Transpose::No, Transpose::Yes] {
                    for e in [Epilogue::BGradA, Epilogue::BGradB] {
                        let g = Gemm::new(m, n, k).trans_a(ta).trans_b(tb).math(math);
                        let ok = check::<A, C>(&mut rng, &stream, &blas, &g, e, acc_tol)?;
                        let linear = aligned
                            && ta == Transpose::Yes
                            && tb == Transpose::No
                            && e == Epilogue::BGradA;
                        ensure!(
                            ok || !(linear && linear_must_run),
                            "no algorithm for the linear layer's {g:?}"
                        );
                        if ok {
                            ran += 1
                        } else {
                            none += 1
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "note: {:?} ({math:?}): {ran} combinations ran, {none} had no cuBLASLt algorithm",
        C::DTYPE
    );
    Ok(())
}

fn f32_bgrad() -> TestResult {
    every_combination::<f32, f32>(Math::Default, 1e-5, false)
}
fn tf32_bgrad() -> TestResult {
    every_combination::<f32, f32>(Math::Tf32, 2e-3, false)
}
fn f16_bgrad() -> TestResult {
    every_combination::<f16, f16>(Math::Default, 1e-4, true)
}
fn bf16_bgrad() -> TestResult {
    every_combination::<bf16, bf16>(Math::Default, 1e-4, true)
}

/// A linear layer's weight gradient with its bias gradient, small GPT-2-like shapes in bf16:
/// `dW [out, in] = dYᵀ · X` over `rows` tokens, `db = Σ_rows dY`, with the weight's rows padded
/// (ldc > in) and with odd widths (which may have no algorithm).
fn linear_weight_gradient_shapes_in_bf16() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for (rows, in_f, out_f, must) in [
        (1024, 64, 192, true),
        (1024, 64, 64, true),
        (512, 256, 64, true),
        (1000, 72, 40, true),
        (777, 30, 50, false),
    ] {
        let g = Gemm::new(out_f, in_f, rows)
            .trans_a(Transpose::Yes)
            .leading_dims(out_f, in_f, in_f);
        let ok = check::<bf16, bf16>(&mut rng, &stream, &blas, &g, Epilogue::BGradA, 1e-4)?;
        ensure!(ok || !must, "no algorithm for the weight gradient {g:?}");
        let padded = g.leading_dims(out_f, in_f, in_f + 8);
        let ok = check::<bf16, bf16>(&mut rng, &stream, &blas, &padded, Epilogue::BGradA, 1e-4)?;
        ensure!(
            ok || !must,
            "no algorithm for the weight gradient {padded:?}"
        );
    }
    Ok(())
}

fn bgrad_errors() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    // C [4, 12] = A [4, 4] · B [4, 12]: BGradA has 4 elements, BGradB 12.
    let g = Gemm::new(4, 12, 4);
    let a = stream.clone_htod(&[1.0f32; 16])?;
    let b = stream.clone_htod(&[1.0f32; 48])?;
    let mut c = stream.clone_htod(&[3.0f32; 48])?;
    let mut grad = stream.clone_htod(&[9.0f32; 16])?;
    let length = |r: Result<(), BlasError>, found: usize, per: &str| match r {
        Err(BlasError::Length {
            operand: "bias_grad",
            found: f,
            expected,
            ..
        }) if f == found && expected.contains(per) => Ok(()),
        other => Err(format!("bias gradient of {found} elements: {other:?}")),
    };
    {
        let mut short = grad.slice_mut(..3)?;
        length(
            blas.matmul_bgrad(&stream, &g, Epilogue::BGradA, &a, &b, &mut short, &mut c),
            3,
            "row",
        )?;
    }
    {
        let mut short = grad.slice_mut(..11)?;
        length(
            blas.matmul_bgrad(&stream, &g, Epilogue::BGradB, &a, &b, &mut short, &mut c),
            11,
            "column",
        )?;
    }
    {
        let mut off = grad.slice_mut(1..)?;
        match blas.matmul_bgrad(&stream, &g, Epilogue::BGradA, &a, &b, &mut off, &mut c) {
            Err(BlasError::Misaligned {
                operand: "bias_grad",
                found: 4,
                required: 16,
                ..
            }) => {}
            other => return Err(format!("misaligned bias gradient: {other:?}").into()),
        }
    }
    for e in [Epilogue::None, Epilogue::Bias, Epilogue::DGeluBGrad] {
        match blas.matmul_bgrad(&stream, &g, e, &a, &b, &mut grad, &mut c) {
            Err(BlasError::Epilogue { problem, .. }) if problem.contains("BGradA") => {}
            other => return Err(format!("matmul_bgrad with {e:?}: {other:?}").into()),
        }
    }
    match blas.matmul(&stream, &g, Epilogue::BGradA, &a, &b, None, &mut c) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("matmul_bgrad") => {}
        other => return Err(format!("matmul with BGradA: {other:?}").into()),
    }
    let batched = Gemm::new(2, 12, 4).batched(2, 8, 0, 24);
    match blas.matmul_bgrad(
        &stream,
        &batched,
        Epilogue::BGradB,
        &a,
        &b,
        &mut grad,
        &mut c,
    ) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("batch") => {}
        other => return Err(format!("batched: {other:?}").into()),
    }
    let scaled = g.scale(2.0, 0.0);
    match blas.matmul_bgrad(
        &stream,
        &scaled,
        Epilogue::BGradA,
        &a,
        &b,
        &mut grad,
        &mut c,
    ) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("alpha") => {}
        other => return Err(format!("alpha 2: {other:?}").into()),
    }
    let empty_k = Gemm::new(4, 12, 0);
    match blas.matmul_bgrad(
        &stream,
        &empty_k,
        Epilogue::BGradA,
        &a,
        &b,
        &mut grad,
        &mut c,
    ) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("non-empty") => {}
        other => return Err(format!("k = 0: {other:?}").into()),
    }
    let a64 = stream.clone_htod(&[1.0f64; 16])?;
    let b64 = stream.clone_htod(&[1.0f64; 48])?;
    let mut c64 = stream.clone_htod(&[3.0f64; 48])?;
    let mut grad64 = stream.clone_htod(&[9.0f64; 16])?;
    match blas.matmul_bgrad(
        &stream,
        &g,
        Epilogue::BGradA,
        &a64,
        &b64,
        &mut grad64,
        &mut c64,
    ) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("F64") => {}
        other => return Err(format!("f64: {other:?}").into()),
    }
    ensure!(
        stream.clone_dtoh(&c)? == [3.0f32; 48] && stream.clone_dtoh(&grad)? == [9.0f32; 16],
        "a refused call changed c or the bias gradient"
    );
    // And the valid calls, in bf16 (exact here): every product element is 4; the row sums of
    // op(A) are 4 (BGradA, 4 of them, in the linear layer's layout: A read transposed), the
    // column sums of op(B) are 4 (BGradB, 12 of them; either layout of B may lack a kernel).
    let one = bf16::from_f32(1.0);
    let a16 = stream.clone_htod(&[one; 16])?;
    let b16 = stream.clone_htod(&[one; 48])?;
    let cases = [
        (Epilogue::BGradA, Transpose::Yes, Transpose::No, 4, true),
        (Epilogue::BGradB, Transpose::No, Transpose::No, 12, false),
        (Epilogue::BGradB, Transpose::No, Transpose::Yes, 12, false),
    ];
    for (e, ta, tb, len, must) in cases {
        let g = Gemm::new(4, 12, 4).trans_a(ta).trans_b(tb);
        let mut c16 = stream.clone_htod(&[bf16::from_f32(3.0); 48])?;
        let mut grad16 = stream.clone_htod(&[bf16::from_f32(9.0); 16])?;
        match blas.matmul_bgrad(&stream, &g, e, &a16, &b16, &mut grad16, &mut c16) {
            Err(e) if !must && no_algorithm(&e) => {
                eprintln!("note: {g:?}: {e}");
                continue;
            }
            r => r?,
        }
        let c_host = stream.clone_dtoh(&c16)?;
        let grad_host = stream.clone_dtoh(&grad16)?;
        let (four, nine) = (bf16::from_f32(4.0), bf16::from_f32(9.0));
        ensure!(
            c_host.iter().all(|&v| v == four),
            "{e:?}: product {c_host:?}"
        );
        ensure!(
            grad_host[..len].iter().all(|&v| v == four)
                && grad_host[len..].iter().all(|&v| v == nine),
            "{e:?} {g:?}: bias gradient {grad_host:?}"
        );
    }
    Ok(())
}

fn main() {
    run(vec![
        gpu_cublas("f32_bgrad", f32_bgrad),
        gpu_cublas("tf32_bgrad", tf32_bgrad),
        gpu_cublas("f16_bgrad", f16_bgrad),
        gpu_cublas("bf16_bgrad", bf16_bgrad),
        gpu_cublas(
            "linear_weight_gradient_shapes_in_bf16",
            linear_weight_gradient_shapes_in_bf16,
        ),
        gpu_cublas("bgrad_errors", bgrad_errors),
    ])
}
