//! The tiled SIMT kernels: the forward (`attn_fwd_tiled_d{64,128}_*`, `cuda/attention_tiled.cu`)
//! and the backward's dq and dk/dv (`attn_bwd_{dq,dkdv}_tiled_d{64,128}_*`,
//! `cuda/attention_tiled_bwd.cu`): where they fit, and their launches. They serve the SIMT family
//! ([`AttentionAlgo::Simt`](super::AttentionAlgo::Simt), and
//! [`AttentionAlgo::Auto`](super::AttentionAlgo::Auto) where no tensor-core kernel fits) for f32,
//! f16 and bf16 at head dimensions up to 128: 64 rows of one head per CTA against tiles of 64
//! staged in shared memory, 30–40× the warp-a-row kernels (`attn_fwd_<dt>`,
//! `attn_bwd_{dq,dkdv}_<dt>`; H200, `kernels/TUNING.md`), which keep f64, D > 128 and GPUs
//! without the shared memory.

use super::{AttentionElement, AttentionShape};
use crate::dispatch::{self, AttnDkDv, AttnDq, AttnFwd};
use crate::{DType, Kernels, Result};
use cuda_stack_driver::{DeviceLimits, LaunchConfig};

/// Query rows per CTA (`AT_BM`).
const ROWS: usize = 64;
/// Block size (`AT_THREADS`).
const THREADS: u32 = 256;

/// The head dimension the kernel is built for (`DP`): 64 for D ≤ 64, 128 for D ≤ 128.
fn padded_dim(head_dim: usize) -> usize {
    if head_dim <= 64 {
        64
    } else {
        128
    }
}

/// The dynamic shared memory (`AT_SMEM_BYTES(DP)` in `cuda/attention_tiled.cu`): the Q, K and V
/// tiles of 64 rows of DP + 4 floats (P reuses K's): 52,224 bytes at DP = 64, 101,376 at 128.
pub(super) fn smem(head_dim: usize) -> u32 {
    3 * ROWS as u32 * (padded_dim(head_dim) as u32 + 4) * 4
}

/// The dynamic shared memory of the backward's dq kernel (`ATB_DQ_SMEM(DP)` in
/// `cuda/attention_tiled_bwd.cu`): the Q, dO, K and V tiles (dS reuses V's): 69,632 bytes at
/// DP = 64, 135,168 at 128.
fn dq_smem(head_dim: usize) -> u32 {
    4 * ROWS as u32 * (padded_dim(head_dim) as u32 + 4) * 4
}

/// The dynamic shared memory of the backward's dk/dv kernel (`ATB_DKDV_SMEM(DP)`): the K, V, Q and
/// dO tiles and one of 64 × 68 floats (P^T, then dS^T): 87,040 bytes at DP = 64, 152,576 at 128.
fn dkdv_smem(head_dim: usize) -> u32 {
    dq_smem(head_dim) + ROWS as u32 * (ROWS as u32 + 4) * 4
}

/// The tiles `B·H·⌈rows / 64⌉` of one side (the kernels count them in 32 bits).
fn tiles_of(shape: &AttentionShape, rows: usize) -> u64 {
    (shape.batch as u64)
        .saturating_mul(shape.heads as u64)
        .saturating_mul(rows.div_ceil(ROWS) as u64)
}

/// The longest `Nq` or `Nk` the kernels take: they add up to a tile (64) and a row within it to
/// row indices in 32-bit `int`s (`N + 63` for the tile count, `n0 + 64` against a row's limit), so
/// every length stays 128 short of `i32::MAX`. Longer ones (possible: f32 at D = 1 and
/// N ≈ 2³¹ is 8 GiB an operand) run on the warp-a-row kernels, which count rows in 64 bits.
const MAX_LEN: usize = i32::MAX as usize - 128;

/// What the tiled kernels need of every problem: f32, f16 or bf16, `1 ≤ D ≤ 128`, `Nq` and `Nk`
/// at most [`MAX_LEN`], fewer than 2³¹ tiles of `rows` (each side a kernel walks), and `bytes` of
/// shared memory within the device's opt-in limit per block.
fn fits_with<T: AttentionElement>(
    shape: &AttentionShape,
    limits: &DeviceLimits,
    rows: &[usize],
    bytes: u32,
) -> bool {
    T::DTYPE != DType::F64
        && (1..=128).contains(&shape.head_dim)
        && shape.q_len.max(shape.kv_len) <= MAX_LEN
        && rows.iter().all(|&r| tiles_of(shape, r) < 1 << 31)
        && bytes <= limits.max_shared_per_block_optin
}

/// Whether the tiled forward takes `shape` for `T` on a device with `limits` (the shared memory:
/// every sm_80+ GPU; not sm_75 at D > 64).
pub(super) fn fits<T: AttentionElement>(shape: &AttentionShape, limits: &DeviceLimits) -> bool {
    fits_with::<T>(shape, limits, &[shape.q_len], smem(shape.head_dim))
}

/// Whether the tiled backward takes `shape` (its dk/dv kernel needs the most shared memory at
/// D > 64: 152,576 bytes, which sm_80 and sm_90 allow a block; at D ≤ 64 its dq kernel's 69,632 and
/// the dk/dv kernel's 87,040 fit sm_86 / sm_89 too; elsewhere the warp-a-row kernels run).
pub(super) fn bwd_fits<T: AttentionElement>(shape: &AttentionShape, limits: &DeviceLimits) -> bool {
    let rows = [shape.q_len, shape.kv_len];
    fits_with::<T>(shape, limits, &rows, dkdv_smem(shape.head_dim))
}

/// The kernel for `head_dim` (loading its module on first use).
pub(super) fn kernel<T: AttentionElement>(kern: &Kernels, head_dim: usize) -> Result<&AttnFwd<T>> {
    if padded_dim(head_dim) == 64 {
        dispatch::attn_fwd_tiled_d64::<T>(kern)
    } else {
        dispatch::attn_fwd_tiled_d128::<T>(kern)
    }
}

/// The backward's dq and dk/dv kernels for `head_dim`.
pub(super) fn bwd_kernels<T: AttentionElement>(
    kern: &Kernels,
    head_dim: usize,
) -> Result<(&AttnDq<T>, &AttnDkDv<T>)> {
    Ok(if padded_dim(head_dim) == 64 {
        (
            dispatch::attn_bwd_dq_tiled_d64::<T>(kern)?,
            dispatch::attn_bwd_dkdv_tiled_d64::<T>(kern)?,
        )
    } else {
        (
            dispatch::attn_bwd_dq_tiled_d128::<T>(kern)?,
            dispatch::attn_bwd_dkdv_tiled_d128::<T>(kern)?,
        )
    })
}

/// The forward's launch: one CTA per query tile, the kernel's dynamic shared memory limit raised
/// first.
pub(super) fn config<T: AttentionElement>(
    kernel: &AttnFwd<T>,
    shape: &AttentionShape,
) -> Result<LaunchConfig> {
    tile_config(kernel.function(), shape, shape.q_len, smem(shape.head_dim))
}

/// The backward's launches: one CTA per query tile (dq) and per key tile (dk/dv), each kernel's
/// dynamic shared memory limit raised first.
pub(super) fn bwd_configs<T: AttentionElement>(
    (dq, dkdv): (&AttnDq<T>, &AttnDkDv<T>),
    shape: &AttentionShape,
) -> Result<(LaunchConfig, LaunchConfig)> {
    let d = shape.head_dim;
    Ok((
        tile_config(dq.function(), shape, shape.q_len, dq_smem(d))?,
        tile_config(dkdv.function(), shape, shape.kv_len, dkdv_smem(d))?,
    ))
}

/// One CTA of [`THREADS`] per tile of `rows` (the kernels' grid-stride loops serve any grid) with
/// `bytes` of dynamic shared memory, `f`'s limit raised to it first.
fn tile_config(
    f: &cuda_stack_driver::Function,
    shape: &AttentionShape,
    rows: usize,
    bytes: u32,
) -> Result<LaunchConfig> {
    crate::launch::raise_smem(f, bytes)?;
    let grid = crate::launch::grid(tiles_of(shape, rows), 1, i32::MAX as u64);
    Ok(LaunchConfig::new(grid, THREADS).with_shared_mem(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_matches_the_kernel() {
        // AT_SMEM_BYTES in cuda/attention_tiled.cu.
        assert_eq!(smem(64), 52_224);
        assert_eq!(smem(1), 52_224);
        assert_eq!(smem(65), 101_376);
        assert_eq!(smem(128), 101_376);
        // ATB_DQ_SMEM / ATB_DKDV_SMEM in cuda/attention_tiled_bwd.cu.
        assert_eq!(dq_smem(64), 69_632);
        assert_eq!(dq_smem(128), 135_168);
        assert_eq!(dkdv_smem(64), 87_040);
        assert_eq!(dkdv_smem(128), 152_576);
    }

    /// A device's limits with `optin` bytes of shared memory a block (the rest an H100's).
    fn limits(major: i32, minor: i32, optin: u32) -> DeviceLimits {
        DeviceLimits {
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [i32::MAX as u32, 65535, 65535],
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: optin,
            sm_count: 132,
            compute_capability: cuda_stack_driver::ComputeCapability { major, minor },
            cooperative_launch: true,
            memory_pools: true,
        }
    }

    fn shape(d: usize) -> AttentionShape {
        AttentionShape {
            head_dim: d,
            ..super::super::causal_test_shape(2, 3, 100, 70)
        }
    }

    #[test]
    fn the_rule_follows_dtype_head_dim_and_shared_memory() {
        use cuda_stack_driver::half::{bf16, f16};
        let (h100, a100) = (limits(9, 0, 232_448), limits(8, 0, 166_912));
        let (ada, turing) = (limits(8, 9, 101_376), limits(7, 5, 65_536));
        for d in [1, 40, 64, 65, 100, 128] {
            assert!(
                fits::<f32>(&shape(d), &h100) && bwd_fits::<f32>(&shape(d), &h100),
                "{d}"
            );
            assert!(
                fits::<f16>(&shape(d), &a100) && bwd_fits::<bf16>(&shape(d), &a100),
                "{d}"
            );
            // 101,376 bytes: the forward fits at every D, the backward at D <= 64 only.
            assert!(fits::<f32>(&shape(d), &ada), "{d}");
            assert_eq!(bwd_fits::<f32>(&shape(d), &ada), d <= 64, "{d}");
            // 64 KiB: the forward at D <= 64; the backward's dk/dv needs 87,040 bytes.
            assert_eq!(fits::<f32>(&shape(d), &turing), d <= 64, "{d}");
            assert!(!bwd_fits::<f32>(&shape(d), &turing), "{d}");
            assert!(!fits::<f64>(&shape(d), &h100) && !bwd_fits::<f64>(&shape(d), &h100));
        }
        for d in [0, 129, 256] {
            assert!(
                !fits::<f32>(&shape(d), &h100) && !bwd_fits::<f32>(&shape(d), &h100),
                "{d}"
            );
        }
        // 2^31 tiles or more (on either side) is the warp-a-row kernels' work.
        let huge = AttentionShape {
            batch: 1 << 20,
            heads: 1 << 11,
            q_len: 64,
            kv_len: 1,
            head_dim: 64,
            causal: false,
        };
        assert!(!fits::<f32>(&huge, &h100) && !bwd_fits::<f32>(&huge, &h100));
        let one_less = AttentionShape {
            heads: (1 << 11) - 1,
            ..huge
        };
        assert!(fits::<f32>(&one_less, &h100) && bwd_fits::<f32>(&one_less, &h100));
        // 2^25 heads: 2^25 query tiles, but 2^31 key tiles for the backward's dk/dv kernel.
        let keys = AttentionShape {
            batch: 1 << 14,
            heads: 1 << 11,
            q_len: 64,
            kv_len: 4096,
            head_dim: 64,
            causal: false,
        };
        assert!(fits::<f32>(&keys, &h100) && !bwd_fits::<f32>(&keys, &h100));
    }

    #[test]
    fn lengths_stay_short_of_the_kernels_int_arithmetic() {
        let h100 = limits(9, 0, 232_448);
        let len = |q_len, kv_len| AttentionShape {
            batch: 1,
            heads: 1,
            q_len,
            kv_len,
            head_dim: 1,
            causal: true,
        };
        assert!(fits::<f32>(&len(MAX_LEN, MAX_LEN), &h100));
        assert!(bwd_fits::<f32>(&len(MAX_LEN, MAX_LEN), &h100));
        // i32::MAX - 127 rows would overflow `N + 63` / `n0 + 64` in the kernels.
        for (q, k) in [(MAX_LEN + 1, 1), (1, MAX_LEN + 1), (i32::MAX as usize, 5)] {
            assert!(!fits::<f32>(&len(q, k), &h100), "{q} x {k}");
            assert!(!bwd_fits::<f32>(&len(q, k), &h100), "{q} x {k}");
        }
    }

    #[test]
    fn tiles_count_query_tiles_of_every_head() {
        let sh = super::super::causal_test_shape(2, 3, 65, 65);
        assert_eq!(tiles_of(&sh, sh.q_len), 2 * 3 * 2);
    }
}
