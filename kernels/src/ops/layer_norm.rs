//! LayerNorm over the last dimension, forward and backward (`cuda/layer_norm.cu`): f32, f64,
//! f16 and bf16, statistics in [`Element::Scalar`] (f32, or f64 for f64).

use crate::dispatch;
use crate::launch::{check_len, check_matrix, elems, to_i32, to_int_dim};
use crate::{Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Rows per block of 256 threads (one warp each) in the row kernels.
const ROWS_PER_BLOCK: usize = 8;
/// The most row chunks the parameter gradients are split into.
const MAX_PARTS: usize = 256;
/// The fewest rows per chunk (below it, the partial sums cost more than they save).
const MIN_CHUNK: usize = 32;

fn row_config(rows: usize) -> LaunchConfig {
    let blocks = rows.div_ceil(ROWS_PER_BLOCK).clamp(1, 65535) as u32;
    LaunchConfig::new(blocks, 256)
}

/// One block of 256 per row (the `_block` kernels).
fn block_config(rows: usize) -> LaunchConfig {
    LaunchConfig::new(rows.clamp(1, 65535) as u32, 256)
}

/// The widest row one warp keeps in registers: forward 1024 columns (f64: 512), backward 1024
/// (f64: 256). Wider rows go to the block-per-row kernels (a row of 256 threads, in registers
/// up to 4096 columns, f64 2048), which keep the GPU's memory system busy with fewer rows.
fn warp_max_cols<T: Element>(backward: bool) -> usize {
    match (T::DTYPE, backward) {
        (crate::DType::F64, false) => 512,
        (crate::DType::F64, true) => 256,
        _ => 1024,
    }
}

/// The dynamic shared memory of `layer_norm_bwd_fused_*` for rows of `cols` (at most
/// [`warp_max_cols`]`(true)`, the rows a warp keeps in registers): two accumulators for each of
/// 8 warps, over `cols` rounded up to 32 16-byte packets (the kernel's slot layout). At most
/// 64 KiB (f32/f16/bf16 at 1024 columns), 32 KiB for f64.
fn fused_smem_bytes<T: Element>(cols: usize) -> u32 {
    let packet = 16 / std::mem::size_of::<T>();
    let row = cols.div_ceil(32 * packet) * 32 * packet;
    (2 * 8 * row * std::mem::size_of::<T::Scalar>()) as u32
}

/// `(parts, chunk)`: the row chunks of the parameter gradients' first kernel, chosen from
/// `rows` alone (so `dweight`/`dbias` are bit-identical on every run and every GPU). Every
/// chunk holds at least one row.
pub fn layer_norm_parts(rows: usize) -> (usize, usize) {
    if rows == 0 {
        return (0, 1);
    }
    let p = rows.div_ceil(MIN_CHUNK).clamp(1, MAX_PARTS);
    let chunk = rows.div_ceil(p);
    (rows.div_ceil(chunk), chunk)
}

/// The length of each of the two partial-sum workspaces [`layer_norm_bwd`] takes:
/// `parts · cols` (see [`layer_norm_parts`]).
pub fn layer_norm_workspace_len(rows: usize, cols: usize) -> Result<usize> {
    elems("layer_norm_backward", layer_norm_parts(rows).0, cols)
}

// Extents are capped at 2^30 (`to_int_dim`, `launch::MAX_INT_DIM`), because of the steps below.
// The most rows and the most columns the kernels take: their `int` row and column counters
// step by less than 2^30 (rows: `gridDim.x · 8 <= 65535 · 8`; columns: 256, or `gridDim.x · 32
// = 32 · ceil(cols / 32) <= 2^30` in the parameter-gradient kernel) from a value below this
// bound, so they stay below 2^31 and never wrap.

fn check_cols(op: &'static str, rows: usize, cols: usize) -> Result<()> {
    if rows > 0 && cols == 0 {
        return Err(Error::Invalid {
            op,
            problem: format!("{rows} rows of 0 elements: LayerNorm needs at least one column"),
        });
    }
    Ok(())
}

/// `y = (x − mean) · rstd · weight + bias` per row of the row-major `[rows, cols]` array `x`,
/// with `mean` and `rstd = 1 / sqrt(var + eps)` (biased variance, as torch) saved per row.
/// `weight` and `bias` have `cols` elements (pass ones and zeros for no affine transform).
/// One warp per row, the row in registers, up to 1024 columns (512 for f64); wider rows one
/// block of 256 per row, in registers up to 4096 columns (2048 for f64). `rows` and `cols` are
/// at most 2^30 each ([`Error::TooLarge`] otherwise).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_fwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    weight: &DeviceSlice<T>,
    bias: &DeviceSlice<T>,
    y: &mut DeviceSlice<T>,
    mean: &mut DeviceSlice<T::Scalar>,
    rstd: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
    eps: T::Scalar,
) -> Result<()> {
    const OP: &str = "layer_norm";
    let block = cols > warp_max_cols::<T>(false);
    let kernel = if block {
        dispatch::layer_norm_fwd_block::<T>(k)?
    } else {
        dispatch::layer_norm_fwd::<T>(k)?
    };
    let plan = FwdPlan::check(OP, x, weight, bias, y, mean, rstd, rows, cols)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: the kernel reads rows · cols elements of x, cols of weight and bias, writes
    // rows · cols of y and rows of mean and rstd (row r < rows, column c < cols only); every
    // length was checked by `FwdPlan::check`. rows, cols <= 2^30 (checked): the row counter
    // steps by gridDim.x · 8 <= 65535 · 8 < 2^20 from below rows and the column counters by at
    // most 256 from below cols, so no `int` counter passes 2^31 − 1 (the grid-stride loops end).
    unsafe {
        kernel.launch(
            s, &plan.cfg, x, weight, bias, y, mean, rstd, plan.r, plan.c, eps,
        )
    }?;
    Ok(())
}

/// [`layer_norm_fwd`] of the sum `x + res`, which is written to `sum` as well (the residual
/// stream of a pre-LayerNorm transformer): `sum` rounded to `T` exactly as the `add` kernel
/// rounds it and `y` computed from the rounded sum, so `sum`, `y`, `mean` and `rstd` are the
/// same bits as an `add` followed by [`layer_norm_fwd`], in one pass over the row instead of
/// three. `res` and `sum` are `[rows, cols]`, like `x`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_fwd_add<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    res: &DeviceSlice<T>,
    sum: &mut DeviceSlice<T>,
    weight: &DeviceSlice<T>,
    bias: &DeviceSlice<T>,
    y: &mut DeviceSlice<T>,
    mean: &mut DeviceSlice<T::Scalar>,
    rstd: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
    eps: T::Scalar,
) -> Result<()> {
    const OP: &str = "add_layer_norm";
    let block = cols > warp_max_cols::<T>(false);
    let kernel = if block {
        dispatch::layer_norm_fwd_add_block::<T>(k)?
    } else {
        dispatch::layer_norm_fwd_add::<T>(k)?
    };
    let plan = FwdPlan::check(OP, x, weight, bias, y, mean, rstd, rows, cols)?;
    check_matrix(OP, "res", res.len(), rows, cols)?;
    check_matrix(OP, "sum", sum.len(), rows, cols)?;
    if rows == 0 {
        return Ok(());
    }
    // SAFETY: as `layer_norm_fwd`; the kernel also reads rows · cols elements of res and writes
    // rows · cols of sum (row r < rows, column c < cols only; each thread re-reads only the sum
    // elements it wrote), both lengths checked above. `sum` and `y` are distinct `&mut` borrows,
    // so the kernel's writes never alias its inputs.
    unsafe {
        kernel.launch(
            s, &plan.cfg, x, res, sum, weight, bias, y, mean, rstd, plan.r, plan.c, eps,
        )
    }?;
    Ok(())
}

/// The checked extents and launch shape of a forward LayerNorm.
struct FwdPlan {
    cfg: LaunchConfig,
    r: i32,
    c: i32,
}

impl FwdPlan {
    #[allow(clippy::too_many_arguments)]
    fn check<T: Element>(
        op: &'static str,
        x: &DeviceSlice<T>,
        weight: &DeviceSlice<T>,
        bias: &DeviceSlice<T>,
        y: &DeviceSlice<T>,
        mean: &DeviceSlice<T::Scalar>,
        rstd: &DeviceSlice<T::Scalar>,
        rows: usize,
        cols: usize,
    ) -> Result<FwdPlan> {
        check_matrix(op, "x", x.len(), rows, cols)?;
        check_matrix(op, "y", y.len(), rows, cols)?;
        check_len(op, "weight", weight.len(), cols)?;
        check_len(op, "bias", bias.len(), cols)?;
        check_len(op, "mean", mean.len(), rows)?;
        check_len(op, "rstd", rstd.len(), rows)?;
        check_cols(op, rows, cols)?;
        let (r, c) = (to_int_dim(op, "rows", rows)?, to_int_dim(op, "cols", cols)?);
        let cfg = if cols > warp_max_cols::<T>(false) {
            block_config(rows)
        } else {
            row_config(rows)
        };
        Ok(FwdPlan { cfg, r, c })
    }
}

/// The backward pass of [`layer_norm_fwd`]: `dx`, `dweight` and `dbias` from `dy`, the input
/// `x`, `weight` and the saved `mean`, `rstd`. `dx` per row (one warp per row, two row sums);
/// `dweight = Σ_rows dy · xhat` and `dbias = Σ_rows dy` deterministically: per-chunk partial
/// sums into `partial_w`, `partial_b` (each [`layer_norm_workspace_len`] elements) — for rows a
/// warp holds in registers (up to 1024 columns, f64 256) in the same kernel as `dx`, one pass
/// over `x` and `dy`; for longer rows in a second kernel, with the same summation order — then
/// a sum over the chunks in order: bit-identical on every run. `rows` and `cols` are at
/// most 2^30 each ([`Error::TooLarge`] otherwise).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    weight: &DeviceSlice<T>,
    mean: &DeviceSlice<T::Scalar>,
    rstd: &DeviceSlice<T::Scalar>,
    dy: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
    dweight: &mut DeviceSlice<T>,
    dbias: &mut DeviceSlice<T>,
    partial_w: &mut DeviceSlice<T::Scalar>,
    partial_b: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    layer_norm_bwd_impl(
        k, s, x, weight, mean, rstd, dy, None, dx, dweight, dbias, partial_w, partial_b, rows, cols,
    )
}

/// [`layer_norm_bwd`] with a gradient `pending` (`[rows, cols]`) already owed to `x` folded
/// into `dx`: `dx = pending + (the LayerNorm's dx)`, added in the compute type and rounded
/// once. This is the residual stream's backward in a pre-LayerNorm transformer, where `x`'s
/// gradient is the sum of the stream's and the LayerNorm's: one pass instead of a `dx` kernel
/// and an `add`. `dweight` and `dbias` are exactly [`layer_norm_bwd`]'s.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd_add<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    weight: &DeviceSlice<T>,
    mean: &DeviceSlice<T::Scalar>,
    rstd: &DeviceSlice<T::Scalar>,
    dy: &DeviceSlice<T>,
    pending: &DeviceSlice<T>,
    dx: &mut DeviceSlice<T>,
    dweight: &mut DeviceSlice<T>,
    dbias: &mut DeviceSlice<T>,
    partial_w: &mut DeviceSlice<T::Scalar>,
    partial_b: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    layer_norm_bwd_impl(
        k,
        s,
        x,
        weight,
        mean,
        rstd,
        dy,
        Some(pending),
        dx,
        dweight,
        dbias,
        partial_w,
        partial_b,
        rows,
        cols,
    )
}

#[allow(clippy::too_many_arguments)]
fn layer_norm_bwd_impl<T: Element>(
    k: &Kernels,
    s: &Stream,
    x: &DeviceSlice<T>,
    weight: &DeviceSlice<T>,
    mean: &DeviceSlice<T::Scalar>,
    rstd: &DeviceSlice<T::Scalar>,
    dy: &DeviceSlice<T>,
    pending: Option<&DeviceSlice<T>>,
    dx: &mut DeviceSlice<T>,
    dweight: &mut DeviceSlice<T>,
    dbias: &mut DeviceSlice<T>,
    partial_w: &mut DeviceSlice<T::Scalar>,
    partial_b: &mut DeviceSlice<T::Scalar>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    const OP: &str = "layer_norm_backward";
    // Rows a warp holds: one pass (layer_norm_bwd_fused). Longer rows: the block-per-row dx
    // kernel, then the parameter partials (layer_norm_bwd_params), summed in the same order.
    let block = cols > warp_max_cols::<T>(true);
    let kreduce = dispatch::layer_norm_bwd_reduce::<T>(k)?;
    check_matrix(OP, "x", x.len(), rows, cols)?;
    check_matrix(OP, "dy", dy.len(), rows, cols)?;
    check_matrix(OP, "dx", dx.len(), rows, cols)?;
    if let Some(p) = pending {
        check_matrix(OP, "pending", p.len(), rows, cols)?;
    }
    check_len(OP, "weight", weight.len(), cols)?;
    check_len(OP, "dweight", dweight.len(), cols)?;
    check_len(OP, "dbias", dbias.len(), cols)?;
    check_len(OP, "mean", mean.len(), rows)?;
    check_len(OP, "rstd", rstd.len(), rows)?;
    let ws = layer_norm_workspace_len(rows, cols)?;
    check_len(OP, "partial_w", partial_w.len(), ws)?;
    check_len(OP, "partial_b", partial_b.len(), ws)?;
    check_cols(OP, rows, cols)?;
    let (r, c) = (to_int_dim(OP, "rows", rows)?, to_int_dim(OP, "cols", cols)?);
    if cols == 0 {
        return Ok(());
    }
    let (parts, chunk) = layer_norm_parts(rows);
    // Without a pending gradient the kernels do not read `res` (add_res = 0): dy stands in.
    let (res, add_res) = match pending {
        Some(p) => (p, 1),
        None => (dy, 0),
    };
    if rows > 0 && !block {
        // dx and the partials in one pass over x and dy (the same bits as the two kernels
        // below: layer_norm.cu's layer_norm_bwd_fused says why).
        let kfused = dispatch::layer_norm_bwd_fused::<T>(k)?;
        let smem = fused_smem_bytes::<T>(cols);
        crate::launch::raise_smem(kfused.function(), smem)?;
        let cfg = LaunchConfig::new(parts as u32, 256).with_shared_mem(smem);
        // SAFETY: block 256 as the kernel requires, with the dynamic shared memory it takes
        // for `cols` (fused_smem_bytes, the limit raised above where needed: the kernel's
        // accumulator row is `cols` rounded up to 32 packets on its cached path and `cols`
        // otherwise, never more than fused_smem_bytes' row, whichever path it takes); rows · cols
        // elements of x, dy, dx (and of res when add_res = 1), cols of weight, rows of mean
        // and rstd, all checked above; chunk p covers rows [p · chunk, min((p + 1) · chunk,
        // rows)) and parts · chunk >= rows, so every written partial index p · cols + c <
        // parts · cols = ws, the checked workspace length. rows, cols <= 2^30 (checked): the
        // row counter steps by 8 from below rows, the chunk counter by gridDim.x = parts <=
        // 256, the column counter by 256. dx and the partials are `&mut` borrows: they alias
        // no input.
        unsafe {
            kfused.launch(
                s,
                &cfg,
                x,
                weight,
                mean,
                rstd,
                dy,
                res,
                add_res,
                dx,
                partial_w,
                partial_b,
                r,
                c,
                to_i32(OP, "chunk", chunk)?,
            )
        }?;
    } else if rows > 0 {
        let kdx = dispatch::layer_norm_bwd_dx_block::<T>(k)?;
        let kparams = dispatch::layer_norm_bwd_params::<T>(k)?;
        // SAFETY: block 256 (one block per row, any grid); rows · cols elements of x, dy, dx
        // (and of res when add_res = 1), cols of weight, rows of mean and rstd, all checked
        // above; the kernel touches row r < rows, column c < cols only. rows, cols <= 2^30
        // (checked), so its `int` counters (steps < 2^20) stay below 2^31, as forward. dx is a
        // `&mut` borrow: it aliases no input.
        unsafe {
            kdx.launch(
                s,
                &block_config(rows),
                x,
                weight,
                mean,
                rstd,
                dy,
                res,
                add_res,
                dx,
                r,
                c,
            )
        }?;
        // The kernel's packet path (16-byte loads of N elements) where the buffers allow it:
        // a block tile of 32 · N columns, else 32 (its rule, mirrored here for the grid).
        let n = 16 / std::mem::size_of::<T>();
        let aligned = |p: u64| p % 16 == 0;
        let vec = cols % n == 0 && aligned(x.as_raw_ptr()) && aligned(dy.as_raw_ptr());
        let tile = if vec { 32 * n } else { 32 };
        let grid = (cols.div_ceil(tile) as u32, parts as u32, 1);
        let cfg = LaunchConfig::new(grid, (32, 8, 1));
        // SAFETY: block (32, 8) as the kernel requires (any gridDim.x: its column tiles are a
        // grid-stride loop); chunk p covers rows
        // [p · chunk, min((p + 1) · chunk, rows)), and parts · chunk >= rows, so every written
        // partial index p · cols + c < parts · cols = ws, the checked workspace length. The
        // `int` counters stay below 2^31: the column tile ct < cols <= 2^30 steps by
        // gridDim.x · 32 = 32 · ceil(cols / 32) <= 2^30, the row r < rows <= 2^30 by 8 and the
        // chunk p < parts <= 256 by gridDim.y = parts.
        unsafe {
            kparams.launch(
                s,
                &cfg,
                x,
                mean,
                rstd,
                dy,
                partial_w,
                partial_b,
                r,
                c,
                to_i32(OP, "chunk", chunk)?,
            )
        }?;
    }
    let grid = cols.div_ceil(32).clamp(1, 65535) as u32;
    // SAFETY: block (32, 16) as the kernel requires; reads parts · cols partials (the checked
    // workspace), writes cols elements of dweight and dbias (grid-stride over column tiles of
    // 32, c < cols); parts = 0 writes zeros.
    unsafe {
        kreduce.launch(
            s,
            &LaunchConfig::new(grid, (32, 16, 1)),
            &*partial_w,
            &*partial_b,
            dweight,
            dbias,
            to_i32(OP, "parts", parts)?,
            c,
        )
    }?;
    Ok(())
}
