//! GPU timing (events around R repetitions after a warm-up, median of several trials) and
//! rotating buffer sets, so that repetitions of a small kernel do not find their data in L2.

use cuda_examples::bench::median;
use cuda_stack_driver::{DeviceBuffer, DeviceView, DeviceViewMut, Stream};
use cuda_stack_kernels::{ops, Kernels};
use std::error::Error;

/// What every benchmark step returns.
pub type BenchResult<T> = Result<T, Box<dyn Error>>;

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Timed trials per kernel (the median is reported).
    pub trials: usize,
    /// GPU seconds one trial should last; R is chosen from a one-call estimate.
    pub target_secs: f64,
    /// The most repetitions in one trial.
    pub max_reps: usize,
    /// GPU seconds of untimed calls before the trials of [`measure_settled`].
    pub settle_secs: f64,
}

impl Timing {
    /// Quick (smoke test) or full settings.
    pub fn new(quick: bool) -> Timing {
        if quick {
            Timing {
                trials: 3,
                target_secs: 0.002,
                max_reps: 50,
                settle_secs: 0.0,
            }
        } else {
            Timing {
                trials: 7,
                target_secs: 0.030,
                max_reps: 2000,
                settle_secs: 2.0,
            }
        }
    }
}

/// One kernel's measurement.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Median GPU seconds per call.
    pub secs: f64,
    /// Calls per trial.
    pub reps: usize,
    /// Trials.
    pub trials: usize,
}

/// Times `f(stream, i)`: one untimed warm-up call (lazy module loading, first touch), one timed
/// call to choose R (so a trial lasts about `target_secs`), then `trials` trials of R calls
/// between two events; returns the median seconds per call. `i` counts calls from 0 and never
/// repeats, so `f` can rotate through buffer sets with `i % sets`. A kernel whose trial would
/// take more than 4× the target (naive matmul at 4096) gets R = 1 and at most 3 trials.
pub fn measure(
    s: &Stream,
    t: &Timing,
    f: impl FnMut(&Stream, usize) -> BenchResult<()>,
) -> BenchResult<Measured> {
    measure_settled(s, t, 0.0, f)
}

/// [`measure`] after `settle_secs` of untimed back-to-back calls of `f`, so that the trials run at
/// the clock the GPU holds for `f` itself. Why: an H100 or H200 at its 700 W limit sets its clock
/// from its recent power draw, so a GEMM timed right after a hungrier one runs at a clock lowered
/// for the other. On one H100 the same mma.sync kernel measured 0.545x cuBLAS at 4096³ timed
/// right after it, 0.518x with their trials taken in turn, and 0.608x and 0.655x with each
/// settled first (kernels/TUNING.md, "mma.sync, fifth round").
pub fn measure_settled(
    s: &Stream,
    t: &Timing,
    settle_secs: f64,
    mut f: impl FnMut(&Stream, usize) -> BenchResult<()>,
) -> BenchResult<Measured> {
    f(s, 0)?;
    s.synchronize()?;
    let one = time_calls(s, 1, 1, &mut f)?;
    let reps = ((t.target_secs / one.max(1e-7)).floor() as usize).clamp(1, t.max_reps.max(1));
    let trials = if one > 4.0 * t.target_secs {
        t.trials.min(3)
    } else {
        t.trials
    };
    let mut next = 2;
    if settle_secs > 0.0 {
        let calls = ((settle_secs / one.max(1e-7)).ceil() as usize).max(1);
        time_calls(s, next, calls, &mut f)?;
        next += calls;
    }
    let mut per_call = Vec::with_capacity(trials);
    for _ in 0..trials {
        per_call.push(time_calls(s, next, reps, &mut f)? / reps as f64);
        next += reps;
    }
    Ok(Measured {
        secs: median(&per_call),
        reps,
        trials,
    })
}

/// GPU seconds for calls `first..first + reps`, between two events on `s`.
fn time_calls(
    s: &Stream,
    first: usize,
    reps: usize,
    f: &mut impl FnMut(&Stream, usize) -> BenchResult<()>,
) -> BenchResult<f64> {
    let mut failed = None;
    let ((), elapsed) = s.time(|s| {
        for i in first..first + reps {
            if let Err(e) = f(s, i) {
                failed = Some(e);
                break;
            }
        }
        Ok(())
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(elapsed.as_secs_f64()),
    }
}

/// How many copies of a working set of `bytes` to rotate through so that consecutive calls miss
/// in an L2 of `l2` bytes: 1 when the set is at least twice the L2, else enough copies to span
/// four L2s (at most 64).
pub fn sets_for(bytes: usize, l2: usize) -> usize {
    if bytes >= 2 * l2 {
        1
    } else {
        (4 * l2).div_ceil(bytes.max(1)).clamp(2, 64)
    }
}

/// `sets` copies of an `n`-element f32 array in one allocation; call `i` uses copy `i % sets`.
pub struct Rotating {
    buf: DeviceBuffer<f32>,
    n: usize,
    sets: usize,
}

impl Rotating {
    /// Copies filled with uniform random floats in [0, 1) (Philox stream `seed`).
    pub fn uniform(
        k: &Kernels,
        s: &Stream,
        n: usize,
        sets: usize,
        seed: u64,
    ) -> BenchResult<Rotating> {
        let mut r = Rotating::zeros(s, n, sets)?;
        ops::fill_uniform(k, s, &mut r.buf, seed, 0)?;
        Ok(r)
    }

    /// Zeroed copies (outputs).
    pub fn zeros(s: &Stream, n: usize, sets: usize) -> BenchResult<Rotating> {
        let sets = sets.max(1);
        let total = n
            .checked_mul(sets)
            .ok_or("rotating buffer size overflows")?;
        Ok(Rotating {
            buf: s.alloc_zeros::<f32>(total)?,
            n,
            sets,
        })
    }

    /// The copy call `i` reads.
    pub fn get(&self, i: usize) -> cuda_stack_driver::Result<DeviceView<'_, f32>> {
        let j = i % self.sets;
        self.buf.slice(j * self.n..(j + 1) * self.n)
    }

    /// The copy call `i` writes.
    pub fn get_mut(&mut self, i: usize) -> cuda_stack_driver::Result<DeviceViewMut<'_, f32>> {
        let j = i % self.sets;
        self.buf.slice_mut(j * self.n..(j + 1) * self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::sets_for;

    #[test]
    fn rotation_spans_four_l2s_for_small_sets_only() {
        let l2 = 60 << 20;
        assert_eq!(sets_for(12 << 20, l2), 20);
        assert_eq!(sets_for(1, l2), 64);
        assert_eq!(sets_for(100 << 20, l2), 3);
        assert_eq!(sets_for(120 << 20, l2), 1);
        assert_eq!(sets_for(3 << 30, l2), 1);
    }
}
