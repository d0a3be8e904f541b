//! See the thread hierarchy: which block, thread, warp, lane and SM each thread is.

use crate::launch::check_len;
use crate::{Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Words per thread `thread_hierarchy` writes: `[blockIdx.x, blockIdx.y, threadIdx.x,
/// threadIdx.y, warp, lane, smid, g]`.
pub const THREAD_RECORD_WORDS: usize = 8;

/// Launches `thread_hierarchy` with a 2-D `grid` and `block`; thread `g` (its linear id, see the
/// crate README) writes its record to `out[8g..8g + 8]`. `out` must have exactly
/// `8 · grid.0 · grid.1 · block.0 · block.1` elements; nothing is launched when that is 0.
pub fn thread_hierarchy(
    k: &Kernels,
    s: &Stream,
    out: &mut DeviceSlice<u32>,
    grid: (u32, u32),
    block: (u32, u32),
) -> Result<()> {
    const OP: &str = "thread_hierarchy";
    let threads = [grid.0, grid.1, block.0, block.1]
        .iter()
        .try_fold(THREAD_RECORD_WORDS as u64, |acc, &d| {
            acc.checked_mul(u64::from(d))
        });
    let need = threads
        .and_then(|t| usize::try_from(t).ok())
        .ok_or_else(|| Error::TooLarge {
            op: OP,
            what: "8 × threads",
            value: 8
                * u128::from(grid.0)
                * u128::from(grid.1)
                * u128::from(block.0)
                * u128::from(block.1),
            max: usize::MAX as u128,
        })?;
    check_len(OP, "out", out.len(), need)?;
    if need == 0 {
        return Ok(());
    }
    // SAFETY: thread g writes out[8g..8g + 8] only, and out has exactly 8 words per thread
    // of this grid and block (checked above).
    unsafe {
        k.thread_hierarchy()?
            .launch(s, &LaunchConfig::new(grid, block), out)
    }?;
    Ok(())
}
