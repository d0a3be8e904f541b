//! LayerNorm forward and backward (one pass against two), and the fused residual add + LayerNorm.

use super::*;

pub(crate) const LN_ROWS: &[usize] = &[0, 1, 7, 513];
/// Warp kernels up to 1024 columns (f64: 512 forward, 256 backward), block kernels above
/// (in registers up to 4096, f64 2048; 5000 re-reads rows).
pub(crate) const LN_COLS: &[usize] = &[1, 3, 32, 33, 300, 768, 1023, 2048, 4096, 5000];

pub(crate) fn layer_norm_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let eps = 1e-5;
    for &rows in LN_ROWS {
        for &cols in LN_COLS {
            for &off in OFFSETS {
                let what = format!("layer_norm {} [{rows}, {cols}] offset {off}", T::DTYPE);
                let n = rows * cols;
                // A mean far from 0 checks the two-pass variance.
                let x: Vec<T> = data::<f64>(1, n, 2.0)
                    .iter()
                    .map(|v| T::from_f64(v + 3.0))
                    .collect();
                let w: Vec<T> = data(2, cols, 1.5);
                let b: Vec<T> = data(3, cols, 0.5);
                let dy: Vec<T> = data(4, n, 1.0);
                let (dx_, dw_, db_, ddy) = (
                    upload(&s, &x, off)?,
                    upload(&s, &w, off)?,
                    upload(&s, &b, off)?,
                    upload(&s, &dy, off)?,
                );
                let (xv, wv, bv, dyv) = (
                    dx_.slice(off..)?,
                    dw_.slice(off..)?,
                    db_.slice(off..)?,
                    ddy.slice(off..)?,
                );
                let mut y = poisoned::<T>(&s, n, off)?;
                let mut mean = poisoned::<T::Scalar>(&s, rows, off)?;
                let mut rstd = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::layer_norm_fwd::<T>(
                    &k,
                    &s,
                    &xv,
                    &wv,
                    &bv,
                    &mut y.slice_mut(off..)?,
                    &mut mean.slice_mut(off..)?,
                    &mut rstd.slice_mut(off..)?,
                    rows,
                    cols,
                    <T::Scalar as Compute>::of_f64(eps),
                )?;
                let (want_y, want_m, want_r) = reference::layer_norm(&x, &w, &b, rows, cols, eps);
                let got_y = download(&s, &y, off)?;
                let got_m = scalars_f64(&download(&s, &mean, off)?);
                let got_r = scalars_f64(&download(&s, &rstd, off)?);
                let dt = T::DTYPE;
                check(&format!("{what}: y"), &got_y, &want_y, |_, w| match dt {
                    DType::F32 => 2e-5 * (1.0 + w.abs()),
                    DType::F64 => 1e-12 * (1.0 + w.abs()),
                    _ => ulp(dt, w) + 1e-5,
                })?;
                let rel = if dt == DType::F64 { 1e-12 } else { 1e-5 };
                check(&format!("{what}: mean"), &got_m, &want_m, |_, w| {
                    rel * (1.0 + w.abs())
                })?;
                check(&format!("{what}: rstd"), &got_r, &want_r, |_, w| {
                    rel * w.abs()
                })?;

                // Backward, from the device's statistics; twice, for determinism.
                let ws = ops::layer_norm_workspace_len(rows, cols)?;
                let mut runs = Vec::new();
                for _ in 0..2 {
                    let mut dx = poisoned::<T>(&s, n, off)?;
                    let mut dw = poisoned::<T>(&s, cols, off)?;
                    let mut db = poisoned::<T>(&s, cols, off)?;
                    let mut pw = poisoned::<T::Scalar>(&s, ws, 0)?;
                    let mut pb = poisoned::<T::Scalar>(&s, ws, 0)?;
                    ops::layer_norm_bwd::<T>(
                        &k,
                        &s,
                        &xv,
                        &wv,
                        &mean.slice(off..)?,
                        &rstd.slice(off..)?,
                        &dyv,
                        &mut dx.slice_mut(off..)?,
                        &mut dw.slice_mut(off..)?,
                        &mut db.slice_mut(off..)?,
                        &mut pw,
                        &mut pb,
                        rows,
                        cols,
                    )?;
                    runs.push((
                        download(&s, &dx, off)?,
                        download(&s, &dw, off)?,
                        download(&s, &db, off)?,
                    ));
                }
                let (want_dx, want_dw, want_db) =
                    reference::layer_norm_bwd(&x, &w, &got_m, &got_r, &dy, rows, cols);
                let (got_dx, got_dw, got_db) = &runs[0];
                check(&format!("{what}: dx"), got_dx, &want_dx, |_, w| match dt {
                    DType::F32 => 1e-4 * (1.0 + w.abs()),
                    DType::F64 => 1e-10 * (1.0 + w.abs()),
                    _ => 2.0 * ulp(dt, w) + 1e-3,
                })?;
                // Σ|terms| per column bounds the summation error.
                let mut abs_w = vec![0.0f64; cols];
                let mut abs_b = vec![0.0f64; cols];
                for r in 0..rows {
                    for c in 0..cols {
                        let d = dy[r * cols + c].to_f64();
                        let xh = (x[r * cols + c].to_f64() - got_m[r]) * got_r[r];
                        abs_w[c] += (d * xh).abs();
                        abs_b[c] += d.abs();
                    }
                }
                let sum_tol = if dt == DType::F64 { 1e-12 } else { 2e-5 };
                check(&format!("{what}: dweight"), got_dw, &want_dw, |i, w| {
                    sum_tol * abs_w[i] + ulp(dt, w)
                })?;
                check(&format!("{what}: dbias"), got_db, &want_db, |i, w| {
                    sum_tol * abs_b[i] + ulp(dt, w)
                })?;
                check_bits(&format!("{what}: dx run 2"), &runs[1].0, got_dx)?;
                check_bits(&format!("{what}: dweight run 2"), &runs[1].1, got_dw)?;
                check_bits(&format!("{what}: dbias run 2"), &runs[1].2, got_db)?;
            }
        }
    }
    // Zero columns with rows is an error, named.
    let x = s.alloc_zeros::<T>(0)?;
    let mut m = s.alloc_zeros::<T::Scalar>(2)?;
    let mut r = s.alloc_zeros::<T::Scalar>(2)?;
    let mut y = s.alloc_zeros::<T>(0)?;
    let e = ops::layer_norm_fwd::<T>(
        &k,
        &s,
        &x,
        &x,
        &x,
        &mut y,
        &mut m,
        &mut r,
        2,
        0,
        <T::Scalar as Compute>::of_f64(eps),
    );
    ensure!(e.is_err(), "layer_norm of [2, 0] must fail");
    Ok(())
}

/// The one-pass backward (`layer_norm_bwd_fused_*`: dx and the parameter partials together,
/// what `ops::layer_norm_bwd` runs for rows up to 1024 columns) against the two-kernel path it
/// replaced (`layer_norm_bwd_dx_*`, `layer_norm_bwd_params_*`, then the same
/// `layer_norm_bwd_params_reduce_*`), launched here through the raw handles: dx, dweight and
/// dbias **bit for bit**, with and without a pending gradient, at offsets 0 and 1 (the packet
/// and the scalar paths), at chunkings of 1 to 256 parts.
macro_rules! one_pass_equals_two_pass {
    ($name:ident, $t:ty, $dx:ident, $params:ident, $reduce:ident) => {
        pub(crate) fn $name() -> TestResult {
            type T = $t;
            type S = <T as Element>::Scalar;
            let (_ctx, s, k) = setup()?;
            for &rows in &[1usize, 7, 64, 513, 4099, 16384] {
                for &cols in &[1usize, 3, 32, 33, 256, 300, 768, 1000, 1023, 1024] {
                    if cols > 256 && T::DTYPE == DType::F64 {
                        continue; // f64 rows a warp holds: up to 256 columns
                    }
                    for &off in OFFSETS {
                        for add in [false, true] {
                            let what = format!(
                                "one-pass layer_norm_bwd {} [{rows}, {cols}] offset {off} \
                                 pending {add}",
                                T::DTYPE
                            );
                            let n = rows * cols;
                            let x: Vec<T> = data(11, n, 2.0);
                            let w: Vec<T> = data(12, cols, 1.5);
                            let dy: Vec<T> = data(13, n, 1.0);
                            let pend: Vec<T> = data(14, n, 1.0);
                            let (bx, bw, bdy, bp) = (
                                upload(&s, &x, off)?,
                                upload(&s, &w, off)?,
                                upload(&s, &dy, off)?,
                                upload(&s, &pend, off)?,
                            );
                            let (xv, wv, dyv, pv) = (
                                bx.slice(off..)?,
                                bw.slice(off..)?,
                                bdy.slice(off..)?,
                                bp.slice(off..)?,
                            );
                            let mut y = s.alloc_zeros::<T>(n)?;
                            let mut mean = s.alloc_zeros::<S>(rows)?;
                            let mut rstd = s.alloc_zeros::<S>(rows)?;
                            ops::layer_norm_fwd::<T>(
                                &k,
                                &s,
                                &xv,
                                &wv,
                                &wv,
                                &mut y,
                                &mut mean,
                                &mut rstd,
                                rows,
                                cols,
                                <S as Compute>::of_f64(1e-5),
                            )?;
                            let ws = ops::layer_norm_workspace_len(rows, cols)?;
                            let (parts, chunk) = ops::layer_norm_parts(rows);
                            // The op (one pass).
                            let mut dx1 = poisoned::<T>(&s, n, off)?;
                            let mut dw1 = s.alloc_zeros::<T>(cols)?;
                            let mut db1 = s.alloc_zeros::<T>(cols)?;
                            let mut pw = s.alloc_zeros::<S>(ws)?;
                            let mut pb = s.alloc_zeros::<S>(ws)?;
                            if add {
                                ops::layer_norm_bwd_add::<T>(
                                    &k,
                                    &s,
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &pv,
                                    &mut dx1.slice_mut(off..)?,
                                    &mut dw1,
                                    &mut db1,
                                    &mut pw,
                                    &mut pb,
                                    rows,
                                    cols,
                                )?;
                            } else {
                                ops::layer_norm_bwd::<T>(
                                    &k,
                                    &s,
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &mut dx1.slice_mut(off..)?,
                                    &mut dw1,
                                    &mut db1,
                                    &mut pw,
                                    &mut pb,
                                    rows,
                                    cols,
                                )?;
                            }
                            // The two-kernel path, as ops::layer_norm_bwd launched it before.
                            let mut dx2 = poisoned::<T>(&s, n, off)?;
                            let mut dw2 = s.alloc_zeros::<T>(cols)?;
                            let mut db2 = s.alloc_zeros::<T>(cols)?;
                            let mut pw2 = s.alloc_zeros::<S>(ws)?;
                            let mut pb2 = s.alloc_zeros::<S>(ws)?;
                            let (r, c) = (rows as i32, cols as i32);
                            let packet = 16 / std::mem::size_of::<T>();
                            let vec = cols % packet == 0 && off == 0;
                            let tile = if vec { 32 * packet } else { 32 };
                            // SAFETY: the kernels' launch contracts (layer_norm.cu): dx block
                            // 256 (8 rows a block), params block (32, 8) with a column-tile grid
                            // and `parts` chunks of `chunk` rows (parts · cols = ws partials),
                            // reduce block (32, 16); every buffer holds what the shapes name.
                            unsafe {
                                k.$dx()?.launch(
                                    &s,
                                    &LaunchConfig::new(rows.div_ceil(8) as u32, 256),
                                    &xv,
                                    &wv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    if add { &pv } else { &dyv },
                                    add as i32,
                                    &mut dx2.slice_mut(off..)?,
                                    r,
                                    c,
                                )?;
                                k.$params()?.launch(
                                    &s,
                                    &LaunchConfig::new(
                                        (cols.div_ceil(tile) as u32, parts as u32, 1),
                                        (32, 8, 1),
                                    ),
                                    &xv,
                                    &mean,
                                    &rstd,
                                    &dyv,
                                    &mut pw2,
                                    &mut pb2,
                                    r,
                                    c,
                                    chunk as i32,
                                )?;
                                k.$reduce()?.launch(
                                    &s,
                                    &LaunchConfig::new(cols.div_ceil(32) as u32, (32, 16, 1)),
                                    &pw2,
                                    &pb2,
                                    &mut dw2,
                                    &mut db2,
                                    parts as i32,
                                    c,
                                )?;
                            }
                            check_bits(
                                &format!("{what}: dx"),
                                &download(&s, &dx1, off)?,
                                &download(&s, &dx2, off)?,
                            )?;
                            for (name, a, b) in [("partial_w", &pw, &pw2), ("partial_b", &pb, &pb2)]
                            {
                                let (a, b) = (s.clone_dtoh(a)?, s.clone_dtoh(b)?);
                                check_bits(&format!("{what}: {name}"), &a, &b)?;
                            }
                            for (name, a, b) in [("dweight", &dw1, &dw2), ("dbias", &db1, &db2)] {
                                let (a, b) = (s.clone_dtoh(a)?, s.clone_dtoh(b)?);
                                check_bits(&format!("{what}: {name}"), &a, &b)?;
                            }
                        }
                    }
                }
            }
            Ok(())
        }
    };
}
one_pass_equals_two_pass!(
    ln_one_pass_f32,
    f32,
    layer_norm_bwd_dx_f32,
    layer_norm_bwd_params_f32,
    layer_norm_bwd_params_reduce_f32
);
one_pass_equals_two_pass!(
    ln_one_pass_f64,
    f64,
    layer_norm_bwd_dx_f64,
    layer_norm_bwd_params_f64,
    layer_norm_bwd_params_reduce_f64
);
one_pass_equals_two_pass!(
    ln_one_pass_f16,
    f16,
    layer_norm_bwd_dx_f16,
    layer_norm_bwd_params_f16,
    layer_norm_bwd_params_reduce_f16
);
one_pass_equals_two_pass!(
    ln_one_pass_bf16,
    bf16,
    layer_norm_bwd_dx_bf16,
    layer_norm_bwd_params_bf16,
    layer_norm_bwd_params_reduce_bf16
);

/// `layer_norm_fwd_add` against `layer_norm_fwd` of its own `sum` (bit for bit: the sum is
/// rounded once and normalized from the rounded values) and `sum` against the host's rounded
/// sum; `layer_norm_bwd_add` against `layer_norm_bwd` (dweight, dbias bit for bit) and against
/// the host's `pending + dx`. Residual and pending buffers at every offset pairing with `x`
/// (packet path, scalar path, mixed alignment).
pub(crate) fn layer_norm_add_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let eps = 1e-5;
    let dt = T::DTYPE;
    let sc = |v: f64| <T::Scalar as Compute>::of_f64(v);
    for &rows in LN_ROWS {
        for &cols in LN_COLS {
            for &off in OFFSETS {
                for &roff in OFFSETS {
                    let what = format!(
                        "add_layer_norm {dt} [{rows}, {cols}] offsets x {off}, residual {roff}"
                    );
                    let n = rows * cols;
                    let x: Vec<T> = data::<f64>(11, n, 2.0)
                        .iter()
                        .map(|v| T::from_f64(v + 3.0))
                        .collect();
                    let res: Vec<T> = data(12, n, 1.0);
                    let w: Vec<T> = data(13, cols, 1.5);
                    let b: Vec<T> = data(14, cols, 0.5);
                    let dy: Vec<T> = data(15, n, 1.0);
                    let pend: Vec<T> = data(16, n, 0.5);
                    let (bx, br, bw, bb, bdy, bp) = (
                        upload(&s, &x, off)?,
                        upload(&s, &res, roff)?,
                        upload(&s, &w, off)?,
                        upload(&s, &b, off)?,
                        upload(&s, &dy, off)?,
                        upload(&s, &pend, roff)?,
                    );
                    let (xv, rv, wv, bv) = (
                        bx.slice(off..)?,
                        br.slice(roff..)?,
                        bw.slice(off..)?,
                        bb.slice(off..)?,
                    );
                    let mut sum = poisoned::<T>(&s, n, roff)?;
                    let mut y = poisoned::<T>(&s, n, off)?;
                    let mut mean = poisoned::<T::Scalar>(&s, rows, off)?;
                    let mut rstd = poisoned::<T::Scalar>(&s, rows, off)?;
                    ops::layer_norm_fwd_add::<T>(
                        &k,
                        &s,
                        &xv,
                        &rv,
                        &mut sum.slice_mut(roff..)?,
                        &wv,
                        &bv,
                        &mut y.slice_mut(off..)?,
                        &mut mean.slice_mut(off..)?,
                        &mut rstd.slice_mut(off..)?,
                        rows,
                        cols,
                        sc(eps),
                    )?;
                    let got_sum = download(&s, &sum, roff)?;
                    let want_sum: Vec<T> = x
                        .iter()
                        .zip(&res)
                        .map(|(a, r)| T::from_f64(a.to_f64() + r.to_f64()))
                        .collect();
                    check(&format!("{what}: sum"), &got_sum, &want_sum, |_, w| {
                        ulp(dt, w)
                    })?;
                    // The plain kernel on the device's sum: the same bits. The sum sits where
                    // `sum` did (offset roff), so both kernels take the same path (packets or
                    // scalars: they sum a row in different orders).
                    let bs = upload(&s, &got_sum, roff)?;
                    let mut y2 = poisoned::<T>(&s, n, off)?;
                    let mut m2 = poisoned::<T::Scalar>(&s, rows, off)?;
                    let mut r2 = poisoned::<T::Scalar>(&s, rows, off)?;
                    ops::layer_norm_fwd::<T>(
                        &k,
                        &s,
                        &bs.slice(roff..)?,
                        &wv,
                        &bv,
                        &mut y2.slice_mut(off..)?,
                        &mut m2.slice_mut(off..)?,
                        &mut r2.slice_mut(off..)?,
                        rows,
                        cols,
                        sc(eps),
                    )?;
                    check_bits(
                        &format!("{what}: y"),
                        &download(&s, &y, off)?,
                        &download(&s, &y2, off)?,
                    )?;
                    check_bits(
                        &format!("{what}: mean"),
                        &download(&s, &mean, off)?,
                        &download(&s, &m2, off)?,
                    )?;
                    check_bits(
                        &format!("{what}: rstd"),
                        &download(&s, &rstd, off)?,
                        &download(&s, &r2, off)?,
                    )?;

                    // Backward with and without the pending gradient.
                    let ws = ops::layer_norm_workspace_len(rows, cols)?;
                    let mut outs = Vec::new();
                    for fold in [false, true] {
                        let mut dx = poisoned::<T>(&s, n, roff)?;
                        let mut dw = poisoned::<T>(&s, cols, off)?;
                        let mut db = poisoned::<T>(&s, cols, off)?;
                        let mut pw = poisoned::<T::Scalar>(&s, ws, 0)?;
                        let mut pb = poisoned::<T::Scalar>(&s, ws, 0)?;
                        let (mv, rsv, dyv) =
                            (mean.slice(off..)?, rstd.slice(off..)?, bdy.slice(off..)?);
                        let (xs, dxs) = (bs.slice(roff..)?, &mut dx.slice_mut(roff..)?);
                        let (dws, dbs) = (&mut dw.slice_mut(off..)?, &mut db.slice_mut(off..)?);
                        if fold {
                            ops::layer_norm_bwd_add::<T>(
                                &k,
                                &s,
                                &xs,
                                &wv,
                                &mv,
                                &rsv,
                                &dyv,
                                &bp.slice(roff..)?,
                                dxs,
                                dws,
                                dbs,
                                &mut pw,
                                &mut pb,
                                rows,
                                cols,
                            )?;
                        } else {
                            ops::layer_norm_bwd::<T>(
                                &k, &s, &xs, &wv, &mv, &rsv, &dyv, dxs, dws, dbs, &mut pw, &mut pb,
                                rows, cols,
                            )?;
                        }
                        outs.push((
                            download(&s, &dx, roff)?,
                            download(&s, &dw, off)?,
                            download(&s, &db, off)?,
                        ));
                    }
                    let (plain, folded) = (&outs[0], &outs[1]);
                    check_bits(&format!("{what}: dweight"), &folded.1, &plain.1)?;
                    check_bits(&format!("{what}: dbias"), &folded.2, &plain.2)?;
                    // pending + dx: the plain dx is itself rounded, so allow its rounding and
                    // the fused result's (one each), plus the plain kernel's own tolerance.
                    let m = scalars_f64(&download(&s, &mean, off)?);
                    let r = scalars_f64(&download(&s, &rstd, off)?);
                    let (ref_dx, _, _) =
                        reference::layer_norm_bwd(&got_sum, &w, &m, &r, &dy, rows, cols);
                    let want: Vec<T> = ref_dx
                        .iter()
                        .zip(&pend)
                        .map(|(d, p)| T::from_f64(d.to_f64() + p.to_f64()))
                        .collect();
                    check(
                        &format!("{what}: dx + pending"),
                        &folded.0,
                        &want,
                        |i, w| {
                            let d = ref_dx[i].to_f64().abs();
                            match dt {
                                DType::F32 => 1e-4 * (1.0 + d) + ulp(dt, w),
                                DType::F64 => 1e-10 * (1.0 + d),
                                _ => 2.0 * ulp(dt, d) + ulp(dt, w) + 1e-3,
                            }
                        },
                    )?;
                }
            }
        }
    }
    // A residual of the wrong length is refused before any launch.
    let x = s.alloc_zeros::<T>(6)?;
    let short = s.alloc_zeros::<T>(5)?;
    let mut sum = s.alloc_zeros::<T>(6)?;
    let mut y = s.alloc_zeros::<T>(6)?;
    let mut m = s.alloc_zeros::<T::Scalar>(2)?;
    let mut r = s.alloc_zeros::<T::Scalar>(2)?;
    let w = s.alloc_zeros::<T>(3)?;
    let e = ops::layer_norm_fwd_add::<T>(
        &k,
        &s,
        &x,
        &short,
        &mut sum,
        &w,
        &w,
        &mut y,
        &mut m,
        &mut r,
        2,
        3,
        sc(eps),
    );
    ensure!(
        e.is_err(),
        "add_layer_norm with a 5-element residual for [2, 3] must fail"
    );
    // So is a pending gradient of the wrong length in the backward.
    let ws = ops::layer_norm_workspace_len(2, 3)?;
    let (mut dx, mut dw, mut db) = (
        s.alloc_zeros::<T>(6)?,
        s.alloc_zeros::<T>(3)?,
        s.alloc_zeros::<T>(3)?,
    );
    let (mut pw, mut pb) = (
        s.alloc_zeros::<T::Scalar>(ws)?,
        s.alloc_zeros::<T::Scalar>(ws)?,
    );
    let e = ops::layer_norm_bwd_add::<T>(
        &k, &s, &x, &w, &m, &r, &x, &short, &mut dx, &mut dw, &mut db, &mut pw, &mut pb, 2, 3,
    );
    ensure!(
        e.is_err(),
        "layer_norm_bwd_add with a 5-element pending gradient for [2, 3] must fail"
    );
    Ok(())
}
