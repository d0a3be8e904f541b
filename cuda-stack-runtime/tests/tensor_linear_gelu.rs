//! `Tensor::linear_gelu` and `Tensor::matmul_dgelu` against the CPU (f64, GELU's tanh form), for
//! bf16, f16 and f32 on both matmul backends, at odd row counts, rank-3 inputs, and hidden widths
//! that take the fused path (multiples of 8) and that do not (36); that bf16/f16 on cuBLAS really
//! take cuBLASLt's GELU epilogues and f32 does not (seen through the handle's heuristic count);
//! and the shape errors.
//!
//! Tolerances, × the element's scale (Σ|a·b| + |bias|; for the backward Σ|dY·W| times
//! |gelu'(pre)|, plus 2e-3·Σ|dY·W| for the derivative's own error): f32 1e-5, f16/bf16 1e-2,
//! plus 1e-3 for GELU (the epilogue's fast tanh). The bias gradient: the sum of its column's allowances plus the type's rounding of
//! the sum. Inputs are fresh random numbers each run (`GELU_TEST_SEED` replays one).

use cuda_stack_blas::Blas;
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{
    with_matmul_backend, DType, MatmulBackend, Tensor, TensorElement,
};
use cuda_stack_runtime::GradElement;
use cuda_tests::{ensure, gpu, gpu_cublas, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Rng(u64, u64);

impl Rng {
    fn fresh() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
        let seed = std::env::var("GELU_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(t);
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, seed)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        2.0 * u - 1.0
    }
    fn tensor<T: TensorElement>(
        &mut self,
        shape: &[usize],
        scale: f64,
    ) -> Res<(Tensor<T>, Vec<f64>)> {
        let n: usize = shape.iter().product();
        let v: Vec<T> = (0..n).map(|_| T::from_f64(scale * self.unit())).collect();
        let host = v.iter().map(|x| x.to_f64()).collect();
        Ok((Tensor::from_vec(v, shape)?, host))
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

fn gelu_grad(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let t = (c * (x + 0.044715 * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)
}

fn type_tol<T: TensorElement>() -> f64 {
    match T::DTYPE {
        DType::F32 => 1e-5,
        DType::F64 => 1e-12,
        _ => 1e-2,
    }
}

fn host<T: TensorElement>(t: &Tensor<T>) -> Res<Vec<f64>> {
    Ok(t.to_vec()?.into_iter().map(T::to_f64).collect())
}

fn within(what: &str, seed: u64, got: &[f64], want: &[f64], allowed: &[f64]) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} elements, expected {}",
        got.len(),
        want.len()
    );
    for i in 0..got.len() {
        let err = (got[i] - want[i]).abs();
        ensure!(
            err <= allowed[i],
            "{what}: element {i} is {}, expected {} (error {err:.3e}, allowed {:.3e}; \
             GELU_TEST_SEED={seed} replays it)",
            got[i],
            want[i],
            allowed[i]
        );
    }
    Ok(())
}

/// One forward and one backward at `lead` (the leading dimensions), `in_f`, `hidden`, `out_f`.
fn case<T: GradElement>(
    rng: &mut Rng,
    lead: &[usize],
    in_f: usize,
    hidden: usize,
    out_f: usize,
) -> TestResult {
    let rows: usize = lead.iter().product();
    let what = format!(
        "{:?} {lead:?} x [{hidden}, {in_f}] -> [{out_f}, {hidden}]",
        T::DTYPE
    );
    let tol = type_tol::<T>() + 1e-3;
    let seed = rng.1;
    // Forward: x [lead, in], W_fc [hidden, in], b [hidden].
    let mut x_shape = lead.to_vec();
    x_shape.push(in_f);
    let (x, xh) = rng.tensor::<T>(&x_shape, 1.0)?;
    let (w, wh) = rng.tensor::<T>(&[hidden, in_f], 0.5)?;
    let (b, bh) = rng.tensor::<T>(&[hidden], 1.0)?;
    let (y, pre) = x.linear_gelu(&w, Some(&b))?;
    let mut h_shape = lead.to_vec();
    h_shape.push(hidden);
    ensure!(
        y.shape() == h_shape && pre.shape() == h_shape,
        "{what}: shapes {:?} and {:?}",
        y.shape(),
        pre.shape()
    );
    let (mut want_pre, mut want_y, mut scale) = (
        vec![0.0; rows * hidden],
        vec![0.0; rows * hidden],
        vec![0.0; rows * hidden],
    );
    for r in 0..rows {
        for j in 0..hidden {
            let (mut s, mut a) = (bh[j], bh[j].abs());
            for p in 0..in_f {
                let v = xh[r * in_f + p] * wh[j * in_f + p];
                s += v;
                a += v.abs();
            }
            want_pre[r * hidden + j] = s;
            want_y[r * hidden + j] = gelu(s);
            scale[r * hidden + j] = a;
        }
    }
    let allowed: Vec<f64> = scale.iter().map(|s| type_tol::<T>() * s).collect();
    within(
        &format!("{what}: pre"),
        seed,
        &host(&pre)?,
        &want_pre,
        &allowed,
    )?;
    let allowed: Vec<f64> = scale.iter().map(|s| tol * s).collect();
    within(
        &format!("{what}: gelu"),
        seed,
        &host(&y)?,
        &want_y,
        &allowed,
    )?;

    // Backward through W_proj [out, hidden]: dY [lead, out].
    let mut g_shape = lead.to_vec();
    g_shape.push(out_f);
    let (g, gh) = rng.tensor::<T>(&g_shape, 1.0)?;
    let (wp, wph) = rng.tensor::<T>(&[out_f, hidden], 0.5)?;
    let preh = host(&pre)?;
    for with_db in [true, false] {
        let (dpre, db) = g.matmul_dgelu(&wp, &pre, with_db)?;
        ensure!(
            dpre.shape() == h_shape,
            "{what}: d(pre) shape {:?}",
            dpre.shape()
        );
        let (mut want, mut allowed) = (vec![0.0; rows * hidden], vec![0.0; rows * hidden]);
        let (mut col, mut col_allowed) = (vec![0.0; hidden], vec![0.0; hidden]);
        for r in 0..rows {
            for j in 0..hidden {
                let (mut s, mut a) = (0.0, 0.0);
                for o in 0..out_f {
                    let v = gh[r * out_f + o] * wph[o * hidden + j];
                    s += v;
                    a += v.abs();
                }
                let d = gelu_grad(preh[r * hidden + j]);
                want[r * hidden + j] = s * d;
                // The type's rounding of the product and of the result, and the derivative's
                // own error (the epilogue's fast tanh: about 1e-3 absolute) times |product|.
                let e = tol * a * d.abs() + 2e-3 * a;
                allowed[r * hidden + j] = e;
                col[j] += s * d;
                col_allowed[j] += e;
            }
        }
        within(
            &format!("{what}: d(pre)"),
            seed,
            &host(&dpre)?,
            &want,
            &allowed,
        )?;
        match (with_db, db) {
            (true, Some(db)) => {
                ensure!(db.shape() == [hidden], "{what}: db shape {:?}", db.shape());
                let allowed: Vec<f64> = col_allowed
                    .iter()
                    .zip(&col)
                    .map(|(a, c)| a + type_tol::<T>() * c.abs())
                    .collect();
                within(&format!("{what}: db"), seed, &host(&db)?, &col, &allowed)?;
            }
            (false, None) => {}
            (w, got) => return Err(format!("{what}: asked db {w}, got {}", got.is_some()).into()),
        }
    }
    Ok(())
}

fn shapes<T: GradElement>(backend: MatmulBackend) -> TestResult {
    let mut rng = Rng::fresh();
    with_matmul_backend(backend, || -> TestResult {
        for (lead, in_f, hidden, out_f) in [
            (vec![37], 64, 256, 64),
            (vec![5], 24, 40, 24),
            (vec![3, 13], 64, 128, 32),
            (vec![1], 8, 8, 8),
            // Not a multiple of 8: the unfused ops on every backend.
            (vec![37], 64, 36, 24),
            (vec![4, 7], 17, 20, 9),
        ] {
            case::<T>(&mut rng, &lead, in_f, hidden, out_f)?;
        }
        Ok(())
    })
}

/// bf16 and f16 on cuBLAS ask cuBLASLt's heuristic for the GELU epilogues (a fresh problem, so
/// the count rises: the epilogue was tried; the `*_on_cublas` cases check its values, and
/// `cuda-stack-blas`'s `matmul_gelu_aux` tests that such shapes have an algorithm); f32 takes
/// the unfused ops, whose `matmul` (no bias) is `cublasGemmEx`
/// with no heuristic. Without a bias the forward is `GELU_AUX`, so even `linear`'s bias
/// epilogue cannot be what asked.
fn the_fused_path_is_taken_for_16_bit_types_only() -> TestResult {
    let ctx = cuda_tests::context()?;
    let blas = Blas::get(&ctx)?;
    let mut rng = Rng::fresh();
    with_matmul_backend(MatmulBackend::Cublas, || -> TestResult {
        // A shape no other test here uses: its problems are new to the handle's cache.
        let (rows, in_f, hidden, out_f) = (19, 40, 328, 56);
        fn asks<T: GradElement>(
            blas: &Blas,
            rng: &mut Rng,
            dims: (usize, usize, usize, usize),
        ) -> Res<(u64, u64)> {
            let (rows, in_f, hidden, out_f) = dims;
            let (x, _) = rng.tensor::<T>(&[rows, in_f], 1.0)?;
            let (w, _) = rng.tensor::<T>(&[hidden, in_f], 0.5)?;
            let (g, _) = rng.tensor::<T>(&[rows, out_f], 1.0)?;
            let (wp, _) = rng.tensor::<T>(&[out_f, hidden], 0.5)?;
            let q0 = blas.heuristic_queries();
            let (_, pre) = x.linear_gelu(&w, None)?;
            let q1 = blas.heuristic_queries();
            g.matmul_dgelu(&wp, &pre, true)?;
            let q2 = blas.heuristic_queries();
            Ok((q1 - q0, q2 - q1))
        }
        let dims = (rows, in_f, hidden, out_f);
        let (f, b) = asks::<bf16>(&blas, &mut rng, dims)?;
        ensure!(f >= 1 && b >= 1, "bf16 asked the heuristic {f} (forward) and {b} (backward) times: the epilogues were not used");
        let (f, b) = asks::<f16>(&blas, &mut rng, dims)?;
        ensure!(f >= 1 && b >= 1, "f16 asked the heuristic {f} (forward) and {b} (backward) times: the epilogues were not used");
        // f32 takes the unfused ops: the same bits as those ops (heuristic counts cannot tell,
        // the unfused matmuls ask cuBLASLt too, and how often depends on the handle's cache).
        let (x, _) = rng.tensor::<f32>(&[rows, in_f], 1.0)?;
        let (w, _) = rng.tensor::<f32>(&[hidden, in_f], 0.5)?;
        let (g, _) = rng.tensor::<f32>(&[rows, out_f], 1.0)?;
        let (wp, _) = rng.tensor::<f32>(&[out_f, hidden], 0.5)?;
        let (y, pre) = x.linear_gelu(&w, None)?;
        let pre_u = x.linear(&w, None)?;
        ensure!(
            pre.to_vec()? == pre_u.to_vec()?,
            "f32 pre differs from linear's"
        );
        ensure!(
            y.to_vec()? == pre_u.gelu()?.to_vec()?,
            "f32 out differs from gelu(linear)"
        );
        let (dpre, db) = g.matmul_dgelu(&wp, &pre, true)?;
        let dpre_u = pre.gelu_backward(&g.matmul(&wp)?)?;
        ensure!(
            dpre.to_vec()? == dpre_u.to_vec()?,
            "f32 d(pre) differs from the unfused ops'"
        );
        let db = db.ok_or("f32: no bias gradient")?;
        ensure!(
            db.to_vec()? == dpre_u.sum(0)?.to_vec()?,
            "f32 bias gradient differs from sum(0)"
        );
        Ok(())
    })
}

fn shape_errors() -> TestResult {
    let x = Tensor::<f32>::zeros(&[4, 5])?;
    let w = Tensor::<f32>::zeros(&[8, 6])?;
    let b = Tensor::<f32>::zeros(&[7])?;
    ensure!(x.linear_gelu(&w, None).is_err(), "in_features 5 vs 6");
    let w = Tensor::<f32>::zeros(&[8, 5])?;
    ensure!(x.linear_gelu(&w, Some(&b)).is_err(), "bias 7 vs 8");
    let g = Tensor::<f32>::zeros(&[4, 3])?;
    let wp = Tensor::<f32>::zeros(&[3, 8])?;
    let pre = Tensor::<f32>::zeros(&[4, 8])?;
    ensure!(g.matmul_dgelu(&wp, &pre, true).is_ok(), "the valid call");
    let bad_pre = Tensor::<f32>::zeros(&[5, 8])?;
    ensure!(
        g.matmul_dgelu(&wp, &bad_pre, true).is_err(),
        "pre rows 5 vs 4"
    );
    let bad_pre = Tensor::<f32>::zeros(&[4, 9])?;
    ensure!(
        g.matmul_dgelu(&wp, &bad_pre, true).is_err(),
        "pre hidden 9 vs 8"
    );
    let bad_w = Tensor::<f32>::zeros(&[2, 8])?;
    ensure!(g.matmul_dgelu(&bad_w, &pre, true).is_err(), "out 2 vs 3");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu_cublas("bf16_on_cublas", || shapes::<bf16>(MatmulBackend::Cublas)),
        gpu_cublas("f16_on_cublas", || shapes::<f16>(MatmulBackend::Cublas)),
        gpu_cublas("f32_on_cublas", || shapes::<f32>(MatmulBackend::Cublas)),
        gpu("bf16_on_kernels", || shapes::<bf16>(MatmulBackend::Kernels)),
        gpu("f32_on_kernels", || shapes::<f32>(MatmulBackend::Kernels)),
        gpu_cublas(
            "the_fused_path_is_taken_for_16_bit_types_only",
            the_fused_path_is_taken_for_16_bit_types_only,
        ),
        gpu("shape_errors", shape_errors),
    ]);
}
