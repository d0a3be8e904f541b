//! The process-wide watchdog: one thread that looks at every communicator with a timeout every
//! [`WATCHDOG_PERIOD`], and aborts those NCCL reports broken or whose oldest operation has not
//! finished on the GPU within the timeout (see [`crate::Communicator`]). What a look does is the
//! communicator's own [`Watched::watchdog_check`]; this file only keeps the list and the thread.

use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

/// How often the watchdog looks.
pub const WATCHDOG_PERIOD: Duration = Duration::from_millis(50);

/// What the watchdog looks at (a communicator's shared state).
pub(crate) trait Watched: Send + Sync {
    /// One look, every [`WATCHDOG_PERIOD`], on the watchdog's thread.
    fn watchdog_check(&self);
}

static WATCHED: Mutex<Vec<Weak<dyn Watched>>> = Mutex::new(Vec::new());
static START: Once = Once::new();

/// Adds a communicator to the watch (held weakly: the watch never keeps one alive).
pub(crate) fn register<W: Watched + 'static>(comm: &Arc<W>) {
    {
        let watched: Weak<dyn Watched> = Arc::<W>::downgrade(comm);
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|c| c.strong_count() > 0);
        w.push(watched);
    }
    START.call_once(|| {
        if let Err(e) = std::thread::Builder::new()
            .name("cuda-stack-nccl-watchdog".into())
            .spawn(run)
        {
            log::error!(
                "cuda-stack-nccl: cannot start the watchdog thread ({e}): only waits on the host are \
                 bounded by the timeout, a collective hung on the GPU is not"
            );
        }
    });
}

fn run() {
    loop {
        std::thread::sleep(WATCHDOG_PERIOD);
        let live: Vec<Arc<dyn Watched>> = {
            let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            w.retain(|c| c.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        for c in &live {
            c.watchdog_check();
        }
    }
}
