//! LayerNorm forward and backward in f64 (the GPU computes in f32, or f64 for f64, with
//! warp-shuffle sums: compare within the tolerances the tests state).

use crate::Element;

/// `(y, mean, rstd)` of LayerNorm over each row of the row-major `[rows, cols]` array `x`:
/// `y = (x − mean) · rstd · w + b`, `rstd = 1 / sqrt(var + eps)` (biased variance).
pub fn layer_norm<T: Element>(
    x: &[T],
    w: &[T],
    b: &[T],
    rows: usize,
    cols: usize,
    eps: f64,
) -> (Vec<T>, Vec<f64>, Vec<f64>) {
    let mut y = Vec::with_capacity(rows * cols);
    let (mut means, mut rstds) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for (c, v) in row.iter().enumerate() {
            let o = (v.to_f64() - mean) * rstd * w[c].to_f64() + b[c].to_f64();
            y.push(T::from_f64(o));
        }
        means.push(mean);
        rstds.push(rstd);
    }
    (y, means, rstds)
}

/// `(dx, dweight, dbias)` of LayerNorm from `dy`, the input `x`, `w` and the statistics.
pub fn layer_norm_bwd<T: Element>(
    x: &[T],
    w: &[T],
    mean: &[f64],
    rstd: &[f64],
    dy: &[T],
    rows: usize,
    cols: usize,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut dx = Vec::with_capacity(rows * cols);
    let (mut dw, mut db) = (vec![0.0f64; cols], vec![0.0f64; cols]);
    for r in 0..rows {
        let i0 = r * cols;
        let xh: Vec<f64> = (0..cols)
            .map(|c| (x[i0 + c].to_f64() - mean[r]) * rstd[r])
            .collect();
        let g: Vec<f64> = (0..cols)
            .map(|c| dy[i0 + c].to_f64() * w[c].to_f64())
            .collect();
        let mg = g.iter().sum::<f64>() / cols as f64;
        let mgx = g.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / cols as f64;
        for c in 0..cols {
            dx.push(T::from_f64(rstd[r] * (g[c] - mg - xh[c] * mgx)));
            dw[c] += dy[i0 + c].to_f64() * xh[c];
            db[c] += dy[i0 + c].to_f64();
        }
    }
    let round = |v: Vec<f64>| v.into_iter().map(T::from_f64).collect();
    (dx, round(dw), round(db))
}
