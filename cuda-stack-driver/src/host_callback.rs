//! Host functions queued on streams (`cuLaunchHostFunc`), and what keeps them sound.
//!
//! The driver forbids CUDA calls from a host function: one may deadlock or fail, and the driver
//! makes no promise about what it does to the queue that runs the callback. A safe closure cannot
//! be trusted to know that, and it can call CUDA without saying so, just by dropping a captured
//! buffer or stream. So while a callback runs, the thread is marked:
//! - every call this crate would make returns [`Error::InHostCallback`] instead (the check is in
//!   the crate's one way to reach the driver);
//! - objects released on that thread (`Drop` of buffers, streams, events, modules, graphs, pinned
//!   memory, contexts) hand their release to a reaper thread, which does it once the callback has
//!   returned.
//!
//! The trampoline never unwinds into the driver: the callback's panic is caught, and its payload
//! is forgotten rather than dropped (a payload's own `Drop` may panic, and unwinding out of an
//! `extern "C"` function is undefined behaviour before Rust 1.81).

use crate::Error;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running a host function queued through this crate.
#[inline]
pub(crate) fn active() -> bool {
    IN_CALLBACK.with(Cell::get)
}

/// The error every CUDA call made from a host function gets.
pub(crate) fn refused() -> Error {
    Error::InHostCallback
}

type Job = Box<dyn FnOnce() + Send>;

fn reaper() -> &'static Mutex<Sender<Job>> {
    static REAPER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    REAPER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("cuda-stack-driver-reaper".into())
            .spawn(move || {
                for job in rx {
                    // A release job only reports errors; a panic must not end the reaper.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        if let Err(e) = spawned {
            log::error!("cuda-stack-driver: could not start the reaper thread ({e}); releases made inside host callbacks will leak");
        }
        Mutex::new(tx)
    })
}

/// Runs `release` later on the reaper thread (used by `Drop` impls inside a host function).
/// If the reaper cannot take it, the resource leaks, which is safe.
pub(crate) fn defer(release: impl FnOnce() + Send + 'static) {
    let tx = reaper().lock().unwrap_or_else(|p| p.into_inner());
    if tx.send(Box::new(release)).is_err() {
        log::warn!(
            "cuda-stack-driver: the reaper thread is gone; a resource released in a host callback leaks"
        );
    }
}

/// Clears the mark even if the callback unwinds.
struct Mark;

impl Mark {
    fn set() -> Mark {
        IN_CALLBACK.with(|c| c.set(true));
        Mark
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        IN_CALLBACK.with(|c| c.set(false));
    }
}

/// The `CUhostFn` for a boxed `F`: takes the box back, runs it marked, never unwinds.
pub(crate) extern "C" fn trampoline<F: FnOnce() + Send + 'static>(data: *mut c_void) {
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the `Box<F>` that `Stream::launch_host_func` leaked for this call;
        // the driver calls the function exactly once, and nothing else owns the box.
        let f = unsafe { Box::from_raw(data.cast::<F>()) };
        let _mark = Mark::set();
        f();
    });
    if let Err(payload) = outcome {
        // Dropping the payload could run arbitrary `Drop` code that panics again: forget it.
        std::mem::forget(payload);
        let _ = std::panic::catch_unwind(|| {
            log::error!("cuda-stack-driver: a stream host callback panicked; the panic was caught");
        });
    }
}

/// Releases a driver resource from a `Drop`: now, or (inside a host callback) later on the
/// reaper thread. A failure is reported through `ctx`, and the resource is then leaked: a
/// release call is never repeated, since the driver may have done it and returned an error left
/// by earlier asynchronous work (its documented behaviour), and a second release would be a
/// double free.
pub(crate) fn release_on_drop(
    ctx: crate::Context,
    what: &'static str,
    release: impl FnOnce() -> crate::Result<()> + Send + 'static,
) {
    let run = move || {
        if let Err(e) = release() {
            ctx.report_drop_error(what, e);
        }
    };
    if active() {
        defer(run);
    } else {
        run();
    }
}
