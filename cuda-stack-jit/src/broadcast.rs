//! Shapes: broadcasting several operands (NumPy's rules), their strides aligned to the broadcast
//! shape (0 where an operand is broadcast), and merging dimensions that step through memory as
//! one, so a generated kernel decomposes its index over as few dimensions as possible.

/// The most dimensions a generated kernel indexes after merging; operands needing more are made
/// contiguous first.
pub(crate) const MAX_DIMS: usize = 8;

/// The shape `shapes` broadcast to, or which one does not fit.
pub(crate) fn broadcast<'a>(
    shapes: impl Iterator<Item = &'a [usize]>,
) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    for s in shapes {
        if s.len() > out.len() {
            let mut grown = vec![1; s.len() - out.len()];
            grown.extend_from_slice(&out);
            out = grown;
        }
        let off = out.len() - s.len();
        for (d, &v) in s.iter().enumerate() {
            let o = &mut out[off + d];
            if *o == v || v == 1 {
                continue;
            }
            if *o == 1 {
                *o = v;
            } else {
                return Err(format!(
                    "size {v} does not broadcast with size {o} at dimension {} of the broadcast \
                     shape (sizes must be equal, or one of them 1)",
                    off + d
                ));
            }
        }
    }
    Ok(out)
}

/// An operand's strides (elements) aligned to the broadcast shape `out`: 0 for the leading
/// dimensions it lacks and for dimensions where it has size 1.
pub(crate) fn aligned_strides(shape: &[usize], strides: &[isize], out: &[usize]) -> Vec<i64> {
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|d| {
            if d < off || shape[d - off] == 1 {
                0
            } else {
                strides[d - off] as i64
            }
        })
        .collect()
}

/// Merges the dimensions `dims` (indices into `out`, in order) for every operand in `strides`
/// at once: size-1 dimensions are dropped, and a dimension joins the previous one when, for
/// every operand, `stride[prev] == stride[d] * out[d]`. Returns the merged sizes and each
/// operand's merged strides.
pub(crate) fn merge(
    out: &[usize],
    dims: &[usize],
    strides: &[Vec<i64>],
) -> (Vec<i64>, Vec<Vec<i64>>) {
    let mut shape: Vec<i64> = Vec::new();
    let mut st: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for &d in dims {
        let size = out[d] as i64;
        if size == 1 {
            continue;
        }
        let joins = !shape.is_empty()
            && strides
                .iter()
                .zip(&st)
                .all(|(s, m)| m.last().copied() == Some(s[d] * size));
        if joins {
            *shape.last_mut().unwrap_or(&mut 0) *= size;
            for (s, m) in strides.iter().zip(st.iter_mut()) {
                if let Some(l) = m.last_mut() {
                    *l = s[d];
                }
            }
        } else {
            shape.push(size);
            for (s, m) in strides.iter().zip(st.iter_mut()) {
                m.push(s[d]);
            }
        }
    }
    (shape, st)
}

/// `"x: [2, 3], y: [3]"` for messages.
pub(crate) fn describe<'a>(named: impl Iterator<Item = (&'a str, &'a [usize])>) -> String {
    named
        .map(|(n, s)| format!("{n}: {s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        let s: Vec<&[usize]> = vec![&[2, 1, 5], &[3, 1], &[]];
        assert_eq!(broadcast(s.into_iter()).unwrap(), vec![2, 3, 5]);
        let bad: Vec<&[usize]> = vec![&[2, 3], &[4]];
        assert!(broadcast(bad.into_iter()).unwrap_err().contains("size 4"));
        assert_eq!(aligned_strides(&[3, 1], &[1, 1], &[2, 3, 5]), vec![0, 1, 0]);
    }

    #[test]
    fn merging() {
        // A contiguous [4, 5, 6] operand and a row vector [6] broadcast along the first two.
        let out = [4usize, 5, 6];
        let a = vec![30i64, 6, 1];
        let b = vec![0i64, 0, 1];
        let (shape, st) = merge(&out, &[0, 1, 2], &[a.clone(), b.clone()]);
        assert_eq!(shape, vec![20, 6]);
        assert_eq!(st, vec![vec![6, 1], vec![0, 1]]);
        // Alone, the contiguous operand is one dimension.
        let (shape, st) = merge(&out, &[0, 1, 2], &[a]);
        assert_eq!((shape, st), (vec![120], vec![vec![1]]));
        // A transposed [5, 4] view of a [4, 5] tensor does not merge; size-1 dims vanish.
        let (shape, st) = merge(&[5, 1, 4], &[0, 1, 2], &[vec![1, 7, 5]]);
        assert_eq!((shape, st), (vec![5, 4], vec![vec![1, 5]]));
    }
}
