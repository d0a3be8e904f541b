//! Autograd on the GPU: every differentiable op's gradient against central finite differences
//! in f64 ([`cuda_stack_nn::gradcheck`], PyTorch's tolerances), the forward values of the new row ops
//! against CPU references, gradient accumulation, `no_grad`, and every typed error.

use cuda_stack_nn::{
    class_targets, gradcheck, no_grad, FusedOpLayer, GradcheckOptions, Linear, Module, NnError,
    Relu, Sequential, Var,
};
use cuda_stack_runtime::Tensor;
use cuda_tests::{ensure, gpu, TestResult};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn main() {
    cuda_tests::run(vec![
        gpu("gradcheck_add_sub_mul_div_with_broadcasting", arith),
        gpu("gradcheck_matmul_2d_and_batched", matmul),
        gpu("gradcheck_relu_tanh_scale", activations),
        gpu("gradcheck_sum_mean_all_and_per_dim", reductions),
        gpu("gradcheck_softmax_and_log_softmax_any_dim", softmax),
        gpu("gradcheck_fused_bias_relu", fused_bias_relu),
        gpu("gradcheck_reshape_transpose_narrow", views),
        gpu("gradcheck_cross_entropy", cross_entropy),
        gpu("gradcheck_linear_and_sequential_mlp", mlp),
        gpu("log_softmax_and_cross_entropy_values_match_cpu", row_values),
        gpu("f32_backward_matches_f64_reference", f32_backward),
        gpu(
            "gradients_accumulate_and_zero_grad_drops_them",
            accumulation,
        ),
        gpu("no_grad_records_nothing", no_grad_scope),
        gpu("seed_004_basic_usage_gradient_shapes", seed_004_basic),
        gpu("errors_are_typed_and_say_what_to_do", errors),
    ]);
}

/// Host values in `[-1, 1]`, kept at least `gap` away from 0 (for the relu kink).
fn values(n: usize, seed: u64, gap: f64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let v: f64 = rng.random_range(-1.0..1.0);
            if v.abs() < gap {
                v.signum() * gap + v
            } else {
                v
            }
        })
        .collect()
}

fn t64(shape: &[usize], seed: u64) -> Result<Tensor<f64>, Box<dyn std::error::Error>> {
    let n = shape.iter().product();
    Ok(Tensor::from_vec(values(n, seed, 0.05), shape)?)
}

/// Runs gradcheck and fails with its report unless it passed.
fn check(
    what: &str,
    f: impl Fn(&[Var<f64>]) -> cuda_stack_nn::Result<Var<f64>>,
    inputs: &[Tensor<f64>],
) -> TestResult {
    let report = gradcheck(f, inputs, GradcheckOptions::default())?;
    ensure!(report.passed, "{what}: {report}");
    ensure!(report.entries > 0, "{what}: nothing compared");
    Ok(())
}

fn arith() -> TestResult {
    let a = t64(&[3, 4], 1)?;
    for (shape_b, seed) in [(vec![3, 4], 2), (vec![4], 3), (vec![3, 1], 4), (vec![], 5)] {
        let b = if shape_b.is_empty() {
            Tensor::from_vec(vec![0.7], &[])?
        } else {
            t64(&shape_b, seed)?
        };
        let ins = [a.clone(), b];
        check("add", |v| v[0].add(&v[1]), &ins)?;
        check("sub", |v| v[1].sub(&v[0]), &ins)?;
        check("mul", |v| v[0].mul(&v[1]), &ins)?;
        check("div", |v| v[0].div(&v[1]), &ins)?;
        check(
            "operators",
            |v| (&(&v[0] * &v[1])? + &v[0])?.div(&v[1]),
            &ins,
        )?;
    }
    // [3, 1] against [1, 4]: both sides broadcast.
    check(
        "add [3,1]+[1,4]",
        |v| v[0].mul(&v[1]),
        &[t64(&[3, 1], 6)?, t64(&[1, 4], 7)?],
    )?;
    Ok(())
}

fn matmul() -> TestResult {
    check(
        "matmul 2-D",
        |v| v[0].matmul(&v[1]),
        &[t64(&[3, 5], 1)?, t64(&[5, 4], 2)?],
    )?;
    check(
        "matmul of a transposed view",
        |v| v[0].t()?.matmul(&v[1]),
        &[t64(&[5, 3], 3)?, t64(&[5, 2], 4)?],
    )?;
    check(
        "matmul batched",
        |v| v[0].matmul(&v[1]),
        &[t64(&[2, 3, 4], 5)?, t64(&[2, 4, 2], 6)?],
    )?;
    check(
        "matmul batched by a 2-D (broadcast) operand",
        |v| v[0].matmul(&v[1]),
        &[t64(&[2, 3, 4], 7)?, t64(&[4, 3], 8)?],
    )?;
    Ok(())
}

fn activations() -> TestResult {
    let x = [t64(&[4, 6], 11)?];
    check("relu", |v| v[0].relu(), &x)?;
    check("tanh", |v| v[0].tanh(), &x)?;
    check("scale", |v| v[0].scale(-2.5), &x)?;
    check("tanh of relu", |v| v[0].relu()?.tanh(), &x)?;
    Ok(())
}

fn reductions() -> TestResult {
    let x = [t64(&[3, 4, 2], 21)?];
    check("sum_all", |v| v[0].sum_all(), &x)?;
    check("mean_all", |v| v[0].mean_all(), &x)?;
    for dim in [0isize, 1, 2, -1] {
        for keep in [false, true] {
            check("sum(dim)", |v| v[0].sum(dim, keep), &x)?;
            check("mean(dim)", |v| v[0].mean(dim, keep), &x)?;
        }
    }
    Ok(())
}

fn softmax() -> TestResult {
    let x = [t64(&[3, 5], 31)?];
    for dim in [1isize, 0, -1] {
        // A weighted sum makes every Jacobian entry visible (softmax rows sum to 1).
        check("softmax", |v| v[0].softmax(dim), &x)?;
        check("log_softmax", |v| v[0].log_softmax(dim), &x)?;
    }
    let x3 = [t64(&[2, 3, 4], 32)?];
    check("softmax 3-D middle dim", |v| v[0].softmax(1), &x3)?;
    check("log_softmax 3-D", |v| v[0].log_softmax(2), &x3)?;
    Ok(())
}

fn fused_bias_relu() -> TestResult {
    // Pre-activations x·2 + b kept away from 0: x in ±[0.05, 1], b small.
    let x = t64(&[5, 7], 41)?;
    let b = Tensor::from_vec(values(7, 42, 0.0).iter().map(|v| v * 0.04).collect(), &[7])?;
    check("bias_relu", |v| v[0].bias_relu(&v[1], 2.0), &[x, b])?;
    Ok(())
}

fn views() -> TestResult {
    let x = [t64(&[4, 6], 51)?];
    check("reshape", |v| v[0].reshape(&[2, 12])?.scale(3.0), &x)?;
    check("transpose", |v| v[0].t()?.mul(&v[0].t()?), &x)?;
    check("narrow dim 0", |v| v[0].narrow(0, 1, 2), &x)?;
    check("narrow dim 1", |v| v[0].narrow(1, 2, 3)?.tanh(), &x)?;
    check(
        "reshape of a transposed view",
        |v| v[0].t()?.reshape(&[24]),
        &x,
    )?;
    Ok(())
}

fn cross_entropy() -> TestResult {
    let t = class_targets(&[2, 0, 4, 1], 5)?;
    let x = [t64(&[4, 5], 61)?];
    check("cross_entropy", |v| v[0].cross_entropy(&t), &x)?;
    check(
        "cross_entropy of a linear map",
        |v| v[0].matmul(&v[1])?.cross_entropy(&t),
        &[t64(&[4, 3], 62)?, t64(&[3, 5], 63)?],
    )?;
    Ok(())
}

fn mlp() -> TestResult {
    // Linear → ReLU → Linear → cross-entropy, differentiated with respect to the input and,
    // through them, exercising the layers' weight paths (W read transposed, bias broadcast).
    let l1 = Linear::<f64>::new(6, 5, 1)?;
    let l2 = Linear::<f64>::new(5, 3, 2)?;
    let t = class_targets(&[0, 2, 1, 2], 3)?;
    let w1 = l1.weight().value();
    let b1 = l1.bias().map(Var::value).ok_or("bias")?;
    check(
        "input gradient of an MLP",
        |v| {
            let model = Sequential::new().append(Relu);
            let h = v[0].matmul(&v[1].t()?)?.add(&v[2])?;
            l2.forward(&model.forward(&h)?)?.cross_entropy(&t)
        },
        &[t64(&[4, 6], 64)?, w1, b1],
    )?;
    let fused = FusedOpLayer::<f64>::new(5, 2.0)?;
    check(
        "Sequential with FusedOpLayer",
        |v| {
            let h = v[0].matmul(&v[1].t()?)?.scale(0.5)?;
            fused.forward(&h)?.sum_all()
        },
        &[t64(&[3, 6], 65)?, t64(&[5, 6], 66)?],
    )?;
    Ok(())
}

fn row_values() -> TestResult {
    let (rows, cols) = (7, 33);
    let xs = values(rows * cols, 71, 0.0)
        .iter()
        .map(|v| v * 8.0)
        .collect::<Vec<_>>();
    let labels: Vec<usize> = (0..rows).map(|r| (r * 5) % cols).collect();
    let x = Tensor::from_vec(xs.clone(), &[rows, cols])?;
    let ls = x.log_softmax(1)?.to_vec()?;
    let sm = x.softmax(1)?.to_vec()?;
    let ce = Var::constant(x.clone())
        .cross_entropy(&class_targets(&labels, cols)?)?
        .value()
        .item()?;
    let mut ce_want = 0.0;
    for r in 0..rows {
        let row = &xs[r * cols..(r + 1) * cols];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        for (c, &v) in row.iter().enumerate() {
            let i = r * cols + c;
            ensure!(
                (ls[i] - (v - lse)).abs() < 1e-12,
                "log_softmax [{r}][{c}]: {} vs {}",
                ls[i],
                v - lse
            );
            ensure!(
                (sm[i] - (v - lse).exp()).abs() < 1e-14,
                "softmax f64 [{r}][{c}]"
            );
        }
        ce_want += lse - row[labels[r]];
    }
    ce_want /= rows as f64;
    ensure!(
        (ce - ce_want).abs() < 1e-12,
        "cross_entropy {ce} vs {ce_want}"
    );
    // Out-of-range labels are refused on the host.
    ensure!(
        matches!(class_targets(&[0, 5], 5), Err(NnError::Invalid { .. })),
        "label 5 of 5 classes"
    );
    Ok(())
}

fn f32_backward() -> TestResult {
    // The same MLP step in f32 and f64: f32 gradients within f32 rounding of the f64 ones.
    let xs = values(8 * 6, 81, 0.0);
    let labels = [1usize, 0, 2, 2, 1, 0, 0, 1];
    let t = class_targets(&labels, 3)?;
    let run32 = || -> Result<Vec<Vec<f64>>, Box<dyn std::error::Error>> {
        let m = Sequential::<f32>::new()
            .append(Linear::new(6, 16, 5)?)
            .append(Relu)
            .append(Linear::new(16, 3, 6)?);
        let x = Var::constant(Tensor::from_vec(
            xs.iter().map(|&v| v as f32).collect(),
            &[8, 6],
        )?);
        m.forward(&x)?.cross_entropy(&t)?.backward()?;
        let mut out = Vec::new();
        for p in m.parameters() {
            out.push(
                p.grad()?
                    .ok_or("no grad")?
                    .to_vec()?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect(),
            );
        }
        Ok(out)
    };
    let run64 = || -> Result<Vec<Vec<f64>>, Box<dyn std::error::Error>> {
        let m = Sequential::<f64>::new()
            .append(Linear::new(6, 16, 5)?)
            .append(Relu)
            .append(Linear::new(16, 3, 6)?);
        let x = Var::constant(Tensor::from_vec(xs.clone(), &[8, 6])?);
        m.forward(&x)?.cross_entropy(&t)?.backward()?;
        let mut out = Vec::new();
        for p in m.parameters() {
            out.push(p.grad()?.ok_or("no grad")?.to_vec()?);
        }
        Ok(out)
    };
    let (g32, g64) = (run32()?, run64()?);
    ensure!(g32.len() == 4 && g64.len() == 4, "four parameters each");
    for (p, (a, b)) in g32.iter().zip(&g64).enumerate() {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            ensure!(
                (x - y).abs() <= 1e-5 + 1e-4 * y.abs(),
                "param {p} grad[{i}]: f32 {x} vs f64 {y}"
            );
        }
    }
    Ok(())
}

fn accumulation() -> TestResult {
    let x = Var::parameter(Tensor::from_vec(vec![1.0f64, -2.0, 3.0], &[3])?);
    x.mul(&x)?.sum_all()?.backward()?;
    ensure!(
        x.grad()?.ok_or("grad")?.to_vec()? == [2.0, -4.0, 6.0],
        "d/dx Σx² = 2x"
    );
    x.mul(&x)?.sum_all()?.backward()?;
    ensure!(
        x.grad()?.ok_or("grad")?.to_vec()? == [4.0, -8.0, 12.0],
        "second backward accumulates"
    );
    x.zero_grad();
    ensure!(x.grad()?.is_none(), "zero_grad sets to None");
    // A value used twice in one graph gets both contributions.
    let y = x.scale(3.0)?;
    y.add(&y)?.sum_all()?.backward()?;
    ensure!(
        x.grad()?.ok_or("grad")?.to_vec()? == [6.0, 6.0, 6.0],
        "y + y with y = 3x"
    );
    // retain_graph allows a second pass.
    x.zero_grad();
    let l = x.tanh()?.sum_all()?;
    l.backward_retain_graph()?;
    l.backward()?;
    let g = x.grad()?.ok_or("grad")?.to_vec()?;
    ensure!(
        (g[0] - 2.0 * (1.0 - 1f64.tanh().powi(2))).abs() < 1e-12,
        "two passes: {g:?}"
    );
    Ok(())
}

fn no_grad_scope() -> TestResult {
    let w = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0], &[2])?);
    let y = no_grad(|| w.scale(2.0))?;
    ensure!(
        !y.requires_grad() && y.is_leaf(),
        "computed under no_grad: a constant"
    );
    ensure!(cuda_stack_nn::is_grad_enabled(), "grad mode restored");
    ensure!(
        matches!(y.sum_all()?.backward(), Err(NnError::NoGradPath { .. })),
        "no path"
    );
    let z = w.scale(2.0)?;
    ensure!(
        z.requires_grad() && z.op() == Some("scale"),
        "recorded outside no_grad"
    );
    Ok(())
}

fn seed_004_basic() -> TestResult {
    // Seed 004 "Basic Usage": input [128, 256] and bias [256] requiring grad, scale 2.
    let input = Var::parameter(Tensor::<f32>::randn(&[128, 256], 1)?);
    let bias = Var::parameter(Tensor::<f32>::randn(&[256], 2)?);
    let output = input.bias_relu(&bias, 2.0)?;
    output.sum_all()?.backward()?;
    let (gi, gb) = (
        input.grad()?.ok_or("input.grad")?,
        bias.grad()?.ok_or("bias.grad")?,
    );
    ensure!(
        gi.shape() == [128, 256] && gb.shape() == [256],
        "shapes {:?} {:?}",
        gi.shape(),
        gb.shape()
    );
    // d/dx Σ relu(2x + b) = 2·[2x + b > 0]; d/db = Σ_rows [2x + b > 0].
    let (x, b) = (input.value().to_vec()?, bias.value().to_vec()?);
    let (gx, gbv) = (gi.to_vec()?, gb.to_vec()?);
    let mut counts = vec![0f32; 256];
    for r in 0..128 {
        for c in 0..256 {
            let on = x[r * 256 + c].mul_add(2.0, b[c]) > 0.0;
            ensure!(
                gx[r * 256 + c] == if on { 2.0 } else { 0.0 },
                "input.grad[{r}][{c}]"
            );
            counts[c] += if on { 1.0 } else { 0.0 };
        }
    }
    ensure!(gbv == counts, "bias.grad = active rows per column");
    Ok(())
}

fn errors() -> TestResult {
    let x = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?);
    let e = x
        .scale(2.0)?
        .backward()
        .err()
        .ok_or("non-scalar backward")?;
    ensure!(matches!(e, NnError::NonScalarBackward { .. }), "{e}");
    ensure!(
        e.to_string().contains("backward_with"),
        "says what to do: {e}"
    );

    let l = x.relu()?.sum_all()?;
    l.backward()?;
    let e = l.backward().err().ok_or("second backward")?;
    ensure!(matches!(e, NnError::GraphFreed { op: "sum" }), "{e}");
    ensure!(e.to_string().contains("backward_retain_graph"), "{e}");

    let c = Var::constant(Tensor::from_vec(vec![1.0f32], &[1])?);
    let e = c.grad().err().ok_or("grad of a constant")?;
    ensure!(matches!(e, NnError::NotRequiringGrad { .. }), "{e}");

    let y = Var::constant(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?);
    let e = x.add(&y).err().ok_or("shape mismatch")?;
    ensure!(
        matches!(e, NnError::Tensor(_)) && e.to_string().contains("[2, 2]"),
        "{e}"
    );

    let e = x
        .scale(1.0)?
        .backward_with(&Tensor::zeros(&[3])?, false)
        .err()
        .ok_or("grad shape")?;
    ensure!(matches!(e, NnError::GradShape { .. }), "{e}");

    let e = cuda_stack_nn::Sgd::<f32>::new(vec![], cuda_stack_nn::SgdConfig::new(0.1))
        .err()
        .ok_or("no params")?;
    ensure!(matches!(e, NnError::NoParameters { .. }), "{e}");
    let e = cuda_stack_nn::Adam::new(vec![c.clone()], cuda_stack_nn::AdamConfig::new(1e-3))
        .err()
        .ok_or("const param")?;
    ensure!(matches!(e, NnError::Invalid { .. }), "{e}");
    let e = cuda_stack_nn::Adam::new(vec![x.clone()], cuda_stack_nn::AdamConfig::new(f64::NAN))
        .err()
        .ok_or("NaN lr")?;
    ensure!(matches!(e, NnError::Invalid { .. }), "{e}");

    let logits = Var::parameter(Tensor::<f32>::zeros(&[3, 4])?);
    let e = logits
        .cross_entropy(&class_targets(&[0, 1], 4)?)
        .err()
        .ok_or("targets length")?;
    ensure!(e.to_string().contains("targets must be [3]"), "{e}");
    ensure!(
        matches!(Linear::<f32>::new(0, 3, 1), Err(NnError::Invalid { .. })),
        "Linear(0, 3)"
    );
    Ok(())
}
