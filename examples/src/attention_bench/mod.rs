//! `attention_bench`: the fused attention op and the transformer's row ops against PyTorch in
//! the same run (see the program's doc for what is measured and the targets).

pub mod cases;
pub mod ours;
pub mod ours_ops;
pub mod torch;

use cases::{Case, Dt, Op, Pass, ATTENTION_SHAPES};
use cuda_examples::bench::Table;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::error::Error;
use torch::{TorchSide, TorchTime};

/// The targets, as ratios ours ÷ PyTorch (rates, so higher is better).
pub const SDPA_GEOMEAN: f64 = 0.9;
/// Every attention case.
pub const SDPA_EACH: f64 = 0.8;
/// LayerNorm, GELU and embedding, each case.
pub const ROW_OPS: f64 = 0.95;
/// The fused classifier against `F.cross_entropy` forward+backward.
pub const CLASSIFIER: f64 = 1.5;
/// The fused op against seed 002's chain (ours both), at N = 4096.
pub const FUSED_OVER_CHAIN: f64 = 5.0;

/// One case's result.
#[derive(Debug, Clone)]
pub struct Row {
    /// The case.
    pub case: Case,
    /// Our seconds per eager call (our host side included).
    pub ours: f64,
    /// Our seconds per call replayed from a CUDA graph (the attention cases).
    pub ours_graph: Option<f64>,
    /// PyTorch's figures, when measured.
    pub torch: Option<TorchTime>,
}

impl Row {
    /// The rate: TFLOP/s for attention, GB/s otherwise.
    pub fn rate(&self, s: f64) -> f64 {
        if self.case.counts_flops() {
            self.case.flops() / s / 1e12
        } else {
            self.case.bytes() / s / 1e9
        }
    }
    /// Ours ÷ PyTorch in rate (PyTorch's time ÷ ours), the lower of the eager ratio and the
    /// CUDA-graph ratio where both sides were replayed (where only PyTorch's was, its faster
    /// time against our eager one): neither side's host cost can carry a case.
    pub fn ratio(&self) -> Option<f64> {
        let t = self.torch.as_ref()?;
        let eager = t.s / self.ours;
        Some(match (t.graph_s, self.ours_graph) {
            (Some(tg), Some(og)) => eager.min(tg / og),
            (Some(_), None) => t.best() / self.ours,
            (None, _) => eager,
        })
    }
}

/// Seconds per eager call and, for the attention cases, per call replayed from a CUDA graph.
pub type OursTimes = (f64, Option<f64>);

/// Measures every case with a progress bar.
pub fn measure(
    cases: &[Case],
    device: usize,
    quick: bool,
) -> Result<Vec<OursTimes>, Box<dyn Error>> {
    let bar = ProgressBar::new(cases.len() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")?);
    let mut out = Vec::with_capacity(cases.len());
    let mut ctx = ours::Bench::new(device, quick)?;
    for c in cases {
        bar.set_message(c.id());
        out.push(ctx.time(c)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(out)
}

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// The report: one table per family, then the verdict lines; also as JSON.
pub fn report(rows: &[Row], torch: Option<&TorchSide>) -> (String, Value) {
    let mut text = String::new();
    let mut verdicts = Vec::new();
    let by_id: HashMap<String, &Row> = rows.iter().map(|r| (r.case.id(), r)).collect();
    for op in [
        Op::Sdpa,
        Op::Chain,
        Op::LayerNorm,
        Op::Gelu,
        Op::Embedding,
        Op::CrossEntropy,
    ] {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.case.op == op).collect();
        if mine.is_empty() {
            continue;
        }
        let unit = if op == Op::Sdpa || op == Op::Chain {
            "TFLOP/s"
        } else {
            "GB/s"
        };
        let ours_h = format!("ours {unit}");
        let torch_h = format!("torch {unit}");
        let mut t = Table::new(&[
            "case",
            "ours µs",
            "ours graph µs",
            &ours_h,
            "torch µs",
            "torch graph µs",
            &torch_h,
            "ratio",
            "backend",
        ]);
        for r in &mine {
            let (tus, tgraph, trate, ratio, backend) = match &r.torch {
                Some(tt) => (
                    format!("{:.1}", tt.s * 1e6),
                    tt.graph_s
                        .map_or_else(|| "-".into(), |g| format!("{:.1}", g * 1e6)),
                    format!("{:.1}", r.rate(tt.s)),
                    r.ratio().map_or_else(|| "-".into(), |x| format!("{x:.3}")),
                    tt.backend.clone().unwrap_or_default(),
                ),
                None => (
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    String::new(),
                ),
            };
            t.row(&[
                r.case.id(),
                format!("{:.1}", r.ours * 1e6),
                r.ours_graph
                    .map_or_else(|| "-".into(), |g| format!("{:.1}", g * 1e6)),
                format!("{:.1}", r.rate(r.ours)),
                tus,
                tgraph,
                trate,
                ratio,
                backend,
            ]);
        }
        text.push_str(&t.render());
        text.push('\n');
    }
    if torch.is_some() {
        for pass in [Pass::Fwd, Pass::FwdBwd] {
            let ratios: Vec<f64> = rows
                .iter()
                .filter(|r| {
                    r.case.op == Op::Sdpa
                        && r.case.dt == Dt::Bf16
                        && r.case.pass == pass
                        && ATTENTION_SHAPES.contains(&(r.case.b, r.case.h, r.case.n, r.case.d))
                })
                .filter_map(Row::ratio)
                .collect();
            if !ratios.is_empty() {
                let (g, m) = (
                    geomean(&ratios),
                    ratios.iter().copied().fold(f64::MAX, f64::min),
                );
                let ok = g >= SDPA_GEOMEAN && m >= SDPA_EACH;
                verdicts.push(format!(
                    "{} attention {}: geomean {g:.3}× PyTorch (target ≥ {SDPA_GEOMEAN}), min \
                     {m:.3}× (target ≥ {SDPA_EACH}) over {} cases",
                    verdict(ok),
                    pass.name(),
                    ratios.len()
                ));
            }
        }
        for (op, target, what) in [
            (Op::LayerNorm, ROW_OPS, "LayerNorm"),
            (Op::Gelu, ROW_OPS, "GELU"),
            (Op::Embedding, ROW_OPS, "embedding"),
            (
                Op::CrossEntropy,
                CLASSIFIER,
                "fused classifier vs F.cross_entropy fwd+bwd",
            ),
        ] {
            let ratios: Vec<f64> = rows
                .iter()
                .filter(|r| r.case.op == op)
                .filter_map(Row::ratio)
                .collect();
            if let Some(m) = ratios.iter().copied().reduce(f64::min) {
                verdicts.push(format!(
                    "{} {what}: min {m:.3}× PyTorch (target ≥ {target})",
                    verdict(m >= target)
                ));
            }
        }
    }
    for r in rows.iter().filter(|r| r.case.op == Op::Chain) {
        let fused = Case {
            op: Op::Sdpa,
            ..r.case.clone()
        };
        if let Some(f) = by_id.get(&fused.id()) {
            let x = r.ours / f.ours;
            verdicts.push(format!(
                "{} fused attention {:.1}× faster than seed 002's chain ({}, N = {}; target ≥ \
                 {FUSED_OVER_CHAIN}×)",
                verdict(x >= FUSED_OVER_CHAIN),
                x,
                r.case.dt.name(),
                r.case.n
            ));
        }
    }
    for v in &verdicts {
        text.push_str(v);
        text.push('\n');
    }
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"id": r.case.id(), "ours_s": r.ours, "ours_graph_s": r.ours_graph,
                   "ours_rate": r.rate(r.ours),
                   "torch_s": r.torch.as_ref().map(|t| t.s),
                   "torch_graph_s": r.torch.as_ref().and_then(|t| t.graph_s),
                   "torch_backend": r.torch.as_ref().and_then(|t| t.backend.clone()),
                   "ratio": r.ratio()})
        })
        .collect();
    let doc = json!({
        "torch": torch.map(|t| json!({"version": t.version, "device": t.device})),
        "cases": json_rows, "verdicts": verdicts,
    });
    (text, doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ours: f64, ours_graph: Option<f64>, s: f64, graph_s: Option<f64>) -> Row {
        Row {
            case: Case::sdpa(16, 16, 512, 64, false, Pass::FwdBwd),
            ours,
            ours_graph,
            torch: Some(TorchTime {
                s,
                graph_s,
                backend: None,
            }),
        }
    }

    #[test]
    fn a_case_is_judged_on_the_lower_ratio() {
        // PyTorch's host-bound eager call (2x ours) does not carry the case: its replay does.
        let r = row(250e-6, Some(240e-6), 500e-6, Some(228e-6));
        assert!((r.ratio().unwrap() - 228.0 / 240.0).abs() < 1e-12);
        // Our slow host does not hide behind our replay either.
        let r = row(300e-6, Some(200e-6), 240e-6, Some(220e-6));
        assert!((r.ratio().unwrap() - 240.0 / 300.0).abs() < 1e-12);
        // Only PyTorch replayed: its faster time against our eager one.
        let r = row(250e-6, None, 500e-6, Some(228e-6));
        assert!((r.ratio().unwrap() - 228.0 / 250.0).abs() < 1e-12);
        // Neither replayed: the eager ratio.
        let r = row(250e-6, None, 300e-6, None);
        assert!((r.ratio().unwrap() - 300.0 / 250.0).abs() < 1e-12);
        // No PyTorch figures: no ratio.
        let r = Row {
            torch: None,
            ..row(1.0, None, 1.0, None)
        };
        assert_eq!(r.ratio(), None);
    }
}
