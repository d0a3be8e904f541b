//! The Hopper forward (`attn_fwd_wgmma_d{64,128}_*` and `attn_fwd_wgmma_d64_m192_*`,
//! `cuda/attention_wgmma.cu`): where it fits, its tensor maps, its launch; and
//! [`ATTENTION_FWD_ENV`], which overrides the forward's automatic choice for measurements. Which
//! query tile it runs at D = 64: `fwd_wgmma_tile.rs`.

use super::family_override::{family_override, FamilyOverride};
use super::fwd_wgmma_tile::attention_fwd_wgmma_rows;
use super::{AttentionElement, AttentionInput, AttentionShape, HeadStrides};
use crate::launch::sms;
use crate::{dispatch, DType, Kernels, Result};
use cuda_stack_driver::{
    ComputeCapability, DeviceSlice, LaunchConfig, Stream, TensorMap, TensorMapElement,
    TensorMapSwizzle,
};

/// The environment variable [`AttentionAlgo::Auto`](super::AttentionAlgo::Auto) reads first for
/// the forward pass: `wgmma`, `mma` (the mma.sync kernels), or `simt` (case-insensitive; other
/// values, and kernels that do not fit the problem, are ignored). Read at every call, so a
/// benchmark can compare the families in one run.
pub const ATTENTION_FWD_ENV: &str = "CUDA_STACK_ATTN_FWD";

/// The override [`ATTENTION_FWD_ENV`] asks for, if any.
pub(super) fn fwd_override() -> Option<FamilyOverride> {
    family_override(ATTENTION_FWD_ENV)
}

/// Rows of a copy-engine box (the K and V tiles; the Q tile is one or two boxes).
const BOX_ROWS: u32 = 128;
/// One 128-row box of 64 16-bit columns (`AW_ATOM`).
const ATOM: u32 = 16384;

/// Query rows per CTA (`AW_BM_NC(NC)`): 128 or, at D = 64, 192 ([`attention_fwd_wgmma_rows`]).
/// Block size (`AW_THREADS_NC(NC)`): a producer and one consumer warpgroup per 64 rows.
fn threads(rows: usize) -> u32 {
    128 * (rows as u32 / 64 + 1)
}

/// The dynamic shared memory of the forward with `rows`-row query tiles (`AW_SMEM_NC` in
/// `cuda/attention_wgmma.cu`): the Q tile (one box of 128 rows, or two for 192), 4 (D = 64) or 3
/// (D = 128) stages of K and V tiles of 128 rows, plus 1 KiB of alignment and the barriers:
/// 145 KiB at D = 64 (161 KiB with 192 rows), 225 KiB at D = 128.
pub(super) fn smem(head_dim: usize, rows: usize) -> u32 {
    let stages = if head_dim == 128 { 3 } else { 4 };
    let tile = (head_dim as u32 / 64) * ATOM;
    let q_boxes = (rows as u32).div_ceil(BOX_ROWS);
    (q_boxes + 2 * stages) * tile + 1024 + 256
}

/// Why the wgmma forward cannot run this problem (which the mma.sync forward can: `tc_ok`), or
/// `None` when it can: compute capability 9.0 exactly (the kernels are `sm_90a` PTX), the shared
/// memory, and the rules the mma.sync kernels already check (f16/bf16, D = 64 or 128, 16-byte
/// aligned views with strides of multiples of 8 elements, which is what the copy engine needs).
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
    if smem(shape.head_dim, 128) > optin_smem {
        return Some("the wgmma attention kernels need more shared memory than this device allows");
    }
    tiles_misfit(shape)
}

/// The grid of a Hopper attention launch over `tiles` tiles (fewer than 2³¹: [`tiles_misfit`]),
/// each of which streams up to `rows` rows of the other operand (keys for the forward and dq,
/// query rows for dk/dv).
/// - Full attention, and causal attention with `rows` < [`PER_TILE_ROWS`]: at most one CTA per
///   SM, each walking its tiles with a stride of the grid (persistent: the producer loads the next
///   tile's operands during this one's epilogue).
/// - Causal attention with longer rows: one CTA per tile, so that the block scheduler hands the
///   next tile, in `cuda/attention_tile_order.cuh`'s order, to whichever SM frees first. Causal
///   tiles differ in work, and a static stride could not both balance the SMs and keep few heads'
///   operands in L2 at a time. Measured on an H200 (kernels/TUNING.md, session 50): 4–14% faster
///   from 2048 rows up, but 5–28% slower at 512 and 1024, where a tile is too short to pay for a
///   CTA's start.
pub(super) fn grid(s: &Stream, tiles: u64, causal: bool, rows: usize) -> u32 {
    let grid = if causal && rows >= PER_TILE_ROWS {
        tiles
    } else {
        tiles.min(sms(s))
    };
    grid.clamp(1, i32::MAX as u64) as u32
}

/// The streamed rows from which a causal launch takes one CTA per tile ([`grid`]).
pub(super) const PER_TILE_ROWS: usize = 2048;

/// Why the wgmma kernels cannot index this problem's tiles, or `None`: they walk causal tiles in
/// 32-bit arithmetic (`cuda/attention_tile_order.cuh`), so `B·H·max(Nq, Nk)` (at least the
/// number of tiles of any of them) must stay below 2³¹. (Outputs of that many rows of 64
/// 16-bit columns would take 256 GiB.)
pub(super) fn tiles_misfit(shape: &AttentionShape) -> Option<&'static str> {
    let rows = shape.q_len.max(shape.kv_len) as u128;
    let bh = (shape.batch as u128).saturating_mul(shape.heads as u128);
    if bh.saturating_mul(rows) >= 1 << 31 {
        return Some(
            "the wgmma attention kernels index their tiles in 32 bits: B·H·max(Nq, Nk) must be \
             below 2^31",
        );
    }
    None
}

/// The 4-D tensor map the wgmma kernels read a `[B, H, rows, D]` view through: dims
/// `{D, rows, H, B}`, the view's strides, boxes of 64 columns by `box_rows` rows (128 for the
/// forward, 64 for the backward), 128-byte swizzle.
pub(super) fn head_map<T: AttentionElement>(
    x: &AttentionInput<'_, T>,
    shape: &AttentionShape,
    rows: usize,
    box_rows: u32,
) -> Result<TensorMap> {
    let element = match T::DTYPE {
        DType::BF16 => TensorMapElement::BF16,
        _ => TensorMapElement::F16,
    };
    let st = x.strides;
    Ok(TensorMap::tiled(
        x.data,
        element,
        &[
            shape.head_dim as u64,
            rows as u64,
            shape.heads as u64,
            shape.batch as u64,
        ],
        &[st.row as u64, st.head as u64, st.batch as u64],
        &[64, box_rows, 1, 1],
        TensorMapSwizzle::B128,
    )?)
}

/// Launches the wgmma forward. The caller checked the shape, the inputs against their slices,
/// `out` (its strided view inside the slice, not overlapping itself) and `lse` (dense, exact
/// length), [`misfit`] (`None`: out 16-byte aligned, strides multiples of 8), and that
/// `B·H·Nq > 0` and `Nk > 0` (the maps need extents of at least 1).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
    (out, out_st): (&mut DeviceSlice<T>, HeadStrides),
    lse: &mut DeviceSlice<T::Scalar>,
    scale: T::Scalar,
) -> Result<()> {
    let limits = s.context().limits();
    // The kernel and its tile together: the 192-row kernels exist only at D = 64, and only where
    // their shared memory fits.
    let (kernel, rows) = match (
        shape.head_dim,
        attention_fwd_wgmma_rows(limits.sm_count, shape),
    ) {
        (64, 192) if smem(64, 192) <= limits.max_shared_per_block_optin => {
            (dispatch::attn_fwd_wgmma_d64_m192::<T>(kern)?, 192)
        }
        (64, _) => (dispatch::attn_fwd_wgmma_d64::<T>(kern)?, 128),
        _ => (dispatch::attn_fwd_wgmma_d128::<T>(kern)?, 128),
    };
    let map_q = head_map(q, shape, shape.q_len, BOX_ROWS)?;
    let map_k = head_map(k, shape, shape.kv_len, BOX_ROWS)?;
    let map_v = head_map(v, shape, shape.kv_len, BOX_ROWS)?;
    let bytes = smem(shape.head_dim, rows);
    crate::launch::raise_smem(kernel.function(), bytes)?;
    // One CTA resident per SM (225 KiB of shared memory at D = 128; at D = 64, 384 threads with
    // 240 registers for each consumer, or 512 with 160); how many CTAs the grid has: `grid`.
    let tiles = (shape.batch * shape.heads) as u64 * shape.q_len.div_ceil(rows) as u64;
    let grid = grid(s, tiles, shape.causal, shape.kv_len);
    let cfg = LaunchConfig::new(grid, threads(rows)).with_shared_mem(bytes);
    // SAFETY: the maps address exactly the `[B, H, rows, D]` views of q, k, v, whose largest
    // offsets the caller checked to lie inside each slice (TensorMap::tiled checks it again; the
    // copy engine reads nothing outside the extents and zero-fills the rest). q, k, v are passed
    // so the launch orders those buffers. The kernel writes out at (b, h, row, d) with row < Nq,
    // d < D through out's strides (each <= i64::MAX; the view checked inside out and free of
    // overlaps) and lse[r] only for rows r < B·H·Nq, the exact dense length the caller checked. Every extent is an `int`
    // (checked by the caller), the block is the kernel's 384 (or, for the 192-row kernel, 512)
    // threads and the shared memory the bytes it is written for, and its grid-stride loop serves
    // any grid.
    unsafe {
        kernel.launch(
            s,
            &cfg,
            map_q,
            map_k,
            map_v,
            q.data,
            k.data,
            v.data,
            out,
            lse,
            shape.batch as i32,
            shape.heads as i32,
            shape.q_len as i32,
            shape.kv_len as i32,
            out_st.batch as i64,
            out_st.head as i64,
            out_st.row as i64,
            scale,
            i32::from(shape.causal),
        )
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::causal_test_shape as shape;

    #[test]
    fn tiles_fit_below_two_to_the_31() {
        assert!(tiles_misfit(&shape(16, 16, 16384, 16384)).is_none());
        assert!(tiles_misfit(&shape(1, 1, (1 << 31) - 1, 1)).is_none());
        assert!(tiles_misfit(&shape(1, 1, 1, 1 << 31)).is_some());
        assert!(tiles_misfit(&shape(1 << 16, 1 << 15, 1, 1)).is_some());
        assert!(tiles_misfit(&shape(1 << 16, 1 << 14, 2, 1)).is_some());
        assert!(tiles_misfit(&shape(usize::MAX, usize::MAX, usize::MAX, 1)).is_some());
    }
}
