//! Both supported cuBLAS major versions, 13 and 12, side by side in one process: each is
//! found in its own standard places (`libcublas.so.13` in `nvidia/cu13/lib`, `libcublas.so.12`
//! in the `nvidia-cublas-cu12` wheel's `nvidia/cublas/lib`, the toolkit's `lib64`, the system
//! loader's path), loaded with `load_from`, and checked:
//! - without a GPU: the version it reports, every entry point `cuda-stack-blas` calls resolved,
//!   and cuBLASLt accepting each descriptor attribute this crate sets with the value type it
//!   passes (the library refuses a value of the wrong size), so the ABI notes of the crate docs
//!   are checked against the real library;
//! - with a GPU: `Blas::with_libraries` on that library, GEMMs of every element type, a strided
//!   batch, and every cuBLASLt epilogue against the CPU reference.
//!
//! A major version that is not installed is reported as ignored. To run both here, fetch the
//! two libraries (no GPU needed for the first group): `PYTHONPATH=$(tools/fetch-cublas-libs)
//! cargo test -p cuda-stack-blas --test cublas_versions`.

mod common;

use common::*;
use cuda_stack_blas::{Blas, Epilogue, Gemm, Math, Transpose};
use cuda_stack_driver::cuda_stack_sys::cublas_types::{
    cublasComputeType_t, cublasOperation_t, cudaDataType_t,
};
use cuda_stack_driver::cuda_stack_sys::cublaslt_types::{
    cublasLtEpilogue_t, cublasLtMatmulDescAttributes_t as DescAttr,
    cublasLtMatmulPreferenceAttributes_t as PrefAttr,
    cublasLtMatrixLayoutAttribute_t as LayoutAttr,
};
use cuda_stack_driver::cuda_stack_sys::{Cublas, CublasLt, LoadError, Search};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::Stream;
use cuda_tests::{cpu, ensure, gpu, needs_cublas, no_gpu_reason, run};
use std::ffi::c_void;
use std::path::Path;
use std::sync::OnceLock;

/// One major version's cuBLAS and cuBLASLt, loaded from its standard places (kept for the
/// process: a `Blas` refers to them for its whole life).
type Pair = (&'static Cublas, &'static CublasLt);

/// Loads `major`'s cuBLAS and cuBLASLt once; `Err` says where they were looked for.
fn pair(major: i32) -> Result<Pair, String> {
    static PAIRS: [OnceLock<Result<Pair, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = &PAIRS[usize::from(major == 12)];
    slot.get_or_init(|| {
        let cublas = first_of_major(major, Cublas::search_major(major), |p| {
            Cublas::load_from(p).map(|l| (l.version(), l))
        })?;
        let lt = first_of_major(major, CublasLt::search_major(major), |p| {
            CublasLt::load_from(p).map(|l| (l.version(), l))
        })?;
        Ok((&*Box::leak(Box::new(cublas)), &*Box::leak(Box::new(lt))))
    })
    .clone()
}

/// The first candidate of `search` that loads and reports `major`.
fn first_of_major<L>(
    major: i32,
    search: Search,
    load: impl Fn(&Path) -> Result<(Option<(i32, i32, i32)>, L), LoadError>,
) -> Result<L, String> {
    let mut tried = Vec::new();
    for c in search.candidates() {
        match load(&c.path) {
            Ok((Some((m, _, _)), lib)) if m == major => return Ok(lib),
            Ok((v, _)) => tried.push(format!("{}: version {v:?}", c.path.display())),
            Err(e) => tried.push(format!(
                "{}: {}",
                c.path.display(),
                e.attempts.first().map_or("", |a| a.error.as_str())
            )),
        }
    }
    Err(format!(
        "no cuBLAS {major} in its {} standard places (the first, {})",
        tried.len(),
        tried.first().map_or("none", |s| s.as_str())
    ))
}

/// Loading, version, entry points and descriptor attributes of `major`'s libraries (no GPU).
fn loads_and_accepts_every_attribute(major: i32) -> TestResult {
    let (cublas, lt) = pair(major)?;
    eprintln!(
        "{} from {} ({:?}), {} from {}",
        cublas.version_string(),
        cublas.path().display(),
        cublas.resolved_path(),
        lt.version_string(),
        lt.path().display()
    );
    ensure!(
        cublas.version().map(|v| v.0) == Some(major) && lt.version().map(|v| v.0) == Some(major),
        "versions {:?} / {:?}, expected {major}",
        cublas.version(),
        lt.version()
    );
    // Every entry point cuda-stack-blas calls.
    let t = cublas.table();
    let used = [
        ("cublasCreate_v2", t.cublasCreate_v2.is_some()),
        ("cublasDestroy_v2", t.cublasDestroy_v2.is_some()),
        ("cublasSetMathMode", t.cublasSetMathMode.is_some()),
        ("cublasSetStream_v2", t.cublasSetStream_v2.is_some()),
        ("cublasSetWorkspace_v2", t.cublasSetWorkspace_v2.is_some()),
        ("cublasGemmEx", t.cublasGemmEx.is_some()),
        (
            "cublasGemmStridedBatchedEx",
            t.cublasGemmStridedBatchedEx.is_some(),
        ),
        ("cublasGetStatusName", t.cublasGetStatusName.is_some()),
        ("cublasGetStatusString", t.cublasGetStatusString.is_some()),
    ];
    let l = lt.table();
    let used_lt = [
        ("cublasLtCreate", l.cublasLtCreate.is_some()),
        ("cublasLtDestroy", l.cublasLtDestroy.is_some()),
        ("cublasLtMatmul", l.cublasLtMatmul.is_some()),
        (
            "cublasLtMatmulAlgoGetHeuristic",
            l.cublasLtMatmulAlgoGetHeuristic.is_some(),
        ),
        (
            "cublasLtMatmulDescCreate",
            l.cublasLtMatmulDescCreate.is_some(),
        ),
        (
            "cublasLtMatmulDescSetAttribute",
            l.cublasLtMatmulDescSetAttribute.is_some(),
        ),
        (
            "cublasLtMatmulDescDestroy",
            l.cublasLtMatmulDescDestroy.is_some(),
        ),
        (
            "cublasLtMatrixLayoutCreate",
            l.cublasLtMatrixLayoutCreate.is_some(),
        ),
        (
            "cublasLtMatrixLayoutSetAttribute",
            l.cublasLtMatrixLayoutSetAttribute.is_some(),
        ),
        (
            "cublasLtMatrixLayoutDestroy",
            l.cublasLtMatrixLayoutDestroy.is_some(),
        ),
        (
            "cublasLtMatmulPreferenceCreate",
            l.cublasLtMatmulPreferenceCreate.is_some(),
        ),
        (
            "cublasLtMatmulPreferenceSetAttribute",
            l.cublasLtMatmulPreferenceSetAttribute.is_some(),
        ),
        (
            "cublasLtMatmulPreferenceDestroy",
            l.cublasLtMatmulPreferenceDestroy.is_some(),
        ),
    ];
    for (name, resolved) in used.into_iter().chain(used_lt) {
        ensure!(resolved, "cuBLAS {major} does not export {name}");
    }
    eprintln!(
        "cuBLAS {major}: {} of {} declared entry points, cuBLASLt: {} of {}",
        t.resolved_count(),
        cuda_stack_driver::cuda_stack_sys::cublas_table::CublasTable::SYMBOLS.len(),
        l.resolved_count(),
        cuda_stack_driver::cuda_stack_sys::cublaslt_table::CublasLtTable::SYMBOLS.len(),
    );
    // The descriptors `Blas::matmul` builds, attribute by attribute, with the value types it
    // passes: host memory only, so no GPU is needed.
    fn buf<T>(v: &T) -> (*const c_void, usize) {
        ((v as *const T).cast(), std::mem::size_of::<T>())
    }
    let bias = 0x7f00_0000_1000u64;
    let desc_attrs: [(DescAttr, (*const c_void, usize)); 5] = [
        (
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
            buf(&(cublasOperation_t::CUBLAS_OP_T.0 as i32)),
        ),
        (
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
            buf(&(cublasOperation_t::CUBLAS_OP_N.0 as i32)),
        ),
        (
            DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE,
            buf(&cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS.0),
        ),
        (DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, buf(&bias)),
        (
            DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE,
            buf(&cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS.0),
        ),
    ];
    let (count, stride) = (3i32, 4096i64);
    let layout_attrs = [
        (LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, buf(&count)),
        (
            LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
            buf(&stride),
        ),
    ];
    let (ws, align) = (32u64 << 20, 16u32);
    let pref_attrs = [
        (PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, buf(&ws)),
        (
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            buf(&align),
        ),
        (
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            buf(&align),
        ),
        (
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            buf(&align),
        ),
        (
            PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            buf(&align),
        ),
    ];
    let (mut desc, mut layout, mut pref) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: descriptors are host memory, created and destroyed here; each value pointer
    // points to `size` bytes that live on this frame.
    unsafe {
        lt.cublasLtMatmulDescCreate(
            &mut desc,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            cudaDataType_t::CUDA_R_32F,
        )?;
        for (attr, (p, n)) in desc_attrs {
            lt.cublasLtMatmulDescSetAttribute(desc, attr, p, n)
                .map_err(|e| format!("cuBLAS {major}: {attr:?} of {n} bytes: {e}"))?;
        }
        // A value of the wrong size is refused, not read past: what makes the sizes above a
        // real check.
        let wide = 0i64;
        ensure!(
            lt.cublasLtMatmulDescSetAttribute(
                desc,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                buf(&wide).0,
                8
            )
            .is_err(),
            "cuBLAS {major} took an 8-byte TRANSA"
        );
        lt.cublasLtMatmulDescDestroy(desc)?;
        lt.cublasLtMatrixLayoutCreate(&mut layout, cudaDataType_t::CUDA_R_16BF, 64, 32, 64)?;
        for (attr, (p, n)) in layout_attrs {
            lt.cublasLtMatrixLayoutSetAttribute(layout, attr, p, n)
                .map_err(|e| format!("cuBLAS {major}: {attr:?} of {n} bytes: {e}"))?;
        }
        lt.cublasLtMatrixLayoutDestroy(layout)?;
        lt.cublasLtMatmulPreferenceCreate(&mut pref)?;
        for (attr, (p, n)) in pref_attrs {
            lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, p, n)
                .map_err(|e| format!("cuBLAS {major}: {attr:?} of {n} bytes: {e}"))?;
        }
        lt.cublasLtMatmulPreferenceDestroy(pref)?;
    }
    Ok(())
}

fn cublas_13_loads_and_accepts_every_attribute() -> TestResult {
    loads_and_accepts_every_attribute(13)
}
fn cublas_12_loads_and_accepts_every_attribute() -> TestResult {
    loads_and_accepts_every_attribute(12)
}

/// Relative tolerance of the accumulation for inputs of `A` under `math`, as in `gemm.rs`.
fn acc_tol<A: TestElem>(math: Math) -> f64 {
    match (A::DTYPE, math) {
        (_, Math::Tf32) => 2e-3,
        (cuda_stack_blas::DataType::F64, _) => 1e-12,
        (cuda_stack_blas::DataType::F32, _) => 1e-5,
        _ => 1e-4,
    }
}

/// `g` on random operands through `Blas::gemm` (`epilogue` `None`) or `Blas::matmul`, against
/// the CPU.
fn check<A: TestElem, C: TestElem>(
    rng: &mut Rng,
    stream: &Stream,
    blas: &Blas,
    g: &Gemm,
    epilogue: Option<Epilogue>,
) -> TestResult {
    let (la, lb, lc) = lens(g);
    let a: Vec<A> = random(rng, la);
    let b: Vec<A> = random(rng, lb);
    let c0: Vec<C> = random(rng, lc);
    let bias: Vec<C> = random(rng, g.n);
    let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let dbias = stream.clone_htod(&bias)?;
    let mut dc = stream.clone_htod(&c0)?;
    let ep = epilogue.unwrap_or(Epilogue::None);
    match epilogue {
        None => blas.gemm(stream, g, &da, &db, &mut dc)?,
        Some(ep) => {
            let with_bias = ep.has_bias().then_some(&*dbias);
            blas.matmul(stream, g, ep, &da, &db, with_bias, &mut dc)?
        }
    }
    let got = to_f64(&stream.clone_dtoh(&dc)?);
    let bias64 = to_f64(&bias);
    let (want, scale) = reference(
        g,
        ep,
        &to_f64(&a),
        &to_f64(&b),
        ep.has_bias().then_some(&bias64[..]),
        &to_f64(&c0),
    );
    let gelu = matches!(ep, Epilogue::Gelu | Epilogue::BiasGelu);
    let tol = acc_tol::<A>(g.math) + C::OUT_TOL + if gelu { 1e-3 } else { 0.0 };
    let what = format!(
        "cuBLAS {:?}: {epilogue:?} {:?} -> {:?} {g:?}",
        blas.cublas().version(),
        A::DTYPE,
        C::DTYPE
    );
    compare(&what, rng.seed, &got, &want, &scale, tol)
}

/// `Blas::with_libraries` on `major`'s libraries: every element type through `gemm`, a strided
/// batch, and every epilogue through `matmul`.
fn products_are_right(major: i32) -> TestResult {
    let (cublas, lt) = pair(major)?;
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let blas = Blas::with_libraries(&ctx, cublas, lt, 32 << 20)?;
    ensure!(
        blas.cublas().version().map(|v| v.0) == Some(major),
        "{blas:?}"
    );
    eprintln!("{blas:?}");
    let mut rng = Rng::fresh();
    for &(m, n, k) in &[(7, 13, 5), (64, 96, 128), (129, 33, 65)] {
        for tb in [Transpose::No, Transpose::Yes] {
            let g = Gemm::new(m, n, k).trans_b(tb).scale(1.5, 0.5);
            check::<f32, f32>(&mut rng, &stream, &blas, &g, None)?;
            check::<f32, f32>(&mut rng, &stream, &blas, &g.math(Math::Tf32), None)?;
            check::<f64, f64>(&mut rng, &stream, &blas, &g, None)?;
            check::<f16, f16>(&mut rng, &stream, &blas, &g, None)?;
            check::<f16, f32>(&mut rng, &stream, &blas, &g, None)?;
            check::<bf16, bf16>(&mut rng, &stream, &blas, &g, None)?;
            check::<bf16, f32>(&mut rng, &stream, &blas, &g, None)?;
        }
        let g = Gemm::new(m, n, k).batched(3, m * k + 1, k * n + 3, m * n + 2);
        check::<f32, f32>(&mut rng, &stream, &blas, &g, None)?;
    }
    for epilogue in [
        Epilogue::None,
        Epilogue::Relu,
        Epilogue::Bias,
        Epilogue::BiasRelu,
        Epilogue::Gelu,
        Epilogue::BiasGelu,
    ] {
        let g = Gemm::new(64, 128, 96).trans_b(Transpose::Yes);
        check::<f32, f32>(&mut rng, &stream, &blas, &g, Some(epilogue))?;
        check::<f32, f32>(
            &mut rng,
            &stream,
            &blas,
            &g.math(Math::Tf32),
            Some(epilogue),
        )?;
        check::<f16, f16>(&mut rng, &stream, &blas, &g, Some(epilogue))?;
        check::<f16, f32>(&mut rng, &stream, &blas, &g, Some(epilogue))?;
        let b = Gemm::new(16, 24, 40).batched(2, 16 * 40, 40 * 24, 16 * 24);
        check::<f32, f32>(&mut rng, &stream, &blas, &b, Some(epilogue))?;
    }
    ensure!(
        blas.cached_algorithms() > 0 && blas.heuristic_queries() == blas.cached_algorithms() as u64,
        "{} queries for {} cached problems",
        blas.heuristic_queries(),
        blas.cached_algorithms()
    );
    Ok(())
}

fn cublas_13_products_are_right() -> TestResult {
    products_are_right(13)
}
fn cublas_12_products_are_right() -> TestResult {
    products_are_right(12)
}

/// Both majors in one process, each handle on its own library: the same product agrees.
fn cublas_12_and_13_side_by_side() -> TestResult {
    let ctx = cuda_tests::context()?;
    let stream = ctx.new_stream()?;
    let mut rng = Rng::fresh();
    let g = Gemm::new(96, 80, 64).trans_b(Transpose::Yes);
    let (la, lb, lc) = lens(&g);
    let a: Vec<f32> = random(&mut rng, la);
    let b: Vec<f32> = random(&mut rng, lb);
    let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let mut results = Vec::new();
    for major in [13, 12] {
        let (cublas, lt) = pair(major)?;
        let blas = Blas::with_libraries(&ctx, cublas, lt, 32 << 20)?;
        let mut c = stream.alloc_zeros::<f32>(lc)?;
        blas.gemm(&stream, &g, &da, &db, &mut c)?;
        let mut d = stream.alloc_zeros::<f32>(lc)?;
        blas.matmul(&stream, &g, Epilogue::Relu, &da, &db, None, &mut d)?;
        results.push((stream.clone_dtoh(&c)?, stream.clone_dtoh(&d)?));
    }
    let (want, scale) = reference(
        &g,
        Epilogue::None,
        &to_f64(&a),
        &to_f64(&b),
        None,
        &vec![0.0; lc],
    );
    for (c, d) in &results {
        compare(
            "side by side: gemm",
            rng.seed,
            &to_f64(c),
            &want,
            &scale,
            1e-5,
        )?;
        let relu: Vec<f64> = want.iter().map(|x| x.max(0.0)).collect();
        compare(
            "side by side: matmul",
            rng.seed,
            &to_f64(d),
            &relu,
            &scale,
            1e-5,
        )?;
    }
    Ok(())
}

/// The process-wide pair (`Blas::get`'s) is of one supported major version: where cuBLAS
/// loaded first, cuBLASLt is looked for as its major version first (with `CUDA_CUBLAS_PATH`
/// naming a cuBLAS 12 and a cuBLAS 13 also installed, cuBLASLt 12 is the one that loads).
fn the_process_wide_libraries_are_one_supported_major() -> TestResult {
    Blas::available()?;
    let (cublas, lt) = (Cublas::get()?, CublasLt::get()?);
    eprintln!(
        "{} from {}, {} from {}",
        cublas.version_string(),
        cublas.path().display(),
        lt.version_string(),
        lt.path().display()
    );
    ensure!(
        cublas.version().map(|v| v.0) == lt.version().map(|v| v.0),
        "{} with {}",
        cublas.version_string(),
        lt.version_string()
    );
    Ok(())
}

fn main() {
    let missing = |major: i32| pair(major).err();
    let (no13, no12) = (missing(13), missing(12));
    for why in [&no13, &no12].into_iter().flatten() {
        eprintln!("note: {why}; its tests are ignored");
    }
    let no_gpu = no_gpu_reason().is_some();
    run(vec![
        needs_cublas(
            "the_process_wide_libraries_are_one_supported_major",
            the_process_wide_libraries_are_one_supported_major,
        ),
        cpu(
            "cublas_13_loads_and_accepts_every_attribute",
            cublas_13_loads_and_accepts_every_attribute,
        )
        .with_ignored_flag(no13.is_some()),
        cpu(
            "cublas_12_loads_and_accepts_every_attribute",
            cublas_12_loads_and_accepts_every_attribute,
        )
        .with_ignored_flag(no12.is_some()),
        gpu("cublas_13_products_are_right", cublas_13_products_are_right)
            .with_ignored_flag(no_gpu || no13.is_some()),
        gpu("cublas_12_products_are_right", cublas_12_products_are_right)
            .with_ignored_flag(no_gpu || no12.is_some()),
        gpu(
            "cublas_12_and_13_side_by_side",
            cublas_12_and_13_side_by_side,
        )
        .with_ignored_flag(no_gpu || no12.is_some() || no13.is_some()),
    ])
}
