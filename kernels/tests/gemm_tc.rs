//! The tensor-core GEMMs (`ops::gemm_half`, `ops::gemm_tf32`) against the f64 CPU reference
//! `reference::gemm_f64`, over odd shapes, every transpose, tight (misaligned) and padded leading
//! dimensions, views starting one element into their buffer, and every kernel family the device
//! runs (wgmma on compute capability 9.0, mma.sync on 8.0+). Outputs are poisoned (NaN) first, and
//! the padding of C between rows must come back untouched.
//!
//! Tolerance per entry: `|got - ref| <= eps_out · |ref| + eps_acc · Σ_k |a·b|`, with eps_out the
//! output rounding (2^-8 bf16, 2^-11 f16, 0 for f32) and eps_acc the accumulation (2^-20 for f32
//! accumulation of exact products; 2^-9 for TF32, whose inputs lose 13 mantissa bits).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{self, TcAlgo, TensorCoreElement, Transpose};
use cuda_stack_kernels::{reference, DType, Error, Kernels};
use cuda_tests::{cpu, ensure, gpu, TestResult};

mod gemm_support;
use gemm_support::{check, data, upload};

/// (m, n, k): single elements, below / at / above one 128 x 256 tile, k tails, a wide k, and
/// blocks wholly inside both matrices over 15 full k tiles and a tail (the mma.sync kernel's
/// unchecked copies, their pointers advanced tile by tile, then its checked path).
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (7, 9, 1000),
    (256, 512, 1000),
    (128, 256, 64),
    (129, 257, 65),
    (333, 517, 203),
    (64, 300, 16),
    (300, 8, 40),
];

fn families(cc: ComputeCapability) -> Vec<TcAlgo> {
    let mut f = Vec::new();
    if cc == (ComputeCapability { major: 9, minor: 0 }) {
        f.push(TcAlgo::Wgmma);
    }
    if cc >= (ComputeCapability { major: 8, minor: 0 }) {
        f.push(TcAlgo::MmaSync);
    }
    f
}

fn half_all<T: TensorCoreElement>() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let cc = ctx.limits().compute_capability;
    let fams = families(cc);
    if fams.is_empty() {
        let a = s.alloc_zeros::<T>(1)?;
        let mut c = s.alloc_zeros::<T>(1)?;
        let r = ops::gemm_half(
            &k,
            &s,
            TcAlgo::Auto,
            Transpose::NoTrans,
            Transpose::NoTrans,
            1,
            1,
            1,
            &a,
            1,
            &a,
            1,
            &mut c,
            1,
        );
        ensure!(
            matches!(r, Err(Error::Unsupported { .. })),
            "below sm_80: {r:?}"
        );
        return Ok(());
    }
    let ts = [Transpose::NoTrans, Transpose::Trans];
    let mut seed = 1;
    for &(m, n, kd) in SHAPES {
        for ta in ts {
            for tb in ts {
                // (extra columns of every leading dimension, view offset, C's rows a multiple
                // of 8 elements: the 16-byte stores through shared memory of gemm_mma's
                // epilogue, which the other cases leave to its 2-byte path)
                for &(pad, off, c8) in &[
                    (0usize, 0usize, false),
                    (8, 0, false),
                    (3, 1, false),
                    (0, 0, true),
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
                    let ldc = if c8 {
                        n.next_multiple_of(8) + 8
                    } else {
                        n + pad + 1
                    };
                    let (lda, ldb) = (ac + pad, bc + pad);
                    seed += 2;
                    let a: Vec<T> = data(seed, ar * lda);
                    let b: Vec<T> = data(seed + 1, br * ldb);
                    let (want, bound) = reference::gemm_f64(ta, tb, m, n, kd, &a, lda, &b, ldb);
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    for &fam in &fams {
                        let mut dc = s.alloc_zeros::<T>(off + m * ldc)?;
                        s.memset_bytes(&mut dc, 0xFF)?;
                        let ran = ops::gemm_half(
                            &k,
                            &s,
                            fam,
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
                        )?;
                        ensure!(ran == fam, "asked for {fam:?}, ran {ran:?}");
                        let got = s.clone_dtoh(&dc)?;
                        let what = format!(
                            "{:?} {fam:?} {ta:?},{tb:?} {m}x{n}x{kd} pad={pad} off={off} ldc={ldc}",
                            T::DTYPE
                        );
                        check(&what, &got, off, m, n, ldc, &want, &bound)?;
                    }
                }
            }
        }
    }
    // k == 0 writes zeros into C's rows only; m == 0 / n == 0 write nothing.
    for &fam in &fams {
        let a = s.alloc_zeros::<T>(16)?;
        let mut dc = s.alloc_zeros::<T>(3 * 5)?;
        s.memset_bytes(&mut dc, 0xFF)?;
        ops::gemm_half(
            &k,
            &s,
            fam,
            Transpose::NoTrans,
            Transpose::NoTrans,
            3,
            4,
            0,
            &a,
            0,
            &a,
            4,
            &mut dc,
            5,
        )?;
        let got = s.clone_dtoh(&dc)?;
        for (i, v) in got.iter().enumerate() {
            let want_zero = i % 5 < 4;
            ensure!(
                if want_zero {
                    v.to_f64() == 0.0
                } else {
                    v.to_f64().is_nan()
                },
                "{fam:?} k=0: element {i} = {}",
                v.to_f64()
            );
        }
        ops::gemm_half(
            &k,
            &s,
            fam,
            Transpose::NoTrans,
            Transpose::NoTrans,
            0,
            4,
            2,
            &a,
            2,
            &a,
            4,
            &mut dc,
            5,
        )?;
        ops::gemm_half(
            &k,
            &s,
            fam,
            Transpose::NoTrans,
            Transpose::NoTrans,
            3,
            0,
            2,
            &a,
            2,
            &a,
            0,
            &mut dc,
            5,
        )?;
        let again = s.clone_dtoh(&dc)?;
        ensure!(
            again
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits()),
            "{fam:?}: an empty product wrote to C"
        );
    }
    Ok(())
}

/// One larger product per family and layout (1024 x 1024 x 1024), checked on every entry.
fn half_large<T: TensorCoreElement>() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let n = 1024;
    let a: Vec<T> = data(91, n * n);
    let b: Vec<T> = data(92, n * n);
    let (da, db) = (upload(&s, &a, 0)?, upload(&s, &b, 0)?);
    for fam in families(ctx.limits().compute_capability) {
        for (ta, tb) in [
            (Transpose::NoTrans, Transpose::NoTrans),
            (Transpose::Trans, Transpose::Trans),
        ] {
            let (want, bound) = reference::gemm_f64(ta, tb, n, n, n, &a, n, &b, n);
            let mut dc = s.alloc_zeros::<T>(n * n)?;
            s.memset_bytes(&mut dc, 0xFF)?;
            ops::gemm_half(&k, &s, fam, ta, tb, n, n, n, &da, n, &db, n, &mut dc, n)?;
            let got = s.clone_dtoh(&dc)?;
            check(
                &format!("{:?} {fam:?} {ta:?},{tb:?} 1024^3", T::DTYPE),
                &got,
                0,
                n,
                n,
                n,
                &want,
                &bound,
            )?;
        }
    }
    Ok(())
}

fn tf32_all() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let hopper = ctx.limits().compute_capability == (ComputeCapability { major: 9, minor: 0 });
    let ts = [Transpose::NoTrans, Transpose::Trans];
    let mut seed = 500;
    for &(m, n, kd) in SHAPES {
        for ta in ts {
            for tb in ts {
                for &(pad, off) in &[(0usize, 0usize), (3, 1)] {
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
                    let (lda, ldb, ldc) = (ac + pad, bc + pad, n + pad + 1);
                    seed += 2;
                    let a: Vec<f32> = data(seed, ar * lda);
                    let b: Vec<f32> = data(seed + 1, br * ldb);
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut dc = s.alloc_zeros::<f32>(off + m * ldc)?;
                    s.memset_bytes(&mut dc, 0xFF)?;
                    let r = ops::gemm_tf32(
                        &k,
                        &s,
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
                    if !hopper {
                        ensure!(
                            matches!(r, Err(Error::Unsupported { .. })),
                            "not sm_90: {r:?}"
                        );
                        return Ok(());
                    }
                    r?;
                    let (want, bound) = reference::gemm_f64(ta, tb, m, n, kd, &a, lda, &b, ldb);
                    let got = s.clone_dtoh(&dc)?;
                    let what = format!("tf32 {ta:?},{tb:?} {m}x{n}x{kd} pad={pad} off={off}");
                    check(&what, &got, off, m, n, ldc, &want, &bound)?;
                }
            }
        }
    }
    Ok(())
}

/// Shapes and lengths are checked before anything runs.
fn bounds_checks() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let nt = Transpose::NoTrans;
    let a = s.alloc_zeros::<bf16>(16 * 16)?;
    let mut c = s.alloc_zeros::<bf16>(16 * 16)?;
    let short = s.alloc_zeros::<bf16>(16 * 16 - 1)?;
    let r = ops::gemm_half(
        &k,
        &s,
        TcAlgo::Auto,
        nt,
        nt,
        16,
        16,
        16,
        &short,
        16,
        &a,
        16,
        &mut c,
        16,
    );
    ensure!(
        matches!(r, Err(Error::Shape { .. }) | Err(Error::Unsupported { .. })),
        "short A: {r:?}"
    );
    let r = ops::gemm_half(
        &k,
        &s,
        TcAlgo::Auto,
        nt,
        nt,
        16,
        16,
        16,
        &a,
        15,
        &a,
        16,
        &mut c,
        16,
    );
    ensure!(
        matches!(
            r,
            Err(Error::Invalid { .. }) | Err(Error::Unsupported { .. })
        ),
        "lda < k: {r:?}"
    );
    let mut short_c = s.alloc_zeros::<bf16>(16 * 16 - 1)?;
    let r = ops::gemm_half(
        &k,
        &s,
        TcAlgo::Auto,
        nt,
        nt,
        16,
        16,
        16,
        &a,
        16,
        &a,
        16,
        &mut short_c,
        16,
    );
    ensure!(
        matches!(r, Err(Error::Shape { .. }) | Err(Error::Unsupported { .. })),
        "short C: {r:?}"
    );
    Ok(())
}

/// The one place the family is chosen.
fn choice_table() -> TestResult {
    let cc = |major, minor| ComputeCapability { major, minor };
    let d = DType::BF16;
    ensure!(
        ops::tc_choice(TcAlgo::Auto, cc(9, 0), d)? == TcAlgo::Wgmma,
        "9.0 auto"
    );
    ensure!(
        ops::tc_choice(TcAlgo::Auto, cc(8, 0), d)? == TcAlgo::MmaSync,
        "8.0 auto"
    );
    ensure!(
        ops::tc_choice(TcAlgo::Auto, cc(10, 0), d)? == TcAlgo::MmaSync,
        "10.0: sm_90a PTX does not run there"
    );
    ensure!(
        ops::tc_choice(TcAlgo::MmaSync, cc(9, 0), d)? == TcAlgo::MmaSync,
        "9.0 forced mma"
    );
    ensure!(
        matches!(
            ops::tc_choice(TcAlgo::Wgmma, cc(8, 9), d),
            Err(Error::Unsupported { .. })
        ),
        "8.9 wgmma"
    );
    ensure!(
        matches!(
            ops::tc_choice(TcAlgo::Auto, cc(7, 5), d),
            Err(Error::Unsupported { .. })
        ),
        "7.5"
    );
    // The optional PTX files: compute_80 from 8.0 on; compute_90a on 9.0 only.
    for f in cuda_stack_kernels::PTX_FILES {
        match f.name {
            "gemm_mma" => {
                ensure!(f.pick(cc(9, 0))?.arch == "compute_80", "gemm_mma on 9.0");
                ensure!(f.pick(cc(7, 5)).is_err(), "gemm_mma on 7.5");
            }
            "gemm_wgmma" | "gemm_wgmma_tiles" => {
                ensure!(f.pick(cc(9, 0))?.arch == "compute_90a", "gemm_wgmma on 9.0");
                ensure!(
                    f.pick(cc(8, 9)).is_err() && f.pick(cc(10, 0)).is_err(),
                    "gemm_wgmma elsewhere"
                );
            }
            _ => {}
        }
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("choice_table", choice_table),
        gpu("half_bf16", half_all::<bf16>),
        gpu("half_f16", half_all::<f16>),
        gpu("half_large_bf16", half_large::<bf16>),
        gpu("half_large_f16", half_large::<f16>),
        gpu("tf32", tf32_all),
        gpu("bounds_checks", bounds_checks),
    ]);
}
