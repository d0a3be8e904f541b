//! Memory-coalescing demonstrations: a coalesced copy, a strided gather, and three transposes.

use crate::launch::{
    blocks, check_len, check_matrix, check_operand, grid, packet_grid, sms, to_i32, BLOCK,
};
use crate::{dispatch, Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// `dst = src` with `copy_coalesced` (float4 when both are 16-byte aligned): the bandwidth
/// ceiling. Block 256, `ceil(n / 1024)` blocks (one float4 per thread).
pub fn copy_coalesced(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<f32>,
    dst: &mut DeviceSlice<f32>,
) -> Result<()> {
    let n = dst.len();
    check_len("copy_coalesced", "src", src.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::new(packet_grid::<f32>(n), BLOCK);
    // SAFETY: the kernel guards every index with the element counts / extents it is
    // passed, which were checked against both buffers above.
    unsafe { k.copy_coalesced()?.launch(s, &cfg, src, dst, n as u64) }?;
    Ok(())
}

/// `dst[i] = src[i * stride]` for `i < dst.len()` (`copy_strided`): reads waste more of every
/// 32-byte sector as the stride grows. `src` must hold `(dst.len() - 1) · stride + 1` elements.
pub fn copy_strided(
    k: &Kernels,
    s: &Stream,
    src: &DeviceSlice<f32>,
    dst: &mut DeviceSlice<f32>,
    stride: usize,
) -> Result<()> {
    const OP: &str = "copy_strided";
    let n = dst.len();
    if n == 0 {
        return Ok(());
    }
    let need = (n - 1)
        .checked_mul(stride)
        .and_then(|v| v.checked_add(1))
        .ok_or_else(|| Error::TooLarge {
            op: OP,
            what: "(dst.len() - 1) * stride",
            value: (n - 1) as u128 * stride as u128,
            max: usize::MAX as u128,
        })?;
    if src.len() < need {
        return Err(Error::Shape {
            op: OP,
            what: "src",
            expected: format!("{n} elements at stride {stride} ({need} elements)"),
            found: format!("{} elements", src.len()),
        });
    }
    let cfg = LaunchConfig::new(grid(n as u64, BLOCK as u64, 32 * sms(s)), BLOCK);
    // SAFETY: the kernel guards every index with the element counts / extents it is
    // passed, which were checked against both buffers above.
    unsafe {
        k.copy_strided()?
            .launch(s, &cfg, src, dst, n as u64, stride as u64)
    }?;
    Ok(())
}

/// Which transpose kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransposeAlgo {
    /// `transpose_naive`: coalesced reads, strided writes.
    Naive,
    /// `transpose_tiled`: a 64×64 shared-memory tile (32-way bank conflicts on purpose).
    Tiled,
    /// `transpose_tiled_padded`: a 64×65 tile, conflict-free.
    TiledPadded,
    /// `transpose_skinny`: a sub-matrix of all the short side through shared memory, for
    /// shapes with fewer than 64 rows or columns.
    Skinny,
    /// `transpose_skinny_v4`: the skinny shapes with every load of a block in flight at once and
    /// float4 both ways; `x` and `out` 16-byte aligned and the long side a multiple of 4
    /// ([`skinny_v4_fits`]).
    SkinnyV4,
    /// `transpose_tiled_aligned_*`: a tile whose output rows are cut on 32-byte sector
    /// boundaries and whose lanes follow the 128-byte lines, for rows that do not start on one
    /// (widths or heights not a multiple of 32), with every load of the tile in flight before
    /// its first shared store; the tile picked by shape ([`transpose_aligned_tile`]); at most
    /// 65535 × 64 columns.
    Aligned,
    /// [`TransposeAlgo::Aligned`] with the given tile.
    AlignedWith(AlignedTile),
    /// Picked by shape ([`transpose_choice`]).
    Auto,
}

/// The tiles of [`TransposeAlgo::Aligned`] (`transpose_tiled_aligned_128x64` /
/// `transpose_tiled_aligned_128x128` and their `_ld` forms): input rows × input columns per
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlignedTile {
    /// 128 rows × 64 columns, 512 threads, 35,360 bytes of dynamic shared memory.
    T128x64,
    /// 128 rows × 128 columns, 1024 threads, 70,176 bytes of dynamic shared memory (above the
    /// 48 KiB default: the op raises the kernel's limit; devices allowing less fall back to
    /// [`AlignedTile::T128x64`] under [`TransposeAlgo::Aligned`]).
    T128x128,
}

impl AlignedTile {
    /// Input rows per tile (the length of each output row segment).
    pub fn rows(self) -> usize {
        128
    }

    /// Input columns per tile.
    pub fn cols(self) -> usize {
        match self {
            AlignedTile::T128x64 => 64,
            AlignedTile::T128x128 => 128,
        }
    }

    /// Threads per block (one dimension): a warp per 4 tile columns.
    pub fn threads(self) -> u32 {
        (self.cols() * 8) as u32
    }

    /// Dynamic shared memory per block: `(rows + 8) × (cols + 1)` floats (8 rows above the
    /// tile for the sector cut, one float of padding per row against bank conflicts).
    pub fn smem_bytes(self) -> u32 {
        ((self.rows() + 8) * (self.cols() + 1) * 4) as u32
    }

    /// A launch for `x: [rows, cols]` with one block per tile: grid `(ceil(rows / 128),
    /// ceil(cols / tile cols))` (rows first: tiles sharing output lines run together), block
    /// [`AlignedTile::threads`], [`AlignedTile::smem_bytes`] of dynamic shared memory. The
    /// grid's y is at most 65535.
    pub fn launch_config(self, rows: usize, cols: usize) -> LaunchConfig {
        LaunchConfig::new(
            (blocks(rows, self.rows()), blocks(cols, self.cols())),
            self.threads(),
        )
        .with_shared_mem(self.smem_bytes())
    }

    /// The launch the ops use on a GPU of `sm_count` SMs. [`AlignedTile::T128x64`]: as
    /// [`AlignedTile::launch_config`]. [`AlignedTile::T128x128`]: `min(tiles, sm_count)` blocks
    /// (one per SM: 1024 threads each) that walk the tiles in the same order, each issuing its
    /// next tile's loads before it writes the current one (its kernels take any grid; on an
    /// H200 1000 × 4097 and 4099 × 1023 took 10.10 / 10.28 µs this way against 10.57 / 10.71 µs
    /// with one block per tile, both in one run, session 56).
    pub fn launch_config_on(self, rows: usize, cols: usize, sm_count: u32) -> LaunchConfig {
        match self {
            AlignedTile::T128x64 => self.launch_config(rows, cols),
            AlignedTile::T128x128 => {
                let tiles = blocks(rows, self.rows()) as usize * blocks(cols, self.cols()) as usize;
                let grid = tiles.min(sm_count.max(1) as usize).max(1) as u32;
                LaunchConfig::new(grid, self.threads()).with_shared_mem(self.smem_bytes())
            }
        }
    }
}

/// The tile [`TransposeAlgo::Aligned`] uses for `x: [rows, cols]` on a GPU of `sm_count` SMs:
/// [`AlignedTile::T128x128`] when its grid is one to four waves of the GPU
/// (`sm_count ≤ ceil(rows / 128) · ceil(cols / 128) ≤ 4 · sm_count`: about 8.7–35 MB of f32 on
/// 132 SMs), else [`AlignedTile::T128x64`]. Measured on an H200 (kernels/TUNING.md, issue 34
/// item 4; ratios to the same run's D2D copy): at 1000 × 4097 and 4099 × 1023 (two waves of the
/// large tile) 128 × 128 gives 0.889 / 0.834 against 0.833 / 0.789; at 12345 × 6789,
/// 16383 × 8191 and 8191 × 16385 (40–64 waves) 0.69–0.70 against 0.85–0.86; below one wave
/// (512², 1024²) 0.82 / 0.75 against 1.09 / 0.95. Between four waves and 12345 × 6789 it is
/// unmeasured: the smaller tile, which is never far behind, is the default there.
pub fn transpose_aligned_tile(rows: usize, cols: usize, sm_count: u32) -> AlignedTile {
    let sms = (sm_count.max(1)) as usize;
    let tiles = rows.div_ceil(128).saturating_mul(cols.div_ceil(128));
    if (sms..=4 * sms).contains(&tiles) {
        AlignedTile::T128x128
    } else {
        AlignedTile::T128x64
    }
}

/// [`transpose_aligned_tile`], falling back to [`AlignedTile::T128x64`] where the device allows
/// a block less dynamic shared memory than [`AlignedTile::T128x128`] needs (compute 7.5: 64 KiB).
fn aligned_tile_for(s: &Stream, rows: usize, cols: usize) -> AlignedTile {
    let limits = s.context().limits();
    match transpose_aligned_tile(rows, cols, limits.sm_count) {
        AlignedTile::T128x128
            if limits.max_shared_per_block_optin < AlignedTile::T128x128.smem_bytes() =>
        {
            AlignedTile::T128x64
        }
        t => t,
    }
}

/// The tile's kernel takes more than 48 KiB of dynamic shared memory: raise its limit (once per
/// function; a no-op after) and refuse a grid whose y (column tiles) passes 65535.
fn aligned_prepare(
    op: &'static str,
    f: &cuda_stack_driver::Function,
    tile: AlignedTile,
    cols: usize,
) -> Result<()> {
    if cols.div_ceil(tile.cols()) > 65_535 {
        return Err(Error::TooLarge {
            op,
            what: "cols",
            value: cols as u128,
            max: 65_535 * tile.cols() as u128,
        });
    }
    crate::launch::raise_smem(f, tile.smem_bytes())
}

/// The transpose [`TransposeAlgo::Auto`] picks for `x: [rows, cols]` at device address `addr`
/// (measurements: kernels/TUNING.md, round 3):
/// - a side shorter than 64: [`TransposeAlgo::Skinny`] ([`transpose`] runs it as
///   [`TransposeAlgo::SkinnyV4`] where [`skinny_v4_fits`]);
/// - rows or columns not a multiple of 32, or `x` not on a 128-byte line:
///   [`TransposeAlgo::Aligned`] (its grid's y counts column tiles of at most 64: up to 65535 of
///   them), its tile by shape ([`transpose_aligned_tile`]);
/// - else [`TransposeAlgo::TiledPadded`].
pub fn transpose_choice(rows: usize, cols: usize, addr: u64) -> TransposeAlgo {
    if rows < 64 || cols < 64 {
        TransposeAlgo::Skinny
    } else if (rows % 32 != 0 || cols % 32 != 0 || addr % 128 != 0) && cols.div_ceil(64) <= 65_535 {
        TransposeAlgo::Aligned
    } else {
        TransposeAlgo::TiledPadded
    }
}

/// Whether `transpose_skinny_v4` takes `x: [rows, cols]` at `x_addr` into `out` at `out_addr`:
/// a side shorter than 64, both addresses 16-byte aligned, and the long side (the rows when the
/// columns are fewer than 64, else the columns) a multiple of 4. [`TransposeAlgo::Auto`] runs
/// [`TransposeAlgo::Skinny`]'s shapes on it when it fits.
pub fn skinny_v4_fits(rows: usize, cols: usize, x_addr: u64, out_addr: u64) -> bool {
    let long = if cols < 64 { rows } else { cols };
    (rows < 64 || cols < 64) && x_addr % 16 == 0 && out_addr % 16 == 0 && long % 4 == 0
}

/// Rows per block of `transpose_skinny` for a tall matrix of `short` (< 64) columns:
/// `8192 / short` rounded down to a power of two (as the kernel computes it).
fn skinny_strip(short: usize) -> usize {
    let fit = 8192 / short.clamp(1, 63);
    1usize << fit.ilog2()
}

/// `out[c][r] = x[r][c]`: `x` is row-major `[rows, cols]`, `out` is `[cols, rows]`. Block
/// (32, 8); grid `(ceil(cols / 32), ceil(rows / 32))` for the naive kernel and
/// `(ceil(cols / 64), ceil(rows / 64))` for the tiled ones; the aligned ones:
/// [`AlignedTile::launch_config`] (block 512 or 1024, grid `(ceil(rows / 128), ceil(cols / 64 or
/// 128))`, grid y at most 65535); the skinny kernel: block 256, one block per strip of rows
/// (tall) or per 1024 outputs (wide); its float4 form: one block per strip of rows (tall) or of
/// columns (wide). [`TransposeAlgo::Auto`] picks by shape ([`transpose_choice`]), and runs the
/// skinny shapes in float4 where [`skinny_v4_fits`]; [`TransposeAlgo::Aligned`] picks its tile by
/// shape ([`transpose_aligned_tile`]).
#[allow(clippy::too_many_arguments)]
pub fn transpose(
    k: &Kernels,
    s: &Stream,
    algo: TransposeAlgo,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    transpose_any(k, s, algo, x, out, rows, cols)
}

/// [`transpose`] for any 4-byte element (`.contiguous()` of a transposed view uses it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn transpose_any<T: DeviceRepr>(
    k: &Kernels,
    s: &Stream,
    algo: TransposeAlgo,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "transpose";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "out", out.len(), cols, rows)?;
    let (r, c) = (to_i32(OP, "rows", rows)?, to_i32(OP, "cols", cols)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let v4 = skinny_v4_fits(rows, cols, x.as_raw_ptr(), out.as_raw_ptr());
    let algo = match algo {
        TransposeAlgo::Auto => match transpose_choice(rows, cols, x.as_raw_ptr()) {
            TransposeAlgo::Skinny if v4 => TransposeAlgo::SkinnyV4,
            TransposeAlgo::Aligned => TransposeAlgo::AlignedWith(aligned_tile_for(s, rows, cols)),
            other => other,
        },
        TransposeAlgo::Aligned => TransposeAlgo::AlignedWith(aligned_tile_for(s, rows, cols)),
        TransposeAlgo::SkinnyV4 if !v4 => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the float4 skinny transpose takes a side shorter than 64, 16-byte aligned x and out and a long side that is a multiple of 4 ({rows} x {cols}, x at {:#x}, out at {:#x}); use TransposeAlgo::Auto",
                    x.as_raw_ptr(),
                    out.as_raw_ptr()
                ),
            })
        }
        TransposeAlgo::Skinny if rows >= 64 && cols >= 64 => {
            return Err(Error::Invalid {
                op: OP,
                problem: format!(
                    "the skinny transpose takes shapes with fewer than 64 rows or columns ({rows} x {cols}); use TransposeAlgo::Auto"
                ),
            })
        }
        other => other,
    };
    let kernel = dispatch::transpose_bits::<T>(k, algo)?;
    if let TransposeAlgo::AlignedWith(tile) = algo {
        aligned_prepare(OP, kernel.function(), tile, cols)?;
    }
    let cfg = match algo {
        TransposeAlgo::Skinny if cols < 64 => {
            LaunchConfig::new(blocks(rows, skinny_strip(cols)), 256)
        }
        TransposeAlgo::Skinny => LaunchConfig::new(blocks(rows * cols, 1024), 256),
        TransposeAlgo::SkinnyV4 if cols < 64 => {
            LaunchConfig::new(blocks(rows, skinny_strip(cols)), 256)
        }
        TransposeAlgo::SkinnyV4 => LaunchConfig::new(blocks(cols, skinny_strip(rows)), 256),
        TransposeAlgo::Naive => LaunchConfig::new((blocks(cols, 32), blocks(rows, 32)), (32, 8)),
        TransposeAlgo::AlignedWith(tile) => {
            tile.launch_config_on(rows, cols, s.context().limits().sm_count)
        }
        _ => LaunchConfig::new((blocks(cols, 64), blocks(rows, 64)), (32, 8)),
    };
    // SAFETY: every kernel reads x[r·cols + c] and writes out[c·rows + r] only for r < rows,
    // c < cols (each guards its indices against the extents it is passed); both buffers were
    // checked to hold rows·cols elements. Each kernel gets the block it is written for (the
    // aligned ones: 32 threads per 4 tile columns and (tile rows + 8)·(tile cols + 1) floats of
    // dynamic shared memory, its limit raised in `aligned_prepare`, which also keeps the grid's
    // y within 65535).
    unsafe { kernel.launch(s, &cfg, x, out, r, c) }?;
    Ok(())
}

/// `out[c·ldo + r] = x[r·cols + c]`: `x` is row-major `[rows, cols]`, `out` is `[cols, rows]`
/// with row stride `ldo >= rows` (`transpose_tiled_aligned_*_ld`, the tile by shape:
/// [`transpose_aligned_tile`]; columns `rows..ldo` of `out` are not touched). `out` must hold
/// `(cols - 1)·ldo + rows` elements and `cols` at most 65535 · 64. `sgemm` relayouts a
/// transposed B with it into rows that start on 16-byte boundaries. Launch:
/// [`AlignedTile::launch_config_on`].
#[allow(clippy::too_many_arguments)]
pub fn transpose_ld(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    ldo: usize,
) -> Result<()> {
    let tile = aligned_tile_for(s, rows, cols);
    transpose_ld_with(k, s, tile, x, out, rows, cols, ldo)
}

/// [`transpose_ld`] with the given tile (at most 65535 tile widths of columns).
#[allow(clippy::too_many_arguments)]
pub fn transpose_ld_with(
    k: &Kernels,
    s: &Stream,
    tile: AlignedTile,
    x: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    rows: usize,
    cols: usize,
    ldo: usize,
) -> Result<()> {
    const OP: &str = "transpose_ld";
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_operand(OP, "out", out.len(), cols, rows, ldo)?;
    let (r, c, l) = (
        to_i32(OP, "rows", rows)?,
        to_i32(OP, "cols", cols)?,
        to_i32(OP, "ldo", ldo)?,
    );
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let kernel = match tile {
        AlignedTile::T128x64 => k.transpose_tiled_aligned_128x64_ld()?,
        AlignedTile::T128x128 => k.transpose_tiled_aligned_128x128_ld()?,
    };
    aligned_prepare(OP, kernel.function(), tile, cols)?;
    let cfg = tile.launch_config_on(rows, cols, s.context().limits().sm_count);
    // SAFETY: the kernel reads x[r·cols + c] and writes out[c·ldo + r] only for r < rows,
    // c < cols; x holds rows·cols elements and out spans a [cols, rows] matrix with row stride
    // ldo (both checked above); the block and dynamic shared memory are the tile's
    // (`launch_config_on`, the limit raised in `aligned_prepare`), and the grid's y (column
    // tiles, for the one-block-per-tile grid) is within 65535 (checked there); the 128 x 128
    // kernels take any grid (their blocks walk the tiles).
    unsafe { kernel.launch(s, &cfg, x, out, r, c, l) }?;
    Ok(())
}
