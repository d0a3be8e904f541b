//! Our side of the sweep's tensor-level cases: `Tensor`'s broadcasting binary ops and a
//! `cuda-stack-jit` `ElementwiseKernel`, each checked against a CPU reference at the swept
//! shape, then timed like every other case (events around R calls on the sweep's stream, which
//! the tensor layer uses through `use_stream`). Each call allocates its output, as PyTorch's
//! side does (`a + b`, `torch.addcmul(x, x, y)`), from the caching allocators of both.

use super::cases::{Case, Op};
use super::ours::Ours;
use crate::kb::check;
use crate::kb::timing::{measure, BenchResult, Timing};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::Stream;
use cuda_stack_jit::ElementwiseKernel;
use cuda_stack_kernels::ops::BinaryOp;
use cuda_stack_kernels::{reference, Element, Kernels};
use cuda_stack_runtime::{Tensor, TensorElement};
use std::sync::OnceLock;

/// Checks, then times, one [`Op::Bcast`] or [`Op::Jit`] case.
pub fn run(k: &Kernels, s: &Stream, t: &Timing, c: &Case) -> BenchResult<Ours> {
    let _on = cuda_stack_runtime::use_stream(s);
    let secs = match &c.op {
        Op::Bcast { dtype, .. } => match *dtype {
            "f32" => bcast::<f32>(k, s, t, c)?,
            "f16" => bcast::<f16>(k, s, t, c)?,
            "bf16" => bcast::<bf16>(k, s, t, c)?,
            other => return Err(format!("{}: unknown dtype {other}", c.id()).into()),
        },
        &Op::Jit { n, off } => jit(k, s, t, c, n, off)?,
        _ => return Err(format!("{}: not a tensor-level case", c.id()).into()),
    };
    Ok(Ours {
        secs,
        d2d_secs: None,
        graph_secs: None,
    })
}

/// `n` uniform values in [-1, 1) from the kernels' Philox (host copy included), as `T`.
fn values<T: Element>(k: &Kernels, s: &Stream, n: usize, seed: u64) -> BenchResult<Vec<T>> {
    let (_, h) = check::signed(k, s, n.max(1), seed)?;
    Ok(h[..n]
        .iter()
        .map(|&v| <T as Element>::from_f64(f64::from(v)))
        .collect())
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}

/// `a op b` on the CPU with NumPy broadcasting (`b_t`: `b`'s data is stored transposed in its
/// last two dimensions), each element as the kernels compute it.
fn broadcast_reference<T: Element>(
    op: BinaryOp,
    (a, sa): (&[T], &[usize]),
    (b, sb, b_t): (&[T], &[usize], bool),
    out_shape: &[usize],
) -> Vec<T> {
    let r = out_shape.len();
    // Per-operand element strides over the output's dimensions (0 where broadcast).
    let steps = |shape: &[usize], transposed: bool| -> Vec<usize> {
        let mut stored = shape.to_vec();
        if transposed {
            stored.swap(shape.len() - 2, shape.len() - 1);
        }
        let mut st = strides(&stored);
        if transposed {
            st.swap(shape.len() - 2, shape.len() - 1);
        }
        (0..r)
            .map(|i| match (i + shape.len()).checked_sub(r) {
                Some(j) if shape[j] != 1 => st[j],
                _ => 0,
            })
            .collect()
    };
    let (ta, tb) = (steps(sa, false), steps(sb, b_t));
    let n: usize = out_shape.iter().product();
    (0..n)
        .map(|i| {
            let (mut rem, mut ia, mut ib) = (i, 0, 0);
            for d in (0..r).rev() {
                let c = rem % out_shape[d];
                rem /= out_shape[d];
                ia += c * ta[d];
                ib += c * tb[d];
            }
            reference::binary_one(op, a[ia], b[ib])
        })
        .collect()
}

fn bcast<T>(k: &Kernels, s: &Stream, t: &Timing, c: &Case) -> BenchResult<f64>
where
    T: Element + TensorElement,
    f32: From<T>,
{
    let Op::Bcast { op, a, b, bt, .. } = &c.op else {
        return Err("not a broadcast case".into());
    };
    let what = c.id();
    let dev = s.context().device().ordinal();
    let bop = if *op == "add" {
        BinaryOp::Add
    } else {
        BinaryOp::Mul
    };
    let (na, nb) = (a.iter().product(), b.iter().product());
    let (ha, hb) = (values::<T>(k, s, na, 21)?, values::<T>(k, s, nb, 22)?);
    let ta = Tensor::from_slice_on(dev, &ha, a)?;
    let tb = if *bt {
        let mut stored = b.clone();
        let r = stored.len();
        stored.swap(r - 2, r - 1);
        Tensor::from_slice_on(dev, &hb, &stored)?.transpose(-2, -1)?
    } else {
        Tensor::from_slice_on(dev, &hb, b)?
    };
    let call = |x: &Tensor<T>, y: &Tensor<T>| -> BenchResult<Tensor<T>> {
        Ok(match bop {
            BinaryOp::Add => x.add(y)?,
            _ => x.mul(y)?,
        })
    };
    let got = call(&ta, &tb)?;
    let want = broadcast_reference(bop, (&ha, a), (&hb, b, *bt), &c.broadcast_shape());
    let f = |v: Vec<T>| v.into_iter().map(f32::from).collect::<Vec<f32>>();
    check::exact(&what, &f(got.to_vec()?), &f(want))?;
    Ok(measure(s, t, |_, _| call(&ta, &tb).map(drop))?.secs)
}

/// `z = x * y + x` (f32), defined once per process.
fn mul_add() -> BenchResult<&'static ElementwiseKernel> {
    static K: OnceLock<ElementwiseKernel> = OnceLock::new();
    if let Some(k) = K.get() {
        return Ok(k);
    }
    // SAFETY: the operation touches only its own elements `x`, `y` and `z`.
    let k = unsafe { ElementwiseKernel::new("T x, T y", "T z", "z = x * y + x;", "mul_add")? };
    Ok(K.get_or_init(|| k))
}

fn jit(k: &Kernels, s: &Stream, t: &Timing, c: &Case, n: usize, off: usize) -> BenchResult<f64> {
    let what = c.id();
    let dev = s.context().device().ordinal();
    let (hx, hy) = (
        values::<f32>(k, s, n + off, 23)?,
        values::<f32>(k, s, n + off, 24)?,
    );
    let x = Tensor::from_slice_on(dev, &hx, &[n + off])?.narrow(0, off, n)?;
    let y = Tensor::from_slice_on(dev, &hy, &[n + off])?.narrow(0, off, n)?;
    let kernel = mul_add()?;
    let got = kernel.call1::<f32>(&[(&x).into(), (&y).into()])?.to_vec()?;
    // NVRTC may contract `x * y + x` to one FMA (its default --fmad=true): within an ulp.
    let want: Vec<f32> = hx[off..]
        .iter()
        .zip(&hy[off..])
        .map(|(&a, &b)| (f64::from(a) * f64::from(b) + f64::from(a)) as f32)
        .collect();
    check::close(&what, &got, &want, 1e-7, 2.5e-7)?;
    Ok(measure(s, t, |_, _| {
        kernel
            .call1::<f32>(&[(&x).into(), (&y).into()])
            .map(drop)
            .map_err(Into::into)
    })?
    .secs)
}
