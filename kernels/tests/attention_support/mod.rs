//! The attention tests' shared machinery: deterministic inputs, q/k/v placed on the device in
//! each layout (dense, padded with NaN, packed `[B, N, 3, H, D]`), one forward + backward case
//! against the f64 CPU reference (`reference::attention_fwd` / `attention_bwd`) on the same
//! rounded inputs, and the tolerances (see `attention.rs`).
#![allow(dead_code)]

use cuda_stack_driver::{DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionBwdDq, AttentionElement, AttentionInput, AttentionShape,
    HeadStrides,
};
use cuda_stack_kernels::reference::{self, AttentionDims};
use cuda_stack_kernels::{Compute, DType, Element, Kernels};
use cuda_tests::{ensure, TestResult};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

pub fn data<T: Element>(seed: u64, n: usize, amp: f64) -> Vec<T> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| T::from_f64(amp * r.unit())).collect()
}

/// How q, k and v are laid out on the device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layout {
    /// Dense `[B, H, N, D]` buffers.
    Dense,
    /// Rows padded by 5 elements, heads by 3, batches by 7, and the view starting 2 elements into
    /// its buffer; the padding is NaN.
    Padded,
    /// Views of one packed `[B, N, 3, H, D]` buffer (needs Nq == Nk).
    Packed,
}

pub struct Tol {
    pub out: f64,
    pub grad: f64,
    pub lse: f64,
}

pub fn tol<T: Element>() -> Tol {
    match T::DTYPE {
        DType::F64 => Tol {
            out: 1e-12,
            grad: 1e-10,
            lse: 1e-12,
        },
        DType::F32 => Tol {
            out: 1e-5,
            grad: 1e-4,
            lse: 1e-5,
        },
        DType::F16 => Tol {
            out: 2e-3,
            grad: 1e-2,
            lse: 1e-5,
        },
        _ => Tol {
            out: 1e-2,
            grad: 6e-2,
            lse: 1e-5,
        },
    }
}

/// The absolute floor of the comparisons.
pub fn atol<T: Element>() -> f64 {
    if T::DTYPE == DType::F64 {
        1e-12
    } else {
        1e-5
    }
}

pub fn compare<T: Element>(what: &str, got: &[T], want: &[f64], tol: f64) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} values, want {}",
        got.len(),
        want.len()
    );
    let max = want
        .iter()
        .fold(0.0f64, |m, w| m.max(w.abs()))
        .max(f64::MIN_POSITIVE);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        ensure!(
            (g - w).abs() <= tol * max + atol::<T>(),
            "{what}[{i}]: got {g}, want {w} (max |ref| {max}, tolerance {tol} relative)"
        );
    }
    Ok(())
}

pub fn compare_lse(what: &str, got: &[f64], want: &[f64], tol: f64) -> TestResult {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if *w == f64::NEG_INFINITY {
            *g == f64::NEG_INFINITY
        } else {
            (g - w).abs() <= tol * (1.0 + w.abs())
        };
        ensure!(ok, "{what}[{i}]: got {g}, want {w}");
    }
    Ok(())
}

/// Device copies of q, k, v in `layout`, with the (offset, strides) of each view.
pub struct Placed<T: cuda_stack_driver::DeviceRepr> {
    pub bufs: Vec<DeviceBuffer<T>>,
    pub views: [(usize, usize, HeadStrides); 3], // (buffer index, offset, strides)
}

#[allow(clippy::too_many_arguments)]
pub fn place_into<T: Element>(
    dst: &mut [T],
    src: &[T],
    off: usize,
    st: HeadStrides,
    b: usize,
    h: usize,
    n: usize,
    d: usize,
) {
    for bi in 0..b {
        for hi in 0..h {
            for ni in 0..n {
                let from = ((bi * h + hi) * n + ni) * d;
                let to = off + bi * st.batch + hi * st.head + ni * st.row;
                dst[to..to + d].copy_from_slice(&src[from..from + d]);
            }
        }
    }
}

pub fn place<T: Element>(
    s: &Stream,
    sh: &AttentionShape,
    layout: Layout,
    qkv: [&[T]; 3],
) -> Res<Placed<T>> {
    let (b, h, d) = (sh.batch, sh.heads, sh.head_dim);
    let nan = T::from_f64(f64::NAN);
    match layout {
        Layout::Dense | Layout::Padded => {
            let mut bufs = Vec::new();
            let mut views = [(0, 0, HeadStrides::dense(h, 1, d)); 3];
            for (t, src) in qkv.iter().enumerate() {
                let n = if t == 0 { sh.q_len } else { sh.kv_len };
                let (off, st) = if layout == Layout::Dense {
                    (0, HeadStrides::dense(h, n, d))
                } else {
                    let row = d + 5;
                    let head = n * row + 3;
                    (
                        2,
                        HeadStrides {
                            batch: h * head + 7,
                            head,
                            row,
                        },
                    )
                };
                let mut host = vec![nan; off + b * st.batch + 1];
                place_into(&mut host, src, off, st, b, h, n, d);
                bufs.push(s.clone_htod(&host)?);
                views[t] = (t, off, st);
            }
            Ok(Placed { bufs, views })
        }
        Layout::Packed => {
            let n = sh.q_len;
            let st = HeadStrides {
                batch: n * 3 * h * d,
                head: d,
                row: 3 * h * d,
            };
            let mut host = vec![nan; b * st.batch];
            let mut views = [(0, 0, st); 3];
            for (t, src) in qkv.iter().enumerate() {
                place_into(&mut host, src, t * h * d, st, b, h, n, d);
                views[t] = (0, t * h * d, st);
            }
            Ok(Placed {
                bufs: vec![s.clone_htod(&host)?],
                views,
            })
        }
    }
}

/// Runs forward and backward for one shape and layout and compares with the reference.
pub fn case<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: AttentionShape,
    layout: Layout,
    seed: u64,
) -> TestResult {
    case_with::<T>(k, s, sh, layout, seed, AttentionAlgo::Auto)
}

/// [`case`] with the forward and backward passes on the kernels `algo` names.
pub fn case_with<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: AttentionShape,
    layout: Layout,
    seed: u64,
    algo: AttentionAlgo,
) -> TestResult {
    case_dq::<T>(k, s, sh, layout, seed, algo, AttentionBwdDq::Separate).map(drop)
}

/// The gradients a backward case produced (host copies), for cross-path comparisons.
pub struct Grads<T> {
    pub dq: Vec<T>,
    pub dk: Vec<T>,
    pub dv: Vec<T>,
}

/// [`case_with`] with dq computed as `dq_mode` says (through `ops::attention_bwd_with_dq`; for
/// `Atomic`/`Auto` with a NaN-filled f32 workspace, which the path must zero before use), each
/// output against the reference; returns the gradients.
pub fn case_dq<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: AttentionShape,
    layout: Layout,
    seed: u64,
    algo: AttentionAlgo,
    dq_mode: AttentionBwdDq,
) -> Res<Grads<T>> {
    let (b, h, nq, nk, d) = (sh.batch, sh.heads, sh.q_len, sh.kv_len, sh.head_dim);
    let label = format!("{:?} {sh:?} {layout:?} {algo:?} {dq_mode:?}", T::DTYPE);
    let q: Vec<T> = data(seed, b * h * nq * d, 1.0);
    let kk: Vec<T> = data(seed + 1, b * h * nk * d, 1.0);
    let v: Vec<T> = data(seed + 2, b * h * nk * d, 1.0);
    let dout: Vec<T> = data(seed + 3, b * h * nq * d, 1.0);
    // The scale the kernel uses (rounded to the compute type), so the reference uses it too.
    let scale = T::scale_scalar(1.0 / (d as f64).sqrt()).to_f64();
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let dims = AttentionDims {
        batch: b,
        heads: h,
        q_len: nq,
        kv_len: nk,
        head_dim: d,
        causal: sh.causal,
    };
    let (want_out, want_lse) = reference::attention_fwd(&dims, &f(&q), &f(&kk), &f(&v), scale);
    let (want_dq, want_dk, want_dv) =
        reference::attention_bwd(&dims, &f(&q), &f(&kk), &f(&v), &f(&dout), scale);

    let p = place(s, &sh, layout, [&q, &kk, &v])?;
    let view = |t: usize| -> Res<_> {
        let (bi, off, st) = p.views[t];
        Ok((p.bufs[bi].slice(off..)?, st))
    };
    let (qv, qs) = view(0)?;
    let (kv, ks) = view(1)?;
    let (vv, vs) = view(2)?;
    let inp = input::<T>;
    let nan = T::from_f64(f64::NAN);
    let snan = T::scale_scalar(f64::NAN);
    let mut out = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut lse = s.clone_htod(&vec![snan; b * h * nq])?;
    ops::attention_fwd_with(
        k,
        s,
        algo,
        &sh,
        inp(&qv, qs),
        inp(&kv, ks),
        inp(&vv, vs),
        &mut out,
        &mut lse,
        scale,
    )?;
    let got_out = s.clone_dtoh(&out)?;
    let got_lse: Vec<f64> = s
        .clone_dtoh(&lse)?
        .iter()
        .map(|x| Compute::to_f64(*x))
        .collect();
    let t = tol::<T>();
    compare(&format!("{label}: out"), &got_out, &want_out, t.out)?;
    compare_lse(&format!("{label}: lse"), &got_lse, &want_lse, t.lse)?;

    let dout_d = s.clone_htod(&dout)?;
    let mut delta = s.clone_htod(&vec![snan; b * h * nq])?;
    let mut dq = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut dk = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let mut dv = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let mut acc = match dq_mode {
        AttentionBwdDq::Separate => None,
        _ => Some(s.clone_htod(&vec![f32::NAN; ops::attention_bwd_dq_workspace_len(&sh)?])?),
    };
    ops::attention_bwd_with_dq(
        k,
        s,
        algo,
        dq_mode,
        &sh,
        inp(&qv, qs),
        inp(&kv, ks),
        inp(&vv, vs),
        &out,
        &lse,
        &dout_d,
        &mut delta,
        acc.as_deref_mut(),
        &mut dq,
        &mut dk,
        &mut dv,
        scale,
    )?;
    let g = Grads {
        dq: s.clone_dtoh(&dq)?,
        dk: s.clone_dtoh(&dk)?,
        dv: s.clone_dtoh(&dv)?,
    };
    compare(&format!("{label}: dq"), &g.dq, &want_dq, t.grad)?;
    compare(&format!("{label}: dk"), &g.dk, &want_dk, t.grad)?;
    compare(&format!("{label}: dv"), &g.dv, &want_dv, t.grad)?;
    Ok(g)
}

pub fn input<T: Element>(
    data: &cuda_stack_driver::DeviceSlice<T>,
    strides: HeadStrides,
) -> AttentionInput<'_, T> {
    AttentionInput { data, strides }
}

pub fn shape(b: usize, h: usize, nq: usize, nk: usize, d: usize, causal: bool) -> AttentionShape {
    AttentionShape {
        batch: b,
        heads: h,
        q_len: nq,
        kv_len: nk,
        head_dim: d,
        causal,
    }
}

pub fn setup() -> Res<(cuda_stack_driver::Context, Stream, std::sync::Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// The bound of a cross-path or run-to-run dq difference: `ulps` units of the element type's
/// last place at the largest |dq| (bf16 2^-8, f16 2^-11 relative), plus the tests' atol.
pub fn dq_bound<T: AttentionElement>(dq: &[T], ulps: f64) -> f64 {
    let eps = if T::DTYPE == DType::BF16 {
        2f64.powi(-8)
    } else {
        2f64.powi(-11)
    };
    let max = dq.iter().fold(0.0f64, |m, x| m.max(x.to_f64().abs()));
    ulps * eps * max + atol::<T>()
}

/// `a` and `b` within `bound` element by element; returns how many differ at all.
pub fn close<T: AttentionElement>(what: &str, a: &[T], b: &[T], bound: f64) -> Res<usize> {
    ensure!(
        a.len() == b.len(),
        "{what}: lengths {} and {}",
        a.len(),
        b.len()
    );
    let mut differ = 0;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x.to_f64(), y.to_f64());
        differ += usize::from(x.to_bits() != y.to_bits());
        ensure!(
            (x - y).abs() <= bound,
            "{what}[{i}]: {x} vs {y} (bound {bound})"
        );
    }
    Ok(differ)
}

/// out, lse, dq, dk, dv of one path, as f64.
pub type Outputs = [Vec<f64>; 5];

/// Forward then backward of `sh` on `algo`'s kernels, on dense inputs made from `seed`.
pub fn run_path<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: &AttentionShape,
    algo: AttentionAlgo,
    seed: u64,
) -> Res<Outputs> {
    let (b, h, nq, nk, d) = (sh.batch, sh.heads, sh.q_len, sh.kv_len, sh.head_dim);
    let q = s.clone_htod(&data::<T>(seed, b * h * nq * d, 1.0))?;
    let kk = s.clone_htod(&data::<T>(seed + 1, b * h * nk * d, 1.0))?;
    let v = s.clone_htod(&data::<T>(seed + 2, b * h * nk * d, 1.0))?;
    let dout = s.clone_htod(&data::<T>(seed + 3, b * h * nq * d, 1.0))?;
    let scale = T::scale_scalar(1.0 / (d as f64).sqrt()).to_f64();
    let nan = T::from_f64(f64::NAN);
    let snan = T::scale_scalar(f64::NAN);
    let mut out = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut lse = s.clone_htod(&vec![snan; b * h * nq])?;
    let mut delta = s.clone_htod(&vec![snan; b * h * nq])?;
    let mut dq = s.clone_htod(&vec![nan; b * h * nq * d])?;
    let mut dk = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let mut dv = s.clone_htod(&vec![nan; b * h * nk * d])?;
    let (qi, ki) = (
        ops::AttentionInput::dense(&*q, h, nq, d),
        ops::AttentionInput::dense(&*kk, h, nk, d),
    );
    let vi = ops::AttentionInput::dense(&*v, h, nk, d);
    ops::attention_fwd_with(k, s, algo, sh, qi, ki, vi, &mut out, &mut lse, scale)?;
    ops::attention_bwd_with(
        k, s, algo, sh, qi, ki, vi, &out, &lse, &dout, &mut delta, &mut dq, &mut dk, &mut dv, scale,
    )?;
    let f = |x: Vec<T>| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let lse: Vec<f64> = s
        .clone_dtoh(&lse)?
        .iter()
        .map(|x| Compute::to_f64(*x))
        .collect();
    Ok([
        f(s.clone_dtoh(&out)?),
        lse,
        f(s.clone_dtoh(&dq)?),
        f(s.clone_dtoh(&dk)?),
        f(s.clone_dtoh(&dv)?),
    ])
}

/// Two paths' outputs ([`run_path`]) within twice the per-type tolerance (each side is within it
/// of the exact result).
pub fn compare_paths<T: AttentionElement>(
    label: &str,
    got: &Outputs,
    want: &Outputs,
) -> TestResult {
    let t = tol::<T>();
    let names = ["out", "lse", "dq", "dk", "dv"];
    for (j, name) in names.iter().enumerate() {
        let what = format!("{label}: {name}");
        if j == 1 {
            compare_lse(&what, &got[1], &want[1], 2.0 * t.lse)?;
        } else {
            let tol = 2.0 * if j == 0 { t.out } else { t.grad };
            let g: Vec<T> = got[j].iter().map(|&x| T::from_f64(x)).collect();
            compare(&what, &g, &want[j], tol)?;
        }
    }
    Ok(())
}
