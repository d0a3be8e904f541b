//! The model, data and optimizer the tests train, plain training on one GPU, data-parallel
//! training on a communicator, and the comparison of loss curves and parameters.

use super::*;

pub(crate) const IN: usize = 32;
pub(crate) const HIDDEN: usize = 64;
pub(crate) const CLASSES: usize = 10;
pub(crate) const STEPS: usize = 20;
/// Rows of the global batch every run here uses.
pub(crate) const GLOBAL_ROWS: usize = 64;

pub(crate) fn model(seed: u64) -> cuda_stack_nn::Result<Sequential<f32>> {
    Ok(Sequential::new()
        .append(Linear::new(IN, HIDDEN, seed)?)
        .append(Relu)
        .append(Linear::new(HIDDEN, CLASSES, seed + 1)?))
}

/// Rows `rows` of the global batch of `total` rows: features in [-1, 1) from a hash of the row, and a label per
/// row. Every step sees the same rows (a batch the model can fit, so its loss must fall); `step`
/// only rotates which rows come first, so the ranks' shares differ from step to step.
pub(crate) fn batch(
    step: usize,
    total: usize,
    rows: Range<usize>,
) -> cuda_stack_nn::Result<(Var<f32>, Tensor<i32>)> {
    let mut x = Vec::with_capacity(rows.len() * IN);
    let mut labels = Vec::with_capacity(rows.len());
    for r in rows {
        let i = (r + step * 5) % total;
        for j in 0..IN {
            let h = (i as u64 * 7919 + j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x.push(((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
        }
        labels.push((i * 7) % CLASSES);
    }
    let n = labels.len();
    Ok((
        Var::constant(Tensor::from_vec(x, &[n, IN])?),
        class_targets(&labels, CLASSES)?,
    ))
}

pub(crate) fn sgd(params: Vec<Var<f32>>) -> cuda_stack_nn::Result<Sgd<f32>> {
    Sgd::new(
        params,
        SgdConfig {
            momentum: 0.9,
            ..SgdConfig::new(0.05)
        },
    )
}

/// Plain training on the current device, the whole batch of `rows` rows per step.
pub(crate) fn plain(rows: usize) -> Result<(Vec<f32>, Vec<Vec<f32>>), NnError> {
    let m = model(11)?;
    let mut opt = sgd(m.parameters())?;
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (x, y) = batch(step, rows, 0..rows)?;
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        losses.push(loss.value().item()?);
    }
    let params = m
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    Ok((losses, params))
}

/// Data-parallel training of rank `comm.rank()`: its share of each global batch of `rows`
/// rows; returns the global loss (mean over ranks) per step and the final parameters.
pub(crate) fn data_parallel(
    comm: Communicator,
    rows: usize,
    bucket_bytes: usize,
) -> Result<(Vec<f32>, Vec<Vec<f32>>), NnError> {
    set_device(comm.device())?;
    let (r, n) = (comm.rank(), comm.size());
    let share = rows / n;
    // A different seed per rank: the broadcast from rank 0 must make the replicas equal.
    let m = model(11 + 100 * r as u64)?;
    let ddp = DataParallel::new(
        m.parameters(),
        comm,
        DataParallelConfig {
            bucket_bytes,
            ..DataParallelConfig::default()
        },
    )?;
    let mut opt = sgd(m.parameters())?;
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (x, y) = batch(step, rows, r * share..(r + 1) * share)?;
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        ddp.finish_gradients()?;
        opt.step()?;
        losses.push(ddp.mean_over_ranks(&loss.value())?.item()?);
    }
    let params = m
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    Ok((losses, params))
}

pub(crate) fn close(what: &str, got: &[f32], want: &[f32], tol: f32) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} vs {} values",
        got.len(),
        want.len()
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        ensure!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w} (tolerance {tol})"
        );
    }
    Ok(())
}
