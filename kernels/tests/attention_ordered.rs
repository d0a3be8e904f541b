//! The ordered one-pass attention backward (`AttentionBwdDq::Ordered`:
//! `attn_bwd_fused_ord_wgmma_*`, compute capability 9.0; each query tile's dq adds in key-tile
//! order, the counters in the workspace's tail) against the f64 CPU reference and against the
//! two-kernel path (`AttentionBwdDq::Separate`) on the same inputs, f16 and bf16, D = 64 (tiles
//! handed out key tile by key tile) and 128 (head by head), causal and full:
//! - every output against the reference with `attention.rs`'s tolerances (the workspace starts
//!   as NaN, the counters too: the path must zero them, or it would hang or add garbage);
//! - dk and dv bit for bit equal to the two-kernel path's;
//! - dq within a few units in the last place of the two-kernel path's (another summation
//!   order), and **bit for bit equal to a second run's** (the point of the ordered adds);
//! - `AttentionBwdDq::Auto` with a workspace at D = 64 and 4097 keys, and at D = 128 with 8192
//!   keys and no mask (the shape rule's ordered cases), gives the ordered run's bits;
//! - the refusals: `Ordered` on the mma.sync kernels, on SIMT, without a workspace.
//!
//! Below compute capability 9.0 only the refusals run. `ordered_small_*` are small shapes for
//! `compute-sanitizer --tool memcheck` / `racecheck` / `synccheck`.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionBwdDq, AttentionElement, AttentionInput,
};
use cuda_stack_kernels::Error;
use cuda_tests::{ensure, gpu, TestResult};

mod attention_support;

use attention_support::*;

const WG: AttentionAlgo = AttentionAlgo::Wgmma;

fn is_sm90(ctx: &cuda_stack_driver::Context) -> bool {
    ctx.limits().compute_capability == (ComputeCapability { major: 9, minor: 0 })
}

/// One shape: the two-kernel path, the ordered pass twice; dk/dv bit for bit, dq within 4 ulps
/// of the two kernels' and the same bits on the rerun. Returns the ordered dq.
fn ordered_ways<T: AttentionElement>(
    k: &cuda_stack_kernels::Kernels,
    s: &cuda_stack_driver::Stream,
    sh: ops::AttentionShape,
    layout: Layout,
    seed: u64,
) -> Res<Vec<T>> {
    let sep = case_dq::<T>(k, s, sh, layout, seed, WG, AttentionBwdDq::Separate)?;
    let ord = case_dq::<T>(k, s, sh, layout, seed, WG, AttentionBwdDq::Ordered)?;
    let again = case_dq::<T>(k, s, sh, layout, seed, WG, AttentionBwdDq::Ordered)?;
    let label = format!("{:?} {sh:?} {layout:?}", T::DTYPE);
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    ensure!(
        bits(&sep.dk) == bits(&ord.dk),
        "{label}: ordered dk differs from the two kernels'"
    );
    ensure!(
        bits(&sep.dv) == bits(&ord.dv),
        "{label}: ordered dv differs from the two kernels'"
    );
    ensure!(
        bits(&ord.dq) == bits(&again.dq),
        "{label}: ordered dq differs on the rerun"
    );
    ensure!(
        bits(&ord.dk) == bits(&again.dk),
        "{label}: ordered dk differs on the rerun"
    );
    close(
        &format!("{label}: dq ordered vs two-kernel"),
        &ord.dq,
        &sep.dq,
        dq_bound(&sep.dq, 4.0),
    )?;
    Ok(ord.dq)
}

/// Small shapes (one or two CTAs per (b, h), N off the tiles, Nq ≠ Nk, packed), both D.
fn ordered_small<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if !is_sm90(&ctx) {
        return Ok(());
    }
    for d in [64, 128] {
        for causal in [false, true] {
            ordered_ways::<T>(&k, &s, shape(1, 2, 65, 65, d, causal), Layout::Packed, 3)?;
            ordered_ways::<T>(&k, &s, shape(1, 1, 33, 70, d, causal), Layout::Dense, 4)?;
            ordered_ways::<T>(&k, &s, shape(1, 1, 200, 250, d, causal), Layout::Dense, 6)?;
        }
    }
    Ok(())
}

/// Edges and many tiles: N ∈ {1, 17, 130, 257}, Nq ≠ Nk both ways (rows that see no key, key
/// tiles no query sees, ragged last tiles), empty sides, more tiles than SMs (16 × 12 heads), and
/// several key tiles adding into each query tile (1000 keys).
fn ordered_sweep<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if !is_sm90(&ctx) {
        return Ok(());
    }
    for d in [64, 128] {
        for causal in [false, true] {
            for n in [1, 17, 130, 257] {
                let sh = shape(2, 3, n, n, d, causal);
                ordered_ways::<T>(&k, &s, sh, Layout::Dense, (d + n) as u64)?;
            }
            for (nq, nk) in [
                (17, 1),
                (1, 17),
                (31, 130),
                (130, 31),
                (300, 900),
                (900, 300),
                (3, 0),
                (0, 3),
            ] {
                let sh = shape(2, 3, nq, nk, d, causal);
                ordered_ways::<T>(&k, &s, sh, Layout::Dense, (d + nq * 7 + nk) as u64)?;
            }
            ordered_ways::<T>(
                &k,
                &s,
                shape(2, 2, 1000, 1000, d, causal),
                Layout::Packed,
                5,
            )?;
            ordered_ways::<T>(&k, &s, shape(16, 12, 300, 300, d, causal), Layout::Dense, 9)?;
        }
    }
    Ok(())
}

/// The shape rule's ordered cases (D = 64 with 4097 keys, full and causal; D = 128 with 8192
/// keys, full, over 130 query rows: 64 key tiles adding into each query tile in turn): the
/// ordered pass as above, and `Auto` with a workspace gives its bits.
fn ordered_long<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if !is_sm90(&ctx) {
        return Ok(());
    }
    for sh in [
        shape(1, 1, 4097, 4097, 64, false),
        shape(1, 1, 4097, 4097, 64, true),
        shape(
            1,
            1,
            130,
            ops::ATTENTION_BWD_ORDERED_MIN_KEYS_D128,
            128,
            false,
        ),
    ] {
        let dq = ordered_ways::<T>(&k, &s, sh, Layout::Dense, 21)?;
        let auto = case_dq::<T>(
            &k,
            &s,
            sh,
            Layout::Dense,
            21,
            AttentionAlgo::Auto,
            AttentionBwdDq::Auto,
        )?;
        let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
        let env = std::env::var_os(ops::ATTENTION_BWD_DQ_ENV).is_some();
        ensure!(
            env || bits(&auto.dq) == bits(&dq),
            "{sh:?}: Auto's dq is not the ordered pass's"
        );
    }
    Ok(())
}

/// `Ordered` where it cannot run, nothing launched: on the mma.sync kernels and SIMT (explicit
/// families), without a workspace or with one that lacks the counters (`Error::Shape`: the
/// kernel would write past it); on a non-9.0 device through `Auto`'s family too.
fn ordered_misfits() -> TestResult {
    let (ctx, s, k) = setup()?;
    let unsupported = |r: &Result<(), Error>| matches!(r, Err(Error::Unsupported { .. }));
    let (lse, mut delta) = (s.alloc_zeros::<f32>(8)?, s.alloc_zeros::<f32>(8)?);
    let (d, sh) = (64, shape(1, 2, 4, 4, 64, false));
    let x = s.alloc_zeros::<bf16>(2 * 4 * d)?;
    let mut dq = s.alloc_zeros::<bf16>(2 * 4 * d)?;
    let mut dk = s.alloc_zeros::<bf16>(2 * 4 * d)?;
    let mut dv = s.alloc_zeros::<bf16>(2 * 4 * d)?;
    let mut acc = s.alloc_zeros::<f32>(ops::attention_bwd_dq_workspace_len(&sh)?)?;
    // The accumulator alone (B·H·Nq·D), without the counters the ordered kernel keeps after it.
    let mut short = s.alloc_zeros::<f32>(2 * 4 * d)?;
    let xi = AttentionInput::dense(&*x, 2, 4, d);
    let ordered = AttentionBwdDq::Ordered;
    let mut run = |algo, ws: Option<&mut cuda_stack_driver::DeviceSlice<f32>>| {
        ops::attention_bwd_with_dq(
            &k, &s, algo, ordered, &sh, xi, xi, xi, &x, &lse, &x, &mut delta, ws, &mut dq, &mut dk,
            &mut dv, 0.5,
        )
    };
    let r = run(AttentionAlgo::Auto, Some(&mut short));
    ensure!(
        matches!(r, Err(Error::Shape { .. })) || (!is_sm90(&ctx) && unsupported(&r)),
        "Ordered with a workspace missing its counters: {r:?}"
    );
    let r = run(AttentionAlgo::TensorCore, Some(&mut acc));
    ensure!(unsupported(&r), "Ordered on the mma.sync kernels: {r:?}");
    let r = run(AttentionAlgo::Simt, Some(&mut acc));
    ensure!(unsupported(&r), "Ordered on SIMT: {r:?}");
    let r = run(AttentionAlgo::Auto, None);
    ensure!(unsupported(&r), "Ordered without a workspace: {r:?}");
    let r = run(AttentionAlgo::Auto, Some(&mut acc));
    ensure!(
        r.is_ok() == is_sm90(&ctx) && (r.is_ok() || unsupported(&r)),
        "Ordered through Auto (compute capability 9.0: {}): {r:?}",
        is_sm90(&ctx)
    );
    let plan = ops::attention_bwd_dq_plan(&s, AttentionAlgo::Auto, ordered, &sh, &xi, &xi, &xi, &x);
    ensure!(
        matches!(plan, Ok(AttentionBwdDq::Ordered)) == is_sm90(&ctx),
        "the plan: {plan:?}"
    );
    s.synchronize()?;
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("ordered_small_f16", ordered_small::<f16>),
        gpu("ordered_small_bf16", ordered_small::<bf16>),
        gpu("ordered_sweep_f16", ordered_sweep::<f16>),
        gpu("ordered_sweep_bf16", ordered_sweep::<bf16>),
        gpu("ordered_long_bf16", ordered_long::<bf16>),
        gpu("ordered_misfits", ordered_misfits),
    ]);
}
