//! `kernels_bench --sweep`: every fast kernel family over tiny to large, odd, prime and
//! misaligned shapes, each case beside its same-run reference; per family the minimum and
//! median ratio, the worst shape, and PASS/MISS on the minimum.
//!
//! On the GPU machine, in one command (so both sides share the machine and the session):
//!
//! ```text
//! kernels_bench --sweep-cases > cases.json
//! python3 tools/torch_sweep.py cases.json > torch_sweep.json
//! kernels_bench --sweep --torch-sweep torch_sweep.json --out bench/
//! ```
//!
//! One family only: the same three commands with `--filter TEXT` on both `kernels_bench`
//! calls (`bcast`: `Tensor`'s broadcasting ops; `jit`: cuda-jit's elementwise kernels; `hgemm`:
//! the bf16/f16 GEMMs at every shape, `ops::gemm_half`).

pub mod cases;
pub mod hgemm;
pub mod ours;
pub mod ours_tensor;
pub mod report;

use cases::Case;
use cuda_stack_driver::Context;
use cuda_stack_kernels::Kernels;
use indicatif::{ProgressBar, ProgressStyle};
use report::{Measured, TorchSide};
use std::path::PathBuf;
use std::time::Duration;

use super::timing::{BenchResult, Timing};

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// `tools/torch_sweep.py`'s output from the same session.
    pub torch: Option<PathBuf>,
    /// Where kernels_sweep.md / .svg / .json go.
    pub out: PathBuf,
    /// A few small cases per family (the smoke test).
    pub quick: bool,
    /// GPU ordinal.
    pub device: usize,
    /// Only cases whose id contains this text.
    pub filter: Option<String>,
}

/// The case list as JSON (for `tools/torch_sweep.py`): every case, or those whose id contains
/// `filter`.
pub fn cases_json(quick: bool, filter: Option<&str>) -> BenchResult<String> {
    let v: Vec<_> = cases::sweep(quick)
        .iter()
        .filter(|c| filter.is_none_or(|f| c.id().contains(f)))
        .map(|c| c.to_json(quick))
        .collect();
    Ok(serde_json::to_string_pretty(&v)?)
}

/// Runs the sweep, writes the report, prints the family table and the verdicts.
pub fn run(o: Options) -> BenchResult<()> {
    let torch = match &o.torch {
        Some(p) => Some(TorchSide::load(p)?),
        None => None,
    };
    let ctx = Context::new(o.device)?;
    let name = ctx.device().name()?;
    let k = Kernels::get(&ctx)?;
    let s = ctx.new_stream()?;
    let t = ours::timing(o.quick);
    let all: Vec<Case> = cases::sweep(o.quick)
        .into_iter()
        .filter(|c| {
            o.filter
                .as_ref()
                .is_none_or(|f| c.id().contains(f.as_str()))
        })
        .collect();
    println!(
        "kernels_bench --sweep on {name}: {} cases, {}",
        all.len(),
        match &torch {
            Some(ts) => format!("PyTorch side: {}", ts.header),
            None => "no --torch-sweep file: PyTorch-referenced ratios stay empty".into(),
        }
    );
    if let Some(ts) = &torch {
        if !ts.header.contains(&name) {
            println!(
                "warning: the PyTorch side ran on {:?}, this on {name}: compare one machine",
                ts.header
            );
        }
    }
    let pb = ProgressBar::new(all.len() as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:24} {pos}/{len} {wide_msg}",
        )?
        .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(120));
    let mut measured = Vec::with_capacity(all.len());
    for c in &all {
        pb.set_message(c.id());
        let t = Timing {
            settle_secs: c.settle_secs(o.quick),
            ..t
        };
        let ours = match ours::run(&k, &s, &t, c) {
            Ok(v) => v,
            Err(e) => {
                pb.finish_and_clear();
                return Err(format!("{}: {e}", c.id()).into());
            }
        };
        let m = Measured::new(c.clone(), ours, torch.as_ref());
        pb.suspend(|| println!("  {}", m.line()));
        measured.push(m);
        pb.inc(1);
    }
    pb.finish_and_clear();
    report::write(&o.out, &name, torch.as_ref(), &measured, o.quick)
}
