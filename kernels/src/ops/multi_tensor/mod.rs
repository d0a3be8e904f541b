//! Multi-tensor ("foreach") ops (`cuda/multi_tensor.cu`): one launch fills, scales, sums the
//! squares of, casts, or Adam-updates up to a table's worth of tensors — PyTorch's
//! `multi_tensor_apply` — instead of one launch per tensor. A list longer than a table
//! ([`MT1_CAP`], [`MT2_CAP`], [`MTA_CAP`]) takes several launches ([`plan`]).
//!
//! The table of (address, length) entries is a by-value kernel parameter built here from the
//! slices themselves, so it holds only addresses of live buffers with their real lengths; each
//! buffer is added to the launch's [`ArgList`] with `read_in_table` / `write_in_table`, which
//! borrows it for the launch, orders it on the stream (waiting for its uses on other streams,
//! as any kernel argument) and, in a graph capture, hands it to the graph. Buffers of another
//! device are refused by the launch ([`cuda_stack_driver::Error::DeviceMismatch`]) before
//! anything is queued.
//!
//! Every tensor's block count depends on its length alone, so results never depend on the
//! GPU; [`sumsq_partials_many`] writes exactly the partial sums [`super::sumsq_partials`]
//! writes tensor by tensor.

mod plan;
mod table;

pub use plan::{elementwise_blocks, plan, MtLaunch, MT_ELEMS_PER_BLOCK, MT_MAX_BLOCKS_PER_TENSOR};
pub use table::{MtAdamTable, MtTable1, MtTable2, MT1_CAP, MT2_CAP, MTA_CAP};

use super::optim::AdamParams;
use super::sumsq_parts;
use crate::dispatch;
use crate::launch::{check_len, BLOCK};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::launch::ArgList;
use cuda_stack_driver::{DeviceRepr, DeviceSlice, Function, LaunchConfig, Stream};

/// The launch of `l`'s blocks (never 0: a launch has at least one tensor with blocks).
fn config(l: &MtLaunch) -> LaunchConfig {
    LaunchConfig::new(l.blocks().max(1), BLOCK)
}

/// Launches `f` with `args` (the table and the kernel's other parameters).
///
/// # Safety
/// `args` must be the kernel's parameter list, its table filled from the launch's own
/// `read_in_table` / `write_in_table` addresses with the buffers' real lengths, and the block
/// starts of `l`.
unsafe fn launch(f: &Function, s: &Stream, l: &MtLaunch, args: &ArgList<'_>) -> Result<()> {
    // SAFETY: forwarded to the caller: every address the kernel reaches is a tracked buffer of
    // the list, accessed below its length (the kernel's loops stop at len[j]).
    unsafe { f.launch_args(s, &config(l), args) }?;
    Ok(())
}

fn block_starts<const N: usize>(l: &MtLaunch, out: &mut [u32; N]) {
    for (o, &b) in out.iter_mut().zip(&l.block_start) {
        *o = b;
    }
}

/// `x[i] = value` for every element of every tensor of `xs` (a multi-tensor `fill`: zeroing
/// optimizer state, gradients, accumulators) — one launch per [`MT1_CAP`] non-empty tensors.
pub fn fill_many<T: Element>(
    k: &Kernels,
    s: &Stream,
    xs: &mut [&mut DeviceSlice<T>],
    value: T::Scalar,
) -> Result<()> {
    let f = dispatch::mt_fill::<T>(k)?;
    let lens: Vec<usize> = xs.iter().map(|x| x.len()).collect();
    let launches = plan(&lens, MT1_CAP, elementwise_blocks)?;
    let mut items = xs.iter_mut().enumerate();
    for l in &launches {
        let mut args = ArgList::with_capacity(2);
        let mut t: MtTable1 = bytemuck::Zeroable::zeroed();
        for (slot, &i) in l.tensors.iter().enumerate() {
            let x = next_item(&mut items, i)?;
            t.len[slot] = x.len() as u64;
            t.addr[slot] = args.write_in_table(&mut **x);
        }
        t.count = l.tensors.len() as u32;
        block_starts(l, &mut t.block_start);
        args.bytes(bytemuck::bytes_of(&t)).scalar(value);
        // SAFETY: `mt_fill(MtTable1 t, T value)` writes elements i < len[j] of tensor j only;
        // every address was tracked (written) with its slice's length.
        unsafe { launch(f, s, l, &args) }?;
    }
    Ok(())
}

/// `x[i] *= scale[0]` for every element of every tensor of `xs` (`scale`: one element on the
/// device, e.g. the clip coefficient of [`super::clip_coef`]) — the multi-tensor
/// [`super::scale_by_device`].
pub fn scale_many<T: Element>(
    k: &Kernels,
    s: &Stream,
    xs: &mut [&mut DeviceSlice<T>],
    scale: &DeviceSlice<T>,
) -> Result<()> {
    let f = dispatch::mt_scale::<T>(k)?;
    check_len("scale (multi-tensor)", "scale", scale.len(), 1)?;
    let lens: Vec<usize> = xs.iter().map(|x| x.len()).collect();
    let launches = plan(&lens, MT1_CAP, elementwise_blocks)?;
    let mut items = xs.iter_mut().enumerate();
    for l in &launches {
        let mut args = ArgList::with_capacity(2);
        let mut t: MtTable1 = bytemuck::Zeroable::zeroed();
        for (slot, &i) in l.tensors.iter().enumerate() {
            let x = next_item(&mut items, i)?;
            t.len[slot] = x.len() as u64;
            t.addr[slot] = args.write_in_table(&mut **x);
        }
        t.count = l.tensors.len() as u32;
        block_starts(l, &mut t.block_start);
        args.bytes(bytemuck::bytes_of(&t)).read(scale);
        // SAFETY: `mt_scale(MtTable1 t, const T* scale)` touches elements i < len[j] of tensor
        // j and scale[0] (length checked).
        unsafe { launch(f, s, l, &args) }?;
    }
    Ok(())
}

/// The number of partial sums [`sumsq_partials_many`] writes for tensors of these lengths:
/// `Σ sumsq_parts(n)`, at least 1 per tensor (the per-tensor layout).
pub fn sumsq_parts_many(lens: &[usize]) -> usize {
    lens.iter().map(|&n| sumsq_parts(n)).sum()
}

/// The partial sums of squares of every tensor of `xs`, in order, into `partial`
/// ([`sumsq_parts_many`] elements): tensor j's [`sumsq_parts`]`(n_j)` partials, each the
/// same value the per-tensor [`super::sumsq_partials`] writes (same blocks, same order), so
/// [`super::clip_coef`] over them gives a bit-identical norm. An empty tensor writes one 0.
pub fn sumsq_partials_many<T: Element>(
    k: &Kernels,
    s: &Stream,
    xs: &[&DeviceSlice<T>],
    partial: &mut DeviceSlice<T>,
) -> Result<()> {
    let f = dispatch::mt_sumsq::<T>(k)?;
    let lens: Vec<usize> = xs.iter().map(|x| x.len()).collect();
    check_len(
        "clip_grad_norm (multi-tensor)",
        "partial",
        partial.len(),
        sumsq_parts_many(&lens),
    )?;
    let launches = plan(&lens, MT1_CAP, sumsq_parts)?;
    let mut offset = 0usize;
    for l in &launches {
        let mut args = ArgList::with_capacity(2);
        let mut t: MtTable1 = bytemuck::Zeroable::zeroed();
        for (slot, &i) in l.tensors.iter().enumerate() {
            let x = xs
                .get(i)
                .ok_or_else(|| internal("a planned tensor out of range"))?;
            t.len[slot] = x.len() as u64;
            t.addr[slot] = args.read_in_table(x);
        }
        t.count = l.tensors.len() as u32;
        block_starts(l, &mut t.block_start);
        args.bytes(bytemuck::bytes_of(&t));
        args.write_at(&mut *partial, offset)?;
        // SAFETY: `mt_sumsq(MtTable1 t, T* partial)`: block b reads elements i < len[j] of its
        // tensor and writes partial[offset + b] for b < blocks; offset + blocks <= the
        // partial's length (the blocks of all launches sum to it, checked above).
        unsafe { launch(f, s, l, &args) }?;
        offset += l.blocks() as usize;
    }
    Ok(())
}

/// `dst[j][i] = src[j][i]` converted, for every tensor pair (the multi-tensor
/// [`super::cast`], each element rounded once): f32 → bf16 / f16 (a model's weights for
/// mixed precision, all in one launch) and bf16 / f16 → f32 (their gradients back). Pairs of
/// one length; other dtype pairs are [`Error::Invalid`].
pub fn cast_many<A: DeviceRepr, B: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    src: &[&DeviceSlice<A>],
    dst: &mut [&mut DeviceSlice<B>],
) -> Result<()> {
    const OP: &str = "cast (multi-tensor)";
    let f = dispatch::mt_cast::<A, B>(k)?;
    check_len(OP, "destinations", dst.len(), src.len())?;
    for (a, b) in src.iter().zip(dst.iter()) {
        check_len(OP, "destination", b.len(), a.len())?;
    }
    let lens: Vec<usize> = src.iter().map(|x| x.len()).collect();
    let launches = plan(&lens, MT2_CAP, elementwise_blocks)?;
    let mut items = dst.iter_mut().enumerate();
    for l in &launches {
        let mut args = ArgList::with_capacity(1);
        let mut t: MtTable2 = bytemuck::Zeroable::zeroed();
        for (slot, &i) in l.tensors.iter().enumerate() {
            let x = src
                .get(i)
                .ok_or_else(|| internal("a planned tensor out of range"))?;
            let y = next_item(&mut items, i)?;
            t.len[slot] = x.len() as u64;
            t.src[slot] = args.read_in_table(x);
            t.dst[slot] = args.write_in_table(&mut **y);
        }
        t.count = l.tensors.len() as u32;
        block_starts(l, &mut t.block_start);
        args.bytes(bytemuck::bytes_of(&t));
        // SAFETY: `mt_cast(MtTable2 t)` reads src[j][i] and writes dst[j][i] for i < len[j],
        // the length of both (checked above).
        unsafe { launch(f, s, l, &args) }?;
    }
    Ok(())
}

/// One tensor of a multi-tensor Adam step: the parameter, its gradient and moments (one
/// length), its step counter (an index into the `steps` buffer) and its weight decay.
pub struct AdamTensor<'a, T> {
    /// The parameter, updated in place.
    pub p: &'a mut DeviceSlice<T>,
    /// Its gradient.
    pub g: &'a DeviceSlice<T>,
    /// The first moment (`exp_avg`), updated in place.
    pub m: &'a mut DeviceSlice<T>,
    /// The second moment (`exp_avg_sq`), updated in place.
    pub v: &'a mut DeviceSlice<T>,
    /// `steps[step_index]` is this tensor's step number (already advanced for this step).
    pub step_index: usize,
    /// This tensor's weight decay (in place of `AdamParams::weight_decay`).
    pub weight_decay: f64,
}

/// The kernel [`adam_many`] launches for `T` (once per [`MTA_CAP`] tensors); its parameter
/// [`ADAM_MANY_LR_PARAM`] is the learning rate, a `T::Scalar`.
pub fn adam_many_kernel<T: Element>(k: &Kernels) -> Result<&Function> {
    dispatch::mt_adam::<T>(k)
}

/// The index of the learning rate among the parameters of [`adam_many_kernel`]'s kernel
/// (`mt_adam(MtAdamTable t, const int* steps, T lr, …)`). The rate only scales the update: no
/// memory access depends on it, so a captured graph's copy may be changed between replays.
pub const ADAM_MANY_LR_PARAM: usize = 2;

/// [`super::adam`] for every tensor of `tensors` — one launch per [`MTA_CAP`] non-empty
/// tensors, each tensor with its own step counter and weight decay (`params.weight_decay` is
/// not used) — and, with `grad_scale` (one element on the device, e.g. the clip coefficient
/// of [`super::clip_coef`]), each gradient multiplied by `grad_scale[0]` as it is read
/// (rounded once: the bits that scaling the gradients in place first would give), so a
/// clipped step needs no pass over the gradients and no host round trip.
pub fn adam_many<T: Element>(
    k: &Kernels,
    s: &Stream,
    tensors: &mut [AdamTensor<'_, T>],
    steps: &DeviceSlice<i32>,
    grad_scale: Option<&DeviceSlice<T>>,
    params: AdamParams<T::Scalar>,
) -> Result<()> {
    const OP: &str = "adam (multi-tensor)";
    let f = dispatch::mt_adam::<T>(k)?;
    for t in tensors.iter() {
        let n = t.p.len();
        check_len(OP, "grad", t.g.len(), n)?;
        check_len(OP, "exp_avg", t.m.len(), n)?;
        check_len(OP, "exp_avg_sq", t.v.len(), n)?;
        if t.step_index >= steps.len() || i32::try_from(t.step_index).is_err() {
            return Err(Error::Invalid {
                op: OP,
                problem: format!("step counter {} of {} counters", t.step_index, steps.len()),
            });
        }
    }
    if let Some(sc) = grad_scale {
        check_len(OP, "grad_scale", sc.len(), 1)?;
    }
    let lens: Vec<usize> = tensors.iter().map(|t| t.p.len()).collect();
    let launches = plan(&lens, MTA_CAP, elementwise_blocks)?;
    let mut items = tensors.iter_mut().enumerate();
    for l in &launches {
        let mut args = ArgList::with_capacity(7);
        let mut t: MtAdamTable = bytemuck::Zeroable::zeroed();
        for (slot, &i) in l.tensors.iter().enumerate() {
            let x = next_item(&mut items, i)?;
            t.len[slot] = x.p.len() as u64;
            t.wd[slot] = x.weight_decay;
            // Checked above to fit an i32.
            t.step[slot] = x.step_index as i32;
            t.p[slot] = args.write_in_table(&mut *x.p);
            t.g[slot] = args.read_in_table(x.g);
            t.m[slot] = args.write_in_table(&mut *x.m);
            t.v[slot] = args.write_in_table(&mut *x.v);
        }
        if let Some(sc) = grad_scale {
            t.scale = args.read_in_table(sc);
        }
        t.count = l.tensors.len() as u32;
        block_starts(l, &mut t.block_start);
        args.bytes(bytemuck::bytes_of(&t))
            .read(steps)
            .scalar(params.lr)
            .scalar(params.beta1)
            .scalar(params.beta2)
            .scalar(params.eps)
            .scalar(i32::from(params.decoupled));
        // SAFETY: `mt_adam(MtAdamTable t, const int* steps, T lr, T b1, T b2, T eps, int
        // adamw)` touches elements e < len[j] of tensor j's p, g, m, v (one length, checked),
        // steps[step[j]] (each index < steps.len(), checked) and scale[0] when the scale is
        // given (length checked).
        unsafe { launch(f, s, l, &args) }?;
    }
    Ok(())
}

/// The next item of `items` with index `i` (the plan's indices increase, so earlier items are
/// skipped — the empty tensors left out of the launch).
fn next_item<'x, X>(
    items: &mut impl Iterator<Item = (usize, &'x mut X)>,
    i: usize,
) -> Result<&'x mut X> {
    for (j, x) in items.by_ref() {
        if j == i {
            return Ok(x);
        }
    }
    Err(internal("a planned tensor out of range"))
}

fn internal(what: &str) -> Error {
    Error::Invalid {
        op: "multi-tensor",
        problem: format!("internal error: {what}"),
    }
}
