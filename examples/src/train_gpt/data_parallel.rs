//! `train_gpt --config gpt2-124m --gpus N`: GPT-2 124M trained data-parallel on N GPUs with
//! [`cuda_stack_nn::DataParallel`], beside the one-GPU run of the same invocation and, with
//! `--torch-run`, PyTorch's `DistributedDataParallel` on the same GPUs, configuration and batch
//! (`tools/torch_gpt_bench.py --gpus N`).
//!
//! **Layout: one process per GPU.** This program starts itself once per rank (hidden
//! `--dp-rank R --dp-world N --dp-addr HOST:PORT` flags); rank 0 hands NCCL's unique id to the
//! others over TCP (`cuda_stack_nccl::tcp::exchange_unique_id`) and each child prints one JSON
//! line of figures, which this process gathers. `dp_train` measured both of `DataParallel`'s
//! layouts on two H200s (`docs/results/data-parallel/dp_train-quick-2xh200.txt`): a step of many
//! small kernels ran at 135,995 samples/s in one process per GPU against 102,813 with one
//! thread per GPU in a single process (the threads share the process-wide locks of the
//! allocator, the autograd graph and the launch path; a GPT step launches hundreds of kernels
//! from the host), and the runs that met "≥ 1.0× PyTorch DDP" used processes. PyTorch's DDP runs
//! one process per GPU too, so the comparison is layout for layout. The one-GPU baseline runs
//! in a child of its own as well (rank 0's GPU, no NCCL): this process never makes a CUDA
//! context, so every rank has its GPU's whole memory.
//!
//! Each rank: the same model seed (identical initial weights; `DataParallel` also broadcasts
//! rank 0's parameters when it is made, as DDP does), its own `--batch` sequences of synthetic
//! tokens (rank r's generator is the one-GPU run's jumped r times: different data per rank,
//! rank 0's the one-GPU run's), bf16 compute with f32 master weights, the gradients averaged
//! through `DataParallel` (25 MiB buckets all-reduced during the backward pass on a
//! high-priority stream), then the global norm clipped at 1.0 and the same AdamW step on every
//! rank. Weak scaling, as DDP: the global batch is N × `--batch`. After the timed steps every
//! rank hashes its parameters' bits: the replicas must be identical (an error otherwise).
//! `NCCL_NVLS_ENABLE=0` is set first thing in `main` and passed to the children.

use super::throughput::GPT2_VOCAB;
use super::{Args, ConfigName, TorchPlan};
use cuda_examples::bench::Table;
use cuda_examples::children;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::torch_bench::{describe, thousands, Target, TorchGpt, TorchRequest};
use cuda_examples::gpt::{GptConfig, MemoryEstimate};
use cuda_examples::output::Out;
use cuda_stack_runtime::caching::format_bytes;
use cuda_stack_runtime::cuda_stack_driver::Device;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

mod rank;
pub use rank::worker;

/// The issue's two-GPU target: our tokens/s ÷ PyTorch DDP's at least this.
pub const DDP_TARGET: f64 = 1.0;

/// How long the parent waits for its children (each run is seconds; NCCL's own timeouts are
/// two minutes).
const CHILD_DEADLINE: Duration = Duration::from_secs(900);

/// One rank's figures, as its child printed them.
#[derive(Debug, Clone)]
struct RankReport {
    device: String,
    first_step_s: f64,
    secs: f64,
    steps: usize,
    batch: usize,
    loss_first: f64,
    loss_last: f64,
    peak_allocated: u64,
    peak_reserved: u64,
    params_hash: String,
}

impl RankReport {
    fn parse(v: &Value) -> Result<RankReport, String> {
        let f = |k: &str| {
            v[k].as_f64()
                .ok_or_else(|| format!("no number \"{k}\" in {v}"))
        };
        let u = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| format!("no count \"{k}\" in {v}"))
        };
        Ok(RankReport {
            device: v["device"].as_str().unwrap_or("?").to_string(),
            first_step_s: f("first_step_s")?,
            secs: f("secs")?,
            steps: u("steps")? as usize,
            batch: u("batch")? as usize,
            loss_first: f("loss_first")?,
            loss_last: f("loss_last")?,
            peak_allocated: u("peak_allocated_bytes")?,
            peak_reserved: u("peak_reserved_bytes")?,
            params_hash: v["params_hash"].as_str().unwrap_or("?").to_string(),
        })
    }
}

/// A run's figures over its ranks: the slowest rank's time counts.
#[derive(Debug, Clone)]
struct RunFigures {
    ranks: Vec<RankReport>,
    step_ms: f64,
    tokens_per_s: f64,
}

impl RunFigures {
    fn new(ranks: Vec<RankReport>, seq: usize) -> Result<RunFigures, String> {
        let first = ranks.first().ok_or("no rank reported")?;
        let slowest = ranks.iter().map(|r| r.secs).fold(0.0, f64::max);
        if slowest <= 0.0 {
            return Err("a rank reported no time".into());
        }
        let tokens: usize = ranks.iter().map(|r| r.batch * r.steps * seq).sum();
        Ok(RunFigures {
            step_ms: slowest * 1e3 / first.steps as f64,
            tokens_per_s: tokens as f64 / slowest,
            ranks,
        })
    }

    fn peak(&self) -> u64 {
        self.ranks
            .iter()
            .map(|r| r.peak_allocated)
            .max()
            .unwrap_or(0)
    }

    fn json(&self) -> Value {
        json!({
            "gpus": self.ranks.len(),
            "step_ms": self.step_ms,
            "tokens_per_s": self.tokens_per_s,
            "first_step_s": self.ranks[0].first_step_s,
            "loss_first": self.ranks[0].loss_first,
            "loss_last": self.ranks[0].loss_last,
            "peak_allocated_bytes": self.ranks.iter().map(|r| r.peak_allocated).collect::<Vec<_>>(),
            "peak_reserved_bytes": self.ranks.iter().map(|r| r.peak_reserved).collect::<Vec<_>>(),
            "params_hash": self.ranks.iter().map(|r| r.params_hash.clone()).collect::<Vec<_>>(),
        })
    }
}

/// Checks the flags of a `--gpus N` run and that N GPUs and NCCL are there, before anything
/// starts.
fn preflight(a: &Args) -> Result<(), String> {
    let n = a.gpus;
    if n == 0 {
        return Err("--gpus 0: at least one GPU".into());
    }
    if a.check.is_some() {
        return Err("--gpus and --check: the step-for-step check runs on one GPU".into());
    }
    if a.config != ConfigName::Gpt2124m {
        return Err(format!(
            "--gpus {n} is for --config gpt2-124m (shakespeare-char trains on one GPU)"
        ));
    }
    if a.grad_accum != 1 {
        return Err(format!(
            "--gpus {n} with --grad-accum {}: data-parallel training runs one micro-batch per \
             step (raise --batch per GPU instead)",
            a.grad_accum
        ));
    }
    let count = Device::count().map_err(|e| format!("counting the GPUs: {e}"))?;
    let first = a.common.device;
    if first + n > count {
        return Err(format!(
            "--gpus {n} from --device {first} needs GPUs {first}..{}, but this machine has \
             {count} GPU(s)",
            first + n - 1
        ));
    }
    match cuda_stack_nccl::nccl_version() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--gpus {n} needs NCCL (libnccl.so.2, found at run time; pip's nvidia-nccl-cu12 \
             wheel or a system install): {e}"
        )),
    }
}

/// Starts `world` children (ranks) of this program and gathers each one's report; a child
/// that fails stops the others (by their process ids) and its failure is the error.
fn spawn_ranks(world: usize, out: &Out) -> Result<Vec<RankReport>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("picking a port for NCCL's unique id: {e}"))?;
        let port = l.local_addr().map_err(|e| e.to_string())?.port();
        format!("127.0.0.1:{port}")
    };
    let own: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut children = Vec::new();
    for rank in 0..world {
        let mut cmd = Command::new(&exe);
        cmd.args(&own)
            .args([
                "--dp-rank",
                &rank.to_string(),
                "--dp-world",
                &world.to_string(),
            ])
            .args(["--dp-addr", &addr])
            .env(cuda_stack_nccl::NVLS_VAR, "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                children::kill(&children::ids(&children));
                return Err(format!("starting rank {rank}: {e}"));
            }
        }
    }
    out.say(format!(
        "  {world} process(es) started ({})",
        children
            .iter()
            .map(|c| format!("pid {}", c.id()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let outs = match children::wait_all(children, CHILD_DEADLINE) {
        Ok(o) => o,
        Err(children::ChildrenError::Failed { rank, why }) => {
            return Err(format!("rank {rank} failed: {why} (its message is above)"))
        }
        Err(e) => return Err(e.to_string()),
    };
    let mut reports = Vec::with_capacity(world);
    for (rank, o) in outs.iter().enumerate() {
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or("");
        let report = serde_json::from_str::<Value>(line)
            .map_err(|e| format!("rank {rank}'s report {line:?}: {e}"))
            .and_then(|v| RankReport::parse(&v))
            .map_err(|e| format!("rank {rank} failed: {e}"))?;
        reports.push(report);
    }
    Ok(reports)
}

/// The parent of a `--gpus N` run: preflight, the one-GPU run, the N-GPU run, the tables,
/// PyTorch DDP (`--torch-run` / `--torch FILE`) and the target.
pub fn run(a: &Args) -> ProgramResult {
    let q = &a.common;
    let mut out = Out::new(q.json);
    preflight(a)?;
    let n = a.gpus;
    let torch_plan = TorchPlan::new(a, "gpt2")?;
    let cfg = GptConfig::gpt2_124m();
    let bytes = if a.dtype == Some(super::Dtype::F32) {
        4
    } else {
        2
    };
    let dtype = if bytes == 4 { "f32" } else { "bf16" };
    let batch = a.batch.unwrap_or(q.pick(4, 16));
    let (steps, warmup) = rank::steps(a);
    let est = MemoryEstimate::new(&cfg, batch, bytes).total() + rank::bucket_bytes(&cfg);
    out.say(format!(
        "train_gpt gpt2-124m data-parallel on {n} GPUs (cuda:{}..cuda:{}), one process per GPU, \
         gradients averaged by DataParallel (NCCL, 25 MiB buckets overlapped with the backward \
         pass, NCCL_NVLS_ENABLE=0)\nbatch {batch} × 1024 synthetic tokens per GPU (global {}), \
         compute {dtype}, f32 weights and AdamW state, clip 1.0 on the averaged gradients; \
         {warmup} warm-up + {steps} timed steps; memory per GPU: about {}",
        q.device,
        q.device + n - 1,
        n * batch,
        format_bytes(est)
    ));
    out.say("one GPU (the baseline: the same program on rank 0's GPU, no NCCL) ...");
    let one = RunFigures::new(spawn_ranks(1, &out)?, cfg.block_size)?;
    out.say(format!("{n} GPUs ..."));
    let many = RunFigures::new(spawn_ranks(n, &out)?, cfg.block_size)?;

    let scaling = many.tokens_per_s / one.tokens_per_s;
    let mut t = Table::new(&[
        "run",
        "GPUs",
        "step time",
        "tokens/s (global)",
        "vs one GPU",
        "peak allocated per GPU",
        "first step",
        "loss first → last",
    ]);
    for (name, r) in [("one GPU", &one), ("data-parallel", &many)] {
        t.row(&[
            name.into(),
            r.ranks.len().to_string(),
            format!("{:.2} ms", r.step_ms),
            thousands(r.tokens_per_s),
            format!("{:.2}×", r.tokens_per_s / one.tokens_per_s),
            r.ranks
                .iter()
                .map(|x| format_bytes(x.peak_allocated as usize))
                .collect::<Vec<_>>()
                .join(" / "),
            format!("{:.2} s", r.ranks[0].first_step_s),
            format!("{:.4} → {:.4}", r.ranks[0].loss_first, r.ranks[0].loss_last),
        ]);
    }
    if !q.json {
        t.print();
    }
    let devices: Vec<&str> = many.ranks.iter().map(|r| r.device.as_str()).collect();
    out.say(format!(
        "GPUs: {}; scaling {scaling:.2}× at {n} GPUs (weak: each GPU keeps batch {batch}); the \
         loss is the mean over the ranks (ln 50257 = {:.4})",
        devices.join(", "),
        (GPT2_VOCAB as f64).ln()
    ));
    for r in [&one, &many] {
        for x in &r.ranks {
            if !(x.loss_first.is_finite() && x.loss_last.is_finite()) {
                return Err(format!(
                    "the loss is not finite at {} GPU(s) (first {}, last {})",
                    r.ranks.len(),
                    x.loss_first,
                    x.loss_last
                )
                .into());
            }
        }
    }
    let hashes: Vec<&str> = many.ranks.iter().map(|r| r.params_hash.as_str()).collect();
    if hashes.iter().any(|h| *h != hashes[0]) {
        return Err(format!(
            "the replicas differ after the last step (parameter hashes {}): the ranks did not \
             take the same steps",
            hashes.join(", ")
        )
        .into());
    }
    out.say(format!(
        "replicas after {} steps: identical on every rank (parameter bits' hash {})",
        1 + warmup + steps,
        hashes[0]
    ));
    if many.ranks[0].loss_last >= many.ranks[0].loss_first {
        out.say(
            "note: the loss did not fall over these few steps (the learning rate is still in \
             its 2,000-step warm-up)",
        );
    }

    let torch = torch_plan.figures(
        || TorchRequest {
            script: a.torch_script.clone(),
            config: "gpt2",
            batch,
            grad_accum: 1,
            steps,
            warmup,
            dtype,
            tf32: bytes == 2 || cuda_stack_runtime::tensor::allow_tf32(),
            modes: a.torch_modes(),
            device: q.device,
            gpus: n,
        },
        &mut out,
    );
    if let Some(t) = &torch {
        out.say("");
        for line in describe(t) {
            out.say(line);
        }
        for line in t.differences(batch, 1, dtype) {
            out.say(format!("note: {line}"));
        }
        if t.gpus != n as u64 {
            out.say(format!(
                "note: PyTorch ran on {} GPU(s), ours on {n}: not the same configuration",
                t.gpus
            ));
        }
        if !q.json {
            ddp_table(&many, t).print();
        }
        out.put("torch", t.doc.clone());
    }
    let target = ddp_target(&many, torch.as_ref(), n);
    out.say(format!(
        "target (issue 33; PyTorch DDP on the same GPUs, batch and dtype, same run):\n  {}",
        target.line()
    ));
    out.put("targets", json!([target.json()]));
    out.put("config", json!("gpt2-124m"));
    out.put("gpus", json!(n));
    out.put("dtype", json!(dtype));
    out.put("batch_per_gpu", json!(batch));
    out.put("steps", json!(steps));
    out.put("one_gpu", one.json());
    out.put("data_parallel", many.json());
    out.put("scaling", json!(scaling));
    out.put("tokens_per_s", json!(many.tokens_per_s));
    out.put("step_ms", json!(many.step_ms));
    out.finish();
    Ok(())
}

/// Ours at N GPUs beside each PyTorch DDP mode that ran.
fn ddp_table(ours: &RunFigures, torch: &TorchGpt) -> Table {
    let modes: Vec<(&str, _)> = torch
        .modes
        .iter()
        .filter_map(|(n, m)| m.as_ref().ok().map(|m| (n.as_str(), m)))
        .collect();
    let mut head = vec![
        "figure".to_string(),
        format!("ours ({} GPUs)", ours.ranks.len()),
    ];
    for (name, _) in &modes {
        head.push(format!("torch DDP {name}"));
        head.push(format!("ours / DDP {name}"));
    }
    let mut t = Table::new(&head.iter().map(String::as_str).collect::<Vec<_>>());
    type Get = fn(&cuda_examples::gpt::torch_bench::TorchMode) -> Option<f64>;
    type Row<'a> = (&'a str, f64, Get, fn(f64) -> String);
    let rows: [Row; 5] = [
        (
            "step time (slowest rank)",
            ours.step_ms,
            |m| Some(m.step_ms),
            |v| format!("{v:.2} ms"),
        ),
        (
            "tokens/s (global)",
            ours.tokens_per_s,
            |m| Some(m.tokens_per_s),
            thousands,
        ),
        (
            "peak memory allocated (largest GPU)",
            ours.peak() as f64,
            |m| Some(m.peak_allocated as f64),
            |v| format_bytes(v as usize),
        ),
        (
            "time to the first step",
            ours.ranks[0].first_step_s,
            |m| Some(m.first_step_s),
            |v| format!("{v:.2} s"),
        ),
        (
            "loss at the last timed step",
            ours.ranks[0].loss_last,
            |m| m.loss_last,
            |v| format!("{v:.4}"),
        ),
    ];
    for (name, mine, get, show) in rows {
        let mut row = vec![name.to_string(), show(mine)];
        for (_, m) in &modes {
            match get(m) {
                Some(v) => {
                    row.push(show(v));
                    row.push(format!("{:.2}×", mine / v));
                }
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        t.row(&row);
    }
    t
}

/// "tokens/s ≥ 1.0× PyTorch DDP" against PyTorch's eager DDP run (DDP's usual form).
fn ddp_target(ours: &RunFigures, torch: Option<&TorchGpt>, n: usize) -> Target {
    let what = format!("{n} GPUs: tokens/s ≥ {DDP_TARGET}× PyTorch DDP");
    match torch.map(|t| (t.gpus, t.mode("eager"))) {
        Some((g, _)) if g != n as u64 => Target {
            what,
            pass: None,
            detail: format!("PyTorch's figures are for {g} GPU(s)"),
        },
        Some((_, Some(Ok(m)))) => {
            let r = ours.tokens_per_s / m.tokens_per_s;
            Target {
                what,
                pass: Some(r >= DDP_TARGET),
                detail: format!(
                    "{} vs {} = {r:.2}×",
                    thousands(ours.tokens_per_s),
                    thousands(m.tokens_per_s)
                ),
            }
        }
        Some((_, Some(Err(e)))) => Target {
            what,
            pass: None,
            detail: format!("PyTorch DDP failed: {e}"),
        },
        Some((_, None)) => Target {
            what,
            pass: None,
            detail: "PyTorch DDP eager not run (--torch-modes)".into(),
        },
        None => Target {
            what,
            pass: None,
            detail: "PyTorch not measured (--torch-run)".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(secs: f64, peak: u64) -> RankReport {
        RankReport {
            device: "GPU".into(),
            first_step_s: 2.0,
            secs,
            steps: 10,
            batch: 16,
            loss_first: 11.0,
            loss_last: 10.9,
            peak_allocated: peak,
            peak_reserved: peak,
            params_hash: "0".into(),
        }
    }

    #[test]
    fn the_slowest_rank_sets_the_global_rate() {
        let r = RunFigures::new(vec![rank(0.5, 1), rank(0.4, 3)], 1024).unwrap();
        assert_eq!(r.step_ms, 50.0);
        assert_eq!(r.tokens_per_s, (2 * 16 * 10 * 1024) as f64 / 0.5);
        assert_eq!(r.peak(), 3);
        assert!(RunFigures::new(vec![], 1024).is_err());
    }

    #[test]
    fn the_target_compares_with_ddp_eager_at_the_same_gpu_count() {
        let ours = RunFigures::new(vec![rank(0.5, 1), rank(0.5, 1)], 1024).unwrap();
        let doc = |gpus: u64, tps: f64| {
            format!(
                r#"{{"torch": "2.11", "gpu": "H100", "config": "gpt2", "batch": 16, "gpus": {gpus},
                "modes": {{"eager": {{"first_step_s": 3.0, "step_ms": 50.0,
                "tokens_per_s": {tps}, "peak_allocated_bytes": 1}}}}}}"#
            )
        };
        let t = TorchGpt::parse(&doc(2, 600_000.0), "t").unwrap();
        assert_eq!(ddp_target(&ours, Some(&t), 2).pass, Some(true));
        let t = TorchGpt::parse(&doc(2, 700_000.0), "t").unwrap();
        assert_eq!(ddp_target(&ours, Some(&t), 2).pass, Some(false));
        let t = TorchGpt::parse(&doc(1, 600_000.0), "t").unwrap();
        assert_eq!(ddp_target(&ours, Some(&t), 2).pass, None);
        assert_eq!(ddp_target(&ours, None, 2).pass, None);
        assert!(ddp_table(&ours, &t).render().contains("ours / DDP eager"));
    }
}
