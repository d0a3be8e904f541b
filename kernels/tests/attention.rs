//! Fused attention (`ops::attention_fwd`, `ops::attention_bwd`) against the f64 CPU reference
//! (`reference::attention_fwd` / `attention_bwd`) on the same rounded inputs: every head
//! dimension D ∈ {1, 16, 32, 40, 64, 80, 96, 128, 160, 256} × N ∈ {1, 17, 64, 65, 257}, causal
//! and full, Nq ≠ Nk (both ways, and Nk = 0), strided views (padded rows, an offset start, NaN in
//! the padding the kernels must not read), q/k/v as views of one packed `[B, N, 3, H, D]`
//! projection, a large case, and poisoned (NaN) outputs that must all be overwritten. The f16/bf16
//! forward runs on both kernel families (`AttentionAlgo::Simt` and, on sm_80+,
//! `AttentionAlgo::TensorCore` at D = 64 and 128; `Auto` picks the latter where it fits), and so
//! does the backward at D = 64.
//!
//! Tolerances, `max |got − ref| <= tol · max |ref| + atol` per output (relative to the largest
//! magnitude; atol 1e-12 for f64, 1e-5 otherwise, for outputs whose exact value is 0, such as dq
//! and dk with a single key, where the kernels leave rounding-level values):
//!   out: f64 1e-12, f32 1e-5, f16 2e-3, bf16 1e-2 (one rounding to the storage type, f32 math);
//!   dq, dk, dv: f64 1e-10, f32 1e-4, f16 1e-2, bf16 6e-2 (the kernels' delta uses the rounded
//!   out; the reference's the exact one);
//!   lse: `|got − ref| <= tol · (1 + |ref|)` with tol 1e-12 (f64) or 1e-5 (others); −inf exactly.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceBuffer, Stream};
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionElement, AttentionInput, AttentionShape, HeadStrides,
};
use cuda_stack_kernels::reference::{self, AttentionDims};
use cuda_stack_kernels::{Compute, DType, Element, Error, Kernels};
use cuda_tests::{ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const DS: &[usize] = &[1, 16, 32, 40, 64, 80, 96, 128, 160, 256];
const NS: &[usize] = &[1, 17, 64, 65, 257];

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

fn data<T: Element>(seed: u64, n: usize, amp: f64) -> Vec<T> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| T::from_f64(amp * r.unit())).collect()
}

/// How q, k and v are laid out on the device.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    /// Dense `[B, H, N, D]` buffers.
    Dense,
    /// Rows padded by 5 elements, heads by 3, batches by 7, and the view starting 2 elements into
    /// its buffer; the padding is NaN.
    Padded,
    /// Views of one packed `[B, N, 3, H, D]` buffer (needs Nq == Nk).
    Packed,
}

struct Tol {
    out: f64,
    grad: f64,
    lse: f64,
}

fn tol<T: Element>() -> Tol {
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
fn atol<T: Element>() -> f64 {
    if T::DTYPE == DType::F64 {
        1e-12
    } else {
        1e-5
    }
}

fn compare<T: Element>(what: &str, got: &[T], want: &[f64], tol: f64) -> TestResult {
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

fn compare_lse(what: &str, got: &[f64], want: &[f64], tol: f64) -> TestResult {
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
struct Placed<T: cuda_stack_driver::DeviceRepr> {
    bufs: Vec<DeviceBuffer<T>>,
    views: [(usize, usize, HeadStrides); 3], // (buffer index, offset, strides)
}

#[allow(clippy::too_many_arguments)]
fn place_into<T: Element>(
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

fn place<T: Element>(
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
fn case<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: AttentionShape,
    layout: Layout,
    seed: u64,
) -> TestResult {
    case_with::<T>(k, s, sh, layout, seed, AttentionAlgo::Auto)
}

/// [`case`] with the forward pass on the kernels `algo` names.
fn case_with<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    sh: AttentionShape,
    layout: Layout,
    seed: u64,
    algo: AttentionAlgo,
) -> TestResult {
    let (b, h, nq, nk, d) = (sh.batch, sh.heads, sh.q_len, sh.kv_len, sh.head_dim);
    let label = format!("{:?} {sh:?} {layout:?} {algo:?}", T::DTYPE);
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
    // The tensor-core backward takes D = 64 only; elsewhere a forced tensor-core case checks
    // the forward and leaves the backward to `Auto`.
    let bwd_algo = if algo == AttentionAlgo::TensorCore && d != 64 {
        AttentionAlgo::Auto
    } else {
        algo
    };
    ops::attention_bwd_with(
        k,
        s,
        bwd_algo,
        &sh,
        inp(&qv, qs),
        inp(&kv, ks),
        inp(&vv, vs),
        &out,
        &lse,
        &dout_d,
        &mut delta,
        &mut dq,
        &mut dk,
        &mut dv,
        scale,
    )?;
    compare(
        &format!("{label}: dq"),
        &s.clone_dtoh(&dq)?,
        &want_dq,
        t.grad,
    )?;
    compare(
        &format!("{label}: dk"),
        &s.clone_dtoh(&dk)?,
        &want_dk,
        t.grad,
    )?;
    compare(
        &format!("{label}: dv"),
        &s.clone_dtoh(&dv)?,
        &want_dv,
        t.grad,
    )?;
    Ok(())
}

fn input<T: Element>(
    data: &cuda_stack_driver::DeviceSlice<T>,
    strides: HeadStrides,
) -> AttentionInput<'_, T> {
    AttentionInput { data, strides }
}

fn shape(b: usize, h: usize, nq: usize, nk: usize, d: usize, causal: bool) -> AttentionShape {
    AttentionShape {
        batch: b,
        heads: h,
        q_len: nq,
        kv_len: nk,
        head_dim: d,
        causal,
    }
}

fn setup() -> Res<(cuda_stack_driver::Context, Stream, std::sync::Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

/// Every D × N (Nq == Nk), causal and full, B = 1, H = 2.
fn sweep<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &d in DS {
        for &n in NS {
            for causal in [false, true] {
                case::<T>(
                    &k,
                    &s,
                    shape(1, 2, n, n, d, causal),
                    Layout::Dense,
                    (d * 1000 + n) as u64,
                )?;
            }
        }
    }
    Ok(())
}

/// Nq ≠ Nk both ways (the bottom-right causal alignment; rows without keys), Nk = 0, Nq = 0.
fn cross_lengths<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let pairs = [
        (1, 17),
        (17, 1),
        (5, 64),
        (64, 5),
        (65, 257),
        (257, 65),
        (3, 0),
        (0, 3),
    ];
    for &(nq, nk) in &pairs {
        for &d in &[16, 40, 128] {
            for causal in [false, true] {
                case::<T>(
                    &k,
                    &s,
                    shape(2, 3, nq, nk, d, causal),
                    Layout::Dense,
                    (nq * 7 + nk) as u64,
                )?;
            }
        }
    }
    Ok(())
}

/// Padded and packed-QKV views.
fn strided<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(n, d) in &[(1, 16), (17, 64), (65, 40), (64, 128), (33, 256)] {
        for causal in [false, true] {
            case::<T>(
                &k,
                &s,
                shape(2, 3, n, n, d, causal),
                Layout::Packed,
                n as u64,
            )?;
            case::<T>(
                &k,
                &s,
                shape(2, 3, n, n + 3, d, causal),
                Layout::Padded,
                d as u64,
            )?;
        }
    }
    Ok(())
}

/// One large case (N = 1024, D = 128) and a long-key decode step (Nq = 1, Nk = 4097).
fn large<T: AttentionElement>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    case::<T>(
        &k,
        &s,
        shape(1, 2, 1024, 1024, 128, true),
        Layout::Packed,
        11,
    )?;
    case::<T>(
        &k,
        &s,
        shape(1, 2, 1024, 1024, 64, false),
        Layout::Dense,
        12,
    )?;
    case::<T>(&k, &s, shape(2, 2, 1, 4097, 64, true), Layout::Dense, 13)
}

/// Bad shapes, strides and lengths are typed errors before anything is launched.
fn bounds_checks() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let q = s.alloc_zeros::<f32>(2 * 3 * 4 * 8)?;
    let mut out = s.alloc_zeros::<f32>(2 * 3 * 4 * 8)?;
    let mut lse = s.alloc_zeros::<f32>(2 * 3 * 4)?;
    let good = shape(2, 3, 4, 4, 8, false);
    let dense = |x| AttentionInput::dense(x, 3, 4, 8);
    ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&q),
        &mut out,
        &mut lse,
        0.5,
    )?;
    for d in [0, 257] {
        let r = ops::attention_fwd(
            &k,
            &s,
            &shape(2, 3, 4, 4, d, false),
            dense(&q),
            dense(&q),
            dense(&q),
            &mut out,
            &mut lse,
            0.5,
        );
        ensure!(matches!(r, Err(Error::Invalid { .. })), "D = {d}: {r:?}");
    }
    // A row stride one too large reads past the end of k.
    let wide = AttentionInput {
        data: &*q,
        strides: HeadStrides {
            batch: 96,
            head: 32,
            row: 9,
        },
    };
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        wide,
        dense(&q),
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "k", .. })),
        "k stride: {r:?}"
    );
    let short = q.slice(1..)?;
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&short),
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "v", .. })),
        "short v: {r:?}"
    );
    let mut small = s.alloc_zeros::<f32>(5)?;
    let r = ops::attention_fwd(
        &k,
        &s,
        &good,
        dense(&q),
        dense(&q),
        dense(&q),
        &mut out,
        &mut small,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Shape { what: "lse", .. })),
        "lse length: {r:?}"
    );
    // Empty problems launch nothing and succeed.
    let mut none = s.alloc_zeros::<f32>(0)?;
    let mut none2 = s.alloc_zeros::<f32>(0)?;
    ops::attention_fwd(
        &k,
        &s,
        &shape(0, 3, 4, 4, 8, true),
        dense(&q),
        dense(&q),
        dense(&q),
        &mut none,
        &mut none2,
        0.5,
    )?;
    s.synchronize()?;
    Ok(())
}

/// The two kernel families side by side for f16/bf16 at D = 64 and 128 (dense and packed views,
/// which the tensor cores take): the forced SIMT kernel and the forced tensor-core kernel (on
/// compute capability 8.0+) both against the reference. Below 8.0, forcing the tensor cores is
/// `Unsupported`.
fn both_families<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    let tc = ctx.limits().compute_capability
        >= (cuda_stack_driver::ComputeCapability { major: 8, minor: 0 });
    let pairs = [
        (1, 1),
        (17, 17),
        (64, 64),
        (65, 65),
        (257, 257),
        (5, 64),
        (64, 5),
        (3, 0),
        (200, 129),
    ];
    for &d in &[64, 128] {
        for &(nq, nk) in &pairs {
            for causal in [false, true] {
                let sh = shape(2, 3, nq, nk, d, causal);
                let layouts: &[Layout] = if nq == nk {
                    &[Layout::Dense, Layout::Packed]
                } else {
                    &[Layout::Dense]
                };
                for &layout in layouts {
                    let seed = (d + nq * 3 + nk) as u64;
                    case_with::<T>(&k, &s, sh, layout, seed, AttentionAlgo::Simt)?;
                    if tc {
                        case_with::<T>(&k, &s, sh, layout, seed, AttentionAlgo::TensorCore)?;
                    }
                }
            }
        }
    }
    if tc {
        case_with::<T>(
            &k,
            &s,
            shape(1, 2, 1024, 1024, 128, true),
            Layout::Packed,
            5,
            AttentionAlgo::TensorCore,
        )?;
    }
    Ok(())
}

/// Forcing the tensor cores where they cannot run is `Unsupported`, nothing launched: f32,
/// D = 80, a view starting off 16 bytes (the padded layout), compute capability below 8.0.
fn tensor_core_misfits() -> TestResult {
    let (ctx, s, k) = setup()?;
    let tc = ctx.limits().compute_capability
        >= (cuda_stack_driver::ComputeCapability { major: 8, minor: 0 });
    let mut lse = s.alloc_zeros::<f32>(2 * 4)?;
    let run_f32 =
        |d: usize, lse: &mut cuda_stack_driver::DeviceBuffer<f32>| -> Res<Result<(), Error>> {
            let q = s.alloc_zeros::<f32>(2 * 4 * d)?;
            let mut out = s.alloc_zeros::<f32>(2 * 4 * d)?;
            let x = AttentionInput::dense(&*q, 2, 4, d);
            Ok(ops::attention_fwd_with(
                &k,
                &s,
                AttentionAlgo::TensorCore,
                &shape(1, 2, 4, 4, d, false),
                x,
                x,
                x,
                &mut out,
                lse,
                0.5,
            ))
        };
    let r = run_f32(64, &mut lse)?;
    ensure!(matches!(r, Err(Error::Unsupported { .. })), "f32: {r:?}");
    let q = s.alloc_zeros::<bf16>(2 * 4 * 80 + 8)?;
    let mut out = s.alloc_zeros::<bf16>(2 * 4 * 80)?;
    let x = AttentionInput::dense(&*q, 2, 4, 80);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 80, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(matches!(r, Err(Error::Unsupported { .. })), "D = 80: {r:?}");
    let q = s.alloc_zeros::<bf16>(2 * 4 * 64 + 8)?;
    let mut out = s.alloc_zeros::<bf16>(2 * 4 * 64)?;
    let off = q.slice(2..)?;
    let x = AttentionInput::dense(&*off, 2, 4, 64);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 64, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "misaligned view: {r:?}"
    );
    let x = AttentionInput::dense(&*q, 2, 4, 64);
    let r = ops::attention_fwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, 64, false),
        x,
        x,
        x,
        &mut out,
        &mut lse,
        0.5,
    );
    ensure!(
        r.is_ok() == tc,
        "aligned bf16 D = 64 on the tensor cores (cc >= 8.0: {tc}): {r:?}"
    );
    // The tensor-core backward takes D = 64 only: D = 128 forced onto it is `Unsupported`.
    let d = 128;
    let x128 = s.alloc_zeros::<bf16>(2 * 4 * d)?;
    let mut g = [
        s.alloc_zeros::<bf16>(2 * 4 * d)?,
        s.alloc_zeros::<bf16>(2 * 4 * d)?,
        s.alloc_zeros::<bf16>(2 * 4 * d)?,
    ];
    let mut delta = s.alloc_zeros::<f32>(2 * 4)?;
    let x = AttentionInput::dense(&*x128, 2, 4, d);
    let [dq, dk, dv] = &mut g;
    let r = ops::attention_bwd_with(
        &k,
        &s,
        AttentionAlgo::TensorCore,
        &shape(1, 2, 4, 4, d, false),
        x,
        x,
        x,
        &x128,
        &lse,
        &x128,
        &mut delta,
        dq,
        dk,
        dv,
        0.5,
    );
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "backward D = 128 on the tensor cores: {r:?}"
    );
    s.synchronize()?;
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("sweep_f32", sweep::<f32>),
        gpu("sweep_f64", sweep::<f64>),
        gpu("sweep_f16", sweep::<f16>),
        gpu("sweep_bf16", sweep::<bf16>),
        gpu("cross_lengths_f32", cross_lengths::<f32>),
        gpu("cross_lengths_f64", cross_lengths::<f64>),
        gpu("cross_lengths_f16", cross_lengths::<f16>),
        gpu("cross_lengths_bf16", cross_lengths::<bf16>),
        gpu("strided_f32", strided::<f32>),
        gpu("strided_f64", strided::<f64>),
        gpu("strided_f16", strided::<f16>),
        gpu("strided_bf16", strided::<bf16>),
        gpu("large_f32", large::<f32>),
        gpu("large_bf16", large::<bf16>),
        gpu("large_f16", large::<f16>),
        gpu("both_families_f16", both_families::<f16>),
        gpu("both_families_bf16", both_families::<bf16>),
        gpu("tensor_core_misfits", tensor_core_misfits),
        gpu("bounds_checks", bounds_checks),
    ]);
}
