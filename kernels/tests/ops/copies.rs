//! Copies, transposes and strided copies, and the strided-layout helpers they use (CPU).

use super::*;

pub(crate) fn layout_helpers() -> TestResult {
    let l = StridedLayout::contiguous(&[2, 3, 4]).ok_or("contiguous")?;
    ensure!(
        l.strides[..3] == [12, 4, 1] && l.numel() == Some(24),
        "contiguous layout {l:?}"
    );
    ensure!(
        l.index_range() == Some((0, 23)),
        "index range {:?}",
        l.index_range()
    );
    let t = StridedLayout::new(&[4, 3], &[1, -4], 8).ok_or("new")?;
    ensure!(
        t.index_range() == Some((0, 11)),
        "negative stride range {:?}",
        t.index_range()
    );
    ensure!(
        StridedLayout::new(&[1; 9], &[1; 9], 0).is_none(),
        "rank 9 must be refused"
    );
    let src: Vec<i32> = (0..12).collect();
    let got = reference::strided_copy(&src, &t).ok_or("reference")?;
    ensure!(
        got == [8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3],
        "reference strided copy {got:?}"
    );
    Ok(())
}

pub(crate) fn copies() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &n in SIZES {
        for &off in OFFSETS {
            let x = data::<f32>(20, n);
            let dx = upload(&s, &x, off)?;
            let mut o = poisoned::<f32>(&s, n, off)?;
            ops::copy_coalesced(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("copy_coalesced n={n} off={off}"),
                &download(&s, &o, off)?,
                &x,
            )?; // exact
            for stride in [1usize, 2, 7, 32] {
                let m = if n == 0 { 0 } else { (n - 1) / stride + 1 };
                let mut o = poisoned::<f32>(&s, m, off)?;
                ops::copy_strided(&k, &s, &dx.slice(off..)?, &mut o.slice_mut(off..)?, stride)?;
                check_exact(
                    &format!("copy_strided n={n} stride={stride} off={off}"),
                    &download(&s, &o, off)?,
                    &reference::copy_strided(&x, stride, m),
                )?;
            }
        }
    }
    Ok(())
}

/// Transpose shapes beyond [`SHAPES_2D`]: both sides at least 64 and odd (the line-following
/// kernel), a side just under 64 (the skinny kernel in both directions), tall and wide strips,
/// and the vectorized skinny kernel's shapes (short side 1..8).
pub(crate) const TRANSPOSE_SHAPES: &[(usize, usize)] = &[
    (65, 97),
    // The aligned tiles (128 x 64, 128 x 128): several tiles both ways, partial last ones.
    (259, 131),
    (1031, 517),
    (127, 4099),
    (63, 1000),
    (5000, 63),
    (2, 70_001),
    (3001, 1),
    (4097, 32),
    (32, 4097),
    (1, 5000),
    (9000, 7),
    // transpose_skinny_vec (short side <= 8, long side a multiple of 4, aligned): every short
    // side in both directions, and the fallbacks next to them.
    (1, 4),
    (2, 4096),
    (3, 4096),
    (4, 1000),
    (5, 12),
    (6, 2048),
    (7, 400),
    (8, 1000),
    (4, 1),
    (4096, 2),
    (4096, 3),
    (1000, 4),
    (12, 5),
    (2048, 6),
    (400, 7),
    (1000, 8),
    (8, 8),
    (6, 6),
    (9, 4096),
    (4096, 9),
    // More 128 x 128 tiles than SMs: the op's blocks walk two tiles or more each (264 and 153).
    (1000, 4097),
    (2049, 1100),
];

pub(crate) fn transposes() -> TestResult {
    let (_ctx, s, k) = setup()?;
    for &(rows, cols) in SHAPES_2D.iter().chain(TRANSPOSE_SHAPES) {
        for &off in OFFSETS {
            let x = data::<f32>(21, rows * cols);
            let dx = upload(&s, &x, off)?;
            let want = reference::transpose(&x, rows, cols); // exact
            for algo in [
                TransposeAlgo::Naive,
                TransposeAlgo::Tiled,
                TransposeAlgo::TiledPadded,
                TransposeAlgo::Aligned,
                TransposeAlgo::AlignedWith(AlignedTile::T128x64),
                TransposeAlgo::AlignedWith(AlignedTile::T128x128),
                TransposeAlgo::Skinny,
                TransposeAlgo::SkinnyV4,
                TransposeAlgo::Auto,
            ] {
                let mut o = poisoned::<f32>(&s, rows * cols, off)?;
                let r = ops::transpose(
                    &k,
                    &s,
                    algo,
                    &dx.slice(off..)?,
                    &mut o.slice_mut(off..)?,
                    rows,
                    cols,
                );
                if algo == TransposeAlgo::Skinny && rows >= 64 && cols >= 64 {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "Skinny must refuse {rows}x{cols}"
                    );
                    continue;
                }
                // The float4 form: a short side, aligned views (off = 0), a long side % 4 == 0.
                let (xa, oa) = (dx.slice(off..)?.as_raw_ptr(), o.slice(off..)?.as_raw_ptr());
                let empty = rows == 0 || cols == 0; // nothing to move: every algo succeeds
                if algo == TransposeAlgo::SkinnyV4
                    && !empty
                    && !ops::skinny_v4_fits(rows, cols, xa, oa)
                {
                    ensure!(
                        matches!(r, Err(cuda_stack_kernels::Error::Invalid { .. })),
                        "SkinnyV4 must refuse {rows}x{cols} off={off}"
                    );
                    continue;
                }
                r?;
                check_exact(
                    &format!("transpose {algo:?} {rows}x{cols} off={off}"),
                    &download(&s, &o, off)?,
                    &want,
                )?;
            }
        }
    }
    Ok(())
}

pub(crate) fn strided_copy_all<T: Gen>() -> TestResult {
    let (_ctx, s, k) = setup()?;
    let src = data::<T>(22, 5000);
    let dsrc = s.clone_htod(&src)?;
    let layouts = [
        StridedLayout::contiguous(&[]).ok_or("rank 0")?,
        StridedLayout::contiguous(&[4099]).ok_or("1-d")?,
        StridedLayout::new(&[33, 31], &[1, 33], 0).ok_or("transpose")?,
        StridedLayout::new(&[7, 9, 11], &[1, 77, 7], 3).ok_or("permute")?,
        StridedLayout::new(&[5, 40], &[0, 2], 17).ok_or("broadcast")?,
        StridedLayout::new(&[20, 10], &[-50, -1], 999).ok_or("negative strides")?,
        StridedLayout::new(&[2, 2, 2, 2, 2, 2, 2, 3], &[1, 2, 4, 8, 16, 32, 64, 128], 5)
            .ok_or("rank 8")?,
        StridedLayout::new(&[3, 0, 4], &[4, 4, 1], 0).ok_or("empty")?,
        StridedLayout::new(&[1000], &[5], 2).ok_or("strided 1-d")?,
        // Views whose rows are whole 16-byte vectors (strided_copy_b16 when the output is
        // 16-byte aligned too): a [B, H, N, D] -> [B, N, H, D] head permute, at offset 0 and
        // 16, a slice of rows, a contiguous run; and one whose offset breaks the alignment.
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 0).ok_or("head permute")?,
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 16).ok_or("permute + 16")?,
        StridedLayout::new(&[4, 24], &[40, 1], 8).ok_or("row slice")?,
        StridedLayout::contiguous(&[4096]).ok_or("contiguous 4096")?,
        StridedLayout::new(&[2, 5, 3, 16], &[240, 16, 80, 1], 3).ok_or("permute + 3")?,
    ];
    for l in &layouts {
        for &off in OFFSETS {
            let want = reference::strided_copy(&src, l).ok_or("reference rejected the layout")?; // exact
            let mut o = poisoned::<T>(&s, want.len(), off)?;
            ops::strided_copy(&k, &s, &dsrc, l, &mut o.slice_mut(off..)?)?;
            check_exact(
                &format!("strided_copy<{}> {:?} off={off}", T::DTYPE, l.dims()),
                &download(&s, &o, off)?,
                &want,
            )?;
        }
    }
    let bad = StridedLayout::new(&[10], &[600], 0).ok_or("bad")?;
    let mut o = s.alloc_zeros::<T>(10)?;
    let r = ops::strided_copy(&k, &s, &dsrc, &bad, &mut o);
    ensure!(
        matches!(r, Err(Error::Shape { what: "src", .. })),
        "out-of-bounds view must fail: {r:?}"
    );
    Ok(())
}
