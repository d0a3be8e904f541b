//! `Tensor::matmul` on both backends ([`MatmulBackend::Cublas`] and [`MatmulBackend::Kernels`])
//! against the CPU, for f32, f64, f16 and bf16 (and i32 on the kernels): 2-D with odd shapes,
//! transposed and row-strided views, batched 3-D with broadcasting; that the switch really
//! selects the backend (seen through the driver/library call trace); TF32 when allowed.
//!
//! Tolerances, × Σ_k |a_ik·b_kj|: f32 `1e-5`, TF32 `2e-3`, f64 `1e-12`, f16/bf16 `1e-2` (f32
//! accumulation, one rounding of the result). Inputs are fresh random numbers each run (the
//! seed is printed on failure; `MATMUL_TEST_SEED` replays it).

use cuda_stack_runtime::cuda_stack_driver::cuda_stack_sys;
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{
    with_allow_tf32, with_matmul_backend, DType, MatmulBackend, Tensor, TensorElement, TensorError,
};
use cuda_tests::{ensure, gpu, gpu_cublas, TestResult};
use std::sync::{Arc, Mutex};

struct Rng(u64, u64);

impl Rng {
    fn fresh() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
        let seed = std::env::var("MATMUL_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(t);
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, seed)
    }
    /// Uniform in [-2, 2), never exactly 0.
    fn value(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        let v = 4.0 * u - 2.0;
        if v == 0.0 {
            0.5
        } else {
            v
        }
    }
    fn values<T: TensorElement>(&mut self, n: usize) -> Vec<T> {
        (0..n)
            .map(|_| {
                if T::DTYPE == DType::I32 {
                    T::from_f64((self.value() * 50.0).round())
                } else {
                    T::from_f64(self.value())
                }
            })
            .collect()
    }
}

fn tol<T: TensorElement>(tf32: bool) -> f64 {
    match T::DTYPE {
        DType::F64 => 1e-12,
        DType::F16 | DType::BF16 => 1e-2,
        DType::F32 if tf32 => 2e-3,
        _ => 1e-5,
    }
}

/// Checks `got` (`[m, n]`) = `a · b` for row-major host `a` `[m, k]` and `b` `[k, n]`.
#[allow(clippy::too_many_arguments)]
fn check<T: TensorElement>(
    what: &str,
    seed: u64,
    got: &Tensor<T>,
    a: &[T],
    b: &[T],
    (m, n, k): (usize, usize, usize),
    tf32: bool,
) -> TestResult {
    ensure!(got.shape() == [m, n], "{what}: shape {:?}", got.shape());
    let g = got.to_vec()?;
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut mag) = (0.0, 0.0);
            for p in 0..k {
                let x = a[i * k + p].to_f64() * b[p * n + j].to_f64();
                sum += x;
                mag += x.abs();
            }
            let v = g[i * n + j].to_f64();
            let ok = if T::DTYPE == DType::I32 {
                // Wrapping i32 arithmetic; the values here stay far from overflow.
                v == sum
            } else {
                (v - sum).abs() <= tol::<T>(tf32) * mag
            };
            ensure!(
                ok,
                "{what} (seed {seed}): [{i}, {j}] is {v}, expected {sum} (Σ|a·b| = {mag})"
            );
        }
    }
    Ok(())
}

/// Transposed storage of a row-major `[r, c]` array: `[c, r]`.
fn transposed<T: Copy>(x: &[T], r: usize, c: usize) -> Vec<T> {
    (0..c * r).map(|i| x[(i % r) * c + i / r]).collect()
}

const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (7, 13, 5),
    (31, 33, 17),
    (64, 96, 128),
    (129, 65, 131),
    (3, 0, 4),
    (5, 6, 0),
];

fn two_d<T: TensorElement>(backend: MatmulBackend) -> TestResult {
    with_matmul_backend(backend, || {
        let mut rng = Rng::fresh();
        for &(m, n, k) in SHAPES {
            let what = |s: &str| format!("{backend:?} {} {s} [{m},{k}]·[{k},{n}]", T::DTYPE);
            let (a, b) = (rng.values::<T>(m * k), rng.values::<T>(k * n));
            let (ta, tb) = (
                Tensor::from_slice(&a, &[m, k])?,
                Tensor::from_slice(&b, &[k, n])?,
            );
            check(
                &what("dense"),
                rng.1,
                &ta.matmul(&tb)?,
                &a,
                &b,
                (m, n, k),
                false,
            )?;
            // Operands stored transposed, used through .t() views.
            let at = Tensor::from_slice(&transposed(&a, m, k), &[k, m])?.t()?;
            let bt = Tensor::from_slice(&transposed(&b, k, n), &[n, k])?.t()?;
            check(
                &what("Aᵀ·Bᵀ views"),
                rng.1,
                &at.matmul(&bt)?,
                &a,
                &b,
                (m, n, k),
                false,
            )?;
            check(
                &what("Aᵀ view·B"),
                rng.1,
                &at.matmul(&tb)?,
                &a,
                &b,
                (m, n, k),
                false,
            )?;
            // A as columns 2..2+k of a wider matrix (row stride k + 5).
            let mut wide = rng.values::<T>(m * (k + 5));
            for i in 0..m {
                wide[i * (k + 5) + 2..i * (k + 5) + 2 + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let na = Tensor::from_slice(&wide, &[m, k + 5])?.narrow(1, 2, k)?;
            check(
                &what("A[:, 2:2+k]·B"),
                rng.1,
                &na.matmul(&tb)?,
                &a,
                &b,
                (m, n, k),
                false,
            )?;
        }
        Ok(())
    })
}

fn batched<T: TensorElement>(backend: MatmulBackend) -> TestResult {
    with_matmul_backend(backend, || {
        let mut rng = Rng::fresh();
        let (bs, m, n, k) = (4usize, 19usize, 23usize, 29usize);
        let a = rng.values::<T>(bs * m * k);
        let b = rng.values::<T>(bs * k * n);
        let ta = Tensor::from_slice(&a, &[bs, m, k])?;
        let tb = Tensor::from_slice(&b, &[bs, k, n])?;
        let a0 = Tensor::from_slice(&a[..m * k], &[m, k])?;
        let b0 = Tensor::from_slice(&b[..k * n], &[k, n])?;
        // (name, result, a batched?, b batched?)
        let cases = [
            ("[b,m,k]·[b,k,n]", ta.matmul(&tb)?, true, true),
            ("[b,m,k]·[k,n]", ta.matmul(&b0)?, true, false),
            (
                "[1,m,k]·[b,k,n]",
                a0.unsqueeze(0)?.matmul(&tb)?,
                false,
                true,
            ),
            (
                "[b,m,k]ᵀ-view·[b,k,n]",
                {
                    let at: Vec<T> = (0..bs)
                        .flat_map(|i| transposed(&a[i * m * k..(i + 1) * m * k], m, k))
                        .collect();
                    Tensor::from_slice(&at, &[bs, k, m])?
                        .transpose(1, 2)?
                        .matmul(&tb)?
                },
                true,
                true,
            ),
        ];
        for (what, c, ab, bb) in cases {
            ensure!(c.shape() == [bs, m, n], "{what}: shape {:?}", c.shape());
            for i in 0..bs {
                let ai = if ab {
                    &a[i * m * k..(i + 1) * m * k]
                } else {
                    &a[..m * k]
                };
                let bi = if bb {
                    &b[i * k * n..(i + 1) * k * n]
                } else {
                    &b[..k * n]
                };
                let what = format!("{backend:?} {} {what} batch {i}", T::DTYPE);
                check(
                    &what,
                    rng.1,
                    &c.select(0, i)?.contiguous()?,
                    ai,
                    bi,
                    (m, n, k),
                    false,
                )?;
            }
        }
        Ok(())
    })
}

fn every_float_dtype(backend: MatmulBackend) -> TestResult {
    two_d::<f32>(backend)?;
    two_d::<f64>(backend)?;
    two_d::<f16>(backend)?;
    two_d::<bf16>(backend)?;
    batched::<f32>(backend)?;
    batched::<f64>(backend)?;
    batched::<f16>(backend)?;
    batched::<bf16>(backend)
}

fn on_cublas() -> TestResult {
    every_float_dtype(MatmulBackend::Cublas)
}

fn on_kernels() -> TestResult {
    every_float_dtype(MatmulBackend::Kernels)?;
    two_d::<i32>(MatmulBackend::Kernels)?;
    batched::<i32>(MatmulBackend::Kernels)
}

fn tf32_when_allowed() -> TestResult {
    with_matmul_backend(MatmulBackend::Cublas, || {
        with_allow_tf32(true, || {
            let mut rng = Rng::fresh();
            let (m, n, k) = (96, 80, 256);
            let (a, b) = (rng.values::<f32>(m * k), rng.values::<f32>(k * n));
            let c = Tensor::from_slice(&a, &[m, k])?.matmul(&Tensor::from_slice(&b, &[k, n])?)?;
            check("TF32", rng.1, &c, &a, &b, (m, n, k), true)
        })
    })
}

fn i32_is_refused_on_cublas() -> TestResult {
    let x = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2])?;
    with_matmul_backend(MatmulBackend::Cublas, || -> TestResult {
        match x.matmul(&x) {
            Err(
                e @ TensorError::UnsupportedDType {
                    dtype: DType::I32, ..
                },
            ) => {
                ensure!(e.to_string().contains("cuBLAS"), "{e}");
                Ok(())
            }
            other => Err(format!("i32 on cuBLAS: {other:?}").into()),
        }
    })?;
    // Auto takes the kernels for it.
    let c = with_matmul_backend(MatmulBackend::Auto, || x.matmul(&x))?;
    ensure!(c.to_vec()? == [7, 10, 15, 22], "i32 on Auto");
    Ok(())
}

/// The library calls this thread makes while `f` runs, as `(library, call)`.
fn traced(
    f: impl FnOnce() -> TestResult,
) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let me = std::thread::current().id();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let previous = cuda_stack_sys::trace::set_hook(Some(Arc::new(
        move |e: &cuda_stack_sys::trace::CallEvent| {
            if std::thread::current().id() == me {
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((e.library.to_string(), e.call.to_string()));
            }
        },
    )));
    let r = f();
    cuda_stack_sys::trace::set_hook(previous);
    r?;
    let v = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(v)
}

/// The switch really selects the backend: cuBLAS's GEMM is called on `Cublas` (and on `Auto`
/// where cuBLAS loads), never on `Kernels`, which launches kernels instead — for f32 and f16.
fn the_switch_selects_the_backend() -> TestResult {
    let a32 = Tensor::from_vec((0..64).map(|i| i as f32 / 8.0).collect(), &[8, 8])?;
    let a16 = a32.to_dtype::<f16>()?;
    a32.to_vec()?; // settle creation work before tracing
    let gemm_calls = |calls: &[(String, String)]| {
        calls
            .iter()
            .filter(|(l, c)| l == "cublas" && c.starts_with("cublasGemm"))
            .count()
    };
    // Plain launches and extended ones (cuLaunchKernelEx: clusters, programmatic dependencies).
    let launches = |calls: &[(String, String)]| {
        calls
            .iter()
            .filter(|(_, c)| c == "cuLaunchKernel" || c == "cuLaunchKernelEx")
            .count()
    };
    for backend in [MatmulBackend::Cublas, MatmulBackend::Kernels] {
        let calls = traced(|| {
            with_matmul_backend(backend, || {
                a32.matmul(&a32)?;
                a16.matmul(&a16)?;
                Ok(())
            })
        })?;
        match backend {
            MatmulBackend::Cublas => ensure!(
                gemm_calls(&calls) == 2,
                "Cublas: expected 2 cublasGemm* calls, saw {calls:?}"
            ),
            _ => ensure!(
                gemm_calls(&calls) == 0
                    && calls.iter().all(|(l, _)| l != "cublas")
                    && launches(&calls) >= 2,
                "Kernels: expected kernel launches and no cuBLAS call, saw {calls:?}"
            ),
        }
    }
    let auto = traced(|| {
        with_matmul_backend(MatmulBackend::Auto, || {
            a32.matmul(&a32).map(|_| ()).map_err(Into::into)
        })
    })?;
    ensure!(
        gemm_calls(&auto) == 1,
        "Auto with cuBLAS installed: {auto:?}"
    );
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu_cublas("matmul_on_cublas_every_float_dtype", on_cublas),
        gpu("matmul_on_kernels_every_dtype", on_kernels),
        gpu_cublas("matmul_tf32_when_allowed", tf32_when_allowed),
        gpu_cublas("matmul_i32_is_refused_on_cublas", i32_is_refused_on_cublas),
        gpu_cublas(
            "the_switch_selects_the_backend",
            the_switch_selects_the_backend,
        ),
    ])
}
