//! Embedding lookup and its backward, in the kernels' exact summation order (bit-exact).

use crate::{Compute, Element};

/// Buckets longer than this are summed in 8 interleaved parts (as `embedding_bwd_sum`).
const LONG: usize = 8;

/// Rows `ids[t]` of the `[vocab, cols]` table `w`; an id outside `0..vocab` gives a NaN row.
pub fn embedding<T: Element>(w: &[T], ids: &[i32], vocab: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(ids.len() * cols);
    for &id in ids {
        if id >= 0 && (id as usize) < vocab {
            out.extend_from_slice(&w[id as usize * cols..(id as usize + 1) * cols]);
        } else {
            out.extend((0..cols).map(|_| T::from_f64(f64::NAN)));
        }
    }
    out
}

/// `dweight[v] = Σ dy[t]` over tokens with `ids[t] == v` in increasing `t`, accumulated in
/// the compute type exactly as the kernel does (a bucket of more than 8 tokens: token `j` of
/// the bucket into part `j % 8`, parts added in order), rounded once. Bad ids are skipped.
pub fn embedding_bwd<T: Element>(ids: &[i32], dy: &[T], vocab: usize, cols: usize) -> Vec<T> {
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); vocab];
    for (t, &id) in ids.iter().enumerate() {
        if id >= 0 && (id as usize) < vocab {
            buckets[id as usize].push(t);
        }
    }
    let mut dw = Vec::with_capacity(vocab * cols);
    for bucket in &buckets {
        for c in 0..cols {
            let at = |t: usize| dy[t * cols + c].to_scalar();
            let acc = if bucket.len() <= LONG {
                bucket
                    .iter()
                    .fold(T::Scalar::zero(), |a, &t| Compute::add(a, at(t)))
            } else {
                let mut parts = [T::Scalar::zero(); LONG];
                for (j, &t) in bucket.iter().enumerate() {
                    parts[j % LONG] = Compute::add(parts[j % LONG], at(t));
                }
                parts[1..].iter().fold(parts[0], |a, &p| Compute::add(a, p))
            };
            dw.push(T::from_scalar(acc));
        }
    }
    dw
}
