//! The fused tensor-core attention backward (`AttentionBwdDq::Atomic`: `attn_bwd_fused_mma_*`,
//! dq added into an f32 workspace with atomics, then `attn_bwd_dq_convert_*`; on compute
//! capability 9.0 also `attn_bwd_fused_wgmma_*`, `wgmma_fused_*`, its adds bulk reductions from
//! shared memory) against the f64 CPU reference and against the two-kernel path of the same
//! family (`AttentionBwdDq::Separate`) on the same inputs, f16 and bf16, D = 64 and 128, causal
//! and full:
//! - every output against the reference with `attention.rs`'s tolerances (the workspace starts
//!   as NaN: the path must zero it);
//! - dk and dv bit for bit equal to the two-kernel path's (the fused kernel computes them the
//!   same way, in the same order);
//! - dq against the two-kernel path's, and against a second fused run, within a few units in
//!   the last place of the largest |dq| (`ulps`): the atomic adds land in an order that varies
//!   from run to run, so dq is **not** bitwise reproducible; the tests never ask it to be.
//!
//! `fused_small_*` are a handful of small shapes (a CTA or two, N not a multiple of the tiles,
//! causal) for `compute-sanitizer --tool racecheck` / `memcheck`, e.g.
//! `compute-sanitizer --tool racecheck <attention_fused binary> fused_small`.
//! Below compute capability 8.0 there is nothing to run but the refusals (`fused_misfits`).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionBwdDq, AttentionElement, AttentionInput,
};
use cuda_stack_kernels::Error;
use cuda_tests::{ensure, gpu, TestResult};

mod attention_support;

use attention_support::*;

/// One shape both ways on the kernel family `tc` (`TensorCore` or `Wgmma`): the two-kernel path
/// and the fused one against the reference, dk/dv bit for bit equal, dq within `ulps`. Returns
/// how many dq elements differ in their bits.
fn both_ways<T: AttentionElement>(
    k: &cuda_stack_kernels::Kernels,
    s: &cuda_stack_driver::Stream,
    sh: cuda_stack_kernels::ops::AttentionShape,
    layout: Layout,
    seed: u64,
    tc: AttentionAlgo,
) -> Res<usize> {
    let sep = case_dq::<T>(k, s, sh, layout, seed, tc, AttentionBwdDq::Separate)?;
    let fus = case_dq::<T>(k, s, sh, layout, seed, tc, AttentionBwdDq::Atomic)?;
    let label = format!("{:?} {tc:?} {sh:?} {layout:?}", T::DTYPE);
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    ensure!(
        bits(&sep.dk) == bits(&fus.dk),
        "{label}: fused dk differs from the two-kernel path's"
    );
    ensure!(
        bits(&sep.dv) == bits(&fus.dv),
        "{label}: fused dv differs from the two-kernel path's"
    );
    close(
        &format!("{label}: dq fused vs two-kernel"),
        &fus.dq,
        &sep.dq,
        dq_bound(&sep.dq, 4.0),
    )
}

fn has_tc(ctx: &cuda_stack_driver::Context) -> bool {
    ctx.limits().compute_capability >= (ComputeCapability { major: 8, minor: 0 })
}

/// Whether the family `algo` runs here: the mma.sync kernels from 8.0, the wgmma ones on 9.0.
fn runs(ctx: &cuda_stack_driver::Context, algo: AttentionAlgo) -> bool {
    match algo {
        AttentionAlgo::Wgmma => {
            ctx.limits().compute_capability == (ComputeCapability { major: 9, minor: 0 })
        }
        _ => has_tc(ctx),
    }
}

/// D = 64 and 128: Nq = Nk ∈ {1, 17, 64, 65, 130, 257} dense and packed; Nq ≠ Nk both ways
/// (tile edges, rows that see no key, key tiles no query sees), Nk = 0, Nq = 0; causal and full.
fn fused_sweep<T: AttentionElement>() -> TestResult {
    sweep::<T>(AttentionAlgo::TensorCore)
}

/// [`fused_sweep`] on the wgmma kernels (compute capability 9.0; elsewhere nothing to run), with
/// shapes past the 128-key tiles (a ragged last key tile whose zero-filled rows must add nothing
/// to dq) and more tiles than SMs.
fn wgmma_fused_sweep<T: AttentionElement>() -> TestResult {
    sweep::<T>(AttentionAlgo::Wgmma)?;
    let (ctx, s, k) = setup()?;
    if !runs(&ctx, AttentionAlgo::Wgmma) {
        return Ok(());
    }
    for d in [64, 128] {
        for causal in [false, true] {
            for (nq, nk) in [(300, 900), (900, 300), (1000, 1000)] {
                let sh = shape(2, 3, nq, nk, d, causal);
                both_ways::<T>(&k, &s, sh, Layout::Dense, 7, AttentionAlgo::Wgmma)?;
            }
            let sh = shape(16, 12, 300, 300, d, causal);
            both_ways::<T>(&k, &s, sh, Layout::Dense, 9, AttentionAlgo::Wgmma)?;
        }
    }
    Ok(())
}

fn sweep<T: AttentionElement>(tc: AttentionAlgo) -> TestResult {
    let (ctx, s, k) = setup()?;
    if !runs(&ctx, tc) {
        return Ok(());
    }
    let pairs = [
        (1, 17),
        (17, 1),
        (5, 64),
        (64, 5),
        (31, 130),
        (130, 31),
        (96, 33),
        (33, 96),
        (65, 257),
        (257, 65),
        (3, 0),
        (0, 3),
    ];
    let (mut differ, mut total) = (0, 0);
    for d in [64, 128] {
        for causal in [false, true] {
            for n in [1, 17, 64, 65, 130, 257] {
                for layout in [Layout::Dense, Layout::Packed] {
                    let sh = shape(2, 3, n, n, d, causal);
                    differ += both_ways::<T>(&k, &s, sh, layout, (d + n * 5) as u64, tc)?;
                    total += 2 * 3 * n * d;
                }
            }
            for &(nq, nk) in &pairs {
                let sh = shape(2, 3, nq, nk, d, causal);
                let seed = (d + nq * 7 + nk) as u64;
                differ += both_ways::<T>(&k, &s, sh, Layout::Dense, seed, tc)?;
                total += 2 * 3 * nq * d;
            }
        }
    }
    let dt = T::DTYPE;
    println!(
        "fused_sweep {dt:?} {tc:?}: {differ} of {total} dq elements differ from the two-kernel path's"
    );
    Ok(())
}

/// Larger shapes (several CTAs per (b, h) adding into the same dq rows): the fused path three
/// times against the reference, each run's dq against the first within `ulps`, and once through
/// `AttentionBwdDq::Auto` with a workspace (the shape rule or `CUDA_STACK_ATTN_BWD_DQ`).
fn fused_repeat<T: AttentionElement>() -> TestResult {
    repeat::<T>(AttentionAlgo::TensorCore)
}

/// [`fused_repeat`] on the wgmma kernels (compute capability 9.0).
fn wgmma_fused_repeat<T: AttentionElement>() -> TestResult {
    repeat::<T>(AttentionAlgo::Wgmma)
}

fn repeat<T: AttentionElement>(tc: AttentionAlgo) -> TestResult {
    let (ctx, s, k) = setup()?;
    if !runs(&ctx, tc) {
        return Ok(());
    }
    for (sh, layout) in [
        (shape(2, 4, 1024, 1024, 64, true), Layout::Packed),
        (shape(1, 3, 700, 1300, 128, true), Layout::Dense),
        (shape(2, 2, 513, 513, 128, false), Layout::Dense),
    ] {
        let first = case_dq::<T>(&k, &s, sh, layout, 11, tc, AttentionBwdDq::Atomic)?;
        for run in 1..3 {
            let again = case_dq::<T>(&k, &s, sh, layout, 11, tc, AttentionBwdDq::Atomic)?;
            let n = close(
                &format!("{:?} {sh:?}: dq run {run} vs run 0", T::DTYPE),
                &again.dq,
                &first.dq,
                dq_bound(&first.dq, 4.0),
            )?;
            let (dt, len) = (T::DTYPE, again.dq.len());
            println!(
                "fused_repeat {dt:?} {tc:?} {sh:?}: run {run}: {n} of {len} dq elements differ from run 0"
            );
        }
        case_dq::<T>(
            &k,
            &s,
            sh,
            layout,
            11,
            AttentionAlgo::Auto,
            AttentionBwdDq::Auto,
        )?;
    }
    Ok(())
}

/// A few small shapes for the sanitizers (one or two CTAs per (b, h); N off the tiles; causal).
fn fused_small<T: AttentionElement>() -> TestResult {
    small::<T>(AttentionAlgo::TensorCore)
}

/// [`fused_small`] on the wgmma kernels (compute capability 9.0), plus a shape with two key
/// tiles per (b, h) adding into the same rows.
fn wgmma_fused_small<T: AttentionElement>() -> TestResult {
    small::<T>(AttentionAlgo::Wgmma)?;
    let (ctx, s, k) = setup()?;
    if runs(&ctx, AttentionAlgo::Wgmma) {
        for causal in [false, true] {
            let sh = shape(1, 1, 200, 250, 64, causal);
            both_ways::<T>(&k, &s, sh, Layout::Dense, 6, AttentionAlgo::Wgmma)?;
        }
    }
    Ok(())
}

fn small<T: AttentionElement>(tc: AttentionAlgo) -> TestResult {
    let (ctx, s, k) = setup()?;
    if !runs(&ctx, tc) {
        return Ok(());
    }
    for d in [64, 128] {
        for causal in [false, true] {
            both_ways::<T>(
                &k,
                &s,
                shape(1, 2, 65, 65, d, causal),
                Layout::Packed,
                3,
                tc,
            )?;
            both_ways::<T>(&k, &s, shape(1, 1, 33, 70, d, causal), Layout::Dense, 4, tc)?;
            both_ways::<T>(&k, &s, shape(1, 1, 70, 33, d, causal), Layout::Dense, 5, tc)?;
        }
    }
    Ok(())
}

/// The refusals, nothing launched: `Atomic` off the tensor cores (f32, forced SIMT, D = 80),
/// without a workspace or with a misaligned one; a workspace of the wrong length is a shape
/// error; `Auto` without a workspace runs the two-kernel path. `attention_bwd_dq_plan` agrees.
fn fused_misfits() -> TestResult {
    let (ctx, s, k) = setup()?;
    let tc = has_tc(&ctx);
    let unsupported = |r: &Result<(), Error>| matches!(r, Err(Error::Unsupported { .. }));
    let (lse, mut delta) = (s.alloc_zeros::<f32>(8)?, s.alloc_zeros::<f32>(8)?);
    let auto = AttentionAlgo::Auto;
    let atomic = AttentionBwdDq::Atomic;
    // f32: no tensor-core kernels.
    {
        let (d, sh) = (64, shape(1, 2, 4, 4, 64, false));
        let x = s.alloc_zeros::<f32>(2 * 4 * d)?;
        let mut dq = s.alloc_zeros::<f32>(2 * 4 * d)?;
        let mut dk = s.alloc_zeros::<f32>(2 * 4 * d)?;
        let mut dv = s.alloc_zeros::<f32>(2 * 4 * d)?;
        let mut acc = s.alloc_zeros::<f32>(ops::attention_bwd_dq_workspace_len(&sh)?)?;
        let xi = AttentionInput::dense(&*x, 2, 4, d);
        let plan =
            ops::attention_bwd_dq_plan(&s, auto, AttentionBwdDq::Auto, &sh, &xi, &xi, &xi, &x)?;
        ensure!(plan == AttentionBwdDq::Separate, "f32 plan: {plan:?}");
        let r = ops::attention_bwd_with_dq(
            &k,
            &s,
            auto,
            atomic,
            &sh,
            xi,
            xi,
            xi,
            &x,
            &lse,
            &x,
            &mut delta,
            Some(&mut acc),
            &mut dq,
            &mut dk,
            &mut dv,
            0.5,
        );
        ensure!(unsupported(&r), "f32 Atomic: {r:?}");
    }
    for d in [64, 128, 80] {
        let sh = shape(1, 2, 4, 4, d, false);
        let x = s.alloc_zeros::<bf16>(2 * 4 * d)?;
        let mut dq = s.alloc_zeros::<bf16>(2 * 4 * d)?;
        let mut dk = s.alloc_zeros::<bf16>(2 * 4 * d)?;
        let mut dv = s.alloc_zeros::<bf16>(2 * 4 * d)?;
        let len = ops::attention_bwd_dq_workspace_len(&sh)?;
        let mut acc = s.alloc_zeros::<f32>(len + 4)?;
        let xi = AttentionInput::dense(&*x, 2, 4, d);
        let fits = tc && d != 80;
        // One backward with `algo`, `mode` and the workspace elements `ws` (None: no workspace).
        let mut run = |algo, mode, ws: Option<std::ops::Range<usize>>| -> Res<Result<(), Error>> {
            let mut view = match ws {
                Some(r) => Some(acc.slice_mut(r)?),
                None => None,
            };
            Ok(ops::attention_bwd_with_dq(
                &k,
                &s,
                algo,
                mode,
                &sh,
                xi,
                xi,
                xi,
                &x,
                &lse,
                &x,
                &mut delta,
                view.as_deref_mut(),
                &mut dq,
                &mut dk,
                &mut dv,
                0.5,
            ))
        };
        let r = run(auto, atomic, Some(0..len))?;
        ensure!(
            r.is_ok() == fits && (fits || unsupported(&r)),
            "D = {d} Atomic (fits: {fits}): {r:?}"
        );
        let r = run(AttentionAlgo::Simt, atomic, Some(0..len))?;
        ensure!(unsupported(&r), "D = {d} Atomic on SIMT: {r:?}");
        let r = run(auto, atomic, None)?;
        ensure!(unsupported(&r), "D = {d} Atomic without a workspace: {r:?}");
        let r = run(auto, atomic, Some(1..len + 1))?;
        ensure!(
            unsupported(&r),
            "D = {d} Atomic, misaligned workspace: {r:?}"
        );
        let r = run(auto, atomic, Some(0..len - 4))?;
        ensure!(
            !fits || matches!(r, Err(Error::Shape { .. })),
            "D = {d} Atomic, workspace too short: {r:?}"
        );
        let r = run(auto, atomic, Some(0..len + 4))?;
        ensure!(
            !fits || matches!(r, Err(Error::Shape { .. })),
            "D = {d} Atomic, workspace too long: {r:?}"
        );
        let r = run(auto, AttentionBwdDq::Auto, None)?;
        ensure!(r.is_ok(), "D = {d} Auto without a workspace: {r:?}");
        let plan = ops::attention_bwd_dq_plan(&s, auto, atomic, &sh, &xi, &xi, &xi, &x);
        ensure!(
            matches!(plan, Ok(AttentionBwdDq::Atomic)) == fits,
            "D = {d} plan (fits: {fits}): {plan:?}"
        );
    }
    s.synchronize()?;
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("fused_small_f16", fused_small::<f16>),
        gpu("fused_small_bf16", fused_small::<bf16>),
        gpu("fused_sweep_f16", fused_sweep::<f16>),
        gpu("fused_sweep_bf16", fused_sweep::<bf16>),
        gpu("fused_repeat_f16", fused_repeat::<f16>),
        gpu("fused_repeat_bf16", fused_repeat::<bf16>),
        gpu("fused_misfits", fused_misfits),
        gpu("wgmma_fused_small_f16", wgmma_fused_small::<f16>),
        gpu("wgmma_fused_small_bf16", wgmma_fused_small::<bf16>),
        gpu("wgmma_fused_sweep_f16", wgmma_fused_sweep::<f16>),
        gpu("wgmma_fused_sweep_bf16", wgmma_fused_sweep::<bf16>),
        gpu("wgmma_fused_repeat_f16", wgmma_fused_repeat::<f16>),
        gpu("wgmma_fused_repeat_bf16", wgmma_fused_repeat::<bf16>),
    ]);
}
