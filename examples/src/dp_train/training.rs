//! The runs' models, batches and optimizers, one rank's trainer (plain, data-parallel or
//! ZeRO-1), and the loss-curve and throughput runs a rank makes.

use super::Res;
use crate::Args;
use cuda_stack_nccl::Communicator;
use cuda_stack_nn::{
    class_targets, Adam, AdamConfig, DataParallel, DataParallelConfig, Linear, Module, Optimizer,
    Relu, Sequential, Sgd, SgdConfig, ShardableOptimizer, ShardedOptimizer, Var,
};
use cuda_stack_runtime::{set_device, Tensor};
use std::time::Instant;

/// The settings a run uses (the children get the same through their arguments).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) curve_steps: usize,
    pub(crate) curve_rows: usize,
    pub(crate) width: usize,
    pub(crate) layers: usize,
    pub(crate) batch: usize,
    pub(crate) steps: usize,
}

impl Plan {
    pub(crate) fn of(args: &Args) -> Plan {
        let c = &args.common;
        Plan {
            curve_steps: c.pick(8, 30),
            curve_rows: 64,
            width: args.width.unwrap_or(c.pick(512, 4096)),
            layers: args.layers,
            batch: args.batch.unwrap_or(c.pick(64, 1024)),
            steps: args.steps.unwrap_or(c.pick(5, 30)),
        }
    }
}

pub(crate) const IN: usize = 32;
pub(crate) const CLASSES: usize = 10;

pub(crate) fn classifier(seed: u64) -> cuda_stack_nn::Result<Sequential<f32>> {
    Ok(Sequential::new()
        .append(Linear::new(IN, 64, seed)?)
        .append(Relu)
        .append(Linear::new(64, CLASSES, seed + 1)?))
}

/// Rows `lo..hi` of step `step`'s global batch (deterministic, so every layout sees the same).
pub(crate) fn batch(
    step: usize,
    lo: usize,
    hi: usize,
) -> cuda_stack_nn::Result<(Var<f32>, Tensor<i32>)> {
    let mut x = Vec::with_capacity((hi - lo) * IN);
    let mut labels = Vec::with_capacity(hi - lo);
    for i in lo..hi {
        for j in 0..IN {
            let h = (step as u64 * 1_000_003 + i as u64 * 7919 + j as u64)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x.push(((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
        }
        labels.push((i * 7 + step * 3) % CLASSES);
    }
    Ok((
        Var::constant(Tensor::from_vec(x, &[hi - lo, IN])?),
        class_targets(&labels, CLASSES)?,
    ))
}

/// An optimizer of the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Opt {
    /// SGD without momentum (no state): the throughput phase's.
    Sgd,
    /// SGD, momentum 0.9: the loss curves' (one state element per parameter element).
    Momentum,
    /// AdamW, weight decay 0.01 (two state elements per parameter element).
    Adamw,
}

impl Opt {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Opt::Sgd => "SGD",
            Opt::Momentum => "SGD + momentum",
            Opt::Adamw => "AdamW",
        }
    }

    /// `tools/torch_ddp.py --optimizer`.
    pub(crate) fn torch_name(self) -> &'static str {
        match self {
            Opt::Sgd => "sgd",
            Opt::Momentum => "momentum",
            Opt::Adamw => "adamw",
        }
    }

    pub(crate) fn make(
        self,
        params: Vec<Var<f32>>,
        lr: f64,
    ) -> cuda_stack_nn::Result<ShardableOptimizer<f32>> {
        Ok(match self {
            Opt::Sgd => Sgd::new(params, SgdConfig::new(lr))?.into(),
            Opt::Momentum => Sgd::new(
                params,
                SgdConfig {
                    momentum: 0.9,
                    ..SgdConfig::new(lr)
                },
            )?
            .into(),
            Opt::Adamw => Adam::new(
                params,
                AdamConfig {
                    weight_decay: 0.01,
                    decoupled_weight_decay: true,
                    ..AdamConfig::new(lr)
                },
            )?
            .into(),
        })
    }

    /// The loss curves' learning rate.
    pub(crate) fn curve_lr(self) -> f64 {
        match self {
            Opt::Adamw => 1e-2,
            _ => 0.05,
        }
    }
}

/// The priority of the data-parallel communication stream (`--comm-priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CommPriority {
    /// The device's highest stream priority.
    High,
    /// The default priority.
    Normal,
}

/// `--comm-priority` of this process (set once in `main`, read by every rank's trainer).
pub(crate) static COMM_PRIORITY_HIGH: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// `--bucket-mb` of this process, in bytes (set once in `main`).
pub(crate) static BUCKET_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(25 << 20);

/// How one training run steps: its optimizer, and whether it is ZeRO-1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    pub(crate) opt: Opt,
    pub(crate) sharded: bool,
}

impl Job {
    /// Plain data-parallel training (or plain training, without a communicator) with `opt`.
    pub(crate) fn plain(opt: Opt) -> Job {
        Job {
            opt,
            sharded: false,
        }
    }
}

/// One rank's trainer: plain training, data-parallel training, or ZeRO-1.
pub(crate) enum Trainer {
    Single(ShardableOptimizer<f32>),
    Plain(DataParallel<f32>, ShardableOptimizer<f32>),
    Zero(Box<ShardedOptimizer<f32>>),
}

impl Trainer {
    pub(crate) fn new(
        params: Vec<Var<f32>>,
        comm: Option<Communicator>,
        job: Job,
        lr: f64,
    ) -> cuda_stack_nn::Result<Trainer> {
        let opt = job.opt.make(params.clone(), lr)?;
        let config = DataParallelConfig {
            high_priority_stream: COMM_PRIORITY_HIGH.load(std::sync::atomic::Ordering::Relaxed),
            bucket_bytes: BUCKET_BYTES.load(std::sync::atomic::Ordering::Relaxed),
            ..DataParallelConfig::default()
        };
        Ok(match comm {
            None => Trainer::Single(opt),
            Some(c) if job.sharded => {
                Trainer::Zero(Box::new(ShardedOptimizer::new(opt, c, config)?))
            }
            Some(c) => Trainer::Plain(DataParallel::new(params, c, config)?, opt),
        })
    }

    pub(crate) fn zero_grad(&self) {
        match self {
            Trainer::Single(o) | Trainer::Plain(_, o) => o.zero_grad(),
            Trainer::Zero(z) => z.zero_grad(),
        }
    }

    /// The step after a backward pass (the gradient exchange included).
    pub(crate) fn step(&mut self) -> cuda_stack_nn::Result<()> {
        match self {
            Trainer::Single(o) => o.step(),
            Trainer::Plain(d, o) => {
                d.finish_gradients()?;
                o.step()
            }
            Trainer::Zero(z) => z.step(),
        }
    }

    /// The mean of `t` over the ranks.
    pub(crate) fn mean(&self, t: &Tensor<f32>) -> cuda_stack_nn::Result<Tensor<f32>> {
        match self {
            Trainer::Single(_) => Ok(t.clone()),
            Trainer::Plain(d, _) => d.mean_over_ranks(t),
            Trainer::Zero(z) => z.mean_over_ranks(t),
        }
    }

    /// Optimizer state on this GPU, in bytes.
    pub(crate) fn state_bytes(&self) -> usize {
        match self {
            Trainer::Single(o) | Trainer::Plain(_, o) => o.state_bytes(),
            Trainer::Zero(z) => z.state_bytes(),
        }
    }
}

/// The loss curve of plain training on device 0 with the whole batch.
pub(crate) fn curve_plain(p: Plan, rows: usize) -> Res<Vec<f32>> {
    set_device(0)?;
    let m = classifier(11)?;
    let opt = Opt::Momentum;
    let mut t = Trainer::new(m.parameters(), None, Job::plain(opt), opt.curve_lr())?;
    let mut out = Vec::new();
    for step in 0..p.curve_steps {
        let (x, y) = batch(step, 0, rows)?;
        t.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        t.step()?;
        out.push(loss.value().item()?);
    }
    Ok(out)
}

/// Rank `comm.rank()`'s part of the data-parallel run: the global loss (mean over ranks).
pub(crate) fn curve_rank(p: Plan, comm: Communicator, rows: usize, job: Job) -> Res<Vec<f32>> {
    set_device(comm.device())?;
    let (r, n) = (comm.rank(), comm.size());
    let share = rows / n;
    let m = classifier(11 + r as u64)?; // rank 0's values are broadcast to the others
    let mut t = Trainer::new(m.parameters(), Some(comm), job, job.opt.curve_lr())?;
    let mut out = Vec::new();
    for step in 0..p.curve_steps {
        let (x, y) = batch(step, r * share, (r + 1) * share)?;
        t.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        t.step()?;
        out.push(t.mean(&loss.value())?.item()?);
    }
    Ok(out)
}

/// The throughput model: `layers` × (Linear(width, width) + ReLU), then Linear(width, 16).
pub(crate) fn mlp(p: Plan) -> cuda_stack_nn::Result<Sequential<f32>> {
    let mut m = Sequential::new();
    for l in 0..p.layers {
        m = m
            .append(Linear::new(p.width, p.width, 100 + l as u64)?)
            .append(Relu);
    }
    Ok(m.append(Linear::new(p.width, 16, 99)?))
}

/// The throughput model's learning rate (every optimizer).
pub(crate) const THROUGHPUT_LR: f64 = 1e-4;

/// What a rank of a throughput run reports: seconds for the timed steps, and the optimizer
/// state on its GPU (bytes).
pub(crate) type Timed = (f64, usize);

/// Timed training steps of the throughput model on the current device: seconds for
/// `p.steps` steps after two warm-up steps (host clock, one synchronize at the end, as
/// PyTorch's timing loops do), with or without data parallelism (`job`: the optimizer and
/// whether it is ZeRO-1), and the optimizer state it held.
pub(crate) fn throughput_run(
    p: Plan,
    comm: Option<Communicator>,
    seed: u64,
    job: Job,
) -> Res<Timed> {
    let m = mlp(p)?;
    let mut trainer = Trainer::new(m.parameters(), comm, job, THROUGHPUT_LR)?;
    let x = Var::constant(Tensor::randn(&[p.batch, p.width], seed)?);
    let labels: Vec<usize> = (0..p.batch).map(|i| (i * 5 + seed as usize) % 16).collect();
    let y = class_targets(&labels, 16)?;
    let mut step = || -> Res<Var<f32>> {
        trainer.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        trainer.step()?;
        Ok(loss)
    };
    for _ in 0..2 {
        step()?;
    }
    let last = step()?;
    last.value().item()?; // everything before is done
    let t = Instant::now();
    let mut loss = last;
    for _ in 0..p.steps {
        loss = step()?;
    }
    let l = loss.value().item()?;
    let secs = t.elapsed().as_secs_f64();
    if !l.is_finite() {
        return Err(format!("the loss is {l}").into());
    }
    Ok((secs, trainer.state_bytes()))
}

/// Samples per second of `ranks` ranks, each of which reported its time for the timed steps.
pub(crate) fn rate(p: Plan, ranks: usize, timed: &[Timed]) -> f64 {
    let slowest = timed.iter().map(|t| t.0).fold(0.0, f64::max);
    (ranks * p.batch * p.steps) as f64 / slowest
}

/// The most optimizer state any rank held (bytes).
pub(crate) fn state_per_gpu(timed: &[Timed]) -> usize {
    timed.iter().map(|t| t.1).max().unwrap_or(0)
}
