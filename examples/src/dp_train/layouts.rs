//! The two layouts a data-parallel run takes: one thread per GPU in this process, or one child
//! process per GPU (rank 0 hands NCCL's unique id to the others over TCP).

use super::training::*;
use super::Res;
use crate::Args;
use cuda_examples::children;
use cuda_stack_nccl::{CommConfig, CommGroup, Communicator};
use cuda_stack_runtime::set_device;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One thread per GPU, each with its communicator and with that GPU as its current device (a
/// thread's current device is its own and starts at 0: without this, every rank's tensors would
/// be made on GPU 0); `f` is a rank's work. Every rank's result is collected: the first error
/// that is not a timeout is returned (a rank that failed on its own makes the others wait for
/// it until their timeout, and the first error is the one that says why).
pub(crate) fn on_threads<R: Send + 'static>(
    comms: Vec<Communicator>,
    f: impl Fn(Communicator) -> Res<R> + Send + Sync + Copy + 'static,
) -> Res<Vec<R>> {
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            std::thread::spawn(move || -> Result<R, String> {
                set_device(c.device()).map_err(|e| e.to_string())?;
                let rank = c.rank();
                f(c).map_err(|e| format!("rank {rank}: {e}"))
            })
        })
        .collect();
    let results: Vec<Result<R, String>> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a rank's thread panicked".into()))
        })
        .collect();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if let Some(first) = errors
        .iter()
        .find(|e| !e.contains("did not finish within"))
        .or(errors.first())
    {
        return Err(first.to_string().into());
    }
    Ok(results.into_iter().filter_map(Result::ok).collect())
}

pub(crate) fn comm_config() -> CommConfig {
    CommConfig::with_timeout(Some(Duration::from_secs(120)))
}

/// Starts one child per GPU (this program with `--worker`) for `task` (`curve` or
/// `throughput`) with `job`, collects the JSON each prints.
pub(crate) fn on_processes(args: &Args, n: usize, task: &str, job: Job) -> Res<Vec<Value>> {
    let exe = std::env::current_exe()?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let addr = format!("127.0.0.1:{port}");
    let p = Plan::of(args);
    let mut children = Vec::new();
    for rank in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.env(cuda_stack_nccl::NVLS_VAR, "0")
            .args(["--worker", &rank.to_string(), "--world", &n.to_string()])
            .args(["--addr", &addr, "--layout", task])
            .args([
                "--width",
                &p.width.to_string(),
                "--layers",
                &p.layers.to_string(),
            ])
            .args([
                "--batch",
                &p.batch.to_string(),
                "--steps",
                &p.steps.to_string(),
            ])
            .args(["--opt", job.opt.torch_name()])
            .args(["--bucket-mb", &args.bucket_mb.to_string()])
            .args([
                "--comm-priority",
                match args.comm_priority {
                    CommPriority::High => "high",
                    CommPriority::Normal => "normal",
                },
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if args.common.quick {
            cmd.arg("--quick");
        }
        if job.sharded {
            cmd.arg("--sharded");
        }
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                children::kill(&children::ids(&children));
                return Err(format!("starting worker {rank}: {e}").into());
            }
        }
    }
    let outs = children::wait_all(children, Duration::from_secs(900))?;
    let mut values = Vec::with_capacity(n);
    for (rank, o) in outs.iter().enumerate() {
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text.lines().last().unwrap_or("");
        values.push(
            serde_json::from_str(line)
                .map_err(|e| format!("worker {rank} output {line:?}: {e}"))?,
        );
    }
    Ok(values)
}

/// A child: rank `rank` of `world`, one GPU; prints one JSON line.
pub(crate) fn worker(args: &Args, rank: usize, world: usize, addr: &str) -> Res<()> {
    let p = Plan::of(args);
    let id = cuda_stack_nccl::tcp::exchange_unique_id(addr, rank, world, Duration::from_secs(120))?;
    let comm = Communicator::init_rank(&id, rank, world, rank, &comm_config())?;
    set_device(rank)?;
    let job = Job {
        opt: args.opt,
        sharded: args.sharded,
    };
    let doc = match args.layout.as_str() {
        "curve" => {
            json!({"rank": rank, "curve": curve_rank(p, comm, p.curve_rows * world, job)?})
        }
        _ => {
            let (secs, state) = throughput_run(p, Some(comm), 7 + rank as u64, job)?;
            json!({"rank": rank, "secs": secs, "state_bytes": state})
        }
    };
    println!("{doc}");
    Ok(())
}

/// The throughput model with `job` on every GPU, one thread each: every rank's report.
pub(crate) fn throughput_on_threads(p: Plan, job: Job) -> Res<Vec<Timed>> {
    let comms = CommGroup::all(&comm_config())?.into_comms();
    on_threads(comms, move |c| {
        let seed = 7 + c.rank() as u64;
        throughput_run(p, Some(c), seed, job)
    })
}

/// The throughput model with `job` on `n` GPUs, one process each: every rank's report.
pub(crate) fn throughput_on_processes(args: &Args, n: usize, job: Job) -> Res<Vec<Timed>> {
    let got = on_processes(args, n, "throughput", job)?;
    got.iter()
        .map(|v| match (v["secs"].as_f64(), v["state_bytes"].as_u64()) {
            (Some(s), Some(b)) => Ok((s, b as usize)),
            _ => Err(format!("a worker's report has no secs / state_bytes: {v}").into()),
        })
        .collect()
}
