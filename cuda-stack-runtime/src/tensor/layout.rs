//! `Layout`: how a tensor's logical indices map to positions in its storage — shape, strides and
//! offset, as in PyTorch's `TensorImpl` (seed 003: "offset + i * stride[0] + j * stride[1]") and
//! candle's `Layout { shape, stride, start_offset }`.
//!
//! Everything here is host arithmetic (no GPU), so it is unit-tested on the CPU: contiguity,
//! views (narrow, select, transpose, permute, reshape, expand, unsqueeze, squeeze), broadcasting,
//! and the strided descriptor handed to the `strided_copy` kernel.

use super::error::{Result, TensorError};
use cuda_stack_kernels::{StridedLayout, MAX_RANK};
use smallvec::SmallVec;
use std::ops::Range;

/// Shape, strides (in elements) and offset (in elements) of a view into a storage buffer.
///
/// Element `(i0, …, i{n-1})` lives at `offset + Σ i_d · strides[d]`. Strides made by this crate
/// are never negative; a stride of 0 repeats an element along a dimension (a broadcast made by
/// [`Layout::expand`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    // Inline up to rank 4 (no heap allocation for the shape and strides of most tensors).
    shape: SmallVec<[usize; 4]>,
    strides: SmallVec<[isize; 4]>,
    offset: usize,
}

/// `Π shape`, or `None` on overflow (or above `isize::MAX`, so strides fit `isize`).
pub(crate) fn numel_of(shape: &[usize]) -> Option<usize> {
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))?;
    isize::try_from(n).ok().map(|_| n)
}

/// The row-major strides of `shape` (the last dimension has stride 1), or `None` on overflow.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Option<SmallVec<[isize; 4]>> {
    let mut strides: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
    let mut step = 1isize;
    for (d, &s) in shape.iter().enumerate().rev() {
        strides[d] = step;
        step = step.checked_mul(isize::try_from(s.max(1)).ok()?)?;
    }
    Some(strides)
}

/// The shape two operands broadcast to (NumPy/PyTorch rules: align the shapes at the right; each
/// pair of sizes must be equal or one of them 1).
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0usize; rank];
    for (i, o) in out.iter_mut().enumerate() {
        // Sizes aligned at the right; a missing leading dimension counts as 1.
        let da = (i + a.len()).checked_sub(rank).map_or(1, |j| a[j]);
        let db = (i + b.len()).checked_sub(rank).map_or(1, |j| b[j]);
        *o = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
                why: format!(
                    "the shapes cannot be broadcast together: size {da} vs {db} at dimension \
                     {i} of the broadcast shape (sizes must be equal, or one of them 1)"
                ),
            });
        };
    }
    Ok(out)
}

impl Layout {
    /// The row-major (C-contiguous) layout of `shape` at offset 0.
    pub fn contiguous(shape: &[usize]) -> Result<Layout> {
        let overflow = || TensorError::SizeOverflow {
            op: "layout",
            shape: shape.to_vec(),
        };
        numel_of(shape).ok_or_else(overflow)?;
        let strides = contiguous_strides(shape).ok_or_else(overflow)?;
        Ok(Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            offset: 0,
        })
    }

    /// The sizes of the dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The step of each dimension, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Position of element `(0, …, 0)` in the storage, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of dimensions (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar). Every layout of this type has a count that fits
    /// `isize` (checked where layouts are made).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the elements are stored in row-major order without gaps (PyTorch's
    /// `is_contiguous()`): strides of dimensions of size 1 do not matter, and an empty tensor is
    /// contiguous. The offset does not matter either: the elements are
    /// `offset .. offset + numel`.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1isize;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size != 1 {
                if stride != expected {
                    return false;
                }
                expected = expected.saturating_mul(size as isize);
            }
        }
        true
    }

    /// The storage range of a contiguous layout (`offset .. offset + numel`), else `None`.
    pub fn contiguous_range(&self) -> Option<Range<usize>> {
        if self.is_contiguous() {
            Some(self.offset..self.offset.checked_add(self.numel())?)
        } else {
            None
        }
    }

    /// Dimension `dim` (negative counts from the end, like PyTorch) as an index `0..rank`.
    pub fn dim(&self, op: &'static str, dim: isize) -> Result<usize> {
        let rank = self.rank();
        let d = if dim < 0 {
            (rank as isize).checked_add(dim)
        } else {
            Some(dim)
        };
        match d {
            Some(d) if d >= 0 && (d as usize) < rank => Ok(d as usize),
            _ => Err(TensorError::DimOutOfRange {
                op,
                dim,
                rank,
                shape: self.shape.to_vec(),
            }),
        }
    }

    fn out_of_range(&self, op: &'static str, dim: usize, what: String) -> TensorError {
        TensorError::IndexOutOfRange {
            op,
            dim,
            what,
            size: self.shape.get(dim).copied().unwrap_or(0),
            shape: self.shape.to_vec(),
        }
    }

    /// The view of `len` elements of dimension `dim` starting at `start` (PyTorch's `narrow`).
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Layout> {
        const OP: &str = "narrow";
        let d = self.dim(OP, dim)?;
        let size = self.shape[d];
        match start.checked_add(len) {
            Some(end) if end <= size => {}
            _ => {
                return Err(self.out_of_range(
                    OP,
                    d,
                    format!("start {start} + length {len} (must be <= {size})"),
                ))
            }
        }
        let mut out = self.clone();
        out.shape[d] = len;
        if len > 0 {
            out.offset = self
                .advance(d, start)
                .ok_or_else(|| TensorError::SizeOverflow {
                    op: OP,
                    shape: self.shape.to_vec(),
                })?;
        }
        Ok(out)
    }

    /// `offset + index · strides[d]` (strides made here are non-negative).
    fn advance(&self, d: usize, index: usize) -> Option<usize> {
        let step = usize::try_from(self.strides[d]).ok()?;
        self.offset.checked_add(index.checked_mul(step)?)
    }

    /// The view at `index` of dimension `dim`, without that dimension (PyTorch's `select`, or
    /// `t[index]` for `dim == 0`).
    pub fn select(&self, dim: isize, index: usize) -> Result<Layout> {
        const OP: &str = "select";
        let d = self.dim(OP, dim)?;
        if index >= self.shape[d] {
            return Err(self.out_of_range(
                OP,
                d,
                format!("index {index} (must be < {})", self.shape[d]),
            ));
        }
        let offset = self
            .advance(d, index)
            .ok_or_else(|| TensorError::SizeOverflow {
                op: OP,
                shape: self.shape.to_vec(),
            })?;
        let mut out = self.clone();
        out.shape.remove(d);
        out.strides.remove(d);
        out.offset = offset;
        Ok(out)
    }

    /// Swaps two dimensions (no copy).
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Layout> {
        const OP: &str = "transpose";
        let (a, b) = (self.dim(OP, dim0)?, self.dim(OP, dim1)?);
        let mut out = self.clone();
        out.shape.swap(a, b);
        out.strides.swap(a, b);
        Ok(out)
    }

    /// Reorders the dimensions: dimension `i` of the result is dimension `dims[i]` of `self`.
    pub fn permute(&self, dims: &[isize]) -> Result<Layout> {
        const OP: &str = "permute";
        if dims.len() != self.rank() {
            return Err(TensorError::InvalidArgument {
                op: OP,
                problem: format!(
                    "the permutation {dims:?} has {} entries, but the tensor of shape {:?} has \
                     {} dimensions",
                    dims.len(),
                    self.shape,
                    self.rank()
                ),
            });
        }
        let mut seen = vec![false; self.rank()];
        let mut out = Layout {
            shape: SmallVec::with_capacity(dims.len()),
            strides: SmallVec::with_capacity(dims.len()),
            offset: self.offset,
        };
        for &dim in dims {
            let d = self.dim(OP, dim)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(TensorError::InvalidArgument {
                    op: OP,
                    problem: format!(
                        "{dims:?} is not a permutation: dimension {d} appears twice (tensor of \
                         shape {:?})",
                        self.shape
                    ),
                });
            }
            out.shape.push(self.shape[d]);
            out.strides.push(self.strides[d]);
        }
        Ok(out)
    }

    /// The same elements with another shape (no copy). Needs a contiguous layout (else
    /// [`TensorError::NonContiguousView`], like PyTorch's `view`) and the same element count.
    pub fn reshape(&self, op: &'static str, shape: &[usize]) -> Result<Layout> {
        if numel_of(shape) != Some(self.numel()) {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: self.shape.to_vec(),
                rhs: shape.to_vec(),
                why: format!(
                    "shape {shape:?} is invalid for a tensor of {} elements",
                    self.numel()
                ),
            });
        }
        if !self.is_contiguous() {
            return Err(TensorError::NonContiguousView {
                op,
                shape: self.shape.to_vec(),
                strides: self.strides.to_vec(),
                requested: shape.to_vec(),
            });
        }
        let mut out = Layout::contiguous(shape)?;
        out.offset = self.offset;
        Ok(out)
    }

    /// The view broadcast to `shape` (PyTorch's `expand`, no copy): dimensions are aligned at the
    /// right; a size-1 dimension may grow to any size (its stride becomes 0), other sizes must
    /// match; new leading dimensions have stride 0.
    pub fn expand(&self, shape: &[usize]) -> Result<Layout> {
        const OP: &str = "expand";
        let mismatch = |why: String| TensorError::ShapeMismatch {
            op: OP,
            lhs: self.shape.to_vec(),
            rhs: shape.to_vec(),
            why,
        };
        if shape.len() < self.rank() {
            return Err(mismatch(format!(
                "the target shape has {} dimensions, fewer than the tensor's {}",
                shape.len(),
                self.rank()
            )));
        }
        if numel_of(shape).is_none() {
            return Err(TensorError::SizeOverflow {
                op: OP,
                shape: shape.to_vec(),
            });
        }
        let lead = shape.len() - self.rank();
        let mut strides: SmallVec<[isize; 4]> = SmallVec::from_elem(0, shape.len());
        for (i, &want) in shape.iter().enumerate().skip(lead) {
            let (have, stride) = (self.shape[i - lead], self.strides[i - lead]);
            strides[i] = if have == want {
                stride
            } else if have == 1 {
                0
            } else {
                return Err(mismatch(format!(
                    "the expanded size {want} must match the existing size {have} at \
                     non-singleton dimension {i}"
                )));
            };
        }
        Ok(Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            offset: self.offset,
        })
    }

    /// Inserts a dimension of size 1 at `dim` (`-(rank + 1) ..= rank`).
    pub fn unsqueeze(&self, dim: isize) -> Result<Layout> {
        const OP: &str = "unsqueeze";
        let rank = self.rank() as isize;
        let d = if dim < 0 { rank + 1 + dim } else { dim };
        if d < 0 || d > rank {
            return Err(TensorError::DimOutOfRange {
                op: OP,
                dim,
                rank: self.rank() + 1,
                shape: self.shape.to_vec(),
            });
        }
        let d = d as usize;
        // The stride that keeps a contiguous layout contiguous (any value would be correct).
        let stride = match (self.shape.get(d), self.strides.get(d)) {
            (Some(&s), Some(&st)) => st.saturating_mul(s.max(1) as isize),
            _ => 1,
        };
        let mut out = self.clone();
        out.shape.insert(d, 1);
        out.strides.insert(d, stride);
        Ok(out)
    }

    /// Removes dimension `dim` if its size is 1 (otherwise returns the layout unchanged, like
    /// PyTorch).
    pub fn squeeze(&self, dim: isize) -> Result<Layout> {
        let d = self.dim("squeeze", dim)?;
        let mut out = self.clone();
        if out.shape[d] == 1 {
            out.shape.remove(d);
            out.strides.remove(d);
        }
        Ok(out)
    }

    /// Shape and strides with size-1 dimensions dropped and neighbours that step through memory
    /// as one dimension merged (`strides[d] == strides[d + 1] · shape[d + 1]`): the same elements
    /// in the same order, with as few dimensions as possible.
    pub fn merged(&self) -> (Vec<usize>, Vec<isize>) {
        let mut shape: Vec<usize> = Vec::with_capacity(self.rank());
        let mut strides: Vec<isize> = Vec::with_capacity(self.rank());
        for (&s, &st) in self.shape.iter().zip(&self.strides) {
            if s == 1 {
                continue;
            }
            if let (Some(ls), Some(lst)) = (shape.last_mut(), strides.last_mut()) {
                if (s as isize).checked_mul(st) == Some(*lst) {
                    *ls *= s;
                    *lst = st;
                    continue;
                }
            }
            shape.push(s);
            strides.push(st);
        }
        (shape, strides)
    }

    /// The descriptor the `strided_copy` kernels take, with dimensions merged first
    /// ([`Layout::merged`]); [`TensorError::TooManyDims`] beyond [`MAX_RANK`] merged dimensions.
    pub fn to_strided(&self, op: &'static str) -> Result<StridedLayout> {
        let (shape, strides) = self.merged();
        if shape.len() > MAX_RANK {
            return Err(TensorError::TooManyDims {
                op,
                shape: self.shape.to_vec(),
                strides: self.strides.to_vec(),
                rank: shape.len(),
                max: MAX_RANK,
            });
        }
        StridedLayout::new(&shape, &strides, self.offset).ok_or_else(|| TensorError::SizeOverflow {
            op,
            shape: self.shape.to_vec(),
        })
    }

    /// The storage index of the last element the view reaches (`None` when it is empty or the
    /// index overflows); a storage of at least this plus one elements holds the view.
    pub fn max_index(&self) -> Option<usize> {
        if self.numel() == 0 {
            return None;
        }
        self.shape
            .iter()
            .zip(&self.strides)
            .try_fold(self.offset, |acc, (&s, &st)| {
                acc.checked_add((s - 1).checked_mul(usize::try_from(st).ok()?)?)
            })
    }

    /// The storage index of each element in row-major order (a host-side twin of
    /// `strided_copy`, for tests and small host reads).
    pub fn indices(&self) -> Vec<usize> {
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; self.rank()];
        for _ in 0..n {
            let pos = idx
                .iter()
                .zip(&self.strides)
                .fold(self.offset as isize, |acc, (&i, &st)| acc + i as isize * st);
            out.push(pos as usize);
            for d in (0..self.rank()).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(shape: &[usize]) -> Layout {
        Layout::contiguous(shape).unwrap()
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        let x = l(&[2, 3, 4]);
        assert_eq!(x.strides(), &[12, 4, 1]);
        assert_eq!(x.numel(), 24);
        assert!(x.is_contiguous());
        assert_eq!(l(&[]).strides(), &[] as &[isize]);
        assert_eq!(l(&[]).numel(), 1);
        assert!(l(&[]).is_contiguous());
        // Zero-size dims: strides as if they were 1, and the tensor is contiguous.
        assert_eq!(l(&[3, 0, 2]).strides(), &[2, 2, 1]);
        assert!(l(&[3, 0, 2]).is_contiguous());
    }

    #[test]
    fn size_overflow_is_an_error() {
        assert!(matches!(
            Layout::contiguous(&[usize::MAX, 2]),
            Err(TensorError::SizeOverflow { .. })
        ));
        assert!(matches!(
            l(&[1]).expand(&[usize::MAX / 2, 4]),
            Err(TensorError::SizeOverflow { .. })
        ));
    }

    #[test]
    fn transpose_is_not_contiguous_until_size_one() {
        let t = l(&[2, 3]).transpose(0, 1).unwrap();
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.strides(), &[1, 3]);
        assert!(!t.is_contiguous());
        assert_eq!(t.indices(), vec![0, 3, 1, 4, 2, 5]);
        // A transpose involving a size-1 dimension is still contiguous.
        let u = l(&[1, 5]).transpose(0, -1).unwrap();
        assert_eq!(u.shape(), &[5, 1]);
        assert!(u.is_contiguous());
        assert_eq!(u.contiguous_range(), Some(0..5));
    }

    #[test]
    fn negative_dims_wrap_and_out_of_range_is_an_error() {
        let x = l(&[2, 3, 4]);
        assert_eq!(x.dim("t", -1).unwrap(), 2);
        assert_eq!(x.dim("t", -3).unwrap(), 0);
        for bad in [3, -4, isize::MIN, isize::MAX] {
            match x.dim("t", bad) {
                Err(TensorError::DimOutOfRange { dim, rank: 3, .. }) => assert_eq!(dim, bad),
                other => panic!("{other:?}"),
            }
        }
        assert!(l(&[]).dim("t", 0).is_err());
    }

    #[test]
    fn narrow_offsets_and_bounds() {
        let x = l(&[4, 5]);
        let n = x.narrow(1, 2, 3).unwrap();
        assert_eq!(
            (n.shape(), n.strides(), n.offset()),
            (&[4, 3][..], &[5, 1][..], 2)
        );
        assert!(!n.is_contiguous());
        assert_eq!(n.indices()[..4], [2, 3, 4, 7]);
        let r = x.narrow(0, 1, 2).unwrap();
        assert_eq!(r.offset(), 5);
        assert!(r.is_contiguous());
        assert_eq!(r.contiguous_range(), Some(5..15));
        // Empty narrows at the end are fine; past it is an error naming the size.
        assert_eq!(x.narrow(1, 5, 0).unwrap().numel(), 0);
        for (start, len) in [(4, 2), (6, 0), (usize::MAX, 2)] {
            match x.narrow(-1, start, len) {
                Err(TensorError::IndexOutOfRange {
                    dim: 1, size: 5, ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(x.narrow(2, 0, 1).is_err());
    }

    #[test]
    fn select_drops_the_dimension() {
        let x = l(&[3, 4]);
        let s = x.select(0, 2).unwrap();
        assert_eq!((s.shape(), s.offset()), (&[4][..], 8));
        let c = x.select(1, 1).unwrap();
        assert_eq!(
            (c.shape(), c.strides(), c.offset()),
            (&[3][..], &[4][..], 1)
        );
        assert!(matches!(
            x.select(0, 3),
            Err(TensorError::IndexOutOfRange {
                dim: 0,
                size: 3,
                ..
            })
        ));
    }

    #[test]
    fn permute_checks_it_is_a_permutation() {
        let x = l(&[2, 3, 4]);
        let p = x.permute(&[2, 0, 1]).unwrap();
        assert_eq!((p.shape(), p.strides()), (&[4, 2, 3][..], &[1, 12, 4][..]));
        let q = x.permute(&[-1, 0, 1]).unwrap();
        assert_eq!(p, q);
        assert!(matches!(
            x.permute(&[0, 0, 1]),
            Err(TensorError::InvalidArgument { .. })
        ));
        assert!(matches!(
            x.permute(&[0, 1]),
            Err(TensorError::InvalidArgument { .. })
        ));
        assert!(matches!(
            x.permute(&[0, 1, 3]),
            Err(TensorError::DimOutOfRange { .. })
        ));
    }

    #[test]
    fn reshape_needs_contiguous_and_same_count() {
        let x = l(&[2, 6]);
        let r = x.reshape("view", &[3, 4]).unwrap();
        assert_eq!(r.strides(), &[4, 1]);
        let off = x.narrow(0, 1, 1).unwrap().reshape("view", &[2, 3]).unwrap();
        assert_eq!(off.offset(), 6);
        match x.reshape("view", &[5]) {
            Err(TensorError::ShapeMismatch { lhs, rhs, .. }) => {
                assert_eq!((lhs, rhs), (vec![2, 6], vec![5]))
            }
            other => panic!("{other:?}"),
        }
        let t = x.transpose(0, 1).unwrap();
        match t.reshape("view", &[12]) {
            Err(e @ TensorError::NonContiguousView { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("[6, 2]") && m.contains("[1, 6]") && m.contains("[12]"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Reshape of an empty tensor.
        assert_eq!(
            l(&[0, 3]).reshape("view", &[3, 0]).unwrap().shape(),
            &[3, 0]
        );
    }

    #[test]
    fn expand_broadcasts_with_zero_strides() {
        let x = l(&[3, 1]);
        let e = x.expand(&[2, 3, 4]).unwrap();
        assert_eq!((e.shape(), e.strides()), (&[2, 3, 4][..], &[0, 1, 0][..]));
        assert!(!e.is_contiguous());
        assert_eq!(e.indices()[..8], [0, 0, 0, 0, 1, 1, 1, 1]);
        assert!(matches!(
            x.expand(&[4, 4]),
            Err(TensorError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            x.expand(&[3]),
            Err(TensorError::ShapeMismatch { .. })
        ));
        assert_eq!(x.expand(&[3, 0]).unwrap().numel(), 0);
        // A scalar expands to anything.
        assert_eq!(l(&[]).expand(&[2, 2]).unwrap().strides(), &[0, 0]);
    }

    #[test]
    fn broadcast_shapes_follow_numpy() {
        assert_eq!(
            broadcast_shapes("add", &[2, 1, 4], &[3, 1]).unwrap(),
            vec![2, 3, 4]
        );
        assert_eq!(broadcast_shapes("add", &[], &[5]).unwrap(), vec![5]);
        assert_eq!(broadcast_shapes("add", &[0], &[1]).unwrap(), vec![0]);
        match broadcast_shapes("add", &[2, 3], &[4]) {
            Err(e @ TensorError::ShapeMismatch { .. }) => {
                let m = e.to_string();
                assert!(m.contains("[2, 3]") && m.contains("[4]"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsqueeze_and_squeeze() {
        let x = l(&[2, 3]);
        let u = x.unsqueeze(1).unwrap();
        assert_eq!((u.shape(), u.is_contiguous()), (&[2, 1, 3][..], true));
        assert_eq!(x.unsqueeze(-1).unwrap().shape(), &[2, 3, 1]);
        assert_eq!(x.unsqueeze(0).unwrap().shape(), &[1, 2, 3]);
        assert!(x.unsqueeze(3).is_err() && x.unsqueeze(-4).is_err());
        assert_eq!(u.squeeze(1).unwrap(), x);
        assert_eq!(x.squeeze(0).unwrap(), x);
        assert_eq!(l(&[]).unsqueeze(0).unwrap().shape(), &[1]);
    }

    #[test]
    fn merged_drops_ones_and_joins_contiguous_runs() {
        assert_eq!(l(&[2, 3, 4]).merged(), (vec![24], vec![1]));
        assert_eq!(l(&[1, 1]).merged(), (vec![], vec![]));
        let t = l(&[2, 3, 4]).permute(&[1, 0, 2]).unwrap();
        assert_eq!(t.merged(), (vec![3, 2, 4], vec![4, 12, 1]));
        let n = l(&[4, 5, 6]).narrow(1, 1, 3).unwrap();
        assert_eq!(n.merged(), (vec![4, 18], vec![30, 1]));
        let e = l(&[3]).expand(&[2, 3]).unwrap();
        assert_eq!(e.merged(), (vec![2, 3], vec![0, 1]));
    }

    #[test]
    fn strided_descriptor_and_rank_limit() {
        let t = l(&[2, 3]).transpose(0, 1).unwrap();
        let s = t.to_strided("contiguous").unwrap();
        assert_eq!(s.rank, 2);
        assert_eq!(
            (&s.shape[..2], &s.strides[..2]),
            (&[3i64, 2][..], &[1i64, 3][..])
        );
        // Nine dimensions that cannot merge (each transposed pair) exceed the kernel's 8 …
        let x = l(&[2; 10]);
        let p = x.permute(&[1, 0, 3, 2, 5, 4, 7, 6, 9, 8]).unwrap();
        assert!(matches!(
            p.to_strided("contiguous"),
            Err(TensorError::TooManyDims { max: 8, .. })
        ));
        // … but ten contiguous dimensions merge into one.
        assert_eq!(x.to_strided("contiguous").unwrap().rank, 1);
    }

    #[test]
    fn max_index_bounds_the_storage() {
        assert_eq!(l(&[2, 3]).max_index(), Some(5));
        assert_eq!(l(&[2, 3]).transpose(0, 1).unwrap().max_index(), Some(5));
        assert_eq!(l(&[4, 5]).narrow(1, 1, 2).unwrap().max_index(), Some(17));
        assert_eq!(l(&[0, 5]).max_index(), None);
    }
}
