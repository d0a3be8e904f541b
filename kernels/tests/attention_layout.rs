//! The strided attention entry points (`ops::attention_fwd_strided`, `ops::attention_bwd_strided`)
//! against the dense ones, bit for bit: the forward writing `out` token-major (`[B, N, H, D]`,
//! `AttentionOutput::token_major`), the backward reading `out` and `dout` token-major and
//! writing dq, dk, dv into one packed `[B, N, 3, H, D]` buffer (`AttentionGrads::PackedQkv`),
//! with q, k, v views of a packed projection — exactly what a GPT block does — on every kernel
//! family that fits: SIMT (D ∈ {32, 64, 80, 128}), mma.sync and (compute capability 9.0) wgmma
//! (D ∈ {64, 128}); bf16 and f16 (f32 on SIMT), causal and full, N ∈ {1, 17, 129, 300}. Only the
//! addresses change, so every output must be the same bits (compared through `to_f64`, which is
//! one to one on these types; a NaN matches a NaN). The atomic dq path (mma.sync) writes its
//! rounded dq through the packed strides too: dk and dv bit for bit, dq to rounding (the atomic
//! adds' order varies). Plus the checks: output views outside their buffer or overlapping
//! themselves, and a packed gradient of the wrong length or with Nq ≠ Nk, are typed errors with
//! nothing launched.

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{ComputeCapability, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionBwdDq, AttentionElement, AttentionGrads, AttentionInput,
    AttentionOutput, AttentionShape, HeadStrides,
};
use cuda_stack_kernels::{Compute, Element, Error, Kernels};
use cuda_tests::{ensure, gpu, TestResult};

mod attention_support;

use attention_support::{data, place, setup, shape, Layout, Res};

fn main() {
    cuda_tests::run(vec![
        gpu("strided_paths_match_dense_bits_bf16", bits::<bf16>),
        gpu("strided_paths_match_dense_bits_f16", bits::<f16>),
        gpu("strided_paths_match_dense_bits_f32_simt", bits::<f32>),
        gpu("bad_output_views_are_errors", bad_views),
    ]);
}

const NS: &[usize] = &[1, 17, 129, 300];
const DS: &[usize] = &[32, 64, 80, 128];

/// `x[b, h, n, d]` of a dense `[B, H, N, D]` array, from a `[B, N, H, D]` one.
fn from_token_major<T: Copy>(x: &[T], b: usize, h: usize, n: usize, d: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(x.len());
    for bi in 0..b {
        for hi in 0..h {
            for ni in 0..n {
                let at = ((bi * n + ni) * h + hi) * d;
                out.extend_from_slice(&x[at..at + d]);
            }
        }
    }
    out
}

/// The inverse of [`from_token_major`].
fn to_token_major<T: Copy>(x: &[T], b: usize, h: usize, n: usize, d: usize) -> Vec<T> {
    let mut out = x.to_vec();
    for bi in 0..b {
        for hi in 0..h {
            for ni in 0..n {
                let from = ((bi * h + hi) * n + ni) * d;
                let to = ((bi * n + ni) * h + hi) * d;
                out[to..to + d].copy_from_slice(&x[from..from + d]);
            }
        }
    }
    out
}

/// dq, dk, dv (`i` = 0, 1, 2) as dense `[B, H, N, D]` arrays from a packed `[B, N, 3, H, D]`.
fn unpack<T: Copy>(x: &[T], i: usize, b: usize, h: usize, n: usize, d: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(b * h * n * d);
    for bi in 0..b {
        for hi in 0..h {
            for ni in 0..n {
                let at = (((bi * n + ni) * 3 + i) * h + hi) * d;
                out.extend_from_slice(&x[at..at + d]);
            }
        }
    }
    out
}

/// Equal bits (through the one-to-one `to_f64`; NaN matches NaN).
fn same<T: Element>(what: &str, got: &[T], want: &[T]) -> TestResult {
    let f = |x: &[T]| x.iter().map(|v| v.to_f64()).collect::<Vec<_>>();
    same_f64(what, &f(got), &f(want))
}

/// [`same`] on compute-type values (lse, delta).
fn same_scalar<C: Compute>(what: &str, got: &[C], want: &[C]) -> TestResult {
    let f = |x: &[C]| x.iter().map(|v| Compute::to_f64(*v)).collect::<Vec<_>>();
    same_f64(what, &f(got), &f(want))
}

fn same_f64(what: &str, got: &[f64], want: &[f64]) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} vs {} elements",
        got.len(),
        want.len()
    );
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let eq = g == w && g.is_sign_negative() == w.is_sign_negative() || g.is_nan() && w.is_nan();
        ensure!(eq, "{what}: element {i} is {g:e}, the dense path's {w:e}");
    }
    Ok(())
}

/// Every family that fits T and D on this device.
fn families<T: AttentionElement>(cc: ComputeCapability, d: usize) -> Vec<AttentionAlgo> {
    let half = std::mem::size_of::<T>() == 2;
    let mut v = vec![AttentionAlgo::Simt];
    if half && (d == 64 || d == 128) && cc >= (ComputeCapability { major: 8, minor: 0 }) {
        v.push(AttentionAlgo::TensorCore);
        if cc == (ComputeCapability { major: 9, minor: 0 }) {
            v.push(AttentionAlgo::Wgmma);
        }
    }
    v
}

fn bits<T: AttentionElement>() -> TestResult {
    let (ctx, s, k) = setup()?;
    let cc = ctx.limits().compute_capability;
    let ds: &[usize] = if std::mem::size_of::<T>() == 2 {
        DS
    } else {
        &[32, 80]
    };
    for &d in ds {
        for algo in families::<T>(cc, d) {
            for &n in NS {
                for causal in [false, true] {
                    let sh = shape(2, 3, n, n, d, causal);
                    let seed = (d * 7919 + n * 31 + usize::from(causal)) as u64;
                    one::<T>(&k, &s, algo, AttentionBwdDq::Separate, sh, seed)
                        .map_err(|e| format!("{algo:?} D = {d} N = {n} causal {causal}: {e}"))?;
                    if algo == AttentionAlgo::TensorCore {
                        one::<T>(&k, &s, algo, AttentionBwdDq::Atomic, sh, seed).map_err(|e| {
                            format!("{algo:?} (atomic dq) D = {d} N = {n} causal {causal}: {e}")
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// One problem on one family: the dense entry points, then the strided ones on the same inputs.
fn one<T: AttentionElement>(
    k: &Kernels,
    s: &Stream,
    algo: AttentionAlgo,
    dq_mode: AttentionBwdDq,
    sh: AttentionShape,
    seed: u64,
) -> Res<()> {
    let (b, h, n, d) = (sh.batch, sh.heads, sh.q_len, sh.head_dim);
    let len = b * h * n * d;
    let host: Vec<Vec<T>> = (0..3).map(|i| data::<T>(seed + i, len, 1.0)).collect();
    let placed = place(s, &sh, Layout::Packed, [&host[0], &host[1], &host[2]])?;
    let buf = &placed.bufs[0];
    let view = |t: usize| -> Res<_> {
        let (_, off, st) = placed.views[t];
        Ok((buf.slice(off..)?, st))
    };
    let (qv, kv, vv) = (view(0)?, view(1)?, view(2)?);
    let q = AttentionInput {
        data: &*qv.0,
        strides: qv.1,
    };
    let kk = AttentionInput {
        data: &*kv.0,
        strides: kv.1,
    };
    let v = AttentionInput {
        data: &*vv.0,
        strides: vv.1,
    };
    let scale = 1.0 / (d as f64).sqrt();
    let nan = T::from_f64(f64::NAN);

    // Forward: dense, then token-major.
    let mut out = s.clone_htod(&vec![nan; len])?;
    let mut lse = s.alloc_zeros::<T::Scalar>(b * h * n)?;
    ops::attention_fwd_with(k, s, algo, &sh, q, kk, v, &mut out, &mut lse, scale)?;
    let mut out_tm = s.clone_htod(&vec![nan; len])?;
    let mut lse2 = s.alloc_zeros::<T::Scalar>(b * h * n)?;
    let o = AttentionOutput::token_major(&mut out_tm, h, n, d);
    ops::attention_fwd_strided(k, s, algo, &sh, q, kk, v, o, &mut lse2, scale)?;
    let (want_out, got_out) = (s.clone_dtoh(&out)?, s.clone_dtoh(&out_tm)?);
    same("out", &from_token_major(&got_out, b, h, n, d), &want_out)?;
    same_scalar("lse", &s.clone_dtoh(&lse2)?, &s.clone_dtoh(&lse)?)?;

    // Backward: dense (dense out and dout, three dense gradients), then token-major out and
    // dout and the packed gradient.
    let dout_host = data::<T>(seed + 9, len, 1.0);
    let dout = s.clone_htod(&dout_host)?;
    let dout_tm = s.clone_htod(&to_token_major(&dout_host, b, h, n, d))?;
    let acc_len = ops::attention_bwd_dq_workspace_len(&sh)?;
    let atomic = dq_mode == AttentionBwdDq::Atomic;
    let mut acc = s.alloc_zeros::<f32>(acc_len.max(1))?;
    let mut delta = s.alloc_zeros::<T::Scalar>(b * h * n)?;
    let mut dq = s.clone_htod(&vec![nan; len])?;
    let mut dk = s.clone_htod(&vec![nan; len])?;
    let mut dv = s.clone_htod(&vec![nan; len])?;
    ops::attention_bwd_with_dq(
        k,
        s,
        algo,
        dq_mode,
        &sh,
        q,
        kk,
        v,
        &out,
        &lse,
        &dout,
        &mut delta,
        atomic.then_some(&mut *acc),
        &mut dq,
        &mut dk,
        &mut dv,
        scale,
    )?;
    let tm = HeadStrides::token_major(h, n, d);
    let mut packed = s.clone_htod(&vec![nan; 3 * len])?;
    let mut delta2 = s.alloc_zeros::<T::Scalar>(b * h * n)?;
    ops::attention_bwd_strided(
        k,
        s,
        algo,
        dq_mode,
        &sh,
        q,
        kk,
        v,
        AttentionInput {
            data: &*out_tm,
            strides: tm,
        },
        &lse2,
        AttentionInput {
            data: &*dout_tm,
            strides: tm,
        },
        &mut delta2,
        atomic.then_some(&mut *acc),
        AttentionGrads::PackedQkv(&mut packed),
        scale,
    )?;
    let p = s.clone_dtoh(&packed)?;
    let (want_dq, want_dk, want_dv) = (s.clone_dtoh(&dq)?, s.clone_dtoh(&dk)?, s.clone_dtoh(&dv)?);
    same_scalar("delta", &s.clone_dtoh(&delta2)?, &s.clone_dtoh(&delta)?)?;
    same("dk", &unpack(&p, 1, b, h, n, d), &want_dk)?;
    same("dv", &unpack(&p, 2, b, h, n, d), &want_dv)?;
    let got_dq = unpack(&p, 0, b, h, n, d);
    if atomic {
        // The atomic adds' order varies: dq agrees to a few roundings.
        let peak = want_dq.iter().fold(0f64, |m, x| m.max(x.to_f64().abs()));
        for (i, (g, w)) in got_dq.iter().zip(&want_dq).enumerate() {
            let (g, w) = (g.to_f64(), w.to_f64());
            ensure!(
                (g - w).abs() <= 2e-2 * peak + 1e-5,
                "dq (atomic) element {i}: {g:e} vs {w:e}"
            );
        }
    } else {
        same("dq", &got_dq, &want_dq)?;
    }
    Ok(())
}

/// Output views outside their buffer, overlapping themselves, and packed gradients of the
/// wrong length or with Nq ≠ Nk: typed errors, nothing launched (the NaN-filled buffers stay
/// NaN).
fn bad_views() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let (b, h, n, d) = (1, 2, 8, 32);
    let sh = shape(b, h, n, n, d, true);
    let len = b * h * n * d;
    let qkv = s.clone_htod(&data::<f32>(5, len, 1.0))?;
    let x = AttentionInput::dense(&*qkv, h, n, d);
    let mut lse = s.alloc_zeros::<f32>(b * h * n)?;
    let nan = f32::NAN;
    // Forward: a buffer one element short; rows on top of each other.
    let mut short = s.clone_htod(&vec![nan; len - 1])?;
    let o = AttentionOutput::dense(&mut short, h, n, d);
    let r = ops::attention_fwd_strided(&k, &s, AttentionAlgo::Auto, &sh, x, x, x, o, &mut lse, 1.0);
    ensure!(matches!(r, Err(Error::Shape { .. })), "short out: {r:?}");
    let mut out = s.clone_htod(&vec![nan; len])?;
    let o = AttentionOutput {
        data: &mut out,
        strides: HeadStrides {
            batch: len,
            head: n * d,
            row: d / 2,
        },
    };
    let r = ops::attention_fwd_strided(&k, &s, AttentionAlgo::Auto, &sh, x, x, x, o, &mut lse, 1.0);
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "overlapping out: {r:?}"
    );
    ensure!(
        s.clone_dtoh(&out)?.iter().all(|v| v.is_nan()),
        "a refused forward wrote out"
    );
    // Backward: dout's view past its buffer; a packed gradient one element short; Nq != Nk.
    let mut delta = s.alloc_zeros::<f32>(b * h * n)?;
    let bwd = |s: &Stream,
               sh: &AttentionShape,
               dout: AttentionInput<'_, f32>,
               delta: &mut DeviceSlice<f32>,
               grads: AttentionGrads<'_, f32>| {
        ops::attention_bwd_strided(
            &k,
            s,
            AttentionAlgo::Auto,
            AttentionBwdDq::Auto,
            sh,
            x,
            x,
            x,
            x,
            &lse,
            dout,
            delta,
            None,
            grads,
            1.0,
        )
    };
    let far = AttentionInput {
        data: &*qkv,
        strides: HeadStrides {
            batch: len,
            head: n * d,
            row: d + 1,
        },
    };
    let mut packed = s.clone_htod(&vec![nan; 3 * len])?;
    let r = bwd(
        &s,
        &sh,
        far,
        &mut delta,
        AttentionGrads::PackedQkv(&mut packed),
    );
    ensure!(
        matches!(r, Err(Error::Shape { .. })),
        "dout past its buffer: {r:?}"
    );
    let mut short = s.clone_htod(&vec![nan; 3 * len - 1])?;
    let r = bwd(
        &s,
        &sh,
        x,
        &mut delta,
        AttentionGrads::PackedQkv(&mut short),
    );
    ensure!(
        matches!(r, Err(Error::Shape { .. })),
        "short packed gradient: {r:?}"
    );
    let cross = shape(b, h, n, n / 2, d, true);
    let r = bwd(
        &s,
        &cross,
        x,
        &mut delta,
        AttentionGrads::PackedQkv(&mut packed),
    );
    ensure!(
        matches!(r, Err(Error::Invalid { .. })),
        "packed with Nq != Nk: {r:?}"
    );
    ensure!(
        s.clone_dtoh(&packed)?.iter().all(|v| v.is_nan()),
        "a refused backward wrote the gradient"
    );
    Ok(())
}
