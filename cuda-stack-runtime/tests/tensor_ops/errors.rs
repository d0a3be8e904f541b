//! Bad input: typed errors, nothing launched; tensors of two devices.

use super::*;

pub(crate) fn errors() -> TestResult {
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

pub(crate) fn device_mismatch() -> TestResult {
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
