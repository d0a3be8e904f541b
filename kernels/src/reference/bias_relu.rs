//! The fused bias + ReLU forward and backward, bit-exact (including the backward's order).

/// `max(fmaf(x, scale, bias[c]), 0)` (NaN → 0) for a row-major `[rows, cols]` `x`.
pub fn bias_relu_fwd(x: &[f32], bias: &[f32], scale: f32, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let pre = x[r * cols + c].mul_add(scale, bias[c]);
            out.push(if pre > 0.0 { pre } else { 0.0 });
        }
    }
    out
}

/// `(grad_x, grad_bias)` of [`bias_relu_fwd`], summing the bias gradient in exactly the GPU's
/// order for `parts` row chunks (from [`crate::ops::bias_relu_bwd_parts`]): per chunk, 8
/// interleaved row lanes each summed in increasing row order, lanes added 0..7, chunks added in
/// order.
pub fn bias_relu_bwd(
    x: &[f32],
    bias: &[f32],
    scale: f32,
    grad_out: &[f32],
    rows: usize,
    cols: usize,
    parts: u32,
) -> (Vec<f32>, Vec<f32>) {
    let parts = parts.max(1) as usize;
    let g = |i: usize, c: usize| {
        let pre = x[i].mul_add(scale, bias[c]);
        if pre > 0.0 {
            grad_out[i]
        } else {
            0.0
        }
    };
    let grad_x: Vec<f32> = (0..rows * cols).map(|i| g(i, i % cols) * scale).collect();
    let chunk = rows.div_ceil(parts);
    let mut partial = vec![0.0f32; parts * cols];
    for p in 0..parts {
        let r0 = p * chunk;
        let r1 = rows.min(r0 + chunk);
        for c in 0..cols {
            let mut lanes = [0.0f32; 8];
            for (ty, lane) in lanes.iter_mut().enumerate() {
                let mut r = r0 + ty;
                while r < r1 {
                    *lane += g(r * cols + c, c);
                    r += 8;
                }
            }
            let mut s = lanes[0];
            for lane in &lanes[1..] {
                s += lane;
            }
            partial[p * cols + c] = s;
        }
    }
    let grad_bias = if parts == 1 {
        partial
    } else {
        (0..cols)
            .map(|c| {
                let mut s = 0.0f32;
                for p in 0..parts {
                    s += partial[p * cols + c];
                }
                s
            })
            .collect()
    };
    (grad_x, grad_bias)
}
