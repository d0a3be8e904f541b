//! The CPU side of seed 001's exercise 3, done fairly: the same training step as the GPU's
//! (`Linear → ReLU → Linear → cross-entropy → SGD`) in f32 with the three GEMMs of each layer
//! on the `gemm` crate (packed, vectorised micro-kernels on every core through rayon — the CPU
//! GEMM candle uses) and the small elementwise parts as plain loops the compiler vectorises. Also the twin that checks the GPU: from the same parameters and
//! batch, one step must give the same loss and parameters within f32 rounding.

/// A two-layer MLP's parameters on the host, PyTorch's layout (`W` is `[out, in]`).
#[derive(Clone, Debug)]
pub struct CpuMlp {
    /// `[hidden, input]`.
    pub w1: Vec<f32>,
    /// `[hidden]`.
    pub b1: Vec<f32>,
    /// `[classes, hidden]`.
    pub w2: Vec<f32>,
    /// `[classes]`.
    pub b2: Vec<f32>,
    /// Input features.
    pub input: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Classes.
    pub classes: usize,
}

/// `c[m, n] = a · b (+ c when accumulate)` with arbitrary row/column strides (in elements).
#[allow(clippy::too_many_arguments)]
fn matmul(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: &mut [f32],
    accumulate: bool,
) {
    let fits = |len: usize, rows: usize, cols: usize, rs: usize, cs: usize| {
        rows == 0 || cols == 0 || len > (rows - 1) * rs + (cols - 1) * cs
    };
    // The callers below pass shapes they computed; a failure here is a bug in this file.
    if !(fits(a.len(), m, k, rsa, csa) && fits(b.len(), k, n, rsb, csb) && c.len() >= m * n) {
        unreachable!("cpu_mlp: GEMM operands smaller than their shapes");
    }
    // SAFETY: the check above keeps every index the strides reach inside the slices; c is a
    // dense [m, n] row-major array (`&mut`: no aliasing with a or b).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            csa as isize,
            rsa as isize,
            b.as_ptr(),
            csb as isize,
            rsb as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
}

impl CpuMlp {
    /// One SGD step on batch `x` (`[batch, input]`, row-major) with class labels; returns the
    /// mean cross-entropy before the update. An error if the batch is empty, `x` is not
    /// `[labels.len(), input]` or a label is not a class.
    pub fn step(&mut self, x: &[f32], labels: &[usize], lr: f32) -> Result<f32, String> {
        let (bsz, inp, hid, cls) = (labels.len(), self.input, self.hidden, self.classes);
        if bsz == 0 || x.len() != bsz * inp || labels.iter().any(|&l| l >= cls) {
            return Err(format!(
                "CpuMlp::step: {} inputs for {bsz} labels of {cls} classes (input size {inp})",
                x.len()
            ));
        }
        // Forward.
        let mut h = vec![0.0f32; bsz * hid];
        for r in h.chunks_mut(hid) {
            r.copy_from_slice(&self.b1);
        }
        matmul(bsz, inp, hid, x, (inp, 1), &self.w1, (1, inp), &mut h, true);
        let pre = h.clone();
        for v in &mut h {
            *v = v.max(0.0);
        }
        let mut logits = vec![0.0f32; bsz * cls];
        for r in logits.chunks_mut(cls) {
            r.copy_from_slice(&self.b2);
        }
        matmul(
            bsz,
            hid,
            cls,
            &h,
            (hid, 1),
            &self.w2,
            (1, hid),
            &mut logits,
            true,
        );
        // Cross-entropy and its gradient (softmax − onehot) / batch.
        let mut loss = 0.0f64;
        let mut dlogits = vec![0.0f32; bsz * cls];
        for (r, (row, d)) in logits.chunks(cls).zip(dlogits.chunks_mut(cls)).enumerate() {
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = row.iter().map(|v| (v - m).exp()).sum();
            loss += f64::from(m + s.ln() - row[labels[r]]);
            for (c, (dv, v)) in d.iter_mut().zip(row).enumerate() {
                let p = (v - m).exp() / s;
                *dv = (p - if c == labels[r] { 1.0 } else { 0.0 }) / bsz as f32;
            }
        }
        // Backward.
        let mut dw2 = vec![0.0f32; cls * hid];
        matmul(
            cls,
            bsz,
            hid,
            &dlogits,
            (1, cls),
            &h,
            (hid, 1),
            &mut dw2,
            false,
        );
        let db2 = column_sums(&dlogits, cls);
        let mut dh = vec![0.0f32; bsz * hid];
        matmul(
            bsz,
            cls,
            hid,
            &dlogits,
            (cls, 1),
            &self.w2,
            (hid, 1),
            &mut dh,
            false,
        );
        for (d, p) in dh.iter_mut().zip(&pre) {
            if *p <= 0.0 {
                *d = 0.0;
            }
        }
        let mut dw1 = vec![0.0f32; hid * inp];
        matmul(hid, bsz, inp, &dh, (1, hid), x, (inp, 1), &mut dw1, false);
        let db1 = column_sums(&dh, hid);
        // SGD.
        for (p, g) in [
            (&mut self.w1, &dw1),
            (&mut self.b1, &db1),
            (&mut self.w2, &dw2),
            (&mut self.b2, &db2),
        ] {
            for (pv, gv) in p.iter_mut().zip(g.iter()) {
                *pv -= lr * gv;
            }
        }
        Ok((loss / bsz as f64) as f32)
    }
}

/// Σ over rows of a row-major `[rows, cols]` array.
fn column_sums(a: &[f32], cols: usize) -> Vec<f32> {
    let mut s = vec![0.0f32; cols];
    for row in a.chunks(cols) {
        for (acc, v) in s.iter_mut().zip(row) {
            *acc += v;
        }
    }
    s
}
