//! The state one run shares: kernels, stream, sizes, timing settings, PyTorch's figures, the
//! D2D reference and the rows measured so far.

use super::rows::{Figure, Kind, Row, Target, Unit};
use super::timing::{measure, measure_settled, sets_for, BenchResult, Measured, Timing};
use cuda_stack_driver::Stream;
use cuda_stack_kernels::Kernels;
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::sync::Arc;

/// PyTorch's sizes (torch_baseline.py): its figures are attached only to rows of the same size.
pub mod torch_size {
    /// `d2d`, `add`, `sum`: 2^28 f32.
    pub const N: usize = 1 << 28;
    /// `transpose`: 16384².
    pub const TRANSPOSE: usize = 16384;
    /// `strided_N`: N / 32 outputs.
    pub const STRIDED_OUT: usize = N / 32;
    /// `sgemm_N` exists for these N.
    pub const SGEMM: [usize; 3] = [1024, 4096, 8192];
    /// `softmax` (the extra line): 4096 × 4096.
    pub const SOFTMAX: (usize, usize) = (4096, 4096);
    /// `relu_unfused_us`, `relu_fwd_bwd_us`: seed 004's 1024 × 2048.
    pub const BIAS_RELU: (usize, usize) = (1024, 2048);
}

/// Problem sizes of this run.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Large 1-D size (D2D, vector add, sum, copies, elementwise): 2^28 (quick: 2^22).
    pub big: usize,
    /// Seed 000's vector add: 1,000,000.
    pub vec_seed: usize,
    /// A seed-sized sum: 10,000,000 (seed 001's N; quick: 2^20).
    pub sum_seed: usize,
    /// Seed 004's [rows, cols]: 1024 × 2048.
    pub seed_rc: (usize, usize),
    /// Large square transpose: 16384 (quick: 2048).
    pub transpose_big: usize,
    /// Square matmuls for naive, tiled16 and sgemm: 1024, 4096 (quick: 256, 512).
    pub matmul: Vec<usize>,
    /// Square sizes for sgemm only: 8192 (quick: none).
    pub sgemm_only: Vec<usize>,
    /// Softmax shapes [rows, cols].
    pub softmax: Vec<(usize, usize)>,
}

impl Sizes {
    /// Quick or full sizes.
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                big: 1 << 22,
                vec_seed: 1_000_000,
                sum_seed: 1 << 20,
                seed_rc: torch_size::BIAS_RELU,
                transpose_big: 2048,
                matmul: vec![256, 512],
                sgemm_only: vec![],
                softmax: vec![(256, 4096), (1024, 1024)],
            }
        } else {
            Sizes {
                big: torch_size::N,
                vec_seed: 1_000_000,
                sum_seed: 10_000_000,
                seed_rc: torch_size::BIAS_RELU,
                transpose_big: torch_size::TRANSPOSE,
                matmul: vec![1024, 4096],
                sgemm_only: vec![8192],
                softmax: vec![torch_size::SOFTMAX, (32768, 1024)],
            }
        }
    }
}

/// `n` as "2^k" when a power of two, else as a number.
pub fn fmt_n(n: usize) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// Everything a section needs.
pub struct Bench {
    /// The loaded kernels.
    pub k: Arc<Kernels>,
    /// The stream everything runs on.
    pub s: Stream,
    /// Trials and repetitions.
    pub timing: Timing,
    /// Small sizes, few repetitions.
    pub quick: bool,
    /// Per-row lines go to stderr (stdout carries JSON at the end).
    pub json: bool,
    /// L2 cache bytes (for rotation).
    pub l2: usize,
    /// SM count (the bias gradient's chunking depends on it).
    pub sm_count: u32,
    /// Problem sizes.
    pub sizes: Sizes,
    /// PyTorch's figures (`parse_torch_baseline`).
    pub torch: HashMap<String, f64>,
    /// The driver's D2D copy bandwidth measured in this run (GB/s, read + write bytes).
    pub d2d: Option<f64>,
    /// Rows measured so far.
    pub rows: Vec<Row>,
    /// Targets evaluated so far.
    pub targets: Vec<Target>,
    /// The progress bar (stderr).
    pub pb: ProgressBar,
}

impl Bench {
    /// Times `f` (see [`measure`]) with `what` shown on the progress bar.
    pub fn time(
        &self,
        what: &str,
        f: impl FnMut(&Stream, usize) -> BenchResult<()>,
    ) -> BenchResult<Measured> {
        self.pb.set_message(what.to_string());
        measure(&self.s, &self.timing, f)
    }

    /// Times `f` after `Timing::settle_secs` of untimed calls (see [`measure_settled`]), with
    /// `what` shown on the progress bar: for kernels that hold the GPU at its power limit.
    pub fn time_settled(
        &self,
        what: &str,
        f: impl FnMut(&Stream, usize) -> BenchResult<()>,
    ) -> BenchResult<Measured> {
        self.pb.set_message(what.to_string());
        measure_settled(&self.s, &self.timing, self.timing.settle_secs, f)
    }

    /// How many buffer sets to rotate through for a working set of `bytes`.
    pub fn sets(&self, bytes: usize) -> usize {
        sets_for(bytes, self.l2)
    }

    /// PyTorch's figure `key` (already in the row's unit) when `same_size`, labelled `label`.
    pub fn torch_fig(&self, key: &str, label: &str, same_size: bool) -> Option<Figure> {
        if !same_size {
            return None;
        }
        self.torch.get(key).map(|&value| Figure {
            value,
            label: label.to_string(),
        })
    }

    /// PyTorch's time `key` (µs) for work of `bytes`, as GB/s, when `same_size`.
    pub fn torch_us_as_gbs(
        &self,
        key: &str,
        label: &str,
        bytes: f64,
        same_size: bool,
    ) -> Option<Figure> {
        let us = *self.torch.get(key).filter(|_| same_size)?;
        (us > 0.0).then(|| Figure {
            value: bytes / (us * 1e-6) / 1e9,
            label: format!("{label} {us:.1} us"),
        })
    }

    /// The D2D reference figure.
    pub fn d2d_ref(&self) -> Option<Figure> {
        self.d2d.map(|value| Figure {
            value,
            label: "D2D".into(),
        })
    }

    /// Records a memory-bound row: `bytes` moved per call, % of the D2D copy bandwidth.
    #[allow(clippy::too_many_arguments)]
    pub fn mem_row(
        &mut self,
        section: &'static str,
        kernel: &str,
        kind: Kind,
        size: String,
        m: Measured,
        bytes: f64,
        torch: Option<Figure>,
        note: &str,
    ) -> Row {
        let reference = if kind == Kind::Reference {
            None
        } else {
            self.d2d_ref()
        };
        self.push(Row {
            section,
            kernel: kernel.to_string(),
            kind,
            size,
            secs: m.secs,
            reps: m.reps,
            trials: m.trials,
            rate: bytes / m.secs / 1e9,
            unit: Unit::GBs,
            reference,
            torch,
            note: note.to_string(),
        })
    }

    /// Records a matmul row: `flops` per call, % of cuBLAS (`reference`).
    #[allow(clippy::too_many_arguments)]
    pub fn flop_row(
        &mut self,
        section: &'static str,
        kernel: &str,
        kind: Kind,
        size: String,
        m: Measured,
        flops: f64,
        reference: Option<Figure>,
        note: &str,
    ) -> Row {
        let torch = reference.clone();
        self.push(Row {
            section,
            kernel: kernel.to_string(),
            kind,
            size,
            secs: m.secs,
            reps: m.reps,
            trials: m.trials,
            rate: flops / m.secs / 1e12,
            unit: Unit::TFlops,
            reference,
            torch,
            note: note.to_string(),
        })
    }

    fn push(&mut self, row: Row) -> Row {
        self.log(&format!("  {}", row.cells().join("  |  ")));
        self.rows.push(row.clone());
        row
    }

    /// Records a target and prints its line.
    pub fn target(&mut self, mut t: Target) {
        if t.theirs.is_none() && self.quick && t.remark.is_empty() {
            t.remark = "--quick runs other sizes than PyTorch's".into();
        }
        self.log(&t.line());
        self.targets.push(t);
    }

    /// Prints a line above the progress bar (stdout, or stderr with `--json`).
    pub fn log(&self, line: &str) {
        self.pb.suspend(|| {
            if self.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        });
    }

    /// Prints a section heading.
    pub fn section(&self, name: &str) {
        self.log(&format!("== {name}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_examples::bench::parse_torch_baseline;

    #[test]
    fn the_softmax_line_and_the_keys_used_here_parse() {
        let text = "torch 2.11.0 NVIDIA H200 SMs 132\n\
            torch d2d copy 2^28 f32: 4258.1 GB/s\n\
            torch sum 2^28 f32: 0.250 ms 4300.0 GB/s\n\
            torch transpose 16384^2 f32: 1157.0 GB/s\n\
            torch strided read stride=32: useful 438.0 GB/s\n\
            torch sgemm fp32 4096: 51.2 TFLOP/s\n\
            torch unfused relu(x*s+b) 1024x2048: 18.1 us\n\
            torch relu(x*s+b) fwd+bwd 1024x2048: 199.6 us\n\
            torch softmax 4096x4096 f32: 0.071 ms 1890.4 GB/s\n";
        let m = parse_torch_baseline(text);
        assert_eq!(m["softmax"], 1890.4);
        assert_eq!(m["sum"], 4300.0);
        assert_eq!(m["transpose"], 1157.0);
        assert_eq!(m["strided_32"], 438.0);
        assert_eq!(m["sgemm_4096"], 51.2);
        assert_eq!(m["relu_unfused_us"], 18.1);
        assert_eq!(m["relu_fwd_bwd_us"], 199.6);
    }

    #[test]
    fn sizes() {
        assert_eq!(fmt_n(1 << 28), "2^28");
        assert_eq!(fmt_n(1_000_000), "1000000");
        let full = Sizes::new(false);
        assert_eq!(full.big, torch_size::N);
        assert_eq!(full.softmax[0], torch_size::SOFTMAX);
        assert!(full.matmul.contains(&4096));
        assert_eq!(full.big / 32, torch_size::STRIDED_OUT);
    }
}
