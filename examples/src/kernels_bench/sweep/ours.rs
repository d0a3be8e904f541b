//! Our side of the sweep: each case set up, checked against its CPU reference at the swept
//! shape itself, then timed.
//!
//! Timing is the method `tools/torch_sweep.py` uses on PyTorch's side: one warm-up call, for
//! the GEMM cases [`Case::settle_secs`] of untimed calls, R back-to-back calls between two
//! events on one stream (R chosen so a trial lasts ~10 ms), the median of 5 trials, the same
//! buffers every call (a case that fits in L2 runs from L2 on both sides alike).

use super::cases::{Case, Op};
use crate::kb::check;
use crate::kb::timing::{measure_settled, BenchResult, Timing};
use cuda_stack_driver::{DeviceBuffer, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, ReduceAlgo, Transpose, TransposeAlgo};
use cuda_stack_kernels::{reference, Kernels, StridedLayout};

/// The sweep's timing settings (both sides).
pub fn timing(quick: bool) -> Timing {
    Timing {
        trials: if quick { 3 } else { 5 },
        target_secs: if quick { 0.002 } else { 0.010 },
        max_reps: if quick { 50 } else { 1000 },
        // Set per case from `Case::settle_secs` (the GEMM families settle, both sides alike).
        settle_secs: 0.0,
    }
}

/// What one case measured on our side.
#[derive(Debug, Clone, Copy)]
pub struct Ours {
    /// Median GPU seconds per call.
    pub secs: f64,
    /// For transposes: our D2D copy of the same bytes, seconds per call.
    pub d2d_secs: Option<f64>,
    /// Seconds per call replayed from a CUDA graph (our GPU time without the host side), where
    /// the family measures it (the half-precision GEMMs).
    pub graph_secs: Option<f64>,
}

/// Uniform [-1, 1) floats on the device and their host copy.
fn input(
    k: &Kernels,
    s: &Stream,
    n: usize,
    seed: u64,
) -> BenchResult<(DeviceBuffer<f32>, Vec<f32>)> {
    check::signed(k, s, n.max(1), seed)
}

fn zeros(s: &Stream, n: usize) -> BenchResult<DeviceBuffer<f32>> {
    Ok(s.alloc_zeros::<f32>(n.max(1))?)
}

/// A view of the first `n` elements after `off`.
fn view(
    b: &DeviceSlice<f32>,
    off: usize,
    n: usize,
) -> BenchResult<cuda_stack_driver::DeviceView<'_, f32>> {
    Ok(b.slice(off..off + n)?)
}

/// Checks, then times, one case.
pub fn run(k: &Kernels, s: &Stream, t: &Timing, c: &Case) -> BenchResult<Ours> {
    let what = c.id();
    let time = |f: &mut dyn FnMut(&Stream) -> BenchResult<()>| -> BenchResult<f64> {
        Ok(measure_settled(s, t, t.settle_secs, |s, _| f(s))?.secs)
    };
    let mut d2d_secs = None;
    let secs = match &c.op {
        &Op::Add { n, off } => {
            let (a, ha) = input(k, s, n + off, 1)?;
            let (b, hb) = input(k, s, n + off, 2)?;
            let mut out = zeros(s, n)?;
            let (av, bv) = (view(&a, off, n)?, view(&b, off, n)?);
            let mut ov = out.slice_mut(0..n)?;
            ops::vector_add(k, s, &av, &bv, &mut ov)?;
            let want = reference::vector_add(&ha[off..off + n], &hb[off..off + n]);
            check::exact(&what, &s.clone_dtoh(&ov)?, &want)?;
            time(&mut |s| Ok(ops::vector_add(k, s, &av, &bv, &mut ov)?))?
        }
        &Op::Relu { n, off } => {
            let (x, hx) = input(k, s, n + off, 3)?;
            let mut out = zeros(s, n)?;
            let xv = view(&x, off, n)?;
            let mut ov = out.slice_mut(0..n)?;
            ops::relu(k, s, &xv, &mut ov)?;
            check::exact(
                &what,
                &s.clone_dtoh(&ov)?,
                &reference::relu(&hx[off..off + n]),
            )?;
            time(&mut |s| Ok(ops::relu(k, s, &xv, &mut ov)?))?
        }
        &Op::Sum { n } => {
            let (x, hx) = input(k, s, n, 4)?;
            let xv = view(&x, 0, n)?;
            let mut out = zeros(s, 1)?;
            ops::sum(k, s, ReduceAlgo::Fast, &xv, &mut out)?;
            let got = f64::from(s.clone_dtoh(&out)?[0]);
            let want = reference::sum(&hx[..n]);
            // f32 partial sums of [-1, 1) values: error grows like sqrt(n) ulps of the partials.
            check::scalar(&what, got, want, 1e-3 + 2e-7 * n as f64, 1e-5)?;
            time(&mut |s| Ok(ops::sum(k, s, ReduceAlgo::Fast, &xv, &mut out)?))?
        }
        &Op::RowsSum { rows, cols } => {
            let (x, hx) = input(k, s, rows * cols, 5)?;
            let xv = view(&x, 0, rows * cols)?;
            let mut out = zeros(s, rows)?;
            ops::rows_sum(k, s, &xv, &mut out, rows, cols)?;
            let want: Vec<f32> = reference::rows_sum(&hx[..rows * cols], rows, cols)
                .iter()
                .map(|&v| v as f32)
                .collect();
            check::close(
                &what,
                &s.clone_dtoh(&out)?,
                &want,
                1e-3 + 2e-7 * cols as f64,
                1e-5,
            )?;
            time(&mut |s| Ok(ops::rows_sum(k, s, &xv, &mut out, rows, cols)?))?
        }
        &Op::ColsSum { rows, cols } => {
            let (x, hx) = input(k, s, rows * cols, 6)?;
            let xv = view(&x, 0, rows * cols)?;
            let mut out = zeros(s, cols)?;
            ops::cols_sum(k, s, &xv, &mut out, rows, cols)?;
            let mut want = vec![0f64; cols];
            for r in 0..rows {
                for (w, &v) in want.iter_mut().zip(&hx[r * cols..(r + 1) * cols]) {
                    *w += f64::from(v);
                }
            }
            let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            check::close(
                &what,
                &s.clone_dtoh(&out)?,
                &want,
                1e-3 + 2e-7 * rows as f64,
                1e-5,
            )?;
            time(&mut |s| Ok(ops::cols_sum(k, s, &xv, &mut out, rows, cols)?))?
        }
        &Op::Transpose { rows, cols } => {
            let n = rows * cols;
            let (x, hx) = input(k, s, n, 7)?;
            let xv = view(&x, 0, n)?;
            let mut out = zeros(s, n)?;
            let algo = TransposeAlgo::Auto;
            ops::transpose(k, s, algo, &xv, &mut out, rows, cols)?;
            check::exact(
                &what,
                &s.clone_dtoh(&out)?,
                &reference::transpose(&hx[..n], rows, cols),
            )?;
            let mut copy = zeros(s, n)?;
            d2d_secs = Some(time(&mut |s| {
                Ok(s.memcpy_dtod(&xv, &mut copy.slice_mut(0..n)?)?)
            })?);
            time(&mut |s| Ok(ops::transpose(k, s, algo, &xv, &mut out, rows, cols)?))?
        }
        &Op::Softmax { rows, cols } => {
            let n = rows * cols;
            let (x, hx) = input(k, s, n, 8)?;
            let xv = view(&x, 0, n)?;
            let mut out = zeros(s, n)?;
            ops::softmax_rows(k, s, &xv, &mut out, rows, cols)?;
            let want = reference::softmax_rows(&hx[..n], rows, cols);
            check::close(&what, &s.clone_dtoh(&out)?, &want, 1e-9, 2e-5)?;
            time(&mut |s| Ok(ops::softmax_rows(k, s, &xv, &mut out, rows, cols)?))?
        }
        &Op::Sgemm {
            m,
            n,
            k: kd,
            ta,
            tb,
        } => {
            let tr = |t: bool| {
                if t {
                    Transpose::Trans
                } else {
                    Transpose::NoTrans
                }
            };
            let (ta, tb) = (tr(ta), tr(tb));
            let (a, ha) = input(k, s, m * kd, 9)?;
            let (b, hb) = input(k, s, kd * n, 10)?;
            let mut out = zeros(s, m * n)?;
            let lda = if ta == Transpose::NoTrans { kd } else { m };
            let ldb = if tb == Transpose::NoTrans { n } else { kd };
            let call = |s: &Stream, out: &mut DeviceSlice<f32>| {
                ops::sgemm(k, s, ta, tb, m, n, kd, 1.0, &a, lda, &b, ldb, 0.0, out, n)
            };
            call(s, &mut out)?;
            check_sampled_gemm(&what, &s.clone_dtoh(&out)?, &ha, &hb, (m, n, kd), (ta, tb))?;
            time(&mut |s| Ok(call(s, &mut out)?))?
        }
        &Op::BiasReluFwd { rows, cols } => {
            let (x, hx) = input(k, s, rows * cols, 11)?;
            let (bias, hb) = input(k, s, cols, 12)?;
            let mut out = zeros(s, rows * cols)?;
            ops::bias_relu_fwd(k, s, &x, &bias, 2.0, &mut out, rows, cols)?;
            let want = reference::bias_relu_fwd(&hx, &hb, 2.0, rows, cols);
            check::exact(&what, &s.clone_dtoh(&out)?, &want)?;
            time(&mut |s| {
                Ok(ops::bias_relu_fwd(
                    k, s, &x, &bias, 2.0, &mut out, rows, cols,
                )?)
            })?
        }
        &Op::BiasReluBwd { rows, cols } => {
            let (x, hx) = input(k, s, rows * cols, 13)?;
            let (bias, hb) = input(k, s, cols, 14)?;
            let (g, hg) = input(k, s, rows * cols, 15)?;
            let mut gx = zeros(s, rows * cols)?;
            let mut gb = zeros(s, cols)?;
            let call = |s: &Stream, gx: &mut DeviceSlice<f32>, gb: &mut DeviceSlice<f32>| {
                ops::bias_relu_bwd(k, s, &x, &bias, 2.0, &g, gx, gb, rows, cols)
            };
            call(s, &mut gx, &mut gb)?;
            let parts = ops::bias_relu_bwd_parts(rows, cols, s.context().device().sm_count()?);
            let (wx, wb) = reference::bias_relu_bwd(&hx, &hb, 2.0, &hg, rows, cols, parts);
            check::exact(&format!("{what} grad_x"), &s.clone_dtoh(&gx)?, &wx)?;
            check::close(
                &format!("{what} grad_bias"),
                &s.clone_dtoh(&gb)?,
                &wb,
                1e-4,
                1e-5,
            )?;
            time(&mut |s| Ok(call(s, &mut gx, &mut gb)?))?
        }
        Op::Contiguous { base, .. } => {
            let total: usize = base.iter().product();
            let (shape, strides) = c.view();
            let layout = StridedLayout::new(&shape, &strides, 0).ok_or("view layout")?;
            let n: usize = shape.iter().product();
            let (x, hx) = input(k, s, total, 16)?;
            let xv = view(&x, 0, total)?;
            let mut out = zeros(s, n)?;
            ops::strided_copy(k, s, &xv, &layout, &mut out)?;
            let want = reference::strided_copy(&hx[..total], &layout).ok_or("reference layout")?;
            check::exact(&what, &s.clone_dtoh(&out)?, &want)?;
            time(&mut |s| Ok(ops::strided_copy(k, s, &xv, &layout, &mut out)?))?
        }
        Op::Bcast { .. } | Op::Jit { .. } => return super::ours_tensor::run(k, s, t, c),
        Op::Hgemm { .. } => return super::hgemm::run(k, s, t, c),
    };
    Ok(Ours {
        secs,
        d2d_secs,
        graph_secs: None,
    })
}

/// Checks ~2,000 entries of `C = op(A) op(B)` (all of them when C is small) against dot
/// products in f64: a CPU SGEMM at 8192³ would take minutes.
fn check_sampled_gemm(
    what: &str,
    got: &[f32],
    a: &[f32],
    b: &[f32],
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
        Transpose::NoTrans => a[i * kd + p],
        Transpose::Trans => a[p * m + i],
    };
    let bt = |p: usize, j: usize| match tb {
        Transpose::NoTrans => b[p * n + j],
        Transpose::Trans => b[j * kd + p],
    };
    let mut g = Vec::with_capacity(picks.len());
    let mut w = Vec::with_capacity(picks.len());
    for &e in &picks {
        let (i, j) = (e / n, e % n);
        let dot: f64 = (0..kd)
            .map(|p| f64::from(at(i, p)) * f64::from(bt(p, j)))
            .sum();
        g.push(got[e]);
        w.push(dot as f32);
    }
    // fp32 FMA chains of k products of [-1, 1) values: |error| <~ k · 2^-24 · sqrt-ish growth.
    check::close(what, &g, &w, 1e-5 * kd as f64, 1e-5)
}
