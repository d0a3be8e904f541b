//! One rank of a `train_gpt --gpus N` run (a child process): its GPU, its communicator, its
//! replica and batches, the timed steps, and one JSON line of figures on stdout.

use super::super::throughput::{does_not_fit, GPT2_VOCAB};
use super::super::Args;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::{Gpt, GptConfig, MemoryEstimate, TrainConfig, Trainer};
use cuda_stack_nccl::{CommConfig, Communicator};
use cuda_stack_nn::{DataParallelConfig, GradElement};
use cuda_stack_runtime::cuda_stack_driver::Context;
use cuda_stack_runtime::{self as rt, AttentionElement, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use std::time::{Duration, Instant};

/// (timed steps, warm-up steps) as the flags ask (`--quick`: at most 3 and 1).
pub fn steps(a: &Args) -> (usize, usize) {
    if a.common.quick {
        (a.steps.min(3), a.warmup_steps.min(1))
    } else {
        (a.steps, a.warmup_steps)
    }
}

/// `DataParallel`'s bucket buffers at most: an f32 copy of every gradient (a parameter that
/// fills a bucket alone, `wte`, is reduced in place and has none; counted anyway).
pub fn bucket_bytes(cfg: &GptConfig) -> usize {
    cfg.parameter_count() * 4
}

/// FNV-1a over the bits of every parameter, in order: equal on two ranks exactly when their
/// replicas are bit-identical (up to a 64-bit collision).
fn params_hash(model: &Gpt<f32>) -> cuda_stack_nn::Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (_, p) in model.named_parameters() {
        for x in p.value().to_vec()? {
            h = (h ^ x.to_bits() as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(h)
}

/// Rank `rank` of `a.dp_world`: trains `--warmup-steps` + `--steps` steps (after a first one)
/// of GPT-2 124M on GPU `--device + rank`, data-parallel with the other ranks when there are
/// any, and prints its figures as one JSON line. Rank 0 prints its progress on stderr.
pub fn worker<U: GradElement + AttentionElement + 'static>(a: &Args, rank: usize) -> ProgramResult {
    let world = a.dp_world;
    let t0 = Instant::now();
    let cfg = GptConfig::gpt2_124m();
    let bytes = std::mem::size_of::<U>();
    let dtype = if bytes == 4 { "f32" } else { "bf16" };
    let batch = a.batch.unwrap_or(a.common.pick(4, 16));
    let (steps, warmup) = steps(a);
    if batch == 0 || steps == 0 {
        return Err("--batch and --steps must be at least 1".into());
    }
    let say = |s: String| {
        if rank == 0 {
            eprintln!("  [rank 0 of {world}] {s}");
        }
    };
    let device = a.common.device + rank;
    let ctx = Context::new(device)?;
    rt::set_device(device)?;
    let name = ctx.device().name()?;
    let mem = ctx.mem_get_info()?;
    let est = MemoryEstimate::new(&cfg, batch, bytes);
    let need = est.total() + if world > 1 { bucket_bytes(&cfg) } else { 0 };
    if need > mem.0 {
        let why = does_not_fit(&est, &cfg, batch, dtype, bytes, mem, &name);
        return Err(format!(
            "rank {rank} (cuda:{device}): {why}{}",
            if world > 1 {
                format!(
                    " (data-parallel adds about {} of gradient buckets)",
                    rt::caching::format_bytes(bucket_bytes(&cfg))
                )
            } else {
                String::new()
            }
        )
        .into());
    }
    let comm = if world > 1 {
        let addr = a.dp_addr.as_deref().ok_or("--dp-rank without --dp-addr")?;
        let id =
            cuda_stack_nccl::tcp::exchange_unique_id(addr, rank, world, Duration::from_secs(120))?;
        let config = CommConfig::with_timeout(Some(Duration::from_secs(120)));
        Some(Communicator::init_rank(&id, rank, world, device, &config)?)
    } else {
        None
    };

    // The same seed on every rank: identical replicas (DataParallel broadcasts rank 0's too).
    let model = Gpt::<f32>::new(cfg, a.seed)?;
    model.set_fused_mlp(a.mlp.fused());
    let mut tc = TrainConfig::gpt2_124m();
    tc.batch = batch;
    let mut trainer = match comm {
        Some(c) => Trainer::<U>::with_data_parallel(model, tc, c, DataParallelConfig::default())?,
        None => Trainer::<U>::new(model, tc)?,
    };
    // Rank r's tokens: the one-GPU run's generator jumped r times (2^128 draws apart).
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed);
    for _ in 0..rank {
        rng.jump();
    }
    let mut ids = || {
        let v: Vec<i32> = (0..batch * cfg.block_size)
            .map(|_| rng.random_range(0..GPT2_VOCAB) as i32)
            .collect();
        Tensor::from_vec(v, &[batch, cfg.block_size])
    };
    let data = (0..4)
        .map(|_| Ok((ids()?, ids()?)))
        .collect::<Result<Vec<_>, rt::TensorError>>()?;
    let micro = |i: usize| vec![data[i % data.len()].clone()];
    // The global loss (the mean over the ranks); reading it also waits for every rank.
    let global = |t: &Trainer<U>, l: Tensor<f32>| -> cuda_stack_nn::Result<f32> {
        match t.data_parallel() {
            Some(d) => Ok(d.mean_over_ranks(&l)?.item()?),
            None => Ok(l.item()?),
        }
    };

    let first = trainer.step(&micro(0))?.loss;
    let first = global(&trainer, first)?;
    let first_step_s = t0.elapsed().as_secs_f64();
    say(format!(
        "{name}: first step done {first_step_s:.2} s after start, loss {first:.4}; \
         {warmup} warm-up + {steps} timed steps ..."
    ));
    let mut last = None;
    for i in 0..warmup {
        last = Some(trainer.step(&micro(1 + i))?.loss);
    }
    if let Some(l) = last.take() {
        global(&trainer, l)?; // every rank has finished its warm-up: the clocks start together
    }
    rt::synchronize()?;
    let t = Instant::now();
    for i in 0..steps {
        last = Some(trainer.step(&micro(1 + warmup + i))?.loss);
    }
    rt::synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let last = global(&trainer, last.ok_or("no timed step")?)?;
    say(format!(
        "{:.2} ms a step, loss {last:.4}",
        secs * 1e3 / steps as f64
    ));
    let (peak_alloc, peak_reserved) = (rt::max_memory_allocated()?, rt::max_memory_reserved()?);
    let hash = params_hash(trainer.model())?;
    println!(
        "{}",
        json!({
            "rank": rank,
            "world": world,
            "device": name,
            "first_step_s": first_step_s,
            "secs": secs,
            "steps": steps,
            "batch": batch,
            "loss_first": first,
            "loss_last": last,
            "peak_allocated_bytes": peak_alloc,
            "peak_reserved_bytes": peak_reserved,
            "params_hash": format!("{hash:016x}"),
        })
    );
    Ok(())
}
