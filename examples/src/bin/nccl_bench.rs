//! `nccl_bench`: NCCL collectives through `cuda-stack-nccl`, from 8 B to 1 GiB, beside PyTorch's
//! `torch.distributed` (NCCL backend) measured on the same machine in the same session.
//!
//! One rank per GPU, in one of three layouts (`--layout`, several comma-separated are measured
//! one after another and reported side by side):
//! - `processes` (the default): one process per GPU, as PyTorch runs — this program re-executes
//!   itself per rank; each child gets the id over TCP, makes its communicator with
//!   `Communicator::init_rank` and calls plain `Communicator` methods on a stream of its own;
//! - `threads`: one thread per GPU in this process, each with its own communicator, no group;
//! - `group`: this thread drives every rank, one `cuda_stack_nccl::Group` per iteration (as
//!   `nccl-tests` runs by default).
//!
//! For each operation — all-reduce (sum, in place, as `dist.all_reduce`), all-gather
//! (`all_gather_into_tensor`), reduce-scatter (`reduce_scatter_tensor`), broadcast (from rank 0,
//! in place, as `dist.broadcast`), all on f32 — the result is first checked against the CPU;
//! then for each size: warm-up iterations, then GPU time between events on every rank's stream
//! over many iterations, the slowest rank's (with one communicator per rank, found with a
//! max-all-reduce of the ranks' times, as the PyTorch script does). Sizes, counts and
//! bandwidths follow `nccl-tests` (`PERFORMANCE.md`):
//!
//! - size: all-reduce and broadcast, the buffer (count × 4 B); all-gather, the gathered buffer
//!   (count per rank × ranks × 4 B); reduce-scatter, the buffer reduced (the same);
//! - algorithm bandwidth = size / time;
//! - bus bandwidth = algbw × 2(n−1)/n (all-reduce), × (n−1)/n (all-gather, reduce-scatter),
//!   × 1 (broadcast): the traffic on the busiest link, comparable across rank counts.
//!
//! With one GPU there is one rank: NCCL's collectives are then local copies (an all-reduce in
//! place does nothing at all), the bus bandwidth is 0 by definition, and the program says so;
//! the time is NCCL's launch cost (and this crate's).
//!
//! PyTorch's side: `tools/torch_nccl_bench.py` (one process per GPU, `NCCL_NVLS_ENABLE=0`),
//! run by this program right after its own measurements with `--torch-run` (same sizes, same
//! `--quick`, same GPUs), or read from its JSON with `--torch FILE`. Each operation then gets a
//! table with PyTorch's columns, the ratio and PASS/MISS against the targets (latency ≤ 1.1 ×
//! PyTorch's at every size ≤ 64 KiB, bus bandwidth ≥ 0.95 × at every size ≥ 1 MiB), and a
//! summary line with the worst of each.
//!
//! `--host-overhead` (processes and threads layouts) also measures, per rank, the host time of
//! one all-reduce call at sizes up to 64 KiB: this crate's `all_reduce_in_place`, the bare
//! `ncclAllReduce` on the same communicator, and (processes layout) on a blocking communicator;
//! the difference is what the safe layer adds per call. `--blocking` uses blocking NCCL
//! communicators (`CommConfig::blocking`; `CommGroup::init_all` for the group and threads
//! layouts) instead of non-blocking ones.
//!
//! Every process runs with `NCCL_NVLS_ENABLE=0` (set first thing in `main`, and passed to the
//! children and to the PyTorch script explicitly).
//!
//! Run: `nccl_bench --torch-run` (processes layout, 8 B .. 1 GiB, PyTorch in the same run);
//! `nccl_bench --layout processes,threads,group --torch-run --host-overhead` (every layout
//! beside PyTorch, and where the host time goes); `nccl_bench --quick` (up to 1 MiB, few
//! iterations); `python3 tools/torch_nccl_bench.py --out torch_nccl.json; nccl_bench --torch
//! torch_nccl.json` (PyTorch's figures from a file).

#[path = "../nccl_bench/mod.rs"]
mod nccl_bench;

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_driver::Device;
use nccl_bench::{fmt_size, group, processes, report, threads, torch};
use nccl_bench::{Layout, Measured, Op, Plan};
use serde_json::json;
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// NCCL collectives, bus bandwidth from 8 B to 1 GiB, beside PyTorch.
#[derive(Debug, Parser)]
#[command(name = "nccl_bench")]
struct Args {
    #[command(flatten)]
    common: Common,
    /// How the ranks are driven: processes (one per GPU, as PyTorch), threads (one per GPU),
    /// group (one thread, a Group per iteration); comma-separated to measure several.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "processes")]
    layout: Vec<Layout>,
    /// The operations, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "all_reduce,all_gather,reduce_scatter,broadcast"
    )]
    ops: Vec<Op>,
    /// JSON written by `tools/torch_nccl_bench.py` on this machine.
    #[arg(long, conflicts_with = "torch_run")]
    torch: Option<PathBuf>,
    /// Run `python3 tools/torch_nccl_bench.py` right after this program's measurements, with
    /// the same sizes, --quick and GPUs, and compare.
    #[arg(long)]
    torch_run: bool,
    /// The PyTorch script `--torch-run` runs.
    #[arg(long, default_value = "tools/torch_nccl_bench.py")]
    torch_script: PathBuf,
    /// Smallest size in bytes.
    #[arg(long, default_value_t = 8)]
    min_bytes: usize,
    /// Largest size in bytes (default 1 GiB; `--quick`: 1 MiB).
    #[arg(long)]
    max_bytes: Option<usize>,
    /// Ranks, one per GPU (default: every GPU).
    #[arg(long)]
    gpus: Option<usize>,
    /// Seconds an NCCL operation may take before its communicator is aborted.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
    /// Also measure the host time per all-reduce call (processes and threads layouts).
    #[arg(long)]
    host_overhead: bool,
    /// Blocking NCCL communicators (CommGroup::init_all; threads and group layouts only).
    #[arg(long)]
    blocking: bool,
    /// (Internal: a child of the processes layout) this child's rank.
    #[arg(long, hide = true)]
    rank: Option<usize>,
    /// (Internal) the number of ranks.
    #[arg(long, hide = true)]
    world: Option<usize>,
    /// (Internal) where rank 0 hands out the communicator's id.
    #[arg(long, hide = true)]
    addr: Option<String>,
}

fn main() -> ExitCode {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    let args = Args::parse();
    run("nccl_bench", || body(&args))
}

/// A bench error as the program's.
fn up(e: Box<dyn Error + Send + Sync>) -> Box<dyn Error> {
    e
}

/// The plan the arguments ask for (checked: no panic on bad values).
fn plan(args: &Args) -> Result<Plan, Box<dyn Error>> {
    let t = args.timeout;
    if !(t.is_finite() && t > 0.0 && t <= 86_400.0) {
        return Err(format!("--timeout {t}: give seconds, more than 0 and at most 86400").into());
    }
    let max = args.max_bytes.unwrap_or(args.common.pick(1 << 20, 1 << 30));
    if max > 1 << 40 {
        return Err(format!("--max-bytes {max} is more than 1 TiB").into());
    }
    if args.min_bytes > max {
        return Err(format!(
            "--min-bytes {} is above the largest size {max}",
            args.min_bytes
        )
        .into());
    }
    if args.ops.is_empty() || args.layout.is_empty() {
        return Err("--ops and --layout need at least one value each".into());
    }
    let mut ops = args.ops.clone();
    ops.sort();
    ops.dedup();
    Ok(Plan {
        ops,
        min: args.min_bytes,
        max,
        quick: args.common.quick,
        timeout: Duration::from_secs_f64(t),
        host_overhead: args.host_overhead,
        blocking: args.blocking,
    })
}

fn body(args: &Args) -> ProgramResult {
    let plan = plan(args)?;
    if let Some(rank) = args.rank {
        let (Some(world), Some(addr)) = (args.world, args.addr.as_deref()) else {
            return Err(
                "--rank needs --world and --addr (they are for the processes nccl_bench starts)"
                    .into(),
            );
        };
        return processes::child(&plan, rank, world, addr)
            .map_err(|e| format!("rank {rank} of {world}: {e}").into());
    }
    let mut layouts = args.layout.clone();
    layouts.dedup();
    let c = &args.common;
    let mut out = Out::new(c.json);
    let count = Device::count()?;
    let n = match args.gpus {
        Some(g) if g == 0 || g > count => {
            return Err(format!("--gpus {g}: this machine has {count} GPU(s)").into())
        }
        Some(g) => g,
        None => count,
    };
    if n == 0 {
        return Err("no GPU".into());
    }
    // Bounds for a whole layout and for PyTorch's script (a hang is reported, never waited
    // for forever).
    let deadline = Duration::from_secs(c.pick(300, 1800)).max(plan.timeout * 3);
    let version = cuda_stack_nccl::nccl_version()?;
    let sizes = plan.sizes();
    out.say(format!(
        "nccl_bench: {n} rank(s), one per GPU; layout(s) {}; NCCL {version:?}; f32; sizes {} .. \
         {}; {}",
        report::names(&layouts),
        fmt_size(sizes.first().copied().unwrap_or(0)),
        fmt_size(plan.max),
        plan.ops
            .iter()
            .map(|o| o.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if n == 1 {
        out.say(
            "One GPU: one rank. Every collective is a local operation (an in-place all-reduce \
             moves nothing, the others copy their buffer); bus bandwidth is 0 by definition \
             (factor (n-1)/n; broadcast's 1 counts the copy), so the time — NCCL's launch cost \
             and this crate's — is what is measured.",
        );
    }
    let mut measured = Vec::new();
    for &layout in &layouts {
        out.say(format!("measuring layout {} ...", layout.name()));
        let (rows, host) = match layout {
            Layout::Group => (group::run(&plan, n).map_err(up)?, Vec::new()),
            Layout::Threads => threads::run(&plan, n, deadline).map_err(up)?,
            Layout::Processes => processes::run(&plan, n, deadline).map_err(up)?,
        };
        measured.push(Measured {
            layout,
            blocking: plan.blocking,
            rows,
            host,
        });
    }
    if plan.host_overhead && layouts.iter().all(|l| *l == Layout::Group) {
        out.say("(--host-overhead is measured in the processes and threads layouts only)");
    }
    let mut failed = None;
    let torch = if args.torch_run {
        out.say(format!(
            "PyTorch's side: python3 {} (same sizes, GPUs and --quick) ...",
            args.torch_script.display()
        ));
        match torch::run_script(&args.torch_script, &plan, n, deadline) {
            Ok(t) => Some(t),
            Err(e) => {
                failed = Some(e);
                None
            }
        }
    } else {
        args.torch
            .as_deref()
            .map(torch::load)
            .transpose()
            .map_err(up)?
    };
    report::print(&mut out, &measured, n, torch.as_ref());
    out.put("ranks", json!(n));
    out.put("nccl", json!(version));
    out.put("timeout_s", json!(plan.timeout.as_secs_f64()));
    out.finish();
    match failed {
        Some(e) => Err(up(e)),
        None => Ok(()),
    }
}
