//! Embedding lookup and its deterministic scatter-add backward.

use super::*;

/// `(vocab, cols, tokens)`: tiny, odd widths, a character vocabulary with long buckets
/// (the 32-column tiles), GPT-2's vocabulary (mostly empty buckets), none.
pub(crate) const EMB: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 3, 7),
    (65, 33, 513),
    (65, 384, 16384),
    (50257, 64, 8192),
    (1000, 768, 300),
    (7, 1023, 0),
];

pub(crate) fn embedding_all<T: Element>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let dt = T::DTYPE;
    for &(vocab, cols, n) in EMB {
        for &off in OFFSETS {
            let what = format!("embedding {dt} V = {vocab}, C = {cols}, N = {n}, offset {off}");
            let w: Vec<T> = data(31, vocab * cols, 1.0);
            let mut rng = Rng::new(32);
            // Skewed ids (the minimum of two uniforms: small ids are frequent), and a few bad.
            let mut ids: Vec<i32> = (0..n)
                .map(|_| {
                    let a = rng.next_u64() % vocab as u64;
                    let b = rng.next_u64() % vocab as u64;
                    a.min(b) as i32
                })
                .collect();
            if n >= 7 {
                ids[2] = -1;
                ids[6] = vocab as i32;
            }
            let (bw, bi) = (upload(&s, &w, off)?, upload(&s, &ids, off)?);
            let mut out = poisoned::<T>(&s, n * cols, off)?;
            ops::embedding_fwd::<T>(
                &k,
                &s,
                &bw.slice(off..)?,
                &bi.slice(off..)?,
                &mut out.slice_mut(off..)?,
                n,
                vocab,
                cols,
            )?;
            check(
                &format!("{what}: forward"),
                &download(&s, &out, off)?,
                &reference::embedding(&w, &ids, vocab, cols),
                |_, _| 0.0,
            )?;
            let dy: Vec<T> = data(33, n * cols, 1.0);
            let bdy = upload(&s, &dy, off)?;
            let want = reference::embedding_bwd(&ids, &dy, vocab, cols);
            let mut runs = Vec::new();
            for _ in 0..2 {
                let mut dw = poisoned::<T>(&s, vocab * cols, off)?;
                let mut ws = poisoned::<i32>(&s, ops::embedding_workspace_len(n, vocab)?, 0)?;
                ops::embedding_bwd::<T>(
                    &k,
                    &s,
                    &bi.slice(off..)?,
                    &bdy.slice(off..)?,
                    &mut dw.slice_mut(off..)?,
                    &mut ws,
                    n,
                    vocab,
                    cols,
                )?;
                runs.push(download(&s, &dw, off)?);
            }
            check_bits(&format!("{what}: backward vs reference"), &runs[0], &want)?;
            check_bits(&format!("{what}: backward run 2"), &runs[1], &runs[0])?;
        }
    }
    Ok(())
}
