//! `StridedLayout`: a strided N-d view of a buffer, passed by value to `strided_copy_b*`.

use bytemuck::{Pod, Zeroable};

/// The most dimensions a [`StridedLayout`] describes.
pub const MAX_RANK: usize = 8;

/// A strided view `(shape, strides, offset)` of up to 8 dimensions, in elements, with the exact
/// C layout of `struct StridedLayout` in `kernels/cuda/strided_copy.cu` (144 bytes: `rank` at 0,
/// 4 bytes of padding, `shape` at 8, `strides` at 72, `offset` at 136).
///
/// Element `(i0, …, i{rank-1})` of the view lives at `offset + Σ i_d · strides[d]`; strides may be
/// 0 (broadcast) or negative. Dimensions `>= rank` are ignored; rank 0 is a scalar.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct StridedLayout {
    /// Number of dimensions, `0..=8`.
    pub rank: i32,
    /// Padding so that `shape` is 8-byte aligned, as in C; always 0.
    pub _pad: i32,
    /// Extent of each dimension (elements).
    pub shape: [i64; MAX_RANK],
    /// Step of each dimension in elements (signed).
    pub strides: [i64; MAX_RANK],
    /// Element offset of the view's first element.
    pub offset: i64,
}

const _: () = assert!(std::mem::size_of::<StridedLayout>() == 144);
const _: () = assert!(std::mem::align_of::<StridedLayout>() == 8);

impl StridedLayout {
    /// A view with these `shape` and `strides` (equal lengths, at most 8) starting at `offset`;
    /// `None` when the lengths differ or exceed [`MAX_RANK`].
    pub fn new(shape: &[usize], strides: &[isize], offset: usize) -> Option<StridedLayout> {
        if shape.len() != strides.len() || shape.len() > MAX_RANK {
            return None;
        }
        let mut l = StridedLayout::zeroed();
        l.rank = shape.len() as i32;
        for d in 0..shape.len() {
            l.shape[d] = i64::try_from(shape[d]).ok()?;
            l.strides[d] = strides[d] as i64;
        }
        l.offset = i64::try_from(offset).ok()?;
        Some(l)
    }

    /// The row-major (C-contiguous) layout of `shape`; `None` above [`MAX_RANK`] dimensions.
    pub fn contiguous(shape: &[usize]) -> Option<StridedLayout> {
        let mut strides = vec![0isize; shape.len()];
        let mut step = 1isize;
        for d in (0..shape.len()).rev() {
            strides[d] = step;
            step = step.checked_mul(isize::try_from(shape[d]).ok()?)?;
        }
        StridedLayout::new(shape, &strides, 0)
    }

    /// The dimensions actually used (`shape[..rank]`), or `None` when `rank` is outside `0..=8`.
    pub fn dims(&self) -> Option<&[i64]> {
        let r = usize::try_from(self.rank).ok().filter(|&r| r <= MAX_RANK)?;
        Some(&self.shape[..r])
    }

    /// Number of elements of the view (`Π shape[..rank]`; 1 for rank 0), or `None` when the
    /// rank is invalid, an extent is negative, or the product overflows.
    pub fn numel(&self) -> Option<usize> {
        self.dims()?
            .iter()
            .try_fold(1usize, |acc, &s| acc.checked_mul(usize::try_from(s).ok()?))
    }

    /// The same view with fewer dimensions: extent-1 dimensions dropped and each pair of
    /// neighbours merged where the outer one steps exactly over the inner one
    /// (`strides[d] == strides[d + 1] · shape[d + 1]`). Same elements, same order, so a copy
    /// through it writes the same output with less index arithmetic (a contiguous view becomes
    /// rank 1). `None` when the layout is invalid.
    pub fn simplified(&self) -> Option<StridedLayout> {
        let dims = self.dims()?;
        let mut shape: Vec<i64> = Vec::with_capacity(dims.len());
        let mut strides: Vec<i64> = Vec::with_capacity(dims.len());
        for (d, &extent) in dims.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let stride = self.strides[d];
            match (shape.last_mut(), strides.last()) {
                (Some(outer), Some(&outer_stride))
                    if Some(outer_stride) == stride.checked_mul(extent) =>
                {
                    *outer = outer.checked_mul(extent)?;
                    *strides.last_mut()? = stride;
                }
                _ => {
                    shape.push(extent);
                    strides.push(stride);
                }
            }
        }
        if dims.contains(&0) {
            // An empty view stays empty (its strides do not matter).
            shape = vec![0];
            strides = vec![1];
        }
        let mut l = StridedLayout::zeroed();
        l.rank = shape.len() as i32;
        l.shape[..shape.len()].copy_from_slice(&shape);
        l.strides[..strides.len()].copy_from_slice(&strides);
        l.offset = self.offset;
        Some(l)
    }

    /// The smallest and largest element index the view touches (`None` when it is empty or
    /// invalid, or an index overflows `i64`).
    pub fn index_range(&self) -> Option<(i64, i64)> {
        if self.numel()? == 0 {
            return None;
        }
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (d, &s) in self.dims()?.iter().enumerate() {
            let span = (s - 1).checked_mul(self.strides[d])?;
            if span < 0 {
                lo = lo.checked_add(span)?;
            } else {
                hi = hi.checked_add(span)?;
            }
        }
        Some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::StridedLayout;
    use crate::reference;

    #[test]
    fn simplified_views_keep_their_elements_and_order() {
        let src: Vec<u32> = (0..4096).collect();
        let cases: &[(&[usize], &[isize], usize)] = &[
            (&[4, 8, 16], &[128, 16, 1], 0),
            (&[16, 4, 8], &[1, 128, 16], 3),
            (&[2, 1, 12, 1, 8], &[960, 5, 64, 7, 1], 0),
            (&[8, 8], &[1, 8], 0),
            (&[5, 6], &[24, 2], 1),
            (&[3, 0, 4], &[1, 1, 1], 0),
            (&[], &[], 9),
            (&[7, 3], &[0, 1], 2),
            (&[4, 4], &[-4, 1], 20),
        ];
        for &(shape, strides, offset) in cases {
            let l = StridedLayout::new(shape, strides, offset).unwrap();
            let s = l.simplified().unwrap();
            assert!(s.rank <= l.rank.max(1), "{shape:?}: rank grew");
            assert_eq!(s.numel(), l.numel(), "{shape:?}");
            assert_eq!(
                reference::strided_copy(&src, &s),
                reference::strided_copy(&src, &l),
                "{shape:?} {strides:?}"
            );
        }
        let contiguous = StridedLayout::contiguous(&[4, 8, 16]).unwrap().simplified();
        assert_eq!(contiguous.map(|c| c.rank), Some(1));
    }
}
