//! Softmax along any dimension.

use super::*;

/// CPU softmax of `x` (of `shape`) along `d`, in f64.
pub(crate) fn softmax_ref(x: &[f32], shape: &[usize], d: usize) -> Vec<f64> {
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

pub(crate) fn softmax() -> TestResult {
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
