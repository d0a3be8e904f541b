//! What every kernel_lab experiment shares: the GPU context, run-time compilation, timing, the
//! checks against the library's output and the report table with its same-run references.

use cuda_examples::bench::{median, Table};
use cuda_examples::torch::TorchBaseline;
use cuda_stack_driver::nvrtc::{compile_ptx, CompileOptions};
use cuda_stack_driver::{Context, Module, Stream};
use cuda_stack_kernels::Kernels;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// What every lab step returns.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The lab's GPU, kernels, references and report.
pub struct Lab {
    /// The context the lab runs in.
    pub ctx: Context,
    /// The one stream every measurement runs on.
    pub s: Stream,
    /// The library's kernels.
    pub k: Arc<Kernels>,
    /// `--quick`: small sizes, few repetitions.
    pub quick: bool,
    /// `anchors/torch_baseline.py`'s figures (`--torch`).
    pub torch: TorchBaseline,
    /// `tools/torch_sweep.py`'s eager seconds per case id (`--torch-sweep`), e.g. cuBLAS for
    /// `"sgemm NT 2047x2049x2051"`.
    pub sweep: HashMap<String, f64>,
    table: Table,
}

impl Lab {
    /// A lab on GPU `device`.
    pub fn new(
        device: usize,
        quick: bool,
        torch: TorchBaseline,
        sweep: HashMap<String, f64>,
    ) -> Res<Lab> {
        let ctx = Context::new(device)?;
        let s = ctx.new_stream()?;
        let k = Kernels::get(&ctx)?;
        Ok(Lab {
            ctx,
            s,
            k,
            quick,
            torch,
            sweep,
            table: Table::new(&[
                "kernel",
                "variant",
                "time",
                "rate",
                "x ref",
                "vs torch",
                "check vs library",
            ]),
        })
    }

    /// Compiles CUDA C source with NVRTC for this GPU and loads it.
    pub fn compile(&self, name: &str, src: &str) -> Res<Module> {
        let ptx = compile_ptx(
            name,
            src,
            &CompileOptions {
                std: Some("c++17".into()),
                ..CompileOptions::for_context(&self.ctx)
            },
        )?;
        Ok(self.ctx.load_ptx(&ptx)?)
    }

    /// A report row: `rate` in `unit`, "x ref" = `rate / reference`, "vs torch" against the
    /// `--torch` figure `torch_key` (same unit) when present.
    #[allow(clippy::too_many_arguments)]
    pub fn row(
        &mut self,
        group: &str,
        name: &str,
        secs: f64,
        rate: f64,
        unit: &str,
        reference: f64,
        torch_key: &str,
        check: &str,
    ) {
        let vs = self
            .torch
            .get(torch_key)
            .map(|t| format!("{:.3}x", rate / t))
            .unwrap_or_default();
        self.table.row(&[
            group.into(),
            name.into(),
            format!("{:.2} us", secs * 1e6),
            format!("{rate:.1} {unit}"),
            format!("{:.3}", rate / reference),
            vs,
            check.into(),
        ]);
    }

    /// A report row for work `work` (bytes or FLOPs, per `unit`) done in `secs`, beside a
    /// same-run reference that did the same work in `ref_secs` ("x ref" = ref_secs / secs; empty
    /// when there is no reference).
    #[allow(clippy::too_many_arguments)]
    pub fn rel(
        &mut self,
        group: &str,
        name: &str,
        secs: f64,
        work: f64,
        unit: Unit,
        ref_secs: Option<f64>,
        check: &str,
    ) {
        let (scale, u) = match unit {
            Unit::Bytes => (1e9, "GB/s"),
            Unit::Flops => (1e12, "TFLOP/s"),
        };
        self.table.row(&[
            group.into(),
            name.into(),
            format!("{:.2} us", secs * 1e6),
            format!("{:.1} {u}", work / secs / scale),
            ref_secs
                .map(|r| format!("{:.3}", r / secs))
                .unwrap_or_default(),
            String::new(),
            check.into(),
        ]);
    }

    /// A free-form row (host-side costs).
    pub fn note(&mut self, group: &str, name: &str, value: String) {
        self.table.row(&[group.into(), name.into(), value]);
    }

    /// Prints the table.
    pub fn print(&self) {
        self.table.print();
    }
}

/// What a [`Lab::rel`] row's work counts.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Bytes moved (memory-bound kernels).
    Bytes,
    /// Floating-point operations (GEMMs).
    Flops,
}

/// Median seconds per call over 5 trials of `reps` calls (after a warm-up), timed with events.
pub fn time(s: &Stream, reps: usize, mut f: impl FnMut(&Stream) -> Res<()>) -> Res<f64> {
    f(s)?;
    let mut v = Vec::new();
    for _ in 0..5 {
        let ((), d) = s.time(|s| {
            for _ in 0..reps {
                f(s).map_err(|e| cuda_stack_driver::Error::Unsupported {
                    what: "lab step",
                    why: e.to_string(),
                })?;
            }
            Ok(())
        })?;
        v.push(d.as_secs_f64() / reps as f64);
    }
    Ok(median(&v))
}

/// [`time`] with the repetitions chosen from one timed call, so a trial lasts about `target`
/// seconds (the sweep's method, shorter trials): at least 3, at most 1000 calls.
pub fn time_auto(s: &Stream, target: f64, mut f: impl FnMut(&Stream) -> Res<()>) -> Res<f64> {
    f(s)?;
    let ((), one) = s.time(|s| {
        f(s).map_err(|e| cuda_stack_driver::Error::Unsupported {
            what: "lab step",
            why: e.to_string(),
        })
    })?;
    let reps = ((target / one.as_secs_f64().max(1e-7)) as usize).clamp(3, 1000);
    time(s, reps, f)
}

/// "bit-identical", "max |diff| …" or "DIFFERENT" (lengths or NaN positions differ).
pub fn same(a: &[f32], b: &[f32]) -> String {
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.is_nan() != y.is_nan()) {
        "DIFFERENT".into()
    } else if worst == 0.0 {
        "bit-identical".into()
    } else {
        format!("max |diff| {worst:.1e}")
    }
}

/// `tools/torch_sweep.py`'s JSON: eager seconds per case id.
pub fn load_sweep(path: Option<&Path>) -> Res<HashMap<String, f64>> {
    let Some(p) = path else {
        return Ok(HashMap::new());
    };
    let text = std::fs::read_to_string(p)
        .map_err(|e| format!("reading --torch-sweep {}: {e}", p.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--torch-sweep {}: not torch_sweep.py's JSON: {e}",
            p.display()
        )
    })?;
    let mut out = HashMap::new();
    if let Some(m) = v["cases"].as_object() {
        for (id, c) in m {
            if let Some(e) = c["eager_s"].as_f64() {
                out.insert(id.clone(), e);
            }
        }
    }
    Ok(out)
}
