//! Inverted dropout with a Philox mask that is never stored (`cuda/dropout.cu`): the backward
//! pass is the same op applied to the gradient with the same `(seed, offset)`.

use crate::dispatch;
use crate::launch::{check_len, grid, sms, BLOCK};
use crate::{Compute, Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// `out[i] = u_i >= p ? x[i] / (1 − p) : 0`, where `u_i` is the uniform float of Philox word
/// `offset + i` under `seed` (exactly [`crate::ops::fill_uniform`]'s value). `p = 0` is the
/// identity, `p = 1` gives zeros; `p` must be in `[0, 1]`. The backward pass of a dropout is
/// this op on the output's gradient with the same `p`, `seed` and `offset` (the mask is
/// regenerated, never stored). `p` is compared in f32. `offset + n` must fit in a `u64`
/// ([`Error::Invalid`] otherwise: the positions would pass the end of the Philox stream).
#[allow(clippy::too_many_arguments)]
pub fn dropout<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
    p: f64,
    seed: u64,
    offset: u64,
) -> Result<()> {
    const OP: &str = "dropout";
    let kernel = dispatch::dropout::<T>(k)?;
    let n = x.len();
    check_len(OP, "out", out.len(), n)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::Invalid {
            op: OP,
            problem: format!("p = {p}: the drop probability must be in [0, 1]"),
        });
    }
    if n == 0 {
        return Ok(());
    }
    // The kernel's last stream position is offset + n − 1, computed in wrapping u64: it must
    // not pass the end of the stream, or its block range [offset / 4, (offset + n − 1) / 4]
    // would wrap and elements would stay unwritten.
    let Some(end) = offset.checked_add(n as u64) else {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "offset {offset} + {n} elements passes the end of the Philox stream (2^64 \
                 values); use a smaller offset"
            ),
        });
    };
    let scale = <T::Scalar as Compute>::of_f64(1.0 / (1.0 - p));
    let (first, last) = (offset / 4, (end - 1) / 4);
    let cfg = LaunchConfig::new(grid(last - first + 1, BLOCK as u64, 32 * sms(s)), BLOCK);
    // SAFETY: the kernel writes out[i] and reads x[i] for i < n only; both hold n elements.
    // offset + n <= 2^64 (checked above), so the kernel's (offset + n − 1) / 4 does not wrap
    // and its grid-stride loop over the Philox blocks covers every element exactly once.
    unsafe { kernel.launch(s, &cfg, x, out, n as u64, p as f32, scale, seed, offset) }?;
    Ok(())
}
