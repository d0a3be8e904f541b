//! Reductions along one dimension: sum or max of a contiguous `[outer, size, inner]` array over
//! its middle dimension, giving `[outer, inner]` (a tensor's `sum(dim)` / `amax(dim)` with
//! `outer` the product of the dimensions before `dim` and `inner` of those after it).
//!
//! The kernel is picked by shape, here and nowhere else (measurements: `kernels/TUNING.md`):
//! - `inner == 1` (the last dimension), rows shorter than [`ROW_SPLIT_MIN_COLS`]: one warp per
//!   row (`reduce_rows_*`), 16-byte loads;
//! - `inner == 1`, longer rows: each row split into `P` column chunks, one block per chunk
//!   (`reduce_rows_part_*`, 4 loads in flight per thread), `P` chosen so that a few rows still
//!   fill every SM; a second launch reduces the `[rows, P]` partials with the warp kernel;
//! - `inner > 1`: columns (`reduce_cols_*`): 32 adjacent columns per block, 8 thread rows, 16
//!   loads in flight per thread, the reduced dimension split into `P` parts when
//!   `outer · ceil(inner / 32)` blocks cannot fill the GPU ([`col_parts`]: at least four waves
//!   of resident blocks), then one more launch over the `[outer, P, inner]` partials; when
//!   `inner` is a multiple of 16 bytes, `P` is [`col16_parts`] and, where `x` is 16-byte
//!   aligned, the first pass is `reduce_cols16_*` (a 16-byte load of adjacent columns per lane,
//!   the same sums bit for bit: the plan depends on the shape, not on the alignment, so an
//!   aligned and an unaligned copy of a tensor sum alike); a reduced dimension of at most
//!   [`THIN_MAX_SIZE`] uses `reduce_cols_thin_*` instead (4 columns per thread, all their rows'
//!   loads in flight).
//!
//! All without atomics: the same input, shape and GPU give bit-identical results.

use crate::dispatch::{self, Part, Rows};
use crate::launch::{blocks, check_len, sms, to_i32, BLOCK};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// Rows at least this long are split across blocks (the second choice of [`sum_dim`]).
pub const ROW_SPLIT_MIN_COLS: usize = 1024;

/// Reduced dimensions up to this long use the thin column launch (one thread per column).
pub const THIN_MAX_SIZE: usize = 32;

/// Inputs smaller than this (64 KiB of f32) are not split: a block per row reads them faster
/// than a second launch and a workspace cost.
pub const SPLIT_MIN_ELEMS: usize = 1 << 14;

/// The most blocks in a grid's y and z dimensions.
const GRID_YZ_MAX: usize = 65_535;

/// Blocks that keep every SM busy: 8 blocks of 256 threads per SM.
fn fill(sm_count: u64) -> usize {
    8 * sm_count.max(1) as usize
}

/// How many column chunks each of `rows` rows of `cols` elements is split into (1: no split).
pub fn row_parts(rows: usize, cols: usize, sm_count: u32) -> usize {
    if cols < ROW_SPLIT_MIN_COLS || rows == 0 || rows.saturating_mul(cols) < SPLIT_MIN_ELEMS {
        return 1;
    }
    let want = fill(u64::from(sm_count)).div_ceil(rows);
    if want <= 2 {
        // Rows enough for half the GPU's block slots: one block per row, no second launch.
        return 1;
    }
    want.min(cols.div_ceil(2048)).clamp(1, GRID_YZ_MAX)
}

/// Blocks of `reduce_cols_*` (block (32, 8)) resident on one SM: 39 registers for f32 on sm_90
/// (`kernels/KERNELS_RESOURCES.md`; `__launch_bounds__(256, 4)` caps every dtype at 64) → 40 ×
/// 256 per block → 6 blocks in 64K registers.
pub const COLS_BLOCKS_PER_SM: usize = 6;

/// How many parts the reduced dimension of `size` is split into for `outer × inner` columns
/// (`reduce_cols_*`, `inner` not a multiple of 16 bytes): none when the `outer ·
/// ceil(inner / 32)` column blocks fill the [`COLS_BLOCKS_PER_SM`] resident slots of every SM
/// at least once, else enough parts for at least four waves of them (the last, partial wave a
/// small share of the time), at most one per 64 rows. Measured on an H200 (f32, ratios to
/// `torch.sum(x, 0)`, kernels/TUNING.md issue 34 item 4): 16384 × 8191 (256 column blocks)
/// 13 parts 1.010 (one wave, 3 parts: 0.912; the earlier plan's 5 parts with the earlier kernel:
/// 0.885); 1024 × 50257 (1571 blocks, two waves) unsplit 1.041 (four waves, 3 parts: 0.972);
/// 4096 × 33: 64 parts 1.58.
pub fn col_parts(outer: usize, size: usize, inner: usize, sm_count: u32) -> usize {
    let col_blocks = outer.saturating_mul(inner.div_ceil(32)).max(1);
    let slots = COLS_BLOCKS_PER_SM * sm_count.max(1) as usize;
    if col_blocks >= slots {
        return 1;
    }
    let want = (4 * slots).div_ceil(col_blocks);
    want.min(size.div_ceil(64)).clamp(1, GRID_YZ_MAX)
}

/// How many parts the reduced dimension of `size` is split into for `outer × inner` columns when
/// `inner` is a multiple of 16 bytes (`reduce_cols16_*` on aligned rows, `reduce_cols_*` with the
/// same parts on unaligned ones): enough blocks of `reduce_cols16_*` — `32 · packet` columns
/// each, `packet` the elements of a 16-byte load (4 for f32, 8 for f16/bf16, 2 for f64) — for
/// 8 per SM, at most one part per 64 rows. Counting its blocks as 32 columns wide (as before
/// 2026-11-28) launched a bf16 bias gradient of 16384 × 768 as 132 blocks, one per SM: about
/// half the H200's bandwidth.
pub fn col16_parts(outer: usize, size: usize, inner: usize, packet: usize, sm_count: u32) -> usize {
    let col_blocks = outer
        .saturating_mul(inner.div_ceil(32 * packet.max(1)))
        .max(1);
    let want = fill(u64::from(sm_count)).div_ceil(col_blocks);
    want.min(size.div_ceil(64)).clamp(1, GRID_YZ_MAX)
}

/// The kernels one reduction needs: the first pass over `T` and the finishing passes over the
/// accumulator type `A` (f32 for f16/bf16).
struct Plan<'k, T: DeviceRepr, A: DeviceRepr> {
    rows: &'k Rows<T, A>,
    rows_part: &'k Part<T, A>,
    cols: &'k Part<T, A>,
    cols16: &'k Part<T, A>,
    cols_thin: &'k Rows<T, A>,
    rows_acc: &'k Rows<A, A>,
    cols_acc: &'k Part<A, A>,
}

/// `out[o][i] = Σ_s x[o][s][i]` of a contiguous `[outer, size, inner]` `x`; `out` holds
/// `outer · inner` values in [`Element::SumAcc`] (f32 for f16/bf16). An empty `size` gives 0.
/// f32, f64, f16, bf16.
pub fn sum_dim<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::SumAcc>,
    (outer, size, inner): (usize, usize, usize),
) -> Result<()> {
    let plan = Plan {
        rows: dispatch::rows_sum::<T>(k)?,
        rows_part: dispatch::rows_part_sum::<T>(k)?,
        cols: dispatch::cols_sum::<T>(k)?,
        cols16: dispatch::cols16_sum::<T>(k)?,
        cols_thin: dispatch::cols_thin_sum::<T>(k)?,
        rows_acc: dispatch::acc_rows_sum::<T>(k)?,
        cols_acc: dispatch::acc_cols_sum::<T>(k)?,
    };
    reduce_dim(
        "sum over a dimension",
        &plan,
        s,
        x,
        out,
        (outer, size, inner),
    )
}

/// `out[o][i] = max_s x[o][s][i]` of a contiguous `[outer, size, inner]` `x`, in
/// [`Element::Scalar`] (f32 for f16/bf16); NaN propagates; an empty `size` gives -inf.
/// f32, f64, f16, bf16.
pub fn max_dim<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::Scalar>,
    (outer, size, inner): (usize, usize, usize),
) -> Result<()> {
    let plan = Plan {
        rows: dispatch::rows_max::<T>(k)?,
        rows_part: dispatch::rows_part_max::<T>(k)?,
        cols: dispatch::cols_max::<T>(k)?,
        cols16: dispatch::cols16_max::<T>(k)?,
        cols_thin: dispatch::cols_thin_max::<T>(k)?,
        rows_acc: dispatch::acc_rows_max::<T>(k)?,
        cols_acc: dispatch::acc_cols_max::<T>(k)?,
    };
    reduce_dim(
        "max over a dimension",
        &plan,
        s,
        x,
        out,
        (outer, size, inner),
    )
}

/// `out[r] = Σ_c x[r][c]` of a row-major `[rows, cols]` array ([`sum_dim`] of the last
/// dimension).
pub fn rows_sum<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::SumAcc>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    sum_dim(k, s, x, out, (rows, cols, 1))
}

/// `out[r] = max_c x[r][c]` of a row-major `[rows, cols]` array ([`max_dim`] of the last
/// dimension).
pub fn rows_max<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    max_dim(k, s, x, out, (rows, cols, 1))
}

/// `out[c] = Σ_r x[r][c]` of a row-major `[rows, cols]` array ([`sum_dim`] of the first).
pub fn cols_sum<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::SumAcc>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    sum_dim(k, s, x, out, (1, rows, cols))
}

fn reduce_dim<T: DeviceRepr, A: DeviceRepr>(
    op: &'static str,
    plan: &Plan<'_, T, A>,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<A>,
    (outer, size, inner): (usize, usize, usize),
) -> Result<()> {
    let too_large = |what: &'static str| Error::TooLarge {
        op,
        what,
        value: outer as u128 * size as u128 * inner as u128,
        max: usize::MAX as u128,
    };
    let n_out = outer
        .checked_mul(inner)
        .ok_or_else(|| too_large("outer × inner"))?;
    let n_in = n_out
        .checked_mul(size)
        .ok_or_else(|| too_large("outer × size × inner"))?;
    check_len(op, "x", x.len(), n_in)?;
    check_len(op, "out", out.len(), n_out)?;
    if n_out == 0 {
        return Ok(());
    }
    let sm_count = sms(s) as u32;
    if inner == 1 {
        rows(op, plan, s, x, out, n_out, size, sm_count)
    } else {
        cols(op, plan, s, x, out, (outer, size, inner), sm_count)
    }
}

/// The last dimension: warp per row, or split rows and a second pass.
#[allow(clippy::too_many_arguments)]
fn rows<T: DeviceRepr, A: DeviceRepr>(
    op: &'static str,
    plan: &Plan<'_, T, A>,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<A>,
    rows: usize,
    cols: usize,
    sm_count: u32,
) -> Result<()> {
    let (r, c) = (to_i32(op, "rows", rows)?, to_i32(op, "columns", cols)?);
    let warp_cfg = |rows: usize| LaunchConfig::new(blocks(rows, (BLOCK / 32) as usize), BLOCK);
    let parts = row_parts(rows, cols, sm_count);
    if cols < ROW_SPLIT_MIN_COLS || rows > GRID_YZ_MAX {
        // SAFETY: reduce_rows_* reads x[r·cols + c] for r < rows, c < cols (x holds rows·cols,
        // checked) and writes out[r] (out holds rows, checked).
        unsafe { plan.rows.launch(s, &warp_cfg(rows), x, out, r, c) }?;
        return Ok(());
    }
    let chunk = cols.div_ceil(parts).next_multiple_of(8);
    let parts = cols.div_ceil(chunk).max(1);
    let ch = to_i32(op, "chunk", chunk)?;
    let cfg = LaunchConfig::new((parts as u32, rows as u32), BLOCK);
    if parts == 1 {
        // SAFETY: block (0, r) reads x[r·cols + c] for c < cols and writes out[r·1 + 0]; x holds
        // rows·cols and out rows values (checked); the grid's y is rows (<= 65535, checked).
        unsafe { plan.rows_part.launch(s, &cfg, x, out, r, c, ch) }?;
        return Ok(());
    }
    // SAFETY: filled by the first launch (every (r, p) block writes partial[r·P + p]) before
    // the second reads it, in stream order.
    let mut partial = unsafe { s.alloc::<A>(rows * parts)? };
    // SAFETY: block (p, r) reads x[r·cols + c] for c in its chunk ∩ [0, cols) and writes
    // partial[r·P + p] < rows·P = partial.len().
    unsafe { plan.rows_part.launch(s, &cfg, x, &mut partial, r, c, ch) }?;
    let p = to_i32(op, "parts", parts)?;
    // SAFETY: reads the [rows, P] partials (rows·P values) and writes out[r] for r < rows.
    unsafe {
        plan.rows_acc
            .launch(s, &warp_cfg(rows), &partial, out, r, p)
    }?;
    Ok(())
}

/// A middle dimension: columns, split along the reduced dimension when the columns are few.
fn cols<T: DeviceRepr, A: DeviceRepr>(
    op: &'static str,
    plan: &Plan<'_, T, A>,
    s: &Stream,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<A>,
    (outer, size, inner): (usize, usize, usize),
    sm_count: u32,
) -> Result<()> {
    let (sz, inn) = (to_i32(op, "size", size)?, to_i32(op, "inner", inner)?);
    if size <= THIN_MAX_SIZE {
        // A short reduced dimension: `reduce_cols_thin_*`, 4 columns per thread, one pass.
        let mut o = 0;
        while o < outer {
            let slab = (outer - o).min(GRID_YZ_MAX);
            let xs = x.slice(o * size * inner..(o + slab) * size * inner)?;
            let mut os = out.slice_mut(o * inner..(o + slab) * inner)?;
            let cfg = LaunchConfig::new((blocks(inner, 1024), 1, slab as u32), 256);
            // SAFETY: block (bx, 0, z) reads xs[z·size·inner + r·inner + c] for r < size,
            // c < inner (xs holds slab·size·inner) and writes os[z·inner + c] (os holds
            // slab·inner); each thread's 4 columns are guarded by c < inner.
            unsafe { plan.cols_thin.launch(s, &cfg, &xs, &mut os, sz, inn) }?;
            o += slab;
        }
        return Ok(());
    }
    let gx = blocks(inner, 32);
    // 16-byte rows: one 16-byte load of V adjacent columns per lane (every slab starts at a
    // multiple of size·inner elements, so a 16-byte aligned x keeps every row aligned).
    let v = 16 / std::mem::size_of::<T>();
    let rows16 = inner % v == 0;
    let wide = rows16 && x.as_raw_ptr() % 16 == 0;
    let (first, gx_first) = if wide {
        (plan.cols16, blocks(inner, 32 * v))
    } else {
        (plan.cols, gx)
    };
    // By shape alone: an unaligned x of a 16-byte shape sums in reduce_cols16's parts.
    let parts = if rows16 {
        col16_parts(outer, size, inner, v, sm_count)
    } else {
        col_parts(outer, size, inner, sm_count)
    };
    let chunk = size.div_ceil(parts).max(1);
    let parts = size.div_ceil(chunk).max(1);
    let ch = to_i32(op, "chunk", chunk)?;
    let partial_len = outer
        .checked_mul(parts)
        .and_then(|v| v.checked_mul(inner))
        .ok_or_else(|| Error::TooLarge {
            op,
            what: "partials",
            value: outer as u128 * parts as u128 * inner as u128,
            max: usize::MAX as u128,
        })?;
    // SAFETY (both launches below): fully written by the first pass before the second reads it.
    let mut partial = if parts > 1 {
        Some(unsafe { s.alloc::<A>(partial_len)? })
    } else {
        None
    };
    // Slabs of at most 65535 outer slices (the grid's z limit).
    let mut o = 0;
    while o < outer {
        let slab = (outer - o).min(GRID_YZ_MAX);
        let xs = x.slice(o * size * inner..(o + slab) * size * inner)?;
        let cfg = LaunchConfig::new((gx_first, parts as u32, slab as u32), (32, 8));
        match partial.as_mut() {
            None => {
                let mut os = out.slice_mut(o * inner..(o + slab) * inner)?;
                // SAFETY: block (bx, p = 0, z) reads xs[z·size·inner + r·inner + c] for
                // r < size, c < inner (xs holds slab·size·inner) and writes os[z·inner + c]
                // (os holds slab·inner); reduce_cols16 reads 16-byte packs of V whole columns
                // (inner % V == 0) from 16-byte aligned rows (checked in `wide`).
                unsafe { first.launch(s, &cfg, &xs, &mut os, sz, inn, ch) }?;
            }
            Some(partial) => {
                let mut ps = partial.slice_mut(o * parts * inner..(o + slab) * parts * inner)?;
                // SAFETY: as above, writing ps[(z·P + p)·inner + c] < slab·P·inner = ps.len().
                unsafe { first.launch(s, &cfg, &xs, &mut ps, sz, inn, ch) }?;
                let mut os = out.slice_mut(o * inner..(o + slab) * inner)?;
                let p = to_i32(op, "parts", parts)?;
                let fin = LaunchConfig::new((gx, 1, slab as u32), (32, 8));
                // SAFETY: reads the [slab, P, inner] partials and writes os[z·inner + c].
                unsafe { plan.cols_acc.launch(s, &fin, &ps, &mut os, p, inn, p) }?;
            }
        }
        o += slab;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_rows_split_until_the_gpu_is_full() {
        assert_eq!(row_parts(4096, 1000, 132), 1);
        assert_eq!(row_parts(4096, 4096, 132), 1);
        assert_eq!(row_parts(7, 1_000_003, 132), 151);
        assert_eq!(row_parts(1, 50_257, 132), 25);
        assert_eq!(row_parts(0, 50_257, 132), 1);
        assert_eq!(row_parts(1, 4096, 132), 1);
    }

    #[test]
    fn few_columns_split_the_reduced_dimension() {
        // 256 column blocks for 792 slots: 4 waves need 13 parts.
        assert_eq!(col_parts(1, 16_384, 8191, 132), 13);
        // 1571 column blocks: two waves unsplit.
        assert_eq!(col_parts(1, 1024, 50_257, 132), 1);
        assert_eq!(col_parts(1, 4096, 33, 132), 64);
        assert_eq!(col_parts(1, 100_000, 33, 132), 1563);
        assert_eq!(col_parts(3, 700, 65, 132), 11);
        assert_eq!(col_parts(1, 8192, 65_537, 132), 1);
        assert_eq!(col_parts(1, 0, 33, 132), 1);
        assert_eq!(col_parts(1, 4096, 33, 0), 12);
    }

    #[test]
    fn sixteen_byte_rows_keep_the_fill_plan() {
        // f32 (4 a packet): 32 column blocks of 128 for 4096 columns.
        assert_eq!(col16_parts(1, 4096, 4096, 4, 132), 33);
        assert_eq!(col16_parts(1, 65_536, 128, 4, 132), 1024);
        assert_eq!(col16_parts(1, 8192, 65_536, 4, 132), 3);
        assert_eq!(col16_parts(1, 4096, 1, 4, 132), 64);
        assert_eq!(col16_parts(1, 100_000, 33, 4, 132), 1056);
        assert_eq!(col16_parts(1, 0, 33, 4, 132), 1);
        // bf16 (8 a packet): GPT-2's bias gradients fill the GPU.
        assert_eq!(col16_parts(1, 16_384, 768, 8, 132), 256);
        assert_eq!(col16_parts(1, 16_384, 3072, 8, 132), 88);
    }
}
