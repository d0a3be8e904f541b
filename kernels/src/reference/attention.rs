//! CPU twin of fused scaled-dot-product attention (`cuda/attention.cu`), forward with the row
//! log-sum-exp and backward, in f64 on dense `[B, H, N, D]` arrays.
//!
//! The kernels compute in f32 (f32, f16, bf16) or f64 with `expf`/`exp` and a different
//! summation order (online softmax over chunks of 32 keys), so they agree with this reference to
//! rounding, not bit for bit; the tests state their tolerances.

/// The shape of an attention problem as the reference sees it (dense `[B, H, N, D]` inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    /// Batch size `B`.
    pub batch: usize,
    /// Heads `H`.
    pub heads: usize,
    /// Query rows `Nq`.
    pub q_len: usize,
    /// Key / value rows `Nk`.
    pub kv_len: usize,
    /// Head dimension `D`.
    pub head_dim: usize,
    /// Bottom-right aligned causal mask: query `i` sees key `j` iff `j <= i + Nk − Nq`.
    pub causal: bool,
}

impl AttentionDims {
    /// Whether query `i` sees key `j`.
    pub fn visible(&self, i: usize, j: usize) -> bool {
        !self.causal || (j as i128) <= i as i128 + self.kv_len as i128 - self.q_len as i128
    }
}

/// `(out [B, H, Nq, D], lse [B, H, Nq])` of `softmax(scale · Q Kᵀ) V` (masked), in f64. A query
/// row that sees no key gives `out = 0` and `lse = −inf`.
pub fn attention_fwd(
    dims: &AttentionDims,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    scale: f64,
) -> (Vec<f64>, Vec<f64>) {
    let (nq, nk, d) = (dims.q_len, dims.kv_len, dims.head_dim);
    let bh = dims.batch * dims.heads;
    let mut out = vec![0.0; bh * nq * d];
    let mut lse = vec![f64::NEG_INFINITY; bh * nq];
    let mut s = vec![0.0; nk];
    for g in 0..bh {
        let (qg, kg, vg) = (&q[g * nq * d..], &k[g * nk * d..], &v[g * nk * d..]);
        for i in 0..nq {
            let mut m = f64::NEG_INFINITY;
            for j in 0..nk {
                s[j] = if dims.visible(i, j) {
                    scale * dot(&qg[i * d..(i + 1) * d], &kg[j * d..(j + 1) * d])
                } else {
                    f64::NEG_INFINITY
                };
                m = m.max(s[j]);
            }
            if m == f64::NEG_INFINITY {
                continue; // no visible key: out stays 0, lse −inf
            }
            let l: f64 = s.iter().map(|&x| (x - m).exp()).sum();
            lse[g * nq + i] = m + l.ln();
            let o = &mut out[(g * nq + i) * d..(g * nq + i + 1) * d];
            for j in 0..nk {
                let p = (s[j] - m).exp() / l;
                for (oe, ve) in o.iter_mut().zip(&vg[j * d..(j + 1) * d]) {
                    *oe += p * ve;
                }
            }
        }
    }
    (out, lse)
}

/// `(dq, dk, dv)` of [`attention_fwd`] given the output gradient `dout` (`[B, H, Nq, D]`), in f64:
/// `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O))`, `dQ = scale · dS K`, `dK = scale · dSᵀ Q`.
pub fn attention_bwd(
    dims: &AttentionDims,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dout: &[f64],
    scale: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (nq, nk, d) = (dims.q_len, dims.kv_len, dims.head_dim);
    let bh = dims.batch * dims.heads;
    let (out, lse) = attention_fwd(dims, q, k, v, scale);
    let mut dq = vec![0.0; bh * nq * d];
    let mut dk = vec![0.0; bh * nk * d];
    let mut dv = vec![0.0; bh * nk * d];
    for g in 0..bh {
        let (qo, ko) = (g * nq * d, g * nk * d);
        for i in 0..nq {
            let qi = &q[qo + i * d..qo + (i + 1) * d];
            let doi = &dout[qo + i * d..qo + (i + 1) * d];
            let delta = dot(doi, &out[qo + i * d..qo + (i + 1) * d]);
            let li = lse[g * nq + i];
            for j in 0..nk {
                if !dims.visible(i, j) {
                    continue;
                }
                let kj = &k[ko + j * d..ko + (j + 1) * d];
                let vj = &v[ko + j * d..ko + (j + 1) * d];
                let p = (scale * dot(qi, kj) - li).exp();
                let ds = p * (dot(doi, vj) - delta);
                for e in 0..d {
                    dq[qo + i * d + e] += scale * ds * kj[e];
                    dk[ko + j * d + e] += scale * ds * qi[e];
                    dv[ko + j * d + e] += p * doi[e];
                }
            }
        }
    }
    (dq, dk, dv)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(nq: usize, nk: usize, d: usize, causal: bool) -> AttentionDims {
        AttentionDims {
            batch: 1,
            heads: 1,
            q_len: nq,
            kv_len: nk,
            head_dim: d,
            causal,
        }
    }

    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64) / 500.0 - 1.0)
            .collect()
    }

    #[test]
    fn one_key_copies_its_value() {
        let dm = dims(3, 1, 2, false);
        let (out, lse) = attention_fwd(&dm, &data(6, 1), &[0.5, 0.25], &[7.0, -3.0], 1.0);
        assert_eq!(out, [7.0, -3.0, 7.0, -3.0, 7.0, -3.0]);
        assert!(lse.iter().all(|l| l.is_finite()));
    }

    #[test]
    fn causal_rows_without_keys_are_zero_with_lse_neg_inf() {
        // Nq = 4, Nk = 2: query i sees keys j <= i - 2, so rows 0 and 1 see nothing.
        let dm = dims(4, 2, 3, true);
        let (out, lse) = attention_fwd(&dm, &data(12, 3), &data(6, 4), &data(6, 5), 0.7);
        assert_eq!(&out[..6], &[0.0; 6]);
        assert_eq!(lse[..2], [f64::NEG_INFINITY; 2]);
        assert!(lse[2].is_finite() && lse[3].is_finite());
        assert_eq!(&out[6..9], &data(6, 5)[..3]); // row 2 sees key 0 only
    }

    #[test]
    fn backward_matches_finite_differences() {
        for causal in [false, true] {
            let dm = dims(3, 5, 4, causal);
            let (q, k, v, g) = (data(12, 1), data(20, 2), data(20, 3), data(12, 4));
            let scale = 0.6;
            let loss = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
                dot(&attention_fwd(&dm, q, k, v, scale).0, &g)
            };
            let (dq, dk, dv) = attention_bwd(&dm, &q, &k, &v, &g, scale);
            let h = 1e-6;
            for (which, grad) in [(0, &dq), (1, &dk), (2, &dv)] {
                for e in 0..grad.len() {
                    let mut x = [q.clone(), k.clone(), v.clone()];
                    x[which][e] += h;
                    let up = loss(&x[0], &x[1], &x[2]);
                    x[which][e] -= 2.0 * h;
                    let down = loss(&x[0], &x[1], &x[2]);
                    let fd = (up - down) / (2.0 * h);
                    assert!(
                        (fd - grad[e]).abs() < 1e-6,
                        "{which} {e}: {fd} vs {}",
                        grad[e]
                    );
                }
            }
        }
    }
}
