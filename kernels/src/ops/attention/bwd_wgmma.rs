//! The Hopper backward (`attn_bwd_{dq,dkdv}_wgmma_d{64,128}_*`, `cuda/attention_wgmma_bwd.cu`,
//! and the one-pass `attn_bwd_fused_wgmma_d{64,128}_*`, `cuda/attention_wgmma_bwd_fused.cu`):
//! where it fits, its tensor maps, its launches; and [`ATTENTION_BWD_ENV`], which overrides the
//! backward's automatic choice for measurements.

use super::family_override::{family_override, FamilyOverride};
use super::fwd_wgmma::head_map;
use super::{AttentionElement, AttentionGrads, AttentionInput, AttentionShape};
use crate::{dispatch, Kernels, Result};
use cuda_stack_driver::{ComputeCapability, DeviceSlice, LaunchConfig, Stream};

/// The environment variable [`AttentionAlgo::Auto`](super::AttentionAlgo::Auto) reads first for
/// the backward pass's dq and dk/dv: `wgmma`, `mma` (the mma.sync kernels), or `simt`
/// (case-insensitive; other values, and kernels that do not fit the problem, are ignored). Read
/// at every call, so a benchmark can compare the families in one run. Without it, `Auto` runs
/// the wgmma backward where it fits (compute capability 9.0), else the mma.sync one.
pub const ATTENTION_BWD_ENV: &str = "CUDA_STACK_ATTN_BWD";

/// The override [`ATTENTION_BWD_ENV`] asks for, if any.
pub(super) fn bwd_override() -> Option<FamilyOverride> {
    family_override(ATTENTION_BWD_ENV)
}

/// Rows (query rows of the dq kernel, keys of the dk/dv kernel) per CTA (`ABW_DQ_BM`,
/// `ABW_KV_BN`).
const ROWS: usize = 128;
/// Block size (`ABW_THREADS`): a producer and two consumer warpgroups.
const THREADS: u32 = 384;
/// Rows of one TMA box (`ABW_BOX`).
const BOX_ROWS: u32 = 64;

/// Bytes of an `rows`-row tile of `head_dim` 16-bit columns (`ABW_TILE`).
fn tile(rows: u32, head_dim: usize) -> u32 {
    (head_dim as u32 / 64) * rows * 128
}

/// The dynamic shared memory of `attn_bwd_dq_wgmma_d{64,128}_*` (`ABW_DQ_SMEM_BYTES` in
/// `cuda/attention_wgmma_bwd.cu`): the Q and dO tiles of 128 rows and 6 (D = 64) or 4 (D = 128)
/// stages of K and V tiles of 64 keys, plus 1 KiB of alignment and the barriers: 129 KiB at
/// D = 64, 193 KiB at D = 128.
pub(super) fn dq_smem(head_dim: usize) -> u32 {
    let stages = if head_dim == 128 { 4 } else { 6 };
    2 * tile(128, head_dim) + stages * 2 * tile(64, head_dim) + 1024 + 256
}

/// The dynamic shared memory of `attn_bwd_dkdv_wgmma_d{64,128}_*` (`ABW_KV_SMEM_BYTES`): the K
/// and V tiles of 128 keys and 6 (D = 64) or 4 (D = 128) stages of Q and dO tiles of 64 rows with
/// their lse and delta, plus 1 KiB of alignment and the barriers: 132 KiB at D = 64, 195 KiB at
/// D = 128.
pub(super) fn dkdv_smem(head_dim: usize) -> u32 {
    let stages = if head_dim == 128 { 4 } else { 6 };
    2 * tile(128, head_dim) + stages * (2 * tile(64, head_dim) + 8 * 64) + 1024 + 256
}

/// The dynamic shared memory of `attn_bwd_fused_wgmma_d{64,128}_*` (`ABF_SMEM_BYTES` in
/// `cuda/attention_wgmma_bwd_fused.cu`): the K and V tiles of 128 keys, 3 stages of Q and dO
/// tiles of 64 (D = 128) or 128 (D = 64) query rows with their lse and delta, the dS tile (128
/// keys of those rows, 16-bit), the f32 dQ staging tile (the rows' `4·D` bytes each), plus 1 KiB
/// of alignment and the barriers (the ordered kernels' step records too): 196.31 KiB at D = 64,
/// 210.81 KiB at D = 128.
pub(super) fn fused_smem(head_dim: usize) -> u32 {
    let bm = if head_dim == 128 { 64 } else { 128 };
    let row = head_dim as u32 * 4;
    2 * tile(128, head_dim)
        + 3 * (2 * tile(bm, head_dim) + 8 * bm)
        + 128 * bm * 2
        + bm * row
        + 1024
        + 320
}

/// Why the wgmma backward cannot run this problem (which the mma.sync backward can: `tc_misfit`
/// is its verdict), or `None` when it can: compute capability 9.0 exactly (the kernels are
/// `sm_90a` PTX) and the shared memory. (The caller runs problems without a query or a key on
/// the mma.sync kernels, which give the same zeros: the tensor maps need extents of at least one.)
pub(super) fn misfit(
    cc: ComputeCapability,
    optin_smem: u32,
    shape: &AttentionShape,
    tc_misfit: Option<&'static str>,
) -> Option<&'static str> {
    if let Some(why) = tc_misfit {
        return Some(why);
    }
    if cc != (ComputeCapability { major: 9, minor: 0 }) {
        return Some("the wgmma attention kernels need compute capability 9.0 (sm_90a)");
    }
    if dq_smem(shape.head_dim).max(dkdv_smem(shape.head_dim)) > optin_smem {
        return Some("the wgmma attention kernels need more shared memory than this device allows");
    }
    super::fwd_wgmma::tiles_misfit(shape)
}

/// The dq and dk/dv kernels of the head dimension (64 or 128).
pub(super) type Pair<'a, T> = (&'a dispatch::AttnDqWgmma<T>, &'a dispatch::AttnDkDvWgmma<T>);

/// Looks up (loading their module on first use) the kernels [`launch`] runs.
pub(super) fn kernels<T: AttentionElement>(kern: &Kernels, head_dim: usize) -> Result<Pair<'_, T>> {
    Ok(if head_dim == 128 {
        (
            dispatch::attn_bwd_dq_wgmma_d128::<T>(kern)?,
            dispatch::attn_bwd_dkdv_wgmma_d128::<T>(kern)?,
        )
    } else {
        (
            dispatch::attn_bwd_dq_wgmma_d64::<T>(kern)?,
            dispatch::attn_bwd_dkdv_wgmma_d64::<T>(kern)?,
        )
    })
}

/// Looks up (loading its module on first use) the kernel [`launch_fused`] runs.
pub(super) fn fused_kernel<T: AttentionElement>(
    kern: &Kernels,
    head_dim: usize,
) -> Result<&dispatch::AttnFusedWgmma<T>> {
    if head_dim == 128 {
        dispatch::attn_bwd_fused_wgmma_d128::<T>(kern)
    } else {
        dispatch::attn_bwd_fused_wgmma_d64::<T>(kern)
    }
}

/// The four tensor maps both launches read through: q, k, v and dout as `[B, H, rows, D]` views
/// in boxes of [`BOX_ROWS`] rows.
fn maps<T: AttentionElement>(
    shape: &AttentionShape,
    [q, k, v]: [&AttentionInput<'_, T>; 3],
    dout: &AttentionInput<'_, T>,
) -> Result<[cuda_stack_driver::TensorMap; 4]> {
    Ok([
        head_map(q, shape, shape.q_len, BOX_ROWS)?,
        head_map(k, shape, shape.kv_len, BOX_ROWS)?,
        head_map(v, shape, shape.kv_len, BOX_ROWS)?,
        head_map(dout, shape, shape.q_len, BOX_ROWS)?,
    ])
}

/// Launches the wgmma backward's dq and dk/dv kernels (`kernels`, from [`kernels`]) after delta.
/// The caller checked the shape, the inputs and dout against their slices, lse and delta (dense,
/// exact lengths), dq, dk and dv (views inside their buffers, free of overlaps), [`misfit`]
/// (`None`: every view 16-byte aligned with strides that are multiples of 8 elements), that
/// `B·H·Nq > 0` and `Nk > 0`, and wrote delta.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch<T: AttentionElement>(
    (k_dq, k_dkdv): Pair<'_, T>,
    s: &Stream,
    shape: &AttentionShape,
    [q, k, v]: [&AttentionInput<'_, T>; 3],
    dout: &AttentionInput<'_, T>,
    (lse, delta): (&DeviceSlice<T::Scalar>, &DeviceSlice<T::Scalar>),
    grads: &mut AttentionGrads<'_, T>,
    scale: T::Scalar,
) -> Result<()> {
    let lay = grads.layout(shape);
    let (sdq, sdk, sdv) = (
        lay.dq.kernel_args(),
        lay.dk.kernel_args(),
        lay.dv.kernel_args(),
    );
    let [map_q, map_k, map_v, map_do] = maps(shape, [q, k, v], dout)?;
    let (bb, hh) = (shape.batch as i32, shape.heads as i32);
    let (nq, nk) = (shape.q_len as i32, shape.kv_len as i32);
    let causal = i32::from(shape.causal);
    // One CTA resident per SM (129–195 KiB of shared memory; 384 threads with 232–240
    // registers for each consumer); how many CTAs each grid has: fwd_wgmma::grid.
    let bh = (shape.batch * shape.heads) as u64;
    // dq tiles are query tiles streaming keys; dk/dv tiles are key tiles streaming query rows.
    let grid = |rows: usize, streamed: usize| {
        super::fwd_wgmma::grid(s, bh * rows.div_ceil(ROWS) as u64, shape.causal, streamed)
    };

    let bytes = dq_smem(shape.head_dim);
    crate::launch::raise_smem(k_dq.function(), bytes)?;
    let cfg = LaunchConfig::new(grid(shape.q_len, shape.kv_len), THREADS).with_shared_mem(bytes);
    let dq = grads.dq_buf();
    // SAFETY: the maps address exactly the `[B, H, rows, D]` views of q, k, v and dout, whose
    // largest offsets the caller checked to lie inside each slice (TensorMap::tiled checks it
    // again; the copy engine reads nothing outside the extents). q, k, v and dout are passed so
    // the launch orders those buffers. The kernel reads lse and delta only at query rows
    // r < B·H·Nq (the exact dense lengths the caller checked) and writes dq at (b, h, row, d),
    // row < Nq, d < D, through dq's strides: the view the caller checked inside its buffer and
    // free of overlaps. Every extent is an `int` (checked by the caller), the block is the 384
    // threads and the shared memory the bytes the kernel is written for (its limit raised
    // above), and its grid-stride loop serves any grid.
    unsafe {
        k_dq.launch(
            s, &cfg, map_q, map_k, map_v, map_do, q.data, k.data, v.data, dout.data, lse, delta,
            dq, bb, hh, nq, nk, sdq[0], sdq[1], sdq[2], scale, causal,
        )
    }?;

    let bytes = dkdv_smem(shape.head_dim);
    crate::launch::raise_smem(k_dkdv.function(), bytes)?;
    let cfg = LaunchConfig::new(grid(shape.kv_len, shape.q_len), THREADS).with_shared_mem(bytes);
    grads.with_dkdv(shape, |dk, dv, dv_at| {
        // SAFETY: as for the dq kernel: reads through the same maps, lse and delta at query rows
        // < B·H·Nq; writes dk and dv only at (b, h, row, d), row < Nk, d < D, through their
        // strides (views checked inside their buffers and free of overlaps by the caller; with
        // dv_at >= 0, the packed gradient, dv's view lies dv_at elements past dk's inside dk's
        // buffer, disjoint from it, and dv's empty buffer is not accessed); the 384 threads and
        // the shared memory it is written for.
        unsafe {
            k_dkdv.launch(
                s, &cfg, map_q, map_k, map_v, map_do, q.data, k.data, v.data, dout.data, lse,
                delta, dk, dv, bb, hh, nq, nk, sdk[0], sdk[1], sdk[2], sdv[0], sdv[1], sdv[2],
                dv_at, scale, causal,
            )
        }?;
        Ok(())
    })
}

/// The one-pass wgmma backward ([`AttentionBwdDq::Atomic`](super::AttentionBwdDq::Atomic), or
/// with `ordered` [`AttentionBwdDq::Ordered`](super::AttentionBwdDq::Ordered), on compute
/// capability 9.0) after delta: zero `acc`, `attn_bwd_fused_wgmma_*` or
/// `attn_bwd_fused_ord_wgmma_*` (dk and dv as the dk/dv kernel computes them, and each tile's
/// share of dq added by bulk reductions into `acc`'s first `B·H·Nq·D` elements; the ordered
/// kernels keep their counters in its tail), then dq = round(acc · scale). The caller checked
/// what [`launch`] needs, that `acc` holds exactly
/// [`attention_bwd_dq_workspace_len`](super::attention_bwd_dq_workspace_len) elements and is
/// 16-byte aligned, and that `B·H·Nq > 0` and `Nk > 0`.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_fused<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    [q, k, v]: [&AttentionInput<'_, T>; 3],
    dout: &AttentionInput<'_, T>,
    (lse, delta): (&DeviceSlice<T::Scalar>, &DeviceSlice<T::Scalar>),
    acc: &mut DeviceSlice<f32>,
    grads: &mut AttentionGrads<'_, T>,
    scale: T::Scalar,
    ordered: bool,
) -> Result<()> {
    if ordered {
        return launch_ordered(
            kern,
            s,
            shape,
            [q, k, v],
            dout,
            (lse, delta),
            acc,
            grads,
            scale,
        );
    }
    let k_fused = fused_kernel::<T>(kern, shape.head_dim)?;
    let lay = grads.layout(shape);
    let (sdk, sdv) = (lay.dk.kernel_args(), lay.dv.kernel_args());
    let [map_q, map_k, map_v, map_do] = maps(shape, [q, k, v], dout)?;
    let (bb, hh) = (shape.batch as i32, shape.heads as i32);
    let (nq, nk) = (shape.q_len as i32, shape.kv_len as i32);
    let causal = i32::from(shape.causal);
    let bh = (shape.batch * shape.heads) as u64;
    let grid = super::fwd_wgmma::grid(
        s,
        bh * shape.kv_len.div_ceil(ROWS) as u64,
        shape.causal,
        shape.q_len,
    );
    s.memset_zeros(acc)?;
    let bytes = fused_smem(shape.head_dim);
    crate::launch::raise_smem(k_fused.function(), bytes)?;
    let cfg = LaunchConfig::new(grid, THREADS).with_shared_mem(bytes);
    {
        let acc = &mut *acc;
        grads.with_dkdv(shape, |dk, dv, dv_at| {
            // SAFETY: reads through the maps, lse and delta, and writes dk and dv, exactly as the
            // dk/dv kernel (see `launch`); adds into acc[(bh·Nq + row)·D + col] only for rows
            // < Nq, cols < D of the CTA's own (b, h): inside the B·H·Nq·D elements (16-byte
            // aligned) the caller checked. The 384 threads and the shared memory it is written
            // for (its limit raised above); its grid-stride loop serves any grid.
            unsafe {
                k_fused.launch(
                    s, &cfg, map_q, map_k, map_v, map_do, q.data, k.data, v.data, dout.data, lse,
                    delta, acc, dk, dv, bb, hh, nq, nk, sdk[0], sdk[1], sdk[2], sdv[0], sdv[1],
                    sdv[2], dv_at, scale, causal,
                )
            }?;
            Ok(())
        })?;
    }
    super::bwd_fused::convert_dq(kern, s, shape, acc, grads, scale)
}

/// [`launch_fused`] with `ordered`: `attn_bwd_fused_ord_wgmma_*` with the tile and turn counters
/// at [`order_offset`](super::bwd_dq::order_offset) in `acc`, full attention's tiles handed out
/// key tile by key tile at D = 64 (measured faster there, head by head faster at D = 128:
/// kernels/TUNING.md, session 60).
#[allow(clippy::too_many_arguments)]
fn launch_ordered<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    [q, k, v]: [&AttentionInput<'_, T>; 3],
    dout: &AttentionInput<'_, T>,
    (lse, delta): (&DeviceSlice<T::Scalar>, &DeviceSlice<T::Scalar>),
    acc: &mut DeviceSlice<f32>,
    grads: &mut AttentionGrads<'_, T>,
    scale: T::Scalar,
) -> Result<()> {
    let k_ord = if shape.head_dim == 128 {
        dispatch::attn_bwd_fused_ord_wgmma_d128::<T>(kern)?
    } else {
        dispatch::attn_bwd_fused_ord_wgmma_d64::<T>(kern)?
    };
    let lay = grads.layout(shape);
    let (sdk, sdv) = (lay.dk.kernel_args(), lay.dv.kernel_args());
    let [map_q, map_k, map_v, map_do] = maps(shape, [q, k, v], dout)?;
    let (bb, hh) = (shape.batch as i32, shape.heads as i32);
    let (nq, nk) = (shape.q_len as i32, shape.kv_len as i32);
    let causal = i32::from(shape.causal);
    let kt_major = i32::from(shape.head_dim == 64);
    let bh = (shape.batch * shape.heads) as u64;
    let grid = super::fwd_wgmma::grid(
        s,
        bh * shape.kv_len.div_ceil(ROWS) as u64,
        shape.causal,
        shape.q_len,
    );
    s.memset_zeros(acc)?;
    let bytes = fused_smem(shape.head_dim);
    crate::launch::raise_smem(k_ord.function(), bytes)?;
    let cfg = LaunchConfig::new(grid, THREADS).with_shared_mem(bytes);
    let at = super::bwd_dq::order_offset(shape)?;
    {
        let (mut sums, mut order) = acc.split_at_mut(at)?;
        let (sums, order) = (&mut *sums, &mut *order);
        grads.with_dkdv(shape, |dk, dv, dv_at| {
            // SAFETY: as the atomic one pass (`launch_fused`): reads through the maps, lse and
            // delta, writes dk and dv exactly as the dk/dv kernel, adds into sums[(bh·Nq + row)·D
            // + col] for rows < Nq, cols < D of the CTA's own (b, h) (the B·H·Nq·D elements
            // before `at`, 16-byte aligned). It reads and raises order[0] (the tile counter) and
            // order[1 + bh·ceil(Nq / BM) + qt] for its query tiles (BM = 64 or 128: inside the
            // 1 + B·H·ceil(Nq / 64) words after `at`, zeroed above, 16-byte aligned), as ints.
            // Its waits end whatever number of CTAs runs at once (tiles are taken from the
            // counter in order; a tile waits only for earlier ones, all taken by running CTAs).
            // The 384 threads and the shared memory it is written for (its limit raised above).
            unsafe {
                k_ord.launch(
                    s, &cfg, map_q, map_k, map_v, map_do, q.data, k.data, v.data, dout.data, lse,
                    delta, sums, dk, dv, bb, hh, nq, nk, sdk[0], sdk[1], sdk[2], sdv[0], sdv[1],
                    sdv[2], dv_at, scale, causal, order, kt_major,
                )
            }?;
            Ok(())
        })?;
    }
    super::bwd_fused::convert_dq(kern, s, shape, acc, grads, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_matches_the_kernels_and_fits_hopper() {
        // ABW_DQ_SMEM_BYTES / ABW_KV_SMEM_BYTES in cuda/attention_wgmma_bwd.cu.
        assert_eq!(dq_smem(64), 132_352);
        assert_eq!(dq_smem(128), 197_888);
        assert_eq!(dkdv_smem(64), 135_424);
        assert_eq!(dkdv_smem(128), 199_936);
        // ABF_SMEM_BYTES in cuda/attention_wgmma_bwd_fused.cu.
        assert_eq!(fused_smem(64), 201_024);
        assert_eq!(fused_smem(128), 215_872);
        // An H100's or H200's opt-in limit per block: 227 KiB.
        for d in [64, 128] {
            assert!(dq_smem(d).max(dkdv_smem(d)).max(fused_smem(d)) <= 227 * 1024);
        }
    }
}
