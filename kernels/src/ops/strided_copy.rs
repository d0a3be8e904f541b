//! Gather a strided N-d view into a contiguous buffer (a tensor's `.contiguous()`).

use crate::launch::{check_len, grid, sms, BLOCK};
use crate::{dispatch, Error, Kernels, Result, StridedLayout};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// `Some((rows, cols))` when `layout` (simplified) is the transpose of a contiguous
/// `[rows, cols]` matrix starting at its offset: shape `[cols, rows]`, strides `[1, cols]`.
fn transposed_matrix(layout: &StridedLayout) -> Option<(usize, usize)> {
    let dims = layout.dims()?;
    if dims.len() != 2
        || layout.strides[0] != 1
        || layout.strides[1] != dims[0]
        || layout.offset < 0
    {
        return None;
    }
    Some((
        usize::try_from(dims[1]).ok()?,
        usize::try_from(dims[0]).ok()?,
    ))
}

/// The view in units of 16 bytes, when its rows are whole 16-byte vectors: the last dimension
/// contiguous and a multiple of 16 bytes long, every other stride and the offset multiples of
/// 16 bytes (in elements of `elem` bytes), and both base addresses 16-byte aligned. Returns the
/// widened layout and its unit count; the same bytes in the same order.
fn widened_to_16_bytes(
    layout: &StridedLayout,
    elem: usize,
    src_ptr: u64,
    out_ptr: u64,
) -> Option<(StridedLayout, usize)> {
    let dims = layout.dims()?;
    let r = dims.len();
    if r == 0 || !matches!(elem, 2 | 4 | 8) || src_ptr % 16 != 0 || out_ptr % 16 != 0 {
        return None;
    }
    let f = (16 / elem) as i64;
    if layout.strides[r - 1] != 1 || dims[r - 1] % f != 0 || layout.offset % f != 0 {
        return None;
    }
    let mut w = *layout;
    for (d, &extent) in dims[..r - 1].iter().enumerate() {
        if extent > 1 && layout.strides[d] % f != 0 {
            return None;
        }
        w.strides[d] = if extent > 1 { layout.strides[d] / f } else { 0 };
    }
    w.shape[r - 1] = dims[r - 1] / f;
    w.offset = layout.offset / f;
    let units = w.numel()?;
    Some((w, units))
}

/// `out[i] = src[offset + Σ_d idx_d(i) · strides[d]]` for the view `layout` of `src`, in
/// row-major order (`idx(i)` is `i` unravelled over `layout.shape`, last dimension fastest).
///
/// Works for any element of 1, 2, 4 or 8 bytes (`strided_copy_b1/b2/b4/b8`; it only moves
/// bytes).
/// `out` must have `layout.numel()` elements and every index the view reaches must lie inside
/// `src`. The layout is first simplified ([`StridedLayout::simplified`]); a transposed
/// contiguous matrix of 4-byte elements goes to the transpose kernels; a view whose rows are
/// whole 16-byte vectors (last dimension contiguous, e.g. a permute of `[B, H, N, D]` heads) is
/// copied in 16-byte units (`strided_copy_b16`); otherwise block 256, `min(ceil(n / 1024),
/// 32 × SMs)` blocks, 4 outputs per thread.
pub fn strided_copy<T: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<T>,
    layout: &StridedLayout,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "strided_copy";
    let kernel = dispatch::strided_copy::<T>(k)?;
    let n = layout.numel().ok_or_else(|| Error::Invalid {
        op: OP,
        problem: format!(
            "invalid layout (rank {} must be 0..=8, extents >= 0, element count must fit usize): {:?}",
            layout.rank,
            layout.dims().unwrap_or(&[])
        ),
    })?;
    check_len(OP, "out", out.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let in_bounds = layout
        .index_range()
        .is_some_and(|(lo, hi)| lo >= 0 && (hi as u64) < src.len() as u64);
    if !in_bounds {
        return Err(Error::Shape {
            op: OP,
            what: "src",
            expected: format!(
                "every element of the view (shape {:?}, strides {:?}, offset {}), i.e. indices {}",
                layout.dims().unwrap_or(&[]),
                &layout.strides[..layout.dims().map_or(0, |d| d.len())],
                layout.offset,
                layout
                    .index_range()
                    .map_or("beyond i64".to_string(), |(lo, hi)| format!("{lo}..={hi}"))
            ),
            found: format!("{} elements", src.len()),
        });
    }
    // Fewer dimensions, same elements in the same order (a contiguous view becomes rank 1).
    let layout = layout.simplified().unwrap_or(*layout);
    if let Some((rows, cols)) = transposed_matrix(&layout) {
        if std::mem::size_of::<T>() == 4 {
            // The view is a contiguous [rows, cols] matrix read transposed: the tiled (or
            // skinny) transpose beats a gather (kernels/TUNING.md, round 3).
            let start = layout.offset as usize;
            let m = src.slice(start..start + rows * cols)?;
            return super::coalescing::transpose_any(
                k,
                s,
                super::TransposeAlgo::Auto,
                &m,
                out,
                rows,
                cols,
            );
        }
    }
    if let Some((wide, units)) = widened_to_16_bytes(
        &layout,
        std::mem::size_of::<T>(),
        src.as_raw_ptr(),
        out.as_raw_ptr(),
    ) {
        let kernel = dispatch::strided_copy_units16::<T>(k)?;
        let cfg = LaunchConfig::new(
            grid(units.div_ceil(4) as u64, BLOCK as u64, 32 * sms(s)),
            BLOCK,
        );
        // SAFETY: `wide` is `layout` in 16-byte units (same bytes, same order:
        // widened_to_16_bytes), so every unit it reaches lies inside the elements of `src`
        // checked above, and `units` units are exactly `out`'s n elements; both base addresses
        // are 16-byte aligned (checked there); the kernel guards i < units.
        unsafe { kernel.launch(s, &cfg, src, out, wide, units as u64) }?;
        return Ok(());
    }
    let cfg = LaunchConfig::new(grid(n.div_ceil(4) as u64, BLOCK as u64, 32 * sms(s)), BLOCK);
    // SAFETY: out has n = layout.numel() elements and every source index the view
    // reaches lies in 0..src.len() (index_range checked above; simplifying keeps the same
    // elements); the kernel guards i < n.
    unsafe { kernel.launch(s, &cfg, src, out, layout, n as u64) }?;
    Ok(())
}
