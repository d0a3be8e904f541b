//! The kernels the tests launch (axpy, a slow fill) and how.

use super::*;

/// About 50 ms of spinning on an H100/H200 clock.
pub(crate) const SLOW: i64 = 80_000_000;

/// `y += a * x` for all of `y` (checked: `x` and `y` have `n` elements).
pub(crate) fn launch_axpy(
    k: &Axpy,
    s: &Stream,
    a: f32,
    x: &DeviceSlice<f32>,
    y: &mut DeviceSlice<f32>,
) -> cuda_stack_driver::Result<()> {
    let n = y.len();
    assert_eq!(x.len(), n);
    // SAFETY: the kernel touches x[i], y[i] for i < n only, and both have n elements.
    unsafe { k.launch(s, &LaunchConfig::for_num_elems(n), a, x, y, n as u32) }
}

pub(crate) fn launch_slow_fill(
    k: &SlowFill,
    s: &Stream,
    y: &mut DeviceSlice<f32>,
    v: f32,
) -> cuda_stack_driver::Result<()> {
    let n = y.len();
    // SAFETY: grid-stride loop over i < n = y.len().
    unsafe { k.launch(s, &LaunchConfig::new(4, 128), y, v, n as u32, SLOW) }
}
