//! How a staged copy is cut up: portions (one per worker) and windows (one per chunk).

use std::ops::Range;

/// Alignment of portion boundaries, when it costs nothing: a page, so DMAs start aligned.
const PORTION_ALIGN: usize = 4096;

/// Splits `total` bytes (`total >= chunk >= 1`) into at most `threads` contiguous portions, each
/// at least `chunk` bytes long, covering `0..total` in order. Boundaries are multiples of 4 KiB
/// when that keeps every portion at least `chunk` long.
pub(crate) fn portions(total: usize, chunk: usize, threads: usize) -> Vec<Range<usize>> {
    let chunk = chunk.max(1);
    let k = (total / chunk).clamp(1, threads.max(1));
    let mut per = total / k;
    let aligned = per - per % PORTION_ALIGN;
    if aligned >= chunk {
        per = aligned;
    }
    (0..k)
        .map(|i| {
            let start = i * per;
            let end = if i + 1 == k { total } else { start + per };
            start..end
        })
        .collect()
}

/// The start offsets of the `chunk`-byte windows that cover `0..len` (`len >= chunk >= 1`):
/// `0, chunk, 2·chunk, …` and, when `len` is not a multiple of `chunk`, a last window
/// `len − chunk .. len` that overlaps the one before it. (Copying the overlap twice writes the
/// same bytes twice, which is harmless; it lets every DMA use a whole staging buffer.) Empty when
/// `len < chunk`.
pub(crate) fn windows(len: usize, chunk: usize) -> Vec<usize> {
    let chunk = chunk.max(1);
    if len < chunk {
        return Vec::new();
    }
    let n = len.div_ceil(chunk);
    (0..n - 1).map(|i| i * chunk).chain([len - chunk]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_windows(len: usize, chunk: usize) {
        let w = windows(len, chunk);
        if len < chunk {
            assert!(w.is_empty());
            return;
        }
        let mut covered = vec![0u8; len];
        let mut prev = None;
        for &s in &w {
            assert!(s + chunk <= len, "window {s} past {len}");
            if let Some(p) = prev {
                assert!(s > p, "windows not increasing");
            }
            prev = Some(s);
            covered[s..s + chunk].iter_mut().for_each(|c| *c = 1);
        }
        assert!(covered.iter().all(|&c| c == 1), "len {len} chunk {chunk}");
        assert_eq!(w.len(), len.div_ceil(chunk));
    }

    #[test]
    fn windows_cover_exactly() {
        for chunk in [1, 7, 4096, 65536] {
            for len in [
                0,
                1,
                chunk - 1,
                chunk,
                chunk + 1,
                2 * chunk,
                3 * chunk + chunk / 2,
                10 * chunk - 1,
            ] {
                check_windows(len, chunk);
            }
        }
        assert_eq!(windows(10, 4), [0, 4, 6]);
        assert_eq!(windows(8, 4), [0, 4]);
        assert_eq!(windows(4, 4), [0]);
    }

    fn check_portions(total: usize, chunk: usize, threads: usize) {
        let p = portions(total, chunk, threads);
        assert!(!p.is_empty() && p.len() <= threads.max(1));
        assert_eq!(p.len(), (total / chunk).clamp(1, threads.max(1)));
        assert_eq!(p[0].start, 0);
        assert_eq!(p.last().unwrap().end, total);
        for w in p.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in &p {
            assert!(r.len() >= chunk, "portion {r:?} shorter than {chunk}");
        }
    }

    #[test]
    fn portions_are_contiguous_and_long_enough() {
        for chunk in [4096, 65536, 4 << 20] {
            for threads in [1, 2, 3, 8, 64] {
                for total in [
                    chunk,
                    chunk + 1,
                    2 * chunk - 1,
                    7 * chunk / 2,
                    64 << 20,
                    (256 << 20) + 12345,
                ] {
                    if total >= chunk {
                        check_portions(total, chunk, threads);
                    }
                }
            }
        }
        // Aligned boundaries where possible.
        let p = portions(256 << 20, 4 << 20, 8);
        assert!(p.iter().all(|r| r.start % 4096 == 0));
        assert_eq!(p.len(), 8);
    }
}
