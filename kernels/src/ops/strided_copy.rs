//! Gather a strided N-d view into a contiguous buffer (a tensor's `.contiguous()`).

use crate::launch::{check_len, grid, sms, BLOCK};
use crate::{dispatch, Error, Kernels, Result, StridedLayout};
use cuda_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// `out[i] = src[offset + Σ_d idx_d(i) · strides[d]]` for the view `layout` of `src`, in
/// row-major order (`idx(i)` is `i` unravelled over `layout.shape`, last dimension fastest).
///
/// Works for any element of 2, 4 or 8 bytes (`strided_copy_b2/b4/b8`; it only moves bytes).
/// `out` must have `layout.numel()` elements and every index the view reaches must lie inside
/// `src`. Block 256, `min(ceil(n / 256), 32 × SMs)` blocks.
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
    let cfg = LaunchConfig::new(grid(n as u64, BLOCK as u64, 32 * sms(s)), BLOCK);
    // SAFETY: out has n = layout.numel() elements and every source index the view
    // reaches lies in 0..src.len() (index_range checked above); the kernel guards i < n.
    unsafe { kernel.launch(s, &cfg, src, out, *layout, n as u64) }?;
    Ok(())
}
