//! Reductions: full sum / max / mean to one device value (two launches, no host round trip),
//! (reductions along one dimension are in `reduce_dim.rs`).

use crate::launch::{check_len, grid, sms, BLOCK};
use crate::{dispatch, Element, Error, Kernels, Result};
use cuda_stack_driver::{DeviceRepr, DeviceSlice, LaunchConfig, Stream};

/// Which first-pass kernel a full reduction uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceAlgo {
    /// `reduce_sum_tree_<dt>`: the shared-memory tree as taught, one element per thread and one
    /// partial per 256 elements (f32 and f64 sums and means only).
    Tree,
    /// `reduce_{sum,max}_fast_<dt>`: grid-stride, 16-byte loads, warp shuffles, one partial per
    /// block with `min(ceil(n / 4096), 4 × SMs)` blocks.
    Fast,
}

/// Sums and maxima of at most this many elements ([`ReduceAlgo::Fast`]) run as one block of
/// 1024 threads writing the result directly: one launch and no workspace, where the two-pass
/// reduction's allocation and second launch cost more host time than the GPU spends
/// (kernels/TUNING.md, round 3).
pub const SINGLE_BLOCK_MAX: usize = 1 << 17;

/// How many partials (first-pass blocks) a reduction of `n` elements uses on a device with
/// `sm_count` SMs (1 for the single-block path of sums and maxima up to [`SINGLE_BLOCK_MAX`]).
/// Results are bit-identical run to run for the same `(algo, n, sm_count)`.
pub fn reduce_partials(algo: ReduceAlgo, n: usize, sm_count: u32) -> u32 {
    match algo {
        ReduceAlgo::Tree => grid(n as u64, BLOCK as u64, u32::MAX as u64),
        ReduceAlgo::Fast if n <= SINGLE_BLOCK_MAX => 1,
        ReduceAlgo::Fast => grid(n as u64, 4096, 4 * u64::from(sm_count.max(1))),
    }
}

/// The single-block path: `first` (a fast first pass) as one block of 1024 threads, whose one
/// partial is the result, written to `out[0]`.
fn single_block<T: Element, A: DeviceRepr>(
    s: &Stream,
    first: &dispatch::Partial<T, A>,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<A>,
) -> Result<()> {
    // SAFETY: the fast first pass reads x[i] for i < n = x.len() (grid-stride) and block 0
    // writes only partial[0] = out[0] (out.len() == 1, checked by the caller); its block
    // reduction takes any multiple of 32 threads up to 1024.
    unsafe { first.launch(s, &LaunchConfig::new(1, 1024), x, out, x.len() as u64) }?;
    Ok(())
}

fn check_out<A>(op: &'static str, out: &DeviceSlice<A>) -> Result<()> {
    check_len(op, "out", out.len(), 1)
}

/// Threads per first-pass block: the fast path's single block (up to [`SINGLE_BLOCK_MAX`]) has
/// 1024, every other first pass 256.
fn first_threads(algo: ReduceAlgo, n: usize) -> u32 {
    if algo == ReduceAlgo::Fast && n <= SINGLE_BLOCK_MAX {
        1024
    } else {
        BLOCK
    }
}

/// First pass (`threads` per block) into a temporary partial buffer allocated on `s`, then
/// `finalize` on it.
fn two_pass<T: Element, A: DeviceRepr>(
    s: &Stream,
    first: &dispatch::Partial<T, A>,
    x: &DeviceSlice<T>,
    parts: u32,
    threads: u32,
    finalize: impl FnOnce(&DeviceSlice<A>) -> Result<()>,
) -> Result<()> {
    // SAFETY: the first pass runs `parts` blocks and block `b` writes `partial[b]`, so every
    // element is written before `finalize` reads it; nothing else reads it.
    let mut partial = unsafe { s.alloc::<A>(parts as usize)? };
    // SAFETY: the first pass reads x[i] for i < n = x.len() and block b writes only
    // partial[b] (b < parts = partial.len()); the final pass reads parts partials and writes
    // out[0] (out.len() == 1 checked); row kernels guard r < rows, c < cols with x checked as
    // [rows, cols] and out as [rows].
    unsafe {
        first.launch(
            s,
            &LaunchConfig::new(parts, threads),
            x,
            &mut partial,
            x.len() as u64,
        )
    }?;
    finalize(&partial)
}

fn first_pass<T: Element>(
    k: &Kernels,
    algo: ReduceAlgo,
) -> Result<&dispatch::Partial<T, T::SumAcc>> {
    match algo {
        ReduceAlgo::Tree => dispatch::sum_tree::<T>(k),
        ReduceAlgo::Fast => dispatch::sum_fast::<T>(k),
    }
}

/// `out[0] = Σ x` in the accumulator type ([`Element::SumAcc`]: i64 for i32, f32 for f16/bf16);
/// 0 for an empty `x`. `out` must have exactly one element. Deterministic for a fixed device.
pub fn sum<T: Element>(
    k: &Kernels,
    s: &Stream,
    algo: ReduceAlgo,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::SumAcc>,
) -> Result<()> {
    let first = first_pass::<T>(k, algo)?;
    let fin = dispatch::sum_finalize::<T>(k)?;
    check_out("sum", out)?;
    if algo == ReduceAlgo::Fast && x.len() <= SINGLE_BLOCK_MAX {
        return single_block(s, first, x, out);
    }
    let parts = reduce_partials(algo, x.len(), sms(s) as u32);
    two_pass(s, first, x, parts, first_threads(algo, x.len()), |p| {
        // SAFETY: the first pass reads x[i] for i < n = x.len() and block b writes only
        // partial[b] (b < parts = partial.len()); the final pass reads parts partials and writes
        // out[0] (out.len() == 1 checked); row kernels guard r < rows, c < cols with x checked as
        // [rows, cols] and out as [rows].
        Ok(unsafe { fin.launch(s, &LaunchConfig::new(1, BLOCK), p, out, parts) }?)
    })
}

/// `out[0] = max x` in [`Element::Scalar`] (f32 for f16/bf16); NaN if any element is NaN,
/// -inf (`i32::MIN`) for an empty `x`. Only [`ReduceAlgo::Fast`] exists for max.
pub fn max<T: Element>(
    k: &Kernels,
    s: &Stream,
    algo: ReduceAlgo,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::Scalar>,
) -> Result<()> {
    if algo == ReduceAlgo::Tree {
        return Err(Error::Unsupported {
            op: "max (tree)",
            dtype: T::DTYPE,
            why: "the tree reduction is sum-only; use ReduceAlgo::Fast",
        });
    }
    let first = dispatch::max_fast::<T>(k)?;
    let fin = dispatch::max_finalize::<T>(k)?;
    check_out("max", out)?;
    if x.len() <= SINGLE_BLOCK_MAX {
        return single_block(s, first, x, out);
    }
    let parts = reduce_partials(algo, x.len(), sms(s) as u32);
    two_pass(s, first, x, parts, first_threads(algo, x.len()), |p| {
        // SAFETY: the first pass reads x[i] for i < n = x.len() and block b writes only
        // partial[b] (b < parts = partial.len()); the final pass reads parts partials and writes
        // out[0] (out.len() == 1 checked); row kernels guard r < rows, c < cols with x checked as
        // [rows, cols] and out as [rows].
        Ok(unsafe { fin.launch(s, &LaunchConfig::new(1, BLOCK), p, out, parts) }?)
    })
}

/// `out[0] = (Σ x) / n` in [`Element::SumAcc`] (f32 for f16/bf16), rounded once; NaN for an
/// empty `x`. Not for i32 (use [`sum`]).
pub fn mean<T: Element>(
    k: &Kernels,
    s: &Stream,
    algo: ReduceAlgo,
    x: &DeviceSlice<T>,
    out: &mut DeviceSlice<T::SumAcc>,
) -> Result<()> {
    let fin = dispatch::mean_finalize::<T>(k)?;
    let first = first_pass::<T>(k, algo)?;
    check_out("mean", out)?;
    let parts = reduce_partials(algo, x.len(), sms(s) as u32);
    let count = x.len() as u64;
    two_pass(s, first, x, parts, first_threads(algo, x.len()), |p| {
        // SAFETY: the first pass reads x[i] for i < n = x.len() and block b writes only
        // partial[b] (b < parts = partial.len()); the final pass reads parts partials and writes
        // out[0] (out.len() == 1 checked); row kernels guard r < rows, c < cols with x checked as
        // [rows, cols] and out as [rows].
        Ok(unsafe { fin.launch(s, &LaunchConfig::new(1, BLOCK), p, out, parts, count) }?)
    })
}
