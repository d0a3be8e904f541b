//! `Var::mlp_gelu` (a transformer's MLP as one op, GELU in cuBLASLt's epilogues for bf16/f16)
//! against the chain `linear → gelu → linear` it replaces:
//! - where it is not fused (f32 and f64 on any backend, bf16 on the kernels, a hidden width
//!   that is not a multiple of 8), values and every gradient **bit for bit**;
//! - fused (bf16 and f16 on cuBLAS), values and gradients within the 16-bit tolerance of the
//!   f32 chain on the same (rounded) inputs, as the unfused bf16 chain is;
//! - gradcheck in f64 (the backward's wiring: inputs with and without biases, a rank-3 input,
//!   weights that do not require grad);
//! - the shape errors.
//!
//! Tolerance of the fused path: 2e-2 of the largest |value| of each compared tensor (two bf16
//! roundings on the way, the GPU's fast tanh, and sums over up to 256 terms).

use cuda_stack_nn::{gradcheck, GradElement, GradcheckOptions, NnError, Var};
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{with_matmul_backend, MatmulBackend};
use cuda_stack_runtime::{Tensor, TensorElement};
use cuda_tests::{ensure, gpu, gpu_cublas, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    cuda_tests::run(vec![
        gpu("f32_is_the_chain_bit_for_bit", || {
            exact::<f32>(MatmulBackend::Auto)
        }),
        gpu("f64_is_the_chain_bit_for_bit", || {
            exact::<f64>(MatmulBackend::Auto)
        }),
        gpu("bf16_on_kernels_is_the_chain_bit_for_bit", || {
            exact::<bf16>(MatmulBackend::Kernels)
        }),
        gpu_cublas("bf16_fused_matches_the_f32_chain", fused::<bf16>),
        gpu_cublas("f16_fused_matches_the_f32_chain", fused::<f16>),
        gpu("gradcheck_f64", grads),
        gpu("shape_errors_are_typed", errors),
    ]);
}

/// Values in [-scale/2, scale/2), deterministic per seed, rounded on the host.
fn values<T: TensorElement>(shape: &[usize], seed: u64, scale: f64) -> Res<Tensor<T>> {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<T> = (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            T::from_f64(scale * (u - 0.5))
        })
        .collect();
    Ok(Tensor::from_vec(v, shape)?)
}

fn host<T: TensorElement>(t: &Tensor<T>) -> Res<Vec<f64>> {
    Ok(t.to_vec()?.into_iter().map(T::to_f64).collect())
}

/// The five parameters of an MLP `[lead…, in] → [lead…, out]` with `hidden` units, and an
/// input; all require grad.
struct Mlp<T: GradElement> {
    x: Var<T>,
    w_fc: Var<T>,
    b_fc: Var<T>,
    w_proj: Var<T>,
    b_proj: Var<T>,
}

impl<T: GradElement> Mlp<T> {
    fn new(lead: &[usize], in_f: usize, hidden: usize, out_f: usize) -> Res<Mlp<T>> {
        let mut xs = lead.to_vec();
        xs.push(in_f);
        Ok(Mlp {
            x: Var::parameter(values::<T>(&xs, 1, 2.0)?),
            w_fc: Var::parameter(values::<T>(&[hidden, in_f], 2, 0.5)?),
            b_fc: Var::parameter(values::<T>(&[hidden], 3, 1.0)?),
            w_proj: Var::parameter(values::<T>(&[out_f, hidden], 4, 0.5)?),
            b_proj: Var::parameter(values::<T>(&[out_f], 5, 1.0)?),
        })
    }

    fn all(&self) -> [&Var<T>; 5] {
        [&self.x, &self.w_fc, &self.b_fc, &self.w_proj, &self.b_proj]
    }

    /// The output and the five gradients, by `mlp_gelu` (`fused`) or the chain, for the output
    /// gradient `g`.
    fn run(&self, fused: bool, g: &Tensor<T>) -> Res<Vec<Vec<f64>>> {
        for v in self.all() {
            v.zero_grad();
        }
        let y = if fused {
            self.x.mlp_gelu(
                &self.w_fc,
                Some(&self.b_fc),
                &self.w_proj,
                Some(&self.b_proj),
            )?
        } else {
            self.x
                .linear(&self.w_fc, Some(&self.b_fc))?
                .gelu()?
                .linear(&self.w_proj, Some(&self.b_proj))?
        };
        y.backward_with(g, false)?;
        let mut out = vec![host(&y.value())?];
        for v in self.all() {
            out.push(host(&v.grad()?.ok_or("no gradient")?)?);
        }
        Ok(out)
    }
}

const NAMES: [&str; 6] = ["y", "dx", "dW_fc", "db_fc", "dW_proj", "db_proj"];

/// Shapes `(lead, in, hidden, out)`: a GPT-like one, odd row counts, a rank-3 input, and a
/// hidden width that is not a multiple of 8.
const SHAPES: &[(&[usize], usize, usize, usize)] = &[
    (&[37], 64, 256, 64),
    (&[3, 11], 32, 128, 48),
    (&[5], 24, 40, 24),
    (&[9], 16, 36, 16),
];

fn exact<T: GradElement>(backend: MatmulBackend) -> TestResult {
    with_matmul_backend(backend, || -> TestResult {
        for &(lead, in_f, hidden, out_f) in SHAPES {
            let m = Mlp::<T>::new(lead, in_f, hidden, out_f)?;
            let mut gs = lead.to_vec();
            gs.push(out_f);
            let g = values::<T>(&gs, 6, 1.0)?;
            let (a, b) = (m.run(true, &g)?, m.run(false, &g)?);
            for (i, name) in NAMES.iter().enumerate() {
                ensure!(
                    a[i] == b[i],
                    "{} {lead:?} hidden {hidden} on {backend:?}: {name} of mlp_gelu differs from \
                     the chain's (they must be the same ops)",
                    std::any::type_name::<T>()
                );
            }
        }
        Ok(())
    })
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) -> TestResult {
    ensure!(got.len() == want.len(), "{what}: lengths");
    let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        ensure!(
            (x - y).abs() <= tol * scale,
            "{what}[{i}]: {x} vs {y} (allowed {tol} · {scale:.4})"
        );
    }
    Ok(())
}

/// The fused op and the unfused 16-bit chain, each against the f32 chain on the same rounded
/// inputs.
fn fused<T: GradElement>() -> TestResult {
    with_matmul_backend(MatmulBackend::Cublas, || -> TestResult {
        for &(lead, in_f, hidden, out_f) in SHAPES {
            let m = Mlp::<T>::new(lead, in_f, hidden, out_f)?;
            let mut gs = lead.to_vec();
            gs.push(out_f);
            let g = values::<T>(&gs, 6, 1.0)?;
            let reference = {
                let up = |v: &Var<T>| -> Res<Var<f32>> {
                    Ok(Var::parameter(v.value().to_dtype::<f32>()?))
                };
                let m32 = Mlp::<f32> {
                    x: up(&m.x)?,
                    w_fc: up(&m.w_fc)?,
                    b_fc: up(&m.b_fc)?,
                    w_proj: up(&m.w_proj)?,
                    b_proj: up(&m.b_proj)?,
                };
                m32.run(false, &g.to_dtype::<f32>()?)?
            };
            let what = format!("{} {lead:?} hidden {hidden}", std::any::type_name::<T>());
            for (path, fused) in [("mlp_gelu", true), ("the 16-bit chain", false)] {
                let got = m.run(fused, &g)?;
                for (i, name) in NAMES.iter().enumerate() {
                    close(
                        &format!("{what}: {path}'s {name} vs the f32 chain"),
                        &got[i],
                        &reference[i],
                        2e-2,
                    )?;
                }
            }
        }
        Ok(())
    })
}

fn grads() -> TestResult {
    let (lead, in_f, hidden, out_f) = ([2usize, 3], 4, 8, 3);
    let inputs = [
        values::<f64>(&[lead[0], lead[1], in_f], 11, 2.0)?,
        values::<f64>(&[hidden, in_f], 12, 1.0)?,
        values::<f64>(&[hidden], 13, 1.0)?,
        values::<f64>(&[out_f, hidden], 14, 1.0)?,
        values::<f64>(&[out_f], 15, 1.0)?,
    ];
    for (bf, bp) in [(true, true), (false, true), (true, false), (false, false)] {
        let report = gradcheck(
            |v| {
                let b_fc = bf.then_some(&v[2]);
                let b_proj = bp.then_some(&v[4]);
                v[0].mlp_gelu(&v[1], b_fc, &v[3], b_proj)?.tanh()?.sum_all()
            },
            &inputs,
            GradcheckOptions::default(),
        )?;
        ensure!(report.passed, "biases ({bf}, {bp}): {report}");
    }
    // Only some inputs require grad: the others get none, the rest are unchanged.
    let x = Var::parameter(inputs[0].clone());
    let w_fc = Var::constant(inputs[1].clone());
    let b_fc = Var::parameter(inputs[2].clone());
    let w_proj = Var::constant(inputs[3].clone());
    let b_proj = Var::constant(inputs[4].clone());
    let y = x.mlp_gelu(&w_fc, Some(&b_fc), &w_proj, Some(&b_proj))?;
    y.sum_all()?.backward()?;
    ensure!(
        x.grad()?.is_some() && b_fc.grad()?.is_some(),
        "the inputs that require grad got one"
    );
    let x2 = Var::parameter(inputs[0].clone());
    let b2 = Var::parameter(inputs[2].clone());
    x2.linear(&w_fc, Some(&b2))?
        .gelu()?
        .linear(&w_proj, Some(&b_proj))?
        .sum_all()?
        .backward()?;
    for (a, b, name) in [(&x, &x2, "dx"), (&b_fc, &b2, "db_fc")] {
        let (a, b) = (
            host(&a.grad()?.ok_or("no gradient")?)?,
            host(&b.grad()?.ok_or("no gradient")?)?,
        );
        ensure!(a == b, "{name}: mlp_gelu and the chain differ");
    }
    Ok(())
}

fn errors() -> TestResult {
    let x = Var::constant(values::<f32>(&[4, 5], 1, 1.0)?);
    let ok_fc = Var::constant(values::<f32>(&[8, 5], 2, 1.0)?);
    let bad_fc = Var::constant(values::<f32>(&[8, 6], 2, 1.0)?);
    let ok_proj = Var::constant(values::<f32>(&[3, 8], 3, 1.0)?);
    let bad_proj = Var::constant(values::<f32>(&[3, 7], 3, 1.0)?);
    let b7 = Var::constant(values::<f32>(&[7], 4, 1.0)?);
    for (what, r) in [
        ("in_features", x.mlp_gelu(&bad_fc, None, &ok_proj, None)),
        (
            "hidden of W_proj",
            x.mlp_gelu(&ok_fc, None, &bad_proj, None),
        ),
        ("b_fc length", x.mlp_gelu(&ok_fc, Some(&b7), &ok_proj, None)),
        (
            "b_proj length",
            x.mlp_gelu(&ok_fc, None, &ok_proj, Some(&b7)),
        ),
    ] {
        match r {
            Err(NnError::Tensor(_)) => {}
            other => return Err(format!("{what}: {:?}", other.map(|v| v.shape())).into()),
        }
    }
    Ok(())
}
