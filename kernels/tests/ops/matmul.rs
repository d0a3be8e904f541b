//! Matrix multiply: the naive and tiled kernels, SGEMM in every transpose, its planned row
//! blocks and its bounds checks.

use super::*;

pub(crate) const MATMUL_SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (17, 33, 9),
    (127, 129, 65),
    (256, 256, 256),
    (33, 200, 700),
    (0, 5, 3),
    (5, 0, 3),
    (4, 5, 0),
    (16, 16, 16),
    (1, 300, 7),
];

pub(crate) fn matmul_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let algos: &[MatmulAlgo] = if T::DTYPE == DType::F32 {
        &[MatmulAlgo::Naive, MatmulAlgo::Tiled16, MatmulAlgo::Fast]
    } else {
        &[MatmulAlgo::Naive, MatmulAlgo::Tiled16]
    };
    for &(m, n, kd) in MATMUL_SHAPES {
        for &off in OFFSETS {
            let (a, b) = (data::<T>(11, m * kd), data::<T>(12, kd * n));
            let want = reference::matmul(&a, &b, m, n, kd); // exact: FMA in increasing k (i32 wraps)
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for &algo in algos {
                let mut c = poisoned::<T>(&s, m * n, off)?;
                ops::matmul(
                    &k,
                    &s,
                    algo,
                    &da.slice(off..)?,
                    &db.slice(off..)?,
                    &mut c.slice_mut(off..)?,
                    m,
                    n,
                    kd,
                )?;
                check_exact(
                    &format!("matmul {algo:?}<{}> {m}x{n}x{kd} off={off}", T::DTYPE),
                    &download(&s, &c, off)?,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

pub(crate) fn sgemm_all_transposes() -> TestResult {
    let (ctx, s, k) = setup()?;
    let sms = ctx.device().sm_count()?;
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for &(m, n, kd) in MATMUL_SHAPES {
        for ta in ts {
            for tb in ts {
                for &(alpha, beta, pad, off) in &[
                    (1.0f32, 0.0f32, 0usize, 0usize),
                    (0.5, -2.0, 3, 1),
                    (-1.25, 1.0, 4, 0),
                ] {
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
                    let (lda, ldb, ldc) = (ac + pad, bc + pad, n + pad);
                    let len = |rows: usize, ld: usize| rows * ld;
                    let a = small_data::<f32>(13, len(ar, lda));
                    let b = small_data::<f32>(14, len(br, ldb));
                    let mut c: Vec<f32> = small_data::<f32>(15, len(m, ldc));
                    if beta == 0.0 {
                        c.iter_mut().for_each(|v| *v = f32::NAN); // beta == 0: C must not be read
                    }
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut dc = upload(&s, &c, off)?;
                    ops::sgemm(
                        &k,
                        &s,
                        ta,
                        tb,
                        m,
                        n,
                        kd,
                        alpha,
                        &da.slice(off..)?,
                        lda,
                        &db.slice(off..)?,
                        ldb,
                        beta,
                        &mut dc.slice_mut(off..)?,
                        ldc,
                    )?;
                    let got = s.clone_dtoh(&dc.slice(off..)?)?;
                    let _ = br;
                    let plan = ops::sgemm_plan(m, n, kd, sms);
                    reference::sgemm_planned(
                        ta,
                        tb,
                        m,
                        n,
                        kd,
                        alpha,
                        &a,
                        lda,
                        &b,
                        ldb,
                        beta,
                        &mut c,
                        ldc,
                        |i, j| plan.splits_for(i, j, n),
                    );
                    // exact: FMA in increasing k (per k slice with split-K, slices summed in
                    // order), then alpha·acc, then fmaf(beta, C, ·); padding untouched.
                    check_exact(&format!("sgemm {ta:?},{tb:?} {m}x{n}x{kd} alpha={alpha} beta={beta} pad={pad} off={off}"), &got, &c)?;
                }
            }
        }
    }
    Ok(())
}

/// A product whose plan on tiles alone runs whole waves of tile rows unsplit and splits the
/// leftover rows (2047 × 2049 × 2051 on a 132-SM GPU: 15 tile rows, then one row of tiles in k
/// slices), every transpose, `beta != 0`: 3000 entries from both parts checked exactly against
/// `sgemm_dot` with the plan's slices for their row (a full CPU reference would take minutes).
/// (`ops::sgemm` itself gives this shape a column strip: tests/sgemm_plans.rs.)
pub(crate) fn sgemm_planned_rows() -> TestResult {
    let (ctx, s, k) = setup()?;
    let sms = ctx.device().sm_count()?;
    let (m, n, kd) = (2047, 2049, 2051);
    let plan = ops::sgemm_tile_plan(m, n, kd, sms);
    let a = small_data::<f32>(31, m * kd);
    let b = small_data::<f32>(32, kd * n);
    let c0 = small_data::<f32>(33, m * n);
    let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for ta in ts {
        for tb in ts {
            let lda = if ta == Transpose::NoTrans { kd } else { m };
            let ldb = if tb == Transpose::NoTrans { n } else { kd };
            let mut dc = s.clone_htod(&c0)?;
            let (alpha, beta) = (0.75f32, -0.5f32);
            ops::sgemm_with_plan(
                &k, &s, plan, ta, tb, m, n, kd, alpha, &da, lda, &db, ldb, beta, &mut dc, n,
            )?;
            let got = s.clone_dtoh(&dc)?;
            let mut rng = Rng::new(34);
            let rest = m - plan.main_rows.min(m - 1);
            for t in 0..3000usize {
                // Half the samples from the rows after the plan's main part.
                let i = if t % 2 == 0 {
                    (rng.next_u64() as usize) % m
                } else {
                    m - 1 - (rng.next_u64() as usize) % rest
                };
                let j = (rng.next_u64() as usize) % n;
                let acc = reference::sgemm_dot(
                    ta,
                    tb,
                    kd,
                    &a,
                    lda,
                    &b,
                    ldb,
                    i,
                    j,
                    plan.splits_for_row(i),
                );
                let want = beta.mul_add(c0[i * n + j], alpha * acc);
                ensure!(
                    got[i * n + j].to_bits() == want.to_bits(),
                    "sgemm {ta:?},{tb:?} {m}x{n}x{kd} plan {plan:?}: C[{i}][{j}] = {} on the GPU, {want} expected",
                    got[i * n + j]
                );
            }
        }
    }
    Ok(())
}

pub(crate) fn sgemm_bounds_checks() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let a = s.alloc_zeros::<f32>(6)?; // [2, 3]
    let b = s.alloc_zeros::<f32>(12)?; // [3, 4]
    let mut c = s.alloc_zeros::<f32>(8)?; // [2, 4]
    let nt = Transpose::NoTrans;
    ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 3, &b, 4, 0.0, &mut c, 4)?;
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 2, &b, 4, 0.0, &mut c, 4);
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "lda < k must fail: {r:?}"
    );
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 4, &b, 4, 0.0, &mut c, 4);
    ensure!(
        matches!(r, Err(Error::Shape { what: "a", .. })),
        "a too short for lda 4: {r:?}"
    );
    let r = ops::sgemm(
        &k,
        &s,
        nt,
        Transpose::Trans,
        2,
        4,
        3,
        1.0,
        &a,
        3,
        &b,
        3,
        0.0,
        &mut c,
        4,
    );
    ensure!(
        r.is_ok(),
        "B^T stored [4, 3] with ldb 3 fits 12 elements: {r:?}"
    );
    let r = ops::sgemm(&k, &s, nt, nt, 2, 4, 3, 1.0, &a, 3, &b, 4, 0.0, &mut c, 5);
    ensure!(
        matches!(r, Err(Error::Shape { what: "c", .. })),
        "c too short for ldc 5: {r:?}"
    );
    Ok(())
}
