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
use cuda_stack_kernels::ops::{AttentionAlgo, AttentionElement};
use cuda_tests::{gpu, TestResult};

mod attention_support;

use attention_support::*;

/// The wgmma kernels against the mma.sync ones at shapes of several causal sections (and one
/// full problem, whose order is head by head).
fn sections<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if ctx.limits().compute_capability != (ComputeCapability { major: 9, minor: 0 }) {
        // The wgmma kernels run only on compute capability 9.0 (`attention.rs` checks that
        // forcing them elsewhere is Unsupported).
        return Ok(());
    }
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
        let label = format!("{:?} {sh:?} (wgmma against mma.sync)", T::DTYPE);
        compare_paths::<T>(&label, &got, &want)?;
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("sections_bf16", sections::<bf16>),
        gpu("sections_f16", sections::<f16>),
    ]);
}
