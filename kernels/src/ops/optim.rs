//! Optimizer updates (`cuda/optim.cu`): PyTorch's SGD (with momentum, dampening, Nesterov and
//! weight decay) and Adam/AdamW, out of place — new parameter and state buffers are written, so
//! tensors stay immutable.

use crate::dispatch;
use crate::launch::{check_len, grid, BLOCK};
use crate::{Element, Kernels, Result};
use cuda_driver::{DeviceSlice, LaunchConfig, Stream};

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

/// `p_out = p − lr · (g + wd · p)` (SGD without momentum). All slices of one length.
pub fn sgd<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &DeviceSlice<T>,
    g: &DeviceSlice<T>,
    p_out: &mut DeviceSlice<T>,
    lr: T::Scalar,
    weight_decay: T::Scalar,
) -> Result<()> {
    let kernel = dispatch::sgd::<T>(k)?;
    let n = p_out.len();
    check_len("sgd", "param", p.len(), n)?;
    check_len("sgd", "grad", g.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: elements i < n of each buffer only (grid-stride loop), n checked for every buffer.
    unsafe { kernel.launch(s, &config(n), p, g, p_out, n as u64, lr, weight_decay) }?;
    Ok(())
}

/// SGD with momentum: `d = g + wd·p`; `b_out = first ? d : momentum·b + (1 − dampening)·d`;
/// `p_out = p − lr · (nesterov ? d + momentum·b_out : b_out)`. With `first`, `b` is not read
/// (pass any slice of the right length, e.g. `g`).
#[allow(clippy::too_many_arguments)]
pub fn sgd_momentum<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &DeviceSlice<T>,
    g: &DeviceSlice<T>,
    b: &DeviceSlice<T>,
    p_out: &mut DeviceSlice<T>,
    b_out: &mut DeviceSlice<T>,
    params: SgdParams<T::Scalar>,
    first: bool,
) -> Result<()> {
    const OP: &str = "sgd (momentum)";
    let kernel = dispatch::sgd_momentum::<T>(k)?;
    let n = p_out.len();
    check_len(OP, "param", p.len(), n)?;
    check_len(OP, "grad", g.len(), n)?;
    check_len(OP, "momentum buffer", b.len(), n)?;
    check_len(OP, "momentum buffer out", b_out.len(), n)?;
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
            p_out,
            b_out,
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

/// Adam's hyper-parameters for one step (PyTorch's names; `bias_correction1 = 1 − β1^t`,
/// `bias_correction2 = 1 − β2^t` for step `t ≥ 1`).
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
    /// `1 − β1^t`.
    pub bias_correction1: S,
    /// `1 − β2^t`.
    pub bias_correction2: S,
    /// Decoupled weight decay (AdamW: `p ← p · (1 − lr·wd)` before the update).
    pub decoupled: bool,
}

/// One Adam step: `m' = β1·m + (1−β1)·g`, `v' = β2·v + (1−β2)·g²`,
/// `p' = p − (lr / bc1) · m' / (√v' / √bc2 + eps)` (PyTorch's formula; see [`AdamParams`] for
/// weight decay). All seven slices of one length.
#[allow(clippy::too_many_arguments)]
pub fn adam<T: Element>(
    k: &Kernels,
    s: &Stream,
    p: &DeviceSlice<T>,
    g: &DeviceSlice<T>,
    m: &DeviceSlice<T>,
    v: &DeviceSlice<T>,
    p_out: &mut DeviceSlice<T>,
    m_out: &mut DeviceSlice<T>,
    v_out: &mut DeviceSlice<T>,
    params: AdamParams<T::Scalar>,
) -> Result<()> {
    const OP: &str = "adam";
    let kernel = dispatch::adam::<T>(k)?;
    let n = p_out.len();
    for (what, len) in [
        ("param", p.len()),
        ("grad", g.len()),
        ("exp_avg", m.len()),
        ("exp_avg_sq", v.len()),
        ("exp_avg out", m_out.len()),
        ("exp_avg_sq out", v_out.len()),
    ] {
        check_len(OP, what, len, n)?;
    }
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
            m,
            v,
            p_out,
            m_out,
            v_out,
            n as u64,
            params.lr,
            params.beta1,
            params.beta2,
            params.eps,
            params.weight_decay,
            params.bias_correction1,
            params.bias_correction2,
            i32::from(params.decoupled),
        )
    }?;
    Ok(())
}
