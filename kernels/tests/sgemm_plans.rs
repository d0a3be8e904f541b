//! `ops::sgemm` under every kind of plan (`ops::sgemm_with_plan`): the column-strip kernel
//! (`sgemm_strip_*`, the last `strip_cols` columns) alone and beside unsplit and split-K rows,
//! checked exactly against `reference::sgemm_planned` with `SgemmPlan::splits_for`, over small
//! and odd shapes, every transpose, `beta == 0` (C poisoned with NaN: never read) and `beta != 0`,
//! padded leading dimensions and views starting one element into their buffer (unaligned rows);
//! the padding of C between rows must come back untouched. Plans the kernels cannot run are
//! refused with a typed error. Also the transpose the relayout of a transposed B uses
//! (`ops::transpose_ld`, rows of the output padded to a multiple of 4).

use cuda_stack_driver::{DeviceBuffer, DeviceRepr, Stream};
use cuda_stack_kernels::ops::{self, AlignedTile, SgemmPlan, Transpose};
use cuda_stack_kernels::{reference, Error, Kernels};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::sync::Arc;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn setup() -> Res<(Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((s, k))
}

/// Floats in [-1, 1) from a seed (xorshift).
fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn upload<T: DeviceRepr>(s: &Stream, v: &[T], off: usize) -> Res<DeviceBuffer<T>> {
    let mut all = vec![T::zeroed(); off];
    all.extend_from_slice(v);
    Ok(s.clone_htod(&all)?)
}

fn plan(main_rows: usize, rest_splits: usize, strip_cols: usize) -> SgemmPlan {
    SgemmPlan {
        main_rows,
        rest_splits,
        strip_cols,
    }
}

/// (m, n, k, plan): the strip alone (all of n, or past no tile column), the strip beside one
/// unsplit launch, beside split-K rows, beside both; 1 to 8 strip columns; k = 0, k shorter than
/// one 16-wide tile, k with empty slices (fewer tiles than 32 slices), k tails.
const CASES: &[(usize, usize, usize, SgemmPlan)] = &[
    (
        1,
        1,
        1,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 1,
        },
    ),
    (
        7,
        8,
        33,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 8,
        },
    ),
    (
        9,
        4,
        2051,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 3,
        },
    ),
    (
        130,
        131,
        17,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 3,
        },
    ),
    (
        64,
        136,
        300,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 8,
        },
    ),
    (
        200,
        129,
        700,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 5,
            strip_cols: 1,
        },
    ),
    (
        300,
        133,
        1000,
        SgemmPlan {
            main_rows: 128,
            rest_splits: 3,
            strip_cols: 5,
        },
    ),
    (
        257,
        130,
        5,
        SgemmPlan {
            main_rows: 256,
            rest_splits: 2,
            strip_cols: 2,
        },
    ),
    (
        5,
        12,
        0,
        SgemmPlan {
            main_rows: 0,
            rest_splits: 1,
            strip_cols: 4,
        },
    ),
    // k == 0 with rows after the first tile row (A, B may hold no elements at all).
    (
        257,
        12,
        0,
        SgemmPlan {
            main_rows: 128,
            rest_splits: 1,
            strip_cols: 4,
        },
    ),
];

fn strip_plans() -> TestResult {
    let (s, k) = setup()?;
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for &(m, n, kd, p) in CASES {
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
                    let a = data(61, ar * lda);
                    let b = data(62, br * ldb);
                    let mut c = data(63, m * ldc);
                    if beta == 0.0 {
                        c.iter_mut().for_each(|v| *v = f32::NAN); // beta == 0: C is not read
                    }
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut dc = upload(&s, &c, off)?;
                    ops::sgemm_with_plan(
                        &k,
                        &s,
                        p,
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
                        |i, j| p.splits_for(i, j, n),
                    );
                    let what = format!(
                        "sgemm {ta:?},{tb:?} {m}x{n}x{kd} {p:?} alpha={alpha} beta={beta} pad={pad} off={off}"
                    );
                    ensure!(got.len() == c.len(), "{what}: {} results", got.len());
                    for (e, (g, w)) in got.iter().zip(&c).enumerate() {
                        // exact, NaN padding included (NaN == NaN by bits)
                        ensure!(
                            g.to_bits() == w.to_bits(),
                            "{what}: C[{}][{}] = {g}, expected {w}",
                            e / ldc,
                            e % ldc
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// The automatic plan on the shapes it gives a strip (on a 132-SM GPU; whatever this GPU's plan
/// is, every entry is checked with it): a third of 2400 samples from the strip, against
/// `sgemm_dot` with the entry's slices, every transpose (NT / TT through B's relayout), `beta !=
/// 0`, views one element in with padded leading dimensions.
fn auto_plans_sampled() -> TestResult {
    let (s, k) = setup()?;
    let sms = s.context().device().sm_count()?;
    let ts = [Transpose::NoTrans, Transpose::Trans];
    for (m, n, kd) in [(1023, 1025, 1027), (2047, 2049, 2051)] {
        let p = ops::sgemm_plan(m, n, kd, sms);
        for ta in ts {
            for tb in ts {
                for (pad, off) in [(0usize, 0usize), (3, 1)] {
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
                    let a = data(71, ar * lda);
                    let b = data(72, br * ldb);
                    let c0 = data(73, m * ldc);
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut dc = upload(&s, &c0, off)?;
                    let (alpha, beta) = (0.75f32, -0.5f32);
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
                    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (m * 31 + n) as u64;
                    let mut next = || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as usize
                    };
                    let strip = p.strip_cols.max(1);
                    for t in 0..2400usize {
                        let i = next() % m;
                        let j = if t % 3 == 0 {
                            n - 1 - next() % strip
                        } else {
                            next() % n
                        };
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
                            p.splits_for(i, j, n),
                        );
                        let want = beta.mul_add(c0[i * ldc + j], alpha * acc);
                        let g = got[i * ldc + j];
                        ensure!(
                            g.to_bits() == want.to_bits(),
                            "sgemm {ta:?},{tb:?} {m}x{n}x{kd} {p:?} pad={pad} off={off}: C[{i}][{j}] = {g}, expected {want}"
                        );
                    }
                    for i in 0..m {
                        for j in n..ldc {
                            ensure!(
                                got[i * ldc + j].to_bits() == c0[i * ldc + j].to_bits(),
                                "sgemm {ta:?},{tb:?} {m}x{n}x{kd}: padding C[{i}][{j}] changed"
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Plans the kernels cannot run are refused before any work.
fn plan_errors() -> TestResult {
    let (s, k) = setup()?;
    let (m, n, kd) = (4, 5, 3);
    let a = s.alloc_zeros::<f32>(m * kd)?;
    let b = s.alloc_zeros::<f32>(kd * n)?;
    let mut c = s.alloc_zeros::<f32>(m * n)?;
    let nt = Transpose::NoTrans;
    for bad in [
        plan(64, 1, 0),
        plan(0, 0, 0),
        plan(0, ops::MAX_SPLITS + 1, 0),
        plan(0, 1, 6),
        plan(0, 1, 9),
    ] {
        let r = ops::sgemm_with_plan(
            &k, &s, bad, nt, nt, m, n, kd, 1.0, &a, kd, &b, n, 0.0, &mut c, n,
        );
        ensure!(
            matches!(r, Err(Error::Invalid { .. })),
            "{bad:?} accepted: {r:?}"
        );
    }
    ops::sgemm_with_plan(
        &k,
        &s,
        plan(0, 1, 5),
        nt,
        nt,
        m,
        n,
        kd,
        1.0,
        &a,
        kd,
        &b,
        n,
        0.0,
        &mut c,
        n,
    )?;
    Ok(())
}

/// `ops::transpose_ld`: exact, the output's padding columns untouched (NaN poison), views one
/// element in; bad leading dimensions and short outputs refused.
fn transpose_ld() -> TestResult {
    let (s, k) = setup()?;
    for &(rows, cols, ldo) in &[
        (1usize, 1usize, 4usize),
        (3, 5, 4),
        (65, 97, 68),
        (130, 64, 131),
        (2049, 70, 2052),
        (64, 3001, 67),
        (7, 200, 7),
        (300, 260, 301),
        // 153 tiles of 128 x 128: more than the SMs, so blocks walk several tiles.
        (2049, 1100, 2052),
    ] {
        for (off, tile) in [0usize, 1].into_iter().flat_map(|o| {
            [
                None,
                Some(AlignedTile::T128x64),
                Some(AlignedTile::T128x128),
            ]
            .map(|t| (o, t))
        }) {
            let x = data(81, rows * cols);
            let dx = upload(&s, &x, off)?;
            let len = (cols - 1) * ldo + rows;
            let mut dout = upload(&s, &vec![f32::NAN; len], off)?;
            let (xv, mut ov) = (dx.slice(off..)?, dout.slice_mut(off..)?);
            match tile {
                None => ops::transpose_ld(&k, &s, &xv, &mut ov, rows, cols, ldo)?,
                Some(t) => ops::transpose_ld_with(&k, &s, t, &xv, &mut ov, rows, cols, ldo)?,
            }
            let got = s.clone_dtoh(&dout.slice(off..)?)?;
            for (e, g) in got.iter().enumerate() {
                let (c, r) = (e / ldo, e % ldo);
                if r < rows {
                    ensure!(
                        g.to_bits() == x[r * cols + c].to_bits(),
                        "transpose_ld {rows}x{cols} ldo {ldo} off {off} {tile:?}: out[{c}][{r}] = {g}, expected {}",
                        x[r * cols + c]
                    );
                } else {
                    ensure!(
                        g.is_nan(),
                        "transpose_ld {rows}x{cols} ldo {ldo}: padding out[{c}][{r}] written"
                    );
                }
            }
        }
    }
    let x = s.alloc_zeros::<f32>(12)?;
    let mut out = s.alloc_zeros::<f32>(16)?;
    let r = ops::transpose_ld(&k, &s, &x, &mut out, 3, 4, 2);
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "ldo < rows accepted: {r:?}"
    );
    let r = ops::transpose_ld(&k, &s, &x, &mut out, 3, 4, 5);
    ensure!(
        matches!(r, Err(Error::Shape { .. })),
        "short output accepted: {r:?}"
    );
    Ok(())
}

/// The plan's bookkeeping: which slices an entry gets.
fn splits_for() -> TestResult {
    let p = plan(128, 3, 2);
    ensure!(
        p.splits_for(0, 0, 10) == 1 && p.splits_for(127, 7, 10) == 1,
        "main rows"
    );
    ensure!(p.splits_for(128, 7, 10) == 3, "split rows");
    ensure!(
        p.splits_for(0, 8, 10) == ops::STRIP_SLICES
            && p.splits_for(500, 9, 10) == ops::STRIP_SLICES,
        "strip columns"
    );
    ensure!(plan(0, 2, 0).splits_for(0, 9, 10) == 2, "no strip");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("splits_for", splits_for),
        gpu("strip_plans", strip_plans),
        gpu("auto_plans_sampled", auto_plans_sampled),
        gpu("plan_errors", plan_errors),
        gpu("transpose_ld", transpose_ld),
    ]);
}
