//! The attention backward pass: delta, then dq and dk/dv, on the SIMT kernels, the mma.sync
//! tensor-core kernels or (sm_90) the wgmma ones (`bwd_wgmma`); on the mma.sync kernels dq
//! either by its own kernel (deterministic) or fused into the dk/dv pass with f32 atomics, and
//! on the wgmma kernels also by the one pass with its adds in a fixed order ([`AttentionBwdDq`];
//! [`attention_bwd_dq_choice`] is the one place that choice is made).

use super::bwd_dq::{attention_bwd_dq_choice, attention_bwd_dq_workspace_len, AttentionBwdDq};
use super::family_override::FamilyOverride;
use super::{bwd_fused, bwd_wgmma};
use super::{
    check_dense, check_input, check_inputs, config, k_rows_of, q_rows_of, strides, tc_misfit,
    views, AttentionAlgo, AttentionElement, AttentionGrads, AttentionInput, AttentionShape,
    HeadStrides, MMA_BWD_D128_DKDV_SMEM, MMA_ROWS, THREADS,
};
use crate::launch::{grid, sms};
use crate::{dispatch, Error, Kernels, Result};
use cuda_stack_driver::{ComputeCapability, DeviceSlice, LaunchConfig, Stream};

/// Why the tensor-core backward cannot run this problem, or `None` when it can (the forward's
/// rules — f16/bf16, D = 64 or 128, sm_80+, 16-byte aligned views with strides that are
/// multiples of 8 elements — for q, k, v and for dout, dq, dk, dv). `views` holds the latter's
/// device addresses and strides (address 0 for a buffer yet to be allocated, which the
/// allocators align to 256 bytes).
fn tc_bwd_misfit<T: AttentionElement>(
    cc: ComputeCapability,
    shape: &AttentionShape,
    inputs: [&AttentionInput<'_, T>; 3],
    views: [(u64, HeadStrides); 4],
) -> Option<&'static str> {
    tc_misfit(cc, shape, inputs, &views)
}

/// dout, dq, dk, dv as dense `[B, H, N, D]` arrays at these addresses.
fn dense_views(shape: &AttentionShape, ptrs: [u64; 4]) -> [(u64, HeadStrides); 4] {
    let (h, d) = (shape.heads, shape.head_dim);
    let q = HeadStrides::dense(h, shape.q_len, d);
    let k = HeadStrides::dense(h, shape.kv_len, d);
    [(ptrs[0], q), (ptrs[1], q), (ptrs[2], k), (ptrs[3], k)]
}

/// Whether [`AttentionAlgo::Auto`] runs this backward problem on the tensor cores (f16/bf16,
/// D = 64 or 128, sm_80+, aligned views and buffers): the one place the choice is made.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_tc_fits<T: AttentionElement>(
    cc: ComputeCapability,
    shape: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
    dout: &DeviceSlice<T>,
    dq: &DeviceSlice<T>,
    dk: &DeviceSlice<T>,
    dv: &DeviceSlice<T>,
) -> bool {
    let dense = dense_views(shape, [dout, dq, dk, dv].map(|x| x.as_raw_ptr()));
    tc_bwd_misfit(cc, shape, [q, k, v], dense).is_none()
}

/// The kernel family a backward call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Simt,
    Mma,
    Wgmma,
}

/// The kernels a backward call runs: their family, and how dq is computed.
struct Plan {
    family: Family,
    dq: AttentionBwdDq,
}

/// The plan for `algo` and `dq` (`views`: dout, dq, dk, dv addresses and strides as
/// [`tc_bwd_misfit`];
/// `acc_ok`: a dq workspace is given, 16-byte aligned). Explicit requests that cannot run are
/// [`Error::Unsupported`]; `Auto` falls back. [`AttentionAlgo::Auto`] runs the wgmma kernels
/// where they fit (compute capability 9.0; measured on an H200, 2026-11-27: 0.36–0.53× the
/// mma.sync backward's time at every benchmark shape, kernels/TUNING.md), else the mma.sync
/// kernels, else SIMT, unless [`ATTENTION_BWD_ENV`](super::ATTENTION_BWD_ENV) names a family
/// (an explicit [`AttentionBwdDq::Atomic`] is never sent to SIMT, which has no atomic path). On
/// the wgmma and mma.sync families, dq is then [`attention_bwd_dq_choice`]'s: the wgmma
/// family's atomic path is the one-pass `attn_bwd_fused_wgmma_*`, the mma.sync family's
/// `attn_bwd_fused_mma_*`. Problems without a query or a key run on the mma.sync kernels when
/// the wgmma ones are asked for (the same zeros; the tensor maps need extents of at least one).
fn plan<T: AttentionElement>(
    s: &Stream,
    algo: AttentionAlgo,
    dq: AttentionBwdDq,
    shape: &AttentionShape,
    inputs: [&AttentionInput<'_, T>; 3],
    views: [(u64, HeadStrides); 4],
    acc_ok: bool,
) -> Result<Plan> {
    const OP_TC: &str = "scaled_dot_product_attention_backward (tensor cores)";
    const OP_WG: &str = "scaled_dot_product_attention_backward (wgmma)";
    let unsupported = |op, why| Error::Unsupported {
        op,
        dtype: T::DTYPE,
        why,
    };
    let limits = s.context().limits();
    let misfit = tc_bwd_misfit(limits.compute_capability, shape, inputs, views);
    let wg_misfit = bwd_wgmma::misfit(
        limits.compute_capability,
        limits.max_shared_per_block_optin,
        shape,
        misfit,
    );
    let family = match (algo, misfit, wg_misfit) {
        (AttentionAlgo::Simt, ..) => Family::Simt,
        (AttentionAlgo::TensorCore, None, _) => Family::Mma,
        (AttentionAlgo::TensorCore, Some(why), _) => return Err(unsupported(OP_TC, why)),
        (AttentionAlgo::Wgmma, _, None) => Family::Wgmma,
        (AttentionAlgo::Wgmma, _, Some(why)) => return Err(unsupported(OP_WG, why)),
        (AttentionAlgo::Auto, m, w) => match (bwd_wgmma::bwd_override(), m, w) {
            // An explicit atomic dq path is never sent to the SIMT kernels (which have none).
            (Some(FamilyOverride::Simt), ..) if dq != AttentionBwdDq::Atomic => Family::Simt,
            (Some(FamilyOverride::Mma), None, _) => Family::Mma,
            (_, _, None) => Family::Wgmma,
            (_, None, _) => Family::Mma,
            _ => Family::Simt,
        },
    };
    let empty = shape.batch == 0 || shape.heads == 0 || shape.q_len == 0 || shape.kv_len == 0;
    // An ordered dq has nothing to add in any order there: the two kernels write the zeros.
    let (family, dq) = if family == Family::Wgmma && empty {
        let dq = match dq {
            AttentionBwdDq::Ordered => AttentionBwdDq::Separate,
            d => d,
        };
        (Family::Mma, dq)
    } else {
        (family, dq)
    };
    let sm_count = u32::try_from(sms(s)).unwrap_or(u32::MAX);
    let dq = match (family, dq) {
        (Family::Simt, AttentionBwdDq::Atomic | AttentionBwdDq::Ordered) => {
            return Err(unsupported(
                OP_TC,
                "the one-pass dq paths (atomic, ordered) run on the tensor-core kernels only \
                 (f16/bf16, D = 64 or 128, sm_80+, aligned buffers)",
            ))
        }
        (Family::Simt, _) => AttentionBwdDq::Separate,
        (Family::Mma, AttentionBwdDq::Ordered) => {
            return Err(unsupported(
                OP_TC,
                "the ordered one-pass dq path runs on the wgmma kernels only (compute \
                 capability 9.0); AttentionBwdDq::Separate is deterministic everywhere",
            ))
        }
        (_, AttentionBwdDq::Atomic | AttentionBwdDq::Ordered) if !acc_ok => {
            return Err(unsupported(
                OP_TC,
                "the one-pass dq paths (atomic, ordered) need a 16-byte aligned f32 dq \
                 workspace of attention_bwd_dq_workspace_len elements",
            ))
        }
        (_, AttentionBwdDq::Auto) if !acc_ok => AttentionBwdDq::Separate,
        // Auto's ordered pass exists on the wgmma kernels only; Separate is deterministic too.
        (Family::Mma, d) => match attention_bwd_dq_choice(sm_count, shape, d) {
            AttentionBwdDq::Ordered => AttentionBwdDq::Separate,
            d => d,
        },
        (_, d) => attention_bwd_dq_choice(sm_count, shape, d),
    };
    // The one pass holds more in shared memory than either of the two wgmma kernels.
    if family == Family::Wgmma
        && matches!(dq, AttentionBwdDq::Atomic | AttentionBwdDq::Ordered)
        && bwd_wgmma::fused_smem(shape.head_dim) > limits.max_shared_per_block_optin
    {
        return Err(unsupported(
            OP_WG,
            "the one-pass wgmma backward (the atomic and ordered dq paths) needs more shared \
             memory than this device allows",
        ));
    }
    Ok(Plan { family, dq })
}

/// How [`attention_bwd_with_dq`] would compute dq for these inputs with `algo` and `dq` when
/// dq, dk, dv and the dq workspace are new allocations (16-byte aligned): `Separate`, `Atomic`
/// or `Ordered`, never `Auto`. Callers that allocate their buffers per call (the tensor op) ask
/// this first and allocate the workspace only for the one-pass paths.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq_plan<T: AttentionElement>(
    s: &Stream,
    algo: AttentionAlgo,
    dq: AttentionBwdDq,
    shape: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
    dout: &DeviceSlice<T>,
) -> Result<AttentionBwdDq> {
    let dense = dense_views(shape, [dout.as_raw_ptr(), 0, 0, 0]);
    Ok(plan(s, algo, dq, shape, [q, k, v], dense, true)?.dq)
}

/// [`attention_bwd_dq_plan`] for [`attention_bwd_strided`]: `dout` a strided view, dq, dk, dv
/// new allocations, dense or one packed `[B, N, 3, H, D]` buffer (`packed`), and the dq
/// workspace a new allocation.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq_plan_strided<T: AttentionElement>(
    s: &Stream,
    algo: AttentionAlgo,
    dq: AttentionBwdDq,
    shape: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
    dout: &AttentionInput<'_, T>,
    packed: bool,
) -> Result<AttentionBwdDq> {
    let mut views = dense_views(shape, [dout.data.as_raw_ptr(), 0, 0, 0]);
    views[0].1 = dout.strides;
    if packed {
        let st = HeadStrides::packed_qkv(shape.heads, shape.q_len, shape.head_dim);
        // dk's and dv's views start H·D and 2·H·D elements in (16-byte multiples where D is).
        let hd = (shape.heads * shape.head_dim * std::mem::size_of::<T>()) as u64;
        views[1] = (0, st);
        views[2] = (hd, st);
        views[3] = (2 * hd, st);
    }
    Ok(plan(s, algo, dq, shape, [q, k, v], views, true)?.dq)
}

/// The gradients of [`attention_fwd`](super::attention_fwd) (`dq`, dense `[B, H, Nq, D]`; `dk`,
/// `dv`, dense `[B, H, Nk, D]`) from its inputs, its outputs `out` and `lse`, and the output
/// gradient `dout` (dense `[B, H, Nq, D]`). `delta` is a workspace of `B·H·Nq` compute-type
/// elements (it receives `rowsum(dout ∘ out)`). Three kernels: delta, dq, and dk with dv (SIMT: a
/// warp per query row, a warp per key row; tensor cores: a 64-row tile per block); no atomics,
/// deterministic ([`attention_bwd_with_dq`] offers the faster fused pass, with atomics).
///
/// Runs dq and dk/dv on the mma.sync tensor-core kernels where [`attention_bwd_tc_fits`] allows
/// (f16/bf16, D = 64 or 128, sm_80+, aligned buffers), on the SIMT kernels otherwise
/// ([`ATTENTION_BWD_ENV`](super::ATTENTION_BWD_ENV) may name another family);
/// [`attention_bwd_with`] picks explicitly.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: &DeviceSlice<T>,
    lse: &DeviceSlice<T::Scalar>,
    dout: &DeviceSlice<T>,
    delta: &mut DeviceSlice<T::Scalar>,
    dq: &mut DeviceSlice<T>,
    dk: &mut DeviceSlice<T>,
    dv: &mut DeviceSlice<T>,
    scale: f64,
) -> Result<()> {
    attention_bwd_with(
        kern,
        s,
        AttentionAlgo::Auto,
        shape,
        q,
        k,
        v,
        out,
        lse,
        dout,
        delta,
        dq,
        dk,
        dv,
        scale,
    )
}

/// [`attention_bwd`] on the kernels `algo` names (delta always on the SIMT kernel);
/// [`AttentionAlgo::TensorCore`] or [`AttentionAlgo::Wgmma`] where the problem does not fit them
/// is [`Error::Unsupported`], nothing launched. Deterministic (dq by its own kernel).
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_with<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: &DeviceSlice<T>,
    lse: &DeviceSlice<T::Scalar>,
    dout: &DeviceSlice<T>,
    delta: &mut DeviceSlice<T::Scalar>,
    dq: &mut DeviceSlice<T>,
    dk: &mut DeviceSlice<T>,
    dv: &mut DeviceSlice<T>,
    scale: f64,
) -> Result<()> {
    attention_bwd_with_dq(
        kern,
        s,
        algo,
        AttentionBwdDq::Separate,
        shape,
        q,
        k,
        v,
        out,
        lse,
        dout,
        delta,
        None,
        dq,
        dk,
        dv,
        scale,
    )
}

/// [`attention_bwd_with`], with dq computed as `dq_mode` says ([`AttentionBwdDq`]; `Auto`
/// resolves through [`attention_bwd_dq_choice`], and to `Separate` without a workspace or off
/// the tensor cores). `dq_acc` is the [`AttentionBwdDq::Atomic`] path's f32 workspace, exactly
/// [`attention_bwd_dq_workspace_len`] elements, 16-byte aligned; its contents on return are
/// unspecified (the path zeroes it, then accumulates the unscaled dq into it). An explicit
/// `Atomic` that cannot run (no tensor cores, no or misaligned workspace) is
/// [`Error::Unsupported`], nothing launched.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_with_dq<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    dq_mode: AttentionBwdDq,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: &DeviceSlice<T>,
    lse: &DeviceSlice<T::Scalar>,
    dout: &DeviceSlice<T>,
    delta: &mut DeviceSlice<T::Scalar>,
    dq_acc: Option<&mut DeviceSlice<f32>>,
    dq: &mut DeviceSlice<T>,
    dk: &mut DeviceSlice<T>,
    dv: &mut DeviceSlice<T>,
    scale: f64,
) -> Result<()> {
    let (h, nq, d) = (shape.heads, shape.q_len, shape.head_dim);
    let out = AttentionInput::dense(out, h, nq, d);
    let dout = AttentionInput::dense(dout, h, nq, d);
    let grads = AttentionGrads::dense(shape, dq, dk, dv);
    let io = Io {
        out,
        lse,
        dout,
        delta,
        dq_acc,
    };
    bwd(
        kern,
        s,
        algo,
        dq_mode,
        shape,
        [q, k, v],
        io,
        grads,
        true,
        scale,
    )
}

/// [`attention_bwd_with_dq`] with `out` and `dout` strided views ([`AttentionInput`], as q, k,
/// v: for example `[B, H, Nq, D]` views of `[B, Nq, H, D]` arrays) and the gradients written as
/// [`AttentionGrads`] says: three strided views, or one packed `[B, N, 3, H, D]` buffer (the
/// gradient of a packed qkv projection, with no copy). Views must lie inside their buffers
/// ([`Error::Shape`]) and outputs must not overlap themselves ([`Error::Invalid`]); the
/// tensor-core kernels also need every view 16-byte aligned with strides that are multiples of
/// 8 elements (else [`AttentionAlgo::Auto`] runs the SIMT kernels). Every family computes the
/// same values as with dense buffers: only the addresses differ.
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_strided<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    dq_mode: AttentionBwdDq,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: AttentionInput<'_, T>,
    lse: &DeviceSlice<T::Scalar>,
    dout: AttentionInput<'_, T>,
    delta: &mut DeviceSlice<T::Scalar>,
    dq_acc: Option<&mut DeviceSlice<f32>>,
    grads: AttentionGrads<'_, T>,
    scale: f64,
) -> Result<()> {
    let io = Io {
        out,
        lse,
        dout,
        delta,
        dq_acc,
    };
    bwd(
        kern,
        s,
        algo,
        dq_mode,
        shape,
        [q, k, v],
        io,
        grads,
        false,
        scale,
    )
}

/// The backward's other operands: the forward's output and lse, the output gradient, the delta
/// workspace and the atomic path's dq workspace.
struct Io<'a, 'b, T: AttentionElement> {
    out: AttentionInput<'a, T>,
    lse: &'b DeviceSlice<T::Scalar>,
    dout: AttentionInput<'a, T>,
    delta: &'b mut DeviceSlice<T::Scalar>,
    dq_acc: Option<&'b mut DeviceSlice<f32>>,
}

/// The backward behind both entry points; `dense`: out, dout, dq, dk, dv must be exactly the
/// dense arrays (the classic contract), else any views inside their buffers.
#[allow(clippy::too_many_arguments)]
fn bwd<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    dq_mode: AttentionBwdDq,
    shape: &AttentionShape,
    [q, k, v]: [AttentionInput<'_, T>; 3],
    io: Io<'_, '_, T>,
    mut grads: AttentionGrads<'_, T>,
    dense: bool,
    scale: f64,
) -> Result<()> {
    const OP: &str = "scaled_dot_product_attention_backward";
    let Io {
        out,
        lse,
        dout,
        delta,
        dq_acc,
    } = io;
    let scale = T::scale_scalar(scale);
    let g = grads.views(shape);
    let views = [(dout.data.as_raw_ptr(), dout.strides), g[0], g[1], g[2]];
    let acc_ok = dq_acc.as_ref().is_some_and(|a| a.as_raw_ptr() % 16 == 0);
    let p = plan(s, algo, dq_mode, shape, [&q, &k, &v], views, acc_ok)?;
    let tensor_cores = p.family == Family::Mma;
    let fused = matches!(p.dq, AttentionBwdDq::Atomic | AttentionBwdDq::Ordered);
    let d128 = shape.head_dim == 128;
    let k_delta = dispatch::attn_bwd_delta::<T>(kern)?;
    let tiled_fits =
        p.family == Family::Simt && super::tiled::bwd_fits::<T>(shape, s.context().limits());
    // The wgmma kernels, or the SIMT / mma.sync ones (one signature).
    let (wgmma, k_dq, k_dkdv) = match (p.family, d128) {
        // The one-pass kernel is looked up by bwd_wgmma::launch_fused.
        (Family::Wgmma, _) if fused => (None, None, None),
        (Family::Wgmma, _) => (
            Some(bwd_wgmma::kernels::<T>(kern, shape.head_dim)?),
            None,
            None,
        ),
        // The tiled kernels where they fit (f32, f16, bf16; D <= 128), else a warp a row.
        (Family::Simt, _) if tiled_fits => {
            let (dq, dkdv) = super::tiled::bwd_kernels::<T>(kern, shape.head_dim)?;
            (None, Some(dq), Some(dkdv))
        }
        (Family::Simt, _) => (
            None,
            Some(dispatch::attn_bwd_dq::<T>(kern)?),
            Some(dispatch::attn_bwd_dkdv::<T>(kern)?),
        ),
        (Family::Mma, false) => (
            None,
            Some(dispatch::attn_bwd_dq_mma_d64::<T>(kern)?),
            Some(dispatch::attn_bwd_dkdv_mma_d64::<T>(kern)?),
        ),
        (Family::Mma, true) => (
            None,
            Some(dispatch::attn_bwd_dq_mma_d128::<T>(kern)?),
            Some(dispatch::attn_bwd_dkdv_mma_d128::<T>(kern)?),
        ),
    };
    // The dynamic shared memory of the dk/dv (or fused) launch: the D = 128 tensor-core kernels'.
    let dkdv_smem = if tensor_cores && d128 {
        MMA_BWD_D128_DKDV_SMEM
    } else {
        0
    };
    // The tensor-core kernels: one CTA of 128 threads per 64 rows of one (b, h).
    let tc_cfg = |rows: usize| {
        let tiles = (shape.batch.saturating_mul(shape.heads) as u64)
            .saturating_mul(rows.div_ceil(MMA_ROWS) as u64);
        LaunchConfig::new(grid(tiles, 1, i32::MAX as u64), THREADS)
    };
    let (dq_cfg, dkdv_cfg) = if tensor_cores {
        (
            tc_cfg(shape.q_len),
            tc_cfg(shape.kv_len).with_shared_mem(dkdv_smem),
        )
    } else if let (true, Some(dq), Some(dkdv)) = (tiled_fits, k_dq, k_dkdv) {
        super::tiled::bwd_configs((dq, dkdv), shape)?
    } else {
        (config(s, q_rows_of(shape)), config(s, k_rows_of(shape)))
    };
    let (q_rows, k_rows) = check_inputs(OP, shape, &q, &k, &v)?;
    let d = shape.head_dim;
    let (b, h) = (shape.batch, shape.heads);
    let q_dims = format!("[{b}, {h}, {}, {d}]", shape.q_len);
    let k_dims = format!("[{b}, {h}, {}, {d}]", shape.kv_len);
    let r_dims = format!("[{b}, {h}, {}]", shape.q_len);
    if dense {
        check_dense(OP, "out", out.data.len(), &q_dims, q_rows * d)?;
        check_dense(OP, "dout", dout.data.len(), &q_dims, q_rows * d)?;
    } else {
        check_input(OP, "out", &out, shape, shape.q_len)?;
        check_input(OP, "dout", &dout, shape, shape.q_len)?;
    }
    check_dense(OP, "lse", lse.len(), &r_dims, q_rows)?;
    check_dense(OP, "delta", delta.len(), &r_dims, q_rows)?;
    match (&grads, dense) {
        (AttentionGrads::Separate { dq, dk, dv }, true) => {
            check_dense(OP, "dq", dq.data.len(), &q_dims, q_rows * d)?;
            check_dense(OP, "dk", dk.data.len(), &k_dims, k_rows * d)?;
            check_dense(OP, "dv", dv.data.len(), &k_dims, k_rows * d)?;
        }
        _ => views::check_grads(OP, &grads, shape)?,
    }
    // The one-pass paths' workspace, checked with the other operands (before delta launches).
    let acc = match (fused, dq_acc) {
        (false, _) => None,
        (true, Some(a)) => {
            let want = attention_bwd_dq_workspace_len(shape)?;
            if a.len() != want {
                return Err(Error::Shape {
                    op: OP,
                    what: "dq workspace",
                    expected: format!(
                        "attention_bwd_dq_workspace_len = {want} f32 elements (the {q_dims} \
                         accumulator, then the ordered pass's counters)"
                    ),
                    found: format!("{} elements", a.len()),
                });
            }
            Some(a)
        }
        (true, None) => {
            return Err(Error::Invalid {
                op: OP,
                problem: "internal error: the atomic dq path was planned without a workspace"
                    .into(),
            })
        }
    };
    let st = strides([q.strides, k.strides, v.strides]);
    let lay = grads.layout(shape);
    let (so, sdo) = (out.strides.kernel_args(), dout.strides.kernel_args());
    let (sdq, sdk, sdv) = (
        lay.dq.kernel_args(),
        lay.dk.kernel_args(),
        lay.dv.kernel_args(),
    );
    let sh = shape;
    let causal = i32::from(sh.causal);
    let dims = (
        sh.batch as i32,
        sh.heads as i32,
        sh.q_len as i32,
        sh.kv_len as i32,
        d as i32,
    );
    let (bb, hh, nq, nk, dd) = dims;
    if q_rows > 0 {
        // SAFETY: reads out and dout at (b, h, row, d), row < Nq, d < D, through their strides,
        // whose largest offsets were checked to lie inside each slice (dense: exact lengths),
        // and writes delta[r] for r < B·H·Nq: the exact length checked above.
        unsafe {
            k_delta.launch(
                s,
                &config(s, q_rows),
                out.data,
                dout.data,
                delta,
                bb,
                hh,
                nq,
                dd,
                so[0],
                so[1],
                so[2],
                sdo[0],
                sdo[1],
                sdo[2],
            )
        }?;
    }
    let acc = match (p.family, acc) {
        (Family::Wgmma, Some(acc)) => {
            return bwd_wgmma::launch_fused(
                kern,
                s,
                shape,
                [&q, &k, &v],
                &dout,
                (lse, &*delta),
                acc,
                &mut grads,
                scale,
                p.dq == AttentionBwdDq::Ordered,
            )
        }
        (_, acc) => acc,
    };
    if let Some(pair) = wgmma {
        return bwd_wgmma::launch(
            pair,
            s,
            shape,
            [&q, &k, &v],
            &dout,
            (lse, &*delta),
            &mut grads,
            scale,
        );
    }
    let (Some(k_dq), Some(k_dkdv)) = (k_dq, k_dkdv) else {
        return Err(Error::Invalid {
            op: OP,
            problem: "internal error: no dq and dk/dv kernels were planned".into(),
        });
    };
    if let Some(acc) = acc {
        return bwd_fused::fused_dq(
            kern,
            s,
            &dkdv_cfg,
            dkdv_smem,
            (q_rows, k_rows),
            [q, k, v],
            (&dout, lse, &*delta),
            acc,
            &mut grads,
            dims,
            st,
            scale,
            causal,
        );
    }
    if q_rows > 0 {
        let dq = grads.dq_buf();
        // SAFETY: q, k, v are read as in `attention_fwd` (extents checked by `check_inputs`);
        // dout is read at (b, h, row, d), row < Nq, through its strides (checked inside its
        // slice), lse and delta at query rows r < B·H·Nq (dense, lengths checked); dq is written
        // at (b, h, row, d), row < Nq, through its strides, the view checked inside its buffer
        // and free of overlaps (dense: exact length). The tensor-core and tiled SIMT kernels
        // access the same elements (their zero-filled copies of rows past Nk, and tiled, of
        // columns past D, read nothing; the tiled kernel's 32-bit tile counts are below 2^31 and
        // Nq, Nk leave room for its int row arithmetic, `tiled::bwd_fits`, and its dynamic
        // shared memory is what `tiled::bwd_configs` raised).
        unsafe {
            k_dq.launch(
                s, &dq_cfg, q.data, k.data, v.data, dout.data, lse, &*delta, dq, bb, hh, nq, nk,
                dd, st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7], st[8], sdo[0], sdo[1],
                sdo[2], sdq[0], sdq[1], sdq[2], scale, causal,
            )
        }?;
    }
    if k_rows > 0 {
        crate::launch::raise_smem(k_dkdv.function(), dkdv_smem)?;
        grads.with_dkdv(shape, |dk, dv, dv_at| {
            // SAFETY: q, k, v, dout as above; lse, delta read at query rows of the same (b, h)
            // (< B·H·Nq, lengths checked; none when Nq == 0); dk and dv written at (b, h, row,
            // d), row < Nk, through their strides, each view checked inside its buffer and free
            // of overlaps (dense: exact lengths); with `dv_at >= 0` (the packed gradient) dv's
            // view lies dv_at elements past dk's inside dk's buffer (the packed buffer's exact
            // length checked), disjoint from dk's view, and dv's (empty) buffer is not accessed.
            // The tensor-core and tiled SIMT kernels access the same elements (their zero-filled
            // copies of query and key rows past Nq and Nk, and tiled, of columns past D, read
            // nothing); each is launched with the dynamic shared memory it is written for, its
            // limit raised above (the D = 128 tensor-core kernel; `tiled::bwd_configs`).
            unsafe {
                k_dkdv.launch(
                    s, &dkdv_cfg, q.data, k.data, v.data, dout.data, lse, &*delta, dk, dv, bb, hh,
                    nq, nk, dd, st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7], st[8],
                    sdo[0], sdo[1], sdo[2], sdk[0], sdk[1], sdk[2], sdv[0], sdv[1], sdv[2], dv_at,
                    scale, causal,
                )
            }?;
            Ok(())
        })?;
    }
    Ok(())
}
