//! `Var::linear` (`F.linear`): the one-GEMM path (cuBLASLt's bias epilogue) against the
//! two-op path (matmul, then a broadcasting add) on the same inputs, values and gradients, for
//! f32, f64 and bf16 and inputs of rank 1, 2 and 3; gradcheck in f64 with and without a bias;
//! and the shape errors.
//!
//! Tolerances: the two paths add the bias to the accumulator or to the rounded product, so
//! values agree within one rounding of the result: 2⁻²² (f32), 2⁻⁵⁰ (f64) or 2⁻⁷ (bf16) of
//! max|y| + |b|; gradients are computed by the same ops in both (exact match expected, with
//! the same tolerance allowed).

use cuda_stack_nn::{gradcheck, GradElement, GradcheckOptions, NnError, Var};
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_stack_runtime::tensor::{with_matmul_backend, MatmulBackend};
use cuda_stack_runtime::{Tensor, TensorElement};
use cuda_tests::{ensure, gpu, gpu_cublas, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    cuda_tests::run(vec![
        gpu_cublas("fused_matches_two_ops_f32", || {
            fused_vs_two_ops::<f32>(2e-6)
        }),
        gpu_cublas("fused_matches_two_ops_f64", || {
            fused_vs_two_ops::<f64>(1e-14)
        }),
        gpu_cublas("fused_matches_two_ops_bf16", || {
            fused_vs_two_ops::<bf16>(1e-2)
        }),
        gpu("gradcheck_with_and_without_bias", grads),
        gpu(
            "strided_inputs_expanded_gradients_and_empty_rows",
            views_and_empty,
        ),
        gpu("shape_errors_are_typed", errors),
    ]);
}

fn values<T: TensorElement>(shape: &[usize], seed: u64) -> Res<Tensor<T>> {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // Rounded on the host: the device casts have no f64 <-> bf16 kernel.
    let v: Vec<T> = (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            T::from_f64(
                (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 - 0.5,
            )
        })
        .collect();
    Ok(Tensor::from_vec(v, shape)?)
}

fn host<T: TensorElement>(t: &Tensor<T>) -> Res<Vec<f64>> {
    Ok(t.to_vec()?.into_iter().map(T::to_f64).collect())
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) -> TestResult {
    ensure!(
        a.len() == b.len(),
        "{what}: {} vs {} elements",
        a.len(),
        b.len()
    );
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        ensure!(
            (x - y).abs() <= tol * scale,
            "{what}[{i}]: {x} vs {y} (tolerance {tol} · {scale})"
        );
    }
    Ok(())
}

fn fused_vs_two_ops<T: GradElement>(tol: f64) -> TestResult {
    for x_shape in [vec![37usize], vec![65, 37], vec![3, 17, 37]] {
        let (out_f, in_f) = (24usize, 37usize);
        let x = Var::parameter(values::<T>(&x_shape, 1)?);
        let w = Var::parameter(values::<T>(&[out_f, in_f], 2)?);
        let b = Var::parameter(values::<T>(&[out_f], 3)?);
        let y = with_matmul_backend(MatmulBackend::Cublas, || x.linear(&w, Some(&b)))?;
        let mut y_shape = x_shape.clone();
        *y_shape.last_mut().ok_or("rank 0")? = out_f;
        ensure!(y.shape() == *y_shape, "shape {:?}", y.shape());
        let g = values::<T>(&y_shape, 4)?;
        y.backward_with(&g, false)?;
        let grads1: Vec<Vec<f64>> = [&x, &w, &b]
            .iter()
            .map(|v| host(&v.grad()?.ok_or("no gradient")?))
            .collect::<Res<_>>()?;
        for v in [&x, &w, &b] {
            v.zero_grad();
        }
        // The two-op path, written out.
        let rows = x_shape.iter().product::<usize>() / in_f;
        let y2 = x
            .reshape(&[rows, in_f])?
            .matmul(&w.t()?)?
            .add(&b)?
            .reshape(&y_shape)?;
        y2.backward_with(&g, false)?;
        let what = format!("{} x {x_shape:?}", std::any::type_name::<T>());
        close(
            &format!("{what} y"),
            &host(&y.value())?,
            &host(&y2.value())?,
            tol,
        )?;
        for (i, v) in [&x, &w, &b].iter().enumerate() {
            let g2 = host(&v.grad()?.ok_or("no gradient")?)?;
            close(&format!("{what} grad {i}"), &grads1[i], &g2, tol)?;
        }
    }
    Ok(())
}

/// A transposed (non-contiguous) input, a backward from `sum_all` (whose gradient reaches the
/// op as an expanded, stride-0 view) and `in_features = 0` (the result is the bias, broadcast),
/// each against the two-op path.
fn views_and_empty() -> TestResult {
    let xt = values::<f32>(&[7, 5], 1)?; // x = xtᵀ: [5, 7], strides [1, 5]
    let x = Var::parameter(xt.t()?);
    let w = Var::parameter(values::<f32>(&[3, 7], 2)?);
    let b = Var::parameter(values::<f32>(&[3], 3)?);
    let y = x.linear(&w, Some(&b))?;
    y.sum_all()?.backward()?;
    let g1: Vec<Vec<f64>> = [&x, &w, &b]
        .iter()
        .map(|v| host(&v.grad()?.ok_or("no gradient")?))
        .collect::<Res<_>>()?;
    for v in [&x, &w, &b] {
        v.zero_grad();
    }
    let y2 = x.matmul(&w.t()?)?.add(&b)?;
    y2.sum_all()?.backward()?;
    close("strided y", &host(&y.value())?, &host(&y2.value())?, 2e-6)?;
    for (i, v) in [&x, &w, &b].iter().enumerate() {
        let g2 = host(&v.grad()?.ok_or("no gradient")?)?;
        close(&format!("strided grad {i}"), &g1[i], &g2, 2e-6)?;
    }
    // in_features = 0: an empty sum, so every row is the bias.
    let x0 = Var::constant(Tensor::<f32>::zeros(&[5, 0])?);
    let w0 = Var::constant(Tensor::<f32>::zeros(&[3, 0])?);
    let y0 = x0.linear(&w0, Some(&b))?;
    ensure!(y0.shape() == [5, 3], "shape {:?}", y0.shape());
    let bias = host(&b.value())?;
    let want: Vec<f64> = (0..5).flat_map(|_| bias.clone()).collect();
    close("in_features = 0", &host(&y0.value())?, &want, 0.0)?;
    Ok(())
}

fn grads() -> TestResult {
    let inputs = [
        values::<f64>(&[5, 7], 5)?,
        values::<f64>(&[3, 7], 6)?,
        values::<f64>(&[3], 7)?,
    ];
    for with_bias in [true, false] {
        let report = gradcheck(
            |v| {
                let b = if with_bias { Some(&v[2]) } else { None };
                v[0].linear(&v[1], b)?.tanh()?.sum_all()
            },
            &inputs,
            GradcheckOptions::default(),
        )?;
        ensure!(report.passed, "bias {with_bias}: {report}");
    }
    Ok(())
}

fn errors() -> TestResult {
    let x = Var::constant(values::<f32>(&[4, 5], 1)?);
    let w = Var::constant(values::<f32>(&[3, 6], 2)?);
    let b = Var::constant(values::<f32>(&[3], 3)?);
    let w1 = Var::constant(values::<f32>(&[15], 4)?);
    let b2 = Var::constant(values::<f32>(&[4], 5)?);
    let ok_w = Var::constant(values::<f32>(&[3, 5], 6)?);
    for (what, r) in [
        ("in_features", x.linear(&w, Some(&b))),
        ("rank of W", x.linear(&w1, None)),
        ("bias length", x.linear(&ok_w, Some(&b2))),
    ] {
        match r {
            Err(NnError::Tensor(_)) => {}
            other => return Err(format!("{what}: {other:?}").into()),
        }
    }
    Ok(())
}
