//! CPU checks of the references themselves (finite differences in f64).

use super::*;

pub(crate) fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6;
    (f(x + h) - f(x - h)) / (2.0 * h)
}

pub(crate) fn reference_gelu_grad() -> TestResult {
    for i in -40..=40 {
        let x = i as f64 * 0.1;
        let (a, b) = (reference::gelu_grad_one(x), fd(reference::gelu_one, x));
        ensure!(
            (a - b).abs() < 1e-8,
            "gelu'({x}) = {a}, finite difference {b}"
        );
    }
    Ok(())
}

pub(crate) fn reference_layer_norm_grad() -> TestResult {
    let (rows, cols) = (3, 5);
    let x: Vec<f64> = data(61, rows * cols, 2.0);
    let w: Vec<f64> = data(62, cols, 1.5);
    let b: Vec<f64> = data(63, cols, 1.0);
    let dy: Vec<f64> = data(64, rows * cols, 1.0);
    let eps = 1e-5;
    let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
        let (y, _, _) = reference::layer_norm(x, w, b, rows, cols, eps);
        y.iter().zip(&dy).map(|(a, b)| a * b).sum()
    };
    let (_, m, r) = reference::layer_norm(&x, &w, &b, rows, cols, eps);
    let (dx, dw, db) = reference::layer_norm_bwd(&x, &w, &m, &r, &dy, rows, cols);
    for i in 0..rows * cols {
        let f = |v: f64| {
            let mut x2 = x.clone();
            x2[i] = v;
            loss(&x2, &w, &b)
        };
        let g = fd(f, x[i]);
        ensure!((dx[i] - g).abs() < 1e-6, "dx[{i}] = {}, fd {g}", dx[i]);
    }
    for c in 0..cols {
        let fw = |v: f64| {
            let mut w2 = w.clone();
            w2[c] = v;
            loss(&x, &w2, &b)
        };
        let fb = |v: f64| {
            let mut b2 = b.clone();
            b2[c] = v;
            loss(&x, &w, &b2)
        };
        let (gw, gb) = (fd(fw, w[c]), fd(fb, b[c]));
        ensure!((dw[c] - gw).abs() < 1e-6, "dw[{c}] = {}, fd {gw}", dw[c]);
        ensure!((db[c] - gb).abs() < 1e-6, "db[{c}] = {}, fd {gb}", db[c]);
    }
    Ok(())
}

pub(crate) fn reference_classifier_grad() -> TestResult {
    let (rows, classes) = (3, 7);
    let x: Vec<f64> = data(71, rows * classes, 3.0);
    let t = [0, 6, 3];
    let (_, dl) = reference::fused_classifier(&x, &t, rows, classes, 1.0);
    for i in 0..rows * classes {
        let f = |v: f64| {
            let mut x2 = x.clone();
            x2[i] = v;
            reference::fused_classifier(&x2, &t, rows, classes, 1.0)
                .0
                .iter()
                .sum::<f64>()
        };
        let g = fd(f, x[i]);
        ensure!((dl[i] - g).abs() < 1e-6, "dlogits[{i}] = {}, fd {g}", dl[i]);
    }
    Ok(())
}

pub(crate) fn reference_embedding_sums() -> TestResult {
    // The reference's backward is the plain scatter-add (up to f64 rounding).
    let (vocab, cols) = (5, 3);
    let ids = [4, 0, 4, -1, 2, 4, 4, 4, 4, 4, 4, 4, 4, 5];
    let dy: Vec<f64> = data(81, ids.len() * cols, 1.0);
    let dw = reference::embedding_bwd(&ids, &dy, vocab, cols);
    for v in 0..vocab {
        for c in 0..cols {
            let want: f64 = ids
                .iter()
                .enumerate()
                .filter(|&(_, &id)| id == v as i32)
                .map(|(t, _)| dy[t * cols + c])
                .sum();
            ensure!(
                (dw[v * cols + c] - want).abs() < 1e-12,
                "dweight[{v}][{c}] = {}, expected {want}",
                dw[v * cols + c]
            );
        }
    }
    Ok(())
}
