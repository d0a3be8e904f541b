//! The Hopper forward (`attn_fwd_wgmma_d{64,128}_*`, `cuda/attention_wgmma.cu`): where it fits,
//! its tensor maps, its launch; and [`ATTENTION_FWD_ENV`], which overrides the forward's
//! automatic choice for measurements.

use super::family_override::{family_override, FamilyOverride};
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

/// Query rows per CTA (`AW_BM`).
const ROWS: usize = 128;
/// Block size (`AW_THREADS`): a producer and two consumer warpgroups.
const THREADS: u32 = 384;
/// One 128-row box of 64 16-bit columns (`AW_ATOM`).
const ATOM: u32 = 16384;

/// The dynamic shared memory of `attn_fwd_wgmma_d{64,128}_*` (`AW_SMEM_BYTES` in
/// `cuda/attention_wgmma.cu`): the Q tile and 4 (D = 64) or 3 (D = 128) stages of K and V tiles of
/// 128 rows, plus 1 KiB of alignment and the barriers: 145 KiB at D = 64, 225 KiB at D = 128.
pub(super) fn smem(head_dim: usize) -> u32 {
    let stages = if head_dim == 128 { 3 } else { 4 };
    let tile = (head_dim as u32 / 64) * ATOM;
    (1 + 2 * stages) * tile + 1024 + 256
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
    if smem(shape.head_dim) > optin_smem {
        return Some("the wgmma attention kernels need more shared memory than this device allows");
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
    let kernel = if shape.head_dim == 64 {
        dispatch::attn_fwd_wgmma_d64::<T>(kern)?
    } else {
        dispatch::attn_fwd_wgmma_d128::<T>(kern)?
    };
    let map_q = head_map(q, shape, shape.q_len, ROWS as u32)?;
    let map_k = head_map(k, shape, shape.kv_len, ROWS as u32)?;
    let map_v = head_map(v, shape, shape.kv_len, ROWS as u32)?;
    let bytes = smem(shape.head_dim);
    crate::launch::raise_smem(kernel.function(), bytes)?;
    // One CTA per SM (225 KiB of shared memory at D = 128; 384 threads with 240 registers for
    // each consumer at D = 64), each walking the query tiles with a stride of the grid.
    let tiles = (shape.batch * shape.heads) as u64 * shape.q_len.div_ceil(ROWS) as u64;
    let grid = tiles.min(sms(s)).max(1) as u32;
    let cfg = LaunchConfig::new(grid, THREADS).with_shared_mem(bytes);
    // SAFETY: the maps address exactly the `[B, H, rows, D]` views of q, k, v, whose largest
    // offsets the caller checked to lie inside each slice (TensorMap::tiled checks it again; the
    // copy engine reads nothing outside the extents and zero-fills the rest). q, k, v are passed
    // so the launch orders those buffers. The kernel writes out at (b, h, row, d) with row < Nq,
    // d < D through out's strides (each <= i64::MAX; the view checked inside out and free of
    // overlaps) and lse[r] only for rows r < B·H·Nq, the exact dense length the caller checked. Every extent is an `int`
    // (checked by the caller), the block is the 384 threads and the shared memory the bytes the
    // kernel is written for, and its grid-stride loop serves any grid.
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
