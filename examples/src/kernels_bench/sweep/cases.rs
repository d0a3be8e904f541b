//! The shape sweep: every case of every fast kernel family, in one list that both sides read.
//!
//! `kernels_bench --sweep-cases` prints this list as JSON; `tools/torch_sweep.py` reads it and
//! times PyTorch on exactly the same cases, so the two sides can never drift apart. A case's
//! `id` is its key in both outputs.

use serde_json::{json, Value};

/// GPU seconds of untimed calls each side makes before timing a GEMM case (not in `--quick`):
/// an H100 or H200 at its power limit sets its clock from its recent draw, so a GEMM timed
/// right after a lighter case runs faster than it would sustained (kernels/TUNING.md, "Lab
/// bursts and the power cap"). `attention_bench` settles its attention cases the same way.
pub const SETTLE_SECS: f64 = 1.0;

/// What one case runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `c = a + b` on `n` elements; `a` and `b` are views starting `off` elements into their
    /// buffers (`off = 1`: not 16-byte aligned).
    Add {
        /// Elements.
        n: usize,
        /// Offset of the input views (elements).
        off: usize,
    },
    /// `y = relu(x)`, `x` a view starting `off` elements in.
    Relu {
        /// Elements.
        n: usize,
        /// Offset of the input view (elements).
        off: usize,
    },
    /// Sum of all `n` elements.
    Sum {
        /// Elements.
        n: usize,
    },
    /// `[rows, cols] → [rows]` sums (the last dimension).
    RowsSum {
        /// Rows.
        rows: usize,
        /// Columns (the reduced dimension).
        cols: usize,
    },
    /// `[rows, cols] → [cols]` sums (the first dimension).
    ColsSum {
        /// Rows (the reduced dimension).
        rows: usize,
        /// Columns.
        cols: usize,
    },
    /// `out[c][r] = x[r][c]`.
    Transpose {
        /// Rows of `x`.
        rows: usize,
        /// Columns of `x`.
        cols: usize,
    },
    /// Row-wise softmax.
    Softmax {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
    },
    /// `C = op(A) @ op(B)`, FP32 (TF32 off), dense leading dimensions.
    Sgemm {
        /// Rows of C.
        m: usize,
        /// Columns of C.
        n: usize,
        /// The inner dimension.
        k: usize,
        /// A is stored transposed (`[k, m]`).
        ta: bool,
        /// B is stored transposed (`[n, k]`).
        tb: bool,
    },
    /// `C = op(A) @ op(B)` in bf16 or f16 (f32 accumulation) on `ops::gemm_half` (our side) and
    /// `torch.mm` (cuBLAS) on PyTorch's, dense leading dimensions.
    Hgemm {
        /// `"bf16"` or `"f16"`.
        dtype: &'static str,
        /// Rows of C.
        m: usize,
        /// Columns of C.
        n: usize,
        /// The inner dimension.
        k: usize,
        /// A is stored transposed (`[k, m]`).
        ta: bool,
        /// B is stored transposed (`[n, k]`).
        tb: bool,
    },
    /// Seed 004's `relu(x * scale + bias)`.
    BiasReluFwd {
        /// Rows.
        rows: usize,
        /// Columns (bias length).
        cols: usize,
    },
    /// Its backward: `grad_x` and `grad_bias`.
    BiasReluBwd {
        /// Rows.
        rows: usize,
        /// Columns (bias length).
        cols: usize,
    },
    /// `Tensor`'s broadcasting `a op b` (a new output of the broadcast shape), with `b` read
    /// transposed (its last two dimensions swapped: a strided view) when `bt`.
    Bcast {
        /// `"add"` or `"mul"`.
        op: &'static str,
        /// `"f32"`, `"f16"` or `"bf16"`.
        dtype: &'static str,
        /// `a`'s shape.
        a: Vec<usize>,
        /// `b`'s shape (as the op sees it).
        b: Vec<usize>,
        /// `b` is the transpose of a contiguous tensor (last two dimensions).
        bt: bool,
    },
    /// `cuda-stack-jit`'s `ElementwiseKernel` `z = x * y + x` (f32; `torch.addcmul(x, x, y)`
    /// on PyTorch's side), a new output; `x` and `y` views starting `off` elements in.
    Jit {
        /// Elements.
        n: usize,
        /// Offset of the input views (elements).
        off: usize,
    },
    /// `.contiguous()` of `base.permute(perm)[..., ::step]` (a strided copy).
    Contiguous {
        /// The contiguous tensor the view is taken of.
        base: Vec<usize>,
        /// The permutation of its dimensions.
        perm: Vec<usize>,
        /// Step along the view's last dimension.
        step: usize,
    },
}

/// A family: the cases that share a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Vector add and relu, incl. offset views.
    Elementwise,
    /// Full, row and column sums.
    Reduction,
    /// Transposes (against our D2D copy).
    Transpose,
    /// Row softmax.
    Softmax,
    /// FP32 GEMM, square 1024–8192 and odd shapes (against cuBLAS).
    SgemmLarge,
    /// FP32 GEMM, 256–512 (against cuBLAS).
    SgemmSmall,
    /// bf16 / f16 GEMM at every shape: skinny, small K, long K, odd, every layout (against
    /// cuBLAS).
    Hgemm,
    /// Seed 004's fused op, forward and backward.
    BiasRelu,
    /// Strided copies (`contiguous()`).
    StridedCopy,
    /// `Tensor`'s broadcasting binary ops (bias rows, columns, scalars, attention shapes).
    Broadcast,
    /// `cuda-stack-jit` elementwise kernels.
    Jit,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 11] = [
        Family::Elementwise,
        Family::Broadcast,
        Family::Jit,
        Family::Reduction,
        Family::StridedCopy,
        Family::BiasRelu,
        Family::Softmax,
        Family::Transpose,
        Family::SgemmLarge,
        Family::SgemmSmall,
        Family::Hgemm,
    ];

    /// The family's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Reduction => "reductions",
            Family::Transpose => "transpose",
            Family::Softmax => "softmax",
            Family::SgemmLarge => "sgemm 1024-8192 + odd",
            Family::SgemmSmall => "sgemm 256-512",
            Family::Hgemm => "hgemm bf16/f16 every shape",
            Family::BiasRelu => "bias-relu fwd/bwd",
            Family::StridedCopy => "strided copy",
            Family::Broadcast => "broadcast (Tensor)",
            Family::Jit => "cuda-jit elementwise",
        }
    }

    /// The minimum ratio the issue asks for over the family's sweep.
    pub fn target(self) -> f64 {
        match self {
            Family::Transpose => 0.85,
            Family::SgemmLarge | Family::Hgemm => 0.80,
            Family::SgemmSmall => 0.60,
            _ => 0.95,
        }
    }

    /// What the ratio is taken against.
    pub fn reference(self) -> &'static str {
        match self {
            Family::Transpose => "our D2D copy of the same bytes",
            Family::SgemmLarge | Family::SgemmSmall => "cuBLAS (torch.mm, TF32 off)",
            Family::Hgemm => "cuBLAS (torch.mm, bf16/f16)",
            _ => "PyTorch",
        }
    }
}

/// One case of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// What runs.
    pub op: Op,
}

impl Case {
    /// The family (and so the target) of this case.
    pub fn family(&self) -> Family {
        match &self.op {
            Op::Add { .. } | Op::Relu { .. } => Family::Elementwise,
            Op::Sum { .. } | Op::RowsSum { .. } | Op::ColsSum { .. } => Family::Reduction,
            Op::Transpose { .. } => Family::Transpose,
            Op::Softmax { .. } => Family::Softmax,
            Op::Sgemm { m, n, k, .. } => {
                if *m.max(n).max(k) <= 512 {
                    Family::SgemmSmall
                } else {
                    Family::SgemmLarge
                }
            }
            Op::Hgemm { .. } => Family::Hgemm,
            Op::BiasReluFwd { .. } | Op::BiasReluBwd { .. } => Family::BiasRelu,
            Op::Contiguous { .. } => Family::StridedCopy,
            Op::Bcast { .. } => Family::Broadcast,
            Op::Jit { .. } => Family::Jit,
        }
    }

    /// The case's key in both sides' outputs, e.g. `add n=1048577 off=1`.
    pub fn id(&self) -> String {
        match &self.op {
            Op::Add { n, off } => format!("add n={n} off={off}"),
            Op::Relu { n, off } => format!("relu n={n} off={off}"),
            Op::Sum { n } => format!("sum n={n}"),
            Op::RowsSum { rows, cols } => format!("sum(dim=1) {rows}x{cols}"),
            Op::ColsSum { rows, cols } => format!("sum(dim=0) {rows}x{cols}"),
            Op::Transpose { rows, cols } => format!("transpose {rows}x{cols}"),
            Op::Softmax { rows, cols } => format!("softmax {rows}x{cols}"),
            Op::Sgemm { m, n, k, ta, tb } => format!(
                "sgemm {}{} {m}x{n}x{k}",
                if *ta { "T" } else { "N" },
                if *tb { "T" } else { "N" }
            ),
            Op::Hgemm {
                dtype,
                m,
                n,
                k,
                ta,
                tb,
            } => format!(
                "hgemm {dtype} {}{} {m}x{n}x{k}",
                if *ta { "T" } else { "N" },
                if *tb { "T" } else { "N" }
            ),
            Op::BiasReluFwd { rows, cols } => format!("bias_relu fwd {rows}x{cols}"),
            Op::BiasReluBwd { rows, cols } => format!("bias_relu bwd {rows}x{cols}"),
            Op::Contiguous { base, perm, step } => {
                format!("contiguous {base:?} perm {perm:?} step {step}")
            }
            Op::Bcast {
                op,
                dtype,
                a,
                b,
                bt,
            } => format!(
                "bcast {op} {dtype} {a:?} {b:?}{}",
                if *bt { " (b transposed)" } else { "" }
            ),
            Op::Jit { n, off } => format!("jit x*y+x n={n} off={off}"),
        }
    }

    /// Bytes a call must move at least (memory-bound cases), or FLOPs (GEMM).
    pub fn work(&self) -> f64 {
        let f = |x: usize| x as f64;
        match &self.op {
            Op::Add { n, .. } => 12.0 * f(*n),
            Op::Relu { n, .. } => 8.0 * f(*n),
            Op::Sum { n } => 4.0 * f(*n),
            Op::RowsSum { rows, cols } => 4.0 * f(rows * cols) + 4.0 * f(*rows),
            Op::ColsSum { rows, cols } => 4.0 * f(rows * cols) + 4.0 * f(*cols),
            Op::Transpose { rows, cols } | Op::Softmax { rows, cols } => 8.0 * f(rows * cols),
            Op::Sgemm { m, n, k, .. } | Op::Hgemm { m, n, k, .. } => 2.0 * f(*m) * f(*n) * f(*k),
            Op::BiasReluFwd { rows, cols } => 8.0 * f(rows * cols) + 4.0 * f(*cols),
            Op::BiasReluBwd { rows, cols } => 12.0 * f(rows * cols) + 8.0 * f(*cols),
            Op::Contiguous { .. } => 8.0 * f(self.view().0.iter().product()),
            Op::Bcast { dtype, a, b, .. } => {
                let elem = if *dtype == "f32" { 4.0 } else { 2.0 };
                let n = |s: &[usize]| f(s.iter().product());
                elem * (n(&self.broadcast_shape()) + n(a) + n(b))
            }
            Op::Jit { n, .. } => 12.0 * f(*n),
        }
    }

    /// Whether [`Case::work`] is FLOPs (else bytes).
    pub fn is_flops(&self) -> bool {
        matches!(self.op, Op::Sgemm { .. } | Op::Hgemm { .. })
    }

    /// For [`Op::Contiguous`]: the view's shape and strides (elements) into `base`.
    pub fn view(&self) -> (Vec<usize>, Vec<isize>) {
        let Op::Contiguous { base, perm, step } = &self.op else {
            return (Vec::new(), Vec::new());
        };
        let mut base_strides = vec![1isize; base.len()];
        for d in (0..base.len().saturating_sub(1)).rev() {
            base_strides[d] = base_strides[d + 1] * base[d + 1] as isize;
        }
        let mut shape: Vec<usize> = perm.iter().map(|&p| base[p]).collect();
        let mut strides: Vec<isize> = perm.iter().map(|&p| base_strides[p]).collect();
        if let (Some(last), Some(st)) = (shape.last_mut(), strides.last_mut()) {
            *last = last.div_ceil(*step);
            *st *= *step as isize;
        }
        (shape, strides)
    }

    /// For [`Op::Bcast`]: the shape `a` and `b` broadcast to (NumPy's rules; empty otherwise).
    pub fn broadcast_shape(&self) -> Vec<usize> {
        let Op::Bcast { a, b, .. } = &self.op else {
            return Vec::new();
        };
        let r = a.len().max(b.len());
        let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(r).map_or(1, |j| s[j]);
        (0..r).map(|i| at(a, i).max(at(b, i))).collect()
    }

    /// GPU seconds of untimed calls before this case's trials, on both sides: [`SETTLE_SECS`]
    /// for the compute-bound GEMM families, none for the memory-bound ones (their clocks do not
    /// depend on what ran before) and none in `--quick`.
    pub fn settle_secs(&self, quick: bool) -> f64 {
        if self.is_flops() && !quick {
            SETTLE_SECS
        } else {
            0.0
        }
    }

    /// The case as JSON for `tools/torch_sweep.py` (`settle_s`: [`Case::settle_secs`]).
    pub fn to_json(&self, quick: bool) -> Value {
        let mut v = match &self.op {
            Op::Add { n, off } => json!({"op": "add", "n": n, "off": off}),
            Op::Relu { n, off } => json!({"op": "relu", "n": n, "off": off}),
            Op::Sum { n } => json!({"op": "sum", "n": n}),
            Op::RowsSum { rows, cols } => json!({"op": "rows_sum", "rows": rows, "cols": cols}),
            Op::ColsSum { rows, cols } => json!({"op": "cols_sum", "rows": rows, "cols": cols}),
            Op::Transpose { rows, cols } => {
                json!({"op": "transpose", "rows": rows, "cols": cols})
            }
            Op::Softmax { rows, cols } => json!({"op": "softmax", "rows": rows, "cols": cols}),
            Op::Sgemm { m, n, k, ta, tb } => {
                json!({"op": "sgemm", "m": m, "n": n, "k": k, "ta": ta, "tb": tb})
            }
            Op::Hgemm {
                dtype,
                m,
                n,
                k,
                ta,
                tb,
            } => {
                json!({"op": "hgemm", "dtype": dtype, "m": m, "n": n, "k": k, "ta": ta, "tb": tb})
            }
            Op::BiasReluFwd { rows, cols } => {
                json!({"op": "bias_relu_fwd", "rows": rows, "cols": cols})
            }
            Op::BiasReluBwd { rows, cols } => {
                json!({"op": "bias_relu_bwd", "rows": rows, "cols": cols})
            }
            Op::Contiguous { base, perm, step } => {
                json!({"op": "contiguous", "base": base, "perm": perm, "step": step})
            }
            Op::Bcast {
                op,
                dtype,
                a,
                b,
                bt,
            } => json!({"op": "bcast", "fn": op, "dtype": dtype, "a": a, "b": b, "bt": bt}),
            Op::Jit { n, off } => json!({"op": "jit_addcmul", "n": n, "off": off}),
        };
        v["id"] = json!(self.id());
        v["settle_s"] = json!(self.settle_secs(quick));
        v
    }
}

fn case(op: Op) -> Case {
    Case { op }
}

/// The sweep: tiny, small, medium and large sizes, odd and prime extents, misaligned views.
/// `quick` keeps a few small cases per family (the smoke test).
pub fn sweep(quick: bool) -> Vec<Case> {
    let mut v = Vec::new();
    let lens: &[usize] = if quick {
        &[1, 1000, 65_537, 1 << 20]
    } else {
        &[
            1,
            1000,
            4099,
            65_537,
            1 << 20,
            1_000_003,
            (1 << 24) + 3,
            50_000_017,
            1 << 28,
        ]
    };
    for &n in lens {
        v.push(case(Op::Add { n, off: 0 }));
    }
    let offs: &[usize] = if quick {
        &[1 << 20]
    } else {
        &[(1 << 20) + 1, 1 << 24, (1 << 26) + 2]
    };
    for &n in offs {
        v.push(case(Op::Add { n, off: 1 }));
        v.push(case(Op::Relu { n, off: 1 }));
    }
    for &n in lens.iter().filter(|&&n| n > 1000) {
        v.push(case(Op::Relu { n, off: 0 }));
    }
    for &n in lens {
        v.push(case(Op::Sum { n }));
    }
    let rc: &[(usize, usize)] = if quick {
        &[(4096, 33), (33, 4099)]
    } else {
        &[
            (4096, 1),
            (4096, 33),
            (65_536, 128),
            (4096, 4096),
            (1024, 50_257),
            (7, 1_000_003),
            (16_384, 8191),
        ]
    };
    for &(rows, cols) in rc {
        v.push(case(Op::RowsSum { rows, cols }));
        v.push(case(Op::ColsSum { rows, cols }));
    }
    let tr: &[(usize, usize)] = if quick {
        &[(512, 1000), (1023, 257)]
    } else {
        &[
            (512, 512),
            (1024, 1024),
            (1000, 4097),
            (4099, 1023),
            (8192, 8192),
            (16_384, 8192),
            (16_383, 8191),
            (8191, 16_385),
            (12_345, 6789),
            (16_384, 16_384),
            (1 << 20, 3),
            (3, 1 << 20),
        ]
    };
    for &(rows, cols) in tr {
        v.push(case(Op::Transpose { rows, cols }));
    }
    let sm: &[(usize, usize)] = if quick {
        &[(4096, 1), (4096, 33), (256, 1000), (64, 50_257)]
    } else {
        &[
            (65_536, 1),
            (65_536, 7),
            (65_536, 32),
            (65_536, 33),
            (16_384, 100),
            (16_384, 128),
            (8192, 1000),
            (4096, 1023),
            (4096, 4096),
            (1024, 12_345),
            (1024, 16_384),
            (512, 32_000),
            (256, 50_257),
            (128, 100_000),
            (32, 262_144),
        ]
    };
    for &(rows, cols) in sm {
        v.push(case(Op::Softmax { rows, cols }));
    }
    let sq: &[usize] = if quick {
        &[256, 512]
    } else {
        &[256, 384, 512, 1024, 2048, 3072, 4096, 6144, 8192]
    };
    for &s in sq {
        v.push(case(Op::Sgemm {
            m: s,
            n: s,
            k: s,
            ta: false,
            tb: false,
        }));
    }
    let odd: &[(usize, usize, usize)] = if quick {
        &[(257, 131, 99), (513, 257, 129)]
    } else {
        &[
            (1023, 1025, 1027),
            (2047, 2049, 2051),
            (4095, 4097, 4093),
            (1000, 1000, 1000),
            (4096, 4096, 1027),
            (8192, 1024, 1024),
            (1024, 8192, 1024),
            (2048, 2048, 8192),
        ]
    };
    for &(m, n, k) in odd {
        v.push(case(Op::Sgemm {
            m,
            n,
            k,
            ta: false,
            tb: false,
        }));
    }
    let trans: &[(usize, usize, usize)] = if quick {
        &[(256, 256, 256)]
    } else {
        &[(1024, 1024, 1024), (4096, 4096, 4096), (2047, 2049, 2051)]
    };
    for &(m, n, k) in trans {
        for (ta, tb) in [(false, true), (true, false), (true, true)] {
            v.push(case(Op::Sgemm { m, n, k, ta, tb }));
        }
    }
    super::hgemm::cases(quick, &mut v);
    let br: &[(usize, usize)] = if quick {
        &[(33, 1000), (1024, 2048)]
    } else {
        &[
            (33, 1000),
            (256, 512),
            (1024, 2048),
            (8192, 3),
            (4096, 4096),
            (4097, 1023),
            (256, 50_257),
            (16_384, 8192),
        ]
    };
    for &(rows, cols) in br {
        v.push(case(Op::BiasReluFwd { rows, cols }));
        v.push(case(Op::BiasReluBwd { rows, cols }));
    }
    let views: Vec<(Vec<usize>, Vec<usize>, usize)> = if quick {
        vec![
            (vec![257, 129], vec![1, 0], 1),
            (vec![64, 100], vec![0, 1], 2),
        ]
    } else {
        vec![
            (vec![4096, 4096], vec![1, 0], 1),
            (vec![4097, 1023], vec![1, 0], 1),
            (vec![64, 128, 256], vec![2, 0, 1], 1),
            (vec![32, 12, 512, 64], vec![0, 2, 1, 3], 1),
            (vec![8192, 8192], vec![0, 1], 2),
            (vec![4096, 4099], vec![0, 1], 3),
            (vec![1000, 1000], vec![1, 0], 1),
            (vec![3, 1 << 20], vec![1, 0], 1),
        ]
    };
    for (base, perm, step) in views {
        v.push(case(Op::Contiguous { base, perm, step }));
    }
    broadcast_cases(quick, &mut v);
    let jit: &[(usize, usize)] = if quick {
        &[(1 << 20, 0), ((1 << 20) + 7, 1)]
    } else {
        &[
            (1 << 20, 0),
            ((1 << 20) + 1, 0),
            (1_000_003, 0),
            ((1 << 24) + 7, 0),
            (1 << 26, 0),
            (1 << 28, 0),
            ((1 << 24) + 7, 1),
        ]
    };
    for &(n, off) in jit {
        v.push(case(Op::Jit { n, off }));
    }
    v
}

/// The broadcast family: bias rows, per-row columns, scalars, outer products, `[B, 1, C]`
/// against `[B, T, C]`, attention shapes (`[B, H, N, N] + [B, 1, 1, N]`,
/// `[B, H, N, D] * [1, H, 1, 1]`), a transposed operand; odd extents; f32, plus f16/bf16 at the
/// attention shapes.
fn broadcast_cases(quick: bool, v: &mut Vec<Case>) {
    let bc = |op, dtype, a: &[usize], b: &[usize], bt| {
        case(Op::Bcast {
            op,
            dtype,
            a: a.to_vec(),
            b: b.to_vec(),
            bt,
        })
    };
    if quick {
        v.push(bc("add", "f32", &[1024, 768], &[768], false));
        v.push(bc("mul", "f32", &[1023, 257], &[1023, 1], false));
        v.push(bc("add", "f32", &[2, 4, 129, 129], &[2, 1, 1, 129], false));
        v.push(bc("mul", "bf16", &[2, 4, 128, 64], &[1, 4, 1, 1], false));
        v.push(bc("add", "f32", &[512, 512], &[512, 512], true));
        return;
    }
    let f32_cases: &[(&str, &[usize], &[usize], bool)] = &[
        // Bias rows.
        ("add", &[33, 1000], &[1000], false),
        ("add", &[1024, 768], &[768], false),
        ("add", &[4096, 4099], &[4099], false),
        ("add", &[8192, 4096], &[4096], false),
        // Per-row columns.
        ("mul", &[4097, 1023], &[4097, 1], false),
        ("mul", &[8192, 4096], &[8192, 1], false),
        // Scalars.
        ("mul", &[1_000_003], &[1], false),
        ("mul", &[8192, 4096], &[1], false),
        // An outer product and [B, 1, C] against [B, T, C].
        ("add", &[4096, 1], &[1, 4096], false),
        ("add", &[32, 1024, 768], &[32, 1, 768], false),
        // Attention shapes.
        ("add", &[8, 16, 512, 512], &[8, 1, 1, 512], false),
        ("add", &[4, 12, 1023, 1023], &[4, 1, 1, 1023], false),
        ("mul", &[8, 16, 1024, 64], &[1, 16, 1, 1], false),
        ("mul", &[4, 12, 1000, 63], &[1, 12, 1, 1], false),
        // A transposed operand (a strided view, no broadcast).
        ("add", &[4096, 4096], &[4096, 4096], true),
        ("add", &[4097, 1023], &[4097, 1023], true),
    ];
    for &(op, a, b, bt) in f32_cases {
        v.push(bc(op, "f32", a, b, bt));
    }
    for dtype in ["bf16", "f16"] {
        v.push(bc("add", dtype, &[8, 16, 512, 512], &[8, 1, 1, 512], false));
        v.push(bc("mul", dtype, &[8, 16, 1024, 64], &[1, 16, 1, 1], false));
        v.push(bc("add", dtype, &[8192, 4096], &[4096], false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_every_family_is_swept() {
        for quick in [false, true] {
            let cases = sweep(quick);
            let ids: HashSet<String> = cases.iter().map(Case::id).collect();
            assert_eq!(ids.len(), cases.len(), "duplicate ids (quick = {quick})");
            for f in Family::ALL {
                assert!(
                    cases.iter().any(|c| c.family() == f),
                    "{} has no case (quick = {quick})",
                    f.name()
                );
            }
            for c in &cases {
                assert_eq!(c.to_json(quick)["id"], json!(c.id()));
            }
        }
    }

    #[test]
    fn only_the_gemm_cases_settle_and_never_in_quick() {
        for quick in [false, true] {
            for c in sweep(quick) {
                let want = if c.is_flops() && !quick {
                    SETTLE_SECS
                } else {
                    0.0
                };
                assert_eq!(c.settle_secs(quick), want, "{}", c.id());
                assert_eq!(
                    c.to_json(quick)["settle_s"].as_f64(),
                    Some(want),
                    "{}",
                    c.id()
                );
            }
        }
        assert!(sweep(false).iter().any(|c| c.settle_secs(false) > 0.0));
    }

    #[test]
    fn views_are_permuted_and_stepped() {
        let c = case(Op::Contiguous {
            base: vec![4, 5, 6],
            perm: vec![2, 0, 1],
            step: 2,
        });
        assert_eq!(c.view(), (vec![6, 4, 3], vec![1, 30, 12]));
        assert_eq!(c.work(), 8.0 * 72.0);
    }

    #[test]
    fn broadcast_shapes_follow_numpy() {
        let c = case(Op::Bcast {
            op: "add",
            dtype: "f32",
            a: vec![8, 16, 4, 4],
            b: vec![8, 1, 1, 4],
            bt: false,
        });
        assert_eq!(c.broadcast_shape(), vec![8, 16, 4, 4]);
        assert_eq!(c.work(), 4.0 * (2.0 * 2048.0 + 32.0));
        let c = case(Op::Bcast {
            op: "mul",
            dtype: "bf16",
            a: vec![4096, 1],
            b: vec![4096],
            bt: false,
        });
        assert_eq!(c.broadcast_shape(), vec![4096, 4096]);
    }
}
