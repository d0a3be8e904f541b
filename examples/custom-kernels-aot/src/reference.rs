//! The CPU twin of every kernel, computed the same way (one `mul_add` rounding, rows summed in
//! order), so GPU results must match it bit for bit.

/// `max(x · scale + bias[c], 0)` for a `[rows, cols]` row-major `x` (NaN → 0, as the kernel).
pub fn forward(x: &[f32], bias: &[f32], scale: f32) -> Vec<f32> {
    let cols = bias.len();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let pre = v.mul_add(scale, bias[i % cols]);
            if pre > 0.0 {
                pre
            } else {
                0.0
            }
        })
        .collect()
}

/// `(grad_x, grad_bias)` of [`forward`] given the output's gradient `g`.
pub fn backward(x: &[f32], bias: &[f32], scale: f32, g: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let cols = bias.len();
    let mut gx = vec![0.0f32; x.len()];
    let mut gb = vec![0.0f32; cols];
    for (i, (&v, &go)) in x.iter().zip(g).enumerate() {
        if v.mul_add(scale, bias[i % cols]) > 0.0 {
            gx[i] = go * scale;
        }
    }
    for (c, acc) in gb.iter_mut().enumerate() {
        for r in 0..x.len().checked_div(cols).unwrap_or(0) {
            let i = r * cols + c;
            *acc += if x[i].mul_add(scale, bias[c]) > 0.0 {
                g[i]
            } else {
                0.0
            };
        }
    }
    (gx, gb)
}
