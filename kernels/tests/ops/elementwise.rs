//! Vector add and the elementwise ops: every dtype, size and view offset, broadcasting, special
//! values, argument errors.

use super::*;

pub(crate) fn vector_add_both() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let (a, b) = (data::<f32>(1, n), data::<f32>(2, n));
            let want = reference::vector_add(&a, &b); // exact
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for seed_kernel in [true, false] {
                let mut dc = poisoned::<f32>(&s, n, off)?;
                {
                    let mut c = dc.slice_mut(off..)?;
                    let (a, b) = (da.slice(off..)?, db.slice(off..)?);
                    if seed_kernel {
                        ops::vector_add_seed(&k, &s, &a, &b, &mut c)?;
                    } else {
                        ops::vector_add(&k, &s, &a, &b, &mut c)?;
                    }
                }
                let got = download(&s, &dc, off)?;
                check_exact(
                    &format!("vector_add(seed={seed_kernel}) n={n} off={off}"),
                    &got,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

pub(crate) fn binary_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let (a, b) = (data::<T>(3, n), data::<T>(4, n));
            let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
            for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                let want = reference::binary(op, &a, &b); // exact
                let mut dc = poisoned::<T>(&s, n, off)?;
                ops::binary(
                    &k,
                    &s,
                    op,
                    &da.slice(off..)?,
                    &db.slice(off..)?,
                    &mut dc.slice_mut(off..)?,
                )?;
                let got = download(&s, &dc, off)?;
                check_exact(
                    &format!("{op:?}<{}> n={n} off={off}", T::DTYPE),
                    &got,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

/// Operands at view offsets of their own (the sweep's `relu n=2^24 off=1` reads a view one
/// element in and writes an aligned buffer): the kernels' scalar path, a block's loads in one
/// chunk, over sizes around its chunk and packet edges. Exact against the reference, with the
/// elements in front of the output view untouched.
pub(crate) fn elementwise_mixed_offsets<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let sizes = [1usize, 2, 7, 8, 9, 33, 4099, (1 << 20) + 3];
    for &n in &sizes {
        let (x, y) = (data::<T>(11, n), data::<T>(12, n));
        for (xo, oo) in [(1, 2), (2, 1), (1, 1), (3, 3), (0, 1), (1, 0), (7, 7)] {
            let dx = upload(&s, &x, xo)?;
            let mut o = poisoned::<T>(&s, n, oo)?;
            ops::relu(&k, &s, &dx.slice(xo..)?, &mut o.slice_mut(oo..)?)?;
            check_exact(
                &format!("relu<{}> n={n} x+{xo} out+{oo}", T::DTYPE),
                &download(&s, &o, oo)?,
                &reference::relu(&x),
            )?;
        }
        for (ao, bo, oo) in [
            (1, 1, 2),
            (1, 2, 1),
            (2, 1, 1),
            (3, 3, 3),
            (1, 1, 1),
            (0, 0, 1),
        ] {
            let (da, db) = (upload(&s, &x, ao)?, upload(&s, &y, bo)?);
            let mut o = poisoned::<T>(&s, n, oo)?;
            ops::binary(
                &k,
                &s,
                BinaryOp::Add,
                &da.slice(ao..)?,
                &db.slice(bo..)?,
                &mut o.slice_mut(oo..)?,
            )?;
            check_exact(
                &format!("add<{}> n={n} a+{ao} b+{bo} out+{oo}", T::DTYPE),
                &download(&s, &o, oo)?,
                &reference::binary(BinaryOp::Add, &x, &y),
            )?;
        }
    }
    Ok(())
}

/// `binary_broadcast` for every pair of operand shapes broadcasting gives, against the
/// reference (exact), at packet-aligned and misaligned offsets; then its bounds checks.
pub(crate) fn binary_broadcast_all<T: Gen>() -> TestResult {
    use ops::BroadcastOperand as B;
    let (_ctx, s, k) = setup()?;
    let shapes = [
        (0, 5),
        (3, 0),
        (1, 1),
        (3, 1),
        (1, 7),
        (7, 33),
        (513, 768),
        (1024, 16),
        (5, 4099),
    ];
    for (outer, inner) in shapes {
        let kinds = [
            (B::full(inner), B::row()),
            (B::row(), B::full(inner)),
            (B::full(inner), B::column()),
            (B::column(), B::full(inner)),
            (B::full(inner), B::scalar()),
            (B::scalar(), B::full(inner)),
            (B::row(), B::column()),
            (B::column(), B::row()),
        ];
        let len = |m: B| match (m.outer_stride, m.inner_stride) {
            (0, 0) => 1,
            (0, _) => inner,
            (_, 0) => outer,
            _ => outer * inner,
        };
        for (ra, rb) in kinds {
            for &off in OFFSETS {
                let (a, b) = (data::<T>(7, len(ra)), data::<T>(8, len(rb)));
                let (da, db) = (upload(&s, &a, off)?, upload(&s, &b, off)?);
                for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                    let want = reference::binary_broadcast(op, &a, ra, &b, rb, outer, inner);
                    let mut dc = poisoned::<T>(&s, outer * inner, off)?;
                    ops::binary_broadcast(
                        &k,
                        &s,
                        op,
                        &da.slice(off..)?,
                        ra,
                        &db.slice(off..)?,
                        rb,
                        &mut dc.slice_mut(off..)?,
                        outer,
                        inner,
                    )?;
                    let got = download(&s, &dc, off)?;
                    check_exact(
                        &format!(
                            "{op:?}_bcast<{}> [{outer}, {inner}] {ra:?} {rb:?} off={off}",
                            T::DTYPE
                        ),
                        &got,
                        &want,
                    )?;
                }
            }
        }
    }
    // Bounds: a row operand one element short, and an inner stride of 2, are refused.
    let a = upload(&s, &data::<T>(9, 12), 0)?;
    let short = upload(&s, &data::<T>(9, 3), 0)?;
    let mut out = poisoned::<T>(&s, 12, 0)?;
    let e = ops::binary_broadcast(
        &k,
        &s,
        BinaryOp::Add,
        &a,
        B::full(4),
        &short,
        B::row(),
        &mut out,
        3,
        4,
    )
    .unwrap_err();
    ensure!(
        matches!(e, Error::Shape { what: "b", .. }),
        "short row: {e}"
    );
    let two = B {
        outer_stride: 0,
        inner_stride: 2,
    };
    let e = ops::binary_broadcast(
        &k,
        &s,
        BinaryOp::Add,
        &a,
        B::full(4),
        &a,
        two,
        &mut out,
        3,
        4,
    )
    .unwrap_err();
    ensure!(matches!(e, Error::Invalid { .. }), "inner stride 2: {e}");
    Ok(())
}

pub(crate) fn unary_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let alpha = T::scalar(-3.0);
    for &n in SIZES {
        for &off in OFFSETS {
            let (x, y) = (data::<T>(5, n), data::<T>(6, n));
            let dx = upload(&s, &x, off)?;
            let tag = format!("<{}> n={n} off={off}", T::DTYPE);

            let mut o = poisoned::<T>(&s, n, off)?;
            ops::scale(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?, alpha)?;
            check_exact(
                &format!("scale{tag}"),
                &download(&s, &o, off)?,
                &reference::scale(&x, alpha),
            )?; // exact

            let mut dy = upload(&s, &y, off)?;
            ops::axpy(&k, &s, alpha, &dx.slice(off..)?, &mut dy.slice_mut(off..)?)?;
            let got = s.clone_dtoh(&dy.slice(off..)?)?;
            check_exact(&format!("axpy{tag}"), &got, &reference::axpy(alpha, &x, &y))?; // exact

            let mut o = poisoned::<T>(&s, n, off)?;
            ops::relu(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("relu{tag}"),
                &download(&s, &o, off)?,
                &reference::relu(&x),
            )?; // exact

            for v in [2.5, 0.1, -7.0] {
                let value = T::scalar(v);
                let mut o = poisoned::<T>(&s, n, off)?;
                ops::fill(&k, &s, &mut o.slice_mut(off..)?, value)?;
                check_exact(
                    &format!("fill({v}){tag}"),
                    &download(&s, &o, off)?,
                    &reference::fill::<T>(value, n),
                )?; // exact
            }
        }
    }
    Ok(())
}

pub(crate) fn tanh_all<T: Gen + Float>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // f32/f64: 4 ulp (CUDA tanhf/tanh ≤ 2 ulp, CPU libm ≤ 1 ulp, and rounding); f16/bf16: 1 ulp.
    let ulps = if matches!(T::DTYPE, DType::F16 | DType::BF16) {
        1.0
    } else {
        4.0
    };
    for &n in SIZES {
        for &off in OFFSETS {
            let x = data::<T>(7, n);
            let dx = upload(&s, &x, off)?;
            let mut o = poisoned::<T>(&s, n, off)?;
            ops::tanh(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            let got = download(&s, &o, off)?;
            check_ulps(
                &format!("tanh<{}> n={n} off={off}", T::DTYPE),
                &got,
                &reference::tanh(&x),
                ulps,
            )?;
        }
    }
    Ok(())
}

pub(crate) fn elementwise_special_values() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // i32 division: x / 0 == 0, MIN / -1 == MIN, truncation toward zero; wrapping add/mul.
    let a = [7, -7, i32::MIN, 5, i32::MAX, i32::MIN, 0, -1];
    let b = [2, 2, -1, 0, 1, -1, 0, i32::MIN];
    let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
        let mut o = poisoned::<i32>(&s, a.len(), 0)?;
        ops::binary(&k, &s, op, &da, &db, &mut o)?;
        check_exact(
            &format!("{op:?}<i32> specials"),
            &s.clone_dtoh(&o)?,
            &reference::binary(op, &a, &b),
        )?;
    }
    ensure!(
        reference::binary(BinaryOp::Div, &a, &b)[..4] == [3, -3, i32::MIN, 0],
        "reference i32 division"
    );
    // f32: NaN, infinities, signed zeros, subnormals.
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1e-40,
        -1e-40,
        -2.0,
    ];
    let y = [1.0, f32::INFINITY, 0.0, -0.0, 0.0, 3.0, 1e-40, f32::NAN];
    let (dx, dy) = (s.clone_htod(&x)?, s.clone_htod(&y)?);
    let mut o = s.alloc_zeros::<f32>(x.len())?;
    s.memset_bytes(&mut o, 0x11)?; // not NaN, so NaN results are really written
    ops::relu(&k, &s, &dx, &mut o)?;
    let got = s.clone_dtoh(&o)?;
    check_exact("relu specials", &got, &reference::relu(&x))?;
    ensure!(
        got[3].to_bits() == (-0.0f32).to_bits(),
        "relu(-0.0) must stay -0.0"
    );
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
        s.memset_bytes(&mut o, 0x11)?;
        ops::binary(&k, &s, op, &dx, &dy, &mut o)?;
        check_exact(
            &format!("{op:?}<f32> specials"),
            &s.clone_dtoh(&o)?,
            &reference::binary(op, &x, &y),
        )?;
    }
    // f16 overflow and rounding to nearest even.
    let h: Vec<f16> = [60000.0f32, 1.0, 2049.0, 0.1]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let dh = s.clone_htod(&h)?;
    let mut oh = poisoned::<f16>(&s, h.len(), 0)?;
    ops::binary(&k, &s, BinaryOp::Add, &dh, &dh, &mut oh)?;
    check_exact(
        "f16 add specials",
        &s.clone_dtoh(&oh)?,
        &reference::binary(BinaryOp::Add, &h, &h),
    )?;
    Ok(())
}

pub(crate) fn length_errors() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let a = s.alloc_zeros::<f32>(10)?;
    let b = s.alloc_zeros::<f32>(9)?;
    let mut c = s.alloc_zeros::<f32>(10)?;
    let r = ops::binary(&k, &s, BinaryOp::Add, &a, &b, &mut c);
    ensure!(
        matches!(
            r,
            Err(Error::Length {
                what: "b",
                expected: 10,
                found: 9,
                ..
            })
        ),
        "binary length: {r:?}"
    );
    let r = ops::matmul(&k, &s, MatmulAlgo::Naive, &a, &a, &mut c, 2, 5, 4);
    ensure!(
        matches!(r, Err(Error::Shape { what: "a", .. })),
        "matmul shape: {r:?}"
    );
    let h = s.alloc_zeros::<f16>(4)?;
    let mut ho = s.alloc_zeros::<f16>(4)?;
    let r = ops::matmul(&k, &s, MatmulAlgo::Tiled16, &h, &h, &mut ho, 2, 2, 2);
    ensure!(
        matches!(
            r,
            Err(Error::Unsupported {
                dtype: DType::F16,
                ..
            })
        ),
        "matmul f16: {r:?}"
    );
    let i = s.alloc_zeros::<i32>(4)?;
    let mut io = s.alloc_zeros::<i32>(4)?;
    let r = ops::matmul(&k, &s, MatmulAlgo::Fast, &i, &i, &mut io, 2, 2, 2);
    ensure!(
        matches!(
            r,
            Err(Error::Unsupported {
                dtype: DType::I32,
                ..
            })
        ),
        "matmul fast i32: {r:?}"
    );
    let mut sum_out = s.alloc_zeros::<i64>(1)?;
    let r = ops::mean(&k, &s, ReduceAlgo::Fast, &i, &mut sum_out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "mean i32: {r:?}"
    );
    let r = ops::sum(&k, &s, ReduceAlgo::Tree, &i, &mut sum_out);
    ensure!(
        matches!(r, Err(Error::Unsupported { .. })),
        "tree sum i32: {r:?}"
    );
    let mut out2 = s.alloc_zeros::<f32>(2)?;
    let r = ops::sum(&k, &s, ReduceAlgo::Fast, &a, &mut out2);
    ensure!(
        matches!(r, Err(Error::Length { what: "out", .. })),
        "sum out length: {r:?}"
    );
    let r = ops::copy_strided(&k, &s, &a, &mut out2, 10);
    ensure!(
        matches!(r, Err(Error::Shape { what: "src", .. })),
        "copy_strided bounds: {r:?}"
    );
    Ok(())
}
