//! Seed 000's vector add, as taught and as tuned.

use crate::launch::{check_len, packet_grid, to_i32, BLOCK};
use crate::{Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// `c = a + b` with seed 000's kernel `vector_add`: block 256, one thread per element
/// (`ceil(n / 256)` blocks), `int` indices, so `n <= i32::MAX`.
pub fn vector_add_seed(
    k: &Kernels,
    s: &Stream,
    a: &DeviceSlice<f32>,
    b: &DeviceSlice<f32>,
    c: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "vector_add_seed";
    let n = c.len();
    check_len(OP, "a", a.len(), n)?;
    check_len(OP, "b", b.len(), n)?;
    let n_i32 = to_i32(OP, "n", n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(n.div_ceil(BLOCK as usize) as u32, BLOCK);
    // SAFETY: the kernel writes c[i] for i < n only, and a, b, c all have n elements
    // (checked above).
    unsafe { k.vector_add()?.launch(s, &cfg, a, b, c, n_i32) }?;
    Ok(())
}

/// `c = a + b` with `vector_add_fast`: float4 accesses when all three slices are 16-byte
/// aligned (scalar otherwise), one float4 per thread (`ceil(n / 1024)` blocks of 256).
pub fn vector_add(
    k: &Kernels,
    s: &Stream,
    a: &DeviceSlice<f32>,
    b: &DeviceSlice<f32>,
    c: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "vector_add";
    let n = c.len();
    check_len(OP, "a", a.len(), n)?;
    check_len(OP, "b", b.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(packet_grid::<f32>(n), BLOCK);
    // SAFETY: the kernel writes c[i] for i < n only, and a, b, c all have n elements
    // (checked above).
    unsafe { k.vector_add_fast()?.launch(s, &cfg, a, b, c, n as u64) }?;
    Ok(())
}
