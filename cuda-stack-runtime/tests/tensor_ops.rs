//! tensor-lite on the GPU, part 2: every op against a CPU reference, for every dtype it claims,
//! on sizes 0, 1, 31, 32, 33, 1023, 1025 and primes, and on non-contiguous inputs (transposed,
//! sliced, expanded). The tolerance of each op is stated where it is checked:
//!
//! | op | tolerance |
//! |---|---|
//! | `+ - * /`, `scale`, `relu`, `bias_relu` (+ backward), `max` | exact (the kernels' exact CPU twins in `cuda_stack_kernels::reference`) |
//! | `matmul` i32 | exact (wrapping) |
//! | `matmul` f32 / f64 | `1e-5` / `1e-13` × Σ_k \|a_ik·b_kj\| |
//! | `sum`, `mean` (f32, f16, bf16 accumulate in f32) | `1e-5` × Σ\|x\| (+ `1e-6`·\|want\| for mean's scaling) |
//! | `sum`, `mean` f64 | `1e-13` × Σ\|x\| |
//! | `tanh` | 4 ulp of the dtype × \|want\| (+ 1e-30) |
//! | `softmax` | `2e-6` absolute |

mod tensor_common;

use cuda_stack_kernels::ops::BinaryOp;
use cuda_stack_kernels::reference;
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{DType, Tensor, TensorElement, TensorError};
use cuda_tests::{ensure, gpu};
use tensor_common::*;

fn main() {
    let two_gpus = cuda_tests::no_gpu_reason().is_none()
        && cuda_stack_runtime::device_count().unwrap_or(0) >= 2;
    cuda_tests::run(vec![
        gpu("binary_ops_every_dtype_and_size", binary_every_dtype),
        gpu("binary_ops_broadcast", broadcasting),
        gpu(
            "binary_ops_on_non_contiguous_operands",
            non_contiguous_binary,
        ),
        gpu("unary_relu_tanh_scale_every_dtype", unary),
        gpu("matmul_2d_every_dtype", matmul_2d),
        gpu("matmul_strided_and_transposed_operands", matmul_views),
        gpu("matmul_batched", matmul_batched),
        gpu("reductions_over_all_elements", reductions_all),
        gpu("reductions_over_a_dimension", reductions_dim),
        gpu("softmax_along_any_dimension", softmax),
        gpu("bias_relu_forward_and_backward", bias_relu),
        gpu("to_dtype_every_pair_rounds_once", to_dtype),
        gpu("errors_name_op_dtype_and_shapes", errors),
        gpu(
            "optimizer_steps_on_a_part_of_a_flat_buffer",
            optimizer_parts,
        ),
        gpu("device_mismatch_is_an_error", device_mismatch).with_ignored_flag(!two_gpus),
    ]);
}

/// Element type of the kernels (`f32`, `f64`, `i32`, `f16`, `bf16`): both traits.
trait K: TensorElement + cuda_stack_kernels::Element {}
impl<T: TensorElement + cuda_stack_kernels::Element> K for T {}

const OPS: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

fn apply<T: TensorElement>(
    op: BinaryOp,
    a: &Tensor<T>,
    b: &Tensor<T>,
) -> Result<Tensor<T>, TensorError> {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a / b,
    }
}

/// `T`'s dtype tag (through `TensorElement`; `cuda_stack_kernels::Element` has one too).
fn dt<T: TensorElement>() -> DType {
    T::DTYPE
}

/// The unit in the last place of 1.0 for a float dtype.
fn eps(d: DType) -> f64 {
    match d {
        DType::F64 => 2f64.powi(-52),
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 2f64.powi(-23),
    }
}

/// Tolerance factor of sums for a dtype (f32 accumulation except for f64).
fn sum_tol(d: DType) -> f64 {
    if d == DType::F64 {
        1e-13
    } else {
        1e-5
    }
}

fn binary_one<T: K>() -> TestResult {
    for &n in SIZES {
        let (a, b) = (values::<T>(n, 11 + n as u64), values::<T>(n, 12 + n as u64));
        let (ta, tb) = (Tensor::from_slice(&a, &[n])?, Tensor::from_slice(&b, &[n])?);
        for op in OPS {
            let got = apply(op, &ta, &tb)?;
            ensure!(got.shape() == [n], "shape");
            // Tolerance: exact (IEEE, f16/bf16 computed in f32 and rounded once, i32 wraps).
            let want: Vec<T> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| reference::binary_one(op, *x, *y))
                .collect();
            check_exact(
                &format!("{} {op:?} n={n}", dt::<T>()),
                &got.to_vec()?,
                &want,
            )?;
        }
    }
    Ok(())
}

fn binary_every_dtype() -> TestResult {
    binary_one::<f32>()?;
    binary_one::<f64>()?;
    binary_one::<i32>()?;
    binary_one::<f16>()?;
    binary_one::<bf16>()
}

fn broadcast_one<T: K>() -> TestResult {
    // Read in place by the broadcasting kernel: rows, columns, scalars, outer products (with
    // 16-byte packets where rows allow); [2, 3, 4] against [3, 1] by the strided kernel
    // (tensor_broadcast.rs covers that one's cases).
    let cases: [(&[usize], &[usize], &[usize]); 11] = [
        (&[16, 768], &[768], &[16, 768]),
        (&[513, 8], &[513, 1], &[513, 8]),
        (&[1], &[7, 1024], &[7, 1024]),
        (&[3, 1], &[1, 4], &[3, 4]),
        (&[2, 3, 4], &[4], &[2, 3, 4]),
        (&[2, 3, 4], &[3, 1], &[2, 3, 4]),
        (&[5], &[], &[5]),
        (&[], &[2, 2], &[2, 2]),
        (&[0, 3], &[1, 3], &[0, 3]),
        (&[33, 1], &[1, 1025], &[33, 1025]),
        (&[1], &[31], &[31]),
    ];
    for (sa, sb, so) in cases {
        let na: usize = sa.iter().product();
        let nb: usize = sb.iter().product();
        let (a, b) = (values::<T>(na, 21), values::<T>(nb, 22));
        let (ta, tb) = (Tensor::from_slice(&a, sa)?, Tensor::from_slice(&b, sb)?);
        let (ea, eb) = (broadcast(&a, sa, so), broadcast(&b, sb, so));
        for op in OPS {
            let got = apply(op, &ta, &tb)?;
            ensure!(
                got.shape() == so,
                "{sa:?} {op:?} {sb:?}: shape {:?}",
                got.shape()
            );
            let want: Vec<T> = ea
                .iter()
                .zip(&eb)
                .map(|(x, y)| reference::binary_one(op, *x, *y))
                .collect();
            let what = format!("{} {sa:?} {op:?} {sb:?}", dt::<T>());
            check_exact(&what, &got.to_vec()?, &want)?; // exact
        }
    }
    Ok(())
}

fn broadcasting() -> TestResult {
    broadcast_one::<f32>()?;
    broadcast_one::<i32>()?;
    broadcast_one::<bf16>()
}

fn non_contiguous_one<T: K>() -> TestResult {
    // a: the transpose of a [33, 31]; b: columns 5..38 of a [31, 40]; c: a [31, 1] expanded.
    let (ad, bd, cd) = (
        values::<T>(33 * 31, 1),
        values::<T>(31 * 40, 2),
        values::<T>(31, 3),
    );
    let a = Tensor::from_slice(&ad, &[33, 31])?.t()?;
    let b = Tensor::from_slice(&bd, &[31, 40])?.narrow(1, 5, 33)?;
    let c = Tensor::from_slice(&cd, &[31, 1])?.expand(&[31, 33])?;
    ensure!(
        !a.is_contiguous() && !b.is_contiguous() && !c.is_contiguous(),
        "views"
    );
    let av = build(&[31, 33], |i| at(&ad, &[33, 31], &[i[1], i[0]]));
    let bv = build(&[31, 33], |i| at(&bd, &[31, 40], &[i[0], i[1] + 5]));
    let cv = build(&[31, 33], |i| cd[i[0]]);
    for op in OPS {
        let what = format!("{} a^T {op:?} b[:, 5:38]", dt::<T>());
        let want: Vec<T> = av
            .iter()
            .zip(&bv)
            .map(|(x, y)| reference::binary_one(op, *x, *y))
            .collect();
        check_exact(&what, &apply(op, &a, &b)?.to_vec()?, &want)?; // exact
        let what = format!("{} expanded {op:?} a^T", dt::<T>());
        let want: Vec<T> = cv
            .iter()
            .zip(&av)
            .map(|(x, y)| reference::binary_one(op, *x, *y))
            .collect();
        check_exact(&what, &apply(op, &c, &a)?.to_vec()?, &want)?; // exact
    }
    Ok(())
}

fn non_contiguous_binary() -> TestResult {
    non_contiguous_one::<f32>()?;
    non_contiguous_one::<f64>()?;
    non_contiguous_one::<i32>()?;
    non_contiguous_one::<f16>()?;
    non_contiguous_one::<bf16>()
}

fn unary_one<T: K>() -> TestResult {
    let alpha = if dt::<T>().is_float() { -1.5 } else { -3.0 };
    for &n in SIZES {
        let x = values::<T>(n, 31 + n as u64);
        let tx = Tensor::from_slice(&x, &[n])?;
        let what = format!("{} n={n}", dt::<T>());
        // relu, scale: exact.
        check_exact(
            &format!("relu {what}"),
            &tx.relu()?.to_vec()?,
            &reference::relu(&x),
        )?;
        let scaled = tx.scale(<T as TensorElement>::scalar_from_f64(alpha))?;
        let ralpha = cuda_stack_kernels::Element::to_scalar(<T as TensorElement>::from_f64(alpha));
        check_exact(
            &format!("scale {what}"),
            &scaled.to_vec()?,
            &reference::scale(&x, ralpha),
        )?;
        // tanh: within 4 ulp of the dtype (CUDA's tanhf/tanh, <= 2 ulp, vs the correctly rounded
        // f64 value rounded to T).
        if dt::<T>().is_float() {
            let got: Vec<f64> = tx.tanh()?.to_vec()?.into_iter().map(f).collect();
            let want: Vec<f64> = x
                .iter()
                .map(|&v| f(v).tanh())
                .map(|w| f(t::<T>(w)))
                .collect();
            let e = eps(dt::<T>());
            check_tol(&format!("tanh {what}"), &got, &want, |i| {
                4.0 * e * want[i].abs() + 1e-30
            })?;
        }
    }
    // A non-contiguous input: relu of a transposed matrix.
    let m = values::<T>(33 * 17, 5);
    let tm = Tensor::from_slice(&m, &[33, 17])?.t()?;
    let want = reference::relu(&build(&[17, 33], |i| at(&m, &[33, 17], &[i[1], i[0]])));
    check_exact("relu of a transpose", &tm.relu()?.to_vec()?, &want)?;
    Ok(())
}

fn unary() -> TestResult {
    unary_one::<f32>()?;
    unary_one::<f64>()?;
    unary_one::<i32>()?;
    unary_one::<f16>()?;
    unary_one::<bf16>()?;
    match Tensor::from_vec(vec![1i32, 2], &[2])?.tanh() {
        Err(TensorError::UnsupportedDType {
            op: "tanh",
            dtype: DType::I32,
            ..
        }) => Ok(()),
        other => Err(format!("tanh of i32: {other:?}").into()),
    }
}

/// CPU `[m, k] · [k, n]` in f64, and Σ_k |a_ik·b_kj| per output (for tolerances).
fn matmul_ref<T: TensorElement>(
    a: &[T],
    b: &[T],
    m: usize,
    n: usize,
    k: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for kk in 0..k {
                let p = f(a[i * k + kk]) * f(b[kk * n + j]);
                c[i * n + j] += p;
                mag[i * n + j] += p.abs();
            }
        }
    }
    (c, mag)
}

/// Checks `got` = `a · b` (row-major dense host data): i32 exact (wrapping, via the kernels'
/// twin), f32 within 1e-5·Σ|a·b|, f64 within 1e-13·Σ|a·b|.
#[allow(clippy::too_many_arguments)]
fn check_matmul<T: K>(
    what: &str,
    got: &Tensor<T>,
    a: &[T],
    b: &[T],
    m: usize,
    n: usize,
    k: usize,
) -> TestResult {
    ensure!(got.shape() == [m, n], "{what}: shape {:?}", got.shape());
    let g = got.to_vec()?;
    if dt::<T>() == DType::I32 {
        return check_exact(what, &g, &reference::matmul(a, b, m, n, k));
    }
    let (want, mag) = matmul_ref(a, b, m, n, k);
    let g: Vec<f64> = g.into_iter().map(f).collect();
    let tol = if dt::<T>() == DType::F64 { 1e-13 } else { 1e-5 };
    check_tol(what, &g, &want, |i| tol * mag[i] + 1e-30)
}

const MNK: [(usize, usize, usize); 9] = [
    (0, 5, 3),
    (4, 0, 3),
    (5, 7, 0),
    (1, 1, 1),
    (31, 33, 32),
    (33, 31, 33),
    (64, 129, 17),
    (130, 2, 1025),
    (17, 1031, 5),
];

fn matmul_one<T: K>() -> TestResult {
    for (m, n, k) in MNK {
        let (a, b) = (values::<T>(m * k, 41), values::<T>(k * n, 42));
        let c = Tensor::from_slice(&a, &[m, k])?.matmul(&Tensor::from_slice(&b, &[k, n])?)?;
        check_matmul(
            &format!("{} [{m},{k}]·[{k},{n}]", dt::<T>()),
            &c,
            &a,
            &b,
            m,
            n,
            k,
        )?;
    }
    Ok(())
}

fn matmul_2d() -> TestResult {
    matmul_one::<f32>()?;
    matmul_one::<f64>()?;
    matmul_one::<i32>()
}

fn matmul_views_one<T: K>() -> TestResult {
    for (m, n, k) in [(31, 33, 32), (33, 17, 65), (1, 5, 7), (64, 64, 64)] {
        let what = |s: &str| format!("{} {s} m={m} n={n} k={k}", dt::<T>());
        let (a, b) = (values::<T>(m * k, 51), values::<T>(k * n, 52));
        // Operands stored transposed: a^T stored [k, m], b^T stored [n, k].
        let at_store = build(&[k, m], |i| a[i[1] * k + i[0]]);
        let bt_store = build(&[n, k], |i| b[i[1] * n + i[0]]);
        let ta = Tensor::from_slice(&at_store, &[k, m])?.t()?;
        let tb = Tensor::from_slice(&bt_store, &[n, k])?.t()?;
        let da = Tensor::from_slice(&a, &[m, k])?;
        let db = Tensor::from_slice(&b, &[k, n])?;
        check_matmul(&what("A^T-view · B"), &ta.matmul(&db)?, &a, &b, m, n, k)?;
        check_matmul(&what("A · B^T-view"), &da.matmul(&tb)?, &a, &b, m, n, k)?;
        check_matmul(
            &what("A^T-view · B^T-view"),
            &ta.matmul(&tb)?,
            &a,
            &b,
            m,
            n,
            k,
        )?;
        // A as columns 3..3+k of a wider matrix (row stride k + 7).
        let wide = build(&[m, k + 7], |i| {
            if i[1] >= 3 && i[1] < 3 + k {
                a[i[0] * k + i[1] - 3]
            } else {
                t::<T>(99.0)
            }
        });
        let na = Tensor::from_slice(&wide, &[m, k + 7])?.narrow(1, 3, k)?;
        check_matmul(&what("A[:, 3:3+k] · B"), &na.matmul(&db)?, &a, &b, m, n, k)?;
        // B as one row expanded to k rows (stride 0): copied before the GEMM.
        let row = values::<T>(n, 53);
        let eb = Tensor::from_slice(&row, &[1, n])?.expand(&[k, n])?;
        let bexp = build(&[k, n], |i| row[i[1]]);
        check_matmul(
            &what("A · expanded B"),
            &da.matmul(&eb)?,
            &a,
            &bexp,
            m,
            n,
            k,
        )?;
    }
    Ok(())
}

fn matmul_views() -> TestResult {
    matmul_views_one::<f32>()?;
    matmul_views_one::<f64>()?;
    matmul_views_one::<i32>()
}

fn matmul_batched_one<T: K>() -> TestResult {
    let (bs, m, n, k) = (3usize, 17usize, 33usize, 31usize);
    let a = values::<T>(bs * m * k, 61);
    let b = values::<T>(bs * k * n, 62);
    let ta = Tensor::from_slice(&a, &[bs, m, k])?;
    let tb = Tensor::from_slice(&b, &[bs, k, n])?;
    let a0 = &a[..m * k];
    let b0 = &b[..k * n];
    let ta2 = Tensor::from_slice(a0, &[m, k])?;
    let tb2 = Tensor::from_slice(b0, &[k, n])?;
    // (name, result, whether a is batched, whether b is batched)
    let cases = [
        ("[b,m,k]·[b,k,n]", ta.matmul(&tb)?, true, true),
        ("[b,m,k]·[k,n]", ta.matmul(&tb2)?, true, false),
        ("[m,k]·[b,k,n]", ta2.matmul(&tb)?, false, true),
        (
            "[1,m,k]·[b,k,n]",
            ta2.unsqueeze(0)?.matmul(&tb)?,
            false,
            true,
        ),
    ];
    for (what, c, a_batched, b_batched) in cases {
        ensure!(c.shape() == [bs, m, n], "{what}: shape {:?}", c.shape());
        for i in 0..bs {
            let ai = if a_batched {
                &a[i * m * k..(i + 1) * m * k]
            } else {
                a0
            };
            let bi = if b_batched {
                &b[i * k * n..(i + 1) * k * n]
            } else {
                b0
            };
            let what = format!("{} {what} batch {i}", dt::<T>());
            check_matmul(&what, &c.select(0, i)?.contiguous()?, ai, bi, m, n, k)?;
        }
    }
    // Transposed batches: a stored [b, k, m], used as [b, m, k].
    let at_store = build(&[bs, k, m], |i| a[i[0] * m * k + i[2] * k + i[1]]);
    let tat = Tensor::from_slice(&at_store, &[bs, k, m])?.transpose(1, 2)?;
    let c = tat.matmul(&tb)?;
    for i in 0..bs {
        let what = format!("{} transposed batch {i}", dt::<T>());
        let ai = &a[i * m * k..(i + 1) * m * k];
        check_matmul(
            &what,
            &c.select(0, i)?.contiguous()?,
            ai,
            &b[i * k * n..(i + 1) * k * n],
            m,
            n,
            k,
        )?;
    }
    Ok(())
}

fn matmul_batched() -> TestResult {
    matmul_batched_one::<f32>()?;
    matmul_batched_one::<f64>()?;
    matmul_batched_one::<i32>()
}

fn reductions_all_one<T: K>() -> TestResult {
    for &n in SIZES {
        let x = values::<T>(n, 71 + n as u64);
        let tx = Tensor::from_slice(&x, &[n])?;
        let what = format!("{} n={n}", dt::<T>());
        let xs: Vec<f64> = x.iter().map(|&v| f(v)).collect();
        let (sum, mag): (f64, f64) = (xs.iter().sum(), xs.iter().map(|v| v.abs()).sum());
        // sum: i32 → i64 exact; floats within sum_tol × Σ|x|.
        let s = tx.sum_all()?;
        ensure!(s.shape().is_empty(), "sum_all shape");
        let got = f(s.item()?);
        if dt::<T>() == DType::I32 {
            ensure!(
                s.dtype() == DType::I64 && got == sum,
                "{what}: sum {got} vs {sum}"
            );
        } else {
            // f16/bf16: f32 accumulation, then one rounding to the dtype.
            check_tol(&format!("sum {what}"), &[got], &[sum], |_| {
                sum_tol(dt::<T>()) * mag + eps(dt::<T>()) * sum.abs()
            })?;
        }
        // max: exact.
        if n == 0 {
            ensure!(
                matches!(tx.max_all(), Err(TensorError::EmptyReduction { .. })),
                "{what}: max of nothing"
            );
        } else {
            let want = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let got = f(tx.max_all()?.item()?);
            ensure!(got == want, "{what}: max {got} vs {want}");
        }
        // mean: floats; NaN when empty.
        if dt::<T>().is_float() {
            let got = f(tx.mean_all()?.item()?);
            let want = sum / n as f64;
            let tol = sum_tol(dt::<T>()) * mag / n.max(1) as f64 + eps(dt::<T>()) * want.abs();
            check_tol(&format!("mean {what}"), &[got], &[want], |_| tol)?;
        }
    }
    // Reductions of a non-contiguous view: the transpose of a [33, 31].
    let m = values::<T>(33 * 31, 3);
    let tm = Tensor::from_slice(&m, &[33, 31])?.t()?;
    let want = m.iter().map(|&v| f(v)).fold(f64::NEG_INFINITY, f64::max);
    ensure!(f(tm.max_all()?.item()?) == want, "max of a transpose");
    Ok(())
}

fn reductions_all() -> TestResult {
    reductions_all_one::<f32>()?;
    reductions_all_one::<f64>()?;
    reductions_all_one::<i32>()?;
    reductions_all_one::<f16>()?;
    reductions_all_one::<bf16>()?;
    match Tensor::from_vec(vec![1i32, 2], &[2])?.mean_all() {
        Err(TensorError::UnsupportedDType {
            op: "mean",
            dtype: DType::I32,
            ..
        }) => Ok(()),
        other => Err(format!("mean of i32: {other:?}").into()),
    }
}

/// CPU reduction of `x` (of `shape`) over `d`: (sum, Σ|x|, max, count) per output position.
fn reduce_ref(x: &[f64], shape: &[usize], d: usize) -> (Vec<usize>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut out_shape = shape.to_vec();
    out_shape.remove(d);
    let mut sums = Vec::new();
    let mut mags = Vec::new();
    let mut maxs = Vec::new();
    for idx in (0..out_shape.iter().product::<usize>()).map(|i| unravel(i, &out_shape)) {
        let (mut s, mut a, mut mx) = (0.0, 0.0, f64::NEG_INFINITY);
        for j in 0..shape[d] {
            let mut full = idx.clone();
            full.insert(d, j);
            let v = at(x, shape, &full);
            s += v;
            a += v.abs();
            mx = mx.max(v);
        }
        sums.push(s);
        mags.push(a);
        maxs.push(mx);
    }
    (out_shape, sums, mags, maxs)
}

fn reductions_dim_one<T: K>() -> TestResult {
    let shapes: [&[usize]; 4] = [&[7, 33, 5], &[1025, 3], &[3, 0, 4], &[1]];
    for shape in shapes {
        let n: usize = shape.iter().product();
        let x = values::<T>(n, 81);
        let xs: Vec<f64> = x.iter().map(|&v| f(v)).collect();
        let tx = Tensor::from_slice(&x, shape)?;
        for d in 0..shape.len() {
            let what = format!("{} {shape:?} dim {d}", dt::<T>());
            let (out_shape, sums, mags, maxs) = reduce_ref(&xs, shape, d);
            let neg = d as isize - shape.len() as isize; // the same dim, counted from the end
                                                         // sum (tolerance sum_tol × Σ|x| of the row), with and without keepdim.
            let s = tx.sum(d as isize)?;
            ensure!(
                s.shape() == out_shape.as_slice(),
                "{what}: sum shape {:?}",
                s.shape()
            );
            let got: Vec<f64> = s.to_vec()?.into_iter().map(f).collect();
            check_tol(&format!("sum {what}"), &got, &sums, |i| {
                sum_tol(dt::<T>()) * mags[i] + eps(dt::<T>()) * sums[i].abs()
            })?;
            let sk = tx.sum_keepdim(neg)?;
            let mut kshape = shape.to_vec();
            kshape[d] = 1;
            ensure!(
                sk.shape() == kshape.as_slice(),
                "{what}: keepdim shape {:?}",
                sk.shape()
            );
            // mean = sum · (1/count): the sum's tolerance / count, plus an ulp of the scaling.
            let cnt = shape[d] as f64;
            let means: Vec<f64> = sums.iter().map(|s| s / cnt).collect();
            let got: Vec<f64> = tx.mean(neg)?.to_vec()?.into_iter().map(f).collect();
            check_tol(&format!("mean {what}"), &got, &means, |i| {
                sum_tol(dt::<T>()) * mags[i] / cnt + (1e-6 + eps(dt::<T>())) * means[i].abs()
            })?;
            // max: exact; an empty dimension is an error.
            if shape[d] == 0 {
                ensure!(
                    matches!(tx.max(d as isize), Err(TensorError::EmptyReduction { .. })),
                    "{what}: max over an empty dim"
                );
            } else {
                let got: Vec<f64> = tx.max(d as isize)?.to_vec()?.into_iter().map(f).collect();
                check_tol(&format!("max {what}"), &got, &maxs, |_| 0.0)?;
                let mk = tx.max_keepdim(d as isize)?;
                ensure!(mk.shape() == kshape.as_slice(), "{what}: max keepdim shape");
            }
        }
    }
    // A non-contiguous input: the [5, 33, 7] transpose of a [7, 33, 5], over dim 1.
    let x = values::<T>(7 * 33 * 5, 82);
    let tx = Tensor::from_slice(&x, &[7, 33, 5])?.transpose(0, 2)?;
    let xs = build(&[5, 33, 7], |i| f(at(&x, &[7, 33, 5], &[i[2], i[1], i[0]])));
    let (_, sums, mags, maxs) = reduce_ref(&xs, &[5, 33, 7], 1);
    let got: Vec<f64> = tx.sum(1)?.to_vec()?.into_iter().map(f).collect();
    check_tol("sum of a transpose", &got, &sums, |i| {
        sum_tol(dt::<T>()) * mags[i] + eps(dt::<T>()) * sums[i].abs()
    })?;
    let got: Vec<f64> = tx.max(1)?.to_vec()?.into_iter().map(f).collect();
    check_tol("max of a transpose", &got, &maxs, |_| 0.0)?;
    Ok(())
}

fn reductions_dim() -> TestResult {
    reductions_dim_one::<f32>()?;
    reductions_dim_one::<f64>()?;
    reductions_dim_one::<f16>()?;
    reductions_dim_one::<bf16>()?;
    // f16 reductions come back as f16 (f32 accumulation, one rounding), as in PyTorch.
    let h = Tensor::from_vec(vec![f16::from_f32(1.5); 4], &[2, 2])?;
    ensure!(
        h.sum(0)?.dtype() == DType::F16
            && h.max(1)?.dtype() == DType::F16
            && h.mean_all()?.item()? == f16::from_f32(1.5)
            && h.sum(0)?.to_vec()? == [f16::from_f32(3.0); 2],
        "f16 → f16"
    );
    match Tensor::from_vec(vec![1i32, 2], &[1, 2])?.sum(1) {
        Err(TensorError::UnsupportedDType {
            dtype: DType::I32, ..
        }) => Ok(()),
        other => Err(format!("sum(dim) of i32: {other:?}").into()),
    }
}

/// CPU softmax of `x` (of `shape`) along `d`, in f64.
fn softmax_ref(x: &[f32], shape: &[usize], d: usize) -> Vec<f64> {
    build(shape, |idx| {
        let line: Vec<f64> = (0..shape[d])
            .map(|j| {
                let mut i = idx.to_vec();
                i[d] = j;
                f64::from(at(x, shape, &i))
            })
            .collect();
        let m = line.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let denom: f64 = line.iter().map(|v| (v - m).exp()).sum();
        (line[idx[d]] - m).exp() / denom
    })
}

fn softmax() -> TestResult {
    let cases: [(&[usize], isize); 8] = [
        (&[33, 1025], -1), // rows longer than 1024: the block-per-row kernel
        (&[31, 33], 1),
        (&[4, 31, 5], 1),
        (&[4, 31, 5], 0),
        (&[4, 31, 5], -1),
        (&[1, 1], 0),
        (&[7, 0], 1),
        (&[1023], 0),
    ];
    for (shape, dim) in cases {
        let n: usize = shape.iter().product();
        let x = values::<f32>(n, 91);
        let tx = Tensor::from_slice(&x, shape)?;
        let y = tx.softmax(dim)?;
        ensure!(
            y.shape() == shape && y.is_contiguous(),
            "shape {:?}",
            y.shape()
        );
        let d = if dim < 0 {
            (shape.len() as isize + dim) as usize
        } else {
            dim as usize
        };
        let want = softmax_ref(&x, shape, d);
        let got: Vec<f64> = y.to_vec()?.into_iter().map(f64::from).collect();
        // Tolerance: 2e-6 absolute (expf and one reciprocal in f32).
        check_tol(&format!("softmax {shape:?} dim {dim}"), &got, &want, |_| {
            2e-6
        })?;
    }
    // A non-contiguous input: softmax over the last dim of a transpose.
    let x = values::<f32>(33 * 17, 92);
    let tx = Tensor::from_slice(&x, &[33, 17])?.t()?;
    let xt = build(&[17, 33], |i| at(&x, &[33, 17], &[i[1], i[0]]));
    let got: Vec<f64> = tx
        .softmax(-1)?
        .to_vec()?
        .into_iter()
        .map(f64::from)
        .collect();
    check_tol(
        "softmax of a transpose",
        &got,
        &softmax_ref(&xt, &[17, 33], 1),
        |_| 2e-6,
    )?;
    // A scalar: softmax is 1.
    ensure!(
        Tensor::scalar(3.0f32)?.softmax(0)?.item()? == 1.0,
        "softmax of a scalar"
    );
    // f64 (the row kernel of log_softmax.cu) against the exact values; f16 (computed in f32,
    // rounded once) within an f16 ulp.
    let y = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?
        .softmax(0)?
        .to_vec()?;
    let e = 1f64.exp();
    let want = [1.0 / (1.0 + e), e / (1.0 + e)];
    ensure!(
        (y[0] - want[0]).abs() < 1e-15 && (y[1] - want[1]).abs() < 1e-15,
        "softmax f64: {y:?}"
    );
    let h = Tensor::from_vec(vec![f16::ONE, f16::from_f32(2.0)], &[2])?
        .softmax(0)?
        .to_vec()?;
    ensure!(
        h.iter()
            .zip(&want)
            .all(|(g, w)| (g.to_f64() - w).abs() <= w * 2f64.powi(-10)),
        "softmax f16: {h:?}"
    );
    Ok(())
}

fn bias_relu() -> TestResult {
    let sm = cuda_stack_runtime::Runtime::get(0)?
        .context()
        .limits()
        .sm_count;
    let scale = 0.75f32;
    for rows in [0usize, 1, 33, 1025] {
        for cols in [1usize, 31, 32, 33] {
            let what = format!("[{rows}, {cols}]");
            let x = values::<f32>(rows * cols, 101);
            let b = values::<f32>(cols, 102);
            let g = values::<f32>(rows * cols, 103);
            let (tx, tb, tg) = (
                Tensor::from_slice(&x, &[rows, cols])?,
                Tensor::from_slice(&b, &[cols])?,
                Tensor::from_slice(&g, &[rows, cols])?,
            );
            // Forward and backward: exact (fmaf; the bias gradient summed in the kernel's order
            // for its row-chunk count P).
            let y = tx.bias_relu(&tb, scale)?;
            let want = reference::bias_relu_fwd(&x, &b, scale, rows, cols);
            check_exact(&format!("bias_relu {what}"), &y.to_vec()?, &want)?;
            let (gx, gb) = tx.bias_relu_backward(&tb, scale, &tg)?;
            let parts = cuda_stack_kernels::ops::bias_relu_bwd_parts(rows, cols, sm);
            let (wgx, wgb) = reference::bias_relu_bwd(&x, &b, scale, &g, rows, cols, parts);
            ensure!(
                gx.shape() == [rows, cols] && gb.shape() == [cols],
                "{what}: shapes"
            );
            check_exact(&format!("grad_x {what}"), &gx.to_vec()?, &wgx)?;
            check_exact(&format!("grad_bias {what}"), &gb.to_vec()?, &wgb)?;
        }
    }
    // 3-D x (rows = 2·5) and a non-contiguous x (the transpose of a [7, 10]).
    let x = values::<f32>(70, 104);
    let b = values::<f32>(7, 105);
    let tb = Tensor::from_slice(&b, &[7])?;
    let y = Tensor::from_slice(&x, &[2, 5, 7])?.bias_relu(&tb, scale)?;
    ensure!(y.shape() == [2, 5, 7], "3-D shape");
    check_exact(
        "bias_relu 3-D",
        &y.to_vec()?,
        &reference::bias_relu_fwd(&x, &b, scale, 10, 7),
    )?;
    let xt = Tensor::from_slice(&x, &[7, 10])?.t()?;
    let dense = build(&[10, 7], |i| at(&x, &[7, 10], &[i[1], i[0]]));
    check_exact(
        "bias_relu of a transpose",
        &xt.bias_relu(&tb, scale)?.to_vec()?,
        &reference::bias_relu_fwd(&dense, &b, scale, 10, 7),
    )?;
    Ok(())
}

fn errors() -> TestResult {
    let a = Tensor::<f32>::zeros(&[2, 3])?;
    let b = Tensor::<f32>::zeros(&[4])?;
    for (r, op) in [(&a + &b, "add"), (a.div(&b), "div")] {
        match r {
            Err(e @ TensorError::ShapeMismatch { .. }) => {
                let m = e.to_string();
                ensure!(
                    m.starts_with(op) && m.contains("[2, 3]") && m.contains("[4]"),
                    "{m}"
                );
            }
            other => return Err(format!("{op}: {other:?}").into()),
        }
    }
    match a.matmul(&Tensor::<f32>::zeros(&[4, 5])?) {
        Err(e @ TensorError::ShapeMismatch { .. }) => {
            let m = e.to_string();
            ensure!(m.contains("[2, 3]") && m.contains("[4, 5]"), "{m}");
        }
        other => return Err(format!("matmul [2,3]·[4,5]: {other:?}").into()),
    }
    ensure!(
        matches!(b.matmul(&b), Err(TensorError::ShapeMismatch { .. })),
        "matmul of 1-D tensors"
    );
    // Unsupported dtypes name the op and the dtype (i64 has no matmul on either backend).
    let h = Tensor::<i64>::zeros(&[2, 2])?;
    match h.matmul(&h) {
        Err(
            e @ TensorError::UnsupportedDType {
                dtype: DType::I64, ..
            },
        ) => {
            let m = e.to_string();
            ensure!(
                m.contains("matmul") && m.contains("i64") && m.contains("[2, 2]"),
                "{m}"
            );
        }
        other => return Err(format!("matmul of i64: {other:?}").into()),
    }
    let i = Tensor::<i32>::arange(0.0, 4.0, 1.0)?;
    let s = i.sum_all()?; // an i64 tensor
    match &s + &s {
        Err(TensorError::UnsupportedDType {
            op: "add",
            dtype: DType::I64,
            ..
        }) => {}
        other => return Err(format!("i64 add: {other:?}").into()),
    }
    ensure!(
        matches!(
            a.bias_relu(&Tensor::<f32>::zeros(&[4])?, 1.0),
            Err(TensorError::ShapeMismatch { .. })
        ),
        "bias of the wrong length"
    );
    ensure!(
        matches!(
            a.sum(2),
            Err(TensorError::DimOutOfRange {
                dim: 2,
                rank: 2,
                ..
            })
        ),
        "sum over dim 2 of a 2-D tensor"
    );
    ensure!(
        matches!(a.softmax(-3), Err(TensorError::DimOutOfRange { .. })),
        "softmax over dim -3"
    );
    Ok(())
}

fn device_mismatch() -> TestResult {
    let a = Tensor::<f32>::from_slice_on(0, &[1.0, 2.0], &[2])?;
    let b = a.to_device(1)?;
    ensure!(b.device() == 1 && b.to_vec()? == [1.0, 2.0], "to_device");
    match &a + &b {
        Err(e @ TensorError::DeviceMismatch { .. }) => {
            let m = e.to_string();
            ensure!(
                m.contains("cuda:0") && m.contains("cuda:1") && m.contains("[2]"),
                "{m}"
            );
        }
        other => return Err(format!("add across devices: {other:?}").into()),
    }
    // An op runs on its operands' device, whatever the current device is.
    cuda_stack_runtime::set_device(1)?;
    let c = (&a + &a)?;
    cuda_stack_runtime::set_device(0)?;
    ensure!(
        c.device() == 0 && c.to_vec()? == [2.0, 4.0],
        "op on device 0 from device 1"
    );
    Ok(())
}

/// Floats that probe every conversion: signed zeros, infinities, NaN, the f16 limits and the
/// rounding boundary above them, subnormals, the i32 limits and beyond, and ordinary values.
fn probe_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        65504.0,
        65519.0,
        65520.0,
        1e-8,
        -1e-8,
        5.96e-8,
        1e-40,
        3.0e9,
        -3.0e9,
        2147483520.0,
        -2147483648.0,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        std::f32::consts::PI,
        -123.456,
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..1000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        v.push(f32::from_bits((state >> 32) as u32));
    }
    v
}

/// Equal, with NaN equal to NaN.
fn same_f64(a: f64, b: f64) -> bool {
    a == b && a.is_sign_negative() == b.is_sign_negative() || (a.is_nan() && b.is_nan())
}

fn to_dtype() -> TestResult {
    let xs = probe_values();
    let n = xs.len();
    let t = Tensor::from_vec(xs.clone(), &[n])?;
    let check = |what: &str, got: Vec<f64>, want: Vec<f64>| -> TestResult {
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            ensure!(
                same_f64(*g, *w),
                "{what}[{i}] of {}: got {g:e}, want {w:e}",
                xs[i]
            );
        }
        Ok(())
    };
    let h = t.to_dtype::<f16>()?;
    check(
        "f32->f16",
        h.to_vec()?.iter().map(|v| v.to_f64()).collect(),
        xs.iter().map(|&v| f16::from_f32(v).to_f64()).collect(),
    )?;
    check(
        "f16->f32",
        h.to_dtype::<f32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        h.to_vec()?.iter().map(|v| v.to_f64()).collect(),
    )?;
    let b = t.to_dtype::<bf16>()?;
    check(
        "f32->bf16",
        b.to_vec()?.iter().map(|v| v.to_f64()).collect(),
        xs.iter().map(|&v| bf16::from_f32(v).to_f64()).collect(),
    )?;
    check(
        "bf16->f32",
        b.to_dtype::<f32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        b.to_vec()?.iter().map(|v| v.to_f64()).collect(),
    )?;
    check(
        "f16->bf16",
        h.to_dtype::<bf16>()?
            .to_vec()?
            .iter()
            .map(|v| v.to_f64())
            .collect(),
        h.to_vec()?
            .iter()
            .map(|v| bf16::from_f32(v.to_f32()).to_f64())
            .collect(),
    )?;
    check(
        "bf16->f16",
        b.to_dtype::<f16>()?
            .to_vec()?
            .iter()
            .map(|v| v.to_f64())
            .collect(),
        b.to_vec()?
            .iter()
            .map(|v| f16::from_f32(v.to_f32()).to_f64())
            .collect(),
    )?;
    let d = t.to_dtype::<f64>()?;
    check(
        "f32->f64",
        d.to_vec()?,
        xs.iter().map(|&v| f64::from(v)).collect(),
    )?;
    let d2: Vec<f64> = xs.iter().map(|&v| f64::from(v) * 1.000000001).collect();
    let dt = Tensor::from_vec(d2.clone(), &[n])?;
    check(
        "f64->f32",
        dt.to_dtype::<f32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        d2.iter().map(|&v| f64::from(v as f32)).collect(),
    )?;
    check(
        "f32->i32",
        t.to_dtype::<i32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        xs.iter().map(|&v| f64::from(v as i32)).collect(),
    )?;
    check(
        "f64->i32",
        dt.to_dtype::<i32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        d2.iter().map(|&v| f64::from(v as i32)).collect(),
    )?;
    let is: Vec<i32> = (0..n as i32)
        .map(|i| i.wrapping_mul(2_654_435_761u32 as i32))
        .collect();
    let it = Tensor::from_vec(is.clone(), &[n])?;
    check(
        "i32->f32",
        it.to_dtype::<f32>()?
            .to_vec()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        is.iter().map(|&v| f64::from(v as f32)).collect(),
    )?;
    check(
        "i32->f64",
        it.to_dtype::<f64>()?.to_vec()?,
        is.iter().map(|&v| f64::from(v)).collect(),
    )?;
    // The same dtype is the tensor itself; views are made contiguous first.
    ensure!(
        t.to_dtype::<f32>()?.shares_storage(&t),
        "to the same dtype: no copy"
    );
    let m = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4])?;
    ensure!(
        m.t()?.to_dtype::<f64>()?.to_vec()?
            == [0.0, 4.0, 8.0, 1.0, 5.0, 9.0, 2.0, 6.0, 10.0, 3.0, 7.0, 11.0],
        "a transposed view"
    );
    // Pairs that would round twice are refused, naming both dtypes.
    match d.to_dtype::<f16>() {
        Err(TensorError::UnsupportedDType {
            op: "to_dtype",
            dtype: DType::F64,
            why,
            ..
        }) => {
            ensure!(why.contains("f16") && why.contains("through f32"), "{why}");
        }
        other => return Err(format!("f64 -> f16: {other:?}").into()),
    }
    Ok(())
}

/// `sgd_at_`, `sgd_momentum_at_` and `adam_at_` on elements 3..7 of 10 (a rank's part of a flat
/// parameter buffer under ZeRO-1): the part steps as the whole-tensor op steps a tensor of those
/// four elements (two steps, so the state is read back), the other elements stay, a shared
/// buffer is copied first, and a part past the end is an error. Tolerance: 1e-6 relative (the
/// same kernel, maybe another vector width).
fn optimizer_parts() -> TestResult {
    use cuda_stack_runtime::{AdamParams, SgdParams};
    let base: Vec<f32> = (0..10).map(|i| i as f32 * 0.25 - 1.0).collect();
    let grad = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.125], &[4])?;
    let check = |flat: &Tensor<f32>, alone: &Tensor<f32>, what: &str| -> TestResult {
        let (f, a) = (flat.to_vec()?, alone.to_vec()?);
        for (x, y) in f[3..7].iter().zip(&a) {
            ensure!(
                (x - y).abs() <= 1e-6 * y.abs().max(1.0),
                "{what}: the part {:?}, the op alone {a:?}",
                &f[3..7]
            );
        }
        ensure!(
            f[..3] == base[..3] && f[7..] == base[7..],
            "{what}: elements outside the part changed: {f:?}"
        );
        Ok(())
    };
    let fresh = || -> Result<(Tensor<f32>, Tensor<f32>), TensorError> {
        Ok((
            Tensor::from_vec(base.clone(), &[10])?,
            Tensor::from_vec(base[3..7].to_vec(), &[4])?,
        ))
    };

    let (mut flat, mut alone) = fresh()?;
    for _ in 0..2 {
        flat.sgd_at_(3, &grad, 0.1, 0.01)?;
        alone.sgd_(&grad, 0.1, 0.01)?;
    }
    check(&flat, &alone, "sgd_at_")?;

    let hyper = SgdParams {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        weight_decay: 0.01,
        nesterov: true,
    };
    let (mut flat, mut alone) = fresh()?;
    let (mut b1, mut b2) = (grad.full_like(&[4], 0.0)?, grad.full_like(&[4], 0.0)?);
    for first in [true, false] {
        flat.sgd_momentum_at_(3, &grad, &mut b1, hyper, first)?;
        alone.sgd_momentum_(&grad, &mut b2, hyper, first)?;
    }
    check(&flat, &alone, "sgd_momentum_at_")?;
    ensure!(
        b1.to_vec()? == b2.to_vec()?,
        "momentum buffers {:?} vs {:?}",
        b1.to_vec()?,
        b2.to_vec()?
    );

    let hyper = AdamParams {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        decoupled: true,
    };
    let (mut flat, mut alone) = fresh()?;
    let zeros = || grad.full_like(&[4], 0.0);
    let (mut m1, mut v1, mut m2, mut v2) = (zeros()?, zeros()?, zeros()?, zeros()?);
    let mut steps = Tensor::from_vec(vec![0i32, 0], &[2])?;
    for _ in 0..2 {
        steps.increment_()?;
        flat.adam_at_(3, &grad, &mut m1, &mut v1, &steps, 1, hyper)?;
        alone.adam_(&grad, &mut m2, &mut v2, &steps, 1, hyper)?;
    }
    check(&flat, &alone, "adam_at_")?;

    // A shared buffer: the other handle keeps its values.
    let (mut flat, _) = fresh()?;
    let keep = flat.clone();
    flat.sgd_at_(3, &grad, 0.1, 0.0)?;
    ensure!(
        keep.to_vec()? == base && !flat.shares_storage(&keep),
        "a shared buffer was written in place"
    );

    let r = flat.sgd_at_(7, &grad, 0.1, 0.0);
    ensure!(
        matches!(r, Err(TensorError::ShapeMismatch { op: "sgd_at_", .. })),
        "a part past the end: {r:?}"
    );
    let r = flat.adam_at_(
        0,
        &grad,
        &mut m1,
        &mut Tensor::zeros(&[3])?,
        &steps,
        0,
        hyper,
    );
    ensure!(
        matches!(r, Err(TensorError::ShapeMismatch { op: "adam_at_", .. })),
        "a moment of another shape: {r:?}"
    );
    Ok(())
}
