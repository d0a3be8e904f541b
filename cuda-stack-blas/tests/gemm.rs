//! `Blas::gemm` against the CPU: every element type and math mode, all four transposes, odd
//! shapes, leading dimensions with gaps, alpha/beta, strided batches (with broadcast inputs),
//! errors before any call, cross-stream ordering, graph capture, and the shared handle.
//! GPU tests are ignored where there is no GPU or no cuBLAS (12 or 13).

mod common;

use common::*;
use cuda_stack_blas::{Blas, BlasError, Epilogue, Gemm, Math, Transpose};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{Context, Stream};
use cuda_tests::{cpu, ensure, gpu_cublas, run};

fn setup() -> Result<(Context, Stream, Blas), Box<dyn std::error::Error>> {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::get(&ctx)?;
    Ok((ctx, stream, blas))
}

/// Relative tolerance of the accumulation for inputs of `A` under `math`.
fn acc_tol<A: TestElem>(math: Math) -> f64 {
    match (A::DTYPE, math) {
        // Inputs rounded to TF32's 10-bit mantissa (by truncation or to nearest): each product
        // is off by up to ~2^-9 of itself.
        (_, Math::Tf32) => 2e-3,
        (cuda_stack_blas::DataType::F64, _) => 1e-12,
        (cuda_stack_blas::DataType::F32, _) => 1e-5,
        _ => 1e-4, // f16/bf16 inputs: exact products, f32 accumulation
    }
}

/// Runs `g` on random operands (C starts random too, and its gaps must stay untouched) and
/// compares with the CPU.
fn check<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
) -> TestResult {
    let (la, lb, lc) = lens(g);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let c0: Vec<C> = random(rng, lc);
    let da = stream.clone_htod(&a)?;
    let db = stream.clone_htod(&b)?;
    let mut dc = stream.clone_htod(&c0)?;
    blas.gemm(stream, g, &da, &db, &mut dc)?;
    let got = to_f64(&stream.clone_dtoh(&dc)?);
    let (want, scale) = reference(
        g,
        Epilogue::None,
        &to_f64(&a),
        &to_f64(&b),
        None,
        &to_f64(&c0),
    );
    let tol = acc_tol::<A>(g.math) + C::OUT_TOL;
    let what = format!("{:?} x {:?} -> {:?} {:?}", A::DTYPE, A::DTYPE, C::DTYPE, g);
    compare(&what, rng.seed, &got, &want, &scale, tol)
}

/// Odd and even shapes, tiny to a few hundred.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (7, 13, 5),
    (33, 17, 65),
    (64, 96, 128),
    (129, 257, 131),
    (3, 301, 2),
];

const TRANSPOSES: [(Transpose, Transpose); 4] = [
    (Transpose::No, Transpose::No),
    (Transpose::Yes, Transpose::No),
    (Transpose::No, Transpose::Yes),
    (Transpose::Yes, Transpose::Yes),
];

fn every_shape_and_transpose<A: TestElem, C: TestElem>(math: Math) -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for &(m, n, k) in SHAPES {
        for (ta, tb) in TRANSPOSES {
            let g = Gemm::new(m, n, k).trans_a(ta).trans_b(tb).math(math);
            check::<A, C>(&mut rng, &stream, &blas, &g)?;
        }
    }
    Ok(())
}

fn f32_default_math() -> TestResult {
    every_shape_and_transpose::<f32, f32>(Math::Default)
}
fn f32_tf32() -> TestResult {
    every_shape_and_transpose::<f32, f32>(Math::Tf32)
}
fn f64_default_math() -> TestResult {
    every_shape_and_transpose::<f64, f64>(Math::Default)
}
fn f16_to_f16() -> TestResult {
    every_shape_and_transpose::<f16, f16>(Math::Default)
}
fn f16_to_f32() -> TestResult {
    every_shape_and_transpose::<f16, f32>(Math::Default)
}
fn bf16_to_bf16() -> TestResult {
    every_shape_and_transpose::<bf16, bf16>(Math::Default)
}
fn bf16_to_f32() -> TestResult {
    every_shape_and_transpose::<bf16, f32>(Math::Default)
}

fn leading_dimensions_alpha_beta() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    for (ta, tb) in TRANSPOSES {
        let g = Gemm::new(37, 23, 19).trans_a(ta).trans_b(tb);
        // Row strides with gaps: C's gaps must keep their old values.
        let g = g.leading_dims(g.lda() + 3, g.ldb() + 5, g.ldc() + 7);
        check::<f32, f32>(&mut rng, &stream, &blas, &g.scale(0.75, -1.5))?;
        check::<f16, f32>(&mut rng, &stream, &blas, &g.scale(-2.0, 0.5))?;
        check::<bf16, bf16>(&mut rng, &stream, &blas, &g.scale(1.0, 1.0))?;
    }
    // k = 0: C = beta·C.
    check::<f32, f32>(
        &mut rng,
        &stream,
        &blas,
        &Gemm::new(5, 6, 0).scale(1.0, 3.0),
    )?;
    Ok(())
}

fn strided_batches() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    let (m, n, k) = (19, 11, 29);
    for (ta, tb) in TRANSPOSES {
        let base = Gemm::new(m, n, k).trans_a(ta).trans_b(tb);
        let (sa, sb, sc) = (m * k + 3, k * n + 1, m * n + 5);
        check::<f32, f32>(&mut rng, &stream, &blas, &base.batched(4, sa, sb, sc))?;
        check::<f16, f16>(&mut rng, &stream, &blas, &base.batched(3, sa, sb, sc))?;
        check::<bf16, f32>(&mut rng, &stream, &blas, &base.batched(5, sa, sb, sc))?;
        check::<f64, f64>(&mut rng, &stream, &blas, &base.batched(2, sa, sb, sc))?;
        // One A for every product (a layer's weights against a batch).
        let bc = base.batched(3, 0, sb, sc).scale(0.5, 0.25);
        check::<f32, f32>(&mut rng, &stream, &blas, &bc.math(Math::Tf32))?;
    }
    Ok(())
}

fn errors_come_before_any_call_and_leave_c_untouched() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let a = stream.clone_htod(&[1.0f32; 12])?;
    let b = stream.clone_htod(&[1.0f32; 12])?;
    let mut c = stream.clone_htod(&[7.0f32; 9])?;
    let g = Gemm::new(3, 3, 4);
    // Too short.
    match blas.gemm(&stream, &Gemm::new(3, 4, 4), &a, &b, &mut c) {
        Err(BlasError::Length { operand: "b", .. }) => {}
        other => return Err(format!("short b: {other:?}").into()),
    }
    // A leading dimension smaller than a row.
    match blas.gemm(&stream, &g.leading_dims(3, 3, 3), &a, &b, &mut c) {
        Err(BlasError::LeadingDimension {
            operand: "a",
            ld: 3,
            min: 4,
            ..
        }) => {}
        other => return Err(format!("lda: {other:?}").into()),
    }
    // Overlapping outputs in a batch.
    match blas.gemm(&stream, &g.batched(2, 0, 0, 4), &a, &b, &mut c) {
        Err(BlasError::BatchOverlap { .. }) => {}
        other => return Err(format!("overlap: {other:?}").into()),
    }
    // TF32 on f16 inputs; f16 inputs into a bf16 output.
    let h = stream.clone_htod(&[f16::ONE; 12])?;
    let mut cb = stream.clone_htod(&[bf16::ONE; 9])?;
    match blas.gemm(&stream, &g.math(Math::Tf32), &h, &h, &mut c) {
        Err(BlasError::UnsupportedTypes {
            math: "TF32 math", ..
        }) => {}
        other => return Err(format!("tf32 f16: {other:?}").into()),
    }
    match blas.gemm(&stream, &g, &h, &h, &mut cb) {
        Err(e @ BlasError::UnsupportedTypes { .. }) => {
            ensure!(e.to_string().contains("F16"), "{e}")
        }
        other => return Err(format!("f16 -> bf16: {other:?}").into()),
    }
    ensure!(
        stream.clone_dtoh(&c)? == [7.0f32; 9],
        "c changed by a refused call"
    );
    // A valid call on the same buffers still works afterwards.
    blas.gemm(&stream, &g, &a, &b, &mut c)?;
    ensure!(stream.clone_dtoh(&c)? == [4.0f32; 9], "1·1 over k = 4");
    Ok(())
}

fn empty_products_queue_nothing() -> TestResult {
    let (_ctx, stream, blas) = setup()?;
    let a = stream.alloc_zeros::<f32>(0)?;
    let b = stream.clone_htod(&[1.0f32; 6])?;
    let mut c = stream.alloc_zeros::<f32>(0)?;
    blas.gemm(&stream, &Gemm::new(0, 3, 2), &a, &b, &mut c)?;
    blas.gemm(
        &stream,
        &Gemm::new(0, 3, 2).batched(0, 0, 0, 0),
        &a,
        &b,
        &mut c,
    )?;
    Ok(())
}

/// Operands made on one stream, multiplied on another, freed right away: the GEMM must see
/// the uploads, and the frees must wait for the GEMM (cuda-stack-driver's per-allocation events).
fn buffers_of_other_streams_are_ordered() -> TestResult {
    let (ctx, s1, blas) = setup()?;
    let s2 = ctx.new_stream()?;
    let mut rng = Rng::fresh();
    let (m, n, k) = (300, 200, 500);
    let a: Vec<f32> = random(&mut rng, m * k);
    let b: Vec<f32> = random(&mut rng, k * n);
    let mut c = s1.alloc_zeros::<f32>(m * n)?;
    for _ in 0..3 {
        let da = s1.clone_htod(&a)?;
        let db = s1.clone_htod(&b)?;
        blas.gemm(&s2, &Gemm::new(m, n, k), &da, &db, &mut c)?;
        drop((da, db));
    }
    let got = to_f64(&s1.clone_dtoh(&c)?);
    let g = Gemm::new(m, n, k);
    let (want, scale) = reference(
        &g,
        Epilogue::None,
        &to_f64(&a),
        &to_f64(&b),
        None,
        &vec![0.0; m * n],
    );
    compare("cross-stream", rng.seed, &got, &want, &scale, 1e-5)
}

/// A GEMM captured into a CUDA graph and replayed with new inputs: the graph keeps the
/// buffers, the workspace and the handle alive.
fn graph_capture_replays_the_gemm() -> TestResult {
    let (ctx, stream, blas) = setup()?;
    let mut rng = Rng::fresh();
    let (m, n, k) = (64, 48, 80);
    let g = Gemm::new(m, n, k).trans_b(Transpose::Yes);
    let mut da = stream.alloc_zeros::<f32>(m * k)?;
    let db = stream.clone_htod(&random::<f32>(&mut rng, n * k))?;
    let mut dc = stream.alloc_zeros::<f32>(m * n)?;
    // Warm up eagerly first (as with PyTorch's graphs): cuBLAS loads the kernels it picks
    // lazily, and that is best done outside a capture.
    blas.gemm(&stream, &g, &da, &db, &mut dc)?;
    stream.synchronize()?;
    let graph = {
        let cap = ctx.begin_capture()?;
        let r = blas.gemm(cap.stream(), &g, &da, &db, &mut dc);
        let graph = cap.end()?;
        r?;
        graph
    };
    let exec = graph.instantiate()?;
    let b = to_f64(&stream.clone_dtoh(&db)?);
    for round in 0..2 {
        let a: Vec<f32> = random(&mut rng, m * k);
        stream.memcpy_htod(&a, &mut da)?;
        exec.launch(&stream)?;
        let got = to_f64(&stream.clone_dtoh(&dc)?);
        let (want, scale) = reference(&g, Epilogue::None, &to_f64(&a), &b, None, &vec![0.0; m * n]);
        compare(
            &format!("replay {round}"),
            rng.seed,
            &got,
            &want,
            &scale,
            1e-5,
        )?;
    }
    Ok(())
}

fn the_shared_handle_is_one_per_device() -> TestResult {
    let (ctx, _stream, blas) = setup()?;
    let again = Blas::get(&ctx)?;
    ensure!(
        blas.as_raw() == again.as_raw(),
        "Blas::get made a second handle"
    );
    let own = Blas::with_workspace(&ctx, 1 << 20)?;
    ensure!(
        own.as_raw() != blas.as_raw(),
        "Blas::with_workspace shares the handle"
    );
    ensure!(own.workspace_bytes() == 1 << 20, "workspace size");
    eprintln!("{blas:?}");
    Ok(())
}

/// `Gemm::check` reports, without a GPU, every error `Blas::gemm` reports before a call.
fn errors_are_reported_without_a_gpu() -> TestResult {
    let e = Gemm::new(2, 2, 2).check::<f32, f32>(4, 4, 3).unwrap_err();
    ensure!(matches!(e, BlasError::Length { operand: "c", .. }), "{e}");
    let e = Gemm::new(2, 2, 2).check::<f16, bf16>(4, 4, 4).unwrap_err();
    ensure!(matches!(e, BlasError::UnsupportedTypes { .. }), "{e}");
    Ok(())
}

/// Without cuBLAS, making a handle is an error listing the places tried, not a panic.
fn a_missing_library_is_an_error() -> TestResult {
    match cuda_stack_driver::cuda_stack_sys::Cublas::get() {
        Ok(_) => Ok(()), // installed here: nothing to observe
        Err(_) => match Blas::available() {
            Err(e @ BlasError::Load(_)) => {
                ensure!(e.to_string().contains("libcublas.so.13"), "{e}");
                Ok(())
            }
            other => Err(format!("expected BlasError::Load, got {other:?}").into()),
        },
    }
}

fn main() {
    run(vec![
        cpu(
            "errors_are_reported_without_a_gpu",
            errors_are_reported_without_a_gpu,
        ),
        cpu(
            "a_missing_library_is_an_error",
            a_missing_library_is_an_error,
        ),
        gpu_cublas("f32_default_math", f32_default_math),
        gpu_cublas("f32_tf32", f32_tf32),
        gpu_cublas("f64_default_math", f64_default_math),
        gpu_cublas("f16_to_f16", f16_to_f16),
        gpu_cublas("f16_to_f32", f16_to_f32),
        gpu_cublas("bf16_to_bf16", bf16_to_bf16),
        gpu_cublas("bf16_to_f32", bf16_to_f32),
        gpu_cublas(
            "leading_dimensions_alpha_beta",
            leading_dimensions_alpha_beta,
        ),
        gpu_cublas("strided_batches", strided_batches),
        gpu_cublas(
            "errors_come_before_any_call_and_leave_c_untouched",
            errors_come_before_any_call_and_leave_c_untouched,
        ),
        gpu_cublas("empty_products_queue_nothing", empty_products_queue_nothing),
        gpu_cublas(
            "buffers_of_other_streams_are_ordered",
            buffers_of_other_streams_are_ordered,
        ),
        gpu_cublas(
            "graph_capture_replays_the_gemm",
            graph_capture_replays_the_gemm,
        ),
        gpu_cublas(
            "the_shared_handle_is_one_per_device",
            the_shared_handle_is_one_per_device,
        ),
    ])
}
