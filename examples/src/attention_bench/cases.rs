//! The cases `attention_bench` measures, each by both sides (ours and `tools/torch_attention.py`)
//! and the work each does (FLOPs or bytes), from which rates are computed the same way for both.

use serde_json::{json, Value};

/// [`Case::settle_secs`] of a compute-bound case.
pub const SETTLE_SECS: f64 = 1.0;

/// What a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Fused scaled-dot-product attention, `[b, h, n, d]`.
    Sdpa,
    /// Seed 002's chain, `softmax(q·kᵀ·scale)·v` as separate ops.
    Chain,
    /// LayerNorm over the last dimension of `[rows, c]`.
    LayerNorm,
    /// GELU (tanh form) of `n` elements.
    Gelu,
    /// Embedding lookup of `n` rows of a `[v, c]` table.
    Embedding,
    /// Cross-entropy of `[n, v]` logits, forward and the logits' gradient.
    CrossEntropy,
}

impl Op {
    /// The name both sides use.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sdpa => "sdpa",
            Op::Chain => "chain",
            Op::LayerNorm => "layer_norm",
            Op::Gelu => "gelu",
            Op::Embedding => "embedding",
            Op::CrossEntropy => "cross_entropy",
        }
    }
}

/// Which pass is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The forward alone.
    Fwd,
    /// The backward alone, from saved forward results.
    Bwd,
    /// Forward then backward.
    FwdBwd,
}

impl Pass {
    /// The name both sides use.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Fwd => "fwd",
            Pass::Bwd => "bwd",
            Pass::FwdBwd => "fwdbwd",
        }
    }
}

/// Element type of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dt {
    /// f32.
    F32,
    /// bf16.
    Bf16,
}

impl Dt {
    /// The name both sides use.
    pub fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::Bf16 => "bf16",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dt::F32 => 4,
            Dt::Bf16 => 2,
        }
    }
}

/// One measured case. Attention cases use `b, h, n, d, causal`; the row ops `rows`/`c`/`n`/`v`
/// as their doc says.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// What runs.
    pub op: Op,
    /// Which pass is timed.
    pub pass: Pass,
    /// Element type.
    pub dt: Dt,
    /// Batch (attention).
    pub b: usize,
    /// Heads (attention).
    pub h: usize,
    /// Sequence length (attention), element count (gelu), rows looked up (embedding), rows of
    /// logits (cross-entropy).
    pub n: usize,
    /// Head dimension (attention).
    pub d: usize,
    /// Causal mask (attention).
    pub causal: bool,
    /// Rows (layer_norm).
    pub rows: usize,
    /// Columns (layer_norm, embedding).
    pub c: usize,
    /// Vocabulary (embedding, cross-entropy).
    pub v: usize,
}

impl Case {
    fn new(op: Op, pass: Pass, dt: Dt) -> Case {
        Case {
            op,
            pass,
            dt,
            b: 0,
            h: 0,
            n: 0,
            d: 0,
            causal: false,
            rows: 0,
            c: 0,
            v: 0,
        }
    }

    /// Attention `[b, h, n, d]`.
    pub fn sdpa(b: usize, h: usize, n: usize, d: usize, causal: bool, pass: Pass) -> Case {
        Case {
            b,
            h,
            n,
            d,
            causal,
            ..Case::new(Op::Sdpa, pass, Dt::Bf16)
        }
    }

    /// A stable id, the key of PyTorch's JSON.
    pub fn id(&self) -> String {
        let dims = match self.op {
            Op::Sdpa | Op::Chain => format!(
                "{}x{}x{}x{}{}",
                self.b,
                self.h,
                self.n,
                self.d,
                if self.causal { " causal" } else { "" }
            ),
            Op::LayerNorm => format!("{}x{}", self.rows, self.c),
            Op::Gelu => format!("{}", self.n),
            Op::Embedding => format!("{} of {}x{}", self.n, self.v, self.c),
            Op::CrossEntropy => format!("{}x{}", self.n, self.v),
        };
        format!(
            "{} {} {} {}",
            self.op.name(),
            self.pass.name(),
            self.dt.name(),
            dims
        )
    }

    /// The case as `tools/torch_attention.py` reads it.
    pub fn to_json(&self, device: usize, quick: bool) -> Value {
        json!({
            "id": self.id(), "op": self.op.name(), "pass": self.pass.name(),
            "dtype": self.dt.name(), "b": self.b, "h": self.h, "n": self.n, "d": self.d,
            "causal": self.causal, "rows": self.rows, "c": self.c, "v": self.v,
            "device": device, "quick": quick, "settle_s": self.settle_secs(quick),
        })
    }

    /// Seconds of untimed back-to-back calls before the trials, on both sides: 1 s for the
    /// attention cases (compute-bound: an H200 holds the D = 128 forward at its power cap, where
    /// the clock falls from 1980 MHz to 1575–1785 MHz within a fraction of a second, so a case
    /// timed right after a lighter one, or from a cool start, runs faster than the same case
    /// settled: kernels/TUNING.md, session 58; `kernels_bench` settles its GEMMs likewise), none
    /// for the memory-bound row ops and in `--quick` runs.
    pub fn settle_secs(&self, quick: bool) -> f64 {
        match self.op {
            Op::Sdpa | Op::Chain if !quick => SETTLE_SECS,
            _ => 0.0,
        }
    }

    /// Attention FLOPs: `4·b·h·n²·d` (two GEMMs), halved when causal; the backward is 2.5× the
    /// forward (five GEMMs to the forward's two), so forward+backward counts 3.5×.
    pub fn flops(&self) -> f64 {
        let f = 4.0 * (self.b * self.h) as f64 * (self.n as f64).powi(2) * self.d as f64;
        let f = if self.causal { f / 2.0 } else { f };
        match self.pass {
            Pass::Fwd => f,
            Pass::Bwd => 2.5 * f,
            Pass::FwdBwd => 3.5 * f,
        }
    }

    /// The bytes a case must move at the least (the same count for both sides): each input read
    /// once, each output written once; parameters and per-row statistics left out.
    pub fn bytes(&self) -> f64 {
        let e = self.dt.size() as f64;
        let (fwd, bwd) = match self.op {
            Op::LayerNorm => {
                let x = (self.rows * self.c) as f64 * e;
                (2.0 * x, 3.0 * x) // x → y; x, dy → dx
            }
            Op::Gelu => {
                let x = self.n as f64 * e;
                (2.0 * x, 3.0 * x)
            }
            Op::Embedding => {
                let rows = (self.n * self.c) as f64 * e;
                let table = (self.v * self.c) as f64 * e;
                (2.0 * rows, rows + table) // gather; dy → dW (every row written)
            }
            Op::CrossEntropy => {
                let x = (self.n * self.v) as f64 * e;
                (x, 2.0 * x) // logits read; the backward reads them and writes dlogits
            }
            Op::Sdpa | Op::Chain => (0.0, 0.0),
        };
        match (self.op, self.pass) {
            (Op::CrossEntropy, _) => 2.0 * (self.n * self.v) as f64 * e,
            (_, Pass::Fwd) => fwd,
            (_, Pass::Bwd) => bwd,
            (_, Pass::FwdBwd) => fwd + bwd,
        }
    }

    /// Whether the rate is FLOP/s (attention) rather than bytes/s.
    pub fn counts_flops(&self) -> bool {
        matches!(self.op, Op::Sdpa | Op::Chain)
    }
}

/// The attention shapes of the issue, `(b, h, n, d)`: the sweep the targets are measured over.
pub const ATTENTION_SHAPES: [(usize, usize, usize, usize); 7] = [
    (16, 16, 512, 64),
    (16, 16, 1024, 64),
    (16, 16, 1024, 128),
    (8, 16, 2048, 128),
    (4, 16, 4096, 128),
    (1, 16, 16384, 128),
    (2, 12, 4097, 64),
];

/// Attention shapes reported beside the sweep, no target: bf16 at D = 128 with keys between the
/// sweep's 4096 and 16384, where the backward's one pass with dq in a fixed order goes from 1.5%
/// slower than the two kernels to faster; `Auto` takes it there without a causal mask
/// (`ops::ATTENTION_BWD_ORDERED_MIN_KEYS_D128`, sessions 65–66).
pub const REPORTED_SHAPES: [(usize, usize, usize, usize); 1] = [(2, 16, 8192, 128)];

/// Every case, in the order they are printed. `quick`: one small shape per family.
pub fn all(quick: bool) -> Vec<Case> {
    let mut v = Vec::new();
    let shapes: &[(usize, usize, usize, usize)] = if quick {
        &[(2, 4, 257, 64)]
    } else {
        &ATTENTION_SHAPES
    };
    let reported: &[(usize, usize, usize, usize)] = if quick { &[] } else { &REPORTED_SHAPES };
    for &(b, h, n, d) in shapes.iter().chain(reported) {
        for causal in [false, true] {
            for pass in [Pass::Fwd, Pass::FwdBwd] {
                v.push(Case::sdpa(b, h, n, d, causal, pass));
            }
        }
    }
    // Seed 002's chain against the fused op at N = 4096 (f32 as the seed, and bf16).
    let (cb, ch, cn) = if quick { (1, 2, 512) } else { (1, 16, 4096) };
    for dt in [Dt::F32, Dt::Bf16] {
        for op in [Op::Chain, Op::Sdpa] {
            v.push(Case {
                b: cb,
                h: ch,
                n: cn,
                d: 64,
                ..Case::new(op, Pass::Fwd, dt)
            });
        }
    }
    // The f32 path (the CUDA cores: `attention_tiled*.cu`; PyTorch's `efficient` backend), forward
    // and forward + backward (the chain's block above has the full D = 64 forward).
    for d in [64, 128] {
        for causal in [false, true] {
            for pass in [Pass::Fwd, Pass::FwdBwd] {
                if d == 64 && !causal && pass == Pass::Fwd {
                    continue;
                }
                v.push(Case {
                    dt: Dt::F32,
                    ..Case::sdpa(cb, ch, cn, d, causal, pass)
                });
            }
        }
    }
    let (rows, ln_c) = if quick { (512, 768) } else { (16384, 768) };
    let gelu_n = if quick { 1 << 20 } else { 16384 * 3072 };
    let (emb_n, emb_v) = if quick { (1024, 50304) } else { (16384, 50304) };
    let (ce_n, ce_v) = if quick { (256, 50257) } else { (8192, 50257) };
    for dt in [Dt::F32, Dt::Bf16] {
        for pass in [Pass::Fwd, Pass::Bwd] {
            v.push(Case {
                rows,
                c: ln_c,
                ..Case::new(Op::LayerNorm, pass, dt)
            });
            v.push(Case {
                n: gelu_n,
                ..Case::new(Op::Gelu, pass, dt)
            });
            v.push(Case {
                n: emb_n,
                v: emb_v,
                c: 768,
                ..Case::new(Op::Embedding, pass, dt)
            });
        }
        v.push(Case {
            n: ce_n,
            v: ce_v,
            ..Case::new(Op::CrossEntropy, Pass::FwdBwd, dt)
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_counts_follow_the_definitions() {
        for quick in [false, true] {
            let c = all(quick);
            let mut ids: Vec<String> = c.iter().map(Case::id).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), c.len());
        }
        let full = Case::sdpa(1, 1, 1024, 64, false, Pass::Fwd);
        assert_eq!(full.flops(), 4.0 * 1024.0 * 1024.0 * 64.0);
        let causal = Case::sdpa(1, 1, 1024, 64, true, Pass::FwdBwd);
        assert_eq!(causal.flops(), 3.5 * 2.0 * 1024.0 * 1024.0 * 64.0);
        assert!(full.counts_flops());
    }

    #[test]
    fn the_compute_bound_cases_settle_on_both_sides() {
        for c in all(false) {
            let want = match c.op {
                Op::Sdpa | Op::Chain => SETTLE_SECS,
                _ => 0.0,
            };
            assert_eq!(c.settle_secs(false), want, "{}", c.id());
            assert_eq!(c.to_json(0, false)["settle_s"].as_f64(), Some(want));
        }
        for c in all(true) {
            assert_eq!(c.settle_secs(true), 0.0, "{}", c.id());
            assert_eq!(c.to_json(0, true)["settle_s"].as_f64(), Some(0.0));
        }
    }
}
