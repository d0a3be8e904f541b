//! Launch-configuration and argument-check helpers shared by the ops.

use crate::{Error, Result};
use cuda_stack_driver::Stream;

/// The block size most kernels are designed for.
pub(crate) const BLOCK: u32 = 256;

/// Streaming multiprocessors of the stream's device (at least 1).
/// Raises `f`'s dynamic shared memory limit to `bytes` when it is below (a no-op after the first
/// launch; needed above 48 KiB). Every launch with a large shared-memory request goes through here.
pub(crate) fn raise_smem(f: &cuda_stack_driver::Function, bytes: u32) -> Result<()> {
    if f.limits().max_dynamic_shared_bytes < bytes {
        f.set_max_dynamic_shared_mem(bytes)?;
    }
    Ok(())
}

pub(crate) fn sms(s: &Stream) -> u64 {
    u64::from(s.context().limits().sm_count.max(1))
}

/// `min(ceil(work / per_block), cap)` blocks, at least 1 (a grid of 0 is an invalid launch).
pub(crate) fn grid(work: u64, per_block: u64, cap: u64) -> u32 {
    work.div_ceil(per_block.max(1))
        .min(cap)
        .clamp(1, i32::MAX as u64) as u32
}

/// One 16-byte packet per thread: `ceil(n / (256 · 16 / size_of::<T>()))` blocks of 256 — the
/// grid that covers the whole array in one step of the kernels' grid-stride loops. Measured by
/// `kernel_lab` on an H200 (kernels/TUNING.md): a full grid with one packet per thread moves
/// 3–5% more bytes per second than a grid capped at a few blocks per SM looping over the array.
pub(crate) fn packet_grid<T>(n: usize) -> u32 {
    let per_thread = (16 / std::mem::size_of::<T>().max(1)).max(1) as u64;
    grid(n as u64, BLOCK as u64 * per_thread, i32::MAX as u64)
}

/// `ceil(a / b)` as a grid dimension (callers keep it within the device limit or let launch
/// validation report it).
pub(crate) fn blocks(a: usize, b: usize) -> u32 {
    a.div_ceil(b).min(u32::MAX as usize) as u32
}

/// `v` as the `int` a kernel takes.
pub(crate) fn to_i32(op: &'static str, what: &'static str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::TooLarge {
        op,
        what,
        value: v as u128,
        max: i32::MAX as u128,
    })
}

/// The largest extent the kernels whose `int` loop counters step by less than 2^30 take (the
/// transformer ops: LayerNorm, the classifier, embeddings): started below this bound, such a
/// counter stays below 2^31 and never wraps. Each op's docs say why its steps are that small.
pub(crate) const MAX_INT_DIM: usize = 1 << 30;

/// `v` as the `int` such a kernel takes, or [`Error::TooLarge`] above [`MAX_INT_DIM`].
pub(crate) fn to_int_dim(op: &'static str, what: &'static str, v: usize) -> Result<i32> {
    if v > MAX_INT_DIM {
        return Err(Error::TooLarge {
            op,
            what,
            value: v as u128,
            max: MAX_INT_DIM as u128,
        });
    }
    to_i32(op, what, v)
}

/// `len == expected`, else [`Error::Length`].
pub(crate) fn check_len(
    op: &'static str,
    what: &'static str,
    found: usize,
    expected: usize,
) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(Error::Length {
            op,
            what,
            expected,
            found,
        })
    }
}

/// `rows * cols`, or [`Error::TooLarge`] when it overflows.
pub(crate) fn elems(op: &'static str, rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols).ok_or_else(|| Error::TooLarge {
        op,
        what: "rows * cols",
        value: rows as u128 * cols as u128,
        max: usize::MAX as u128,
    })
}

/// A dense row-major `[rows, cols]` buffer must have exactly `rows * cols` elements.
pub(crate) fn check_matrix(
    op: &'static str,
    what: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let need = elems(op, rows, cols)?;
    if len == need {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            what,
            expected: format!("a [{rows}, {cols}] matrix ({need} elements)"),
            found: format!("{len} elements"),
        })
    }
}

/// Elements a row-major `[rows, cols]` matrix with row stride `ld` spans (0 when empty).
fn span(rows: usize, cols: usize, ld: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        Some(0)
    } else {
        (rows - 1).checked_mul(ld)?.checked_add(cols)
    }
}

/// Checks one operand of `op`: `ld >= cols` and the slice spans the stored matrix.
pub(crate) fn check_operand(
    op: &'static str,
    what: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    if ld < cols {
        return Err(Error::Invalid {
            op,
            problem: format!(
                "leading dimension of `{what}` is {ld}, but its stored rows have {cols} elements \
                 (the leading dimension must be >= {cols})"
            ),
        });
    }
    let need = span(rows, cols, ld).ok_or_else(|| Error::TooLarge {
        op,
        what,
        value: rows as u128 * ld as u128,
        max: usize::MAX as u128,
    })?;
    if len < need {
        return Err(Error::Shape {
            op,
            what,
            expected: format!(
                "a stored [{rows}, {cols}] matrix with row stride {ld} ({need} elements)"
            ),
            found: format!("{len} elements"),
        });
    }
    Ok(())
}
