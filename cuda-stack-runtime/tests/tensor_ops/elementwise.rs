//! Binary ops (every dtype and size, broadcasting, non-contiguous inputs) and the unary ops.

use super::*;

pub(crate) fn binary_one<T: K>() -> TestResult {
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

pub(crate) fn binary_every_dtype() -> TestResult {
    binary_one::<f32>()?;
    binary_one::<f64>()?;
    binary_one::<i32>()?;
    binary_one::<f16>()?;
    binary_one::<bf16>()
}

pub(crate) fn broadcast_one<T: K>() -> TestResult {
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

pub(crate) fn broadcasting() -> TestResult {
    broadcast_one::<f32>()?;
    broadcast_one::<i32>()?;
    broadcast_one::<bf16>()
}

pub(crate) fn non_contiguous_one<T: K>() -> TestResult {
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

pub(crate) fn non_contiguous_binary() -> TestResult {
    non_contiguous_one::<f32>()?;
    non_contiguous_one::<f64>()?;
    non_contiguous_one::<i32>()?;
    non_contiguous_one::<f16>()?;
    non_contiguous_one::<bf16>()
}

pub(crate) fn unary_one<T: K>() -> TestResult {
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

pub(crate) fn unary() -> TestResult {
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
