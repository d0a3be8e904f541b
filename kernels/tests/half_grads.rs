//! The training kernels autograd needs, in f16 and bf16 (and f32 beside them, as a control):
//! `relu_bwd`, `tanh_bwd`, `row_softmax` (softmax and log-softmax) and its backward, and the
//! fused cross-entropy forward and backward, each against an f64 CPU computation on the same
//! (already rounded) inputs.
//!
//! Tolerances: f16/bf16 results are computed in f32 and rounded once, so each element is within
//! one rounding of the f64 value plus the f32 computation's error: `|got − want| ≤ u·|want| +
//! a`, with `u` = 2⁻⁸ for bf16, 2⁻¹¹ for f16 (one unit in the last place, twice the rounding
//! error) and 1e-5 for f32 (sums of thousands of f32 terms), and `a` = 1e-6 (f32 error of sums of at most a few thousand terms
//! of magnitude ≤ 1, for values near 0). `relu_bwd` is exact (it passes `dy` through).

use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceRepr, Stream};
use cuda_stack_kernels::{ops, Element, Kernels};
use cuda_tests::{ensure, gpu, TestResult};
use std::sync::Arc;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A dtype under test: conversion to and from f64 and its tolerance.
trait Half: Element + DeviceRepr + Copy {
    const U: f64;
    fn from(v: f64) -> Self;
    fn to(self) -> f64;
    fn scalar(v: f64) -> Self::Scalar;
}

impl Half for f32 {
    const U: f64 = 1e-5;
    fn from(v: f64) -> f32 {
        v as f32
    }
    fn to(self) -> f64 {
        self as f64
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}
impl Half for f16 {
    const U: f64 = 1.0 / 2048.0;
    fn from(v: f64) -> f16 {
        f16::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}
impl Half for bf16 {
    const U: f64 = 1.0 / 256.0;
    fn from(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
    fn to(self) -> f64 {
        self.to_f64()
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}

/// Deterministic values in [-r, r).
fn values<T: Half>(n: usize, seed: u64, r: f64) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            T::from((2.0 * u - 1.0) * r)
        })
        .collect()
}

fn setup() -> Res<(cuda_stack_driver::Context, Stream, Arc<Kernels>)> {
    let ctx = cuda_tests::context()?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    Ok((ctx, s, k))
}

fn close<T: Half>(what: &str, got: &[T], want: &[f64]) -> TestResult {
    ensure!(got.len() == want.len(), "{what}: {} results", got.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to();
        let tol = T::U * w.abs() + 1e-6;
        ensure!(
            (g - w).abs() <= tol || (g.is_nan() && w.is_nan()),
            "{what}<{}>: element {i} is {g}, want {w} (tolerance {tol:e})",
            T::DTYPE
        );
    }
    Ok(())
}

fn pointwise<T: Half>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for n in [0usize, 1, 33, 4099] {
        let (x, dy) = (values::<T>(n, 1, 3.0), values::<T>(n, 2, 2.0));
        let (dx_, ddy) = (s.clone_htod(&x)?, s.clone_htod(&dy)?);
        let mut out = s.alloc_zeros::<T>(n)?;
        ops::relu_bwd(&k, &s, &dx_, &ddy, &mut out)?;
        let got = s.clone_dtoh(&out)?;
        for i in 0..n {
            let want = if x[i].to() > 0.0 { dy[i].to() } else { 0.0 };
            ensure!(
                got[i].to() == want,
                "relu_bwd<{}> n={n} element {i}: {} want {want}",
                T::DTYPE,
                got[i].to()
            );
        }
        // tanh_bwd takes the forward's output y (here any values in (-1, 1)).
        let y = values::<T>(n, 3, 0.99);
        let dy_ = s.clone_htod(&y)?;
        ops::tanh_bwd(&k, &s, &dy_, &ddy, &mut out)?;
        let want: Vec<f64> = (0..n)
            .map(|i| dy[i].to() * (1.0 - y[i].to() * y[i].to()))
            .collect();
        close(&format!("tanh_bwd n={n}"), &s.clone_dtoh(&out)?, &want)?;
    }
    Ok(())
}

/// f64 softmax / log-softmax of each row.
fn softmax_rows(x: &[f64], rows: usize, cols: usize, log: bool) -> Vec<f64> {
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..cols {
            y[r * cols + c] = if log {
                row[c] - m - s.ln()
            } else {
                (row[c] - m).exp() / s
            };
        }
    }
    y
}

fn rows_ops<T: Half>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for (rows, cols) in [(0usize, 5usize), (1, 1), (7, 33), (9, 1000), (3, 4097)] {
        let x = values::<T>(rows * cols, 4, 4.0);
        let xf: Vec<f64> = x.iter().map(|v| v.to()).collect();
        let dx_ = s.clone_htod(&x)?;
        for log in [false, true] {
            let tag = format!("[{rows}, {cols}] log={log}");
            let mut y = s.alloc_zeros::<T>(rows * cols)?;
            ops::row_softmax(&k, &s, &dx_, &mut y, rows, cols, log)?;
            let want = softmax_rows(&xf, rows, cols, log);
            // log-softmax values reach -10: its error is relative to the row's terms, so the
            // tolerance uses each value's magnitude plus the largest input's rounding.
            close(&format!("row_softmax {tag}"), &s.clone_dtoh(&y)?, &want)?;
            // The backward from the (rounded) forward output and a gradient.
            let yv: Vec<T> = s.clone_dtoh(&y)?;
            let yf: Vec<f64> = yv.iter().map(|v| v.to()).collect();
            let dy = values::<T>(rows * cols, 5, 1.0);
            let dyf: Vec<f64> = dy.iter().map(|v| v.to()).collect();
            let (dyv, ddy) = (s.clone_htod(&yv)?, s.clone_htod(&dy)?);
            let mut dx = s.alloc_zeros::<T>(rows * cols)?;
            ops::row_softmax_bwd(&k, &s, &dyv, &ddy, &mut dx, rows, cols, log)?;
            let mut want = vec![0.0; rows * cols];
            for r in 0..rows {
                let b = r * cols;
                let dot: f64 = if log {
                    dyf[b..b + cols].iter().sum()
                } else {
                    (0..cols).map(|c| dyf[b + c] * yf[b + c]).sum()
                };
                for c in 0..cols {
                    want[b + c] = if log {
                        dyf[b + c] - yf[b + c].exp() * dot
                    } else {
                        yf[b + c] * (dyf[b + c] - dot)
                    };
                }
            }
            // The row sum is formed in f32 from rounded terms: allow its error (cols · u · max)
            // on every element of the row.
            let got = s.clone_dtoh(&dx)?;
            for r in 0..rows {
                let b = r * cols;
                let slack = cols as f64 * 1e-7 * 4.0;
                for c in 0..cols {
                    let (g, w) = (got[b + c].to(), want[b + c]);
                    let tol = T::U * w.abs() + 1e-6 + slack;
                    ensure!(
                        (g - w).abs() <= tol,
                        "row_softmax_bwd<{}> {tag}: [{r}][{c}] is {g}, want {w} (tol {tol:e})",
                        T::DTYPE
                    );
                }
            }
        }
        // Cross-entropy against targets, one out of range (a NaN row) when there are rows.
        let mut t: Vec<i32> = (0..rows).map(|r| ((r * 7) % cols) as i32).collect();
        if rows > 2 {
            t[2] = cols as i32;
        }
        let dt = s.clone_htod(&t)?;
        let mut loss = s.alloc_zeros::<T>(rows)?;
        ops::cross_entropy_fwd(&k, &s, &dx_, &dt, &mut loss, rows, cols)?;
        let lsm = softmax_rows(&xf, rows, cols, true);
        let want: Vec<f64> = (0..rows)
            .map(|r| {
                let tr = t[r];
                if tr >= 0 && (tr as usize) < cols {
                    -lsm[r * cols + tr as usize]
                } else {
                    f64::NAN
                }
            })
            .collect();
        close(
            &format!("cross_entropy_fwd [{rows}, {cols}]"),
            &s.clone_dtoh(&loss)?,
            &want,
        )?;
        let g = [T::from(0.5)];
        let dg = s.clone_htod(&g)?;
        let mut dx = s.alloc_zeros::<T>(rows * cols)?;
        let scale = 1.0 / rows.max(1) as f64;
        ops::cross_entropy_bwd(
            &k,
            &s,
            &dx_,
            &dt,
            &dg,
            &mut dx,
            rows,
            cols,
            T::scalar(scale),
        )?;
        let p = softmax_rows(&xf, rows, cols, false);
        let mut want = vec![0.0; rows * cols];
        for r in 0..rows {
            let tr = t[r];
            let ok = tr >= 0 && (tr as usize) < cols;
            for c in 0..cols {
                want[r * cols + c] = if ok {
                    let one = if c as i32 == tr { 1.0 } else { 0.0 };
                    (p[r * cols + c] - one) * 0.5 * scale
                } else {
                    f64::NAN
                };
            }
        }
        close(
            &format!("cross_entropy_bwd [{rows}, {cols}]"),
            &s.clone_dtoh(&dx)?,
            &want,
        )?;
    }
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu("pointwise_grads_f32", pointwise::<f32>),
        gpu("pointwise_grads_f16", pointwise::<f16>),
        gpu("pointwise_grads_bf16", pointwise::<bf16>),
        gpu("row_ops_f32", rows_ops::<f32>),
        gpu("row_ops_f16", rows_ops::<f16>),
        gpu("row_ops_bf16", rows_ops::<bf16>),
    ]);
}
