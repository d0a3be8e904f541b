//! Grad-ready hooks and data-parallel training ([`DataParallel`]) on NCCL.
//!
//! On one GPU: a one-rank data-parallel run equals plain training step for step (the loss
//! curve and the final parameters); hooks fire once per leaf with the accumulated gradient.
//! On two or more GPUs: one thread per GPU, each training on its share of the same global
//! batch, gives the loss curve one GPU gives on the whole batch, within floating-point
//! tolerance.

use cuda_stack_nn::{
    class_targets, DataParallel, DataParallelConfig, Linear, Module, NnError, Optimizer, Relu,
    Sequential, Sgd, SgdConfig, Var,
};
use cuda_stack_runtime::cuda_stack_nccl::{CommConfig, CommGroup, Communicator, UniqueId};
use cuda_stack_runtime::{set_device, Tensor};
use cuda_tests::{ensure, gpu, gpu2_nccl, gpu_nccl, TestResult};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_runtime::cuda_stack_nccl::disable_nvls_in_environment() };
    cuda_tests::run(vec![
        gpu(
            "grad_ready_hooks_fire_once_with_the_accumulated_gradient",
            hooks,
        ),
        gpu("set_grad_checks_shape", set_grad),
        gpu_nccl("one_rank_data_parallel_equals_plain_training", one_rank),
        gpu_nccl("a_parameter_without_gradient_is_named", missing_grad),
        gpu2_nccl("n_gpus_match_one_gpu_on_the_same_global_batch", n_ranks),
        gpu2_nccl(
            "a_rank_that_refuses_its_parameters_fails_every_rank_at_once",
            refusing_rank,
        ),
    ]);
}

const IN: usize = 32;
const HIDDEN: usize = 64;
const CLASSES: usize = 10;
const STEPS: usize = 20;
/// Rows of the global batch every run here uses.
const GLOBAL_ROWS: usize = 64;

fn model(seed: u64) -> cuda_stack_nn::Result<Sequential<f32>> {
    Ok(Sequential::new()
        .append(Linear::new(IN, HIDDEN, seed)?)
        .append(Relu)
        .append(Linear::new(HIDDEN, CLASSES, seed + 1)?))
}

/// Rows `rows` of the global batch of `total` rows: features in [-1, 1) from a hash of the row, and a label per
/// row. Every step sees the same rows (a batch the model can fit, so its loss must fall); `step`
/// only rotates which rows come first, so the ranks' shares differ from step to step.
fn batch(
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

fn sgd(params: Vec<Var<f32>>) -> cuda_stack_nn::Result<Sgd<f32>> {
    Sgd::new(
        params,
        SgdConfig {
            momentum: 0.9,
            ..SgdConfig::new(0.05)
        },
    )
}

/// Plain training on the current device, the whole batch of `rows` rows per step.
fn plain(rows: usize) -> Result<(Vec<f32>, Vec<Vec<f32>>), NnError> {
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
fn data_parallel(
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

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) -> TestResult {
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

fn hooks() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?);
    let c = Var::constant(Tensor::from_vec(vec![2.0f32, 3.0, 4.0], &[3])?);
    let seen: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
    let log = seen.clone();
    let h = p.register_grad_ready_hook(move |g| {
        log.lock().unwrap().push(g.to_vec()?);
        Ok(())
    })?;
    p.mul(&c)?.sum_all()?.backward()?;
    // Used twice in one graph, accumulated onto the first gradient: the hook sees the sum, once.
    p.mul(&c)?.add(&p)?.sum_all()?.backward()?;
    let got = seen.lock().unwrap().clone();
    ensure!(
        got == [vec![2.0, 3.0, 4.0], vec![5.0, 7.0, 9.0]],
        "hook saw {got:?}"
    );
    drop(h);
    p.sum_all()?.backward()?;
    ensure!(seen.lock().unwrap().len() == 2, "a removed hook fired");
    let _e = p.register_grad_ready_hook(|_| {
        Err(NnError::Invalid {
            what: "test hook",
            problem: "refuses".into(),
        })
    })?;
    let r = p.sum_all()?.backward();
    ensure!(
        matches!(
            r,
            Err(NnError::Invalid {
                what: "test hook",
                ..
            })
        ),
        "{r:?}"
    );
    ensure!(
        matches!(
            p.mul(&c)?.register_grad_ready_hook(|_| Ok(())),
            Err(NnError::Invalid { .. })
        ),
        "a hook on a computed value was accepted"
    );
    ensure!(
        matches!(
            c.register_grad_ready_hook(|_| Ok(())),
            Err(NnError::NotRequiringGrad { .. })
        ),
        "a hook on a constant was accepted"
    );
    Ok(())
}

fn set_grad() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0], &[2])?);
    p.set_grad(Some(Tensor::from_vec(vec![0.5f32, 0.25], &[2])?))?;
    ensure!(
        p.grad()?.unwrap().to_vec()? == [0.5, 0.25],
        "set_grad value"
    );
    ensure!(
        matches!(
            p.set_grad(Some(Tensor::zeros(&[3])?)),
            Err(NnError::Invalid { .. })
        ),
        "a gradient of the wrong shape was accepted"
    );
    p.set_grad(None)?;
    ensure!(p.grad()?.is_none(), "set_grad(None)");
    Ok(())
}

fn single_comm() -> Result<Communicator, Box<dyn std::error::Error>> {
    let id = UniqueId::new()?;
    let cfg = CommConfig::with_timeout(Some(Duration::from_secs(60)));
    Ok(Communicator::init_rank(&id, 0, 1, 0, &cfg)?)
}

fn one_rank() -> TestResult {
    set_device(0)?;
    let (want_loss, want_params) = plain(GLOBAL_ROWS)?;
    // Small buckets (several per model) and one bucket for everything.
    for bucket_bytes in [1024, 25 << 20] {
        let (loss, params) = data_parallel(single_comm()?, GLOBAL_ROWS, bucket_bytes)?;
        close("loss curve", &loss, &want_loss, 1e-6)?;
        for (i, (p, w)) in params.iter().zip(&want_params).enumerate() {
            close(&format!("parameter {i}"), p, w, 1e-6)?;
        }
        eprintln!(
            "bucket {bucket_bytes} B: loss {:.5} -> {:.5}, bit-identical: {}",
            loss[0],
            loss[STEPS - 1],
            loss == want_loss
        );
    }
    ensure!(
        want_loss[STEPS - 1] < want_loss[0],
        "the model did not learn: {want_loss:?}"
    );
    Ok(())
}

fn missing_grad() -> TestResult {
    set_device(0)?;
    let used = Var::parameter(Tensor::from_vec(vec![1.0f32; 4], &[4])?);
    let unused = Var::parameter(Tensor::from_vec(vec![1.0f32; 2], &[2])?);
    let ddp = DataParallel::new(
        vec![used.clone(), unused.clone()],
        single_comm()?,
        DataParallelConfig::default(),
    )?;
    used.sum_all()?.backward()?;
    let r = ddp.finish_gradients();
    ensure!(
        matches!(&r, Err(NnError::Invalid { problem, .. }) if problem.contains("parameter 1")),
        "{r:?}"
    );
    // The next step works once every parameter takes part.
    used.zero_grad();
    used.sum_all()?.add(&unused.sum_all()?)?.backward()?;
    ddp.finish_gradients()?;
    ensure!(
        unused.grad()?.unwrap().to_vec()? == [1.0, 1.0],
        "gradient after recovery"
    );
    ensure!(
        matches!(
            DataParallel::new(
                vec![used.clone(), used],
                single_comm()?,
                DataParallelConfig::default()
            ),
            Err(NnError::Invalid { .. })
        ),
        "a duplicated parameter was accepted"
    );
    Ok(())
}

fn n_ranks() -> TestResult {
    let comms =
        CommGroup::all(&CommConfig::with_timeout(Some(Duration::from_secs(60))))?.into_comms();
    let n = comms.len();
    let rows = 64 * n;
    set_device(0)?;
    let (want_loss, want_params) = plain(rows)?;
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || data_parallel(c, rows, 4096).map_err(|e| e.to_string()))
        })
        .collect();
    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().map_err(|_| "a rank panicked")??);
    }
    for (r, (loss, params)) in results.iter().enumerate() {
        close(
            &format!("rank {r} global loss curve"),
            loss,
            &want_loss,
            1e-4,
        )?;
        for (i, (p, w)) in params.iter().zip(&want_params).enumerate() {
            close(&format!("rank {r} parameter {i}"), p, w, 1e-4)?;
        }
    }
    eprintln!(
        "{n} GPUs: loss {:.5} -> {:.5} (one GPU: {:.5} -> {:.5})",
        results[0].0[0],
        results[0].0[STEPS - 1],
        want_loss[0],
        want_loss[STEPS - 1]
    );
    Ok(())
}

/// One thread per GPU, but rank 1 builds its replica on GPU 0 (its thread never set its device:
/// the `dp_train` hang). Rank 1 refuses its parameters; rank 0 must not wait in the parameter
/// broadcast for a rank that will never come: both fail within seconds, rank 0 naming rank 1.
fn refusing_rank() -> TestResult {
    let config = CommConfig::with_timeout(Some(Duration::from_secs(120)));
    let comms = CommGroup::new(&[0, 1], &config)?.into_comms();
    let start = std::time::Instant::now();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<(), String> {
                if c.rank() == 0 {
                    set_device(0).map_err(|e| e.to_string())?;
                } // rank 1 stays on this thread's default, GPU 0: wrong for its communicator
                let m = model(3).map_err(|e| e.to_string())?;
                DataParallel::new(m.parameters(), c, DataParallelConfig::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    let results: Vec<Result<(), String>> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
        .collect();
    let took = start.elapsed();
    ensure!(
        took < Duration::from_secs(30),
        "the ranks took {took:?} to fail (a wait for the timeout): {results:?}"
    );
    ensure!(
        matches!(&results[1], Err(e) if e.contains("cuda:0") && e.contains("cuda:1")),
        "rank 1's own error: {:?}",
        results[1]
    );
    ensure!(
        matches!(&results[0], Err(e) if e.contains("rank 1 refused")),
        "rank 0 must fail at once, naming rank 1: {:?}",
        results[0]
    );
    Ok(())
}
