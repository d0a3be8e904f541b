//! The results: one row per measured kernel and size, its rate, its % of the physical
//! reference measured in the same run, its ratio to PyTorch, and the PASS/MISS targets.

use cuda_examples::bench::Table;

/// What a row is next to the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The yardstick itself (the driver's D2D copy).
    Reference,
    /// A kernel kept as taught (seed code, naive and first-step versions).
    Educational,
    /// A tuned kernel.
    Fast,
}

impl Kind {
    /// Short tag for tables.
    pub fn tag(self) -> &'static str {
        match self {
            Kind::Reference => "ref",
            Kind::Educational => "edu",
            Kind::Fast => "fast",
        }
    }
}

/// GB/s (memory-bound) or TFLOP/s (matmul).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// 10^9 bytes per second.
    GBs,
    /// 10^12 floating-point operations per second.
    TFlops,
}

impl Unit {
    /// The unit as text.
    pub fn name(self) -> &'static str {
        match self {
            Unit::GBs => "GB/s",
            Unit::TFlops => "TFLOP/s",
        }
    }

    /// `v` formatted with its unit.
    pub fn fmt(self, v: f64) -> String {
        match self {
            Unit::GBs => format!("{v:.1} GB/s"),
            Unit::TFlops => format!("{v:.2} TFLOP/s"),
        }
    }
}

/// A figure to compare with, in the row's unit.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The value (GB/s or TFLOP/s).
    pub value: f64,
    /// What it is, e.g. "D2D" or "torch add".
    pub label: String,
}

/// One measured kernel at one size.
#[derive(Debug, Clone)]
pub struct Row {
    /// Section, e.g. "transpose".
    pub section: &'static str,
    /// Kernel (or op) name.
    pub kernel: String,
    /// Educational, fast or the reference.
    pub kind: Kind,
    /// Problem size as text.
    pub size: String,
    /// Median GPU seconds per call.
    pub secs: f64,
    /// Calls per timed trial.
    pub reps: usize,
    /// Timed trials.
    pub trials: usize,
    /// Rate in `unit`.
    pub rate: f64,
    /// GB/s or TFLOP/s.
    pub unit: Unit,
    /// The physical reference (D2D copy bandwidth, or cuBLAS) the % column divides by.
    pub reference: Option<Figure>,
    /// PyTorch's figure for the same work, converted to `unit`.
    pub torch: Option<Figure>,
    /// What the rate counts, when not obvious.
    pub note: String,
}

impl Row {
    /// Percent of the reference.
    pub fn pct(&self) -> Option<f64> {
        self.reference
            .as_ref()
            .filter(|r| r.value > 0.0)
            .map(|r| 100.0 * self.rate / r.value)
    }

    /// Ours / PyTorch's (same work, so also PyTorch's time / ours).
    pub fn vs_torch(&self) -> Option<f64> {
        self.torch
            .as_ref()
            .filter(|t| t.value > 0.0)
            .map(|t| self.rate / t.value)
    }

    /// `kernel [tag]`.
    pub fn label(&self) -> String {
        format!("{} [{}]", self.kernel, self.kind.tag())
    }

    /// The cells of the final table.
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.label(),
            self.size.clone(),
            fmt_time(self.secs),
            self.unit.fmt(self.rate),
            match (self.pct(), &self.reference) {
                (Some(p), Some(r)) => format!("{p:.1}% of {}", r.label),
                _ => "-".into(),
            },
            match (self.vs_torch(), &self.torch) {
                (Some(x), Some(t)) => format!("{x:.2}x {} ({})", t.label, self.unit.fmt(t.value)),
                _ => "-".into(),
            },
        ]
    }
}

/// The final table's column headers.
pub const HEADERS: [&str; 6] = [
    "kernel",
    "size",
    "time",
    "GB/s or TFLOP/s",
    "% of reference",
    "vs PyTorch",
];

/// The rows as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new(&HEADERS);
    for r in rows {
        t.row(&r.cells());
    }
    t.render()
}

/// `secs` in µs or ms.
pub fn fmt_time(secs: f64) -> String {
    if secs < 1e-3 {
        format!("{:.1} us", secs * 1e6)
    } else {
        format!("{:.3} ms", secs * 1e3)
    }
}

/// A stated goal: ours / theirs >= need.
#[derive(Debug, Clone)]
pub struct Target {
    /// What is compared, e.g. "vector add 2^28 f32 (vector_add_fast)".
    pub what: String,
    /// Our figure.
    pub ours: f64,
    /// Theirs, when known.
    pub theirs: Option<f64>,
    /// Unit of both.
    pub unit: Unit,
    /// The ratio required.
    pub need: f64,
    /// What theirs is, e.g. "PyTorch add (key `add`)".
    pub against: String,
    /// Why theirs is missing, or a remark printed after the verdict.
    pub remark: String,
}

/// A target's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Met.
    Pass,
    /// Measured and not met.
    Miss,
    /// Not measurable in this run (no figure to compare with).
    Skip,
}

impl Target {
    /// ours / theirs.
    pub fn ratio(&self) -> Option<f64> {
        self.theirs.filter(|t| *t > 0.0).map(|t| self.ours / t)
    }

    /// PASS, MISS or SKIP.
    pub fn verdict(&self) -> Verdict {
        match self.ratio() {
            Some(r) if r >= self.need => Verdict::Pass,
            Some(_) => Verdict::Miss,
            None => Verdict::Skip,
        }
    }

    /// The line printed for it.
    pub fn line(&self) -> String {
        let head = match self.verdict() {
            Verdict::Pass => "PASS",
            Verdict::Miss => "MISS",
            Verdict::Skip => "SKIP",
        };
        let body = match (self.ratio(), self.theirs) {
            (Some(r), Some(t)) => format!(
                "{}: {r:.3}x {} (need >= {:.2}x; ours {} vs {})",
                self.what,
                self.against,
                self.need,
                self.unit.fmt(self.ours),
                self.unit.fmt(t)
            ),
            _ => format!(
                "{}: ours {}, no figure for {} (need >= {:.2}x)",
                self.what,
                self.unit.fmt(self.ours),
                self.against,
                self.need
            ),
        };
        if self.remark.is_empty() {
            format!("{head} {body}")
        } else {
            format!("{head} {body}; {}", self.remark)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rate: f64, reference: f64, torch: f64) -> Row {
        Row {
            section: "s",
            kernel: "k".into(),
            kind: Kind::Fast,
            size: "n".into(),
            secs: 1e-3,
            reps: 1,
            trials: 1,
            rate,
            unit: Unit::GBs,
            reference: Some(Figure {
                value: reference,
                label: "D2D".into(),
            }),
            torch: Some(Figure {
                value: torch,
                label: "torch".into(),
            }),
            note: String::new(),
        }
    }

    #[test]
    fn percent_and_ratio() {
        let r = row(3000.0, 4000.0, 2000.0);
        assert_eq!(r.pct(), Some(75.0));
        assert_eq!(r.vs_torch(), Some(1.5));
        assert_eq!(r.cells()[4], "75.0% of D2D");
        assert_eq!(r.cells()[5], "1.50x torch (2000.0 GB/s)");
    }

    #[test]
    fn verdicts() {
        let mut t = Target {
            what: "w".into(),
            ours: 90.0,
            theirs: Some(100.0),
            unit: Unit::GBs,
            need: 0.85,
            against: "x".into(),
            remark: String::new(),
        };
        assert_eq!(t.verdict(), Verdict::Pass);
        t.need = 0.95;
        assert_eq!(t.verdict(), Verdict::Miss);
        assert!(t.line().starts_with("MISS w: 0.900x x"));
        t.theirs = None;
        assert_eq!(t.verdict(), Verdict::Skip);
    }

    #[test]
    fn times() {
        assert_eq!(fmt_time(12.34e-6), "12.3 us");
        assert_eq!(fmt_time(0.0123), "12.300 ms");
    }
}
