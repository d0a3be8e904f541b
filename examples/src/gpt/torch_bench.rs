//! PyTorch's side of `train_gpt`'s speed comparisons (issue 33): the JSON
//! `tools/torch_gpt_bench.py --json` prints (nanoGPT's GPT in PyTorch eager and under
//! `torch.compile`), read from a file (`--torch FILE`) or from the script run after our own
//! measurement on the same GPU (`--torch-run`), and our figures set beside it — a table, and
//! PASS/MISS lines for the issue's GPT-2 124M targets ([`gpt2_targets`]).

use crate::bench::Table;
use cuda_stack_runtime::caching::format_bytes;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The modes the script measures, in the order they are shown.
pub const MODES: [&str; 2] = ["eager", "compile"];

/// The iterations nanoGPT's `shakespeare_char` trains for: each side's time per iteration is
/// projected to this many.
pub const CHAR_ITERS: usize = 5000;

/// The issue's targets for GPT-2 124M: ours ÷ PyTorch eager tokens/s at least this.
pub const EAGER_TARGET: f64 = 1.3;
/// Ours ÷ `torch.compile` tokens/s at least this (llm.c's margin).
pub const COMPILE_TARGET: f64 = 1.05;
/// Our time to the first step at most this many seconds.
pub const FIRST_STEP_TARGET_S: f64 = 5.0;

/// One mode's figures (see the script's docstring for how each is measured).
#[derive(Debug, Clone, PartialEq)]
pub struct TorchMode {
    /// From building the model to the end of the first step, compilation included.
    pub first_step_s: f64,
    /// The mean step over the timed steps (host clock, as ours).
    pub step_ms: f64,
    /// The median of the timed steps' CUDA-event times.
    pub step_ms_median: Option<f64>,
    /// Tokens per second over the timed steps.
    pub tokens_per_s: f64,
    /// `torch.cuda.max_memory_allocated()` over the mode.
    pub peak_allocated: u64,
    /// The loss of the last timed step.
    pub loss_last: Option<f64>,
}

/// What the script printed: its settings and each mode's figures or error.
#[derive(Debug, Clone)]
pub struct TorchGpt {
    /// `torch.__version__`.
    pub version: String,
    /// The GPU's name as PyTorch reports it.
    pub gpu: String,
    /// `gpt2` or `shakespeare`.
    pub config: String,
    /// Sequences per micro-batch.
    pub batch: u64,
    /// Micro-batches per step.
    pub grad_accum: u64,
    /// `bf16` (autocast) or `f32`.
    pub dtype: String,
    /// Whether TF32 was allowed.
    pub tf32: bool,
    /// GPUs (ranks) of the run: 1, or N for a `--gpus N` DistributedDataParallel run (each
    /// mode then wraps the model in DDP, `batch` is per rank and the figures are global).
    pub gpus: u64,
    /// Each mode the script ran, in [`MODES`] order: its figures, or why it failed.
    pub modes: Vec<(String, Result<TorchMode, String>)>,
    /// The whole JSON document (for our own `--json`).
    pub doc: Value,
}

/// A mode's figures (a mode the script reported as failed is not passed here).
fn figures(name: &str, v: &Value) -> Result<TorchMode, String> {
    let num = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| format!("mode {name}: no number \"{k}\""))
    };
    Ok(TorchMode {
        first_step_s: num("first_step_s")?,
        step_ms: num("step_ms")?,
        step_ms_median: v["step_ms_median"].as_f64(),
        tokens_per_s: num("tokens_per_s")?,
        peak_allocated: v["peak_allocated_bytes"]
            .as_u64()
            .ok_or_else(|| format!("mode {name}: no \"peak_allocated_bytes\""))?,
        loss_last: v["loss_last"].as_f64(),
    })
}

impl TorchGpt {
    /// Parses the script's output (`what` names it in errors): the whole text as JSON, or else
    /// its last line that starts with `{`.
    pub fn parse(text: &str, what: &str) -> Result<TorchGpt, String> {
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let line = text
                    .lines()
                    .rev()
                    .find(|l| l.trim_start().starts_with('{'))
                    .ok_or_else(|| format!("{what}: no JSON object in it ({e})"))?;
                serde_json::from_str(line)
                    .map_err(|e| format!("{what}: not tools/torch_gpt_bench.py's JSON: {e}"))?
            }
        };
        let s = |k: &str| v[k].as_str().unwrap_or("?").to_string();
        let Some(modes) = v["modes"].as_object() else {
            return Err(format!("{what}: no \"modes\" object"));
        };
        let config = v["config"]
            .as_str()
            .ok_or_else(|| format!("{what}: no \"config\""))?
            .to_string();
        let mut out = TorchGpt {
            version: s("torch"),
            gpu: s("gpu"),
            config,
            batch: v["batch"]
                .as_u64()
                .ok_or_else(|| format!("{what}: no \"batch\""))?,
            grad_accum: v["grad_accum"].as_u64().unwrap_or(1),
            dtype: v["dtype"].as_str().unwrap_or("bf16").to_string(),
            tf32: v["tf32"].as_bool().unwrap_or(true),
            gpus: v["gpus"].as_u64().unwrap_or(1),
            modes: Vec::new(),
            doc: v.clone(),
        };
        let mut names: Vec<&String> = modes.keys().collect();
        names.sort_by_key(|n| MODES.iter().position(|m| m == n).unwrap_or(MODES.len()));
        for n in names {
            let v = &modes[n.as_str()];
            let m = match v.get("error") {
                Some(e) => Err(e.as_str().map_or_else(|| e.to_string(), str::to_string)),
                // A mode without its figures (and no error) is not the script's output.
                None => Ok(figures(n, v).map_err(|e| format!("{what}: {e}"))?),
            };
            out.modes.push((n.clone(), m));
        }
        if out.modes.is_empty() {
            return Err(format!("{what}: \"modes\" is empty"));
        }
        Ok(out)
    }

    /// Reads `--torch FILE`, which must be for `config` (`gpt2` or `shakespeare`).
    pub fn load(path: &Path, config: &str) -> Result<TorchGpt, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading --torch {}: {e}", path.display()))?;
        let t = TorchGpt::parse(&text, &format!("--torch {}", path.display()))?;
        if t.config != config {
            return Err(format!(
                "--torch {}: PyTorch's figures are for --config {}, this run is {config} \
                 (run tools/torch_gpt_bench.py --config {config} --json)",
                path.display(),
                t.config
            ));
        }
        Ok(t)
    }

    /// The figures of mode `name`: `None` when it did not run, `Some(Err(why))` when it failed.
    pub fn mode(&self, name: &str) -> Option<&Result<TorchMode, String>> {
        self.modes.iter().find(|(n, _)| n == name).map(|(_, m)| m)
    }

    /// The figures of mode `name` if it ran and succeeded.
    pub fn ok(&self, name: &str) -> Option<&TorchMode> {
        self.mode(name).and_then(|m| m.as_ref().ok())
    }

    /// Notes where PyTorch's run differs from ours (batch, accumulation, dtype).
    pub fn differences(&self, batch: usize, grad_accum: usize, dtype: &str) -> Vec<String> {
        let mut v = Vec::new();
        if self.batch != batch as u64 || self.grad_accum != grad_accum as u64 {
            v.push(format!(
                "PyTorch ran batch {} × {} micro-batch(es), ours {batch} × {grad_accum}: not the \
                 same configuration",
                self.batch, self.grad_accum
            ));
        }
        if self.dtype != dtype {
            v.push(format!(
                "PyTorch computed in {}, ours in {dtype}",
                self.dtype
            ));
        }
        v
    }
}

/// How `--torch-run` runs the script.
#[derive(Debug, Clone)]
pub struct TorchRequest {
    /// The script (`--torch-script`, `tools/torch_gpt_bench.py`).
    pub script: PathBuf,
    /// `gpt2` or `shakespeare`.
    pub config: &'static str,
    /// Sequences per micro-batch.
    pub batch: usize,
    /// Micro-batches per step.
    pub grad_accum: usize,
    /// Timed steps.
    pub steps: usize,
    /// Untimed steps after the first.
    pub warmup: usize,
    /// `bf16` or `f32`.
    pub dtype: &'static str,
    /// Whether TF32 may be used (the script's default; `false` passes `--no-tf32`).
    pub tf32: bool,
    /// Comma-separated modes.
    pub modes: String,
    /// The CUDA device ordinal (the first of `gpus`).
    pub device: usize,
    /// GPUs: 1, or N > 1 for PyTorch DDP over N processes (`--gpus N`).
    pub gpus: usize,
}

impl TorchRequest {
    /// The command line's arguments after `python3`.
    pub fn args(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![
            self.script.display().to_string(),
            "--json".into(),
            "--config".into(),
            self.config.into(),
            "--batch".into(),
            self.batch.to_string(),
            "--grad-accum".into(),
            self.grad_accum.to_string(),
            "--steps".into(),
            self.steps.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--dtype".into(),
            self.dtype.into(),
            "--modes".into(),
            self.modes.clone(),
            "--device".into(),
            self.device.to_string(),
        ];
        if !self.tf32 {
            v.push("--no-tf32".into());
        }
        if self.gpus > 1 {
            v.push("--gpus".into());
            v.push(self.gpus.to_string());
        }
        v
    }

    /// Runs `python3 script --json ...` (its progress lines go to this program's stderr) and
    /// parses what it prints; an error says why there are no figures (no python3, no torch, no
    /// GPU for it, ...).
    pub fn run(&self) -> Result<TorchGpt, String> {
        if !self.script.exists() {
            return Err(format!(
                "{} does not exist (run from the repository root, or pass --torch-script PATH)",
                self.script.display()
            ));
        }
        let args = self.args();
        let out = Command::new("python3")
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("could not start python3: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "python3 {} failed ({}; its message is above)",
                args.join(" "),
                out.status
            ));
        }
        TorchGpt::parse(
            &String::from_utf8_lossy(&out.stdout),
            &format!("python3 {}'s output", self.script.display()),
        )
    }
}

/// Our GPT-2 124M figures, to set beside PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OursGpt2 {
    /// The mean step (host clock over the timed steps).
    pub step_ms: f64,
    /// Tokens per second over the timed steps.
    pub tokens_per_s: f64,
    /// The caching allocator's peak of allocated bytes.
    pub peak_allocated: u64,
    /// From the start of the program's GPU work to the end of the first step.
    pub first_step_s: f64,
    /// The loss of the last timed step.
    pub loss_last: f64,
}

/// One of the issue's targets: met (`Some(true)`), missed (`Some(false)`) or not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What it asks, e.g. "tokens/s ≥ 1.3× PyTorch eager".
    pub what: String,
    /// Met, missed, or `None` when PyTorch's side of it is missing.
    pub pass: Option<bool>,
    /// The figures behind it (or why it is not measured).
    pub detail: String,
}

impl Target {
    /// `PASS  what: detail`, `MISS  ...` or `----  ...`.
    pub fn line(&self) -> String {
        let tag = match self.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "----",
        };
        format!("{tag}  {}: {}", self.what, self.detail)
    }

    /// For a JSON summary.
    pub fn json(&self) -> Value {
        json!({"target": self.what, "pass": self.pass, "detail": self.detail})
    }
}

/// `n` with thousands separators.
pub fn thousands(n: f64) -> String {
    let s = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// Why a mode's figures are missing, for a target's line.
fn missing(torch: Option<&TorchGpt>, mode: &str) -> String {
    match torch.map(|t| t.mode(mode)) {
        None => "PyTorch not measured".to_string(),
        Some(None) => format!("PyTorch {mode} not run"),
        Some(Some(Err(e))) => format!("PyTorch {mode} failed: {e}"),
        Some(Some(Ok(_))) => unreachable!("missing() is called for a mode without figures"),
    }
}

/// The issue's GPT-2 124M targets: tokens/s ≥ 1.3× eager and ≥ 1.05× `torch.compile`, peak
/// memory ≤ `torch.compile`'s, time to the first step ≤ 5 s.
pub fn gpt2_targets(ours: &OursGpt2, torch: Option<&TorchGpt>) -> Vec<Target> {
    let mut v = Vec::new();
    for (mode, name, target) in [
        ("eager", "PyTorch eager", EAGER_TARGET),
        ("compile", "torch.compile", COMPILE_TARGET),
    ] {
        let what = format!("tokens/s ≥ {target}× {name}");
        v.push(match torch.and_then(|t| t.ok(mode)) {
            Some(m) => {
                let r = ours.tokens_per_s / m.tokens_per_s;
                Target {
                    what,
                    pass: Some(r >= target),
                    detail: format!(
                        "{} vs {} = {r:.2}×",
                        thousands(ours.tokens_per_s),
                        thousands(m.tokens_per_s)
                    ),
                }
            }
            None => Target {
                what,
                pass: None,
                detail: missing(torch, mode),
            },
        });
    }
    let what = "peak memory ≤ torch.compile's (allocated)".to_string();
    v.push(match torch.and_then(|t| t.ok("compile")) {
        Some(m) => Target {
            what,
            pass: Some(ours.peak_allocated <= m.peak_allocated),
            detail: format!(
                "{} vs {} = {:.2}×",
                format_bytes(ours.peak_allocated as usize),
                format_bytes(m.peak_allocated as usize),
                ours.peak_allocated as f64 / m.peak_allocated.max(1) as f64
            ),
        },
        None => Target {
            what,
            pass: None,
            detail: missing(torch, "compile"),
        },
    });
    v.push(Target {
        what: format!("time to the first step ≤ {FIRST_STEP_TARGET_S} s"),
        pass: Some(ours.first_step_s <= FIRST_STEP_TARGET_S),
        detail: format!("{:.2} s", ours.first_step_s),
    });
    v
}

/// A PyTorch mode's cell: `show(figures)`, or why there are none.
fn cell(torch: &TorchGpt, mode: &str, show: impl Fn(&TorchMode) -> String) -> String {
    match torch.mode(mode) {
        Some(Ok(m)) => show(m),
        Some(Err(_)) => "failed".into(),
        None => "-".into(),
    }
}

/// The columns: figure, ours, then each mode and ours ÷ it.
fn headers() -> Vec<&'static str> {
    vec![
        "figure",
        "ours",
        "torch eager",
        "ours / eager",
        "torch compile",
        "ours / compile",
    ]
}

/// A row: `ours` and each mode's `get` shown by `show`, with the ratio ours ÷ theirs.
fn ratio_row(
    t: &mut Table,
    torch: &TorchGpt,
    name: &str,
    ours: Option<f64>,
    get: impl Fn(&TorchMode) -> Option<f64>,
    show: impl Fn(f64) -> String,
) {
    let mut row = vec![name.to_string(), ours.map_or("-".into(), &show)];
    for mode in MODES {
        row.push(cell(torch, mode, |m| get(m).map_or("-".into(), &show)));
        let ratio = match (ours, torch.ok(mode).and_then(&get)) {
            (Some(o), Some(p)) if p > 0.0 => format!("{:.2}×", o / p),
            _ => "-".into(),
        };
        row.push(ratio);
    }
    t.row(&row);
}

/// Ours beside PyTorch eager and `torch.compile` for GPT-2 124M: step time, tokens/s, peak
/// memory, time to the first step, the last loss.
pub fn gpt2_table(ours: &OursGpt2, torch: &TorchGpt) -> Table {
    let mut t = Table::new(&headers());
    ratio_row(
        &mut t,
        torch,
        "step time (mean)",
        Some(ours.step_ms),
        |m| Some(m.step_ms),
        |v| format!("{v:.2} ms"),
    );
    ratio_row(
        &mut t,
        torch,
        "step time (median, CUDA events)",
        None,
        |m| m.step_ms_median,
        |v| format!("{v:.2} ms"),
    );
    ratio_row(
        &mut t,
        torch,
        "tokens/s",
        Some(ours.tokens_per_s),
        |m| Some(m.tokens_per_s),
        thousands,
    );
    ratio_row(
        &mut t,
        torch,
        "peak memory allocated",
        Some(ours.peak_allocated as f64),
        |m| Some(m.peak_allocated as f64),
        |v| format_bytes(v as usize),
    );
    ratio_row(
        &mut t,
        torch,
        "time to the first step",
        Some(ours.first_step_s),
        |m| Some(m.first_step_s),
        |v| format!("{v:.2} s"),
    );
    ratio_row(
        &mut t,
        torch,
        "loss at the last timed step",
        Some(ours.loss_last),
        |m| m.loss_last,
        |v| format!("{v:.4}"),
    );
    t
}

/// Our shakespeare-char figures, to set beside PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OursChar {
    /// Training time per iteration (evaluation left out).
    pub iter_ms: f64,
    /// Training tokens per second.
    pub tokens_per_s: f64,
    /// The caching allocator's peak of allocated bytes over the run.
    pub peak_allocated: u64,
}

/// Ours beside PyTorch eager and `torch.compile` for shakespeare-char: ms per iteration,
/// tokens/s, the projected [`CHAR_ITERS`]-iteration training wall time, peak memory and
/// PyTorch's time to the first step.
pub fn char_table(ours: &OursChar, torch: &TorchGpt) -> Table {
    let mut t = Table::new(&headers());
    ratio_row(
        &mut t,
        torch,
        "iteration time (mean)",
        Some(ours.iter_ms),
        |m| Some(m.step_ms),
        |v| format!("{v:.2} ms"),
    );
    ratio_row(
        &mut t,
        torch,
        "tokens/s",
        Some(ours.tokens_per_s),
        |m| Some(m.tokens_per_s),
        thousands,
    );
    ratio_row(
        &mut t,
        torch,
        &format!("{CHAR_ITERS} iterations (projected)"),
        Some(ours.iter_ms * CHAR_ITERS as f64 / 1e3),
        |m| Some(m.step_ms * CHAR_ITERS as f64 / 1e3),
        |v| format!("{v:.1} s"),
    );
    ratio_row(
        &mut t,
        torch,
        "peak memory allocated",
        Some(ours.peak_allocated as f64),
        |m| Some(m.peak_allocated as f64),
        |v| format_bytes(v as usize),
    );
    ratio_row(
        &mut t,
        torch,
        "time to the first step",
        None,
        |m| Some(m.first_step_s),
        |v| format!("{v:.2} s"),
    );
    t
}

/// A line on PyTorch's run: version, GPU, settings, and each failed mode's error.
pub fn describe(torch: &TorchGpt) -> Vec<String> {
    let d = &torch.doc;
    let mut v = vec![format!(
        "PyTorch {} on {}{}{}: nanoGPT's GPT ({}), batch {} × {} × {}{}, {}, TF32 {}, fused AdamW, \
         clip 1.0, {} warm-up + {} timed steps (CUDA start-up {} s before the first step, not \
         counted)",
        torch.version,
        if torch.gpus > 1 {
            format!("{} × ", torch.gpus)
        } else {
            String::new()
        },
        torch.gpu,
        if torch.gpus > 1 {
            ", DistributedDataParallel (NCCL, one process per GPU, 25 MiB buckets)"
        } else {
            ""
        },
        torch.config,
        torch.batch,
        torch.grad_accum,
        d["seq"].as_u64().map_or("?".into(), |s| s.to_string()),
        if torch.gpus > 1 { " per GPU" } else { "" },
        if torch.dtype == "bf16" {
            "bf16 autocast"
        } else {
            "f32"
        },
        if torch.tf32 { "allowed" } else { "off" },
        d["warmup"],
        d["steps"],
        d["cuda_init_s"]
            .as_f64()
            .map_or("?".into(), |s| format!("{s:.2}")),
    )];
    for (name, m) in &torch.modes {
        if let Err(e) = m {
            v.push(format!("PyTorch {name} failed: {e}"));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"torch": "2.11.0", "gpu": "NVIDIA H100 80GB HBM3", "config": "gpt2",
        "batch": 16, "grad_accum": 1, "seq": 1024, "dtype": "bf16", "tf32": true, "steps": 10,
        "warmup": 3, "cuda_init_s": 0.4, "modes": {
        "compile": {"first_step_s": 29.0, "step_ms": 35.4, "step_ms_median": 35.3,
                    "tokens_per_s": 462364.0, "peak_allocated_bytes": 9126805504,
                    "peak_reserved_bytes": 9663676416, "loss_first": 11.0, "loss_last": 10.5},
        "eager": {"first_step_s": 1.5, "step_ms": 48.5, "step_ms_median": 48.4,
                  "tokens_per_s": 337906.0, "peak_allocated_bytes": 15569256448,
                  "peak_reserved_bytes": 16000000000, "loss_first": 11.0, "loss_last": 10.6}}}"#;

    fn ours(tps: f64, peak: u64, first: f64) -> OursGpt2 {
        OursGpt2 {
            step_ms: 16384.0 / tps * 1e3,
            tokens_per_s: tps,
            peak_allocated: peak,
            first_step_s: first,
            loss_last: 10.5,
        }
    }

    #[test]
    fn parses_the_scripts_output() {
        let t = TorchGpt::parse(DOC, "test").unwrap();
        assert_eq!(t.version, "2.11.0");
        assert_eq!((t.config.as_str(), t.batch, t.grad_accum), ("gpt2", 16, 1));
        assert!(t.tf32);
        // Shown in MODES order whatever the file's order.
        let names: Vec<&str> = t.modes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["eager", "compile"]);
        let c = t.ok("compile").unwrap();
        assert_eq!(c.peak_allocated, 9126805504);
        assert_eq!(c.step_ms_median, Some(35.3));
        assert!(t.differences(16, 1, "bf16").is_empty());
        assert_eq!(t.differences(8, 1, "f32").len(), 2);
        // Progress lines before the JSON line are skipped.
        let noisy = format!("compiling ...\n{}\n", DOC.replace('\n', " "));
        assert_eq!(TorchGpt::parse(&noisy, "test").unwrap().modes.len(), 2);
    }

    #[test]
    fn a_failed_mode_is_reported_not_fatal() {
        let text = r#"{"config": "gpt2", "batch": 16, "modes": {
            "eager": {"first_step_s": 1.5, "step_ms": 48.5, "tokens_per_s": 337906.0,
                      "peak_allocated_bytes": 100},
            "compile": {"error": "BackendCompilerFailed: no C compiler"}}}"#;
        let t = TorchGpt::parse(text, "test").unwrap();
        assert!(t.ok("eager").is_some());
        assert_eq!(
            t.mode("compile"),
            Some(&Err("BackendCompilerFailed: no C compiler".to_string()))
        );
        let targets = gpt2_targets(&ours(500_000.0, 50, 2.0), Some(&t));
        assert_eq!(targets[0].pass, Some(true));
        assert_eq!(targets[1].pass, None);
        assert!(targets[1].detail.contains("no C compiler"));
        assert_eq!(targets[2].pass, None);
        assert_eq!(targets[3].pass, Some(true));
        assert!(describe(&t).iter().any(|l| l.contains("compile failed")));
        let table = gpt2_table(&ours(500_000.0, 50, 2.0), &t).render();
        assert!(table.contains("failed"));
    }

    #[test]
    fn bad_output_is_an_error() {
        assert!(TorchGpt::parse("", "test").is_err());
        assert!(TorchGpt::parse("{}", "test").is_err());
        assert!(TorchGpt::parse(r#"{"config": "gpt2", "batch": 1, "modes": {}}"#, "t").is_err());
        let no_figures = r#"{"config": "gpt2", "batch": 1, "modes": {"eager": {"step_ms": 1}}}"#;
        let e = TorchGpt::parse(no_figures, "test").unwrap_err();
        assert!(e.starts_with("test: mode eager: no number"), "{e}");
    }

    #[test]
    fn targets_pass_and_miss() {
        let t = TorchGpt::parse(DOC, "test").unwrap();
        // 1.3 × 337,906 = 439,278 and 1.05 × 462,364 = 485,482.
        let fast = gpt2_targets(&ours(490_000.0, 9_000_000_000, 4.0), Some(&t));
        assert!(fast.iter().all(|x| x.pass == Some(true)), "{fast:?}");
        let slow = gpt2_targets(&ours(294_501.0, 10_522_669_875, 6.0), Some(&t));
        assert!(slow.iter().all(|x| x.pass == Some(false)), "{slow:?}");
        assert_eq!(
            slow[0].line(),
            "MISS  tokens/s ≥ 1.3× PyTorch eager: 294,501 vs 337,906 = 0.87×"
        );
        let alone = gpt2_targets(&ours(294_501.0, 1, 1.0), None);
        assert_eq!(
            alone.iter().map(|x| x.pass).collect::<Vec<_>>(),
            [None, None, None, Some(true)]
        );
        assert!(alone[0].line().starts_with("----  "));
    }

    #[test]
    fn tables_have_ratios() {
        let t = TorchGpt::parse(DOC, "test").unwrap();
        let g = gpt2_table(&ours(462_364.0, 9_126_805_504, 2.0), &t).render();
        assert!(g.contains("1.00×"), "{g}");
        assert!(g.contains("462,364"), "{g}");
        let c = char_table(
            &OursChar {
                iter_ms: 12.1,
                tokens_per_s: 1.35e6,
                peak_allocated: 1 << 30,
            },
            &t,
        )
        .render();
        assert!(c.contains("60.5 s"), "{c}");
        assert!(c.contains("5000 iterations (projected)"), "{c}");
    }

    #[test]
    fn request_arguments() {
        let r = TorchRequest {
            script: "tools/torch_gpt_bench.py".into(),
            config: "gpt2",
            batch: 16,
            grad_accum: 1,
            steps: 20,
            warmup: 3,
            dtype: "bf16",
            tf32: false,
            modes: "eager,compile".into(),
            device: 0,
            gpus: 1,
        };
        let a = r.args().join(" ");
        assert_eq!(
            a,
            "tools/torch_gpt_bench.py --json --config gpt2 --batch 16 --grad-accum 1 --steps \
             20 --warmup 3 --dtype bf16 --modes eager,compile --device 0 --no-tf32"
        );
        let ddp = TorchRequest {
            gpus: 2,
            modes: "eager".into(),
            ..r.clone()
        };
        assert!(ddp.args().join(" ").ends_with("--no-tf32 --gpus 2"));
        assert!(TorchRequest {
            script: "/nonexistent/torch_gpt_bench.py".into(),
            ..r
        }
        .run()
        .unwrap_err()
        .contains("does not exist"));
    }
}
