//! Matrix products: 2-D, views, batched.

use super::*;

/// CPU `[m, k] · [k, n]` in f64, and Σ_k |a_ik·b_kj| per output (for tolerances).
pub(crate) fn matmul_ref<T: TensorElement>(
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
pub(crate) fn check_matmul<T: K>(
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

pub(crate) const MNK: [(usize, usize, usize); 9] = [
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

pub(crate) fn matmul_one<T: K>() -> TestResult {
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

pub(crate) fn matmul_2d() -> TestResult {
    matmul_one::<f32>()?;
    matmul_one::<f64>()?;
    matmul_one::<i32>()
}

pub(crate) fn matmul_views_one<T: K>() -> TestResult {
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

pub(crate) fn matmul_views() -> TestResult {
    matmul_views_one::<f32>()?;
    matmul_views_one::<f64>()?;
    matmul_views_one::<i32>()
}

pub(crate) fn matmul_batched_one<T: K>() -> TestResult {
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

pub(crate) fn matmul_batched() -> TestResult {
    matmul_batched_one::<f32>()?;
    matmul_batched_one::<f64>()?;
    matmul_batched_one::<i32>()
}
