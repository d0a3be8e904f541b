//! Row softmax, special rows included.

use super::*;

pub(crate) fn softmax() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let shared_cols =
        ops::shared_max_cols(s.context().limits().max_shared_per_block_optin as usize);
    let shapes: &[(usize, usize)] = &[
        (0, 5),
        (5, 0),
        (1, 1),
        (3, 31),
        (5, 32),
        (7, 33),
        (4, 1023),
        (4, 1024),
        (3, 1025),
        (2, 4099),
        (1, 65537),
        (1000, 128),
        (33, 8193),
        (3, 4096),
        (2, 16384),
        (2, 16388),
        (67, 1),
        (65, 2),
        (40, 7),
        (9, 17),
        (5, 100),
        (3, 50257),
        (140, 20_001),
        (2, 100_003),
    ];
    for &(rows, cols) in shapes {
        for &off in OFFSETS {
            let x: Vec<f32> = data::<f32>(23, rows * cols)
                .iter()
                .map(|v| v * 4.0)
                .collect();
            let dx = upload(&s, &x, off)?;
            let want = reference::softmax_rows(&x, rows, cols);
            let want64: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
            for algo in [
                SoftmaxAlgo::Auto,
                SoftmaxAlgo::Warp,
                SoftmaxAlgo::Block,
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Narrow,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ] {
                let mut o = poisoned::<f32>(&s, rows * cols, off)?;
                let r = ops::softmax_rows_with(
                    &k,
                    &s,
                    algo,
                    &dx.slice(off..)?,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                );
                // Registers takes rows of up to 16384 columns, Narrow up to 1024 (any width,
                // any alignment); the others take every shape.
                let refused = rows > 0
                    && cols > 0
                    && ((algo == SoftmaxAlgo::Registers && cols > ops::REGISTERS_MAX_COLS)
                        || (algo == SoftmaxAlgo::Narrow && cols > ops::NARROW_MAX_COLS)
                        || (algo == SoftmaxAlgo::Shared && cols > shared_cols));
                if refused {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "{algo:?} must refuse {rows}x{cols} off={off}"
                    );
                    continue;
                }
                r?;
                let got: Vec<f64> = download(&s, &o, off)?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                // 1e-6 absolute: every output is in [0, 1].
                check_close(
                    &format!("softmax {algo:?} {rows}x{cols} off={off}"),
                    &got,
                    &want64,
                    |_| 1e-6,
                )?;
            }
        }
    }
    // A row of -inf gives NaN; a NaN poisons its row only; -inf elements give 0. 40 columns
    // (every kernel takes them) and 5000 (the split kernel cuts each row into chunks, the NaN
    // in a later chunk than the first).
    for (cols, algos) in [
        (
            40,
            &[
                SoftmaxAlgo::Warp,
                SoftmaxAlgo::Block,
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Narrow,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ][..],
        ),
        (
            5000,
            &[
                SoftmaxAlgo::Registers,
                SoftmaxAlgo::Split,
                SoftmaxAlgo::Shared,
            ][..],
        ),
    ] {
        special_rows(&s, &k, cols, algos)?;
    }
    Ok(())
}

pub(crate) fn special_rows(
    s: &Stream,
    k: &Kernels,
    cols: usize,
    algos: &[SoftmaxAlgo],
) -> TestResult {
    let mut x = vec![0.5f32; 3 * cols];
    x[..cols].iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
    x[cols + cols - 7] = f32::NAN;
    x[2 * cols + 3] = f32::NEG_INFINITY;
    let dx = s.clone_htod(&x)?;
    for &algo in algos {
        let mut o = s.alloc_zeros::<f32>(3 * cols)?;
        ops::softmax_rows_with(k, s, algo, &dx, &mut o, 3, cols)?;
        let got = s.clone_dtoh(&o)?;
        ensure!(
            got[..2 * cols].iter().all(|v| v.is_nan()),
            "{algo:?}: -inf row and NaN row must be NaN"
        );
        ensure!(
            got[2 * cols + 3] == 0.0 && got[2 * cols..].iter().all(|v| !v.is_nan()),
            "{algo:?}: -inf element must give 0"
        );
    }
    Ok(())
}
