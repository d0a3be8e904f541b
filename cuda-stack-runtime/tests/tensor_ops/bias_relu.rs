//! The fused bias + ReLU and its backward.

use super::*;

pub(crate) fn bias_relu() -> TestResult {
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
