//! `to_dtype` between every pair of dtypes, on values that probe every conversion.

use super::*;

/// Floats that probe every conversion: signed zeros, infinities, NaN, the f16 limits and the
/// rounding boundary above them, subnormals, the i32 limits and beyond, and ordinary values.
pub(crate) fn probe_values() -> Vec<f32> {
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
pub(crate) fn same_f64(a: f64, b: f64) -> bool {
    a == b && a.is_sign_negative() == b.is_sign_negative() || (a.is_nan() && b.is_nan())
}

pub(crate) fn to_dtype() -> TestResult {
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
