//! The shape-specialised Hopper GEMMs (`gemm_wgx_*`: persistent tiles of 128 × 256, 128 × 128,
//! 64 × 128 and 128 × 64, with and without split-K) forced one by one through
//! `ops::gemm_half_with_plan`, and `ops::gemm_half`'s own plan, against the f64 CPU reference:
//! M or N = 1, skinny M and N, K = one k tile, K not a multiple of 64, small K, a long K over a
//! small output, odd extents, every layout, tight (copied) and padded leading dimensions, views
//! one element in, C poisoned first with its padding checked untouched; split-K results
//! bit-identical from run to run. Tolerances as in `gemm_tc.rs` (split-K adds f32 partial sums:
//! within the same accumulation bound). Plus the plan table on the CPU.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{self, HalfPlan, HalfTile, TcAlgo, TensorCoreElement, Transpose};
use cuda_stack_kernels::{reference, Kernels};
use cuda_tests::{cpu, ensure, gpu, TestResult};

mod gemm_support;
use gemm_support::{check, data, upload};

/// (m, n, k): M = 1, N = 1, skinny M / N with a K tail, K = one k tile, small K, a long K over
/// a small output, odd extents on every side, more units than one wave.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 300, 200),
    (70, 1, 130),
    (33, 257, 1000),
    (257, 33, 520),
    (129, 131, 64),
    (200, 136, 16),
    (64, 64, 4100),
    (131, 263, 77),
    // More 128 x 64 pairs (9 x 8) than an H100 or H200 has clusters of two: the pair tile's
    // clusters take several units each.
    (1100, 1000, 200),
    // 257 k tiles over a tiny output: 200 slices asked for run 129 (the reduce's 32 groups),
    // 64 run 52 (8 groups); M < 64 leaves a 128-row tile's second consumer idle.
    (40, 72, 16_400),
];

/// Splits asked for: none, a few and a dozen (the last slice shorter; the reduce in one and in
/// two groups of slices), more than there are k tiles (or, at 16 400, more than 128: the
/// reduce's largest block).
const SPLITS: &[usize] = &[1, 3, 12, 64, 200];

fn hopper(cc: ComputeCapability) -> bool {
    cc == (ComputeCapability { major: 9, minor: 0 })
}

fn tiles_all<T: TensorCoreElement>() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    if !hopper(ctx.limits().compute_capability) {
        let a = s.alloc_zeros::<T>(1)?;
        let mut c = s.alloc_zeros::<T>(1)?;
        let nt = Transpose::NoTrans;
        let plan = HalfPlan::Tiles {
            tile: HalfTile::T128x128,
            splits: 1,
        };
        let r = ops::gemm_half_with_plan(&k, &s, plan, nt, nt, 1, 1, 1, &a, 1, &a, 1, &mut c, 1);
        ensure!(
            matches!(r, Err(cuda_stack_kernels::Error::Unsupported { .. })),
            "wgx off sm_90: {r:?}"
        );
        return Ok(());
    }
    let ts = [Transpose::NoTrans, Transpose::Trans];
    let mut seed = 7000;
    for &(m, n, kd) in SHAPES {
        for ta in ts {
            for tb in ts {
                // (extra columns of every leading dimension, view offset): dense and 16-byte
                // aligned when the extents allow, or copied into aligned buffers first.
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
                    let (lda, ldb, ldc) = (ac + pad, bc + pad, n + pad);
                    seed += 2;
                    let a: Vec<T> = data(seed, ar * lda);
                    let b: Vec<T> = data(seed + 1, br * ldb);
                    let (want, bound) = reference::gemm_f64(ta, tb, m, n, kd, &a, lda, &b, ldb);
                    let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                    let mut plans: Vec<HalfPlan> = HalfTile::ALL
                        .iter()
                        .flat_map(|&tile| {
                            SPLITS
                                .iter()
                                .map(move |&splits| HalfPlan::Tiles { tile, splits })
                        })
                        .collect();
                    plans.push(HalfPlan::Wide);
                    plans.push(ops::gemm_half_plan(
                        TcAlgo::Wgmma,
                        m,
                        n,
                        kd,
                        ctx.limits().sm_count,
                    ));
                    for plan in plans {
                        let mut dc = s.alloc_zeros::<T>(off + m * ldc)?;
                        s.memset_bytes(&mut dc, 0xFF)?;
                        ops::gemm_half_with_plan(
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
                        )?;
                        let got = s.clone_dtoh(&dc)?;
                        let what = format!(
                            "{:?} {plan:?} {ta:?},{tb:?} {m}x{n}x{kd} pad={pad} off={off}",
                            T::DTYPE
                        );
                        check(&what, &got, off, m, n, ldc, &want, &bound)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A split-K product twice gives the same bits (slabs summed in a fixed order, no atomics), and
/// a larger skinny product under `gemm_half`'s own plan is right on every entry.
fn split_deterministic<T: TensorCoreElement>() -> TestResult {
    let ctx = cuda_tests::context()?;
    if !hopper(ctx.limits().compute_capability) {
        return Ok(());
    }
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let (m, n, kd) = (33, 1024, 4096);
    let nn = Transpose::NoTrans;
    let a: Vec<T> = data(81, m * kd);
    let b: Vec<T> = data(82, kd * n);
    let (da, db) = (upload(&s, &a, 0)?, upload(&s, &b, 0)?);
    let (want, bound) = reference::gemm_f64(nn, nn, m, n, kd, &a, kd, &b, n);
    let mut runs = Vec::new();
    for (tile, splits) in [
        (HalfTile::T64x128, 16),
        (HalfTile::T128x256, 16),
        (HalfTile::T128x64, 64),
    ] {
        for _ in 0..2 {
            let mut dc = s.alloc_zeros::<T>(m * n)?;
            let plan = HalfPlan::Tiles { tile, splits };
            ops::gemm_half_with_plan(&k, &s, plan, nn, nn, m, n, kd, &da, kd, &db, n, &mut dc, n)?;
            runs.push(s.clone_dtoh(&dc)?);
        }
        let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
        let (x, y) = (&runs[runs.len() - 2], &runs[runs.len() - 1]);
        ensure!(bits(x) == bits(y), "{tile:?} split-K: two runs differ");
        check(
            &format!("{:?} {tile:?} splits={splits} {m}x{n}x{kd}", T::DTYPE),
            x,
            0,
            m,
            n,
            n,
            &want,
            &bound,
        )?;
    }
    let mut dc = s.alloc_zeros::<T>(m * n)?;
    ops::gemm_half(
        &k,
        &s,
        TcAlgo::Auto,
        nn,
        nn,
        m,
        n,
        kd,
        &da,
        kd,
        &db,
        n,
        &mut dc,
        n,
    )?;
    let got = s.clone_dtoh(&dc)?;
    check(
        &format!("{:?} auto {m}x{n}x{kd}", T::DTYPE),
        &got,
        0,
        m,
        n,
        n,
        &want,
        &bound,
    )
}

/// Plans outside the contract are refused with a typed error, before anything runs.
fn bad_plans() -> TestResult {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let a = s.alloc_zeros::<bf16>(64)?;
    let mut c = s.alloc_zeros::<bf16>(64)?;
    let nt = Transpose::NoTrans;
    for splits in [0, ops::HALF_MAX_SPLITS + 1] {
        let plan = HalfPlan::Tiles {
            tile: HalfTile::T128x64,
            splits,
        };
        let r = ops::gemm_half_with_plan(&k, &s, plan, nt, nt, 8, 8, 8, &a, 8, &a, 8, &mut c, 8);
        ensure!(
            matches!(
                r,
                Err(cuda_stack_kernels::Error::Invalid { .. })
                    | Err(cuda_stack_kernels::Error::Unsupported { .. })
            ),
            "splits = {splits}: {r:?}"
        );
    }
    Ok(())
}

/// The plan table: no non-empty product runs the one-block-per-tile kernel (the large squares
/// take the persistent 128 × 256 tile, measured faster), and every plan's workspace stays within
/// the cap.
fn plan_table() -> TestResult {
    let p = |m, n, k| ops::gemm_half_plan(TcAlgo::Wgmma, m, n, k, 132);
    let wide = HalfPlan::Tiles {
        tile: HalfTile::T128x256,
        splits: 1,
    };
    ensure!(p(4096, 4096, 4096) == wide, "4096^3");
    ensure!(p(8192, 8192, 8192) == wide, "8192^3");
    for (m, n, k) in [
        (8192, 8192, 64),
        (33, 4096, 4096),
        (4096, 33, 4096),
        (1, 4096, 4096),
        (4096, 1, 4096),
        (1000, 1000, 1000),
        (256, 256, 65_536),
        (512, 512, 16_384),
        (64, 64, 131_072),
    ] {
        let plan = p(m, n, k);
        ensure!(plan != HalfPlan::Wide, "{m}x{n}x{k}: {plan:?}");
        if let HalfPlan::Tiles { splits, .. } = plan {
            let (_, real) = ops::half_split(k, splits);
            ensure!(
                real == 1 || real * m * n * 4 <= ops::HALF_MAX_WORKSPACE,
                "{m}x{n}x{k}: workspace"
            );
        }
    }
    ensure!(
        ops::gemm_half_plan(TcAlgo::MmaSync, 33, 4096, 4096, 132) == HalfPlan::MmaSync,
        "mma.sync family"
    );
    Ok(())
}

/// A split-K product on two streams in turn, captured into a graph (its workspace allocated at
/// capture time) and replayed twice, then eagerly again: every result right and bit-identical.
fn split_streams_and_graphs() -> TestResult {
    let ctx = cuda_tests::context()?;
    if !hopper(ctx.limits().compute_capability) {
        return Ok(());
    }
    let k = Kernels::get(&ctx)?;
    let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
    let (m, n, kd) = (200, 300, 3000);
    let nn = Transpose::NoTrans;
    let a: Vec<bf16> = data(91, m * kd);
    let b: Vec<bf16> = data(92, kd * n);
    let (want, bound) = reference::gemm_f64(nn, nn, m, n, kd, &a, kd, &b, n);
    let (da, db) = (upload(&s1, &a, 0)?, upload(&s1, &b, 0)?);
    s1.synchronize()?;
    let plan = HalfPlan::Tiles {
        tile: HalfTile::T128x128,
        splits: 5,
    };
    let run = |s: &cuda_stack_driver::Stream, c: &mut cuda_stack_driver::DeviceBuffer<bf16>| {
        ops::gemm_half_with_plan(&k, s, plan, nn, nn, m, n, kd, &da, kd, &db, n, c, n)
    };
    let mut outs = Vec::new();
    let (mut c1, mut c2) = (
        s1.alloc_zeros::<bf16>(m * n)?,
        s2.alloc_zeros::<bf16>(m * n)?,
    );
    for _ in 0..3 {
        run(&s1, &mut c1)?;
        run(&s2, &mut c2)?;
        outs.push(s1.clone_dtoh(&c1)?);
        outs.push(s2.clone_dtoh(&c2)?);
    }
    let mut c3 = s1.alloc_zeros::<bf16>(m * n)?;
    let mut failed = None;
    let graph = ctx.capture(|cs| {
        if let Err(e) = run(cs, &mut c3) {
            failed = Some(e);
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let exec = graph.instantiate()?;
    for _ in 0..2 {
        s1.memset_zeros(&mut c3)?;
        exec.launch(&s1)?;
        outs.push(s1.clone_dtoh(&c3)?);
    }
    run(&s1, &mut c1)?;
    outs.push(s1.clone_dtoh(&c1)?);
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (i, o) in outs.iter().enumerate() {
        check(&format!("split-K run {i}"), o, 0, m, n, n, &want, &bound)?;
        ensure!(bits(o) == bits(&outs[0]), "run {i} differs from run 0");
    }
    Ok(())
}

/// The split-K workspace kept between calls (`ops::release_split_workspaces`): calls on three
/// streams in turn with workspaces that grow, shrink and pass the cached size (one of 38 MB is
/// allocated per call), none synchronized before the last; two threads enqueueing on one stream
/// at once; a stream dropped while its workspace is cached, the cache released mid-run. Every
/// output right.
fn split_workspace_reuse() -> TestResult {
    let ctx = cuda_tests::context()?;
    if !hopper(ctx.limits().compute_capability) {
        return Ok(());
    }
    let k = Kernels::get(&ctx)?;
    let nn = Transpose::NoTrans;
    // (m, n, k, tile, splits): workspaces of 1.2, 2.6, 1.7 and 38.4 MB (over the 32 MiB kept).
    let cases: [(usize, usize, usize, HalfTile, usize); 4] = [
        (200, 300, 3000, HalfTile::T128x128, 5),
        (64, 640, 2048, HalfTile::T64x128, 16),
        (300, 200, 1500, HalfTile::T128x64, 7),
        (800, 1200, 640, HalfTile::T128x128, 10),
    ];
    ensure!(
        800 * 1200 * 10 * 4 > ops::SPLIT_WORKSPACE_CACHED_MAX_BYTES,
        "the last case must be over the cached size"
    );
    let s0 = ctx.new_stream()?;
    let mut inputs = Vec::new();
    for (i, &(m, n, kd, _, _)) in cases.iter().enumerate() {
        let a: Vec<bf16> = data(100 + i as u64, m * kd);
        let b: Vec<bf16> = data(200 + i as u64, kd * n);
        let (want, bound) = reference::gemm_f64(nn, nn, m, n, kd, &a, kd, &b, n);
        inputs.push((upload(&s0, &a, 0)?, upload(&s0, &b, 0)?, want, bound));
    }
    s0.synchronize()?;
    let run =
        |s: &cuda_stack_driver::Stream, i: usize, c: &mut cuda_stack_driver::DeviceBuffer<bf16>| {
            let (m, n, kd, tile, splits) = cases[i];
            let plan = HalfPlan::Tiles { tile, splits };
            let (a, b) = (&inputs[i].0, &inputs[i].1);
            ops::gemm_half_with_plan(&k, s, plan, nn, nn, m, n, kd, a, kd, b, n, c, n)
        };
    let streams = [ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?];
    // (case, output) pairs in the order queued; nothing synchronized until all are queued.
    let mut outs = Vec::new();
    for round in 0..3 {
        for (j, s) in streams.iter().enumerate() {
            for i in [round % 4, (round + j + 1) % 4, 3, j % 3] {
                let (m, n, ..) = cases[i];
                let mut c = s.alloc_zeros::<bf16>(m * n)?;
                run(s, i, &mut c)?;
                outs.push((i, c));
            }
        }
        if round == 1 {
            ops::release_split_workspaces();
        }
    }
    // A stream dropped while its workspace is cached; a new one after it.
    {
        let s = ctx.new_stream()?;
        let mut c = s.alloc_zeros::<bf16>(200 * 300)?;
        run(&s, 0, &mut c)?;
        outs.push((0, c));
    }
    let s = ctx.new_stream()?;
    let mut c = s.alloc_zeros::<bf16>(64 * 640)?;
    run(&s, 1, &mut c)?;
    outs.push((1, c));
    // Two threads queueing split products on one stream at once.
    let shared = &streams[0];
    let threaded: Vec<Vec<(usize, cuda_stack_driver::DeviceBuffer<bf16>)>> =
        std::thread::scope(|sc| {
            let hs: Vec<_> = (0..2)
                .map(|t| {
                    let run = &run;
                    sc.spawn(move || -> Result<Vec<_>, String> {
                        let mut v = Vec::new();
                        for r in 0..6 {
                            let i = (t + r) % 3;
                            let (m, n, ..) = cases[i];
                            let mut c = shared
                                .alloc_zeros::<bf16>(m * n)
                                .map_err(|e| e.to_string())?;
                            run(shared, i, &mut c).map_err(|e| e.to_string())?;
                            v.push((i, c));
                        }
                        Ok(v)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().map_err(|_| "thread panicked".to_string())?)
                .collect::<Result<Vec<_>, String>>()
        })?;
    outs.extend(threaded.into_iter().flatten());
    for (q, (i, c)) in outs.iter().enumerate() {
        let (m, n, ..) = cases[*i];
        let host = c.home_stream().clone_dtoh(c)?;
        check(
            &format!("call {q} (case {i})"),
            &host,
            0,
            m,
            n,
            n,
            &inputs[*i].2,
            &inputs[*i].3,
        )?;
    }
    ops::release_split_workspaces();
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu("plan_table", plan_table),
        gpu("tiles_bf16", tiles_all::<bf16>),
        gpu("tiles_f16", tiles_all::<f16>),
        gpu("split_deterministic_bf16", split_deterministic::<bf16>),
        gpu("split_deterministic_f16", split_deterministic::<f16>),
        gpu("bad_plans", bad_plans),
        gpu("split_streams_and_graphs", split_streams_and_graphs),
        gpu("split_workspace_reuse", split_workspace_reuse),
    ]);
}
