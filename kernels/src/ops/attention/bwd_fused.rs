//! The backward's atomic dq path ([`AttentionBwdDq::Atomic`](super::AttentionBwdDq::Atomic))
//! after delta, mma.sync only: the fused dk/dv kernel that also adds each tile's share of dq into
//! an f32 workspace, then the conversion that scales and rounds it into dq (through dq's
//! strides).

use super::{AttentionElement, AttentionGrads, AttentionInput, AttentionShape};
use crate::launch::{grid, BLOCK};
use crate::{dispatch, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// The [`AttentionBwdDq::Atomic`](super::AttentionBwdDq::Atomic) path after delta: zero `acc`, the fused kernel (dk, dv, and dq
/// added into `acc`), then dq = round(acc · scale). The caller checked every length (`acc`:
/// [`attention_bwd_dq_workspace_len`](super::attention_bwd_dq_workspace_len), at least
/// `B·H·Nq·D`, 16-byte aligned), that the problem fits the tensor cores, and wrote delta.
#[allow(clippy::too_many_arguments)]
pub(super) fn fused_dq<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    cfg: &LaunchConfig,
    smem: u32,
    (q_rows, k_rows): (usize, usize),
    [q, k, v]: [AttentionInput<'_, T>; 3],
    (dout, lse, delta): (
        &AttentionInput<'_, T>,
        &DeviceSlice<T::Scalar>,
        &DeviceSlice<T::Scalar>,
    ),
    acc: &mut DeviceSlice<f32>,
    grads: &mut AttentionGrads<'_, T>,
    (bb, hh, nq, nk, dd): (i32, i32, i32, i32, i32),
    st: [i64; 9],
    scale: T::Scalar,
    causal: i32,
) -> Result<()> {
    let k_fused = if dd == 128 {
        dispatch::attn_bwd_fused_mma_d128::<T>(kern)?
    } else {
        dispatch::attn_bwd_fused_mma_d64::<T>(kern)?
    };
    let shape = AttentionShape {
        batch: bb as usize,
        heads: hh as usize,
        q_len: nq as usize,
        kv_len: nk as usize,
        head_dim: dd as usize,
        causal: causal != 0,
    };
    if q_rows > 0 {
        s.memset_zeros(acc)?;
    }
    if k_rows > 0 {
        crate::launch::raise_smem(k_fused.function(), smem)?;
        let lay = grads.layout(&shape);
        let (sdo, sdk, sdv) = (
            dout.strides.kernel_args(),
            lay.dk.kernel_args(),
            lay.dv.kernel_args(),
        );
        let acc = &mut *acc;
        grads.with_dkdv(&shape, |dk, dv, dv_at| {
            // SAFETY: reads q, k, v, dout, lse, delta exactly as attn_bwd_dkdv_mma_* does
            // (extents and lengths checked by the caller) and writes dk, dv exactly as it does
            // (their views checked by the caller; dv_at as there); adds into
            // acc[(bh·Nq + row)·D + col] only for rows < Nq, cols < D of the CTA's own (b, h):
            // inside the B·H·Nq·D elements checked. Launched with the dynamic shared memory it
            // is written for (D = 128), its limit raised above.
            unsafe {
                k_fused.launch(
                    s, cfg, q.data, k.data, v.data, dout.data, lse, delta, acc, dk, dv, bb, hh, nq,
                    nk, dd, st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7], st[8], sdo[0],
                    sdo[1], sdo[2], sdk[0], sdk[1], sdk[2], sdv[0], sdv[1], sdv[2], dv_at, scale,
                    causal,
                )
            }?;
            Ok(())
        })?;
    }
    if q_rows > 0 {
        convert_dq(kern, s, &shape, acc, grads, scale)?;
    }
    Ok(())
}

/// dq = round(acc · scale) through dq's strides (`attn_bwd_dq_convert_*`): the last step of both
/// one-pass dq paths (the mma.sync fused kernel's and the wgmma ones'). The caller checked `acc`
/// (at least `B·H·Nq·D` elements, 16-byte aligned), dq's view and that the problem fits the tensor cores
/// (dq 16-byte aligned, strides multiples of 8 elements), and that `B·H·Nq > 0`.
pub(super) fn convert_dq<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    acc: &DeviceSlice<f32>,
    grads: &mut AttentionGrads<'_, T>,
    scale: T::Scalar,
) -> Result<()> {
    let k_convert = dispatch::attn_bwd_dq_convert::<T>(kern)?;
    // B·H·Nq·D is a multiple of 4 (D is 64 or 128): n4 groups of 4 cover acc and dq. Every
    // extent is an `int` (checked by the caller).
    let n4 = shape.batch * shape.heads * shape.q_len * shape.head_dim / 4;
    let cfg = LaunchConfig::new(grid(n4 as u64, u64::from(BLOCK), i32::MAX as u64), BLOCK);
    let (bb, hh) = (shape.batch as i32, shape.heads as i32);
    let (nq, dd) = (shape.q_len as i32, shape.head_dim as i32);
    let sdq = grads.layout(shape).dq.kernel_args();
    let dq = grads.dq_buf();
    // SAFETY: reads acc as 16-byte groups i < n4 = B·H·Nq·D / 4 (at least B·H·Nq·D elements,
    // 16-byte aligned: checked by the caller) and writes the matching 4 elements of dq at
    // (b, h, row, d..d + 4), row < Nq, d + 4 <= D, through dq's strides: the view checked inside
    // its buffer and free of overlaps; 8-byte aligned groups (dq 16-byte aligned, strides
    // multiples of 8 elements: the tensor-core precondition).
    unsafe {
        k_convert.launch(
            s, &cfg, acc, dq, bb, hh, nq, dd, sdq[0], sdq[1], sdq[2], scale,
        )
    }?;
    Ok(())
}
