//! The body of `kernels_bench` (the program's entry point is `src/bin/kernels_bench.rs`).
//!
//! One file per concern: [`timing`] (events, trials, rotation), [`check`] (CPU-reference checks),
//! [`rows`] (results, %, targets), [`context`] (what the sections share), one file per kernel
//! family ([`memory`], [`coalescing`], [`elementwise`], [`matmul`], [`tensor_cores`], [`fp8`],
//! [`softmax`]), and the outputs
//! ([`report`] Markdown/JSON, [`chart`] SVG).

pub mod chart;
pub mod check;
pub mod coalescing;
pub mod context;
pub mod elementwise;
pub mod fp8;
pub mod matmul;
pub mod memory;
pub mod report;
pub mod rows;
pub mod softmax;
pub mod sweep;
pub mod tensor_cores;
pub mod timing;

use context::{Bench, Sizes};
use cuda_examples::bench::parse_torch_baseline;
use cuda_stack_driver::Context;
use cuda_stack_kernels::Kernels;
use indicatif::{ProgressBar, ProgressStyle};
use report::Meta;
use rows::Verdict;
use std::path::PathBuf;
use std::time::Duration;
use timing::{BenchResult, Timing};

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// PyTorch's figures (torch_baseline.py output plus the softmax line).
    pub torch: Option<PathBuf>,
    /// Where kernels_bench.md and kernels_bench.svg go.
    pub out: PathBuf,
    /// Small sizes, few repetitions.
    pub quick: bool,
    /// GPU ordinal.
    pub device: usize,
    /// JSON on stdout instead of the table.
    pub json: bool,
    /// Only the sections whose name contains this text (e.g. `fp8`, `tensor cores`).
    pub only: Option<String>,
}

/// A section of the benchmark.
type Section = fn(&mut Bench) -> BenchResult<()>;

/// The sections in order (the D2D reference first: the others divide by it).
const SECTIONS: [(&str, Section); 11] = [
    ("D2D reference", memory::d2d),
    ("vector add", memory::vector_add),
    ("sum", memory::sum),
    ("copies", coalescing::copies),
    ("transpose", coalescing::transpose),
    ("elementwise", elementwise::family),
    ("bias + relu", elementwise::bias_relu),
    ("matmul", matmul::matmul),
    ("tensor cores", tensor_cores::tensor_cores),
    ("fp8", fp8::fp8),
    ("softmax", softmax::softmax),
];

/// Runs every section, writes the report and the chart, prints the targets and the table.
pub fn run(o: Options) -> BenchResult<()> {
    let torch_text = match &o.torch {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| format!("reading --torch {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let torch = torch_text
        .as_deref()
        .map(parse_torch_baseline)
        .unwrap_or_default();

    let ctx = Context::new(o.device)?;
    let dev = ctx.device();
    let name = dev.name()?;
    let sms = dev.sm_count()?;
    let l2 = dev.l2_cache_bytes()? as usize;
    let driver = cuda_stack_sys::Driver::get()?.version_string();
    let mut meta = Meta {
        device: name.clone(),
        driver: driver.clone(),
        sms,
        l2,
        memory: dev.total_memory()?,
        spec_gbs: dev.peak_memory_bandwidth()? / 1e9,
        mode: if o.quick { "quick" } else { "full" },
        torch: None,
        d2d: None,
    };
    if let (Some(p), Some(text)) = (&o.torch, &torch_text) {
        let head = text.lines().next().unwrap_or("").to_string();
        meta.torch = Some((p.display().to_string(), head));
    }
    let k = Kernels::get(&ctx)?;
    let s = ctx.new_stream()?;

    let pb = ProgressBar::new(SECTIONS.len() as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:24} {pos}/{len} {prefix}: {wide_msg}",
        )?
        .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(120));
    let mut b = Bench {
        k,
        s,
        timing: Timing::new(o.quick),
        quick: o.quick,
        json: o.json,
        l2,
        sm_count: sms,
        sizes: Sizes::new(o.quick),
        torch,
        d2d: None,
        rows: Vec::new(),
        targets: Vec::new(),
        pb: pb.clone(),
    };
    b.log(&format!(
        "kernels_bench on {name} ({sms} SMs, {:.0} MB L2), {driver}, {} run",
        l2 as f64 / 1e6,
        meta.mode
    ));
    if let Some((_, head)) = &meta.torch {
        if !head.contains(&name) {
            b.log(&format!(
                "warning: the --torch file's first line ({head:?}) does not name this GPU \
                 ({name}): compare figures from one machine and one run"
            ));
        }
    } else {
        b.log("no --torch file: PyTorch columns and PyTorch-based targets stay empty");
    }

    let result = (|| -> BenchResult<()> {
        for (section, f) in SECTIONS {
            if o.only
                .as_deref()
                .is_some_and(|only| !section.contains(only))
            {
                pb.inc(1);
                continue;
            }
            pb.set_prefix(section);
            f(&mut b)?;
            pb.inc(1);
        }
        Ok(())
    })();
    pb.finish_and_clear();
    result?;
    b.s.synchronize()?;
    meta.d2d = b.d2d;

    std::fs::create_dir_all(&o.out)
        .map_err(|e| format!("creating --out {}: {e}", o.out.display()))?;
    let md_path = o.out.join("kernels_bench.md");
    let svg_path = o.out.join("kernels_bench.svg");
    let title = format!(
        "kernels_bench: % of reference on {name} ({} run)",
        meta.mode
    );
    let svg = chart::svg(&b.rows, &title)?;
    std::fs::write(&svg_path, svg).map_err(|e| format!("writing {}: {e}", svg_path.display()))?;
    let md = report::markdown(&meta, &b.rows, &b.targets, "kernels_bench.svg");
    std::fs::write(&md_path, md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;

    if o.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&meta, &b.rows, &b.targets))?
        );
        return Ok(());
    }
    println!();
    let count = |v: Verdict| b.targets.iter().filter(|t| t.verdict() == v).count();
    println!(
        "targets: {} PASS, {} MISS, {} SKIP",
        count(Verdict::Pass),
        count(Verdict::Miss),
        count(Verdict::Skip)
    );
    for t in &b.targets {
        println!("  {}", t.line());
    }
    println!(
        "report: {}  chart: {}",
        md_path.display(),
        svg_path.display()
    );
    println!();
    print!("{}", rows::table(&b.rows));
    Ok(())
}
