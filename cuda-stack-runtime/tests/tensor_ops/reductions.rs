//! Whole-tensor and per-dimension reductions.

use super::*;

pub(crate) fn reductions_all_one<T: K>() -> TestResult {
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

pub(crate) fn reductions_all() -> TestResult {
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
pub(crate) fn reduce_ref(
    x: &[f64],
    shape: &[usize],
    d: usize,
) -> (Vec<usize>, Vec<f64>, Vec<f64>, Vec<f64>) {
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

pub(crate) fn reductions_dim_one<T: K>() -> TestResult {
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

pub(crate) fn reductions_dim() -> TestResult {
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
