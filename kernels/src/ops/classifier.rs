//! The fused classifier (`cuda/classifier.cu`, as llm.c does it): per-row cross-entropy and
//! the gradient of the losses with respect to the logits in one kernel that reads each logits
//! row twice and never stores the softmax; or split across a forward and a backward, the loss
//! pass saving each row's log-sum-exp ([`classifier_loss_lse`]) so that the gradient
//! ([`classifier_grad_lse_inplace`]) reads each row once. f32, f64, f16 and bf16 logits;
//! losses, log-sum-exps, the upstream gradient and the scale in [`Element::Scalar`].

use crate::dispatch;
use crate::launch::{check_len, check_matrix, to_int_dim};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Threads per block: one block per row (the kernels require exactly this).
pub const CLASSIFIER_THREADS: u32 = 512;

fn config(rows: usize) -> LaunchConfig {
    LaunchConfig::new(rows.clamp(1, 65535) as u32, CLASSIFIER_THREADS)
}

// Extents are capped at 2^30 (`to_int_dim`, `launch::MAX_INT_DIM`), because of the steps below.
// The most rows and the most classes the kernels take: their `int` counters step by
// `gridDim.x <= 65535` (rows) or 512 (columns, packets) from a value below this bound, so
// they stay below 2^31 and never wrap.

/// Checks the shared operands; `(rows, classes)` as the kernels' `int`s, each at most 2^30.
fn check(
    op: &'static str,
    logits: usize,
    targets: usize,
    loss: usize,
    rows: usize,
    classes: usize,
) -> Result<(i32, i32)> {
    check_matrix(op, "logits", logits, rows, classes)?;
    check_len(op, "targets", targets, rows)?;
    check_len(op, "loss", loss, rows)?;
    if rows > 0 && classes == 0 {
        return Err(Error::Invalid {
            op,
            problem: format!("{rows} rows of 0 classes: every target is out of range"),
        });
    }
    Ok((
        to_int_dim(op, "rows", rows)?,
        to_int_dim(op, "classes", classes)?,
    ))
}

/// `loss[r] = logsumexp(logits[r]) − logits[r][targets[r]]` for the row-major
/// `[rows, classes]` logits (one pass over them; a target outside `0..classes` gives NaN).
/// The losses are bit-identical to [`fused_classifier`]'s for the same logits, wherever the
/// gradient buffer is (the loss pass splits a row by the logits' address alone). `rows` and
/// `classes` are at most 2^30 each ([`Error::TooLarge`] otherwise).
pub fn classifier_loss<T: Element>(
    k: &Kernels,
    s: &Stream,
    logits: &DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    loss: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    classes: usize,
) -> Result<()> {
    const OP: &str = "classifier_loss";
    let kernel = dispatch::classifier_loss::<T>(k)?;
    let (r, c) = check(OP, logits.len(), targets.len(), loss.len(), rows, classes)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: block 512 as required; row r < rows of the checked [rows, classes] logits,
    // targets[r] (used as a column only when 0 <= t < classes) and loss[r]. rows, classes
    // <= 2^30 (checked in `check`): the row counter steps by gridDim.x <= 65535 and the column
    // and packet counters by 512 from below those bounds, so no `int` counter passes 2^31 − 1.
    unsafe { kernel.launch(s, &config(rows), logits, targets, loss, r, c) }?;
    Ok(())
}

/// The loss rows as [`classifier_loss`] and, in the same kernel,
/// `dlogits[r][c] = (softmax(logits[r])[c] − [c == targets[r]]) · g[0] · scale`, where `g`
/// (one element on the device) is the upstream gradient of the reduced loss and `scale`
/// e.g. `1 / rows` for a mean. A bad target gives a NaN loss and a NaN gradient row.
#[allow(clippy::too_many_arguments)]
pub fn fused_classifier<T: Element>(
    k: &Kernels,
    s: &Stream,
    logits: &DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    g: &DeviceSlice<T::Scalar>,
    loss: &mut DeviceSlice<T::Scalar>,
    dlogits: &mut DeviceSlice<T>,
    rows: usize,
    classes: usize,
    scale: T::Scalar,
) -> Result<()> {
    const OP: &str = "fused_classifier";
    let kernel = dispatch::fused_classifier::<T>(k)?;
    let (r, c) = check(OP, logits.len(), targets.len(), loss.len(), rows, classes)?;
    check_matrix(OP, "dlogits", dlogits.len(), rows, classes)?;
    check_len(OP, "g", g.len(), 1)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: as classifier_loss (the same `int` counter bounds), plus one element of g and
    // row r of the checked dlogits.
    unsafe {
        kernel.launch(
            s,
            &config(rows),
            logits,
            targets,
            g,
            loss,
            dlogits,
            r,
            c,
            scale,
        )
    }?;
    Ok(())
}

/// [`fused_classifier`] writing the gradient **over the logits** (llm.c's way: no second
/// `[rows, classes]` buffer). Each element is read by the thread that then overwrites it, and
/// the target's logit is read before any write of its row, so the losses are those of the
/// original logits.
#[allow(clippy::too_many_arguments)]
pub fn fused_classifier_inplace<T: Element>(
    k: &Kernels,
    s: &Stream,
    logits: &mut DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    g: &DeviceSlice<T::Scalar>,
    loss: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    classes: usize,
    scale: T::Scalar,
) -> Result<()> {
    const OP: &str = "fused_classifier_inplace";
    let kernel = dispatch::fused_classifier_inplace::<T>(k)?;
    let (r, c) = check(OP, logits.len(), targets.len(), loss.len(), rows, classes)?;
    check_len(OP, "g", g.len(), 1)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: as fused_classifier, with dlogits the logits themselves (the kernel is written
    // for that aliasing: element-wise read-then-write by one thread).
    unsafe { kernel.launch(s, &config(rows), logits, targets, g, loss, r, c, scale) }?;
    Ok(())
}

/// [`classifier_loss`] (the same losses) that also saves each row's log-sum-exp,
/// `lse[r] = logsumexp(logits[r])` (`rows` elements), for [`classifier_grad_lse_inplace`]:
/// a cross-entropy's forward, whose backward then reads the logits once.
#[allow(clippy::too_many_arguments)]
pub fn classifier_loss_lse<T: Element>(
    k: &Kernels,
    s: &Stream,
    logits: &DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    loss: &mut DeviceSlice<T::Scalar>,
    lse: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    classes: usize,
) -> Result<()> {
    const OP: &str = "classifier_loss_lse";
    let kernel = dispatch::classifier_loss_lse::<T>(k)?;
    let (r, c) = check(OP, logits.len(), targets.len(), loss.len(), rows, classes)?;
    check_len(OP, "lse", lse.len(), rows)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: as classifier_loss (the same kernel body and `int` counter bounds), plus lse[r]
    // for row r < rows of the checked lse.
    unsafe { kernel.launch(s, &config(rows), logits, targets, loss, lse, r, c) }?;
    Ok(())
}

/// The gradient of `scale · Σ_r loss[r]` times the one-element upstream gradient `g`, written
/// **over the logits** from the row log-sum-exps [`classifier_loss_lse`] saved:
/// `dlogits[r][c] = (exp(logits[r][c] − lse[r]) − [c == targets[r]]) · g[0] · scale` — one
/// read and one write of each element, one exponential (the fused classifier reads each row
/// twice). A bad target gives a NaN row. The probabilities agree with
/// [`fused_classifier_inplace`]'s `exp(x − m) / s` to the rounding of `x − lse`, not bit for bit.
#[allow(clippy::too_many_arguments)]
pub fn classifier_grad_lse_inplace<T: Element>(
    k: &Kernels,
    s: &Stream,
    logits: &mut DeviceSlice<T>,
    targets: &DeviceSlice<i32>,
    lse: &DeviceSlice<T::Scalar>,
    g: &DeviceSlice<T::Scalar>,
    rows: usize,
    classes: usize,
    scale: T::Scalar,
) -> Result<()> {
    const OP: &str = "classifier_grad_lse_inplace";
    let kernel = dispatch::classifier_grad_lse::<T>(k)?;
    // No loss buffer here: `check`'s loss length is given as `rows`, and lse is checked by name.
    let (r, c) = check(OP, logits.len(), targets.len(), rows, rows, classes)?;
    check_len(OP, "lse", lse.len(), rows)?;
    check_len(OP, "g", g.len(), 1)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: block 512 as required; row r < rows of the checked [rows, classes] logits (each
    // element read, then written, by one thread), targets[r] (a column only when
    // 0 <= t < classes), lse[r] and g[0], all checked; the `int` counters step as in
    // classifier_loss and stay below 2^31.
    unsafe { kernel.launch(s, &config(rows), logits, targets, lse, g, r, c, scale) }?;
    Ok(())
}
