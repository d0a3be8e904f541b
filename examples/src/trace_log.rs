//! Recording the driver calls a piece of code makes, through `cuda_stack_sys::trace` (the hook in the
//! checked-call stratum that every driver and NVRTC call passes through).

use cuda_stack_sys::trace::{self, CallEvent};
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

/// The name of a traced call's status (`CUDA_ERROR_INVALID_VALUE`, …), or its number.
pub fn status_name(e: &CallEvent) -> String {
    let name = match e.library {
        "nvrtc" => cuda_stack_sys::nvrtcResult(e.status).name(),
        _ => cuda_stack_sys::CUresult(e.status).name(),
    };
    name.map(str::to_string)
        .unwrap_or_else(|| format!("status {}", e.status))
}

/// Totals per entry point, in order of first call: name, calls, total time, and the calls that
/// returned an error (with the error's name).
pub fn totals(calls: &[CallEvent]) -> Vec<(&'static str, usize, Duration, Vec<String>)> {
    let mut out: Vec<(&'static str, usize, Duration, Vec<String>)> = Vec::new();
    for c in calls {
        let i = match out.iter().position(|t| t.0 == c.call) {
            Some(i) => i,
            None => {
                out.push((c.call, 0, Duration::ZERO, Vec::new()));
                out.len() - 1
            }
        };
        out[i].1 += 1;
        out[i].2 += c.elapsed;
        if c.status != 0 {
            out[i].3.push(status_name(c));
        }
    }
    out
}

/// Prints the calls as an indented list: in order (repeats collapsed) when there are few, or
/// totals per entry point when there are many (a module load makes hundreds).
pub fn print_calls(indent: &str, calls: &[CallEvent]) {
    if calls.len() > 24 {
        println!(
            "{indent}({} calls; totals per entry point, in order of first use)",
            calls.len()
        );
        for (name, n, t, errors) in totals(calls) {
            let errs = match errors.first() {
                Some(e) => format!("  ({} returned {e})", errors.len()),
                None => String::new(),
            };
            println!(
                "{indent}{name:<28} ×{n:<4} {:>9.1} µs{errs}",
                t.as_secs_f64() * 1e6
            );
        }
        return;
    }
    for (name, n, t, status) in summarize(calls) {
        let times = if n > 1 {
            format!("×{n}")
        } else {
            String::new()
        };
        let st = if status == 0 {
            String::new()
        } else {
            format!(
                "  -> {}",
                cuda_stack_sys::CUresult(status).name().unwrap_or("error")
            )
        };
        println!(
            "{indent}{name:<28} {times:<5} {:>9.1} µs{st}",
            t.as_secs_f64() * 1e6
        );
    }
}
