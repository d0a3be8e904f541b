//! The Hopper forward's 192-row query tiles at head dimension 64 (`attn_fwd_wgmma_d64_m192_*`:
//! three consumer warpgroups, 512 threads, the Q tile as two 128-row boxes of which the second is
//! half used), which [`ops::attention_fwd_wgmma_rows`] picks only for some shapes: this binary sets
//! [`ops::ATTENTION_FWD_ROWS_ENV`] to `192` before any thread starts, so every D = 64 wgmma
//! forward here runs them, and checks that the choice says so.
//! - Against the f64 CPU reference (forward and the wgmma backward on its out and lse): lengths
//!   at the edges of the 192-row tile and of its two boxes (63–65, 127–129, 191–193, 255–257,
//!   383–385), Nq ≠ Nk both ways under the causal mask (rows that see no key; a consumer whose
//!   rows see none of a tile, the third consumer's rows past Nq), dense and packed views; more
//!   query tiles than SMs (the grid-stride loop).
//! - Against the mma.sync kernels (`AttentionAlgo::TensorCore`; shapes too large for the CPU
//!   reference), every output poisoned with NaN first: causal 4096 (one CTA per tile, sections
//!   of heads), Nq = 1000 against Nk = 3000 and the reverse, full 2048.
//!
//! Tolerances: `attention.rs`'s (twice them against mma.sync).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::ComputeCapability;
use cuda_stack_kernels::ops::{self, AttentionAlgo, AttentionElement, AttentionShape};
use cuda_tests::{ensure, gpu, TestResult};

mod attention_support;

use attention_support::*;

/// Whether the device runs the wgmma kernels (compute capability 9.0); `attention.rs` checks
/// that forcing them elsewhere is `Unsupported`.
fn hopper(ctx: &cuda_stack_driver::Context) -> bool {
    ctx.limits().compute_capability == (ComputeCapability { major: 9, minor: 0 })
}

fn rows_are_192(ctx: &cuda_stack_driver::Context, sh: &AttentionShape) -> TestResult {
    let rows = ops::attention_fwd_wgmma_rows(ctx.limits().sm_count, sh);
    ensure!(
        rows == 192,
        "{sh:?}: the forward would run {rows}-row tiles, not 192"
    );
    Ok(())
}

/// The reference sweep on the 192-row kernels.
fn reference<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if !hopper(&ctx) {
        return Ok(());
    }
    let wg = AttentionAlgo::Wgmma;
    let pairs = [
        (1, 1),
        (17, 17),
        (64, 64),
        (65, 65),
        (127, 127),
        (129, 129),
        (191, 191),
        (192, 192),
        (193, 193),
        (257, 257),
        (383, 385),
        (385, 383),
        (5, 64),
        (64, 5),
        (200, 129),
        (129, 500),
    ];
    for &(nq, nk) in &pairs {
        for causal in [false, true] {
            let sh = shape(2, 3, nq, nk, 64, causal);
            rows_are_192(&ctx, &sh)?;
            // (The padded layout's unaligned views are not for the tensor-core kernels.)
            let layouts: &[Layout] = if nq == nk {
                &[Layout::Dense, Layout::Packed]
            } else {
                &[Layout::Dense]
            };
            for &layout in layouts {
                case_with::<T>(&k, &s, sh, layout, (nq * 7 + nk) as u64, wg)?;
            }
        }
    }
    for causal in [false, true] {
        // 16 · 12 · 2 = 384 query tiles of 192 rows: about three per CTA.
        for (i, sh) in [
            shape(16, 12, 300, 300, 64, causal),
            shape(2, 2, 1024, 1024, 64, causal),
            shape(3, 5, 700, 300, 64, causal),
            shape(3, 5, 300, 900, 64, causal),
        ]
        .into_iter()
        .enumerate()
        {
            rows_are_192(&ctx, &sh)?;
            let layout = if i == 1 {
                Layout::Packed
            } else {
                Layout::Dense
            };
            case_with::<T>(&k, &s, sh, layout, 3 + i as u64, wg)?;
        }
    }
    Ok(())
}

/// The 192-row kernels against the mma.sync ones at larger shapes.
fn against_mma<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    if !hopper(&ctx) {
        return Ok(());
    }
    let cases = [
        shape(2, 20, 4096, 4096, 64, true),
        shape(2, 20, 1000, 3000, 64, true),
        shape(2, 20, 3000, 1000, 64, true),
        shape(2, 20, 2048, 2048, 64, false),
    ];
    for (i, sh) in cases.iter().enumerate() {
        rows_are_192(&ctx, sh)?;
        let seed = 60 + i as u64;
        let got = run_path::<T>(&k, &s, sh, AttentionAlgo::Wgmma, seed)?;
        let want = run_path::<T>(&k, &s, sh, AttentionAlgo::TensorCore, seed)?;
        let label = format!("{:?} {sh:?} (192-row wgmma against mma.sync)", T::DTYPE);
        compare_paths::<T>(&label, &got, &want)?;
    }
    Ok(())
}

fn main() {
    // Before any thread exists: the tests below read it at every forward.
    std::env::set_var(ops::ATTENTION_FWD_ROWS_ENV, "192");
    cuda_tests::run(vec![
        gpu("rows192_reference_bf16", reference::<bf16>),
        gpu("rows192_reference_f16", reference::<f16>),
        gpu("rows192_against_mma_bf16", against_mma::<bf16>),
        gpu("rows192_against_mma_f16", against_mma::<f16>),
    ]);
}
