//! `Var::linear_cross_entropy` (a classifier and its mean cross-entropy as one op, the logits
//! owned by its backward and overwritten there by their gradient) against the chain it
//! replaces, `linear` → `reshape` → `fused_cross_entropy`:
//! - the loss and every gradient **bit for bit**, in f32, f64 and bf16, on both matmul
//!   backends, with and without a bias, rank-2 and rank-3 inputs of odd sizes, an upstream
//!   gradient other than 1, and inputs that do not require grad (the same `Tensor` ops run in
//!   the same order; the in-place classifier kernel is the out-of-place one's template with
//!   `dlogits = logits`);
//! - gradcheck in f64;
//! - the backward's peak device memory: the chain's holds a second `[N, V]` buffer (the
//!   logits' gradient beside the logits), this op's does not (measured with the caching
//!   allocator's peak statistics);
//! - a second backward through a retained graph is `NnError::SavedTensorConsumed`, and adds
//!   nothing to the gradients;
//! - bad shapes are typed errors, returned before anything is allocated or launched.
//!
//! The tests run one at a time: the allocator's statistics are per device. The memory tests
//! need cuBLAS (see `peak`).

use cuda_stack_nn::{
    class_targets, gradcheck, no_grad, GradElement, GradcheckOptions, NnError, Var,
};
use cuda_stack_runtime::caching::size_class;
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_stack_runtime::tensor::{with_matmul_backend, MatmulBackend};
use cuda_stack_runtime::{
    max_memory_allocated, memory_allocated, reset_peak_stats, Tensor, TensorElement, TensorError,
};
use cuda_tests::{ensure, gpu, gpu_cublas, TestResult};
use std::sync::{Mutex, MutexGuard};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn main() {
    cuda_tests::run(vec![
        gpu("f32_is_the_chain_bit_for_bit", exact::<f32>),
        gpu("f64_is_the_chain_bit_for_bit", exact::<f64>),
        gpu("bf16_is_the_chain_bit_for_bit", exact::<bf16>),
        gpu("gradcheck_f64", grads),
        gpu_cublas("backward_peak_is_one_logits_buffer_lower_f32", || {
            with_matmul_backend(MatmulBackend::Cublas, peak::<f32>)
        }),
        gpu_cublas("backward_peak_is_one_logits_buffer_lower_bf16", || {
            with_matmul_backend(MatmulBackend::Cublas, peak::<bf16>)
        }),
        gpu("second_backward_is_a_typed_error", second_backward),
        gpu("bad_inputs_are_typed_errors_and_allocate_nothing", errors),
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

/// The elements' bit patterns as f64 (exact for every element type here).
fn bits<T: TensorElement>(t: &Tensor<T>) -> Res<Vec<u64>> {
    Ok(t.to_vec()?
        .into_iter()
        .map(|v| T::to_f64(v).to_bits())
        .collect())
}

/// Class indices for `lead` rows of `classes` classes (every class index reachable, repeats).
fn targets(lead: &[usize], classes: usize) -> Res<Tensor<i32>> {
    let n: usize = lead.iter().product();
    let labels: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % classes).collect();
    Ok(class_targets(&labels, classes)?.reshape(lead)?)
}

/// A classifier's input `[lead…, in]`, weight `[classes, in]` and bias `[classes]`.
struct Classifier<T: GradElement> {
    x: Var<T>,
    w: Var<T>,
    b: Var<T>,
    t: Tensor<i32>,
}

impl<T: GradElement> Classifier<T> {
    fn new(lead: &[usize], in_f: usize, classes: usize, x_grad: bool) -> Res<Classifier<T>> {
        let mut xs = lead.to_vec();
        xs.push(in_f);
        let x = values::<T>(&xs, 1, 4.0)?;
        Ok(Classifier {
            x: if x_grad {
                Var::parameter(x)
            } else {
                Var::constant(x)
            },
            w: Var::parameter(values::<T>(&[classes, in_f], 2, 1.0)?),
            b: Var::parameter(values::<T>(&[classes], 3, 1.0)?),
            t: targets(lead, classes)?,
        })
    }

    /// The loss by `linear_cross_entropy` (`fused`) or by the chain, times `scale`.
    fn loss(&self, fused: bool, bias: bool, scale: f64) -> Res<Var<T>> {
        let b = if bias { Some(&self.b) } else { None };
        let loss = if fused {
            self.x.linear_cross_entropy(&self.w, b, &self.t)?
        } else {
            let classes = self.w.shape()[0];
            let rows = self.t.numel();
            self.x
                .linear(&self.w, b)?
                .reshape(&[rows, classes])?
                .fused_cross_entropy(&self.t.reshape(&[rows])?)?
        };
        Ok(if scale == 1.0 {
            loss
        } else {
            loss.scale(scale)?
        })
    }

    /// The loss's bits and the gradients' (empty where an input needs none) after a backward.
    fn run(&self, fused: bool, bias: bool, scale: f64) -> Res<Vec<Vec<u64>>> {
        for v in [&self.x, &self.w, &self.b] {
            if v.requires_grad() {
                v.zero_grad();
            }
        }
        let loss = self.loss(fused, bias, scale)?;
        loss.backward()?;
        let mut out = vec![bits(&loss.value())?];
        for v in [&self.x, &self.w, &self.b] {
            let g = if v.requires_grad() { v.grad()? } else { None };
            out.push(match g {
                Some(g) => bits(&g)?,
                None => Vec::new(),
            });
        }
        Ok(out)
    }
}

const NAMES: [&str; 4] = ["loss", "dx", "dW", "db"];

/// One case of [`exact`]: the input's leading shape, in_features, classes, whether x requires
/// grad, whether there is a bias, and the upstream gradient's scale.
type Case = (&'static [usize], usize, usize, bool, bool, f64);

/// Odd sizes (37 rows, 101 classes), a rank-3 input with a scaled upstream gradient, an input
/// that does not require grad, a single row.
const CASES: [Case; 5] = [
    (&[37], 24, 101, true, true, 1.0),
    (&[37], 24, 101, true, false, 1.0),
    (&[3, 5], 24, 101, true, true, -2.5),
    (&[64], 32, 512, false, true, 1.0),
    (&[1], 8, 3, true, false, 0.5),
];

fn exact<T: GradElement>() -> TestResult {
    let _g = serial();
    let what = std::any::type_name::<T>();
    for backend in [MatmulBackend::Auto, MatmulBackend::Kernels] {
        with_matmul_backend(backend, || -> TestResult {
            for (lead, in_f, classes, x_grad, bias, scale) in CASES {
                let c = Classifier::<T>::new(lead, in_f, classes, x_grad)?;
                let (a, b) = (c.run(true, bias, scale)?, c.run(false, bias, scale)?);
                for (i, name) in NAMES.iter().enumerate() {
                    ensure!(
                        a[i] == b[i],
                        "{what} {lead:?} in {in_f} classes {classes} bias {bias} scale {scale} \
                         on {backend:?}: {name} of linear_cross_entropy differs from the chain's \
                         (they must be the same ops)"
                    );
                }
                ensure!(!a[2].is_empty(), "{what}: no weight gradient");
                ensure!(
                    a[1].is_empty() != x_grad,
                    "{what}: dx only where x requires grad"
                );
                ensure!(a[3].is_empty() != bias, "{what}: db only with a bias");
            }
            Ok(())
        })?;
    }
    // The op's name on the graph; under no_grad a constant of the same value.
    let c = Classifier::<T>::new(&[5], 4, 9, true)?;
    let y = c.loss(true, true, 1.0)?;
    ensure!(y.op() == Some("linear_cross_entropy"), "op {:?}", y.op());
    let y0 = no_grad(|| c.x.linear_cross_entropy(&c.w, Some(&c.b), &c.t))?;
    ensure!(
        y0.op().is_none() && !y0.requires_grad(),
        "no_grad: a constant"
    );
    ensure!(
        bits(&y0.value())? == bits(&y.value())?,
        "no_grad: the same value"
    );
    Ok(())
}

fn grads() -> TestResult {
    let _g = serial();
    let lead3 = [2usize, 3];
    let t2 = targets(&[4], 7)?;
    let t3 = targets(&lead3, 7)?;
    let inputs2 = [
        values::<f64>(&[4, 3], 4, 2.0)?,
        values::<f64>(&[7, 3], 5, 2.0)?,
        values::<f64>(&[7], 6, 1.0)?,
    ];
    let inputs3 = [
        values::<f64>(&[2, 3, 3], 7, 2.0)?,
        inputs2[1].clone(),
        inputs2[2].clone(),
    ];
    for with_bias in [true, false] {
        for (inputs, t, scale) in [(&inputs2, &t2, 1.0), (&inputs3, &t3, -2.5)] {
            let report = gradcheck(
                |v| {
                    let b = if with_bias { Some(&v[2]) } else { None };
                    v[0].linear_cross_entropy(&v[1], b, t)?.scale(scale)
                },
                inputs,
                GradcheckOptions::default(),
            )?;
            ensure!(
                report.passed,
                "bias {with_bias}, x {:?}: {report}",
                inputs[0].shape()
            );
        }
    }
    Ok(())
}

/// Allocated bytes a request of `bytes` takes (the allocator's size class).
fn class(bytes: usize) -> Res<usize> {
    Ok(size_class(bytes).ok_or("size class overflow")?.0)
}

/// The peak allocated bytes of the backward above what was allocated before it, for the op
/// (`fused`) or the chain.
fn backward_peak<T: GradElement>(c: &Classifier<T>, fused: bool) -> Res<usize> {
    for v in [&c.x, &c.w, &c.b] {
        v.zero_grad();
    }
    let loss = c.loss(fused, true, 1.0)?;
    reset_peak_stats()?;
    let before = memory_allocated()?;
    loss.backward()?;
    Ok(max_memory_allocated()? - before)
}

/// The chain's backward holds the logits' gradient beside the logits (the logits are freed only
/// when `fused_cross_entropy`'s backward returns); this op's writes it over them, so its peak
/// above the forward's is below one `[N, V]` buffer (the gradients of x, W and b, `[N, C]`,
/// `[V, C]` and `[V]`, are small here), and the chain's is above it by at least one `[N, V]`
/// buffer less those gradients (which it allocates after freeing the logits). On cuBLAS: the
/// kernels backend's bf16 products take f32 copies of their operands (an `[N, V]` one too).
fn peak<T: GradElement>() -> TestResult {
    let _g = serial();
    let (n, in_f, v) = (512usize, 16usize, 4099usize);
    let s = std::mem::size_of::<T>();
    let c = Classifier::<T>::new(&[n], in_f, v, true)?;
    // Warm-up: workspaces and kernels loaded outside the measurement.
    backward_peak(&c, true)?;
    backward_peak(&c, false)?;
    let fused = backward_peak(&c, true)?;
    let chain = backward_peak(&c, false)?;
    let logits = n * v * s;
    let grads = class(n * in_f * s)? + class(v * in_f * s)? + class(v * s)?;
    let what = std::any::type_name::<T>();
    let report = format!(
        "{what}: backward peak above the forward: linear_cross_entropy {fused} B, the chain \
         {chain} B; logits {logits} B, gradients {grads} B"
    );
    ensure!(
        chain >= logits,
        "{report}: the chain should hold two [N, V]"
    );
    ensure!(
        fused < logits,
        "{report}: linear_cross_entropy allocated an [N, V] buffer (its logits were not \
         exclusive, so the in-place classifier copied them?)"
    );
    ensure!(
        chain - fused.min(chain) >= logits - grads,
        "{report}: the saving is less than one [N, V] buffer less the gradients"
    );
    // The logits do not outlive the backward (only the gradients stay: `grads` bytes, if the
    // column sum's result is a storage of its own).
    for var in [&c.x, &c.w, &c.b] {
        var.zero_grad();
    }
    let idle = memory_allocated()?;
    let loss = c.loss(true, true, 1.0)?;
    loss.backward()?;
    drop(loss);
    let after = memory_allocated()?;
    ensure!(
        after - idle.min(after) < logits,
        "{report}: {} B stay allocated after the backward (the gradients take {grads} B)",
        after - idle.min(after)
    );
    Ok(())
}

fn second_backward() -> TestResult {
    let _g = serial();
    let c = Classifier::<f32>::new(&[6], 5, 11, true)?;
    let loss = c.loss(true, true, 1.0)?;
    loss.backward_retain_graph()?;
    let first: Vec<Vec<u64>> = [&c.x, &c.w, &c.b]
        .iter()
        .map(|v| bits(&v.grad()?.ok_or("no gradient")?))
        .collect::<Res<_>>()?;
    match loss.backward() {
        Err(NnError::SavedTensorConsumed {
            op: "linear_cross_entropy",
            ..
        }) => {}
        other => return Err(format!("second backward: {other:?}").into()),
    }
    for (i, v) in [&c.x, &c.w, &c.b].iter().enumerate() {
        ensure!(
            bits(&v.grad()?.ok_or("no gradient")?)? == first[i],
            "{}: the failed backward changed the gradient",
            NAMES[i + 1]
        );
    }
    // The message says what to do instead.
    if let Err(e) = loss.backward_retain_graph() {
        let m = e.to_string();
        ensure!(m.contains("fused_cross_entropy"), "message: {m}");
    } else {
        return Err("a third backward succeeded".into());
    }
    Ok(())
}

fn errors() -> TestResult {
    let _g = serial();
    let x = Var::parameter(values::<f32>(&[37, 24], 1, 2.0)?);
    let w = Var::parameter(values::<f32>(&[101, 24], 2, 1.0)?);
    let b = Var::parameter(values::<f32>(&[101], 3, 1.0)?);
    let t = targets(&[37], 101)?;
    let (t36, t37x1) = (
        targets(&[36], 101)?,
        targets(&[37], 101)?.reshape(&[37, 1])?,
    );
    let w_in = Var::parameter(values::<f32>(&[101, 23], 4, 1.0)?);
    let w_rank1 = Var::parameter(values::<f32>(&[24], 5, 1.0)?);
    let b_len = Var::parameter(values::<f32>(&[100], 6, 1.0)?);
    let x0 = Var::parameter(Tensor::from_vec(vec![1.0f32], &[])?);
    let t0 = Tensor::from_vec(vec![0i32], &[])?;
    let before = memory_allocated()?;
    let cases = [
        (
            "targets of 36 rows",
            x.linear_cross_entropy(&w, Some(&b), &t36),
        ),
        (
            "targets [37, 1]",
            x.linear_cross_entropy(&w, Some(&b), &t37x1),
        ),
        ("in_features", x.linear_cross_entropy(&w_in, Some(&b), &t)),
        ("rank-1 weight", x.linear_cross_entropy(&w_rank1, None, &t)),
        ("bias length", x.linear_cross_entropy(&w, Some(&b_len), &t)),
        ("0-d input", x0.linear_cross_entropy(&w, None, &t0)),
    ];
    let after = memory_allocated()?;
    for (what, r) in cases {
        match r {
            Err(NnError::Tensor(TensorError::ShapeMismatch { .. })) => {}
            other => return Err(format!("{what}: {other:?}").into()),
        }
    }
    ensure!(
        after == before,
        "the refused calls allocated {} B",
        after as i64 - before as i64
    );
    Ok(())
}
