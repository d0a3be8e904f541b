//! Fused attention (`ops::attention_fwd`, `ops::attention_bwd`) against the f64 CPU reference
//! (`reference::attention_fwd` / `attention_bwd`) on the same rounded inputs: every head
//! dimension D ∈ {1, 16, 32, 40, 64, 80, 96, 128, 160, 256} × N ∈ {1, 17, 64, 65, 257}, causal
//! and full, Nq ≠ Nk (both ways, and Nk = 0), strided views (padded rows, an offset start, NaN in
//! the padding the kernels must not read), q/k/v as views of one packed `[B, N, 3, H, D]`
//! projection, a large case, and poisoned (NaN) outputs that must all be overwritten. The f16/bf16
//! forward and backward run on both kernel families (`AttentionAlgo::Simt` and, on sm_80+,
//! `AttentionAlgo::TensorCore` at D = 64 and 128; `Auto` picks the latter where it fits); the
//! tensor-core backward at D = 128 (its own tiling) has a sweep of its own (`tc_bwd_d128_*`), and
//! the Hopper kernels (`AttentionAlgo::Wgmma`, compute capability 9.0) sweeps of their own
//! (`wgmma_forward_*`, `wgmma_backward_*`).
//! The shared machinery is in `attention_support/`.
//!
//! Tolerances, `max |got − ref| <= tol · max |ref| + atol` per output (relative to the largest
//! magnitude; atol 1e-12 for f64, 1e-5 otherwise, for outputs whose exact value is 0, such as dq
//! and dk with a single key, where the kernels leave rounding-level values):
//!   out: f64 1e-12, f32 1e-5, f16 2e-3, bf16 1e-2 (one rounding to the storage type, f32 math);
//!   dq, dk, dv: f64 1e-10, f32 1e-4, f16 1e-2, bf16 6e-2 (the kernels' delta uses the rounded
//!   out; the reference's the exact one);
//!   lse: `|got − ref| <= tol · (1 + |ref|)` with tol 1e-12 (f64) or 1e-5 (others); −inf exactly.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{self, AttentionAlgo, AttentionElement, AttentionInput, HeadStrides};
use cuda_stack_kernels::Error;
use cuda_tests::{ensure, gpu, TestResult};

mod attention_support;

use attention_support::*;

const DS: &[usize] = &[1, 16, 32, 40, 64, 80, 96, 128, 160, 256];
const NS: &[usize] = &[1, 17, 64, 65, 257];

/// Every D × N (Nq == Nk), causal and full, B = 1, H = 2.
fn sweep<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &d in DS {
        for &n in NS {
            for causal in [false, true] {
                case::<T>(
                    &k,
                    &s,
                    shape(1, 2, n, n, d, causal),
                    Layout::Dense,
                    (d * 1000 + n) as u64,
                )?;
            }
        }
    }
    Ok(())
}

/// Nq ≠ Nk both ways (the bottom-right causal alignment; rows without keys), Nk = 0, Nq = 0.
fn cross_lengths<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let pairs = [
        (1, 17),
        (17, 1),
        (5, 64),
        (64, 5),
        (65, 257),
        (257, 65),
        (3, 0),
        (0, 3),
    ];
    for &(nq, nk) in &pairs {
        for &d in &[16, 40, 128] {
            for causal in [false, true] {
                case::<T>(
                    &k,
                    &s,
                    shape(2, 3, nq, nk, d, causal),
                    Layout::Dense,
                    (nq * 7 + nk) as u64,
                )?;
            }
        }
    }
    Ok(())
}

/// Padded and packed-QKV views.
fn strided<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(n, d) in &[(1, 16), (17, 64), (65, 40), (64, 128), (33, 256)] {
        for causal in [false, true] {
            case::<T>(
                &k,
                &s,
                shape(2, 3, n, n, d, causal),
                Layout::Packed,
                n as u64,
            )?;
            case::<T>(
                &k,
                &s,
                shape(2, 3, n, n + 3, d, causal),
                Layout::Padded,
                d as u64,
            )?;
        }
    }
    Ok(())
}

/// One large case (N = 1024, D = 128) and a long-key decode step (Nq = 1, Nk = 4097).
fn large<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    case::<T>(
        &k,
        &s,
        shape(1, 2, 1024, 1024, 128, true),
        Layout::Packed,
        11,
    )?;
    case::<T>(
        &k,
        &s,
        shape(1, 2, 1024, 1024, 64, false),
        Layout::Dense,
        12,
    )?;
    case::<T>(&k, &s, shape(2, 2, 1, 4097, 64, true), Layout::Dense, 13)
}

/// Bad shapes, strides and lengths are typed errors before anything is launched.
fn bounds_checks() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let q = s.alloc_zeros::<f32>(2 * 3 * 4 * 8)?;
    let mut out = s.alloc_zeros::<f32>(2 * 3 * 4 * 8)?;
    let mut lse = s.alloc_zeros::<f32>(2 * 3 * 4)?;
    let good = shape(2, 3, 4, 4, 8, false);
    let dense = |x| AttentionInput::dense(x, 3, 4, 8);
    ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&q),
        &mut out,
        &mut lse,
        0.5,
    )?;
    for d in [0, 257] {
        let r = ops::attention_fwd(
            &k,
            &s,
            &shape(2, 3, 4, 4, d, false),
            dense(&q),
            dense(&q),
            dense(&q),
            &mut out,
            &mut lse,
            0.5,
        );
        ensure!(matches!(r, Err(Error::Invalid { .. })), "D = {d}: {r:?}");
    }
    // A row stride one too large reads past the end of k.
    let wide = AttentionInput {
        data: &*q,
        strides: HeadStrides {
            batch: 96,
            head: 32,
            row: 9,
        },
    };
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        wide,
        dense(&q),
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "k", .. })),
        "k stride: {r:?}"
    );
    let short = q.slice(1..)?;
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&short),
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "v", .. })),
        "short v: {r:?}"
    );
    let mut small = s.alloc_zeros::<f32>(5)?;
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&q),
        &mut out,
        &mut small,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "lse", .. })),
        "lse length: {r:?}"
    );
    // Empty problems launch nothing and succeed.
    let mut none = s.alloc_zeros::<f32>(0)?;
    let mut none2 = s.alloc_zeros::<f32>(0)?;
    ops::attention_fwd(
        &k,
        &s,
        &shape(0, 3, 4, 4, 8, true),
        dense(&q),
        dense(&q),
        dense(&q),
        &mut none,
        &mut none2,
        0.5,
    )?;
    s.synchronize()?;
    Ok(())
}

/// The two kernel families side by side for f16/bf16 at D = 64 and 128 (dense and packed views,
/// which the tensor cores take): the forced SIMT kernels and the forced tensor-core kernels (on
/// compute capability 8.0+), forward and backward, both against the reference. Below 8.0,
/// forcing the tensor cores is `Unsupported`.
fn both_families<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    let tc = ctx.limits().compute_capability
        >= (cuda_stack_driver::ComputeCapability { major: 8, minor: 0 });
    let pairs = [
        (1, 1),
        (17, 17),
        (64, 64),
        (65, 65),
        (257, 257),
        (5, 64),
        (64, 5),
        (3, 0),
        (200, 129),
    ];
    for &d in &[64, 128] {
        for &(nq, nk) in &pairs {
            for causal in [false, true] {
                let sh = shape(2, 3, nq, nk, d, causal);
                let layouts: &[Layout] = if nq == nk {
                    &[Layout::Dense, Layout::Packed]
                } else {
                    &[Layout::Dense]
                };
                for &layout in layouts {
                    let seed = (d + nq * 3 + nk) as u64;
                    case_with::<T>(&k, &s, sh, layout, seed, AttentionAlgo::Simt)?;
                    if tc {
                        case_with::<T>(&k, &s, sh, layout, seed, AttentionAlgo::TensorCore)?;
                    }
                }
            }
        }
    }
    if tc {
        case_with::<T>(
            &k,
            &s,
            shape(1, 2, 1024, 1024, 128, true),
            Layout::Packed,
            5,
            AttentionAlgo::TensorCore,
        )?;
    }
    Ok(())
}

/// The tensor-core backward at D = 128 (`attn_bwd_{dq,dkdv}_mma_d128_*`: 32-row tiles, K/V of
/// dk/dv in dynamic shared memory), forced with `AttentionAlgo::TensorCore` (the forward too)
/// against the reference: Nq = Nk ∈ {1, 17, 64, 65, 130, 257}, dense and as views of a packed
/// `[B, N, 3, H, D]` projection; Nq ≠ Nk both ways (the edges of the 32-row tiles and 64-row
/// CTAs, rows that see no key under the causal mask, a key tile no query sees), Nk = 0 and
/// Nq = 0; causal and full; a larger cross-length case. Below compute capability 8.0 there is
/// nothing to run (`tensor_core_misfits` checks the refusal).
fn tc_bwd_d128<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if ctx.limits().compute_capability < (ComputeCapability { major: 8, minor: 0 }) {
        return Ok(());
    }
    let tc = AttentionAlgo::TensorCore;
    for &n in &[1, 17, 64, 65, 130, 257] {
        for causal in [false, true] {
            for layout in [Layout::Dense, Layout::Packed] {
                let sh = shape(2, 3, n, n, 128, causal);
                case_with::<T>(&k, &s, sh, layout, (n * 5 + 1) as u64, tc)?;
            }
        }
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
    for &(nq, nk) in &pairs {
        for causal in [false, true] {
            let sh = shape(2, 3, nq, nk, 128, causal);
            case_with::<T>(&k, &s, sh, Layout::Dense, (nq * 7 + nk) as u64, tc)?;
        }
    }
    case_with::<T>(
        &k,
        &s,
        shape(1, 2, 300, 700, 128, true),
        Layout::Dense,
        9,
        tc,
    )
}

/// The Hopper forward (`AttentionAlgo::Wgmma`: TMA, warpgroup MMA, persistent CTAs), forward
/// and (wgmma) backward against the reference, on compute capability 9.0: the pairs of
/// `both_families` dense and packed; more query tiles than SMs (the grid-stride loop, the Q
/// barrier across tiles), key tiles past the 3- and 4-stage rings, Nq ≠ Nk both ways under the
/// causal mask (rows that see no key, a warpgroup that sees no key of a tile). Elsewhere forcing
/// it is `Unsupported`, nothing launched.
fn wgmma_forward<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    let wg = AttentionAlgo::Wgmma;
    if ctx.limits().compute_capability != (ComputeCapability { major: 9, minor: 0 }) {
        let q = s.alloc_zeros::<T>(2 * 4 * 64)?;
        let mut out = s.alloc_zeros::<T>(2 * 4 * 64)?;
        let mut lse = s.alloc_zeros::<T::Scalar>(2 * 4)?;
        let x = AttentionInput::dense(&*q, 2, 4, 64);
        let sh = shape(1, 2, 4, 4, 64, false);
        let r = ops::attention_fwd_with(&k, &s, wg, &sh, x, x, x, &mut out, &mut lse, 0.5);
        ensure!(
            matches!(r, Err(Error::Unsupported { .. })),
            "wgmma forced below or above 9.0: {r:?}"
        );
        return Ok(());
    }
    let pairs = [
        (1, 1),
        (17, 17),
        (64, 64),
        (65, 65),
        (257, 257),
        (5, 64),
        (64, 5),
        (3, 0),
        (200, 129),
    ];
    for &d in &[64, 128] {
        for &(nq, nk) in &pairs {
            for causal in [false, true] {
                let sh = shape(2, 3, nq, nk, d, causal);
                let layouts: &[Layout] = if nq == nk {
                    &[Layout::Dense, Layout::Packed]
                } else {
                    &[Layout::Dense]
                };
                for &layout in layouts {
                    case_with::<T>(&k, &s, sh, layout, (d + nq * 7 + nk) as u64, wg)?;
                }
            }
        }
        for causal in [false, true] {
            // 16 · 12 · 2 = 384 query tiles: about three per CTA.
            case_with::<T>(
                &k,
                &s,
                shape(16, 12, 129, 129, d, causal),
                Layout::Dense,
                3,
                wg,
            )?;
            case_with::<T>(
                &k,
                &s,
                shape(2, 2, 1024, 1024, d, causal),
                Layout::Packed,
                4,
                wg,
            )?;
            case_with::<T>(
                &k,
                &s,
                shape(3, 5, 700, 300, d, causal),
                Layout::Dense,
                5,
                wg,
            )?;
            case_with::<T>(
                &k,
                &s,
                shape(3, 5, 300, 900, d, causal),
                Layout::Dense,
                6,
                wg,
            )?;
        }
    }
    Ok(())
}

/// The Hopper backward (`attn_bwd_{dq,dkdv}_wgmma_*`, forced with `AttentionAlgo::Wgmma`, the
/// forward too) against the reference on compute capability 9.0: D = 64 and 128, causal and
/// full, odd lengths (the edges of the 64-row boxes and 128-row CTAs), Nq ≠ Nk both ways (rows
/// that see no key, key tiles no query sees), packed QKV views, more tiles than SMs (the
/// barrier phases across a CTA's tiles), Nk = 0 and Nq = 0 (served by the mma.sync kernels);
/// a rerun gives the same bits (no atomics); the atomic dq path without a workspace is
/// `Unsupported` (`attention_fused.rs` tests the one-pass kernel).
/// Elsewhere forcing it is `Unsupported`, nothing launched.
fn wgmma_backward<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    let wg = AttentionAlgo::Wgmma;
    let d = 64;
    let x = s.alloc_zeros::<T>(2 * 4 * d)?;
    let mut g = [
        s.alloc_zeros::<T>(2 * 4 * d)?,
        s.alloc_zeros::<T>(2 * 4 * d)?,
        s.alloc_zeros::<T>(2 * 4 * d)?,
    ];
    let lse = s.alloc_zeros::<T::Scalar>(2 * 4)?;
    let mut delta = s.alloc_zeros::<T::Scalar>(2 * 4)?;
    let xi = AttentionInput::dense(&*x, 2, 4, d);
    let sh = shape(1, 2, 4, 4, d, false);
    let [dq, dk, dv] = &mut g;
    if ctx.limits().compute_capability != (ComputeCapability { major: 9, minor: 0 }) {
        let r = ops::attention_bwd_with(
            &k, &s, wg, &sh, xi, xi, xi, &x, &lse, &x, &mut delta, dq, dk, dv, 0.5,
        );
        ensure!(
            matches!(r, Err(Error::Unsupported { .. })),
            "wgmma backward forced below or above 9.0: {r:?}"
        );
        return Ok(());
    }
    let r = ops::attention_bwd_with_dq(
        &k,
        &s,
        wg,
        ops::AttentionBwdDq::Atomic,
        &sh,
        xi,
        xi,
        xi,
        &x,
        &lse,
        &x,
        &mut delta,
        None,
        dq,
        dk,
        dv,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "wgmma backward with the atomic dq path: {r:?}"
    );
    let pairs = [
        (1, 1),
        (17, 17),
        (64, 64),
        (127, 127),
        (128, 128),
        (129, 129),
        (300, 300),
        (5, 64),
        (64, 5),
        (1, 129),
        (129, 1),
        (200, 129),
        (300, 900),
        (900, 300),
        (3, 0),
        (0, 3),
    ];
    for &d in &[64, 128] {
        for &(nq, nk) in &pairs {
            for causal in [false, true] {
                let sh = shape(2, 3, nq, nk, d, causal);
                let layouts: &[Layout] = if nq == nk {
                    &[Layout::Dense, Layout::Packed]
                } else {
                    &[Layout::Dense]
                };
                for &layout in layouts {
                    case_with::<T>(&k, &s, sh, layout, (d + nq * 5 + nk) as u64, wg)?;
                }
            }
        }
        for causal in [false, true] {
            // 16 · 12 · 3 = 576 tiles of each kernel: several per CTA.
            let sh = shape(16, 12, 300, 300, d, causal);
            case_with::<T>(&k, &s, sh, Layout::Dense, 7, wg)?;
            // The same bits on a rerun (issue 33: bit-identical loss curves).
            let sh = shape(2, 2, 700, 700, d, causal);
            let bits = |x: &[T]| x.iter().map(|e| e.to_f64().to_bits()).collect::<Vec<u64>>();
            let sep = ops::AttentionBwdDq::Separate;
            let a = case_dq::<T>(&k, &s, sh, Layout::Packed, 8, wg, sep)?;
            let b = case_dq::<T>(&k, &s, sh, Layout::Packed, 8, wg, sep)?;
            ensure!(
                bits(&a.dq) == bits(&b.dq)
                    && bits(&a.dk) == bits(&b.dk)
                    && bits(&a.dv) == bits(&b.dv),
                "the wgmma backward gave other bits on a rerun ({sh:?})"
            );
        }
    }
    Ok(())
}

/// Forcing the tensor cores where they cannot run is `Unsupported`, nothing launched: f32,
/// D = 80, a view starting off 16 bytes (the padded layout), compute capability below 8.0.
fn tensor_core_misfits() -> TestResult {
    let (ctx, s, k) = setup()?;
    let tc = ctx.limits().compute_capability
        >= (cuda_stack_driver::ComputeCapability { major: 8, minor: 0 });
    let mut lse = s.alloc_zeros::<f32>(2 * 4)?;
    let run_f32 =
        |d: usize, lse: &mut cuda_stack_driver::DeviceBuffer<f32>| -> Res<Result<(), Error>> {
            let q = s.alloc_zeros::<f32>(2 * 4 * d)?;
            let mut out = s.alloc_zeros::<f32>(2 * 4 * d)?;
            let x = AttentionInput::dense(&*q, 2, 4, d);
            Ok(ops::attention_fwd_with(
                &k,
                &s,
                AttentionAlgo::TensorCore,
                &shape(1, 2, 4, 4, d, false),
                x,
                x,
                x,
                &mut out,
                lse,
                0.5,
            ))
        };
    let r = run_f32(64, &mut lse)?;
    ensure!(matches!(r, Err(Error::Unsupported { .. })), "f32: {r:?}");
    let q = s.alloc_zeros::<bf16>(2 * 4 * 80 + 8)?;
    let mut out = s.alloc_zeros::<bf16>(2 * 4 * 80)?;
    let x = AttentionInput::dense(&*q, 2, 4, 80);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 80, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(matches!(r, Err(Error::Unsupported { .. })), "D = 80: {r:?}");
    let q = s.alloc_zeros::<bf16>(2 * 4 * 64 + 8)?;
    let mut out = s.alloc_zeros::<bf16>(2 * 4 * 64)?;
    let off = q.slice(2..)?;
    let x = AttentionInput::dense(&*off, 2, 4, 64);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 64, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "misaligned view: {r:?}"
    );
    let x = AttentionInput::dense(&*q, 2, 4, 64);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 64, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        r.is_ok() == tc,
        "aligned bf16 D = 64 on the tensor cores (cc >= 8.0: {tc}): {r:?}"
    );
    // The backward: D = 128 runs on the tensor cores (sm_80+), D = 80 is `Unsupported`.
    for (d, fits) in [(128, tc), (80, false)] {
        let x = s.alloc_zeros::<bf16>(2 * 4 * d)?;
        let mut g = [
            s.alloc_zeros::<bf16>(2 * 4 * d)?,
            s.alloc_zeros::<bf16>(2 * 4 * d)?,
            s.alloc_zeros::<bf16>(2 * 4 * d)?,
        ];
        let mut delta = s.alloc_zeros::<f32>(2 * 4)?;
        let xi = AttentionInput::dense(&*x, 2, 4, d);
        let sh = shape(1, 2, 4, 4, d, false);
        let [dq, dk, dv] = &mut g;
        let cc = ctx.limits().compute_capability;
        ensure!(
            ops::attention_bwd_tc_fits(cc, &sh, &xi, &xi, &xi, &x, dq, dk, dv) == fits,
            "attention_bwd_tc_fits at D = {d} (cc >= 8.0: {tc})"
        );
        let r = ops::attention_bwd_with(
            &k,
            &s,
            AttentionAlgo::TensorCore,
            &sh,
            xi,
            xi,
            xi,
            &x,
            &lse,
            &x,
            &mut delta,
            dq,
            dk,
            dv,
            0.5,
        );
        ensure!(
            r.is_ok() == fits && (fits || matches!(r, Err(Error::Unsupported { .. }))),
            "backward D = {d} forced onto the tensor cores (cc >= 8.0: {tc}): {r:?}"
        );
    }
    s.synchronize()?;
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("sweep_f32", sweep::<f32>),
        gpu("sweep_f64", sweep::<f64>),
        gpu("sweep_f16", sweep::<f16>),
        gpu("sweep_bf16", sweep::<bf16>),
        gpu("cross_lengths_f32", cross_lengths::<f32>),
        gpu("cross_lengths_f64", cross_lengths::<f64>),
        gpu("cross_lengths_f16", cross_lengths::<f16>),
        gpu("cross_lengths_bf16", cross_lengths::<bf16>),
        gpu("strided_f32", strided::<f32>),
        gpu("strided_f64", strided::<f64>),
        gpu("strided_f16", strided::<f16>),
        gpu("strided_bf16", strided::<bf16>),
        gpu("large_f32", large::<f32>),
        gpu("large_bf16", large::<bf16>),
        gpu("large_f16", large::<f16>),
        gpu("both_families_f16", both_families::<f16>),
        gpu("both_families_bf16", both_families::<bf16>),
        gpu("tc_bwd_d128_f16", tc_bwd_d128::<f16>),
        gpu("tc_bwd_d128_bf16", tc_bwd_d128::<bf16>),
        gpu("wgmma_forward_f16", wgmma_forward::<f16>),
        gpu("wgmma_forward_bf16", wgmma_forward::<bf16>),
        gpu("wgmma_backward_f16", wgmma_backward::<f16>),
        gpu("wgmma_backward_bf16", wgmma_backward::<bf16>),
        gpu("tensor_core_misfits", tensor_core_misfits),
        gpu("bounds_checks", bounds_checks),
    ]);
}
