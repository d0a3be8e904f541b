//! Launching the persistent, split-K Hopper GEMMs (`gemm_wgx_*` in `cuda/gemm_wgmma_tiles.cu`)
//! for [`gemm_half`](super::gemm_half) under a [`HalfPlan::Tiles`](super::HalfPlan) plan.

use super::gemm_half_plan::{half_split, reduce_block, HalfTile, HALF_MAX_WORKSPACE};
use super::split_workspace::WorkspaceLease;
use super::tc_element::TensorCoreElement;
use super::tma_operand::tma_map_box;
use super::Transpose;
use crate::launch::{raise_smem, sms, to_i32};
use crate::{Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// `C = op(A) · op(B)` with `gemm_wgx_<tile>_*` and `splits` k slices (as asked; the slices
/// really run are [`half_split`]'s). Operands are the aligned ones `gemm_half` prepared
/// (16-byte aligned starts and row strides), stored `[a_rows, a_cols]` / `[b_rows, b_cols]`;
/// `m, n, k >= 1` and C is checked to span `[m, n]` with `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_wgx<T: TensorCoreElement>(
    k: &Kernels,
    s: &Stream,
    tile: HalfTile,
    splits: usize,
    (ta, tb): (Transpose, Transpose),
    (m, n, kdim): (usize, usize, usize),
    (a, a_rows, a_cols, lda): (&DeviceSlice<T>, usize, usize, usize),
    (b, b_rows, b_cols, ldb): (&DeviceSlice<T>, usize, usize, usize),
    c: &mut DeviceSlice<T>,
    ldc: usize,
) -> Result<()> {
    const OP: &str = "gemm (tensor cores)";
    let (per, splits) = half_split(kdim, splits);
    let (mi, ni, ki, lc) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
        to_i32(OP, "ldc", ldc)?,
    );
    let (si, pi) = (to_i32(OP, "splits", splits)?, to_i32(OP, "kt_per", per)?);
    let kernels = k.gemm_wgmma_tiles_kernels()?;
    let kern = T::wgx(kernels, tile, ta, tb);
    raise_smem(kern.function(), tile.smem_bytes())?;
    // A pair of blocks loads an A tile in two halves (tile.a_box_rows() rows each).
    let map_a = tma_map_box::<T>(a, ta, true, a_rows, a_cols, lda, tile.a_box_rows() as u32)?;
    let map_b = tma_map_box::<T>(b, tb, false, b_rows, b_cols, ldb, tile.bn() as u32)?;
    let grid = tile.grid(m, n, splits, sms(s) as u32) as u32;
    let cfg = LaunchConfig::new(grid, tile.threads()).with_shared_mem(tile.smem_bytes());
    if splits == 1 {
        let mut out = c.cast_mut::<u8>()?;
        // SAFETY: the maps address exactly the stored matrices of `a` and `b` (extents checked
        // against the slices by TensorMap::tiled_2d; the copy engine reads nothing outside them
        // and zero-fills the rest); A and B are passed so the launch orders those buffers. With
        // one slice the kernel writes C's elements (i·ldc + j) · size_of::<T>() bytes in, for
        // i < m, j < n only: inside `c` (checked by gemm_half to span [m, n] with ldc). Block
        // size, grid (HalfTile::grid: at most one block per unit, whole clusters for the pair
        // tile, whose cluster size is compiled into its entries) and dynamic shared memory are the
        // tile's, as the kernel requires; kt_per and splits come from half_split (no empty slice).
        // Programmatic dependency: every gemm_wgx entry runs griddepcontrol.wait before its
        // first global access (gemm_wgmma_tiles.cu's host contract), so its set-up may overlap
        // the previous kernel's tail (1000^3 on an H200: 10.4 -> 9.0 us eager, 9.2 -> 8.7 us in
        // graph replays). Not for split plans' products, whose previous kernel is mostly the
        // last call's reduce: there it measured slower in graph replays (512^2 x 16384: 20.0
        // -> 20.9 us; kernels/TUNING.md).
        let cfg = cfg.with_programmatic_dependency();
        unsafe {
            kern.launch(
                s, &cfg, map_a, map_b, a, b, &mut out, mi, ni, ki, lc, si, pi,
            )
        }?;
        return Ok(());
    }
    let len = splits
        .checked_mul(m)
        .and_then(|v| v.checked_mul(n))
        .filter(|&v| v.saturating_mul(4) <= HALF_MAX_WORKSPACE)
        .ok_or_else(|| Error::TooLarge {
            op: OP,
            what: "split-K workspace (f32 elements)",
            value: splits as u128 * m as u128 * n as u128,
            max: (HALF_MAX_WORKSPACE / 4) as u128,
        })?;
    // SAFETY: every element of every slab is written by the product below before the reduce
    // reads it: each (tile, slice) unit exists (no empty slice) and writes its tile's i < m,
    // j < n entries of slab z; what a previous call left there is never read.
    let mut ws = unsafe { WorkspaceLease::take(s, len)? };
    {
        let mut out = ws.cast_mut::<u8>()?;
        // SAFETY: as above for A and B; with splits > 1 the kernel writes only the f32 slabs
        // ws[z·m·n + i·n + j] (z < splits, i < m, j < n), all inside the workspace of at least
        // splits·m·n floats (4-byte aligned: an allocation's start).
        unsafe {
            kern.launch(
                s, &cfg, map_a, map_b, a, b, &mut out, mi, ni, ki, lc, si, pi,
            )
        }?;
    }
    let reduce = T::wgx_reduce(kernels);
    let (bx, zl) = reduce_block(splits);
    let pairs = (m * n).div_ceil(2);
    let blocks = pairs
        .div_ceil(bx as usize)
        .min(sms(s) as usize * (2048 / (bx * zl)) as usize)
        .max(1) as u32;
    // With a programmatic dependency on the product (the reduce runs griddepcontrol.wait first):
    // the launch gap between the two is hidden (eager 512^2 x 16384 on an H200: 22.3 -> 21.2 us,
    // 64 x 4096 x 4096: 12.8 -> 12.0); graph replays within -2% to +2% (512^2 x 16384: 19.6
    // -> 20.0 us, 64 x 4096 x 4096: 11.1 -> 10.9; kernels/TUNING.md).
    let cfg = LaunchConfig::new(blocks, (bx, zl)).with_programmatic_dependency();
    // SAFETY: reads ws[z·m·n + e] for z < splits, e < m·n (all written above, inside the
    // workspace) and writes C[i·ldc + j] for i < m, j < n only (inside `c`); any 1-D grid, a
    // block of (bx, zl) with bx a multiple of 32 and bx·zl <= 1024 (reduce_block); the kernel
    // waits for the product (griddepcontrol.wait) before its first global access.
    unsafe { reduce.launch(s, &cfg, &ws, si, mi, ni, c, lc) }?;
    Ok(())
}
