//! GPU time measured with CUDA events: one sample, or the median of several.

use crate::bench::median;
use cuda_stack_driver::{Context, Event, Stream};
use std::error::Error;
use std::time::Duration;

/// A pair of timing events, reused for every measurement on any stream of its context.
#[derive(Debug)]
pub struct GpuTimer {
    start: Event,
    end: Event,
}

impl GpuTimer {
    /// Two timing events in `ctx`.
    pub fn new(ctx: &Context) -> cuda_stack_driver::Result<GpuTimer> {
        Ok(GpuTimer {
            start: Event::new(ctx, true)?,
            end: Event::new(ctx, true)?,
        })
    }

    /// GPU time of the work `f` queues on `s`: records the start event, calls `f`, records the
    /// end event and waits for it.
    pub fn time<E: Into<Box<dyn Error>>>(
        &self,
        s: &Stream,
        f: impl FnOnce(&Stream) -> Result<(), E>,
    ) -> Result<Duration, Box<dyn Error>> {
        self.start.record(s)?;
        f(s).map_err(Into::into)?;
        self.end.record(s)?;
        self.end.synchronize()?;
        Ok(self.start.elapsed(&self.end)?)
    }

    /// Median GPU seconds per call of `f`: `reps` samples of `inner` back-to-back calls each
    /// (no warm-up: see [`gpu_time`]).
    pub fn median_per_call<E: Into<Box<dyn Error>>>(
        &self,
        s: &Stream,
        reps: usize,
        inner: usize,
        mut f: impl FnMut(&Stream) -> Result<(), E>,
    ) -> Result<f64, Box<dyn Error>> {
        let mut v = Vec::with_capacity(reps);
        for _ in 0..reps {
            let d = self.time(s, |s| -> Result<(), Box<dyn Error>> {
                for _ in 0..inner {
                    f(s).map_err(Into::into)?;
                }
                Ok(())
            })?;
            v.push(d.as_secs_f64() / inner as f64);
        }
        Ok(median(&v))
    }
}

/// Median GPU seconds per call of `f`: one untimed warm-up sample of `inner` calls, then `reps`
/// samples of `inner` back-to-back calls each, timed with CUDA events on `s`.
pub fn gpu_time<E: Into<Box<dyn Error>>>(
    ctx: &Context,
    s: &Stream,
    reps: usize,
    inner: usize,
    mut f: impl FnMut(&Stream) -> Result<(), E>,
) -> Result<f64, Box<dyn Error>> {
    let timer = GpuTimer::new(ctx)?;
    for _ in 0..inner {
        f(s).map_err(Into::into)?;
    }
    timer.median_per_call(s, reps, inner, f)
}
