//! The fused classifier in f64: per-row cross-entropy and `(softmax − onehot) · gs`.

use crate::Element;

/// `(loss, dlogits)` of the row-major `[rows, classes]` logits against `targets`, with
/// `dlogits = (softmax − onehot) · gs` (`gs` = upstream gradient × scale). A target outside
/// `0..classes`, or a row of all −inf, gives a NaN loss and a NaN gradient row.
pub fn fused_classifier<T: Element>(
    logits: &[T],
    targets: &[i32],
    rows: usize,
    classes: usize,
    gs: f64,
) -> (Vec<f64>, Vec<T>) {
    let (mut loss, mut dl) = (Vec::with_capacity(rows), Vec::with_capacity(rows * classes));
    for r in 0..rows {
        let row: Vec<f64> = logits[r * classes..(r + 1) * classes]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let m = row.iter().fold(
            f64::NEG_INFINITY,
            |m, &v| {
                if v > m || v.is_nan() {
                    v
                } else {
                    m
                }
            },
        );
        let s: f64 = row.iter().map(|&v| (v - m).exp()).sum();
        let t = targets[r];
        let ok = t >= 0 && (t as usize) < classes && m != f64::NEG_INFINITY;
        loss.push(if ok {
            m + s.ln() - row[t as usize]
        } else {
            f64::NAN
        });
        for (c, &v) in row.iter().enumerate() {
            let p = (v - m).exp() / s;
            let hot = if ok && c == t as usize { 1.0 } else { 0.0 };
            dl.push(T::from_f64(if ok { (p - hot) * gs } else { f64::NAN }));
        }
    }
    (loss, dl)
}
