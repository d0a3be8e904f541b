//! Global-norm gradient clipping on the device (`cuda/grad_norm.cu`, f32 and f64): sums of
//! squares per tensor into one partial buffer, the norm and the clipping scale computed by one
//! block, then each tensor scaled in place — no host round trip.

use crate::dispatch;
use crate::launch::{check_len, packet_grid, BLOCK};
use crate::{Compute, Element, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// The most blocks (partial sums) one tensor's sum of squares uses.
const MAX_PARTS: usize = 1024;
/// Elements per block of the sum of squares, at least.
const PER_BLOCK: usize = 4096;

/// The number of partial sums [`sumsq_partials`] writes for a tensor of `n` elements (chosen
/// from `n` alone, so the norm is bit-identical on every run and every GPU); at least 1.
pub fn sumsq_parts(n: usize) -> usize {
    n.div_ceil(PER_BLOCK).clamp(1, MAX_PARTS)
}

/// `partial[b]` = the sum of `x[i]²` over block `b`'s elements; `partial` has
/// [`sumsq_parts`]`(x.len())` elements (an empty `x` writes one zero).
pub fn sumsq_partials<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    partial: &mut DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "clip_grad_norm";
    let kernel = dispatch::sumsq_partial::<T>(k)?;
    let parts = sumsq_parts(x.len());
    check_len(OP, "partial", partial.len(), parts)?;
    let cfg = LaunchConfig::new(parts as u32, BLOCK);
    // SAFETY: block 256 as required; block b < parts writes partial[b] and reads x[i], i < n.
    unsafe { kernel.launch(s, &cfg, x, x.len() as u64, partial) }?;
    Ok(())
}

/// The most partial sums [`clip_coef`] adds: its `unsigned` counter `i < num` steps by 256,
/// so with `num <= 2^31` it stays below 2^31 + 256 and never wraps.
const MAX_PARTIALS: usize = 1 << 31;

/// `norm[0] = sqrt(Σ partials)` (in index order) and
/// `scale[0] = min(1, max_norm / (norm + 1e-6))`, on the device. A NaN norm gives a NaN scale;
/// an infinite norm (an inf gradient, or squares overflowing) gives `max_norm / inf = 0`, so
/// finite elements are scaled to 0 and inf ones to NaN (as torch). At most 2^31 partials
/// ([`crate::Error::TooLarge`] otherwise).
pub fn clip_coef<T: Element>(
    k: &Kernels,
    s: &Stream,
    partials: &DeviceSlice<T>,
    max_norm: f64,
    norm: &mut DeviceSlice<T>,
    scale: &mut DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "clip_grad_norm";
    let kernel = dispatch::clip_coef::<T>(k)?;
    check_len(OP, "norm", norm.len(), 1)?;
    check_len(OP, "scale", scale.len(), 1)?;
    let len = partials.len();
    if len > MAX_PARTIALS {
        return Err(crate::Error::TooLarge {
            op: OP,
            what: "partials",
            value: len as u128,
            max: MAX_PARTIALS as u128,
        });
    }
    let num = u32::try_from(len).map_err(|_| crate::Error::TooLarge {
        op: OP,
        what: "partials",
        value: len as u128,
        max: MAX_PARTIALS as u128,
    })?;
    let m = <T::Scalar as Compute>::of_f64(max_norm);
    // SAFETY: one block of 256 as required; reads partials[0..num), writes norm[0], scale[0].
    // num <= 2^31 (checked): the kernel's `unsigned` counter i < num steps by 256, so it stays
    // below 2^31 + 256 < 2^32 and the loop ends.
    unsafe {
        kernel.launch(
            s,
            &LaunchConfig::new(1, BLOCK),
            partials,
            num,
            m,
            norm,
            scale,
        )
    }?;
    Ok(())
}

/// `x *= scale[0]` in place (`scale` one element on the device).
pub fn scale_by_device<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &mut DeviceSlice<T>,
    scale: &DeviceSlice<T>,
) -> Result<()> {
    const OP: &str = "clip_grad_norm";
    let kernel = dispatch::scale_by_device::<T>(k)?;
    check_len(OP, "scale", scale.len(), 1)?;
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(packet_grid::<T>(n), BLOCK);
    // SAFETY: element i < n of x (grid-stride) and scale[0].
    unsafe { kernel.launch(s, &cfg, x, n as u64, scale) }?;
    Ok(())
}
