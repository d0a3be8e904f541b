//! GELU's training pair on cuBLASLt against the CPU (f64, the tanh form): `matmul_gelu_aux`
//! (`GELU_AUX[_BIAS]`: the output and the pre-activation in the auxiliary matrix) and
//! `matmul_dgelu` (`DGELU[_BGRAD]`: the product times gelu'(aux), and its column sums as the
//! bias gradient), for f32, TF32, f16, bf16 and bf16 -> f32, at odd shapes, with padded
//! auxiliary leading dimensions whose padding must stay untouched; the heuristic asked once per
//! problem; and every typed error. Ignored without a GPU or cuBLAS (12 or 13).
//!
//! Tolerances as in `matmul_epilogue.rs`, × the per-element scale (Σ|a·b| + |bias|; for the
//! backward Σ|a·b| times |gelu'(aux)|): the accumulation's, plus the output type's rounding, plus
//! 1e-3 for GELU; and 2e-3·Σ|a·b| for the derivative's own error (the GPU's fast tanh). The bias gradient is compared with the
//! column sums of the **reference** `d(pre)`, within the sum of the elements' allowances.

mod common;

use common::*;
use cuda_stack_blas::{Blas, BlasError, Epilogue, Gemm, Math, Transpose};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, Stream};
use cuda_tests::{ensure, gpu_cublas, run};

/// Poison for the padding of the auxiliary matrix and of the output: must survive.
const PAD: f64 = -7.0;

fn setup() -> Result<(Context, Stream, Blas), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::get(&ctx)?;
    Ok((ctx, stream, blas))
}

/// The smallest valid auxiliary leading dimension for `n` columns (a multiple of 8), plus `pad`
/// more multiples of 8.
fn aux_ld(n: usize, pad: usize) -> usize {
    n.max(1).div_ceil(8) * 8 + 8 * pad
}

/// `product[i][j] = Σ op(A)[i][p]·op(B)[p][j]` and `Σ|…|`, in f64, row-major `[m, n]` dense.
fn product(g: &Gemm, a: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let dense = Gemm { ldc: None, ..*g };
    let (want, scale) = reference(&dense, Epilogue::None, a, b, None, &vec![0.0; g.m * g.n]);
    (want, scale)
}

/// Whether an error is cuBLASLt having no kernel for the problem (acceptable for odd 16-bit
/// leading dimensions: a typed error, never a wrong answer).
fn no_algorithm(e: &(dyn std::error::Error + 'static)) -> bool {
    e.to_string().contains("has no algorithm")
}

/// `matmul_gelu_aux` at `g` (beta 0), with or without a bias, the auxiliary matrix `pad`
/// multiples of 8 wider than needed. Returns false when cuBLASLt had no algorithm.
fn check_forward<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
    with_bias: bool,
    pad: usize,
    acc_tol: f64,
) -> Result<bool, Box<dyn std::error::Error>> {
    let (la, lb, lc) = lens(g);
    let ld = aux_ld(g.n, pad);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let bias: Vec<C> = random(rng, g.n);
    let c0: Vec<C> = vec![C::from_f64(PAD); lc];
    let aux_len = if g.m == 0 { 0 } else { (g.m - 1) * ld + g.n };
    let aux0: Vec<C> = vec![C::from_f64(PAD); aux_len + ld];
    let (da, db, dbias) = (
        stream.clone_htod(&a)?,
        stream.clone_htod(&b)?,
        stream.clone_htod(&bias)?,
    );
    let (mut dc, mut daux) = (stream.clone_htod(&c0)?, stream.clone_htod(&aux0)?);
    let r = blas.matmul_gelu_aux(
        stream,
        g,
        &da,
        &db,
        with_bias.then_some(&*dbias),
        &mut dc,
        &mut daux,
        ld,
    );
    let what = format!(
        "matmul_gelu_aux (bias {with_bias}, aux ld {ld}) {:?} -> {:?} {g:?}",
        A::DTYPE,
        C::DTYPE
    );
    match r {
        Err(e) if no_algorithm(&e) => {
            eprintln!("note: {what}: {e}");
            return Ok(false);
        }
        r => r?,
    }
    let (got_c, got_aux) = (
        to_f64(&stream.clone_dtoh(&dc)?),
        to_f64(&stream.clone_dtoh(&daux)?),
    );
    let (prod, abs) = product(g, &to_f64(&a), &to_f64(&b));
    let bias64 = to_f64(&bias);
    let (mut want_c, mut scale_c) = (vec![PAD; lc], vec![0.0; lc]);
    let (mut want_aux, mut scale_aux) = (vec![PAD; aux0.len()], vec![0.0; aux0.len()]);
    for i in 0..g.m {
        for j in 0..g.n {
            let bv = if with_bias { bias64[j] } else { 0.0 };
            let pre = prod[i * g.n + j] + bv;
            let s = abs[i * g.n + j] + bv.abs();
            want_c[i * g.ldc() + j] = gelu(pre);
            scale_c[i * g.ldc() + j] = s;
            want_aux[i * ld + j] = pre;
            scale_aux[i * ld + j] = s;
        }
    }
    compare(
        &format!("{what}: output"),
        rng.seed,
        &got_c,
        &want_c,
        &scale_c,
        acc_tol + C::OUT_TOL + 1e-3,
    )?;
    compare(
        &format!("{what}: auxiliary (pre-activation) matrix, row-major [m, n] with row stride ld"),
        rng.seed,
        &got_aux,
        &want_aux,
        &scale_aux,
        acc_tol + C::OUT_TOL,
    )?;
    Ok(true)
}

/// `matmul_dgelu` at `g` (beta 0), with or without the bias gradient; `pre` random in
/// [-3, 3), stored with row stride `aux_ld(n, pad)`. Returns false when cuBLASLt had no
/// algorithm.
#[allow(clippy::too_many_arguments)]
fn check_backward<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
    with_grad: bool,
    pad: usize,
    acc_tol: f64,
) -> Result<bool, Box<dyn std::error::Error>> {
    let (la, lb, lc) = lens(g);
    let ld = aux_ld(g.n, pad);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let aux_len = if g.m == 0 { 0 } else { (g.m - 1) * ld + g.n };
    let pre: Vec<C> = (0..aux_len)
        .map(|_| C::from_f64(3.0 * rng.unit()))
        .collect();
    let c0: Vec<C> = vec![C::from_f64(PAD); lc];
    let grad0: Vec<C> = vec![C::from_f64(PAD); g.n + 8];
    let (da, db, dpre) = (
        stream.clone_htod(&a)?,
        stream.clone_htod(&b)?,
        stream.clone_htod(&pre)?,
    );
    let (mut dc, mut dgrad) = (stream.clone_htod(&c0)?, stream.clone_htod(&grad0)?);
    let what = format!(
        "matmul_dgelu (bias grad {with_grad}, aux ld {ld}) {:?} -> {:?} {g:?}",
        A::DTYPE,
        C::DTYPE
    );
    let r = {
        let mut view = dgrad.slice_mut(..g.n)?;
        let grad = if with_grad { Some(&mut *view) } else { None };
        blas.matmul_dgelu(stream, g, &da, &db, &dpre, ld, grad, &mut dc)
    };
    match r {
        Err(e) if no_algorithm(&e) => {
            eprintln!("note: {what}: {e}");
            return Ok(false);
        }
        r => r?,
    }
    let got_c = to_f64(&stream.clone_dtoh(&dc)?);
    let (prod, abs) = product(g, &to_f64(&a), &to_f64(&b));
    let pre64 = to_f64(&pre);
    let tol = acc_tol + C::OUT_TOL + 1e-3;
    let (mut want_c, mut scale_c) = (vec![PAD; lc], vec![0.0; lc]);
    let (mut col_sum, mut col_scale, mut raw_sum) =
        (vec![0.0; g.n], vec![0.0; g.n], vec![0.0; g.n]);
    for i in 0..g.m {
        for j in 0..g.n {
            let d = gelu_grad(pre64[i * ld + j]);
            let v = prod[i * g.n + j] * d;
            // gelu' reaches about 1.13; the GPU's derivative (fast tanh) may be ~1e-3 off in
            // absolute terms, which the 2e-3·Σ|a·b| below covers where gelu' is near 0.
            let s = abs[i * g.n + j] * (d.abs() + 2e-3 / tol);
            want_c[i * g.ldc() + j] = v;
            scale_c[i * g.ldc() + j] = s;
            col_sum[j] += v;
            col_scale[j] += s;
            raw_sum[j] += prod[i * g.n + j];
        }
    }
    compare(
        &format!("{what}: d(pre) = product · gelu'(aux)"),
        rng.seed,
        &got_c,
        &want_c,
        &scale_c,
        tol,
    )?;
    let got_grad = to_f64(&stream.clone_dtoh(&dgrad)?);
    if with_grad {
        for j in 0..g.n {
            let (got, want) = (got_grad[j], col_sum[j]);
            // The output type's rounding of the sum itself, besides the elements' allowances.
            let allowed = tol * col_scale[j] + C::OUT_TOL * want.abs();
            ensure!(
                (got - want).abs() <= allowed,
                "{what}: bias gradient [{j}] is {got}, expected the column sum of d(pre) {want} \
                 (allowed {allowed:.3e}; the column sum of the raw product would be {}; seed {}, \
                 rerun with CUDA_BLAS_TEST_SEED={})",
                raw_sum[j],
                rng.seed,
                rng.seed
            );
        }
    }
    // Past n (and all of it without a gradient): untouched.
    let untouched = if with_grad { g.n } else { 0 };
    ensure!(
        got_grad[untouched..].iter().all(|&v| v == PAD),
        "{what}: the bias-gradient buffer was written past its {untouched} elements"
    );
    Ok(true)
}

/// Shapes: (m, n, k). Multiples of 8 must always have an algorithm; the odd ones may not for
/// 16-bit types.
const ALIGNED: &[(usize, usize, usize)] = &[(8, 8, 8), (64, 96, 40), (128, 256, 64), (40, 48, 200)];
const ODD: &[(usize, usize, usize)] = &[(1, 8, 8), (13, 24, 40), (33, 17, 9), (61, 53, 47)];

/// Both epilogue pairs at every shape. `aligned_must_run`: whether the aligned shapes must have
/// an algorithm (for one element type throughout; a mixed bf16 -> f32 product may not, which is
/// printed as a note).
fn both_directions<A: TestElem, C: TestElem>(
    math: Math,
    acc_tol: f64,
    aligned_must_run: bool,
) -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for (shapes, must) in [(ALIGNED, aligned_must_run), (ODD, false)] {
        for &(m, n, k) in shapes {
            // x·Wᵀ (the forward of nn.Linear) and x·W (the backward's dX = dY·W).
            for tb in [Transpose::Yes, Transpose::No] {
                let g = Gemm::new(m, n, k).trans_b(tb).math(math);
                for (flag, pad) in [(true, 0), (false, 1)] {
                    let ok =
                        check_forward::<A, C>(&mut rng, &stream, &blas, &g, flag, pad, acc_tol)?;
                    ensure!(ok || !must, "no algorithm for an aligned shape: {g:?}");
                    let ok =
                        check_backward::<A, C>(&mut rng, &stream, &blas, &g, flag, pad, acc_tol)?;
                    ensure!(ok || !must, "no algorithm for an aligned shape: {g:?}");
                }
            }
        }
    }
    Ok(())
}

fn f32_gelu_aux_and_dgelu() -> TestResult {
    both_directions::<f32, f32>(Math::Default, 1e-5, true)
}
fn tf32_gelu_aux_and_dgelu() -> TestResult {
    both_directions::<f32, f32>(Math::Tf32, 2e-3, true)
}
fn f16_gelu_aux_and_dgelu() -> TestResult {
    both_directions::<f16, f16>(Math::Default, 1e-4, true)
}
fn bf16_gelu_aux_and_dgelu() -> TestResult {
    both_directions::<bf16, bf16>(Math::Default, 1e-4, true)
}
fn bf16_to_f32_gelu_aux_and_dgelu() -> TestResult {
    both_directions::<bf16, f32>(Math::Default, 1e-4, false)
}

/// The GPT-2 MLP's shapes, small: x [rows, C] · W_fcᵀ ([4C, C]) forward with the bias, and
/// dY [rows, C] · W_proj ([C, 4C]) backward with the bias gradient, in bf16.
fn gpt_mlp_shapes_in_bf16() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    let (rows, c) = (256, 64);
    let fwd = Gemm::new(rows, 4 * c, c).trans_b(Transpose::Yes);
    ensure!(
        check_forward::<bf16, bf16>(&mut rng, &stream, &blas, &fwd, true, 0, 1e-4)?,
        "no algorithm for the MLP's forward"
    );
    let bwd = Gemm::new(rows, 4 * c, c);
    ensure!(
        check_backward::<bf16, bf16>(&mut rng, &stream, &blas, &bwd, true, 0, 1e-4)?,
        "no algorithm for the MLP's backward"
    );
    Ok(())
}

fn the_heuristic_is_asked_once_per_aux_problem() -> TestResult {
    let (ctx, stream, _) = setup()?;
    let blas = Blas::new(&ctx)?;
    let mut rng = Rng::fresh();
    let g = Gemm::new(48, 40, 32).trans_b(Transpose::Yes);
    for _ in 0..3 {
        check_forward::<f32, f32>(&mut rng, &stream, &blas, &g, true, 0, 1e-5)?;
    }
    ensure!(
        blas.heuristic_queries() == 1,
        "3 calls of one GELU_AUX_BIAS problem asked the heuristic {} times",
        blas.heuristic_queries()
    );
    // Another auxiliary leading dimension and the backward are other problems.
    check_forward::<f32, f32>(&mut rng, &stream, &blas, &g, true, 1, 1e-5)?;
    check_backward::<f32, f32>(&mut rng, &stream, &blas, &g, true, 0, 1e-5)?;
    ensure!(
        blas.heuristic_queries() == 3,
        "another aux ld and DGELU_BGRAD are new problems: {} queries",
        blas.heuristic_queries()
    );
    Ok(())
}

fn aux_errors() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    // C [4, 12]: aux ld at least 12, a multiple of 8 -> 16; (4 - 1)·16 + 12 = 60 elements.
    let g = Gemm::new(4, 12, 4);
    let a = stream.clone_htod(&[1.0f32; 16])?;
    let b = stream.clone_htod(&[1.0f32; 48])?;
    let bias = stream.clone_htod(&[1.0f32; 16])?;
    let mut c = stream.clone_htod(&[3.0f32; 48])?;
    let mut aux = stream.clone_htod(&[6.0f32; 80])?;
    let mut grad = stream.clone_htod(&[9.0f32; 16])?;

    match blas.matmul_gelu_aux(&stream, &g, &a, &b, Some(&bias), &mut c, &mut aux, 12) {
        Err(BlasError::AuxLeadingDimension {
            ld: 12,
            multiple: 8,
            suggested: 16,
            ..
        }) => {}
        other => return Err(format!("aux ld 12: {other:?}").into()),
    }
    match blas.matmul_gelu_aux(&stream, &g, &a, &b, None, &mut c, &mut aux, 8) {
        Err(BlasError::LeadingDimension {
            operand: "aux",
            ld: 8,
            min: 12,
            ..
        }) => {}
        other => return Err(format!("aux ld 8 < n: {other:?}").into()),
    }
    {
        let mut short = aux.slice_mut(..59)?;
        match blas.matmul_gelu_aux(&stream, &g, &a, &b, None, &mut c, &mut *short, 16) {
            Err(BlasError::Length {
                operand: "aux",
                found: 59,
                ..
            }) => {}
            other => return Err(format!("short aux: {other:?}").into()),
        }
    }
    {
        let off = aux.slice(2..)?;
        match blas.matmul_dgelu(&stream, &g, &a, &b, &off, 16, None, &mut c) {
            Err(BlasError::Misaligned {
                operand: "aux",
                found: 8,
                required: 16,
                ..
            }) => {}
            other => return Err(format!("misaligned aux: {other:?}").into()),
        }
    }
    {
        let mut short = grad.slice_mut(..11)?;
        match blas.matmul_dgelu(&stream, &g, &a, &b, &aux, 16, Some(&mut *short), &mut c) {
            Err(BlasError::Length {
                operand: "bias_grad",
                found: 11,
                ..
            }) => {}
            other => return Err(format!("short bias gradient: {other:?}").into()),
        }
    }
    {
        let mut off = grad.slice_mut(1..)?;
        match blas.matmul_dgelu(&stream, &g, &a, &b, &aux, 16, Some(&mut *off), &mut c) {
            Err(BlasError::Misaligned {
                operand: "bias_grad",
                found: 4,
                ..
            }) => {}
            other => return Err(format!("misaligned bias gradient: {other:?}").into()),
        }
    }
    match blas.matmul(
        &stream,
        &g,
        Epilogue::GeluAuxBias,
        &a,
        &b,
        Some(&bias),
        &mut c,
    ) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("matmul_gelu_aux") => {}
        other => return Err(format!("matmul with GeluAuxBias: {other:?}").into()),
    }
    match blas.matmul(&stream, &g, Epilogue::DGelu, &a, &b, None, &mut c) {
        Err(BlasError::Epilogue { .. }) => {}
        other => return Err(format!("matmul with DGelu: {other:?}").into()),
    }
    let batched = Gemm::new(2, 12, 4).batched(2, 8, 0, 24);
    match blas.matmul_gelu_aux(&stream, &batched, &a, &b, None, &mut c, &mut aux, 16) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("batch") => {}
        other => return Err(format!("batched: {other:?}").into()),
    }
    let a64 = stream.clone_htod(&[1.0f64; 16])?;
    let b64 = stream.clone_htod(&[1.0f64; 48])?;
    let mut c64 = stream.clone_htod(&[3.0f64; 48])?;
    let mut aux64 = stream.clone_htod(&[5.0f64; 80])?;
    match blas.matmul_gelu_aux(&stream, &g, &a64, &b64, None, &mut c64, &mut aux64, 16) {
        Err(BlasError::Epilogue { problem, .. }) if problem.contains("F64") => {}
        other => return Err(format!("f64: {other:?}").into()),
    }
    ensure!(
        stream.clone_dtoh(&c)? == [3.0f32; 48]
            && stream.clone_dtoh(&aux)? == [6.0f32; 80]
            && stream.clone_dtoh(&grad)? == [9.0f32; 16],
        "a refused call changed c, aux or the bias gradient"
    );
    // And the valid call: pre = 1·1·4 + 1 = 5, gelu(5) ≈ 5 (to 1e-6).
    blas.matmul_gelu_aux(&stream, &g, &a, &b, Some(&bias), &mut c, &mut aux, 16)?;
    let (c_host, aux_host) = (stream.clone_dtoh(&c)?, stream.clone_dtoh(&aux)?);
    ensure!(
        c_host.iter().all(|&v| (v - 5.0).abs() < 1e-3),
        "gelu(5): {c_host:?}"
    );
    // Row-major [4, 12] with row stride 16: each row's 12 values, then 4 untouched.
    for i in 0..4 {
        ensure!(
            aux_host[i * 16..i * 16 + 12].iter().all(|&v| v == 5.0)
                && aux_host[i * 16 + 12..i * 16 + 16].iter().all(|&v| v == 6.0),
            "aux row {i}: {:?}",
            &aux_host[i * 16..i * 16 + 16]
        );
    }
    Ok(())
}

fn main() {
    run(vec![
        gpu_cublas("f32_gelu_aux_and_dgelu", f32_gelu_aux_and_dgelu),
        gpu_cublas("tf32_gelu_aux_and_dgelu", tf32_gelu_aux_and_dgelu),
        gpu_cublas("f16_gelu_aux_and_dgelu", f16_gelu_aux_and_dgelu),
        gpu_cublas("bf16_gelu_aux_and_dgelu", bf16_gelu_aux_and_dgelu),
        gpu_cublas(
            "bf16_to_f32_gelu_aux_and_dgelu",
            bf16_to_f32_gelu_aux_and_dgelu,
        ),
        gpu_cublas("gpt_mlp_shapes_in_bf16", gpt_mlp_shapes_in_bf16),
        gpu_cublas(
            "the_heuristic_is_asked_once_per_aux_problem",
            the_heuristic_is_asked_once_per_aux_problem,
        ),
        gpu_cublas("aux_errors", aux_errors),
    ])
}
