//! The attention kernels' strided outputs: [`AttentionOutput`] (the forward's `out`) and
//! [`AttentionGrads`] (the backward's dq, dk, dv: three views, or one packed `[B, N, 3, H, D]`
//! buffer), with the checks that keep every write inside its buffer and every element written by
//! at most one thread.

use super::{too_large, AttentionShape, HeadStrides};
use crate::{Element, Error, Result};
use cuda_stack_driver::DeviceSlice;

/// One strided output of the attention kernels: its buffer and the strides it is written with
/// (batch, head and row strides in elements, unit last stride). The view must lie inside the
/// buffer and must not overlap itself (no two elements at one address); both are checked before
/// any launch.
#[derive(Debug)]
pub struct AttentionOutput<'a, T> {
    /// The buffer (the view's first element is its first element).
    pub data: &'a mut DeviceSlice<T>,
    /// Batch, head and row strides in elements.
    pub strides: HeadStrides,
}

impl<'a, T> AttentionOutput<'a, T> {
    /// A dense `[B, heads, rows, head_dim]` output.
    pub fn dense(data: &'a mut DeviceSlice<T>, heads: usize, rows: usize, head_dim: usize) -> Self {
        AttentionOutput {
            data,
            strides: HeadStrides::dense(heads, rows, head_dim),
        }
    }

    /// A `[B, heads, rows, head_dim]` view of a dense `[B, rows, heads, head_dim]` buffer (the
    /// heads side by side in each row: a `[B, rows, heads · head_dim]` array with no copy).
    pub fn token_major(
        data: &'a mut DeviceSlice<T>,
        heads: usize,
        rows: usize,
        head_dim: usize,
    ) -> Self {
        AttentionOutput {
            data,
            strides: HeadStrides::token_major(heads, rows, head_dim),
        }
    }
}

/// Where the backward pass writes dq, dk and dv.
#[derive(Debug)]
pub enum AttentionGrads<'a, T> {
    /// Three buffers, each a strided view ([`AttentionOutput`]): dq `[B, H, Nq, D]`, dk and dv
    /// `[B, H, Nk, D]`.
    Separate {
        /// The query gradient.
        dq: AttentionOutput<'a, T>,
        /// The key gradient.
        dk: AttentionOutput<'a, T>,
        /// The value gradient.
        dv: AttentionOutput<'a, T>,
    },
    /// One dense `[B, N, 3, H, D]` buffer (exactly `3·B·N·H·D` elements; self-attention,
    /// `Nq == Nk == N`): element `(b, n, 0, h, d)` is dq's `(b, h, n, d)`, `1` dk's, `2` dv's —
    /// the layout of the gradient of a packed `[B, N, 3·H·D]` qkv projection, written in place
    /// ([`HeadStrides::packed_qkv`]).
    PackedQkv(&'a mut DeviceSlice<T>),
}

impl<'a, T> AttentionGrads<'a, T> {
    /// Three dense outputs: dq `[B, H, Nq, D]`, dk and dv `[B, H, Nk, D]`.
    pub fn dense(
        shape: &AttentionShape,
        dq: &'a mut DeviceSlice<T>,
        dk: &'a mut DeviceSlice<T>,
        dv: &'a mut DeviceSlice<T>,
    ) -> Self {
        let (h, d) = (shape.heads, shape.head_dim);
        AttentionGrads::Separate {
            dq: AttentionOutput::dense(dq, h, shape.q_len, d),
            dk: AttentionOutput::dense(dk, h, shape.kv_len, d),
            dv: AttentionOutput::dense(dv, h, shape.kv_len, d),
        }
    }
}

impl HeadStrides {
    /// The strides of the `[B, heads, rows, head_dim]` view of a dense
    /// `[B, rows, heads, head_dim]` array.
    pub fn token_major(heads: usize, rows: usize, head_dim: usize) -> Self {
        HeadStrides {
            batch: rows * heads * head_dim,
            head: head_dim,
            row: heads * head_dim,
        }
    }

    /// The strides of q's (and k's, v's) `[B, heads, rows, head_dim]` view of a dense
    /// `[B, rows, 3, heads, head_dim]` array; k's view starts `heads · head_dim` elements in,
    /// v's `2 · heads · head_dim`.
    pub fn packed_qkv(heads: usize, rows: usize, head_dim: usize) -> Self {
        HeadStrides {
            batch: rows * 3 * heads * head_dim,
            head: head_dim,
            row: 3 * heads * head_dim,
        }
    }
}

/// The strides of dq, dk, dv (where their views start: [`AttentionGrads::views`] and
/// [`AttentionGrads::with_dkdv`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct GradLayout {
    pub(super) dq: HeadStrides,
    pub(super) dk: HeadStrides,
    pub(super) dv: HeadStrides,
}

impl<T: Element> AttentionGrads<'_, T> {
    /// The device addresses and strides of dq, dk, dv's first elements (for the kernels'
    /// alignment and stride rules).
    pub(super) fn views(&self, shape: &AttentionShape) -> [(u64, HeadStrides); 3] {
        let l = self.layout(shape);
        let size = std::mem::size_of::<T>() as u64;
        match self {
            AttentionGrads::Separate { dq, dk, dv } => [
                (dq.data.as_raw_ptr(), l.dq),
                (dk.data.as_raw_ptr(), l.dk),
                (dv.data.as_raw_ptr(), l.dv),
            ],
            AttentionGrads::PackedQkv(p) => {
                let hd = (shape.heads.saturating_mul(shape.head_dim)) as u64;
                let base = p.as_raw_ptr();
                [
                    (base, l.dq),
                    (base.wrapping_add(hd.wrapping_mul(size)), l.dk),
                    (
                        base.wrapping_add(2u64.wrapping_mul(hd).wrapping_mul(size)),
                        l.dv,
                    ),
                ]
            }
        }
    }

    /// The strides and offsets of the three views.
    pub(super) fn layout(&self, shape: &AttentionShape) -> GradLayout {
        match self {
            AttentionGrads::Separate { dq, dk, dv } => GradLayout {
                dq: dq.strides,
                dk: dk.strides,
                dv: dv.strides,
            },
            AttentionGrads::PackedQkv(_) => {
                let st = HeadStrides::packed_qkv(
                    shape.heads,
                    shape.q_len.max(shape.kv_len),
                    shape.head_dim,
                );
                GradLayout {
                    dq: st,
                    dk: st,
                    dv: st,
                }
            }
        }
    }
}

impl<T: Element> AttentionGrads<'_, T> {
    /// dq's buffer (dq's view starts at its first element).
    pub(super) fn dq_buf(&mut self) -> &mut DeviceSlice<T> {
        match self {
            AttentionGrads::Separate { dq, .. } => dq.data,
            AttentionGrads::PackedQkv(p) => p,
        }
    }

    /// Calls `f` with dk's buffer (dk's view starts at its first element), dv's buffer and
    /// `dv_at`, as the dk/dv kernels take them: for separate buffers `dv_at = -1` (dv's view
    /// starts at dv's first element); for the packed one dk's buffer is the packed buffer from
    /// dk's first element on, dv's an empty view (the kernels do not access it) and `dv_at` the
    /// offset of dv's first element past dk's (`H·D`), so that the kernels write both through
    /// dk's buffer.
    pub(super) fn with_dkdv<R>(
        &mut self,
        shape: &AttentionShape,
        f: impl FnOnce(&mut DeviceSlice<T>, &mut DeviceSlice<T>, i64) -> Result<R>,
    ) -> Result<R> {
        match self {
            AttentionGrads::Separate { dk, dv, .. } => f(dk.data, dv.data, -1),
            AttentionGrads::PackedQkv(p) => {
                let hd = shape.heads.saturating_mul(shape.head_dim);
                let (_, mut rest) = p.split_at_mut(hd)?;
                let n = rest.len();
                let (mut dk, mut empty) = rest.split_at_mut(n)?;
                // hd <= the packed buffer's length (checked), which fits an i64.
                f(&mut dk, &mut empty, hd as i64)
            }
        }
    }
}

/// Whether a `[B, H, rows, D]` view with these strides (unit last stride) puts no two elements at
/// one address: ordered by stride, each dimension of more than one element must step past
/// everything the smaller ones span. (A sufficient rule, which every layout a tensor op makes —
/// dense, permuted, a slice of a packed array — meets.) The caller checked that the view's last
/// element fits a `usize`.
pub(super) fn non_overlapping(sh: &AttentionShape, rows: usize, st: HeadStrides) -> bool {
    let mut dims = [
        (1usize, sh.head_dim),
        (st.row, rows),
        (st.head, sh.heads),
        (st.batch, sh.batch),
    ];
    if dims.iter().any(|&(_, n)| n == 0) {
        return true; // nothing is written
    }
    dims.sort_unstable();
    let mut span = 1usize; // one past the largest offset of the dimensions so far
    for (s, n) in dims {
        if n <= 1 {
            continue;
        }
        if s < span {
            return false;
        }
        span = match s.checked_mul(n - 1).and_then(|x| x.checked_add(span)) {
            Some(x) => x,
            None => return false,
        };
    }
    true
}

/// Checks that the `[B, H, rows, D]` view at `offset` elements into a buffer of `len` elements
/// lies inside it and does not overlap itself.
pub(super) fn check_output(
    op: &'static str,
    what: &'static str,
    len: usize,
    offset: usize,
    st: HeadStrides,
    sh: &AttentionShape,
    rows: usize,
) -> Result<()> {
    for s in [st.batch, st.head, st.row] {
        if s > i64::MAX as usize {
            return Err(too_large(op, what));
        }
    }
    if sh.batch == 0 || sh.heads == 0 || rows == 0 {
        return Ok(()); // nothing is written
    }
    let last = [
        (sh.batch - 1, st.batch),
        (sh.heads - 1, st.head),
        (rows - 1, st.row),
    ]
    .iter()
    .try_fold(offset + (sh.head_dim - 1), |acc, &(n, s)| {
        n.checked_mul(s).and_then(|t| t.checked_add(acc))
    })
    .ok_or_else(|| too_large(op, what))?;
    if last >= len {
        return Err(Error::Shape {
            op,
            what,
            expected: format!(
                "a [{}, {}, {rows}, {}] view with strides ({}, {}, {}, 1) starting {offset} \
                 elements in: at least {} elements",
                sh.batch,
                sh.heads,
                sh.head_dim,
                st.batch,
                st.head,
                st.row,
                last + 1
            ),
            found: format!("{len} elements"),
        });
    }
    if !non_overlapping(sh, rows, st) {
        return Err(Error::Invalid {
            op,
            problem: format!(
                "`{what}`: a [{}, {}, {rows}, {}] view with strides ({}, {}, {}, 1) puts several \
                 elements at one address; an output view must not overlap itself",
                sh.batch, sh.heads, sh.head_dim, st.batch, st.head, st.row
            ),
        });
    }
    Ok(())
}

/// Checks dq, dk, dv against their buffers: each view inside its buffer and not overlapping
/// itself; the packed buffer exactly `3·B·N·H·D` elements with `Nq == Nk`.
pub(super) fn check_grads<T: Element>(
    op: &'static str,
    grads: &AttentionGrads<'_, T>,
    sh: &AttentionShape,
) -> Result<()> {
    let l = grads.layout(sh);
    match grads {
        AttentionGrads::Separate { dq, dk, dv } => {
            check_output(op, "dq", dq.data.len(), 0, l.dq, sh, sh.q_len)?;
            check_output(op, "dk", dk.data.len(), 0, l.dk, sh, sh.kv_len)?;
            check_output(op, "dv", dv.data.len(), 0, l.dv, sh, sh.kv_len)
        }
        AttentionGrads::PackedQkv(p) => {
            if sh.q_len != sh.kv_len {
                return Err(Error::Invalid {
                    op,
                    problem: format!(
                        "a packed [B, N, 3, H, D] gradient needs as many queries as keys, but \
                         Nq = {} and Nk = {}",
                        sh.q_len, sh.kv_len
                    ),
                });
            }
            let need = super::product(
                op,
                "3·B·N·H·D",
                &[3, sh.batch, sh.q_len, sh.heads, sh.head_dim],
            )?;
            if p.len() != need {
                return Err(Error::Shape {
                    op,
                    what: "packed dq, dk, dv",
                    expected: format!(
                        "a dense [{}, {}, 3, {}, {}] array ({need} elements)",
                        sh.batch, sh.q_len, sh.heads, sh.head_dim
                    ),
                    found: format!("{} elements", p.len()),
                });
            }
            // The three views interleave without overlapping (each (b, n, i, h) row of D
            // elements belongs to one of them), and lie inside the exact length checked.
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(batch: usize, heads: usize, n: usize, head_dim: usize) -> AttentionShape {
        AttentionShape {
            batch,
            heads,
            q_len: n,
            kv_len: n,
            head_dim,
            causal: false,
        }
    }

    #[test]
    fn layouts_of_tensor_ops_do_not_overlap() {
        let sh = shape(2, 3, 5, 8);
        for st in [
            HeadStrides::dense(3, 5, 8),
            HeadStrides::token_major(3, 5, 8),
            HeadStrides::packed_qkv(3, 5, 8),
        ] {
            assert!(non_overlapping(&sh, 5, st), "{st:?}");
        }
    }

    #[test]
    fn overlapping_views_are_refused() {
        let sh = shape(2, 3, 5, 8);
        // Rows 4 elements apart with D = 8; heads on top of each other; a zero batch stride.
        let bad = [
            HeadStrides {
                batch: 120,
                head: 40,
                row: 4,
            },
            HeadStrides {
                batch: 120,
                head: 0,
                row: 8,
            },
            HeadStrides {
                batch: 0,
                head: 40,
                row: 8,
            },
        ];
        for st in bad {
            assert!(!non_overlapping(&sh, 5, st), "{st:?}");
            let r = check_output("t", "out", 1 << 20, 0, st, &sh, 5);
            assert!(matches!(r, Err(Error::Invalid { .. })), "{st:?}: {r:?}");
        }
        // Extent-1 dimensions may have any stride.
        let one = shape(1, 1, 1, 8);
        let st = HeadStrides {
            batch: 0,
            head: 0,
            row: 0,
        };
        assert!(non_overlapping(&one, 1, st));
    }

    #[test]
    fn outputs_past_their_buffer_are_shape_errors() {
        let sh = shape(2, 3, 5, 8);
        let st = HeadStrides::token_major(3, 5, 8);
        assert!(check_output("t", "out", 240, 0, st, &sh, 5).is_ok());
        let r = check_output("t", "out", 239, 0, st, &sh, 5);
        assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
        let r = check_output("t", "dk", 240, 1, st, &sh, 5);
        assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    }
}
