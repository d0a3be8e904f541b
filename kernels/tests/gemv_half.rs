//! The matrix-vector kernels of `ops::gemm_half` (`gemv_half_rows_*`, `gemv_half_cols_*`, under
//! `HalfPlan::Gemv`: M = 1 or N = 1) against the f64 CPU reference, f16 and bf16: every layout
//! (so both kernels from either side), one row split between 1, 2, 4 or 8 warps, k tails (K not a
//! multiple of 8), column tails (not a multiple of 8 or 32), a dot product (M = N = 1), strided
//! vectors (a column of a wider matrix), padded leading dimensions and views one element in
//! (copied into aligned buffers first), C poisoned first with its padding checked untouched;
//! reruns bit-identical; `gemm_half` takes the row kernel where `ops::gemv_half_fits` says so
//! (rows contiguous in k, from `GEMV_MIN_OUTPUTS` outputs on), and the plan refuses a product
//! that is not a matrix times a vector.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_kernels::ops::{self, HalfPlan, TcAlgo, TensorCoreElement, Transpose};
use cuda_stack_kernels::{reference, Error, Kernels};
use cuda_tests::{ensure, gpu, TestResult};

mod gemm_support;
use gemm_support::{check, data, upload};

/// (m, n, k): both kernels with tails, each warps-per-row count (4096 / 2500 rows: 1; 1500: 2;
/// 700: 4; 100: 8), a long K, the plan's own shapes, a dot product.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 4096, 512),
    (4096, 1, 520),
    (1, 3000, 77),
    (2500, 1, 1000),
    (1500, 1, 300),
    (700, 1, 33),
    (100, 1, 4100),
    (1, 45, 9),
    (1, 2049, 1030),
    (1, 1, 1000),
    (1, 1, 5),
];

fn gemv_all<T: TensorCoreElement>() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let ts = [Transpose::NoTrans, Transpose::Trans];
    let mut seed = 9100;
    for &(m, n, kd) in SHAPES {
        for ta in ts {
            for tb in ts {
                for &(pad, off) in &[(0usize, 0usize), (3, 1), (8, 0)] {
                    let (ar, ac) = if ta == Transpose::NoTrans {
                        (m, kd)
                    } else {
                        (kd, m)
                    };
                    let (br, bc) = if tb == Transpose::NoTrans {
                        (kd, n)
                    } else {
                        (n, kd)
                    };
                    // A one-column operand with a pad is a strided vector (a column of a wider
                    // matrix); C with a pad has rows ldc apart (a strided output column at N = 1).
                    let (lda, ldb, ldc) = (ac + pad, bc + pad, n + pad);
                    seed += 2;
                    let a: Vec<T> = data(seed, ar * lda);
                    let b: Vec<T> = data(seed + 1, br * ldb);
                    let (want, bound) = reference::gemm_f64(ta, tb, m, n, kd, &a, lda, &b, ldb);
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let auto = if ops::gemv_half_fits(ta, tb, m, n, kd) {
                        HalfPlan::Gemv
                    } else {
                        ops::gemm_half_plan(TcAlgo::Wgmma, m, n, kd, 132)
                    };
                    let mut first: Option<Vec<T>> = None;
                    for plan in [HalfPlan::Gemv, HalfPlan::Gemv, auto] {
                        if plan != HalfPlan::Gemv
                            && ops::tc_choice(
                                TcAlgo::Auto,
                                ctx.limits().compute_capability,
                                T::DTYPE,
                            )
                            .is_err()
                        {
                            continue; // no tensor-core family here for the other plans
                        }
                        let mut dc = s.alloc_zeros::<T>(off + m * ldc)?;
                        s.memset_bytes(&mut dc, 0xFF)?;
                        let r = ops::gemm_half_with_plan(
                            &k,
                            &s,
                            plan,
                            ta,
                            tb,
                            m,
                            n,
                            kd,
                            &da.slice(off..)?,
                            lda,
                            &db.slice(off..)?,
                            ldb,
                            &mut dc.slice_mut(off..)?,
                            ldc,
                        );
                        if matches!(r, Err(Error::Unsupported { .. })) && plan != HalfPlan::Gemv {
                            continue; // the tile plans need sm_90 / sm_80
                        }
                        r?;
                        let got = s.clone_dtoh(&dc)?;
                        let what = format!(
                            "{:?} {plan:?} {ta:?},{tb:?} {m}x{n}x{kd} pad={pad} off={off}",
                            T::DTYPE
                        );
                        check(&what, &got, off, m, n, ldc, &want, &bound)?;
                        if plan == HalfPlan::Gemv {
                            match &first {
                                None => first = Some(got),
                                Some(f) => ensure!(
                                    f.iter().zip(&got).all(|(x, y)| {
                                        x.to_f64().to_bits() == y.to_f64().to_bits()
                                    }),
                                    "{what}: a rerun gave other bits"
                                ),
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `gemm_half` takes the row kernel where `gemv_half_fits` says so, and `HalfPlan::Gemv` for a
/// product with m, n > 1 is a typed error with nothing launched.
fn plan_and_errors() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let g = ops::GEMV_MIN_OUTPUTS;
    let (nt, tr) = (Transpose::NoTrans, Transpose::Trans);
    ensure!(
        ops::gemv_half_fits(nt, nt, g, 1, 64)
            && ops::gemv_half_fits(tr, tr, 1, g, 64)
            && !ops::gemv_half_fits(tr, nt, g, 1, 64)
            && !ops::gemv_half_fits(nt, nt, 1, g, 64)
            && !ops::gemv_half_fits(nt, nt, g - 1, 1, 64),
        "the matrix-vector rule"
    );
    let a = s.alloc_zeros::<bf16>(64)?;
    let mut c = s.clone_htod(&[bf16::from_f32(7.0); 64])?;
    let r = ops::gemm_half_with_plan(
        &k,
        &s,
        HalfPlan::Gemv,
        nt,
        nt,
        2,
        2,
        2,
        &a,
        2,
        &a,
        2,
        &mut c,
        2,
    );
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "Gemv at 2 x 2: {r:?}"
    );
    ensure!(
        s.clone_dtoh(&c)?.iter().all(|v| v.to_f32() == 7.0),
        "C written by a refused plan"
    );
    // k = 0: the product is zeros, as for every plan.
    let mut c1 = s.clone_htod(&[bf16::from_f32(7.0); 3])?;
    ops::gemm_half_with_plan(
        &k,
        &s,
        HalfPlan::Gemv,
        nt,
        nt,
        1,
        3,
        0,
        &a,
        1,
        &a,
        3,
        &mut c1,
        3,
    )?;
    ensure!(
        s.clone_dtoh(&c1)?.iter().all(|v| v.to_f32() == 0.0),
        "k = 0 must write zeros"
    );
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("gemv_bf16", gemv_all::<bf16>),
        gpu("gemv_f16", gemv_all::<f16>),
        gpu("plan_and_errors", plan_and_errors),
    ]);
}
