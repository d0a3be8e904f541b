//! ZeRO-1 (`ShardedOptimizer`) against plain data-parallel training: loss curves, optimizer
//! state per GPU, odd sizes, errors, ranks that differ.

use super::*;

/// The optimizer a ZeRO-1 comparison trains with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Opt {
    /// SGD, momentum 0.9 (one state element per parameter element).
    Momentum,
    /// AdamW, weight decay 0.01 (two state elements per parameter element, and step counters).
    AdamW,
}

pub(crate) const OPTS: [Opt; 2] = [Opt::Momentum, Opt::AdamW];

pub(crate) fn adamw(params: Vec<Var<f32>>) -> cuda_stack_nn::Result<Adam<f32>> {
    Adam::new(
        params,
        AdamConfig {
            weight_decay: 0.01,
            decoupled_weight_decay: true,
            ..AdamConfig::new(1e-2)
        },
    )
}

pub(crate) fn shardable(
    opt: Opt,
    params: Vec<Var<f32>>,
) -> cuda_stack_nn::Result<ShardableOptimizer<f32>> {
    Ok(match opt {
        Opt::Momentum => sgd(params)?.into(),
        Opt::AdamW => adamw(params)?.into(),
    })
}

/// A model of odd sizes: Linear(32, 5) + ReLU + Linear(5, 10), 225 elements (165 + 60), so no
/// bucket divides evenly between two ranks and parameters straddle the ranks' parts.
pub(crate) fn odd_model(seed: u64) -> cuda_stack_nn::Result<Sequential<f32>> {
    Ok(Sequential::new()
        .append(Linear::new(IN, 5, seed)?)
        .append(Relu)
        .append(Linear::new(5, CLASSES, seed + 1)?))
}

/// One data-parallel run's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    opt: Opt,
    /// ZeRO-1 ([`ShardedOptimizer`]) or plain data-parallel training.
    zero: bool,
    bucket_bytes: usize,
    /// [`odd_model`] instead of [`model`].
    odd: bool,
}

/// What one rank of a run ends with.
#[derive(Debug, Clone)]
pub(crate) struct Trained {
    /// The global loss (mean over ranks) per step.
    losses: Vec<f32>,
    params: Vec<Vec<f32>>,
    /// Optimizer state on this rank, in bytes.
    state_bytes: usize,
    /// ZeRO-1: elements per bucket, padded (empty for plain data-parallel training).
    buckets: Vec<usize>,
    /// ZeRO-1: this rank's part of each bucket.
    shards: Vec<usize>,
}

pub(crate) fn values(m: &Sequential<f32>) -> Result<Vec<Vec<f32>>, NnError> {
    Ok(m.parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?)
}

/// The training loop of plain data-parallel training with optimizer `opt`.
pub(crate) fn plain_loop<O: Optimizer<f32>>(
    m: &Sequential<f32>,
    ddp: &DataParallel<f32>,
    opt: &mut O,
    rows: usize,
) -> Result<Vec<f32>, NnError> {
    let (r, n) = (ddp.comm().rank(), ddp.comm().size());
    let share = rows / n;
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
    Ok(losses)
}

/// Rank `comm.rank()` of a run: its share of each global batch of `rows` rows.
pub(crate) fn train(comm: Communicator, rows: usize, s: Setup) -> Result<Trained, NnError> {
    set_device(comm.device())?;
    let (r, n) = (comm.rank(), comm.size());
    // A different seed per rank: the broadcast from rank 0 must make the replicas equal.
    let seed = 11 + 100 * r as u64;
    let m = if s.odd {
        odd_model(seed)?
    } else {
        model(seed)?
    };
    let config = DataParallelConfig {
        bucket_bytes: s.bucket_bytes,
        ..DataParallelConfig::default()
    };
    if !s.zero {
        let ddp = DataParallel::new(m.parameters(), comm, config)?;
        let (losses, state_bytes) = match s.opt {
            Opt::Momentum => {
                let mut opt = sgd(m.parameters())?;
                (plain_loop(&m, &ddp, &mut opt, rows)?, opt.state_bytes())
            }
            Opt::AdamW => {
                let mut opt = adamw(m.parameters())?;
                (plain_loop(&m, &ddp, &mut opt, rows)?, opt.state_bytes())
            }
        };
        return Ok(Trained {
            losses,
            params: values(&m)?,
            state_bytes,
            buckets: Vec::new(),
            shards: Vec::new(),
        });
    }
    let mut opt = ShardedOptimizer::new(shardable(s.opt, m.parameters())?, comm, config)?;
    let share = rows / n;
    let mut losses = Vec::new();
    for step in 0..STEPS {
        let (x, y) = batch(step, rows, r * share..(r + 1) * share)?;
        opt.zero_grad();
        let loss = m.forward(&x)?.cross_entropy(&y)?;
        loss.backward()?;
        opt.step()?;
        losses.push(opt.mean_over_ranks(&loss.value())?.item()?);
    }
    Ok(Trained {
        losses,
        params: values(&m)?,
        state_bytes: opt.state_bytes(),
        buckets: opt.bucket_elements(),
        shards: opt.shard_elements(),
    })
}

pub(crate) fn comm_config() -> CommConfig {
    CommConfig::with_timeout(Some(Duration::from_secs(60)))
}

/// `s` on every GPU (one thread per GPU, `rows` rows of global batch): every rank's result.
pub(crate) fn on_every_gpu(
    rows: usize,
    s: Setup,
) -> Result<Vec<Trained>, Box<dyn std::error::Error>> {
    let comms = CommGroup::all(&comm_config())?.into_comms();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| std::thread::spawn(move || train(c, rows, s).map_err(|e| e.to_string())))
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.join().map_err(|_| "a rank panicked")??);
    }
    Ok(out)
}

/// ZeRO-1 against plain data-parallel training, rank by rank: loss curves and parameters
/// within 1e-5 (relative, absolute below 1), and the ZeRO-1 ranks hold identical parameters.
pub(crate) fn zero_matches(what: &str, plain: &[Trained], zero: &[Trained]) -> TestResult {
    const TOL: f32 = 1e-5;
    ensure!(plain.len() == zero.len(), "{what}: rank counts differ");
    for (r, (p, z)) in plain.iter().zip(zero).enumerate() {
        close(
            &format!("{what}: rank {r} loss curve"),
            &z.losses,
            &p.losses,
            TOL,
        )?;
        ensure!(z.params.len() == p.params.len(), "{what}: parameter counts");
        for (i, (zp, pp)) in z.params.iter().zip(&p.params).enumerate() {
            close(&format!("{what}: rank {r} parameter {i}"), zp, pp, TOL)?;
            ensure!(
                *zp == zero[0].params[i],
                "{what}: ZeRO-1 rank {r}'s parameter {i} differs from rank 0's"
            );
        }
    }
    let worst = zero[0]
        .losses
        .iter()
        .zip(&plain[0].losses)
        .map(|(z, p)| (z - p).abs() / p.abs().max(1.0))
        .fold(0.0f32, f32::max);
    eprintln!(
        "{what}: loss {:.5} -> {:.5}; worst relative difference from plain {worst:.2e}; \
         optimizer state per rank {} B (plain {} B)",
        zero[0].losses[0],
        zero[0].losses[STEPS - 1],
        zero[0].state_bytes,
        plain[0].state_bytes
    );
    ensure!(
        plain[0].losses[STEPS - 1] < plain[0].losses[0],
        "{what}: the model did not learn: {:?}",
        plain[0].losses
    );
    Ok(())
}

/// Where a run's ranks go: every rank's result of a global batch of `rows` rows.
pub(crate) type Layout = fn(usize, Setup) -> Result<Vec<Trained>, Box<dyn std::error::Error>>;

/// One run of plain data-parallel training and one of ZeRO-1 on the same layout.
pub(crate) fn compare(
    rows: usize,
    opt: Opt,
    bucket_bytes: usize,
    odd: bool,
    on: Layout,
) -> Result<(Vec<Trained>, Vec<Trained>), Box<dyn std::error::Error>> {
    let setup = |zero| Setup {
        opt,
        zero,
        bucket_bytes,
        odd,
    };
    let plain = on(rows, setup(false))?;
    let zero = on(rows, setup(true))?;
    zero_matches(
        &format!(
            "{opt:?}, {} rank(s), buckets of {bucket_bytes} B{}",
            plain.len(),
            if odd { ", odd sizes" } else { "" }
        ),
        &plain,
        &zero,
    )?;
    Ok((plain, zero))
}

/// One rank on GPU 0.
pub(crate) fn on_one_gpu(
    rows: usize,
    s: Setup,
) -> Result<Vec<Trained>, Box<dyn std::error::Error>> {
    set_device(0)?;
    Ok(vec![train(single_comm()?, rows, s)?])
}

pub(crate) fn zero_one_rank() -> TestResult {
    for opt in OPTS {
        for bucket_bytes in [1024, 25 << 20] {
            let (plain, zero) = compare(GLOBAL_ROWS, opt, bucket_bytes, false, on_one_gpu)?;
            // One rank: no padding, and the whole state on the rank, as plain training's.
            let total: usize = plain[0].params.iter().map(Vec::len).sum();
            ensure!(
                zero[0].buckets.iter().sum::<usize>() == total,
                "one rank pads nothing: {:?} for {total} elements",
                zero[0].buckets
            );
            ensure!(
                zero[0].shards == zero[0].buckets,
                "one rank owns every bucket whole: {:?} vs {:?}",
                zero[0].shards,
                zero[0].buckets
            );
            let counters = |buckets: usize| 4 * buckets; // Adam's i32 step counters
            let (want, got) = match opt {
                Opt::Momentum => (plain[0].state_bytes, zero[0].state_bytes),
                Opt::AdamW => (
                    plain[0].state_bytes - counters(plain[0].params.len()),
                    zero[0].state_bytes - counters(zero[0].buckets.len()),
                ),
            };
            ensure!(
                got == want,
                "{opt:?}: one rank's state {got} B, plain {want} B"
            );
        }
    }
    Ok(())
}

pub(crate) fn zero_n_ranks() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let n = cuda_tests::gpu_count();
    for opt in OPTS {
        // Several buckets per model, and one for everything.
        for bucket_bytes in [1024, 25 << 20] {
            compare(64 * n, opt, bucket_bytes, false, on_every_gpu)?;
        }
    }
    Ok(())
}

/// (b): with one bucket, a rank holds `ceil(total / N)` elements per state tensor (SGD's
/// momentum: one; AdamW's moments: two, and one step counter); plain training holds `total`.
pub(crate) fn zero_state_bytes() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let n = cuda_tests::gpu_count();
    for odd in [false, true] {
        for opt in OPTS {
            let (plain, zero) = compare(64 * n, opt, 25 << 20, odd, on_every_gpu)?;
            let total: usize = plain[0].params.iter().map(Vec::len).sum();
            let per_rank = total.div_ceil(n);
            let (tensors, counters) = match opt {
                Opt::Momentum => (1, 0),
                Opt::AdamW => (2, 4),
            };
            for (r, z) in zero.iter().enumerate() {
                ensure!(z.buckets.len() == 1, "one bucket: {:?}", z.buckets);
                ensure!(
                    z.shards == [per_rank],
                    "rank {r}: part {:?}, want ceil({total} / {n}) = {per_rank}",
                    z.shards
                );
                let want = per_rank * 4 * tensors + counters;
                ensure!(
                    z.state_bytes == want,
                    "{opt:?}, rank {r}: {} B of optimizer state, want {per_rank} x 4 B x \
                     {tensors} + {counters} = {want}",
                    z.state_bytes
                );
            }
            let plain_state = total * 4 * tensors + counters * plain[0].params.len();
            ensure!(
                plain[0].state_bytes == plain_state,
                "{opt:?}: plain data-parallel holds {} B, want {plain_state}",
                plain[0].state_bytes
            );
        }
    }
    Ok(())
}

/// (c): 225 elements (odd) in buckets of 64 bytes (two buckets, 60 and 165 elements: 165 is
/// padded) and in one bucket (225, padded): parameters straddle the ranks' parts.
pub(crate) fn zero_odd_sizes() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let n = cuda_tests::gpu_count();
    for opt in OPTS {
        for bucket_bytes in [64, 25 << 20] {
            let (_, zero) = compare(64 * n, opt, bucket_bytes, true, on_every_gpu)?;
            let buckets = &zero[0].buckets;
            ensure!(
                buckets.iter().all(|b| b % n == 0),
                "buckets {buckets:?} not padded to a multiple of {n}"
            );
            ensure!(
                buckets.iter().sum::<usize>() >= 225
                    && buckets.iter().sum::<usize>() < 225 + n * buckets.len(),
                "buckets {buckets:?}: 225 elements, padded by fewer than {n} each"
            );
        }
    }
    Ok(())
}

/// Each error in turn, on one rank, and a step that works after them.
pub(crate) fn zero_errors() -> TestResult {
    set_device(0)?;
    // An optimizer that has stepped: its state is per whole parameter.
    let m = model(3)?;
    let mut stepped = sgd(m.parameters())?;
    let (x, y) = batch(0, GLOBAL_ROWS, 0..GLOBAL_ROWS)?;
    m.forward(&x)?.cross_entropy(&y)?.backward()?;
    stepped.step()?;
    let r = ShardedOptimizer::new(stepped, single_comm()?, DataParallelConfig::default());
    ensure!(
        matches!(
            &r,
            Err(NnError::Sharding(ShardingError::OptimizerHasState {
                optimizer: "SGD",
                steps: 1
            }))
        ),
        "{:?}",
        r.err()
    );

    // An Adam whose groups have different weight decays (one update per bucket applies one).
    let m = model(3)?;
    let ps = m.parameters();
    let (decay, rest) = ps.split_at(1);
    let grouped = Adam::with_groups(
        vec![
            ParamGroup::new(decay.to_vec(), 0.1),
            ParamGroup::new(rest.to_vec(), 0.0),
        ],
        AdamConfig::new(1e-3),
    )?;
    let r = ShardedOptimizer::new(grouped, single_comm()?, DataParallelConfig::default());
    ensure!(
        matches!(&r, Err(NnError::Invalid { problem, .. }) if problem.contains("weight decay")),
        "{:?}",
        r.err()
    );

    // A parameter without a gradient, then a second backward before the step.
    let used = Var::parameter(Tensor::from_vec(vec![1.0f32; 5], &[5])?);
    let unused = Var::parameter(Tensor::from_vec(vec![1.0f32; 3], &[3])?);
    let mut opt = ShardedOptimizer::new(
        adamw(vec![used.clone(), unused.clone()])?,
        single_comm()?,
        DataParallelConfig::default(),
    )?;
    opt.step()?; // no backward yet: nothing to do
    ensure!(
        opt.state_bytes() == 0,
        "a step without gradients made state"
    );
    used.sum_all()?.backward()?;
    let r = opt.step();
    ensure!(
        matches!(
            &r,
            Err(NnError::Sharding(ShardingError::MissingGradient { index: 1, shape })) if shape == &[3]
        ),
        "{r:?}"
    );
    opt.zero_grad();
    let both = || -> cuda_stack_nn::Result<Var<f32>> { used.sum_all()?.add(&unused.sum_all()?) };
    both()?.backward()?;
    let r = both()?.backward();
    ensure!(
        matches!(
            &r,
            Err(NnError::Sharding(ShardingError::LateGradient { .. }))
        ),
        "{r:?}"
    );
    // Recovery: a clean backward and step; AdamW's first step moves every element by lr.
    opt.zero_grad();
    both()?.backward()?;
    opt.step()?;
    for (p, n) in [(&used, 5), (&unused, 3)] {
        let v = p.value().to_vec()?;
        ensure!(v.len() == n, "shape kept");
        for x in v {
            // 1 - lr * (weight decay * 1) - lr * sign(grad) = 1 - 1e-4 - 1e-2
            ensure!(
                (x - (1.0 - 1e-4 - 1e-2)).abs() < 1e-5,
                "after one AdamW step: {x}"
            );
        }
    }
    ensure!(
        opt.state_bytes() == 2 * 8 * 4 + 4,
        "one bucket of 8 elements: {} B",
        opt.state_bytes()
    );
    // A value written between steps (a checkpoint loaded) is taken into the flat buffer.
    used.copy_from_(&Tensor::from_vec(vec![2.0f32; 5], &[5])?)?;
    opt.zero_grad();
    both()?.backward()?;
    opt.step()?;
    // The gradient is 1 again, so the update is lr again; the weight decay is lr * 0.01 * value.
    for (p, before) in [(&used, 2.0f32), (&unused, 1.0 - 1e-4 - 1e-2)] {
        let want = before * (1.0 - 1e-4) - 1e-2;
        for x in p.value().to_vec()? {
            ensure!(
                (x - want).abs() < 1e-5,
                "second AdamW step: {x}, want {want}"
            );
        }
    }
    Ok(())
}

/// Rank 1 wraps a model of other sizes: both ranks fail at once, naming the other.
pub(crate) fn zero_ranks_differ() -> TestResult {
    let _alone = one_multi_rank_test_at_a_time();
    let comms = CommGroup::new(&[0, 1], &comm_config())?.into_comms();
    let start = std::time::Instant::now();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<String, String> {
                set_device(c.device()).map_err(|e| e.to_string())?;
                let rank = c.rank();
                let m =
                    if rank == 0 { model(3) } else { odd_model(3) }.map_err(|e| e.to_string())?;
                let opt = sgd(m.parameters()).map_err(|e| e.to_string())?;
                match ShardedOptimizer::new(opt, c, DataParallelConfig::default()) {
                    Ok(_) => Err(format!("rank {rank} accepted")),
                    Err(NnError::Sharding(ShardingError::ParametersDiffer {
                        rank: other, ..
                    })) if other == 1 - rank => Ok(format!("rank {rank} names rank {other}")),
                    Err(e) => Err(format!("rank {rank}: {e:?}")),
                }
            })
        })
        .collect();
    for h in handles {
        let r = h.join().map_err(|_| "a rank panicked")?;
        eprintln!("{r:?}");
        r?;
    }
    ensure!(
        start.elapsed() < Duration::from_secs(30),
        "the ranks took {:?} to fail",
        start.elapsed()
    );
    Ok(())
}
