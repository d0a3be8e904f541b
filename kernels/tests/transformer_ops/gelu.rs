//! GELU (the tanh form), forward and backward.

use super::*;

pub(crate) const SIZES: &[usize] = &[0, 1, 7, 31, 33, 1025, 4099, 65537, (1 << 20) + 3];

pub(crate) fn gelu_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &n in SIZES {
        for &off in OFFSETS {
            let what = format!("gelu {dt} n = {n} offset {off}");
            let x: Vec<T> = data(11, n, 5.0);
            let dy: Vec<T> = data(12, n, 2.0);
            let (bx, bdy) = (upload(&s, &x, off)?, upload(&s, &dy, off)?);
            let mut y = poisoned::<T>(&s, n, off)?;
            ops::gelu_fwd::<T>(&k, &s, &bx.slice(off..)?, &mut y.slice_mut(off..)?)?;
            check(
                &format!("{what}: y"),
                &download(&s, &y, off)?,
                &reference::gelu(&x),
                |_, w| match dt {
                    DType::F32 => 8.0 * ulp(dt, w) + 2e-6,
                    DType::F64 => 8.0 * ulp(dt, w) + 1e-14,
                    _ => ulp(dt, w) + 2e-6,
                },
            )?;
            let mut dx = poisoned::<T>(&s, n, off)?;
            ops::gelu_bwd::<T>(
                &k,
                &s,
                &bx.slice(off..)?,
                &bdy.slice(off..)?,
                &mut dx.slice_mut(off..)?,
            )?;
            check(
                &format!("{what}: dx"),
                &download(&s, &dx, off)?,
                &reference::gelu_bwd(&x, &dy),
                |_, w| match dt {
                    DType::F32 => 16.0 * ulp(dt, w) + 2e-5,
                    DType::F64 => 16.0 * ulp(dt, w) + 1e-13,
                    _ => ulp(dt, w) + 2e-5,
                },
            )?;
        }
    }
    Ok(())
}
