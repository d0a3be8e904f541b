//! `BinaryStrides`: how the strided binary kernels (`<op>_strided_<dt>` in
//! `kernels/cuda/binary_strided.cu`) walk two strided or broadcast operands over a result
//! shape, planned on the host: dimensions collapsed, 16-byte packets where the innermost
//! dimension allows, 32-bit index arithmetic (with multiply-high dividers) where every index fits.

use crate::StridedLayout;
use bytemuck::{Pod, Zeroable};

/// The most dimensions the strided binary kernels index, after collapsing ([`collapse`]).
pub const MAX_BINARY_DIMS: usize = 6;

/// The walk of `out[i] = a[off_a(i)] op b[off_b(i)]` that `<op>_strided_<dt>` takes by value,
/// with the exact C layout of `struct BinaryStrides` in `kernels/cuda/binary_strided.cu`
/// (232 bytes, no padding). Made by [`BinaryStrides::plan`]; the fields are public so that
/// tests and tools can read a plan.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BinaryStrides {
    /// Collapsed dimensions, `1..=6`; `rank - 1` is the innermost.
    pub rank: i32,
    /// Bit 0: `a` is one value per packet (innermost stride 0); bit 1: the same for `b`.
    pub flags: i32,
    /// Extents; the innermost counts packets of `vec` elements.
    pub shape: [i64; MAX_BINARY_DIMS],
    /// `a`'s steps in elements (the innermost per packet: its element stride times `vec`).
    pub a_strides: [i64; MAX_BINARY_DIMS],
    /// `b`'s steps, as `a_strides`.
    pub b_strides: [i64; MAX_BINARY_DIMS],
    /// Element index of `a`'s first element.
    pub a_offset: i64,
    /// Element index of `b`'s first element.
    pub b_offset: i64,
    /// Multiply-high factor dividing by `shape[d]` in 32 bits (`divider`).
    pub magic: [u32; MAX_BINARY_DIMS],
    /// The shift that goes with `magic[d]`.
    pub shift: [u32; MAX_BINARY_DIMS],
    /// Work items (`Π shape`): packets, or elements when `vec == 1`.
    pub units: u64,
    /// Elements per work item: 1, or a 16-byte packet (`16 / size_of::<T>()`).
    pub vec: i32,
    /// 1: `units < 2^31` and every index, stride and offset fits an `int` (32-bit arithmetic).
    pub narrow: i32,
}

const _: () = assert!(std::mem::size_of::<BinaryStrides>() == 232);
const _: () = assert!(std::mem::align_of::<BinaryStrides>() == 8);

/// `(magic, shift)` with `n / d == (umulhi(n, magic) + n) >> shift` for every `n < 2^31`
/// (PyTorch's `IntDivider`): `shift = ⌈log2 d⌉`, `magic = ⌊2^32 · (2^shift − d) / d⌋ + 1`.
/// `d` must be in `1..2^31`.
pub(crate) fn divider(d: u32) -> (u32, u32) {
    let d = u64::from(d.max(1));
    let shift = 64 - (d - 1).leading_zeros(); // ⌈log2 d⌉ (0 for d = 1)
    let magic = ((1u64 << 32) * ((1u64 << shift) - d)) / d + 1;
    (magic as u32, shift)
}

/// What [`divider`]'s pair computes, as the kernel does.
#[cfg(test)]
fn divide_by(n: u32, (magic, shift): (u32, u32)) -> u32 {
    let hi = ((u64::from(n) * u64::from(magic)) >> 32) as u32;
    hi.wrapping_add(n) >> shift
}

/// The dimensions of a walk over `shape` of two operands with `a` and `b` strides, collapsed:
/// extent-1 dimensions dropped, and each dimension merged into its outer neighbour where that
/// neighbour steps exactly over it in **both** operands (`s[d−1] == s[d] · shape[d]`). The
/// same element pairs in the same (row-major) order; a scalar result is one dimension of 1.
/// Inputs of different lengths, or an empty shape with an extent 0, give an empty walk
/// (`shape == [0]`).
pub fn collapse(shape: &[i64], a: &[i64], b: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    if shape.len() != a.len() || shape.len() != b.len() || shape.contains(&0) {
        return (vec![0], vec![0], vec![0]);
    }
    let (mut s, mut sa, mut sb): (Vec<i64>, Vec<i64>, Vec<i64>) = (vec![], vec![], vec![]);
    for d in 0..shape.len() {
        let e = shape[d];
        if e == 1 {
            continue;
        }
        let merges = |outer: Option<&i64>, inner: i64| {
            outer.is_some_and(|&o| inner.checked_mul(e) == Some(o))
        };
        if merges(sa.last(), a[d]) && merges(sb.last(), b[d]) {
            if let (Some(ls), Some(la), Some(lb)) = (s.last_mut(), sa.last_mut(), sb.last_mut()) {
                if let Some(m) = ls.checked_mul(e) {
                    *ls = m;
                    *la = a[d];
                    *lb = b[d];
                    continue;
                }
            }
        }
        s.push(e);
        sa.push(a[d]);
        sb.push(b[d]);
    }
    if s.is_empty() {
        return (vec![1], vec![0], vec![0]);
    }
    (s, sa, sb)
}

/// One operand as the planner sees it: its view and the device address of element 0 of the
/// buffer the view indexes.
#[derive(Debug, Clone, Copy)]
pub struct PlannedOperand<'a> {
    /// The operand read over the result's shape (stride 0 where it is broadcast).
    pub view: &'a StridedLayout,
    /// The address of the buffer's element 0 (for the 16-byte alignment test).
    pub ptr: u64,
}

impl BinaryStrides {
    /// The walk of `a op b` for views of the same shape (the result's) into buffers of
    /// `elem`-byte elements, writing a dense output at `out_ptr`. `None` when the views' shapes
    /// differ, either is invalid or empty, an index overflows, or more than
    /// [`MAX_BINARY_DIMS`] dimensions remain after [`collapse`].
    ///
    /// Packets (`vec > 1`) are taken when the collapsed innermost dimension has stride 0 or 1
    /// in each operand, its extent is a multiple of the packet, the output and every operand
    /// read with stride 1 start 16-byte aligned, and those operands' other strides are
    /// multiples of the packet (so every packet they read is aligned).
    pub fn plan(
        a: PlannedOperand<'_>,
        b: PlannedOperand<'_>,
        elem: usize,
        out_ptr: u64,
    ) -> Option<BinaryStrides> {
        let dims = a.view.dims()?;
        if dims != b.view.dims()? || a.view.numel()? == 0 {
            return None;
        }
        let r = dims.len();
        let (shape, mut sa, mut sb) = collapse(dims, &a.view.strides[..r], &b.view.strides[..r]);
        let rank = shape.len();
        if rank > MAX_BINARY_DIMS {
            return None;
        }
        let last = rank - 1;
        let v = match elem {
            2 | 4 | 8 => (16 / elem) as i64,
            _ => 1,
        };
        let operand_packs = |x: &PlannedOperand<'_>, s: &[i64]| match s[last] {
            0 => true,
            1 => {
                let start = (x.view.offset as u64)
                    .wrapping_mul(elem as u64)
                    .wrapping_add(x.ptr);
                x.view.offset >= 0 && start % 16 == 0 && s[..last].iter().all(|&st| st % v == 0)
            }
            _ => false,
        };
        let vec = v > 1
            && shape[last] % v == 0
            && out_ptr % 16 == 0
            && operand_packs(&a, &sa)
            && operand_packs(&b, &sb);
        let mut p = BinaryStrides::zeroed();
        p.rank = rank as i32;
        p.vec = 1;
        p.shape[..rank].copy_from_slice(&shape);
        if vec {
            p.vec = v as i32;
            p.shape[last] /= v;
            sa[last] *= v;
            sb[last] *= v;
            p.flags = i32::from(sa[last] == 0) | (i32::from(sb[last] == 0) << 1);
        }
        p.a_strides[..rank].copy_from_slice(&sa);
        p.b_strides[..rank].copy_from_slice(&sb);
        p.a_offset = a.view.offset;
        p.b_offset = b.view.offset;
        p.units = p.shape[..rank]
            .iter()
            .try_fold(1u64, |acc, &e| acc.checked_mul(u64::try_from(e).ok()?))?;
        let int = |x: i64| i32::try_from(x).is_ok();
        let in_int = |x: &StridedLayout| {
            x.index_range()
                .is_some_and(|(lo, hi)| lo >= 0 && int(hi) && int(x.offset))
        };
        p.narrow = i32::from(
            p.units <= i32::MAX as u64
                && in_int(a.view)
                && in_int(b.view)
                && sa.iter().chain(&sb).all(|&s| int(s)),
        );
        if p.narrow == 1 {
            for d in 1..rank {
                (p.magic[d], p.shift[d]) = divider(p.shape[d] as u32);
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dividers_divide_exactly_below_2_pow_31() {
        let mut ds: Vec<u32> = (1..=4100).collect();
        ds.extend([
            6789,
            8191,
            65_535,
            65_536,
            65_537,
            1_000_003,
            (1 << 24) + 3,
            (1 << 30) - 1,
            1 << 30,
            (1 << 30) + 1,
            (1 << 31) - 1,
        ]);
        let mut ns: Vec<u32> = (0..2000).collect();
        ns.extend([
            65_535,
            65_536,
            1 << 24,
            (1 << 30) + 7,
            (1 << 31) - 2,
            (1 << 31) - 1,
        ]);
        for &d in &ds {
            let m = divider(d);
            let d64 = u64::from(d);
            let near = [d64 - 1, d64, d64 + 1, 2 * d64 - 1, 2 * d64, 3 * d64];
            for n in ns.iter().map(|&n| u64::from(n)).chain(near) {
                if n < 1 << 31 {
                    let n = n as u32;
                    assert_eq!(divide_by(n, m), n / d, "{n} / {d}");
                }
            }
            // A pseudo-random spread of n as well.
            let mut x = u64::from(d).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for _ in 0..64 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let n = (x >> 33) as u32; // < 2^31
                assert_eq!(divide_by(n, m), n / d, "{n} / {d}");
            }
        }
    }

    /// Every (a, b) index pair of the walk, in order, unravelled as the kernel does (64-bit).
    fn pairs(shape: &[i64], a: &[i64], b: &[i64]) -> Vec<(i64, i64)> {
        let n: i64 = shape.iter().product();
        (0..n)
            .map(|i| {
                let (mut rem, mut oa, mut ob) = (i, 0, 0);
                for d in (0..shape.len()).rev() {
                    let c = rem % shape[d];
                    rem /= shape[d];
                    oa += c * a[d];
                    ob += c * b[d];
                }
                (oa, ob)
            })
            .collect()
    }

    #[test]
    fn collapsing_keeps_every_pair_in_order() {
        type Case<'a> = (&'a [i64], &'a [i64], &'a [i64], usize);
        let cases: &[Case] = &[
            // Same shape, both contiguous: one dimension.
            (&[4, 8, 16], &[128, 16, 1], &[128, 16, 1], 1),
            // [B, H, N, N] + [B, 1, 1, N]: B, H·N, N.
            (&[2, 3, 5, 5], &[75, 25, 5, 1], &[5, 0, 0, 1], 3),
            // [B, H, N, D] * [1, H, 1, 1]: B, H, N·D.
            (&[2, 3, 4, 8], &[96, 32, 8, 1], &[0, 1, 0, 0], 3),
            // A bias row: [N, C] + [C].
            (&[7, 9], &[9, 1], &[0, 1], 2),
            // A column: [N, C] * [N, 1].
            (&[7, 9], &[9, 1], &[1, 0], 2),
            // A scalar against a matrix: one dimension.
            (&[7, 9], &[9, 1], &[0, 0], 1),
            // A transposed operand.
            (&[6, 4], &[1, 6], &[4, 1], 2),
            // Size-1 dimensions anywhere.
            (&[1, 5, 1, 3, 1], &[99, 3, 7, 1, 5], &[0, 0, 3, 1, 2], 2),
            // Negative strides (a flipped view).
            (&[4, 4], &[-4, 1], &[4, 1], 2),
            // A scalar result.
            (&[1, 1], &[3, 1], &[0, 0], 1),
            (&[], &[], &[], 1),
        ];
        for &(shape, a, b, rank) in cases {
            let (s, sa, sb) = collapse(shape, a, b);
            assert_eq!(s.len(), rank, "{shape:?} {a:?} {b:?} -> {s:?}");
            assert_eq!(
                pairs(&s, &sa, &sb),
                pairs(shape, a, b),
                "{shape:?} {a:?} {b:?}"
            );
        }
        assert_eq!(collapse(&[3, 0, 2], &[2, 2, 1], &[0, 0, 1]).0, vec![0]);
    }

    fn view(shape: &[usize], strides: &[isize], offset: usize) -> StridedLayout {
        StridedLayout::new(shape, strides, offset).unwrap()
    }

    fn op<'a>(view: &'a StridedLayout, ptr: u64) -> PlannedOperand<'a> {
        PlannedOperand { view, ptr }
    }

    #[test]
    fn plans_take_packets_only_where_every_packet_is_aligned() {
        // A bias over rows, f32: packets; the bias reads with stride 1, the input too.
        let (x, bias) = (view(&[64, 32], &[32, 1], 0), view(&[64, 32], &[0, 1], 0));
        let p = BinaryStrides::plan(op(&x, 256), op(&bias, 512), 4, 1024).unwrap();
        assert_eq!((p.rank, p.vec, p.flags, p.narrow), (2, 4, 0, 1));
        assert_eq!((&p.shape[..2], p.units), (&[64, 8][..], 512));
        assert_eq!(
            (&p.a_strides[..2], &p.b_strides[..2]),
            (&[32, 4][..], &[0, 4][..])
        );
        assert_eq!(p.magic[1], divider(8).0);
        // A column scale: b is one value per packet.
        let col = view(&[64, 32], &[1, 0], 0);
        let p = BinaryStrides::plan(op(&x, 256), op(&col, 512), 4, 1024).unwrap();
        assert_eq!((p.vec, p.flags, &p.b_strides[..2]), (4, 2, &[1, 0][..]));
        // A misaligned view (offset 1), an odd row, a transposed operand: no packets.
        let off = view(&[64, 32], &[32, 1], 1);
        assert_eq!(
            BinaryStrides::plan(op(&off, 256), op(&bias, 512), 4, 1024)
                .unwrap()
                .vec,
            1
        );
        let odd = (view(&[64, 31], &[31, 1], 0), view(&[64, 31], &[0, 1], 0));
        assert_eq!(
            BinaryStrides::plan(op(&odd.0, 256), op(&odd.1, 0), 4, 64)
                .unwrap()
                .vec,
            1
        );
        let t = view(&[64, 32], &[1, 64], 0);
        assert_eq!(
            BinaryStrides::plan(op(&x, 256), op(&t, 512), 4, 1024)
                .unwrap()
                .vec,
            1
        );
        // A misaligned output, or a buffer address not on 16 bytes: no packets.
        assert_eq!(
            BinaryStrides::plan(op(&x, 256), op(&bias, 512), 4, 1028)
                .unwrap()
                .vec,
            1
        );
        assert_eq!(
            BinaryStrides::plan(op(&x, 264), op(&bias, 512), 4, 1024)
                .unwrap()
                .vec,
            1
        );
        // An offset that lands on 16 bytes: packets (f16: 8 per packet).
        let h = view(&[4, 64], &[72, 1], 8);
        let p = BinaryStrides::plan(op(&h, 256), op(&h, 256), 2, 1024).unwrap();
        assert_eq!((p.vec, p.rank, p.a_offset), (8, 2, 8));
        // Different shapes, empty views: no plan.
        assert!(BinaryStrides::plan(op(&x, 0), op(&odd.0, 0), 4, 0).is_none());
        let empty = view(&[0, 4], &[4, 1], 0);
        assert!(BinaryStrides::plan(op(&empty, 0), op(&empty, 0), 4, 0).is_none());
    }

    #[test]
    fn plans_fall_back_to_64_bits_and_refuse_too_many_dimensions() {
        // 2^31 elements: 64-bit arithmetic (no magic numbers needed).
        let big = view(&[1 << 16, 1 << 15], &[1 << 15, 1], 0);
        let row = view(&[1 << 16, 1 << 15], &[0, 1], 0);
        let p = BinaryStrides::plan(op(&big, 0), op(&row, 0), 4, 0).unwrap();
        assert_eq!((p.vec, p.narrow, p.units), (4, 1, 1 << 29));
        let p = BinaryStrides::plan(op(&big, 0), op(&row, 0), 4, 4).unwrap();
        assert_eq!((p.vec, p.narrow), (1, 0));
        // An index past 2^31 in a small view (a slice far into a big buffer).
        let far = view(&[4, 4], &[4, 1], 1 << 31);
        let p = BinaryStrides::plan(op(&far, 0), op(&far, 0), 4, 0).unwrap();
        assert_eq!(p.narrow, 0);
        // Seven dimensions that do not collapse: alternating broadcasts.
        let shape = [2, 3, 2, 3, 2, 3, 2];
        let a = view(&shape, &[0, 12, 0, 4, 0, 1, 0], 0);
        let b = view(&shape, &[8, 0, 4, 0, 2, 0, 1], 0);
        assert!(BinaryStrides::plan(op(&a, 0), op(&b, 0), 4, 0).is_none());
        // The last two merge when both step over them: six dimensions.
        let a6 = view(&shape, &[0, 18, 0, 6, 0, 2, 1], 0);
        let b6 = view(&shape, &[8, 0, 4, 0, 2, 0, 0], 0);
        assert_eq!(
            BinaryStrides::plan(op(&a6, 0), op(&b6, 0), 4, 0).map(|p| p.rank),
            Some(6)
        );
    }

    /// The kernel's walk, emulated: for every work item, the offsets `offsets<NARROW>` computes
    /// (32-bit with the magic dividers when `narrow`), expanded to the elements of its packet.
    fn emulate(p: &BinaryStrides) -> Vec<(i64, i64)> {
        let r = p.rank as usize;
        let v = p.vec as i64;
        let mut out = Vec::new();
        for i in 0..p.units {
            let (mut oa, mut ob) = (p.a_offset, p.b_offset);
            if p.narrow == 1 {
                let (mut rem, mut ra, mut rb) = (i as u32, p.a_offset as i32, p.b_offset as i32);
                for d in (0..r).rev() {
                    let mut c = rem;
                    if d > 0 {
                        let q = divide_by(rem, (p.magic[d], p.shift[d]));
                        c = rem - q * p.shape[d] as u32;
                        rem = q;
                    }
                    ra += c as i32 * p.a_strides[d] as i32;
                    rb += c as i32 * p.b_strides[d] as i32;
                }
                (oa, ob) = (i64::from(ra), i64::from(rb));
            } else {
                let mut rem = i;
                for d in (0..r).rev() {
                    let mut c = rem;
                    if d > 0 {
                        c = rem % p.shape[d] as u64;
                        rem /= p.shape[d] as u64;
                    }
                    oa += c as i64 * p.a_strides[d];
                    ob += c as i64 * p.b_strides[d];
                }
            }
            for j in 0..v {
                let step = |one: bool| if one || v == 1 { 0 } else { j };
                out.push((oa + step(p.flags & 1 != 0), ob + step(p.flags & 2 != 0)));
            }
        }
        out
    }

    /// The views' element pairs in row-major order, straight from their layouts.
    fn view_pairs(a: &StridedLayout, b: &StridedLayout) -> Vec<(i64, i64)> {
        let dims = a.dims().unwrap();
        let r = dims.len();
        pairs(dims, &a.strides[..r], &b.strides[..r])
            .into_iter()
            .map(|(x, y)| (x + a.offset, y + b.offset))
            .collect()
    }

    #[test]
    fn planned_walks_visit_every_pair_in_order() {
        // (shape, a strides, a offset, b strides, b offset, element size): broadcasts,
        // transposes, slices, flips, size-1 and odd extents; f32, f16, f64.
        type Case = (
            &'static [usize],
            &'static [isize],
            usize,
            &'static [isize],
            usize,
            usize,
        );
        let cases: &[Case] = &[
            (&[2, 3, 5, 8], &[120, 40, 8, 1], 0, &[8, 0, 0, 1], 0, 4),
            (&[2, 3, 5, 8], &[120, 40, 8, 1], 4, &[8, 0, 0, 1], 8, 4),
            (&[2, 3, 4, 8], &[96, 32, 8, 1], 0, &[0, 1, 0, 0], 0, 4),
            (&[2, 3, 4, 8], &[96, 32, 8, 1], 1, &[0, 1, 0, 0], 0, 4),
            (&[7, 12], &[1, 7], 0, &[0, 1], 0, 4),
            (&[7, 12], &[12, 1], 0, &[1, 0], 0, 4),
            (&[9, 16], &[1, 0], 0, &[0, 1], 0, 2),
            (&[5, 4, 6], &[6, 0, 1], 0, &[24, 6, 1], 0, 8),
            (&[4, 8], &[-8, 1], 24, &[8, 1], 0, 4),
            (&[3, 16], &[32, 2], 0, &[0, 1], 0, 4),
            (&[1, 1], &[5, 1], 3, &[0, 0], 0, 4),
            (&[], &[], 2, &[], 0, 4),
            (
                &[2, 1, 3, 1, 8],
                &[24, 9, 8, 3, 1],
                0,
                &[0, 0, 0, 0, 1],
                0,
                2,
            ),
        ];
        for &(shape, sa, oa, sb, ob, elem) in cases {
            let (a, b) = (view(shape, sa, oa), view(shape, sb, ob));
            let want = view_pairs(&a, &b);
            for (pa, pb, po) in [(0, 0, 0), (256, 1024, 4096), (2, 0, 0), (0, 0, 8)] {
                let p = BinaryStrides::plan(op(&a, pa), op(&b, pb), elem, po).unwrap();
                assert_eq!(
                    emulate(&p),
                    want,
                    "{shape:?} a {sa:?}+{oa} b {sb:?}+{ob} elem {elem}: {p:?}"
                );
                // The same walk with 64-bit arithmetic.
                let wide = BinaryStrides { narrow: 0, ..p };
                assert_eq!(emulate(&wide), want, "{shape:?} (64-bit)");
            }
        }
    }
}
