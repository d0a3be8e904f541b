//! Global-norm gradient clipping.

use super::*;

pub(crate) fn clip_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let sizes = [0usize, 1, 3, 1000, 65537, (1 << 20) + 5];
    let host: Vec<Vec<T>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| data(50 + i as u64, n, 0.01))
        .collect();
    let slices: Vec<&[T]> = host.iter().map(|v| v.as_slice()).collect();
    for &max_norm in &[1e-3, 1.0, 1e6] {
        let (want_norm, want_scale) = reference::clip_grad_norm(&slices, max_norm);
        let mut norms = Vec::new();
        for _ in 0..2 {
            let mut bufs: Vec<DeviceBuffer<T>> =
                host.iter().map(|v| upload(&s, v, 0)).collect::<Res<_>>()?;
            let parts: Vec<usize> = sizes.iter().map(|&n| ops::sumsq_parts(n)).collect();
            let mut partial = poisoned::<T>(&s, parts.iter().sum(), 0)?;
            let mut at = 0;
            for (b, &p) in bufs.iter().zip(&parts) {
                ops::sumsq_partials::<T>(&k, &s, b, &mut partial.slice_mut(at..at + p)?)?;
                at += p;
            }
            let mut norm = poisoned::<T>(&s, 1, 0)?;
            let mut scale = poisoned::<T>(&s, 1, 0)?;
            ops::clip_coef::<T>(&k, &s, &partial, max_norm, &mut norm, &mut scale)?;
            for b in bufs.iter_mut() {
                ops::scale_by_device::<T>(&k, &s, b, &scale)?;
            }
            let got_norm = s.clone_dtoh(&norm)?[0];
            let got_scale = s.clone_dtoh(&scale)?[0];
            let rel = if T::DTYPE == DType::F64 { 1e-12 } else { 1e-5 };
            let what = format!("clip {} max_norm {max_norm}", T::DTYPE);
            ensure!(
                (got_norm.to_f64() - want_norm).abs() <= rel * want_norm,
                "{what}: norm {} vs {want_norm}",
                got_norm.to_f64()
            );
            ensure!(
                (got_scale.to_f64() - want_scale).abs() <= rel * want_scale,
                "{what}: scale {} vs {want_scale}",
                got_scale.to_f64()
            );
            for (b, v) in bufs.iter().zip(&host) {
                let sc = got_scale.to_scalar();
                let want: Vec<T> = v
                    .iter()
                    .map(|x| T::from_scalar(Compute::mul(x.to_scalar(), sc)))
                    .collect();
                check_bits(&format!("{what}: scaled"), &s.clone_dtoh(b)?, &want)?;
            }
            norms.push(got_norm);
        }
        check_bits("clip norm run 2", &norms[1..], &norms[..1])?;
    }
    Ok(())
}
