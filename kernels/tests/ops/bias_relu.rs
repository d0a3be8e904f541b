//! The fused bias + ReLU forward and backward.

use super::*;

pub(crate) const SHAPES_2D: &[(usize, usize)] = &[
    (0, 5),
    (5, 0),
    (1, 1),
    (1, 31),
    (33, 31),
    (17, 32),
    (4, 1023),
    (3, 1025),
    (1000, 257),
    (4099, 3),
    (65537, 1),
    (3, 4099),
    (2048, 1024),
];

pub(crate) fn bias_relu() -> TestResult {
    let (ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D {
        for &off in OFFSETS {
            for scale in [1.5f32, -0.75] {
                let n = rows * cols;
                let (x, bias, g) = (data::<f32>(8, n), data::<f32>(9, cols), data::<f32>(10, n));
                let (dx, db, dg) = (
                    upload(&s, &x, off)?,
                    upload(&s, &bias, off)?,
                    upload(&s, &g, off)?,
                );
                let tag = format!("rows={rows} cols={cols} off={off} scale={scale}");
                let mut o = poisoned::<f32>(&s, n, off)?;
                ops::bias_relu_fwd(
                    &k,
                    &s,
                    &dx.slice(off..)?,
                    &db.slice(off..)?,
                    scale,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                )?;
                check_exact(
                    &format!("bias_relu_fwd {tag}"),
                    &download(&s, &o, off)?,
                    &reference::bias_relu_fwd(&x, &bias, scale, rows, cols),
                )?; // exact

                let mut gx = poisoned::<f32>(&s, n, off)?;
                let mut gb = poisoned::<f32>(&s, cols, off)?;
                ops::bias_relu_bwd(
                    &k,
                    &s,
                    &dx.slice(off..)?,
                    &db.slice(off..)?,
                    scale,
                    &dg.slice(off..)?,
                    &mut gx.slice_mut(off..)?,
                    &mut gb.slice_mut(off..)?,
                    rows,
                    cols,
                )?;
                let parts = ops::bias_relu_bwd_parts(rows, cols, ctx.limits().sm_count);
                let (want_gx, want_gb) =
                    reference::bias_relu_bwd(&x, &bias, scale, &g, rows, cols, parts);
                // exact: the reference sums in the kernel's order for the same `parts`.
                check_exact(
                    &format!("bias_relu_bwd grad_x {tag}"),
                    &download(&s, &gx, off)?,
                    &want_gx,
                )?;
                check_exact(
                    &format!("bias_relu_bwd grad_bias {tag} parts={parts}"),
                    &download(&s, &gb, off)?,
                    &want_gb,
                )?;
            }
        }
    }
    Ok(())
}
