//! Optimizer updates (`cuda/optim.cu`): PyTorch's SGD (with momentum, dampening, Nesterov and
//! weight decay) and Adam/AdamW, **in place** on the parameter and its state, with Adam's step
//! count read from a device counter — so a training step can be captured into a CUDA graph and
//! replayed (the graph reads and writes the same addresses each time, and nothing the host
//! computes per step is baked into it).

use crate::dispatch;
use crate::launch::{check_len, grid, to_i32, BLOCK};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

fn config(n: usize) -> LaunchConfig {
    LaunchConfig::new(grid(n as u64, BLOCK as u64, i32::MAX as u64), BLOCK)
}

/// SGD's hyper-parameters (PyTorch's names and meaning).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdParams<S> {
    /// Learning rate.
    pub lr: S,
    /// Momentum factor (0: plain SGD, no state).
    pub momentum: S,
    /// Dampening of the momentum.
    pub dampening: S,
    /// L2 penalty added to the gradient (`g + wd · p`).
    pub weight_decay: S,
    /// Nesterov momentum.
    pub nesterov: bool,
}

/// `p ← p − lr · (g + wd · p)` (SGD without momentum), in place. `p` and `g` of one length.
pub fn sgd<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &mut DeviceSlice<T>,
    g: &DeviceSlice<T>,
    lr: T::Scalar,
    weight_decay: T::Scalar,
) -> Result<()> {
    let kernel = dispatch::sgd::<T>(k)?;
    let n = p.len();
    check_len("sgd", "grad", g.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: elements i < n of each buffer only (grid-stride loop), n checked for every buffer.
    unsafe { kernel.launch(s, &config(n), p, g, n as u64, lr, weight_decay) }?;
    Ok(())
}

/// SGD with momentum, in place on `p` and the momentum buffer `b`: `d = g + wd·p`;
/// `b ← first ? d : momentum·b + (1 − dampening)·d`; `p ← p − lr · (nesterov ? d + momentum·b :
/// b)`. With `first`, `b` is written without being read.
#[allow(clippy::too_many_arguments)]
pub fn sgd_momentum<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &mut DeviceSlice<T>,
    g: &DeviceSlice<T>,
    b: &mut DeviceSlice<T>,
    params: SgdParams<T::Scalar>,
    first: bool,
) -> Result<()> {
    const OP: &str = "sgd (momentum)";
    let kernel = dispatch::sgd_momentum::<T>(k)?;
    let n = p.len();
    check_len(OP, "grad", g.len(), n)?;
    check_len(OP, "momentum buffer", b.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: elements i < n of each buffer only, n checked for every buffer.
    unsafe {
        kernel.launch(
            s,
            &config(n),
            p,
            g,
            b,
            n as u64,
            params.lr,
            params.momentum,
            params.dampening,
            params.weight_decay,
            i32::from(params.nesterov),
            i32::from(first),
        )
    }?;
    Ok(())
}

/// Adam's hyper-parameters (PyTorch's names). The bias corrections come from the step count on
/// the device (see [`adam`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamParams<S> {
    /// Learning rate.
    pub lr: S,
    /// β1 (first-moment decay).
    pub beta1: S,
    /// β2 (second-moment decay).
    pub beta2: S,
    /// Added to the denominator.
    pub eps: S,
    /// Weight decay: an L2 term in the gradient (Adam) or decoupled (AdamW).
    pub weight_decay: S,
    /// Decoupled weight decay (AdamW: `p ← p · (1 − lr·wd)` before the update).
    pub decoupled: bool,
}

/// One Adam step in place on `p`, `m` and `v`, with `t = steps[index]` (the step number, ≥ 1,
/// on the device — [`increment_counters`] advances it before the update):
/// `m ← β1·m + (1−β1)·g`, `v ← β2·v + (1−β2)·g²`,
/// `p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)` (PyTorch's formula).
#[allow(clippy::too_many_arguments)]
pub fn adam<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &mut DeviceSlice<T>,
    g: &DeviceSlice<T>,
    m: &mut DeviceSlice<T>,
    v: &mut DeviceSlice<T>,
    steps: &DeviceSlice<i32>,
    index: usize,
    params: AdamParams<T::Scalar>,
) -> Result<()> {
    const OP: &str = "adam";
    let kernel = dispatch::adam::<T>(k)?;
    let n = p.len();
    check_len(OP, "grad", g.len(), n)?;
    check_len(OP, "exp_avg", m.len(), n)?;
    check_len(OP, "exp_avg_sq", v.len(), n)?;
    if index >= steps.len() {
        return Err(Error::Invalid {
            op: OP,
            problem: format!("step counter {index} of {} counters", steps.len()),
        });
    }
    let idx = to_i32(OP, "index", index)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: elements i < n of p, g, m, v (n checked for each) and element `index` of `steps`
    // (checked above) only.
    unsafe {
        kernel.launch(
            s,
            &config(n),
            p,
            g,
            m,
            v,
            steps,
            idx,
            n as u64,
            params.lr,
            params.beta1,
            params.beta2,
            params.eps,
            params.weight_decay,
            i32::from(params.decoupled),
        )
    }?;
    Ok(())
}

/// `counters[i] += 1` for every counter (one launch for all of an optimizer's step counts).
pub fn increment_counters(k: &Kernels, s: &Stream, counters: &mut DeviceSlice<i32>) -> Result<()> {
    let n = counters.len();
    let c = to_i32("increment_counters", "counters", n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: elements i < n of `counters` only.
    unsafe { k.increment_i32()?.launch(s, &config(n), counters, c) }?;
    Ok(())
}

/// How many tensors one multi-tensor launch updates ([`sgd4`], [`sgd_momentum4`], [`adam4`]).
pub const MULTI_TENSOR: usize = 4;

/// Checks every `other` slot has its parameter's length; returns the four lengths.
fn slot_lens(
    op: &'static str,
    p: &[usize; 4],
    others: &[(&'static str, [usize; 4])],
) -> Result<u64> {
    for (what, lens) in others {
        for j in 0..4 {
            check_len(op, what, lens[j], p[j])?;
        }
    }
    Ok(p.iter().map(|&n| n as u64).sum())
}

/// [`sgd`] for four parameter tensors in one launch (same arithmetic per element).
pub fn sgd4<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: [&mut DeviceSlice<T>; 4],
    g: [&DeviceSlice<T>; 4],
    lr: T::Scalar,
    weight_decay: T::Scalar,
) -> Result<()> {
    let kernel = dispatch::sgd4::<T>(k)?;
    let n = [p[0].len(), p[1].len(), p[2].len(), p[3].len()];
    let total = slot_lens("sgd (4 tensors)", &n, &[("grad", g.map(|x| x.len()))])?;
    if total == 0 {
        return Ok(());
    }
    let [p0, p1, p2, p3] = p;
    let [g0, g1, g2, g3] = g;
    let cfg = config(total as usize);
    // SAFETY: element e < n_j of tensor j's buffers only (the kernel finds j from the running
    // sums of n0..n3); every buffer of slot j was checked to hold n_j elements.
    unsafe {
        kernel.launch(
            s,
            &cfg,
            p0,
            g0,
            p1,
            g1,
            p2,
            g2,
            p3,
            g3,
            n[0] as u64,
            n[1] as u64,
            n[2] as u64,
            n[3] as u64,
            lr,
            weight_decay,
        )
    }?;
    Ok(())
}

/// [`sgd_momentum`] for four parameter tensors and their momentum buffers in one launch.
pub fn sgd_momentum4<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: [&mut DeviceSlice<T>; 4],
    g: [&DeviceSlice<T>; 4],
    b: [&mut DeviceSlice<T>; 4],
    params: SgdParams<T::Scalar>,
    first: bool,
) -> Result<()> {
    let kernel = dispatch::sgd_momentum4::<T>(k)?;
    let n = [p[0].len(), p[1].len(), p[2].len(), p[3].len()];
    let bl = [b[0].len(), b[1].len(), b[2].len(), b[3].len()];
    let total = slot_lens(
        "sgd (momentum, 4 tensors)",
        &n,
        &[("grad", g.map(|x| x.len())), ("momentum buffer", bl)],
    )?;
    if total == 0 {
        return Ok(());
    }
    let [p0, p1, p2, p3] = p;
    let [g0, g1, g2, g3] = g;
    let [b0, b1, b2, b3] = b;
    let cfg = config(total as usize);
    // SAFETY: as in `sgd4`: element e < n_j of slot j's buffers only, lengths checked.
    unsafe {
        kernel.launch(
            s,
            &cfg,
            p0,
            g0,
            b0,
            p1,
            g1,
            b1,
            p2,
            g2,
            b2,
            p3,
            g3,
            b3,
            n[0] as u64,
            n[1] as u64,
            n[2] as u64,
            n[3] as u64,
            params.lr,
            params.momentum,
            params.dampening,
            params.weight_decay,
            i32::from(params.nesterov),
            i32::from(first),
        )
    }?;
    Ok(())
}

/// [`adam`] for four parameter tensors in one launch; tensor j's step count is `steps[j]`.
#[allow(clippy::too_many_arguments)]
pub fn adam4<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: [&mut DeviceSlice<T>; 4],
    g: [&DeviceSlice<T>; 4],
    m: [&mut DeviceSlice<T>; 4],
    v: [&mut DeviceSlice<T>; 4],
    steps: &DeviceSlice<i32>,
    params: AdamParams<T::Scalar>,
) -> Result<()> {
    const OP: &str = "adam (4 tensors)";
    let kernel = dispatch::adam4::<T>(k)?;
    let n = [p[0].len(), p[1].len(), p[2].len(), p[3].len()];
    let ml = [m[0].len(), m[1].len(), m[2].len(), m[3].len()];
    let vl = [v[0].len(), v[1].len(), v[2].len(), v[3].len()];
    let total = slot_lens(
        OP,
        &n,
        &[
            ("grad", g.map(|x| x.len())),
            ("exp_avg", ml),
            ("exp_avg_sq", vl),
        ],
    )?;
    check_len(OP, "steps", steps.len(), MULTI_TENSOR)?;
    if total == 0 {
        return Ok(());
    }
    let [p0, p1, p2, p3] = p;
    let [g0, g1, g2, g3] = g;
    let [m0, m1, m2, m3] = m;
    let [v0, v1, v2, v3] = v;
    let cfg = config(total as usize);
    // SAFETY: element e < n_j of slot j's buffers only and steps[j] for j < 4; lengths checked.
    unsafe {
        kernel.launch(
            s,
            &cfg,
            p0,
            g0,
            m0,
            v0,
            p1,
            g1,
            m1,
            v1,
            p2,
            g2,
            m2,
            v2,
            p3,
            g3,
            m3,
            v3,
            n[0] as u64,
            n[1] as u64,
            n[2] as u64,
            n[3] as u64,
            steps,
            params.lr,
            params.beta1,
            params.beta2,
            params.eps,
            params.weight_decay,
            i32::from(params.decoupled),
        )
    }?;
    Ok(())
}
