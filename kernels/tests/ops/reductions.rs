//! Reductions: whole-buffer sums and maxima (NaN, empty, deterministic), rows and dimensions.

use super::*;

/// Sum/mean tolerance for `T` relative to `Σ|x|`.
pub(crate) fn sum_rel_tol<T: Element>() -> f64 {
    match T::DTYPE {
        DType::F64 => 1e-13,
        DType::I32 => 0.0,
        _ => 1e-6,
    }
}

pub(crate) fn reduce_full<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let algos: &[ReduceAlgo] = if matches!(T::DTYPE, DType::F32 | DType::F64) {
        &[ReduceAlgo::Tree, ReduceAlgo::Fast]
    } else {
        &[ReduceAlgo::Fast]
    };
    for &n in SIZES {
        for &off in OFFSETS {
            let x = small_data::<T>(16, n);
            let dx = upload(&s, &x, off)?;
            let abs_sum: f64 = x.iter().map(|v| v.to_f64().abs()).sum();
            let tag = format!("<{}> n={n} off={off}", T::DTYPE);
            for &algo in algos {
                let mut out = poisoned::<T::SumAcc>(&s, 1, 0)?;
                ops::sum(&k, &s, algo, &dx.slice(off..)?, &mut out)?;
                let got = T::acc_f64(s.clone_dtoh(&out)?[0]);
                // f32/f16/bf16: 1e-6·Σ|x|; f64: 1e-13·Σ|x|; i32: exact (i64 accumulator).
                check_close(
                    &format!("sum {algo:?}{tag}"),
                    &[got],
                    &[reference::sum(&x)],
                    |_| sum_rel_tol::<T>() * abs_sum,
                )?;
                if T::DTYPE != DType::I32 {
                    let mut out = poisoned::<T::SumAcc>(&s, 1, 0)?;
                    ops::mean(&k, &s, algo, &dx.slice(off..)?, &mut out)?;
                    let got = T::acc_f64(s.clone_dtoh(&out)?[0]);
                    let want = reference::mean(&x);
                    ensure!(
                        n > 0 || got.is_nan(),
                        "mean of nothing must be NaN, got {got}"
                    );
                    check_close(&format!("mean {algo:?}{tag}"), &[got], &[want], |_| {
                        sum_rel_tol::<T>() * abs_sum / n as f64 + ulp(DType::F32, want)
                    })?;
                }
            }
            let mut out = poisoned::<T::Scalar>(&s, 1, 0)?;
            ops::max(&k, &s, ReduceAlgo::Fast, &dx.slice(off..)?, &mut out)?;
            let got = s.clone_dtoh(&out)?[0];
            let want = reference::max(&x); // exact
            ensure!(got == want, "max{tag}: got {got:?}, expected {want:?}");
        }
    }
    if T::DTYPE == DType::I32 {
        // The i64 accumulator must not overflow where an i32 one would.
        let x = vec![i32::MAX; 4099];
        let dx = s.clone_htod(&x)?;
        let mut out = poisoned::<i64>(&s, 1, 0)?;
        let dxs: &DeviceSlice<i32> = &dx;
        ops::sum(&k, &s, ReduceAlgo::Fast, dxs, &mut out)?;
        ensure!(
            s.clone_dtoh(&out)?[0] == reference::sum_i32(&x),
            "i32 sum must be exact in i64"
        );
    }
    Ok(())
}

pub(crate) fn reduce_max_nan_and_empty() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let mut x = small_data::<f32>(17, 5000);
    x[4321] = f32::NAN;
    let dx = s.clone_htod(&x)?;
    let mut out = s.alloc_zeros::<f32>(1)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &dx, &mut out)?;
    ensure!(s.clone_dtoh(&out)?[0].is_nan(), "max must propagate NaN");
    let empty = s.alloc_zeros::<f32>(0)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &empty, &mut out)?;
    ensure!(
        s.clone_dtoh(&out)?[0] == f32::NEG_INFINITY,
        "max of nothing is -inf"
    );
    let ei = s.alloc_zeros::<i32>(0)?;
    let mut oi = s.alloc_zeros::<i32>(1)?;
    ops::max(&k, &s, ReduceAlgo::Fast, &ei, &mut oi)?;
    ensure!(
        s.clone_dtoh(&oi)?[0] == i32::MIN,
        "i32 max of nothing is i32::MIN"
    );
    s.memset_bytes(&mut out, 0xFF)?;
    ops::sum(&k, &s, ReduceAlgo::Fast, &empty, &mut out)?;
    ensure!(s.clone_dtoh(&out)?[0] == 0.0, "sum of nothing is 0");
    let r = ops::max(&k, &s, ReduceAlgo::Tree, &dx, &mut out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "tree max does not exist: {r:?}"
    );
    Ok(())
}

pub(crate) fn reduce_deterministic() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let x = small_data::<f32>(18, (1 << 20) + 3);
    let dx = s.clone_htod(&x)?;
    for algo in [ReduceAlgo::Fast, ReduceAlgo::Tree] {
        let mut bits = Vec::new();
        for _ in 0..3 {
            let mut out = poisoned::<f32>(&s, 1, 0)?;
            ops::sum(&k, &s, algo, &dx, &mut out)?;
            bits.push(s.clone_dtoh(&out)?[0].to_bits());
        }
        ensure!(
            bits.iter().all(|&b| b == bits[0]),
            "{algo:?} sum is not deterministic: {bits:08x?}"
        );
    }
    Ok(())
}

pub(crate) fn reduce_rows<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D {
        for &off in OFFSETS {
            let x = small_data::<T>(19, rows * cols);
            let dx = upload(&s, &x, off)?;
            let tag = format!("<{}> rows={rows} cols={cols} off={off}", T::DTYPE);
            let mut o = poisoned::<T::SumAcc>(&s, rows, off)?;
            ops::rows_sum(
                &k,
                &s,
                &dx.slice(off..)?,
                &mut o.slice_mut(off..)?,
                rows,
                cols,
            )?;
            let got: Vec<f64> = download(&s, &o, off)?.into_iter().map(T::acc_f64).collect();
            let abs: Vec<f64> = (0..rows)
                .map(|r| {
                    x[r * cols..(r + 1) * cols]
                        .iter()
                        .map(|v| v.to_f64().abs())
                        .sum()
                })
                .collect();
            // f32 accumulators: 1e-6·Σ|row|; f64: 1e-13·Σ|row|.
            check_close(
                &format!("rows_sum{tag}"),
                &got,
                &reference::rows_sum(&x, rows, cols),
                |i| sum_rel_tol::<T>() * abs[i],
            )?;
            let mut o = poisoned::<T::Scalar>(&s, rows, off)?;
            ops::rows_max(
                &k,
                &s,
                &dx.slice(off..)?,
                &mut o.slice_mut(off..)?,
                rows,
                cols,
            )?;
            let got = download(&s, &o, off)?;
            let want = reference::rows_max(&x, rows, cols); // exact
            ensure!(
                got == want,
                "rows_max{tag}: differs (first: {:?})",
                got.iter().zip(&want).position(|(a, b)| a != b)
            );
        }
    }
    Ok(())
}

/// `[outer, size, inner]` shapes for reductions over the middle dimension: warp rows, split
/// rows (long and few), thin columns, columns with and without a split, several outer slices.
pub(crate) const SHAPES_3D: &[(usize, usize, usize)] = &[
    (1, 0, 7),
    (3, 5, 1),
    (1, 3000, 1),
    (2, 100_003, 1),
    (5, 7, 1000),
    (1, 4096, 1),
    (1, 33, 1),
    (1, 4096, 33),
    (3, 700, 65),
    (1, 31, 70_001),
    (2, 64, 4099),
    // Rows of whole 16-byte packs (reduce_cols16 when aligned): a bias gradient's shape, and
    // a split one.
    (1, 16_384, 768),
    (2, 300, 2304),
];

pub(crate) fn reduce_dims<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(outer, size, inner) in SHAPES_3D {
        let x = small_data::<T>(29, outer * size * inner);
        let dx = upload(&s, &x, 0)?;
        let tag = format!("<{}> [{outer}, {size}, {inner}]", T::DTYPE);
        let mut want_sum = Vec::new();
        let mut abs_sum = Vec::new();
        let mut want_max = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                let col: Vec<T> = (0..size).map(|r| x[(o * size + r) * inner + i]).collect();
                want_sum.push(reference::sum(&col));
                abs_sum.push(col.iter().map(|v| v.to_f64().abs()).sum::<f64>());
                want_max.push(reference::max(&col));
            }
        }
        let mut o = poisoned::<T::SumAcc>(&s, outer * inner, 0)?;
        ops::sum_dim(&k, &s, &dx, &mut o, (outer, size, inner))?;
        let got: Vec<f64> = download(&s, &o, 0)?.into_iter().map(T::acc_f64).collect();
        // f32 accumulators: 1e-6·Σ|column|; f64: 1e-13·Σ|column|.
        check_close(&format!("sum_dim{tag}"), &got, &want_sum, |i| {
            sum_rel_tol::<T>() * abs_sum[i]
        })?;
        // Where the column kernels run (inner > 1, a reduced dimension past the thin launch's 32),
        // the same input one element off 16-byte alignment takes the scalar column kernel where
        // the aligned one took reduce_cols16: the sums must agree bit for bit. (The row kernels'
        // 16-byte loads group a row's elements by its alignment, so theirs may differ.)
        if inner > 1 && size > 32 {
            let dx1 = upload(&s, &x, 1)?;
            let mut o1 = poisoned::<T::SumAcc>(&s, outer * inner, 0)?;
            ops::sum_dim(&k, &s, &dx1.slice(1..)?, &mut o1, (outer, size, inner))?;
            let (a, b) = (download(&s, &o, 0)?, download(&s, &o1, 0)?);
            ensure!(
                a.iter()
                    .zip(&b)
                    .all(|(p, q)| T::acc_f64(*p).to_bits() == T::acc_f64(*q).to_bits()),
                "sum_dim{tag}: aligned and unaligned inputs differ (first: {:?})",
                a.iter()
                    .zip(&b)
                    .position(|(p, q)| T::acc_f64(*p).to_bits() != T::acc_f64(*q).to_bits())
            );
        }
        let mut o = poisoned::<T::Scalar>(&s, outer * inner, 0)?;
        ops::max_dim(&k, &s, &dx, &mut o, (outer, size, inner))?;
        let got = download(&s, &o, 0)?;
        ensure!(
            got == want_max,
            "max_dim{tag}: differs (first: {:?})",
            got.iter().zip(&want_max).position(|(a, b)| a != b)
        );
    }
    Ok(())
}
