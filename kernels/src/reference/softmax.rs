//! Row-wise softmax in f64, rounded to f32 (the GPU uses `expf`; compare within 1e-6).

/// `exp(x − max) / Σ exp(x − max)` per row of a row-major `[rows, cols]` array; a row of all
/// -inf, or with a NaN, gives NaN.
pub fn softmax_rows(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let nan = row.iter().any(|v| v.is_nan());
        let m = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
        let d: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
        for &v in row {
            out.push(if nan || m == f64::NEG_INFINITY {
                f32::NAN
            } else {
                ((f64::from(v) - m).exp() / d) as f32
            });
        }
    }
    out
}
