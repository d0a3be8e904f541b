//! Counter-based random numbers (Philox4x32-10): value `i` depends only on `(seed, offset + i)`.

use crate::launch::{grid, sms, BLOCK};
use crate::{Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, Kernel, LaunchConfig, Stream};

/// The launch for `n` outputs at stream position `offset`: one Philox block (4 outputs) per
/// thread, block 256, `min(ceil(blocks / 256), 32 × SMs)` blocks. `end = offset + n` (checked,
/// `n >= 1`).
fn config(s: &Stream, offset: u64, end: u64) -> LaunchConfig {
    let (first, last) = (offset / 4, (end - 1) / 4);
    LaunchConfig::new(grid(last - first + 1, BLOCK as u64, 32 * sms(s)), BLOCK)
}

/// The signature the three generators share: `(out, n, seed, offset)`.
type Generator<T> = Kernel<(&'static mut DeviceSlice<T>, u64, u64, u64)>;

/// Fills `out` from `kernel`'s stream at `(seed, offset)`; nothing to do for an empty `out`.
/// [`Error::Invalid`] when `offset + out.len()` passes the end of the stream (2^64 values).
fn generate<T: DeviceRepr>(
    op: &'static str,
    kernel: &Generator<T>,
    s: &Stream,
    out: &mut DeviceSlice<T>,
    seed: u64,
    offset: u64,
) -> Result<()> {
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    // The kernel's last stream position is offset + n − 1, computed in wrapping u64: it must
    // not pass the end of the stream, or its block range would wrap and leave outputs unwritten.
    let Some(end) = offset.checked_add(n as u64) else {
        return Err(Error::Invalid {
            op,
            problem: format!(
                "offset {offset} + {n} elements passes the end of the Philox stream (2^64 \
                 values); use a smaller offset"
            ),
        });
    };
    // SAFETY: the generators write out[i] for i < n only, and n = out.len(); offset + n <= 2^64
    // (checked above), so the kernel's (offset + n − 1) / 4 does not wrap and its grid-stride
    // loop over the Philox blocks writes every element.
    unsafe { kernel.launch(s, &config(s, offset, end), out, n as u64, seed, offset) }?;
    Ok(())
}

/// `out[i]` = word `offset + i` of the Philox4x32-10 stream keyed by `seed` (bit-exact with
/// [`crate::reference::philox_u32`]).
pub fn philox_u32(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<u32>,
    seed: u64,
    offset: u64,
) -> Result<()> {
    generate("philox_u32", k.philox_u32()?, s, out, seed, offset)
}

/// Uniform floats in `[0, 1)`: `(word >> 8) · 2^-24` (bit-exact with the reference).
pub fn fill_uniform(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<f32>,
    seed: u64,
    offset: u64,
) -> Result<()> {
    generate("fill_uniform", k.fill_uniform_f32()?, s, out, seed, offset)
}

/// Standard normal floats by Box–Muller on word pairs (CUDA `logf`/`sincospif`: within a few
/// ulp of [`crate::reference::fill_normal`]).
pub fn fill_normal(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<f32>,
    seed: u64,
    offset: u64,
) -> Result<()> {
    generate("fill_normal", k.fill_normal_f32()?, s, out, seed, offset)
}
