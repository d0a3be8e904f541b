//! Numerically stable row-wise softmax, with the kernel picked by shape in one place
//! ([`softmax_choice`]; the measurements behind it are in `kernels/TUNING.md`).

use crate::launch::{blocks, check_matrix, sms, to_i32};
use crate::{Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Which softmax kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgo {
    /// The kernel [`softmax_choice`] picks for the shape.
    Auto,
    /// `softmax_warp_f32`: one warp per row, online (max, sum) (block 128 = 4 rows); kept as
    /// the first step the examples show.
    Warp,
    /// `softmax_block_f32`: one block of 256 threads per row, online (max, sum) (grid `rows`).
    Block,
    /// `softmax_rows_regs_f32` (`cols % 4 == 0`, 16-byte aligned) or `softmax_rows_regs_any_f32`
    /// (any width and alignment): one block per row with the row in registers (block
    /// `ceil(cols / 16)` threads rounded up to a warp); `cols <= 16384`.
    Registers,
    /// `softmax_small_g{G}_p{P}_f32`: `G` lanes per row (`32 / G` rows per warp), `P` elements
    /// per lane in registers; `cols <= 1024`.
    Narrow,
    /// `softmax_part_stats_f32` + `softmax_part_apply_f32`: each row split into chunks, one
    /// block per chunk, for long rows or rows too few to fill the GPU; `rows <= 65535`.
    Split,
    /// `softmax_smem_f32`: one block of 1024 threads per row, the row staged in dynamic shared
    /// memory (read once, one `expf` per element); rows of up to [`shared_max_cols`] columns.
    Shared,
}

/// The widest row [`SoftmaxAlgo::Narrow`] takes (32 lanes × 32 elements).
pub const NARROW_MAX_COLS: usize = 1024;

/// The column count up to which the warp-per-row kernel keeps its row in registers between its
/// two passes (32 lanes × 8 float4).
pub const WARP_MAX_COLS: usize = 1024;

/// The longest row [`SoftmaxAlgo::Registers`] holds in registers (16 floats × 1024 threads).
pub const REGISTERS_MAX_COLS: usize = 16384;

/// The most rows [`SoftmaxAlgo::Split`] takes (the grid's y dimension).
pub const SPLIT_MAX_ROWS: usize = 65_535;

/// Whether the float4 registers kernel can run on these buffers (else the scalar one does).
fn registers_vec(x: &DeviceSlice<f32>, out: &DeviceSlice<f32>, cols: usize) -> bool {
    cols % 4 == 0 && x.as_raw_ptr() % 16 == 0 && out.as_raw_ptr() % 16 == 0
}

/// The longest row [`SoftmaxAlgo::Shared`] stages in `shared_bytes` of dynamic shared memory
/// (the device's opt-in per-block limit minus the kernel's 128 static bytes).
pub fn shared_max_cols(shared_bytes: usize) -> usize {
    shared_bytes.saturating_sub(128) / 4
}

/// The kernel [`SoftmaxAlgo::Auto`] (and so [`softmax_rows`]) picks for `rows` rows of `cols`
/// floats on a GPU with `sm_count` SMs and `shared_bytes` of opt-in shared memory per block
/// (measurements: kernels/TUNING.md, round 3):
/// - `cols <= 1024`: [`SoftmaxAlgo::Narrow`] (several rows per warp below 32 columns);
/// - up to 16384 columns: [`SoftmaxAlgo::Registers`], unless the rows are too few to give
///   every SM two blocks and longer than 2048 columns: [`SoftmaxAlgo::Split`];
/// - longer rows: [`SoftmaxAlgo::Shared`] when there is a row per SM and the row fits in shared
///   memory, else [`SoftmaxAlgo::Split`] (or [`SoftmaxAlgo::Block`] beyond 65535 rows).
pub fn softmax_choice(rows: usize, cols: usize, sm_count: u32, shared_bytes: usize) -> SoftmaxAlgo {
    let sms = sm_count.max(1) as usize;
    let split_ok = rows <= SPLIT_MAX_ROWS;
    if cols <= NARROW_MAX_COLS {
        SoftmaxAlgo::Narrow
    } else if cols <= REGISTERS_MAX_COLS {
        if split_ok && rows < 2 * sms && cols > 2048 {
            SoftmaxAlgo::Split
        } else {
            SoftmaxAlgo::Registers
        }
    } else if rows >= sms && cols <= shared_max_cols(shared_bytes) {
        SoftmaxAlgo::Shared
    } else if split_ok {
        SoftmaxAlgo::Split
    } else {
        SoftmaxAlgo::Block
    }
}

/// `(G, P)` of the narrow kernel for rows of `cols` (1 ..= 1024) columns: `G` lanes per row (a
/// quarter of `cols` rounded up to a power of two, 1 to 32) and `P` elements per lane (a power
/// of two, 4 except below 4 columns and above 128), `G · P >= cols`.
pub fn narrow_shape(cols: usize) -> (usize, usize) {
    let g = (cols.max(1).next_power_of_two() / 4).clamp(1, 32);
    let p = cols.max(1).div_ceil(g).next_power_of_two();
    (g, p)
}

/// Opt-in shared memory per block of the stream's device.
fn shared_bytes(s: &Stream) -> usize {
    s.context().limits().max_shared_per_block_optin as usize
}

/// Chunks per row and columns per chunk of [`SoftmaxAlgo::Split`]: enough blocks for four per
/// SM, chunks of at most 16384 and at least 1024 columns, a multiple of 4.
pub fn split_shape(rows: usize, cols: usize, sm_count: u32) -> (usize, usize) {
    let want = (4 * sm_count.max(1) as usize).div_ceil(rows.max(1));
    let parts = want
        .max(cols.div_ceil(REGISTERS_MAX_COLS))
        .min(cols.div_ceil(1024))
        .clamp(1, 65_535);
    let chunk = cols.div_ceil(parts).next_multiple_of(4).max(4);
    (cols.div_ceil(chunk).max(1), chunk)
}

/// `out[r] = softmax(x[r])` for each row of a row-major `[rows, cols]` f32 array:
/// `exp(x − max) · (1 / Σ exp(x − max))`; a row of all -inf gives NaN. The kernel is picked
/// by shape ([`softmax_choice`]).
pub fn softmax_rows(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    softmax_rows_with(k, s, SoftmaxAlgo::Auto, x, out, rows, cols)
}

/// [`softmax_rows`] with a chosen kernel (`Warp` and `Block` are correct for every shape;
/// `Registers` returns [`crate::Error::Invalid`] for a shape or alignment it cannot take).
#[allow(clippy::too_many_arguments)]
pub fn softmax_rows_with(
    k: &Kernels,
    s: &Stream,
    algo: SoftmaxAlgo,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "softmax_rows";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), rows, cols)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let sm_count = sms(s) as u32;
    let algo = match algo {
        SoftmaxAlgo::Auto => softmax_choice(rows, cols, sm_count, shared_bytes(s)),
        SoftmaxAlgo::Registers if cols > REGISTERS_MAX_COLS => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the registers kernel holds rows of at most {REGISTERS_MAX_COLS} columns (cols = {cols}); use SoftmaxAlgo::Split or Auto"
                ),
            })
        }
        SoftmaxAlgo::Narrow if cols > NARROW_MAX_COLS => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the narrow kernel takes rows of at most {NARROW_MAX_COLS} columns (cols = {cols}); use SoftmaxAlgo::Auto"
                ),
            })
        }
        SoftmaxAlgo::Split if rows > SPLIT_MAX_ROWS => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the split kernels take at most {SPLIT_MAX_ROWS} rows (rows = {rows}); use SoftmaxAlgo::Auto"
                ),
            })
        }
        other => other,
    };
    // SAFETY (every launch below): each kernel reads x[r·cols + c] and writes out[r·cols + c]
    // only for r < rows, c < cols, and both buffers were checked to hold rows·cols floats; the
    // split kernels' stats buffer holds 2·rows·P floats, block (p, r) writing pair r·P + p.
    match algo {
        SoftmaxAlgo::Warp => {
            let cfg = LaunchConfig::new(blocks(rows, 4), 128);
            unsafe { k.softmax_warp_f32()?.launch(s, &cfg, x, out, r, c) }?;
        }
        SoftmaxAlgo::Narrow => {
            let (g, p) = narrow_shape(cols);
            let kernel = match (g, p) {
                (1, 1) => k.softmax_small_g1_p1_f32()?,
                (1, 2) => k.softmax_small_g1_p2_f32()?,
                (1, _) => k.softmax_small_g1_p4_f32()?,
                (2, _) => k.softmax_small_g2_p4_f32()?,
                (4, _) => k.softmax_small_g4_p4_f32()?,
                (8, _) => k.softmax_small_g8_p4_f32()?,
                (16, _) => k.softmax_small_g16_p4_f32()?,
                (_, 4) => k.softmax_small_g32_p4_f32()?,
                (_, 8) => k.softmax_small_g32_p8_f32()?,
                (_, 16) => k.softmax_small_g32_p16_f32()?,
                _ => k.softmax_small_g32_p32_f32()?,
            };
            let cfg = LaunchConfig::new(blocks(rows, 128 / g), 128);
            unsafe { kernel.launch(s, &cfg, x, out, r, c) }?;
        }
        SoftmaxAlgo::Registers => {
            let vec = registers_vec(x, out, cols);
            // 16 floats per thread either way (4 float4, or 16 scalars).
            let threads = cols.div_ceil(16).div_ceil(32).clamp(1, 32) as u32 * 32;
            let cfg = LaunchConfig::new(rows as u32, threads);
            let kernel = if vec {
                k.softmax_rows_regs_f32()?
            } else {
                k.softmax_rows_regs_any_f32()?
            };
            unsafe { kernel.launch(s, &cfg, x, out, r, c) }?;
        }
        SoftmaxAlgo::Split => {
            let (parts, chunk) = split_shape(rows, cols, sm_count);
            let ch = to_i32(OP, "chunk", chunk)?;
            // SAFETY: every (p, r) pair is written by the stats kernel before the apply kernel
            // reads it, in stream order.
            let mut stats = unsafe { s.alloc::<f32>(2 * rows * parts)? };
            let cfg = LaunchConfig::new((parts as u32, rows as u32), 256);
            unsafe {
                k.softmax_part_stats_f32()?
                    .launch(s, &cfg, x, &mut stats, r, c, ch)
            }?;
            unsafe {
                k.softmax_part_apply_f32()?
                    .launch(s, &cfg, x, &stats, out, r, c, ch)
            }?;
        }
        SoftmaxAlgo::Shared => {
            let bytes = cols * 4;
            if cols > shared_max_cols(shared_bytes(s)) {
                return Err(Error::Invalid {
                    op: OP,
                    problem: format!(
                        "a row of {cols} floats ({bytes} bytes) does not fit in this GPU's {} bytes of shared memory per block; use SoftmaxAlgo::Split or Auto",
                        shared_bytes(s)
                    ),
                });
            }
            let f = k.softmax_smem_f32()?.function();
            if (f.limits().max_dynamic_shared_bytes as usize) < bytes {
                f.set_max_dynamic_shared_mem(bytes as u32)?;
            }
            let cfg = LaunchConfig::new(rows as u32, 1024).with_shared_mem(bytes as u32);
            unsafe { k.softmax_smem_f32()?.launch(s, &cfg, x, out, r, c) }?;
        }
        _ => {
            let cfg = LaunchConfig::new(rows as u32, 256);
            unsafe { k.softmax_block_f32()?.launch(s, &cfg, x, out, r, c) }?;
        }
    }
    Ok(())
}
