//! Seed 004's fused op `relu(x * scale + bias)` and its backward pass.

use crate::launch::{blocks, check_len, check_matrix, sms, to_i32, BLOCK};
use crate::{Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// `out[r][c] = max(fmaf(x[r][c], scale, bias[c]), 0)` (NaN → 0) on row-major `[rows, cols]`
/// arrays; `bias` has `cols` elements. Launch: block 256, grid `(ceil(cols / 1024),
/// min(rows, 65535))`, float4 accesses when `cols % 4 == 0` and the slices are 16-byte aligned.
#[allow(clippy::too_many_arguments)]
pub fn bias_relu_fwd(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    bias: &DeviceSlice<f32>,
    scale: f32,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "bias_relu_fwd";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), rows, cols)?;
    check_len(OP, "bias", bias.len(), cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new((blocks(cols, 1024), rows.min(65535) as u32), BLOCK);
    // SAFETY: the kernels index x, grad_out, grad_x/out as [rows, cols] and bias, grad_bias
    // (or the [P, cols] partial buffer) by column, guarded by r and c; every buffer was checked
    // to have exactly those shapes above.
    unsafe {
        k.bias_relu_fwd_f32()?
            .launch(s, &cfg, x, bias, scale, out, r, c)
    }?;
    Ok(())
}

/// How many row chunks `P` [`bias_relu_bwd`] splits `rows` into on a device with `sm_count`
/// SMs (grid `(ceil(cols / 32), P)`): enough blocks for about 8 per SM, at least 64 rows per
/// chunk, `1 ≤ P ≤ 65535`. The bias gradient's summation order depends on `P`, so the CPU
/// reference ([`crate::reference::bias_relu_bwd`]) takes it as an argument.
pub fn bias_relu_bwd_parts(rows: usize, cols: usize, sm_count: u32) -> u32 {
    let gx = cols.div_ceil(32).max(1);
    let want = (8 * sm_count.max(1) as usize).div_ceil(gx);
    let by_rows = rows.div_ceil(64);
    // The kernel computes `rows + P - 1` in `int`.
    let int_room = (i32::MAX as usize).saturating_sub(rows).saturating_add(1);
    want.min(by_rows).min(int_room).clamp(1, 65535) as u32
}

/// Backward of [`bias_relu_fwd`]: with `pre = fmaf(x, scale, bias[c])` and
/// `g = pre > 0 ? grad_out : 0`, writes `grad_x = g * scale` and
/// `grad_bias[c] = Σ_rows g` (deterministic: fixed order for a fixed `P`, no atomics).
///
/// Two launches: `bias_relu_bwd_f32` (block (32, 8), grid `(ceil(cols / 32), P)` with `P` from
/// [`bias_relu_bwd_parts`]) writes per-chunk column sums into a temporary `[P, cols]` buffer
/// allocated on `s`, then `bias_relu_bwd_reduce_f32` (block 256) adds the chunks in order; with
/// `P == 1` the first launch writes `grad_bias` directly. `rows == 0` gives `grad_bias = 0`.
#[allow(clippy::too_many_arguments)]
pub fn bias_relu_bwd(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    bias: &DeviceSlice<f32>,
    scale: f32,
    grad_out: &DeviceSlice<f32>,
    grad_x: &mut DeviceSlice<f32>,
    grad_bias: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "bias_relu_bwd";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "grad_out", grad_out.len(), rows, cols)?;
    check_matrix(OP, "grad_x", grad_x.len(), rows, cols)?;
    check_len(OP, "bias", bias.len(), cols)?;
    check_len(OP, "grad_bias", grad_bias.len(), cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if cols == 0 {
        return Ok(());
    }
    let parts = bias_relu_bwd_parts(rows, cols, sms(s) as u32);
    let cfg = LaunchConfig::new((blocks(cols, 32), parts), (32, 8));
    if parts == 1 {
        // SAFETY: the kernels index x, grad_out, grad_x/out as [rows, cols] and bias, grad_bias
        // (or the [P, cols] partial buffer) by column, guarded by r and c; every buffer was checked
        // to have exactly those shapes above.
        unsafe {
            k.bias_relu_bwd_f32()?
                .launch(s, &cfg, x, bias, scale, grad_out, grad_x, grad_bias, r, c)
        }?;
        return Ok(());
    }
    let mut partial = s.alloc_zeros::<f32>(parts as usize * cols)?;
    // SAFETY: the kernels index x, grad_out, grad_x/out as [rows, cols] and bias, grad_bias
    // (or the [P, cols] partial buffer) by column, guarded by r and c; every buffer was checked
    // to have exactly those shapes above.
    unsafe {
        k.bias_relu_bwd_f32()?.launch(
            s,
            &cfg,
            x,
            bias,
            scale,
            grad_out,
            grad_x,
            &mut partial,
            r,
            c,
        )
    }?;
    let cfg2 = LaunchConfig::new(blocks(cols, BLOCK as usize), BLOCK);
    // SAFETY: the kernels index x, grad_out, grad_x/out as [rows, cols] and bias, grad_bias
    // (or the [P, cols] partial buffer) by column, guarded by r and c; every buffer was checked
    // to have exactly those shapes above.
    unsafe {
        k.bias_relu_bwd_reduce_f32()?
            .launch(s, &cfg2, &partial, grad_bias, parts as i32, c)
    }?;
    Ok(())
}

/// [`bias_relu_fwd`] in f64 (`cuda/activation_grad.cu`: one thread per element, `fma`): for
/// gradient checks, which differentiate in double precision.
#[allow(clippy::too_many_arguments)]
pub fn bias_relu_fwd_f64(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f64>,
    bias: &DeviceSlice<f64>,
    scale: f64,
    out: &mut DeviceSlice<f64>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "bias_relu_fwd";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), rows, cols)?;
    check_len(OP, "bias", bias.len(), cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(blocks(rows * cols, BLOCK as usize).min(65535 * 64), BLOCK);
    // SAFETY: the kernel indexes x and out as [rows, cols] (i < rows · cols) and bias by column;
    // every buffer was checked to have exactly those shapes above.
    unsafe {
        k.bias_relu_fwd_f64()?
            .launch(s, &cfg, x, bias, scale, out, r, c)
    }?;
    Ok(())
}

/// [`bias_relu_bwd`] in f64: one thread per column walks the rows in order (a deterministic
/// column sum; f64 is for checking, not for speed).
#[allow(clippy::too_many_arguments)]
pub fn bias_relu_bwd_f64(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f64>,
    bias: &DeviceSlice<f64>,
    scale: f64,
    grad_out: &DeviceSlice<f64>,
    grad_x: &mut DeviceSlice<f64>,
    grad_bias: &mut DeviceSlice<f64>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "bias_relu_bwd";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "grad_out", grad_out.len(), rows, cols)?;
    check_matrix(OP, "grad_x", grad_x.len(), rows, cols)?;
    check_len(OP, "bias", bias.len(), cols)?;
    check_len(OP, "grad_bias", grad_bias.len(), cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if cols == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(blocks(cols, BLOCK as usize), BLOCK);
    // SAFETY: thread t handles columns c < cols of every row r < rows: the [rows, cols] buffers
    // and the [cols] ones were checked above.
    unsafe {
        k.bias_relu_bwd_f64()?
            .launch(s, &cfg, x, bias, scale, grad_out, grad_x, grad_bias, r, c)
    }?;
    Ok(())
}
