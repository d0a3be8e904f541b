//! Dropout (Philox, reproducible per seed).

use super::*;

pub(crate) fn dropout_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &(p, seed, offset) in &[
            (0.0, 1u64, 0u64),
            (0.1, 2, 0),
            (0.5, 3, 5),
            (0.2, 4, 1 << 33),
            (1.0, 5, 0),
        ] {
            for &off in OFFSETS {
                let what = format!("dropout {} n = {n} p = {p} offset {off}", T::DTYPE);
                let x: Vec<T> = data(41, n, 3.0);
                let bx = upload(&s, &x, off)?;
                let mut out = poisoned::<T>(&s, n, off)?;
                ops::dropout::<T>(
                    &k,
                    &s,
                    &bx.slice(off..)?,
                    &mut out.slice_mut(off..)?,
                    p,
                    seed,
                    offset,
                )?;
                let got = download(&s, &out, off)?;
                check_bits(&what, &got, &reference::dropout(&x, p, seed, offset))?;
                if p == 0.0 {
                    check_bits(&format!("{what}: identity"), &got, &x)?;
                }
                if p == 1.0 {
                    ensure!(
                        got.iter().all(|v| v.to_f64() == 0.0),
                        "{what}: p = 1 must give zeros"
                    );
                }
            }
        }
    }
    let x = s.alloc_zeros::<T>(4)?;
    let mut out = s.alloc_zeros::<T>(4)?;
    ensure!(
        ops::dropout::<T>(&k, &s, &x, &mut out, 1.5, 0, 0).is_err(),
        "dropout with p = 1.5 must fail"
    );
    // Positions past the end of the Philox stream (offset + n > u64::MAX) are refused ...
    for offset in [u64::MAX, u64::MAX - 2] {
        ensure!(
            matches!(
                ops::dropout::<T>(&k, &s, &x, &mut out, 0.5, 0, offset),
                Err(cuda_stack_kernels::Error::Invalid { .. })
            ),
            "dropout at offset {offset} of 4 elements must fail with Error::Invalid"
        );
    }
    let mut u = s.alloc_zeros::<f32>(4)?;
    ensure!(
        matches!(
            ops::fill_uniform(&k, &s, &mut u, 0, u64::MAX - 2),
            Err(cuda_stack_kernels::Error::Invalid { .. })
        ),
        "fill_uniform at offset 2^64 - 3 of 4 elements must fail with Error::Invalid"
    );
    // ... and the last positions before it work (p = 0: the identity, every element written).
    for (offset, n) in [(u64::MAX - 7, 4usize), (u64::MAX - 3, 3)] {
        let xs: Vec<T> = data(42, n, 3.0);
        let bx = upload(&s, &xs, 0)?;
        let mut o = poisoned::<T>(&s, n, 0)?;
        ops::dropout::<T>(&k, &s, &bx, &mut o, 0.0, 7, offset)?;
        check_bits(
            &format!("dropout {} at offset {offset}", T::DTYPE),
            &s.clone_dtoh(&o)?,
            &xs,
        )?;
    }
    Ok(())
}
