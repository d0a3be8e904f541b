//! The sweep's half-precision GEMM family (issue 34): its cases, and our side of them
//! (`ops::gemm_half` with its own plan, checked on sampled entries against f64 dot products of
//! the rounded inputs, then timed like every other case).
//!
//! The shapes are the kinds, not the kernels': skinny M or N (1, 7, 16, 33, 64 against
//! 4096 × 4096), small K (16–256 with 8192² or 4096² outputs), a long K over a small output, odd
//! and prime extents, the large squares, and a few mid / transformer-like shapes; layouts and
//! the two dtypes spread across them.

use super::cases::{Case, Op};
use super::ours::Ours;
use crate::kb::check;
use crate::kb::timing::{measure, measure_settled, BenchResult, Timing};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, TcAlgo, TensorCoreElement, Transpose};
use cuda_stack_kernels::{Element, Kernels};

/// (dtype, m, n, k, layout "NN" / "NT" / "TN" / "TT").
type Shape = (&'static str, usize, usize, usize, &'static str);

const FULL: &[Shape] = &[
    // Skinny M against 4096 x 4096.
    ("bf16", 1, 4096, 4096, "NN"),
    ("f16", 7, 4096, 4096, "NT"),
    ("bf16", 16, 4096, 4096, "TN"),
    ("bf16", 33, 4096, 4096, "NN"),
    ("f16", 33, 4096, 4096, "TT"),
    ("bf16", 64, 4096, 4096, "NT"),
    // Skinny N.
    ("bf16", 4096, 1, 4096, "NN"),
    ("bf16", 4096, 7, 4096, "NT"),
    ("f16", 4096, 16, 4096, "NN"),
    ("bf16", 4096, 33, 4096, "TN"),
    ("f16", 4096, 64, 4096, "TT"),
    // Small K, large outputs.
    ("bf16", 8192, 8192, 16, "NN"),
    ("bf16", 8192, 8192, 64, "NN"),
    ("f16", 8192, 8192, 64, "NT"),
    ("bf16", 8192, 8192, 128, "TN"),
    ("bf16", 8192, 8192, 256, "NN"),
    ("f16", 4096, 4096, 16, "NN"),
    ("bf16", 4096, 4096, 64, "TT"),
    ("f16", 4096, 4096, 128, "NN"),
    ("bf16", 4096, 4096, 256, "NT"),
    // A long K over a small output.
    ("bf16", 256, 256, 65_536, "NN"),
    ("f16", 256, 256, 65_536, "NT"),
    ("bf16", 512, 512, 16_384, "NN"),
    ("bf16", 512, 512, 16_384, "TN"),
    ("bf16", 64, 64, 131_072, "NN"),
    ("f16", 64, 64, 131_072, "TT"),
    // A long K over a mid output: one wave of 128 x 256 tiles needs 4 k slices (session 66's
    // split-K lab: 0.69x cuBLAS at the fastest plan).
    ("bf16", 1024, 1024, 8192, "NN"),
    // Odd and prime extents.
    ("bf16", 1000, 1000, 1000, "NN"),
    ("bf16", 1000, 1000, 1000, "NT"),
    ("bf16", 1000, 1000, 1000, "TN"),
    ("bf16", 1000, 1000, 1000, "TT"),
    ("f16", 1000, 1000, 1000, "NN"),
    ("bf16", 4095, 4097, 1023, "NN"),
    ("f16", 4095, 4097, 1023, "NT"),
    ("bf16", 2039, 1021, 4093, "NN"),
    ("bf16", 2039, 1021, 4093, "TT"),
    ("bf16", 127, 8191, 509, "NN"),
    ("f16", 127, 8191, 509, "TN"),
    ("bf16", 1023, 1025, 1027, "NT"),
    // Large squares and mid shapes.
    ("bf16", 4096, 4096, 4096, "NN"),
    ("f16", 4096, 4096, 4096, "NN"),
    ("bf16", 8192, 8192, 8192, "NN"),
    ("bf16", 2048, 2048, 2048, "TT"),
    ("bf16", 2048, 2048, 512, "NN"),
    ("f16", 1024, 4096, 1024, "NN"),
    ("bf16", 8192, 768, 3072, "NT"),
];

const QUICK: &[Shape] = &[
    ("bf16", 33, 1024, 1024, "NN"),
    ("f16", 1000, 1000, 64, "TT"),
];

/// Appends the family's cases.
pub fn cases(quick: bool, v: &mut Vec<Case>) {
    for &(dtype, m, n, k, layout) in if quick { QUICK } else { FULL } {
        v.push(Case {
            op: Op::Hgemm {
                dtype,
                m,
                n,
                k,
                ta: layout.starts_with('T'),
                tb: layout.ends_with('T'),
            },
        });
    }
}

/// Calls of our op in the CUDA graph that [`run_t`] replays for the GPU-only time (PyTorch's
/// side, `tools/torch_sweep.py`, replays as many as its eager trial makes; a fixed 20 here).
const GRAPH_CALLS: usize = 20;

/// Checks, then times, one [`Op::Hgemm`] case: eager (our host side included) and replayed
/// from a CUDA graph of [`GRAPH_CALLS`] calls (the kernels alone).
pub fn run(k: &Kernels, s: &Stream, t: &Timing, c: &Case) -> BenchResult<Ours> {
    let &Op::Hgemm {
        dtype,
        m,
        n,
        k: kd,
        ta,
        tb,
    } = &c.op
    else {
        return Err(format!("{}: not an hgemm case", c.id()).into());
    };
    let (secs, graph_secs) = match dtype {
        "bf16" => run_t::<bf16>(k, s, t, c, (m, n, kd), (ta, tb))?,
        "f16" => run_t::<f16>(k, s, t, c, (m, n, kd), (ta, tb))?,
        other => return Err(format!("{}: unknown dtype {other}", c.id()).into()),
    };
    Ok(Ours {
        secs,
        d2d_secs: None,
        graph_secs: Some(graph_secs),
    })
}

fn run_t<T: TensorCoreElement>(
    k: &Kernels,
    s: &Stream,
    t: &Timing,
    c: &Case,
    (m, n, kd): (usize, usize, usize),
    (ta, tb): (bool, bool),
) -> BenchResult<(f64, f64)> {
    let tr = |t: bool| {
        if t {
            Transpose::Trans
        } else {
            Transpose::NoTrans
        }
    };
    let (ta, tb) = (tr(ta), tr(tb));
    let ha = values::<T>(k, s, m * kd, 21)?;
    let hb = values::<T>(k, s, kd * n, 22)?;
    let (a, b) = (s.clone_htod(&ha)?, s.clone_htod(&hb)?);
    let mut out = s.alloc_zeros::<T>(m * n)?;
    let lda = if ta == Transpose::NoTrans { kd } else { m };
    let ldb = if tb == Transpose::NoTrans { n } else { kd };
    let call = |s: &Stream, out: &mut DeviceSlice<T>| {
        ops::gemm_half(
            k,
            s,
            TcAlgo::Auto,
            ta,
            tb,
            m,
            n,
            kd,
            &a,
            lda,
            &b,
            ldb,
            out,
            n,
        )
    };
    let plan = ops::gemm_half_plan(
        ops::tc_choice(
            TcAlgo::Auto,
            s.context().limits().compute_capability,
            T::DTYPE,
        )?,
        m,
        n,
        kd,
        s.context().limits().sm_count,
    );
    println!("  {}: plan {plan:?}", c.id());
    call(s, &mut out)?;
    check_sampled(
        &c.id(),
        &s.clone_dtoh(&out)?,
        &ha,
        &hb,
        (m, n, kd),
        (ta, tb),
    )?;
    let eager = measure_settled(s, t, t.settle_secs, |s, _| {
        Ok(call(s, &mut out).map(|_| ())?)
    })?
    .secs;
    // The same calls captured once (tensor maps encoded and the split-K workspace made at
    // capture time) and replayed: what the GPU spends, without our host side.
    let mut failed = None;
    let graph = s.context().capture(|cs| {
        for _ in 0..GRAPH_CALLS {
            if let Err(e) = call(cs, &mut out) {
                failed = Some(e);
                break;
            }
        }
        Ok(())
    });
    if let Some(e) = failed {
        return Err(format!("{}: capturing the GEMM: {e}", c.id()).into());
    }
    let exec = graph?.instantiate()?;
    let replay = measure(s, t, |s, _| Ok(exec.launch(s)?))?.secs / GRAPH_CALLS as f64;
    Ok((eager, replay))
}

/// `n` uniform values in [-1, 1) (the kernels' Philox), rounded to `T` on the host.
fn values<T: Element>(k: &Kernels, s: &Stream, n: usize, seed: u64) -> BenchResult<Vec<T>> {
    let (_, h) = check::signed(k, s, n.max(1), seed)?;
    Ok(h[..n].iter().map(|&v| T::from_f64(f64::from(v))).collect())
}

/// Checks ~2,000 entries of C (all of them when C is small) against f64 dot products of the
/// rounded inputs: `|got - want| <= 2^-7 |want| + 2^-16 Σ|a·b|` (one rounding to a 16-bit type,
/// f32 accumulation, split-K partials added in f32).
fn check_sampled<T: Element>(
    what: &str,
    got: &[T],
    a: &[T],
    b: &[T],
    (m, n, kd): (usize, usize, usize),
    (ta, tb): (Transpose, Transpose),
) -> BenchResult<()> {
    let total = m * n;
    let picks: Vec<usize> = if total <= 4096 {
        (0..total).collect()
    } else {
        let mut v: Vec<usize> = (0..2048u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % total as u64) as usize)
            .collect();
        v.extend([0, n - 1, total - n, total - 1]);
        v
    };
    let at = |i: usize, p: usize| match ta {
        Transpose::NoTrans => a[i * kd + p].to_f64(),
        Transpose::Trans => a[p * m + i].to_f64(),
    };
    let bt = |p: usize, j: usize| match tb {
        Transpose::NoTrans => b[p * n + j].to_f64(),
        Transpose::Trans => b[j * kd + p].to_f64(),
    };
    for &e in &picks {
        let (i, j) = (e / n, e % n);
        let (mut dot, mut mag) = (0.0f64, 0.0f64);
        for p in 0..kd {
            let v = at(i, p) * bt(p, j);
            dot += v;
            mag += v.abs();
        }
        let g = got[e].to_f64();
        let tol = dot.abs() / 128.0 + mag / 65_536.0;
        if (g - dot).abs() > tol || g.is_nan() {
            return Err(
                format!("{what}: C[{i}, {j}] = {g}, expected {dot} (tolerance {tol:e})").into(),
            );
        }
    }
    Ok(())
}
