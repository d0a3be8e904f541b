//! The order in which the Hopper attention kernels walk their tiles
//! (`cuda/attention_tile_order.cuh`): causal problems go heaviest tile first within sections of
//! heads whose streamed operands fit in 16 MiB of L2 (the heads spread evenly over the sections),
//! on a persistent grid where a head's heaviest tile streams fewer than 2048 rows and on one CTA
//! per tile from there (`ops/attention/fwd_wgmma.rs`, `grid`). These shapes are too large for the
//! f64 CPU reference, so the wgmma forward and backward (`AttentionAlgo::Wgmma`) are compared with
//! the mma.sync kernels (`AttentionAlgo::TensorCore`, whose tiles are not reordered and which
//! `attention.rs` checks against the reference) on the same inputs, every output first poisoned
//! with NaN: a tile walked twice or never leaves NaN or a wrong head behind.
//!
//! Sections (of 2 · 20 = 40 heads) and grids:
//! - D = 128, N = 2048: 14 + 14 + 12 heads in every kernel, one CTA per tile;
//! - D = 64, N = 4096: the same;
//! - Nq = 1000, Nk = 3000, D = 128: forward and dq 4 × 10 (one CTA per tile), dk/dv 20 + 20
//!   (persistent);
//! - Nq = 3000, Nk = 1000: forward and dq 20 + 20 (persistent), dk/dv 4 × 10 (one CTA per tile);
//! - full attention at D = 128, N = 2048: head by head, persistent.
//!
//! Tolerance: twice the per-type tolerance of `attention.rs` (each side is within it of the
//! exact result).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{self, AttentionAlgo, AttentionElement, AttentionShape};
use cuda_stack_kernels::{Compute, Kernels};
use cuda_tests::{gpu, TestResult};

mod attention_support;

use attention_support::*;

/// out, lse, dq, dk, dv of one path, as f64.
type Outputs = [Vec<f64>; 5];

/// Forward then backward of `sh` on `algo`'s kernels, on dense inputs made from `seed`.
fn run_path<T: AttentionElement>(
    k: &Kernels,
    s: &cuda_stack_driver::Stream,
    sh: &AttentionShape,
    algo: AttentionAlgo,
    seed: u64,
) -> Res<Outputs> {
    let (b, h, nq, nk, d) = (sh.batch, sh.heads, sh.q_len, sh.kv_len, sh.head_dim);
    let q = s.clone_htod(&data::<T>(seed, b * h * nq * d, 1.0))?;
    let kk = s.clone_htod(&data::<T>(seed + 1, b * h * nk * d, 1.0))?;
    let v = s.clone_htod(&data::<T>(seed + 2, b * h * nk * d, 1.0))?;
    let dout = s.clone_htod(&data::<T>(seed + 3, b * h * nq * d, 1.0))?;
    let scale = T::scale_scalar(1.0 / (d as f64).sqrt()).to_f64();
    let nan = T::from_f64(f64::NAN);
    let snan = T::scale_scalar(f64::NAN);
    let mut out = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut lse = s.clone_htod(&vec![snan; b * h * nq])?;
    let mut delta = s.clone_htod(&vec![snan; b * h * nq])?;
    let mut dq = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut dk = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let mut dv = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let (qi, ki) = (
        ops::AttentionInput::dense(&*q, h, nq, d),
        ops::AttentionInput::dense(&*kk, h, nk, d),
    );
    let vi = ops::AttentionInput::dense(&*v, h, nk, d);
    ops::attention_fwd_with(k, s, algo, sh, qi, ki, vi, &mut out, &mut lse, scale)?;
    ops::attention_bwd_with(
        k, s, algo, sh, qi, ki, vi, &out, &lse, &dout, &mut delta, &mut dq, &mut dk, &mut dv, scale,
    )?;
    let f = |x: Vec<T>| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let lse: Vec<f64> = s
        .clone_dtoh(&lse)?
        .iter()
        .map(|x| Compute::to_f64(*x))
        .collect();
    Ok([
        f(s.clone_dtoh(&out)?),
        lse,
        f(s.clone_dtoh(&dq)?),
        f(s.clone_dtoh(&dk)?),
        f(s.clone_dtoh(&dv)?),
    ])
}

/// The wgmma kernels against the mma.sync ones at shapes of several causal sections (and one
/// full problem, whose order is head by head).
fn sections<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if ctx.limits().compute_capability != (ComputeCapability { major: 9, minor: 0 }) {
        // The wgmma kernels run only on compute capability 9.0 (`attention.rs` checks that
        // forcing them elsewhere is Unsupported).
        return Ok(());
    }
    let t = tol::<T>();
    let cases = [
        shape(2, 20, 2048, 2048, 128, true),
        shape(2, 20, 4096, 4096, 64, true),
        shape(2, 20, 1000, 3000, 128, true),
        shape(2, 20, 3000, 1000, 128, true),
        shape(2, 20, 2048, 2048, 128, false),
    ];
    for (i, sh) in cases.iter().enumerate() {
        let seed = 40 + i as u64;
        let got = run_path::<T>(&k, &s, sh, AttentionAlgo::Wgmma, seed)?;
        let want = run_path::<T>(&k, &s, sh, AttentionAlgo::TensorCore, seed)?;
        let label = format!("{:?} {sh:?}", T::DTYPE);
        let names = ["out", "lse", "dq", "dk", "dv"];
        for (j, name) in names.iter().enumerate() {
            let what = format!("{label}: {name} (wgmma against mma.sync)");
            if j == 1 {
                compare_lse(&what, &got[1], &want[1], 2.0 * t.lse)?;
            } else {
                let tol = 2.0 * if j == 0 { t.out } else { t.grad };
                let g: Vec<T> = got[j].iter().map(|&x| T::from_f64(x)).collect();
                compare(&what, &g, &want[j], tol)?;
            }
        }
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("sections_bf16", sections::<bf16>),
        gpu("sections_f16", sections::<f16>),
    ]);
}
