//! Dtype conversions (`cuda/cast.cu`): `tensor.to(dtype)`, each element rounded once.

use crate::dispatch;
use crate::launch::{check_len, grid, BLOCK};
use crate::{Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// `out[i] = x[i] as B` for the pairs with a kernel: f32 ↔ f64, f32 ↔ f16, f32 ↔ bf16,
/// f16 ↔ bf16, f32/f64 → i32 and i32 → f32/f64. Floats narrow by round-to-nearest-even;
/// float → i32 truncates toward zero and saturates, NaN → 0 (Rust's `as`). Other pairs (which
/// would round twice, or are the same type) are [`crate::Error::Unsupported`]-style errors
/// naming the pair: cast through f32.
pub fn cast<A: DeviceRepr, B: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<A>,
    out: &mut DeviceSlice<B>,
) -> Result<()> {
    let kernel = dispatch::dtype_cast::<A, B>(k)?;
    let n = out.len();
    check_len("cast", "x", x.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(grid(n as u64, BLOCK as u64, i32::MAX as u64), BLOCK);
    // SAFETY: the kernel touches elements i < n of both buffers only (grid-stride loop), and n
    // is the length of both (checked above).
    unsafe { kernel.launch(s, &cfg, x, out, n as u64) }?;
    Ok(())
}
