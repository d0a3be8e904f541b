//! The Markdown report (`kernels_bench.md`) and the JSON form of the results.

use super::rows::{fmt_time, Row, Target, HEADERS};

/// Facts about the run printed at the top of the report.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// GPU name.
    pub device: String,
    /// "CUDA 13.0".
    pub driver: String,
    /// SMs.
    pub sms: u32,
    /// L2 bytes.
    pub l2: usize,
    /// Device memory bytes.
    pub memory: usize,
    /// Peak DRAM bandwidth from the device attributes, GB/s (bus width × memory clock × 2).
    pub spec_gbs: f64,
    /// "full" or "quick".
    pub mode: &'static str,
    /// The `--torch` file and its first line (PyTorch version and GPU).
    pub torch: Option<(String, String)>,
    /// The D2D copy bandwidth measured, GB/s.
    pub d2d: Option<f64>,
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The whole report as Markdown.
pub fn markdown(meta: &Meta, rows: &[Row], targets: &[Target], svg_name: &str) -> String {
    let mut o = String::new();
    o += "# kernels_bench\n\n";
    o += &format!(
        "{} ({} SMs, {:.0} MB L2, {:.1} GiB), driver {}; {} run.\n\n",
        meta.device,
        meta.sms,
        meta.l2 as f64 / 1e6,
        meta.memory as f64 / (1u64 << 30) as f64,
        meta.driver,
        meta.mode
    );
    if let Some(d) = meta.d2d {
        o += &format!(
            "Memory reference, measured in this run: the driver's device-to-device copy \
             (`memcpy_dtod`) moves **{d:.1} GB/s** (read + write bytes), {:.1}% of the {:.0} GB/s \
             peak computed from the memory clock and bus width.\n\n",
            100.0 * d / meta.spec_gbs,
            meta.spec_gbs
        );
    }
    match &meta.torch {
        Some((path, head)) => o += &format!("PyTorch figures: `{path}` (`{}`).\n\n", head.trim()),
        None => o += "No `--torch` file: the PyTorch column and the PyTorch targets are empty.\n\n",
    }

    o += "## Targets\n\n";
    for t in targets {
        o += &format!("- {}\n", md_escape(&t.line()));
    }
    o += "\n## Results\n\n";
    o += &format!("![% of reference per kernel]({svg_name})\n\n");
    o += &format!(
        "| section | {} | calls x trials | counted |\n",
        HEADERS.join(" | ")
    );
    o += &format!("|{}\n", "---|".repeat(HEADERS.len() + 3));
    for r in rows {
        let c = r.cells();
        o += &format!(
            "| {} | {} | {} x {} | {} |\n",
            r.section,
            c.iter()
                .map(|s| md_escape(s))
                .collect::<Vec<_>>()
                .join(" | "),
            r.reps,
            r.trials,
            md_escape(&r.note)
        );
    }
    o += "\n## How it is measured\n\n";
    o += METHOD;
    o
}

/// The methodology section.
const METHOD: &str = "\
- GPU time between two events around R back-to-back calls on one stream, after one untimed \
warm-up call; R is chosen so that a trial lasts about 30 ms (2 ms with `--quick`); the figure is \
the median over 7 trials (3 with `--quick`, and for kernels slower than 120 ms per call).
- Inputs are uniform random floats (`ops::fill_uniform`, Philox). When one call's working set \
is under twice the L2, the call rotates through enough copies of inputs and outputs to span four \
L2s, so no call finds its data in L2.
- Before timing, each kernel runs once on small inputs (odd sizes, edge tiles) and is compared \
with its CPU reference (`cuda_stack_kernels::reference`); a mismatch prints FAIL and stops the program.
- Memory-bound rates are bytes / time: vector add 12 bytes/element, sum 4, copies and \
transposes 8 (read + write), strided copy 8 per output (useful bytes, as PyTorch counts), \
unary elementwise 8 and binary 12, softmax 8. `% of reference` divides by the D2D copy rate \
measured at the start of the same run.
- Matmul rates are 2·N³ FLOP / time (FP32 FMA, no TF32); `% of reference` and `vs PyTorch` \
divide by cuBLAS SGEMM as PyTorch measured it in the same session with TF32 off (`sgemm_N`).
- `vs PyTorch` is our rate / PyTorch's rate for the same work and size (PyTorch's figures are \
shown only for rows of the size PyTorch measured). For the fused bias + ReLU rows PyTorch's \
time is converted with the same byte count, so the ratio is PyTorch's time / ours.
- The `sum` rows time the whole `ops::sum` call (first pass, finalize, the small partials \
buffer it allocates); small sizes can be bound by launch cost rather than bandwidth.
";

/// The results as JSON.
pub fn json(meta: &Meta, rows: &[Row], targets: &[Target]) -> serde_json::Value {
    serde_json::json!({
        "device": meta.device,
        "driver": meta.driver,
        "mode": meta.mode,
        "d2d_gbs": meta.d2d,
        "rows": rows.iter().map(|r| serde_json::json!({
            "section": r.section,
            "kernel": r.kernel,
            "kind": r.kind.tag(),
            "size": r.size,
            "time": fmt_time(r.secs),
            "seconds": r.secs,
            "reps": r.reps,
            "trials": r.trials,
            "rate": r.rate,
            "unit": r.unit.name(),
            "reference": r.reference.as_ref().map(|f| serde_json::json!({"label": f.label, "value": f.value})),
            "pct_of_reference": r.pct(),
            "torch": r.torch.as_ref().map(|f| serde_json::json!({"label": f.label, "value": f.value})),
            "vs_torch": r.vs_torch(),
            "counted": r.note,
        })).collect::<Vec<_>>(),
        "targets": targets.iter().map(|t| serde_json::json!({
            "line": t.line(),
            "what": t.what,
            "ratio": t.ratio(),
            "need": t.need,
            "verdict": format!("{:?}", t.verdict()),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::rows::{Figure, Kind, Unit};

    #[test]
    fn report_has_targets_table_and_chart() {
        let row = Row {
            section: "vector add",
            kernel: "vector_add_fast".into(),
            kind: Kind::Fast,
            size: "2^28 f32".into(),
            secs: 0.8e-3,
            reps: 30,
            trials: 7,
            rate: 4026.5,
            unit: Unit::GBs,
            reference: Some(Figure {
                value: 4100.0,
                label: "D2D".into(),
            }),
            torch: Some(Figure {
                value: 4359.0,
                label: "torch add".into(),
            }),
            note: "12 bytes/element".into(),
        };
        let t = Target {
            what: "vector add 2^28 f32".into(),
            ours: 4026.5,
            theirs: Some(4359.0),
            unit: Unit::GBs,
            need: 1.0,
            against: "PyTorch add".into(),
            remark: String::new(),
        };
        let meta = Meta {
            device: "GPU".into(),
            spec_gbs: 4800.0,
            d2d: Some(4100.0),
            mode: "full",
            ..Meta::default()
        };
        let md = markdown(
            &meta,
            std::slice::from_ref(&row),
            std::slice::from_ref(&t),
            "kernels_bench.svg",
        );
        assert!(
            md.contains("- MISS vector add 2^28 f32: 0.924x PyTorch add"),
            "{md}"
        );
        assert!(
            md.contains("![% of reference per kernel](kernels_bench.svg)"),
            "{md}"
        );
        assert!(md.contains("| vector add | vector_add_fast [fast] | 2^28 f32 | 800.0 us | 4026.5 GB/s | 98.2% of D2D | 0.92x torch add (4359.0 GB/s) | 30 x 7 | 12 bytes/element |"), "{md}");
        let j = json(&meta, &[row], &[t]);
        assert_eq!(j["rows"][0]["kind"], "fast");
        assert_eq!(j["targets"][0]["verdict"], "Miss");
    }
}
