//! Recording the driver calls a piece of code makes, through `cuda_sys::trace` (the hook in the
//! checked-call stratum that every driver and NVRTC call passes through).

use cuda_sys::trace::{self, CallEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// While alive, records every driver/NVRTC call made by any thread.
pub struct CallRecorder {
    calls: Arc<Mutex<Vec<CallEvent>>>,
}

impl CallRecorder {
    /// Starts recording (replacing any other hook until dropped).
    pub fn start() -> CallRecorder {
        let calls: Arc<Mutex<Vec<CallEvent>>> = Arc::default();
        let sink = calls.clone();
        trace::set_hook(Some(Arc::new(move |e: &CallEvent| {
            if let Ok(mut v) = sink.lock() {
                v.push(*e);
            }
        })));
        CallRecorder { calls }
    }

    /// The calls recorded so far, clearing the record.
    pub fn take(&self) -> Vec<CallEvent> {
        self.calls
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

impl Drop for CallRecorder {
    fn drop(&mut self) {
        trace::set_hook(None);
    }
}

/// Collapses consecutive repeats of the same call (`cuCtxGetCurrent ×3`), keeping order.
pub fn summarize(calls: &[CallEvent]) -> Vec<(&'static str, usize, Duration, u32)> {
    let mut out: Vec<(&'static str, usize, Duration, u32)> = Vec::new();
    for c in calls {
        match out.last_mut() {
            Some(last) if last.0 == c.call && last.3 == c.status => {
                last.1 += 1;
                last.2 += c.elapsed;
            }
            _ => out.push((c.call, 1, c.elapsed, c.status)),
        }
    }
    out
}

/// Prints `summarize(calls)` as an indented list: name, repeat count, time, status if not 0.
pub fn print_calls(indent: &str, calls: &[CallEvent]) {
    for (name, n, t, status) in summarize(calls) {
        let times = if n > 1 {
            format!(" ×{n}")
        } else {
            String::new()
        };
        let st = if status == 0 {
            String::new()
        } else {
            format!("  -> status {status}")
        };
        println!(
            "{indent}{name}{times:<6} {:>9.1} µs{st}",
            t.as_secs_f64() * 1e6
        );
    }
}
