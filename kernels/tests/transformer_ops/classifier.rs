//! The fused classifier: loss and dlogits in one pass over the vocabulary, the loss-only kernel,
//! in place and out of place.

use super::*;

pub(crate) fn classifier_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &rows in &[0usize, 1, 7, 513] {
        for &classes in &[1usize, 8, 65, 50257] {
            for &off in OFFSETS {
                let what = format!("classifier {dt} [{rows}, {classes}] offset {off}");
                let n = rows * classes;
                let logits: Vec<T> = data(21, n, 4.0);
                let mut rng = Rng::new(22);
                let mut targets: Vec<i32> = (0..rows)
                    .map(|_| (rng.next_u64() % classes as u64) as i32)
                    .collect();
                if rows == 7 {
                    targets[3] = -1; // out of range: NaN loss and row
                    targets[5] = classes as i32;
                }
                let (g, scale) = (1.5f64, 1.0 / rows.max(1) as f64);
                let gs = g * scale;
                let bl = upload(&s, &logits, off)?;
                let bt = upload(&s, &targets, off)?;
                let bg = s.clone_htod(&[<T::Scalar as Compute>::of_f64(g)])?;
                let mut loss = poisoned::<T::Scalar>(&s, rows, off)?;
                // dlogits at the other 16-byte phase than the logits: the gradient pass cannot
                // use the logits' packet split, and the losses must not depend on it.
                let doff = 1 - off;
                let mut dl = poisoned::<T>(&s, n, doff)?;
                ops::fused_classifier::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &bg,
                    &mut loss.slice_mut(off..)?,
                    &mut dl.slice_mut(doff..)?,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                let got_loss = download(&s, &loss, off)?;
                let got_dl = download(&s, &dl, doff)?;
                let (want_loss, want_dl) =
                    reference::fused_classifier(&logits, &targets, rows, classes, gs);
                check(
                    &format!("{what}: loss"),
                    &scalars_f64(&got_loss),
                    &want_loss,
                    |_, w| {
                        if dt == DType::F64 {
                            1e-12 * (1.0 + w.abs())
                        } else {
                            2e-5 * (1.0 + w.abs())
                        }
                    },
                )?;
                check(
                    &format!("{what}: dlogits"),
                    &got_dl,
                    &want_dl,
                    |_, w| match dt {
                        DType::F32 => 1e-5 * w.abs() + 1e-7 * gs,
                        DType::F64 => 1e-12 * (w.abs() + gs),
                        _ => ulp(dt, w) + 1e-5 * w.abs(),
                    },
                )?;
                // The loss-only kernel gives the same losses (its pass splits the row by the
                // logits' address alone, as the fused kernel's loss pass does, even with dlogits
                // at another 16-byte phase; the two are separately compiled, so within 1e-6).
                let mut loss2 = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::classifier_loss::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &mut loss2.slice_mut(off..)?,
                    rows,
                    classes,
                )?;
                let same_loss = |_: usize, w: f64| {
                    if dt == DType::F64 {
                        1e-14 * (1.0 + w.abs())
                    } else {
                        1e-6 * (1.0 + w.abs())
                    }
                };
                check(
                    &format!("{what}: classifier_loss vs fused (dlogits at offset {doff})"),
                    &scalars_f64(&download(&s, &loss2, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                // In place: the same losses and gradient, bit for bit.
                let mut inplace = upload(&s, &logits, off)?;
                let mut loss3 = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::fused_classifier_inplace::<T>(
                    &k,
                    &s,
                    &mut inplace.slice_mut(off..)?,
                    &bt.slice(off..)?,
                    &bg,
                    &mut loss3.slice_mut(off..)?,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                check(
                    &format!("{what}: in-place loss"),
                    &scalars_f64(&download(&s, &loss3, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                let all = s.clone_dtoh(&inplace)?;
                check(
                    &format!("{what}: in-place dlogits"),
                    &all[off..],
                    &got_dl,
                    |_, w| 2.0 * ulp(dt, w),
                )?;
                // The loss pass that saves log-sum-exps: the same losses, lse = loss + x[t];
                // then the gradient from lse alone, over a fresh copy of the logits.
                let mut loss4 = poisoned::<T::Scalar>(&s, rows, off)?;
                let mut lse = poisoned::<T::Scalar>(&s, rows, off)?;
                ops::classifier_loss_lse::<T>(
                    &k,
                    &s,
                    &bl.slice(off..)?,
                    &bt.slice(off..)?,
                    &mut loss4.slice_mut(off..)?,
                    &mut lse.slice_mut(off..)?,
                    rows,
                    classes,
                )?;
                let got_lse = scalars_f64(&download(&s, &lse, off)?);
                check(
                    &format!("{what}: classifier_loss_lse loss"),
                    &scalars_f64(&download(&s, &loss4, off)?),
                    &scalars_f64(&got_loss),
                    same_loss,
                )?;
                let want_lse: Vec<f64> = (0..rows)
                    .map(|r| {
                        let row = &logits[r * classes..(r + 1) * classes];
                        let m = row
                            .iter()
                            .map(|v| v.to_f64())
                            .fold(f64::NEG_INFINITY, f64::max);
                        m + row.iter().map(|v| (v.to_f64() - m).exp()).sum::<f64>().ln()
                    })
                    .collect();
                check(&format!("{what}: lse"), &got_lse, &want_lse, |_, w| {
                    if dt == DType::F64 {
                        1e-12 * (1.0 + w.abs())
                    } else {
                        2e-6 * (1.0 + w.abs())
                    }
                })?;
                let mut fresh = upload(&s, &logits, off)?;
                ops::classifier_grad_lse_inplace::<T>(
                    &k,
                    &s,
                    &mut fresh.slice_mut(off..)?,
                    &bt.slice(off..)?,
                    &lse.slice(off..)?,
                    &bg,
                    rows,
                    classes,
                    <T::Scalar as Compute>::of_f64(scale),
                )?;
                let from_lse = s.clone_dtoh(&fresh)?;
                if rows > 0 {
                    // One log-sum-exp short: refused, the logits untouched.
                    let mut kept = upload(&s, &logits, off)?;
                    let e = ops::classifier_grad_lse_inplace::<T>(
                        &k,
                        &s,
                        &mut kept.slice_mut(off..)?,
                        &bt.slice(off..)?,
                        &lse.slice(off..off + rows - 1)?,
                        &bg,
                        rows,
                        classes,
                        <T::Scalar as Compute>::of_f64(scale),
                    );
                    ensure!(e.is_err(), "{what}: a short lse must be refused");
                    check_bits(
                        &format!("{what}: logits after a refused gradient"),
                        &s.clone_dtoh(&kept)?[off..],
                        &logits,
                    )?;
                }
                // exp(x − lse) carries the rounding of x − lse (|lse| up to ~15 here): a few
                // 1e-6 relative in f32, beside the reference's own tolerance.
                check(
                    &format!("{what}: dlogits from lse"),
                    &from_lse[off..],
                    &want_dl,
                    |_, w| match dt {
                        DType::F32 => 2e-5 * w.abs() + 1e-7 * gs,
                        DType::F64 => 1e-12 * (w.abs() + gs),
                        _ => ulp(dt, w) + 2e-5 * w.abs(),
                    },
                )?;
            }
        }
    }
    Ok(())
}
