//! The sweep's results: one line per case, one row per family (minimum and median ratio, the
//! worst shape, PASS/MISS on the minimum), as Markdown, JSON and an SVG chart.

use super::cases::{Case, Family, Op};
use super::ours::Ours;
use crate::kb::timing::BenchResult;
use cuda_examples::bench::{median, Table};
use plotters::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

/// PyTorch's side of the sweep (`tools/torch_sweep.py` output).
#[derive(Debug, Clone)]
pub struct TorchSide {
    /// Its first line: torch version, GPU name.
    pub header: String,
    /// Per case id: eager seconds per call, and CUDA-graph-replayed seconds when captured.
    pub cases: HashMap<String, (f64, Option<f64>)>,
}

impl TorchSide {
    /// Reads the JSON file the script wrote.
    pub fn load(p: &Path) -> BenchResult<TorchSide> {
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("reading --torch-sweep {}: {e}", p.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("--torch-sweep {}: not the script's JSON: {e}", p.display()))?;
        let header = v["header"].as_str().unwrap_or("?").to_string();
        let mut cases = HashMap::new();
        if let Some(m) = v["cases"].as_object() {
            for (id, c) in m {
                if let Some(e) = c["eager_s"].as_f64() {
                    cases.insert(id.clone(), (e, c["graph_s"].as_f64()));
                }
            }
        }
        Ok(TorchSide { header, cases })
    }
}

/// One case's figures.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The case.
    pub case: Case,
    /// Our figures.
    pub ours: Ours,
    /// PyTorch eager seconds per call (same timing method as ours).
    pub torch: Option<f64>,
    /// PyTorch seconds per call replayed from a CUDA graph (GPU time without host overhead).
    pub torch_graph: Option<f64>,
    /// Reference seconds / our seconds (the family's reference: PyTorch, cuBLAS or our D2D).
    pub ratio: Option<f64>,
    /// PyTorch's graph-replayed seconds / ours (GPU time against GPU time), where both exist.
    pub graph_ratio: Option<f64>,
}

impl Measured {
    /// Pairs our figures with the reference.
    pub fn new(case: Case, ours: Ours, torch: Option<&TorchSide>) -> Measured {
        let (t, tg) = torch
            .and_then(|ts| ts.cases.get(&case.id()).copied())
            .map_or((None, None), |(e, g)| (Some(e), g));
        let reference = match case.family() {
            Family::Transpose => ours.d2d_secs,
            _ => t,
        };
        let ratio = reference.map(|r| r / ours.secs);
        let graph_ratio = tg.zip(ours.graph_secs).map(|(r, o)| r / o);
        Measured {
            case,
            ours,
            torch: t,
            torch_graph: tg,
            ratio,
            graph_ratio,
        }
    }

    /// The ratio the family's target is judged on: the eager ratio, or where both sides were
    /// also replayed from CUDA graphs, the lower of the eager and the GPU-only ratio (so that
    /// neither side's host cost can hide the kernels, nor the kernels the host cost).
    pub fn score(&self) -> Option<f64> {
        match (self.ratio, self.graph_ratio) {
            (Some(e), Some(g)) => Some(e.min(g)),
            (r, _) => r,
        }
    }

    /// Whether the case counts toward its family's target (transposes and broadcasts: from
    /// 1 MiB; the issue's jit target is for 2^20 elements and up, which every jit case has).
    pub fn counts(&self) -> bool {
        match self.case.op {
            Op::Transpose { rows, cols } => rows * cols * 4 >= 1 << 20,
            Op::Bcast { .. } => self.case.work() >= f64::from(1 << 20),
            _ => true,
        }
    }

    /// Whether PyTorch's eager time is bound by its host-side launch cost (eager ≥ 1.5× its
    /// graph-replayed time): such a ratio says more about launch paths than kernels.
    pub fn host_bound(&self) -> bool {
        matches!((self.torch, self.torch_graph), (Some(e), Some(g)) if e > 1.5 * g)
    }

    fn rate(&self, secs: f64) -> String {
        let w = self.case.work();
        if self.case.is_flops() {
            format!("{:.2} TFLOP/s", w / secs / 1e12)
        } else {
            format!("{:.0} GB/s", w / secs / 1e9)
        }
    }

    fn cells(&self) -> Vec<String> {
        let us = |s: f64| format!("{:.2}", s * 1e6);
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
        vec![
            self.case.family().name().to_string(),
            self.case.id(),
            us(self.ours.secs),
            self.rate(self.ours.secs),
            opt(self.torch, &us),
            opt(self.torch_graph, &us),
            opt(self.ours.graph_secs, &us),
            opt(self.ours.d2d_secs, &us),
            opt(self.ratio, &|r| {
                format!(
                    "{r:.3}{}{}",
                    if self.host_bound() { " †" } else { "" },
                    if self.counts() { "" } else { " (<1 MiB)" }
                )
            }),
            opt(self.graph_ratio, &|r| format!("{r:.3}")),
        ]
    }

    /// The progress line.
    pub fn line(&self) -> String {
        self.cells().join("  |  ")
    }
}

/// One family's summary.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The family.
    pub family: Family,
    /// Cases with a ratio that count toward the target.
    pub cases: usize,
    /// Minimum ratio and the case it came from.
    pub min: Option<(f64, String)>,
    /// Median ratio.
    pub median: Option<f64>,
}

impl Summary {
    /// PASS / MISS on the minimum, or SKIP without a reference.
    pub fn verdict(&self) -> &'static str {
        match self.min {
            Some((m, _)) if m >= self.family.target() => "PASS",
            Some(_) => "MISS",
            None => "SKIP",
        }
    }
}

/// Per-family summaries, in report order.
pub fn summarize(all: &[Measured]) -> Vec<Summary> {
    Family::ALL
        .iter()
        .map(|&family| {
            let mine: Vec<&Measured> = all
                .iter()
                .filter(|m| m.case.family() == family && m.counts())
                .filter(|m| m.score().is_some())
                .collect();
            let ratios: Vec<f64> = mine.iter().filter_map(|m| m.score()).collect();
            let min = mine
                .iter()
                .filter_map(|m| m.score().map(|r| (r, m.case.id())))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            Summary {
                family,
                cases: ratios.len(),
                min,
                median: (!ratios.is_empty()).then(|| median(&ratios)),
            }
        })
        .collect()
}

fn family_table(sums: &[Summary]) -> Table {
    let mut t = Table::new(&[
        "family",
        "reference",
        "cases",
        "min",
        "median",
        "worst shape",
        "target",
        "verdict",
    ]);
    for s in sums {
        t.row(&[
            s.family.name().into(),
            s.family.reference().into(),
            s.cases.to_string(),
            s.min.as_ref().map_or("-".into(), |m| format!("{:.3}", m.0)),
            s.median.map_or("-".into(), |m| format!("{m:.3}")),
            s.min.as_ref().map_or("-".into(), |m| m.1.clone()),
            format!(">= {:.2}", s.family.target()),
            s.verdict().into(),
        ]);
    }
    t
}

fn case_table(all: &[Measured]) -> Table {
    let mut t = Table::new(&[
        "family",
        "case",
        "ours us",
        "ours rate",
        "torch us",
        "torch graph us",
        "ours graph us",
        "D2D us",
        "ratio",
        "graph ratio",
    ]);
    for m in all {
        t.row(&m.cells());
    }
    t
}

/// Writes kernels_sweep.{md,json,svg} to `out` and prints the family table and verdicts.
pub fn write(
    out: &Path,
    device: &str,
    torch: Option<&TorchSide>,
    all: &[Measured],
    quick: bool,
) -> BenchResult<()> {
    let sums = summarize(all);
    let fam = family_table(&sums).render();
    let cases = case_table(all).render();
    std::fs::create_dir_all(out).map_err(|e| format!("creating --out {}: {e}", out.display()))?;
    let torch_line = torch.map_or("none (no --torch-sweep)".to_string(), |t| t.header.clone());
    let settle = if quick {
        0.0
    } else {
        super::cases::SETTLE_SECS
    };
    let md = format!(
        "# kernels_bench --sweep on {device}{}\n\n\
         PyTorch side: {torch_line}\n\n\
         Ratio = reference time / our time (> 1: we are faster). Both sides: one warm-up call, \
         for the GEMM cases {settle} s of untimed calls (the clock the power limit lets the GPU \
         hold for that kernel), R back-to-back calls between two CUDA events on one stream \
         (a trial of ~10 ms), median of 5 trials, the same buffers every call. Transposes are measured against our \
         D2D copy of the same bytes (target on shapes of at least 1 MiB); GEMMs against cuBLAS \
         through `torch.mm` with TF32 off. † marks cases where PyTorch's eager time is at least \
         1.5x its CUDA-graph-replayed time (its host launch cost dominates). Where both sides were \
         also replayed from CUDA graphs (the half-precision GEMMs), \"graph ratio\" compares GPU \
         time with GPU time and the family is judged on the lower of the two ratios.\n\n\
         ![ratios](kernels_sweep.svg)\n\n## Per family (the target is on the minimum)\n\n\
         ```text\n{fam}```\n\n## Every case\n\n```text\n{cases}```\n",
        if quick { " (quick)" } else { "" }
    );
    let md_path = out.join("kernels_sweep.md");
    std::fs::write(&md_path, md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    let j = json!({
        "device": device,
        "torch": torch_line,
        "families": sums.iter().map(|s| json!({
            "family": s.family.name(), "cases": s.cases,
            "min": s.min.as_ref().map(|m| m.0), "worst": s.min.as_ref().map(|m| m.1.clone()),
            "median": s.median, "target": s.family.target(), "verdict": s.verdict(),
        })).collect::<Vec<_>>(),
        "cases": all.iter().map(|m| json!({
            "id": m.case.id(), "family": m.case.family().name(), "ours_s": m.ours.secs,
            "torch_s": m.torch, "torch_graph_s": m.torch_graph, "d2d_s": m.ours.d2d_secs,
            "ratio": m.ratio, "graph_ratio": m.graph_ratio, "ours_graph_s": m.ours.graph_secs,
            "score": m.score(), "counts": m.counts(),
        })).collect::<Vec<_>>(),
    });
    let json_path = out.join("kernels_sweep.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&j)?)
        .map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    let svg_path = out.join("kernels_sweep.svg");
    std::fs::write(&svg_path, chart(all, &sums, device)?)
        .map_err(|e| format!("writing {}: {e}", svg_path.display()))?;
    println!();
    let n = |v: &str| sums.iter().filter(|s| s.verdict() == v).count();
    println!(
        "sweep targets: {} PASS, {} MISS, {} SKIP",
        n("PASS"),
        n("MISS"),
        n("SKIP")
    );
    print!("{fam}");
    println!(
        "report: {}  chart: {}",
        md_path.display(),
        svg_path.display()
    );
    Ok(())
}

/// One row per family: each case's ratio as a dot, the median as a bar, the target as a red
/// tick.
fn chart(all: &[Measured], sums: &[Summary], device: &str) -> BenchResult<String> {
    let fams = Family::ALL;
    let xmax = all
        .iter()
        .filter_map(|m| m.score())
        .filter(|r| r.is_finite())
        .fold(1.5f64, f64::max)
        .min(4.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (980, 120 + 60 * fams.len() as u32))
            .into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!("kernels_bench --sweep: ratio to reference on {device}"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(190)
            .build_cartesian_2d(0f64..xmax * 1.05, -0.5f64..fams.len() as f64 - 0.5)?;
        let label = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < fams.len() {
                fams[fams.len() - 1 - i as usize].name().to_string()
            } else {
                String::new()
            }
        };
        c.configure_mesh()
            .y_labels(fams.len() * 2 + 1)
            .y_label_formatter(&label)
            .x_desc("reference time / our time (clipped at 4)")
            .disable_y_mesh()
            .draw()?;
        let row =
            |f: Family| (fams.len() - 1 - fams.iter().position(|&g| g == f).unwrap_or(0)) as f64;
        for (i, m) in all.iter().enumerate() {
            if let Some(r) = m.score() {
                let y = row(m.case.family()) + ((i % 7) as f64 - 3.0) * 0.06;
                let color = if m.counts() {
                    RGBColor(41, 128, 185)
                } else {
                    RGBColor(180, 180, 180)
                };
                c.draw_series(std::iter::once(Circle::new(
                    (r.min(xmax), y),
                    3,
                    color.filled(),
                )))?;
            }
        }
        for s in sums {
            let y = row(s.family);
            let t = s.family.target();
            c.draw_series(std::iter::once(PathElement::new(
                vec![(t, y - 0.35), (t, y + 0.35)],
                RED.stroke_width(2),
            )))?;
            if let Some(md) = s.median {
                c.draw_series(std::iter::once(PathElement::new(
                    vec![(md.min(xmax), y - 0.25), (md.min(xmax), y + 0.25)],
                    BLACK.stroke_width(2),
                )))?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}
