//! Fused scaled-dot-product attention, forward and backward: the scores `scale · Q Kᵀ` are never
//! written to memory; the forward saves the row log-sum-exp that the backward recomputes the
//! probabilities from (FlashAttention-2's scheme). Three kernel families ([`AttentionAlgo`]):
//! SIMT (`cuda/attention.cu`, every dtype and head dimension, and `cuda/attention_tiled*.cu`, the
//! tiled forward and backward for f32, f16 and bf16 at D ≤ 128), mma.sync (`cuda/attention_mma.cu`,
//! `cuda/attention_mma_bwd.cu`, sm_80+) and, on sm_90, wgmma with TMA (`cuda/attention_wgmma.cu`
//! and `cuda/attention_wgmma_bwd.cu`, FlashAttention-3's structure).
//!
//! q is `[B, H, Nq, D]`, k and v are `[B, H, Nk, D]`, each a strided view ([`HeadStrides`]: batch,
//! head and row strides in elements, unit last stride), so they may be slices of one packed
//! `[B, N, 3, H, D]` projection. The `_strided` entry points ([`attention_fwd_strided`],
//! [`attention_bwd_strided`]) take the forward's `out` ([`AttentionOutput`]), the backward's
//! `out` and `dout` and its gradients ([`AttentionGrads`]) as strided views too, so that `out`
//! can be a `[B, N, H, D]` array (the heads side by side, ready for the output projection) and
//! dq, dk, dv one packed `[B, N, 3, H, D]` gradient, with no copy; the other entry points take
//! dense outputs. lse and delta are dense. The causal mask is aligned bottom-right:
//! query `i` sees key `j` iff `j <= i + Nk − Nq`; a query that sees no key gets `out = 0` and
//! `lse = −inf` (and zero gradients). Deterministic (no atomics, fixed summation orders), except
//! dq on the fused backward path ([`AttentionBwdDq::Atomic`]), which adds into an f32
//! accumulator with atomics and so may differ in its last bits from run to run.

use crate::launch::{grid, sms, to_i32};

mod bwd;
mod bwd_dq;
mod bwd_fused;
mod bwd_wgmma;
mod family_override;
mod fwd_wgmma;
mod fwd_wgmma_tile;
mod tiled;
mod views;
use crate::{dispatch, DType, Element, Error, Kernels, Result};
pub use bwd::{
    attention_bwd, attention_bwd_dq_plan, attention_bwd_dq_plan_strided, attention_bwd_strided,
    attention_bwd_tc_fits, attention_bwd_with, attention_bwd_with_dq,
};
pub use bwd_dq::{
    attention_bwd_dq_choice, attention_bwd_dq_workspace_len, AttentionBwdDq, ATTENTION_BWD_DQ_ENV,
    ATTENTION_BWD_ORDERED_MIN_KEYS_D128, ATTENTION_BWD_ORDERED_MIN_KEYS_D64,
};
pub use bwd_wgmma::ATTENTION_BWD_ENV;
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{ComputeCapability, DeviceSlice, LaunchConfig, Stream};
use family_override::FamilyOverride;
pub use fwd_wgmma::ATTENTION_FWD_ENV;
pub use fwd_wgmma_tile::{attention_fwd_wgmma_rows, ATTENTION_FWD_ROWS_ENV};
use views::check_output;
pub use views::{AttentionGrads, AttentionOutput};

/// The largest head dimension the kernels take.
pub const ATTENTION_MAX_HEAD_DIM: usize = 256;

/// Rows (one per warp) a block of 128 threads handles per step.
const ROWS_PER_BLOCK: u64 = 4;
/// The attention kernels' block size.
const THREADS: u32 = 128;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
}

/// The element types the attention kernels take: `f32`, `f64`, [`f16`](struct@f16) and [`bf16`] (the last
/// two computed in f32). The row log-sum-exp is [`Element::Scalar`] (f32, or f64 for f64).
pub trait AttentionElement: Element + sealed::Sealed {
    /// `scale` in the compute type (rounded to f32 for f32/f16/bf16).
    fn scale_scalar(scale: f64) -> Self::Scalar;
}

impl AttentionElement for f32 {
    fn scale_scalar(scale: f64) -> f32 {
        scale as f32
    }
}
impl AttentionElement for f64 {
    fn scale_scalar(scale: f64) -> f64 {
        scale
    }
}
impl AttentionElement for f16 {
    fn scale_scalar(scale: f64) -> f32 {
        scale as f32
    }
}
impl AttentionElement for bf16 {
    fn scale_scalar(scale: f64) -> f32 {
        scale as f32
    }
}

/// Which kernels run the forward pass ([`attention_fwd_with`]) or the backward pass's dq and
/// dk/dv ([`attention_bwd_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionAlgo {
    /// The tensor cores where [`attention_tc_fits`] (forward) or [`attention_bwd_tc_fits`]
    /// (backward) says they can, else the SIMT kernels; the forward on [`AttentionAlgo::Wgmma`]'s
    /// kernels where they fit, else the mma.sync ones (the backward keeps the mma.sync kernels
    /// until the wgmma ones are measured against them). [`ATTENTION_FWD_ENV`] and
    /// [`ATTENTION_BWD_ENV`] override the forward's and the backward's choice (where the kernels
    /// they name fit).
    Auto,
    /// The CUDA cores, every dtype and head dimension: for f32, f16 and bf16 at D ≤ 128, where the
    /// device has the shared memory (every sm_80 and sm_90 GPU), the tiled kernels
    /// `attn_fwd_tiled_d{64,128}_<dt>` (`cuda/attention_tiled.cu`) and
    /// `attn_bwd_{dq,dkdv}_tiled_d{64,128}_<dt>` (`cuda/attention_tiled_bwd.cu`): 64 rows of a
    /// head a CTA against tiles of the other side in shared memory; else `attn_fwd_<dt>` and
    /// `attn_bwd_{dq,dkdv}_<dt>` (`cuda/attention.cu`, a warp a row).
    Simt,
    /// `attn_fwd_mma_d{64,128}_<dt>` (`cuda/attention_mma.cu`) and
    /// `attn_bwd_{dq,dkdv}_mma_d{64,128}_<dt>` (`cuda/attention_mma_bwd.cu`); mma.sync, compute
    /// capability 8.0 and newer: f16 / bf16, D = 64 or 128, 16-byte aligned q, k, v, out (and
    /// dout, dq, dk, dv) and strides (of every one of them) that are multiples of 8 elements.
    TensorCore,
    /// The forward on `attn_fwd_wgmma_d{64,128}_<dt>` (`cuda/attention_wgmma.cu`: TMA copies,
    /// warpgroup MMA, a producer and two consumer warpgroups; FlashAttention-3's structure; at
    /// D = 64 also `attn_fwd_wgmma_d64_m192_<dt>`, three consumers, where
    /// [`attention_fwd_wgmma_rows`] picks 192-row tiles), the
    /// backward on `attn_bwd_{dq,dkdv}_wgmma_d{64,128}_<dt>` (`cuda/attention_wgmma_bwd.cu`:
    /// the same structure, dq by its own kernel, deterministic): compute capability 9.0 exactly,
    /// and [`AttentionAlgo::TensorCore`]'s rules. A backward without a query or a key runs on
    /// [`AttentionAlgo::TensorCore`]'s kernels (the same zeros), and the atomic dq path
    /// ([`AttentionBwdDq::Atomic`]) does not exist here.
    Wgmma,
}

/// The forward kernel family [`attention_fwd_with`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fwd {
    Simt,
    Mma,
    Wgmma,
}

/// Query rows per CTA of the tensor-core backward (query or key rows per CTA).
const MMA_ROWS: usize = 64;

/// The dynamic shared memory `attn_bwd_dkdv_mma_d128_*` is launched with (`AB_DKDV128_DYN_SMEM`
/// in `cuda/attention_mma_bwd.cu`): the CTA's 64 K rows and 64 V rows of 128 elements, each row
/// padded by 8 elements. With the kernel's static shared memory it is above the 48 KiB default,
/// so the op raises the kernel's limit before the first launch.
const MMA_BWD_D128_DKDV_SMEM: u32 = 2 * 64 * (128 + 8) * 2;

/// Query rows per CTA of the tensor-core forward (4 warps of 32 rows).
const FWD_MMA_ROWS: usize = 128;

/// The dynamic shared memory of `attn_fwd_mma_d{64,128}_*` (`AM_SMEM_BYTES` in
/// `cuda/attention_mma.cu`): the Q tile (128 rows) and two stages of K and V tiles (64 keys at
/// D = 64, 32 at D = 128), rows of D + 8 16-bit elements: 54 KiB at D = 64, 68 KiB at D = 128.
fn fwd_mma_smem(head_dim: usize) -> u32 {
    let keys = if head_dim == 64 { 64 } else { 32 };
    ((FWD_MMA_ROWS + 4 * keys) * (head_dim + 8) * 2) as u32
}

/// Why the tensor-core forward cannot run this problem, or `None` when it can. `outs`: the
/// address and strides of every other view the kernels access (the forward's out; the
/// backward's dout, dq, dk, dv), under the same rules as q, k, v.
fn tc_misfit<T: AttentionElement>(
    cc: ComputeCapability,
    shape: &AttentionShape,
    inputs: [&AttentionInput<'_, T>; 3],
    outs: &[(u64, HeadStrides)],
) -> Option<&'static str> {
    if !matches!(T::DTYPE, DType::F16 | DType::BF16) {
        return Some("the tensor-core kernels take f16 and bf16 only");
    }
    if shape.head_dim != 64 && shape.head_dim != 128 {
        return Some("the tensor-core kernels take head dimensions 64 and 128 only");
    }
    if cc < (ComputeCapability { major: 8, minor: 0 }) {
        return Some("the tensor-core kernels need compute capability 8.0 or newer");
    }
    let aligned = |p: u64| p % 16 == 0;
    let strides_ok = |st: HeadStrides| st.batch % 8 == 0 && st.head % 8 == 0 && st.row % 8 == 0;
    if !inputs
        .iter()
        .all(|x| aligned(x.data.as_raw_ptr()) && strides_ok(x.strides))
        || !outs.iter().all(|&(p, st)| aligned(p) && strides_ok(st))
    {
        return Some(
            "the tensor-core kernels need 16-byte aligned q, k, v and out (dout, dq, dk, dv), \
             and strides that are multiples of 8 elements",
        );
    }
    None
}

/// Whether [`AttentionAlgo::Auto`] runs this forward problem on the tensor cores on a device of
/// compute capability `cc` (f16/bf16, D = 64 or 128, sm_80+, aligned views): the one place the
/// choice is made.
pub fn attention_tc_fits<T: AttentionElement>(
    cc: ComputeCapability,
    shape: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
    out: &DeviceSlice<T>,
) -> bool {
    let dense = HeadStrides::dense(shape.heads, shape.q_len, shape.head_dim);
    tc_misfit(cc, shape, [q, k, v], &[(out.as_raw_ptr(), dense)]).is_none()
}

/// The extents of one attention problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    /// Batch size `B`.
    pub batch: usize,
    /// Heads `H`.
    pub heads: usize,
    /// Query rows `Nq`.
    pub q_len: usize,
    /// Key and value rows `Nk`.
    pub kv_len: usize,
    /// Head dimension `D`, `1..=256`.
    pub head_dim: usize,
    /// The bottom-right aligned causal mask (query `i` sees key `j` iff `j <= i + Nk − Nq`).
    pub causal: bool,
}

/// Element strides of a `[B, H, N, D]` operand whose last dimension is contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadStrides {
    /// Elements between batches.
    pub batch: usize,
    /// Elements between heads.
    pub head: usize,
    /// Elements between rows.
    pub row: usize,
}

impl HeadStrides {
    /// The strides of a dense `[B, heads, rows, head_dim]` array.
    pub fn dense(heads: usize, rows: usize, head_dim: usize) -> Self {
        HeadStrides {
            batch: heads * rows * head_dim,
            head: rows * head_dim,
            row: head_dim,
        }
    }

    /// The `(batch, head, row)` strides as the kernels' `long long`s (each checked <= i64::MAX
    /// by `check_input` / `check_output` before a launch uses them).
    pub(crate) fn kernel_args(self) -> [i64; 3] {
        [self.batch as i64, self.head as i64, self.row as i64]
    }
}

/// One strided input of the attention kernels: its buffer and the strides it is read with.
#[derive(Debug, Clone, Copy)]
pub struct AttentionInput<'a, T: Element> {
    /// The buffer (the view's first element is its first element).
    pub data: &'a DeviceSlice<T>,
    /// Batch, head and row strides in elements.
    pub strides: HeadStrides,
}

impl<'a, T: Element> AttentionInput<'a, T> {
    /// A dense `[B, heads, rows, head_dim]` input.
    pub fn dense(data: &'a DeviceSlice<T>, heads: usize, rows: usize, head_dim: usize) -> Self {
        AttentionInput {
            data,
            strides: HeadStrides::dense(heads, rows, head_dim),
        }
    }
}

fn too_large(op: &'static str, what: &'static str) -> Error {
    Error::TooLarge {
        op,
        what,
        value: u128::MAX,
        max: i64::MAX as u128,
    }
}

/// Checks the shape (`1 <= D <= 256`, sizes within `int`).
fn check_shape(op: &'static str, sh: &AttentionShape) -> Result<()> {
    if sh.head_dim == 0 || sh.head_dim > ATTENTION_MAX_HEAD_DIM {
        return Err(Error::Invalid {
            op,
            problem: format!(
                "head dimension D = {} is not supported: it must be 1..={ATTENTION_MAX_HEAD_DIM}",
                sh.head_dim
            ),
        });
    }
    to_i32(op, "batch", sh.batch)?;
    to_i32(op, "heads", sh.heads)?;
    to_i32(op, "q_len", sh.q_len)?;
    to_i32(op, "kv_len", sh.kv_len)?;
    Ok(())
}

/// `a · b · c · …` with overflow reported as too large.
fn product(op: &'static str, what: &'static str, xs: &[usize]) -> Result<usize> {
    xs.iter()
        .try_fold(1usize, |acc, &x| acc.checked_mul(x))
        .filter(|&n| n <= i64::MAX as usize)
        .ok_or_else(|| too_large(op, what))
}

/// Checks that every element a `[B, H, rows, D]` view with these strides reads lies inside the
/// slice, and that the strides fit the kernels' `long long`.
fn check_input<T: Element>(
    op: &'static str,
    what: &'static str,
    x: &AttentionInput<'_, T>,
    sh: &AttentionShape,
    rows: usize,
) -> Result<()> {
    let st = x.strides;
    for s in [st.batch, st.head, st.row] {
        if s > i64::MAX as usize {
            return Err(too_large(op, what));
        }
    }
    if sh.batch == 0 || sh.heads == 0 || rows == 0 {
        return Ok(()); // nothing is read
    }
    let last = [
        (sh.batch - 1, st.batch),
        (sh.heads - 1, st.head),
        (rows - 1, st.row),
    ]
    .iter()
    .try_fold(sh.head_dim - 1, |acc, &(n, s)| {
        n.checked_mul(s).and_then(|t| t.checked_add(acc))
    })
    .ok_or_else(|| too_large(op, what))?;
    if last >= x.data.len() {
        return Err(Error::Shape {
            op,
            what,
            expected: format!(
                "a [{}, {}, {rows}, {}] view with strides ({}, {}, {}, 1): at least {} elements",
                sh.batch,
                sh.heads,
                sh.head_dim,
                st.batch,
                st.head,
                st.row,
                last + 1
            ),
            found: format!("{} elements", x.data.len()),
        });
    }
    Ok(())
}

/// Checks a dense output or workspace: exactly `need` elements.
fn check_dense(
    op: &'static str,
    what: &'static str,
    len: usize,
    dims: &str,
    need: usize,
) -> Result<()> {
    if len == need {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            what,
            expected: format!("a dense {dims} array ({need} elements)"),
            found: format!("{len} elements"),
        })
    }
}

/// The kernels' stride arguments: (batch, head, row) of q, k, v.
fn strides(xs: [HeadStrides; 3]) -> [i64; 9] {
    // Each stride was checked to be <= i64::MAX by `check_input`.
    let mut out = [0i64; 9];
    for (n, s) in xs.iter().enumerate() {
        out[3 * n] = s.batch as i64;
        out[3 * n + 1] = s.head as i64;
        out[3 * n + 2] = s.row as i64;
    }
    out
}

/// `B·H·Nq` (checked not to overflow by `check_inputs` before any launch uses it).
fn q_rows_of(sh: &AttentionShape) -> usize {
    sh.batch.saturating_mul(sh.heads).saturating_mul(sh.q_len)
}

/// `B·H·Nk`, as [`q_rows_of`].
fn k_rows_of(sh: &AttentionShape) -> usize {
    sh.batch.saturating_mul(sh.heads).saturating_mul(sh.kv_len)
}

fn config(s: &Stream, rows: usize) -> LaunchConfig {
    LaunchConfig::new(grid(rows as u64, ROWS_PER_BLOCK, sms(s) * 64), THREADS)
}

/// The common checks of the forward and backward passes: shape, and q, k, v within their slices.
/// Returns `(B·H·Nq, B·H·Nk)`.
fn check_inputs<T: Element>(
    op: &'static str,
    sh: &AttentionShape,
    q: &AttentionInput<'_, T>,
    k: &AttentionInput<'_, T>,
    v: &AttentionInput<'_, T>,
) -> Result<(usize, usize)> {
    check_shape(op, sh)?;
    check_input(op, "q", q, sh, sh.q_len)?;
    check_input(op, "k", k, sh, sh.kv_len)?;
    check_input(op, "v", v, sh, sh.kv_len)?;
    let q_rows = product(op, "B·H·Nq·D", &[sh.batch, sh.heads, sh.q_len, sh.head_dim])?;
    let k_rows = product(
        op,
        "B·H·Nk·D",
        &[sh.batch, sh.heads, sh.kv_len, sh.head_dim],
    )?;
    Ok((q_rows / sh.head_dim, k_rows / sh.head_dim))
}

/// The forward pass: `out = softmax(scale · q kᵀ) v` (masked when `shape.causal`), dense
/// `[B, H, Nq, D]`, and `lse = log Σ_j exp(scale · q·k_j)` per query row, dense `[B, H, Nq]` in
/// the compute type (f32 for f32/f16/bf16, f64 for f64). f32, f64, f16 and bf16 (f16/bf16
/// computed in f32, rounded once on store). Launches nothing when `B·H·Nq == 0`; with `Nk == 0`
/// every row is `0` with `lse = −inf`.
///
/// Runs on the tensor cores where [`attention_tc_fits`] allows (f16/bf16, D = 64 or 128, sm_80+,
/// aligned views), on the SIMT kernels otherwise; [`attention_fwd_with`] picks explicitly.
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: &mut DeviceSlice<T>,
    lse: &mut DeviceSlice<T::Scalar>,
    scale: f64,
) -> Result<()> {
    attention_fwd_with(
        kern,
        s,
        AttentionAlgo::Auto,
        shape,
        q,
        k,
        v,
        out,
        lse,
        scale,
    )
}

/// [`attention_fwd`] on the kernels `algo` names ([`AttentionAlgo::TensorCore`] where the
/// problem does not fit them is [`Error::Unsupported`], nothing launched). Returns nothing;
/// both kernel families give the same results to rounding.
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_with<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: &mut DeviceSlice<T>,
    lse: &mut DeviceSlice<T::Scalar>,
    scale: f64,
) -> Result<()> {
    let out = AttentionOutput::dense(out, shape.heads, shape.q_len, shape.head_dim);
    fwd(kern, s, algo, shape, [q, k, v], out, true, lse, scale)
}

/// [`attention_fwd_with`] with `out` a strided view ([`AttentionOutput`]: for example
/// [`AttentionOutput::token_major`], a `[B, Nq, H, D]` array whose rows are the heads side by
/// side). The view must lie inside its buffer and not overlap itself ([`Error::Shape`],
/// [`Error::Invalid`]); the tensor-core kernels also need it 16-byte aligned with strides that
/// are multiples of 8 elements (else [`AttentionAlgo::Auto`] runs the SIMT kernel). Every family
/// writes the same values as into a dense `out`: only the addresses differ.
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_strided<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    shape: &AttentionShape,
    q: AttentionInput<'_, T>,
    k: AttentionInput<'_, T>,
    v: AttentionInput<'_, T>,
    out: AttentionOutput<'_, T>,
    lse: &mut DeviceSlice<T::Scalar>,
    scale: f64,
) -> Result<()> {
    fwd(kern, s, algo, shape, [q, k, v], out, false, lse, scale)
}

/// The forward behind both entry points; `dense_out`: `out` must be exactly the dense
/// `[B, H, Nq, D]` array (the classic contract), else any view inside its buffer.
#[allow(clippy::too_many_arguments)]
fn fwd<T: AttentionElement>(
    kern: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    shape: &AttentionShape,
    [q, k, v]: [AttentionInput<'_, T>; 3],
    out: AttentionOutput<'_, T>,
    dense_out: bool,
    lse: &mut DeviceSlice<T::Scalar>,
    scale: f64,
) -> Result<()> {
    const OP: &str = "scaled_dot_product_attention";
    let scale = T::scale_scalar(scale);
    let limits = s.context().limits();
    let cc = limits.compute_capability;
    let out_view = [(out.data.as_raw_ptr(), out.strides)];
    let misfit = tc_misfit(cc, shape, [&q, &k, &v], &out_view).or_else(|| {
        // Every sm_80+ device allows at least 99 KiB per block (opt-in); checked all the same.
        (fwd_mma_smem(shape.head_dim) > limits.max_shared_per_block_optin)
            .then_some("the tensor-core kernels need more shared memory than this device allows")
    });
    let wg_misfit = fwd_wgmma::misfit(cc, limits.max_shared_per_block_optin, shape, misfit);
    let unsupported = |op, why| Error::Unsupported {
        op,
        dtype: T::DTYPE,
        why,
    };
    let family = match (algo, misfit, wg_misfit) {
        (AttentionAlgo::Simt, ..) => Fwd::Simt,
        (AttentionAlgo::TensorCore, None, _) => Fwd::Mma,
        (AttentionAlgo::TensorCore, Some(why), _) => {
            return Err(unsupported(
                "scaled_dot_product_attention (tensor cores)",
                why,
            ))
        }
        (AttentionAlgo::Wgmma, _, None) => Fwd::Wgmma,
        (AttentionAlgo::Wgmma, _, Some(why)) => {
            return Err(unsupported("scaled_dot_product_attention (wgmma)", why))
        }
        (AttentionAlgo::Auto, m, w) => match (fwd_wgmma::fwd_override(), m, w) {
            (Some(FamilyOverride::Simt), ..) => Fwd::Simt,
            (Some(FamilyOverride::Mma), None, _) => Fwd::Mma,
            (_, _, None) => Fwd::Wgmma,
            (_, None, _) => Fwd::Mma,
            _ => Fwd::Simt,
        },
    };
    // With no key every row is 0 with lse = −inf; the wgmma kernel's tensor maps need extents of
    // at least one, so the mma.sync kernel (the same results) serves that case.
    let family = if family == Fwd::Wgmma && shape.kv_len == 0 {
        Fwd::Mma
    } else {
        family
    };
    let tensor_cores = family == Fwd::Mma;
    // The SIMT family runs the tiled kernel where it fits (f32, f16, bf16; D <= 128), else the
    // warp-a-row one.
    let tiled = family == Fwd::Simt && tiled::fits::<T>(shape, limits);
    let kernel = if tiled {
        tiled::kernel::<T>(kern, shape.head_dim)?
    } else if !tensor_cores {
        dispatch::attn_fwd::<T>(kern)?
    } else if shape.head_dim == 64 {
        dispatch::attn_fwd_mma_d64::<T>(kern)?
    } else {
        dispatch::attn_fwd_mma_d128::<T>(kern)?
    };
    let (q_rows, _) = check_inputs(OP, shape, &q, &k, &v)?;
    let dims = format!(
        "[{}, {}, {}, {}]",
        shape.batch, shape.heads, shape.q_len, shape.head_dim
    );
    let AttentionOutput {
        data: out,
        strides: out_st,
    } = out;
    if dense_out {
        check_dense(OP, "out", out.len(), &dims, q_rows * shape.head_dim)?;
    } else {
        check_output(OP, "out", out.len(), 0, out_st, shape, shape.q_len)?;
    }
    let lse_dims = format!("[{}, {}, {}]", shape.batch, shape.heads, shape.q_len);
    check_dense(OP, "lse", lse.len(), &lse_dims, q_rows)?;
    if q_rows == 0 {
        return Ok(());
    }
    if family == Fwd::Wgmma {
        return fwd_wgmma::launch(kern, s, shape, &q, &k, &v, (out, out_st), lse, scale);
    }
    let st = strides([q.strides, k.strides, v.strides]);
    let [o_sb, o_sh, o_sr] = [out_st.batch, out_st.head, out_st.row].map(|x| x as i64);
    let sh = shape;
    // SAFETY: the kernel reads q, k, v only at (b, h, row, d) with b < B, h < H, row < Nq (q) or
    // Nk (k, v) and d < D through the strides given, whose largest offset `check_input` checked
    // to lie inside each slice; it writes out at (b, h, row, d), row < Nq, through out's strides
    // (each <= i64::MAX), whose largest offset was checked to lie inside out (dense: exactly
    // B·H·Nq·D elements) and whose elements are distinct (no two threads write one address),
    // and lse[r] for rows r < B·H·Nq, the exact length checked above. Every size is an `int`
    // (checked) and the grid-stride loop serves any grid.
    let cfg = if tensor_cores {
        // One CTA of 128 threads per 128 query rows of one (b, h) (a grid-stride loop beyond),
        // with the dynamic shared memory the kernel is written for (above the 48 KiB default).
        let smem = fwd_mma_smem(sh.head_dim);
        crate::launch::raise_smem(kernel.function(), smem)?;
        let tiles = (sh.batch * sh.heads) as u64 * sh.q_len.div_ceil(FWD_MMA_ROWS) as u64;
        LaunchConfig::new(grid(tiles, 1, i32::MAX as u64), THREADS).with_shared_mem(smem)
    } else if tiled {
        // One CTA of 256 threads per 64 query rows of one (b, h), its shared memory raised.
        tiled::config(kernel, sh)?
    } else {
        config(s, q_rows)
    };
    // (The tensor-core kernels and the tiled SIMT one read and write exactly what the
    // warp-a-row kernel does: q rows < Nq, k and v rows < Nk, columns < D, out and lse rows <
    // B·H·Nq; their zero-filled copies of key rows past Nk (and, tiled, of columns past D) read
    // nothing. The tiled kernel's 32-bit tile count is below 2^31 and Nq, Nk leave room for
    // its int row arithmetic (`tiled::fits`).)
    unsafe {
        kernel.launch(
            s,
            &cfg,
            q.data,
            k.data,
            v.data,
            out,
            lse,
            sh.batch as i32,
            sh.heads as i32,
            sh.q_len as i32,
            sh.kv_len as i32,
            sh.head_dim as i32,
            st[0],
            st[1],
            st[2],
            st[3],
            st[4],
            st[5],
            st[6],
            st[7],
            st[8],
            o_sb,
            o_sh,
            o_sr,
            scale,
            i32::from(sh.causal),
        )
    }?;
    Ok(())
}

/// A causal `B × H × Nq × Nk` shape at D = 64, for the attention modules' unit tests.
#[cfg(test)]
fn causal_test_shape(batch: usize, heads: usize, q_len: usize, kv_len: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads,
        q_len,
        kv_len,
        head_dim: 64,
        causal: true,
    }
}
